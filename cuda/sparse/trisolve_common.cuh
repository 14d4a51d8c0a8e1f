/* trisolve_common.cuh - what the sync-free and block substitutions (trisolve_syncfree.cu,
 * trisolve_blocks.cu) share: the value as the ready flag (x filled with the unset pattern
 * before a solve, each x_i one relaxed 64-bit store), the wait on it, and the end of a
 * launch whose blocks take chunks in ticket order (the fused dot's partials summed in
 * ticket order by the block that finishes the last chunk; the ticket and the counters
 * reset by the last block to leave, so the launch replays from a graph). */
#ifndef GS_TRISOLVE_COMMON_CUH
#define GS_TRISOLVE_COMMON_CUH

#include <cuda/atomic>

#include "gs_dsparse.h"
#include "reduce.cuh"

#define GS_DTRI_UNSET 0xffffffffffffffffull /* the fill's bytes, 0xFF */
#define GS_DTRI_NAN 0x7ff8000000000000ull   /* a computed x_i that equals the fill */

typedef cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> gs_dtri_word_ref;

/* x_j once row j has been solved (gs_dwait_while's polling). */
static __device__ inline double gs_dtri_wait_x(double *x, int32_t j)
{
    const unsigned long long v = gs_dwait_while(reinterpret_cast<unsigned long long *>(x + j),
                                                (unsigned long long)GS_DTRI_UNSET,
                                                cuda::memory_order_relaxed);
    return __longlong_as_double((long long)v);
}

/* x_i = xi, published: one relaxed store, the unset pattern replaced by the canonical NaN
 * so that no reader waits for ever. */
static __device__ inline void gs_dtri_store_x(double *x, int32_t i, double xi)
{
    unsigned long long v = (unsigned long long)__double_as_longlong(xi);
    if (v == GS_DTRI_UNSET) v = GS_DTRI_NAN;
    gs_dtri_word_ref(*reinterpret_cast<unsigned long long *>(x + i)).store(v, cuda::memory_order_relaxed);
}

/* The end of one chunk, by every thread of the block (barriers): its rows are written and,
 * with dot, its partial is in partials[chunk]. The block that finishes the last of chunks
 * (state[1] counts them) sums partials[0 .. chunks) by a fixed tree into *dot: the same
 * bits whatever order the blocks ran in. smem: 32 doubles for the block sum. */
static __device__ inline void gs_dtri_chunk_done(unsigned *state, unsigned chunks,
                                                 const double *partials, double *dot,
                                                 double *smem)
{
    __shared__ bool is_last;
    __syncthreads(); /* every row of this chunk written, and its partial */
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(&state[1], 1u) == chunks - 1;
    }
    __syncthreads();
    if (is_last && dot) { /* uniform: the whole block sums */
        __threadfence();
        double acc = 0.0;
        for (unsigned k = threadIdx.x; k < chunks; k += blockDim.x) acc += __ldcg(&partials[k]);
        acc = gs_block_sum(acc, smem);
        if (threadIdx.x == 0) *dot = acc;
    }
}

/* A block leaves for good (every thread; after its last gs_dtri_chunk_done): the last of
 * the launch's blocks to leave (state[2] counts them) resets the ticket and both counters,
 * once no block can draw a ticket any more. */
static __device__ inline void gs_dtri_block_leaves(unsigned *state)
{
    if (threadIdx.x == 0) {
        __threadfence(); /* this block's draws and counts before its leaving, */
        if (atomicAdd(&state[2], 1u) != gridDim.x - 1) return;
        __threadfence(); /* and every block's before the reset (the memory model's
                            order; the values' dependences give it in practice) */
        state[0] = 0u;
        state[1] = 0u;
        state[2] = 0u;
    }
}

#endif
