/* stepped.cu - the stepped layout: a large CSR in chunk-mapped memory turned into its sliced
 * ELL in steps, each step's CSR chunks released once written (docs/perf-notebook.md). */
#include <stdlib.h>

#include "layout.h"

/* ------------------------------------------------------- stepped layout */

/* Large matrices (CSR entries of at least vmm_min_bytes, fp64, rows in
 * their own order) are uploaded into chunk-mapped memory (gs_cuda_vmm),
 * and, where building their sliced ELL whole would raise the engine's peak
 * (build_layout), it is written in vmm_steps steps of about equal slice
 * counts: each step maps the chunks its part of the sliced ELL needs, fills
 * them, waits, and releases the CSR chunks that every later step lies
 * past. The device then never holds both layouts whole: the build's peak is
 * the matrix plus about a step and a chunk of each array (an eighth each),
 * where building from a whole CSR into a whole sliced ELL held both (the
 * 27-point stencil on 2M rows: 686 MB of CSR and 669 MB of SELL-32 at
 * once, the engine's peak). The price is the driver's calls, about 80 us a
 * chunk over its life on an H200 (docs/perf-notebook.md, "Stepped layout"),
 * and a wait on the device a step. */

/* bounds[2 j] = slice_ptr[s_j], bounds[2 j + 1] = row_ptr[min(32 s_j, n)]
 * for the steps' first slices s_j = j ns / steps, j = 0..steps: where each
 * step's sliced ELL begins and how much of the CSR the steps before it
 * have read. */
__global__ void step_bounds_kernel(const int64_t *__restrict__ slice_ptr,
                                   const int64_t *__restrict__ row_ptr, int64_t n, int64_t ns,
                                   int steps, int64_t *__restrict__ bounds)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j > steps) return;
    const int64_t s = (int64_t)j * ns / steps, r = s * SELL_C < n ? s * SELL_C : n;
    bounds[2 * j] = slice_ptr[s];
    bounds[2 * j + 1] = row_ptr[r];
}

/* The sliced ELL (fp64, m->slice_ptr and m->padded planned) from a CSR
 * whose columns and values lie in src[0] and src[1]; src is consumed (its
 * chunks released and its ranges freed) whatever the outcome. */
int fill_sell_stepped(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                             const double *val, gs_cuda_vmm src[2])
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t ns = m->n_slices, n = m->n_rows;
    const int steps = (int)(c->vmm_steps < ns ? c->vmm_steps : ns);
    const size_t bounds_bytes = (2 * (size_t)steps + 2) * sizeof(int64_t);
    int64_t *d_bounds = NULL, *b = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_vmm_reserve(e, &m->sell_vm[0], (size_t)m->padded * sizeof(int32_t),
                               "SELL column indices"));
    m->sell_col = (int32_t *)m->sell_vm[0].base;
    GS_TRY(gs_cuda_vmm_reserve(e, &m->sell_vm[1], (size_t)m->padded * sizeof(double),
                               "SELL values"));
    m->sell_val = m->sell_vm[1].base;
    m->bytes += m->padded * (sizeof(int32_t) + sizeof(double));
    b = (int64_t *)gs_malloc(bounds_bytes, "SELL build: step bounds", &e->err);
    if (!b) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(gs_cuda_alloc(e, &d_bounds, bounds_bytes, "SELL build: step bounds"));
    GS_TRY(CUDA_LAUNCH(&e->err, step_bounds_kernel, blocks_for(steps + 1), GS_CUDA_BLOCK, 0,
                       c->stream, (const int64_t *)m->slice_ptr, row_ptr, n, ns, steps, d_bounds));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(b, d_bounds, bounds_bytes, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    for (int j = 0; j < steps; j++) {
        const int64_t s0 = (int64_t)j * ns / steps, s1 = (int64_t)(j + 1) * ns / steps;
        const size_t p0 = (size_t)b[2 * j], p1 = (size_t)b[2 * j + 2];
        GS_TRY(gs_cuda_vmm_map(e, &m->sell_vm[0], p0 * sizeof(int32_t), p1 * sizeof(int32_t),
                               "SELL column indices"));
        GS_TRY(gs_cuda_vmm_map(e, &m->sell_vm[1], p0 * sizeof(double), p1 * sizeof(double),
                               "SELL values"));
        GS_TRY(CUDA_LAUNCH(&e->err, sell_fill_kernel<double>, blocks_for((s1 - s0) * SELL_C),
                           GS_CUDA_BLOCK, 0, c->stream, row_ptr, col, val, (const int32_t *)NULL,
                           n, s0, s1, (const int64_t *)m->slice_ptr, m->sell_col,
                           (double *)m->sell_val));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        const size_t read = (size_t)b[2 * j + 3]; /* CSR entries no later step reads */
        gs_cuda_vmm_unmap_below(e, &src[0], read * sizeof(int32_t));
        gs_cuda_vmm_unmap_below(e, &src[1], read * sizeof(double));
    }
cleanup:
    gs_cuda_vmm_free(e, &src[0]);
    gs_cuda_vmm_free(e, &src[1]);
    gs_cuda_free(e, d_bounds, bounds_bytes);
    free(b);
    return status;
}
