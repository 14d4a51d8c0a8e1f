/* split_lu.cu - a square CSR with every diagonal entry stored split into its
 * unit lower triangle L (strict lower part, then a stored 1 on the diagonal)
 * and its upper triangle U (diagonal and above): the two factors of an
 * in-place ILU(0) (gs_dsparse.h). Saad, Iterative Methods for Sparse Linear
 * Systems, 2nd ed., section 10.3 (the factors share A's pattern). */
#include "gs_dsparse.h"

#define SPLIT_WARPS 8 /* rows (warps) per 256-thread block */

/* One warp per row: l_rp[i + 1] = (entries left of the diagonal) + 1,
 * u_rp[i + 1] = the rest (rows sorted). */
__global__ void split_lu_count_kernel(int32_t n, const int64_t *__restrict__ rp,
                                      const int32_t *__restrict__ col, int64_t *l_rp,
                                      int64_t *u_rp)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    int64_t below = 0;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) below += col[p] < i;
    for (int o = 16; o > 0; o >>= 1) below += __shfl_xor_sync(0xffffffffu, below, o);
    if (lane == 0) {
        l_rp[i + 1] = below + 1;
        u_rp[i + 1] = rp[i + 1] - rp[i] - below;
        if (i == 0) l_rp[0] = 0, u_rp[0] = 0;
    }
}

/* One warp per row: entry p of row i goes to L at l_rp[i] + (p - rp[i]) when
 * left of the diagonal, else to U at u_rp[i] + (p - rp[i] - below); the unit
 * diagonal closes L's row. */
__global__ void split_lu_fill_kernel(int32_t n, const int64_t *__restrict__ rp,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val,
                                     const int64_t *__restrict__ l_rp, int32_t *__restrict__ l_col,
                                     double *__restrict__ l_val, const int64_t *__restrict__ u_rp,
                                     int32_t *__restrict__ u_col, double *__restrict__ u_val)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t below = l_rp[i + 1] - l_rp[i] - 1;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) {
        const int64_t k = p - rp[i];
        if (k < below) {
            l_col[l_rp[i] + k] = col[p];
            l_val[l_rp[i] + k] = val[p];
        } else {
            u_col[u_rp[i] + k - below] = col[p];
            u_val[u_rp[i] + k - below] = val[p];
        }
    }
    if (lane == 0) {
        l_col[l_rp[i + 1] - 1] = i;
        l_val[l_rp[i + 1] - 1] = 1.0; /* l_ii = 1 */
    }
}

int gs_dcsr_split_lu(gs_engine *e, const gs_dcsr *A, gs_dcsr *L, gs_dcsr *U)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = A->n;
    const unsigned grid = gs_dblocks(n, SPLIT_WARPS);
    int status = GS_OK;
    if (A->vsize != sizeof(double))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "split L U: needs fp64 values");
    GS_TRY(gs_dcsr_alloc_rows_counted(e, L, n, "split: row pointers of L"));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, U, n, "split: row pointers of U"));
    if (n == 0) goto cleanup; /* rp zeroed by the allocation */
    GS_TRY(CUDA_LAUNCH(&e->err, split_lu_count_kernel, grid, 32 * SPLIT_WARPS, 0, c->stream, n,
                       (const int64_t *)A->rp, (const int32_t *)A->col, L->rp, U->rp));
    GS_TRY(gs_dcsr_counts_scan(e, L->rp, n));
    GS_TRY(gs_dcsr_counts_scan(e, U->rp, n));
    /* the sizes follow from A's: nnz(L) = n + (strict lower), nnz(U) = the
     * rest; one word read gives both */
    {
        int64_t nnz_l = 0;
        GS_TRY(gs_dread_int64(e, L->rp + n, &nnz_l));
        GS_TRY(gs_dcsr_alloc_entries(e, L, nnz_l, sizeof(double), "split: L"));
        GS_TRY(gs_dcsr_alloc_entries(e, U, A->nnz + n - nnz_l, sizeof(double), "split: U"));
    }
    GS_TRY(CUDA_LAUNCH(&e->err, split_lu_fill_kernel, grid, 32 * SPLIT_WARPS, 0, c->stream, n,
                       (const int64_t *)A->rp, (const int32_t *)A->col, (const double *)A->val,
                       (const int64_t *)L->rp, L->col, (double *)L->val, (const int64_t *)U->rp,
                       U->col, (double *)U->val));
cleanup:
    return status;
}
