/* bandwidth.cu - the copy-bandwidth probe at engine creation: the roofline's ceiling
 * (device-to-device copy, best of 5 after a warm-up). */
#include "engine_ops.h"

/* Copy bandwidth as the roofline's ceiling: a device-to-device cudaMemcpy of
 * `bytes`, counting bytes read + written, best of 5 after a warm-up. Smaller
 * sizes are tried if the device is short of memory; 0 if none fits. Done
 * outside the engine's accounting (the buffers are gone before any work). */
int gs_cuda_measure_copy_bandwidth(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    size_t bytes = (size_t)256 << 20;
    void *a = NULL, *b = NULL;
    while (bytes >= ((size_t)16 << 20)) {
        if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess) break;
        (void)cudaGetLastError(); /* out of memory at this size: try a smaller one */
        if (a) CUDA_TEARDOWN(&c->teardown, cudaFree(a));
        a = b = NULL;
        bytes /= 4;
    }
    e->copy_bandwidth = 0.0;
    if (!a) return GS_OK;
    cudaEvent_t t0 = NULL, t1 = NULL;
    float best = 0.0f;
    int status = CUDA_CALL(&e->err, cudaEventCreate(&t0));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaEventCreate(&t1));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaMemsetAsync(a, 1, bytes, c->stream));
    for (int rep = 0; status == GS_OK && rep < 6; rep++) {
        float ms = 0.0f;
        status = CUDA_CALL(&e->err, cudaEventRecord(t0, c->stream));
        if (status == GS_OK)
            status = CUDA_CALL(&e->err, cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice,
                                                        c->stream));
        if (status == GS_OK) status = CUDA_CALL(&e->err, cudaEventRecord(t1, c->stream));
        if (status == GS_OK) status = CUDA_CALL(&e->err, cudaEventSynchronize(t1));
        if (status == GS_OK) status = CUDA_CALL(&e->err, cudaEventElapsedTime(&ms, t0, t1));
        if (status == GS_OK && rep > 0 && (best == 0.0f || ms < best)) best = ms; /* rep 0: warm-up */
    }
    if (status == GS_OK && best > 0.0f) e->copy_bandwidth = 2.0 * (double)bytes / (best * 1e-3);
    if (t0) CUDA_TEARDOWN(&c->teardown, cudaEventDestroy(t0));
    if (t1) CUDA_TEARDOWN(&c->teardown, cudaEventDestroy(t1));
    CUDA_TEARDOWN(&c->teardown, cudaFree(a));
    CUDA_TEARDOWN(&c->teardown, cudaFree(b));
    return status;
}
