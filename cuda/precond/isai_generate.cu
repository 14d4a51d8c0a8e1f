/* isai_generate.cu - the batched generation of ISAI(k) on the GPU: for each
 * column j of M ~ T^-1 with pattern J (the rows of column j of |T|^k), the
 * small triangular system T(J, J) M(J, j) = I(J, j) solved by one thread
 * group, the solution written straight into M. Anzt, Chow, Huckle, Dongarra,
 * "Batched generation of incomplete sparse approximate inverses on GPUs",
 * ScalA 2016, Algorithm 1 and section IV; the long columns as Ginkgo's ISAI
 * "excess" system (core/preconditioner/isai.cpp); the CPU reference is
 * src/precond/pc_isai.c.
 *
 * The columns of M are the rows of M^T = pattern of |T^T|^k: T is transposed
 * first (toolkit), so that each group reads its pattern J as one sorted row;
 * M^T is transposed back (ISAI(1): M has T's pattern, and the values are
 * scattered to T's positions instead, one sort fewer).
 * Every lane (thread) p of a group owns row J_p of the small system and walks
 * row J_p of T (by rows, sorted) with one pointer, merging it with J as the
 * substitution goes: at step q it finds t_{J_p J_q} (the paper's "traverse
 * the rows of L and M"; the pointer gallops, so a dense row of T met by many
 * short columns costs each O(log n) a step, not O(n)), lane q divides by its
 * diagonal, x_q is broadcast (a shuffle within a warp, shared memory within
 * a block), and every later row subtracts t_{J_p J_q} x_q. No dense copy of
 * T(J, J) is held: each lane keeps a pointer, a right-hand side and its x, so
 * a lane may own several rows.
 * Sizes (isai_cuda.h): up to 32 one group of 4, 8, 16 or 32 lanes (several
 * columns a warp); up to 128 a warp with 2 or 4 rows a lane; up to 4096 a
 * 256-thread block with 1, 4 or 16 rows a thread in registers. The batch
 * costs |J| steps of |J| / 256 rows a column: O(|J|^2) work, bounded by the
 * cut. Longer columns (any length; or longer than gs_debug.isai_excess_above)
 * go to the excess system below, whose cost follows nnz(T(J, J)).
 * Products and differences are rounded separately (no fused multiply-add),
 * as the host reference rounds them: for L (forward substitution, the same
 * order of terms) the values equal the reference's for the same L. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isai_cuda.h"

#define FULL_MASK 0xffffffffu
#define EXCESS_ROWS_MIN ((int64_t)1 << 22)    /* a chunk of the excess system: rows ... */
#define EXCESS_ENTRIES_MIN ((int64_t)1 << 24) /* ... and entries, at least (else n, nnz(T)) */

/* The first position in [lo, hi) of the ascending a with a[pos] >= key (hi
 * if none), galloping from lo: probes lo, lo + 1, lo + 3, ..., then a binary
 * search in the last bracket: O(log d) loads for an answer d places on, one
 * load where it is the next place (a linear walk's cost there). */
static __device__ __forceinline__ int64_t isai_gallop_up(const int32_t *__restrict__ a, int64_t lo,
                                                         int64_t hi, int32_t key)
{
    int64_t bound = 1;
    while (lo + bound - 1 < hi && a[lo + bound - 1] < key) bound *= 2;
    int64_t left = lo + bound / 2, right = lo + bound - 1 < hi ? lo + bound - 1 : hi;
    while (left < right) {
        const int64_t mid = left + (right - left) / 2;
        if (a[mid] < key) left = mid + 1;
        else right = mid;
    }
    return left;
}

/* The mirror: the last position in [lo, hi] with a[pos] <= key (lo - 1 if
 * none), galloping down from hi. */
static __device__ __forceinline__ int64_t isai_gallop_down(const int32_t *__restrict__ a,
                                                           int64_t lo, int64_t hi, int32_t key)
{
    int64_t bound = 1;
    while (hi - bound + 1 >= lo && a[hi - bound + 1] > key) bound *= 2;
    int64_t left = hi - bound + 1 >= lo ? hi - bound + 1 : lo - 1, right = hi - bound / 2;
    while (left < right) {
        const int64_t mid = left + (right - left + 1) / 2;
        if (a[mid] <= key) left = mid;
        else right = mid - 1;
    }
    return left;
}

/* The pointer of row `row` of T before the first step: its first entry
 * (lower, walked forward) or its last (upper, walked backward). */
template <bool LOWER>
static __device__ __forceinline__ int64_t isai_walk_start(const int64_t *__restrict__ trp,
                                                          int32_t row)
{
    return LOWER ? trp[row] : trp[row + 1] - 1;
}

/* Moves a to the entry of column jq of row `row` of T if stored (*t its
 * value, true returned), else to where it would be (false). */
template <bool LOWER>
static __device__ __forceinline__ bool isai_walk(const int64_t *__restrict__ trp,
                                                 const int32_t *__restrict__ tcol,
                                                 const double *__restrict__ tval, int32_t row,
                                                 int32_t jq, int64_t &a, double &t)
{
    if (LOWER) {
        const int64_t stop = trp[row + 1];
        if (a < stop && tcol[a] < jq) a = isai_gallop_up(tcol, a + 1, stop, jq);
        if (a < stop && tcol[a] == jq) return t = tval[a], true;
    } else {
        const int64_t stop = trp[row];
        if (a >= stop && tcol[a] > jq) a = isai_gallop_down(tcol, stop, a - 1, jq);
        if (a >= stop && tcol[a] == jq) return t = tval[a], true;
    }
    return false;
}

/* Row p comes at or after step q in the substitution's order. */
template <bool LOWER>
static __device__ __forceinline__ bool isai_after(int p, int q)
{
    return LOWER ? p >= q : p <= q;
}

/* ------------------------------------------------- groups within a warp */

/* G lanes a column (G divides 32), RL rows a lane (row p = lane + r G):
 * columns with lo < m <= min(G RL, hi); the others are left to other
 * launches or to the excess system. list: the columns to take (NULL: column
 * = group index, count = n). */
template <int G, int RL, bool LOWER>
__global__ void isai_group_kernel(int32_t count, const int32_t *__restrict__ list, int lo,
                                  int64_t hi, const int64_t *__restrict__ mrp,
                                  const int32_t *__restrict__ mcol, double *__restrict__ mval,
                                  const int64_t *__restrict__ trp,
                                  const int32_t *__restrict__ tcol,
                                  const double *__restrict__ tval, int *bad)
{
    const int64_t group = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int lane = (int)(threadIdx.x % G);
    const unsigned gmask =
        G == 32 ? FULL_MASK : (((1u << G) - 1u) << ((threadIdx.x & 31) & ~(unsigned)(G - 1)));
    if (group >= count) return; /* the whole group */
    const int32_t j = list ? list[group] : (int32_t)group;
    const int64_t b = mrp[j];
    const int m = (int)(mrp[j + 1] - b);
    if (m <= lo || m > G * RL || m > hi) return; /* the whole group */
    int32_t row[RL];
    int64_t a[RL];
    double rhs[RL], x[RL];
#pragma unroll
    for (int r = 0; r < RL; r++) {
        const int p = lane + r * G;
        row[r] = p < m ? mcol[b + p] : 0;
        a[r] = p < m ? isai_walk_start<LOWER>(trp, row[r]) : 0;
        rhs[r] = p == (LOWER ? 0 : m - 1) ? 1.0 : 0.0; /* e_1 (lower), e_m (upper) */
        x[r] = 0.0;
    }
    for (int s = 0; s < m; s++) {
        const int q = LOWER ? s : m - 1 - s;
        int32_t jq = 0;
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (q / G == r) jq = row[r];
        jq = __shfl_sync(gmask, jq, q % G, G);
        double t[RL];
        bool has[RL];
#pragma unroll
        for (int r = 0; r < RL; r++) {
            const int p = lane + r * G;
            t[r] = 0.0;
            has[r] = p < m && isai_after<LOWER>(p, q) &&
                     isai_walk<LOWER>(trp, tcol, tval, row[r], jq, a[r], t[r]);
            if (p == q) x[r] = rhs[r] / t[r]; /* a missing diagonal gives Inf or NaN */
        }
        double xq = 0.0;
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (q / G == r) xq = x[r];
        xq = __shfl_sync(gmask, xq, q % G, G);
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (has[r] && lane + r * G != q)
                rhs[r] = __dsub_rn(rhs[r], __dmul_rn(t[r], xq)); /* - t_{J_p J_q} x_q */
    }
#pragma unroll
    for (int r = 0; r < RL; r++) {
        const int p = lane + r * G;
        if (p < m) {
            mval[b + p] = x[r];
            if (!isfinite(x[r])) atomicMin(bad, j + 1);
        }
    }
}

/* ------------------------------------------------------ one block a column */

/* ISAI_BLOCK_THREADS threads a column, R rows a thread (row p = thread + r
 * B) in registers, x_q through shared memory (two slots: one barrier a
 * step). Columns with lo < m <= R B of the list. */
template <int R, bool LOWER>
__global__ void __launch_bounds__(ISAI_BLOCK_THREADS)
    isai_block_kernel(const int32_t *__restrict__ list, int lo, const int64_t *__restrict__ mrp,
                      const int32_t *__restrict__ mcol, double *__restrict__ mval,
                      const int64_t *__restrict__ trp, const int32_t *__restrict__ tcol,
                      const double *__restrict__ tval, int *bad)
{
    constexpr int B = ISAI_BLOCK_THREADS;
    __shared__ double xs[2];
    const int32_t j = list[blockIdx.x];
    const int64_t b = mrp[j];
    const int m = (int)(mrp[j + 1] - b);
    if (m <= lo || m > R * B) return; /* the whole block */
    int32_t row[R];
    int64_t a[R];
    double rhs[R], x[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int p = (int)threadIdx.x + r * B;
        row[r] = p < m ? mcol[b + p] : 0;
        a[r] = p < m ? isai_walk_start<LOWER>(trp, row[r]) : 0;
        rhs[r] = p == (LOWER ? 0 : m - 1) ? 1.0 : 0.0;
        x[r] = 0.0;
    }
    for (int s = 0; s < m; s++) {
        const int q = LOWER ? s : m - 1 - s;
        const int32_t jq = mcol[b + q];
        double t[R];
        bool has[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int p = (int)threadIdx.x + r * B;
            t[r] = 0.0;
            has[r] = p < m && isai_after<LOWER>(p, q) &&
                     isai_walk<LOWER>(trp, tcol, tval, row[r], jq, a[r], t[r]);
            if (p == q) xs[s & 1] = x[r] = rhs[r] / t[r];
        }
        __syncthreads();
        const double xq = xs[s & 1];
#pragma unroll
        for (int r = 0; r < R; r++)
            if (has[r] && (int)threadIdx.x + r * B != q)
                rhs[r] = __dsub_rn(rhs[r], __dmul_rn(t[r], xq));
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int p = (int)threadIdx.x + r * B;
        if (p < m) {
            mval[b + p] = x[r];
            if (!isfinite(x[r])) atomicMin(bad, j + 1);
        }
    }
}

/* info[0] = the longest column, info[1] = the longest of at most cut
 * entries (the batch's: its lane groups are sized by it), each by atomicMax
 * once a warp; info[2] = how many columns have ISAI_GROUP_MAX < m <= cut,
 * listed from the front of list; info[3] = how many have m > cut (the
 * excess system's), listed from its back (any order: the columns are
 * independent). */
__global__ void isai_classify_kernel(int32_t n, const int64_t *__restrict__ mrp, int64_t cut,
                                     int32_t *__restrict__ list,
                                     unsigned long long *__restrict__ info)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long m = j < n ? (unsigned long long)(mrp[j + 1] - mrp[j]) : 0ull;
    unsigned long long most = m, most_batched = m <= (unsigned long long)cut ? m : 0ull;
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long other = __shfl_xor_sync(FULL_MASK, most, o);
        const unsigned long long other_batched = __shfl_xor_sync(FULL_MASK, most_batched, o);
        most = other > most ? other : most;
        most_batched = other_batched > most_batched ? other_batched : most_batched;
    }
    if ((threadIdx.x & 31) == 0 && most > 0) atomicMax(&info[0], most);
    if ((threadIdx.x & 31) == 0 && most_batched > 0) atomicMax(&info[1], most_batched);
    if (j >= n) return;
    if (m > (unsigned long long)cut)
        list[n - 1 - (int64_t)atomicAdd(&info[3], 1ull)] = (int32_t)j;
    else if (m > ISAI_GROUP_MAX)
        list[atomicAdd(&info[2], 1ull)] = (int32_t)j;
}

/* The batched launches for M^T's columns of at most `cut` entries with the
 * values of T (m_max: the longest of them): the group kernel for every
 * column up to the longest's size class (at most 32), then each larger
 * class over the list (count columns, all longer than 32). */
template <bool LOWER>
static int isai_solve_columns(gs_engine *e, const gs_dcsr *T, gs_dcsr *MT, int64_t m_max,
                              int64_t cut, const int32_t *list, int32_t count, int *bad)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const int64_t *mrp = MT->rp, *trp = T->rp;
    const int32_t *mcol = MT->col, *tcol = T->col;
    double *mval = (double *)MT->val;
    const double *tval = (const double *)T->val;
    const int32_t n = MT->n;
    const int32_t *all = NULL;
    int status = GS_OK;
    const unsigned B = ISAI_BLOCK_THREADS;
    if (m_max <= 4) {
        auto k = isai_group_kernel<4, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 4, B), B, 0, st, n, all, 0, cut,
                           mrp, mcol, mval, trp, tcol, tval, bad));
    } else if (m_max <= 8) {
        auto k = isai_group_kernel<8, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 8, B), B, 0, st, n, all, 0, cut,
                           mrp, mcol, mval, trp, tcol, tval, bad));
    } else if (m_max <= 16) {
        auto k = isai_group_kernel<16, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 16, B), B, 0, st, n, all, 0, cut,
                           mrp, mcol, mval, trp, tcol, tval, bad));
    } else {
        auto k = isai_group_kernel<32, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 32, B), B, 0, st, n, all, 0, cut,
                           mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (count == 0) goto cleanup;
    if (m_max > 32) {
        auto k = isai_group_kernel<32, 2, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)count * 32, B), B, 0, st, count, list,
                           32, cut, mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (m_max > 64) {
        auto k = isai_group_kernel<32, 4, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)count * 32, B), B, 0, st, count, list,
                           64, cut, mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (m_max > 128) {
        auto k = isai_block_kernel<1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, 128, mrp, mcol, mval, trp, tcol,
                           tval, bad));
    }
    if (m_max > (int64_t)B) {
        auto k = isai_block_kernel<4, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, (int)B, mrp, mcol, mval, trp, tcol,
                           tval, bad));
    }
    if (m_max > 4 * (int64_t)B) {
        auto k = isai_block_kernel<ISAI_BLOCK_ROWS_MAX, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, 4 * (int)B, mrp, mcol, mval, trp,
                           tcol, tval, bad));
    }
cleanup:
    return status;
}

/* ---------------------------------------------------- the excess system */

/* The columns longer than the cut (Ginkgo's "excess" rows of its ISAI): block
 * b of one block-diagonal sparse system is T(J_b, J_b), its rows and columns
 * numbered by position in J_b after the blocks before it, its right-hand
 * side e_1 (lower) or e_{m_b} (upper), so that its solution is column j_b of
 * M in M^T's order. Built sparsely: row p of block b holds the entries of
 * row J_p of T whose columns lie in J_b on the triangle's side, found by a
 * galloping merge of the two sorted lists, O(min(nnz(T(J_p, :)), m_b) log)
 * a row; solved by the toolkit's sync-free triangular solve (one launch;
 * a row waits only on rows of its own block, about one flag latency a level
 * of T(J_b, J_b)). The batched kernels' m_b steps of m_b / 256 rows are not
 * taken: a column of n = 130k cost 36.7 s that way on an H100. */

/* Row p of a block: the entries of row J_p of T in columns J_q, q in [q0,
 * q1] (lower: [0, p], upper: [p, m - 1]), in increasing q; returns their
 * count, and with col writes each one's column base + q and value. */
static __device__ int64_t isai_excess_row(const int64_t *__restrict__ trp,
                                          const int32_t *__restrict__ tcol,
                                          const double *__restrict__ tval,
                                          const int32_t *__restrict__ J, int64_t p, int64_t q0,
                                          int64_t q1, int64_t base, int32_t *__restrict__ col,
                                          double *__restrict__ val)
{
    const int32_t r = J[p];
    const int64_t end = trp[r + 1];
    int64_t a = trp[r], q = q0, k = 0;
    while (a < end && q <= q1) {
        const int32_t c = tcol[a], jq = J[q];
        if (c < jq) {
            a = isai_gallop_up(tcol, a + 1, end, jq);
        } else if (c > jq) {
            q = isai_gallop_up(J, q + 1, q1 + 1, c);
        } else {
            if (col) col[k] = (int32_t)(base + q), val[k] = tval[a];
            k++, a++, q++;
        }
    }
    return k;
}

/* A block a column of xlist: sizes[b] = m_b, sizes[count + b] += the
 * entries of block b (zeroed before). */
__global__ void isai_excess_sizes_kernel(int32_t count, const int32_t *__restrict__ xlist,
                                         bool lower, const int64_t *__restrict__ mrp,
                                         const int32_t *__restrict__ mcol,
                                         const int64_t *__restrict__ trp,
                                         const int32_t *__restrict__ tcol,
                                         int64_t *__restrict__ sizes)
{
    const int32_t j = xlist[blockIdx.x];
    const int64_t b = mrp[j], m = mrp[j + 1] - b;
    int64_t k = 0;
    for (int64_t p = threadIdx.x; p < m; p += blockDim.x)
        k += isai_excess_row(trp, tcol, NULL, mcol + b, p, lower ? 0 : p, lower ? p : m - 1, 0,
                             NULL, NULL);
    if (threadIdx.x == 0) sizes[blockIdx.x] = m;
    if (k > 0) atomicAdd((unsigned long long *)&sizes[count + blockIdx.x], (unsigned long long)k);
}

/* Row i of the chunk of blocks [c0, c1) (xoff: each block's first row over
 * all blocks, xcols: its column): the block, its column j, M^T's first
 * position of column j, the position p in J_j and m_j. */
struct isai_excess_at {
    int32_t block, j;
    int64_t first, p, m;
};

static __device__ __forceinline__ isai_excess_at isai_excess_where(
    int64_t i, int32_t c0, int32_t c1, const int64_t *__restrict__ xoff,
    const int32_t *__restrict__ xcols, const int64_t *__restrict__ mrp)
{
    isai_excess_at w;
    const int64_t g = xoff[c0] + i;
    w.block = gs_dsearch_last_at_or_below(xoff, c0, c1, g);
    w.j = xcols[w.block];
    w.first = mrp[w.j], w.m = mrp[w.j + 1] - w.first, w.p = g - xoff[w.block];
    return w;
}

/* rp[i + 1] = the entries of the chunk's row i, rp[0] = 0. */
__global__ void isai_excess_count_kernel(int64_t rows, int32_t c0, int32_t c1,
                                         const int64_t *__restrict__ xoff,
                                         const int32_t *__restrict__ xcols, bool lower,
                                         const int64_t *__restrict__ mrp,
                                         const int32_t *__restrict__ mcol,
                                         const int64_t *__restrict__ trp,
                                         const int32_t *__restrict__ tcol, int64_t *__restrict__ rp)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) rp[0] = 0;
    if (i >= rows) return;
    const isai_excess_at w = isai_excess_where(i, c0, c1, xoff, xcols, mrp);
    rp[i + 1] = isai_excess_row(trp, tcol, NULL, mcol + w.first, w.p, lower ? 0 : w.p,
                                lower ? w.p : w.m - 1, 0, NULL, NULL);
}

/* Row i's entries (columns local to the chunk) and right-hand side. */
__global__ void isai_excess_fill_kernel(int64_t rows, int32_t c0, int32_t c1,
                                        const int64_t *__restrict__ xoff,
                                        const int32_t *__restrict__ xcols, bool lower,
                                        const int64_t *__restrict__ mrp,
                                        const int32_t *__restrict__ mcol,
                                        const int64_t *__restrict__ trp,
                                        const int32_t *__restrict__ tcol,
                                        const double *__restrict__ tval,
                                        const int64_t *__restrict__ rp, int32_t *__restrict__ col,
                                        double *__restrict__ val, double *__restrict__ rhs)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const isai_excess_at w = isai_excess_where(i, c0, c1, xoff, xcols, mrp);
    isai_excess_row(trp, tcol, tval, mcol + w.first, w.p, lower ? 0 : w.p, lower ? w.p : w.m - 1,
                    xoff[w.block] - xoff[c0], col + rp[i], val + rp[i]);
    rhs[i] = w.p == (lower ? 0 : w.m - 1) ? 1.0 : 0.0; /* e_1 (lower), e_m (upper) */
}

/* m_{J_p j} = x_i into M^T, where the batched kernels would have put it. */
__global__ void isai_excess_scatter_kernel(int64_t rows, int32_t c0, int32_t c1,
                                           const int64_t *__restrict__ xoff,
                                           const int32_t *__restrict__ xcols,
                                           const int64_t *__restrict__ mrp,
                                           const double *__restrict__ x, double *__restrict__ mval,
                                           int *bad)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const isai_excess_at w = isai_excess_where(i, c0, c1, xoff, xcols, mrp);
    const double v = x[i];
    mval[w.first + w.p] = v;
    if (!isfinite(v)) atomicMin(bad, w.j + 1);
}

/* Blocks [c0, c1) of the excess system (rows rows, nnz entries): built,
 * analysed (the host waits: the time limit is asked), solved, scattered. */
static int isai_excess_chunk(gs_engine *e, gs_pc *pc, const gs_dcsr *T, gs_dcsr *MT, int lower,
                             const int64_t *xoff, const int32_t *xcols, int32_t c0, int32_t c1,
                             int64_t rows, int64_t nnz, int *bad, gs_error *err)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const int64_t *mrp = MT->rp, *trp = T->rp;
    const int32_t *mcol = MT->col, *tcol = T->col;
    const unsigned B = 256;
    gs_dcsr S = {};
    gs_dtri tri = {};
    double *rhs = NULL, *x = NULL;
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &S, (int32_t)rows, "isai: excess system row pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_excess_count_kernel, gs_dblocks(rows, B), B, 0, st, rows, c0,
                       c1, xoff, xcols, (bool)lower, mrp, mcol, trp, tcol, S.rp));
    GS_TRY(gs_dcsr_counts_scan(e, S.rp, (int32_t)rows));
    GS_TRY(gs_dcsr_alloc_entries(e, &S, nnz, sizeof(double), "isai: excess system"));
    GS_TRY(gs_cuda_alloc(e, &rhs, (size_t)rows * sizeof(double), "isai: excess right-hand side"));
    GS_TRY(gs_cuda_alloc(e, &x, (size_t)rows * sizeof(double), "isai: excess solution"));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_excess_fill_kernel, gs_dblocks(rows, B), B, 0, st, rows, c0,
                       c1, xoff, xcols, (bool)lower, mrp, mcol, trp, tcol,
                       (const double *)T->val, (const int64_t *)S.rp, S.col, (double *)S.val,
                       rhs));
    GS_TRY(gs_dtri_analyse(e, (int32_t)rows, nnz, S.rp, S.col, !lower, &tri)); /* waits */
    if (pc) GS_TRY(gs_pc_deadline(pc, lower ? "isai L" : "isai U", err));
    GS_TRY(gs_dtri_solve(e, &tri, GS_DTRI_SYNCFREE, (const double *)S.val, 0, NULL, rhs, x));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_excess_scatter_kernel, gs_dblocks(rows, B), B, 0, st, rows,
                       c0, c1, xoff, xcols, mrp, (const double *)x, (double *)MT->val, bad));
cleanup:
    gs_dtri_free(e, &tri);
    gs_dcsr_free(e, &S); /* stream-ordered, as the frees below */
    gs_cuda_free(e, rhs, (size_t)rows * sizeof(double));
    gs_cuda_free(e, x, (size_t)rows * sizeof(double));
    return status;
}

/* One excess column on the host: its column, rows (m_b) and entries. */
typedef struct isai_excess_column {
    int32_t j;
    int64_t m, nnz;
} isai_excess_column;

static int isai_excess_by_column(const void *a, const void *b)
{
    const int32_t x = ((const isai_excess_column *)a)->j, y = ((const isai_excess_column *)b)->j;
    return (x > y) - (x < y);
}

/* The host's plan of the excess system: the sizes (one round trip; the
 * time limit is asked), the columns sorted (the chunks, hence the rounding,
 * the same every run), their first rows, both uploaded (*xcols, *xoff). */
static int isai_excess_plan(gs_engine *e, gs_pc *pc, const gs_dcsr *T, const gs_dcsr *MT,
                            int lower, const int32_t *xlist, int32_t count,
                            isai_excess_column *cols, int64_t *hoff, int32_t **xcols,
                            int64_t **xoff, gs_error *err)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    int64_t *sizes = NULL, *hsizes = NULL;
    int32_t *hlist = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &sizes, 2 * (size_t)count * sizeof(int64_t), "isai: excess sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(sizes + count, 0, (size_t)count * sizeof(int64_t), st)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_excess_sizes_kernel, count, 256, 0, st, count, xlist,
                       (bool)lower, (const int64_t *)MT->rp, (const int32_t *)MT->col,
                       (const int64_t *)T->rp, (const int32_t *)T->col, sizes));
    hsizes = (int64_t *)gs_malloc(2 * (size_t)count * sizeof(int64_t), "isai: excess sizes", &e->err);
    hlist = (int32_t *)gs_malloc((size_t)count * sizeof(int32_t), "isai: excess columns", &e->err);
    if (!hsizes || !hlist) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(hsizes, sizes, 2 * (size_t)count * sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, st)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(hlist, xlist, (size_t)count * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, st)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(st)));
    if (pc) GS_TRY(gs_pc_deadline(pc, lower ? "isai L" : "isai U", err));
    for (int32_t b = 0; b < count; b++)
        cols[b].j = hlist[b], cols[b].m = hsizes[b], cols[b].nnz = hsizes[count + b];
    qsort(cols, (size_t)count, sizeof *cols, isai_excess_by_column);
    hoff[0] = 0;
    for (int32_t b = 0; b < count; b++) hoff[b + 1] = hoff[b] + cols[b].m, hlist[b] = cols[b].j;
    GS_TRY(gs_cuda_alloc(e, xcols, (size_t)count * sizeof(int32_t), "isai: excess columns"));
    GS_TRY(gs_cuda_alloc(e, xoff, ((size_t)count + 1) * sizeof(int64_t), "isai: excess blocks"));
    GS_TRY(gs_cuda_upload(e, *xcols, hlist, (size_t)count * sizeof(int32_t)));
    GS_TRY(gs_cuda_upload(e, *xoff, hoff, ((size_t)count + 1) * sizeof(int64_t)));
cleanup:
    gs_cuda_free(e, sizes, 2 * (size_t)count * sizeof(int64_t));
    free(hsizes);
    free(hlist);
    return status;
}

/* The count excess columns listed at xlist (device, any order), in chunks of
 * whole blocks of at most max(n, EXCESS_ROWS_MIN) rows and max(nnz(T),
 * EXCESS_ENTRIES_MIN) entries (a block alone always fits: m_b <= n and
 * nnz(T(J_b, J_b)) <= nnz(T)): device memory about 12 bytes an entry and
 * 60 a row of a chunk (the system, b, x, the analysis), at most that of
 * T plus 60 n bytes, or of 2^24 entries and 2^22 rows, whichever is more. */
static int isai_excess(gs_engine *e, gs_pc *pc, const gs_dcsr *T, gs_dcsr *MT, int lower,
                       const int32_t *xlist, int32_t count, int *bad, isai_generate_info *info,
                       gs_error *err)
{
    const int64_t row_cap = T->n > EXCESS_ROWS_MIN ? T->n : EXCESS_ROWS_MIN;
    const int64_t entry_cap = T->nnz > EXCESS_ENTRIES_MIN ? T->nnz : EXCESS_ENTRIES_MIN;
    isai_excess_column *cols = NULL;
    int64_t *hoff = NULL, *xoff = NULL;
    int32_t *xcols = NULL;
    int status = GS_OK;
    cols = (isai_excess_column *)gs_malloc((size_t)count * sizeof *cols, "isai: excess plan", &e->err);
    hoff = (int64_t *)gs_malloc(((size_t)count + 1) * sizeof *hoff, "isai: excess plan", &e->err);
    if (!cols || !hoff) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(isai_excess_plan(e, pc, T, MT, lower, xlist, count, cols, hoff, &xcols, &xoff, err));
    for (int32_t c0 = 0, c1 = 0; c0 < count; c0 = c1) {
        int64_t rows = 0, nnz = 0;
        while (c1 < count && (c1 == c0 || (rows + cols[c1].m <= row_cap &&
                                           nnz + cols[c1].nnz <= entry_cap)))
            rows += cols[c1].m, nnz += cols[c1].nnz, c1++;
        char what[160];
        snprintf(what, sizeof what, "%s: excess system, columns %d-%d of %d, %lld entries",
                 lower ? "isai L" : "isai U", (int)c0 + 1, (int)c1, (int)count, (long long)nnz);
        gs_pc_stage_progress(pc, what);
        GS_TRY(isai_excess_chunk(e, pc, T, MT, lower, xoff, xcols, c0, c1, rows, nnz, bad, err));
        info->excess_nnz += nnz;
    }
    info->excess_columns = count;
cleanup:
    gs_cuda_free(e, xcols, (size_t)count * sizeof(int32_t));
    gs_cuda_free(e, xoff, ((size_t)count + 1) * sizeof(int64_t));
    free(cols);
    free(hoff);
    return status;
}

/* ISAI(1): M has T's own pattern, so instead of transposing M^T back, T is
 * transposed once with each entry's position as its value (exact in a double
 * below 2^53): row j of T^T then gives column j's pattern, and where each
 * value of M^T goes in M. */
__global__ void isai_positions_kernel(int64_t nnz, double *__restrict__ pos)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < nnz) pos[q] = (double)q;
}

__global__ void isai_scatter_kernel(int64_t nnz, const double *__restrict__ pos,
                                    const double *__restrict__ mt, double *__restrict__ m)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < nnz) m[(int64_t)pos[q]] = mt[q]; /* m_{J_p j} of column j, at T's position */
}

/* M^T's pattern (rows: the columns of M): k = 1 T^T's (MT aliases TT's rp,
 * col; TT's values the positions in T), else |T^T|^k. */
static int isai_columns_pattern(gs_engine *e, const gs_dcsr *T, int k, gs_dcsr *TT, gs_dcsr *MT)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    double *pos = NULL;
    int status = GS_OK;
    if (k > 1) {
        GS_TRY(gs_dcsr_transpose(e, T, TT, 0));       /* row j of TT: column j of T */
        GS_TRY(gs_dcsr_pattern_power(e, TT, k, 0, MT)); /* row j of MT: column j of M */
        goto cleanup;
    }
    {
        gs_dcsr P = *T;
        GS_TRY(gs_cuda_alloc(e, &pos, (size_t)T->nnz * sizeof(double), "isai: positions in T"));
        GS_TRY(CUDA_LAUNCH(&e->err, isai_positions_kernel, gs_dblocks(T->nnz, 256), 256, 0,
                           c->stream, T->nnz, pos));
        P.val = pos;
        P.vsize = sizeof(double);
        GS_TRY(gs_dcsr_transpose(e, &P, TT, 0));
    }
    MT->n = TT->n, MT->nnz = TT->nnz, MT->rp = TT->rp, MT->col = TT->col; /* aliases */
cleanup:
    gs_cuda_free(e, pos, (size_t)T->nnz * sizeof(double)); /* stream-ordered */
    return status;
}

/* M by rows from M^T: k = 1 T's pattern with the values scattered, else the
 * toolkit's transpose. */
static int isai_rows(gs_engine *e, const gs_dcsr *T, int k, const gs_dcsr *TT, const gs_dcsr *MT,
                     gs_dcsr *M)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    if (k > 1) return gs_dcsr_transpose(e, MT, M, 0);
    GS_TRY(gs_dcsr_alloc_rows(e, M, T->n, "isai: row pointers of M"));
    GS_TRY(gs_dcsr_alloc_entries(e, M, T->nnz, sizeof(double), "isai: M"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(M->rp, T->rp, ((size_t)T->n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    if (T->nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(M->col, T->col, (size_t)T->nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_scatter_kernel, gs_dblocks(T->nnz, 256), 256, 0, c->stream,
                       T->nnz, (const double *)TT->val, (const double *)MT->val, (double *)M->val));
cleanup:
    return status;
}

/* The cut above which a column goes to the excess system: ISAI_BLOCK_MAX,
 * the longest the batch holds in registers, or the test switch's lower one.
 * At the cut the batch takes 4096 steps of 16 rows a thread, a few ms for a
 * column, about the excess path's fixed cost (two read-backs, an analysis,
 * a solve) plus its chain of levels; above it the batch's cost grows as
 * |J|^2, the excess system's as nnz(T(J, J)). */
static int64_t isai_excess_cut(gs_engine *e)
{
    const long long above = gs_cuda_debug(e)->isai_excess_above;
    return above > 0 && above < ISAI_BLOCK_MAX ? (int64_t)above : (int64_t)ISAI_BLOCK_MAX;
}

int isai_cuda_generate(gs_engine *e, gs_pc *pc, const gs_dcsr *T, int lower, int k, gs_dcsr *M,
                       isai_generate_info *out, gs_error *err)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = T->n;
    const int64_t cut = isai_excess_cut(e);
    const char *stage = lower ? "isai L" : "isai U";
    gs_dcsr TT = {}, MT = {};
    int32_t *list = NULL;
    /* longest, longest batched, batched columns over 32, excess columns; the
     * failure flag's word */
    unsigned long long *info = NULL;
    int status = GS_OK;
    uint64_t words[5] = {0, 0, 0, 0, 0};
    *out = isai_generate_info{};
    *M = gs_dcsr{};
    GS_TRY(isai_columns_pattern(e, T, k, &TT, &MT));
    if (k > 1 && pc) GS_TRY(gs_pc_deadline(pc, stage, err)); /* the products' sizes waited */
    GS_TRY(gs_cuda_alloc(e, &MT.val, (size_t)MT.nnz * sizeof(double), "isai: values of M"));
    MT.vsize = sizeof(double);
    GS_TRY(gs_cuda_alloc(e, &list, (size_t)n * sizeof(int32_t), "isai: long columns"));
    GS_TRY(gs_cuda_alloc(e, &info, 5 * sizeof(unsigned long long), "isai: column sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(info, 0, 4 * sizeof(unsigned long long), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(info + 4, 0x7f, sizeof(unsigned long long),
                                              c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_classify_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)MT.rp, cut, list, info));
    {
        const void *src[1] = {info};
        const int count[1] = {4};
        GS_TRY(gs_dread_words(e, 1, src, count, words));
    }
    if (pc) GS_TRY(gs_pc_deadline(pc, stage, err));
    out->longest = (int64_t)words[0];
    {
        const int64_t m_max = (int64_t)words[1];
        const int32_t batched = (int32_t)words[2], excess = (int32_t)words[3];
        int *bad = (int *)(info + 4);
        if (lower)
            GS_TRY(isai_solve_columns<true>(e, T, &MT, m_max, cut, list, batched, bad));
        else
            GS_TRY(isai_solve_columns<false>(e, T, &MT, m_max, cut, list, batched, bad));
        if (excess > 0)
            GS_TRY(isai_excess(e, pc, T, &MT, lower, list + (n - excess), excess, bad, out, err));
    }
    {
        const void *src[1] = {info + 4};
        const int count[1] = {1};
        GS_TRY(gs_dread_words(e, 1, src, count, &words[4]));
        int first = 0;
        memcpy(&first, &words[4], sizeof first);
        out->bad_column = first == 0x7f7f7f7f ? 0 : first;
    }
    GS_TRY(isai_rows(e, T, k, &TT, &MT, M));
cleanup:
    if (k == 1) { /* MT's rp and col are TT's */
        gs_cuda_free(e, MT.val, (size_t)MT.nnz * MT.vsize);
        MT = gs_dcsr{};
    }
    gs_dcsr_free(e, &TT);
    gs_dcsr_free(e, &MT);
    gs_cuda_free(e, list, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, info, 5 * sizeof(unsigned long long));
    return status;
}
