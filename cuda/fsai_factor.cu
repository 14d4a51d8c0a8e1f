/* fsai_factor.cu - gather of the dense local systems A[P_i,P_i] and their
 * batched Cholesky solves A[P_i,P_i] w = e_m, g_i = w / sqrt(w_m), on the
 * GPU. Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016,
 * sections 4.3 (gather: one thread per element, a scan of the system sizes
 * and a binary search, Fig. 1) and 4.4 (one thread block per system, sizes
 * fixed at compile time, data in registers / shared memory).
 *
 * Storage: system j holds the lower triangle of A[P,P] packed by rows,
 * entry (r, c), c <= r, at r (r + 1) / 2 + c. Systems are processed in the
 * order of their size class (stable, so rows ascend within a class) and in
 * chunks whose packed size stays within a bounded buffer.
 *
 * The factorisation is the outer-product (right-looking) Cholesky of the
 * paper without the square roots: step J replaces a_rc by
 * a_rc - (a_rJ / a_JJ) a_cJ for J < c <= r, leaving U (lower, U_JJ = D_J the
 * pivots) with A = U D^-1 U^T. Column J is only read during step J, so one
 * barrier per step suffices. L = U D^-1/2, and (3.6)-(3.7) give
 * g = w / sqrt(w_m) = L^-T e_m, i.e. U^T g = sqrt(D_m) e_m: back substitution
 * g_K = ([K = m-1] sqrt(D_K) - sum_{i>K} U_iK g_i) / D_K.
 *
 * Size classes: m <= 32 one warp per system (rows in registers, shuffles);
 * m <= 64, 128, 256 one block of 64, 128, 256 threads per system with the
 * triangle in shared memory when it fits the device (fp64 at 256 does not on
 * an H100/H200); otherwise, and for m > 256, the same block algorithm on the
 * triangle in place in global memory (L1/L2 resident), which never fails. */
#include <cub/cub.cuh>

#include "fsai_cuda.h"

#define FULL_MASK 0xffffffffu
#define FACTOR_CLASSES 5             /* <= 32, <= 64, <= 128, <= 256, larger */
#define WARP_SYSTEMS_PER_BLOCK 4
#define GATHER_THREADS 256
#define GLOBAL_THREADS 256
#define DENSE_BUDGET_MAX ((size_t)1 << 30)
#define DENSE_BUDGET_MIN ((size_t)64 << 20)

static __host__ __device__ inline int64_t tri(int64_t r) { return r * (r + 1) / 2; }

/* Size class of a system of m rows. */
static __device__ inline int factor_class(int64_t m)
{
    return m <= 32 ? 0 : m <= 64 ? 1 : m <= 128 ? 2 : m <= 256 ? 3 : 4;
}

__global__ void factor_classify_kernel(int32_t n, const int64_t *__restrict__ s_rp,
                                       uint8_t *__restrict__ cls, int32_t *__restrict__ rows,
                                       int *__restrict__ counts, int *m_max)
{
    const int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    const int64_t m = s_rp[i + 1] - s_rp[i];
    const int c = factor_class(m);
    cls[i] = (uint8_t)c;
    rows[i] = i;
    atomicAdd(&counts[c], 1);
    atomicMax(m_max, (int)m);
}

/* sizes[j] = m (m + 1) / 2 of the system of row order[j]. */
__global__ void factor_sizes_kernel(int32_t n, const int64_t *__restrict__ s_rp,
                                    const int32_t *__restrict__ order, int64_t *__restrict__ sizes)
{
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= n) return;
    const int32_t i = order[j];
    sizes[j] = tri(s_rp[i + 1] - s_rp[i]);
}

/* Chunk b starts at the first system whose packed offset is >= b * budget:
 * first[b] for every b the offsets of systems j-1 and j straddle. */
__global__ void factor_chunks_kernel(int32_t n, const int64_t *__restrict__ off, int64_t budget,
                                     int32_t *__restrict__ first)
{
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= n) return;
    const int64_t b = off[j] / budget, prev = j > 0 ? off[j - 1] / budget : -1;
    for (int64_t q = prev + 1; q <= b; q++) first[q] = j;
}

/* Largest j in [lo, hi) with off[j] <= x. */
static __device__ inline int32_t system_of(const int64_t *__restrict__ off, int32_t lo,
                                           int32_t hi, int64_t x)
{
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* One thread per element of the chunk's packed triangles (the paper's Fig. 1
 * mapping): its system by a binary search of the size scan (narrowed to the
 * few systems its block spans by factor_block_first_kernel: a search over the
 * whole chunk, per warp, made the gather latency-bound), its (r, c) from the
 * packed index, its value a_{P_r,P_c} by a binary search of row P_r of A. */
/* first[b] = the system of element b * GATHER_THREADS of the chunk (the
 * systems [j0, j1) write the block starts they contain). */
__global__ void factor_block_first_kernel(int32_t j0, int32_t j1, const int64_t *__restrict__ off,
                                          int32_t *__restrict__ first)
{
    const int32_t j = j0 + (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= j1) return;
    const int64_t lo = off[j] - off[j0], hi = off[j + 1] - off[j0];
    for (int64_t b = (lo + GATHER_THREADS - 1) / GATHER_THREADS; b * GATHER_THREADS < hi; b++)
        first[b] = j;
}

template <typename T>
__global__ void __launch_bounds__(GATHER_THREADS)
    factor_gather_kernel(int32_t j0, int32_t j1, const int64_t *__restrict__ off,
                         const int32_t *__restrict__ first, const int32_t *__restrict__ order,
                         const int64_t *__restrict__ s_rp, const int32_t *__restrict__ s_col,
                         const int64_t *__restrict__ a_rp, const int32_t *__restrict__ a_col,
                         const double *__restrict__ a_val, T *__restrict__ buf)
{
    const int64_t base = off[j0], count = off[j1] - base;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    /* the block's elements lie in systems first[b] .. first[b + 1] */
    const int64_t nb = (count + GATHER_THREADS - 1) / GATHER_THREADS;
    const int32_t lo = first[blockIdx.x];
    const int32_t hi = blockIdx.x + 1 < nb ? first[blockIdx.x + 1] + 1 : j1;
    const int32_t j = system_of(off, lo, hi, base + t);
    const int64_t q = base + t - off[j];
    int64_t r = (int64_t)((sqrtf(8.0f * (float)q + 1.0f) - 1.0f) * 0.5f);
    while (tri(r) > q) r--;
    while (tri(r + 1) <= q) r++;
    const int64_t cidx = q - tri(r);
    const int32_t *P = s_col + s_rp[order[j]];
    const int32_t pr = P[r], pc = P[cidx];
    int64_t a = a_rp[pr], b = a_rp[pr + 1] - 1;
    double v = 0.0;
    while (a <= b) {
        const int64_t mid = a + (b - a) / 2;
        const int32_t cm = a_col[mid];
        if (cm == pc) {
            v = a_val[mid];
            break;
        }
        if (cm < pc) a = mid + 1;
        else b = mid - 1;
    }
    buf[t] = (T)v;
}

/* Record the first failing pivot: (row << 32) | pivot, smallest row wins. */
static __device__ inline void factor_fail(unsigned long long *fail, int32_t row, int64_t pivot)
{
    atomicMin(fail, ((unsigned long long)(uint32_t)row << 32) | (unsigned long long)pivot);
}

template <typename T>
static __device__ inline bool pivot_ok(T d)
{
    return d > (T)0 && isfinite(d);
}

/* m <= 32: one warp per system, the triangle in a 32 x 33 tile of shared
 * memory (padded: lane r's row r and the broadcast column entries are free of
 * bank conflicts), lane r owns row r. Registers instead (the paper's choice)
 * made this kernel need 214 registers a thread in fp64: 8 warps per SM, and
 * latency-bound; the tile keeps 24 warps per SM resident. */
template <typename T>
__global__ void __launch_bounds__(32 * WARP_SYSTEMS_PER_BLOCK)
    factor_warp_kernel(int32_t j0, int32_t j1, int32_t chunk0, const int64_t *__restrict__ off,
                       const int32_t *__restrict__ order, const int64_t *__restrict__ s_rp,
                       const T *__restrict__ buf, T *__restrict__ g_out,
                       unsigned long long *fail)
{
    __shared__ T tile[WARP_SYSTEMS_PER_BLOCK][32][33];
    const int lane = threadIdx.x & 31;
    const int32_t j = j0 + (int32_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (j >= j1) return; /* the whole warp: no block-wide barrier below */
    T(*a)[33] = tile[threadIdx.x >> 5];
    const int32_t row = order[j];
    const int m = (int)(s_rp[row + 1] - s_rp[row]);
    const T *sys = buf + (off[j] - off[chunk0]);
    for (int r = 0; r < m; r++)                       /* coalesced, row by row */
        if (lane <= r) a[r][lane] = sys[tri(r) + lane];
    __syncwarp();
    T dinv = 0;
    for (int J = 0; J < m; J++) {                     /* a_rc -= (a_rJ / a_JJ) a_cJ */
        const T piv = a[J][J];
        if (!pivot_ok(piv)) {
            if (lane == 0) factor_fail(fail, row, J);
            return;
        }
        const T inv = (T)1 / piv;
        if (lane == J) dinv = inv;
        if (lane > J && lane < m) {
            const T f = a[lane][J] * inv;
            for (int c = J + 1; c <= lane; c++) a[lane][c] -= f * a[c][J];
        }
        __syncwarp();
    }
    T g = 0, acc = 0;                                 /* acc_i = sum_{k>i} U_ki g_k */
    for (int K = m - 1; K >= 0; K--) {
        if (lane == K) g = ((K == m - 1 ? sqrt(a[K][K]) : (T)0) - acc) * dinv;
        const T gK = __shfl_sync(FULL_MASK, g, K);
        if (lane < K) acc += a[K][lane] * gK;
    }
    if (lane < m) g_out[s_rp[row] + lane] = g;
}

/* One block of BT threads per system; for the back substitution thread t
 * owns rows t, t + BT, ...
 * SHARED: the triangle and the solution in shared memory (copied in and
 * out); else in place: the triangle in buf, the solution in g_out. */
template <typename T, int BT, bool SHARED>
__global__ void __launch_bounds__(BT)
    factor_block_kernel(int32_t j0, int32_t chunk0, const int64_t *__restrict__ off,
                        const int32_t *__restrict__ order, const int64_t *__restrict__ s_rp,
                        T *__restrict__ buf, T *__restrict__ g_out, unsigned long long *fail)
{
    extern __shared__ unsigned char factor_smem[];
    /* the trailing update as a TY x TX grid of threads over (row, column) of
     * the trailing triangle: balanced, where one thread per row did r - J
     * updates (the last row's thread set the pace, and half the block idled) */
    constexpr int TX = BT >= 256 ? 16 : 8, TY = BT / TX;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int32_t j = j0 + (int32_t)blockIdx.x;
    const int32_t row = order[j];
    const int64_t m = s_rp[row + 1] - s_rp[row];
    T *sys = buf + (off[j] - off[chunk0]);
    T *a = SHARED ? (T *)factor_smem : sys;
    T *y = SHARED ? (T *)factor_smem + tri(m) : g_out + s_rp[row];
    if (SHARED) {
        for (int64_t q = threadIdx.x; q < tri(m); q += BT) a[q] = sys[q];
        __syncthreads();
    }
    for (int64_t J = 0; J < m; J++) {
        const T piv = a[tri(J) + J];
        if (!pivot_ok(piv)) {
            if (threadIdx.x == 0) factor_fail(fail, row, J);
            return;
        }
        const T inv = (T)1 / piv;
        for (int64_t r = J + 1 + ty; r < m; r += TY) {   /* thread (ty, tx): r = ty, c = tx mod */
            T *ar = a + tri(r);
            const T f = ar[J] * inv;
            for (int64_t c = J + 1 + tx; c <= r; c += TX) ar[c] -= f * a[tri(c) + J];
        }
        __syncthreads();
    }
    for (int64_t r = threadIdx.x; r < m; r += BT) y[r] = (T)0; /* y_r: sum_{i>r} U_ir g_i */
    __syncthreads();
    for (int64_t K = m - 1; K >= 0; K--) {
        if (K % BT == threadIdx.x) {
            const T d = a[tri(K) + K];
            y[K] = ((K == m - 1 ? sqrt(d) : (T)0) - y[K]) / d;       /* now g_K */
        }
        __syncthreads();
        const T gK = y[K];
        for (int64_t r = threadIdx.x; r < K; r += BT) y[r] += a[tri(K) + r] * gK;
        /* no barrier: y[K-1] is next written and read by its owner only */
    }
    if (SHARED) {
        __syncthreads();
        for (int64_t r = threadIdx.x; r < m; r += BT) g_out[s_rp[row] + r] = y[r];
    }
}

/* off[first[b]] for b <= K (first[K] = n): the chunks' packed offsets. */
__global__ void factor_chunk_offsets_kernel(int32_t K, const int32_t *__restrict__ first,
                                            const int64_t *__restrict__ off,
                                            int64_t *__restrict__ out)
{
    const int32_t b = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (b <= K) out[b] = off[first[b]];
}

/* The work list: rows by size class, their packed offsets, the chunks. */
typedef struct factor_plan {
    int32_t n;
    uint8_t *cls, *cls_sorted;
    int32_t *rows, *order;
    int *counters;        /* device: FACTOR_CLASSES counts, then m_max */
    int64_t *sizes, *off; /* n + 1 each */
    void *tmp;
    size_t tmp_bytes;
    int counts[FACTOR_CLASSES + 1];
    int32_t K;            /* chunks */
    int32_t *first;       /* host, K + 1 */
    int64_t *first_off;   /* host, K + 1 */
    int64_t budget;       /* entries a chunk starts within */
    int64_t cap;          /* entries the buffer holds */
} factor_plan;

static void factor_plan_free(gs_engine *e, factor_plan *p)
{
    const size_t n = (size_t)p->n;
    gs_cuda_free(e, p->cls, n);
    gs_cuda_free(e, p->cls_sorted, n);
    gs_cuda_free(e, p->rows, n * sizeof(int32_t));
    gs_cuda_free(e, p->order, n * sizeof(int32_t));
    gs_cuda_free(e, p->counters, (FACTOR_CLASSES + 1) * sizeof(int));
    gs_cuda_free(e, p->sizes, (n + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->off, (n + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->tmp, p->tmp_bytes);
    free(p->first);
    free(p->first_off);
}

/* Classes, the stable sort of the rows by class, the size scan. */
static int factor_plan_order(gs_engine *e, const fsai_dcsr *S, factor_plan *p)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = S->n;
    int status = GS_OK;
    size_t bytes = 0;
    GS_TRY(gs_cuda_alloc(e, &p->cls, (size_t)n, "fsai factor: size classes"));
    GS_TRY(gs_cuda_alloc(e, &p->cls_sorted, (size_t)n, "fsai factor: sorted classes"));
    GS_TRY(gs_cuda_alloc(e, &p->rows, (size_t)n * sizeof(int32_t), "fsai factor: rows"));
    GS_TRY(gs_cuda_alloc(e, &p->order, (size_t)n * sizeof(int32_t), "fsai factor: row order"));
    GS_TRY(gs_cuda_alloc(e, &p->counters, (FACTOR_CLASSES + 1) * sizeof(int), "fsai factor: counts"));
    GS_TRY(gs_cuda_alloc(e, &p->sizes, ((size_t)n + 1) * sizeof(int64_t), "fsai factor: sizes"));
    GS_TRY(gs_cuda_alloc(e, &p->off, ((size_t)n + 1) * sizeof(int64_t), "fsai factor: offsets"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(p->counters, 0, (FACTOR_CLASSES + 1) * sizeof(int),
                                              c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_classify_kernel, fsai_blocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)S->rp, p->cls, p->rows, p->counters,
                       p->counters + FACTOR_CLASSES));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs((void *)NULL, bytes,
                                                              (const uint8_t *)p->cls, p->cls_sorted,
                                                              (const int32_t *)p->rows, p->order,
                                                              n, 0, 3, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &p->tmp, bytes, "fsai factor: sort workspace"));
    p->tmp_bytes = bytes;
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(p->tmp, bytes, (const uint8_t *)p->cls,
                                                              p->cls_sorted, (const int32_t *)p->rows,
                                                              p->order, n, 0, 3, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_sizes_kernel, fsai_blocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)S->rp, (const int32_t *)p->order, p->sizes));
    GS_TRY(fsai_exclusive_scan(e, p->sizes, p->off, n));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(p->counts, p->counters, sizeof p->counts,
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
cleanup:
    return status;
}

/* Chunks of the work list: chunk b starts at the first system whose packed
 * offset reaches b * budget, so it holds at most budget + one system. The
 * budget: the packed values of all systems if small, else about the bytes
 * of Ĝ's values (so that the setup's peak memory stays a small multiple of
 * the factor's), within [64 MiB, 1 GiB] and a quarter of free memory. */
static int factor_plan_chunks(gs_engine *e, const fsai_dcsr *S, size_t vsize, factor_plan *p)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = S->n;
    int64_t last = 0, total = 0;
    int32_t *d_first = NULL;
    int64_t *d_first_off = NULL;
    int status = GS_OK;
    size_t free_bytes = 0, total_bytes = 0;
    const int64_t m_max = p->counts[FACTOR_CLASSES];
    if (n == 0) return GS_OK;
    GS_TRY(fsai_read_int64(e, p->off + n - 1, &last));
    GS_TRY(fsai_read_int64(e, p->off + n, &total));
    GS_TRY(CUDA_CALL(&e->err, cudaMemGetInfo(&free_bytes, &total_bytes)));
    {
        size_t b = (size_t)S->nnz * vsize;
        if (b < DENSE_BUDGET_MIN) b = DENSE_BUDGET_MIN;
        if (b > DENSE_BUDGET_MAX) b = DENSE_BUDGET_MAX;
        if (b > free_bytes / 4) b = free_bytes / 4;
        p->budget = (int64_t)(b / vsize) > 1 ? (int64_t)(b / vsize) : 1;
    }
    p->K = (int32_t)(last / p->budget + 1);
    p->cap = p->budget + tri(m_max);
    if (p->cap > total) p->cap = total;
    p->first = (int32_t *)gs_malloc(((size_t)p->K + 1) * sizeof(int32_t), "fsai factor: chunks", &e->err);
    p->first_off = (int64_t *)gs_malloc(((size_t)p->K + 1) * sizeof(int64_t), "fsai factor: chunks", &e->err);
    if (!p->first || !p->first_off) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(gs_cuda_alloc(e, &d_first, ((size_t)p->K + 1) * sizeof(int32_t), "fsai factor: chunks"));
    GS_TRY(gs_cuda_alloc(e, &d_first_off, ((size_t)p->K + 1) * sizeof(int64_t), "fsai factor: chunks"));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_chunks_kernel, fsai_blocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)p->off, p->budget, d_first));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_first + p->K, &n, sizeof(int32_t),
                                              cudaMemcpyHostToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_chunk_offsets_kernel, fsai_blocks(p->K + 1, 256), 256, 0,
                       c->stream, p->K, (const int32_t *)d_first, (const int64_t *)p->off,
                       d_first_off));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(p->first, d_first, ((size_t)p->K + 1) * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(p->first_off, d_first_off,
                                              ((size_t)p->K + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
cleanup:
    gs_cuda_free(e, d_first, ((size_t)p->K + 1) * sizeof(int32_t));
    gs_cuda_free(e, d_first_off, ((size_t)p->K + 1) * sizeof(int64_t));
    return status;
}

/* Systems [j0, j1) of size class BT/2 < m <= BT: one block each, the
 * triangle in shared memory when it fits the device, else (and for BT > 256,
 * any m) in place in global memory. */
template <typename T, int BT>
static int factor_launch_block(gs_engine *e, int32_t j0, int32_t j1, int32_t chunk0,
                               const factor_plan *p, const int64_t *s_rp, T *buf, T *g,
                               unsigned long long *fail, size_t smem_optin)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    if constexpr (BT <= 256) {
        const size_t smem = (size_t)(tri(BT) + BT) * sizeof(T);
        if (smem <= smem_optin) {
            auto kernel = factor_block_kernel<T, BT, true>;
            GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute(
                                          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)smem)));
            return CUDA_LAUNCH(&e->err, kernel, j1 - j0, BT, smem, c->stream, j0, chunk0,
                               (const int64_t *)p->off, (const int32_t *)p->order, s_rp, buf, g,
                               fail);
        }
    }
    {
        auto kernel = factor_block_kernel<T, GLOBAL_THREADS, false>;
        GS_TRY(CUDA_LAUNCH(&e->err, kernel, j1 - j0, GLOBAL_THREADS, 0, c->stream, j0, chunk0,
                           (const int64_t *)p->off, (const int32_t *)p->order, s_rp, buf, g, fail));
    }
cleanup:
    return status;
}

/* Gather and factor the chunks: stages "gather" and "factorisation". */
template <typename T>
static int factor_run(gs_pc *pc, const fsai_dcsr *A, const fsai_dcsr *S, const factor_plan *p,
                      T *g, unsigned long long *fail)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    T *buf = NULL;
    int32_t *block_first = NULL;
    int status = GS_OK, optin = 0;
    const size_t first_bytes = ((size_t)fsai_blocks(p->cap, GATHER_THREADS) + 1) * sizeof(int32_t);
    int32_t class_start[FACTOR_CLASSES + 1] = {};
    for (int k = 0; k < FACTOR_CLASSES; k++) class_start[k + 1] = class_start[k] + p->counts[k];
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                     c->device)));
    GS_TRY(gs_cuda_alloc(e, &buf, (size_t)p->cap * sizeof(T), "fsai factor: dense local systems"));
    GS_TRY(gs_cuda_alloc(e, &block_first, first_bytes, "fsai factor: gather block starts"));
    for (int32_t b = 0; b < p->K; b++) {
        const int32_t j0 = p->first[b], j1 = p->first[b + 1];
        const int64_t count = p->first_off[b + 1] - p->first_off[b];
        if (j0 >= j1) continue;
        double t0 = gs_pc_stage_begin(pc);
        GS_TRY(CUDA_LAUNCH(&e->err, factor_block_first_kernel, fsai_blocks(j1 - j0, 256), 256, 0,
                           c->stream, j0, j1, (const int64_t *)p->off, block_first));
        GS_TRY(CUDA_LAUNCH(&e->err, factor_gather_kernel<T>, fsai_blocks(count, GATHER_THREADS),
                           GATHER_THREADS, 0, c->stream, j0, j1, (const int64_t *)p->off,
                           (const int32_t *)block_first, (const int32_t *)p->order,
                           (const int64_t *)S->rp,
                           (const int32_t *)S->col, (const int64_t *)A->rp,
                           (const int32_t *)A->col, (const double *)A->val, buf));
        GS_TRY(gs_pc_stage_end(pc, "gather", t0));
        t0 = gs_pc_stage_begin(pc);
        for (int k = 0; k < FACTOR_CLASSES; k++) {
            const int32_t a = j0 > class_start[k] ? j0 : class_start[k];
            const int32_t z = j1 < class_start[k + 1] ? j1 : class_start[k + 1];
            if (a >= z) continue;
            if (k == 0)
                GS_TRY(CUDA_LAUNCH(&e->err, factor_warp_kernel<T>,
                                   fsai_blocks(z - a, WARP_SYSTEMS_PER_BLOCK),
                                   32 * WARP_SYSTEMS_PER_BLOCK, 0, c->stream, a, z, j0,
                                   (const int64_t *)p->off, (const int32_t *)p->order,
                                   (const int64_t *)S->rp, (const T *)buf, g, fail));
            else if (k == 1)
                GS_TRY((factor_launch_block<T, 64>(e, a, z, j0, p, S->rp, buf, g, fail, optin)));
            else if (k == 2)
                GS_TRY((factor_launch_block<T, 128>(e, a, z, j0, p, S->rp, buf, g, fail, optin)));
            else if (k == 3)
                GS_TRY((factor_launch_block<T, 256>(e, a, z, j0, p, S->rp, buf, g, fail, optin)));
            else
                GS_TRY((factor_launch_block<T, 257>(e, a, z, j0, p, S->rp, buf, g, fail, optin)));
        }
        GS_TRY(gs_pc_stage_end(pc, "factorisation", t0));
    }
cleanup:
    if (c->stream) cudaStreamSynchronize(c->stream); /* buf idle before the free */
    gs_cuda_free(e, buf, (size_t)p->cap * sizeof(T));
    gs_cuda_free(e, block_first, first_bytes);
    return status;
}

/* The smallest failing row's message, as the CPU reference words it. */
static int factor_failure(gs_engine *e, const fsai_dcsr *S, unsigned long long key, gs_error *err)
{
    const int32_t row = (int32_t)(key >> 32), pivot = (int32_t)(key & 0xffffffffu);
    int64_t p0 = 0, p1 = 0;
    int32_t col = 0;
    int status = GS_OK;
    GS_TRY(fsai_read_int64(e, S->rp + row, &p0));
    GS_TRY(fsai_read_int64(e, S->rp + row + 1, &p1));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(&col, S->col + p0 + pivot, sizeof col, cudaMemcpyDeviceToHost)));
    status = gs_error_set(err, GS_ERR_NUMERIC,
                          "fsai: the local system A[P_i,P_i] of row %d (%d x %d) is not positive "
                          "definite: its Cholesky pivot %d (column %d) is not positive, so A is "
                          "not SPD",
                          (int)row + 1, (int)(p1 - p0), (int)(p1 - p0), (int)pivot + 1, (int)col + 1);
cleanup:
    return status;
}

int fsai_cuda_factor(gs_pc *pc, const fsai_dcsr *A, fsai_dcsr *S, gs_precision prec,
                     int64_t *m_max, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t vsize = prec == GS_FP32 ? sizeof(float) : sizeof(double);
    factor_plan p = {};
    unsigned long long *d_fail = NULL, fail = ~0ull;
    void *g = NULL;
    int status = GS_OK;
    p.n = S->n;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(factor_plan_order(e, S, &p));
    *m_max = p.counts[FACTOR_CLASSES];
    GS_TRY(factor_plan_chunks(e, S, vsize, &p));
    GS_TRY(gs_cuda_alloc(e, &g, (size_t)S->nnz * vsize, "fsai: values of G before the postfilter"));
    GS_TRY(gs_cuda_alloc(e, &d_fail, sizeof fail, "fsai factor: failure record"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_fail, &fail, sizeof fail, cudaMemcpyHostToDevice,
                                              c->stream)));
    GS_TRY(gs_pc_stage_end(pc, "gather", t0));
    if (prec == GS_FP32) GS_TRY(factor_run<float>(pc, A, S, &p, (float *)g, d_fail));
    else GS_TRY(factor_run<double>(pc, A, S, &p, (double *)g, d_fail));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&fail, d_fail, sizeof fail, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    if (fail != ~0ull) GS_TRY(factor_failure(e, S, fail, err));
    S->val = g;
    S->vsize = vsize;
    g = NULL;
cleanup:
    gs_cuda_free(e, g, (size_t)S->nnz * vsize);
    gs_cuda_free(e, d_fail, sizeof fail);
    factor_plan_free(e, &p);
    return status;
}
