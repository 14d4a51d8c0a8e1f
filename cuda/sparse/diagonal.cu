/* diagonal.cu - the diagonal of an engine matrix (or its inverse) from whatever layout it
 * holds, for setups such as Jacobi's (gs_cuda_mat_diagonal), and a matrix's shape for setups. */
#include "layout.h"

/* --------------------------------------------------------------- diagonal */

/* out[row] = a_row,row, or its inverse where INVERT (0 for a zero or
 * missing diagonal); *first_zero = lowest 1-based row whose diagonal is
 * zero or missing (the CPU setups report the first one). */
template <typename V, bool INVERT>
__global__ void mat_diagonal_sell_kernel(int64_t n, const int64_t *__restrict__ slice_ptr,
                                         const int32_t *__restrict__ col,
                                         const V *__restrict__ val,
                                         const int32_t *__restrict__ perm,
                                         double *__restrict__ out, int *first_zero)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t row = perm ? perm[r] : r, s = r / 32;
    double d = 0.0;
    for (int64_t k = slice_ptr[s] + (r % 32); k < slice_ptr[s + 1]; k += 32)
        if (col[k] == row) d = (double)val[k];
    out[row] = !INVERT ? d : d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(first_zero, (int)row + 1);
}

template <typename V, bool INVERT>
__global__ void mat_diagonal_csr_kernel(int64_t n, const int64_t *__restrict__ row_ptr,
                                        const int32_t *__restrict__ col,
                                        const V *__restrict__ val, double *__restrict__ out,
                                        int *first_zero)
{
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    double d = 0.0;
    int64_t lo = row_ptr[row], hi = row_ptr[row + 1];
    while (hi - lo > 16) { /* a row's columns ascend: a dense row costs a search, not a walk */
        const int64_t mid = lo + (hi - lo) / 2;
        if (col[mid] <= row) lo = mid;
        else hi = mid;
    }
    for (int64_t k = lo; k < hi; k++)
        if (col[k] == row) d = (double)val[k];
    out[row] = !INVERT ? d : d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(first_zero, (int)row + 1);
}

template <bool INVERT>
static int mat_diagonal_launch(gs_engine *e, const gs_mat *A, double *out, int *first_zero)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const unsigned grid = (unsigned)((A->n_rows + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
    auto sell = mat_diagonal_sell_kernel<double, INVERT>;
    auto csr = mat_diagonal_csr_kernel<double, INVERT>;
    if (A->format == GS_CUDA_SELL)
        return CUDA_LAUNCH(&e->err, sell, grid, GS_CUDA_BLOCK, 0, c->stream, (int64_t)A->n_rows,
                           (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                           (const double *)A->sell_val, (const int32_t *)A->perm, out,
                           first_zero);
    return CUDA_LAUNCH(&e->err, csr, grid, GS_CUDA_BLOCK, 0, c->stream, (int64_t)A->n_rows,
                       (const int64_t *)A->row_ptr, (const int32_t *)A->csr_col,
                       (const double *)A->csr_val, out, first_zero);
}

int gs_cuda_mat_diagonal(gs_engine *e, const gs_mat *A, int invert, double *out, int *first_zero)
{
    if (A->prec != GS_FP64)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda mat_diagonal: the matrix is stored in fp32 (its diagonal "
                            "rounded); take it from the host matrix");
    return invert ? mat_diagonal_launch<true>(e, A, out, first_zero)
                  : mat_diagonal_launch<false>(e, A, out, first_zero);
}

gs_cuda_mat_info gs_cuda_mat_info_of(const gs_mat *A)
{
    gs_cuda_mat_info i = {A->n_rows, A->n_cols, A->nnz, A->prec};
    return i;
}
