/* trisolve_syncfree.cu - synchronisation-free triangular substitution: one launch, a warp a
 * row, each row waiting on ready flags of the rows it depends on (the MIC paper's GPUFBS,
 * blocks that spin until their neighbours have written; for any pattern as in Liu, Li,
 * Hogg, Vinter, "A synchronization-free algorithm for parallel sparse triangular solves",
 * Euro-Par 2016).
 *
 * No deadlock: a block draws a ticket (state[1]) when it starts and takes the rows at that
 * place of the dependency order (increasing rows for a lower T, decreasing for an upper
 * one). A row waits only on rows earlier in that order: rows of blocks that drew earlier
 * tickets, which are resident or done, or of its own block's other warps; never on a lane
 * of its own warp. By induction on the ticket every wait ends, whatever order the hardware
 * starts blocks in.
 *
 * No reset between solves: a flag holds the epoch (state[0] + 1) of the solve that wrote
 * it; the last block to finish (state[2] counts them) stores the new epoch and zeroes the
 * ticket and the count. Every solve writes every flag, so a flag holds the current or the
 * previous epoch, never a stale equal one, even when the counter wraps. The kernel's
 * arguments never change, so it can be captured in a graph and replayed. */
#include <cuda/atomic>

#include "gs_dsparse.h"

#define SYNCFREE_WARPS 8 /* rows (warps) a 256-thread block */
#define FULL_MASK 0xffffffffu

typedef cuda::atomic_ref<unsigned, cuda::thread_scope_device> flag_ref;

__global__ void tri_syncfree_kernel(int32_t n, bool upper, const int64_t *__restrict__ rp,
                                    const int32_t *__restrict__ col,
                                    const double *__restrict__ val, bool unit,
                                    const double *__restrict__ s, const double *__restrict__ b,
                                    double *x, unsigned *ready, unsigned *state)
{
    __shared__ unsigned block, epoch;
    if (threadIdx.x == 0) {
        block = atomicAdd(&state[1], 1u);
        epoch = flag_ref(state[0]).load(cuda::memory_order_relaxed) + 1u;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int64_t pos = (int64_t)block * SYNCFREE_WARPS + (threadIdx.x >> 5);
    if (pos < n) {
        const int32_t i = upper ? (int32_t)(n - 1 - pos) : (int32_t)pos;
        double sum = 0.0, diag = 0.0;
        for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) {
            const int32_t j = col[p];
            if (j == i) {
                diag = val[p];
            } else if (upper ? j > i : j < i) {
                flag_ref f(ready[j]);
                while (f.load(cuda::memory_order_acquire) != epoch) __nanosleep(10);
                sum += val[p] * __ldcg(x + j); /* from L2: x_j was written by another SM */
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            sum += __shfl_xor_sync(FULL_MASK, sum, o);
            diag += __shfl_xor_sync(FULL_MASK, diag, o);
        }
        if (lane == 0) {
            __stcg(x + i, ((s ? s[i] : 1.0) * b[i] - sum) / (unit ? 1.0 : diag));
            flag_ref(ready[i]).store(epoch, cuda::memory_order_release);
        }
    }
    __syncthreads(); /* every row of this block written */
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&state[2], 1u) == gridDim.x - 1) { /* the last block: all others done */
            state[1] = 0u;
            state[2] = 0u;
            flag_ref(state[0]).store(epoch, cuda::memory_order_release);
        }
    }
}

int gs_dtri_solve_syncfree(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                           const double *s, const double *b, double *x)
{
    return CUDA_LAUNCH(&e->err, tri_syncfree_kernel, gs_dblocks(t->n, SYNCFREE_WARPS),
                       32 * SYNCFREE_WARPS, 0, gs_cuda_of(e)->stream, t->n, (bool)t->upper,
                       t->rp, t->col, val, (bool)unit, s, b, x, t->ready, t->state);
}

int gs_dtri_solve(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                  int unit, const double *s, const double *b, double *x)
{
    if (how == GS_DTRI_SYNCFREE) return gs_dtri_solve_syncfree(e, t, val, unit, s, b, x);
    return gs_dtri_solve_levels(e, t, val, unit, s, b, x);
}
