/* pattern_power.cu - the sparsity pattern of |T|^k (k >= 1) on the device,
 * rows sorted, by k - 1 symbolic products P <- P |T|: each row of the
 * product expanded (row i of P lists the rows of T to concatenate), sorted,
 * duplicates dropped. No size limit: the expansion lives in device memory.
 * The patterns of ISAI(k) (Anzt, Chow, Huckle, Dongarra, ScalA 2016) and of
 * static SPAI's (E + |A|)^k; the host version is gs_csr_pattern_power. */
#include "gs_dsparse.h"

#define POWER_WARPS 8 /* rows (warps) per 256-thread block */

/* One warp per row i of P: x_rp[i + 1] = sum over the columns k of row i of
 * the length of row k of T (the expanded row's length). */
__global__ void power_expand_count_kernel(int32_t n, const int64_t *__restrict__ p_rp,
                                          const int32_t *__restrict__ p_col,
                                          const int64_t *__restrict__ t_rp, int64_t *x_rp)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t len = 0;
    for (int64_t p = p_rp[i] + lane; p < p_rp[i + 1]; p += 32) {
        const int32_t k = p_col[p];
        len += t_rp[k + 1] - t_rp[k];
    }
    for (int o = 16; o > 0; o >>= 1) len += __shfl_xor_sync(0xffffffffu, len, o);
    if (lane == 0) {
        x_rp[i + 1] = len;
        if (i == 0) x_rp[0] = 0;
    }
}

/* One warp per row i of P: the rows k of T named by row i, end to end. */
__global__ void power_expand_fill_kernel(int32_t n, const int64_t *__restrict__ p_rp,
                                         const int32_t *__restrict__ p_col,
                                         const int64_t *__restrict__ t_rp,
                                         const int32_t *__restrict__ t_col,
                                         const int64_t *__restrict__ x_rp,
                                         int32_t *__restrict__ x_col)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t out = x_rp[i];
    for (int64_t p = p_rp[i]; p < p_rp[i + 1]; p++) {
        const int32_t k = p_col[p];
        const int64_t b = t_rp[k], len = t_rp[k + 1] - b;
        for (int64_t q = lane; q < len; q += 32) x_col[out + q] = t_col[b + q];
        out += len;
    }
}

/* One warp per row of the sorted expansion: c_rp[i + 1] = its distinct
 * columns (an entry counts when it differs from the one before it). */
__global__ void power_unique_count_kernel(int32_t n, const int64_t *__restrict__ x_rp,
                                          const int32_t *__restrict__ x_col, int64_t *c_rp)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t count = 0;
    for (int64_t p = x_rp[i] + lane; p < x_rp[i + 1]; p += 32)
        count += p == x_rp[i] || x_col[p] != x_col[p - 1];
    for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
    if (lane == 0) {
        c_rp[i + 1] = count;
        if (i == 0) c_rp[0] = 0;
    }
}

/* One warp per row: the distinct columns, in order (ballot compaction over
 * 32 entries at a time). */
__global__ void power_unique_fill_kernel(int32_t n, const int64_t *__restrict__ x_rp,
                                         const int32_t *__restrict__ x_col,
                                         const int64_t *__restrict__ c_rp,
                                         int32_t *__restrict__ c_col)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t out = c_rp[i];
    for (int64_t p0 = x_rp[i]; p0 < x_rp[i + 1]; p0 += 32) {
        const int64_t p = p0 + lane;
        const bool first = p < x_rp[i + 1] && (p == x_rp[i] || x_col[p] != x_col[p - 1]);
        const unsigned keep = __ballot_sync(0xffffffffu, first);
        if (first) c_col[out + __popc(keep & ((1u << lane) - 1))] = x_col[p];
        out += __popc(keep);
    }
}

/* C = the pattern of |P| |T| (rows sorted); P's and T's values unused. */
static int power_product(gs_engine *e, const gs_dcsr *P, const gs_dcsr *T, gs_dcsr *C)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = P->n;
    const unsigned grid = gs_dblocks(n, POWER_WARPS);
    gs_dcsr X = {};
    int64_t nnz = 0;
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &X, n, "pattern power: expanded rows"));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, C, n, "pattern power: row pointers"));
    if (n == 0) goto cleanup;
    GS_TRY(CUDA_LAUNCH(&e->err, power_expand_count_kernel, grid, 32 * POWER_WARPS, 0, c->stream,
                       n, (const int64_t *)P->rp, (const int32_t *)P->col,
                       (const int64_t *)T->rp, X.rp));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, X.rp, n, &nnz));
    GS_TRY(gs_dcsr_alloc_entries(e, &X, nnz, 0, "pattern power: expanded rows"));
    GS_TRY(CUDA_LAUNCH(&e->err, power_expand_fill_kernel, grid, 32 * POWER_WARPS, 0, c->stream, n,
                       (const int64_t *)P->rp, (const int32_t *)P->col, (const int64_t *)T->rp,
                       (const int32_t *)T->col, (const int64_t *)X.rp, X.col));
    GS_TRY(gs_dcsr_sort_rows(e, &X));
    GS_TRY(CUDA_LAUNCH(&e->err, power_unique_count_kernel, grid, 32 * POWER_WARPS, 0, c->stream,
                       n, (const int64_t *)X.rp, (const int32_t *)X.col, C->rp));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, C->rp, n, &nnz));
    GS_TRY(gs_dcsr_alloc_entries(e, C, nnz, 0, "pattern power: entries"));
    GS_TRY(CUDA_LAUNCH(&e->err, power_unique_fill_kernel, grid, 32 * POWER_WARPS, 0, c->stream, n,
                       (const int64_t *)X.rp, (const int32_t *)X.col, (const int64_t *)C->rp,
                       C->col));
cleanup:
    gs_dcsr_free(e, &X); /* stream-ordered */
    return status;
}

/* k = 1 copies T's pattern; k > 1 multiplies k - 1 times. */
int gs_dcsr_pattern_power(gs_engine *e, const gs_dcsr *T, int k, gs_dcsr *P)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_dcsr power = {}, next = {};
    int status = GS_OK;
    if (k < 1)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "pattern power: needs k >= 1 (got %d)", k);
    GS_TRY(gs_dcsr_alloc_rows(e, &power, T->n, "pattern power: row pointers"));
    GS_TRY(gs_dcsr_alloc_entries(e, &power, T->nnz, 0, "pattern power: entries"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(power.rp, T->rp, ((size_t)T->n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    if (T->nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(power.col, T->col, (size_t)T->nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    for (int step = 1; step < k; step++) { /* power <- power |T| */
        GS_TRY(power_product(e, &power, T, &next));
        gs_dcsr_free(e, &power);
        power = next;
        next = gs_dcsr{};
    }
    *P = power;
    power = gs_dcsr{};
cleanup:
    gs_dcsr_free(e, &power);
    gs_dcsr_free(e, &next);
    return status;
}
