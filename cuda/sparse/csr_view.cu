/* csr_view.cu - the CSR view of an engine matrix (its own CSR, or its sliced ELL turned back into
 * CSR on the device) for setups that read A by rows, and the host downloads of a matrix. */
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* ------------------------------------------- A's CSR back from the device */

/* Stored row r (r < n) of a SELL layout: its entries are k = 0, 1, ... at
 * slice_ptr[s] + 32 k + r % 32 until the first padding (col = -1, which only
 * ever ends a row) or the slice's width. That first padding is found by a
 * binary search (the walk up to it was one dependent load an entry: 9 us on
 * bcsstk15's 4k rows). */
__global__ void sell_csr_length_kernel(const int64_t *__restrict__ slice_ptr,
                                       const int32_t *__restrict__ sell_col,
                                       const int32_t *__restrict__ perm, int64_t n,
                                       int64_t *__restrict__ rp)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t s = r / SELL_C, base = slice_ptr[s] + (r % SELL_C);
    const int64_t width = (slice_ptr[s + 1] - slice_ptr[s]) / SELL_C;
    int64_t len = 0, end = width; /* entries < len are stored, entries >= end padding */
    while (len < end) {
        const int64_t mid = (len + end) / 2;
        if (sell_col[base + mid * SELL_C] >= 0) len = mid + 1;
        else end = mid;
    }
    rp[(perm ? perm[r] : r) + 1] = len;
}

/* Rows sorted (perm): stored row r to its CSR row perm[r] at rp[perm[r]],
 * one thread a row, the entries in their stored order (the order mat_create
 * was given). */
__global__ void sell_csr_gather_rows_kernel(const int64_t *__restrict__ slice_ptr,
                                            const int32_t *__restrict__ sell_col,
                                            const double *__restrict__ sell_val,
                                            const int32_t *__restrict__ perm, int64_t n,
                                            const int64_t *__restrict__ rp,
                                            int32_t *__restrict__ col, double *__restrict__ val)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t base = slice_ptr[r / SELL_C] + (r % SELL_C);
    const int64_t row = perm[r], beg = rp[row], len = rp[row + 1] - beg;
    for (int64_t k = 0; k < len; k++) {
        col[beg + k] = sell_col[base + k * SELL_C];
        val[beg + k] = sell_val[base + k * SELL_C];
    }
}

/* Rows in their own order: the CSR rows of slice s are one contiguous run
 * rp[32 s] .. rp[32 s + 32]. One warp a slice writes that run with
 * consecutive lanes on consecutive entries (coalesced stores); entry p of the
 * run is entry k of row j of the slice, j found by binary lifting over the
 * lanes' prefix sums (lane l holds incl = rp[32 s + l + 1] - rp[32 s]), read
 * at slice_ptr[s] + 32 k + j (the slice's few lines stay in L1). A thread a
 * row would store 32 rows apart at every step instead. */
__global__ void sell_csr_gather_slices_kernel(const int64_t *__restrict__ slice_ptr,
                                              const int32_t *__restrict__ sell_col,
                                              const double *__restrict__ sell_val, int64_t n,
                                              int64_t n_slices, const int64_t *__restrict__ rp,
                                              int32_t *__restrict__ col, double *__restrict__ val)
{
    const int lane = threadIdx.x & 31;
    const int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (s >= n_slices) return; /* whole warps leave together */
    const int64_t r0 = s * SELL_C, last = r0 + SELL_C < n ? r0 + SELL_C : n;
    const int64_t beg = rp[r0];
    const int64_t incl = rp[r0 + lane + 1 < last ? r0 + lane + 1 : last] - beg;
    const int64_t total = __shfl_sync(0xffffffffu, incl, 31);
    const int64_t src0 = slice_ptr[s];
    for (int64_t q = lane; q - lane < total; q += 32) {
        int j = 0; /* the lane j with incl_{j-1} <= q < incl_j */
#pragma unroll
        for (int step = 16; step > 0; step >>= 1)
            if (__shfl_sync(0xffffffffu, incl, j + step - 1) <= q) j += step;
        const int64_t prev = __shfl_sync(0xffffffffu, incl, j > 0 ? j - 1 : 0);
        const int64_t first = j > 0 ? prev : 0;
        if (q < total) {
            const int64_t src = src0 + (q - first) * SELL_C + j;
            col[beg + q] = sell_col[src];
            val[beg + q] = sell_val[src];
        }
    }
}

void gs_cuda_csr_view_free(gs_engine *e, gs_cuda_csr_view *v)
{
    if (!v) return;
    if (v->owned) {
        gs_cuda_free(e, (void *)v->row_ptr, ((size_t)v->n_rows + 1) * sizeof(int64_t));
        gs_cuda_free(e, (void *)v->col, (size_t)v->nnz * sizeof(int32_t));
        gs_cuda_free(e, (void *)v->val, (size_t)v->nnz * sizeof(double));
    }
    *v = gs_cuda_csr_view{};
}

int gs_cuda_mat_device_csr(gs_engine *e, const gs_mat *A, gs_cuda_csr_view *out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = A->n_rows, nnz = A->nnz;
    int64_t *rp = NULL;
    int32_t *col = NULL;
    double *val = NULL;
    int status = GS_OK;
    *out = gs_cuda_csr_view{};
    if (A->prec != GS_FP64)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda: the CSR of a matrix stored in fp32 is not its fp64 matrix");
    out->n_rows = A->n_rows;
    out->n_cols = A->n_cols;
    out->nnz = nnz;
    if (A->format == GS_CUDA_CSR) {
        out->row_ptr = A->row_ptr;
        out->col = A->csr_col;
        out->val = (const double *)A->csr_val;
        return GS_OK;
    }
    GS_TRY(gs_cuda_alloc(e, &rp, ((size_t)n + 1) * sizeof(int64_t), "CSR of A: row pointers"));
    GS_TRY(gs_cuda_alloc(e, &col, (size_t)nnz * sizeof(int32_t), "CSR of A: column indices"));
    GS_TRY(gs_cuda_alloc(e, &val, (size_t)nnz * sizeof(double), "CSR of A: values"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(rp, 0, sizeof(int64_t), c->stream)));
    if (n > 0) {
        GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_length_kernel, blocks_for(n), GS_CUDA_BLOCK, 0,
                           c->stream, (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                           (const int32_t *)A->perm, n, rp));
        GS_TRY(gs_dscan_inclusive(e, rp + 1, rp + 1, n));
        if (A->perm)
            GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_gather_rows_kernel, blocks_for(n), GS_CUDA_BLOCK,
                               0, c->stream, (const int64_t *)A->slice_ptr,
                               (const int32_t *)A->sell_col, (const double *)A->sell_val,
                               (const int32_t *)A->perm, n, (const int64_t *)rp, col, val));
        else
            GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_gather_slices_kernel,
                               blocks_for(A->n_slices * SELL_C), GS_CUDA_BLOCK, 0, c->stream,
                               (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                               (const double *)A->sell_val, n, A->n_slices, (const int64_t *)rp,
                               col, val));
    }
    /* no read back of rp[n]: the sliced ELL was built from exactly nnz
     * entries, each stored once with a column >= 0 (fill_sell), so the
     * lengths add up to nnz (the engine tests compare this CSR with the
     * host's) */
    out->row_ptr = rp;
    out->col = col;
    out->val = val;
    out->owned = 1;
    rp = NULL, col = NULL, val = NULL;
cleanup:
    gs_cuda_free(e, val, (size_t)nnz * sizeof(double));
    gs_cuda_free(e, col, (size_t)nnz * sizeof(int32_t));
    gs_cuda_free(e, rp, ((size_t)n + 1) * sizeof(int64_t));
    return status;
}

extern "C" int gs_cuda_mat_device_csr_download(gs_engine *e, const gs_mat *A, gs_csr *out,
                                               int *owned)
{
    gs_cuda_csr_view v = {};
    int status = GS_OK;
    *owned = -1;
    GS_TRY(gs_cuda_mat_device_csr(e, A, &v));
    *owned = v.owned;
    /* the view is built in the engine's stream order; the copies below run
     * on the legacy stream, which does not wait for it */
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->row_ptr, v.row_ptr,
                                         ((size_t)v.n_rows + 1) * sizeof(int64_t),
                                         cudaMemcpyDeviceToHost)));
    if (v.nnz > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->col, v.col, (size_t)v.nnz * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->val, v.val, (size_t)v.nnz * sizeof(double),
                                             cudaMemcpyDeviceToHost)));
    }
cleanup:
    gs_cuda_csr_view_free(e, &v);
    return status;
}

/* Host CSR of an engine matrix (sliced ELL: padding has column -1 and ends
 * each row; CSR: copied), values in fp64. */
int gs_cuda_mat_download(const gs_mat *m, gs_csr *out, gs_error *err)
{
    const int64_t n = m->n_rows;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    const int64_t stored = m->format == GS_CUDA_CSR ? m->nnz : m->padded;
    int64_t *sp = NULL;
    int32_t *col = NULL, *perm = NULL;
    void *val = NULL;
    int status = GS_OK;
    GS_TRY(gs_csr_alloc(m->n_rows, m->n_cols, m->nnz, 1, out, err));
    col = (int32_t *)gs_malloc((size_t)stored * sizeof(int32_t) + 1, "matrix download", err);
    val = gs_malloc((size_t)stored * vsize + 1, "matrix download", err);
    if (!col || !val) GS_TRY(GS_ERR_NOMEM);
    if (m->format == GS_CUDA_CSR) {
        GS_TRY(CUDA_CALL(err, cudaMemcpy(out->row_ptr, m->row_ptr, (size_t)(n + 1) * sizeof(int64_t),
                                         cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(err, cudaMemcpy(out->col, m->csr_col, (size_t)stored * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(err, cudaMemcpy(val, m->csr_val, (size_t)stored * vsize,
                                         cudaMemcpyDeviceToHost)));
        for (int64_t p = 0; p < stored; p++)
            out->val[p] = vsize == sizeof(float) ? (double)((float *)val)[p] : ((double *)val)[p];
        goto cleanup;
    }
    sp = (int64_t *)gs_malloc((size_t)(m->n_slices + 1) * sizeof(int64_t), "matrix download", err);
    perm = m->perm ? (int32_t *)gs_malloc((size_t)n * sizeof(int32_t), "matrix download", err) : NULL;
    if (!sp || (m->perm && !perm)) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(CUDA_CALL(err, cudaMemcpy(sp, m->slice_ptr, (size_t)(m->n_slices + 1) * sizeof(int64_t),
                                     cudaMemcpyDeviceToHost)));
    GS_TRY(CUDA_CALL(err, cudaMemcpy(col, m->sell_col, (size_t)stored * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost)));
    GS_TRY(CUDA_CALL(err, cudaMemcpy(val, m->sell_val, (size_t)stored * vsize, cudaMemcpyDeviceToHost)));
    if (perm)
        GS_TRY(CUDA_CALL(err, cudaMemcpy(perm, m->perm, (size_t)n * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost)));
    for (int pass = 0; pass < 2; pass++) { /* 0: row lengths, 1: entries */
        for (int64_t r = 0; r < n; r++) {
            const int64_t s = r / 32, width = (sp[s + 1] - sp[s]) / 32;
            const int64_t row = perm ? perm[r] : r;
            int64_t q = pass ? out->row_ptr[row] : 0;
            for (int64_t k = 0; k < width; k++) {
                const int64_t src = sp[s] + 32 * k + r % 32;
                if (col[src] < 0) break;
                if (pass) {
                    out->col[q] = col[src];
                    out->val[q] = vsize == sizeof(float) ? (double)((float *)val)[src]
                                                         : ((double *)val)[src];
                }
                q++;
            }
            if (!pass) out->row_ptr[row + 1] = q;
        }
        if (!pass)
            for (int64_t r = 0; r < n; r++) out->row_ptr[r + 1] += out->row_ptr[r];
    }
cleanup:
    free(sp);
    free(col);
    free(val);
    free(perm);
    if (status != GS_OK) gs_csr_free(out);
    return status;
}
