/* fsai_factor_gemm.cu - FSAI's large local systems A[P_i,P_i] w = e_m,
 * g_i = w / sqrt(w_m), by a blocked right-looking Cholesky over strided
 * batches whose flops are batched DGEMMs (tensor cores).
 * Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016,
 * (3.5)-(3.7); the blocked factorisation as in LAPACK's dpotrf (right-looking,
 * the diagonal block inverted so that the panel solve is a product, as
 * MAGMA's batched trsm does).
 *
 * Systems are grouped in buckets of mb = m rounded up to a multiple of NB;
 * each is stored dense, row-major, mb x mb, its lower triangle A[P,P] and
 * the identity on the padding (rows and columns m .. mb-1), which leaves
 * the factor of the real part unchanged: L = [L_A 0; 0 I]. Per panel
 * k0 = 0, NB, ... (k1 = k0 + NB):
 *   L11 = chol(A11), Linv = L11^-1       (gemm_diag_kernel, a block a system)
 *   L21 = A21 Linv^T                     (DGEMM, A21 copied to W first)
 *   A22 = A22 - L21 L21^T                (DGEMM on the whole square: 2x the
 *                                         syrk's flops, one call a panel)
 * then g = L^-T e_m (the solve of gemm_solve_kernel): with A = L L^T,
 * w = A^-1 e_m and w_m = 1 / l_mm^2, so g = w / sqrt(w_m) = L^-T e_m,
 * zero on the padding. A pivot that is not positive is recorded with the
 * same key as fsai_factor.cu's paths (row << 32 | pivot, the smallest
 * wins), so fsai_factor_failure words the same message. */
#include <limits.h>
#include <stdlib.h>

#include "fsai_cuda.h"

#define GEMM_NB 64        /* panel width: the diagonal block's kernel holds NB x NB */
#define GEMM_THREADS 256  /* threads of the gather and diagonal-block kernels */
#define SOLVE_THREADS 128 /* threads of the back substitution */
/* dense bytes of a chunk's systems: at most this, and a quarter of free memory */
#define GEMM_BUDGET_MAX ((size_t)2 << 30)

/* The values a system of bucket mb takes in the chunk's buffers: the dense
 * matrix, the copy of A21 (at most mb - NB rows) and Linv. */
static size_t gemm_system_values(int64_t mb)
{
    return (size_t)(mb * mb + (mb - GEMM_NB) * GEMM_NB + GEMM_NB * GEMM_NB);
}

/* m of each system of the work list's range. */
__global__ void gemm_sizes_kernel(int32_t count, const int32_t *__restrict__ order,
                                  const int64_t *__restrict__ s_rp, int32_t *__restrict__ ms)
{
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= count) return;
    const int32_t i = order[j];
    ms[j] = (int32_t)(s_rp[i + 1] - s_rp[i]);
}

/* System s = blockIdx.x (row rows[s]): the mb x mb buffer zeroed with the
 * identity on the padding, then the lower triangle a_{P_r,P_c}, c <= r:
 * a warp a row r walks row P_r of A (sorted) up to its diagonal, each lane
 * an entry, and finds its column in P[0..r] (sorted) by a binary search.
 * The upper triangle stays zero (read by the trailing DGEMMs, never used). */
__global__ void __launch_bounds__(GEMM_THREADS)
    gemm_gather_kernel(int mb, const int32_t *__restrict__ rows, const int64_t *__restrict__ s_rp,
                       const int32_t *__restrict__ s_col, const int64_t *__restrict__ a_rp,
                       const int32_t *__restrict__ a_col, const double *__restrict__ a_val,
                       double *__restrict__ M)
{
    const int32_t row = rows[blockIdx.x];
    const int64_t p0 = s_rp[row];
    const int m = (int)(s_rp[row + 1] - p0);
    const int32_t *P = s_col + p0;
    double *Ms = M + (size_t)blockIdx.x * mb * mb;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* a warp a row (no division per element: ~7 GB of them on the
     * power-law case) */
    for (int r = warp; r < mb; r += GEMM_THREADS / 32)
        for (int c = lane; c < mb; c += 32) Ms[(size_t)r * mb + c] = r == c && r >= m ? 1.0 : 0.0;
    __syncthreads();
    for (int r = warp; r < m; r += GEMM_THREADS / 32) {
        const int32_t pr = P[r];
        const int64_t q1 = a_rp[pr + 1];
        for (int64_t q = a_rp[pr] + lane; q < q1; q += 32) {
            const int32_t col = a_col[q];
            if (col > pr) break; /* past the diagonal: the upper part */
            const int64_t k = fsai_find_col(P, r + 1, col);
            if (k >= 0) Ms[(size_t)r * mb + k] = a_val[q];
        }
    }
}

/* The panel k0 of system s = blockIdx.x: its diagonal block A11 (NB x NB,
 * in shared memory) factored in place, L11 L11^T = A11, by the
 * right-looking steps l_jj = sqrt(a_jj), l_ij = a_ij / l_jj,
 * a_ic -= l_ij l_cj (j < c <= i); Linv = L11^-1 by columns (thread t:
 * column t, x_i = -(sum_{t<=k<i} l_ik x_k) / l_ii, kept in the unused
 * upper triangle of the tile); then L11 written back, Linv to Wi (row
 * major, zero above the diagonal) and A21 (the rows below, columns of the
 * panel) copied to W for the DGEMM L21 = A21 Linv^T, which must not read
 * and write the same memory. The first pivot that is not positive is
 * recorded (a NaN after it carries on harmlessly: later pivots have larger
 * keys, and the system is its own batch entry). */
__global__ void __launch_bounds__(GEMM_THREADS)
    gemm_diag_kernel(int mb, int k0, const int32_t *__restrict__ rows,
                     const int64_t *__restrict__ s_rp, double *__restrict__ M,
                     double *__restrict__ Wi, double *__restrict__ W, unsigned long long *fail)
{
    constexpr int B = GEMM_NB;
    __shared__ double L[B][B + 1];
    __shared__ double dinv[B];
    __shared__ int bad;
    const int t = threadIdx.x;
    const int32_t row = rows[blockIdx.x];
    const int m = (int)(s_rp[row + 1] - s_rp[row]);
    const int k1 = k0 + B, below = mb - k1;
    double *Ms = M + (size_t)blockIdx.x * mb * mb;
    for (int q = t; q < B * B; q += GEMM_THREADS) {
        const int r = q / B, c = q % B;
        L[r][c] = c <= r ? Ms[(size_t)(k0 + r) * mb + k0 + c] : 0.0;
    }
    if (t == 0) bad = B;
    __syncthreads();
    for (int j = 0; j < B; j++) {
        const double d = L[j][j];
        const double ljj = sqrt(d);
        if (t == 0 && bad == B && !(d > 0.0 && isfinite(d))) bad = j;
        __syncthreads(); /* every thread has read a_jj */
        for (int i = j + t; i < B; i += GEMM_THREADS) L[i][j] = i == j ? ljj : L[i][j] / ljj;
        __syncthreads();
        const int w = B - j - 1;
        for (int q = t; q < w * w; q += GEMM_THREADS) {
            const int i = j + 1 + q / w, c = j + 1 + q % w;
            if (c <= i) L[i][c] -= L[i][j] * L[c][j];
        }
        __syncthreads();
    }
    if (t < B) { /* column t of Linv: x_i at L[t][i] (i > t), x_t in dinv */
        const double xt = 1.0 / L[t][t];
        dinv[t] = xt;
        for (int i = t + 1; i < B; i++) {
            double acc = L[i][t] * xt;
            for (int k = t + 1; k < i; k++) acc += L[i][k] * L[t][k];
            L[t][i] = -acc / L[i][i];
        }
    }
    __syncthreads();
    double *Wis = Wi + (size_t)blockIdx.x * B * B;
    for (int q = t; q < B * B; q += GEMM_THREADS) {
        const int r = q / B, c = q % B;
        if (c <= r) Ms[(size_t)(k0 + r) * mb + k0 + c] = L[r][c];
        Wis[q] = c < r ? L[c][r] : c == r ? dinv[r] : 0.0;
    }
    double *Ws = W + (size_t)blockIdx.x * (mb - B) * B;
    for (int64_t q = t; q < (int64_t)below * B; q += GEMM_THREADS) {
        const int64_t i = q / B, c = q - i * B;
        Ws[q] = Ms[(size_t)(k1 + i) * mb + k0 + c];
    }
    /* a pivot of the padding fails only after one of the real part */
    if (t == 0 && bad < B && k0 + bad < m)
        atomicMin(fail, ((unsigned long long)(uint32_t)row << 32) | (unsigned long long)(k0 + bad));
}

/* L^T g = e_{m-1} by back substitution on the factored system s =
 * blockIdx.x (L(r, c) = Ms[r mb + c], c <= r), its real rows only (g is
 * zero on the padding): g_K = ([K = m-1] - sum_{i>K} l_iK g_i) / l_KK. In
 * blocks of 32 rows from the bottom, as fsai_factor.cu's factor_back_subst:
 * warp 0 solves the block, lane j holding row K0 + j's sum and its column
 * of the block (coalesced reads of the block's rows), each g_j broadcast by
 * a shuffle; then every thread adds the block's terms to its rows above
 * (row r reads l_{K0+j, r}: consecutive r, consecutive addresses). y, the
 * sums and then g, is the system's row of G. */
__global__ void __launch_bounds__(SOLVE_THREADS)
    gemm_solve_kernel(int mb, const int32_t *__restrict__ rows, const int64_t *__restrict__ s_rp,
                      const double *__restrict__ M, double *__restrict__ g)
{
    __shared__ double gblk[32];
    const int32_t row = rows[blockIdx.x];
    const int m = (int)(s_rp[row + 1] - s_rp[row]);
    const double *Ms = M + (size_t)blockIdx.x * mb * mb;
    double *y = g + s_rp[row];
    const int lane = threadIdx.x & 31;
    for (int r = threadIdx.x; r < m; r += SOLVE_THREADS) y[r] = 0.0;
    __syncthreads();
    for (int K1 = m; K1 > 0; K1 -= 32) {
        const int K0 = K1 > 32 ? K1 - 32 : 0, nb = K1 - K0;
        if (threadIdx.x < 32) {
            const int r = K0 + lane;
            const bool in = lane < nb;
            const double d = in ? Ms[(size_t)r * mb + r] : 1.0;
            const double inv = 1.0 / d, rhs = r == m - 1 ? 1.0 : 0.0;
            double u[32]; /* u[j] = l_{K0+j, r}, j > lane */
#pragma unroll
            for (int j = 0; j < 32; j++)
                u[j] = j < nb && lane < j ? Ms[(size_t)(K0 + j) * mb + r] : 0.0;
            double acc = in ? y[r] : 0.0, gr = 0.0;
#pragma unroll
            for (int j = 31; j >= 0; j--) {
                if (j >= nb) continue; /* the same in every lane */
                if (lane == j) gr = (rhs - acc) * inv;
                acc += u[j] * __shfl_sync(0xffffffffu, gr, j);
            }
            if (in) {
                y[r] = gr;
                gblk[lane] = gr;
            }
        }
        __syncthreads();
        for (int r = threadIdx.x; r < K0; r += SOLVE_THREADS) {
            double acc = y[r];
            for (int j = 0; j < nb; j++) acc += Ms[(size_t)(K0 + j) * mb + r] * gblk[j];
            y[r] = acc;
        }
        __syncthreads();
    }
}

/* One bucket's chunk: `count` systems of size mb (rows d_rows), in M, W, Wi. */
typedef struct gemm_chunk {
    int64_t mb;
    int32_t start, count; /* into the bucket-sorted rows */
} gemm_chunk;

/* The host plan: the systems' sizes read back, the rows sorted by bucket
 * (a counting sort, rows ascending within a bucket), and cut into chunks
 * of at most `budget` bytes (at least one system each). */
static int gemm_plan(gs_engine *e, const gs_dcsr *S, const int32_t *order, int32_t count,
                     int32_t **rows_sorted, gemm_chunk **chunks, int32_t *nchunks)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    int32_t *d_ms = NULL, *ms = NULL, *rows = NULL, *sorted = NULL;
    int64_t *start = NULL;
    int64_t nb_max = 0;
    size_t free_bytes = 0, total_bytes = 0, budget = GEMM_BUDGET_MAX;
    ms = (int32_t *)gs_malloc((size_t)count * sizeof(int32_t), "fsai gemm: sizes", &e->err);
    rows = (int32_t *)gs_malloc((size_t)count * sizeof(int32_t), "fsai gemm: rows", &e->err);
    sorted = (int32_t *)gs_malloc((size_t)count * sizeof(int32_t), "fsai gemm: rows", &e->err);
    if (!ms || !rows || !sorted) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(gs_cuda_alloc(e, &d_ms, (size_t)count * sizeof(int32_t), "fsai gemm: sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, gemm_sizes_kernel, gs_dblocks(count, 256), 256, 0, c->stream,
                       count, order, (const int64_t *)S->rp, d_ms));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(ms, d_ms, (size_t)count * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(rows, order, (size_t)count * sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    for (int32_t j = 0; j < count; j++) {
        const int64_t b = ((int64_t)ms[j] + GEMM_NB - 1) / GEMM_NB;
        if (b > nb_max) nb_max = b;
    }
    start = (int64_t *)gs_malloc(((size_t)nb_max + 2) * sizeof(int64_t), "fsai gemm: buckets", &e->err);
    if (!start) GS_TRY(GS_ERR_NOMEM);
    for (int64_t b = 0; b <= nb_max + 1; b++) start[b] = 0;
    for (int32_t j = 0; j < count; j++) start[(ms[j] + GEMM_NB - 1) / GEMM_NB + 1]++;
    for (int64_t b = 0; b <= nb_max; b++) start[b + 1] += start[b];
    for (int32_t j = 0; j < count; j++) sorted[start[(ms[j] + GEMM_NB - 1) / GEMM_NB]++] = rows[j];
    /* start[b] is now the end of bucket b */
    {
        const long long forced = gs_cuda_debug(e)->fsai_chunk_bytes;
        GS_TRY(CUDA_CALL(&e->err, cudaMemGetInfo(&free_bytes, &total_bytes)));
        if (budget > free_bytes / 4) budget = free_bytes / 4;
        if (forced > 0) budget = (size_t)forced;
    }
    *chunks = (gemm_chunk *)gs_malloc((size_t)count * sizeof(gemm_chunk), "fsai gemm: chunks", &e->err);
    if (!*chunks) GS_TRY(GS_ERR_NOMEM);
    *nchunks = 0;
    for (int64_t b = 1; b <= nb_max; b++) {
        const int64_t mb = b * GEMM_NB, first = start[b - 1];
        const size_t per = gemm_system_values(mb);
        int64_t batch = (int64_t)(budget / (per * sizeof(double)));
        if (batch < 1) batch = 1;
        for (int64_t j = first; j < start[b]; j += batch) {
            const int64_t k = start[b] - j < batch ? start[b] - j : batch;
            (*chunks)[(*nchunks)++] = {mb, (int32_t)j, (int32_t)k};
        }
    }
    *rows_sorted = sorted;
    sorted = NULL;
cleanup:
    gs_cuda_free(e, d_ms, (size_t)count * sizeof(int32_t));
    free(ms);
    free(rows);
    free(sorted);
    free(start);
    return status;
}

/* The blocked factorisation and the solve of one chunk (see the top of the
 * file): per panel the diagonal kernel and two strided batched DGEMMs. */
static int gemm_factor_chunk(gs_engine *e, cublasHandle_t blas, const gemm_chunk *ch,
                             const int32_t *d_rows, const gs_dcsr *S, double *M, double *W,
                             double *Wi, double *g, unsigned long long *fail)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int mb = (int)ch->mb, B = GEMM_NB;
    const long long sM = (long long)mb * mb, sW = (long long)(mb - B) * B, sWi = (long long)B * B;
    const double one = 1.0, zero = 0.0, minus_one = -1.0;
    const int32_t *rows = d_rows + ch->start;
    int status = GS_OK;
    for (int k0 = 0; k0 < mb; k0 += B) {
        const int k1 = k0 + B, below = mb - k1;
        GS_TRY(CUDA_LAUNCH(&e->err, gemm_diag_kernel, (unsigned)ch->count, GEMM_THREADS, 0,
                           c->stream, mb, k0, rows, (const int64_t *)S->rp, M, Wi, W, fail));
        if (below == 0) break;
        /* row-major X is column-major X^T: L21^T = Linv A21^T, column-major
         * (B x below, leading dimension mb) at A21's place */
        GS_TRY(CUBLAS_CALL(&e->err, cublasDgemmStridedBatched(
                                        blas, CUBLAS_OP_T, CUBLAS_OP_N, B, below, B, &one, Wi, B,
                                        sWi, W, B, sW, &zero, M + (size_t)k1 * mb + k0, mb, sM,
                                        ch->count)));
        /* A22 -= L21 L21^T (A22 symmetric: its column-major view is itself) */
        GS_TRY(CUBLAS_CALL(&e->err, cublasDgemmStridedBatched(
                                        blas, CUBLAS_OP_T, CUBLAS_OP_N, below, below, B, &minus_one,
                                        M + (size_t)k1 * mb + k0, mb, sM, M + (size_t)k1 * mb + k0,
                                        mb, sM, &one, M + (size_t)k1 * mb + k1, mb, sM, ch->count)));
    }
    GS_TRY(CUDA_LAUNCH(&e->err, gemm_solve_kernel, (unsigned)ch->count, SOLVE_THREADS, 0,
                       c->stream, mb, rows, (const int64_t *)S->rp, (const double *)M, g));
cleanup:
    return status;
}

int fsai_cuda_factor_gemm(gs_pc *pc, const gs_dcsr *A, const gs_dcsr *S, const int32_t *order,
                          int32_t j0, int32_t j1, double *g, unsigned long long *fail)
{
    gs_engine *e = pc->eng;
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t count = j1 - j0;
    int32_t *rows = NULL, *d_rows = NULL, nchunks = 0;
    gemm_chunk *chunks = NULL;
    size_t bytes_M = 0, bytes_W = 0, bytes_Wi = 0;
    double *M = NULL, *W = NULL, *Wi = NULL;
    cublasHandle_t blas = NULL;
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gemm_plan(e, S, order + j0, count, &rows, &chunks, &nchunks));
    for (int32_t b = 0; b < nchunks; b++) { /* each buffer sized for the largest chunk's */
        const size_t k = (size_t)chunks[b].count, mb = (size_t)chunks[b].mb;
        if (k * mb * mb > bytes_M) bytes_M = k * mb * mb;
        if (k * (mb - GEMM_NB) * GEMM_NB > bytes_W) bytes_W = k * (mb - GEMM_NB) * GEMM_NB;
        if (k * GEMM_NB * GEMM_NB > bytes_Wi) bytes_Wi = k * GEMM_NB * GEMM_NB;
    }
    bytes_M *= sizeof(double), bytes_W *= sizeof(double), bytes_Wi *= sizeof(double);
    GS_TRY(gs_cuda_alloc(e, &d_rows, (size_t)count * sizeof(int32_t), "fsai gemm: rows"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_rows, rows, (size_t)count * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &M, bytes_M, "fsai gemm: dense local systems"));
    GS_TRY(gs_cuda_alloc(e, &W, bytes_W, "fsai gemm: panel copies"));
    GS_TRY(gs_cuda_alloc(e, &Wi, bytes_Wi, "fsai gemm: inverted diagonal blocks"));
    GS_TRY(CUBLAS_CALL(&e->err, cublasCreate(&blas)));
    GS_TRY(CUBLAS_CALL(&e->err, cublasSetStream(blas, c->stream)));
    GS_TRY(gs_pc_stage_end(pc, "gather", t0));
    for (int32_t b = 0; b < nchunks; b++) {
        const gemm_chunk *ch = &chunks[b];
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(CUDA_LAUNCH(&e->err, gemm_gather_kernel, (unsigned)ch->count, GEMM_THREADS, 0,
                           c->stream, (int)ch->mb, (const int32_t *)d_rows + ch->start,
                           (const int64_t *)S->rp, (const int32_t *)S->col,
                           (const int64_t *)A->rp, (const int32_t *)A->col,
                           (const double *)A->val, M));
        GS_TRY(gs_pc_stage_end(pc, "gather", t0));
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(gemm_factor_chunk(e, blas, ch, d_rows, S, M, W, Wi, g, fail));
        /* past the deadline: GS_ERR_TIME_LIMIT here, the next chunks never launched */
        GS_TRY(gs_pc_stage_end(pc, "factorisation", t0));
    }
cleanup:
    /* stream-ordered frees, after the kernels that use them; cublasDestroy
     * synchronises, and the handle owns no buffer of ours */
    gs_cuda_free(e, M, bytes_M);
    gs_cuda_free(e, W, bytes_W);
    gs_cuda_free(e, Wi, bytes_Wi);
    gs_cuda_free(e, d_rows, (size_t)count * sizeof(int32_t));
    if (blas) CUBLAS_TEARDOWN(&c->teardown, cublasDestroy(blas));
    free(rows);
    free(chunks);
    return status;
}
