/* engine_cuda.cu - the CUDA engine: creation, device memory with accounting,
 * vectors, fused vector kernels with deterministic reductions, scalars in
 * device memory, and replayable sequences as CUDA graphs. The table's
 * semantics are engine.h's; the CPU engine (src/engine_cpu.c) is the oracle.
 * The matrix operations (SELL-C-sigma SpMV, trisolve) are in spmv.cu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "engine_cuda.h"
#include "reduce.cuh"

/* ------------------------------------------------------------------ memory */

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

void gs_cuda_free(gs_engine *e, void *p, size_t bytes)
{
    if (!p) return;
    /* an error here is a sticky one already reported elsewhere */
    cudaFreeAsync(p, gs_cuda_of(e)->stream);
    e->device_bytes_now -= bytes <= e->device_bytes_now ? bytes : e->device_bytes_now;
}

/* ------------------------------------------------- chunk-mapped memory */

/* The driver calls of virtual memory management, fetched through the
 * runtime (cudaGetDriverEntryPointByVersion) so that the program does not
 * link the driver library itself: a machine without a driver still runs
 * the CPU engine. */
struct gs_cuda_vmm_api {
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*error_string)(CUresult, const char **);
    CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t granule;
};

/* The entry points and the granularity for device dev, in a (the engine's
 * own, freed with it); NULL (the plain builds) if any is missing or
 * refused, or the device does not support virtual memory management. */
static const gs_cuda_vmm_api *vmm_api_load(int dev, gs_cuda_vmm_api *a)
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
                (void)cudaMemPoolTrimTo(pool, 0);
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
    (void)cudaStreamSynchronize(gs_cuda_of(e)->stream);
    gs_cuda_vmm_unmap_below(e, v, (size_t)v->n_chunks * v->chunk);
    int mapped = 0;
    for (int64_t k = 0; k < v->n_chunks; k++) mapped |= v->handle[k] != 0;
    if (!mapped)
        (void)gs_cuda_of(e)->vmm->address_free((CUdeviceptr)v->base,
                                               (size_t)v->n_chunks * v->chunk);
    free(v->handle);
    *v = gs_cuda_vmm{};
}

unsigned gs_cuda_red_grid(gs_engine *e, int64_t n, int64_t per_block)
{
    int64_t g = (n + per_block - 1) / per_block;
    int64_t cap = gs_cuda_of(e)->red_blocks;
    if (g < 1) g = 1;
    if (g > cap) g = cap;
    return (unsigned)g;
}

int gs_cuda_check_slot(gs_engine *e, int slot, const char *op)
{
    if (slot >= 0 && slot < GS_MAX_SCALARS) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: scalar slot %d outside [0, %d)", op,
                        slot, GS_MAX_SCALARS);
}

int gs_cuda_check_coef(gs_engine *e, gs_coef k, const char *op)
{
    const int s[4] = {k.num0, k.num1, k.den0, k.den1};
    for (int i = 0; i < 4; i++)
        if (s[i] != GS_SLOT_NONE && (s[i] < 0 || s[i] >= GS_MAX_SCALARS))
            return gs_error_set(&e->err, GS_ERR_INTERNAL,
                                "cuda %s: coefficient slot %d outside [0, %d)", op, s[i],
                                GS_MAX_SCALARS);
    return GS_OK;
}

static int check_len(gs_engine *e, const gs_vec *a, const gs_vec *b, const char *op)
{
    if (a->n == b->n) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: vector lengths differ (%lld, %lld)",
                        op, (long long)a->n, (long long)b->n);
}

static int not_capturing(gs_engine *e, const char *op)
{
    if (!gs_cuda_of(e)->capturing) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL,
                        "cuda %s: synchronising call issued while capturing a sequence", op);
}

/* ----------------------------------------------------------------- vectors */

static int cuda_vec_create(gs_engine *e, int64_t n, gs_vec **out)
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

static void cuda_vec_destroy(gs_engine *e, gs_vec *v)
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

static int cuda_vec_upload(gs_engine *e, gs_vec *dst, const double *src)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = not_capturing(e, "vec_upload");
    if (status != GS_OK || dst->n == 0) return status;
    status = gs_cuda_upload(e, dst->d, src, (size_t)dst->n * sizeof(double));
    /* Synchronous on return, as the table promises for uploads. */
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    return status;
}

static int cuda_vec_download(gs_engine *e, const gs_vec *src, double *dst)
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

/* ------------------------------------------------- elementwise and dot ops
 * One kernel template runs every elementwise operation: an Op evaluates its
 * coefficients once per thread (init), then handles index pairs with 16-byte
 * loads (pair) and the odd last element (one); both return the element's
 * contribution to the fused dot product (0 when the op has none). The loop
 * is grid-stride over a capped grid, so a thread's sum has a fixed order. */

/* Plain (coherent) loads: the Krylov code may pass the same vector as input
 * and output (GMRES scales w in place with axpby(w, 0, w)), which the
 * read-only path must not see. Streaming coalesced loads gain nothing from it. */
__device__ __forceinline__ double2 ld2(const double *p, int64_t i)
{
    return reinterpret_cast<const double2 *>(p)[i];
}
__device__ __forceinline__ double2 ldw2(const double *p, int64_t i)
{
    return reinterpret_cast<const double2 *>(p)[i];
}
__device__ __forceinline__ void st2(double *p, int64_t i, double2 v)
{
    reinterpret_cast<double2 *>(p)[i] = v;
}

struct set_op {
    double *y;
    double v;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p) { st2(y, p, make_double2(v, v)); return 0.0; }
    __device__ double one(int64_t i) { y[i] = v; return 0.0; }
};

/* y = a x + b y (y not read when b == 0, as the CPU engine does); DOT: 0
 * none, 1 y.w, 2 y.y (a template argument: no branch, fewer registers). */
template <int DOT>
struct axpby_op {
    gs_coef ka, kb;
    const double *x, *w;
    double *y;
    double a, b;
    __device__ void init(const double *S) { a = gs_coef_eval(ka, S); b = gs_coef_eval(kb, S); }
    __device__ double pair(int64_t p)
    {
        const double2 xv = ld2(x, p);
        double2 r = make_double2(a * xv.x, a * xv.y);
        if (b != 0.0) {
            const double2 yv = ldw2(y, p);
            r = make_double2(a * xv.x + b * yv.x, a * xv.y + b * yv.y);
        }
        st2(y, p, r);
        if (DOT == 0) return 0.0;
        if (DOT == 2) return r.x * r.x + r.y * r.y;
        const double2 wv = ldw2(w, p);
        return r.x * wv.x + r.y * wv.y;
    }
    __device__ double one(int64_t i)
    {
        const double r = b != 0.0 ? a * x[i] + b * y[i] : a * x[i];
        y[i] = r;
        return DOT == 0 ? 0.0 : DOT == 2 ? r * r : r * w[i];
    }
};

/* z = a x + b y + c z (z not read when c == 0). */
struct axpbypcz_op {
    gs_coef ka, kb, kc;
    const double *x, *y;
    double *z;
    double a, b, c;
    __device__ void init(const double *S)
    {
        a = gs_coef_eval(ka, S);
        b = gs_coef_eval(kb, S);
        c = gs_coef_eval(kc, S);
    }
    __device__ double pair(int64_t p)
    {
        double2 xv = ld2(x, p), yv = ld2(y, p);
        double2 r = make_double2(a * xv.x + b * yv.x, a * xv.y + b * yv.y);
        if (c != 0.0) {
            double2 zv = ldw2(z, p);
            r.x += c * zv.x;
            r.y += c * zv.y;
        }
        st2(z, p, r);
        return 0.0;
    }
    __device__ double one(int64_t i)
    {
        double r = a * x[i] + b * y[i];
        if (c != 0.0) r += c * z[i];
        z[i] = r;
        return 0.0;
    }
};

/* y1 += a x1 and y2 += b x2; contribution y2.y2 (CG's x and r updates). */
struct axpy2_op {
    gs_coef ka, kb;
    const double *x1, *x2;
    double *y1, *y2;
    double a, b;
    __device__ void init(const double *S) { a = gs_coef_eval(ka, S); b = gs_coef_eval(kb, S); }
    __device__ double pair(int64_t p)
    {
        const double2 u = ld2(x1, p), v = ld2(x2, p), y = ldw2(y1, p), z = ldw2(y2, p);
        const double2 r1 = make_double2(y.x + a * u.x, y.y + a * u.y);
        const double2 r2 = make_double2(z.x + b * v.x, z.y + b * v.y);
        st2(y1, p, r1);
        st2(y2, p, r2);
        return r2.x * r2.x + r2.y * r2.y;
    }
    __device__ double one(int64_t i)
    {
        y1[i] += a * x1[i];
        const double r = y2[i] + b * x2[i];
        y2[i] = r;
        return r * r;
    }
};

struct dot_op {
    const double *x, *y;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p)
    {
        double2 xv = ld2(x, p), yv = ld2(y, p);
        return xv.x * yv.x + xv.y * yv.y;
    }
    __device__ double one(int64_t i) { return x[i] * y[i]; }
};

/* y = d .* x; contribution x.y. */
struct pmult_op {
    const double *d, *x;
    double *y;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p)
    {
        double2 dv = ld2(d, p), xv = ld2(x, p);
        double2 r = make_double2(dv.x * xv.x, dv.y * xv.y);
        st2(y, p, r);
        return xv.x * r.x + xv.y * r.y;
    }
    __device__ double one(int64_t i)
    {
        double r = d[i] * x[i];
        y[i] = r;
        return x[i] * r;
    }
};

template <class Op, bool REDUCE>
__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    vec_kernel(Op op, int64_t n, const double *S, double *partials, unsigned int *counter,
               double *out)
{
    op.init(S);
    double acc = 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride)
        acc += op.pair(p);
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) acc += op.one(n - 1);
    if (REDUCE) gs_reduce_finish1(acc, partials, counter, out);
}

/* The vector kernels, by the index of their grid cap in gs_cuda_impl. */
enum {
    VK_SET, VK_AXPBY, VK_AXPBY_DOT_W, VK_AXPBY_DOT_SELF, VK_AXPBYPCZ, VK_DOT, VK_PMULT,
    VK_PMULT_DOT, VK_AXPY2, VK_AXPY2_DOT, VK_COUNT
};

/* One thread per index pair, grid-stride beyond the blocks the device holds
 * at once (the cap, from the occupancy calculator at engine creation): one
 * wave, so no block waits for a second one, and a thread's sum has a fixed
 * order. Reductions are also capped by the partial-sum buffer. */
template <class Op, bool REDUCE>
static int run_vec(gs_engine *e, const Op &op, int64_t n, int slot, int id, const char *name)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    double *out = REDUCE ? c->S + slot : NULL;
    int64_t grid = (n / 2 + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK;
    if (grid > (int64_t)c->vec_caps[id]) grid = c->vec_caps[id];
    if (REDUCE && grid > c->red_blocks) grid = c->red_blocks;
    if (grid == 0 && (n > 0 || REDUCE)) grid = 1; /* an empty dot still writes its 0 */
    auto kernel = vec_kernel<Op, REDUCE>;
    return gs_cuda_launch(&e->err, name, __FILE__, __LINE__, kernel, (unsigned)grid,
                          GS_CUDA_BLOCK, 0, c->stream, op, n, (const double *)c->S, c->partials,
                          c->counter, out);
}

template <class Op, bool REDUCE>
static int vec_cap(gs_engine *e, int id)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int per_sm = 0;
    int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                        &per_sm, vec_kernel<Op, REDUCE>, GS_CUDA_BLOCK, 0));
    c->vec_caps[id] = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    return status;
}

static int cuda_set(gs_engine *e, gs_vec *y, double value)
{
    set_op op = {y->d, value};
    return run_vec<set_op, false>(e, op, y->n, 0, VK_SET, "set_kernel");
}

static int cuda_copy(gs_engine *e, const gs_vec *x, gs_vec *y)
{
    int status = check_len(e, x, y, "copy");
    if (status != GS_OK || x->n == 0 || x == y) return status;
    return CUDA_CALL(&e->err, cudaMemcpyAsync(y->d, x->d, (size_t)x->n * sizeof(double),
                                              cudaMemcpyDeviceToDevice, gs_cuda_of(e)->stream));
}

static int cuda_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                          const gs_vec *w, int slot)
{
    int status = check_len(e, x, y, "axpby_dot");
    if (status == GS_OK && w) status = check_len(e, w, y, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_slot(e, slot, "axpby_dot");
    if (status != GS_OK) return status;
    if (!w) {
        axpby_op<2> op = {a, b, x->d, NULL, y->d, 0.0, 0.0};
        return run_vec<axpby_op<2>, true>(e, op, y->n, slot, VK_AXPBY_DOT_SELF, "axpby_dot_kernel");
    }
    axpby_op<1> op = {a, b, x->d, w->d, y->d, 0.0, 0.0};
    return run_vec<axpby_op<1>, true>(e, op, y->n, slot, VK_AXPBY_DOT_W, "axpby_dot_kernel");
}

static int cuda_axpy2_dot(gs_engine *e, gs_coef a, const gs_vec *x1, gs_vec *y1, gs_coef b,
                          const gs_vec *x2, gs_vec *y2, int slot)
{
    int status = check_len(e, x1, y1, "axpy2_dot");
    if (status == GS_OK) status = check_len(e, x2, y2, "axpy2_dot");
    if (status == GS_OK) status = check_len(e, y1, y2, "axpy2_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpy2_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpy2_dot");
    if (status == GS_OK && slot != GS_SLOT_NONE) status = gs_cuda_check_slot(e, slot, "axpy2_dot");
    if (status != GS_OK) return status;
    axpy2_op op = {a, b, x1->d, x2->d, y1->d, y2->d, 0.0, 0.0};
    if (slot == GS_SLOT_NONE)
        return run_vec<axpy2_op, false>(e, op, y2->n, 0, VK_AXPY2, "axpy2_kernel");
    return run_vec<axpy2_op, true>(e, op, y2->n, slot, VK_AXPY2_DOT, "axpy2_dot_kernel");
}

static int cuda_axpby(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y)
{
    int status = check_len(e, x, y, "axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpby");
    if (status != GS_OK) return status;
    axpby_op<0> op = {a, b, x->d, NULL, y->d, 0.0, 0.0};
    return run_vec<axpby_op<0>, false>(e, op, y->n, 0, VK_AXPBY, "axpby_kernel");
}

static int cuda_axpbypcz(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, const gs_vec *y,
                         gs_coef c, gs_vec *z)
{
    int status = check_len(e, x, z, "axpbypcz");
    if (status == GS_OK) status = check_len(e, y, z, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, c, "axpbypcz");
    if (status != GS_OK) return status;
    axpbypcz_op op = {a, b, c, x->d, y->d, z->d, 0.0, 0.0, 0.0};
    return run_vec<axpbypcz_op, false>(e, op, z->n, 0, VK_AXPBYPCZ, "axpbypcz_kernel");
}

static int cuda_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot)
{
    int status = check_len(e, x, y, "dot");
    if (status == GS_OK) status = gs_cuda_check_slot(e, slot, "dot");
    if (status != GS_OK) return status;
    dot_op op = {x->d, y->d};
    return run_vec<dot_op, true>(e, op, x->n, slot, VK_DOT, "dot_kernel");
}

static int cuda_pointwise_mult_dot(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y,
                                   int slot)
{
    int status = check_len(e, d, y, "pointwise_mult_dot");
    if (status == GS_OK) status = check_len(e, x, y, "pointwise_mult_dot");
    if (status == GS_OK && slot != GS_SLOT_NONE)
        status = gs_cuda_check_slot(e, slot, "pointwise_mult_dot");
    if (status != GS_OK) return status;
    pmult_op op = {d->d, x->d, y->d};
    if (slot == GS_SLOT_NONE)
        return run_vec<pmult_op, false>(e, op, y->n, 0, VK_PMULT, "pointwise_mult_kernel");
    return run_vec<pmult_op, true>(e, op, y->n, slot, VK_PMULT_DOT, "pointwise_mult_dot_kernel");
}

/* ---------------------------------------------------------- mdot and maxpy
 * Up to GS_CUDA_MDOT_CHUNK vectors per pass, their pointers passed by value
 * (a kernel parameter, so a captured graph needs no device-side table):
 * w is read once per chunk of 16 vectors, each V[i] once. */
struct vec_ptrs {
    const double *p[GS_CUDA_MDOT_CHUNK];
};

__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    mdot_kernel(vec_ptrs V, int k, const double *__restrict__ w, int64_t n, double *partials,
                unsigned int *counter, double *out)
{
    double acc[GS_CUDA_MDOT_CHUNK];
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++) acc[j] = 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride) {
        const double2 wp = ld2(w, p);
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) {
                const double2 vp = ld2(V.p[j], p);
                acc[j] += vp.x * wp.x + vp.y * wp.y;
            }
    }
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) {
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) acc[j] += V.p[j][n - 1] * w[n - 1];
    }
    gs_reduce_finish<GS_CUDA_MDOT_CHUNK>(acc, k, partials, counter, out);
}

/* w += c * sum_j S[slot0 + j] V[j], the sum formed first in j order as the
 * CPU engine does (exactly its rounding for k <= 16). */
__device__ __forceinline__ double maxpy_one(const vec_ptrs &V, int k, const double *coef,
                                            int64_t i)
{
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
        if (j < k) s += coef[j] * V.p[j][i];
    return s;
}

__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    maxpy_kernel(vec_ptrs V, int k, double c, const double *__restrict__ S, int slot0,
                 double *__restrict__ w, int64_t n)
{
    double coef[GS_CUDA_MDOT_CHUNK];
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++) coef[j] = j < k ? S[slot0 + j] : 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride) {
        double sx = 0.0, sy = 0.0;
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) {
                const double2 vp = ld2(V.p[j], p);
                sx += coef[j] * vp.x;
                sy += coef[j] * vp.y;
            }
        double2 wp = ld2(w, p);
        wp.x += c * sx;
        wp.y += c * sy;
        st2(w, p, wp);
    }
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) w[n - 1] += c * maxpy_one(V, k, coef, n - 1);
}

static int check_vecs(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0,
                      const char *op)
{
    if (k > 0 && (slot0 < 0 || slot0 + k > GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: slots [%d, %d) outside [0, %d)",
                            op, slot0, slot0 + k, GS_MAX_SCALARS);
    for (int j = 0; j < k; j++) {
        int status = check_len(e, V[j], w, op);
        if (status != GS_OK) return status;
    }
    return GS_OK;
}

static int cuda_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_vecs(e, V, k, w, slot0, "mdot");
    unsigned grid = gs_cuda_red_grid(e, w->n / 2, GS_CUDA_BLOCK);
    if (grid > c->mdot_blocks) grid = c->mdot_blocks;
    for (int j0 = 0; status == GS_OK && j0 < k; j0 += GS_CUDA_MDOT_CHUNK) {
        int kc = k - j0 < GS_CUDA_MDOT_CHUNK ? k - j0 : GS_CUDA_MDOT_CHUNK;
        vec_ptrs p = {};
        for (int j = 0; j < kc; j++) p.p[j] = V[j0 + j]->d;
        status = CUDA_LAUNCH(&e->err, mdot_kernel, grid, GS_CUDA_BLOCK, 0, c->stream, p, kc,
                             (const double *)w->d, w->n, c->partials, c->counter,
                             c->S + slot0 + j0);
    }
    return status;
}

static int cuda_maxpy(gs_engine *e, double cst, const gs_vec *const *V, int k, int slot0,
                      gs_vec *w)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_vecs(e, V, k, w, slot0, "maxpy");
    unsigned grid = (unsigned)((w->n / 2 + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
    if (grid > c->maxpy_blocks) grid = c->maxpy_blocks;
    if (grid == 0 && w->n > 0) grid = 1;
    for (int j0 = 0; status == GS_OK && j0 < k; j0 += GS_CUDA_MDOT_CHUNK) {
        int kc = k - j0 < GS_CUDA_MDOT_CHUNK ? k - j0 : GS_CUDA_MDOT_CHUNK;
        vec_ptrs p = {};
        for (int j = 0; j < kc; j++) p.p[j] = V[j0 + j]->d;
        status = CUDA_LAUNCH(&e->err, maxpy_kernel, grid, GS_CUDA_BLOCK, 0, c->stream, p, kc, cst,
                             (const double *)c->S, slot0 + j0, w->d, w->n);
    }
    return status;
}

/* ----------------------------------------------------------------- scalars */

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

static int cuda_scalar_set(gs_engine *e, int slot, gs_coef value)
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
static int cuda_scalar_write(gs_engine *e, int slot0, int count, const double *src)
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

static int cuda_scalar_read(gs_engine *e, int slot0, int count, double *dst)
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

static int cuda_sync(gs_engine *e)
{
    int status = not_capturing(e, "sync");
    if (status != GS_OK) return status;
    status = CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGetLastError());
    return status;
}

/* -------------------------------------------------- sequences (CUDA graphs) */

static int cuda_capture_begin(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    if (c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda capture_begin: already capturing");
    int status = CUDA_CALL(&e->err, cudaStreamBeginCapture(c->stream,
                                                           cudaStreamCaptureModeThreadLocal));
    if (status == GS_OK) c->capturing = 1;
    return status;
}

static int cuda_capture_end(gs_engine *e, void **seq)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    *seq = NULL;
    if (!c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda capture_end: not capturing");
    c->capturing = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int status = CUDA_CALL(&e->err, cudaStreamEndCapture(c->stream, &graph));
    if (status == GS_OK && e->err.status != GS_OK) status = e->err.status; /* an op failed inside */
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGraphInstantiate(&exec, graph, 0));
    if (graph) cudaGraphDestroy(graph);
    if (status == GS_OK) *seq = (void *)exec;
    return status;
}

static int cuda_replay(gs_engine *e, void *seq)
{
    if (!seq) return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda replay: NULL sequence");
    return CUDA_CALL(&e->err, cudaGraphLaunch((cudaGraphExec_t)seq, gs_cuda_of(e)->stream));
}

static void cuda_seq_destroy(gs_engine *e, void *seq)
{
    (void)e;
    if (seq) cudaGraphExecDestroy((cudaGraphExec_t)seq);
}

/* ------------------------------------------------ page-locked host memory */

static int cuda_host_pin(gs_engine *e, void *p, size_t bytes)
{
    (void)e;
    if (!p || bytes == 0) return 0;
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) return 1;
    /* refused (no page-locked memory left, or a page already registered by
     * a neighbouring array): not sticky, the array stays pageable */
    (void)cudaGetLastError();
    return 0;
}

static void cuda_host_unpin(gs_engine *e, void *p)
{
    (void)e;
    if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

/* ------------------------------------------------------ create and destroy */

static void cuda_destroy(gs_engine *e)
{
    if (!e) return;
    gs_cuda_impl *c = gs_cuda_of(e);
    if (c) {
        if (c->stream) cudaStreamSynchronize(c->stream);
        gs_cuda_free(e, c->S, GS_MAX_SCALARS * sizeof(double));
        gs_cuda_free(e, c->partials, (size_t)c->red_blocks * GS_CUDA_MDOT_CHUNK * sizeof(double));
        gs_cuda_free(e, c->counter, sizeof(unsigned int));
        if (c->pinned) cudaFreeHost(c->pinned);
        if (c->readback) cudaFreeHost(c->readback);
        for (int b = 0; b < 2; b++) {
            if (c->stage[b]) cudaFreeHost(c->stage[b]);
            if (c->stage_free[b]) cudaEventDestroy(c->stage_free[b]);
        }
        if (c->sparse) cusparseDestroy(c->sparse);
        free(c->vmm_api);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(e);
}

static const gs_engine_ops cuda_ops = {
    "cuda",
    GS_ENGINE_CUDA,
    cuda_destroy,
    cuda_vec_create,
    cuda_vec_destroy,
    cuda_vec_upload,
    cuda_vec_download,
    gs_cuda_mat_create,
    gs_cuda_mat_destroy,
    cuda_set,
    cuda_copy,
    cuda_axpby,
    cuda_axpbypcz,
    cuda_dot,
    cuda_axpby_dot,
    cuda_axpy2_dot,
    cuda_pointwise_mult_dot,
    cuda_mdot,
    cuda_maxpy,
    gs_cuda_spmv_dot,
    gs_cuda_spmv_axpby,
    gs_cuda_trisolve,
    cuda_scalar_set,
    cuda_scalar_write,
    cuda_scalar_read,
    cuda_sync,
    cuda_capture_begin,
    cuda_capture_end,
    cuda_replay,
    cuda_seq_destroy,
    cuda_host_pin,
    cuda_host_unpin,
    gs_cuda_mat_create_system,
    gs_cuda_setup_done,
};

/* Copy bandwidth as the roofline's ceiling: a device-to-device cudaMemcpy of
 * `bytes`, counting bytes read + written, best of 5 after a warm-up. Smaller
 * sizes are tried if the device is short of memory; 0 if none fits. Done
 * outside the engine's accounting (the buffers are gone before any work). */
static int measure_copy_bandwidth(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    size_t bytes = (size_t)256 << 20;
    void *a = NULL, *b = NULL;
    while (bytes >= ((size_t)16 << 20)) {
        if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess) break;
        (void)cudaGetLastError();
        if (a) cudaFree(a);
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
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    return status;
}

static int cuda_engine_init(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaDeviceProp prop;
    int status = CUDA_CALL(&e->err, cudaSetDevice(0));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGetDeviceProperties(&prop, 0));
    if (status != GS_OK) return status;
    c->device = 0;
    c->sm_count = prop.multiProcessorCount;
    c->vmm_api = (gs_cuda_vmm_api *)gs_calloc(1, sizeof *c->vmm_api, "driver entry points",
                                              &e->err);
    if (!c->vmm_api) return GS_ERR_NOMEM;
    c->vmm = vmm_api_load(0, c->vmm_api);
    c->vmm_min_bytes = GS_CUDA_VMM_MIN_BYTES;
    {
        /* GS_CUDA_STEPPED_MIN_BYTES: the threshold moved (the sanitizer
         * runs take the stepped layout on small problems this way) */
        const char *forced = getenv("GS_CUDA_STEPPED_MIN_BYTES");
        char *end = NULL;
        if (forced && *forced) {
            const unsigned long long v = strtoull(forced, &end, 10);
            if (end && *end == '\0') c->vmm_min_bytes = (size_t)v;
        }
    }
    c->vmm_steps = GS_CUDA_VMM_STEPS;
    /* Enough 256-thread blocks to fill every SM (2048 threads each). */
    c->red_blocks = c->sm_count * (prop.maxThreadsPerMultiProcessor / GS_CUDA_BLOCK);
    if (c->red_blocks < 1) c->red_blocks = 1;
    snprintf(e->device_name, sizeof e->device_name, "%.127s", prop.name);
    /* mdot and maxpy hold 16 sums or coefficients per thread: fewer blocks
     * fit an SM, and a grid-stride grid must not spill into a second wave. */
    int per_sm = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mdot_kernel,
                                                                            GS_CUDA_BLOCK, 0)));
    c->mdot_blocks = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, maxpy_kernel,
                                                                            GS_CUDA_BLOCK, 0)));
    c->maxpy_blocks = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    GS_TRY((vec_cap<set_op, false>(e, VK_SET)));
    GS_TRY((vec_cap<axpby_op<0>, false>(e, VK_AXPBY)));
    GS_TRY((vec_cap<axpby_op<1>, true>(e, VK_AXPBY_DOT_W)));
    GS_TRY((vec_cap<axpby_op<2>, true>(e, VK_AXPBY_DOT_SELF)));
    GS_TRY((vec_cap<axpbypcz_op, false>(e, VK_AXPBYPCZ)));
    GS_TRY((vec_cap<dot_op, true>(e, VK_DOT)));
    GS_TRY((vec_cap<pmult_op, false>(e, VK_PMULT)));
    GS_TRY((vec_cap<pmult_op, true>(e, VK_PMULT_DOT)));
    GS_TRY((vec_cap<axpy2_op, false>(e, VK_AXPY2)));
    GS_TRY((vec_cap<axpy2_op, true>(e, VK_AXPY2_DOT)));

    GS_TRY(CUDA_CALL(&e->err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)));
    {
        /* freed blocks stay in the pool for the next allocation instead of
         * going back to the driver at every synchronisation; the engine's
         * peak counts the bytes it holds, not what the pool keeps */
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetDefaultMemPool(&pool, 0)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)));
    }
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreate(&c->sparse)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSetStream(c->sparse, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &c->S, GS_MAX_SCALARS * sizeof(double), "the scalar array S"));
    GS_TRY(gs_cuda_alloc(e, &c->partials,
                         (size_t)c->red_blocks * GS_CUDA_MDOT_CHUNK * sizeof(double),
                         "reduction partial sums"));
    GS_TRY(gs_cuda_alloc(e, &c->counter, sizeof(unsigned int), "reduction counter"));
    GS_TRY(CUDA_CALL(&e->err, cudaMallocHost((void **)&c->pinned,
                                             GS_MAX_SCALARS * sizeof(double))));
    GS_TRY(CUDA_CALL(&e->err, cudaMallocHost((void **)&c->readback,
                                             GS_CUDA_READBACK_WORDS * sizeof(uint64_t))));
    for (int b = 0; b < 2; b++) {
        GS_TRY(CUDA_CALL(&e->err, cudaEventCreateWithFlags(&c->stage_free[b],
                                                           cudaEventDisableTiming)));
        /* Without staging buffers uploads still work, only slower. */
        if (cudaMallocHost((void **)&c->stage[b], GS_CUDA_STAGE_BYTES) != cudaSuccess) {
            (void)cudaGetLastError();
            c->stage[b] = NULL;
        }
    }
    if (!c->stage[1] && c->stage[0]) {
        cudaFreeHost(c->stage[0]);
        c->stage[0] = NULL;
    }
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(c->S, 0, GS_MAX_SCALARS * sizeof(double), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(c->counter, 0, sizeof(unsigned int), c->stream)));
    GS_TRY(measure_copy_bandwidth(e));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
cleanup:
    return status;
}

extern "C" size_t gs_cuda_set_stepped_layout(gs_engine *e, size_t min_bytes, int steps)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    c->vmm_min_bytes = min_bytes;
    c->vmm_steps = steps > 0 ? steps : GS_CUDA_VMM_STEPS;
    return c->vmm ? c->vmm->granule : 0;
}

extern "C" int gs_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" int gs_engine_cuda_create(gs_engine **out, gs_error *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "no CUDA device usable: cudaGetDeviceCount failed: %s (%s)",
                            cudaGetErrorString(rc), cudaGetErrorName(rc));
    }
    if (count == 0)
        return gs_error_set(err, GS_ERR_UNSUPPORTED, "no CUDA device found (driver present)");
    gs_engine *e = (gs_engine *)gs_calloc(1, sizeof *e, "the CUDA engine", err);
    if (!e) return GS_ERR_NOMEM;
    e->ops = &cuda_ops;
    e->impl = gs_calloc(1, sizeof(gs_cuda_impl), "the CUDA engine", err);
    if (!e->impl) {
        free(e);
        return GS_ERR_NOMEM;
    }
    int status = cuda_engine_init(e);
    if (status != GS_OK) {
        gs_error_set(err, (gs_status)status, "creating the CUDA engine: %s", e->err.msg);
        cuda_destroy(e);
        return status;
    }
    e->device_bytes_peak = e->device_bytes_now;
    *out = e;
    return GS_OK;
}
