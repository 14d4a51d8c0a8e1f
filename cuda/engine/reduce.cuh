/* reduce.cuh - device helpers shared by the engine's kernels: evaluating a
 * gs_coef over the scalar array S, and deterministic reductions (per-block
 * partial sums, then the last block to finish adds the partials in a fixed
 * order; no floating-point atomics, so a dot gives the same bits every run). */
#ifndef GS_REDUCE_CUH
#define GS_REDUCE_CUH

#include "engine_cuda.h"

/* value = c * S[num0] * S[num1] / (S[den0] * S[den1]), a missing slot is 1;
 * a zero denominator gives 0. The same operations, in the same order, as the
 * CPU engine's coef_eval, so both engines see identical coefficients. */
__device__ __forceinline__ double gs_coef_eval(const gs_coef k, const double *__restrict__ S)
{
    double v = k.c;
    if (k.num0 >= 0) v *= S[k.num0];
    if (k.num1 >= 0) v *= S[k.num1];
    double d = 1.0;
    if (k.den0 >= 0) d *= S[k.den0];
    if (k.den1 >= 0) d *= S[k.den1];
    return d == 0.0 ? 0.0 : v / d;
}

__device__ __forceinline__ double gs_warp_sum(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v; /* lane 0 holds the sum */
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the
 * result is valid in thread 0. Fixed tree: deterministic. */
__device__ __forceinline__ double gs_block_sum(double v, double *smem /* >= 32 */)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = gs_warp_sum(v);
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x >> 5;
    v = threadIdx.x < nwarps ? smem[threadIdx.x] : 0.0;
    if (warp == 0) v = gs_warp_sum(v);
    __syncthreads(); /* smem may be reused by the caller */
    return v;
}

/* K per-thread values (k <= K of them used), block-reduced with one
 * barrier: each warp shuffles its k sums, then warp w adds the warps' sums
 * of values w, w + 8, ...; partials[j * gridDim.x + blockIdx.x] receives
 * block sum j. The last block to arrive (ticket counter) adds the partials
 * of every block, in block order, and writes out[j]: for k = 1 with the
 * whole block, for k > 1 one warp per value. It resets the counter, so the
 * next reduction (or a graph replay) starts at 0. Fixed trees throughout:
 * the same inputs give the same bits. */
template <int K>
__device__ void gs_reduce_finish(double (&v)[K], int k, double *__restrict__ partials,
                                 unsigned int *counter, double *out)
{
    __shared__ double smem[K][32];
    __shared__ bool is_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int j = 0; j < K; j++) {
        if (j < k) {
            const double s = gs_warp_sum(v[j]);
            if (lane == 0) smem[j][warp] = s;
        }
    }
    __syncthreads();
    for (int j = warp; j < k; j += nwarps) {
        double s = lane < nwarps ? smem[j][lane] : 0.0;
        s = gs_warp_sum(s);
        if (lane == 0) {
            partials[(size_t)j * gridDim.x + blockIdx.x] = s;
            __threadfence(); /* visible device-wide before the ticket below */
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    if (k == 1) {
        double s = 0.0;
        for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
            s += __ldcg(&partials[b]); /* L2: never a stale L1 line */
        s = gs_block_sum(s, &smem[0][0]);
        if (threadIdx.x == 0) out[0] = s;
    } else {
        for (int j = warp; j < k; j += nwarps) {
            double s = 0.0;
            for (unsigned b = lane; b < gridDim.x; b += 32)
                s += __ldcg(&partials[(size_t)j * gridDim.x + b]);
            s = gs_warp_sum(s);
            if (lane == 0) out[j] = s;
        }
    }
    if (threadIdx.x == 0) *counter = 0u;
}

/* The single-value case. */
__device__ __forceinline__ void gs_reduce_finish1(double v, double *__restrict__ partials,
                                                  unsigned int *counter, double *out)
{
    double a[1] = {v};
    gs_reduce_finish<1>(a, 1, partials, counter, out);
}

#endif
