/* halo_cuda.cu - the device transports of the distributed engine (MPI
 * builds with CUDA, docs/multigpu.md). "nccl": halos by NCCL send/recv in
 * one group on a second stream, so the exchange overlaps the diagonal
 * block's product on the engine's stream; slot sums by ncclAllReduce on the
 * engine's stream, in place in the device scalar array (scalars never visit
 * the host). "mpi-staged": the same through page-locked host buffers and
 * MPI, for ranks that share a GPU (NCCL refuses two ranks on one device).
 * Communication time: CUDA events around each NCCL call, read at the next
 * synchronisation (nccl); host time inside MPI and the copies (staged). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo_cuda.h"

/* ---- kernels ---- */

__global__ void dist_pack_kernel(const double *__restrict__ x, const int32_t *__restrict__ idx,
                                 int32_t n, double *__restrict__ out)
{
    const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[idx[i]];
}

/* y_i += a (A_off halo)_i over the off-block rows, one thread a row; with
 * slot >= 0 also S[slot] += sum_i a (A_off halo)_i w_i (block sums, then one
 * atomic add a block: the off-block rows are few, a boundary layer). */
__global__ void dist_offblock_kernel(int32_t n_rows, const int32_t *__restrict__ rows,
                                     const int64_t *__restrict__ ptr,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val,
                                     const double *__restrict__ halo, gs_coef ka,
                                     double *__restrict__ y, const double *__restrict__ w,
                                     double *S, int slot)
{
    __shared__ double smem[32];
    const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    const double a = gs_coef_eval(ka, S);
    const double part = r < n_rows ? dist_offblock_row(r, rows, ptr, col, val, halo, a, y, w) : 0.0;
    if (slot < 0) return; /* uniform over the block */
    const double sum = gs_block_sum(part, smem);
    if (threadIdx.x == 0) atomicAdd(&S[slot], sum);
}

/* ---- timing of exchanges ---- */

int dist_cuda_timing_begin(dist_engine *d, cudaStream_t s, cudaEvent_t **pair)
{
    cuda_tr *t = tr_of(d);
    *pair = NULL;
    if (!t->timing) return GS_OK;
    if (t->used_ev + 2 > t->cap_ev) {
        const int cap = t->cap_ev ? 2 * t->cap_ev : 64;
        cudaEvent_t *ev = (cudaEvent_t *)realloc(t->ev, (size_t)cap * sizeof *ev);
        if (!ev) return gs_error_set(err_of(d), GS_ERR_NOMEM, "out of host memory (events)");
        t->ev = ev, t->cap_ev = cap;
    }
    while (t->n_ev < t->used_ev + 2) {
        int status = CUDA_CALL(err_of(d), cudaEventCreate(&t->ev[t->n_ev]));
        if (status != GS_OK) return status;
        t->n_ev++;
    }
    *pair = &t->ev[t->used_ev];
    t->used_ev += 2;
    return CUDA_CALL(err_of(d), cudaEventRecord((*pair)[0], s));
}

int dist_cuda_collect(dist_engine *d)
{
    cuda_tr *t = tr_of(d);
    int status = GS_OK;
    for (int k = 0; k + 1 < t->used_ev && status == GS_OK; k += 2) {
        float ms = 0.0f;
        status = CUDA_CALL(err_of(d), cudaEventSynchronize(t->ev[k + 1]));
        if (status == GS_OK)
            status = CUDA_CALL(err_of(d), cudaEventElapsedTime(&ms, t->ev[k], t->ev[k + 1]));
        d->comm_seconds += 1e-3 * ms;
    }
    t->used_ev = 0;
    return status;
}

/* ---- matrices ---- */

static int upload(dist_engine *d, void **dst, size_t *bytes, const void *src, size_t n,
                  const char *what)
{
    *bytes = n ? n : 8;
    int status = gs_cuda_alloc(d->inner, dst, *bytes, what);
    /* on the stream the pool allocated *dst on (memory it may hand back
     * before the stream's earlier work is done with it) */
    if (status == GS_OK && src && n)
        status = CUDA_CALL(err_of(d), cudaMemcpyAsync(*dst, src, n, cudaMemcpyHostToDevice,
                                                      tr_of(d)->main));
    return status;
}

void dist_cuda_mat_free(dist_engine *d, dist_mat *M)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    if (!m) return;
    gs_error *t = &gs_cuda_of(d->inner)->teardown;
    CUDA_TEARDOWN(t, cudaStreamSynchronize(tr_of(d)->main));
    void *p[7] = {m->send_idx, m->off_rows, m->off_ptr, m->off_col, m->off_val, m->send, m->halo};
    for (int k = 0; k < 7; k++) gs_cuda_free(d->inner, p[k], m->bytes[k]);
    if (m->host_send) CUDA_TEARDOWN(t, cudaFreeHost(m->host_send));
    if (m->host_halo) CUDA_TEARDOWN(t, cudaFreeHost(m->host_halo));
    free(m->req);
    free(m);
    M->transport = NULL;
}

/* What every device transport keeps of M on the device: the send list and
 * the off-block rows. */
int dist_cuda_mat_arrays(dist_engine *d, dist_mat *M)
{
    cuda_mat *m = (cuda_mat *)calloc(1, sizeof *m);
    M->transport = m;
    if (!m) return gs_error_set(err_of(d), GS_ERR_NOMEM, "out of host memory (halo)");
    const gs_dist_split *s = &M->split;
    const size_t n_send = (size_t)M->send_start[M->n_send];
    int status = GS_OK;
    GS_TRY(upload(d, (void **)&m->send_idx, &m->bytes[0], M->send_idx, n_send * 4, "halo send list"));
    GS_TRY(upload(d, (void **)&m->off_rows, &m->bytes[1], s->off_rows, (size_t)s->n_off_rows * 4,
                  "off-block rows"));
    GS_TRY(upload(d, (void **)&m->off_ptr, &m->bytes[2], s->off.row_ptr,
                  ((size_t)s->n_off_rows + 1) * 8, "off-block row pointers"));
    GS_TRY(upload(d, (void **)&m->off_col, &m->bytes[3], s->off.col, (size_t)s->off.nnz * 4,
                  "off-block columns"));
    GS_TRY(upload(d, (void **)&m->off_val, &m->bytes[4], s->off.val, (size_t)s->off.nnz * 8,
                  "off-block values"));
    /* the host arrays may be page-locked (the copies then asynchronous) and
     * are not this transport's to keep */
    GS_TRY(CUDA_CALL(err_of(d), cudaStreamSynchronize(tr_of(d)->main)));
cleanup:
    return status;
}

/* nccl and mpi-staged: the arrays, and the buffers the halo is packed into
 * and received in (on the device; staged: on the host too). ipc writes
 * straight into the neighbours' halos and needs none of them. */
static int dist_cuda_mat_init(dist_engine *d, dist_mat *M)
{
    int status = dist_cuda_mat_arrays(d, M);
    if (status != GS_OK) return status;
    cuda_mat *m = (cuda_mat *)M->transport;
    const size_t n_send = (size_t)M->send_start[M->n_send], n_halo = (size_t)M->split.n_halo;
    GS_TRY(upload(d, (void **)&m->send, &m->bytes[5], NULL, n_send * 8, "halo send buffer"));
    GS_TRY(upload(d, (void **)&m->halo, &m->bytes[6], NULL, n_halo * 8, "halo"));
    if (!tr_of(d)->use_nccl) {
        GS_TRY(CUDA_CALL(err_of(d), cudaMallocHost((void **)&m->host_send, n_send * 8 + 8)));
        GS_TRY(CUDA_CALL(err_of(d), cudaMallocHost((void **)&m->host_halo, n_halo * 8 + 8)));
        m->req = (MPI_Request *)malloc((size_t)(M->n_recv + M->n_send + 1) * sizeof(MPI_Request));
        if (!m->req) status = gs_error_set(err_of(d), GS_ERR_NOMEM, "out of host memory (halo)");
    }
cleanup:
    return status;
}

/* After every rank's mat_init succeeded (collective): one entry with each
 * neighbour of M, which connects peers the transport's warm-up did not (NCCL
 * connects lazily), so that no connection is made inside a solve. */
static int nccl_mat_connect(dist_engine *d, dist_mat *M)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    int status = GS_OK;
    cuda_tr *t = tr_of(d);
    if (M->n_recv == 0 && M->n_send == 0) return GS_OK;
    GS_TRY(NCCL_CALL(err_of(d), ncclGroupStart()));
    for (int k = 0; k < M->n_recv && status == GS_OK; k++)
        status = NCCL_CALL(err_of(d), ncclRecv(m->halo + M->recv_start[k], 1, ncclDouble,
                                               M->recv_rank[k], t->nccl, t->main));
    for (int k = 0; k < M->n_send && status == GS_OK; k++)
        status = NCCL_CALL(err_of(d), ncclSend(m->send + M->send_start[k], 1, ncclDouble,
                                               M->send_rank[k], t->nccl, t->main));
    {
        const int end = NCCL_CALL(err_of(d), ncclGroupEnd());
        if (status == GS_OK) status = end;
    }
    if (status == GS_OK) status = CUDA_CALL(err_of(d), cudaStreamSynchronize(t->main));
cleanup:
    return status;
}

/* ---- halo exchange ---- */

static int pack(dist_engine *d, dist_mat *M, const gs_vec *x)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    const int32_t n = M->send_start[M->n_send];
    return CUDA_LAUNCH(err_of(d), dist_pack_kernel, (n + 255) / 256, 256, 0, tr_of(d)->main,
                       (const double *)x->d, (const int32_t *)m->send_idx, n, m->send);
}

static int nccl_halo_start(dist_engine *d, dist_mat *M, const gs_vec *x)
{
    cuda_tr *t = tr_of(d);
    cuda_mat *m = (cuda_mat *)M->transport;
    cudaEvent_t *pair = NULL;
    int status = GS_OK;
    d->halo_bytes += 8.0 * M->split.n_halo;
    if (M->n_recv == 0 && M->n_send == 0) return GS_OK;
    GS_TRY(pack(d, M, x));
    if (t->comm != t->main) {
        GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(t->packed, t->main)));
        GS_TRY(CUDA_CALL(err_of(d), cudaStreamWaitEvent(t->comm, t->packed, 0)));
    }
    GS_TRY(dist_cuda_timing_begin(d, t->comm, &pair));
    GS_TRY(NCCL_CALL(err_of(d), ncclGroupStart()));
    for (int k = 0; k < M->n_recv && status == GS_OK; k++)
        status = NCCL_CALL(err_of(d), ncclRecv(m->halo + M->recv_start[k],
                                               (size_t)(M->recv_start[k + 1] - M->recv_start[k]),
                                               ncclDouble, M->recv_rank[k], t->nccl, t->comm));
    for (int k = 0; k < M->n_send && status == GS_OK; k++)
        status = NCCL_CALL(err_of(d), ncclSend(m->send + M->send_start[k],
                                               (size_t)(M->send_start[k + 1] - M->send_start[k]),
                                               ncclDouble, M->send_rank[k], t->nccl, t->comm));
    {
        const int end = NCCL_CALL(err_of(d), ncclGroupEnd()); /* always closes the group */
        if (status == GS_OK) status = end;
    }
    if (status != GS_OK) goto cleanup;
    if (pair) GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(pair[1], t->comm)));
    if (t->comm != t->main) GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(t->arrived, t->comm)));
cleanup:
    return status;
}

static int offblock(dist_engine *d, dist_mat *M, gs_coef a, gs_vec *y, const gs_vec *w, int slot)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    const int32_t n = M->split.n_off_rows;
    return CUDA_LAUNCH(err_of(d), dist_offblock_kernel, (n + 255) / 256, 256, 0, tr_of(d)->main,
                       n, (const int32_t *)m->off_rows, (const int64_t *)m->off_ptr,
                       (const int32_t *)m->off_col, (const double *)m->off_val,
                       (const double *)m->halo, a, y->d, w ? (const double *)w->d : NULL,
                       gs_cuda_of(d->inner)->S, slot);
}

static int nccl_halo_finish(dist_engine *d, dist_mat *M, gs_coef a, gs_vec *y, const gs_vec *w,
                            int slot)
{
    cuda_tr *t = tr_of(d);
    if ((M->n_recv > 0 || M->n_send > 0) && t->comm != t->main) {
        int status = CUDA_CALL(err_of(d), cudaStreamWaitEvent(t->main, t->arrived, 0));
        if (status != GS_OK) return status;
    }
    return offblock(d, M, a, y, w, slot);
}

/* The runs in one group: NCCL launches them as one operation. */
static int nccl_allreduce(dist_engine *d, const int *slot0, const int *count, int runs)
{
    cuda_tr *t = tr_of(d);
    double *S = gs_cuda_of(d->inner)->S;
    cudaEvent_t *pair = NULL;
    int status = GS_OK;
    GS_TRY(dist_cuda_timing_begin(d, t->main, &pair));
    GS_TRY(NCCL_CALL(err_of(d), ncclGroupStart()));
    for (int i = 0; i < runs && status == GS_OK; i++)
        status = NCCL_CALL(err_of(d), ncclAllReduce(S + slot0[i], S + slot0[i], (size_t)count[i],
                                                    ncclDouble, ncclSum, t->nccl, t->main));
    {
        const int end = NCCL_CALL(err_of(d), ncclGroupEnd()); /* always closes the group */
        if (status == GS_OK) status = end;
    }
    if (status != GS_OK) goto cleanup;
    if (pair) GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(pair[1], t->main)));
cleanup:
    return status;
}

/* staged: the device's halo entries through the host, MPI between ranks */
static int staged_halo_start(dist_engine *d, dist_mat *M, const gs_vec *x)
{
    cuda_tr *t = tr_of(d);
    cuda_mat *m = (cuda_mat *)M->transport;
    const int32_t n_send = M->send_start[M->n_send];
    int status = GS_OK;
    d->halo_bytes += 8.0 * M->split.n_halo;
    GS_TRY(pack(d, M, x));
    if (n_send > 0)
        GS_TRY(CUDA_CALL(err_of(d), cudaMemcpyAsync(m->host_send, m->send, (size_t)n_send * 8,
                                                    cudaMemcpyDeviceToHost, t->main)));
    {
        const double t0 = MPI_Wtime();
        status = CUDA_CALL(err_of(d), cudaStreamSynchronize(t->main));
        for (int k = 0; k < M->n_recv && status == GS_OK; k++)
            MPI_Irecv(m->host_halo + M->recv_start[k], M->recv_start[k + 1] - M->recv_start[k],
                      MPI_DOUBLE, M->recv_rank[k], 24, d->comm, &m->req[k]);
        for (int k = 0; k < M->n_send && status == GS_OK; k++)
            MPI_Isend(m->host_send + M->send_start[k], M->send_start[k + 1] - M->send_start[k],
                      MPI_DOUBLE, M->send_rank[k], 24, d->comm, &m->req[M->n_recv + k]);
        d->comm_seconds += MPI_Wtime() - t0;
    }
cleanup:
    return status;
}

static int staged_halo_finish(dist_engine *d, dist_mat *M, gs_coef a, gs_vec *y, const gs_vec *w,
                              int slot)
{
    cuda_tr *t = tr_of(d);
    cuda_mat *m = (cuda_mat *)M->transport;
    const double t0 = MPI_Wtime();
    int rc = MPI_Waitall(M->n_recv + M->n_send, m->req, MPI_STATUSES_IGNORE);
    d->comm_seconds += MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) return gs_dist_mpi_fail(rc, "halo exchange", err_of(d));
    if (M->split.n_halo > 0) {
        int status = CUDA_CALL(err_of(d), cudaMemcpyAsync(m->halo, m->host_halo,
                                                          (size_t)M->split.n_halo * 8,
                                                          cudaMemcpyHostToDevice, t->main));
        if (status != GS_OK) return status;
    }
    return offblock(d, M, a, y, w, slot);
}

static int staged_allreduce_run(dist_engine *d, int slot0, int count)
{
    cuda_tr *t = tr_of(d);
    double *S = gs_cuda_of(d->inner)->S + slot0;
    const double t0 = MPI_Wtime();
    int status = CUDA_CALL(err_of(d), cudaMemcpyAsync(t->host_slots, S, (size_t)count * 8,
                                                      cudaMemcpyDeviceToHost, t->main));
    if (status == GS_OK) status = CUDA_CALL(err_of(d), cudaStreamSynchronize(t->main));
    if (status == GS_OK) {
        int rc = MPI_Allreduce(MPI_IN_PLACE, t->host_slots, count, MPI_DOUBLE, MPI_SUM, d->comm);
        if (rc != MPI_SUCCESS) status = gs_dist_mpi_fail(rc, "sum over ranks", err_of(d));
    }
    if (status == GS_OK)
        status = CUDA_CALL(err_of(d), cudaMemcpyAsync(S, t->host_slots, (size_t)count * 8,
                                                      cudaMemcpyHostToDevice, t->main));
    d->comm_seconds += MPI_Wtime() - t0;
    return status;
}

static int staged_allreduce(dist_engine *d, const int *slot0, const int *count, int runs)
{
    int status = GS_OK;
    for (int i = 0; i < runs && status == GS_OK; i++)
        status = staged_allreduce_run(d, slot0[i], count[i]);
    return status;
}

void dist_cuda_tr_destroy(dist_engine *d)
{
    cuda_tr *t = tr_of(d);
    if (!t) return;
    gs_error *te = &gs_cuda_of(d->inner)->teardown; /* reported by the inner engine's release */
    if (t->main) CUDA_TEARDOWN(te, cudaStreamSynchronize(t->main));
    dist_ipc_destroy(d);
    if (t->nccl) (void)NCCL_CALL(te, ncclCommDestroy(t->nccl));
    for (int k = 0; k < t->n_ev; k++) CUDA_TEARDOWN(te, cudaEventDestroy(t->ev[k]));
    free(t->ev);
    if (t->packed) CUDA_TEARDOWN(te, cudaEventDestroy(t->packed));
    if (t->arrived) CUDA_TEARDOWN(te, cudaEventDestroy(t->arrived));
    if (t->own_comm) CUDA_TEARDOWN(te, cudaStreamDestroy(t->own_comm));
    if (t->host_slots) CUDA_TEARDOWN(te, cudaFreeHost(t->host_slots));
    free(t);
    d->tr_state = NULL;
}

static const dist_transport nccl_transport = {
    "nccl", dist_cuda_mat_init, dist_cuda_mat_free, nccl_halo_start, nccl_halo_finish,
    nccl_allreduce, dist_cuda_collect, dist_cuda_tr_destroy, nccl_mat_connect, 0,
};

static const dist_transport staged_transport = {
    "mpi-staged", dist_cuda_mat_init, dist_cuda_mat_free, staged_halo_start, staged_halo_finish,
    staged_allreduce, dist_cuda_collect, dist_cuda_tr_destroy, NULL, 0,
};

/* NCCL (2.22 on, NCCL_RUNTIME_CONNECT=1 by default) connects a
 * communicator's channels lazily, at the first collective and the first
 * send/recv with each peer: hundreds of milliseconds that would otherwise
 * land in the first solve's Ts (the first H100 run: ~0.35-0.45 s of comm_s in
 * every 2-GPU case, whatever the iterations). Here, with the communicator:
 * one all-reduce and one exchange with the ranks either side (the neighbours
 * of contiguous row blocks of a banded matrix; nccl_mat_connect connects
 * any other neighbour of a matrix), timed as the report's comm_setup_s. */
static int nccl_warm_up(dist_engine *d, cuda_tr *t, gs_error *err)
{
    double *buf = NULL;
    int status = CUDA_CALL(err, cudaMalloc((void **)&buf, 4 * sizeof(double)));
    if (status != GS_OK) return status;
    status = CUDA_CALL(err, cudaMemsetAsync(buf, 0, 4 * sizeof(double), t->main));
    if (status == GS_OK)
        status = NCCL_CALL(err, ncclAllReduce(buf, buf, 1, ncclDouble, ncclSum, t->nccl,
                                              t->main));
    if (status == GS_OK && d->size > 1) {
        status = NCCL_CALL(err, ncclGroupStart());
        const int lo = d->rank - 1, hi = d->rank + 1;
        ncclComm_t c = t->nccl;
        if (status == GS_OK && lo >= 0)
            status = NCCL_CALL(err, ncclRecv(buf + 1, 1, ncclDouble, lo, c, t->main));
        if (status == GS_OK && hi < d->size)
            status = NCCL_CALL(err, ncclRecv(buf + 2, 1, ncclDouble, hi, c, t->main));
        if (status == GS_OK && lo >= 0)
            status = NCCL_CALL(err, ncclSend(buf, 1, ncclDouble, lo, c, t->main));
        if (status == GS_OK && hi < d->size)
            status = NCCL_CALL(err, ncclSend(buf, 1, ncclDouble, hi, c, t->main));
        const int end = NCCL_CALL(err, ncclGroupEnd());
        if (status == GS_OK) status = end;
    }
    if (status == GS_OK) status = CUDA_CALL(err, cudaStreamSynchronize(t->main));
    const int freed = buf ? CUDA_CALL(err, cudaFree(buf)) : GS_OK;
    return status == GS_OK ? freed : status;
}

/* Local resources first, agreed over the ranks, then the collective NCCL
 * start (so that no rank waits in it for one that failed before it); ipc
 * where it is possible (halo_ipc.cu), else NCCL. */
int gs_dist_transport_cuda(dist_engine *d, int kind, gs_error *err)
{
    const int use_nccl = kind != GS_DIST_TRANSPORT_STAGED;
    cuda_tr *t = (cuda_tr *)calloc(1, sizeof *t);
    int status = t ? GS_OK : gs_error_set(err, GS_ERR_NOMEM, "out of host memory (transport)");
    d->tr_state = t;
    if (status == GS_OK) {
        t->use_nccl = use_nccl;
        t->main = gs_cuda_of(d->inner)->stream;
        const gs_debug *dbg = gs_cuda_debug(d->inner); /* --overlap, main's switches */
        t->timing = !dbg->dist_comm_timing_off;
        /* off by default: on 2 H200s the second stream's events cost more
         * than the overlap saved (strong CG + Jacobi 545 us an iteration
         * with it, 508 without; weak 194 and 192; docs/results-multigpu.md) */
        t->overlap = dbg->dist_overlap == GS_DEBUG_FORCE_ON;
        d->halo_overlap = t->overlap;
        status = CUDA_CALL(err, cudaStreamCreateWithFlags(&t->own_comm, cudaStreamNonBlocking));
        t->comm = t->overlap ? t->own_comm : t->main;
    }
    if (status == GS_OK)
        status = CUDA_CALL(err, cudaEventCreateWithFlags(&t->packed, cudaEventDisableTiming));
    if (status == GS_OK)
        status = CUDA_CALL(err, cudaEventCreateWithFlags(&t->arrived, cudaEventDisableTiming));
    if (status == GS_OK && !use_nccl) /* staged sums pass through the host */
        status = CUDA_CALL(err, cudaMallocHost((void **)&t->host_slots,
                                               GS_MAX_SCALARS * sizeof(double)));
    status = gs_dist_agree(status, err);
    int ipc = 0; /* made (else not possible: NCCL) */
    if (status == GS_OK && kind == GS_DIST_TRANSPORT_IPC) status = dist_ipc_create(d, &ipc, err);
    if (status == GS_OK && use_nccl && !ipc) {
        ncclUniqueId id;
        memset(&id, 0, sizeof id);
        if (d->rank == 0) status = NCCL_CALL(err, ncclGetUniqueId(&id));
        status = gs_dist_agree(status, err);
        if (status == GS_OK) {
            const double t0 = MPI_Wtime();
            MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, d->comm);
            status = NCCL_CALL(err, ncclCommInitRank(&t->nccl, d->size, id, d->rank));
            status = gs_dist_agree(status, err);
            if (status == GS_OK) status = gs_dist_agree(nccl_warm_up(d, t, err), err);
            d->comm_setup_seconds = gs_dist_max(MPI_Wtime() - t0);
        }
    }
    if (status != GS_OK) {
        dist_cuda_tr_destroy(d);
        return status;
    }
    d->tr = ipc ? &dist_ipc_transport : use_nccl ? &nccl_transport : &staged_transport;
    return GS_OK;
}
