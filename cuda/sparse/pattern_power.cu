/* pattern_power.cu - the pattern of (E + |P|)^k (or |P|^k) on the device,
 * symbolic only (gs_dsparse.h): the device counterpart of the host's
 * gs_csr_pattern_power (src/sparse/csr.c), used by gspai-opt's a priori
 * pattern (Chu et al. 2023, §2). Each product X Y is expanded (row i: the
 * rows Y(j) for j in X(i), end to end), its rows sorted by the toolkit's
 * segmented sort, and the duplicates dropped; the first step, X (+ E), is
 * sorted only where a row of X is not. */
#include "gs_dsparse.h"

#define FULL_MASK 0xffffffffu
#define ROW_WARPS 8

/* counts[i + 1] of the expansion of row i: |X(i)| (+ 1 for the identity)
 * when Y == NULL, else sum_{j in X(i)} |Y(j)|. One warp a row. Y == NULL:
 * *unsorted |= 1 where a row of X decreases somewhere (the expansion, X(i)
 * with i put after its entries below i, is then sorted for every row but
 * those, and the caller skips the row sort). */
__global__ void pattern_expand_count_kernel(int32_t n, const int64_t *__restrict__ x_rp,
                                            const int32_t *__restrict__ x_col,
                                            const int64_t *__restrict__ y_rp, int identity,
                                            int64_t *counts, unsigned long long *unsorted)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t c = 0;
    if (!y_rp) {
        c = x_rp[i + 1] - x_rp[i] + (identity ? 1 : 0);
        bool down = false;
        for (int64_t p = x_rp[i] + 1 + lane; p < x_rp[i + 1]; p += 32)
            down = down || x_col[p - 1] > x_col[p];
        if (__any_sync(FULL_MASK, down) && lane == 0) atomicOr(unsorted, 1ull);
    } else {
        for (int64_t p = x_rp[i] + lane; p < x_rp[i + 1]; p += 32) {
            const int32_t j = x_col[p];
            c += y_rp[j + 1] - y_rp[j];
        }
        for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(FULL_MASK, c, o);
    }
    if (lane == 0) {
        counts[i + 1] = c;
        if (i == 0) counts[0] = 0;
    }
}

/* The expansion of row i into out (row pointers out_rp), unsorted. */
__global__ void pattern_expand_fill_kernel(int32_t n, const int64_t *__restrict__ x_rp,
                                           const int32_t *__restrict__ x_col,
                                           const int64_t *__restrict__ y_rp,
                                           const int32_t *__restrict__ y_col, int identity,
                                           const int64_t *__restrict__ out_rp,
                                           int32_t *__restrict__ out)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t q = out_rp[i];
    if (!y_rp) {                                  /* X(i), i after the entries below it */
        const int64_t len = x_rp[i + 1] - x_rp[i];
        int64_t below = 0;
        if (identity) {
            for (int64_t p = lane; p < len; p += 32) below += x_col[x_rp[i] + p] < i;
            for (int o = 16; o > 0; o >>= 1) below += __shfl_xor_sync(FULL_MASK, below, o);
        }
        for (int64_t p = lane; p < len; p += 32)  /* a permutation for any row */
            out[q + p + (identity && p >= below ? 1 : 0)] = x_col[x_rp[i] + p];
        if (identity && lane == 0) out[q + below] = i;
        return;
    }
    for (int64_t p = x_rp[i]; p < x_rp[i + 1]; p++) {         /* rows Y(j), j in X(i) */
        const int32_t j = x_col[p];
        const int64_t len = y_rp[j + 1] - y_rp[j];
        for (int64_t t = lane; t < len; t += 32) out[q + t] = y_col[y_rp[j] + t];
        q += len;
    }
}

/* Distinct columns of each sorted row: COUNT writes them into rp[i + 1],
 * else compacts them into out at rp[i]. One warp a row. */
template <bool COUNT>
__global__ void pattern_unique_kernel(int32_t n, const int64_t *__restrict__ in_rp,
                                      const int32_t *__restrict__ in, int64_t *rp,
                                      int32_t *__restrict__ out)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t b = in_rp[i], e = in_rp[i + 1];
    int64_t q = COUNT ? 0 : rp[i];
    for (int64_t p0 = b; p0 < e; p0 += 32) {
        const int64_t p = p0 + lane;
        const bool first = p < e && (p == b || in[p] != in[p - 1]);
        const unsigned m = __ballot_sync(FULL_MASK, first);
        if (!COUNT && first) out[q + __popc(m & ((1u << lane) - 1))] = in[p];
        q += __popc(m);
    }
    if (COUNT && lane == 0) {
        rp[i + 1] = q;
        if (i == 0) rp[0] = 0;
    }
}

/* out = sortunique(expansion of X by Y, or of X with the identity). */
static int pattern_step(gs_engine *e, const gs_dcsr *X, const gs_dcsr *Y, int identity,
                        gs_dcsr *out)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = X->n;
    const unsigned grid = gs_dblocks(n, ROW_WARPS);
    gs_dcsr ex = {};
    int status = GS_OK;
    int64_t nnz = 0;
    unsigned long long *unsorted = NULL;
    uint64_t got[2] = {0, 1};
    GS_TRY(gs_cuda_alloc(e, &unsorted, sizeof *unsorted, "pattern power: sorted flag"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(unsorted, 0, sizeof *unsorted, s)));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &ex, n, "pattern power: expansion row pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_expand_count_kernel, grid, 32 * ROW_WARPS, 0, s, n,
                       (const int64_t *)X->rp, (const int32_t *)X->col,
                       Y ? (const int64_t *)Y->rp : (const int64_t *)NULL, identity, ex.rp,
                       unsorted));
    GS_TRY(gs_dcsr_counts_scan(e, ex.rp, n));
    if (n > 0) {                                  /* nnz and the flag, one round trip */
        const void *src[2] = {ex.rp + n, unsorted};
        const int words[2] = {1, 1};
        GS_TRY(gs_dread_words(e, 2, src, words, got));
    } else {
        got[0] = 0, got[1] = 0;
    }
    nnz = (int64_t)got[0];
    GS_TRY(gs_dcsr_alloc_entries(e, &ex, nnz, 0, "pattern power: expansion"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_expand_fill_kernel, grid, 32 * ROW_WARPS, 0, s, n,
                       (const int64_t *)X->rp, (const int32_t *)X->col,
                       Y ? (const int64_t *)Y->rp : (const int64_t *)NULL,
                       Y ? (const int32_t *)Y->col : (const int32_t *)NULL, identity,
                       (const int64_t *)ex.rp, ex.col));
    /* a product's expansion is never sorted; (E +) X's is where X's rows are
     * (A^T from the transpose: gspai-opt's k = 1 skips a segmented sort of
     * nnz + n entries) */
    if (Y || got[1]) GS_TRY(gs_dcsr_sort_rows(e, &ex));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, out, n, "pattern power: row pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_unique_kernel<true>, grid, 32 * ROW_WARPS, 0, s, n,
                       (const int64_t *)ex.rp, (const int32_t *)ex.col, out->rp,
                       (int32_t *)NULL));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, out->rp, n, &nnz));
    GS_TRY(gs_dcsr_alloc_entries(e, out, nnz, 0, "pattern power"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_unique_kernel<false>, grid, 32 * ROW_WARPS, 0, s, n,
                       (const int64_t *)ex.rp, (const int32_t *)ex.col, out->rp, out->col));
cleanup:
    gs_dcsr_free(e, &ex); /* stream-ordered */
    gs_cuda_free(e, unsorted, sizeof *unsorted);
    return status;
}

int gs_dcsr_pattern_power(gs_engine *e, const gs_dcsr *P, int k, int add_identity, gs_dcsr *out)
{
    gs_dcsr base = {}, power = {}, next = {};
    int status = GS_OK;
    *out = gs_dcsr{};
    if (k < 1)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "pattern power: needs k >= 1 (got %d)", k);
    GS_TRY(pattern_step(e, P, NULL, add_identity, &base));   /* sortunique(P (+ E)) */
    for (int step = 1; step < k; step++) {                   /* power <- power * base */
        GS_TRY(pattern_step(e, step == 1 ? &base : &power, &base, 0, &next));
        gs_dcsr_free(e, &power);
        power = next;
        next = gs_dcsr{};
    }
    if (k == 1) {
        *out = base;
        base = gs_dcsr{};
    } else {
        *out = power;
        power = gs_dcsr{};
    }
cleanup:
    gs_dcsr_free(e, &base);
    gs_dcsr_free(e, &power);
    gs_dcsr_free(e, &next);
    return status;
}
