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

extern "C" int gs_jacobi_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    /* fp32 storage would round the diagonal: such a matrix takes the host
     * setup (the exact diagonal of the input) */
    if (e->ops->kind != GS_ENGINE_CUDA || !pc->A || gs_cuda_mat_info_of(pc->A).prec != GS_FP64 ||
        gs_cuda_mat_info_of(pc->A).n_rows != A->n_rows)
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
    GS_TRY(gs_cuda_mat_diagonal(e, pc->A, 1, d->dinv->d, d_bad));
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
