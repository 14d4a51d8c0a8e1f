/* pc_jacobi.c - the identity ("none") and Jacobi, M = diag(A)^-1, the
 * baseline of every paper. One setup serves both engines: the inverse
 * diagonal is n numbers, computed on the host and uploaded. */
#include <stdio.h>
#include <stdlib.h>

#include "jacobi.h"
#include "mmio.h"

static int none_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return pc->eng->ops->copy(pc->eng, r, z);
}

int gs_none_setup(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    (void)err;
    pc->apply = none_apply;
    pc->pointwise_identity = 1;
    pc->nnz = 0;
    pc->apply_bytes = 16.0 * A->n_rows; /* the copy: read r, write z */
    pc->symmetric = 1;
    snprintf(pc->description, sizeof pc->description, "M = I");
    return GS_OK;
}

static int jacobi_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    gs_jacobi_data *d = pc->data;
    return pc->eng->ops->pointwise_mult_dot(pc->eng, d->dinv, r, z, slot);
}

static int jacobi_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return jacobi_apply_dot(pc, r, z, GS_SLOT_NONE);
}

static void jacobi_destroy(gs_pc *pc)
{
    gs_jacobi_data *d = pc->data;
    if (d) pc->eng->ops->vec_destroy(pc->eng, d->dinv);
    free(d);
}

static int jacobi_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_jacobi_data *d = pc->data;
    double *h = gs_malloc((size_t)d->n * sizeof(double), "jacobi diagonal", err);
    if (!h) return GS_ERR_NOMEM;
    int status = pc->eng->ops->vec_download(pc->eng, d->dinv, h);
    if (status == GS_OK) status = gs_engine_fail(pc->eng, err);
    char path[4096];
    snprintf(path, sizeof path, "%s_D.mtx", prefix);
    if (status == GS_OK)
        status = gs_mm_write_vector(path, h, d->n, "gpusolve jacobi: M = diag(1/a_ii)", err);
    free(h);
    return status;
}

void gs_jacobi_attach(gs_pc *pc, gs_jacobi_data *d)
{
    pc->data = d;
    pc->destroy = jacobi_destroy;
}

void gs_jacobi_finish(gs_pc *pc)
{
    gs_jacobi_data *d = pc->data;
    pc->apply = jacobi_apply;
    pc->apply_dot = jacobi_apply_dot;
    pc->pointwise = d->dinv;
    pc->save = jacobi_save;
    pc->nnz = d->n;
    pc->apply_bytes = 24.0 * (double)d->n; /* read d and r, write z */
    pc->symmetric = 1;
    snprintf(pc->description, sizeof pc->description, "M = diag(A)^-1");
}

int gs_jacobi_setup(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    int status = GS_OK;
    double t0 = gs_pc_stage_begin(pc);
    double *h = gs_malloc((size_t)A->n_rows * sizeof(double), "jacobi diagonal", err);
    gs_jacobi_data *d = gs_calloc(1, sizeof *d, "jacobi", err);
    if (!h || !d) {
        status = GS_ERR_NOMEM;
        goto cleanup;
    }
    gs_jacobi_attach(pc, d);
    d->n = A->n_rows;
    gs_csr_diagonal(A, h);
    for (int32_t i = 0; i < A->n_rows; i++) {
        if (h[i] == 0.0) {
            status = gs_error_set(err, GS_ERR_INPUT,
                                  "jacobi: zero or missing diagonal entry in row %d",
                                  (int)i + 1);
            goto cleanup;
        }
        h[i] = 1.0 / h[i];
    }
    GS_TRY(pc->eng->ops->vec_create(pc->eng, A->n_rows, &d->dinv));
    GS_TRY(pc->eng->ops->vec_upload(pc->eng, d->dinv, h));
    GS_TRY(gs_pc_stage_end(pc, "diagonal", t0));
    gs_jacobi_finish(pc);
cleanup:
    if (status != GS_OK) gs_engine_fail(pc->eng, err);
    free(h);
    return status;
}
