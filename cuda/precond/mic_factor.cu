/* mic_factor.cu - MIC(0) factorisation M = L D L^T on the device, level-scheduled: the
 * reference's elimination (src/precond/pc_mic.c; Gustafsson, BIT 18 (1978)) recast
 * column by column so that columns of one level run in parallel (MICPCGA's wavefronts).
 *
 * Column k (k's entries of U = L^T, row k) needs exactly the columns m with l_km != 0,
 * the rows k of L depends on in the forward solve, so L's levels schedule it:
 *   d_k  = (1 + alpha) a_kk - sum_m l_km d_m l_km - omega sum_m sum_{j != k, (k,j) not in A}
 *          l_km d_m l_jm                               (m < k with l_km != 0; j over column m)
 *   l_jk = (a_jk - sum_{m < k} l_jm d_m l_km) / d_k    (j > k in column k)
 * which are the reference's right-looking updates, pulled instead of pushed: at step m the
 * reference subtracts l_jm d_m l_km from a_jk when (j, k) is in A's pattern, else omega
 * times it from a_kk and a_jj (the dropped fill). The sums run in another order, so the
 * factors agree within rounding. A warp a column; every column of a level is processed
 * even after a failure, so the lowest failing row is the reference's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mic_cuda.h"

#define MIC_WARPS 8 /* columns (warps) a 256-thread block */
#define FULL_MASK 0xffffffffu
#define MIC_NO_FAIL 0x7fffffff

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

/* sum over m < k in both L's row k and L's row j (both sorted) of l_km d_m l_jm. */
static __device__ inline double mic_merge(int32_t k, int32_t j, const int64_t *__restrict__ l_rp,
                                          const int32_t *__restrict__ l_col,
                                          const int64_t *__restrict__ lmap,
                                          const double *u_val, const double *d)
{
    int64_t a = l_rp[k], b = l_rp[j];
    const int64_t a_end = l_rp[k + 1] - 1, b_end = l_rp[j + 1]; /* row k's diagonal left out */
    double s = 0.0;
    while (a < a_end && b < b_end) {
        const int32_t ma = l_col[a], mb = l_col[b];
        if (mb >= k) break;
        if (ma == mb) {
            s += u_val[lmap[a]] * d[ma] * u_val[lmap[b]]; /* l_km d_m l_jm */
            a++, b++;
        } else if (ma < mb) {
            a++;
        } else {
            b++;
        }
    }
    return s;
}

/* The columns rows[first, first + count) of one level, a warp each (see the top). */
__global__ void mic_factor_kernel(int64_t first, int64_t count, const int32_t *__restrict__ rows,
                                  const int64_t *__restrict__ a_rp,
                                  const int32_t *__restrict__ a_col,
                                  const int64_t *__restrict__ l_rp,
                                  const int32_t *__restrict__ l_col,
                                  const int64_t *__restrict__ lmap,
                                  const int64_t *__restrict__ u_rp,
                                  const int32_t *__restrict__ u_col, double *u_val,
                                  const double *__restrict__ a_diag, double omega, double *d,
                                  unsigned long long *record)
{
    const int lane = threadIdx.x & 31;
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= count) return;
    const int32_t k = rows[first + w];
    const int32_t *ak = a_col + a_rp[k];
    const int64_t ak_len = a_rp[k + 1] - a_rp[k];
    double sub = 0.0, fill = 0.0;
    long long dropped = 0;
    for (int64_t p = l_rp[k]; p < l_rp[k + 1] - 1; p++) { /* m < k, l_km != 0 */
        const int32_t m = l_col[p];
        const double lkm_dm = u_val[lmap[p]] * d[m];
        for (int64_t q = u_rp[m] + 1 + lane; q < u_rp[m + 1]; q += 32) { /* j > m */
            const int32_t j = u_col[q];
            const double t = lkm_dm * u_val[q];                  /* l_km d_m l_jm */
            if (j == k) {
                sub += t;
            } else if (mic_find(ak, ak_len, j) < 0) {            /* fill at (k, j) dropped */
                fill += t;
                dropped++;
            }
        }
    }
    /* lane 0's sums for all: the butterfly's lanes may round differently */
    const double dk = __shfl_sync(FULL_MASK, a_diag[k] - warp_sum(sub) - omega * warp_sum(fill), 0);
    dropped = warp_sum(dropped);
    for (int64_t q = u_rp[k] + 1 + lane; q < u_rp[k + 1]; q += 32) { /* l_jk, j > k */
        const int32_t j = u_col[q];
        u_val[q] = (u_val[q] - mic_merge(k, j, l_rp, l_col, lmap, u_val, d)) / dk;
    }
    if (lane != 0) return;
    u_val[u_rp[k]] = 1.0; /* l_kk */
    d[k] = dk;
    if (!(dk > 0.0) || !isfinite(dk)) {
        atomicMin(&record[0], (unsigned long long)k);
    } else {
        /* positive doubles order as their bits */
        atomicMin(&record[1], (unsigned long long)__double_as_longlong(dk / a_diag[k]));
    }
    if (dropped) atomicAdd(&record[2], (unsigned long long)dropped);
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
    GS_TRY(gs_dtri_analyse(e, n, f->L.nnz, f->L.rp, f->L.col, 0, &f->lower));
cleanup:
    gs_cuda_free(e, d_bad, 2 * sizeof(int));
    return status;
}

int mic_cuda_factorise(gs_engine *e, const gs_dcsr *dA, double alpha, double omega,
                       mic_factor *f)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = f->n;
    unsigned long long *record = NULL, host[3] = {0, 0, 0};
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &record, sizeof host, "mic: factorisation record"));
    GS_TRY(CUDA_LAUNCH(&e->err, mic_init_kernel, gs_dblocks(n, MIC_WARPS), 32 * MIC_WARPS, 0, s, n,
                       (const int64_t *)dA->rp, (const double *)dA->val,
                       (const int64_t *)f->diag_pos, (const int64_t *)f->U.rp, (double *)f->U.val,
                       alpha, f->a_diag, record));
    for (int32_t l = 0; l < f->lower.n_levels; l++) {
        const int64_t first = f->lower.level_ptr[l], count = f->lower.level_ptr[l + 1] - first;
        GS_TRY(CUDA_LAUNCH(&e->err, mic_factor_kernel, gs_dblocks(count, MIC_WARPS),
                           32 * MIC_WARPS, 0, s, first, count, (const int32_t *)f->lower.level_rows,
                           (const int64_t *)dA->rp, (const int32_t *)dA->col,
                           (const int64_t *)f->L.rp, (const int32_t *)f->L.col,
                           (const int64_t *)f->lmap, (const int64_t *)f->U.rp,
                           (const int32_t *)f->U.col, (double *)f->U.val,
                           (const double *)f->a_diag, omega, f->d, record));
    }
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
    gs_dcsr_free(e, &f->L);
    gs_dcsr_free(e, &f->U);
    *f = mic_factor{};
}
