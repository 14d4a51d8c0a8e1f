/* engine_mpi.c - the distributed engine: the engine table over an inner
 * engine (cpu or cuda) that holds this rank's rows of every vector. Vector
 * operations are the inner engine's; dot products are local dots into the
 * slot and a sum of the slot over the ranks (on the device for the GPU, so
 * scalars never visit the host); y = A x is the diagonal block's product
 * overlapped with the halo exchange, then the off-block rows. Sums over the
 * ranks are made when a slot is read, several together. Iterations are
 * captured only over a transport whose exchanges are kernels (ipc).
 * A failure inside an operation ends every rank (gs_dist_abort): the
 * others would otherwise wait in the next collective for ever. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "timer.h"
#include "dist_impl.h"

#define IN(e) (gs_dist_of(e)->inner)
#define IO(e) (gs_dist_of(e)->inner->ops)

/* An operation failed on this rank: say which and end every rank. */
static int dist_fail(gs_engine *e, int status)
{
    dist_engine *d = gs_dist_of(e);
    if (status == GS_OK) return GS_OK;
    if (!e->err.msg[0]) e->err = d->inner->err;
    fprintf(stderr, "gpusolve: rank %d: %s\n", d->rank,
            e->err.msg[0] ? e->err.msg : gs_status_name((gs_status)status));
    gs_dist_abort(gs_status_exit_code((gs_status)status));
    return status;
}

#define CHECK(call) return dist_fail(e, (call))
#define TRY(call)                                                                                  \
    do {                                                                                           \
        int st_ = (call);                                                                          \
        if (st_ != GS_OK) return dist_fail(e, st_);                                                \
    } while (0)

/* ---- sums over the ranks, made when read ----
 * A dot leaves this rank's part in its slot and the slot pending; the sum
 * over the ranks is made when an operation reads a pending slot (as a
 * coefficient, by scalar_read, small_run or maxpy), all pending slots in one
 * collective. So CG's r.r and r.z travel together, and the three dots of
 * cg1 (cg1.c) in one. */

static int pending_has(const dist_engine *d, int slot)
{
    for (int i = 0; i < d->n_pending; i++)
        if (slot >= d->pending0[i] && slot < d->pending0[i] + d->pending_n[i]) return 1;
    return 0;
}

static int flush(gs_engine *e)
{
    dist_engine *d = gs_dist_of(e);
    const int runs = d->n_pending;
    if (runs == 0) return GS_OK;
    d->n_pending = 0;
    d->reductions++;
    CHECK(d->tr->allreduce(d, d->pending0, d->pending_n, runs));
}

static int coef_pending(const dist_engine *d, gs_coef c)
{
    return pending_has(d, c.num0) || pending_has(d, c.num1) || pending_has(d, c.den0) ||
           pending_has(d, c.den1);
}

/* The sums an operation with coefficients a, b (and c) needs first. */
static int need(gs_engine *e, gs_coef a, gs_coef b, gs_coef c)
{
    const dist_engine *d = gs_dist_of(e);
    if (d->n_pending == 0) return GS_OK;
    if (coef_pending(d, a) || coef_pending(d, b) || coef_pending(d, c)) return flush(e);
    return GS_OK;
}

static int reduce(gs_engine *e, int slot0, int count)
{
    if (slot0 == GS_SLOT_NONE || count <= 0) return GS_OK;
    dist_engine *d = gs_dist_of(e);
    for (int s = slot0; s < slot0 + count; s++) {
        if (pending_has(d, s)) continue; /* a newer local part of a slot still pending */
        const int last = d->n_pending - 1;
        if (last >= 0 && d->pending0[last] + d->pending_n[last] == s) {
            d->pending_n[last]++;
            continue;
        }
        if (d->n_pending == GS_DIST_PENDING) TRY(flush(e)); /* s is not among them */
        d->pending0[d->n_pending] = s;
        d->pending_n[d->n_pending++] = 1;
    }
    return d->merge ? GS_OK : flush(e);
}

int gs_dist_reduce_later(gs_engine *e, int slot0, int count) { return reduce(e, slot0, count); }

#define NEED(a, b, c) TRY(need(e, a, b, c))
#define NO_COEF gs_coef_const(0.0)

static int d_vec_create(gs_engine *e, int64_t n, gs_vec **out) { CHECK(IO(e)->vec_create(IN(e), n, out)); }
static void d_vec_destroy(gs_engine *e, gs_vec *v) { IO(e)->vec_destroy(IN(e), v); }
static int d_vec_upload(gs_engine *e, gs_vec *dst, const double *src) { CHECK(IO(e)->vec_upload(IN(e), dst, src)); }
static int d_vec_download(gs_engine *e, const gs_vec *src, double *dst) { CHECK(IO(e)->vec_download(IN(e), src, dst)); }
static int d_set(gs_engine *e, gs_vec *y, double v) { CHECK(IO(e)->set(IN(e), y, v)); }
static int d_copy(gs_engine *e, const gs_vec *x, gs_vec *y) { CHECK(IO(e)->copy(IN(e), x, y)); }

static int d_axpby(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y)
{
    NEED(a, b, NO_COEF);
    CHECK(IO(e)->axpby(IN(e), a, x, b, y));
}

static int d_axpbypcz(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, const gs_vec *y,
                      gs_coef c, gs_vec *z)
{
    NEED(a, b, c);
    CHECK(IO(e)->axpbypcz(IN(e), a, x, b, y, c, z));
}

static int d_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot)
{
    TRY(IO(e)->dot(IN(e), x, y, slot));
    return reduce(e, slot, 1);
}

static int d_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                       const gs_vec *w, int slot)
{
    NEED(a, b, NO_COEF);
    TRY(IO(e)->axpby_dot(IN(e), a, x, b, y, w, slot));
    return reduce(e, slot, 1);
}

static int d_axpy2_dot(gs_engine *e, gs_coef a, const gs_vec *x1, gs_vec *y1, gs_coef b,
                       const gs_vec *x2, gs_vec *y2, int slot)
{
    NEED(a, b, NO_COEF);
    TRY(IO(e)->axpy2_dot(IN(e), a, x1, y1, b, x2, y2, slot));
    return reduce(e, slot, 1);
}

static int d_pointwise_mult_dot(gs_engine *e, const gs_vec *dv, const gs_vec *x, gs_vec *y,
                                int slot)
{
    TRY(IO(e)->pointwise_mult_dot(IN(e), dv, x, y, slot));
    return reduce(e, slot, 1);
}

static int d_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0)
{
    TRY(IO(e)->mdot(IN(e), V, k, w, slot0));
    return reduce(e, slot0, k);
}

static int d_maxpy(gs_engine *e, double c, const gs_vec *const *V, int k, int slot0, gs_vec *w)
{
    for (int i = 0; i < k; i++)
        if (pending_has(gs_dist_of(e), slot0 + i)) TRY(flush(e));
    CHECK(IO(e)->maxpy(IN(e), c, V, k, slot0, w));
}

/* y = A x: the halo travels while the diagonal block multiplies. With a
 * slot, S = y.w is the diagonal part's dot (fused in the inner product)
 * plus the off-block rows' share, then summed over the ranks; w == y is
 * not linear in the parts, so it takes a separate dot. */
static int d_spmv_dot(gs_engine *e, const gs_mat *Am, const gs_vec *x, gs_vec *y,
                      const gs_vec *w, int slot)
{
    dist_engine *d = gs_dist_of(e);
    dist_mat *M = (dist_mat *)Am;
    const gs_vec *wd = w ? w : x;
    const int fused = slot != GS_SLOT_NONE && wd != y;
    d->spmv_count++;
    TRY(d->tr->halo_start(d, M, x));
    TRY(IO(e)->spmv_dot(IN(e), M->diag, x, y, fused ? wd : NULL, fused ? slot : GS_SLOT_NONE));
    TRY(d->tr->halo_finish(d, M, gs_coef_const(1.0), y, wd, fused ? slot : GS_SLOT_NONE));
    if (slot == GS_SLOT_NONE) return GS_OK;
    if (!fused) TRY(IO(e)->dot(IN(e), y, wd, slot));
    return reduce(e, slot, 1);
}

static int d_spmv_axpby(gs_engine *e, gs_coef a, const gs_mat *Am, const gs_vec *x, gs_coef b,
                        gs_vec *y)
{
    dist_engine *d = gs_dist_of(e);
    dist_mat *M = (dist_mat *)Am;
    NEED(a, b, NO_COEF);
    d->spmv_count++;
    TRY(d->tr->halo_start(d, M, x));
    TRY(IO(e)->spmv_axpby(IN(e), a, M->diag, x, b, y));
    CHECK(d->tr->halo_finish(d, M, a, y, NULL, GS_SLOT_NONE));
}

/* A slot written while its sum is pending: the sum first (the runs stay whole). */
static int d_scalar_set(gs_engine *e, int slot, gs_coef v)
{
    if (pending_has(gs_dist_of(e), slot)) TRY(flush(e));
    NEED(v, NO_COEF, NO_COEF);
    CHECK(IO(e)->scalar_set(IN(e), slot, v));
}

static int d_scalar_write(gs_engine *e, int s0, int n, const double *src)
{
    TRY(flush(e));
    CHECK(IO(e)->scalar_write(IN(e), s0, n, src));
}

/* every rank holds the same slots and runs the same small operation on them
 * (which may read any of them: the sums first) */
static int d_small_run(gs_engine *e, const struct gs_small *op)
{
    TRY(flush(e));
    CHECK(IO(e)->small_run(IN(e), op));
}

static int d_scalar_read(gs_engine *e, int s0, int n, double *dst)
{
    dist_engine *d = gs_dist_of(e);
    TRY(flush(e));
    TRY(IO(e)->scalar_read(IN(e), s0, n, dst));
    CHECK(d->tr->collect(d));
}

static int d_sync(gs_engine *e)
{
    dist_engine *d = gs_dist_of(e);
    TRY(flush(e));
    TRY(IO(e)->sync(IN(e)));
    e->device_bytes_now = d->inner->device_bytes_now;
    e->device_bytes_peak = d->inner->device_bytes_peak;
    CHECK(d->tr->collect(d));
}

/* ---- captured iterations (a transport whose exchanges are kernels) ----
 * The sums pending when a capture begins are made first, and those pending
 * at its end inside it, so a replayed sequence leaves none behind; the
 * counters the host keeps (products, halo bytes, sums) do not move while a
 * sequence is recorded, and move by its share at each replay. */
typedef struct dist_seq {
    void *inner;
    long spmv, reductions;
    double halo_bytes;
} dist_seq;

static int d_capture_begin(gs_engine *e)
{
    dist_engine *d = gs_dist_of(e);
    TRY(flush(e));
    d->cap_spmv = d->spmv_count, d->cap_reductions = d->reductions;
    d->cap_halo_bytes = d->halo_bytes;
    CHECK(IO(e)->capture_begin(IN(e)));
}

static int d_capture_end(gs_engine *e, void **seq)
{
    dist_engine *d = gs_dist_of(e);
    dist_seq *s = calloc(1, sizeof *s);
    int status = flush(e); /* recorded: the sequence ends with its sums made */
    const int ended = IO(e)->capture_end(IN(e), s ? &s->inner : seq);
    if (status == GS_OK) status = ended;
    if (status == GS_OK && !s) status = gs_error_set(&e->err, GS_ERR_NOMEM, "out of host memory");
    if (s) {
        s->spmv = d->spmv_count - d->cap_spmv, s->reductions = d->reductions - d->cap_reductions;
        s->halo_bytes = d->halo_bytes - d->cap_halo_bytes;
    }
    d->spmv_count = d->cap_spmv, d->reductions = d->cap_reductions;
    d->halo_bytes = d->cap_halo_bytes;
    if (status != GS_OK) {
        if (s && s->inner) IO(e)->seq_destroy(IN(e), s->inner);
        free(s);
        *seq = NULL;
        return dist_fail(e, status);
    }
    *seq = s;
    return GS_OK;
}

static int d_replay(gs_engine *e, void *seq)
{
    dist_engine *d = gs_dist_of(e);
    const dist_seq *s = seq;
    TRY(flush(e)); /* the sequence was recorded with none pending */
    d->spmv_count += s->spmv, d->reductions += s->reductions, d->halo_bytes += s->halo_bytes;
    CHECK(IO(e)->replay(IN(e), s->inner));
}

static void d_seq_destroy(gs_engine *e, void *seq)
{
    dist_seq *s = seq;
    if (!s) return;
    IO(e)->seq_destroy(IN(e), s->inner);
    free(s);
}

static int d_host_pin(gs_engine *e, void *p, size_t bytes)
{
    return IO(e)->host_pin ? IO(e)->host_pin(IN(e), p, bytes) : 0;
}

static void d_host_unpin(gs_engine *e, void *p)
{
    if (IO(e)->host_unpin) IO(e)->host_unpin(IN(e), p);
}

/* ---- the matrix ---- */

static void mat_free(gs_engine *e, dist_mat *M)
{
    dist_engine *d = gs_dist_of(e);
    if (!M) return;
    if (M->transport) d->tr->mat_free(d, M);
    IO(e)->mat_destroy(IN(e), M->diag);
    if (!M->split_borrowed) gs_dist_split_free(&M->split);
    free(M->recv_rank);
    free(M->recv_start);
    free(M->send_rank);
    free(M->send_start);
    free(M->send_idx);
    free(M);
}

static void d_mat_destroy(gs_engine *e, gs_mat *A) { mat_free(e, (dist_mat *)A); }

/* The neighbours: whom this rank receives halo entries from (the owners of
 * its halo columns, contiguous in the sorted halo), and, by an all-to-all
 * of the requests, whom it sends which of its rows to. */
static int mat_plan(dist_engine *d, dist_mat *M, const int64_t *begin, gs_error *err)
{
    const int P = d->size;
    int *need = calloc((size_t)P, sizeof *need), *give = calloc((size_t)P, sizeof *give);
    int *sdisp = calloc((size_t)P + 1, sizeof *sdisp), *rdisp = calloc((size_t)P + 1, sizeof *rdisp);
    int32_t *req = NULL;
    int status = GS_OK;
    if (!need || !give || !sdisp || !rdisp) {
        status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory for the halo plan");
        goto cleanup;
    }
    for (int32_t h = 0, q = 0; h < M->split.n_halo; h++) {
        while (M->split.halo[h] >= begin[q + 1]) q++;
        need[q]++;
    }
    MPI_Alltoall(need, 1, MPI_INT, give, 1, MPI_INT, d->comm);
    for (int q = 0; q < P; q++) sdisp[q + 1] = sdisp[q] + need[q], rdisp[q + 1] = rdisp[q] + give[q];
    M->recv_rank = malloc((size_t)P * sizeof(int));
    M->recv_start = calloc((size_t)P + 1, sizeof(int32_t));
    M->send_rank = malloc((size_t)P * sizeof(int));
    M->send_start = calloc((size_t)P + 1, sizeof(int32_t));
    M->send_idx = malloc((size_t)(rdisp[P] ? rdisp[P] : 1) * sizeof(int32_t));
    req = malloc((size_t)(rdisp[P] ? rdisp[P] : 1) * sizeof(int32_t));
    if (!M->recv_rank || !M->recv_start || !M->send_rank || !M->send_start || !M->send_idx || !req) {
        status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory for the halo plan");
        goto cleanup;
    }
    /* the halo is sorted by column, so owner q's entries are sdisp[q] .. */
    MPI_Alltoallv(M->split.halo, need, sdisp, MPI_INT32_T, req, give, rdisp, MPI_INT32_T, d->comm);
    for (int q = 0; q < P; q++) {
        if (need[q]) {
            M->recv_rank[M->n_recv] = q;
            M->recv_start[M->n_recv + 1] = sdisp[q + 1];
            M->recv_start[M->n_recv] = sdisp[q];
            M->n_recv++;
        }
        if (give[q]) {
            M->send_rank[M->n_send] = q;
            M->send_start[M->n_send] = rdisp[q];
            M->send_start[M->n_send + 1] = rdisp[q + 1];
            M->n_send++;
        }
    }
    for (int k = 0; k < rdisp[P]; k++) M->send_idx[k] = (int32_t)(req[k] - M->row0);
cleanup:
    free(need);
    free(give);
    free(sdisp);
    free(rdisp);
    free(req);
    return status;
}

/* A is this rank's rows with global columns, split here; or given, the
 * rows split already (borrowed); collective (every rank calls it with its
 * own rows, in rank order of the rows). */
static int mat_create_common(gs_engine *e, const gs_csr *A, const gs_dist_split *given,
                             gs_precision prec, int system, gs_mat **out)
{
    dist_engine *d = gs_dist_of(e);
    gs_error err = {0};
    int64_t *begin = NULL;
    dist_mat *M = calloc(1, sizeof *M);
    int status = M ? GS_OK : gs_error_set(&err, GS_ERR_NOMEM, "out of host memory (matrix)");
    int64_t n_local = given ? given->diag.n_rows : A->n_rows;
    begin = calloc((size_t)d->size + 1, sizeof *begin);
    if (!begin) status = gs_error_set(&err, GS_ERR_NOMEM, "out of host memory (matrix)");
    status = gs_dist_agree(status, &err);
    if (status != GS_OK) goto cleanup;
    MPI_Allgather(&n_local, 1, MPI_INT64_T, begin + 1, 1, MPI_INT64_T, d->comm);
    for (int q = 0; q < d->size; q++) begin[q + 1] += begin[q];
    M->row0 = begin[d->rank];
    M->n_global = begin[d->size];
    double t = gs_now();
    memset(d->mat_seconds, 0, sizeof d->mat_seconds);
    if (given) {
        M->split = *given;
        M->split_borrowed = 1;
        M->nnz_local = given->diag.nnz + given->off.nnz;
    } else {
        M->nnz_local = A->nnz;
        status = gs_dist_split_rows(A, M->row0, &M->split, &err);
    }
    d->mat_seconds[GS_DIST_MAT_SPLIT] = gs_now() - t;
    status = gs_dist_agree(status, &err);
    if (status != GS_OK) goto cleanup;
    t = gs_now();
    status = gs_dist_agree(mat_plan(d, M, begin, &err), &err);
    d->mat_seconds[GS_DIST_MAT_PLAN] = gs_now() - t;
    if (status != GS_OK) goto cleanup;
    t = gs_now();
    if (system && IO(e)->mat_create_system)
        status = IO(e)->mat_create_system(IN(e), &M->split.diag, &M->diag);
    else
        status = IO(e)->mat_create(IN(e), &M->split.diag, prec, &M->diag);
    if (status != GS_OK) err = d->inner->err;
    if (status == GS_OK) status = IO(e)->sync(IN(e)); /* the upload's own time */
    if (status != GS_OK && !err.msg[0]) err = d->inner->err;
    d->mat_seconds[GS_DIST_MAT_UPLOAD] = gs_now() - t;
    /* agreed before mat_init, which is collective for the ipc transport: a
     * rank whose upload failed must not leave the others in its exchanges */
    status = gs_dist_agree(status, &err);
    if (status != GS_OK) goto cleanup;
    t = gs_now();
    status = d->tr->mat_init(d, M);
    if (status != GS_OK && !err.msg[0]) err = d->inner->err;
    status = gs_dist_agree(status, &err);
    if (status == GS_OK && d->tr->mat_connect) {
        status = d->tr->mat_connect(d, M);
        if (status != GS_OK && !err.msg[0]) err = d->inner->err;
        status = gs_dist_agree(status, &err);
    }
    d->mat_seconds[GS_DIST_MAT_HALO] = gs_now() - t;
cleanup:
    free(begin);
    if (status != GS_OK) {
        if (!e->err.msg[0]) e->err = err;
        e->err.status = (gs_status)status;
        mat_free(e, M);
        return status;
    }
    if (!system && !M->split_borrowed) /* on the engine now; the system matrix's */
        gs_csr_free(&M->split.diag);    /* stays for the preconditioner's setup  */
    *out = (gs_mat *)M;
    return GS_OK;
}

static int d_mat_create(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out)
{
    return mat_create_common(e, A, NULL, prec, 0, out);
}

static int d_mat_create_system(gs_engine *e, const gs_csr *A, gs_mat **out)
{
    return mat_create_common(e, A, NULL, GS_FP64, 1, out);
}

int gs_engine_dist_mat_create_split(gs_engine *e, const gs_dist_split *s, int system,
                                    gs_mat **out)
{
    return mat_create_common(e, NULL, s, GS_FP64, system, out);
}

static int d_setup_done(gs_engine *e, gs_mat *A, int *laid_out)
{
    *laid_out = 0;
    if (!IO(e)->setup_done) return GS_OK;
    CHECK(IO(e)->setup_done(IN(e), ((dist_mat *)A)->diag, laid_out));
}

/* The transport's teardown failures are kept by the inner engine, whose
 * release reports them with its own. */
static int d_destroy(gs_engine *e, gs_error *err)
{
    int status = GS_OK;
    if (!e) return GS_OK;
    dist_engine *d = gs_dist_of(e);
    if (d) {
        if (d->tr && d->tr->destroy) d->tr->destroy(d);
        status = gs_engine_release(d->inner, err);
        free(d);
    }
    free(e);
    return status;
}

/* The table three times: named and kinded as the inner engine (the report
 * and the registry's per-engine setups read the kind), with capture only
 * over a transport whose exchanges can be captured (the inner engine's
 * graphs; CAPTURE 1) and NULL there otherwise. */
#define DIST_CAP(CAPTURE, f) ((CAPTURE) ? (f) : NULL)
#define DIST_OPS(NAME, KIND, CAPTURE)                                                              \
    {                                                                                              \
        .name = NAME, .kind = KIND, .destroy = d_destroy, .vec_create = d_vec_create,              \
        .vec_destroy = d_vec_destroy, .vec_upload = d_vec_upload,                                  \
        .vec_download = d_vec_download, .mat_create = d_mat_create,                                \
        .mat_destroy = d_mat_destroy, .set = d_set, .copy = d_copy, .axpby = d_axpby,              \
        .axpbypcz = d_axpbypcz, .dot = d_dot, .axpby_dot = d_axpby_dot,                            \
        .axpy2_dot = d_axpy2_dot, .pointwise_mult_dot = d_pointwise_mult_dot, .mdot = d_mdot,      \
        .maxpy = d_maxpy, .spmv_dot = d_spmv_dot, .spmv_axpby = d_spmv_axpby,                      \
        .trisolve = NULL, /* across ranks: none (preconditioners are block-local) */               \
        .scalar_set = d_scalar_set, .scalar_write = d_scalar_write,                                \
        .scalar_read = d_scalar_read, .small_run = d_small_run, .sync = d_sync,                    \
        .capture_begin = DIST_CAP(CAPTURE, d_capture_begin),                                       \
        .capture_end = DIST_CAP(CAPTURE, d_capture_end), .replay = DIST_CAP(CAPTURE, d_replay),    \
        .seq_destroy = DIST_CAP(CAPTURE, d_seq_destroy), .host_pin = d_host_pin,                   \
        .host_unpin = d_host_unpin, .mat_create_system = d_mat_create_system,                      \
        .setup_done = d_setup_done,                                                                \
    }

static const gs_engine_ops dist_ops_cpu = DIST_OPS("cpu", GS_ENGINE_CPU, 0);
static const gs_engine_ops dist_ops_cuda = DIST_OPS("cuda", GS_ENGINE_CUDA, 0);
static const gs_engine_ops dist_ops_cuda_graphs = DIST_OPS("cuda", GS_ENGINE_CUDA, 1);

int gs_engine_is_dist(const gs_engine *e)
{
    return e && (e->ops == &dist_ops_cpu || e->ops == &dist_ops_cuda ||
                 e->ops == &dist_ops_cuda_graphs);
}

gs_engine *gs_engine_dist_inner(gs_engine *e) { return gs_dist_of(e)->inner; }

const gs_mat *gs_engine_dist_local_mat(gs_engine *e, const gs_mat *A)
{
    return gs_engine_is_dist(e) && A ? ((const dist_mat *)A)->diag : A;
}

/* Distinct (host, device) pairs over the ranks: the device entries chosen
 * (indices or UUIDs) compared within each host, summed over the hosts. */
static int count_devices(dist_engine *d)
{
    MPI_Comm node;
    char mine[32];
    int distinct = 0, node_rank = 0, node_size = 1, total = 0;
    if (d->inner->ops->kind != GS_ENGINE_CUDA) return 0;
    snprintf(mine, sizeof mine, "%s", gs_dist_device_id());
    MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    char *all = calloc((size_t)node_size, sizeof mine);
    if (all) {
        MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, node);
        for (int i = 0; i < node_size; i++) {
            int seen = 0;
            for (int j = 0; j < i; j++) seen |= strcmp(all + 32 * j, all + 32 * i) == 0;
            distinct += !seen;
        }
    }
    free(all);
    int mine_count = node_rank == 0 ? distinct : 0;
    MPI_Allreduce(&mine_count, &total, 1, MPI_INT, MPI_SUM, d->comm);
    MPI_Comm_free(&node);
    return total;
}

int gs_engine_dist_create(gs_engine *inner, gs_engine **out, gs_error *err)
{
    int status = GS_OK;
    gs_engine *e = calloc(1, sizeof *e);
    dist_engine *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!e || !d) status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory (engine)");
    status = gs_dist_agree(status, err);
    if (status != GS_OK) {
        free(e), free(d);
        gs_engine_destroy(inner);
        return status;
    }
    d->inner = inner;
    d->comm = gs_dist_comm();
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    e->impl = d;
    e->ops = inner->ops->kind == GS_ENGINE_CUDA ? &dist_ops_cuda : &dist_ops_cpu;
    e->copy_bandwidth = gs_dist_max(-inner->copy_bandwidth) * -1.0; /* the slowest rank's */
    d->merge = 1;
    d->devices = count_devices(d);
    if (inner->ops->kind == GS_ENGINE_CUDA) {
        /* a GPU a rank: ipc where the ranks reach each other's GPUs
         * (cuda/dist/halo_ipc.cu), else NCCL; NCCL refuses two ranks on one
         * GPU: those go through the host. GS_DIST_TRANSPORT (main's
         * switches, src/engine/debug.h) forces one */
        const gs_debug *dbg = gs_engine_cuda_debug(inner);
        int kind = d->devices == d->size ? GS_DIST_TRANSPORT_IPC : GS_DIST_TRANSPORT_STAGED;
        if (dbg && dbg->dist_merge_off) d->merge = 0;
        if (dbg && dbg->dist_transport == GS_DEBUG_TRANSPORT_STAGED) kind = GS_DIST_TRANSPORT_STAGED;
        if (dbg && dbg->dist_transport == GS_DEBUG_TRANSPORT_NCCL) kind = GS_DIST_TRANSPORT_NCCL;
        if (dbg && dbg->dist_transport == GS_DEBUG_TRANSPORT_IPC) kind = GS_DIST_TRANSPORT_IPC;
#if GS_HAVE_CUDA
        status = gs_dist_transport_cuda(d, kind, err);
#else
        (void)kind;
        status = gs_error_set(err, GS_ERR_UNSUPPORTED, "no CUDA in this build");
#endif
    } else {
        status = gs_dist_transport_host(d, err);
    }
    status = gs_dist_agree(status, err);
    if (status != GS_OK) {
        (void)d_destroy(e, NULL); /* the creation's error is the one reported */
        return status;
    }
    if (d->tr->capturable && inner->ops->capture_begin) e->ops = &dist_ops_cuda_graphs;
    snprintf(e->device_name, sizeof e->device_name, "%.90s, %d ranks (%s)", inner->device_name,
             d->size, d->tr->name);
    *out = e;
    return GS_OK;
}

void gs_engine_dist_describe(gs_engine *e, gs_dist_summary *s)
{
    dist_engine *d = gs_dist_of(e);
    s->ranks = d->size;
    s->devices = d->devices;
    snprintf(s->transport, sizeof s->transport, "%s", d->tr->name);
    s->halo_overlap = d->halo_overlap;
    s->comm_setup_seconds = d->comm_setup_seconds;
}

void gs_engine_dist_mat_seconds(gs_engine *e, double out[GS_DIST_MAT_STAGES])
{
    for (int k = 0; k < GS_DIST_MAT_STAGES; k++) out[k] = gs_dist_max(gs_dist_of(e)->mat_seconds[k]);
}

void gs_engine_dist_counters_reset(gs_engine *e)
{
    dist_engine *d = gs_dist_of(e);
    d->tr->collect(d);
    d->comm_seconds = d->halo_bytes = 0;
    d->spmv_count = 0;
    d->reductions = 0;
}

void gs_engine_dist_counters(gs_engine *e, double *comm_seconds, double *halo_bytes,
                             long *spmv_count, long *reductions)
{
    dist_engine *d = gs_dist_of(e);
    d->tr->collect(d);
    *comm_seconds = d->comm_seconds;
    *halo_bytes = d->halo_bytes;
    *spmv_count = d->spmv_count;
    *reductions = d->reductions;
}
