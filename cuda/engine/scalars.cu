/* scalars.cu - the scalar array S in device memory (set, write, read) and sync:
 * coefficients stay on the device; scalar_read is the one synchronising read. */
#include <string.h>

#include "engine_ops.h"
#include "reduce.cuh"

__global__ void scalar_set_kernel(double *S, int slot, gs_coef k)
{
    if (threadIdx.x == 0) S[slot] = gs_coef_eval(k, S);
}

#define SCALAR_WRITE_CHUNK 32
struct scalar_values {
    double v[SCALAR_WRITE_CHUNK];
};

__global__ void scalar_write_kernel(double *S, int slot0, int count, scalar_values vals)
{
    if ((int)threadIdx.x < count) S[slot0 + threadIdx.x] = vals.v[threadIdx.x];
}

int cuda_scalar_set(gs_engine *e, int slot, gs_coef value)
{
    int status = gs_cuda_check_slot(e, slot, "scalar_set");
    if (status == GS_OK) status = gs_cuda_check_coef(e, value, "scalar_set");
    if (status != GS_OK) return status;
    gs_cuda_impl *c = gs_cuda_of(e);
    return CUDA_LAUNCH(&e->err, scalar_set_kernel, 1, 32, 0, c->stream, c->S, slot, value);
}

/* The values travel as kernel parameters, not through a host buffer: the
 * call needs no synchronisation and is safe inside a captured sequence (the
 * graph keeps the values as they were at capture time). */
int cuda_scalar_write(gs_engine *e, int slot0, int count, const double *src)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    if (count > 0 && (slot0 < 0 || slot0 + count > GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda scalar_write: slots [%d, %d)", slot0,
                            slot0 + count);
    int status = GS_OK;
    for (int j0 = 0; status == GS_OK && j0 < count; j0 += SCALAR_WRITE_CHUNK) {
        int m = count - j0 < SCALAR_WRITE_CHUNK ? count - j0 : SCALAR_WRITE_CHUNK;
        scalar_values vals = {};
        memcpy(vals.v, src + j0, (size_t)m * sizeof(double));
        status = CUDA_LAUNCH(&e->err, scalar_write_kernel, 1, SCALAR_WRITE_CHUNK, 0, c->stream,
                             c->S, slot0 + j0, m, vals);
    }
    return status;
}

int cuda_scalar_read(gs_engine *e, int slot0, int count, double *dst)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = not_capturing(e, "scalar_read");
    if (status != GS_OK) return status;
    if (count > 0 && (slot0 < 0 || slot0 + count > GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda scalar_read: slots [%d, %d)", slot0,
                            slot0 + count);
    if (count > 0)
        status = CUDA_CALL(&e->err, cudaMemcpyAsync(c->pinned, c->S + slot0,
                                                    (size_t)count * sizeof(double),
                                                    cudaMemcpyDeviceToHost, c->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    if (status == GS_OK && count > 0) memcpy(dst, c->pinned, (size_t)count * sizeof(double));
    return status;
}

int cuda_sync(gs_engine *e)
{
    int status = not_capturing(e, "sync");
    if (status != GS_OK) return status;
    status = CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGetLastError());
    return status;
}
