/* spmv.cu - SpMV kernels of the engine's layouts (SELL-C-sigma: Kreutzer et al., SIAM J. Sci.
 * Comput. 36(5) 2014; vector-CSR), their fused dot / axpby epilogues and launches. */
#include <cub/block/block_reduce.cuh>

#include "layout.h"
#include "reduce.cuh"
#include "spmv_split.cuh"

/* ------------------------------------------------------------- the kernels */

struct sell_args {
    int64_t n_rows, n_slices;
    const int64_t *__restrict__ slice_ptr;
    const int32_t *__restrict__ col;
    const int32_t *__restrict__ perm;
};

/* long_min: rows of at least that many entries are the split rows
 * (CSR-split: summed in chunks by split_chunk, skipped by the row loop). */
struct csr_args {
    int64_t n_rows;
    const int64_t *__restrict__ row_ptr;
    const int32_t *__restrict__ col;
    int64_t long_min;
    split_args split;
};

/* One warp per slice, lane l on row 32 s + l; grid-stride over slices on a
 * grid sized to the occupancy, so the dot's partial sums are few. Padding
 * (col = -1) adds exactly 0 and never reads x. */
template <typename V, int MODE>
__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    sell_spmv_kernel(sell_args A, const V *__restrict__ val, const double *__restrict__ x,
                     spmv_epilogue ep)
{
    double a = 1.0, b = 0.0, acc = 0.0;
    if (MODE == SPMV_AXPBY) {
        a = gs_coef_eval(ep.ka, ep.S);
        b = gs_coef_eval(ep.kb, ep.S);
    }
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; s < A.n_slices;
         s += nwarps) {
        const int64_t beg = A.slice_ptr[s] + lane, end = A.slice_ptr[s + 1];
        double sum = 0.0;
#pragma unroll 4
        for (int64_t k = beg; k < end; k += SELL_C) {
            /* Loads without a branch on c, so that the unrolled iterations'
             * loads are all in flight together; padding reads x[0]. */
            const int32_t c = __ldg(A.col + k);
            const double v = (double)__ldg(val + k);
            const double xv = __ldg(x + (c < 0 ? 0 : c));
            sum = fma(v, c < 0 ? 0.0 : xv, sum);
        }
        const int64_t r = s * SELL_C + lane;
        if (r < A.n_rows) acc += spmv_store<MODE>(ep, A.perm ? A.perm[r] : r, sum, a, b);
    }
    if (MODE == SPMV_DOT) gs_reduce_finish1(acc, ep.partials, ep.counter, ep.out);
}

/* LANES threads per row (a power of two dividing 32), 32 / LANES rows per
 * warp per step; every lane of a warp runs the same number of steps, so the
 * shuffles see the full mask. SPLIT (CSR-split): every warp first takes its
 * share of the long rows' chunks (split_chunk), then the rows, skipping the
 * long ones; the dot's last block adds the long rows' terms. */
template <typename V, int MODE, int LANES, bool SPLIT>
__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    csr_spmv_kernel(csr_args A, const V *__restrict__ val, const double *__restrict__ x,
                    spmv_epilogue ep)
{
    double a = 1.0, b = 0.0, acc = 0.0;
    if (MODE == SPMV_AXPBY) {
        a = gs_coef_eval(ep.ka, ep.S);
        b = gs_coef_eval(ep.kb, ep.S);
    }
    const int lane = threadIdx.x & 31, sub = lane % LANES;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    if (SPLIT)
        for (int64_t c = warp; c < A.split.n_chunks; c += nwarps)
            split_chunk<V, MODE>(A.split, A.row_ptr, A.col, val, x, ep, c, lane, a, b);
    const int rows_per_warp = 32 / LANES;
    for (int64_t r0 = warp * rows_per_warp; r0 < A.n_rows; r0 += nwarps * rows_per_warp) {
        const int64_t row = r0 + lane / LANES;
        int64_t beg = 0, end = 0;
        if (row < A.n_rows) {
            beg = A.row_ptr[row];
            end = A.row_ptr[row + 1];
        }
        const bool long_row = SPLIT && end - beg >= A.long_min; /* split_chunk's */
        if (long_row) end = beg;
        double sum = 0.0;
        for (int64_t k = beg + sub; k < end; k += LANES)
            sum = fma((double)__ldg(val + k), __ldg(x + __ldg(A.col + k)), sum);
#pragma unroll
        for (int o = LANES / 2; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o, LANES);
        if (sub == 0 && row < A.n_rows && !long_row) acc += spmv_store<MODE>(ep, row, sum, a, b);
    }
    if (MODE == SPMV_DOT) {
        if (SPLIT)
            split_reduce_finish(acc, A.split.row_dot, A.split.n_long, ep.partials, ep.counter, ep.out);
        else
            gs_reduce_finish1(acc, ep.partials, ep.counter, ep.out);
    }
}

/* ----------------------------------------------------------------- launch */

/* Launch with the grid capped at the blocks the device holds at once (the
 * occupancy of this very kernel, looked up on its first use and kept in the
 * matrix): a grid-stride grid larger than that would run a second, mostly
 * empty wave. */
template <int MODE, typename Kernel, typename Args, typename V>
static int launch_capped(gs_engine *e, const gs_mat *A, Kernel kernel, const char *name,
                         unsigned grid, const Args &args, const V *val, const double *x,
                         const spmv_epilogue &ep)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_mat *m = (gs_mat *)A; /* the cap is a cache */
    if (m->max_blocks[MODE] == 0) {
        int per_sm = 0;
        int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                            &per_sm, kernel, GS_CUDA_BLOCK, 0));
        if (status != GS_OK) return status;
        m->max_blocks[MODE] = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    }
    if (grid > m->max_blocks[MODE]) grid = m->max_blocks[MODE];
    return gs_cuda_launch(&e->err, name, __FILE__, __LINE__, kernel, grid, GS_CUDA_BLOCK, 0,
                          c->stream, args, val, x, ep);
}

template <typename V, int MODE>
static int launch_sell(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep,
                       unsigned grid)
{
    sell_args args = {A->n_rows, A->n_slices, A->slice_ptr, A->sell_col, A->perm};
    return launch_capped<MODE>(e, A, sell_spmv_kernel<V, MODE>, "sell_spmv_kernel", grid, args,
                               (const V *)A->sell_val, x, ep);
}

template <typename V, int MODE, int LANES>
static int launch_csr_lanes(gs_engine *e, const gs_mat *A, const double *x,
                            const spmv_epilogue &ep, unsigned grid)
{
    const split_args split = {A->n_chunks, A->n_long,    A->long_row, A->chunk_ptr,
                              A->chunk_row, A->chunk_sum, A->row_dot,  A->ticket};
    const csr_args args = {A->n_rows, A->row_ptr, A->csr_col, A->long_min, split};
    if (A->long_mode == LONG_SPLIT)
        return launch_capped<MODE>(e, A, csr_spmv_kernel<V, MODE, LANES, true>,
                                   "csr_spmv_kernel (split rows)", grid, args,
                                   (const V *)A->csr_val, x, ep);
    return launch_capped<MODE>(e, A, csr_spmv_kernel<V, MODE, LANES, false>, "csr_spmv_kernel",
                               grid, args, (const V *)A->csr_val, x, ep);
}

template <typename V, int MODE>
static int launch_csr(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep,
                      unsigned grid)
{
    switch (A->lanes) {
    case 2: return launch_csr_lanes<V, MODE, 2>(e, A, x, ep, grid);
    case 4: return launch_csr_lanes<V, MODE, 4>(e, A, x, ep, grid);
    case 8: return launch_csr_lanes<V, MODE, 8>(e, A, x, ep, grid);
    case 16: return launch_csr_lanes<V, MODE, 16>(e, A, x, ep, grid);
    default: return launch_csr_lanes<V, MODE, 32>(e, A, x, ep, grid);
    }
}

/* Blocks: enough warps for every slice (or row group); at least one block,
 * so that an empty product still writes its dot. The partial sums buffer
 * holds red_blocks per value, which bounds the grid too. */
static unsigned spmv_grid(gs_engine *e, const gs_mat *A)
{
    int64_t warps = A->format == GS_CUDA_SELL ? A->n_slices
                                              : (A->n_rows + 32 / A->lanes - 1) / (32 / A->lanes);
    if (A->long_mode == LONG_SPLIT) warps += A->n_chunks; /* a warp a chunk too */
    int64_t blocks = (warps + GS_CUDA_BLOCK / 32 - 1) / (GS_CUDA_BLOCK / 32);
    int64_t cap = gs_cuda_of(e)->red_blocks;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}

/* The merge path: its own kernels for the whole product; split rows: in
 * the vector-CSR kernel. */
template <int MODE>
static int spmv_dispatch(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep)
{
    unsigned grid = spmv_grid(e, A);
    if (A->long_mode == LONG_MERGE) return spmv_merge(e, A, MODE, x, ep, 0);
    if (A->format == GS_CUDA_SELL)
        return A->prec == GS_FP32 ? launch_sell<float, MODE>(e, A, x, ep, grid)
                                  : launch_sell<double, MODE>(e, A, x, ep, grid);
    return A->prec == GS_FP32 ? launch_csr<float, MODE>(e, A, x, ep, grid)
                              : launch_csr<double, MODE>(e, A, x, ep, grid);
}

/* The grid caps of the three variants, looked up once at creation: the
 * occupancy calculator is a host call that must not be issued while a
 * sequence is being captured. A zero grid computes the cap and launches
 * nothing. */
int spmv_prepare(gs_engine *e, const gs_mat *A)
{
    spmv_epilogue ep = {NULL, NULL, gs_coef_const(1.0), gs_coef_const(0.0), NULL, NULL, NULL, NULL};
    int status = GS_OK;
    if (A->long_mode == LONG_MERGE) {
        for (int mode = SPMV_PLAIN; mode <= SPMV_AXPBY && status == GS_OK; mode++)
            status = spmv_merge(e, A, mode, NULL, ep, 1);
        return status;
    }
    if (A->format == GS_CUDA_SELL) {
        if (A->prec == GS_FP32) {
            status = launch_sell<float, SPMV_PLAIN>(e, A, NULL, ep, 0);
            if (status == GS_OK) status = launch_sell<float, SPMV_DOT>(e, A, NULL, ep, 0);
            if (status == GS_OK) status = launch_sell<float, SPMV_AXPBY>(e, A, NULL, ep, 0);
        } else {
            status = launch_sell<double, SPMV_PLAIN>(e, A, NULL, ep, 0);
            if (status == GS_OK) status = launch_sell<double, SPMV_DOT>(e, A, NULL, ep, 0);
            if (status == GS_OK) status = launch_sell<double, SPMV_AXPBY>(e, A, NULL, ep, 0);
        }
    } else if (A->prec == GS_FP32) {
        status = launch_csr<float, SPMV_PLAIN>(e, A, NULL, ep, 0);
        if (status == GS_OK) status = launch_csr<float, SPMV_DOT>(e, A, NULL, ep, 0);
        if (status == GS_OK) status = launch_csr<float, SPMV_AXPBY>(e, A, NULL, ep, 0);
    } else {
        status = launch_csr<double, SPMV_PLAIN>(e, A, NULL, ep, 0);
        if (status == GS_OK) status = launch_csr<double, SPMV_DOT>(e, A, NULL, ep, 0);
        if (status == GS_OK) status = launch_csr<double, SPMV_AXPBY>(e, A, NULL, ep, 0);
    }
    return status;
}

static int check_shapes(gs_engine *e, const gs_mat *A, const gs_vec *x, const gs_vec *y,
                        const char *op)
{
    if (x->n == A->n_cols && y->n == A->n_rows) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL,
                        "cuda %s: %d x %d matrix with x of length %lld and y of length %lld", op,
                        (int)A->n_rows, (int)A->n_cols, (long long)x->n, (long long)y->n);
}

int gs_cuda_spmv_dot(gs_engine *e, const gs_mat *A, const gs_vec *x, gs_vec *y, const gs_vec *w,
                     int slot)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_shapes(e, A, x, y, "spmv_dot");
    if (status != GS_OK) return status;
    spmv_epilogue ep = {y->d, NULL, gs_coef_const(1.0), gs_coef_const(0.0), c->S,
                        c->partials, c->counter, NULL};
    if (slot == GS_SLOT_NONE) return spmv_dispatch<SPMV_PLAIN>(e, A, x->d, ep);
    const gs_vec *wv = w ? w : x;
    status = gs_cuda_check_slot(e, slot, "spmv_dot");
    if (status == GS_OK && wv->n != y->n)
        status = gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda spmv_dot: y.w with lengths %lld, %lld",
                              (long long)y->n, (long long)wv->n);
    if (status != GS_OK) return status;
    ep.w = wv->d;
    ep.out = c->S + slot;
    return spmv_dispatch<SPMV_DOT>(e, A, x->d, ep);
}

int gs_cuda_spmv_axpby(gs_engine *e, gs_coef a, const gs_mat *A, const gs_vec *x, gs_coef b,
                       gs_vec *y)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_shapes(e, A, x, y, "spmv_axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "spmv_axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "spmv_axpby");
    if (status != GS_OK) return status;
    spmv_epilogue ep = {y->d, NULL, a, b, c->S, c->partials, c->counter, NULL};
    return spmv_dispatch<SPMV_AXPBY>(e, A, x->d, ep);
}
