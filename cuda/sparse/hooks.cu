/* hooks.cu - C-callable test hooks of the device toolkit (gs_dsparse_hooks.h):
 * host input up, outputs poisoned, one toolkit call, results down. */
#include <stdlib.h>
#include <string.h>

#include "gs_dsparse.h"
#include "gs_dsparse_hooks.h"

/* Fill the device pool with 0xFF bytes: a block of bytes allocated, set and
 * freed, so that the allocations that follow (same stream) likely reuse it. */
static int poison_pool(gs_engine *e, size_t bytes)
{
    void *p = NULL;
    int status = gs_cuda_alloc(e, &p, bytes, "hook: poison");
    if (status == GS_OK)
        status = CUDA_CALL(&e->err, cudaMemsetAsync(p, 0xFF, bytes, gs_cuda_of(e)->stream));
    gs_cuda_free(e, p, bytes);
    return status;
}

static int upload_csr(gs_engine *e, const gs_csr *P, size_t vsize, gs_dcsr *d)
{
    int status = GS_OK;
    float *narrow = NULL;
    GS_TRY(gs_dcsr_alloc_rows(e, d, P->n_rows, "hook: rows"));
    GS_TRY(gs_dcsr_alloc_entries(e, d, P->nnz, P->val ? vsize : 0, "hook: entries"));
    GS_TRY(gs_cuda_upload(e, d->rp, P->row_ptr, ((size_t)P->n_rows + 1) * sizeof(int64_t)));
    if (P->nnz > 0) GS_TRY(gs_cuda_upload(e, d->col, P->col, (size_t)P->nnz * sizeof(int32_t)));
    if (P->nnz > 0 && P->val && vsize == sizeof(double))
        GS_TRY(gs_cuda_upload(e, d->val, P->val, (size_t)P->nnz * sizeof(double)));
    if (P->nnz > 0 && P->val && vsize == sizeof(float)) {
        narrow = (float *)gs_malloc((size_t)P->nnz * sizeof(float), "hook", &e->err);
        if (!narrow) GS_TRY(GS_ERR_NOMEM);
        for (int64_t p = 0; p < P->nnz; p++) narrow[p] = (float)P->val[p];
        GS_TRY(gs_cuda_upload(e, d->val, narrow, (size_t)P->nnz * sizeof(float)));
    }
cleanup:
    free(narrow);
    return status;
}

extern "C" int gs_dsparse_hook_scan(gs_engine *e, const int64_t *in, int64_t count, int exclusive,
                                    int in_place, int64_t *out)
{
    const size_t n_out = (size_t)count + (exclusive ? 1 : 0);
    int64_t *d_in = NULL, *d_out = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &d_in, ((size_t)count + 1) * sizeof(int64_t), "hook: scan in"));
    GS_TRY(gs_cuda_alloc(e, &d_out, (n_out + 1) * sizeof(int64_t), "hook: scan out"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_out, 0xFF, (n_out + 1) * sizeof(int64_t),
                                              gs_cuda_of(e)->stream)));
    if (count > 0) GS_TRY(gs_cuda_upload(e, d_in, in, (size_t)count * sizeof(int64_t)));
    if (exclusive) GS_TRY(gs_dscan_exclusive(e, d_in, d_out, count));
    else if (in_place) GS_TRY(gs_dscan_inclusive(e, d_in, d_in, count));
    else GS_TRY(gs_dscan_inclusive(e, d_in, d_out, count));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
    if (n_out > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out, in_place && !exclusive ? d_in : d_out,
                                             n_out * sizeof(int64_t), cudaMemcpyDeviceToHost)));
cleanup:
    gs_cuda_free(e, d_in, ((size_t)count + 1) * sizeof(int64_t));
    gs_cuda_free(e, d_out, (n_out + 1) * sizeof(int64_t));
    return status;
}

extern "C" int gs_dsparse_hook_transpose(gs_engine *e, const gs_csr *G, int fp32, int64_t chunk,
                                         gs_csr *GT)
{
    const size_t vsize = fp32 ? sizeof(float) : sizeof(double);
    gs_dcsr dG = {}, dGT = {};
    int status = GS_OK;
    GS_TRY(upload_csr(e, G, vsize, &dG));
    GS_TRY(poison_pool(e, ((size_t)G->n_rows + 1) * 8 + (size_t)G->nnz * (4 + vsize) + 4096));
    GS_TRY(gs_dcsr_transpose(e, &dG, &dGT, chunk));
    GS_TRY(gs_dcsr_download(e, &dGT, GT));
cleanup:
    gs_dcsr_free(e, &dG);
    gs_dcsr_free(e, &dGT);
    return status;
}

extern "C" int gs_dsparse_hook_sort_rows(gs_engine *e, const gs_csr *P, gs_csr *S)
{
    gs_dcsr d = {};
    int status = GS_OK;
    GS_TRY(upload_csr(e, P, 0, &d));
    GS_TRY(poison_pool(e, (size_t)P->nnz * sizeof(int32_t) + 4096));
    GS_TRY(gs_dcsr_sort_rows(e, &d));
    GS_TRY(gs_dcsr_download(e, &d, S));
cleanup:
    gs_dcsr_free(e, &d);
    return status;
}

extern "C" int gs_dsparse_hook_pattern_power(gs_engine *e, const gs_csr *P, int k,
                                             int add_identity, gs_csr *out)
{
    gs_dcsr d = {}, q = {};
    int status = GS_OK;
    GS_TRY(upload_csr(e, P, 0, &d));
    GS_TRY(poison_pool(e, (size_t)P->nnz * 64 + 4096));
    GS_TRY(gs_dcsr_pattern_power(e, &d, k, add_identity, &q));
    GS_TRY(gs_dcsr_download(e, &q, out));
cleanup:
    gs_dcsr_free(e, &d);
    gs_dcsr_free(e, &q);
    return status;
}

extern "C" int gs_dsparse_hook_round_trip(gs_engine *e, const gs_csr *P, gs_csr *out)
{
    gs_dcsr d = {};
    int status = GS_OK;
    GS_TRY(upload_csr(e, P, sizeof(double), &d));
    GS_TRY(gs_dcsr_download(e, &d, out));
cleanup:
    gs_dcsr_free(e, &d);
    return status;
}

extern "C" int gs_dsparse_hook_read_words(gs_engine *e, const uint64_t *words, int64_t total,
                                          int runs, const int64_t *off, const int *len,
                                          uint64_t *out)
{
    uint64_t *d = NULL;
    const void *src[64];
    int status = GS_OK, count = 0;
    if (runs > 64) return gs_error_set(&e->err, GS_ERR_INTERNAL, "hook: at most 64 runs");
    GS_TRY(gs_cuda_alloc(e, &d, (size_t)total * 8 + 8, "hook: words"));
    GS_TRY(gs_cuda_upload(e, d, words, (size_t)total * 8));
    for (int r = 0; r < runs; r++) {
        src[r] = d + off[r];
        count += len[r];
    }
    memset(out, 0xFF, (size_t)count * 8);
    GS_TRY(gs_dread_words(e, runs, src, len, out));
cleanup:
    gs_cuda_free(e, d, (size_t)total * 8 + 8);
    return status;
}

extern "C" int gs_dsparse_hook_diagonal(gs_engine *e, const gs_mat *A, int invert, double *out,
                                        int *first_zero)
{
    const gs_cuda_mat_info info = gs_cuda_mat_info_of(A);
    double *d = NULL;
    int *d_zero = NULL, status = GS_OK;
    *first_zero = info.n_rows + 1;
    GS_TRY(gs_cuda_alloc(e, &d, (size_t)info.n_rows * sizeof(double) + 8, "hook: diagonal"));
    GS_TRY(gs_cuda_alloc(e, &d_zero, sizeof(int), "hook: first zero"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d, 0xFF, (size_t)info.n_rows * sizeof(double) + 8,
                                              gs_cuda_of(e)->stream)));
    GS_TRY(gs_cuda_upload(e, d_zero, first_zero, sizeof(int)));
    GS_TRY(gs_cuda_mat_diagonal(e, A, invert, d, d_zero));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out, d, (size_t)info.n_rows * sizeof(double),
                                         cudaMemcpyDeviceToHost)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(first_zero, d_zero, sizeof(int), cudaMemcpyDeviceToHost)));
cleanup:
    gs_cuda_free(e, d, (size_t)info.n_rows * sizeof(double) + 8);
    gs_cuda_free(e, d_zero, sizeof(int));
    return status;
}

extern "C" int gs_dsparse_hook_split_lu(gs_engine *e, const gs_csr *A, gs_csr *L, gs_csr *U)
{
    gs_dcsr d = {}, dL = {}, dU = {};
    int status = GS_OK;
    GS_TRY(upload_csr(e, A, sizeof(double), &d));
    GS_TRY(poison_pool(e, ((size_t)A->n_rows + 1) * 16 + ((size_t)A->nnz + A->n_rows) * 24 + 4096));
    GS_TRY(gs_dcsr_split_lu(e, &d, &dL, &dU));
    GS_TRY(gs_dcsr_download(e, &dL, L));
    GS_TRY(gs_dcsr_download(e, &dU, U));
cleanup:
    gs_dcsr_free(e, &d);
    gs_dcsr_free(e, &dL);
    gs_dcsr_free(e, &dU);
    return status;
}
