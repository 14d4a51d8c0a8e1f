/* small.cu - the engine op small_run: the Krylov methods' small dense work
 * (src/engine/small.h) in one thread on the device, on S where it lives, so
 * no slot crosses to the host and a captured loop runs it. */
#include "engine_ops.h"

#include "small.h" /* static inline only: no linkage to declare */

__global__ void small_kernel(double *S, gs_small op)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) gs_small_exec(&op, S);
}

int cuda_small_run(gs_engine *e, const gs_small *op)
{
    if (!gs_small_valid(op, GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda small_run: operation %d (j %d, m %d, "
                            "slots from %d) out of range", op->kind, op->j, op->m, op->base);
    gs_cuda_impl *c = gs_cuda_of(e);
    return CUDA_LAUNCH(&e->err, small_kernel, 1, 32, 0, c->stream, c->S, *op);
}
