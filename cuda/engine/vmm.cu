/* vmm.cu - chunk-mapped device memory (the driver's virtual memory management),
 * with the engine's accounting: reserve a range, map and release chunks as data comes and goes. */
#include <stdlib.h>
#include <string.h>

#include "engine_ops.h"

/* The entry points and the granularity for device dev, in a (the engine's
 * own, freed with it); NULL (the plain builds) if any is missing or
 * refused, or the device does not support virtual memory management. */
const gs_cuda_vmm_api *gs_cuda_vmm_api_load(int dev, gs_cuda_vmm_api *a)
{
    struct {
        const char *name;
        void **fn;
    } const want[] = {
        {"cuMemGetAllocationGranularity", (void **)&a->granularity},
        {"cuMemAddressReserve", (void **)&a->reserve},
        {"cuMemAddressFree", (void **)&a->address_free},
        {"cuMemCreate", (void **)&a->create},
        {"cuMemRelease", (void **)&a->release},
        {"cuMemMap", (void **)&a->map},
        {"cuMemUnmap", (void **)&a->unmap},
        {"cuMemSetAccess", (void **)&a->set_access},
        {"cuGetErrorString", (void **)&a->error_string},
        {"cuDeviceGetAttribute", (void **)&a->attribute},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        *want[k].fn = NULL;
        if (cudaGetDriverEntryPointByVersion(want[k].name, want[k].fn, 12000, cudaEnableDefault,
                                             &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !*want[k].fn) {
            (void)cudaGetLastError();
            return NULL;
        }
    }
    int supported = 0;
    if (a->attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
            CUDA_SUCCESS ||
        !supported)
        return NULL;
    memset(&a->prop, 0, sizeof a->prop);
    a->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    a->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a->prop.location.id = dev;
    memset(&a->access, 0, sizeof a->access);
    a->access.location = a->prop.location;
    a->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    /* the minimum granule (2 MiB on an H200, as is the recommended one):
     * chunks are an eighth of an array in whole granules anyway */
    if (a->granularity(&a->granule, &a->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        a->granule == 0)
        return NULL;
    return a;
}

static int vmm_fail(gs_engine *e, CUresult rc, const char *call, const char *what, size_t bytes)
{
    const char *msg = NULL;
    const gs_cuda_vmm_api *a = gs_cuda_of(e)->vmm;
    if (!a || a->error_string(rc, &msg) != CUDA_SUCCESS || !msg) msg = "unknown driver error";
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
        return gs_error_set(&e->err, GS_ERR_NOMEM,
                            "out of device memory mapping %zu bytes for %s (this engine already "
                            "holds %zu bytes)", bytes, what, e->device_bytes_now);
    return gs_error_set(&e->err, GS_ERR_CUDA, "%s for %s (%zu bytes) failed: %s", call, what,
                        bytes, msg);
}

int gs_cuda_vmm_reserve(gs_engine *e, gs_cuda_vmm *v, size_t bytes, const char *what)
{
    const gs_cuda_vmm_api *a = gs_cuda_of(e)->vmm;
    *v = gs_cuda_vmm{};
    if (!a)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "%s: the driver offers no virtual memory management", what);
    if (bytes == 0) bytes = 1;
    const size_t g = a->granule;
    const size_t steps = (size_t)gs_cuda_of(e)->vmm_steps;
    size_t chunk = (bytes / steps + g - 1) / g * g;
    if (chunk < g) chunk = g;
    v->chunk = chunk;
    v->n_chunks = (int64_t)((bytes + chunk - 1) / chunk);
    v->handle = (unsigned long long *)gs_calloc((size_t)v->n_chunks, sizeof *v->handle,
                                                "chunk handles", &e->err);
    if (!v->handle) return GS_ERR_NOMEM;
    CUdeviceptr base = 0;
    const CUresult rc = a->reserve(&base, (size_t)v->n_chunks * chunk, g, 0, 0);
    if (rc != CUDA_SUCCESS) {
        free(v->handle);
        *v = gs_cuda_vmm{};
        return vmm_fail(e, rc, "cuMemAddressReserve", what, bytes);
    }
    v->base = (char *)base;
    return GS_OK;
}

int gs_cuda_vmm_map(gs_engine *e, gs_cuda_vmm *v, size_t lo, size_t hi, const char *what)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_cuda_vmm_api *a = c->vmm;
    if (hi <= lo) return GS_OK;
    const int64_t k1 = (int64_t)((hi + v->chunk - 1) / v->chunk);
    for (int64_t k = (int64_t)(lo / v->chunk); k < k1 && k < v->n_chunks; k++) {
        if (v->handle[k]) continue;
        CUmemGenericAllocationHandle h = 0;
        const CUdeviceptr at = (CUdeviceptr)(v->base + (size_t)k * v->chunk);
        CUresult rc = a->create(&h, v->chunk, &a->prop, 0);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
            /* what the stream-ordered pool keeps back (see cuda_engine_init)
             * goes back to the driver, once, before giving up */
            cudaMemPool_t pool;
            if (cudaStreamSynchronize(c->stream) == cudaSuccess &&
                cudaDeviceGetDefaultMemPool(&pool, c->device) == cudaSuccess)
                (void)cudaMemPoolTrimTo(pool, 0); /* best effort: the retry reports */
            (void)cudaGetLastError();
            rc = a->create(&h, v->chunk, &a->prop, 0);
        }
        if (rc != CUDA_SUCCESS) return vmm_fail(e, rc, "cuMemCreate", what, v->chunk);
        rc = a->map(at, v->chunk, 0, h, 0);
        if (rc == CUDA_SUCCESS) rc = a->set_access(at, v->chunk, &a->access, 1);
        if (rc != CUDA_SUCCESS) {
            (void)a->unmap(at, v->chunk);
            (void)a->release(h);
            return vmm_fail(e, rc, "cuMemMap", what, v->chunk);
        }
        v->handle[k] = (unsigned long long)h;
        e->device_bytes_now += v->chunk;
        if (e->device_bytes_now > e->device_bytes_peak) e->device_bytes_peak = e->device_bytes_now;
    }
    return GS_OK;
}

void gs_cuda_vmm_unmap_below(gs_engine *e, gs_cuda_vmm *v, size_t end)
{
    const gs_cuda_vmm_api *a = gs_cuda_of(e)->vmm;
    if (!v->base) return;
    for (int64_t k = 0; k < v->n_chunks && (size_t)(k + 1) * v->chunk <= end; k++) {
        if (!v->handle[k]) continue;
        /* a chunk the driver will not unmap stays mapped (and counted);
         * gs_cuda_vmm_free tries again, and leaves the range reserved if
         * that fails too: nothing the caller could act on */
        if (a->unmap((CUdeviceptr)(v->base + (size_t)k * v->chunk), v->chunk) != CUDA_SUCCESS)
            continue;
        (void)a->release((CUmemGenericAllocationHandle)v->handle[k]);
        v->handle[k] = 0;
        e->device_bytes_now -= v->chunk <= e->device_bytes_now ? v->chunk : e->device_bytes_now;
    }
}

void gs_cuda_vmm_free(gs_engine *e, gs_cuda_vmm *v)
{
    if (!v || !v->base) return;
    /* unlike the stream-ordered frees, unmapping is immediate: whatever
     * was queued on the range must be over first */
    CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    gs_cuda_vmm_unmap_below(e, v, (size_t)v->n_chunks * v->chunk);
    int mapped = 0;
    for (int64_t k = 0; k < v->n_chunks; k++) mapped |= v->handle[k] != 0;
    if (!mapped)
        (void)gs_cuda_of(e)->vmm->address_free((CUdeviceptr)v->base,
                                               (size_t)v->n_chunks * v->chunk);
    free(v->handle);
    *v = gs_cuda_vmm{};
}
