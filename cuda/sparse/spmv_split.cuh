/* spmv_split.cuh - split long rows (row splitting, as CSR-VectorL in Greathouse and Daga,
 * SC 2014) inside the vector-CSR kernel (spmv.cu): the chunks of the long rows, a warp a
 * chunk, and the dot's last-block finish that adds the long rows' terms; long_rows.cu has the
 * rule and the lists. Deterministic: fixed trees and fixed orders only. Included by spmv.cu
 * and spmv_long.cu (spmv_store). */
#ifndef GS_SPMV_SPLIT_CUH
#define GS_SPMV_SPLIT_CUH

#include "layout.h"
#include "reduce.cuh"

/* The epilogue of row `row`, shared by every SpMV kernel (spmv.cu,
 * spmv_long.cu): y_row = sum (plus sum w_row to the dot), or
 * y_row = a sum + b y_row (y not read if b = 0, as the CPU engine). */
template <int MODE>
__device__ __forceinline__ double spmv_store(const spmv_epilogue &ep, int64_t row, double sum,
                                             double a, double b)
{
    if (MODE == SPMV_AXPBY) {
        ep.y[row] = b == 0.0 ? a * sum : a * sum + b * ep.y[row];
        return 0.0;
    }
    ep.y[row] = sum;
    return MODE == SPMV_DOT ? sum * ep.w[row] : 0.0;
}

struct split_args {
    int64_t n_chunks, n_long;
    const int32_t *__restrict__ long_row;
    const int64_t *__restrict__ chunk_ptr;
    const int32_t *__restrict__ chunk_row;
    double *chunk_sum, *row_dot;
    unsigned int *ticket;
};

/* Chunk c of LONG_CHUNK entries of long row k, by one warp (8 loads a
 * lane, all independent); lane 0 stores the chunk's warp sum and takes a
 * ticket of the row; the warp that takes the row's last ticket adds the
 * row's chunk sums (lane l those l, l + 32, ..., then the warp's fixed
 * tree: the same order whichever warp it is), writes the row's epilogue
 * (its dot term to row_dot[k]) and resets the ticket for the next
 * product. Called by whole warps. */
template <typename V, int MODE>
__device__ __forceinline__ void split_chunk(const split_args &A, const int64_t *__restrict__ row_ptr,
                                            const int32_t *__restrict__ col,
                                            const V *__restrict__ val,
                                            const double *__restrict__ x, const spmv_epilogue &ep,
                                            int64_t c, int lane, double a, double b)
{
    const int32_t k = A.chunk_row[c];
    const int64_t c0 = A.chunk_ptr[k], c1 = A.chunk_ptr[k + 1];
    const int32_t row = A.long_row[k];
    const int64_t end_row = row_ptr[row + 1];
    const int64_t beg = row_ptr[row] + (c - c0) * LONG_CHUNK;
    const int64_t end = beg + LONG_CHUNK < end_row ? beg + LONG_CHUNK : end_row;
    double sum = 0.0;
#pragma unroll
    for (int q = 0; q < LONG_CHUNK / 32; q++) {
        const int64_t j = beg + q * 32 + lane;
        if (j < end) sum = fma((double)__ldg(val + j), __ldg(x + __ldg(col + j)), sum);
    }
    sum = gs_warp_sum(sum);
    unsigned int done = 0;
    if (lane == 0) {
        A.chunk_sum[c] = sum;
        __threadfence(); /* the sum is visible device-wide before the ticket */
        done = atomicAdd(A.ticket + k, 1u);
    }
    done = __shfl_sync(0xffffffffu, done, 0);
    if (done != (unsigned int)(c1 - c0 - 1)) return; /* not the row's last chunk */
    __syncwarp();
    __threadfence();
    double total = 0.0;
    for (int64_t q = c0 + lane; q < c1; q += 32) total += __ldcg(A.chunk_sum + q);
    total = gs_warp_sum(total);
    if (lane == 0) {
        A.ticket[k] = 0u;
        const double d = spmv_store<MODE>(ep, row, total, a, b);
        if (MODE == SPMV_DOT) {
            A.row_dot[k] = d;
            __threadfence(); /* before this block's ticket in split_reduce_finish */
        }
    }
}

/* gs_reduce_finish1 (reduce.cuh) with the long rows' dot terms: every
 * block's partial sum, then the last block to arrive adds the partials
 * and row_dot[0..n_long) (written by warps of blocks that have all
 * arrived), each thread a fixed share, the block's fixed tree: the same
 * bits whichever block is last. Resets the counter. */
__device__ __forceinline__ void split_reduce_finish(double v, const double *row_dot, int64_t n_long,
                                                    double *__restrict__ partials,
                                                    unsigned int *counter, double *out)
{
    __shared__ double smem[32];
    __shared__ bool is_last;
    v = gs_block_sum(v, smem);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    double s = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(&partials[b]);
    for (int64_t k = threadIdx.x; k < n_long; k += blockDim.x) s += __ldcg(&row_dot[k]);
    s = gs_block_sum(s, smem);
    if (threadIdx.x == 0) {
        out[0] = s;
        *counter = 0u;
    }
}

#endif
