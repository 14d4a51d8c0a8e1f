/* isai_cuda.h - internals shared by the CUDA setup of ISAI (cuda/precond/isai.cu:
 * driver, back-scaling, engine matrices; isai_ilu0.cu: scaling and ILU(0);
 * isai_generate.cu: the batched generation of M_L, M_U). Anzt, Chow, Huckle,
 * Dongarra, "Batched generation of incomplete sparse approximate inverses on
 * GPUs", ScalA 2016. C++ only (nvcc). */
#ifndef GS_ISAI_CUDA_H
#define GS_ISAI_CUDA_H

#include "engine_cuda.h"
#include "gs_dsparse.h"

extern "C" {
#include "isai.h"
#include "precond.h"
}

/* Column lengths the generation kernels take (isai_generate.cu): up to
 * ISAI_GROUP_MAX one group of lanes of a warp (4, 8, 16 or 32 lanes), up to
 * ISAI_BLOCK_MAX one 256-thread block with each thread's rows in registers
 * and x_q broadcast through shared memory. Longer columns (or longer than
 * gs_debug.isai_excess_above) form one block-diagonal sparse "excess"
 * system T(J_b, J_b) x_b = e, solved by the toolkit's sync-free triangular
 * solve: cost O(nnz(T(J_b, J_b))), not O(|J_b|^2). */
#define ISAI_GROUP_MAX 32
#define ISAI_BLOCK_THREADS 256
#define ISAI_BLOCK_ROWS_MAX 16 /* rows a thread holds in the register path */
#define ISAI_BLOCK_MAX (ISAI_BLOCK_THREADS * ISAI_BLOCK_ROWS_MAX)

/* Lanes a row in the row-wise kernels of the scalings and checks (256-thread
 * blocks): 4 where the mean row length is at most 4, 8 up to 8, else 32. A
 * warp a row on a 7-point stencil left 25 of 32 lanes idle and held 8k rows
 * in flight against a chain of about four dependent loads a row: latency-bound,
 * about 0.5 ms a pass at 2M rows. */
static inline int isai_row_lanes(int32_t n, int64_t nnz)
{
    const double mean = n > 0 ? (double)nnz / n : 1.0;
    return mean <= 4.0 ? 4 : mean <= 8.0 ? 8 : 32;
}

/* The instance of a LANES-templated row kernel for isai_row_lanes' value. */
#define ISAI_ROW_KERNEL(kernel, lanes)                                                             \
    ((lanes) == 4 ? kernel<4> : (lanes) == 8 ? kernel<8> : kernel<32>)

/* The lanes of this thread's group of LANES within its warp. */
template <int LANES>
static __device__ inline unsigned isai_group_mask()
{
    return LANES == 32 ? 0xffffffffu
                       : ((1u << LANES) - 1u) << ((threadIdx.x & 31) / LANES * LANES);
}

/* W = S A S (scale) or A, on A's pattern (W's rp and col alias dA's, W's
 * values are its own), s = diag(|a_ii|)^-1/2 (scale; n doubles, allocated
 * here, else NULL), and diag = the position of each a_ii (n int64,
 * allocated here). *bad (host) = the lowest 1-based row whose diagonal is
 * missing (or, when scaling, zero or not finite), 0 if none: one host round
 * trip. Stage "scaling" (timed by the caller). */
int isai_cuda_scale(gs_engine *e, const gs_dcsr *dA, int scale, gs_dcsr *W, double **s,
                    int64_t **diag, int *bad);

/* ILU(0) in place on W's values (sorted rows; A: the host's CSR of the same
 * pattern, whose rows give L's levels where they are thin, or NULL) on pc's engine: sweeps
 * fixed-point sweeps (sweeps > 0; Chow-Patel, Jacobi order, the CPU
 * reference's arithmetic), else exact: cuSPARSE's csrilu02 (cusparse) or our
 * IKJ, the reference's operations per entry in its order, scheduled by L's
 * levels: one sync-free launch or a launch a level (*scheme = "syncfree" or
 * "levels", by the rule of isai_ilu0.cu or the engine's debug.factor_scheme;
 * NULL for sweeps and cuSPARSE). *bad = the lowest 1-based row with a
 * non-finite factor entry or a zero pivot, 0 if none (one host round trip).
 * GS_ERR_TIME_LIMIT (err names the stage "ilu0") once pc's deadline has
 * passed: with a launch a level, asked every 256 launches (the host's clock
 * only, no added wait); else the stage's end asks. */
int isai_cuda_ilu0(gs_pc *pc, const gs_csr *A, gs_dcsr *W, const int64_t *diag, int sweeps,
                   int cusparse, const char **scheme, int *bad, gs_error *err);

/* What one generation did: the longest column of M; the columns solved in
 * the excess system and its entries (sum of nnz(T(J_b, J_b))); the lowest
 * 1-based column with a non-finite value, 0 if none. */
typedef struct isai_generate_info {
    int64_t longest, excess_columns, excess_nnz;
    int32_t bad_column;
} isai_generate_info;

/* M ~ T^-1 on the pattern of |T|^k (T = L unit lower with its diagonal
 * stored, lower = 1; or U, lower = 0), one small triangular solve per
 * column. M allocated here. pc (may be NULL: no limit) gives the run's
 * --time-limit, asked where the host waits for the device anyway: past it,
 * GS_ERR_TIME_LIMIT in err (device failures go to e->err), naming stage
 * "isai L" or "isai U"; everything allocated here is freed. */
int isai_cuda_generate(gs_engine *e, gs_pc *pc, const gs_dcsr *T, int lower, int k, gs_dcsr *M,
                       isai_generate_info *info, gs_error *err);

#endif
