/* spmv.cu - the CUDA engine's matrices: SELL-C-sigma storage built on the
 * device (Kreutzer, Hager, Wellein, Fehske, Bishop, SIAM J. Sci. Comput.
 * 36(5) 2014), the SpMV kernels with their fused dot / axpby epilogues, the
 * vector-CSR fallback, and exact triangular solves through cuSPARSE SpSV.
 *
 * Format rule (DESIGN.md: sliced ELL unless padding explodes). With slice
 * height C = 32 and w_s the longest row of slice s, the stored entries are
 * P = sum over real rows of w_{slice(i)}; fill = P / nnz; mean width P / n.
 *   fill <= 2.0 and max_s w_s <= 2 x mean width + 1  -> SELL-32, rows in
 *                                                       their own order;
 *   otherwise                                        -> vector-CSR (2..32
 *                                                       lanes a row).
 * Before both, a device-fill rule, decided from n, nnz and the device's
 * multiprocessor count before any slice is built: vector-CSR where the
 * slices are too few to keep the device's warps busy for rows of their
 * length,
 *   ceil(n / 32) <= 4 a multiprocessor and nnz >= 8 n, or
 *   ceil(n / 32) <= 32 a multiprocessor and nnz >= 128 n.
 * A SELL warp walks its slice's widest row by itself, one dependent
 * column-then-x load chain every four entries, with too few other warps to
 * hide the latency; vector-CSR shares a row among up to 32 lanes. Measured
 * on an H200 (`bench_engine --device-fill`, rows of 8 to 256 entries,
 * fill 1): CSR faster at every length up to 4 slices a multiprocessor
 * (rows of 8: 1.9 against 2.7 us; of 128: 2.3-9.5 against 21.7-22.9 us);
 * from 8 a multiprocessor SELL-32 faster or even for rows of 8 to 64, but
 * for one miss (rows of 64 at 16 a multiprocessor: SELL-32 29.3 against
 * 26.9 us); rows of 128 and 256 favour CSR up to 32 a multiprocessor (58
 * against 66 us, 103 against 125 us) and SELL-32 at 64. Rows of 65 to 127
 * between 4 and 32 a multiprocessor are not measured (SELL-32 kept). The
 * small SPD matrices and their FSAI factors are the case (bcsstk16's G: 153
 * slices, rows of 110 entries on average: FSAI-PCG 104 -> 27 us an
 * iteration; docs/perf-notes.md, "CUDA engine: few slices of long rows").
 * Rows sorted by length within windows (SELL-32-sigma) are built on request
 * (gs_cuda_mat_create_as) but never chosen: on an H200 they lost to one of
 * the two others in every case measured (docs/perf-notes.md, "CUDA engine";
 * scripts/bench_engine.c): the permutation read, the scattered y writes and
 * the loss of x locality across a warp's rows cost more than the padding
 * saved (visiting the slices in a scrambled order, to spread each window's
 * widest slices over the warps, lost more locality again). Measured, 2M
 * rows: lengths uniform in 8 +- 8 (fill 1.98, even widths) SELL-32 133 us,
 * CSR 171, sorted 139..175;
 * 0.5% of rows of 40 among rows of 6 (fill 1.80, width ratio 3.6) SELL-32
 * 163 us, CSR 112; 3D Poisson (fill 1.002): SELL-32 1.00x its byte floor,
 * sorted 1.12x, CSR 2.2x. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include "engine_cuda.h"
#include "gs_dsparse.h"
#include "gs_cuda.h"
#include "reduce.cuh"

#define SELL_C 32
#define SELL_SIGMA 1024
#define SELL_MAX_FILL 2.0
#define SELL_MAX_WIDTH_RATIO 2.0
#define SELL_FEW_SLICES_PER_SM 4
#define SELL_LONG_ROW 8
#define SELL_SOME_SLICES_PER_SM 32
#define SELL_VERY_LONG_ROW 128

enum { SPMV_PLAIN = 0, SPMV_DOT = 1, SPMV_AXPBY = 2 };

/* ------------------------------------------------------------- the kernels */

struct sell_args {
    int64_t n_rows, n_slices;
    const int64_t *__restrict__ slice_ptr;
    const int32_t *__restrict__ col;
    const int32_t *__restrict__ perm;
};

struct csr_args {
    int64_t n_rows;
    const int64_t *__restrict__ row_ptr;
    const int32_t *__restrict__ col;
};

struct spmv_epilogue {
    double *__restrict__ y;
    const double *__restrict__ w; /* SPMV_DOT */
    gs_coef ka, kb;               /* SPMV_AXPBY */
    const double *S;
    double *partials;
    unsigned int *counter;
    double *out;
};

/* y_row = sum (plain and dot: plus sum * w_row to the dot), or
 * y_row = a sum + b y_row (y not read when b == 0, as the CPU engine). */
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
 * shuffles see the full mask. */
template <typename V, int MODE, int LANES>
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
    const int rows_per_warp = 32 / LANES;
    for (int64_t r0 = warp * rows_per_warp; r0 < A.n_rows; r0 += nwarps * rows_per_warp) {
        const int64_t row = r0 + lane / LANES;
        int64_t beg = 0, end = 0;
        if (row < A.n_rows) {
            beg = A.row_ptr[row];
            end = A.row_ptr[row + 1];
        }
        double sum = 0.0;
        for (int64_t k = beg + sub; k < end; k += LANES)
            sum = fma((double)__ldg(val + k), __ldg(x + __ldg(A.col + k)), sum);
#pragma unroll
        for (int o = LANES / 2; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o, LANES);
        if (sub == 0 && row < A.n_rows) acc += spmv_store<MODE>(ep, row, sum, a, b);
    }
    if (MODE == SPMV_DOT) gs_reduce_finish1(acc, ep.partials, ep.counter, ep.out);
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
    csr_args args = {A->n_rows, A->row_ptr, A->csr_col};
    return launch_capped<MODE>(e, A, csr_spmv_kernel<V, MODE, LANES>, "csr_spmv_kernel", grid,
                               args, (const V *)A->csr_val, x, ep);
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
    int64_t blocks = (warps + GS_CUDA_BLOCK / 32 - 1) / (GS_CUDA_BLOCK / 32);
    int64_t cap = gs_cuda_of(e)->red_blocks;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}

template <int MODE>
static int spmv_dispatch(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep)
{
    unsigned grid = spmv_grid(e, A);
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
static int spmv_prepare(gs_engine *e, const gs_mat *A)
{
    spmv_epilogue ep = {NULL, NULL, gs_coef_const(1.0), gs_coef_const(0.0), NULL, NULL, NULL, NULL};
    int status = GS_OK;
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

/* ------------------------------------------------------ building a matrix */

__global__ void row_length_kernel(const int64_t *__restrict__ row_ptr, int64_t n,
                                  int32_t *__restrict__ len)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) len[i] = (int32_t)(row_ptr[i + 1] - row_ptr[i]);
}

/* size[s] = 32 * (longest row of slice s), rows taken through perm. */
__global__ void slice_size_kernel(const int32_t *__restrict__ len, const int32_t *__restrict__ perm,
                                  int64_t n, int64_t n_slices, int64_t *__restrict__ size)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t s = t >> 5;
    if (s >= n_slices) return; /* whole warps leave together: n_slices * 32 threads */
    const int64_t r = t;
    int l = r < n ? len[perm ? perm[r] : r] : 0;
    l = __reduce_max_sync(0xffffffffu, l);
    if ((t & 31) == 0) size[s] = (int64_t)SELL_C * l;
}

/* key = (window, longest first): one radix sort orders every window. */
__global__ void sort_key_kernel(const int32_t *__restrict__ len, int64_t n, int64_t sigma,
                                unsigned long long *__restrict__ key, int32_t *__restrict__ idx)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    key[i] = ((unsigned long long)(i / sigma) << 32) | (0xffffffffu - (unsigned)len[i]);
    idx[i] = (int32_t)i;
}

/* One thread per stored row of slices s0..s1-1 of the SELL layout (ghost
 * rows included). */
template <typename V>
__global__ void sell_fill_kernel(const int64_t *__restrict__ row_ptr,
                                 const int32_t *__restrict__ col, const double *__restrict__ val,
                                 const int32_t *__restrict__ perm, int64_t n, int64_t s0,
                                 int64_t s1, const int64_t *__restrict__ slice_ptr,
                                 int32_t *__restrict__ sell_col, V *__restrict__ sell_val)
{
    const int64_t r = s0 * SELL_C + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t s = r / SELL_C;
    if (s >= s1) return;
    const int64_t base = slice_ptr[s] + (r % SELL_C);
    const int64_t width = (slice_ptr[s + 1] - slice_ptr[s]) / SELL_C;
    int64_t beg = 0, len = 0;
    if (r < n) {
        const int64_t row = perm ? perm[r] : r;
        beg = row_ptr[row];
        len = row_ptr[row + 1] - beg;
    }
    for (int64_t k = 0; k < width; k++) {
        const int64_t dst = base + k * SELL_C;
        sell_col[dst] = k < len ? col[beg + k] : -1;
        sell_val[dst] = k < len ? (V)val[beg + k] : (V)0;
    }
}

template <typename V>
__global__ void convert_values_kernel(const double *__restrict__ in, int64_t n, V *__restrict__ out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (V)in[i];
}

/* Triangular factor for SpSV: int32 row pointers, fp64 values rounded
 * through float when the matrix is stored in fp32 (as the CPU engine does). */
__global__ void tri_copy_kernel(const int64_t *__restrict__ row_ptr, int64_t n, int64_t nnz,
                                const double *__restrict__ val, int round_fp32,
                                int32_t *__restrict__ row_ptr32, double *__restrict__ val_out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) row_ptr32[i] = (int32_t)row_ptr[i];
    if (i < nnz) val_out[i] = round_fp32 ? (double)(float)val[i] : val[i];
}

/* The row (1-based) whose zero or missing diagonal the CPU engine's
 * substitution meets first: the lowest for a lower triangle (*first starts
 * at n + 1), the highest for an upper one (*first starts at 0). */
__global__ void zero_diagonal_kernel(const int32_t *__restrict__ row_ptr,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val, int64_t n, int upper,
                                     int *__restrict__ first)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double d = 0.0;
    for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++)
        if (col[k] == i) d = val[k];
    if (d != 0.0) return;
    if (upper)
        atomicMax(first, (int)i + 1);
    else
        atomicMin(first, (int)i + 1);
}

static unsigned blocks_for(int64_t threads)
{
    return (unsigned)((threads + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
}

#define SLICE_INFO_BLOCK 1024

struct max_op {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

/* info = {slice_ptr[ns], sizes[ns - 1], the largest size}: the three read in
 * one round trip; info[2] is zero on entry. Each block takes a strided share
 * of the slices and folds its largest into info[2] (sizes are >= 0). */
__global__ void __launch_bounds__(SLICE_INFO_BLOCK)
    slice_info_kernel(const int64_t *slice_ptr, const int64_t *sizes, int64_t ns, int64_t *info)
{
    typedef cub::BlockReduce<int64_t, SLICE_INFO_BLOCK> block_reduce;
    __shared__ typename block_reduce::TempStorage tmp;
    int64_t widest = 0;
    for (int64_t s = (int64_t)blockIdx.x * SLICE_INFO_BLOCK + threadIdx.x; s < ns;
         s += (int64_t)gridDim.x * SLICE_INFO_BLOCK)
        widest = max(widest, sizes[s]);
    widest = block_reduce(tmp).Reduce(widest, max_op());
    if (threadIdx.x == 0) atomicMax((unsigned long long *)&info[2], (unsigned long long)widest);
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        info[0] = slice_ptr[ns];
        info[1] = sizes[ns - 1];
    }
}

/* The host's share of a slice plan from its info = {stored entries, the
 * last slice's size, the widest slice's size}: P, the padding measure over
 * real rows (ghost rows of the last slice excluded) and the widest slice's
 * width. slice_plan_read brings the info in a round trip of its own. */
static void slice_plan_sizes(const gs_mat *m, const int64_t info[3], int64_t *P, int64_t *P_real,
                             int64_t *width_max)
{
    *P = info[0];
    *P_real = info[0] - (m->n_slices * SELL_C - m->n_rows) * (info[1] / SELL_C);
    *width_max = info[2] / SELL_C;
}

static int slice_plan_read(gs_engine *e, const gs_mat *m, const int64_t *d_info, int64_t *P,
                           int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int64_t info[3] = {0, 0, 0};
    int status = CUDA_CALL(&e->err, cudaMemcpyAsync(info, d_info, sizeof info,
                                                    cudaMemcpyDeviceToHost, c->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    slice_plan_sizes(m, info, P, P_real, width_max);
    return status;
}

/* Matrices of at most SLICE_SMALL_BLOCK slices in their own row order: the
 * slice sizes straight from the row pointers (a thread a slice), their scan
 * into slice_ptr and the info of slice_info_kernel, in one block: one launch
 * where build_slice_ptr takes six, each a few us of the host's time while
 * the device waits on small matrices (three builds in a small FSAI setup:
 * A, G and G^T). */
#define SLICE_SMALL_BLOCK 1024
__global__ void __launch_bounds__(SLICE_SMALL_BLOCK)
    slice_small_kernel(const int64_t *__restrict__ row_ptr, int64_t n, int64_t ns,
                       int64_t *__restrict__ slice_ptr, int64_t *__restrict__ info)
{
    typedef cub::BlockScan<int64_t, SLICE_SMALL_BLOCK, cub::BLOCK_SCAN_WARP_SCANS> block_scan;
    typedef cub::BlockReduce<int64_t, SLICE_SMALL_BLOCK> block_reduce;
    __shared__ union {
        typename block_scan::TempStorage scan;
        typename block_reduce::TempStorage reduce;
    } tmp;
    const int64_t s = threadIdx.x;
    int64_t size = 0, incl = 0;
    if (s < ns) {
        const int64_t r1 = (s + 1) * SELL_C < n ? (s + 1) * SELL_C : n;
        int64_t widest = 0;
        for (int64_t r = s * SELL_C; r < r1; r++) widest = max(widest, row_ptr[r + 1] - row_ptr[r]);
        size = SELL_C * widest;
    }
    block_scan(tmp.scan).InclusiveSum(size, incl);
    if (s < ns) slice_ptr[s + 1] = incl;
    if (s == 0) slice_ptr[0] = 0;
    if (s == ns - 1) {
        info[0] = incl;
        info[1] = size;
    }
    __syncthreads(); /* tmp is reused */
    const int64_t widest = block_reduce(tmp.reduce).Reduce(size, max_op());
    if (s == 0) info[2] = widest;
}

int gs_cuda_sell_plan_start(gs_engine *e, int32_t n_rows, const int64_t *row_ptr,
                            gs_cuda_sell_plan *p)
{
    const int64_t ns = ((int64_t)n_rows + SELL_C - 1) / SELL_C;
    int status = GS_OK;
    *p = gs_cuda_sell_plan{};
    p->n_slices = ns;
    if (ns == 0 || ns > SLICE_SMALL_BLOCK) return GS_OK; /* no plan: built as usual */
    GS_TRY(gs_cuda_alloc(e, &p->slice_ptr, ((size_t)ns + 1) * sizeof(int64_t),
                         "SELL slice pointers"));
    GS_TRY(gs_cuda_alloc(e, &p->info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, slice_small_kernel, 1, SLICE_SMALL_BLOCK, 0, gs_cuda_of(e)->stream,
                       row_ptr, (int64_t)n_rows, ns, p->slice_ptr, p->info));
cleanup:
    if (status != GS_OK) gs_cuda_sell_plan_free(e, p);
    return status;
}

void gs_cuda_sell_plan_free(gs_engine *e, gs_cuda_sell_plan *p)
{
    if (!p) return;
    gs_cuda_free(e, p->slice_ptr, ((size_t)p->n_slices + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->info, 3 * sizeof(int64_t));
    p->slice_ptr = NULL, p->info = NULL;
}

static int build_slice_ptr_small(gs_engine *e, gs_mat *m, const int64_t *row_ptr, int64_t *P,
                                 int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    int64_t *d_info = NULL;
    GS_TRY(gs_cuda_alloc(e, &d_info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, slice_small_kernel, 1, SLICE_SMALL_BLOCK, 0, c->stream, row_ptr,
                       (int64_t)m->n_rows, m->n_slices, m->slice_ptr, d_info));
    GS_TRY(slice_plan_read(e, m, d_info, P, P_real, width_max));
cleanup:
    gs_cuda_free(e, d_info, 3 * sizeof(int64_t));
    return status;
}

/* slice_ptr = [0, cumulative sizes]; returns P = stored entries and the
 * padding measure over real rows (ghost rows of the last slice excluded). */
static int build_slice_ptr(gs_engine *e, gs_mat *m, const int32_t *len, int64_t *sizes,
                           int64_t *P, int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    int64_t *d_info = NULL; /* stored, last slice, widest slice */
    const int64_t ns = m->n_slices;
    GS_TRY(CUDA_LAUNCH(&e->err, slice_size_kernel, blocks_for(ns * 32), GS_CUDA_BLOCK, 0, c->stream,
                       len, (const int32_t *)m->perm, (int64_t)m->n_rows, ns, sizes));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(m->slice_ptr, 0, sizeof(int64_t), c->stream)));
    GS_TRY(gs_dscan_inclusive(e, sizes, m->slice_ptr + 1, ns));
    GS_TRY(gs_cuda_alloc(e, &d_info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_info + 2, 0, sizeof(int64_t), c->stream)));
    {
        /* a block per 16 x 1024 slices (one block up to n = 512K rows), at
         * most the device's resident blocks */
        int64_t grid = (ns + 16 * SLICE_INFO_BLOCK - 1) / (16 * SLICE_INFO_BLOCK);
        if (grid > 2 * (int64_t)c->sm_count) grid = 2 * (int64_t)c->sm_count;
        GS_TRY(CUDA_LAUNCH(&e->err, slice_info_kernel, grid < 1 ? 1 : grid, SLICE_INFO_BLOCK, 0,
                           c->stream, (const int64_t *)m->slice_ptr, (const int64_t *)sizes, ns,
                           d_info));
    }
    GS_TRY(slice_plan_read(e, m, d_info, P, P_real, width_max));
cleanup:
    gs_cuda_free(e, d_info, 3 * sizeof(int64_t));
    return status;
}

/* perm = rows sorted by length (longest first) within windows of sigma. */
static int sort_rows(gs_engine *e, gs_mat *m, const int32_t *len)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows;
    unsigned long long *key_in = NULL, *key_out = NULL;
    int32_t *idx = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    int status = GS_OK, end_bit = 32;
    const int64_t sigma = m->sigma;
    while (end_bit < 64 && ((n - 1) / sigma) >> (end_bit - 32)) end_bit++;
    GS_TRY(gs_cuda_alloc(e, &key_in, n * sizeof *key_in, "SELL build: sort keys"));
    GS_TRY(gs_cuda_alloc(e, &key_out, n * sizeof *key_out, "SELL build: sort keys"));
    GS_TRY(gs_cuda_alloc(e, &idx, n * sizeof *idx, "SELL build: row indices"));
    GS_TRY(gs_cuda_alloc(e, &m->perm, n * sizeof *m->perm, "SELL row permutation"));
    m->bytes += n * sizeof *m->perm;
    GS_TRY(CUDA_LAUNCH(&e->err, sort_key_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream, len,
                       n, sigma, key_in, idx));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, key_in, key_out,
                                                              idx, m->perm, n, 0, end_bit,
                                                              c->stream)));
    GS_TRY(gs_cuda_alloc(e, &tmp, tmp_bytes, "SELL build: sort workspace"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, key_in, key_out,
                                                              idx, m->perm, n, 0, end_bit,
                                                              c->stream)));
cleanup: /* stream-ordered frees */
    gs_cuda_free(e, tmp, tmp_bytes);
    gs_cuda_free(e, idx, n * sizeof *idx);
    gs_cuda_free(e, key_out, n * sizeof *key_out);
    gs_cuda_free(e, key_in, n * sizeof *key_in);
    return status;
}

static int fill_sell(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                     const double *val)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    int status = gs_cuda_alloc(e, &m->sell_col, m->padded * sizeof(int32_t), "SELL column indices");
    if (status == GS_OK)
        status = gs_cuda_alloc(e, &m->sell_val, m->padded * vsize, "SELL values");
    if (status != GS_OK) return status;
    m->bytes += m->padded * (sizeof(int32_t) + vsize);
    const unsigned grid = blocks_for(m->n_slices * SELL_C);
    if (m->prec == GS_FP32)
        return CUDA_LAUNCH(&e->err, sell_fill_kernel<float>, grid, GS_CUDA_BLOCK, 0, c->stream,
                           row_ptr, col, val, (const int32_t *)m->perm, (int64_t)m->n_rows,
                           (int64_t)0, m->n_slices, (const int64_t *)m->slice_ptr, m->sell_col,
                           (float *)m->sell_val);
    return CUDA_LAUNCH(&e->err, sell_fill_kernel<double>, grid, GS_CUDA_BLOCK, 0, c->stream,
                       row_ptr, col, val, (const int32_t *)m->perm, (int64_t)m->n_rows,
                       (int64_t)0, m->n_slices, (const int64_t *)m->slice_ptr, m->sell_col,
                       (double *)m->sell_val);
}

/* ------------------------------------------------------- stepped layout */

/* Large matrices (CSR entries of at least vmm_min_bytes, fp64, rows in
 * their own order) are uploaded into chunk-mapped memory (gs_cuda_vmm),
 * and, where building their sliced ELL whole would raise the engine's peak
 * (build_layout), it is written in vmm_steps steps of about equal slice
 * counts: each step maps the chunks its part of the sliced ELL needs, fills
 * them, waits, and releases the CSR chunks that every later step lies
 * past. The device then never holds both layouts whole: the build's peak is
 * the matrix plus about a step and a chunk of each array (an eighth each),
 * where building from a whole CSR into a whole sliced ELL held both (the
 * 27-point stencil on 2M rows: 686 MB of CSR and 669 MB of SELL-32 at
 * once, the engine's peak). The price is the driver's calls, about 80 us a
 * chunk over its life on an H200 (docs/perf-notes.md, "Stepped layout"),
 * and a wait on the device a step. */

/* bounds[2 j] = slice_ptr[s_j], bounds[2 j + 1] = row_ptr[min(32 s_j, n)]
 * for the steps' first slices s_j = j ns / steps, j = 0..steps: where each
 * step's sliced ELL begins and how much of the CSR the steps before it
 * have read. */
__global__ void step_bounds_kernel(const int64_t *__restrict__ slice_ptr,
                                   const int64_t *__restrict__ row_ptr, int64_t n, int64_t ns,
                                   int steps, int64_t *__restrict__ bounds)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j > steps) return;
    const int64_t s = (int64_t)j * ns / steps, r = s * SELL_C < n ? s * SELL_C : n;
    bounds[2 * j] = slice_ptr[s];
    bounds[2 * j + 1] = row_ptr[r];
}

/* The sliced ELL (fp64, m->slice_ptr and m->padded planned) from a CSR
 * whose columns and values lie in src[0] and src[1]; src is consumed (its
 * chunks released and its ranges freed) whatever the outcome. */
static int fill_sell_stepped(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                             const double *val, gs_cuda_vmm src[2])
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t ns = m->n_slices, n = m->n_rows;
    const int steps = (int)(c->vmm_steps < ns ? c->vmm_steps : ns);
    const size_t bounds_bytes = (2 * (size_t)steps + 2) * sizeof(int64_t);
    int64_t *d_bounds = NULL, *b = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_vmm_reserve(e, &m->sell_vm[0], (size_t)m->padded * sizeof(int32_t),
                               "SELL column indices"));
    m->sell_col = (int32_t *)m->sell_vm[0].base;
    GS_TRY(gs_cuda_vmm_reserve(e, &m->sell_vm[1], (size_t)m->padded * sizeof(double),
                               "SELL values"));
    m->sell_val = m->sell_vm[1].base;
    m->bytes += m->padded * (sizeof(int32_t) + sizeof(double));
    b = (int64_t *)gs_malloc(bounds_bytes, "SELL build: step bounds", &e->err);
    if (!b) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(gs_cuda_alloc(e, &d_bounds, bounds_bytes, "SELL build: step bounds"));
    GS_TRY(CUDA_LAUNCH(&e->err, step_bounds_kernel, blocks_for(steps + 1), GS_CUDA_BLOCK, 0,
                       c->stream, (const int64_t *)m->slice_ptr, row_ptr, n, ns, steps, d_bounds));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(b, d_bounds, bounds_bytes, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    for (int j = 0; j < steps; j++) {
        const int64_t s0 = (int64_t)j * ns / steps, s1 = (int64_t)(j + 1) * ns / steps;
        const size_t p0 = (size_t)b[2 * j], p1 = (size_t)b[2 * j + 2];
        GS_TRY(gs_cuda_vmm_map(e, &m->sell_vm[0], p0 * sizeof(int32_t), p1 * sizeof(int32_t),
                               "SELL column indices"));
        GS_TRY(gs_cuda_vmm_map(e, &m->sell_vm[1], p0 * sizeof(double), p1 * sizeof(double),
                               "SELL values"));
        GS_TRY(CUDA_LAUNCH(&e->err, sell_fill_kernel<double>, blocks_for((s1 - s0) * SELL_C),
                           GS_CUDA_BLOCK, 0, c->stream, row_ptr, col, val, (const int32_t *)NULL,
                           n, s0, s1, (const int64_t *)m->slice_ptr, m->sell_col,
                           (double *)m->sell_val));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        const size_t read = (size_t)b[2 * j + 3]; /* CSR entries no later step reads */
        gs_cuda_vmm_unmap_below(e, &src[0], read * sizeof(int32_t));
        gs_cuda_vmm_unmap_below(e, &src[1], read * sizeof(double));
    }
cleanup:
    gs_cuda_vmm_free(e, &src[0]);
    gs_cuda_vmm_free(e, &src[1]);
    gs_cuda_free(e, d_bounds, bounds_bytes);
    free(b);
    return status;
}

/* Vector-CSR from device arrays: a copy of them, values in the stored
 * precision, or the arrays themselves taken over (the matrix then owns
 * them, with src, their chunk-mapped ranges where they have them: zeroed
 * here) where adopt is set and the values stay fp64; lanes per row = the
 * power of two at or above the mean row length, 2 to 32. */
static int fill_csr(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                    const double *val, int adopt, gs_cuda_vmm *src)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nnz = m->nnz;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    int status = GS_OK;
    m->format = GS_CUDA_CSR;
    m->lanes = 2;
    while (m->lanes < 32 && (double)m->lanes * (double)n < (double)nnz) m->lanes *= 2;
    if (adopt && m->prec == GS_FP64) {
        m->row_ptr = (int64_t *)row_ptr;
        m->csr_col = (int32_t *)col;
        m->csr_val = (void *)val;
        m->bytes += (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + vsize);
        if (src) {
            m->csr_vm[0] = src[0], m->csr_vm[1] = src[1];
            src[0] = gs_cuda_vmm{}, src[1] = gs_cuda_vmm{};
        }
        return GS_OK;
    }
    GS_TRY(gs_cuda_alloc(e, &m->row_ptr, (n + 1) * sizeof(int64_t), "CSR row pointers"));
    GS_TRY(gs_cuda_alloc(e, &m->csr_col, nnz * sizeof(int32_t), "CSR column indices"));
    GS_TRY(gs_cuda_alloc(e, &m->csr_val, nnz * vsize, "CSR values"));
    m->bytes += (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + vsize);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->row_ptr, row_ptr, (n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->csr_col, col, nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    if (m->prec == GS_FP32)
        GS_TRY(CUDA_LAUNCH(&e->err, convert_values_kernel<float>, blocks_for(nnz), GS_CUDA_BLOCK,
                           0, c->stream, val, nnz, (float *)m->csr_val));
    else if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->csr_val, val, nnz * sizeof(double),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
cleanup:
    return status;
}

static int keep_triangle(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                         const double *val)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nnz = m->nnz;
    const int upper = m->tri == GS_CUDA_TRI_UPPER;
    int status = GS_OK, first = 0, *d_first = NULL;
    if (nnz > INT32_MAX)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda: triangular matrix with %lld entries exceeds cuSPARSE's int32 "
                            "indices", (long long)nnz);
    GS_TRY(gs_cuda_alloc(e, &m->tri_row_ptr, (n + 1) * sizeof(int32_t), "triangular row pointers"));
    GS_TRY(gs_cuda_alloc(e, &m->tri_col, nnz * sizeof(int32_t), "triangular column indices"));
    GS_TRY(gs_cuda_alloc(e, &m->tri_val, nnz * sizeof(double), "triangular values"));
    m->bytes += (n + 1) * sizeof(int32_t) + nnz * (sizeof(int32_t) + sizeof(double));
    if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->tri_col, col, nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, tri_copy_kernel, blocks_for((nnz > n ? nnz : n) + 1),
                       GS_CUDA_BLOCK, 0, c->stream, row_ptr, n, nnz, val,
                       m->prec == GS_FP32 ? 1 : 0, m->tri_row_ptr, m->tri_val));
    GS_TRY(gs_cuda_alloc(e, &d_first, sizeof(int), "zero-diagonal flag"));
    first = upper ? 0 : (int)n + 1;
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_first, &first, sizeof(int),
                                              cudaMemcpyHostToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, zero_diagonal_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                       (const int32_t *)m->tri_row_ptr, (const int32_t *)m->tri_col,
                       (const double *)m->tri_val, n, upper, d_first));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&first, d_first, sizeof(int),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    m->tri_zero_diag_row = first >= 1 && first <= n ? first : 0;
cleanup:
    gs_cuda_free(e, d_first, sizeof(int));
    return status;
}

/* Choose the layout by the rule at the top of this file and build it;
 * force (benchmarks, tests) overrides the rule. plan (NULL, or started for
 * this matrix with its words read): its slice pointers are taken over
 * (plan->slice_ptr then NULL) instead of built. src (NULL, or with adopt
 * and fp64: the chunk-mapped ranges of col and val): the CSR layout takes
 * them over, the sliced ELL is built from them (in steps where that lowers
 * the peak) and frees them; once that point is reached they are zeroed,
 * and on a failure before it they stay the caller's. defer (with adopt, for
 * mat_create_system): where the device-fill rule does not settle it, the
 * matrix stays CSR for the setup (taking the arrays over) and setup_done
 * builds its layout. */
static int build_layout(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                        const double *val, gs_cuda_layout force, int sigma, int adopt,
                        gs_cuda_sell_plan *plan, gs_cuda_vmm *src, int defer)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows;
    int32_t *len = NULL;
    int64_t *sizes = NULL, P = 0, P_real = 0, width = 0;
    int status = GS_OK, use_sell = 0;
    m->n_slices = (n + SELL_C - 1) / SELL_C;
    m->sigma = 1;
    /* the device-fill rule (top of this file): no slice plan needed */
    const int few_long = (m->n_slices <= (int64_t)SELL_FEW_SLICES_PER_SM * c->sm_count &&
                          m->nnz >= (int64_t)SELL_LONG_ROW * n) ||
                         (m->n_slices <= (int64_t)SELL_SOME_SLICES_PER_SM * c->sm_count &&
                          m->nnz >= (int64_t)SELL_VERY_LONG_ROW * n);
    if (n == 0 || force == GS_CUDA_LAYOUT_CSR || (force == GS_CUDA_LAYOUT_AUTO && few_long))
        return fill_csr(e, m, row_ptr, col, val, adopt, src);
    if (defer) {
        m->deferred = 1;
        return fill_csr(e, m, row_ptr, col, val, adopt, src);
    }
    if (plan && plan->slice_ptr && force == GS_CUDA_LAYOUT_AUTO && plan->n_slices == m->n_slices) {
        m->slice_ptr = plan->slice_ptr;
        plan->slice_ptr = NULL;
    } else {
        GS_TRY(gs_cuda_alloc(e, &m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t),
                             "SELL slice pointers"));
        plan = NULL;
    }
    m->bytes += (m->n_slices + 1) * sizeof(int64_t);
    if (plan) {
        slice_plan_sizes(m, (const int64_t *)plan->words, &P, &P_real, &width);
    } else if (force != GS_CUDA_LAYOUT_SELL_SORTED && m->n_slices <= SLICE_SMALL_BLOCK) {
        GS_TRY(build_slice_ptr_small(e, m, row_ptr, &P, &P_real, &width));
    } else {
        GS_TRY(gs_cuda_alloc(e, &len, n * sizeof(int32_t), "SELL build: row lengths"));
        GS_TRY(gs_cuda_alloc(e, &sizes, m->n_slices * sizeof(int64_t), "SELL build: slice sizes"));
        GS_TRY(CUDA_LAUNCH(&e->err, row_length_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                           row_ptr, n, len));
        GS_TRY(build_slice_ptr(e, m, len, sizes, &P, &P_real, &width));
    }
    if (force == GS_CUDA_LAYOUT_AUTO) {
        /* fill: bytes moved; width ratio: how unevenly the static slice to
         * warp assignment is loaded (a few wide slices keep a few warps busy
         * after the others finish). */
        const double fill = m->nnz ? (double)P_real / (double)m->nnz : 1.0;
        const double mean_width = (double)P_real / (double)n;
        use_sell = fill <= SELL_MAX_FILL && (double)width <= SELL_MAX_WIDTH_RATIO * mean_width + 1.0;
    } else {
        use_sell = 1;
    }
    if (force == GS_CUDA_LAYOUT_SELL_SORTED) {
        m->sigma = sigma > 0 ? sigma : SELL_SIGMA;
        GS_TRY(sort_rows(e, m, len));
        GS_TRY(build_slice_ptr(e, m, len, sizes, &P, &P_real, &width));
    }
    if (use_sell) {
        m->format = GS_CUDA_SELL;
        m->padded = P;
        /* in steps only where building it whole would raise the engine's
         * peak (a deferred layout after a setup that held more is built
         * whole: cheaper, and no higher a peak) */
        const size_t whole = (size_t)P * (sizeof(int32_t) + sizeof(double));
        if (src && src[0].base && e->device_bytes_now + whole > e->device_bytes_peak) {
            GS_TRY(fill_sell_stepped(e, m, row_ptr, col, val, src));
        } else {
            GS_TRY(fill_sell(e, m, row_ptr, col, val));
            if (src) gs_cuda_vmm_free(e, &src[0]), gs_cuda_vmm_free(e, &src[1]);
        }
    } else {
        gs_cuda_free(e, m->perm, n * sizeof(int32_t));
        gs_cuda_free(e, m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t));
        m->bytes -= (m->perm ? n * sizeof(int32_t) : 0) + (m->n_slices + 1) * sizeof(int64_t);
        m->perm = NULL;
        m->slice_ptr = NULL;
        m->sigma = 1;
        GS_TRY(fill_csr(e, m, row_ptr, col, val, adopt, src));
    }
cleanup: /* stream-ordered frees; the matrix is ready in stream order */
    gs_cuda_free(e, sizes, m->n_slices * sizeof(int64_t));
    gs_cuda_free(e, len, n * sizeof(int32_t));
    return status;
}

static void name_layout(gs_mat *m)
{
    if (m->format == GS_CUDA_CSR)
        snprintf(m->layout, sizeof m->layout, "CSR");
    else if (m->perm)
        snprintf(m->layout, sizeof m->layout, "SELL-32-%d", m->sigma);
    else
        snprintf(m->layout, sizeof m->layout, "SELL-32");
}

/* adopt: row_ptr, col and val are the caller's to give; the CSR layout in
 * fp64 takes them over ((*out)->row_ptr == row_ptr then, and the caller
 * must not free them), any other layout copies them. src and defer: as
 * build_layout; on failure src is the caller's again if not consumed. */
static int mat_from_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                               const int64_t *row_ptr, const int32_t *col, const double *val,
                               gs_precision prec, gs_cuda_tri tri, gs_cuda_layout force,
                               int sigma, int adopt, gs_cuda_sell_plan *plan, gs_cuda_vmm *src,
                               int defer, gs_mat **out)
{
    *out = NULL;
    if (gs_cuda_of(e)->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda mat_create while capturing");
    gs_mat *m = (gs_mat *)gs_calloc(1, sizeof *m, "matrix header", &e->err);
    if (!m) return GS_ERR_NOMEM;
    m->n_rows = n_rows;
    m->n_cols = n_cols;
    m->nnz = nnz;
    m->prec = prec;
    m->tri = tri;
    int status = build_layout(e, m, row_ptr, col, val, force, sigma, adopt, plan, src, defer);
    name_layout(m);
    if (status == GS_OK) status = spmv_prepare(e, m);
    if (status == GS_OK && tri != GS_CUDA_TRI_NONE) status = keep_triangle(e, m, row_ptr, col, val);
    if (status != GS_OK) {
        if (m->row_ptr == row_ptr) { /* taken over: the caller's to free after all */
            m->row_ptr = NULL, m->csr_col = NULL, m->csr_val = NULL;
            if (src) src[0] = m->csr_vm[0], src[1] = m->csr_vm[1];
            m->csr_vm[0] = gs_cuda_vmm{}, m->csr_vm[1] = gs_cuda_vmm{};
        }
        gs_cuda_mat_destroy(e, m);
        return status;
    }
    *out = m;
    return GS_OK;
}

int gs_cuda_mat_from_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                const int64_t *row_ptr, const int32_t *col, const double *val,
                                gs_precision prec, gs_cuda_tri tri, gs_mat **out)
{
    return mat_from_device_csr(e, n_rows, n_cols, nnz, row_ptr, col, val, prec, tri,
                               GS_CUDA_LAYOUT_AUTO, 0, 0, NULL, NULL, 0, out);
}

int gs_cuda_mat_adopt_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                 int64_t *row_ptr, int32_t *col, double *val, gs_precision prec,
                                 gs_cuda_sell_plan *plan, int *taken, gs_mat **out)
{
    *taken = 0;
    const int status = mat_from_device_csr(e, n_rows, n_cols, nnz, row_ptr, col, val, prec,
                                           GS_CUDA_TRI_NONE, GS_CUDA_LAYOUT_AUTO, 0, 1, plan,
                                           NULL, 0, out);
    if (status == GS_OK) *taken = (*out)->row_ptr == row_ptr;
    if (plan) gs_cuda_sell_plan_free(e, plan); /* what the layout did not take */
    return status;
}

/* Triangular as stored (the CPU engine's rule): lower if no entry lies
 * above the diagonal, else upper if none lies below. */
static gs_cuda_tri triangle_of(const gs_csr *A)
{
    int lower = 1, upper = 1;
    if (A->n_rows != A->n_cols) return GS_CUDA_TRI_NONE;
    for (int32_t i = 0; i < A->n_rows && (lower || upper); i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            if (A->col[k] > i) lower = 0;
            if (A->col[k] < i) upper = 0;
        }
    return lower ? GS_CUDA_TRI_LOWER : upper ? GS_CUDA_TRI_UPPER : GS_CUDA_TRI_NONE;
}

/* A uploaded as CSR (one DMA an array from page-locked memory), then laid
 * out; the CSR layout in fp64 keeps the upload itself. Large fp64 matrices
 * in the automatic layout go into chunk-mapped memory and are laid out in
 * steps (fill_sell_stepped). system (mat_create_system: fp64, for the
 * setup that follows): unless the device-fill rule settles the layout now,
 * the matrix stays CSR, the upload itself, until setup_done lays it out, so
 * that the setup reads A's CSR while no second copy of A exists. */
static int mat_create_impl(gs_engine *e, const gs_csr *A, gs_precision prec,
                           gs_cuda_layout layout, int sigma, int system, gs_mat **out)
{
    *out = NULL;
    if (e->ops->kind != GS_ENGINE_CUDA)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "gs_cuda_mat_create_as: not a CUDA engine");
    if (!A->val)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda mat_create: matrix without values");
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = A->n_rows, nnz = A->nnz;
    const gs_cuda_tri tri = triangle_of(A);
    const int automatic = prec == GS_FP64 && layout == GS_CUDA_LAYOUT_AUTO && tri == GS_CUDA_TRI_NONE;
    const int stepped = automatic && c->vmm && nnz > 0 &&
                        (size_t)nnz * (sizeof(int32_t) + sizeof(double)) >= c->vmm_min_bytes;
    gs_cuda_vmm vm[2] = {gs_cuda_vmm{}, gs_cuda_vmm{}};
    int64_t *d_ptr = NULL;
    int32_t *d_col = NULL;
    double *d_val = NULL;
    int status = GS_OK, pending = 0;
    GS_TRY(gs_cuda_alloc(e, &d_ptr, (n + 1) * sizeof(int64_t), "matrix upload: row pointers"));
    if (stepped) {
        GS_TRY(gs_cuda_vmm_reserve(e, &vm[0], nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_vmm_map(e, &vm[0], 0, nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_vmm_reserve(e, &vm[1], nnz * sizeof(double), "matrix upload: values"));
        GS_TRY(gs_cuda_vmm_map(e, &vm[1], 0, nnz * sizeof(double), "matrix upload: values"));
        d_col = (int32_t *)vm[0].base;
        d_val = (double *)vm[1].base;
    } else {
        GS_TRY(gs_cuda_alloc(e, &d_col, nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_alloc(e, &d_val, nnz * sizeof(double), "matrix upload: values"));
    }
    GS_TRY(gs_cuda_upload_start(e, d_ptr, A->row_ptr, (n + 1) * sizeof(int64_t), &pending));
    if (nnz > 0) {
        GS_TRY(gs_cuda_upload_start(e, d_col, A->col, nnz * sizeof(int32_t), &pending));
        GS_TRY(gs_cuda_upload_start(e, d_val, A->val, nnz * sizeof(double), &pending));
    }
    GS_TRY(mat_from_device_csr(e, A->n_rows, A->n_cols, nnz, d_ptr, d_col, d_val, prec, tri,
                               layout, sigma, 1, NULL, stepped ? vm : NULL,
                               system && automatic, out));
    if ((*out)->row_ptr == d_ptr) d_ptr = NULL, d_col = NULL, d_val = NULL; /* the matrix's own now */
cleanup: /* stream-ordered frees: after the kernels that read them */
    status = gs_cuda_upload_finish(e, pending, status);
    if (status != GS_OK && *out) { /* the upload's wait failed: no matrix after all */
        gs_cuda_mat_destroy(e, *out);
        *out = NULL;
    }
    if (stepped) { /* taken over, consumed, or freed here */
        gs_cuda_vmm_free(e, &vm[0]);
        gs_cuda_vmm_free(e, &vm[1]);
        d_col = NULL, d_val = NULL;
    }
    gs_cuda_free(e, d_val, nnz * sizeof(double));
    gs_cuda_free(e, d_col, nnz * sizeof(int32_t));
    gs_cuda_free(e, d_ptr, (n + 1) * sizeof(int64_t));
    return status;
}

extern "C" int gs_cuda_mat_create_as(gs_engine *e, const gs_csr *A, gs_precision prec,
                                      gs_cuda_layout layout, int sigma, gs_mat **out)
{
    return mat_create_impl(e, A, prec, layout, sigma, 0, out);
}

int gs_cuda_mat_create(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out)
{
    return mat_create_impl(e, A, prec, GS_CUDA_LAYOUT_AUTO, 0, 0, out);
}

int gs_cuda_mat_create_system(gs_engine *e, const gs_csr *A, gs_mat **out)
{
    return mat_create_impl(e, A, GS_FP64, GS_CUDA_LAYOUT_AUTO, 0, 1, out);
}

/* A deferred matrix's layout, by the rule, from its own CSR: taken over
 * again where the rule picks CSR, else consumed (in steps where it lies in
 * chunk-mapped memory and building whole would raise the peak) and freed. */
int gs_cuda_setup_done(gs_engine *e, gs_mat *A, int *laid_out)
{
    *laid_out = 0;
    if (!A || !A->deferred) return GS_OK;
    if (gs_cuda_of(e)->capturing) /* it synchronises */
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda setup_done while capturing");
    const int64_t n = A->n_rows, nnz = A->nnz;
    int64_t *rp = A->row_ptr;
    int32_t *col = A->csr_col;
    double *val = (double *)A->csr_val;
    gs_cuda_vmm src[2] = {A->csr_vm[0], A->csr_vm[1]};
    const int mapped = src[0].base != NULL;
    A->row_ptr = NULL, A->csr_col = NULL, A->csr_val = NULL;
    A->csr_vm[0] = gs_cuda_vmm{}, A->csr_vm[1] = gs_cuda_vmm{};
    A->bytes -= (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + sizeof(double));
    A->deferred = 0;
    memset(A->max_blocks, 0, sizeof A->max_blocks); /* the caps of the layout's own kernels */
    int status = build_layout(e, A, rp, col, val, GS_CUDA_LAYOUT_AUTO, 0, 1, NULL,
                              mapped ? src : NULL, 0);
    name_layout(A);
    if (status == GS_OK) status = spmv_prepare(e, A);
    *laid_out = 1;
    if (A->row_ptr != rp) { /* not taken over again: consumed, or copied */
        gs_cuda_vmm_free(e, &src[0]);
        gs_cuda_vmm_free(e, &src[1]);
        if (!mapped) {
            gs_cuda_free(e, val, nnz * sizeof(double));
            gs_cuda_free(e, col, nnz * sizeof(int32_t));
        }
        gs_cuda_free(e, rp, (n + 1) * sizeof(int64_t));
    }
    return status;
}

void gs_cuda_mat_destroy(gs_engine *e, gs_mat *m)
{
    if (!m) return;
    const int64_t n = m->n_rows, nnz = m->nnz;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    for (int u = 0; u < 2; u++) {
        if (m->spsv[u]) cusparseSpSV_destroyDescr(m->spsv[u]);
        if (m->tri_descr[u]) cusparseDestroySpMat(m->tri_descr[u]);
        gs_cuda_free(e, m->spsv_buffer[u], m->spsv_bytes[u]);
    }
    gs_cuda_free(e, m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t));
    if (m->sell_vm[0].base || m->sell_vm[1].base) {
        gs_cuda_vmm_free(e, &m->sell_vm[0]);
        gs_cuda_vmm_free(e, &m->sell_vm[1]);
    } else {
        gs_cuda_free(e, m->sell_col, m->padded * sizeof(int32_t));
        gs_cuda_free(e, m->sell_val, m->padded * vsize);
    }
    gs_cuda_free(e, m->perm, n * sizeof(int32_t));
    gs_cuda_free(e, m->row_ptr, (n + 1) * sizeof(int64_t));
    if (m->csr_vm[0].base || m->csr_vm[1].base) {
        gs_cuda_vmm_free(e, &m->csr_vm[0]);
        gs_cuda_vmm_free(e, &m->csr_vm[1]);
    } else {
        gs_cuda_free(e, m->csr_col, nnz * sizeof(int32_t));
        gs_cuda_free(e, m->csr_val, nnz * vsize);
    }
    gs_cuda_free(e, m->tri_row_ptr, (n + 1) * sizeof(int32_t));
    gs_cuda_free(e, m->tri_col, nnz * sizeof(int32_t));
    gs_cuda_free(e, m->tri_val, nnz * sizeof(double));
    free(m);
}

/* ------------------------------------------- A's CSR back from the device */

/* Stored row r (r < n) of a SELL layout: its entries are k = 0, 1, ... at
 * slice_ptr[s] + 32 k + r % 32 until the first padding (col = -1, which only
 * ever ends a row) or the slice's width. That first padding is found by a
 * binary search (the walk up to it was one dependent load an entry: 9 us on
 * bcsstk15's 4k rows). */
__global__ void sell_csr_length_kernel(const int64_t *__restrict__ slice_ptr,
                                       const int32_t *__restrict__ sell_col,
                                       const int32_t *__restrict__ perm, int64_t n,
                                       int64_t *__restrict__ rp)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t s = r / SELL_C, base = slice_ptr[s] + (r % SELL_C);
    const int64_t width = (slice_ptr[s + 1] - slice_ptr[s]) / SELL_C;
    int64_t len = 0, end = width; /* entries < len are stored, entries >= end padding */
    while (len < end) {
        const int64_t mid = (len + end) / 2;
        if (sell_col[base + mid * SELL_C] >= 0) len = mid + 1;
        else end = mid;
    }
    rp[(perm ? perm[r] : r) + 1] = len;
}

/* Rows sorted (perm): stored row r to its CSR row perm[r] at rp[perm[r]],
 * one thread a row, the entries in their stored order (the order mat_create
 * was given). */
__global__ void sell_csr_gather_rows_kernel(const int64_t *__restrict__ slice_ptr,
                                            const int32_t *__restrict__ sell_col,
                                            const double *__restrict__ sell_val,
                                            const int32_t *__restrict__ perm, int64_t n,
                                            const int64_t *__restrict__ rp,
                                            int32_t *__restrict__ col, double *__restrict__ val)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t base = slice_ptr[r / SELL_C] + (r % SELL_C);
    const int64_t row = perm[r], beg = rp[row], len = rp[row + 1] - beg;
    for (int64_t k = 0; k < len; k++) {
        col[beg + k] = sell_col[base + k * SELL_C];
        val[beg + k] = sell_val[base + k * SELL_C];
    }
}

/* Rows in their own order: the CSR rows of slice s are one contiguous run
 * rp[32 s] .. rp[32 s + 32]. One warp a slice writes that run with
 * consecutive lanes on consecutive entries (coalesced stores); entry p of the
 * run is entry k of row j of the slice, j found by binary lifting over the
 * lanes' prefix sums (lane l holds incl = rp[32 s + l + 1] - rp[32 s]), read
 * at slice_ptr[s] + 32 k + j (the slice's few lines stay in L1). A thread a
 * row would store 32 rows apart at every step instead. */
__global__ void sell_csr_gather_slices_kernel(const int64_t *__restrict__ slice_ptr,
                                              const int32_t *__restrict__ sell_col,
                                              const double *__restrict__ sell_val, int64_t n,
                                              int64_t n_slices, const int64_t *__restrict__ rp,
                                              int32_t *__restrict__ col, double *__restrict__ val)
{
    const int lane = threadIdx.x & 31;
    const int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (s >= n_slices) return; /* whole warps leave together */
    const int64_t r0 = s * SELL_C, last = r0 + SELL_C < n ? r0 + SELL_C : n;
    const int64_t beg = rp[r0];
    const int64_t incl = rp[r0 + lane + 1 < last ? r0 + lane + 1 : last] - beg;
    const int64_t total = __shfl_sync(0xffffffffu, incl, 31);
    const int64_t src0 = slice_ptr[s];
    for (int64_t q = lane; q - lane < total; q += 32) {
        int j = 0; /* the lane j with incl_{j-1} <= q < incl_j */
#pragma unroll
        for (int step = 16; step > 0; step >>= 1)
            if (__shfl_sync(0xffffffffu, incl, j + step - 1) <= q) j += step;
        const int64_t prev = __shfl_sync(0xffffffffu, incl, j > 0 ? j - 1 : 0);
        const int64_t first = j > 0 ? prev : 0;
        if (q < total) {
            const int64_t src = src0 + (q - first) * SELL_C + j;
            col[beg + q] = sell_col[src];
            val[beg + q] = sell_val[src];
        }
    }
}

void gs_cuda_csr_view_free(gs_engine *e, gs_cuda_csr_view *v)
{
    if (!v) return;
    if (v->owned) {
        gs_cuda_free(e, (void *)v->row_ptr, ((size_t)v->n_rows + 1) * sizeof(int64_t));
        gs_cuda_free(e, (void *)v->col, (size_t)v->nnz * sizeof(int32_t));
        gs_cuda_free(e, (void *)v->val, (size_t)v->nnz * sizeof(double));
    }
    *v = gs_cuda_csr_view{};
}

int gs_cuda_mat_device_csr(gs_engine *e, const gs_mat *A, gs_cuda_csr_view *out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = A->n_rows, nnz = A->nnz;
    int64_t *rp = NULL;
    int32_t *col = NULL;
    double *val = NULL;
    int status = GS_OK;
    *out = gs_cuda_csr_view{};
    if (A->prec != GS_FP64)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda: the CSR of a matrix stored in fp32 is not its fp64 matrix");
    out->n_rows = A->n_rows;
    out->n_cols = A->n_cols;
    out->nnz = nnz;
    if (A->format == GS_CUDA_CSR) {
        out->row_ptr = A->row_ptr;
        out->col = A->csr_col;
        out->val = (const double *)A->csr_val;
        return GS_OK;
    }
    GS_TRY(gs_cuda_alloc(e, &rp, ((size_t)n + 1) * sizeof(int64_t), "CSR of A: row pointers"));
    GS_TRY(gs_cuda_alloc(e, &col, (size_t)nnz * sizeof(int32_t), "CSR of A: column indices"));
    GS_TRY(gs_cuda_alloc(e, &val, (size_t)nnz * sizeof(double), "CSR of A: values"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(rp, 0, sizeof(int64_t), c->stream)));
    if (n > 0) {
        GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_length_kernel, blocks_for(n), GS_CUDA_BLOCK, 0,
                           c->stream, (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                           (const int32_t *)A->perm, n, rp));
        GS_TRY(gs_dscan_inclusive(e, rp + 1, rp + 1, n));
        if (A->perm)
            GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_gather_rows_kernel, blocks_for(n), GS_CUDA_BLOCK,
                               0, c->stream, (const int64_t *)A->slice_ptr,
                               (const int32_t *)A->sell_col, (const double *)A->sell_val,
                               (const int32_t *)A->perm, n, (const int64_t *)rp, col, val));
        else
            GS_TRY(CUDA_LAUNCH(&e->err, sell_csr_gather_slices_kernel,
                               blocks_for(A->n_slices * SELL_C), GS_CUDA_BLOCK, 0, c->stream,
                               (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                               (const double *)A->sell_val, n, A->n_slices, (const int64_t *)rp,
                               col, val));
    }
    /* no read back of rp[n]: the sliced ELL was built from exactly nnz
     * entries, each stored once with a column >= 0 (fill_sell), so the
     * lengths add up to nnz (the engine tests compare this CSR with the
     * host's) */
    out->row_ptr = rp;
    out->col = col;
    out->val = val;
    out->owned = 1;
    rp = NULL, col = NULL, val = NULL;
cleanup:
    gs_cuda_free(e, val, (size_t)nnz * sizeof(double));
    gs_cuda_free(e, col, (size_t)nnz * sizeof(int32_t));
    gs_cuda_free(e, rp, ((size_t)n + 1) * sizeof(int64_t));
    return status;
}

extern "C" int gs_cuda_mat_device_csr_download(gs_engine *e, const gs_mat *A, gs_csr *out,
                                               int *owned)
{
    gs_cuda_csr_view v = {};
    int status = GS_OK;
    *owned = -1;
    GS_TRY(gs_cuda_mat_device_csr(e, A, &v));
    *owned = v.owned;
    /* the view is built in the engine's stream order; the copies below run
     * on the legacy stream, which does not wait for it */
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->row_ptr, v.row_ptr,
                                         ((size_t)v.n_rows + 1) * sizeof(int64_t),
                                         cudaMemcpyDeviceToHost)));
    if (v.nnz > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->col, v.col, (size_t)v.nnz * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpy(out->val, v.val, (size_t)v.nnz * sizeof(double),
                                             cudaMemcpyDeviceToHost)));
    }
cleanup:
    gs_cuda_csr_view_free(e, &v);
    return status;
}

/* Host CSR of an engine matrix (sliced ELL: padding has column -1 and ends
 * each row; CSR: copied), values in fp64. */
int gs_cuda_mat_download(const gs_mat *m, gs_csr *out, gs_error *err)
{
    const int64_t n = m->n_rows;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    const int64_t stored = m->format == GS_CUDA_CSR ? m->nnz : m->padded;
    int64_t *sp = NULL;
    int32_t *col = NULL, *perm = NULL;
    void *val = NULL;
    int status = GS_OK;
    GS_TRY(gs_csr_alloc(m->n_rows, m->n_cols, m->nnz, 1, out, err));
    col = (int32_t *)gs_malloc((size_t)stored * sizeof(int32_t) + 1, "matrix download", err);
    val = gs_malloc((size_t)stored * vsize + 1, "matrix download", err);
    if (!col || !val) GS_TRY(GS_ERR_NOMEM);
    if (m->format == GS_CUDA_CSR) {
        GS_TRY(CUDA_CALL(err, cudaMemcpy(out->row_ptr, m->row_ptr, (size_t)(n + 1) * sizeof(int64_t),
                                         cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(err, cudaMemcpy(out->col, m->csr_col, (size_t)stored * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost)));
        GS_TRY(CUDA_CALL(err, cudaMemcpy(val, m->csr_val, (size_t)stored * vsize,
                                         cudaMemcpyDeviceToHost)));
        for (int64_t p = 0; p < stored; p++)
            out->val[p] = vsize == sizeof(float) ? (double)((float *)val)[p] : ((double *)val)[p];
        goto cleanup;
    }
    sp = (int64_t *)gs_malloc((size_t)(m->n_slices + 1) * sizeof(int64_t), "matrix download", err);
    perm = m->perm ? (int32_t *)gs_malloc((size_t)n * sizeof(int32_t), "matrix download", err) : NULL;
    if (!sp || (m->perm && !perm)) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(CUDA_CALL(err, cudaMemcpy(sp, m->slice_ptr, (size_t)(m->n_slices + 1) * sizeof(int64_t),
                                     cudaMemcpyDeviceToHost)));
    GS_TRY(CUDA_CALL(err, cudaMemcpy(col, m->sell_col, (size_t)stored * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost)));
    GS_TRY(CUDA_CALL(err, cudaMemcpy(val, m->sell_val, (size_t)stored * vsize, cudaMemcpyDeviceToHost)));
    if (perm)
        GS_TRY(CUDA_CALL(err, cudaMemcpy(perm, m->perm, (size_t)n * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost)));
    for (int pass = 0; pass < 2; pass++) { /* 0: row lengths, 1: entries */
        for (int64_t r = 0; r < n; r++) {
            const int64_t s = r / 32, width = (sp[s + 1] - sp[s]) / 32;
            const int64_t row = perm ? perm[r] : r;
            int64_t q = pass ? out->row_ptr[row] : 0;
            for (int64_t k = 0; k < width; k++) {
                const int64_t src = sp[s] + 32 * k + r % 32;
                if (col[src] < 0) break;
                if (pass) {
                    out->col[q] = col[src];
                    out->val[q] = vsize == sizeof(float) ? (double)((float *)val)[src]
                                                         : ((double *)val)[src];
                }
                q++;
            }
            if (!pass) out->row_ptr[row + 1] = q;
        }
        if (!pass)
            for (int64_t r = 0; r < n; r++) out->row_ptr[r + 1] += out->row_ptr[r];
    }
cleanup:
    free(sp);
    free(col);
    free(val);
    free(perm);
    if (status != GS_OK) gs_csr_free(out);
    return status;
}

/* --------------------------------------------------------------- diagonal */

/* out[row] = a_row,row, or its inverse where INVERT (0 for a zero or
 * missing diagonal); *first_zero = lowest 1-based row whose diagonal is
 * zero or missing (the CPU setups report the first one). */
template <typename V, bool INVERT>
__global__ void mat_diagonal_sell_kernel(int64_t n, const int64_t *__restrict__ slice_ptr,
                                         const int32_t *__restrict__ col,
                                         const V *__restrict__ val,
                                         const int32_t *__restrict__ perm,
                                         double *__restrict__ out, int *first_zero)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int64_t row = perm ? perm[r] : r, s = r / 32;
    double d = 0.0;
    for (int64_t k = slice_ptr[s] + (r % 32); k < slice_ptr[s + 1]; k += 32)
        if (col[k] == row) d = (double)val[k];
    out[row] = !INVERT ? d : d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(first_zero, (int)row + 1);
}

template <typename V, bool INVERT>
__global__ void mat_diagonal_csr_kernel(int64_t n, const int64_t *__restrict__ row_ptr,
                                        const int32_t *__restrict__ col,
                                        const V *__restrict__ val, double *__restrict__ out,
                                        int *first_zero)
{
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    double d = 0.0;
    for (int64_t k = row_ptr[row]; k < row_ptr[row + 1]; k++)
        if (col[k] == row) d = (double)val[k];
    out[row] = !INVERT ? d : d != 0.0 ? 1.0 / d : 0.0;
    if (d == 0.0) atomicMin(first_zero, (int)row + 1);
}

template <bool INVERT>
static int mat_diagonal_launch(gs_engine *e, const gs_mat *A, double *out, int *first_zero)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const unsigned grid = (unsigned)((A->n_rows + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
    auto sell = mat_diagonal_sell_kernel<double, INVERT>;
    auto csr = mat_diagonal_csr_kernel<double, INVERT>;
    if (A->format == GS_CUDA_SELL)
        return CUDA_LAUNCH(&e->err, sell, grid, GS_CUDA_BLOCK, 0, c->stream, (int64_t)A->n_rows,
                           (const int64_t *)A->slice_ptr, (const int32_t *)A->sell_col,
                           (const double *)A->sell_val, (const int32_t *)A->perm, out,
                           first_zero);
    return CUDA_LAUNCH(&e->err, csr, grid, GS_CUDA_BLOCK, 0, c->stream, (int64_t)A->n_rows,
                       (const int64_t *)A->row_ptr, (const int32_t *)A->csr_col,
                       (const double *)A->csr_val, out, first_zero);
}

int gs_cuda_mat_diagonal(gs_engine *e, const gs_mat *A, int invert, double *out, int *first_zero)
{
    if (A->prec != GS_FP64)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda mat_diagonal: the matrix is stored in fp32 (its diagonal "
                            "rounded); take it from the host matrix");
    return invert ? mat_diagonal_launch<true>(e, A, out, first_zero)
                  : mat_diagonal_launch<false>(e, A, out, first_zero);
}

gs_cuda_mat_info gs_cuda_mat_info_of(const gs_mat *A)
{
    gs_cuda_mat_info i = {A->n_rows, A->n_cols, A->nnz, A->prec};
    return i;
}

/* --------------------------------------------------------------- trisolve */

/* cuSPARSE SpSV analysis for one diagonal type, on first use: the
 * descriptor, its buffer and the analysis are kept with the matrix. */
static int spsv_prepare(gs_engine *e, gs_mat *m, int u, cusparseDnVecDescr_t vb,
                        cusparseDnVecDescr_t vx)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const double one = 1.0;
    cusparseFillMode_t fill = m->tri == GS_CUDA_TRI_LOWER ? CUSPARSE_FILL_MODE_LOWER
                                                          : CUSPARSE_FILL_MODE_UPPER;
    cusparseDiagType_t diag = u ? CUSPARSE_DIAG_TYPE_UNIT : CUSPARSE_DIAG_TYPE_NON_UNIT;
    int status = GS_OK;
    if (c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "cuda trisolve: first solve with a matrix (its analysis) while "
                            "capturing; solve once before capturing");
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateCsr(&m->tri_descr[u], m->n_rows, m->n_cols, m->nnz,
                                                    m->tri_row_ptr, m->tri_col, m->tri_val,
                                                    CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                    CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpMatSetAttribute(m->tri_descr[u], CUSPARSE_SPMAT_FILL_MODE,
                                                            &fill, sizeof fill)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpMatSetAttribute(m->tri_descr[u], CUSPARSE_SPMAT_DIAG_TYPE,
                                                            &diag, sizeof diag)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_createDescr(&m->spsv[u])));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_bufferSize(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                          &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                          CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u],
                                                          &m->spsv_bytes[u])));
    GS_TRY(gs_cuda_alloc(e, &m->spsv_buffer[u], m->spsv_bytes[u], "cuSPARSE SpSV buffer"));
    m->bytes += m->spsv_bytes[u];
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_analysis(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                        &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                        CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u],
                                                        m->spsv_buffer[u])));
cleanup:
    return status;
}

int gs_cuda_trisolve(gs_engine *e, const gs_mat *T, int unit_diagonal, const gs_vec *b, gs_vec *x)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_mat *m = (gs_mat *)T; /* the analysis is cached in the matrix */
    const int u = unit_diagonal ? 1 : 0;
    const double one = 1.0;
    cusparseDnVecDescr_t vb = NULL, vx = NULL;
    int status = GS_OK;
    if (m->tri == GS_CUDA_TRI_NONE)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve: matrix is not triangular");
    if (b->n != m->n_rows || x->n != m->n_rows)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda trisolve: vector lengths %lld, %lld "
                            "for %d rows", (long long)b->n, (long long)x->n, (int)m->n_rows);
    if (!u && m->tri_zero_diag_row > 0)
        return gs_error_set(&e->err, GS_ERR_NUMERIC, "trisolve: zero diagonal in row %d",
                            m->tri_zero_diag_row);
    if (m->n_rows == 0) return GS_OK;
    if (m->nnz == 0) /* unit diagonal, nothing else stored: x = b */
        return CUDA_CALL(&e->err, cudaMemcpyAsync(x->d, b->d, b->n * sizeof(double),
                                                  cudaMemcpyDeviceToDevice, c->stream));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateDnVec(&vb, b->n, b->d, CUDA_R_64F)));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseCreateDnVec(&vx, x->n, x->d, CUDA_R_64F)));
    if (!m->spsv[u]) GS_TRY(spsv_prepare(e, m, u, vb, vx));
    GS_TRY(CUSPARSE_CALL(&e->err, cusparseSpSV_solve(c->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                     &one, m->tri_descr[u], vb, vx, CUDA_R_64F,
                                                     CUSPARSE_SPSV_ALG_DEFAULT, m->spsv[u])));
cleanup:
    if (vb) cusparseDestroyDnVec(vb);
    if (vx) cusparseDestroyDnVec(vx);
    return status;
}

/* ------------------------------------------------------------ for C code */

extern "C" const char *gs_cuda_mat_layout(const gs_mat *A) { return A->layout; }

extern "C" double gs_cuda_mat_fill_ratio(const gs_mat *A)
{
    if (A->format == GS_CUDA_CSR || A->nnz == 0) return 1.0;
    return (double)A->padded / (double)A->nnz;
}

extern "C" int gs_cuda_sm_count(gs_engine *e)
{
    return e && e->ops->kind == GS_ENGINE_CUDA ? gs_cuda_of(e)->sm_count : 0;
}

extern "C" double gs_cuda_mat_stream_bytes(const gs_mat *A)
{
    const double vsize = A->prec == GS_FP32 ? 4.0 : 8.0;
    if (A->format == GS_CUDA_CSR)
        return (double)A->nnz * (vsize + 4.0) + ((double)A->n_rows + 1.0) * 8.0;
    return (double)A->padded * (vsize + 4.0) + ((double)A->n_slices + 1.0) * 8.0 +
           (A->perm ? 4.0 * (double)A->n_rows : 0.0);
}
