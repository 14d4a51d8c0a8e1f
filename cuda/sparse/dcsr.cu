/* dcsr.cu - the device CSR of the toolkit (gs_dsparse.h): allocation in
 * the engine's accounting, row pointers from row counts, download to host. */
#include <stdio.h>
#include <stdlib.h>

#include "gs_dsparse.h"

int gs_dcsr_alloc_rows(gs_engine *e, gs_dcsr *m, int32_t n, const char *what)
{
    m->n = n;
    int status = gs_cuda_alloc(e, &m->rp, ((size_t)n + 1) * sizeof(int64_t), what);
    if (status == GS_OK)
        status = CUDA_CALL(&e->err, cudaMemsetAsync(m->rp, 0, ((size_t)n + 1) * sizeof(int64_t),
                                                    gs_cuda_of(e)->stream));
    return status;
}

int gs_dcsr_alloc_rows_counted(gs_engine *e, gs_dcsr *m, int32_t n, const char *what)
{
    if (n == 0) return gs_dcsr_alloc_rows(e, m, n, what); /* no row 0 to write rp[0] */
    m->n = n;
    return gs_cuda_alloc(e, &m->rp, ((size_t)n + 1) * sizeof(int64_t), what);
}

int gs_dcsr_alloc_entries(gs_engine *e, gs_dcsr *m, int64_t nnz, size_t vsize, const char *what)
{
    m->nnz = nnz;
    int status = gs_cuda_alloc(e, &m->col, (size_t)nnz * sizeof(int32_t), what);
    if (status == GS_OK && vsize > 0) {
        status = gs_cuda_alloc(e, &m->val, (size_t)nnz * vsize, what);
        if (status == GS_OK) m->vsize = vsize;
    }
    return status;
}

void gs_dcsr_free(gs_engine *e, gs_dcsr *m)
{
    if (!m) return;
    gs_cuda_free(e, m->rp, ((size_t)m->n + 1) * sizeof(int64_t));
    gs_cuda_free(e, m->col, (size_t)m->nnz * sizeof(int32_t));
    gs_cuda_free(e, m->val, (size_t)m->nnz * m->vsize);
    *m = gs_dcsr{};
}

int gs_dcsr_upload(gs_engine *e, const gs_csr *A, const char *who, gs_dcsr *d)
{
    char rows[96], entries[96];
    snprintf(rows, sizeof rows, "%s: row pointers of A", who);
    snprintf(entries, sizeof entries, "%s: A", who);
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows(e, d, A->n_rows, rows));
    GS_TRY(gs_dcsr_alloc_entries(e, d, A->nnz, sizeof(double), entries));
    GS_TRY(gs_cuda_upload(e, d->rp, A->row_ptr, ((size_t)A->n_rows + 1) * sizeof(int64_t)));
    if (A->nnz > 0) {
        GS_TRY(gs_cuda_upload(e, d->col, A->col, (size_t)A->nnz * sizeof(int32_t)));
        GS_TRY(gs_cuda_upload(e, d->val, A->val, (size_t)A->nnz * sizeof(double)));
    }
cleanup:
    return status;
}

int gs_dcsr_of_A(gs_engine *e, const gs_mat *Ae, const gs_csr *A, const char *who, gs_dcsr *dA,
                 gs_cuda_csr_view *view, int *from_engine)
{
    const gs_cuda_mat_info Ai = Ae ? gs_cuda_mat_info_of(Ae) : gs_cuda_mat_info{};
    int status = GS_OK;
    *from_engine = Ae && Ai.prec == GS_FP64 && Ai.n_rows == A->n_rows &&
                   Ai.n_cols == A->n_cols && Ai.nnz == A->nnz;
    if (*from_engine) {
        GS_TRY(gs_cuda_mat_device_csr(e, Ae, view));
        dA->n = view->n_rows, dA->nnz = view->nnz;
        dA->rp = (int64_t *)view->row_ptr, dA->col = (int32_t *)view->col;
        dA->val = (void *)view->val, dA->vsize = sizeof(double);
    } else {
        GS_TRY(gs_dcsr_upload(e, A, who, dA));
    }
cleanup:
    return status;
}

void gs_dcsr_release_A(gs_engine *e, gs_dcsr *dA, gs_cuda_csr_view *view)
{
    if (!(dA->rp && dA->rp == view->row_ptr)) gs_dcsr_free(e, dA); /* an upload */
    *dA = gs_dcsr{};
    gs_cuda_csr_view_free(e, view); /* frees only what it built; an empty view: nothing */
}

int gs_dcsr_counts_scan(gs_engine *e, int64_t *rp, int32_t n)
{
    return gs_dscan_inclusive(e, rp + 1, rp + 1, n);
}

int gs_dcsr_counts_to_row_ptr(gs_engine *e, int64_t *rp, int32_t n, int64_t *nnz)
{
    *nnz = 0;
    int status = gs_dcsr_counts_scan(e, rp, n);
    if (status == GS_OK && n > 0) status = gs_dread_int64(e, rp + n, nnz);
    return status;
}

int gs_dcsr_download(gs_engine *e, const gs_dcsr *m, gs_csr *out)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    void *val = NULL;
    int status = GS_OK;
    GS_TRY(gs_csr_alloc(m->n, m->n, m->nnz, 1, out, &e->err));
    if (m->vsize > 0) {
        val = gs_malloc((size_t)m->nnz * m->vsize + 1, "device csr download", &e->err);
        if (!val) GS_TRY(GS_ERR_NOMEM);
    }
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(out->row_ptr, m->rp, ((size_t)m->n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, s)));
    if (m->nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(out->col, m->col, (size_t)m->nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, s)));
    if (val && m->nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(val, m->val, (size_t)m->nnz * m->vsize,
                                                  cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    for (int64_t p = 0; p < m->nnz; p++)
        out->val[p] = !val ? 1.0 : m->vsize == sizeof(float) ? (double)((const float *)val)[p]
                                                              : ((const double *)val)[p];
cleanup:
    free(val);
    if (status != GS_OK) gs_csr_free(out);
    return status;
}
