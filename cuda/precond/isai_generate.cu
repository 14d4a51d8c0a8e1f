/* isai_generate.cu - the batched generation of ISAI(k) on the GPU: for each
 * column j of M ~ T^-1 with pattern J (the rows of column j of |T|^k), the
 * small triangular system T(J, J) M(J, j) = I(J, j) solved by one thread
 * group, the solution written straight into M. Anzt, Chow, Huckle, Dongarra,
 * "Batched generation of incomplete sparse approximate inverses on GPUs",
 * ScalA 2016, Algorithm 1 and section IV; the CPU reference is
 * src/precond/pc_isai.c.
 *
 * The columns of M are the rows of M^T = pattern of |T^T|^k: T is transposed
 * first (toolkit), so that each group reads its pattern J as one sorted row;
 * M^T is transposed back (ISAI(1): M has T's pattern, and the values are
 * scattered to T's positions instead, one sort fewer).
 * Every lane (thread) p of a group owns row J_p of the small system and walks
 * row J_p of T (by rows, sorted) with one pointer, merging it with J as the
 * substitution goes: at step q it finds t_{J_p J_q} (the paper's "traverse
 * the rows of L and M"), lane q divides by its diagonal, x_q is broadcast (a
 * shuffle within a warp, shared memory within a block), and every later row
 * subtracts t_{J_p J_q} x_q. No dense copy of T(J, J) is held: each lane keeps
 * a pointer, a right-hand side and its x, so a lane may own several rows.
 * Sizes (isai_cuda.h): up to 32 one group of 4, 8, 16 or 32 lanes (several
 * columns a warp); up to 128 a warp with 2 or 4 rows a lane; up to 4096 a
 * 256-thread block with 1, 4 or 16 rows a thread in registers; longer ones a
 * block with the pointers in global memory (any length, never a failure).
 * Products and differences are rounded separately (no fused multiply-add),
 * as the host reference rounds them: for L (forward substitution, the same
 * order of terms) the values equal the reference's for the same L. */
#include <string.h>

#include "isai_cuda.h"

#define FULL_MASK 0xffffffffu
#define GLOBAL_SCRATCH_BYTES ((size_t)256 << 20) /* pointers of the long columns at once */

/* The pointer of row `row` of T before the first step: its first entry
 * (lower, walked forward) or its last (upper, walked backward). */
template <bool LOWER>
static __device__ __forceinline__ int64_t isai_walk_start(const int64_t *__restrict__ trp,
                                                          int32_t row)
{
    return LOWER ? trp[row] : trp[row + 1] - 1;
}

/* Moves a to the entry of column jq of row `row` of T if stored (*t its
 * value, true returned), else to where it would be (false). */
template <bool LOWER>
static __device__ __forceinline__ bool isai_walk(const int64_t *__restrict__ trp,
                                                 const int32_t *__restrict__ tcol,
                                                 const double *__restrict__ tval, int32_t row,
                                                 int32_t jq, int64_t &a, double &t)
{
    if (LOWER) {
        const int64_t stop = trp[row + 1];
        while (a < stop && tcol[a] < jq) a++;
        if (a < stop && tcol[a] == jq) return t = tval[a], true;
    } else {
        const int64_t stop = trp[row];
        while (a >= stop && tcol[a] > jq) a--;
        if (a >= stop && tcol[a] == jq) return t = tval[a], true;
    }
    return false;
}

/* Row p comes at or after step q in the substitution's order. */
template <bool LOWER>
static __device__ __forceinline__ bool isai_after(int p, int q)
{
    return LOWER ? p >= q : p <= q;
}

/* ------------------------------------------------- groups within a warp */

/* G lanes a column (G divides 32), RL rows a lane (row p = lane + r G):
 * columns with lo < m <= G RL; the others are left to other launches.
 * list: the columns to take (NULL: column = group index, count = n). */
template <int G, int RL, bool LOWER>
__global__ void isai_group_kernel(int32_t count, const int32_t *__restrict__ list, int lo,
                                  const int64_t *__restrict__ mrp,
                                  const int32_t *__restrict__ mcol, double *__restrict__ mval,
                                  const int64_t *__restrict__ trp,
                                  const int32_t *__restrict__ tcol,
                                  const double *__restrict__ tval, int *bad)
{
    const int64_t group = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int lane = (int)(threadIdx.x % G);
    const unsigned gmask =
        G == 32 ? FULL_MASK : (((1u << G) - 1u) << ((threadIdx.x & 31) & ~(unsigned)(G - 1)));
    if (group >= count) return; /* the whole group */
    const int32_t j = list ? list[group] : (int32_t)group;
    const int64_t b = mrp[j];
    const int m = (int)(mrp[j + 1] - b);
    if (m <= lo || m > G * RL) return; /* the whole group */
    int32_t row[RL];
    int64_t a[RL];
    double rhs[RL], x[RL];
#pragma unroll
    for (int r = 0; r < RL; r++) {
        const int p = lane + r * G;
        row[r] = p < m ? mcol[b + p] : 0;
        a[r] = p < m ? isai_walk_start<LOWER>(trp, row[r]) : 0;
        rhs[r] = p == (LOWER ? 0 : m - 1) ? 1.0 : 0.0; /* e_1 (lower), e_m (upper) */
        x[r] = 0.0;
    }
    for (int s = 0; s < m; s++) {
        const int q = LOWER ? s : m - 1 - s;
        int32_t jq = 0;
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (q / G == r) jq = row[r];
        jq = __shfl_sync(gmask, jq, q % G, G);
        double t[RL];
        bool has[RL];
#pragma unroll
        for (int r = 0; r < RL; r++) {
            const int p = lane + r * G;
            t[r] = 0.0;
            has[r] = p < m && isai_after<LOWER>(p, q) &&
                     isai_walk<LOWER>(trp, tcol, tval, row[r], jq, a[r], t[r]);
            if (p == q) x[r] = rhs[r] / t[r]; /* a missing diagonal gives Inf or NaN */
        }
        double xq = 0.0;
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (q / G == r) xq = x[r];
        xq = __shfl_sync(gmask, xq, q % G, G);
#pragma unroll
        for (int r = 0; r < RL; r++)
            if (has[r] && lane + r * G != q)
                rhs[r] = __dsub_rn(rhs[r], __dmul_rn(t[r], xq)); /* - t_{J_p J_q} x_q */
    }
#pragma unroll
    for (int r = 0; r < RL; r++) {
        const int p = lane + r * G;
        if (p < m) {
            mval[b + p] = x[r];
            if (!isfinite(x[r])) atomicMin(bad, j + 1);
        }
    }
}

/* ------------------------------------------------------ one block a column */

/* ISAI_BLOCK_THREADS threads a column, R rows a thread (row p = thread + r
 * B) in registers, x_q through shared memory (two slots: one barrier a
 * step). Columns with lo < m <= R B of the list. */
template <int R, bool LOWER>
__global__ void __launch_bounds__(ISAI_BLOCK_THREADS)
    isai_block_kernel(const int32_t *__restrict__ list, int lo, const int64_t *__restrict__ mrp,
                      const int32_t *__restrict__ mcol, double *__restrict__ mval,
                      const int64_t *__restrict__ trp, const int32_t *__restrict__ tcol,
                      const double *__restrict__ tval, int *bad)
{
    constexpr int B = ISAI_BLOCK_THREADS;
    __shared__ double xs[2];
    const int32_t j = list[blockIdx.x];
    const int64_t b = mrp[j];
    const int m = (int)(mrp[j + 1] - b);
    if (m <= lo || m > R * B) return; /* the whole block */
    int32_t row[R];
    int64_t a[R];
    double rhs[R], x[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int p = (int)threadIdx.x + r * B;
        row[r] = p < m ? mcol[b + p] : 0;
        a[r] = p < m ? isai_walk_start<LOWER>(trp, row[r]) : 0;
        rhs[r] = p == (LOWER ? 0 : m - 1) ? 1.0 : 0.0;
        x[r] = 0.0;
    }
    for (int s = 0; s < m; s++) {
        const int q = LOWER ? s : m - 1 - s;
        const int32_t jq = mcol[b + q];
        double t[R];
        bool has[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int p = (int)threadIdx.x + r * B;
            t[r] = 0.0;
            has[r] = p < m && isai_after<LOWER>(p, q) &&
                     isai_walk<LOWER>(trp, tcol, tval, row[r], jq, a[r], t[r]);
            if (p == q) xs[s & 1] = x[r] = rhs[r] / t[r];
        }
        __syncthreads();
        const double xq = xs[s & 1];
#pragma unroll
        for (int r = 0; r < R; r++)
            if (has[r] && (int)threadIdx.x + r * B != q)
                rhs[r] = __dsub_rn(rhs[r], __dmul_rn(t[r], xq));
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int p = (int)threadIdx.x + r * B;
        if (p < m) {
            mval[b + p] = x[r];
            if (!isfinite(x[r])) atomicMin(bad, j + 1);
        }
    }
}

/* Columns of the list longer than lo, any length: a block a column (blocks
 * stride over the list), each row's pointer in global memory (scratch:
 * stride words a block), its right-hand side, then its x, in M's values. */
template <bool LOWER>
__global__ void __launch_bounds__(ISAI_BLOCK_THREADS)
    isai_global_kernel(const int32_t *__restrict__ list, int32_t count, int64_t lo,
                       const int64_t *__restrict__ mrp, const int32_t *__restrict__ mcol,
                       double *__restrict__ mval, const int64_t *__restrict__ trp,
                       const int32_t *__restrict__ tcol, const double *__restrict__ tval,
                       int64_t *__restrict__ scratch, int64_t stride, int *bad)
{
    constexpr int B = ISAI_BLOCK_THREADS;
    __shared__ double xs[2];
    int64_t *apos = scratch + (int64_t)blockIdx.x * stride;
    const int64_t tid = threadIdx.x;
    for (int32_t c = blockIdx.x; c < count; c += gridDim.x) {
        const int32_t j = list[c];
        const int64_t b = mrp[j], m = mrp[j + 1] - b;
        if (m <= lo) continue; /* the whole block */
        for (int64_t p = tid; p < m; p += B) {
            apos[p] = isai_walk_start<LOWER>(trp, mcol[b + p]);
            mval[b + p] = p == (LOWER ? 0 : m - 1) ? 1.0 : 0.0;
        }
        __syncthreads();
        for (int64_t s = 0; s < m; s++) {
            const int64_t q = LOWER ? s : m - 1 - s;
            const int32_t jq = mcol[b + q];
            /* this thread's rows at or after q: p = tid + k B */
            const int64_t first = LOWER ? (q <= tid ? tid : tid + (q - tid + B - 1) / B * B) : tid;
            const int64_t last = LOWER ? m - 1 : q;
            for (int64_t p = first; p <= last; p += B) {
                int64_t a = apos[p];
                double t = 0.0;
                isai_walk<LOWER>(trp, tcol, tval, mcol[b + p], jq, a, t);
                apos[p] = a;
                if (p == q) xs[s & 1] = mval[b + q] = mval[b + q] / t;
            }
            __syncthreads();
            const double xq = xs[s & 1];
            for (int64_t p = first; p <= last; p += B) {
                if (p == q) continue;
                const int32_t row = mcol[b + p];
                const int64_t a = apos[p];
                const bool in_row = LOWER ? a < trp[row + 1] : a >= trp[row];
                if (in_row && tcol[a] == jq)
                    mval[b + p] = __dsub_rn(mval[b + p], __dmul_rn(tval[a], xq));
            }
        }
        for (int64_t p = tid; p < m; p += B)
            if (!isfinite(mval[b + p])) atomicMin(bad, j + 1);
        __syncthreads(); /* apos and xs are the next column's */
    }
}

/* ------------------------------------------------------------- the plan */

/* info[0] = the longest column (atomicMax once a warp), info[1] = how many
 * columns are longer than ISAI_GROUP_MAX, listed in list (any order: the
 * columns are independent). */
__global__ void isai_classify_kernel(int32_t n, const int64_t *__restrict__ mrp,
                                     int32_t *__restrict__ list,
                                     unsigned long long *__restrict__ info)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long m = j < n ? (unsigned long long)(mrp[j + 1] - mrp[j]) : 0ull;
    unsigned long long most = m;
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long other = __shfl_xor_sync(FULL_MASK, most, o);
        most = other > most ? other : most;
    }
    if ((threadIdx.x & 31) == 0 && most > 0) atomicMax(&info[0], most);
    if (j < n && m > ISAI_GROUP_MAX) list[atomicAdd(&info[1], 1ull)] = (int32_t)j;
}

/* The launches for M^T's columns with the values of T: the group kernel for
 * every column up to the longest's size class (at most 32), then each larger
 * class over the list. */
template <bool LOWER>
static int isai_solve_columns(gs_engine *e, const gs_dcsr *T, gs_dcsr *MT, int64_t m_max,
                              const int32_t *list, int32_t count, int *bad)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaStream_t st = c->stream;
    const int64_t *mrp = MT->rp, *trp = T->rp;
    const int32_t *mcol = MT->col, *tcol = T->col;
    double *mval = (double *)MT->val;
    const double *tval = (const double *)T->val;
    const int32_t n = MT->n;
    int64_t *scratch = NULL;
    size_t scratch_bytes = 0;
    int status = GS_OK;
    const unsigned B = ISAI_BLOCK_THREADS;
    if (m_max <= 4) {
        auto k = isai_group_kernel<4, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 4, B), B, 0, st, n,
                           (const int32_t *)NULL, 0, mrp, mcol, mval, trp, tcol, tval, bad));
    } else if (m_max <= 8) {
        auto k = isai_group_kernel<8, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 8, B), B, 0, st, n,
                           (const int32_t *)NULL, 0, mrp, mcol, mval, trp, tcol, tval, bad));
    } else if (m_max <= 16) {
        auto k = isai_group_kernel<16, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 16, B), B, 0, st, n,
                           (const int32_t *)NULL, 0, mrp, mcol, mval, trp, tcol, tval, bad));
    } else {
        auto k = isai_group_kernel<32, 1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)n * 32, B), B, 0, st, n,
                           (const int32_t *)NULL, 0, mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (count == 0) goto cleanup;
    if (m_max > 32) {
        auto k = isai_group_kernel<32, 2, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)count * 32, B), B, 0, st, count, list,
                           32, mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (m_max > 64) {
        auto k = isai_group_kernel<32, 4, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, gs_dblocks((int64_t)count * 32, B), B, 0, st, count, list,
                           64, mrp, mcol, mval, trp, tcol, tval, bad));
    }
    if (m_max > 128) {
        auto k = isai_block_kernel<1, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, 128, mrp, mcol, mval, trp, tcol,
                           tval, bad));
    }
    if (m_max > (int64_t)B) {
        auto k = isai_block_kernel<4, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, (int)B, mrp, mcol, mval, trp, tcol,
                           tval, bad));
    }
    if (m_max > 4 * (int64_t)B) {
        auto k = isai_block_kernel<ISAI_BLOCK_ROWS_MAX, LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, count, B, 0, st, list, 4 * (int)B, mrp, mcol, mval, trp,
                           tcol, tval, bad));
    }
    if (m_max > ISAI_BLOCK_MAX) {
        /* as many blocks as scratch for their pointers allows (at least one) */
        int64_t blocks = (int64_t)(GLOBAL_SCRATCH_BYTES / ((size_t)m_max * sizeof(int64_t)));
        blocks = blocks < 1 ? 1 : blocks > count ? count : blocks;
        blocks = blocks > 4 * (int64_t)c->sm_count ? 4 * (int64_t)c->sm_count : blocks;
        if (blocks < 1) blocks = 1;
        scratch_bytes = (size_t)blocks * (size_t)m_max * sizeof(int64_t);
        GS_TRY(gs_cuda_alloc(e, &scratch, scratch_bytes, "isai: pointers of the long columns"));
        auto k = isai_global_kernel<LOWER>;
        GS_TRY(CUDA_LAUNCH(&e->err, k, (unsigned)blocks, B, 0, st, list, count,
                           (int64_t)ISAI_BLOCK_MAX, mrp, mcol, mval, trp, tcol, tval, scratch,
                           m_max, bad));
    }
cleanup:
    gs_cuda_free(e, scratch, scratch_bytes); /* stream-ordered */
    return status;
}

/* ISAI(1): M has T's own pattern, so instead of transposing M^T back, T is
 * transposed once with each entry's position as its value (exact in a double
 * below 2^53): row j of T^T then gives column j's pattern, and where each
 * value of M^T goes in M. */
__global__ void isai_positions_kernel(int64_t nnz, double *__restrict__ pos)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < nnz) pos[q] = (double)q;
}

__global__ void isai_scatter_kernel(int64_t nnz, const double *__restrict__ pos,
                                    const double *__restrict__ mt, double *__restrict__ m)
{
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < nnz) m[(int64_t)pos[q]] = mt[q]; /* m_{J_p j} of column j, at T's position */
}

/* M^T's pattern (rows: the columns of M): k = 1 T^T's (MT aliases TT's rp,
 * col; TT's values the positions in T), else |T^T|^k. */
static int isai_columns_pattern(gs_engine *e, const gs_dcsr *T, int k, gs_dcsr *TT, gs_dcsr *MT)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    double *pos = NULL;
    int status = GS_OK;
    if (k > 1) {
        GS_TRY(gs_dcsr_transpose(e, T, TT, 0));       /* row j of TT: column j of T */
        GS_TRY(gs_dcsr_pattern_power(e, TT, k, 0, MT)); /* row j of MT: column j of M */
        goto cleanup;
    }
    {
        gs_dcsr P = *T;
        GS_TRY(gs_cuda_alloc(e, &pos, (size_t)T->nnz * sizeof(double), "isai: positions in T"));
        GS_TRY(CUDA_LAUNCH(&e->err, isai_positions_kernel, gs_dblocks(T->nnz, 256), 256, 0,
                           c->stream, T->nnz, pos));
        P.val = pos;
        P.vsize = sizeof(double);
        GS_TRY(gs_dcsr_transpose(e, &P, TT, 0));
    }
    MT->n = TT->n, MT->nnz = TT->nnz, MT->rp = TT->rp, MT->col = TT->col; /* aliases */
cleanup:
    gs_cuda_free(e, pos, (size_t)T->nnz * sizeof(double)); /* stream-ordered */
    return status;
}

/* M by rows from M^T: k = 1 T's pattern with the values scattered, else the
 * toolkit's transpose. */
static int isai_rows(gs_engine *e, const gs_dcsr *T, int k, const gs_dcsr *TT, const gs_dcsr *MT,
                     gs_dcsr *M)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    if (k > 1) return gs_dcsr_transpose(e, MT, M, 0);
    GS_TRY(gs_dcsr_alloc_rows(e, M, T->n, "isai: row pointers of M"));
    GS_TRY(gs_dcsr_alloc_entries(e, M, T->nnz, sizeof(double), "isai: M"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(M->rp, T->rp, ((size_t)T->n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    if (T->nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(M->col, T->col, (size_t)T->nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_scatter_kernel, gs_dblocks(T->nnz, 256), 256, 0, c->stream,
                       T->nnz, (const double *)TT->val, (const double *)MT->val, (double *)M->val));
cleanup:
    return status;
}

int isai_cuda_generate(gs_engine *e, const gs_dcsr *T, int lower, int k, gs_dcsr *M,
                       int64_t *longest, int32_t *bad_column)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = T->n;
    gs_dcsr TT = {}, MT = {};
    int32_t *list = NULL;
    unsigned long long *info = NULL; /* longest, count; then the failure flag's word */
    int status = GS_OK;
    uint64_t words[3] = {0, 0, 0};
    *longest = 0, *bad_column = 0;
    *M = gs_dcsr{};
    GS_TRY(isai_columns_pattern(e, T, k, &TT, &MT));
    GS_TRY(gs_cuda_alloc(e, &MT.val, (size_t)MT.nnz * sizeof(double), "isai: values of M"));
    MT.vsize = sizeof(double);
    GS_TRY(gs_cuda_alloc(e, &list, (size_t)n * sizeof(int32_t), "isai: long columns"));
    GS_TRY(gs_cuda_alloc(e, &info, 3 * sizeof(unsigned long long), "isai: column sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(info, 0, 2 * sizeof(unsigned long long), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(info + 2, 0x7f, sizeof(unsigned long long),
                                              c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_classify_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)MT.rp, list, info));
    {
        const void *src[1] = {info};
        const int count[1] = {2};
        GS_TRY(gs_dread_words(e, 1, src, count, words));
    }
    *longest = (int64_t)words[0];
    if (lower)
        GS_TRY(isai_solve_columns<true>(e, T, &MT, (int64_t)words[0], list, (int32_t)words[1],
                                        (int *)(info + 2)));
    else
        GS_TRY(isai_solve_columns<false>(e, T, &MT, (int64_t)words[0], list, (int32_t)words[1],
                                         (int *)(info + 2)));
    {
        const void *src[1] = {info + 2};
        const int count[1] = {1};
        GS_TRY(gs_dread_words(e, 1, src, count, &words[2]));
        int first = 0;
        memcpy(&first, &words[2], sizeof first);
        *bad_column = first == 0x7f7f7f7f ? 0 : first;
    }
    GS_TRY(isai_rows(e, T, k, &TT, &MT, M));
cleanup:
    if (k == 1) { /* MT's rp and col are TT's */
        gs_cuda_free(e, MT.val, (size_t)MT.nnz * MT.vsize);
        MT = gs_dcsr{};
    }
    gs_dcsr_free(e, &TT);
    gs_dcsr_free(e, &MT);
    gs_cuda_free(e, list, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, info, 3 * sizeof(unsigned long long));
    return status;
}
