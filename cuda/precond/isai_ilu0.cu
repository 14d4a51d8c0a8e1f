/* isai_ilu0.cu - the factorisation stages of ISAI's CUDA setup: the scaling to
 * unit diagonal S A S and ILU(0) on A's pattern, exact by our own IKJ
 * elimination scheduled by the levels of L's pattern (the default; Saad,
 * Iterative Methods for Sparse Linear Systems, 2nd ed., Alg. 10.4, rows of one
 * wavefront in parallel: Anderson & Saad 1989), a launch a level or all rows in
 * one synchronisation-free launch (ready flags: Liu, Li, Hogg, Vinter, Euro-Par
 * 2016, as the toolkit's trisolve_syncfree.cu), or by cuSPARSE's csrilu02 (the
 * routine of Anzt, Chow, Huckle, Dongarra, ScalA 2016; --ilu cusparse, for
 * comparison), or by the fine-grained fixed-point sweeps of E. Chow, A. Patel,
 * SIAM J. Sci. Comput. 37(2) 2015 (the CPU reference gs_ilu0_sweeps, same
 * arithmetic). */
#define DISABLE_CUSPARSE_DEPRECATED /* csrilu02: deprecated, still the level-scheduled ILU(0) */
#include <string.h>

#include <cuda/atomic>

#include "isai_cuda.h"

extern "C" {
#include "ilu0.h"
}

#define ILU_WARPS 8 /* rows (warps) per 256-thread block */
#define ILU_NO_BAD 0x7f7f7f7f /* every byte 0x7f: set by one memset */
/* The exact ILU(0)'s scheme on the device (the host takes the thinnest levels and the
 * longest rows: gs_dfactor_on_host): one sync-free launch where L's levels hold fewer rows
 * than this on average, else a launch a level. Measured on an H200 (scripts/bench/bench_factor.py,
 * ilu0 seconds, levels / sync-free): elast3d:30 (132 rows a level) 0.058 / 0.011,
 * powerlaw:270000 (3140) 0.092 / 0.048, poisson3d:64 (1380) 0.0035 / 0.0041, poisson3d:128
 * (5490) 0.0100 / 0.0112. */
#define ILU0_SYNCFREE_MAX_ROWS_PER_LEVEL 4096
/* Step k of row i searches row k instead of walking it where row k's upper part is more
 * than this many times longer than row i's rest (as the reference, src/sparse/ilu0.c). */
#define ILU0_SEARCH_RATIO 8
/* The deadline is asked every this many level launches. */
#define ILU0_CHECK_LEVELS 256

/* A device flag of two ints (one 8-byte word, as gs_dread_words reads),
 * the first set to ILU_NO_BAD, for the kernels' atomicMin. */
static int isai_flag_alloc(gs_engine *e, int **flag, const char *what)
{
    int status = gs_cuda_alloc(e, flag, 2 * sizeof(int), what);
    if (status == GS_OK)
        status = CUDA_CALL(&e->err, cudaMemsetAsync(*flag, 0x7f, 2 * sizeof(int),
                                                    gs_cuda_of(e)->stream));
    return status;
}

/* The flag's row, 0 for none (one host round trip). */
static int isai_flag_read(gs_engine *e, const int *flag, int *row)
{
    uint64_t word = 0;
    const void *src[1] = {flag};
    const int words[1] = {1};
    int status = gs_dread_words(e, 1, src, words, &word);
    int first = ILU_NO_BAD;
    memcpy(&first, &word, sizeof first); /* the first int of the word */
    *row = status == GS_OK && first != ILU_NO_BAD ? first : 0;
    return status;
}

/* LANES lanes a row (ISAI_ROW_LANES): diag[i] = the position of a_ii;
 * where scale, s_i = 1 / sqrt(|a_ii|) (the reference's expression); *bad =
 * the lowest 1-based row whose a_ii is missing (or, when scaling, zero or
 * not finite). */
template <int LANES>
__global__ void isai_diagonal_kernel(int32_t n, const int64_t *__restrict__ rp,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val, int scale,
                                     int64_t *__restrict__ diag, double *__restrict__ s, int *bad)
{
    const int lane = threadIdx.x % LANES;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    if (i >= n) return; /* whole groups leave together */
    long long at = -1;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += LANES)
        if (col[p] == i) at = p;
    for (int o = LANES / 2; o > 0; o >>= 1)
        at = max(at, __shfl_xor_sync(isai_group_mask<LANES>(), at, o, LANES));
    if (lane != 0) return;
    diag[i] = at;
    const double d = at >= 0 ? val[at] : 0.0;
    if (at < 0 || (scale && (d == 0.0 || !isfinite(d)))) atomicMin(bad, (int)i + 1);
    if (scale) s[i] = 1.0 / sqrt(fabs(d));
}

/* LANES lanes a row: w_ij = a_ij (s_i s_j), or a copy. */
template <int LANES>
__global__ void isai_scale_values_kernel(int32_t n, const int64_t *__restrict__ rp,
                                         const int32_t *__restrict__ col,
                                         const double *__restrict__ val,
                                         const double *__restrict__ s, double *__restrict__ w)
{
    const int lane = threadIdx.x % LANES;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    if (i >= n) return;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += LANES)
        w[p] = s ? __dmul_rn(val[p], __dmul_rn(s[i], s[col[p]])) : val[p];
}

int isai_cuda_scale(gs_engine *e, const gs_dcsr *dA, int scale, gs_dcsr *W, double **s,
                    int64_t **diag, int *bad)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = dA->n;
    const int lanes = isai_row_lanes(n, dA->nnz);
    const unsigned grid = gs_dblocks(n, 256 / lanes);
    int *d_bad = NULL, status = GS_OK;
    *bad = 0;
    *W = gs_dcsr{};
    W->n = n, W->nnz = dA->nnz, W->rp = dA->rp, W->col = dA->col; /* aliases */
    GS_TRY(gs_cuda_alloc(e, &W->val, (size_t)dA->nnz * sizeof(double), "isai: values of S A S"));
    W->vsize = sizeof(double);
    GS_TRY(gs_cuda_alloc(e, diag, (size_t)n * sizeof(int64_t), "isai: diagonal positions"));
    if (scale) GS_TRY(gs_cuda_alloc(e, s, (size_t)n * sizeof(double), "isai: scaling S"));
    GS_TRY(isai_flag_alloc(e, &d_bad, "isai: diagonal check"));
    GS_TRY(CUDA_LAUNCH(&e->err, ISAI_ROW_KERNEL(isai_diagonal_kernel, lanes), grid, 256, 0,
                       c->stream, n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, scale, *diag, scale ? *s : (double *)NULL,
                       d_bad));
    GS_TRY(CUDA_LAUNCH(&e->err, ISAI_ROW_KERNEL(isai_scale_values_kernel, lanes), grid, 256, 0,
                       c->stream, n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val,
                       scale ? (const double *)*s : (const double *)NULL, (double *)W->val));
    GS_TRY(isai_flag_read(e, d_bad, bad));
cleanup:
    gs_cuda_free(e, d_bad, 2 * sizeof(int));
    return status;
}

/* ------------------------------------------------------------- checks */

/* LANES lanes a row: *bad = the lowest 1-based row with a non-finite
 * entry or a zero pivot u_ii. */
template <int LANES>
__global__ void isai_factor_check_kernel(int32_t n, const int64_t *__restrict__ rp,
                                         const double *__restrict__ w,
                                         const int64_t *__restrict__ diag, int *bad)
{
    const int lane = threadIdx.x % LANES;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    if (i >= n) return;
    int ok = 1;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += LANES) ok = ok && isfinite(w[p]);
    for (int o = LANES / 2; o > 0; o >>= 1)
        ok = min(ok, __shfl_xor_sync(isai_group_mask<LANES>(), ok, o, LANES));
    if (lane == 0 && (!ok || w[diag[i]] == 0.0)) atomicMin(bad, (int)i + 1);
}

/* ------------------------------------------------------ exact ILU(0) */

__global__ void isai_row_ptr32_kernel(int32_t n, const int64_t *__restrict__ rp,
                                      int *__restrict__ rp32)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) rp32[i] = (int)rp[i];
}

/* cuSPARSE csrilu02 in place on W's values (32-bit row pointers: W has
 * fewer than 2^31 entries). No zero-pivot query here: the check kernel
 * that follows finds zero pivots and overflow alike, without a wait. */
static int isai_ilu0_cusparse(gs_engine *e, gs_dcsr *W)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = W->n;
    cusparseMatDescr_t descr = NULL;
    csrilu02Info_t info = NULL;
    int *rp32 = NULL, buffer_bytes = 0, status = GS_OK;
    void *buffer = NULL;
    if (W->nnz > INT32_MAX)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "isai: --ilu cusparse: cuSPARSE's ILU(0) takes at most 2^31 - 1 "
                            "entries (%lld here); use --ilu exact", (long long)W->nnz);
    GS_TRY(gs_cuda_alloc(e, &rp32, ((size_t)n + 1) * sizeof(int), "isai: 32-bit row pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_row_ptr32_kernel, gs_dblocks((int64_t)n + 1, 256), 256, 0,
                       c->stream, n, (const int64_t *)W->rp, rp32));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateMatDescr(&descr)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSetMatIndexBase(descr, CUSPARSE_INDEX_BASE_ZERO)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSetMatType(descr, CUSPARSE_MATRIX_TYPE_GENERAL)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateCsrilu02Info(&info)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseDcsrilu02_bufferSize(c->sparse, n, (int)W->nnz, descr,
                                                              (double *)W->val, rp32, W->col,
                                                              info, &buffer_bytes)));
    GS_TRY(gs_cuda_alloc(e, &buffer, (size_t)buffer_bytes, "isai: cuSPARSE ILU(0) buffer"));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseDcsrilu02_analysis(
                                      c->sparse, n, (int)W->nnz, descr, (const double *)W->val,
                                      rp32, W->col, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL,
                                      buffer)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseDcsrilu02(c->sparse, n, (int)W->nnz, descr,
                                                   (double *)W->val, rp32, W->col, info,
                                                   CUSPARSE_SOLVE_POLICY_USE_LEVEL, buffer)));
cleanup:
    /* the descriptors are host objects; the buffers are freed in stream order */
    if (info) CUSPARSE_TEARDOWN(&c->teardown, cusparseDestroyCsrilu02Info(info));
    if (descr) CUSPARSE_TEARDOWN(&c->teardown, cusparseDestroyMatDescr(descr));
    gs_cuda_free(e, buffer, (size_t)buffer_bytes);
    gs_cuda_free(e, rp32, ((size_t)n + 1) * sizeof(int));
    return status;
}

/* ---------------------------------------------- fixed-point sweeps */

/* Position of column j in the sorted cols[0..m), or -1. */
static __device__ __forceinline__ int64_t isai_find(const int32_t *__restrict__ cols, int64_t m,
                                                    int32_t j)
{
    int64_t a = 0, b = m - 1;
    while (a <= b) {
        const int64_t mid = a + (b - a) / 2;
        const int32_t c = cols[mid];
        if (c == j) return mid;
        if (c < j) a = mid + 1;
        else b = mid - 1;
    }
    return -1;
}

/* One sweep, one warp per row, a lane per entry (i, j): from the previous
 * sweep's factors old, w_ij = a_ij - sum_{k < min(i,j)} l_ik u_kj (k
 * ascending, as the reference), divided by u_jj where i > j. Products and
 * differences rounded separately (no fused multiply-add), as on the host. */
__global__ void isai_ilu0_sweep_kernel(int32_t n, const int64_t *__restrict__ rp,
                                       const int32_t *__restrict__ col,
                                       const double *__restrict__ a,
                                       const int64_t *__restrict__ diag,
                                       const double *__restrict__ old, double *__restrict__ w)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t begin = rp[i], end = rp[i + 1];
    for (int64_t p = begin + lane; p < end; p += 32) {
        const int32_t j = col[p], kmax = min(i, j);
        double s = a[p];
        for (int64_t q = begin; q < end && col[q] < kmax; q++) {
            const int32_t k = col[q];
            const int64_t kj = isai_find(col + rp[k], rp[k + 1] - rp[k], j);
            if (kj >= 0) s = __dsub_rn(s, __dmul_rn(old[q], old[rp[k] + kj])); /* - l_ik u_kj */
        }
        w[p] = j < i ? s / old[diag[j]] : s;
    }
}

/* sweeps sweeps from w = the values of A (W's on entry). */
static int isai_ilu0_sweeps(gs_engine *e, gs_dcsr *W, const int64_t *diag, int sweeps)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t bytes = (size_t)W->nnz * sizeof(double);
    double *a = NULL, *other = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &a, bytes, "isai: A for the ILU(0) sweeps"));
    GS_TRY(gs_cuda_alloc(e, &other, bytes, "isai: ILU(0) sweep values"));
    if (bytes > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(a, W->val, bytes, cudaMemcpyDeviceToDevice,
                                                  c->stream)));
    for (int sweep = 0; sweep < sweeps; sweep++) { /* old = W->val, new into other, swap */
        GS_TRY(CUDA_LAUNCH(&e->err, isai_ilu0_sweep_kernel, gs_dblocks(W->n, ILU_WARPS),
                           32 * ILU_WARPS, 0, c->stream, W->n, (const int64_t *)W->rp,
                           (const int32_t *)W->col, (const double *)a, diag,
                           (const double *)W->val, other));
        double *t = (double *)W->val;
        W->val = other;
        other = t;
    }
cleanup:
    gs_cuda_free(e, a, bytes);
    gs_cuda_free(e, other, bytes); /* the buffer W does not hold */
    return status;
}

/* ------------------------------------------- exact ILU(0), our own */

/* Row k is finished (sync-free): its flag, stored with release semantics after its values,
 * read with acquire by every lane that then reads row k (its own ordering). Polls back to
 * back first, then sleeps doubling to 256 ns (as the toolkit's sync-free solve). */
static __device__ inline void ilu0_wait(unsigned *ready, int32_t k)
{
    gs_dwait_while(ready + k, 0u, cuda::memory_order_acquire);
}

/* Row i of the reference's IKJ loop (src/sparse/ilu0.c, ilu0_row), in place on w, by the
 * LANES lanes of mask (lane: this one's place). For k < i in row i, ascending:
 *   l_ik = w_ik / u_kk, then w_ij -= l_ik u_kj for j > k in both rows,
 * the lanes striding over row k's upper part, each finding j in row i's rest by a binary
 * search; or, where row k's upper part is more than ILU0_SEARCH_RATIO times row i's rest
 * (a hub's row, a dense first row), striding over row i's rest and searching row k, so that
 * a step costs O(short log long), never the long row's length. The columns are distinct,
 * so the lanes of one step write distinct entries; the step's barrier orders them before
 * the next step reads w_ik'. Each entry sees the same operations in the same order as on
 * the host, products and differences rounded alike (no fused multiply-add): the factors
 * are the reference's bit for bit where the host does not fuse either, and the same in
 * both schemes. The steps of one row are sequential: a row of m entries below the diagonal
 * costs m dependent steps (a hub's row: its length in latencies, not its square).
 * SYNCFREE: before step k every lane waits for row k's flag; the row's flag is released
 * after every lane has fenced its stores. w through plain pointers (no read-only path). */
template <int LANES, bool SYNCFREE>
static __device__ inline void ilu0_row(int32_t i, unsigned mask, int lane,
                                       const int64_t *__restrict__ rp,
                                       const int32_t *__restrict__ col,
                                       const int64_t *__restrict__ diag, double *w,
                                       unsigned *ready)
{
    const int64_t end = rp[i + 1];
    for (int64_t p = rp[i]; p < end; p++) {
        const int32_t k = col[p];
        if (k >= i) break;
        if (SYNCFREE) ilu0_wait(ready, k);
        const int64_t u0 = diag[k] + 1, u1 = rp[k + 1];
        const double lik = w[p] / w[diag[k]];              /* l_ik = a_ik / u_kk */
        if (u1 - u0 <= ILU0_SEARCH_RATIO * (end - p)) {
            for (int64_t q = u0 + lane; q < u1; q += LANES) {
                const int64_t at = isai_find(col + p + 1, end - p - 1, col[q]);
                if (at >= 0) {
                    double *wij = w + p + 1 + at;
                    *wij = __dsub_rn(*wij, __dmul_rn(lik, w[q])); /* a_ij -= l_ik u_kj */
                }
            }
        } else {
            for (int64_t r = p + 1 + lane; r < end; r += LANES) {
                const int64_t at = isai_find(col + u0, u1 - u0, col[r]);
                if (at >= 0) w[r] = __dsub_rn(w[r], __dmul_rn(lik, w[u0 + at])); /* the same */
            }
        }
        __syncwarp(mask); /* every lane has read w_ik before it is overwritten */
        if (lane == 0) w[p] = lik;
    }
    if (SYNCFREE) {
        __threadfence(); /* this lane's stores before the row's release */
        __syncwarp(mask);
        if (lane == 0)
            cuda::atomic_ref<unsigned, cuda::thread_scope_device>(ready[i])
                .store(1u, cuda::memory_order_release);
    }
}

/* Rows level_rows[first, first + count) of one wavefront of L's pattern, LANES lanes a
 * row (ilu0_row): their dependencies ended in earlier launches. */
template <int LANES>
__global__ void isai_ilu0_level_kernel(int64_t first, int64_t count,
                                       const int32_t *__restrict__ rows,
                                       const int64_t *__restrict__ rp,
                                       const int32_t *__restrict__ col,
                                       const int64_t *__restrict__ diag, double *w)
{
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    /* whole groups leave together: the group's barriers see all its lanes */
    if (g >= count) return;
    ilu0_row<LANES, false>(rows[first + g], isai_group_mask<LANES>(), threadIdx.x % LANES, rp,
                           col, diag, w, NULL);
}

/* Every row in one launch, LANES lanes a row, in the analysis' sync-free schedule (slots:
 * rows by level, each level padded with -1 to whole warps, so no warp holds two levels): a
 * block takes the 256 / LANES slots at the ticket (ready[n]) it draws when it starts. Row i
 * waits only on rows k < i of its row, of lower levels, so in earlier slots: rows of blocks
 * that drew earlier tickets (started: resident or done) or of lower warps of its own block,
 * never of its own warp. By induction on the slot the lowest unfinished row always runs to
 * its end, whatever order the hardware starts blocks in: no deadlock (the argument of
 * cuda/sparse/trisolve_syncfree.cu). */
template <int LANES>
__global__ void isai_ilu0_syncfree_kernel(int64_t n_slots, const int32_t *__restrict__ slots,
                                          int32_t n, const int64_t *__restrict__ rp,
                                          const int32_t *__restrict__ col,
                                          const int64_t *__restrict__ diag, double *w,
                                          unsigned *ready)
{
    __shared__ unsigned block;
    if (threadIdx.x == 0) block = atomicAdd(&ready[n], 1u);
    __syncthreads();
    const int64_t slot = (int64_t)block * (256 / LANES) + threadIdx.x / LANES;
    const int32_t i = slot < n_slots ? slots[slot] : -1;
    if (i < 0) return; /* whole groups leave together */
    ilu0_row<LANES, true>(i, isai_group_mask<LANES>(), threadIdx.x % LANES, rp, col, diag, w,
                          ready);
}

template <int LANES>
static int isai_ilu0_level_launch(gs_engine *e, const gs_dtri *t, int64_t first, int64_t count,
                                  const int64_t *diag, double *w)
{
    return CUDA_LAUNCH(&e->err, isai_ilu0_level_kernel<LANES>, gs_dblocks(count, 256 / LANES),
                       256, 0, gs_cuda_of(e)->stream, first, count,
                       (const int32_t *)t->level_rows, t->rp, t->col, diag, w);
}

template <int LANES>
static int isai_ilu0_syncfree_launch(gs_engine *e, const gs_dtri *t, const int64_t *diag,
                                     double *w, unsigned *ready)
{
    return CUDA_LAUNCH(&e->err, isai_ilu0_syncfree_kernel<LANES>,
                       gs_dblocks(t->n_slots, 256 / LANES), 256, 0, gs_cuda_of(e)->stream,
                       t->n_slots, (const int32_t *)t->slot_rows, t->n, t->rp, t->col, diag, w,
                       ready);
}

/* The scheme for the analysis t: the engine's debug.factor_scheme where it forces one,
 * else sync-free where the levels are thin (ILU0_SYNCFREE_MAX_ROWS_PER_LEVEL). */
static int isai_ilu0_use_syncfree(gs_engine *e, const gs_dtri *t)
{
    const int force = gs_cuda_debug(e)->factor_scheme;
    if (force == GS_DEBUG_SCHEME_LEVELS || force == GS_DEBUG_SCHEME_SYNCFREE)
        return force == GS_DEBUG_SCHEME_SYNCFREE;
    return (double)t->n < (double)ILU0_SYNCFREE_MAX_ROWS_PER_LEVEL * t->n_levels;
}

/* One sync-free launch: ready (n flags and the ticket) zeroed first. */
static int isai_ilu0_syncfree(gs_engine *e, const gs_dtri *t, const int64_t *diag, double *w)
{
    unsigned *ready = NULL;
    const size_t bytes = ((size_t)t->n + 1) * sizeof(unsigned);
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &ready, bytes, "isai: ILU(0) rows done"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(ready, 0, bytes, gs_cuda_of(e)->stream)));
    switch (t->syncfree_lanes) {
    case 1: GS_TRY(isai_ilu0_syncfree_launch<1>(e, t, diag, w, ready)); break;
    case 2: GS_TRY(isai_ilu0_syncfree_launch<2>(e, t, diag, w, ready)); break;
    case 4: GS_TRY(isai_ilu0_syncfree_launch<4>(e, t, diag, w, ready)); break;
    case 8: GS_TRY(isai_ilu0_syncfree_launch<8>(e, t, diag, w, ready)); break;
    case 16: GS_TRY(isai_ilu0_syncfree_launch<16>(e, t, diag, w, ready)); break;
    default: GS_TRY(isai_ilu0_syncfree_launch<32>(e, t, diag, w, ready)); break;
    }
cleanup:
    gs_cuda_free(e, ready, bytes);
    return status;
}

/* *longest = the most entries left of the diagonal in a row of W (diag: their places). */
__global__ void isai_ilu0_longest_kernel(int32_t n, const int64_t *__restrict__ rp,
                                         const int64_t *__restrict__ diag,
                                         unsigned long long *longest)
{
    int64_t m = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        m = max(m, diag[i] - rp[i]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, (int64_t)__shfl_xor_sync(0xffffffffu, (long long)m, o));
    if ((threadIdx.x & 31) == 0 && m > 0) atomicMax(longest, (unsigned long long)m);
}

static int isai_ilu0_past(const void *ctx) { return gs_pc_past_deadline((const gs_pc *)ctx); }

/* ILU(0) of W on the host (the reference's IKJ code, gs_ilu0_in_place) where the device's
 * would be latency-bound: W's values down, the factors' values up. W's pattern is A's
 * (the host's rows, A: isai_cuda_scale's W aliases them on the device), downloaded only
 * where A is not given. The reference's messages; GS_ERR_TIME_LIMIT, unnamed, at the
 * deadline. */
static int isai_ilu0_host(gs_pc *pc, const gs_csr *A, gs_dcsr *W, gs_error *err)
{
    gs_engine *e = pc->eng;
    cudaStream_t s = gs_cuda_of(e)->stream;
    gs_csr H = {};
    double *w = NULL;
    int64_t *rp = NULL;
    int32_t *col = NULL;
    int status = GS_OK;
    H.n_rows = H.n_cols = W->n, H.nnz = W->nnz;
    if (A && A->n_rows == W->n && A->nnz == W->nnz) {
        H.row_ptr = A->row_ptr, H.col = A->col;
    } else {
        rp = (int64_t *)gs_malloc(((size_t)W->n + 1) * sizeof(int64_t), "isai: W's rows on the host", err);
        col = (int32_t *)gs_malloc((size_t)W->nnz * sizeof(int32_t) + 1, "isai: W's columns on the host", err);
        if (!rp || !col) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(rp, W->rp, ((size_t)W->n + 1) * sizeof(int64_t),
                                                  cudaMemcpyDeviceToHost, s)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(col, W->col, (size_t)W->nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, s)));
        H.row_ptr = rp, H.col = col;
    }
    w = (double *)gs_malloc((size_t)W->nnz * sizeof(double) + 1, "isai: W's values on the host", err);
    if (!w) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(w, W->val, (size_t)W->nnz * sizeof(double),
                                              cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    GS_TRY(gs_ilu0_in_place(&H, w, isai_ilu0_past, pc, err));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(W->val, w, (size_t)W->nnz * sizeof(double),
                                              cudaMemcpyHostToDevice, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s))); /* w is freed below */
cleanup:
    free(rp), free(col), free(w);
    return status;
}

/* ILU(0) in place on W's values, scheduled by the levels of L's pattern (the rows k < i
 * that row i reads are its forward-solve dependencies: gs_dtri_analyse_rows on W's pattern,
 * upper entries ignored, from A's host rows where the levels are thin, which also counts
 * the longest row of L; else on the device, and the longest row by a kernel): the host's
 * IKJ (gs_dfactor_on_host), one sync-free launch, or a launch a level with the analysis'
 * lanes a row and the deadline asked every ILU0_CHECK_LEVELS levels (the host's clock
 * only: the launches queue without a wait). *scheme: the scheme that ran. */
static int isai_ilu0_ikj(gs_pc *pc, const gs_csr *A, gs_dcsr *W, const int64_t *diag,
                         const char **scheme, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dtri t = {};
    double *w = (double *)W->val;
    unsigned long long *d_longest = NULL;
    uint64_t longest = 0;
    int status = GS_OK, on_host = 0, syncfree_v = 0, *syncfree = &syncfree_v;
    GS_TRY(gs_dtri_analyse_rows(e, W->n, W->nnz, W->rp, W->col, A, 0, &t));
    gs_kv_num(&pc->extra, "ilu_levels", t.n_levels); /* the scheme's measure (bench_factor.py) */
    gs_kv_str(&pc->extra, "ilu_levels_analysis", t.on_host ? "host" : "device");
    if (t.longest_row >= 0) { /* counted by the host's pass: no kernel, no round trip */
        longest = (uint64_t)t.longest_row;
        goto decide;
    }
    GS_TRY(gs_cuda_alloc(e, &d_longest, sizeof(unsigned long long), "isai: longest row of L"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_longest, 0, sizeof(unsigned long long),
                                              gs_cuda_of(e)->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_ilu0_longest_kernel, gs_cuda_red_grid(e, W->n, 256), 256, 0,
                       gs_cuda_of(e)->stream, W->n, (const int64_t *)W->rp, diag, d_longest));
    {
        const void *src[1] = {d_longest};
        const int len[1] = {1};
        GS_TRY(gs_dread_words(e, 1, src, len, &longest));
    }
decide:
    on_host = gs_dfactor_on_host(e, &t, (int64_t)longest);
    *scheme = on_host ? "host" : NULL;
    if (on_host) {
        GS_TRY(isai_ilu0_host(pc, A, W, err));
        goto cleanup;
    }
    *syncfree = isai_ilu0_use_syncfree(e, &t);
    *scheme = *syncfree ? "syncfree" : "levels";
    if (*syncfree) GS_TRY(isai_ilu0_syncfree(e, &t, diag, w));
    for (int32_t l = 0; !*syncfree && l < t.n_levels; l++) {
        const int64_t first = t.level_ptr[l], count = t.level_ptr[l + 1] - first;
        if (l % ILU0_CHECK_LEVELS == ILU0_CHECK_LEVELS - 1 && gs_pc_past_deadline(pc))
            GS_TRY(GS_ERR_TIME_LIMIT);
        switch (t.lanes) {
        case 1: GS_TRY(isai_ilu0_level_launch<1>(e, &t, first, count, diag, w)); break;
        case 2: GS_TRY(isai_ilu0_level_launch<2>(e, &t, first, count, diag, w)); break;
        case 4: GS_TRY(isai_ilu0_level_launch<4>(e, &t, first, count, diag, w)); break;
        case 8: GS_TRY(isai_ilu0_level_launch<8>(e, &t, first, count, diag, w)); break;
        case 16: GS_TRY(isai_ilu0_level_launch<16>(e, &t, first, count, diag, w)); break;
        default: GS_TRY(isai_ilu0_level_launch<32>(e, &t, first, count, diag, w)); break;
        }
    }
cleanup:
    gs_cuda_free(e, d_longest, sizeof(unsigned long long));
    gs_dtri_free(e, &t);
    return status;
}

/* ------------------------------------------------------------ driver */

int isai_cuda_ilu0(gs_pc *pc, const gs_csr *A, gs_dcsr *W, const int64_t *diag, int sweeps,
                   int cusparse, const char **scheme, int *bad, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    int *d_bad = NULL, status = GS_OK;
    *bad = 0;
    *scheme = NULL;
    if (W->n == 0) return GS_OK;
    if (sweeps > 0) {
        GS_TRY(isai_ilu0_sweeps(e, W, diag, sweeps));
    } else if (cusparse) {
        GS_TRY(isai_ilu0_cusparse(e, W));
    } else {
        status = isai_ilu0_ikj(pc, A, W, diag, scheme, err);
        if (status == GS_ERR_TIME_LIMIT) status = gs_pc_deadline(pc, "ilu0", err);
        GS_TRY(status);
    }
    GS_TRY(isai_flag_alloc(e, &d_bad, "isai: factor check"));
    {
        const int lanes = isai_row_lanes(W->n, W->nnz);
        GS_TRY(CUDA_LAUNCH(&e->err, ISAI_ROW_KERNEL(isai_factor_check_kernel, lanes),
                           gs_dblocks(W->n, 256 / lanes), 256, 0, c->stream, W->n,
                           (const int64_t *)W->rp, (const double *)W->val, diag, d_bad));
    }
    GS_TRY(isai_flag_read(e, d_bad, bad));
cleanup:
    gs_cuda_free(e, d_bad, 2 * sizeof(int));
    return status;
}
