/* hooks_trisolve.cu - C-callable test hook of the toolkit's triangular solves
 * (gs_dsparse_hooks.h): T and b up, outputs poisoned, analysis and one solve, results down. */
#include <stdlib.h>
#include <string.h>

#include "gs_dsparse.h"
#include "gs_dsparse_hooks.h"

extern "C" int gs_dsparse_hook_trisolve(gs_engine *e, const gs_csr *T, int upper, int scheme,
                                        int32_t chunk_rows, int unit, const double *s,
                                        const double *b, int solves, double *x, int32_t *level,
                                        int32_t *n_levels, double *dot)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const int32_t n = T->n_rows;
    const size_t vec = ((size_t)n + 1) * sizeof(double);
    gs_dcsr d = {};
    gs_dtri t = {};
    double *db = NULL, *dx = NULL, *ds = NULL, *ddot = NULL;
    const gs_dtri_scheme how = scheme == 1 ? GS_DTRI_LEVELS : scheme == 2 ? GS_DTRI_BLOCKS
                                                                        : GS_DTRI_SYNCFREE;
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows(e, &d, n, "hook: rows of T"));
    GS_TRY(gs_dcsr_alloc_entries(e, &d, T->nnz, sizeof(double), "hook: T"));
    GS_TRY(gs_cuda_upload(e, d.rp, T->row_ptr, ((size_t)n + 1) * sizeof(int64_t)));
    if (T->nnz > 0) {
        GS_TRY(gs_cuda_upload(e, d.col, T->col, (size_t)T->nnz * sizeof(int32_t)));
        GS_TRY(gs_cuda_upload(e, d.val, T->val, (size_t)T->nnz * sizeof(double)));
    }
    GS_TRY(gs_cuda_alloc(e, &db, vec, "hook: b"));
    GS_TRY(gs_cuda_alloc(e, &dx, vec, "hook: x"));
    if (n > 0) GS_TRY(gs_cuda_upload(e, db, b, (size_t)n * sizeof(double)));
    if (s) {
        GS_TRY(gs_cuda_alloc(e, &ds, vec, "hook: s"));
        if (n > 0) GS_TRY(gs_cuda_upload(e, ds, s, (size_t)n * sizeof(double)));
    }
    GS_TRY(gs_dtri_analyse(e, n, T->nnz, d.rp, d.col, upper, &t));
    if (how == GS_DTRI_BLOCKS)
        GS_TRY(gs_dtri_prepare_blocks(e, &t, (const double *)d.val, unit, chunk_rows));
    if (dot) {
        GS_TRY(gs_dtri_prepare_dot(e, &t));
        GS_TRY(gs_cuda_alloc(e, &ddot, sizeof(double), "hook: dot"));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(ddot, 0xFF, sizeof(double), st)));
    }
    for (int k = 0; k < solves; k++) { /* x poisoned (NaN bytes) before every solve */
        gs_dtri_fused f = {};
        if (dot && k == solves - 1) f.w = db, f.dot = ddot; /* the last solve: w = b */
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(dx, 0xFF, vec, st)));
        GS_TRY(gs_dtri_solve_fused(e, &t, how, (const double *)d.val, unit, ds, db, dx, &f));
    }
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(st)));
    if (dot) GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(dot, ddot, sizeof(double), cudaMemcpyDeviceToHost)));
    if (n > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(x, dx, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(level, t.level, (size_t)n * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
    }
    *n_levels = t.n_levels;
cleanup:
    if (st) CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaStreamSynchronize(st));
    gs_dtri_free(e, &t);
    gs_dcsr_free(e, &d);
    gs_cuda_free(e, db, vec);
    gs_cuda_free(e, dx, vec);
    gs_cuda_free(e, ds, vec);
    gs_cuda_free(e, ddot, sizeof(double));
    return status;
}

extern "C" int gs_dsparse_hook_tri_analyse(gs_engine *e, const gs_csr *T, int upper, int device,
                                           int32_t *level, int32_t *rows, int32_t *slots,
                                           int64_t *n_slots, int32_t *n_levels, int *lanes,
                                           int *syncfree_lanes, int *on_host, int64_t *longest)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const int32_t n = T->n_rows;
    gs_dcsr d = {};
    gs_dtri t = {};
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows(e, &d, n, "hook: rows of T"));
    GS_TRY(gs_dcsr_alloc_entries(e, &d, T->nnz, 0, "hook: T"));
    GS_TRY(gs_cuda_upload(e, d.rp, T->row_ptr, ((size_t)n + 1) * sizeof(int64_t)));
    if (T->nnz > 0) GS_TRY(gs_cuda_upload(e, d.col, T->col, (size_t)T->nnz * sizeof(int32_t)));
    if (device) GS_TRY(gs_dtri_analyse(e, n, T->nnz, d.rp, d.col, upper, &t));
    else GS_TRY(gs_dtri_analyse_rows(e, n, T->nnz, d.rp, d.col, T, upper, &t));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(st)));
    if (n > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(level, t.level, (size_t)n * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(rows, t.level_rows, (size_t)n * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(slots, t.slot_rows, (size_t)t.n_slots * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
    }
    *n_slots = t.n_slots, *n_levels = t.n_levels, *lanes = t.lanes;
    *syncfree_lanes = t.syncfree_lanes, *on_host = t.on_host, *longest = t.longest_row;
cleanup:
    if (st) CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaStreamSynchronize(st));
    gs_dtri_free(e, &t);
    gs_dcsr_free(e, &d);
    return status;
}
