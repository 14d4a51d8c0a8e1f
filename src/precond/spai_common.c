/* spai_common.c - static SPAI once the pattern is known: min ||A M - I||_F
 * column by column (Grote & Huckle, SIAM J. Sci. Comput. 18(3) 1997, §2, as
 * used by both spai and gspai-opt), the assembly of M and its apply. */
#include "spai_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lsq.h"
#include "mmio.h"

/* Per-thread scratch for one column's local problem. */
typedef struct column_work {
    int32_t *local; /* n: position of row r in I_k, -1 when r is not in I_k */
    int32_t *rows;  /* n: I_k in the order found */
    double *rhs;    /* n: e_k(I_k), then Q^T e_k(I_k) */
    double *Ahat;   /* n1 x n2, column-major */
    size_t ahat_capacity;
} column_work;

static int work_init(column_work *w, int32_t n)
{
    memset(w, 0, sizeof *w);
    w->local = malloc((size_t)n * sizeof *w->local + 1);
    w->rows = malloc((size_t)n * sizeof *w->rows + 1);
    w->rhs = malloc((size_t)n * sizeof *w->rhs + 1);
    if (!w->local || !w->rows || !w->rhs) return -1;
    for (int32_t r = 0; r < n; r++) w->local[r] = -1;
    return 0;
}

static void work_free(column_work *w)
{
    free(w->local);
    free(w->rows);
    free(w->rhs);
    free(w->Ahat);
}

/* I_k = union of the row patterns of A(:,J) (rows of AT): returns n1 = |I_k|
 * and leaves w->local[r] = position of r in I_k. */
static int32_t row_set_build(const gs_csr *AT, const int32_t *J, int32_t n2, column_work *w)
{
    int32_t n1 = 0;
    for (int32_t jj = 0; jj < n2; jj++)
        for (int64_t p = AT->row_ptr[J[jj]]; p < AT->row_ptr[J[jj] + 1]; p++) {
            int32_t r = AT->col[p];
            if (w->local[r] < 0) {
                w->local[r] = n1;
                w->rows[n1++] = r;
            }
        }
    return n1;
}

static void row_set_clear(column_work *w, int32_t n1)
{
    for (int32_t i = 0; i < n1; i++) w->local[w->rows[i]] = -1;
}

void gs_spai_n2_sizes(const gs_csr *MT, gs_spai_sizes *sizes)
{
    int32_t n2max = 0;
    for (int32_t k = 0; k < MT->n_rows; k++) {
        int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - MT->row_ptr[k]);
        if (n2 > n2max) n2max = n2;
    }
    sizes->n2max = n2max;
    sizes->n2avg = MT->n_rows ? (double)MT->nnz / MT->n_rows : 0.0;
}

/* nc_k: the candidates for I_k, sum over J_k of |A(:,j)|. */
static int64_t column_candidates(const gs_csr *AT, const int32_t *J, int32_t n2)
{
    int64_t nc = 0;
    for (int32_t a = 0; a < n2; a++) nc += AT->row_ptr[J[a] + 1] - AT->row_ptr[J[a]];
    return nc;
}

/* gs_spai_route of column k (w: scratch to count n1 where the rule counts it). */
static int column_route(const gs_csr *AT, const gs_csr *MT, int32_t k, int64_t qr_max,
                        column_work *w)
{
    const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - MT->row_ptr[k]);
    const int32_t *J = MT->col + MT->row_ptr[k];
    const int64_t nc = column_candidates(AT, J, n2);
    int64_t n1 = -1;
    if (GS_SPAI_N1_COUNTED((int64_t)n2, nc)) {
        n1 = row_set_build(AT, J, n2, w);
        row_set_clear(w, (int32_t)n1);
    }
    return gs_spai_route(n2, nc, n1, qr_max);
}

int gs_spai_n1_sizes(const gs_csr *AT, const gs_csr *MT, int64_t qr_max, gs_spai_sizes *sizes,
                     gs_error *err)
{
    const int32_t n = MT->n_rows;
    int32_t n1max = 0;
    int nomem = 0;
#pragma omp parallel reduction(max : n1max) reduction(| : nomem)
    {
        column_work w;
        int ok = work_init(&w, n) == 0;
#pragma omp for schedule(dynamic, 64)
        for (int32_t k = 0; k < n; k++) {
            if (!ok) {
                nomem = 1;
                continue;
            }
            if (column_route(AT, MT, k, qr_max, &w) != GS_SPAI_ROUTE_QR) continue;
            const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - MT->row_ptr[k]);
            int32_t n1 = row_set_build(AT, MT->col + MT->row_ptr[k], n2, &w);
            if (n1 > n1max) n1max = n1;
            row_set_clear(&w, n1);
        }
        work_free(&w);
    }
    if (nomem)
        return gs_error_set(err, GS_ERR_NOMEM, "out of host memory for the row sets I_k (n = %d)",
                            (int)n);
    sizes->n1max = n1max;
    return GS_OK;
}


typedef struct column_failure {
    int32_t k;      /* column of M, INT32_MAX when none failed */
    int kind;
    int32_t a_col;  /* GS_SPAI_COLUMN_RANK: the dependent column of A */
    int32_t n1, n2;
} column_failure;

/* m_k = argmin ||A(I,J) m - e_k(I)||_2 into mk (n2 entries). */
static int column_solve(const gs_csr *AT, int32_t k, const int32_t *J, int32_t n2, double *mk,
                        column_work *w, column_failure *f)
{
    const int32_t n1 = row_set_build(AT, J, n2, w);
    size_t need = (size_t)n1 * (size_t)n2;
    int kind = GS_SPAI_COLUMN_OK;
    f->n1 = n1, f->n2 = n2;
    if (need > w->ahat_capacity) {
        free(w->Ahat);
        w->Ahat = malloc(need * sizeof(double));
        w->ahat_capacity = w->Ahat ? need : 0;
        if (!w->Ahat) kind = GS_SPAI_COLUMN_NOMEM;
    }
    if (kind == GS_SPAI_COLUMN_OK) {
        if (need) memset(w->Ahat, 0, need * sizeof(double));
        for (int32_t jj = 0; jj < n2; jj++)                     /* Ahat = A(I,J) */
            for (int64_t p = AT->row_ptr[J[jj]]; p < AT->row_ptr[J[jj] + 1]; p++)
                w->Ahat[(size_t)jj * n1 + w->local[AT->col[p]]] = AT->val[p];
        if (n1) memset(w->rhs, 0, (size_t)n1 * sizeof(double));
        if (w->local[k] >= 0) w->rhs[w->local[k]] = 1.0;        /* e_k(I) */
        int rc = gs_lsq_solve(n1, n2, w->Ahat, w->rhs, mk);
        if (rc > 0)
            kind = GS_SPAI_COLUMN_RANK, f->a_col = J[rc - 1];
        else if (w->local[k] < 0)                               /* e_k(I) = 0: m_k = 0 */
            kind = GS_SPAI_COLUMN_ZERO;
    }
    row_set_clear(w, n1);
    return kind;
}

int gs_spai_column_failure(int kind, int32_t k, int32_t n1, int32_t n2, int32_t a_col,
                           const char *who, const char *hint, gs_error *err)
{
    if (kind == GS_SPAI_COLUMN_NOMEM)
        return gs_error_set(err, GS_ERR_NOMEM,
                            "%s: column %d of M: out of host memory for its %d x %d local "
                            "least-squares matrix A(I,J)",
                            who, (int)k + 1, (int)n1, (int)n2);
    if (kind == GS_SPAI_COLUMN_RANK)
        return gs_error_set(err, GS_ERR_NUMERIC,
                            "%s: column %d of M: the %d x %d local least-squares matrix A(I,J) "
                            "is rank deficient: column %d of A is zero or linearly dependent "
                            "on the other columns in J, so A is (numerically) singular",
                            who, (int)k + 1, (int)n1, (int)n2, (int)a_col + 1);
    return gs_error_set(err, GS_ERR_NUMERIC,
                        "%s: column %d of M would be zero, leaving M singular: row %d of A has "
                        "no entry in the columns J chosen for it (a_%d,%d is zero and no "
                        "off-diagonal entry matches); %s",
                        who, (int)k + 1, (int)k + 1, (int)k + 1, (int)k + 1, hint);
}

static int failure_report(const column_failure *f, const char *who, const char *hint,
                          gs_error *err)
{
    return gs_spai_column_failure(f->kind, f->k, f->n1, f->n2, f->a_col, who, hint, err);
}

/* Per-thread scratch of every route. */
typedef struct route_work {
    column_work qr;
    gs_spai_cgls_work cgls;
    double *ne;      /* n2 (n2 + 1) doubles of the normal equations */
    size_t ne_cap;
    int ok;
} route_work;

static void route_work_init(route_work *w, int32_t n)
{
    memset(w, 0, sizeof *w);
    w->ok = work_init(&w->qr, n) == 0; /* CGLS's scratch: at its first column */
}

static void route_work_free(route_work *w)
{
    work_free(&w->qr);
    gs_spai_cgls_work_free(&w->cgls);
    free(w->ne);
}

/* Column k by its route; f->kind on failure, the route's counters in st. */
static void column_by_route(const gs_csr *AT, const gs_spai_heavy *heavy, gs_csr *MT, int32_t k,
                            int route, route_work *w, column_failure *f, gs_spai_lsq_stats *st)
{
    const int64_t start = MT->row_ptr[k];
    const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - start);
    const int32_t *J = MT->col + start;
    double *mk = MT->val + start;
    f->n2 = n2;
    if (route == GS_SPAI_ROUTE_NE) {
        const size_t need = (size_t)n2 * ((size_t)n2 + 1);
        if (need > w->ne_cap) {
            free(w->ne);
            w->ne = malloc(need * sizeof *w->ne);
            w->ne_cap = w->ne ? need : 0;
        }
        const int rc = w->ne ? gs_spai_ne_column(AT, heavy, k, J, n2, mk, w->ne) : GS_SPAI_NE_NOMEM;
        if (rc == GS_SPAI_NE_OK || rc == GS_SPAI_NE_ZERO || rc == GS_SPAI_NE_NOMEM) {
            st->ne++;
            f->kind = rc == GS_SPAI_NE_OK ? GS_SPAI_COLUMN_OK
                      : rc == GS_SPAI_NE_ZERO ? GS_SPAI_COLUMN_ZERO : GS_SPAI_COLUMN_NOMEM;
            return;
        }
        st->ne_to_qr++, st->qr++; /* rejected: QR below (counted in both, as on the GPU) */
    } else if (route == GS_SPAI_ROUTE_CGLS) {
        int it = 0;
        double relres = 0.0;
        if (!w->cgls.r && gs_spai_cgls_work_init(&w->cgls, AT->n_rows) != 0)
            gs_spai_cgls_work_free(&w->cgls); /* r stays NULL: the column reports NOMEM */
        const int rc = w->cgls.r ? gs_spai_cgls_column(AT, k, J, n2, mk, &w->cgls, &it, &relres)
                                 : GS_SPAI_NE_NOMEM;
        st->cgls++;
        if (it > st->cgls_iterations) st->cgls_iterations = it;
        if (relres > st->cgls_relres) st->cgls_relres = relres;
        f->kind = rc == GS_SPAI_NE_OK ? GS_SPAI_COLUMN_OK
                  : rc == GS_SPAI_NE_ZERO ? GS_SPAI_COLUMN_ZERO : GS_SPAI_COLUMN_NOMEM;
        return;
    } else {
        st->qr++;
    }
    f->kind = column_solve(AT, k, J, n2, mk, &w->qr, f);
}

/* Every column's route into route[] (decided once: the solve reads it), and
 * whether any takes the normal equations (then the heavy columns' Gram
 * matrix is worth its one-off cost). */
static int column_routes(const gs_csr *AT, const gs_csr *MT, int64_t qr_max, uint8_t *route,
                         int *any_ne, gs_error *err)
{
    int any = 0, nomem = 0;
#pragma omp parallel reduction(| : any, nomem)
    {
        column_work w;
        const int ok = work_init(&w, MT->n_rows) == 0;
        nomem |= !ok;
#pragma omp for schedule(dynamic, 256)
        for (int32_t k = 0; k < MT->n_rows; k++) {
            route[k] = (uint8_t)(ok ? column_route(AT, MT, k, qr_max, &w) : GS_SPAI_ROUTE_QR);
            any |= route[k] == GS_SPAI_ROUTE_NE;
        }
        work_free(&w);
    }
    *any_ne = any;
    if (nomem)
        return gs_error_set(err, GS_ERR_NOMEM, "out of host memory for the row sets I_k (n = %d)",
                            (int)MT->n_rows);
    return GS_OK;
}

int gs_spai_solve_columns(gs_pc *pc, const gs_csr *AT, gs_csr *MT, int64_t qr_max,
                          const char *who, const char *hint, gs_spai_lsq_stats *stats,
                          gs_error *err)
{
    const int32_t n = MT->n_rows;
    column_failure first = {INT32_MAX, GS_SPAI_COLUMN_OK, -1, 0, 0};
    gs_spai_heavy heavy = {0};
    gs_spai_lsq_stats total = {0};
    int stop = 0, any_ne = 0, status = GS_OK;
    uint8_t *route = gs_malloc((size_t)n + 1, "spai: routes of the columns", err);
    if (!route) return GS_ERR_NOMEM;
    GS_TRY(column_routes(AT, MT, qr_max, route, &any_ne, err));
    if (any_ne) GS_TRY(gs_spai_heavy_build(AT, &heavy, err));
    total.heavy = heavy.count;
#pragma omp parallel
    {
        route_work w;
        gs_spai_lsq_stats st = {0};
        route_work_init(&w, n);
#pragma omp for schedule(dynamic, 16)
        for (int32_t k = 0; k < n; k++) {
            int stopped;
#pragma omp atomic read
            stopped = stop;
            if (stopped) continue; /* the deadline passed: skip what is left */
            if ((k & 255) == 0 && gs_pc_past_deadline(pc)) {
#pragma omp atomic write
                stop = 1;
            }
            column_failure f = {k, GS_SPAI_COLUMN_NOMEM, -1, 0, 0};
            if (w.ok) column_by_route(AT, &heavy, MT, k, route[k], &w, &f, &st);
            if (f.kind != GS_SPAI_COLUMN_OK) {
#pragma omp critical(gs_spai_first_failure)
                if (k < first.k) first = f; /* the lowest column, whatever the schedule */
            }
        }
#pragma omp critical(gs_spai_stats)
        {
            total.qr += st.qr, total.ne += st.ne, total.ne_to_qr += st.ne_to_qr;
            total.cgls += st.cgls;
            if (st.cgls_iterations > total.cgls_iterations) total.cgls_iterations = st.cgls_iterations;
            if (st.cgls_relres > total.cgls_relres) total.cgls_relres = st.cgls_relres;
        }
        route_work_free(&w);
    }
    if (stats) *stats = total;
    if (stop) GS_TRY(gs_pc_deadline(pc, "least squares", err));
    if (first.k != INT32_MAX) GS_TRY(failure_report(&first, who, hint, err));
cleanup:
    gs_spai_heavy_free(&heavy);
    free(route);
    return status;
}

void gs_spai_report_lsq(gs_pc *pc, const gs_spai_lsq_stats *st)
{
    if (!st->ne && !st->cgls && !st->ne_to_qr) return; /* QR alone: the papers' setup */
    gs_kv_num(&pc->extra, "lsq_qr", (double)st->qr);
    gs_kv_num(&pc->extra, "lsq_ne", (double)st->ne);
    if (st->ne_to_qr) gs_kv_num(&pc->extra, "lsq_ne_to_qr", (double)st->ne_to_qr);
    if (st->heavy) gs_kv_num(&pc->extra, "lsq_heavy", st->heavy);
    if (st->cgls) {
        gs_kv_num(&pc->extra, "lsq_cgls", (double)st->cgls);
        gs_kv_num(&pc->extra, "lsq_cgls_iterations", st->cgls_iterations);
        gs_kv_num(&pc->extra, "lsq_cgls_relres", st->cgls_relres);
    }
}

int gs_spai_assemble(gs_csr *MT, gs_precision prec, gs_csr *M, gs_error *err)
{
    int status = gs_csr_transpose(MT, M, err); /* column k of M = row k of MT */
    gs_csr_free(MT);
    if (status != GS_OK) return status;
    if (prec == GS_FP32)
        for (int64_t p = 0; p < M->nnz; p++) M->val[p] = (double)(float)M->val[p];
    return GS_OK;
}

/* Private state of both types (the same object: M by rows): the host copy
 * kept for --save-precond (values as stored) and the engine's. */
typedef struct gs_spai_data {
    gs_csr M;
    gs_mat *M_eng;
    const char *save_comment; /* static text for the .mtx header */
} gs_spai_data;

static int spai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    gs_spai_data *d = pc->data;
    return pc->eng->ops->spmv_dot(pc->eng, d->M_eng, r, z, NULL, slot); /* z = M r */
}

static int spai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return spai_apply_dot(pc, r, z, GS_SLOT_NONE);
}

static void spai_destroy(gs_pc *pc)
{
    gs_spai_data *d = pc->data;
    if (!d) return;
    pc->eng->ops->mat_destroy(pc->eng, d->M_eng);
    gs_csr_free(&d->M);
    free(d);
}

static int spai_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_spai_data *d = pc->data;
    char path[4096];
    snprintf(path, sizeof path, "%s_M.mtx", prefix);
    return gs_mm_write_csr(path, &d->M, 0, d->save_comment, err);
}

int gs_spai_install(gs_pc *pc, gs_csr *M, gs_precision prec, const char *save_comment,
                    gs_error *err)
{
    gs_spai_data *d = gs_calloc(1, sizeof *d, "spai preconditioner", err);
    if (!d) return GS_ERR_NOMEM;
    d->M = *M;
    memset(M, 0, sizeof *M);
    d->save_comment = save_comment;
    pc->data = d;
    pc->destroy = spai_destroy;
    int status = pc->eng->ops->mat_create(pc->eng, &d->M, prec, &d->M_eng);
    if (status != GS_OK) return gs_engine_fail(pc->eng, err);
    pc->apply = spai_apply;
    pc->apply_dot = spai_apply_dot;
    gs_pc_set_products(pc, d->M_eng, NULL);
    pc->save = spai_save;
    pc->nnz = d->M.nnz;
    pc->apply_bytes = gs_csr_stream_bytes(&d->M, prec) + 16.0 * d->M.n_rows; /* M, r, z */
    pc->symmetric = 0;
    return GS_OK;
}

void gs_spai_report_sizes(gs_pc *pc, const gs_spai_sizes *sizes)
{
    gs_kv_num(&pc->extra, "n1max", sizes->n1max);
    gs_kv_num(&pc->extra, "n2max", sizes->n2max);
    gs_kv_num(&pc->extra, "n2avg", sizes->n2avg);
}

int gs_spai_finish(gs_pc *pc, const gs_csr *AT, gs_csr *MT, int64_t qr_max, gs_precision prec,
                   const char *who, const char *hint, const char *save_comment, gs_error *err)
{
    gs_csr M = {0};
    gs_spai_lsq_stats stats = {0};
    int status;
    double t0 = gs_pc_stage_start(pc, "least squares"); /* may be long: tell the hook */
    GS_TRY(gs_spai_solve_columns(pc, AT, MT, qr_max, who, hint, &stats, err));
    gs_spai_report_lsq(pc, &stats);
    GS_TRY(gs_pc_stage_end(pc, "least squares", t0));

    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_spai_assemble(MT, prec, &M, err));
    GS_TRY(gs_pc_stage_end(pc, "assemble", t0));

    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_spai_install(pc, &M, prec, save_comment, err));
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
cleanup:
    gs_csr_free(&M);
    return status;
}
