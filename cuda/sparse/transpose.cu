/* transpose.cu - the transpose of a device CSR matrix, rows of the result
 * sorted: column counts, then chunks of entries stably radix-sorted by column (cub). */
#include <cub/cub.cuh>

#include "gs_dsparse.h"

/* Entries of G sorted per chunk, at most this many bytes of sort buffers
 * (about 20 bytes an entry): the transpose's peak stays G + G^T + this. */
#define TRANSPOSE_CHUNK_BYTES ((size_t)256 << 20)

/* gt_rp[j + 1] = the entries of column j of G (atomics: the counts do not
 * depend on their order). */
__global__ void transpose_count_kernel(int64_t nnz, const int32_t *__restrict__ col,
                                       int64_t *gt_rp)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < nnz) atomicAdd((unsigned long long *)&gt_rp[col[p] + 1], 1ull);
}

/* perm[q] = p0 + q: the positions the sort carries along. */
__global__ void transpose_iota_kernel(int64_t count, int64_t p0, int32_t *__restrict__ out)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < count) out[q] = (int32_t)(p0 + q);
}

/* start[j] = the first q with keys[q] == j, for the columns j of this
 * chunk (keys sorted; the other entries of start are not read). */
__global__ void transpose_start_kernel(int64_t count, const int32_t *__restrict__ keys,
                                       int32_t *__restrict__ start)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < count && (q == 0 || keys[q - 1] != keys[q])) start[keys[q]] = (int32_t)q;
}

/* One chunk of G's entries (positions p0.. in row-major order), stably
 * sorted by column: keys[q] = the column, perm[q] = the position. Entry q
 * goes to row keys[q] of G^T after the done[j] entries of column j from
 * earlier chunks and the q - start[j] of this chunk before it in the sort
 * (one chunk: done = start = NULL, and q - start[j] is q - gt_rp[j]), so
 * every row of G^T comes out in increasing column order. Its column there
 * is the row of G that holds position perm[q]. */
template <typename T>
__global__ void transpose_fill_kernel(int32_t n, int64_t count,
                                      const int64_t *__restrict__ g_rp,
                                      const T *__restrict__ g_val,
                                      const int32_t *__restrict__ keys,
                                      const int32_t *__restrict__ perm,
                                      const int32_t *__restrict__ done,
                                      const int32_t *__restrict__ start,
                                      const int64_t *__restrict__ gt_rp,
                                      int32_t *__restrict__ gt_col, T *__restrict__ gt_val)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= count) return;
    const int32_t j = keys[q], p = perm[q];
    const int64_t dst = done ? gt_rp[j] + done[j] + (q - start[j]) : q;
    gt_col[dst] = gs_dsearch_last_at_or_below(g_rp, 0, n, p); /* the row of G holding p */
    gt_val[dst] = g_val[p];
}

/* done[j] += the entries of column j in this chunk (by the last of each
 * run of equal keys). */
__global__ void transpose_done_kernel(int64_t count, const int32_t *__restrict__ keys,
                                      const int32_t *__restrict__ start,
                                      int32_t *__restrict__ done)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < count && (q == count - 1 || keys[q + 1] != keys[q]))
        done[keys[q]] += (int32_t)(q - start[keys[q]] + 1);
}

/* (v7: cusparseCsr2cscEx2 cost 50 to 100 us even on a 48-row G; one sort
 * of all of G's entries raised the peak of poisson3d:128 from 1.49x to
 * 1.62x the stored matrices and vectors: hence chunks.) */
int gs_dcsr_transpose_rows(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = G->n;
    const int64_t nnz = G->nnz;
    int status = GS_OK;
    if (G->vsize != sizeof(float) && G->vsize != sizeof(double))
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "transpose: values of %zu bytes; float or double expected", G->vsize);
    if (nnz > INT32_MAX)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "transpose: the matrix has %lld entries; the device transpose takes "
                            "at most %d", (long long)nnz, INT32_MAX);
    GS_TRY(gs_dcsr_alloc_rows(e, GT, n, "transpose: row pointers"));
    GS_TRY(gs_dcsr_alloc_entries(e, GT, nnz, G->vsize, "transpose: entries"));
    if (nnz == 0) return GS_OK;
    GS_TRY(CUDA_LAUNCH(&e->err, transpose_count_kernel, gs_dblocks(nnz, 256), 256, 0, c->stream,
                       nnz, (const int32_t *)G->col, GT->rp));
    GS_TRY(gs_dcsr_counts_scan(e, GT->rp, n));
cleanup:
    return status;
}

/* One chunk's entries scattered into GT (after its stable sort). */
static int transpose_fill_chunk(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int64_t count,
                                const int32_t *keys, const int32_t *perm, const int32_t *done,
                                const int32_t *start)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const unsigned grid = gs_dblocks(count, 256);
    if (G->vsize == sizeof(float))
        return CUDA_LAUNCH(&e->err, transpose_fill_kernel<float>, grid, 256, 0, c->stream, G->n,
                           count, (const int64_t *)G->rp, (const float *)G->val, keys, perm, done,
                           start, (const int64_t *)GT->rp, GT->col, (float *)GT->val);
    return CUDA_LAUNCH(&e->err, transpose_fill_kernel<double>, grid, 256, 0, c->stream, G->n,
                       count, (const int64_t *)G->rp, (const double *)G->val, keys, perm, done,
                       start, (const int64_t *)GT->rp, GT->col, (double *)GT->val);
}

int gs_dcsr_transpose_fill(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int64_t chunk)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = G->n;
    const int64_t nnz = G->nnz;
    int32_t *keys = NULL, *perm_in = NULL, *perm = NULL, *done = NULL, *start = NULL;
    void *tmp = NULL;
    size_t bytes = 0;
    int status = GS_OK, bits = 1;
    if (nnz == 0) return GS_OK;
    if (chunk <= 0) chunk = (int64_t)(TRANSPOSE_CHUNK_BYTES / 20);
    if (chunk > nnz) chunk = nnz;
    while (bits < 31 && ((int64_t)1 << bits) < n) bits++;
    GS_TRY(gs_cuda_alloc(e, &keys, (size_t)chunk * sizeof(int32_t), "transpose: sorted columns"));
    GS_TRY(gs_cuda_alloc(e, &perm_in, (size_t)chunk * sizeof(int32_t), "transpose: positions"));
    GS_TRY(gs_cuda_alloc(e, &perm, (size_t)chunk * sizeof(int32_t), "transpose: sorted positions"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs((void *)NULL, bytes,
                                                              (const int32_t *)G->col, keys,
                                                              (const int32_t *)perm_in, perm,
                                                              (int)chunk, 0, bits, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &tmp, bytes, "transpose: sort workspace"));
    if (chunk < nnz) { /* entries of each column placed by earlier chunks */
        GS_TRY(gs_cuda_alloc(e, &done, (size_t)n * sizeof(int32_t), "transpose: placed"));
        GS_TRY(gs_cuda_alloc(e, &start, (size_t)n * sizeof(int32_t), "transpose: run starts"));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(done, 0, (size_t)n * sizeof(int32_t), c->stream)));
    }
    for (int64_t p0 = 0; p0 < nnz; p0 += chunk) {
        const int64_t count = nnz - p0 < chunk ? nnz - p0 : chunk;
        const unsigned grid = gs_dblocks(count, 256);
        GS_TRY(CUDA_LAUNCH(&e->err, transpose_iota_kernel, grid, 256, 0, c->stream, count, p0,
                           perm_in));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                      tmp, bytes, (const int32_t *)G->col + p0, keys,
                                      (const int32_t *)perm_in, perm, (int)count, 0, bits,
                                      c->stream)));
        if (done)
            GS_TRY(CUDA_LAUNCH(&e->err, transpose_start_kernel, grid, 256, 0, c->stream, count,
                               (const int32_t *)keys, start));
        GS_TRY(transpose_fill_chunk(e, G, GT, count, keys, perm, done, start));
        if (done && p0 + count < nnz)
            GS_TRY(CUDA_LAUNCH(&e->err, transpose_done_kernel, grid, 256, 0, c->stream, count,
                               (const int32_t *)keys, (const int32_t *)start, done));
    }
cleanup: /* stream-ordered frees */
    gs_cuda_free(e, tmp, bytes);
    gs_cuda_free(e, keys, (size_t)chunk * sizeof(int32_t));
    gs_cuda_free(e, perm_in, (size_t)chunk * sizeof(int32_t));
    gs_cuda_free(e, perm, (size_t)chunk * sizeof(int32_t));
    gs_cuda_free(e, done, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, start, (size_t)n * sizeof(int32_t));
    return status;
}

int gs_dcsr_transpose(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int64_t chunk)
{
    int status = gs_dcsr_transpose_rows(e, G, GT);
    if (status == GS_OK) status = gs_dcsr_transpose_fill(e, G, GT, chunk);
    return status;
}

/* Row i of G^T where G's pattern is symmetric: G's row i pattern, and at
 * (i, j) the value g_ji, at the position of i in row j (a binary search).
 * *asymmetric |= 1 where some (j, i) is missing or a row is not strictly
 * increasing (then the searches' answers are void, the caller sorts).
 * SYMMETRIC_LANES threads a row: a stencil's 7 entries take one step, and a
 * dense row of 10^4 entries (bloweybq) 1250 steps rather than 10^4. */
#define SYMMETRIC_LANES 8
template <typename T>
__global__ void transpose_symmetric_kernel(int32_t n, const int64_t *__restrict__ rp,
                                           const int32_t *__restrict__ col,
                                           const T *__restrict__ val, T *__restrict__ gt_val,
                                           unsigned long long *asymmetric)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t i = t / SYMMETRIC_LANES;
    bool bad = false;
    if (i < n) {
        const int64_t b = rp[i], e = rp[i + 1];
        for (int64_t p = b + t % SYMMETRIC_LANES; p < e; p += SYMMETRIC_LANES) {
            const int32_t j = col[p];
            if (p > b && col[p - 1] >= j) bad = true;
            int64_t lo = rp[j], hi = rp[j + 1];   /* first position in row j with col >= i */
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (col[mid] < i) lo = mid + 1;
                else hi = mid;
            }
            if (lo < rp[j + 1] && col[lo] == i) gt_val[p] = val[lo];
            else bad = true;
        }
    }
    /* every thread of the block is here (no early return): one atomic a warp */
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(asymmetric, 1ull);
}

/* (A pattern P with P ⊆ P^T and as many entries is P^T: every (i, j) with a
 * partner (j, i) and strictly increasing rows, hence no duplicates, make the
 * pattern symmetric.) */
int gs_dcsr_transpose_symmetric(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int *done)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = G->n;
    unsigned long long *flag = NULL;
    uint64_t asymmetric = 1;
    int status = GS_OK;
    const unsigned grid = gs_dblocks(n, 256 / SYMMETRIC_LANES);
    *done = 0;
    if (G->vsize != sizeof(float) && G->vsize != sizeof(double))
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "transpose: values of %zu bytes; float or double expected", G->vsize);
    if (n == 0 || G->nnz == 0) return GS_OK;       /* the general transpose is as cheap */
    GS_TRY(gs_cuda_alloc(e, &flag, sizeof *flag, "transpose: symmetry flag"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(flag, 0, sizeof *flag, c->stream)));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, GT, n, "transpose: row pointers"));
    GS_TRY(gs_dcsr_alloc_entries(e, GT, G->nnz, G->vsize, "transpose: entries"));
    if (G->vsize == sizeof(float))
        GS_TRY(CUDA_LAUNCH(&e->err, transpose_symmetric_kernel<float>, grid, 256, 0,
                           c->stream, n, (const int64_t *)G->rp, (const int32_t *)G->col,
                           (const float *)G->val, (float *)GT->val, flag));
    else
        GS_TRY(CUDA_LAUNCH(&e->err, transpose_symmetric_kernel<double>, grid, 256, 0,
                           c->stream, n, (const int64_t *)G->rp, (const int32_t *)G->col,
                           (const double *)G->val, (double *)GT->val, flag));
    {
        const void *src[1] = {flag};
        const int words[1] = {1};
        GS_TRY(gs_dread_words(e, 1, src, words, &asymmetric));
    }
    if (asymmetric) {
        gs_dcsr_free(e, GT);
        goto cleanup;
    }
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(GT->rp, G->rp, ((size_t)n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(GT->col, G->col, (size_t)G->nnz * sizeof(int32_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    *done = 1;
cleanup:
    if (status != GS_OK) gs_dcsr_free(e, GT);
    gs_cuda_free(e, flag, sizeof *flag);
    return status;
}
