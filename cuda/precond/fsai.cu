/* fsai.cu - static FSAI, M = G^T G ~ A^-1, set up entirely on the GPU:
 * the CUDA setup of the reference in src/pc_fsai.c (same parameters, same
 * G up to rounding). Bernaschi, Bisson, Fantozzi, Janna, "Factored sparse
 * approximate inverse preconditioned CG on GPUs", SIAM J. Sci. Comput. 38(1)
 * 2016, sections 3-4.
 *
 * Stages (the paper's Fig. 5 split), each timed after a synchronisation:
 *   csr of A       A's CSR (the gather and postfilter read it) from the
 *                  engine's device copy pc->A: its own CSR arrays (the
 *                  system matrix stays CSR until the setup is done, then
 *                  the engine lays it out: "layout of A"), or its sliced
 *                  ELL turned back into CSR (cuda/sparse/csr_view.cu); "transfer" instead,
 *                  an upload from the host, where there is no fp64 engine
 *                  copy
 *   prefilter      input checks (symmetry, positive diagonal), Ã (3.8), L_1,
 *                  Ã's lower bandwidth (the pattern's window)
 *   pattern        L_{p+1} = Low(L_p Ã), k - 1 warp-centric products, then
 *                  --max-row's cut of the rows longer than N (fsai_pattern.cu)
 *   gather         A[P_i,P_i], one thread per element        (fsai_factor.cu)
 *   factorisation  batched Cholesky, g_i = w / sqrt(w_m)      (fsai_factor.cu)
 *   postfilter     (3.11)-(3.13), scaled by the computed z^T A z as the reference
 *   transpose      G^T: G's columns radix-sorted stably, in chunks
 *   layout         G and G^T as engine matrices (sliced ELL)
 * Where Ã is diagonal (every local system 1 x 1) the stages from pattern
 * to transpose are one kernel, "factorisation": G = G^T = diag(A)^-1/2.
 * Apply: the reference's z = G^T (G r) (src/fsai.h), unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "fsai_cuda.h"

extern "C" {
#include "mmio.h"
}

#define FULL_MASK 0xffffffffu
#define ROW_WARPS 8 /* warps (rows) per 256-thread block of the row kernels */
#define POSTFILTER_ZCAP 384 /* longest row of G whose z^T A z is summed in shared memory */
#define SPAN_WORDS 128      /* its bitmap of Z: rows of G whose columns span at most 4096 */
#define POSTFILTER_NO_FAIL 0x7f7f7f7f /* the postfilter's failure record: no row failed */
static_assert(ROW_WARPS * (POSTFILTER_ZCAP * (sizeof(double) + sizeof(int32_t)) +
                           SPAN_WORDS * sizeof(uint2)) <= 48 * 1024,
              "the postfilter's z, Z and bitmap must fit a block's default shared memory");

template <typename T>
static __device__ inline T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* ----------------------------------------------------------- prefilter */

/* One warp per row: diag[i] = a_ii (0 if missing), *bad = 1 when row i
 * breaks symmetry (|a_ij - a_ji| <= rtol max(|a_ij|, |a_ji|), a missing
 * mirror read as 0: gs_csr_is_symmetric's test) or a_ii is not positive and
 * finite. The host reference then words the message. */
__global__ void fsai_check_kernel(int32_t n, const int64_t *__restrict__ rp,
                                  const int32_t *__restrict__ col, const double *__restrict__ val,
                                  double *__restrict__ diag, int *bad)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    double d = 0.0;
    bool ok = true;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) {
        const int32_t j = col[p];
        const double aij = val[p];
        if (j == i) {
            d = aij;
            continue;
        }
        const int64_t q = fsai_find_col(col + rp[j], rp[j + 1] - rp[j], i);
        const double aji = q >= 0 ? val[rp[j] + q] : 0.0;
        if (!(fabs(aij - aji) <= GS_SYMMETRY_RTOL * fmax(fabs(aij), fabs(aji)))) ok = false;
    }
    d = warp_sum(d); /* one lane holds a_ii, the others 0 */
    ok = __all_sync(FULL_MASK, ok);
    if (lane == 0) {
        diag[i] = d;
        if (!ok || !(d > 0.0) || !isfinite(d)) *bad = 1;
    }
}

/* One warp per row: Ã keeps a_ij with |a_ij| > tau sqrt(a_ii) sqrt(a_jj)
 * (the reference's expression and order), the diagonal always; L_1 = its
 * j <= i part. COUNT: lengths into at_rp[i + 1], l_rp[i + 1], the lower
 * bandwidth of Ã, max_i (i - its first kept column), into bw[0] (the
 * pattern's window, fsai_pattern.cu) and the longest row of L_1 into bw[1]
 * (S's longest row when no product runs, for --max-row); else fill. */
template <bool FILL>
__global__ void fsai_prefilter_kernel(int32_t n, const int64_t *__restrict__ rp,
                                      const int32_t *__restrict__ col,
                                      const double *__restrict__ val,
                                      const double *__restrict__ diag, double tau,
                                      int64_t *at_rp, int32_t *__restrict__ at_col,
                                      int64_t *l_rp, int32_t *__restrict__ l_col, int *bw)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const double si = tau * sqrt(diag[i]);
    int64_t na = FILL ? at_rp[i] : 0, nl = FILL ? l_rp[i] : 0;
    int32_t first = i; /* the first kept column: rows are sorted */
    for (int64_t p0 = rp[i]; p0 < rp[i + 1]; p0 += 32) {
        const int64_t p = p0 + lane;
        int32_t j = -1;
        bool keep = false;
        if (p < rp[i + 1]) {
            j = col[p];
            keep = j == i || fabs(val[p]) > si * sqrt(diag[j]);
        }
        const unsigned ka = __ballot_sync(FULL_MASK, keep);
        const unsigned kl = __ballot_sync(FULL_MASK, keep && j <= i);
        const unsigned below = (1u << lane) - 1;
        if (FILL && keep) at_col[na + __popc(ka & below)] = j;
        if (FILL && keep && j <= i) l_col[nl + __popc(kl & below)] = j;
        if (!FILL && na == 0 && ka) first = __shfl_sync(FULL_MASK, j, __ffs(ka) - 1);
        na += __popc(ka);
        nl += __popc(kl);
    }
    if (!FILL && lane == 0) {
        at_rp[i + 1] = na, l_rp[i + 1] = nl;
        if (i == 0) at_rp[0] = 0, l_rp[0] = 0; /* rows allocated unzeroed */
        /* a plain read first: on banded matrices nearly every row finds the
         * maximum already there and skips the atomic */
        if (i - first > *(volatile int *)bw) atomicMax(bw, i - first);
        if (nl > *(volatile int *)(bw + 1)) atomicMax(bw + 1, (int)nl);
    }
}

/* info = {the input check's flag, nnz(Ã), nnz(L_1), the lower bandwidth of
 * Ã, the longest row of L_1}: what the prefilter needs on the host, read in
 * one round trip. flags = {check flag, bandwidth, longest row of L_1}. */
__global__ void fsai_prefilter_info_kernel(const int *flags, const int64_t *at_rp,
                                           const int64_t *l_rp, int32_t n, int64_t *info)
{
    info[0] = flags[0];
    info[1] = at_rp[n];
    info[2] = l_rp[n];
    info[3] = flags[1];
    info[4] = flags[2];
}

/* Checks, diag(A) (*diag_out, n + 1 doubles, the caller frees it), Ã and
 * L_1, *bw = the lower bandwidth of Ã, *l1_max = the longest row of L_1. A
 * failed device check hands over to the host reference for the message (it
 * finds the same first offence). One host round trip: the flag, both sizes,
 * the bandwidth and the longest row are read together, after the counts
 * (the kernels that follow a failed check only see finite garbage). */
static int fsai_prefilter(gs_engine *e, const gs_csr *A, const gs_dcsr *dA, double tau,
                          gs_dcsr *At, gs_dcsr *L1, int64_t *bw, int64_t *l1_max,
                          double **diag_out, gs_error *err)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = dA->n;
    const unsigned grid = gs_dblocks(n, ROW_WARPS);
    double *diag = NULL, *host_diag = NULL;
    int *d_flags = NULL, status = GS_OK; /* the check's flag, the bandwidth, L_1's longest row */
    int64_t *d_info = NULL, info[5] = {0, 0, 0, 0, 0};
    GS_TRY(gs_cuda_alloc(e, &diag, ((size_t)n + 1) * sizeof(double), "fsai: diagonal of A"));
    GS_TRY(gs_cuda_alloc(e, &d_flags, 3 * sizeof(int), "fsai: input check flag"));
    GS_TRY(gs_cuda_alloc(e, &d_info, sizeof info, "fsai: prefilter sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_flags, 0, 3 * sizeof(int), c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, fsai_check_kernel, grid, 32 * ROW_WARPS, 0, c->stream, n,
                       (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, diag, d_flags));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, At, n, "fsai: row pointers of the prefiltered A"));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, L1, n, "fsai: row pointers of L_1"));
    GS_TRY(CUDA_LAUNCH(&e->err, fsai_prefilter_kernel<false>, grid, 32 * ROW_WARPS, 0, c->stream,
                       n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, (const double *)diag, tau, At->rp,
                       (int32_t *)NULL, L1->rp, (int32_t *)NULL, d_flags + 1));
    GS_TRY(gs_dcsr_counts_scan(e, At->rp, n));
    GS_TRY(gs_dcsr_counts_scan(e, L1->rp, n));
    GS_TRY(CUDA_LAUNCH(&e->err, fsai_prefilter_info_kernel, 1, 1, 0, c->stream,
                       (const int *)d_flags, (const int64_t *)At->rp, (const int64_t *)L1->rp, n,
                       d_info));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(info, d_info, sizeof info, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    if (info[0]) {
        host_diag = (double *)gs_malloc(((size_t)n + 1) * sizeof(double), "fsai diagonal", err);
        if (!host_diag) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(gs_fsai_check_input(A, host_diag, err));
    }
    *bw = info[3];
    *l1_max = info[4];
    GS_TRY(gs_dcsr_alloc_entries(e, At, info[1], 0, "fsai: prefiltered A"));
    GS_TRY(gs_dcsr_alloc_entries(e, L1, info[2], 0, "fsai: L_1"));
    GS_TRY(CUDA_LAUNCH(&e->err, fsai_prefilter_kernel<true>, grid, 32 * ROW_WARPS, 0, c->stream,
                       n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, (const double *)diag, tau, At->rp, At->col,
                       L1->rp, L1->col, (int *)NULL));
    *diag_out = diag;
    diag = NULL;
cleanup:
    /* stream-ordered frees: after the kernels that use them */
    gs_cuda_free(e, diag, ((size_t)n + 1) * sizeof(double));
    gs_cuda_free(e, d_flags, 3 * sizeof(int));
    gs_cuda_free(e, d_info, sizeof info);
    free(host_diag);
    return status;
}

/* ------------------------------------------------- diagonal Ã: G = D^-1/2 */

/* Every local system is 1 x 1 (Ã diagonal, so is every L_p): Ĝ = a_ii^-1/2,
 * the postfilter keeps the diagonal and its scaling (z^T A z = 1 up to
 * rounding) leaves it, and G^T = G. One thread a row writes both. */
template <typename T>
__global__ void fsai_diagonal_kernel(int32_t n, const int64_t *__restrict__ rp,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val, int64_t *g_rp,
                                     int32_t *__restrict__ g_col, T *__restrict__ g_val,
                                     int64_t *gt_rp, int32_t *__restrict__ gt_col,
                                     T *__restrict__ gt_val)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n) return;
    g_rp[i] = i;
    gt_rp[i] = i;
    if (i == n) return;
    const int64_t q = fsai_find_col(col + rp[i], rp[i + 1] - rp[i], (int32_t)i); /* a_ii > 0: checked */
    const T g = (T)(1.0 / sqrt(val[rp[i] + q]));
    g_col[i] = (int32_t)i;
    gt_col[i] = (int32_t)i;
    g_val[i] = g;
    gt_val[i] = g;
}

static int fsai_diagonal(gs_engine *e, const gs_dcsr *dA, gs_precision prec, gs_dcsr *G,
                         gs_dcsr *GT)
{
    const int32_t n = dA->n;
    const size_t vsize = prec == GS_FP32 ? sizeof(float) : sizeof(double);
    const unsigned grid = gs_dblocks((int64_t)n + 1, 256);
    cudaStream_t s = gs_cuda_of(e)->stream;
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows(e, G, n, "fsai: row pointers of G"));
    GS_TRY(gs_dcsr_alloc_entries(e, G, n, vsize, "fsai: G"));
    GS_TRY(gs_dcsr_alloc_rows(e, GT, n, "fsai: row pointers of G^T"));
    GS_TRY(gs_dcsr_alloc_entries(e, GT, n, vsize, "fsai: G^T"));
    if (prec == GS_FP32)
        GS_TRY(CUDA_LAUNCH(&e->err, fsai_diagonal_kernel<float>, grid, 256, 0, s, n,
                           (const int64_t *)dA->rp, (const int32_t *)dA->col,
                           (const double *)dA->val, G->rp, G->col, (float *)G->val, GT->rp,
                           GT->col, (float *)GT->val));
    else
        GS_TRY(CUDA_LAUNCH(&e->err, fsai_diagonal_kernel<double>, grid, 256, 0, s, n,
                           (const int64_t *)dA->rp, (const int32_t *)dA->col,
                           (const double *)dA->val, G->rp, G->col, (double *)G->val, GT->rp,
                           GT->col, (double *)GT->val));
cleanup:
    return status;
}

/* ---------------------------------------------------------- postfilter */

/* delta ||g_i||_2 of row i (whole warp). */
template <typename T>
static __device__ inline double row_threshold(const T *__restrict__ g, int64_t m, double delta)
{
    double s = 0.0;
    for (int64_t p = threadIdx.x & 31; p < m; p += 32) s += (double)g[p] * (double)g[p];
    return delta * sqrt(warp_sum(s));
}

/* One warp per row of Ĝ (pattern H, values T): z_i = the diagonal and the
 * off-diagonal g_ij with |g_ij| > delta ||g_i||_2 (all of them when delta =
 * 0). COUNT: lengths into g_rp[i + 1]. FILL: z_i into G, then row i of G is
 * z_i / sqrt(z_i^T A z_i) (the reference's scaling, src/pc_fsai.c), z^T A z
 * summed over the kept pattern Z: sum_r z_r sum_{p in A(Z_r,:), col in Z} a_p z_col.
 * A quadratic form that is not positive and finite: *fail = min row. */
template <typename T, bool FILL>
__global__ void fsai_postfilter_kernel(int32_t n, const int64_t *__restrict__ h_rp,
                                       const int32_t *__restrict__ h_col,
                                       const T *__restrict__ h_val, double delta,
                                       const int64_t *__restrict__ a_rp,
                                       const int32_t *__restrict__ a_col,
                                       const double *__restrict__ a_val, int64_t *g_rp,
                                       int32_t *__restrict__ g_col, T *__restrict__ g_val,
                                       int zcap, int bitmap, int *fail)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t h0 = h_rp[i], m = h_rp[i + 1] - h0;
    const double threshold = row_threshold(h_val + h0, m, delta);
    int64_t q = FILL ? g_rp[i] : 0;
    for (int64_t p0 = 0; p0 < m; p0 += 32) {
        const int64_t p = p0 + lane;
        bool keep = false;
        if (p < m)
            keep = h_col[h0 + p] == i || delta == 0.0 || fabs((double)h_val[h0 + p]) > threshold;
        const unsigned k = __ballot_sync(FULL_MASK, keep);
        if (FILL && keep) {
            const int64_t dst = q + __popc(k & ((1u << lane) - 1));
            g_col[dst] = h_col[h0 + p];
            g_val[dst] = h_val[h0 + p];
        }
        q += __popc(k);
    }
    if (!FILL) {
        if (lane == 0) g_rp[i + 1] = q;
        if (lane == 0 && i == 0) {
            g_rp[0] = 0;             /* rows allocated unzeroed */
            *fail = POSTFILTER_NO_FAIL; /* for the fill pass's atomicMin */
        }
        return;
    }
    __syncwarp();
    const int64_t g0 = g_rp[i], mz = g_rp[i + 1] - g0;
    const int32_t *Z = g_col + g0;
    T *z = g_val + g0;
    /* Up to 32 columns (v4): the pairs (r, p), p in A(Z_r,:), laid end to
     * end over the lanes, 32 consecutive pairs a step whatever row r they
     * come from, Z and z held in registers and looked up by a binary search
     * of shuffles. A lane per r walking row Z_r alone instead leaves lanes
     * idle when Z is short (G diagonal on the 27-point stencil: one lane, 27
     * dependent steps) and searches Z in memory. Longer rows: a lane per r,
     * Z looked up in shared memory up to zcap columns, in global memory
     * beyond (all lanes busy; the laid-out steps measured slower there). */
    double zaz = 0.0;
    if (mz <= 32) {
        const int32_t zc = lane < mz ? Z[lane] : INT32_MAX;
        const double zv = lane < mz ? (double)z[lane] : 0.0;
        int64_t a0 = 0, len = 0;
        if (lane < mz) {
            a0 = a_rp[zc];
            len = a_rp[zc + 1] - a0;
        }
        const int64_t incl = fsai_warp_inclusive_scan(len);
        const int64_t total = __shfl_sync(FULL_MASK, incl, 31), excl = incl - len;
        for (int64_t base = 0; base < total; base += 32) {
            const int64_t q = base + lane;
            const int j = fsai_lane_of(incl, q);
            const int64_t p = __shfl_sync(FULL_MASK, a0, j) + (q - __shfl_sync(FULL_MASK, excl, j));
            const double zj = __shfl_sync(FULL_MASK, zv, j);
            const int32_t col = q < total ? a_col[p] : INT32_MAX;
            int s = 0; /* the first lane with zc >= col */
#pragma unroll
            for (int step = 16; step > 0; step >>= 1)
                if (__shfl_sync(FULL_MASK, zc, s + step - 1) < col) s += step;
            const bool hit = __shfl_sync(FULL_MASK, zc, s) == col;
            const double zs = __shfl_sync(FULL_MASK, zv, s);
            if (q < total && hit) zaz += zj * (a_val[p] * zs);
        }
    } else if (mz <= zcap) {
        /* z staged in the warp's slice of shared memory (read from global
         * memory, where this warp has just written it, every lookup waited
         * on the L2 cache: bcsstk16 0.83 ms). Each lane walks row Z_r of A
         * FSAI_SEARCH_WAYS entries at a time, their columns and values
         * loaded before any lookup. A column's place in Z: where Z spans at
         * most 32 SPAN_WORDS columns (and bitmap), a bitmap of Z over its
         * span, each word with the count of set bits before it (one shared
         * load and a popc); else Z staged and searched, the searches
         * interleaved (fsai_search_ways; the four cost 8 registers and with
         * them 0.4 ms on poisson3d:128, whose rows are all short). Both sum
         * in the same order: the same G to the bit. */
        extern __shared__ double postfilter_smem[];         /* see fsai_postfilter_typed */
        const int warp = threadIdx.x >> 5, nz = (int)mz;
        double *zs = postfilter_smem + warp * zcap;
        uint2 *map = (uint2 *)(postfilter_smem + ROW_WARPS * zcap) + warp * SPAN_WORDS;
        int32_t *Zs = (int32_t *)(postfilter_smem + ROW_WARPS * (zcap + SPAN_WORDS)) + warp * zcap;
        for (int r = lane; r < nz; r += 32) {
            Zs[r] = Z[r];
            zs[r] = (double)z[r];
        }
        __syncwarp();
        const int32_t base = Zs[0];
        const int64_t span = (int64_t)Zs[nz - 1] - base + 1; /* Z sorted */
        const bool by_bits = bitmap && span <= 32 * SPAN_WORDS;
        int top = 1;
        while (2 * top <= nz) top *= 2;
        if (by_bits) {
            const int words = (int)((span + 31) >> 5);
            for (int w = lane; w < words; w += 32) map[w].x = 0u;
            __syncwarp();
            for (int r = lane; r < nz; r += 32) {
                const int o = Zs[r] - base;
                atomicOr(&map[o >> 5].x, 1u << (o & 31));
            }
            __syncwarp();
            uint32_t carry = 0;
            for (int w0 = 0; w0 < words; w0 += 32) {
                const int w = w0 + lane;
                const uint32_t c = w < words ? (uint32_t)__popc(map[w].x) : 0u;
                uint32_t incl = c;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const uint32_t t = __shfl_up_sync(FULL_MASK, incl, o);
                    if (lane >= o) incl += t;
                }
                if (w < words) map[w].y = carry + incl - c;
                carry += __shfl_sync(FULL_MASK, incl, 31);
            }
            __syncwarp();
        }
        for (int r = lane; r < nz; r += 32) {
            const int32_t zr = Zs[r];
            const int64_t p1 = a_rp[zr + 1];
            double az = 0.0;                                   /* (A z)_{Z_r} */
            for (int64_t p = a_rp[zr]; p < p1; p += FSAI_SEARCH_WAYS) {
                int32_t cu[FSAI_SEARCH_WAYS];
                double vu[FSAI_SEARCH_WAYS];
#pragma unroll
                for (int u = 0; u < FSAI_SEARCH_WAYS; u++) {
                    cu[u] = p + u < p1 ? a_col[p + u] : INT32_MAX; /* columns are < n */
                    vu[u] = p + u < p1 ? a_val[p + u] : 0.0;
                }
                if (by_bits) {
#pragma unroll
                    for (int u = 0; u < FSAI_SEARCH_WAYS; u++) {
                        const int64_t o = (int64_t)cu[u] - base;
                        if (o >= 0 && o < span) {
                            const uint2 mw = map[o >> 5];
                            const uint32_t bit = 1u << (o & 31);
                            if (mw.x & bit) az += vu[u] * zs[mw.y + __popc(mw.x & (bit - 1u))];
                        }
                    }
                } else {
                    int lo[FSAI_SEARCH_WAYS];
                    fsai_search_ways(Zs, nz, top, cu, lo);
#pragma unroll
                    for (int u = 0; u < FSAI_SEARCH_WAYS; u++)
                        if (lo[u] < nz && Zs[lo[u]] == cu[u]) az += vu[u] * zs[lo[u]];
                }
            }
            zaz += zs[r] * az;
        }
    } else {
        for (int64_t r = lane; r < mz; r += 32) {
            double az = 0.0;                                   /* (A z)_{Z_r} */
            for (int64_t p = a_rp[Z[r]]; p < a_rp[Z[r] + 1]; p++) {
                const int64_t s = fsai_find_col(Z, mz, a_col[p]);
                if (s >= 0) az += a_val[p] * (double)z[s];
            }
            zaz += (double)z[r] * az;
        }
    }
    zaz = warp_sum(zaz);
    if (!(zaz > 0.0) || !isfinite(zaz)) {
        if (lane == 0) atomicMin(fail, i);
        return;
    }
    const double scale = 1.0 / sqrt(zaz);                     /* (3.13), see pc_fsai.c */
    for (int64_t r = lane; r < mz; r += 32) z[r] = (T)((double)z[r] * scale);
}

/* G from Ĝ (pattern H, its values), after the factorisation's failure
 * record factor_fail is read along with G's size: a failed factorisation
 * stops here, with its own message. (Its counting pass has then read the
 * values of the failed systems, which the factorisation left unwritten:
 * uninitialised but harmless, the counts are discarded.) */
template <typename T>
static int fsai_postfilter_typed(gs_engine *e, const gs_dcsr *dA, const gs_dcsr *H,
                                 int64_t m_max, double delta,
                                 const unsigned long long *factor_fail, gs_dcsr *G,
                                 gs_cuda_sell_plan *plan, gs_error *err)
{
    /* shared memory only where a row of G can be longer than 32 (no row of
     * G is longer than its local system): it would cost the others occupancy */
    const int zcap = m_max > 32 ? POSTFILTER_ZCAP : 0;
    /* fsai_postfilter_search: Z searched on every row (tests, timings) */
    const int bitmap = !gs_cuda_debug(e)->fsai_postfilter_search;
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = H->n;
    const unsigned grid = gs_dblocks(n, ROW_WARPS);
    int *d_fail = NULL, fail = POSTFILTER_NO_FAIL, status = GS_OK;
    int64_t nnz = 0;
    uint64_t words[5] = {0, 0, 0, 0, 0}; /* nnz(G), the factorisation's failure record, plan */
    GS_TRY(gs_cuda_alloc(e, &d_fail, sizeof(int), "fsai postfilter: failure record"));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, G, n, "fsai: row pointers of G"));
    GS_TRY(CUDA_LAUNCH(&e->err, (fsai_postfilter_kernel<T, false>), grid, 32 * ROW_WARPS, 0,
                       c->stream, n, (const int64_t *)H->rp, (const int32_t *)H->col,
                       (const T *)H->val, delta, (const int64_t *)dA->rp,
                       (const int32_t *)dA->col, (const double *)dA->val, G->rp, (int32_t *)NULL,
                       (T *)NULL, 0, 0, d_fail));
    GS_TRY(gs_dcsr_counts_scan(e, G->rp, n));
    if (plan) GS_TRY(gs_cuda_sell_plan_start(e, n, G->rp, plan)); /* G's layout, planned now */
    {
        const void *src[3] = {G->rp + n, factor_fail, NULL};
        const int len[3] = {1, 1, 3};
        const int planned = plan && plan->slice_ptr;
        if (planned) src[2] = plan->info;
        GS_TRY(gs_dread_words(e, planned ? 3 : 2, src, len, words));
        if (planned) memcpy(plan->words, words + 2, sizeof plan->words);
    }
    if (words[1] != ~0ull) GS_TRY(fsai_factor_failure(e, H, words[1], err));
    nnz = (int64_t)words[0];
    GS_TRY(gs_dcsr_alloc_entries(e, G, nnz, sizeof(T), "fsai: G"));
    GS_TRY(CUDA_LAUNCH(&e->err, (fsai_postfilter_kernel<T, true>), grid, 32 * ROW_WARPS,
                       zcap ? (size_t)ROW_WARPS * (zcap * (sizeof(double) + sizeof(int32_t)) +
                                                   SPAN_WORDS * sizeof(uint2))
                            : 0,
                       c->stream, n,
                       (const int64_t *)H->rp, (const int32_t *)H->col, (const T *)H->val, delta,
                       (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, G->rp, G->col, (T *)G->val, zcap, bitmap, d_fail));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&fail, d_fail, sizeof fail, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    if (fail != POSTFILTER_NO_FAIL)
        status = gs_error_set(err, GS_ERR_NUMERIC,
                              "fsai: row %d: z^T A z of the postfiltered row is not positive "
                              "and finite, so A is not SPD", fail + 1);
cleanup:
    gs_cuda_free(e, d_fail, sizeof(int));
    return status;
}

/* ----------------------------------------------------------- transpose */

/* G^T by the toolkit's transpose, G^T's layout planned from its row
 * pointers before its entries are filled, the plan's three words parked in
 * the read-back buffer (no wait: the stage's synchronisation brings them,
 * and fsai_cuda_build copies them out). The switch fsai_transpose_chunk
 * (src/debug.h): entries a chunk of the transpose's sort, for the tests. */
static int fsai_transpose(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, gs_cuda_sell_plan *plan)
{
    int status = GS_OK;
    const int64_t chunk = gs_cuda_debug(e)->fsai_transpose_chunk; /* 0: the default */
    GS_TRY(gs_dcsr_transpose_rows(e, G, GT));
    if (plan && G->nnz > 0) {
        GS_TRY(gs_cuda_sell_plan_start(e, G->n, GT->rp, plan));
        if (plan->slice_ptr) GS_TRY(gs_dread_park(e, plan->info, 3));
    }
    GS_TRY(gs_dcsr_transpose_fill(e, G, GT, chunk));
cleanup:
    return status;
}

/* -------------------------------------------------------- engine, save */

template <typename T>
__global__ void fsai_to_double_kernel(int64_t n, const T *__restrict__ in, double *__restrict__ out)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (double)in[i];
}

/* M as an engine matrix in the stored precision, M freed (fp64 values kept
 * as CSR: M's arrays taken over, no copies; fp32 values go through a
 * temporary fp64 copy: gs_cuda_mat_from_device_csr takes fp64, and rounds
 * them back exactly). plan: fp64 values only (NULL in fp32), handed to
 * gs_cuda_mat_adopt_device_csr, which frees it. */
static int fsai_engine_matrix(gs_engine *e, gs_dcsr *M, gs_precision prec,
                              gs_cuda_sell_plan *plan, gs_mat **out)
{
    double *wide = NULL;
    int status = GS_OK, taken = 0;
    if (M->vsize == sizeof(double)) {
        GS_TRY(gs_cuda_mat_adopt_device_csr(e, M->n, M->n, M->nnz, M->rp, M->col,
                                            (double *)M->val, prec, plan, &taken, out));
        if (taken) *M = gs_dcsr{};
        goto cleanup;
    }
    GS_TRY(gs_cuda_alloc(e, &wide, (size_t)M->nnz * sizeof(double), "fsai: G values widened"));
    GS_TRY(CUDA_LAUNCH(&e->err, fsai_to_double_kernel<float>, gs_dblocks(M->nnz, 256), 256, 0,
                       gs_cuda_of(e)->stream, M->nnz, (const float *)M->val, wide));
    GS_TRY(gs_cuda_mat_from_device_csr(e, M->n, M->n, M->nnz, M->rp, M->col, wide, prec,
                                       GS_CUDA_TRI_NONE, out));
cleanup: /* stream-ordered frees */
    gs_cuda_free(e, wide, (size_t)M->nnz * sizeof(double));
    gs_dcsr_free(e, M);
    return status;
}

/* PREFIX_G.mtx: G as stored on the device (fp32 values when computed so). */
static int fsai_cuda_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_fsai_data *d = (gs_fsai_data *)pc->data;
    gs_csr G = {};
    char path[4096], comment[512];
    int status = pc->eng->ops->sync(pc->eng);
    if (status != GS_OK) return gs_engine_fail(pc->eng, err);
    GS_TRY(gs_cuda_mat_download(d->G_eng, &G, err));
    snprintf(path, sizeof path, "%s_G.mtx", prefix);
    snprintf(comment, sizeof comment, "gpusolve fsai (cuda setup): M = G^T G, %s", pc->description);
    status = gs_mm_write_csr(path, &G, 0, comment, err);
cleanup:
    gs_csr_free(&G);
    return status;
}

/* --------------------------------------------------------------- setup */

static double fsai_stream_bytes(const gs_dcsr *M, gs_precision prec)
{
    return (double)M->nnz * ((prec == GS_FP32 ? 4.0 : 8.0) + 4.0) + ((double)M->n + 1.0) * 8.0;
}

/* A's CSR on the device (gs_dcsr_of_A): from the engine's own copy (pc->A,
 * stored in fp64 from this very A) when there is one, its CSR arrays or its
 * sliced ELL turned back into CSR on the device (stage "csr of A"); otherwise
 * uploaded from the host (stage "transfer"). gs_dcsr_release_A frees it. */
static int fsai_device_A(gs_pc *pc, const gs_csr *A, gs_dcsr *dA, gs_cuda_csr_view *view)
{
    int status = GS_OK, from_engine = 0;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_dcsr_of_A(pc->eng, pc->A, A, "fsai", dA, view, &from_engine));
    GS_TRY(gs_pc_stage_end(pc, from_engine ? "csr of A" : "transfer", t0));
cleanup:
    return status;
}

/* The stages; d's engine objects on success. */
static int fsai_cuda_build(gs_pc *pc, const gs_csr *A, const gs_fsai_options *o, gs_fsai_data *d,
                           gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dcsr dA = {}, At = {}, L1 = {}, S = {}, G = {}, GT = {};
    /* G's and G^T's layouts planned in the postfilter's and the transpose's
     * round trips (fp64 values: the ones gs_cuda_mat_adopt_device_csr takes) */
    gs_cuda_sell_plan plan_storage[2] = {}, *plan_g = NULL, *plan_gt = NULL;
    if (o->prec == GS_FP64) plan_g = &plan_storage[0], plan_gt = &plan_storage[1];
    gs_cuda_csr_view viewA = {};
    double *diag = NULL; /* diag(A) on the device, for --max-row's keys */
    int64_t m_max = 0, m_known = -1, nnz_hat = 0, bw = 0, l1_max = 1, max_row = 1, capped = 0;
    int plan_on_device = -1; /* -1: no systems factored (Ã diagonal) */
    int64_t large_systems = 0; /* the largest size class, and whether DGEMM took it */
    int large_gemm = 0;
    unsigned long long *factor_fail = NULL;
    int status = GS_OK;
    double t0 = 0.0;
    GS_TRY(fsai_device_A(pc, A, &dA, &viewA));
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(fsai_prefilter(e, A, &dA, o->tau, &At, &L1, &bw, &l1_max, &diag, err));
    GS_TRY(gs_pc_stage_end(pc, "prefilter", t0));
    if (L1.nnz == L1.n) {
        /* Ã is diagonal (the default tau on the 27-point stencil): no
         * pattern, no systems to gather, nothing to filter or transpose */
        gs_dcsr_free(e, &At);
        gs_dcsr_free(e, &L1);
        gs_cuda_free(e, diag, ((size_t)A->n_rows + 1) * sizeof(double)); /* no cap to key */
        diag = NULL;
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(fsai_diagonal(e, &dA, o->prec, &G, &GT));
        m_max = 1;
        nnz_hat = G.nnz;
        gs_dcsr_release_A(e, &dA, &viewA);
        GS_TRY(gs_pc_stage_end(pc, "factorisation", t0));
    } else {
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(fsai_cuda_pattern(e, &At, &L1, o->k, bw, &S, &m_known));
        gs_dcsr_free(e, &At);
        /* S's longest row: read by the last product, or S = L_1 (no product) */
        max_row = m_known >= 0 ? m_known : l1_max;
        if (o->max_row > 0 && max_row > o->max_row) { /* rows within N: no work at all */
            GS_TRY(fsai_cuda_cap(e, &dA, diag, o->max_row, &S, &capped));
            m_known = o->max_row; /* the cut rows now have N entries, the others fewer */
        }
        gs_cuda_free(e, diag, ((size_t)A->n_rows + 1) * sizeof(double)); /* stream-ordered */
        diag = NULL;
        GS_TRY(gs_pc_stage_end(pc, "pattern", t0));
        GS_TRY(fsai_cuda_factor(pc, &dA, &S, o->prec, o->fused_gather, m_known, &m_max,
                                &plan_on_device, &large_systems, &large_gemm, &factor_fail,
                                err)); /* gather, factorisation */
        nnz_hat = S.nnz;
        t0 = gs_pc_stage_begin(pc);
        if (o->prec == GS_FP32)
            GS_TRY(fsai_postfilter_typed<float>(e, &dA, &S, m_max, o->delta, factor_fail, &G,
                                                plan_g, err));
        else
            GS_TRY(fsai_postfilter_typed<double>(e, &dA, &S, m_max, o->delta, factor_fail, &G,
                                                 plan_g, err));
        gs_dcsr_free(e, &S);
        gs_dcsr_release_A(e, &dA, &viewA);
        GS_TRY(gs_pc_stage_end(pc, "postfilter", t0));
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(fsai_transpose(e, &G, &GT, plan_gt));
        GS_TRY(gs_pc_stage_end(pc, "transpose", t0)); /* brings plan_gt's parked words */
        if (plan_gt && plan_gt->slice_ptr) gs_dread_parked(e, plan_gt->words, 3);
    }
    t0 = gs_pc_stage_begin(pc);
    pc->nnz = G.nnz;
    pc->apply_bytes = 2.0 * fsai_stream_bytes(&G, o->prec) + 32.0 * A->n_rows; /* G, G^T, r t t z */
    GS_TRY(fsai_engine_matrix(e, &G, o->prec, plan_g, &d->G_eng));
    GS_TRY(fsai_engine_matrix(e, &GT, o->prec, plan_gt, &d->GT_eng));
    GS_TRY(e->ops->vec_create(e, A->n_rows, &d->t));
    GS_TRY(gs_pc_stage_end(pc, "layout", t0));
    gs_kv_num(&pc->extra, "mu_G_hat", (double)nnz_hat / (double)A->nnz);
    gs_kv_num(&pc->extra, "mu_G", (double)pc->nnz / (double)A->nnz);
    gs_kv_num(&pc->extra, "local_m_max", (double)m_max);
    gs_kv_num(&pc->extra, "max_row", (double)max_row); /* S's longest row, before the cap */
    gs_kv_num(&pc->extra, "capped_rows", (double)capped);
    if (plan_on_device >= 0) gs_kv_str(&pc->extra, "factor_plan", plan_on_device ? "device" : "host");
    if (large_systems > 0) { /* e.g. gemm:2142 (fsai_factor_gemm.cu) or block:3 */
        char large[48];
        snprintf(large, sizeof large, "%s:%lld", large_gemm ? "gemm" : "block",
                 (long long)large_systems);
        gs_kv_str(&pc->extra, "factor_large", large);
    }
cleanup:
    if (gs_cuda_of(e)->stream) cudaStreamSynchronize(gs_cuda_of(e)->stream);
    gs_dcsr_release_A(e, &dA, &viewA);
    gs_cuda_free(e, diag, ((size_t)A->n_rows + 1) * sizeof(double));
    gs_dcsr_free(e, &At);
    gs_dcsr_free(e, &L1);
    gs_dcsr_free(e, &S);
    gs_dcsr_free(e, &G);
    gs_dcsr_free(e, &GT);
    gs_cuda_free(e, factor_fail, sizeof *factor_fail);
    gs_cuda_sell_plan_free(e, &plan_storage[0]);
    gs_cuda_sell_plan_free(e, &plan_storage[1]);
    return status;
}

extern "C" int gs_fsai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_fsai_options o;
    int status = GS_OK;
    if (e->ops->kind != GS_ENGINE_CUDA) return gs_fsai_setup_cpu(pc, A, err);
    gs_fsai_data *d = (gs_fsai_data *)gs_calloc(1, sizeof *d, "fsai", err);
    if (!d) return GS_ERR_NOMEM;
    pc->data = d;
    pc->destroy = gs_fsai_destroy;
    GS_TRY(gs_fsai_read_options(pc, &o, err));
    if (A->n_rows != A->n_cols || !A->val) GS_TRY(gs_fsai_check_input(A, NULL, err));
    snprintf(pc->description, sizeof pc->description,
             "tau=%g k=%ld delta=%g precision=%s gather=%s max-row=%ld", o.tau, o.k, o.delta,
             o.prec == GS_FP32 ? "single" : "double", o.fused_gather ? "fused" : "separate",
             o.max_row);
    GS_TRY(fsai_cuda_build(pc, A, &o, d, err));
    pc->apply = gs_fsai_apply;
    pc->apply_dot = gs_fsai_apply_dot;
    gs_pc_set_products(pc, d->GT_eng, d->G_eng);
    pc->save = fsai_cuda_save;
    pc->symmetric = 1;
cleanup:
    if (status != GS_OK) gs_engine_fail(e, err);
    return status;
}
