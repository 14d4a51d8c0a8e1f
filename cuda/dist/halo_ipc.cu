/* halo_ipc.cu - the "ipc" transport of the distributed engine: ranks on one
 * host, each with a GPU of its own and peer access to every other, write
 * into each other's device memory (CUDA IPC handles, exchanged once) and
 * signal with flags, so an exchange is a kernel, not a library call.
 *
 * Halo: the pack kernel gathers the entries each neighbour needs and writes
 * them straight into that neighbour's halo buffer, then (its last block)
 * raises the neighbour's arrival flag to the exchange's epoch; the
 * off-block kernel waits for the flags of the ranks it reads from, runs,
 * and (its last block) tells each of them it is done (an ack). The halo
 * buffers are double (epoch parity): a rank writes epoch e into the buffer
 * its neighbour read at e - 2, after that neighbour's ack of e - 2.
 *
 * Sums over the ranks: one block writes the slots' local values into every
 * rank's inbox row of this rank and raises its flags there, waits for every
 * rank's flag in its own inbox, and adds the rows in rank order (so every
 * rank gets the same bits). Inboxes are double by epoch parity too: a rank
 * reaches epoch e + 2 only after all flags of e + 1, which each rank raises
 * after it has read its inbox of e.
 *
 * The diagonal block's product runs between the pack and the wait, so the
 * halo travels while it runs; with --overlap on the pack itself runs on a
 * second stream beside the product (in a replayed graph the fork and join
 * are edges, not events; measured no faster on 4 H200s, so off by default). Epochs are
 * counted on the device (every rank issues the same exchanges in the same
 * order; a kernel reads its epoch from a counter the exchange's last kernel
 * advances), so iterations can be captured as CUDA graphs and replayed.
 * Communication time: each kernel's first block adds its time (the pack,
 * the sums, the off-block kernel's wait) to a device counter in ns, read
 * at the engine's next synchronisation. Where IPC is not possible (ranks on
 * several hosts, a shared GPU, no peer access, more than GS_IPC_MAX ranks)
 * the engine uses NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo_cuda.h"

#define GS_IPC_MAX 8     /* ranks (one host's GPUs) */
#define GS_IPC_RMAX 256  /* slots summed by one kernel (more: several rounds) */

typedef unsigned long long u64;

/* Every rank's region of one kind (opened IPC handles; peer[rank] is its own).
 * entered: region_open was called, which every rank does or none (its
 * callers agree first), so it is the same on every rank even where this
 * rank's part of the set-up failed; region_close's barriers follow it. */
typedef struct ipc_region {
    char *mine;
    size_t bytes;
    char *peer[GS_IPC_MAX];
    int entered;
} ipc_region;

typedef struct ipc_tr {
    ipc_region inbox; /* double [2][P][RMAX], then u64 flags [2][P] */
    u64 *local;       /* this rank's own: [0] the sums' epoch, [1] communication ns */
    int round;        /* slots a sum kernel carries: RMAX, or GS_DIST_IPC_ROUND's fewer */
} ipc_tr;

typedef struct ipc_mat {
    ipc_region reg;   /* double halo [2][n_halo]; u64 arrived [P]; u64 ack [P]; int done [2];
                       * u64 epoch (this rank's, of the matrix's exchanges) */
    int32_t n_halo[GS_IPC_MAX]; /* every rank's halo length (the parity stride) */
    int32_t dst_off[GS_IPC_MAX]; /* where this rank's entries start in each rank's halo */
    int packed;       /* a pack was issued since the last off-block kernel */
} ipc_mat;

/* ---- layout of a matrix's region ---- */
static __host__ __device__ size_t halo_bytes(int32_t n_halo) { return 2 * (size_t)n_halo * 8; }
static u64 *arrived_at(char *base, int32_t n_halo) { return (u64 *)(base + halo_bytes(n_halo)); }
static u64 *ack_at(char *base, int32_t n_halo, int P)
{
    return arrived_at(base, n_halo) + P;
}
static int *done_at(char *base, int32_t n_halo, int P) { return (int *)(ack_at(base, n_halo, P) + P); }
static u64 *epoch_at(char *base, int32_t n_halo, int P)
{
    return (u64 *)(done_at(base, n_halo, P) + 2);
}
static size_t mat_region_bytes(int32_t n_halo, int P) { return halo_bytes(n_halo) + 16 * (size_t)P + 16; }

/* ---- kernels ---- */

typedef struct ipc_pack_args {
    const double *x;
    const int32_t *idx;
    int32_t n;
    int n_seg;
    int32_t seg_start[GS_IPC_MAX + 1];
    double *dst[GS_IPC_MAX];            /* the neighbour's halo (parity 0) + offset */
    int32_t stride[GS_IPC_MAX];         /* its halo length: parity 1 is dst + stride */
    u64 *flag[GS_IPC_MAX];              /* the neighbour's arrival flag of this rank */
    const u64 *ack[GS_IPC_MAX];         /* this rank's ack flag of the neighbour */
    const u64 *epoch;                   /* the matrix's exchanges so far (this one: + 1) */
    int *done;
    u64 *ns;                            /* communication time */
} ipc_pack_args;

static __device__ u64 now_ns(void)
{
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ void spin_until(const u64 *flag, u64 at_least)
{
    while (*(const volatile u64 *)flag < at_least) __nanosleep(64);
}

/* The last block of a grid to get here returns 1, the counter reset. This
 * is the release half: each block's thread 0 fences (system scope) after
 * its block's loads and stores and before it counts. A caller that then
 * signals another GPU fences again in the last block, after its count saw
 * every other (the acquire half), before the signal: only that chain
 * orders the other blocks' memory operations before the signal. */
static __device__ int last_block(int *done)
{
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        last = atomicAdd(done, 1) == (int)gridDim.x - 1;
        if (last) *done = 0;
    }
    __syncthreads();
    return last;
}

__global__ void ipc_pack_kernel(ipc_pack_args a)
{
    const u64 t0 = blockIdx.x == 0 && threadIdx.x == 0 ? now_ns() : 0;
    const u64 epoch = *a.epoch + 1;
    const int par = (int)(epoch & 1);
    if (threadIdx.x == 0) { /* the neighbour has read this parity's last use (epoch - 2) */
        for (int s = 0; s < a.n_seg; s++) spin_until(a.ack[s], epoch > 2 ? epoch - 2 : 0);
        __threadfence_system();
    }
    __syncthreads();
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        int s = 0;
        while (i >= a.seg_start[s + 1]) s++;
        a.dst[s][(size_t)par * a.stride[s] + (i - a.seg_start[s])] = a.x[a.idx[i]];
    }
    if (last_block(a.done) && threadIdx.x == 0) {
        __threadfence_system();
        for (int s = 0; s < a.n_seg; s++) *(volatile u64 *)a.flag[s] = epoch;
    }
    if (t0) atomicAdd(a.ns, now_ns() - t0);
}

typedef struct ipc_wait_args {
    int n_src;
    const u64 *arrived[GS_IPC_MAX]; /* this rank's arrival flags of its sources */
    u64 *ack[GS_IPC_MAX];           /* each source's ack flag of this rank */
    u64 *epoch;                     /* the matrix's exchanges so far (advanced here) */
    int *done;
    const double *halo;             /* parity 0; parity 1 is halo + n_halo */
    int32_t n_halo;
    u64 *ns;
} ipc_wait_args;

/* The off-block rows once every source's entries have arrived; then the
 * sources are told this epoch's buffer is free. */
__global__ void ipc_offblock_kernel(int32_t n_rows, const int32_t *__restrict__ rows,
                                    const int64_t *__restrict__ ptr,
                                    const int32_t *__restrict__ col,
                                    const double *__restrict__ val, gs_coef ka,
                                    double *__restrict__ y, const double *__restrict__ w,
                                    double *S, int slot, ipc_wait_args sync)
{
    __shared__ double smem[32];
    const u64 epoch = *sync.epoch + 1;
    const double *halo = sync.halo + (size_t)(epoch & 1) * sync.n_halo;
    if (threadIdx.x == 0) {
        const u64 t0 = blockIdx.x == 0 ? now_ns() : 0;
        for (int s = 0; s < sync.n_src; s++) spin_until(sync.arrived[s], epoch);
        __threadfence_system(); /* acquire: the entries written before the flags */
        if (t0) atomicAdd(sync.ns, now_ns() - t0);
    }
    __syncthreads();
    const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    const double a = gs_coef_eval(ka, S);
    const double part = r < n_rows ? dist_offblock_row(r, rows, ptr, col, val, halo, a, y, w) : 0.0;
    if (slot >= 0) {
        const double sum = gs_block_sum(part, smem);
        if (threadIdx.x == 0) atomicAdd(&S[slot], sum);
    }
    if (last_block(sync.done) && threadIdx.x == 0) {
        /* An ack lets the source write this parity's halo again (its pack
         * of epoch + 2). Every block's reads of it (__ldcg, above) must be
         * complete before the source can see the ack, or a read still in
         * flight could return the next epoch's entry: the fence (system
         * scope: the source is another GPU, writing through peer access)
         * orders them, counted by last_block, before the ack stores. */
        __threadfence_system();
        for (int s = 0; s < sync.n_src; s++) *(volatile u64 *)sync.ack[s] = epoch;
        *sync.epoch = epoch; /* the next exchange's kernels run after this one */
    }
}

typedef struct ipc_sum_args {
    double *S;
    int n_runs, total;
    int slot0[GS_DIST_PENDING], count[GS_DIST_PENDING];
    char *base[GS_IPC_MAX];   /* every rank's inbox */
    int P, rank;
    u64 *epoch;               /* the sums so far (advanced here) */
    u64 *ns;
} ipc_sum_args;

static __device__ int run_slot(const ipc_sum_args *a, int j)
{
    int r = 0;
    while (j >= a->count[r]) j -= a->count[r++];
    return a->slot0[r] + j;
}

/* An inbox: double rows [2][P][RMAX], then u64 flags [2][P]. */
static __device__ double *inbox_row(char *base, int P, int par, int q)
{
    return (double *)base + ((size_t)par * P + q) * GS_IPC_RMAX;
}
static __device__ u64 *inbox_flag(char *base, int P, int par, int q)
{
    return (u64 *)((double *)base + (size_t)2 * P * GS_IPC_RMAX) + (size_t)par * P + q;
}

/* One block. */
__global__ void ipc_sum_kernel(ipc_sum_args a)
{
    const u64 t0 = threadIdx.x == 0 ? now_ns() : 0;
    const u64 epoch = *a.epoch + 1;
    const int par = (int)(epoch & 1);
    for (int j = threadIdx.x; j < a.total; j += blockDim.x) {
        const double v = a.S[run_slot(&a, j)];
        for (int q = 0; q < a.P; q++) inbox_row(a.base[q], a.P, par, a.rank)[j] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        for (int q = 0; q < a.P; q++) *(volatile u64 *)inbox_flag(a.base[q], a.P, par, a.rank) = epoch;
        for (int q = 0; q < a.P; q++) spin_until(inbox_flag(a.base[a.rank], a.P, par, q), epoch);
        __threadfence_system();
    }
    __syncthreads();
    for (int j = threadIdx.x; j < a.total; j += blockDim.x) {
        double s = 0.0;
        for (int q = 0; q < a.P; q++) s += __ldcg(inbox_row(a.base[a.rank], a.P, par, q) + j);
        a.S[run_slot(&a, j)] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        *a.epoch = epoch;
        atomicAdd(a.ns, now_ns() - t0);
    }
}

/* ---- regions: allocated here, opened by every other rank ---- */

/* Collective, entered by every rank or none (the callers agree first). The
 * region is zeroed on the engine's stream, and that finished before its
 * handle leaves this rank: the peers write flags into it from then on. */
static int region_open(dist_engine *d, ipc_region *g, size_t bytes, gs_error *err)
{
    cudaIpcMemHandle_t mine, all[GS_IPC_MAX];
    g->entered = 1;
    int status = CUDA_CALL(err, cudaMalloc((void **)&g->mine, bytes));
    g->bytes = bytes;
    if (status == GS_OK) status = CUDA_CALL(err, cudaMemsetAsync(g->mine, 0, bytes, tr_of(d)->main));
    if (status == GS_OK) status = CUDA_CALL(err, cudaStreamSynchronize(tr_of(d)->main));
    if (status == GS_OK) status = CUDA_CALL(err, cudaIpcGetMemHandle(&mine, g->mine));
    status = gs_dist_agree(status, err);
    if (status != GS_OK) return status;
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, d->comm);
    for (int q = 0; q < d->size && status == GS_OK; q++) {
        if (q == d->rank) {
            g->peer[q] = g->mine;
            continue;
        }
        status = CUDA_CALL(err, cudaIpcOpenMemHandle((void **)&g->peer[q], all[q],
                                                     cudaIpcMemLazyEnablePeerAccess));
        if (status != GS_OK) g->peer[q] = NULL; /* not opened: not closed */
    }
    return gs_dist_agree(status, err);
}

/* Collective over the ranks that entered region_open, which is all of them
 * or none: a rank without the region (its set-up failed before, or it never
 * had the state that holds g) takes no part, and neither does any other.
 * Every rank's kernels are done with the region before any handle closes
 * (first barrier), and every peer's handle is closed before the memory is
 * freed (second). */
static void region_close(dist_engine *d, ipc_region *g)
{
    gs_error *te = &gs_cuda_of(d->inner)->teardown;
    if (!g->entered) return;
    CUDA_TEARDOWN(te, cudaStreamSynchronize(tr_of(d)->main));
    MPI_Barrier(d->comm);
    for (int q = 0; q < d->size; q++)
        if (g->peer[q] && q != d->rank) CUDA_TEARDOWN(te, cudaIpcCloseMemHandle(g->peer[q]));
    MPI_Barrier(d->comm);
    if (g->mine) CUDA_TEARDOWN(te, cudaFree(g->mine));
    memset(g, 0, sizeof *g);
}

/* ---- the transport ---- */

/* GS_DIST_IPC_FAIL (src/engine/debug.h): this rank's set-up of `at` fails,
 * as its allocation would, leaving the state missing on this rank only. */
static int injected_failure(dist_engine *d, int at, gs_error *err)
{
    const gs_debug *dbg = gs_cuda_debug(d->inner);
    if (dbg->dist_ipc_fail != at || dbg->dist_ipc_fail_rank != d->rank) return GS_OK;
    return gs_error_set(err, GS_ERR_NOMEM, "rank %d: out of host memory (ipc %s, "
                        "GS_DIST_IPC_FAIL)", d->rank,
                        at == GS_DEBUG_IPC_FAIL_ENGINE ? "engine" : "matrix");
}

static int ipc_mat_init(dist_engine *d, dist_mat *M)
{
    int status = dist_cuda_mat_arrays(d, M); /* no send or halo buffers: the pack writes
                                               * into the neighbours' halos */
    cuda_mat *m = (cuda_mat *)M->transport;
    if (status == GS_OK) status = injected_failure(d, GS_DEBUG_IPC_FAIL_MATRIX, err_of(d));
    if (status == GS_OK) {
        m->ipc = (ipc_mat *)calloc(1, sizeof(ipc_mat));
        if (!m->ipc) status = gs_error_set(err_of(d), GS_ERR_NOMEM, "out of host memory (halo)");
    }
    status = gs_dist_agree(status, err_of(d));
    if (status != GS_OK) return status;
    ipc_mat *im = m->ipc;
    int32_t off_for[GS_IPC_MAX]; /* where rank q's entries start in this rank's halo */
    for (int q = 0; q < d->size; q++) off_for[q] = -1;
    for (int k = 0; k < M->n_recv; k++) off_for[M->recv_rank[k]] = M->recv_start[k];
    MPI_Alltoall(off_for, 1, MPI_INT32_T, im->dst_off, 1, MPI_INT32_T, d->comm);
    MPI_Allgather(&M->split.n_halo, 1, MPI_INT32_T, im->n_halo, 1, MPI_INT32_T, d->comm);
    return region_open(d, &im->reg, mat_region_bytes(M->split.n_halo, d->size), err_of(d));
}

void dist_ipc_mat_free(dist_engine *d, dist_mat *M)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    if (!m || !m->ipc) return;
    region_close(d, &m->ipc->reg);
    free(m->ipc);
    m->ipc = NULL;
}

static void ipc_mat_free(dist_engine *d, dist_mat *M)
{
    dist_ipc_mat_free(d, M);
    dist_cuda_mat_free(d, M);
}

static int ipc_halo_start(dist_engine *d, dist_mat *M, const gs_vec *x)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    ipc_mat *im = m->ipc;
    const int P = d->size;
    d->halo_bytes += 8.0 * M->split.n_halo;
    const int32_t n = M->send_start[M->n_send];
    if (n == 0) return GS_OK;
    ipc_pack_args a;
    memset(&a, 0, sizeof a);
    a.x = (const double *)x->d;
    a.idx = m->send_idx;
    a.n = n;
    a.n_seg = M->n_send;
    a.epoch = epoch_at(im->reg.mine, M->split.n_halo, P);
    a.done = done_at(im->reg.mine, M->split.n_halo, P);
    a.ns = tr_of(d)->ipc->local + 1;
    for (int k = 0; k <= M->n_send; k++) a.seg_start[k] = M->send_start[k];
    for (int k = 0; k < M->n_send; k++) {
        const int q = M->send_rank[k];
        char *base = im->reg.peer[q];
        a.dst[k] = (double *)base + im->dst_off[q];
        a.stride[k] = im->n_halo[q];
        a.flag[k] = arrived_at(base, im->n_halo[q]) + d->rank;
        a.ack[k] = ack_at(im->reg.mine, M->split.n_halo, P) + q;
    }
    const int blocks = (int)((n + 255) / 256 < 264 ? (n + 255) / 256 : 264);
    cuda_tr *t = tr_of(d);
    int status = GS_OK;
    if (t->comm != t->main) { /* overlapped: x is ready on main; the pack on comm */
        GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(t->arrived, t->main)));
        GS_TRY(CUDA_CALL(err_of(d), cudaStreamWaitEvent(t->comm, t->arrived, 0)));
    }
    GS_TRY(CUDA_LAUNCH(err_of(d), ipc_pack_kernel, blocks, 256, 0, t->comm, a));
    if (t->comm != t->main) GS_TRY(CUDA_CALL(err_of(d), cudaEventRecord(t->packed, t->comm)));
    m->ipc->packed = 1;
cleanup:
    return status;
}

static int ipc_halo_finish(dist_engine *d, dist_mat *M, gs_coef ka, gs_vec *y, const gs_vec *w,
                           int slot)
{
    cuda_mat *m = (cuda_mat *)M->transport;
    ipc_mat *im = m->ipc;
    const int P = d->size;
    const int32_t n = M->split.n_off_rows;
    ipc_wait_args s;
    memset(&s, 0, sizeof s);
    s.n_src = M->n_recv;
    s.epoch = epoch_at(im->reg.mine, M->split.n_halo, P);
    s.done = done_at(im->reg.mine, M->split.n_halo, P) + 1;
    s.halo = (const double *)im->reg.mine;
    s.n_halo = M->split.n_halo;
    s.ns = tr_of(d)->ipc->local + 1;
    for (int k = 0; k < M->n_recv; k++) {
        const int q = M->recv_rank[k];
        s.arrived[k] = arrived_at(im->reg.mine, M->split.n_halo) + q;
        s.ack[k] = ack_at(im->reg.peer[q], im->n_halo[q], P) + d->rank;
    }
    const int blocks = n > 0 ? (int)((n + 255) / 256) : 1; /* one at least: the wait, the acks */
    cuda_tr *t = tr_of(d);
    if (im->packed && t->comm != t->main) { /* main joins the pack's stream */
        const int status = CUDA_CALL(err_of(d), cudaStreamWaitEvent(t->main, t->packed, 0));
        if (status != GS_OK) return status;
    }
    im->packed = 0;
    return CUDA_LAUNCH(err_of(d), ipc_offblock_kernel, blocks, 256, 0, tr_of(d)->main, n,
                       (const int32_t *)m->off_rows, (const int64_t *)m->off_ptr,
                       (const int32_t *)m->off_col, (const double *)m->off_val, ka, y->d,
                       w ? (const double *)w->d : NULL, gs_cuda_of(d->inner)->S, slot, s);
}

/* One round: at most it->round (<= GS_IPC_RMAX) slots of the runs from
 * (run r, offset o); a run longer than that goes on in the next round. */
static int ipc_sum_round(dist_engine *d, const int *slot0, const int *count, int runs, int *r,
                         int *o)
{
    ipc_tr *it = tr_of(d)->ipc;
    const int P = d->size, cap = it->round;
    ipc_sum_args a;
    memset(&a, 0, sizeof a);
    a.S = gs_cuda_of(d->inner)->S;
    while (*r < runs && a.total < cap && a.n_runs < GS_DIST_PENDING) {
        const int take = count[*r] - *o < cap - a.total ? count[*r] - *o : cap - a.total;
        a.slot0[a.n_runs] = slot0[*r] + *o;
        a.count[a.n_runs++] = take;
        a.total += take;
        *o += take;
        if (*o == count[*r]) (*r)++, *o = 0;
    }
    for (int q = 0; q < P; q++) a.base[q] = it->inbox.peer[q];
    a.P = P;
    a.rank = d->rank;
    a.epoch = it->local;
    a.ns = it->local + 1;
    return CUDA_LAUNCH(err_of(d), ipc_sum_kernel, 1, 128, 0, tr_of(d)->main, a);
}

static int ipc_allreduce(dist_engine *d, const int *slot0, const int *count, int runs)
{
    int status = GS_OK, r = 0, o = 0;
    while (r < runs && status == GS_OK) status = ipc_sum_round(d, slot0, count, runs, &r, &o);
    return status;
}

/* After the engine's synchronisation: the kernels' communication time. */
static int ipc_collect(dist_engine *d)
{
    u64 ns = 0;
    u64 *dev = tr_of(d)->ipc->local + 1;
    const cudaStream_t s = tr_of(d)->main; /* after the kernels that add to it, not beside them */
    int status = CUDA_CALL(err_of(d), cudaMemcpyAsync(&ns, dev, sizeof ns, cudaMemcpyDeviceToHost, s));
    if (status == GS_OK) status = CUDA_CALL(err_of(d), cudaStreamSynchronize(s));
    if (status == GS_OK && ns) status = CUDA_CALL(err_of(d), cudaMemsetAsync(dev, 0, sizeof ns, s));
    d->comm_seconds += 1e-9 * (double)ns;
    return status;
}

const dist_transport dist_ipc_transport = {
    "ipc", ipc_mat_init, ipc_mat_free, ipc_halo_start, ipc_halo_finish,
    ipc_allreduce, ipc_collect, dist_cuda_tr_destroy, NULL, 1,
};

/* Possible where every rank is on this host, has a GPU of its own (the
 * caller's rule) and reaches every other rank's GPU by peer access. */
static int ipc_possible(dist_engine *d)
{
    MPI_Comm node;
    int node_size = 0, ok = d->size <= GS_IPC_MAX, dev = -1, all[GS_IPC_MAX];
    MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    ok = ok && node_size == d->size;
    if (cudaGetDevice(&dev) != cudaSuccess) ok = 0, dev = -1;
    int okall = 0;
    MPI_Allreduce(&ok, &okall, 1, MPI_INT, MPI_MIN, d->comm);
    if (!okall) return 0;
    MPI_Allgather(&dev, 1, MPI_INT, all, 1, MPI_INT, d->comm);
    for (int q = 0; q < d->size && ok; q++) {
        int can = 0;
        if (all[q] == dev) ok = q == d->rank; /* a shared GPU: not here */
        else ok = cudaDeviceCanAccessPeer(&can, dev, all[q]) == cudaSuccess && can;
    }
    MPI_Allreduce(&ok, &okall, 1, MPI_INT, MPI_MIN, d->comm);
    return okall;
}

int dist_ipc_create(dist_engine *d, int *made, gs_error *err)
{
    *made = 0;
    if (!ipc_possible(d)) return GS_OK;
    cuda_tr *t = tr_of(d);
    int status = injected_failure(d, GS_DEBUG_IPC_FAIL_ENGINE, err);
    if (status == GS_OK) {
        t->ipc = (ipc_tr *)calloc(1, sizeof(ipc_tr));
        if (!t->ipc) status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory (ipc)");
    }
    status = gs_dist_agree(status, err);
    if (status != GS_OK) return status;
    const int round = gs_cuda_debug(d->inner)->dist_ipc_round; /* tests: fewer a round */
    t->ipc->round = round > 0 && round < GS_IPC_RMAX ? round : GS_IPC_RMAX;
    const double t0 = MPI_Wtime();
    const size_t bytes = (size_t)2 * d->size * GS_IPC_RMAX * 8 + (size_t)2 * d->size * 8;
    status = CUDA_CALL(err, cudaMalloc((void **)&t->ipc->local, 2 * sizeof(u64)));
    if (status == GS_OK) /* on the stream of the kernels that use it (region_open waits) */
        status = CUDA_CALL(err, cudaMemsetAsync(t->ipc->local, 0, 2 * sizeof(u64), t->main));
    status = gs_dist_agree(status, err);
    if (status == GS_OK) status = region_open(d, &t->ipc->inbox, bytes, err);
    d->comm_setup_seconds = gs_dist_max(MPI_Wtime() - t0);
    *made = status == GS_OK;
    return status;
}

void dist_ipc_destroy(dist_engine *d)
{
    cuda_tr *t = tr_of(d);
    if (!t || !t->ipc) return;
    region_close(d, &t->ipc->inbox);
    if (t->ipc->local) CUDA_TEARDOWN(&gs_cuda_of(d->inner)->teardown, cudaFree(t->ipc->local));
    free(t->ipc);
    t->ipc = NULL;
}
