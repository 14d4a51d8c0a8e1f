/* upload.cu - vectors and host-to-device copies: vector create / destroy / upload /
 * download, staged uploads through pinned buffers, page-locking of host arrays. */
#include <stdlib.h>
#include <string.h>

#include "engine_ops.h"

int cuda_vec_create(gs_engine *e, int64_t n, gs_vec **out)
{
    *out = NULL;
    if (n < 0) return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda vec_create: n = %lld", (long long)n);
    gs_vec *v = (gs_vec *)gs_calloc(1, sizeof *v, "vector header", &e->err);
    if (!v) return GS_ERR_NOMEM;
    v->n = n;
    int status = gs_cuda_alloc(e, &v->d, (size_t)n * sizeof(double), "a vector");
    if (status != GS_OK) {
        free(v);
        return status;
    }
    *out = v;
    return GS_OK;
}

void cuda_vec_destroy(gs_engine *e, gs_vec *v)
{
    if (!v) return;
    gs_cuda_free(e, v->d, (size_t)v->n * sizeof(double));
    free(v);
}

/* dst[0..bytes) = src, host to device, through two pinned staging buffers:
 * the host threads copy chunk i + 1 into one (OpenMP: a single thread's
 * memcpy is slower than the bus) while the DMA engine drains chunk i from
 * the other. The driver's own path for pageable memory stages through one
 * thread's copy; this one is bounded by the bus instead. Small copies go
 * straight. Returns once src may be reused; the data may still be in flight
 * (stream order keeps later work behind it). */
static void parallel_copy(char *dst, const char *src, size_t bytes)
{
    const size_t piece = (size_t)1 << 20;
    const long pieces = (long)((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < pieces; k++) {
        const size_t off = (size_t)k * piece;
        memcpy(dst + off, src + off, bytes - off < piece ? bytes - off : piece);
    }
}

int gs_cuda_upload_start(gs_engine *e, void *dst, const void *src, size_t bytes, int *pending)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    /* from page-locked memory (host_pin, cudaMallocHost) the copy is one
     * DMA, truly asynchronous: src is read after the return */
    cudaPointerAttributes at;
    const int pinned = cudaPointerGetAttributes(&at, src) == cudaSuccess &&
                       at.type != cudaMemoryTypeUnregistered;
    (void)cudaGetLastError(); /* a pageable pointer is not an error */
    if (pinned || bytes < GS_CUDA_STAGE_BYTES / 4 || !c->stage[0]) {
        /* from pageable memory the call returns once src is staged (CUDA
         * runtime API, "API synchronization behavior"), so src may be reused
         * without waiting for the copy */
        status = CUDA_CALL(&e->err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                                    c->stream));
        if (status == GS_OK && pinned) *pending = 1;
        return status;
    }
    for (size_t off = 0, i = 0; status == GS_OK && off < bytes; off += GS_CUDA_STAGE_BYTES, i++) {
        const int b = (int)(i & 1);
        const size_t len = bytes - off < GS_CUDA_STAGE_BYTES ? bytes - off : GS_CUDA_STAGE_BYTES;
        status = CUDA_CALL(&e->err, cudaEventSynchronize(c->stage_free[b]));
        if (status != GS_OK) break;
        parallel_copy(c->stage[b], (const char *)src + off, len);
        status = CUDA_CALL(&e->err, cudaMemcpyAsync((char *)dst + off, c->stage[b], len,
                                                    cudaMemcpyHostToDevice, c->stream));
        if (status == GS_OK)
            status = CUDA_CALL(&e->err, cudaEventRecord(c->stage_free[b], c->stream));
    }
    return status;
}

int gs_cuda_upload_finish(gs_engine *e, int pending, int status)
{
    if (!pending) return status;
    /* src may be freed once the caller returns: the copies must be done
     * even when something after them failed */
    const int s = CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    return status != GS_OK ? status : s;
}

int gs_cuda_upload(gs_engine *e, void *dst, const void *src, size_t bytes)
{
    int pending = 0;
    const int status = gs_cuda_upload_start(e, dst, src, bytes, &pending);
    return gs_cuda_upload_finish(e, pending, status);
}

int cuda_vec_upload(gs_engine *e, gs_vec *dst, const double *src)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = not_capturing(e, "vec_upload");
    if (status != GS_OK || dst->n == 0) return status;
    status = gs_cuda_upload(e, dst->d, src, (size_t)dst->n * sizeof(double));
    /* Synchronous on return, as the table promises for uploads. */
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    return status;
}

int cuda_vec_download(gs_engine *e, const gs_vec *src, double *dst)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = not_capturing(e, "vec_download");
    if (status != GS_OK) return status;
    if (src->n > 0)
        status = CUDA_CALL(&e->err, cudaMemcpyAsync(dst, src->d, (size_t)src->n * sizeof(double),
                                                    cudaMemcpyDeviceToHost, c->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    return status;
}

int cuda_host_pin(gs_engine *e, void *p, size_t bytes)
{
    (void)e;
    if (!p || bytes == 0) return 0;
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) return 1;
    /* refused (no page-locked memory left, or a page already registered by
     * a neighbouring array): not sticky, the array stays pageable */
    (void)cudaGetLastError();
    return 0;
}

void cuda_host_unpin(gs_engine *e, void *p)
{
    (void)e;
    if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}
