/* trisolve_blocks.cu - block substitution: a thread block a chunk of rows, the dependencies
 * inside the chunk resolved in shared memory, the ones on earlier chunks by waiting on x
 * (issue 33; the blocking idea of Lu, Niu, Liu, "Efficient block algorithms for parallel
 * sparse triangular solve", ICPP 2020, with the sync-free waits of Liu et al., Euro-Par
 * 2016, between the blocks).
 *
 * Why: the sync-free solve (trisolve_syncfree.cu) costs about one trip through L2 a level
 * (a row's store, then its reader's load), 1-2.5 us; a 2M-row 3D grid has 382 levels, a
 * shell matrix a thousand of a few rows each. Inside a thread block a level costs a
 * barrier and shared-memory reads instead. Measured (H200, docs/perf-notebook.md, issue 33):
 * a step still costs about 0.6 us (a 20,000-level chain: 12 ms a solve against the
 * sync-free 48 ms); with no barrier, lanes waiting on shared memory instead, it cost more
 * (the chain 15 ms, poisson3d:128 3.5x slower), so the steps keep their barrier.
 *
 * Order: positions p = 0..n-1 put the rows in an order in which every row comes after the
 * rows it depends on, cut into chunks of W consecutive positions; within a chunk the rows
 * go by level, and the rows of one level of a chunk form a step, a __syncthreads between
 * two. Let d = i (lower) or n - 1 - i (upper), the dependency order, s = d / S the row's
 * super-chunk (S consecutive rows) and b = level / H its band (H levels). The order is the
 * rows sorted by the key (s + b, s, d). Every dependency j of row i has d_j < d_i and
 * level_j < level_i, so s_j <= s_i and b_j <= b_i: its key is not larger and, where equal,
 * d breaks the tie: the order is topological. Sorting by s + b first puts the pieces
 * (s, b) that can run at the same time, the wavefront of the (s, b) grid, next to each
 * other, so the blocks resident at once (in ticket order) work side by side instead of
 * waiting on each other (sorted by s first, the resident window held a few super-chunks,
 * whose bands run one after another: 2-4x slower on poisson3d:128, H200).
 * S = W, H = infinity gives chunks of consecutive rows (a 2D grid's lines: most
 * dependencies inside); S = n, H = 1 the level order (the sync-free solve's). A 3D grid's
 * rows depend on the plane below, so S spans planes (the rule takes S from the rows'
 * dependency distances) and the bands keep a chunk to a few levels of them.
 *
 * No deadlock: a block draws a ticket (state[0]) when it starts and takes the chunk of that
 * number. It waits only on rows of earlier chunks, held by blocks that drew earlier tickets
 * and so are resident or done, or on its own earlier steps. By induction on the chunk, every
 * wait ends, whatever order the hardware starts blocks in. The flag is the value, as in the
 * sync-free solve: x is filled with the unset pattern (NaN bytes) before, x_j written once
 * by a relaxed atomic store, a computed value equal to the pattern stored as the canonical
 * NaN.
 *
 * Packed values: the values are copied when the scheme is prepared, so a caller that writes
 * new values into the same array must call gs_dtri_free_blocks and prepare again (the solve
 * checks only that the pointer and unit flag are the packed ones; mic writes its factor's
 * values before it prepares). The solve reads the rows in position order from a copy made at
 * the analysis (blk_col, blk_val: K slots a position, the first K dependencies; ovf_*: the rest;
 * blk_diag: the diagonal). Each dependency's column is coded: c >= 0 is row c of an earlier
 * chunk (read from x), c < 0 (not PAD) the chunk's own slot -c - 1 (read from shared
 * memory). A block first copies its chunk's slots, diagonal, s_i b_i and step bounds into
 * shared memory (coalesced, one pass): a step then reads nothing from global memory but the
 * x_j of earlier chunks, loaded a step ahead (mostly written long before; re-read with a
 * wait where not).
 *
 * Fused as the sync-free solve (gs_dtri_fused): the dot w . x, the block's rows summed at
 * its end into partials[ticket], the last block adding them in ticket order (the same bits
 * every run), and the fill of the next solve's x, a store per row in the first pass. */
#include <cub/cub.cuh>

#include "trisolve_common.cuh"

#define BLOCKS_THREADS 512                  /* at most; blk_threads picks */
#define GS_DTRI_PAD INT32_MIN               /* an empty slot */
#define BLOCKS_SMEM_BUDGET (160 * 1024)     /* shared memory a block (one a SM) */
#define FULL_MASK 0xffffffffu

/* Shared bytes a chunk row: x, s b, diagonal (8 each), K slots (12 each), its row, step
 * and overflow bounds (4 each). */
static __host__ __device__ inline size_t blk_row_bytes(int K)
{
    return 24 + 12 * (size_t)K + 12;
}

/* ------------------------------------------------------------- the analysis */

static __device__ inline bool blk_depends(bool upper, int32_t i, int32_t j)
{
    return upper ? j > i : j < i;
}

/* hist[b] += rows whose farthest dependency lies 2^b .. 2^(b+1) - 1 rows away (b = 0: none
 * or one row). */
__global__ void blk_span_kernel(int32_t n, bool upper, const int64_t *__restrict__ rp,
                                const int32_t *__restrict__ col, unsigned *hist)
{
    __shared__ unsigned h[32];
    if (threadIdx.x < 32) h[threadIdx.x] = 0;
    __syncthreads();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int64_t span = 1;
        for (int64_t q = rp[i]; q < rp[i + 1]; q++) {
            const int32_t j = col[q];
            if (blk_depends(upper, (int32_t)i, j)) {
                const int64_t d = upper ? j - i : i - j;
                span = d > span ? d : span;
            }
        }
        atomicAdd(&h[63 - __clzll((unsigned long long)span)], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32 && h[threadIdx.x]) atomicAdd(&hist[threadIdx.x], h[threadIdx.x]);
}

/* key[k] = (s + b) << 32 | s for the row of dependency order d = k, s = d / S its
 * super-chunk, b = level / H its band; rows[k] its row. */
__global__ void blk_band_keys_kernel(int32_t n, bool upper, int64_t S, int32_t H,
                                     const int32_t *__restrict__ level,
                                     unsigned long long *__restrict__ key, int32_t *__restrict__ rows)
{
    const int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= n) return;
    const int32_t i = upper ? (int32_t)(n - 1 - d) : (int32_t)d;
    const unsigned long long sc = (unsigned long long)(d / S), band = (unsigned)(level[i] / H);
    key[d] = (sc + band) << 32 | sc;
    rows[d] = i;
}

/* key[p] = (p / W) << 32 | level of the row at p (the chunks, then levels within). */
__global__ void blk_chunk_keys_kernel(int32_t n, int32_t W, const int32_t *__restrict__ rows,
                                      const int32_t *__restrict__ level,
                                      unsigned long long *__restrict__ key)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) key[p] = (unsigned long long)(p / W) << 32 | (unsigned)level[rows[p]];
}

/* flag[p] = 1 where a step starts (the sorted key changes). */
__global__ void blk_flag_kernel(int32_t n, const unsigned long long *__restrict__ key,
                                int32_t *__restrict__ flag)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) flag[p] = p == 0 || key[p] != key[p - 1];
}

/* step_ptr and chunk_step from the step numbers sid (the flags' exclusive scan); the
 * position p of row blk_row[p] into posof. */
__global__ void blk_steps_kernel(int32_t n, int32_t W, int32_t n_chunks,
                                 const int32_t *__restrict__ flag, const int32_t *__restrict__ sid,
                                 const int32_t *__restrict__ rows, int32_t *__restrict__ step_ptr,
                                 int32_t *__restrict__ chunk_step, int32_t *__restrict__ posof)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    if (flag[p]) step_ptr[sid[p]] = (int32_t)p;
    if (p % W == 0) chunk_step[p / W] = sid[p]; /* a chunk's first position starts a step */
    posof[rows[p]] = (int32_t)p;
    if (p == n - 1) {
        const int32_t steps = sid[p] + flag[p];
        step_ptr[steps] = n;
        chunk_step[n_chunks] = steps;
    }
}

/* over[p] = the dependencies of position p's row past the first K. */
__global__ void blk_count_kernel(int32_t n, bool upper, int K, const int32_t *__restrict__ rows,
                                 const int64_t *__restrict__ rp, const int32_t *__restrict__ col,
                                 int64_t *__restrict__ over)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p > n) return;
    if (p == n) { /* the exclusive scan's total lands at over[n] */
        over[n] = 0;
        return;
    }
    const int32_t i = rows[p];
    int64_t deps = 0;
    for (int64_t q = rp[i]; q < rp[i + 1]; q++) deps += blk_depends(upper, i, col[q]);
    over[p] = deps > K ? deps - K : 0;
}

/* The packed values of position p, a thread a position (a setup pass, once). */
__global__ void blk_pack_kernel(int32_t n, bool upper, int32_t W, int K, bool unit,
                                const int32_t *__restrict__ rows, const int32_t *__restrict__ posof,
                                const int64_t *__restrict__ rp, const int32_t *__restrict__ col,
                                const double *__restrict__ val, const int64_t *__restrict__ ovf_ptr,
                                int32_t *__restrict__ bcol, double *__restrict__ bval,
                                double *__restrict__ bdiag, int32_t *__restrict__ ocol,
                                double *__restrict__ oval)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int32_t i = rows[p];
    const int64_t base = p / W * W;
    double diag = 0.0;
    int64_t d = 0;
    for (int64_t q = rp[i]; q < rp[i + 1]; q++) {
        const int32_t j = col[q];
        if (j == i) {
            diag = val[q];
            continue;
        }
        if (!blk_depends(upper, i, j)) continue;
        const int64_t pj = posof[j]; /* < p: the order is topological */
        const int32_t code = pj >= base ? (int32_t)(-(pj - base) - 1) : j;
        if (d < K) bcol[p * K + d] = code, bval[p * K + d] = val[q];
        else ocol[ovf_ptr[p] + d - K] = code, oval[ovf_ptr[p] + d - K] = val[q];
        d++;
    }
    for (; d < K; d++) bcol[p * K + d] = GS_DTRI_PAD, bval[p * K + d] = 0.0;
    bdiag[p] = unit ? 1.0 : diag;
}

/* ------------------------------------------------------------- the solve */

typedef struct blk_args {
    int32_t W;
    bool unit; /* no division: the diagonal is one (MIC's both solves; ncu on a chain: the
                  division's subroutine was a good part of a step's serial instructions) */
    const int32_t *row, *step_ptr, *chunk_step, *col;
    const double *val, *diag;
    const int64_t *ovf_ptr;
    const int32_t *ovf_col;
    const double *ovf_val;
    const double *s, *b;
    double *x;
    unsigned *state;
    const double *w;
    double *partials, *dot;
    unsigned long long *fill;
} blk_args;

static __device__ inline double blk_peek(double *x, int32_t j)
{
    return __longlong_as_double((long long)gs_dtri_word_ref(*reinterpret_cast<unsigned long long *>(x + j))
                                    .load(cuda::memory_order_relaxed));
}

/* The chunk's shared arrays (dynamic shared memory, W rows). */
typedef struct blk_smem {
    double *x, *rhs, *diag, *val;
    int32_t *col, *step, *ovf, *row;
} blk_smem;

template <int K>
__global__ void __launch_bounds__(BLOCKS_THREADS) tri_blocks_kernel(blk_args a)
{
    extern __shared__ double dyn[];
    __shared__ unsigned block;
    __shared__ double smem[32];
    const int T = blockDim.x, G = T / K; /* threads, positions a pass */
    const int W = a.W;
    blk_smem sh;
    sh.x = dyn, sh.rhs = dyn + W, sh.diag = dyn + 2 * W, sh.val = dyn + 3 * W;
    sh.col = reinterpret_cast<int32_t *>(dyn + (3 + K) * W);
    sh.step = sh.col + K * W;     /* W + 1 */
    sh.ovf = sh.step + W + 1;     /* W + 1 */
    sh.row = sh.ovf + W + 1;      /* W */
    if (threadIdx.x == 0) block = atomicAdd(&a.state[0], 1u);
    __syncthreads();
    const int64_t base = (int64_t)block * W;
    const int32_t s0 = a.chunk_step[block], steps = a.chunk_step[block + 1] - s0;
    const int32_t len = a.step_ptr[s0 + steps] - (int32_t)base;
    const int64_t ovf0 = a.ovf_ptr[base];
    /* the chunk into shared memory: everything but the x_j of earlier chunks */
    for (int32_t k = threadIdx.x; k < len; k += T) {
        const int32_t i = a.row[base + k];
        sh.row[k] = i;
        sh.rhs[k] = (a.s ? a.s[i] : 1.0) * a.b[i];
        sh.diag[k] = a.diag[base + k];
        if (a.fill) a.fill[i] = GS_DTRI_UNSET;
    }
    for (int32_t k = threadIdx.x; k < len * K; k += T) {
        sh.col[k] = a.col[base * K + k];
        sh.val[k] = a.val[base * K + k];
    }
    for (int32_t k = threadIdx.x; k <= steps; k += T)
        sh.step[k] = a.step_ptr[s0 + k] - (int32_t)base;
    for (int32_t k = threadIdx.x; k <= len; k += T)
        sh.ovf[k] = (int32_t)(a.ovf_ptr[base + k] - ovf0);
    __syncthreads();
    const int sub = threadIdx.x % K, g = threadIdx.x / K;
    /* the x_j of an earlier chunk that this lane's first position of a step reads, loaded a
     * step ahead */
    double pre = 0.0;
    if (g < sh.step[1]) {
        const int32_t c = sh.col[g * K + sub];
        if (c >= 0) pre = blk_peek(a.x, c);
    }
    for (int32_t st = 0; st < steps; st++) {
        const int32_t pa = sh.step[st], pb = sh.step[st + 1];
        double next = 0.0;
        if (st + 1 < steps && pb + g < sh.step[st + 2]) {
            const int32_t c = sh.col[(pb + g) * K + sub];
            if (c >= 0) next = blk_peek(a.x, c);
        }
        for (int32_t k = pa + g; k < pb; k += G) { /* whole groups of K lanes together */
            const int32_t c = sh.col[k * K + sub];
            double sum = 0.0;
            if (c != GS_DTRI_PAD) {
                double xj;
                if (c < 0) {
                    xj = sh.x[-(c + 1)];
                } else {
                    xj = k == pa + g ? pre : blk_peek(a.x, c);
                    if ((unsigned long long)__double_as_longlong(xj) == GS_DTRI_UNSET)
                        xj = gs_dtri_wait_x(a.x, c);
                }
                sum = sh.val[k * K + sub] * xj;
            }
            for (int32_t q = sh.ovf[k] + sub, q1 = sh.ovf[k + 1]; q < q1; q += K) {
                const int32_t oc = a.ovf_col[ovf0 + q];
                sum += a.ovf_val[ovf0 + q] * (oc < 0 ? sh.x[-(oc + 1)] : gs_dtri_wait_x(a.x, oc));
            }
            const unsigned mask = K == 32 ? FULL_MASK : ((1u << K) - 1u) << ((threadIdx.x & 31) / K * K);
            for (int o = K / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(mask, sum, o, K);
            if (sub == 0) {
                const double xi = a.unit ? sh.rhs[k] - sum : (sh.rhs[k] - sum) / sh.diag[k];
                sh.x[k] = xi;
                gs_dtri_store_x(a.x, sh.row[k], xi);
            }
        }
        pre = next;
        __syncthreads(); /* the step's x_i in shared memory for the next */
    }
    if (a.dot) { /* uniform: the whole block sums (gs_block_sum's barriers) */
        double term = 0.0;
        for (int32_t k = threadIdx.x; k < len; k += T)
            term += a.w[sh.row[k]] * sh.x[k];
        const double part = gs_block_sum(term, smem);
        if (threadIdx.x == 0) a.partials[block] = part;
    }
    gs_dtri_chunk_done(a.state, gridDim.x, a.partials, a.dot, smem);
    gs_dtri_block_leaves(a.state);
}

/* ------------------------------------------------------------- host side */

static int blk_bits(int64_t v)
{
    int b = 1;
    while (b < 31 && ((int64_t)1 << b) <= v) b++;
    return b;
}

/* K: the power of two at or above the mean number of dependencies a row, 1 to 32. */
static int blk_lanes(const gs_dtri *t)
{
    const double mean = t->n > 0 ? (double)(t->nnz - t->n) / t->n : 1.0;
    int k = 1;
    while (k < 32 && k < mean) k *= 2;
    return k;
}

/* The chunk rows: what fits BLOCKS_SMEM_BUDGET (and the device's opt-in limit) at K slots a
 * row, a multiple of 32, at most 4096 (forced: GS_TRI_BLOCK_ROWS, within the same fit). */
static int blk_chunk_rows(gs_engine *e, int K, int32_t forced, int32_t *W, int32_t *fit_rows)
{
    int optin = 0;
    const int status = CUDA_CALL(&e->err, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                                 gs_cuda_of(e)->device));
    if (status != GS_OK) return status;
    size_t budget = (size_t)optin > 8192 ? (size_t)optin - 8192 : 0;
    if (budget > BLOCKS_SMEM_BUDGET) budget = BLOCKS_SMEM_BUDGET;
    int64_t fit = (int64_t)((budget - 16) / blk_row_bytes(K)) / 32 * 32;
    if (fit < 32) fit = 32;
    int64_t w = forced > 0 ? forced : 4096;
    *W = (int32_t)(w < fit ? w : fit);
    *fit_rows = (int32_t)fit;
    return GS_OK;
}

/* The kernel's dynamic shared memory limit, one per K for the process: set to what the
 * largest chunk that fits takes (fit_rows), so that every triangle prepared with this K,
 * whatever its W (at most fit_rows), launches (a limit set from the last prepared W would
 * fail an earlier triangle's larger chunks). */
template <int K>
static int blk_set_smem(gs_engine *e, int32_t W)
{
    return CUDA_CALL(&e->err, cudaFuncSetAttribute(tri_blocks_kernel<K>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)((size_t)W * blk_row_bytes(K) + 16)));
}

static void blk_free(gs_engine *e, gs_dtri *t)
{
    const size_t n = (size_t)t->n, K = (size_t)t->blocks_lanes;
    gs_cuda_free(e, t->blk_row, (n + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->step_ptr, ((size_t)t->n_steps + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->chunk_step, ((size_t)t->n_chunks + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->blk_col, (n * K + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->blk_val, (n * K + 1) * sizeof(double));
    gs_cuda_free(e, t->blk_diag, (n + 1) * sizeof(double));
    gs_cuda_free(e, t->ovf_ptr, (n + 1) * sizeof(int64_t));
    gs_cuda_free(e, t->ovf_col, ((size_t)t->n_ovf + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->ovf_val, ((size_t)t->n_ovf + 1) * sizeof(double));
    t->blk_row = t->step_ptr = t->chunk_step = t->blk_col = t->ovf_col = NULL;
    t->blk_val = t->blk_diag = t->ovf_val = NULL;
    t->ovf_ptr = NULL;
    t->n_steps = t->n_chunks = t->chunk_rows = 0;
    t->super_rows = 0, t->band_levels = 0;
    t->n_ovf = 0;
    t->val_packed = NULL;
}

void gs_dtri_free_blocks(gs_engine *e, gs_dtri *t)
{
    if (t) blk_free(e, t);
}

/* S and H (the header's order): S = 2 x the dependency distance that 3 in 4 rows stay
 * within (rounded up to a power of two: 32768 for a 128^2 plane of a 3D grid, so a
 * super-chunk spans two to four planes and most dependencies stay inside it), at least W;
 * H such that a band of a super-chunk holds about 1.5 W rows, S / n_levels rows a level on
 * the mean. Measured on poisson3d:128 (H200, one apply, ms): S = 65536 and H = 16 1.67,
 * H = 8 2.02, H = 32 2.48; S = 32768 2.0-2.7; S = 131072 1.9-2.7 (docs/perf-notebook.md).
 * Forced: GS_TRI_SUPER_ROWS, GS_TRI_BAND_LEVELS. */
static int blk_bands(gs_engine *e, gs_dtri *t, int32_t W, int64_t *S, int32_t *H)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const gs_debug *dbg = gs_cuda_debug(e);
    unsigned *hist = NULL, h[32];
    int status = GS_OK;
    int64_t span = 1;
    if (dbg->tri_super_rows > 0) {
        *S = dbg->tri_super_rows;
    } else {
        GS_TRY(gs_cuda_alloc(e, &hist, 32 * sizeof(unsigned), "trisolve blocks: span histogram"));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(hist, 0, 32 * sizeof(unsigned), s)));
        GS_TRY(CUDA_LAUNCH(&e->err, blk_span_kernel, gs_dblocks(t->n, 256), 256, 0, s, t->n,
                           (bool)t->upper, t->rp, t->col, hist));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(h, hist, sizeof h, cudaMemcpyDeviceToHost, s)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
        int64_t seen = 0;
        for (int b = 0; b < 32; b++) {
            seen += h[b];
            if (4 * seen >= 3 * (int64_t)t->n) {
                span = (int64_t)1 << (b + 1);
                break;
            }
        }
        *S = 2 * span;
    }
    if (*S < W) *S = W;
    if (*S > t->n) *S = t->n > 0 ? t->n : 1;
    if (dbg->tri_band_levels > 0) {
        *H = dbg->tri_band_levels;
    } else {
        const double per_level = (double)*S / (t->n_levels > 0 ? t->n_levels : 1);
        const double hh = 1.5 * (double)W / (per_level > 1.0 ? per_level : 1.0);
        *H = hh >= (double)INT32_MAX ? INT32_MAX : hh < 1.0 ? 1 : (int32_t)hh;
    }
cleanup:
    gs_cuda_free(e, hist, 32 * sizeof(unsigned));
    return status;
}

int gs_dtri_prepare_blocks(gs_engine *e, gs_dtri *t, const double *val, int unit,
                           int32_t chunk_rows)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = t->n;
    unsigned long long *key = NULL, *key_sorted = NULL;
    int32_t *rows = NULL, *flag = NULL, *sid = NULL, *posof = NULL;
    int64_t *over = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0, need = 0;
    int status = GS_OK;
    int32_t W = 0, H = 1;
    int64_t S = 1;
    if (t->blk_row && t->val_packed == val && t->unit_packed == (unit ? 1 : 0) &&
        (chunk_rows <= 0 || chunk_rows == t->chunk_rows))
        return GS_OK;
    blk_free(e, t);
    if (n == 0) return GS_OK;
    const int K = blk_lanes(t);
    const size_t nn = (size_t)n;
    int32_t fit_rows = 0;
    GS_TRY(blk_chunk_rows(e, K, chunk_rows > 0 ? chunk_rows : gs_cuda_debug(e)->tri_block_rows, &W,
                          &fit_rows));
    GS_TRY(blk_bands(e, t, W, &S, &H));
    t->chunk_rows = W, t->super_rows = S, t->band_levels = H;
    t->blocks_lanes = K;
    t->n_chunks = (int32_t)((n + (int64_t)W - 1) / W);
    t->unit_packed = unit ? 1 : 0;
    GS_TRY(gs_cuda_alloc(e, &key, nn * sizeof(unsigned long long), "trisolve blocks: keys"));
    GS_TRY(gs_cuda_alloc(e, &key_sorted, nn * sizeof(unsigned long long), "trisolve blocks: keys"));
    GS_TRY(gs_cuda_alloc(e, &rows, nn * sizeof(int32_t), "trisolve blocks: rows"));
    GS_TRY(gs_cuda_alloc(e, &t->blk_row, (nn + 1) * sizeof(int32_t), "trisolve blocks: schedule"));
    GS_TRY(gs_cuda_alloc(e, &flag, nn * sizeof(int32_t), "trisolve blocks: step flags"));
    GS_TRY(gs_cuda_alloc(e, &sid, nn * sizeof(int32_t), "trisolve blocks: step numbers"));
    GS_TRY(gs_cuda_alloc(e, &posof, nn * sizeof(int32_t), "trisolve blocks: positions"));
    GS_TRY(gs_cuda_alloc(e, &t->ovf_ptr, (nn + 1) * sizeof(int64_t), "trisolve blocks: overflow"));
    GS_TRY(gs_cuda_alloc(e, &over, (nn + 1) * sizeof(int64_t), "trisolve blocks: overflow counts"));
    {
        const int end1 = 32 + blk_bits((n + S - 1) / S + t->n_levels / H + 1),
                  end2 = 32 + blk_bits(t->n_chunks);
        size_t scan_need = 0;
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                      NULL, need, (const unsigned long long *)key, key_sorted,
                                      (const int32_t *)rows, t->blk_row, (int64_t)n, 0, end1, s)));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                      NULL, scan_need, (const unsigned long long *)key, key_sorted,
                                      (const int32_t *)rows, t->blk_row, (int64_t)n, 0, end2, s)));
        if (scan_need > need) need = scan_need;
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(NULL, scan_need, flag, sid, n, s)));
        if (scan_need > need) need = scan_need;
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(NULL, scan_need, over, t->ovf_ptr,
                                                                (int64_t)n + 1, s)));
        if (scan_need > need) need = scan_need;
        GS_TRY(gs_cuda_alloc(e, &tmp, need, "trisolve blocks: sort and scan buffer"));
        tmp_bytes = need;
        /* the topological order: (s + b, s, d); rows come in d order, the sort is stable */
        GS_TRY(CUDA_LAUNCH(&e->err, blk_band_keys_kernel, gs_dblocks(n, 256), 256, 0, s, n,
                           (bool)t->upper, S, H, (const int32_t *)t->level, key, rows));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                      tmp, need, (const unsigned long long *)key, key_sorted,
                                      (const int32_t *)rows, t->blk_row, (int64_t)n, 0, end1, s)));
        /* then each chunk by level (stable: that order within a level) */
        GS_TRY(CUDA_LAUNCH(&e->err, blk_chunk_keys_kernel, gs_dblocks(n, 256), 256, 0, s, n, W,
                           (const int32_t *)t->blk_row, (const int32_t *)t->level, key));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(rows, t->blk_row, nn * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, s)));
        need = tmp_bytes;
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                      tmp, need, (const unsigned long long *)key, key_sorted,
                                      (const int32_t *)rows, t->blk_row, (int64_t)n, 0, end2, s)));
    }
    GS_TRY(CUDA_LAUNCH(&e->err, blk_flag_kernel, gs_dblocks(n, 256), 256, 0, s, n,
                       (const unsigned long long *)key_sorted, flag));
    need = tmp_bytes;
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(tmp, need, flag, sid, n, s)));
    {
        int32_t last[2] = {0, 0};
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&last[0], sid + n - 1, sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, s)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&last[1], flag + n - 1, sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, s)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
        t->n_steps = last[0] + last[1];
    }
    GS_TRY(gs_cuda_alloc(e, &t->step_ptr, ((size_t)t->n_steps + 1) * sizeof(int32_t),
                         "trisolve blocks: steps"));
    GS_TRY(gs_cuda_alloc(e, &t->chunk_step, ((size_t)t->n_chunks + 1) * sizeof(int32_t),
                         "trisolve blocks: chunks"));
    GS_TRY(CUDA_LAUNCH(&e->err, blk_steps_kernel, gs_dblocks(n, 256), 256, 0, s, n, W, t->n_chunks,
                       (const int32_t *)flag, (const int32_t *)sid, (const int32_t *)t->blk_row,
                       t->step_ptr, t->chunk_step, posof));
    GS_TRY(CUDA_LAUNCH(&e->err, blk_count_kernel, gs_dblocks((int64_t)n + 1, 256), 256, 0, s, n,
                       (bool)t->upper, K, (const int32_t *)t->blk_row, t->rp, t->col, over));
    need = tmp_bytes;
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(tmp, need, over, t->ovf_ptr,
                                                            (int64_t)n + 1, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&t->n_ovf, t->ovf_ptr + n, sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    GS_TRY(gs_cuda_alloc(e, &t->blk_col, (nn * K + 1) * sizeof(int32_t), "trisolve blocks: columns"));
    GS_TRY(gs_cuda_alloc(e, &t->blk_val, (nn * K + 1) * sizeof(double), "trisolve blocks: values"));
    GS_TRY(gs_cuda_alloc(e, &t->blk_diag, (nn + 1) * sizeof(double), "trisolve blocks: diagonal"));
    GS_TRY(gs_cuda_alloc(e, &t->ovf_col, ((size_t)t->n_ovf + 1) * sizeof(int32_t),
                         "trisolve blocks: overflow columns"));
    GS_TRY(gs_cuda_alloc(e, &t->ovf_val, ((size_t)t->n_ovf + 1) * sizeof(double),
                         "trisolve blocks: overflow values"));
    GS_TRY(CUDA_LAUNCH(&e->err, blk_pack_kernel, gs_dblocks(n, 128), 128, 0, s, n, (bool)t->upper,
                       W, K, (bool)unit, (const int32_t *)t->blk_row, (const int32_t *)posof, t->rp,
                       t->col, val, (const int64_t *)t->ovf_ptr, t->blk_col, t->blk_val,
                       t->blk_diag, t->ovf_col, t->ovf_val));
    switch (K) {
    case 1: GS_TRY(blk_set_smem<1>(e, fit_rows)); break;
    case 2: GS_TRY(blk_set_smem<2>(e, fit_rows)); break;
    case 4: GS_TRY(blk_set_smem<4>(e, fit_rows)); break;
    case 8: GS_TRY(blk_set_smem<8>(e, fit_rows)); break;
    case 16: GS_TRY(blk_set_smem<16>(e, fit_rows)); break;
    default: GS_TRY(blk_set_smem<32>(e, fit_rows)); break;
    }
    t->val_packed = val;
cleanup:
    gs_cuda_free(e, key, nn * sizeof(unsigned long long));
    gs_cuda_free(e, key_sorted, nn * sizeof(unsigned long long));
    gs_cuda_free(e, rows, nn * sizeof(int32_t));
    gs_cuda_free(e, flag, nn * sizeof(int32_t));
    gs_cuda_free(e, sid, nn * sizeof(int32_t));
    gs_cuda_free(e, posof, nn * sizeof(int32_t));
    gs_cuda_free(e, over, (nn + 1) * sizeof(int64_t));
    gs_cuda_free(e, tmp, tmp_bytes);
    if (status != GS_OK) blk_free(e, t);
    return status;
}

/* Threads a block: K lanes for each row a step holds on the mean (a power of two, 32 to
 * BLOCKS_THREADS). Lanes with no row in a step still pass its barrier, and on a chain (a row
 * a step) fifteen idle warps cost the working one its issue slots after every barrier. */
static unsigned blk_threads(const gs_dtri *t)
{
    const double per_step = (double)t->n / (t->n_steps > 0 ? t->n_steps : 1);
    unsigned threads = 32;
    while (threads < BLOCKS_THREADS && threads < per_step * t->blocks_lanes) threads *= 2;
    return threads;
}

template <int K>
static int blk_launch(gs_engine *e, const gs_dtri *t, const blk_args &a)
{
    return CUDA_LAUNCH(&e->err, tri_blocks_kernel<K>, (unsigned)t->n_chunks, blk_threads(t),
                       (size_t)t->chunk_rows * blk_row_bytes(K) + 16, gs_cuda_of(e)->stream, a);
}

int gs_dtri_solve_blocks(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                         const double *s, const double *b, double *x, const gs_dtri_fused *f)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const gs_dtri_fused none = {};
    if (!f) f = &none;
    if (t->n == 0)
        return f->dot ? CUDA_CALL(&e->err, cudaMemsetAsync(f->dot, 0, sizeof(double), st)) : GS_OK;
    if (!t->blk_row || t->val_packed != val || t->unit_packed != (unit ? 1 : 0))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve blocks: values or unit flag other "
                            "than gs_dtri_prepare_blocks packed");
    if (f->dot && (!f->w || !t->partials || t->n_partials < t->n_chunks))
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "trisolve blocks: a fused dot without w or gs_dtri_prepare_dot");
    if (!f->x_filled) {
        const int status = CUDA_CALL(&e->err, cudaMemsetAsync(x, 0xFF, (size_t)t->n * sizeof(double), st));
        if (status != GS_OK) return status;
    }
    blk_args a = {};
    a.W = t->chunk_rows, a.unit = unit != 0;
    a.row = t->blk_row, a.step_ptr = t->step_ptr, a.chunk_step = t->chunk_step, a.col = t->blk_col;
    a.val = t->blk_val, a.diag = t->blk_diag;
    a.ovf_ptr = t->ovf_ptr, a.ovf_col = t->ovf_col, a.ovf_val = t->ovf_val;
    a.s = s, a.b = b, a.x = x, a.state = t->state;
    a.w = f->w, a.partials = t->partials, a.dot = f->dot;
    a.fill = (unsigned long long *)f->fill;
    switch (t->blocks_lanes) {
    case 1: return blk_launch<1>(e, t, a);
    case 2: return blk_launch<2>(e, t, a);
    case 4: return blk_launch<4>(e, t, a);
    case 8: return blk_launch<8>(e, t, a);
    case 16: return blk_launch<16>(e, t, a);
    default: return blk_launch<32>(e, t, a);
    }
}
