/* mic_factor.cu - MIC(0) factorisation M = L D L^T on the device, scheduled by L's levels:
 * the reference's elimination (src/precond/pc_mic.c; Gustafsson, BIT 18 (1978)) recast
 * column by column so that columns of one level run in parallel (MICPCGA's wavefronts), and
 * run either a launch a level or in one synchronisation-free launch (columns in level order,
 * each waiting on ready flags: Liu, Li, Hogg, Vinter, Euro-Par 2016, as the toolkit's
 * cuda/sparse/trisolve_syncfree.cu).
 *
 * Column k (k's entries of U = L^T, row k) needs exactly the columns m with l_km != 0,
 * the rows k of L depends on in the forward solve, so L's levels schedule it:
 *   d_k  = (1 + alpha) a_kk - sum_m l_km d_m l_km - omega sum_m sum_{j != k, (k,j) not in A}
 *          l_km d_m l_jm                               (m < k with l_km != 0; j over column m)
 *   l_jk = (a_jk - sum_{m < k} l_jm d_m l_km) / d_k    (j > k in column k)
 * which are the reference's right-looking updates, pulled instead of pushed: at step m the
 * reference subtracts l_jm d_m l_km from a_jk when (j, k) is in A's pattern, else omega
 * times it from a_kk and a_jj (the dropped fill). The sums run in another order, so the
 * factors agree within rounding. A warp a column; every column is processed even after a
 * failure, so the lowest failing row is the reference's.
 *
 * No cost grows with the square of a row's length (hub nodes, dense first rows): each
 * pair of rows is met from the shorter side, by a search of the longer (mic_merge), and a
 * long column's dropped fill is its sum minus the few entries inside the pattern
 * (mic_column_terms); a long row of L gives a lane to each of its entries.
 *
 * The two schemes (mic_use_syncfree: the rule, or the engine's debug.factor_scheme) run
 * the same device code per column, mic_column, with explicit roundings (no contraction
 * into fused multiply-adds): their factors are equal to the bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda/atomic>

#include "mic_cuda.h"

#define MIC_WARPS 8 /* columns (warps) a 256-thread block */
#define FULL_MASK 0xffffffffu
#define MIC_NO_FAIL 0x7fffffff
#define MIC_UNSET 0xffffffffffffffffull /* d's fill before a sync-free factorisation */
#define MIC_NAN 0x7ff8000000000000ull   /* a computed d_k that equals the fill */

/* The scheme on the device (the host takes the thinnest levels: gs_dfactor_on_host): one
 * sync-free launch where L's levels hold at least this many columns on average, else a
 * launch a level. Measured on an H200 (scripts/bench/bench_factor.py, factorisation seconds,
 * levels / sync-free): elast3d:30 (132 columns a level, heavy columns) 0.474 / 0.707,
 * hub:450 (225) 0.0166 / 0.0164, powerlaw:270000 (3140) 0.334 / 0.240, poisson3d:64
 * (1380) 0.0038 / 0.0041, poisson3d:128 (5490) 0.0131 / 0.0133: where few columns share a
 * level their spinning warps hold the multiprocessors the level's work needs. */
#define MIC_SYNCFREE_MIN_COLUMNS_PER_LEVEL 1024
/* A column m of L with more entries below d_m is long: its fill is summed through tsum_m. */
#define MIC_LONG_COLUMN 64
/* A row k of L with more entries off the diagonal gives a lane to each m, not the warp. */
#define MIC_LANE_ENTRIES 32
/* Runs of at most this many entries are merged; longer ones searched from the shorter. */
#define MIC_MERGE_MAX 16
/* The deadline is asked every this many level launches (host time only, no wait). */
#define MIC_CHECK_LEVELS 256

typedef cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> mic_word_ref;

template <typename T>
static __device__ inline T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* The position of column j in the sorted col[0, len), or -1. */
static __device__ inline int64_t mic_find(const int32_t *__restrict__ col, int64_t len, int32_t j)
{
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (col[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && col[lo] == j ? lo : -1;
}

/* ------------------------------------------------------ checks, patterns */

/* A warp a row of A: *bad = lowest row that breaks symmetry (gs_csr_is_symmetric's test:
 * |a_ij - a_ji| <= rtol max(|a_ij|, |a_ji|), a missing mirror read as 0), holds a value
 * that is not finite, or has no positive finite diagonal; diag_pos, and the counts of L
 * and U (l_rp[i + 1], u_rp[i + 1]; 1 each for a row without diagonal, discarded).
 * bad[1] = 1 where a stored (zero) entry has no stored mirror: tril(A) and triu(A)^T
 * differ then, which this setup's patterns assume away. */
__global__ void mic_check_kernel(int32_t n, const int64_t *__restrict__ rp,
                                 const int32_t *__restrict__ col, const double *__restrict__ val,
                                 int64_t *__restrict__ diag_pos, int64_t *__restrict__ l_rp,
                                 int64_t *__restrict__ u_rp, int *bad)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t dpos = -1;
    bool ok = true;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) {
        const int32_t j = col[p];
        const double aij = val[p];
        if (!isfinite(aij)) ok = false;
        if (j == i) {
            dpos = p;
            if (!(aij > 0.0)) ok = false;
            continue;
        }
        if (j < 0 || j >= n) {
            ok = false;
            continue;
        }
        const int64_t q = mic_find(col + rp[j], rp[j + 1] - rp[j], i);
        const double aji = q >= 0 ? val[rp[j] + q] : 0.0;
        if (!(fabs(aij - aji) <= GS_SYMMETRY_RTOL * fmax(fabs(aij), fabs(aji)))) ok = false;
        else if (q < 0) bad[1] = 1; /* a stored 0 without its mirror: patterns differ */
    }
    for (int o = 16; o > 0; o >>= 1) {
        const long long other = __shfl_xor_sync(FULL_MASK, (long long)dpos, o);
        dpos = max((long long)dpos, other);
    }
    ok = __all_sync(FULL_MASK, ok);
    if (lane != 0) return;
    if (dpos < 0) ok = false;
    diag_pos[i] = dpos;
    l_rp[i + 1] = dpos < 0 ? 1 : dpos - rp[i] + 1;
    u_rp[i + 1] = dpos < 0 ? 1 : rp[i + 1] - dpos;
    if (i == 0) l_rp[0] = 0, u_rp[0] = 0; /* rows allocated unzeroed */
    if (!ok) atomicMin(&bad[0], i);
}

/* A warp a row i: L's row (A's columns up to the diagonal) with lmap (l_im's place in U's
 * row m, found by a search of it), and U's row (from the diagonal on). */
__global__ void mic_pattern_kernel(int32_t n, const int64_t *__restrict__ rp,
                                   const int32_t *__restrict__ col,
                                   const int64_t *__restrict__ diag_pos,
                                   const int64_t *__restrict__ l_rp, int32_t *__restrict__ l_col,
                                   int64_t *__restrict__ lmap, const int64_t *__restrict__ u_rp,
                                   int32_t *__restrict__ u_col)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t dpos = diag_pos[i];
    for (int64_t p = rp[i] + lane; p <= dpos; p += 32) {
        const int32_t m = col[p];
        const int64_t dst = l_rp[i] + (p - rp[i]);
        l_col[dst] = m;
        if (m == i) {
            lmap[dst] = u_rp[i]; /* U's row i starts with its diagonal */
        } else {
            const int64_t um = diag_pos[m];
            const int64_t q = mic_find(col + um, rp[m + 1] - um, i); /* present: A symmetric */
            lmap[dst] = u_rp[m] + q;
        }
    }
    for (int64_t p = dpos + lane; p < rp[i + 1]; p += 32) u_col[u_rp[i] + (p - dpos)] = col[p];
}

/* A warp a row: U's values from A's upper triangle, the diagonal shifted: (1 + alpha) a_kk
 * (also into a_diag). Resets the try's record (fail, ratio, dropped) from row 0. */
__global__ void mic_init_kernel(int32_t n, const int64_t *__restrict__ rp,
                                const double *__restrict__ val,
                                const int64_t *__restrict__ diag_pos,
                                const int64_t *__restrict__ u_rp, double *__restrict__ u_val,
                                double alpha, double *__restrict__ a_diag,
                                unsigned long long *record)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t dpos = diag_pos[i];
    for (int64_t p = dpos + lane; p < rp[i + 1]; p += 32) {
        const double v = p == dpos ? val[p] * (1.0 + alpha) : val[p]; /* a_ii + alpha a_ii */
        u_val[u_rp[i] + (p - dpos)] = v;
        if (p == dpos) a_diag[i] = v;
    }
    if (i == 0 && lane == 0) {
        record[0] = MIC_NO_FAIL;              /* lowest failing row */
        record[1] = __double_as_longlong(INFINITY); /* min d_k / a_kk, as ordered bits */
        record[2] = 0;                          /* dropped fill updates, counted twice */
    }
}

/* --------------------------------------------------------- the factorisation */

/* The first place in col[lo, hi) (sorted) whose column is >= j. */
static __device__ inline int64_t mic_lower_bound(const int32_t *__restrict__ col, int64_t lo,
                                                 int64_t hi, int32_t j)
{
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (col[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* d_m once column m is finished. Sync-free: d is filled with MIC_UNSET before the launch and
 * d_m, stored with release semantics after the column's values (mic_column), is its ready
 * flag; this lane's acquire load orders its later reads of column m (l_jm, tsum_m) after
 * them. Polls back to back first, then sleeps doubling to 256 ns (as the toolkit's sync-free
 * solve). Levels: column m ended in an earlier launch, a plain load. */
template <bool SYNCFREE>
static __device__ inline double mic_pivot(double *d, int32_t m)
{
    if (!SYNCFREE) return d[m];
    const unsigned long long v = gs_dwait_while(reinterpret_cast<unsigned long long *>(d + m),
                                                (unsigned long long)MIC_UNSET,
                                                cuda::memory_order_acquire);
    return __longlong_as_double((long long)v);
}

/* Column k's terms of one m < k with l_km != 0 (L's entry p), the lanes start, start +
 * stride, ... of the work (a warp on one m, or a lane alone, stride 1); base: this lane
 * adds the terms that are not split. sub += l_km d_m l_km; fill += l_km d_m l_jm over the
 * dropped j (j > m in column m, j != k, (k, j) not in A), dropped += their number:
 * - column m short: its entries walked, each j searched in A's row k;
 * - column m long (a hub's, a dense first column): A's row k walked instead (j > m), each j
 *   searched in column m, and fill += l_km d_m (tsum_m - l_km - sum_{j inside} l_jm)
 *   (tsum_m = sum_{j > m} l_jm): the same sum (error bound u sum_j |l_km d_m l_jm| times a
 *   small multiple of the column length, as the walk's), at a cost of row k's length.
 * Explicit roundings (no fused multiply-add), so both schemes round alike. */
template <bool SYNCFREE>
static __device__ inline void mic_column_terms(int32_t k, int64_t p, int start, int stride,
                                               bool base, const int32_t *__restrict__ ak,
                                               int64_t ak_len, const int32_t *__restrict__ l_col,
                                               const int64_t *__restrict__ lmap,
                                               const int64_t *__restrict__ u_rp,
                                               const int32_t *__restrict__ u_col, double *u_val,
                                               double *d, double *tsum, double &sub,
                                               double &fill, long long &dropped)
{
    const int32_t m = l_col[p];
    const double dm = mic_pivot<SYNCFREE>(d, m);          /* waits for column m */
    const double lkm = u_val[lmap[p]];
    const double lkm_dm = __dmul_rn(lkm, dm);
    const int64_t u0 = u_rp[m] + 1, u1 = u_rp[m + 1];     /* l_jm, j > m */
    if (base) sub = __dadd_rn(sub, __dmul_rn(lkm_dm, lkm));
    if (u1 - u0 > MIC_LONG_COLUMN && u1 - u0 > ak_len) {
        if (base) {
            fill = __dadd_rn(fill, __dmul_rn(lkm_dm, __dsub_rn(tsum[m], lkm)));
            dropped += u1 - u0 - 1;
        }
        for (int64_t a = mic_lower_bound(ak, 0, ak_len, m + 1) + start; a < ak_len; a += stride) {
            const int32_t j = ak[a];
            const int64_t q = j == k ? -1 : mic_find(u_col + u0, u1 - u0, j);
            if (q < 0) continue;
            fill = __dsub_rn(fill, __dmul_rn(lkm_dm, u_val[u0 + q])); /* (k, j) in A: kept */
            dropped--;
        }
    } else {
        for (int64_t q = u0 + start; q < u1; q += stride) {
            const int32_t j = u_col[q];
            if (j == k || mic_find(ak, ak_len, j) >= 0) continue;
            fill = __dadd_rn(fill, __dmul_rn(lkm_dm, u_val[q])); /* fill at (k, j) dropped */
            dropped++;
        }
    }
}

/* sum over m < k in both L's row k and L's row j (j > k) of l_km d_m l_jm, m ascending: two
 * short runs merged, else the shorter walked and the other searched (a hub's row is never
 * walked for a short one: O(short log long)); the same terms in the same order either way. */
template <bool SYNCFREE>
static __device__ inline double mic_merge(int32_t k, int32_t j, const int64_t *__restrict__ l_rp,
                                          const int32_t *__restrict__ l_col,
                                          const int64_t *__restrict__ lmap, const double *u_val,
                                          double *d)
{
    const int64_t a0 = l_rp[k], a1 = l_rp[k + 1] - 1; /* row k's diagonal left out */
    const int64_t b0 = l_rp[j], b1 = mic_lower_bound(l_col, b0, l_rp[j + 1], k);
    const bool walk_k = a1 - a0 <= b1 - b0;
    const bool merge = a1 - a0 <= MIC_MERGE_MAX && b1 - b0 <= MIC_MERGE_MAX;
    int64_t a = a0, b = b0;
    double s = 0.0;
    while (a < a1 && b < b1) {
        const int32_t ma = l_col[a], mb = l_col[b];
        if (ma == mb) {
            const double dm = mic_pivot<SYNCFREE>(d, ma);
            /* l_km d_m l_jm */
            s = __dadd_rn(s, __dmul_rn(__dmul_rn(u_val[lmap[a]], dm), u_val[lmap[b]]));
            a++, b++;
        } else if (ma < mb) {
            a = merge || walk_k ? a + 1 : mic_lower_bound(l_col, a, a1, mb);
        } else {
            b = merge || !walk_k ? b + 1 : mic_lower_bound(l_col, b, b1, ma);
        }
    }
    return s;
}

/* Column k of L and d_k by one warp (see the top): its terms over L's row k (a warp on each m
 * in turn, or, for a long row, a lane on each m), then l_jk for j > k, a lane each. With
 * SYNCFREE, every read of a column m goes after this lane's acquire of d_m, and d_k is
 * released last: every lane fences its stores, the warp meets, lane 0 stores d_k. */
template <bool SYNCFREE>
static __device__ void mic_column(int32_t k, const int64_t *__restrict__ a_rp,
                                  const int32_t *__restrict__ a_col,
                                  const int64_t *__restrict__ l_rp,
                                  const int32_t *__restrict__ l_col,
                                  const int64_t *__restrict__ lmap,
                                  const int64_t *__restrict__ u_rp,
                                  const int32_t *__restrict__ u_col, double *u_val,
                                  const double *__restrict__ a_diag, double omega, double *d,
                                  double *tsum, unsigned long long *record)
{
    const int lane = threadIdx.x & 31;
    const int32_t *ak = a_col + a_rp[k];
    const int64_t ak_len = a_rp[k + 1] - a_rp[k];
    const int64_t l0 = l_rp[k], l1 = l_rp[k + 1] - 1;    /* m < k, l_km != 0 */
    double sub = 0.0, fill = 0.0;
    long long dropped = 0;
    if (l1 - l0 > MIC_LANE_ENTRIES) {
        for (int64_t p = l0 + lane; p < l1; p += 32)
            mic_column_terms<SYNCFREE>(k, p, 0, 1, true, ak, ak_len, l_col, lmap, u_rp, u_col,
                                       u_val, d, tsum, sub, fill, dropped);
    } else {
        for (int64_t p = l0; p < l1; p++)
            mic_column_terms<SYNCFREE>(k, p, lane, 32, lane == 0, ak, ak_len, l_col, lmap, u_rp,
                                       u_col, u_val, d, tsum, sub, fill, dropped);
    }
    /* lane 0's sums for all */
    const double dk = __shfl_sync(FULL_MASK, __dsub_rn(__dsub_rn(a_diag[k], warp_sum(sub)),
                                                       __dmul_rn(omega, warp_sum(fill))), 0);
    dropped = warp_sum(dropped);
    const int64_t u0 = u_rp[k] + 1, u1 = u_rp[k + 1];
    double col_sum = 0.0;
    for (int64_t q = u0 + lane; q < u1; q += 32) { /* l_jk, j > k */
        const double s = mic_merge<SYNCFREE>(k, u_col[q], l_rp, l_col, lmap, u_val, d);
        const double ljk = __ddiv_rn(__dsub_rn(u_val[q], s), dk); /* (a_jk - sum) / d_k */
        u_val[q] = ljk;
        col_sum = __dadd_rn(col_sum, ljk);
    }
    if (u1 - u0 > MIC_LONG_COLUMN) col_sum = __shfl_sync(FULL_MASK, warp_sum(col_sum), 0);
    if (SYNCFREE) {
        __threadfence(); /* this lane's l_jk before d_k's release */
        __syncwarp();
    }
    if (lane != 0) return;
    if (u1 - u0 > MIC_LONG_COLUMN) tsum[k] = col_sum;
    u_val[u0 - 1] = 1.0; /* l_kk */
    unsigned long long bits = (unsigned long long)__double_as_longlong(dk);
    if (bits == MIC_UNSET) bits = MIC_NAN; /* never the fill: no column waits for ever */
    if (!(dk > 0.0) || !isfinite(dk)) {
        atomicMin(&record[0], (unsigned long long)k);
    } else {
        /* positive doubles order as their bits */
        atomicMin(&record[1], (unsigned long long)__double_as_longlong(__ddiv_rn(dk, a_diag[k])));
    }
    if (dropped) atomicAdd(&record[2], (unsigned long long)dropped);
    if (SYNCFREE)
        mic_word_ref(*reinterpret_cast<unsigned long long *>(d + k))
            .store(bits, cuda::memory_order_release);
    else
        d[k] = __longlong_as_double((long long)bits);
}

/* The columns rows[first, first + count) of one level, a warp each. */
__global__ void mic_factor_kernel(int64_t first, int64_t count, const int32_t *__restrict__ rows,
                                  const int64_t *__restrict__ a_rp,
                                  const int32_t *__restrict__ a_col,
                                  const int64_t *__restrict__ l_rp,
                                  const int32_t *__restrict__ l_col,
                                  const int64_t *__restrict__ lmap,
                                  const int64_t *__restrict__ u_rp,
                                  const int32_t *__restrict__ u_col, double *u_val,
                                  const double *__restrict__ a_diag, double omega, double *d,
                                  double *tsum, unsigned long long *record)
{
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= count) return;
    mic_column<false>(rows[first + w], a_rp, a_col, l_rp, l_col, lmap, u_rp, u_col, u_val, a_diag,
                      omega, d, tsum, record);
}

/* Every column in one launch, a warp each, in the order of rows (L's levels, ascending): a
 * block takes the MIC_WARPS columns at the ticket it draws when it starts. Column k waits
 * only on the columns m of its row of L, which are of lower levels and so earlier in rows:
 * columns of blocks that drew earlier tickets (started, so resident or done) or of lower
 * warps of its own block (resident with it). By induction on the place in rows the lowest
 * unfinished column always runs to its end, whatever order the hardware starts blocks in:
 * no deadlock (the argument of cuda/sparse/trisolve_syncfree.cu). */
__global__ void mic_factor_syncfree_kernel(int64_t count, const int32_t *__restrict__ rows,
                                           unsigned *ticket, const int64_t *__restrict__ a_rp,
                                           const int32_t *__restrict__ a_col,
                                           const int64_t *__restrict__ l_rp,
                                           const int32_t *__restrict__ l_col,
                                           const int64_t *__restrict__ lmap,
                                           const int64_t *__restrict__ u_rp,
                                           const int32_t *__restrict__ u_col, double *u_val,
                                           const double *__restrict__ a_diag, double omega,
                                           double *d, double *tsum, unsigned long long *record)
{
    __shared__ unsigned block;
    if (threadIdx.x == 0) block = atomicAdd(ticket, 1u);
    __syncthreads();
    const int64_t w = (int64_t)block * MIC_WARPS + (threadIdx.x >> 5);
    if (w >= count) return;
    mic_column<true>(rows[w], a_rp, a_col, l_rp, l_col, lmap, u_rp, u_col, u_val, a_diag, omega,
                     d, tsum, record);
}

/* L's values: l_km from U's place lmap[p]. */
__global__ void mic_gather_kernel(int64_t nnz, const int64_t *__restrict__ lmap,
                                  const double *__restrict__ u_val, double *__restrict__ l_val)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < nnz) l_val[p] = u_val[lmap[p]];
}

/* ------------------------------------------------------------ host drivers */

int mic_cuda_patterns(gs_engine *e, const gs_csr *A, const gs_dcsr *dA, mic_factor *f,
                      gs_error *err)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = dA->n;
    const unsigned grid = gs_dblocks(n, MIC_WARPS);
    int *d_bad = NULL, status = GS_OK, bad[2] = {MIC_NO_FAIL, 0};
    uint64_t words[3] = {0, 0, 0};
    f->n = n;
    /* bad[0]: the lowest row failing the check; bad[1]: a stored entry's mirror missing */
    GS_TRY(gs_cuda_alloc(e, &d_bad, 2 * sizeof(int), "mic: input check"));
    GS_TRY(gs_cuda_alloc(e, &f->diag_pos, ((size_t)n + 1) * sizeof(int64_t), "mic: diagonal places"));
    GS_TRY(gs_cuda_alloc(e, &f->a_diag, ((size_t)n + 1) * sizeof(double), "mic: shifted diagonal"));
    GS_TRY(gs_cuda_alloc(e, &f->d, ((size_t)n + 1) * sizeof(double), "mic: D"));
    GS_TRY(gs_cuda_alloc(e, &f->tsum, ((size_t)n + 1) * sizeof(double), "mic: long columns' sums"));
    GS_TRY(gs_cuda_alloc(e, &f->ticket, sizeof(unsigned), "mic: sync-free ticket"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_bad, bad, 2 * sizeof(int), cudaMemcpyHostToDevice,
                                              s)));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &f->L, n, "mic: row pointers of L"));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &f->U, n, "mic: row pointers of L^T"));
    GS_TRY(CUDA_LAUNCH(&e->err, mic_check_kernel, grid, 32 * MIC_WARPS, 0, s, n,
                       (const int64_t *)dA->rp, (const int32_t *)dA->col, (const double *)dA->val,
                       f->diag_pos, f->L.rp, f->U.rp, d_bad));
    GS_TRY(gs_dcsr_counts_scan(e, f->L.rp, n));
    GS_TRY(gs_dcsr_counts_scan(e, f->U.rp, n));
    /* the check's verdicts and both sizes in one round trip */
    {
        const void *src[3] = {d_bad, f->L.rp + n, f->U.rp + n};
        const int len[3] = {1, 1, 1};
        GS_TRY(gs_dread_words(e, 3, src, len, words));
    }
    bad[0] = (int)(words[0] & 0xffffffffu), bad[1] = (int)(words[0] >> 32);
    if (bad[0] != MIC_NO_FAIL) {
        GS_TRY(gs_mic_check_input(A, err));
        GS_TRY(gs_error_set(err, GS_ERR_INTERNAL, "the device check refused row %d, the "
                            "host check passed it", bad[0] + 1));
    }
    if (bad[1])
        GS_TRY(gs_error_set(err, GS_ERR_UNSUPPORTED, "A's pattern is not symmetric (an "
                            "entry's mirror is not stored, its value 0)"));
    GS_TRY(gs_dcsr_alloc_entries(e, &f->L, (int64_t)words[1], sizeof(double), "mic: L"));
    GS_TRY(gs_dcsr_alloc_entries(e, &f->U, (int64_t)words[2], sizeof(double), "mic: L^T"));
    GS_TRY(gs_cuda_alloc(e, &f->lmap, (size_t)f->L.nnz * sizeof(int64_t), "mic: L's places in L^T"));
    GS_TRY(CUDA_LAUNCH(&e->err, mic_pattern_kernel, grid, 32 * MIC_WARPS, 0, s, n,
                       (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const int64_t *)f->diag_pos, (const int64_t *)f->L.rp, f->L.col, f->lmap,
                       (const int64_t *)f->U.rp, f->U.col));
    /* L's levels from A's rows on the host where they are thin (gs_dtri_analyse_rows'
     * rule): a chain's would cost the device a dependent step a level */
    GS_TRY(gs_dtri_analyse_rows(e, n, f->L.nnz, f->L.rp, f->L.col, A, 0, &f->lower));
cleanup:
    gs_cuda_free(e, d_bad, 2 * sizeof(int));
    return status;
}

/* The scheme for L's levels t: the engine's debug.factor_scheme where it forces one, else
 * sync-free where the levels are wide (MIC_SYNCFREE_MIN_COLUMNS_PER_LEVEL). */
static int mic_use_syncfree(gs_engine *e, const gs_dtri *t)
{
    const int force = gs_cuda_debug(e)->factor_scheme;
    if (force == GS_DEBUG_SCHEME_LEVELS || force == GS_DEBUG_SCHEME_SYNCFREE)
        return force == GS_DEBUG_SCHEME_SYNCFREE;
    return (double)t->n >= (double)MIC_SYNCFREE_MIN_COLUMNS_PER_LEVEL * t->n_levels;
}

/* The factorisation's launches: one sync-free, or one a level, the deadline asked every
 * MIC_CHECK_LEVELS levels (the host's clock only: the launches queue without a wait). */
static int mic_factor_launch(gs_pc *pc, const gs_dcsr *dA, double omega, mic_factor *f,
                             unsigned long long *record)
{
    gs_engine *e = pc->eng;
    cudaStream_t s = gs_cuda_of(e)->stream;
    const gs_dtri *t = &f->lower;
    int status = GS_OK;
    if (f->syncfree) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(f->d, 0xFF, (size_t)f->n * sizeof(double), s)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(f->ticket, 0, sizeof(unsigned), s)));
        GS_TRY(CUDA_LAUNCH(&e->err, mic_factor_syncfree_kernel, gs_dblocks(f->n, MIC_WARPS),
                           32 * MIC_WARPS, 0, s, (int64_t)f->n, (const int32_t *)t->level_rows,
                           f->ticket, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                           (const int64_t *)f->L.rp, (const int32_t *)f->L.col,
                           (const int64_t *)f->lmap, (const int64_t *)f->U.rp,
                           (const int32_t *)f->U.col, (double *)f->U.val,
                           (const double *)f->a_diag, omega, f->d, f->tsum, record));
        goto cleanup;
    }
    for (int32_t l = 0; l < t->n_levels; l++) {
        const int64_t first = t->level_ptr[l], count = t->level_ptr[l + 1] - first;
        if (l % MIC_CHECK_LEVELS == MIC_CHECK_LEVELS - 1 && gs_pc_past_deadline(pc))
            GS_TRY(GS_ERR_TIME_LIMIT);
        GS_TRY(CUDA_LAUNCH(&e->err, mic_factor_kernel, gs_dblocks(count, MIC_WARPS),
                           32 * MIC_WARPS, 0, s, first, count, (const int32_t *)t->level_rows,
                           (const int64_t *)dA->rp, (const int32_t *)dA->col,
                           (const int64_t *)f->L.rp, (const int32_t *)f->L.col,
                           (const int64_t *)f->lmap, (const int64_t *)f->U.rp,
                           (const int32_t *)f->U.col, (double *)f->U.val,
                           (const double *)f->a_diag, omega, f->d, f->tsum, record));
    }
cleanup:
    return status;
}

int mic_cuda_factorise(gs_pc *pc, const gs_dcsr *dA, double alpha, double omega,
                       mic_factor *f, gs_error *err)
{
    gs_engine *e = pc->eng;
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = f->n;
    unsigned long long *record = NULL, host[3] = {0, 0, 0};
    int status = GS_OK;
    GS_TRY(gs_pc_deadline(pc, "factorisation", err)); /* before each try of the shift */
    GS_TRY(gs_cuda_alloc(e, &record, sizeof host, "mic: factorisation record"));
    GS_TRY(CUDA_LAUNCH(&e->err, mic_init_kernel, gs_dblocks(n, MIC_WARPS), 32 * MIC_WARPS, 0, s, n,
                       (const int64_t *)dA->rp, (const double *)dA->val,
                       (const int64_t *)f->diag_pos, (const int64_t *)f->U.rp, (double *)f->U.val,
                       alpha, f->a_diag, record));
    f->syncfree = mic_use_syncfree(e, &f->lower);
    status = mic_factor_launch(pc, dA, omega, f, record);
    if (status == GS_ERR_TIME_LIMIT) status = gs_pc_deadline(pc, "factorisation", err);
    GS_TRY(status);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(host, record, sizeof host, cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    f->fail_row = host[0] == MIC_NO_FAIL ? n : (int32_t)host[0];
    memcpy(&f->min_ratio, &host[1], sizeof(double));
    f->dropped = (int64_t)(host[2] / 2); /* each dropped pair seen from both its diagonals */
    f->fail_pivot = 0.0;
    if (f->fail_row < n) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&f->fail_pivot, f->d + f->fail_row, sizeof(double),
                                                  cudaMemcpyDeviceToHost, s)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    }
cleanup:
    gs_cuda_free(e, record, sizeof host);
    return status;
}

int mic_cuda_gather_L(gs_engine *e, mic_factor *f)
{
    return CUDA_LAUNCH(&e->err, mic_gather_kernel, gs_dblocks(f->L.nnz, 256), 256, 0,
                       gs_cuda_of(e)->stream, f->L.nnz, (const int64_t *)f->lmap,
                       (const double *)f->U.val, (double *)f->L.val);
}

void mic_factor_free(gs_engine *e, mic_factor *f)
{
    const size_t n1 = (size_t)f->n + 1;
    gs_dtri_free(e, &f->lower);
    gs_cuda_free(e, f->lmap, (size_t)f->L.nnz * sizeof(int64_t));
    gs_cuda_free(e, f->diag_pos, n1 * sizeof(int64_t));
    gs_cuda_free(e, f->a_diag, n1 * sizeof(double));
    gs_cuda_free(e, f->d, n1 * sizeof(double));
    gs_cuda_free(e, f->tsum, n1 * sizeof(double));
    gs_cuda_free(e, f->ticket, sizeof(unsigned));
    gs_dcsr_free(e, &f->L);
    gs_dcsr_free(e, &f->U);
    *f = mic_factor{};
}
