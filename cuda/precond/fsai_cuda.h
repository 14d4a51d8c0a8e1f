/* fsai_cuda.h - internals shared by the CUDA setup of FSAI (cuda/precond/fsai.cu:
 * driver, prefilter, postfilter, the transpose by the toolkit; fsai_pattern.cu: the
 * pattern recursion; fsai_factor.cu: gather and batched Cholesky).
 * Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016,
 * section 4. C++ only (nvcc). */
#ifndef GS_FSAI_CUDA_H
#define GS_FSAI_CUDA_H

#include "engine_cuda.h"
#include "gs_dsparse.h"

extern "C" {
#include "fsai.h"
#include "precond.h"
}

/* Warp helpers for work laid end to end over the lanes: lane l holds incl,
 * the inclusive prefix sum of its item count (nondecreasing over lanes).
 * fsai_lane_of(incl, q) = the lane j with incl_{j-1} <= q < incl_j, found by
 * binary lifting over the lanes: the number of lanes l < 31 with
 * incl_l <= q (every lane must call it; q past the total gives 31). */
static __device__ __forceinline__ int fsai_lane_of(int64_t incl, int64_t q)
{
    int j = 0;
#pragma unroll
    for (int step = 16; step > 0; step >>= 1) {
        const int64_t v = __shfl_sync(0xffffffffu, incl, j + step - 1);
        if (v <= q) j += step;
    }
    return j;
}

/* Position of column j in the sorted cols[0..m), or -1. */
static __device__ inline int64_t fsai_find_col(const int32_t *__restrict__ cols, int64_t m,
                                               int32_t j)
{
    int64_t a = 0, b = m - 1;
    while (a <= b) {
        const int64_t mid = a + (b - a) / 2;
        if (cols[mid] == j) return mid;
        if (cols[mid] < j) a = mid + 1;
        else b = mid - 1;
    }
    return -1;
}

/* Branch-free binary searches, FSAI_SEARCH_WAYS interleaved so that their
 * memory latencies overlap: lo[u] = the number of entries of sorted[0..len)
 * below key[u]; top = the largest power of two <= len (or any power of two
 * above it). The key is found where lo[u] < len && sorted[lo[u]] == key[u].
 * Four: the postfilter's z^T A z on the 27-point tau=0.01 k=2 case took
 * 15.5 ms, 32.5 with two (docs/perf-notebook.md, v6 e). */
#define FSAI_SEARCH_WAYS 4
static __device__ __forceinline__ void fsai_search_ways(const int32_t *__restrict__ sorted, int len,
                                                        int top,
                                                        const int32_t (&key)[FSAI_SEARCH_WAYS],
                                                        int (&lo)[FSAI_SEARCH_WAYS])
{
#pragma unroll
    for (int u = 0; u < FSAI_SEARCH_WAYS; u++) lo[u] = 0;
    for (int step = top; step > 0; step >>= 1)
#pragma unroll
        for (int u = 0; u < FSAI_SEARCH_WAYS; u++)
            if (lo[u] + step <= len && sorted[lo[u] + step - 1] < key[u]) lo[u] += step;
}

/* Inclusive prefix sum of v over the lanes of a full warp. */
static __device__ __forceinline__ int64_t fsai_warp_inclusive_scan(int64_t v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int64_t u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

/* S = 1NZ(L_k) of Algorithm 4.1 from the prefiltered Ã (full rows, sorted),
 * its lower bandwidth bw = max_r (r - the first column of row r), and L_1 =
 * Low(Ã) (taken over by the call: freed or returned as S). Rows of S sorted.
 * Device workspace for the warps' maps is bounded, never all free memory.
 * *m_max: the longest row of S where a product read it back along with its
 * flags, else -1. */
int fsai_cuda_pattern(gs_engine *e, const gs_dcsr *At, gs_dcsr *L1, long k, int64_t bw,
                      gs_dcsr *S, int64_t *m_max);

/* --max-row N >= 1 (docs/fsai.md, "Capping the pattern"), called where S
 * has a row longer than N: every such row keeps its diagonal and the N - 1
 * off-diagonal entries of largest gs_fsai_cap_key (of equal keys the
 * smaller columns), in column order; rows of at most N entries are copied
 * unchanged. S (rows sorted) is replaced. A: A's CSR (rows sorted), diag:
 * diag(A), both on the device. *capped: the rows cut, read back with the
 * new size in one host round trip. */
int fsai_cuda_cap(gs_engine *e, const gs_dcsr *A, const double *diag, int64_t N, gs_dcsr *S,
                  int64_t *capped);

/* Ĝ on the pattern S: row i solves A[P_i,P_i] w = e_m (3.6) and keeps
 * g = w / sqrt(w_m) (3.7); S->val then holds the values (float for
 * GS_FP32, else double) and S->vsize their size. Times the stages "gather"
 * and "factorisation" on pc (fused: systems that fit shared memory gathered
 * by the factorisation kernels, their gather timed with the factorisation);
 * m_known: the largest m_i if known (the pattern read it), else -1: known,
 * and every system gathered fused, the plan stays on the device (no host
 * round trip; *plan_on_device = 1); *m_max = the largest m_i;
 * *large_systems = the systems of the largest size class (too large for
 * shared memory, or forced by the switch fsai_gemm_min), *large_gemm = 1
 * where they took fsai_cuda_factor_gemm (else the block kernel). *fail
 * (device, the caller frees it, 8 bytes):
 * ~0, or (row << 32 | pivot) of the smallest row whose system had a pivot
 * that is not positive; it is not read here, so that the postfilter's one
 * host read takes it along (fsai_factor_failure words the error).
 * --time-limit: checked at each chunk's end and, where a deadline is set,
 * between pieces of a class with much work (GS_ERR_TIME_LIMIT, err naming
 * the stage). */
int fsai_cuda_factor(gs_pc *pc, const gs_dcsr *A, gs_dcsr *S, gs_precision prec,
                     int fused, int64_t m_known, int64_t *m_max, int *plan_on_device,
                     int64_t *large_systems, int *large_gemm, unsigned long long **fail,
                     gs_error *err);

/* The large-system path of fsai_cuda_factor (fsai_factor_gemm.cu), fp64:
 * the systems of rows order[j0..j1) (device), grouped in buckets of sizes
 * rounded up to a multiple of 64 (identity padding), gathered dense into
 * strided batches within a memory budget, factored by a blocked
 * right-looking Cholesky whose panel and trailing updates are
 * cublasDgemmStridedBatched calls, and solved for g (values written at
 * S's row offsets in g, as fsai_cuda_factor's other paths). A pivot that
 * is not positive is recorded in *fail as theirs. Times the stages
 * "gather" and "factorisation" on pc; the time limit checked a chunk. */
int fsai_cuda_factor_gemm(gs_pc *pc, const gs_dcsr *A, const gs_dcsr *S, const int32_t *order,
                          int32_t j0, int32_t j1, double *g, unsigned long long *fail);

/* GS_ERR_NUMERIC in err for the failure record key of fsai_cuda_factor,
 * naming the row (1-based) as the CPU reference does. */
int fsai_factor_failure(gs_engine *e, const gs_dcsr *S, unsigned long long key, gs_error *err);

#endif
