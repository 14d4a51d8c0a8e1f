/* trisolve.cu - exact triangular solves of an engine matrix through cuSPARSE SpSV (analysis on
 * first use, kept with the matrix). */
#include "layout.h"

/* --------------------------------------------------------------- trisolve */

/* cuSPARSE SpSV analysis for one diagonal type, on first use: the
 * descriptor, its buffer and the analysis are kept with the matrix. */
static int spsv_prepare(gs_engine *e, gs_mat *m, int u, cusparseDnVecDescr_t vb,
                        cusparseDnVecDescr_t vx)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const double one = 1.0;
    cusparseFillMode_t fill = m->tri == GS_CUDA_TRI_LOWER ? CUSPARSE_FILL_MODE_LOWER
                                                          : CUSPARSE_FILL_MODE_UPPER;
    cusparseDiagType_t diag = u ? CUSPARSE_DIAG_TYPE_UNIT : CUSPARSE_DIAG_TYPE_NON_UNIT;
    int status = GS_OK;
    if (c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "cuda trisolve: first solve with a matrix (its analysis) while "
                            "capturing; solve once before capturing");
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateCsr(&m->tri_descr[u], m->n_rows, m->n_cols, m->nnz,
                                                    m->tri_row_ptr, m->tri_col, m->tri_val,
                                                    CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                    CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpMatSetAttribute(m->tri_descr[u], CUSPARSE_SPMAT_FILL_MODE,
                                                            &fill, sizeof fill)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpMatSetAttribute(m->tri_descr[u], CUSPARSE_SPMAT_DIAG_TYPE,
                                                            &diag, sizeof diag)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_createDescr(&m->spsv[u])));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_bufferSize(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                          &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                          CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u],
                                                          &m->spsv_bytes[u])));
    GS_TRY(gs_cuda_alloc(e, &m->spsv_buffer[u], m->spsv_bytes[u], "cuSPARSE SpSV buffer"));
    m->bytes += m->spsv_bytes[u];
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_analysis(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                        &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                        CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u],
                                                        m->spsv_buffer[u])));
cleanup:
    return status;
}

int gs_cuda_trisolve(gs_engine *e, const gs_mat *T, int unit_diagonal, const gs_vec *b, gs_vec *x)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_mat *m = (gs_mat *)T; /* the analysis is cached in the matrix */
    const int u = unit_diagonal ? 1 : 0;
    const double one = 1.0;
    cusparseDnVecDescr_t vb = NULL, vx = NULL;
    int status = GS_OK;
    if (m->tri == GS_CUDA_TRI_NONE)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve: matrix is not triangular");
    if (b->n != m->n_rows || x->n != m->n_rows)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda trisolve: vector lengths %lld, %lld "
                            "for %d rows", (long long)b->n, (long long)x->n, (int)m->n_rows);
    if (!u && m->tri_zero_diag_row > 0)
        return gs_error_set(&e->err, GS_ERR_NUMERIC, "trisolve: zero diagonal in row %d",
                            m->tri_zero_diag_row);
    if (m->n_rows == 0) return GS_OK;
    if (m->nnz == 0) /* unit diagonal, nothing else stored: x = b */
        return CUDA_CALL(&e->err, cudaMemcpyAsync(x->d, b->d, b->n * sizeof(double),
                                                  cudaMemcpyDeviceToDevice, c->stream));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateDnVec(&vb, b->n, b->d, CUDA_R_64F)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateDnVec(&vx, x->n, x->d, CUDA_R_64F)));
    if (!m->spsv[u]) GS_TRY(spsv_prepare(e, m, u, vb, vx));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_solve(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                     &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                     CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u])));
cleanup:
    if (vb) CUSPARSE_TEARDOWN(&c->teardown, cusparseDestroyDnVec(vb));
    if (vx) CUSPARSE_TEARDOWN(&c->teardown, cusparseDestroyDnVec(vx));
    return status;
}
