/* jacobi.cu - the Jacobi preconditioner's CUDA setup, M = diag(A)^-1 (all
 * papers' baseline): the diagonal is read from A as the engine already
 * stores it (SELL or CSR) and inverted on the device, so neither a host pass
 * over A nor an upload of n numbers is needed. The apply is the same fused
 * z = d .* r (and r.z) as the host setup's (src/pc_jacobi.c). */
#include <stdio.h>
#include <stdlib.h>

#include "engine_cuda.h"

extern "C" {
#include "jacobi.h"
}


/* dinv[row] = 1 / a_row,row for every row; *bad = lowest 1-based row whose
 * diagonal is zero or missing (the CPU setup reports the first one). */
template <typename V>
__global__ void jacobi_sell_kernel(int64_t n, const int64_t *__restrict__ slice_ptr,
                                   const int32_t *__restrict__ col, const V *__restrict__ val,
                                   const int32_t *__restrict__ perm, double *__restrict__ dinv,
                                   int *bad)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t row = perm ? perm[r] : r, s = r / 32;
    double d = 0.0;
    for (int64_t k = slice_ptr[s] + (r % 32); k < slice_ptr[s + 1]; k += 32)
        if (col[k] == row) d = (double)val[k];
    dinv[row] = d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(bad, (int)row + 1);
}

template <typename V>
__global__ void jacobi_csr_kernel(int64_t n, const int64_t *__restrict__ row_ptr,
                                  const int32_t *__restrict__ col, const V *__restrict__ val,
                                  double *__restrict__ dinv, int *bad)
{
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    double d = 0.0;
    for (int64_t k = row_ptr[row]; k < row_ptr[row + 1]; k++)
        if (col[k] == row) d = (double)val[k];
    dinv[row] = d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(bad, (int)row + 1);
}

/* The diagonal of the engine's copy of A; fp32 storage would round it, so
 * such a matrix takes the host setup (the exact diagonal of the input). */
static int extract(gs_engine *e, const gs_mat *A, double *dinv, int *bad)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const unsigned grid = (unsigned)((A->n_rows + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
    if (A->format == GS_CUDA_SELL)
        return CUDA_LAUNCH(&e->err, jacobi_sell_kernel<double>, grid, GS_CUDA_BLOCK, 0, c->stream,
                           (int64_t)A->n_rows, (const int64_t *)A->slice_ptr,
                           (const int32_t *)A->sell_col, (const double *)A->sell_val,
                           (const int32_t *)A->perm, dinv, bad);
    return CUDA_LAUNCH(&e->err, jacobi_csr_kernel<double>, grid, GS_CUDA_BLOCK, 0, c->stream,
                       (int64_t)A->n_rows, (const int64_t *)A->row_ptr,
                       (const int32_t *)A->csr_col, (const double *)A->csr_val, dinv, bad);
}

extern "C" int gs_jacobi_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    if (e->ops->kind != GS_ENGINE_CUDA || !pc->A || pc->A->prec != GS_FP64 ||
        pc->A->n_rows != A->n_rows)
        return gs_jacobi_setup(pc, A, err);
    int status = GS_OK, bad = 0, *d_bad = NULL;
    double t0 = gs_pc_stage_begin(pc);
    gs_jacobi_data *d = (gs_jacobi_data *)gs_calloc(1, sizeof *d, "jacobi", err);
    if (!d) return GS_ERR_NOMEM;
    gs_jacobi_attach(pc, d);
    d->n = A->n_rows;
    GS_TRY(e->ops->vec_create(e, A->n_rows, &d->dinv));
    GS_TRY(gs_cuda_alloc(e, &d_bad, sizeof(int), "jacobi: zero-diagonal flag"));
    bad = A->n_rows + 1;
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_bad, &bad, sizeof(int), cudaMemcpyHostToDevice,
                                              gs_cuda_of(e)->stream)));
    GS_TRY(extract(e, pc->A, d->dinv->d, d_bad));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&bad, d_bad, sizeof(int), cudaMemcpyDeviceToHost,
                                              gs_cuda_of(e)->stream)));
    GS_TRY(gs_pc_stage_end(pc, "diagonal", t0)); /* synchronises: bad is read below */
    if (bad <= A->n_rows) {
        status = gs_error_set(err, GS_ERR_INPUT, "jacobi: zero or missing diagonal entry in row %d",
                              bad);
        goto cleanup;
    }
    gs_jacobi_finish(pc);
cleanup:
    gs_cuda_free(e, d_bad, sizeof(int));
    if (status != GS_OK) gs_engine_fail(e, err);
    return status;
}
