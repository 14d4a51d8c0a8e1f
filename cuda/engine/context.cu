/* context.cu - the CUDA engine: creation (device, stream, pool, cuSPARSE, buffers), the op table,
 * destruction. The semantics are engine.h's; the CPU engine (src/engine_cpu.c) is the oracle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_ops.h"

static int cuda_destroy(gs_engine *e, gs_error *err)
{
    int status = GS_OK;
    if (!e) return GS_OK;
    gs_cuda_impl *c = gs_cuda_of(e);
    if (c) {
        gs_error *t = &c->teardown;
        if (c->stream) CUDA_TEARDOWN(t, cudaStreamSynchronize(c->stream));
        gs_cuda_fused_forget(e, NULL);
        gs_cuda_free(e, c->S, GS_MAX_SCALARS * sizeof(double));
        gs_cuda_free(e, c->partials, (size_t)c->red_blocks * GS_CUDA_MDOT_CHUNK * sizeof(double));
        gs_cuda_free(e, c->counter, sizeof(unsigned int));
        gs_cuda_free(e, c->loop_ctl, gs_cuda_loop_ctl_bytes());
        if (c->pinned) CUDA_TEARDOWN(t, cudaFreeHost(c->pinned));
        if (c->readback) CUDA_TEARDOWN(t, cudaFreeHost(c->readback));
        for (int b = 0; b < 2; b++) {
            if (c->stage[b]) CUDA_TEARDOWN(t, cudaFreeHost(c->stage[b]));
            if (c->stage_free[b]) CUDA_TEARDOWN(t, cudaEventDestroy(c->stage_free[b]));
        }
        if (c->sparse) CUSPARSE_TEARDOWN(t, cusparseDestroy(c->sparse));
        free(c->vmm_api);
        if (c->stream) CUDA_TEARDOWN(t, cudaStreamDestroy(c->stream));
        status = t->status;
        if (status != GS_OK && err && err->status == GS_OK) *err = *t;
        free(c);
    }
    free(e);
    return status;
}

static double *cuda_vec_data(gs_engine *e, const gs_vec *v)
{
    (void)e;
    return v->d;
}

static double *cuda_scalar_data(gs_engine *e) { return gs_cuda_of(e)->S; }

static void *cuda_native_stream(gs_engine *e) { return (void *)gs_cuda_of(e)->stream; }

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
    cuda_small_run,
    cuda_sync,
    cuda_capture_begin,
    cuda_capture_end,
    cuda_replay,
    cuda_seq_destroy,
    cuda_host_pin,
    cuda_host_unpin,
    gs_cuda_mat_create_system,
    gs_cuda_setup_done,
    cuda_loop_run,
    cuda_vec_data,
    cuda_scalar_data,
    cuda_native_stream,
    cuda_fused_run,
    NULL, /* solve_plan: the CUDA engine's threads are its kernels' */
    NULL, /* solve_region */
};

/* Every CUDA call of the engine is on the creating thread, whose current
 * device this makes `device` (a distributed run's rank picks its own). */
static int cuda_engine_init(gs_engine *e, int device)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaDeviceProp prop;
    int status = CUDA_CALL(&e->err, cudaSetDevice(device));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGetDeviceProperties(&prop, device));
    if (status != GS_OK) return status;
    c->device = device;
    c->sm_count = prop.multiProcessorCount;
    c->vmm_api = (gs_cuda_vmm_api *)gs_calloc(1, sizeof *c->vmm_api, "driver entry points",
                                              &e->err);
    if (!c->vmm_api) return GS_ERR_NOMEM;
    c->vmm = gs_cuda_vmm_api_load(device, c->vmm_api);
    c->vmm_min_bytes = GS_CUDA_VMM_MIN_BYTES;
    c->vmm_steps = GS_CUDA_VMM_STEPS;
    /* Enough 256-thread blocks to fill every SM (2048 threads each). */
    c->red_blocks = c->sm_count * (prop.maxThreadsPerMultiProcessor / GS_CUDA_BLOCK);
    if (c->red_blocks < 1) c->red_blocks = 1;
    snprintf(e->device_name, sizeof e->device_name, "%.127s", prop.name);
    GS_TRY(gs_cuda_vec_caps(e));

    GS_TRY(CUDA_CALL(&e->err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)));
    {
        /* freed blocks stay in the pool for the next allocation instead of
         * going back to the driver at every synchronisation; the engine's
         * peak counts the bytes it holds, not what the pool keeps */
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetDefaultMemPool(&pool, device)));
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
        GS_TRY(CUDA_CALL(&e->err, cudaFreeHost(c->stage[0])));
        c->stage[0] = NULL;
    }
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(c->S, 0, GS_MAX_SCALARS * sizeof(double), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(c->counter, 0, sizeof(unsigned int), c->stream)));
    GS_TRY(gs_cuda_measure_copy_bandwidth(e));
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

/* The stepped layout's threshold moves with the switches (the sanitizer
 * runs take the stepped layout on small problems this way). */
extern "C" void gs_engine_cuda_set_debug(gs_engine *e, const gs_debug *dbg)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    c->debug = *dbg;
    c->vmm_min_bytes = dbg->has_stepped_min_bytes ? dbg->stepped_min_bytes : GS_CUDA_VMM_MIN_BYTES;
}

extern "C" const gs_debug *gs_engine_cuda_debug(const gs_engine *e)
{
    if (!e || e->ops->kind != GS_ENGINE_CUDA) return NULL;
    return &((const gs_cuda_impl *)e->impl)->debug;
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
    return gs_engine_cuda_create_on(0, out, err);
}

extern "C" int gs_engine_cuda_create_on(int device, gs_engine **out, gs_error *err)
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
    if (device < 0 || device >= count)
        return gs_error_set(err, GS_ERR_UNSUPPORTED, "no CUDA device %d (%d present)", device,
                            count);
    gs_engine *e = (gs_engine *)gs_calloc(1, sizeof *e, "the CUDA engine", err);
    if (!e) return GS_ERR_NOMEM;
    e->ops = &cuda_ops;
    e->impl = gs_calloc(1, sizeof(gs_cuda_impl), "the CUDA engine", err);
    if (!e->impl) {
        free(e);
        return GS_ERR_NOMEM;
    }
    int status = cuda_engine_init(e, device);
    if (status != GS_OK) {
        gs_error_set(err, (gs_status)status, "creating the CUDA engine: %s", e->err.msg);
        (void)cuda_destroy(e, NULL); /* the creation's error is the one reported */
        return status;
    }
    e->device_bytes_peak = e->device_bytes_now;
    *out = e;
    return GS_OK;
}
