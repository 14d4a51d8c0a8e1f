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
 * Size classes: m <= 32 one warp per system and m <= 64 two warps, rows of
 * the symmetric matrix in registers (factor_rows_kernel); m <= 96, m <= 128
 * and m <= fit (the largest m <= 256 whose triangle and a panel of PANEL
 * columns fit a block's shared memory: 225 in fp64 on an H100/H200) one
 * block of 128, 128, 256 threads per system, the panel (blocked)
 * factorisation with the triangle in shared memory (factor_panel_body);
 * the m <= 96 class with its registers capped at 128 a thread so that four
 * blocks share a multiprocessor (their triangles and panels take <= 50 KB
 * in fp64), where the others fit two and one; larger systems
 * the same with the triangle in place in global memory and the panel in
 * shared memory; from m = 1815 (fp64), where not even the panel fits,
 * the step-by-step updates in place (factor_inplace_body), which never
 * fails. In fp64 the largest class goes instead to the blocked DGEMM path
 * of fsai_factor_gemm.cu by the rule factor_gemm_takes (or, with the
 * switch fsai_gemm_min = N, every system of at least N rows, classified
 * into the largest class for it). */
#include <stdlib.h>

#include <cub/cub.cuh>
#include <cuda_pipeline.h>

#include "fsai_cuda.h"

#define FULL_MASK 0xffffffffu
#define FACTOR_CLASSES 6             /* <= 32, <= 64, <= 96, <= 128, <= fit, larger */
/* counters: the classes' counts, the largest m, each class's largest m */
#define FACTOR_COUNTERS (2 * FACTOR_CLASSES + 1)
#define GATHER_THREADS 256
#define DENSE_BUDGET_MAX ((size_t)1 << 30)
/* at least 256 MiB a chunk (within a quarter of free memory): 64 MiB cut
 * bcsstk16's 600 MB of local systems into 9 chunks, each a gather, a
 * partial last wave of blocks and two synchronisations (10.4 against
 * 9.4 ms) */
#define DENSE_BUDGET_MIN ((size_t)256 << 20)
/* dense buffers this small are allocated whole without a look at free memory */
#define DENSE_BUDGET_SMALL ((size_t)16 << 20)

static __host__ __device__ inline int64_t tri(int64_t r) { return r * (r + 1) / 2; }
/* the same in 32 bits, for systems of fewer than 2^15 rows */
static __device__ inline int tri(int r) { return r * (r + 1) / 2; }

/* The largest m of size class k: 32, 64 (the rows kernels), 96, 128, fit
 * (the largest m <= 256 whose triangle and panel fit a block's shared
 * memory: 225 in fp64 on an H100/H200, 256 in fp32), then any. The one
 * table of the classes, for the classify kernel and both plans. */
static __host__ __device__ inline int64_t factor_class_hi(int k, int32_t fit)
{
    return k < FACTOR_CLASSES - 2 ? 32 * (int64_t)(k + 1) : k == FACTOR_CLASSES - 2 ? fit : INT64_MAX;
}

/* The smallest m of class k. */
static __host__ __device__ inline int64_t factor_class_lo(int k, int32_t fit)
{
    return k == 0 ? 1 : factor_class_hi(k - 1, fit) + 1;
}

/* The largest class goes to fsai_cuda_factor_gemm (fp64) where its work
 * bound, count x m_max^3 (count systems of at most m_max rows), reaches
 * FACTOR_GEMM_MIN_WORK, none larger than FACTOR_GEMM_M_MAX (a dense mb x mb
 * system of 16384 rows takes 2 GiB). Measured on an H200 (2026-11-28, one
 * process a run): powerlaw:270000 (43,727 systems of 226..640) factorisation
 * 0.860 s on the block kernel, 0.309 s on this path; bcsstk08 (2 systems of
 * about 275) 61 ms on this path, nearly all of it the first cuBLAS handle
 * and DGEMM modules of the process, where the block kernel takes a few
 * milliseconds (bcsstk16's whole factorisation: 4.3 ms). 1e12 keeps every shared matrix (count x m_max^3 at most
 * about 1e11: bcsstk13, 15, 16, s3rmt3m3) on the block kernel and sends
 * the power-law case (about 1e13) here. Systems above the default --max-row
 * (640) go here whatever their count: one such system takes a block at
 * least 0.14 s (m^3 / 3 at ~0.8 GFlop/s a block), more than the handle's
 * first cost; the first version of the rule sent them here too, and the
 * suites' arrowheads of 600 and 2000 rows passed that way on an H200. */
#define FACTOR_GEMM_MIN_WORK 1e12
#define FACTOR_GEMM_ALWAYS_M 640
#define FACTOR_GEMM_M_MAX 16384
#define FACTOR_GEMM_OFF 0    /* fp32: never */
#define FACTOR_GEMM_RULE 1
#define FACTOR_GEMM_FORCED 2 /* the switch fsai_gemm_min: whatever the count */

/* Whether the largest class (count systems, the largest of mc rows) takes
 * the DGEMM path: the one rule, read by the device (factor_sizes_kernel)
 * and the host (factor_plan_order) alike. */
static __host__ __device__ inline bool factor_gemm_takes(int rule, int64_t count, int64_t mc)
{
    return count > 0 && (rule == FACTOR_GEMM_FORCED ||
                         (rule == FACTOR_GEMM_RULE &&
                          ((double)count * (double)mc * (double)mc * (double)mc >=
                               FACTOR_GEMM_MIN_WORK ||
                           mc > FACTOR_GEMM_ALWAYS_M) &&
                          mc <= FACTOR_GEMM_M_MAX));
}

/* Size class of a system of m rows. */
static __device__ inline int factor_class(int64_t m, int32_t fit)
{
    int k = 0;
#pragma unroll
    for (int j = 0; j < FACTOR_CLASSES - 1; j++) k += m > factor_class_hi(j, fit);
    return k;
}

/* Each system's size class, the rows 0..n-1 to sort by it, the classes'
 * counts and largest m; for the device plan (off not NULL) also the dense
 * offsets zeroed: every system is gathered fused, none takes room in the
 * dense buffer. */
__global__ void factor_classify_kernel(int32_t n, int32_t fit, int64_t gemm_min,
                                       const int64_t *__restrict__ s_rp,
                                       uint8_t *__restrict__ cls, int32_t *__restrict__ rows,
                                       int *__restrict__ counts, int64_t *__restrict__ off)
{
    const int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    if (off) {
        off[i] = 0;
        if (i == 0) off[n] = 0;
    }
    const int64_t m = s_rp[i + 1] - s_rp[i];
    const int c = m >= gemm_min ? FACTOR_CLASSES - 1 : factor_class(m, fit);
    cls[i] = (uint8_t)c;
    rows[i] = i;
    atomicAdd(&counts[c], 1);
    atomicMax(&counts[FACTOR_CLASSES], (int)m);
    atomicMax(&counts[FACTOR_CLASSES + 1 + c], (int)m);
}

/* sizes[j] = m (m + 1) / 2 of the system of row order[j], 0 for a system
 * the factorisation gathers itself (m <= fused_max) or the DGEMM path
 * takes (the largest class, where factor_gemm_takes says so): such systems
 * take no room in the dense buffer. */
__global__ void factor_sizes_kernel(int32_t n, const int64_t *__restrict__ s_rp,
                                    const int32_t *__restrict__ order, int64_t fused_max,
                                    const uint8_t *__restrict__ cls, const int *__restrict__ counters,
                                    int gemm_rule, int64_t *__restrict__ sizes)
{
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= n) return;
    const int32_t i = order[j];
    const int64_t m = s_rp[i + 1] - s_rp[i];
    const int L = FACTOR_CLASSES - 1;
    const bool gemm = cls[i] == L && factor_gemm_takes(gemm_rule, counters[L],
                                                       counters[FACTOR_CLASSES + 1 + L]);
    sizes[j] = m <= fused_max || gemm ? 0 : tri(m);
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
    const int32_t j = gs_dsearch_last_at_or_below(off, lo, hi, base + t);
    const int64_t q = base + t - off[j];
    int64_t r = (int64_t)((sqrtf(8.0f * (float)q + 1.0f) - 1.0f) * 0.5f);
    while (tri(r) > q) r--;
    while (tri(r + 1) <= q) r++;
    const int64_t cidx = q - tri(r);
    const int32_t *P = s_col + s_rp[order[j]];
    const int32_t pr = P[r], pc = P[cidx];
    const int64_t k = fsai_find_col(a_col + a_rp[pr], a_rp[pr + 1] - a_rp[pr], pc);
    buf[t] = k >= 0 ? (T)a_val[a_rp[pr] + k] : (T)0.0;
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

/* 1 / d for a positive finite pivot, on the chain of dependent steps of
 * every factorisation: the hardware's approximate double reciprocal
 * (rcp.approx.ftz.f64, one instruction) refined by a cubic step
 * (y (1 + e + e^2), e = 1 - d y: the relative error e becomes e^3) and a
 * Newton step (e^6): from any start better than 2^-9, below an ulp. Five
 * dependent instructions where the fp32 route (two conversions, the
 * correctly rounded fp32 reciprocal and its range checks) took about
 * twenty, and IEEE division is a subroutine (docs/perf-notebook.md, "FSAI
 * setup, v8"). Outside [1e-300, 1e300] (not a pivot of an SPD system a
 * sane matrix gives), the division. */
static __device__ inline double factor_recip(double d)
{
    if (!(d > 1e-300 && d < 1e300)) return 1.0 / d;
    double y;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(d));
    double e = fma(-d, y, 1.0);
    y = fma(y, fma(e, e, e), y);
    e = fma(-d, y, 1.0);
    return fma(y, e, y);
}

static __device__ inline float factor_recip(float d)
{
    if (!(d > 1e-30f && d < 1e30f)) return 1.0f / d;
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d));
    return fmaf(y, fmaf(-d, y, 1.0f), y);
}

/* Start copying count values from global src to shared dst, thread t of
 * nthreads taking every nthreads-th one: asynchronous copies (cp.async),
 * all in flight at once, where a loop of loads and stores waited for each
 * load in turn. The caller waits with factor_copy_wait and a barrier. */
template <typename T>
static __device__ inline void factor_copy_start(T *dst, const T *src, int64_t count, int t,
                                                int nthreads)
{
    for (int64_t q = t; q < count; q += nthreads)
        __pipeline_memcpy_async(dst + q, src + q, sizeof(T));
    __pipeline_commit();
}

static __device__ inline void factor_copy_wait() { __pipeline_wait_prior(0); }

/* One step's update of a row held in registers: a[c] -= f v[c] for c from
 * J + 1 rounded down to 16 bytes, v (shared memory, 16-byte aligned) read
 * 16 bytes at a time; the caller never reads the extra entries c <= J
 * again. J is a constant of the caller's unrolled loop. */
template <typename T, int N>
static __device__ inline void factor_update_row(T (&a)[N], const T *v, T f, int J)
{
    constexpr int W = 16 / (int)sizeof(T);
#pragma unroll
    for (int c = (J + 1) / W * W; c < N; c += W) {
        if constexpr (W == 2) {
            const double2 x = *reinterpret_cast<const double2 *>(&v[c]);
            a[c] -= f * x.x;
            a[c + 1] -= f * x.y;
        } else {
            const float4 x = *reinterpret_cast<const float4 *>(&v[c]);
            a[c] -= f * x.x;
            a[c + 1] -= f * x.y;
            a[c + 2] -= f * x.z;
            a[c + 3] -= f * x.w;
        }
    }
}

/* m <= M, M = 32 or 64: M threads per system, thread r holding row r of the
 * whole symmetric matrix (not only its lower triangle) in M registers; the
 * loops over rows and columns are unrolled, so every register index is a
 * constant. Rows and columns m .. M-1 are padded with the identity.
 *
 * Step J: each thread publishes its a_rJ to a shared vector (two of them,
 * alternating, so one barrier a step suffices); every thread r > J updates
 * its row, a_rc -= (a_rJ / a_JJ) a_cJ for c > J, reading a_cJ by broadcast.
 * Thread r stops changing at step r, and since the update is symmetric its
 * entry c > r ends equal to row c's entry r: U_cr. So each thread also
 * holds its column of U, which the back substitution U^T g = sqrt(D_m) e_m
 * needs: g_K = ([K = m-1] sqrt(D_K) - sum_{i>K} U_iK g_i) / D_K, thread r
 * accumulating its sum as each g_i is broadcast.
 *
 * Per system: about M^2/2 fused multiply-adds and as many shared-memory
 * broadcasts a thread, no shared-memory stores in the inner loop. The
 * previous kernel (the triangle in a shared tile, thread r updating its own
 * entries there) did a load, a load and a store of shared memory per
 * update and was bound by them (docs/perf-notebook.md, "FSAI setup"). The
 * packed triangle is copied to shared memory asynchronously, then each
 * thread reads its row (entries c <= r) and column (c > r) from it. */
template <int M>
struct factor_rows_shape {
    static constexpr int systems = M == 32 ? 4 : 1; /* systems a block */
};

template <int M>
static __device__ inline void factor_rows_sync()
{
    if constexpr (M == 32) __syncwarp();
    else __syncthreads();
}

/* The dense system's source: the packed triangle in the gather buffer, or
 * (FUSED) A itself, each thread r gathering its row's lower part: the
 * entries a_{P_r, j}, j <= P_r, of row P_r of A (sorted) placed at their
 * positions in P (a binary search of P in shared memory), zeros elsewhere:
 * the values the gather kernel would have written, without the buffer's
 * round trip through global memory. */
template <typename T>
struct factor_source {
    const int64_t *off;
    const T *buf;
    const int32_t *s_col;
    const int64_t *a_rp;
    const int32_t *a_col;
    const double *a_val;
};

/* Row r of a gathered system: arow[c] = a_{P_r, P_c} for the entries of
 * row pr = P_r of A (sorted) with P_c <= P_r, found by binary searches of
 * pc[0..r] (P, in shared memory; top = the largest power of two <= r + 1
 * or above), four interleaved; arow is zero beforehand. The values are
 * loaded with the columns, and the next group's loads go out before this
 * group's searches: a row of A was a chain of two dependent global loads a
 * group (docs/perf-notebook.md, "FSAI setup, v8"). */
/* The columns and values of the W entries q .. q + W - 1 of a row of A
 * that ends at q1 (past the end: column INT32_MAX, above every column, and
 * value 0). */
template <typename T, int W>
static __device__ __forceinline__ void gather_load_group(const factor_source<T> &src, int64_t q,
                                                         int64_t q1, int32_t (&col)[W],
                                                         double (&val)[W])
{
#pragma unroll
    for (int u = 0; u < W; u++) {
        col[u] = q + u < q1 ? src.a_col[q + u] : INT32_MAX; /* columns are < n */
        val[u] = q + u < q1 ? src.a_val[q + u] : 0.0;
    }
}

template <typename T>
static __device__ inline void gather_row_lower(const factor_source<T> &src, int32_t pr, int r,
                                               int top, const int32_t *__restrict__ pc,
                                               T *__restrict__ arow)
{
    constexpr int W = FSAI_SEARCH_WAYS;
    const int64_t q1 = src.a_rp[pr + 1];
    int64_t q = src.a_rp[pr];
    int32_t cu[W];
    double vu[W];
    gather_load_group(src, q, q1, cu, vu);
    while (q < q1) {
        /* the next W entries' loads go out before this group's searches */
        int32_t cn[W];
        double vn[W];
        gather_load_group(src, q + W, q1, cn, vn);
        int lo[W];
        fsai_search_ways(pc, r + 1, top, cu, lo);
#pragma unroll
        for (int u = 0; u < W; u++) /* lo <= r: only columns up to P_r land */
            if (lo[u] <= r && pc[lo[u]] == cu[u]) arow[lo[u]] = (T)vu[u];
        if (cu[W - 1] >= pr) break; /* past the diagonal (or the row's end) */
        q += W;
#pragma unroll
        for (int u = 0; u < W; u++) {
            cu[u] = cn[u];
            vu[u] = vn[u];
        }
    }
}

template <typename T, int M, bool FUSED>
static __device__ inline void factor_rows_body(int32_t j0, int32_t j1, int32_t chunk0,
                                               const int32_t *__restrict__ order,
                                               const int64_t *__restrict__ s_rp,
                                               const factor_source<T> &src, T *__restrict__ g_out,
                                               unsigned long long *fail)
{
    constexpr int SPB = factor_rows_shape<M>::systems;
    __shared__ T packed[SPB][M * (M + 1) / 2];
    __shared__ __align__(16) T colv[SPB][2][M];
    __shared__ int32_t pcol[FUSED ? SPB : 1][FUSED ? M : 1];
    const int r = (int)(threadIdx.x % M), s = (int)(threadIdx.x / M);
    const int32_t j = j0 + s; /* j0: the block's first system this round */
    /* M = 32: the whole warp leaves; M = 64: one system a block, j < j1 */
    if (j >= j1) return;
    const int32_t row = order[j];
    const int m = (int)(s_rp[row + 1] - s_rp[row]);
    T *pk = packed[s];
    T(*cv)[M] = colv[s];
    if constexpr (FUSED) {
        int32_t *P = pcol[s];
        if (r < m) P[r] = src.s_col[s_rp[row] + r];
        factor_rows_sync<M>();
        if (r < m) {
            T *prow = pk + tri(r);
            for (int c = 0; c <= r; c++) prow[c] = (T)0;
            gather_row_lower(src, P[r], r, M, P, prow);
        }
    } else {
        factor_copy_start(pk, src.buf + (src.off[j] - src.off[chunk0]), tri(m), r, M);
        factor_copy_wait();
    }
    factor_rows_sync<M>();
    T a[M];
    const int tr = (int)tri(r);
#pragma unroll
    for (int c = 0; c < M; c++)
        a[c] = r < m && c < m ? (c <= r ? pk[tr + c] : pk[c * (c + 1) / 2 + r]) : (T)(r == c);
    T piv_r = 1, inv_r = 1;                           /* D_r and 1 / D_r */
#pragma unroll
    for (int J = 0; J < M; J++) {
        if (J >= m) break;
        cv[J & 1][r] = a[J];
        factor_rows_sync<M>();
        const T piv = cv[J & 1][J];
        if (!pivot_ok(piv)) {                         /* every thread sees it */
            if (r == 0) factor_fail(fail, row, J);
            return;
        }
        const T inv = factor_recip(piv);
        if (r == J) {
            piv_r = piv;
            inv_r = inv;
        }
        const T f = r > J ? a[J] * inv : (T)0;
        /* c from J + 1 down to a multiple of 16 bytes, read 16 bytes at a
         * time. The extra entries c <= J of a thread r > J are never read
         * again (step c is past, and the back substitution reads c > r);
         * padded columns c >= m have a_cJ = 0. */
        factor_update_row<T, M>(a, cv[J & 1], f, J);
    }
    T g = 0, acc = 0;                                 /* acc: sum_{i>r} U_ir g_i */
#pragma unroll
    for (int K = M - 1; K >= 0; K--) {
        if (K >= m) continue;
        if (r == K) g = ((K == m - 1 ? sqrt(piv_r) : (T)0) - acc) * inv_r;
        T gK;
        if constexpr (M == 32) {
            gK = __shfl_sync(FULL_MASK, g, K);
        } else {
            if (r == K) cv[K & 1][0] = g;
            __syncthreads();
            gK = cv[K & 1][0];
        }
        if (r < K) acc += a[K] * gK;
    }
    if (r < m) g_out[s_rp[row] + r] = g;
}

/* Systems [j0, j1) of the class, or [bounds[0], bounds[1]) where the plan
 * left the class's range on the device (bounds != NULL, written before the
 * first class launch started; the grid then covers every system, and the
 * blocks past the class leave at once: a loop over systems here took 254
 * registers where one system takes 166, fp64, m <= 64). */
template <typename T, int M, bool FUSED>
__global__ void __launch_bounds__(M * factor_rows_shape<M>::systems)
    factor_rows_kernel(int32_t j0, int32_t j1, const int32_t *__restrict__ bounds, int32_t chunk0,
                       const int32_t *__restrict__ order, const int64_t *__restrict__ s_rp,
                       factor_source<T> src, T *__restrict__ g_out, unsigned long long *fail)
{
    constexpr int SPB = factor_rows_shape<M>::systems;
    gs_pdl_start();
    if (bounds) j0 = bounds[0], j1 = bounds[1];
    factor_rows_body<T, M, FUSED>(j0 + (int32_t)blockIdx.x * SPB, j1, chunk0, order, s_rp, src,
                                  g_out, fail);
    gs_pdl_end();
}

/* U^T g = sqrt(D_m) e_m by back substitution on the factored triangle a
 * (U below the diagonal, the pivots D on it; IDX: the type of its packed
 * indices), in blocks of 32 rows from the bottom: warp 0 solves the block,
 * lane j holding row K0 + j's sum sum_{i>r} U_ir g_i, its pivot's
 * reciprocal and its column of the block's U (loaded before the solve),
 * each g_j broadcast by a shuffle: a chain of a multiply, a shuffle and a
 * fused multiply-add a row, no branch; then all threads add the block's
 * contributions to the rows above it (thread t owning rows t, t + BT,
 * ...), two barriers a block. y (m values) ends as g. The step-by-step
 * form (a barrier a row, one thread computing g_K while the block waited)
 * took ~430 cycles a row (docs/perf-notebook.md, "FSAI setup, v8"). */
template <typename T, int BT, typename IDX>
static __device__ inline void factor_back_subst(const T *__restrict__ a, T *__restrict__ y, IDX m)
{
    __shared__ T gblk[32];
    const int lane = threadIdx.x & 31;
    for (IDX r = threadIdx.x; r < m; r += BT) y[r] = (T)0;
    __syncthreads();
    for (IDX K1 = m; K1 > 0; K1 -= 32) {
        const IDX K0 = K1 > 32 ? K1 - 32 : 0;
        const int nb = (int)(K1 - K0);
        if (threadIdx.x < 32) {
            const IDX r = K0 + lane;
            const bool in = lane < nb;
            const T d = in ? a[tri(r) + r] : (T)1;
            const T inv = factor_recip(d), rhs = r == m - 1 ? sqrt(d) : (T)0;
            T u[32];                                  /* u[j] = U_{K0+j, r}, j > lane */
#pragma unroll
            for (int j = 0; j < 32; j++) u[j] = j < nb && lane < j ? a[tri(K0 + j) + r] : (T)0;
            T acc = in ? y[r] : (T)0, g = 0;
#pragma unroll
            for (int j = 31; j >= 0; j--) {
                if (j >= nb) continue;                /* the same in every lane */
                if (lane == j) g = (rhs - acc) * inv;
                acc += u[j] * __shfl_sync(FULL_MASK, g, j);
            }
            if (in) {
                y[r] = g;
                gblk[lane] = g;
            }
        }
        __syncthreads();
        for (IDX r = threadIdx.x; r < K0; r += BT) {
            T acc = y[r];
            for (int j = 0; j < nb; j++) acc += a[tri(K0 + j) + r] * gblk[j];
            y[r] = acc;
        }
        __syncthreads();
    }
}

/* Blocked (panel) form of the same factorisation, for m > 64: the result
 * is that of the step-by-step updates up to the order of the roundings.
 * Panel J0 .. J0 + PANEL - 1 (PANEL columns, fewer at the end):
 *   (a) its diagonal block, by warp 0 (panel_diag): lane rho holds row
 *       J0 + rho in registers, the column entries broadcast through shared
 *       memory (one warp, no barrier per column); from the second panel
 *       on, during the previous panel's (c) (look-ahead);
 *   (b) the rows below it, a thread each: row r's panel entries depend
 *       only on the diagonal block (U_rk for k in the panel), no barrier;
 *   (c) the trailing update a_rc -= sum_k U_rk U_ck / D_k over the panel,
 *       a symmetric rank-PANEL update: each warp a 16 x 32 tile of the
 *       trailing triangle, each lane 4 x 4 of it (rows rg + 4i, columns
 *       cg + 8j, so that the lanes of a warp touch 4 rows of 8 consecutive
 *       entries), 16 fused multiply-adds per 8 reads of the panel, each
 *       entry of the triangle read and written once a panel.
 * The step-by-step kernel read and wrote every trailing entry once a
 * column, three shared-memory accesses per multiply-add and a barrier per
 * column (docs/perf-notebook.md, "FSAI setup, v6").
 * The panel's columns are staged in shared memory, k-major (P[k m + rho],
 * rho = r - J0), with their pivots' reciprocals (two sets, alternating by
 * panel, for the look-ahead). SHARED: the triangle in
 * shared memory too (copied in and out); else in place in global memory
 * (each entry of the trailing triangle read and written once a panel). */
#ifndef PANEL
#define PANEL 16
#endif

static __host__ __device__ inline int64_t panel_smem(int64_t m, bool shared)
{
    return (shared ? tri(m) : 0) + PANEL * m + 2 * PANEL;
}

/* Tiles of 16 rows x 32 columns before row block ri of the trailing
 * triangle: row block i holds i / 2 + 1 of them. */
static __device__ inline int panel_tiles_before(int ri)
{
    const int h = ri / 2;
    return ri % 2 ? (h + 1) * (h + 1) : h * (h + 1);
}

/* The packed lower triangle of A[P,P] (m rows) gathered straight into a
 * (shared memory) by a block of BT threads: P staged in pc (m int32), the
 * triangle zeroed, then thread r scatters the lower part of row P_r of A
 * (sorted) to its positions in P, four branch-free binary searches at a
 * time. The values the gather kernel would have written, without the round
 * trip of a dense buffer through global memory. */
template <typename T, int BT>
static __device__ inline void panel_gather(int32_t row, int64_t m, const factor_source<T> &src,
                                           const int64_t *__restrict__ s_rp, T *__restrict__ a,
                                           int32_t *__restrict__ pc)
{
    const int64_t p0 = s_rp[row];
    for (int64_t r = threadIdx.x; r < m; r += BT) pc[r] = src.s_col[p0 + r];
    for (int64_t q = threadIdx.x; q < tri(m); q += BT) a[q] = (T)0;
    __syncthreads();
    int top = 1;
    while (2 * top <= m) top *= 2;
    for (int64_t r = threadIdx.x; r < m; r += BT) gather_row_lower(src, pc[r], (int)r, top, pc, a + tri(r));
    __syncthreads();
}

/* (a) of a panel: the diagonal block of rows and columns j0 .. j0 + jb - 1
 * factored by one warp, lane rho holding the whole symmetric row j0 + rho
 * of it in registers (rows jb .. B-1 of a short last panel padded with the
 * identity, so that every loop is unrolled whole and d indexed
 * statically). Step k: the lanes publish their entry k in shared memory
 * (cv: two vectors, alternating, so one __syncwarp a step suffices) and
 * every lane r > k updates its entries from c = k + 1 (rounded down to 16
 * bytes) by a_rc -= (a_rk / D_k) a_ck; the entries c <= k it also changes
 * are never read again. The update being symmetric, lane c's entry r > c
 * ends as U_rc and its entry c as D_c: lane c holds column c of the
 * factored block, which it writes to the triangle a, to the panel P
 * (P[c m + r], 0 above the diagonal) and, as 1 / D_c, to inv. No branch
 * and no shuffle in the loop: the version with the pivot's checks in the
 * loop and two shuffles an fp64 update ran ~1350 dependent instructions a
 * panel (docs/perf-notebook.md, "FSAI setup, v8"). A pivot that is not
 * positive stops nothing (the values after it are not used): the first
 * one is reported, and *failed set. */
template <typename T>
static __device__ inline void panel_diag(T *__restrict__ a, T *__restrict__ P, T *__restrict__ inv,
                                         int m, int j0, int jb, int32_t row,
                                         unsigned long long *fail, int *failed, T (*cv)[PANEL])
{
    constexpr int B = PANEL;
    const int lane = threadIdx.x & 31;
    T d[B];
#pragma unroll
    for (int c = 0; c < B; c++)
        d[c] = lane < jb && c < jb ? a[c <= lane ? tri(j0 + lane) + j0 + c : tri(j0 + c) + j0 + lane]
                                   : (T)(c == lane);
#pragma unroll
    for (int k = 0; k < B; k++) {
        if (lane < B) cv[k & 1][lane] = d[k];
        __syncwarp();
        const T f = lane > k ? d[k] * factor_recip(cv[k & 1][k]) : (T)0;
        factor_update_row<T, B>(d, cv[k & 1], f, k);
    }
    T dk = 0;
#pragma unroll
    for (int c = 0; c < B; c++)
        if (c == lane) dk = d[c];
    const unsigned bad = __ballot_sync(FULL_MASK, lane < jb && !pivot_ok(dk));
    if (bad) {
        if (lane == 0) {
            factor_fail(fail, row, j0 + __ffs(bad) - 1);
            *failed = 1;
        }
    } else if (lane < jb) {
        inv[lane] = factor_recip(dk);
#pragma unroll
        for (int r = 0; r < B; r++) {
            if (r >= lane && r < jb) a[tri(j0 + r) + j0 + lane] = d[r];
            P[lane * m + r] = r >= lane ? d[r] : (T)0;
        }
    }
}

/* gather: the system gathered from A (src) instead of copied from sys.
 * Look-ahead: warp 0 updates the next panel's diagonal block (the first
 * tile of the trailing update) and factors it (a) while the other warps do
 * the rest of the trailing update, so the diagonal blocks' chain of
 * dependent steps (~7k cycles a panel, a third of a system's time at m ~ 90)
 * overlaps the arithmetic. The next panel's (a) writes rows < PANEL of P,
 * which the trailing update never reads, and the other half of inv
 * (2 PANEL values, alternating by panel). */
template <typename T, int BT, bool SHARED>
static __device__ inline void factor_panel_body(int32_t row, int64_t m, T *__restrict__ sys,
                                                T *__restrict__ g_out, T *__restrict__ sm,
                                                unsigned long long *fail,
                                                const factor_source<T> *gather = NULL,
                                                const int64_t *s_rp = NULL)
{
    constexpr int B = PANEL, WARPS = BT / 32;
    __shared__ int failed;
    __shared__ __align__(16) T cv[2][B];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T *a = SHARED ? sm : sys;
    T *P = SHARED ? sm + tri(m) : sm;
    T *inv2 = P + B * m;
    if (SHARED && gather) panel_gather<T, BT>(row, m, *gather, s_rp, a, (int32_t *)P);
    else if (SHARED) factor_copy_start(a, sys, tri(m), threadIdx.x, BT);
    if (threadIdx.x == 0) failed = 0;
    if (SHARED && !gather) factor_copy_wait();
    __syncthreads();
    /* J0 = -B: only the first panel's (a) */
    for (int64_t J0 = -B; J0 < m; J0 += B) {
        const int64_t rows = m - J0;
        if (J0 >= 0) {
            if (rows <= B) break;                     /* the last panel: no rows below */
            const T *inv = inv2 + (J0 / B % 2) * B;
            /* (b): the rows below the (factored) diagonal block, a thread
             * each: row r's panel entries depend only on the diagonal block
             * (U_rk for k in the panel), no barrier */
            for (int64_t rho = B + threadIdx.x; rho < rows; rho += BT) {
                T p[B];
                const int64_t base = tri(J0 + rho) + J0;
#pragma unroll
                for (int c = 0; c < B; c++) p[c] = a[base + c];
#pragma unroll
                for (int k = 0; k < B; k++) {
                    const T f = p[k] * inv[k];
#pragma unroll
                    for (int c = k + 1; c < B; c++) p[c] -= f * P[k * m + c];
                }
#pragma unroll
                for (int c = 0; c < B; c++) {
                    a[base + c] = p[c];
                    P[c * m + rho] = p[c];
                }
            }
            __syncthreads();
            /* (c); tile 0 (row block 0) is the next panel's diagonal block:
             * warp 0 updates it (and then factors it below), the other
             * warps take tiles 1, 2, ... (one warp: all of them) */
            const int nr = (int)((rows - B + 15) / 16), tiles = panel_tiles_before(nr);
            const int rg = lane >> 3, cg = lane & 7;
            const int q0 = WARPS == 1 ? 0 : warp, qstep = WARPS == 1 ? 1 : warp == 0 ? tiles : WARPS - 1;
            int ri = 0;
            for (int q = q0; q < tiles; q += qstep) {
                while (panel_tiles_before(ri + 1) <= q) ri++;
                const int64_t r0 = B + 16 * ri + rg, c0 = B + 32 * (q - panel_tiles_before(ri)) + cg;
                int64_t rr[4], cc[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    rr[i] = r0 + 4 * i < rows ? r0 + 4 * i : rows - 1;  /* clamped reads */
                    cc[i] = c0 + 8 * i < rows ? c0 + 8 * i : rows - 1;
                }
                T acc[4][4] = {};
#pragma unroll
                for (int k = 0; k < B; k++) {
                    const T *Pk = P + k * m;
                    const T ik = inv[k];
                    T x[4], y[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        x[i] = Pk[rr[i]];
                        y[i] = Pk[cc[i]] * ik;
                    }
#pragma unroll
                    for (int i = 0; i < 4; i++)
#pragma unroll
                        for (int j = 0; j < 4; j++) acc[i][j] += x[i] * y[j];
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int64_t r = r0 + 4 * i;
                    if (r >= rows) break;
                    T *ar = a + tri(J0 + r) + J0;
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        if (c0 + 8 * j <= r) ar[c0 + 8 * j] -= acc[i][j];
                }
            }
        }
        /* (a) of the next panel, by warp 0 (while the others finish (c));
         * it writes rows < PANEL of P, which (c) never reads, and the other
         * half of inv */
        if (warp == 0 && J0 + B < m) {
            const int64_t next = rows - B;
            __syncwarp();
            panel_diag<T>(a, P, inv2 + ((J0 / B + 1) % 2) * B, (int)m, (int)(J0 + B),
                          next < B ? (int)next : B, row, fail, &failed, cv);
        }
        __syncthreads();
        if (failed) return;
    }
    T *y = SHARED ? P : g_out;
    factor_back_subst<T, BT, int>(a, y, (int)m);
    if (SHARED) {
        __syncthreads();
        for (int64_t r = threadIdx.x; r < m; r += BT) g_out[r] = y[r];
    }
}

/* Systems too large for even the panel in shared memory (PANEL m values:
 * m >= 1815 in fp64): the step-by-step updates on the triangle in place in
 * global memory, one block of BT threads, the pivot column copied to
 * shared memory at each step when it fits (m <= cap): the updates then
 * read it there, and their loads and stores of the triangle are free of
 * the possible aliasing with the column's reads that serialised them.
 * Slow (every trailing entry read and written once a column) but it never
 * fails. */
template <typename T, int BT>
static __device__ inline void factor_inplace_body(int32_t row, int64_t m, T *__restrict__ a,
                                                  T *__restrict__ g_out, T *__restrict__ col,
                                                  int64_t cap, unsigned long long *fail)
{
    /* the trailing update as a TY x TX grid of threads over (row, column) */
    constexpr int TX = BT >= 1024 ? 32 : BT >= 256 ? 16 : 8, TY = BT / TX;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const bool staged = m <= cap;
    for (int64_t J = 0; J < m; J++) {
        const T piv = a[tri(J) + J];
        if (!pivot_ok(piv)) {
            if (threadIdx.x == 0) factor_fail(fail, row, J);
            return;
        }
        const T inv = factor_recip(piv);
        if (staged) {
            for (int64_t c = J + 1 + threadIdx.x; c < m; c += BT) col[c] = a[tri(c) + J];
            __syncthreads();
            for (int64_t r = J + 1 + ty; r < m; r += TY) {
                T *ar = a + tri(r);
                const T f = col[r] * inv;
                for (int64_t c = J + 1 + tx; c <= r; c += TX) ar[c] -= f * col[c];
            }
        } else {
            for (int64_t r = J + 1 + ty; r < m; r += TY) {
                T *ar = a + tri(r);
                const T f = ar[J] * inv;
                for (int64_t c = J + 1 + tx; c <= r; c += TX) ar[c] -= f * a[tri(c) + J];
            }
        }
        __syncthreads();
    }
    factor_back_subst<T, BT, int64_t>(a, g_out, m);
}

/* One block of BT threads per system, at least MINB blocks a multiprocessor
 * (the registers a thread capped to allow them). cap: the T values of dynamic
 * shared memory; each system takes the fastest path that fits it: the panel
 * factorisation with the triangle in shared memory, with the triangle in
 * place in global memory, or the step-by-step updates in place. */
template <typename T, int BT, int MINB>
__global__ void __launch_bounds__(BT, MINB)
    factor_block_kernel(int32_t j0, int32_t j1, const int32_t *__restrict__ bounds,
                        int32_t chunk0, const int32_t *__restrict__ order,
                        const int64_t *__restrict__ s_rp, factor_source<T> src,
                        int64_t fused_max, T *__restrict__ g_out, unsigned long long *fail,
                        int64_t cap)
{
    extern __shared__ unsigned char factor_smem[];
    T *sm = (T *)factor_smem;
    gs_pdl_start();
    if (bounds) j0 = bounds[0], j1 = bounds[1]; /* as factor_rows_kernel */
#pragma unroll 1
    for (int32_t j = j0 + (int32_t)blockIdx.x; j < j1; j += (int32_t)gridDim.x) {
        const int32_t row = order[j];
        const int64_t m = s_rp[row + 1] - s_rp[row];
        T *sys = (T *)src.buf + (src.off[j] - src.off[chunk0]);
        T *g = g_out + s_rp[row];
        if (m <= fused_max) /* classes that fit shared memory: gathered here */
            factor_panel_body<T, BT, true>(row, m, sys, g, sm, fail, &src, s_rp);
        else if (panel_smem(m, true) <= cap) factor_panel_body<T, BT, true>(row, m, sys, g, sm, fail);
        else if (panel_smem(m, false) <= cap) factor_panel_body<T, BT, false>(row, m, sys, g, sm, fail);
        else factor_inplace_body<T, BT>(row, m, sys, g, sm, cap, fail);
        __syncthreads(); /* the shared memory is the next round's */
    }
    gs_pdl_end();
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
    int *counters;        /* device: FACTOR_COUNTERS */
    int64_t *sizes, *off; /* n + 1 each */
    void *tmp;
    size_t tmp_bytes;
    int counts[FACTOR_COUNTERS];
    int64_t last, total;  /* packed offset of the last system, all systems' size */
    int32_t K;            /* chunks */
    int32_t *first;       /* host, K + 1 */
    int64_t *first_off;   /* host, K + 1 */
    int64_t budget;       /* entries a chunk starts within */
    int64_t cap;          /* entries the buffer holds */
    size_t smem_max;      /* dynamic shared memory a block kernel can have, bytes */
    int fused;            /* --gather fused */
    int64_t fused_max;    /* systems of at most this many rows gather themselves (0: none) */
    int32_t fit;          /* the largest m of class 4 */
    int gemm_rule;        /* FACTOR_GEMM_OFF, _RULE or _FORCED */
    int64_t gemm_min;     /* systems of at least this many rows are of the largest class */
    bool gemm;            /* the largest class goes to fsai_cuda_factor_gemm */
    /* Device plan (every system gathered fused, m_max known from the
     * pattern): the classes' ranges stay on the device, bounds[k] ..
     * bounds[k + 1], and the plan has no host round trip; counts then hold
     * only the largest m overall and a bound of each class's. */
    int32_t *bounds;      /* device, FACTOR_CLASSES + 1; NULL: host plan */
} factor_plan;

static void factor_plan_free(gs_engine *e, factor_plan *p)
{
    const size_t n = (size_t)p->n;
    gs_cuda_free(e, p->cls, n);
    gs_cuda_free(e, p->cls_sorted, n);
    gs_cuda_free(e, p->rows, n * sizeof(int32_t));
    gs_cuda_free(e, p->order, n * sizeof(int32_t));
    gs_cuda_free(e, p->counters, FACTOR_COUNTERS * sizeof(int));
    gs_cuda_free(e, p->sizes, (n + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->off, (n + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->tmp, p->tmp_bytes);
    gs_cuda_free(e, p->bounds, (FACTOR_CLASSES + 1) * sizeof(int32_t));
    free(p->first);
    free(p->first_off);
}

/* The dynamic shared memory both block kernels can have: the opt-in limit
 * less their static shared memory, in whole T values. */
template <typename T>
static int factor_smem_max(gs_engine *e, size_t *out)
{
    int optin = 0, status = GS_OK;
    cudaFuncAttributes a128, a256;
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                     gs_cuda_of(e)->device)));
    GS_TRY(CUDA_CALL(&e->err, cudaFuncGetAttributes(&a128, factor_block_kernel<T, 128, 1>)));
    GS_TRY(CUDA_CALL(&e->err, cudaFuncGetAttributes(&a256, factor_block_kernel<T, 256, 1>)));
    {
        const size_t st = a128.sharedSizeBytes > a256.sharedSizeBytes ? a128.sharedSizeBytes
                                                                       : a256.sharedSizeBytes;
        *out = ((size_t)optin > st ? (size_t)optin - st : 0) / sizeof(T) * sizeof(T);
    }
cleanup:
    return status;
}

/* info = the counters, off[n-1] and off[n]: what the plan needs on the
 * host, read in one round trip. */
__global__ void factor_plan_info_kernel(const int *counters, const int64_t *off, int32_t n,
                                        int64_t *info)
{
    const int t = threadIdx.x;
    if (t < FACTOR_COUNTERS) info[t] = counters[t];
    if (t == FACTOR_COUNTERS) info[t] = n > 0 ? off[n - 1] : 0;
    if (t == FACTOR_COUNTERS + 1) info[t] = off[n];
}

/* bounds[k] = where class k starts in the sorted order (the counts'
 * exclusive scan), bounds[FACTOR_CLASSES] = n. */
__global__ void factor_bounds_kernel(const int *counters, int32_t *bounds)
{
    if (threadIdx.x != 0) return;
    int32_t b = 0;
    for (int k = 0; k < FACTOR_CLASSES; k++) {
        bounds[k] = b;
        b += counters[k];
    }
    bounds[FACTOR_CLASSES] = b;
}

/* Device plans (no round trip) for at most this many systems, where the
 * round trip is a visible part of the setup; larger setups keep the host
 * plan, whose launches are sized to their classes (a device plan launches
 * a block a group of all n systems for each rows class, the blocks past
 * their class leaving at once: measured up to 5357 rows). The switch
 * fsai_plan (src/debug.h) forces either (tests). */
#define FACTOR_DEVICE_PLAN_ROWS 16384
static bool factor_device_plan_wanted(gs_engine *e, int32_t n)
{
    const int forced = gs_cuda_debug(e)->fsai_plan;
    if (forced == GS_DEBUG_PLAN_HOST) return false;
    if (forced == GS_DEBUG_PLAN_DEVICE) return true;
    return n <= FACTOR_DEVICE_PLAN_ROWS;
}

/* Classes, the stable sort of the rows by class, the size scan; m_known:
 * the longest row of S if the pattern stage read it, else -1. */
static int factor_plan_order(gs_engine *e, const gs_dcsr *S, size_t vsize, int64_t m_known,
                             factor_plan *p)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = S->n;
    int status = GS_OK;
    int32_t fit = 256;
    size_t bytes = 0;
    bool device = false;
    int64_t *d_info = NULL, info[FACTOR_COUNTERS + 2];
    GS_TRY(vsize == sizeof(float) ? factor_smem_max<float>(e, &p->smem_max)
                                  : factor_smem_max<double>(e, &p->smem_max));
    while (fit > 128 && (size_t)panel_smem(fit, true) * vsize > p->smem_max) fit--;
    /* fused: the rows kernels' classes and every class whose systems all
     * take the shared-memory panel path */
    p->fused_max = !p->fused ? 0 : (size_t)panel_smem(fit, true) * vsize <= p->smem_max ? fit : 64;
    p->fit = fit;
    {
        const long long forced = gs_cuda_debug(e)->fsai_gemm_min;
        p->gemm_rule = vsize != sizeof(double) || forced < 0 ? FACTOR_GEMM_OFF
                       : forced > 0                            ? FACTOR_GEMM_FORCED
                                                               : FACTOR_GEMM_RULE;
        p->gemm_min = p->gemm_rule == FACTOR_GEMM_FORCED ? (int64_t)forced : INT64_MAX;
    }
    /* the switch needs the host plan (its class is not the sizes') */
    device = m_known >= 0 && m_known <= p->fused_max && p->gemm_rule != FACTOR_GEMM_FORCED &&
             factor_device_plan_wanted(e, n);
    GS_TRY(gs_cuda_alloc(e, &p->cls, (size_t)n, "fsai factor: size classes"));
    GS_TRY(gs_cuda_alloc(e, &p->cls_sorted, (size_t)n, "fsai factor: sorted classes"));
    GS_TRY(gs_cuda_alloc(e, &p->rows, (size_t)n * sizeof(int32_t), "fsai factor: rows"));
    GS_TRY(gs_cuda_alloc(e, &p->order, (size_t)n * sizeof(int32_t), "fsai factor: row order"));
    GS_TRY(gs_cuda_alloc(e, &p->counters, FACTOR_COUNTERS * sizeof(int), "fsai factor: counts"));
    GS_TRY(gs_cuda_alloc(e, &p->sizes, ((size_t)n + 1) * sizeof(int64_t), "fsai factor: sizes"));
    GS_TRY(gs_cuda_alloc(e, &p->off, ((size_t)n + 1) * sizeof(int64_t), "fsai factor: offsets"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(p->counters, 0, FACTOR_COUNTERS * sizeof(int),
                                              c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_classify_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       fit, p->gemm_min, (const int64_t *)S->rp, p->cls, p->rows, p->counters,
                       device ? p->off : (int64_t *)NULL));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs((void *)NULL, bytes,
                                                              (const uint8_t *)p->cls, p->cls_sorted,
                                                              (const int32_t *)p->rows, p->order,
                                                              n, 0, 3, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &p->tmp, bytes, "fsai factor: sort workspace"));
    p->tmp_bytes = bytes;
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(p->tmp, bytes, (const uint8_t *)p->cls,
                                                              p->cls_sorted, (const int32_t *)p->rows,
                                                              p->order, n, 0, 3, c->stream)));
    if (device) { /* every system fused: offsets 0 (written by the classify kernel) */
        GS_TRY(gs_cuda_alloc(e, &p->bounds, (FACTOR_CLASSES + 1) * sizeof(int32_t),
                             "fsai factor: class ranges"));
        GS_TRY(CUDA_LAUNCH(&e->err, factor_bounds_kernel, 1, 32, 0, c->stream,
                           (const int *)p->counters, p->bounds));
        p->counts[FACTOR_CLASSES] = (int)m_known;
        for (int k = 0; k < FACTOR_CLASSES; k++) {
            const int64_t hi = factor_class_hi(k, fit);
            p->counts[k] = factor_class_lo(k, fit) <= m_known ? n : 0; /* at most */
            p->counts[FACTOR_CLASSES + 1 + k] = (int)(hi < m_known ? hi : m_known);
        }
        p->last = 0;
        p->total = 0;
        goto cleanup;
    }
    GS_TRY(CUDA_LAUNCH(&e->err, factor_sizes_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)S->rp, (const int32_t *)p->order, p->fused_max,
                       (const uint8_t *)p->cls, (const int *)p->counters, p->gemm_rule, p->sizes));
    GS_TRY(gs_dscan_exclusive(e, p->sizes, p->off, n));
    GS_TRY(gs_cuda_alloc(e, &d_info, sizeof info, "fsai factor: plan sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_plan_info_kernel, 1, 32, 0, c->stream,
                       (const int *)p->counters, (const int64_t *)p->off, n, d_info));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(info, d_info, sizeof info, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    for (int k = 0; k < FACTOR_COUNTERS; k++) p->counts[k] = (int)info[k];
    p->gemm = factor_gemm_takes(p->gemm_rule, p->counts[FACTOR_CLASSES - 1],
                                p->counts[2 * FACTOR_CLASSES]);
    p->last = info[FACTOR_COUNTERS];
    p->total = info[FACTOR_COUNTERS + 1];
cleanup:
    gs_cuda_free(e, d_info, sizeof info);
    return status;
}

/* Chunks of the work list: chunk b starts at the first system whose packed
 * offset reaches b * budget, so it holds at most budget + one system. The
 * budget: the packed values of all systems if small, else about the bytes
 * of Ĝ's values (so that the setup's peak memory stays a small multiple of
 * the factor's), within [256 MiB, 1 GiB] and a quarter of free memory. */
static int factor_plan_chunks(gs_engine *e, const gs_dcsr *S, size_t vsize, factor_plan *p)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = S->n;
    const int64_t last = p->last, total = p->total;
    int32_t *d_first = NULL;
    int64_t *d_first_off = NULL;
    int status = GS_OK;
    size_t free_bytes = 0, total_bytes = 0;
    const int64_t m_max = p->counts[FACTOR_CLASSES];
    if (n == 0) return GS_OK;
    {
        size_t b = (size_t)S->nnz * vsize;
        if (b < DENSE_BUDGET_MIN) b = DENSE_BUDGET_MIN;
        if (b > DENSE_BUDGET_MAX) b = DENSE_BUDGET_MAX;
        /* the switch fsai_chunk_bytes: the budget itself, for the tests
         * (many chunks from small matrices) */
        const long long forced = gs_cuda_debug(e)->fsai_chunk_bytes;
        if (forced > 0) b = (size_t)forced;
        /* free memory asked of the driver only where it can matter (the
         * query took 5 us of bcsstk15's 1.4 ms) */
        if ((size_t)total * vsize > DENSE_BUDGET_SMALL || b < (size_t)total * vsize) {
            GS_TRY(CUDA_CALL(&e->err, cudaMemGetInfo(&free_bytes, &total_bytes)));
            if (b > free_bytes / 4) b = free_bytes / 4;
        }
        p->budget = (int64_t)(b / vsize) > 1 ? (int64_t)(b / vsize) : 1;
    }
    p->K = (int32_t)(last / p->budget + 1);
    p->cap = p->budget + tri(m_max);
    if (p->cap > total) p->cap = total;
    if (p->cap < 1) p->cap = 1; /* every system gathered fused */
    p->first = (int32_t *)gs_malloc(((size_t)p->K + 1) * sizeof(int32_t), "fsai factor: chunks", &e->err);
    p->first_off = (int64_t *)gs_malloc(((size_t)p->K + 1) * sizeof(int64_t), "fsai factor: chunks", &e->err);
    if (!p->first || !p->first_off) GS_TRY(GS_ERR_NOMEM);
    if (p->K == 1) { /* one chunk: no device work, no round trip */
        p->first[0] = 0, p->first[1] = n;
        p->first_off[0] = 0, p->first_off[1] = total;
        goto cleanup;
    }
    GS_TRY(gs_cuda_alloc(e, &d_first, ((size_t)p->K + 1) * sizeof(int32_t), "fsai factor: chunks"));
    GS_TRY(gs_cuda_alloc(e, &d_first_off, ((size_t)p->K + 1) * sizeof(int64_t), "fsai factor: chunks"));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_chunks_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)p->off, p->budget, d_first));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_first + p->K, &n, sizeof(int32_t),
                                              cudaMemcpyHostToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, factor_chunk_offsets_kernel, gs_dblocks(p->K + 1, 256), 256, 0,
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

/* Blocks of factor_block_kernel for `systems` systems: one a system (host
 * plan), or where the class's size is on the device only (bounds), every
 * block the device holds at once, at most one a system. */
template <typename K>
static int factor_grid(gs_engine *e, K kernel, int threads, size_t smem, int64_t systems,
                       bool bounds, unsigned *grid)
{
    int per_sm = 0;
    *grid = (unsigned)systems;
    if (!bounds) return GS_OK;
    const int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                              &per_sm, kernel, threads, smem));
    const int64_t all = (int64_t)(per_sm > 0 ? per_sm : 1) * gs_cuda_of(e)->sm_count;
    if (all < (int64_t)*grid) *grid = (unsigned)all;
    if (*grid < 1) *grid = 1;
    return status;
}

/* Systems [j0, j1) of size class m <= M, M = 32 or 64, or the range at
 * bounds on the device (then j1 - j0 bounds the count); pdl: a
 * programmatic dependent launch (factor_run). */
template <typename T, int M>
static int factor_launch_rows(gs_engine *e, int32_t j0, int32_t j1, const int32_t *bounds,
                              int32_t chunk0, const factor_plan *p, const gs_dcsr *A,
                              const gs_dcsr *S, T *buf, T *g, unsigned long long *fail, bool pdl)
{
    constexpr int SPB = factor_rows_shape<M>::systems;
    const factor_source<T> src = {p->off, buf, S->col, A->rp, A->col, (const double *)A->val};
    auto kernel = p->fused ? factor_rows_kernel<T, M, true> : factor_rows_kernel<T, M, false>;
    const unsigned grid = gs_dblocks(j1 - j0, SPB); /* a block a group, whatever bounds says */
    cudaStream_t st = gs_cuda_of(e)->stream;
    return CUDA_LAUNCH_PDL(&e->err, pdl, kernel, grid, M * SPB, 0, st, j0, j1, bounds, chunk0,
                           (const int32_t *)p->order, (const int64_t *)S->rp, src, g, fail);
}

/* Systems [j0, j1) of one of the block classes (m > 64), the largest mc:
 * one block of BT threads each, with the shared memory the class's largest
 * system needs (its triangle and panel when the class fits shared memory,
 * else its panel), up to the device's limit; factor_block_kernel picks
 * each system's path by what fits. */
template <typename T, int BT, int MINB>
static int factor_launch_block(gs_engine *e, int32_t j0, int32_t j1, const int32_t *bounds,
                               int32_t chunk0, const factor_plan *p, const gs_dcsr *A,
                               const gs_dcsr *S, T *buf, T *g, unsigned long long *fail,
                               int64_t mc, bool shared_class, bool pdl)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const factor_source<T> src = {p->off, buf, S->col, A->rp, A->col, (const double *)A->val};
    int status = GS_OK;
    unsigned grid = 0;
    const size_t whole = (size_t)panel_smem(mc, shared_class) * sizeof(T);
    const size_t smem = whole < p->smem_max ? whole : p->smem_max;
    auto kernel = factor_block_kernel<T, BT, MINB>;
    GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem)));
    GS_TRY(factor_grid(e, kernel, BT, smem, j1 - j0, bounds != NULL, &grid));
    GS_TRY(CUDA_LAUNCH_PDL(&e->err, pdl, kernel, grid, BT, smem, c->stream, j0, j1, bounds,
                           chunk0, (const int32_t *)p->order, (const int64_t *)S->rp, src,
                           p->fused_max, g, fail, (int64_t)(smem / sizeof(T))));
cleanup:
    return status;
}

/* Systems [a, z) of size class k (largest m: mc), as factor_run launches them. */
template <typename T>
static int factor_launch_class(gs_engine *e, int k, int32_t a, int32_t z, const int32_t *bk,
                               int32_t chunk0, const factor_plan *p, const gs_dcsr *A,
                               const gs_dcsr *S, T *buf, T *g, unsigned long long *fail,
                               int64_t mc, bool pdl)
{
    if (k == 0) return factor_launch_rows<T, 32>(e, a, z, bk, chunk0, p, A, S, buf, g, fail, pdl);
    if (k == 1) return factor_launch_rows<T, 64>(e, a, z, bk, chunk0, p, A, S, buf, g, fail, pdl);
    if (k == 2) /* m <= 96: four blocks a multiprocessor (registers capped) */
        return factor_launch_block<T, 128, 4>(e, a, z, bk, chunk0, p, A, S, buf, g, fail, mc,
                                              true, pdl);
    if (k == 3)
        return factor_launch_block<T, 128, 1>(e, a, z, bk, chunk0, p, A, S, buf, g, fail, mc,
                                              true, pdl);
    return factor_launch_block<T, 256, 1>(e, a, z, bk, chunk0, p, A, S, buf, g, fail, mc, k == 4,
                                          pdl);
}

/* --time-limit inside a chunk. The stage end of each chunk (where the host
 * waits for it anyway) stops the setup once the deadline has passed
 * (gs_pc_stage_end), so the remaining chunks are never launched. But one
 * chunk can hold minutes of work (every system gathered fused is in it,
 * however many), so where a deadline is set a class of the host plan whose
 * systems may take more than FACTOR_DEADLINE_FLOPS (mc^3 / 3 each, mc its
 * largest m) goes in pieces of about that much, the host waiting for each
 * and asking the deadline: a wait every 2e11 flops (tens of milliseconds
 * at the few TFlop/s these kernels reach), and none at all without a
 * deadline, for small classes or with the device plan (at most 16k systems
 * of at most 225 rows: about 6e10 flops in all). */
#define FACTOR_DEADLINE_FLOPS 2e11
static int32_t factor_piece(const gs_pc *pc, const factor_plan *p, int64_t mc, int32_t count)
{
    if (pc->hook.deadline <= 0.0 || p->bounds) return count;
    const double piece = FACTOR_DEADLINE_FLOPS / ((double)mc * (double)mc * (double)mc / 3.0 + 1.0);
    return piece >= (double)count ? count : piece < 1.0 ? 1 : (int32_t)piece;
}

/* Wait for the piece just launched; GS_ERR_TIME_LIMIT (err naming the
 * stage) once the deadline has passed. */
static int factor_wait_deadline(gs_pc *pc, gs_error *err)
{
    gs_engine *e = pc->eng;
    const int status = CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    return status != GS_OK ? status : gs_pc_deadline(pc, "factorisation", err);
}

/* Gather and factor the chunks: stages "gather" and "factorisation". */
template <typename T>
static int factor_run(gs_pc *pc, const gs_dcsr *A, const gs_dcsr *S, const factor_plan *p,
                      T *g, unsigned long long *fail, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    T *buf = NULL;
    int32_t *block_first = NULL;
    int status = GS_OK;
    const size_t first_bytes = ((size_t)gs_dblocks(p->cap, GATHER_THREADS) + 1) * sizeof(int32_t);
    int32_t class_start[FACTOR_CLASSES + 1] = {}; /* host plan */
    for (int k = 0; k < FACTOR_CLASSES && !p->bounds; k++)
        class_start[k + 1] = class_start[k] + p->counts[k];
    GS_TRY(gs_cuda_alloc(e, &buf, (size_t)p->cap * sizeof(T), "fsai factor: dense local systems"));
    GS_TRY(gs_cuda_alloc(e, &block_first, first_bytes, "fsai factor: gather block starts"));
    for (int32_t b = 0; b < p->K; b++) {
        const int32_t j0 = p->first[b], j1 = p->first[b + 1];
        const int64_t count = p->first_off[b + 1] - p->first_off[b];
        if (j0 >= j1) continue;
        double t0 = 0.0;
        if (count > 0) { /* none when every system of the chunk is gathered fused */
            t0 = gs_pc_stage_begin(pc);
            GS_TRY(CUDA_LAUNCH(&e->err, factor_block_first_kernel, gs_dblocks(j1 - j0, 256), 256,
                               0, c->stream, j0, j1, (const int64_t *)p->off, block_first));
            GS_TRY(CUDA_LAUNCH(&e->err, factor_gather_kernel<T>, gs_dblocks(count, GATHER_THREADS),
                               GATHER_THREADS, 0, c->stream, j0, j1, (const int64_t *)p->off,
                               (const int32_t *)block_first, (const int32_t *)p->order,
                               (const int64_t *)S->rp, (const int32_t *)S->col,
                               (const int64_t *)A->rp, (const int32_t *)A->col,
                               (const double *)A->val, buf));
            GS_TRY(gs_pc_stage_end(pc, "gather", t0));
        }
        t0 = gs_pc_stage_begin(pc);
        /* the classes are independent: the largest systems (the longest
         * per-block latency) first, each next class a programmatic
         * dependent launch, so that its blocks take the multiprocessors
         * the previous class's last wave leaves idle (one launch lasts
         * about as long as its slowest system: docs/perf-notebook.md, v8) */
        bool pdl = false;
        for (int k = FACTOR_CLASSES - 1; k >= 0; k--) {
            /* device plan: one chunk, the class's range read by the kernel
             * (a class no system can be in is skipped) */
            const int32_t *bk = p->bounds ? p->bounds + k : NULL;
            const int32_t a = bk ? j0 : j0 > class_start[k] ? j0 : class_start[k];
            const int32_t z = bk ? (p->counts[k] ? j1 : j0)
                                 : j1 < class_start[k + 1] ? j1 : class_start[k + 1];
            if (a >= z || (k == FACTOR_CLASSES - 1 && p->gemm)) continue;
            const int64_t mc = p->counts[FACTOR_CLASSES + 1 + k];
            const int32_t piece = factor_piece(pc, p, mc, z - a); /* z - a: no deadline */
            for (int32_t a0 = a; a0 < z; a0 += piece) {
                const int32_t z0 = z - a0 > piece ? a0 + piece : z;
                GS_TRY(factor_launch_class<T>(e, k, a0, z0, bk, j0, p, A, S, buf, g, fail, mc,
                                              pdl));
                pdl = true;
                if (piece < z - a) GS_TRY(factor_wait_deadline(pc, err));
            }
        }
        /* past the deadline: GS_ERR_TIME_LIMIT here, the next chunks never launched */
        GS_TRY(gs_pc_stage_end(pc, "factorisation", t0));
    }
    if constexpr (sizeof(T) == sizeof(double)) /* the largest class: its own chunks */
        if (p->gemm)
            GS_TRY(fsai_cuda_factor_gemm(pc, A, S, p->order, class_start[FACTOR_CLASSES - 1],
                                         class_start[FACTOR_CLASSES], (double *)g, fail));
cleanup:
    /* stream-ordered frees: after the kernels that use them */
    gs_cuda_free(e, buf, (size_t)p->cap * sizeof(T));
    gs_cuda_free(e, block_first, first_bytes);
    return status;
}

/* The smallest failing row's message, as the CPU reference words it. */
int fsai_factor_failure(gs_engine *e, const gs_dcsr *S, unsigned long long key, gs_error *err)
{
    const int32_t row = (int32_t)(key >> 32), pivot = (int32_t)(key & 0xffffffffu);
    int64_t p0 = 0, p1 = 0;
    int32_t col = 0;
    int status = GS_OK;
    GS_TRY(gs_dread_int64(e, S->rp + row, &p0));
    GS_TRY(gs_dread_int64(e, S->rp + row + 1, &p1));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(&col, S->col + p0 + pivot, sizeof col, cudaMemcpyDeviceToHost)));
    status = gs_error_set(err, GS_ERR_NUMERIC,
                          "fsai: the local system A[P_i,P_i] of row %d (%d x %d) is not positive "
                          "definite: its Cholesky pivot %d (column %d) is not positive, so A is "
                          "not SPD",
                          (int)row + 1, (int)(p1 - p0), (int)(p1 - p0), (int)pivot + 1, (int)col + 1);
cleanup:
    return status;
}

int fsai_cuda_factor(gs_pc *pc, const gs_dcsr *A, gs_dcsr *S, gs_precision prec,
                     int fused, int64_t m_known, int64_t *m_max, int *plan_on_device,
                     int64_t *large_systems, int *large_gemm, unsigned long long **fail,
                     gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t vsize = prec == GS_FP32 ? sizeof(float) : sizeof(double);
    factor_plan p = {};
    unsigned long long *d_fail = NULL;
    void *g = NULL;
    int status = GS_OK;
    p.n = S->n;
    p.fused = fused;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(factor_plan_order(e, S, vsize, m_known, &p));
    *m_max = p.counts[FACTOR_CLASSES];
    *plan_on_device = p.bounds != NULL;
    *large_systems = p.bounds ? 0 : p.counts[FACTOR_CLASSES - 1]; /* device plan: none */
    *large_gemm = p.gemm;
    GS_TRY(factor_plan_chunks(e, S, vsize, &p));
    GS_TRY(gs_cuda_alloc(e, &g, (size_t)S->nnz * vsize, "fsai: values of G before the postfilter"));
    GS_TRY(gs_cuda_alloc(e, &d_fail, sizeof *d_fail, "fsai factor: failure record"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_fail, 0xff, sizeof *d_fail, c->stream))); /* ~0 */
    GS_TRY(gs_pc_stage_end(pc, "gather", t0));
    if (prec == GS_FP32) GS_TRY(factor_run<float>(pc, A, S, &p, (float *)g, d_fail, err));
    else GS_TRY(factor_run<double>(pc, A, S, &p, (double *)g, d_fail, err));
    S->val = g;
    S->vsize = vsize;
    g = NULL;
    *fail = d_fail;
    d_fail = NULL;
cleanup:
    gs_cuda_free(e, g, (size_t)S->nnz * vsize);
    gs_cuda_free(e, d_fail, sizeof *d_fail);
    factor_plan_free(e, &p);
    return status;
}
