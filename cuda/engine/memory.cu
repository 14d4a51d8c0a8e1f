/* memory.cu - device allocation with the engine's accounting (device_bytes_now
 * and _peak), stream-ordered from the device's pool. */
#include "engine_cuda.h"

int gs_cuda_alloc_at(gs_engine *e, void **p, size_t bytes, const char *what, const char *file,
                     int line)
{
    *p = NULL;
    if (bytes == 0) return GS_OK;
    /* stream-ordered, from the device's pool (kept, see cuda_engine_init):
     * a setup allocates and frees dozens of work arrays, and cudaMalloc and
     * cudaFree (which waits for the device) made that a fixed cost of about
     * a millisecond even on the smallest matrices */
    cudaError_t rc = cudaMallocAsync(p, bytes, gs_cuda_of(e)->stream);
    if (rc != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError(); /* not sticky: do not let a later launch check see it */
        if (rc == cudaErrorMemoryAllocation)
            return gs_error_set(&e->err, GS_ERR_NOMEM,
                                "%s:%d: out of device memory allocating %zu bytes for %s "
                                "(this engine already holds %zu bytes)",
                                file, line, bytes, what, e->device_bytes_now);
        return gs_error_set(&e->err, GS_ERR_CUDA, "%s:%d: device allocation of %zu bytes for %s failed: %s",
                            file, line, bytes, what, cudaGetErrorString(rc));
    }
    e->device_bytes_now += bytes;
    if (e->device_bytes_now > e->device_bytes_peak) e->device_bytes_peak = e->device_bytes_now;
    return GS_OK;
}

extern "C" void gs_cuda_free_foreign_for_test(gs_engine *e)
{
    static double host_word;
    gs_cuda_free(e, &host_word, 0);
}

void gs_cuda_free(gs_engine *e, void *p, size_t bytes)
{
    if (!p) return;
    CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaFreeAsync(p, gs_cuda_of(e)->stream));
    e->device_bytes_now -= bytes <= e->device_bytes_now ? bytes : e->device_bytes_now;
}
