/* engine_cuda_stub.c - the CUDA engine's entry points in a CPU-only build
 * (make CUDA=0): no device, and a clear message for anyone who asks. */
#include "engine.h"

int gs_engine_cuda_create(gs_engine **out, gs_error *err)
{
    *out = NULL;
    return gs_error_set(err, GS_ERR_UNSUPPORTED,
                        "this gpusolve was built without CUDA (make CUDA=0); "
                        "rebuild with the CUDA toolkit for --engine cuda");
}

int gs_engine_cuda_create_on(int device, gs_engine **out, gs_error *err)
{
    (void)device;
    return gs_engine_cuda_create(out, err);
}

int gs_cuda_device_count(void) { return 0; }

void gs_engine_cuda_set_debug(gs_engine *e, const struct gs_debug *dbg)
{
    (void)e;
    (void)dbg;
}

const struct gs_debug *gs_engine_cuda_debug(const gs_engine *e)
{
    (void)e;
    return NULL;
}
