/* spmv_long.cu - the merge-path SpMV (Merrill and Garland, "Merge-based parallel sparse
 * matrix-vector multiplication", SC 2016) with the fused dot / axpby epilogues, for rows of
 * very different lengths; long_rows.cu has the rule and the builds, spmv_split.cuh the split
 * rows. No floating-point atomics: every sum is a fixed tree or a fixed order, so a product
 * gives the same bits every run. */
#include "layout.h"
#include "reduce.cuh"
#include "spmv_split.cuh"

/* ------------------------------------------------------------ merge path */

struct merge_args {
    int64_t n_rows, nnz, n_tiles, n_fix;
    const int64_t *__restrict__ row_ptr;
    const int32_t *__restrict__ col;
    const int32_t *__restrict__ tile_row;
    const int32_t *__restrict__ fix_tile;
    double *open_part, *close_part;
    double *aux; /* dot of the tile kernel where fix-ups follow */
};

/* A warp a tile of MERGE_TILE path items (a row's end is an item, an entry
 * is an item), MERGE_ITEMS consecutive ones a lane, its start found by the
 * diagonal search within the tile's rows. The tile's products a_ij x_j (at
 * most MERGE_TILE) are formed first, coalesced, 8 independent loads a lane
 * in flight, into the warp's shared memory. A lane sums products until a row
 * ends: the first row a lane ends may have begun in earlier lanes, whose
 * open parts reach it through a segmented scan over the warp (keys: the
 * row open at each lane's end, nondecreasing); the rows it ends after its
 * first began in it and are complete. The row open at the tile's end
 * leaves its part in open_part[t]; a row begun in an earlier tile and
 * ended in this one leaves this tile's part in close_part[t], and the
 * fix-up kernel finishes it. */
template <typename V, int MODE>
__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    merge_tile_kernel(merge_args A, const V *__restrict__ val, const double *__restrict__ x,
                      spmv_epilogue ep)
{
    double a = 1.0, b = 0.0, acc = 0.0;
    if (MODE == SPMV_AXPBY) {
        a = gs_coef_eval(ep.ka, ep.S);
        b = gs_coef_eval(ep.kb, ep.S);
    }
    __shared__ double products[GS_CUDA_BLOCK / 32][MERGE_TILE];
    double *prod = products[threadIdx.x >> 5];
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5, total = A.n_rows + A.nnz;
    for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < A.n_tiles;
         t += nwarps) {
        const int64_t i0 = A.tile_row[t], i1 = A.tile_row[t + 1];
        const int64_t j0 = t * MERGE_TILE - i0;
        const int64_t j1 = ((t + 1) * MERGE_TILE < total ? (t + 1) * MERGE_TILE : total) - i1;
        const bool began_before = A.row_ptr[i0] < j0;
        __syncwarp(); /* the previous tile's walk has read prod */
#pragma unroll
        for (int q = 0; q < MERGE_ITEMS; q++) {
            const int64_t jj = j0 + q * 32 + lane;
            prod[q * 32 + lane] = jj < j1 ? (double)__ldg(val + jj) * __ldg(x + __ldg(A.col + jj)) : 0.0;
        }
        __syncwarp();
        const int64_t d = t * MERGE_TILE + (int64_t)lane * MERGE_ITEMS;
        const int64_t d_end = d + MERGE_ITEMS < total ? d + MERGE_ITEMS : total;
        /* the lane's start (i, j), i + j = d, i in [i0, i1] */
        int64_t i = i1, j = A.nnz;
        if (d < total) {
            int64_t lo = d - A.nnz > i0 ? d - A.nnz : i0, hi = d < i1 ? d : i1;
            while (lo < hi) {
                const int64_t mid = (lo + hi) / 2;
                if (A.row_ptr[mid + 1] <= d - mid - 1) lo = mid + 1;
                else hi = mid;
            }
            i = lo;
            j = d - lo;
        }
        double sum = 0.0, first_sum = 0.0;
        int64_t first_row = -1;
        int64_t row_end = i < A.n_rows ? A.row_ptr[i + 1] : A.nnz;
        for (int64_t p = d; p < d_end; p++) {
            if (j >= row_end) { /* row i ends */
                if (first_row < 0) {
                    first_row = i;
                    first_sum = sum;
                } else {
                    acc += spmv_store<MODE>(ep, i, sum, a, b);
                }
                sum = 0.0;
                i++;
                row_end = i < A.n_rows ? A.row_ptr[i + 1] : A.nnz;
            } else {
                sum += prod[j - j0];
                j++;
            }
        }
        /* segmented inclusive scan of the open parts, keyed by their row */
        int64_t key = i;
        double v = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const double ov = __shfl_up_sync(0xffffffffu, v, o);
            const int64_t ok = __shfl_up_sync(0xffffffffu, key, o);
            if (lane >= o && ok == key) v += ov;
        }
        const double in_v = __shfl_up_sync(0xffffffffu, v, 1);
        const int64_t in_key = __shfl_up_sync(0xffffffffu, key, 1);
        if (first_row >= 0) {
            const double s = lane > 0 && in_key == first_row ? in_v + first_sum : first_sum;
            if (first_row == i0 && began_before) A.close_part[t] = s;
            else acc += spmv_store<MODE>(ep, first_row, s, a, b);
        }
        if (lane == 31) A.open_part[t] = v; /* key == i1: the tile's end */
    }
    if (MODE == SPMV_DOT) gs_reduce_finish1(acc, ep.partials, ep.counter, A.n_fix ? A.aux : ep.out);
}

/* A warp a row begun before tile t and ended in it: its parts are the open
 * parts of tiles ts..t-1 (ts: the tile of its first entry) and t's close
 * part, added in that order's fixed tree. The dot adds the tile kernel's. */
template <int MODE>
__global__ void __launch_bounds__(GS_CUDA_BLOCK) merge_fix_kernel(merge_args A, spmv_epilogue ep)
{
    double a = 1.0, b = 0.0, acc = 0.0;
    if (MODE == SPMV_AXPBY) {
        a = gs_coef_eval(ep.ka, ep.S);
        b = gs_coef_eval(ep.kb, ep.S);
    }
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t f = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; f < A.n_fix;
         f += nwarps) {
        const int64_t t = A.fix_tile[f], r = A.tile_row[t];
        const int64_t ts = (r + A.row_ptr[r]) / MERGE_TILE;
        double s = 0.0;
        for (int64_t q = ts + lane; q < t; q += 32) s += __ldcg(A.open_part + q);
        s = gs_warp_sum(s);
        if (lane == 0) acc += spmv_store<MODE>(ep, r, s + __ldcg(A.close_part + t), a, b);
    }
    if (MODE == SPMV_DOT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) acc += *A.aux;
        gs_reduce_finish1(acc, ep.partials, ep.counter, ep.out);
    }
}

/* ----------------------------------------------------------------- launch */

/* Launch capped at the blocks resident at once (looked up on first use,
 * cached in A->max_blocks[slot]); grid 0 only looks the cap up. */
template <typename Kernel, typename... Args>
static int launch_long(gs_engine *e, const gs_mat *A, int slot, Kernel kernel, const char *name,
                       int64_t warps, int prepare, Args... args)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_mat *m = (gs_mat *)A; /* the cap is a cache */
    if (m->max_blocks[slot] == 0) {
        int per_sm = 0;
        int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                            &per_sm, kernel, GS_CUDA_BLOCK, 0));
        if (status != GS_OK) return status;
        m->max_blocks[slot] = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    }
    if (prepare) return GS_OK;
    int64_t grid = (warps + GS_CUDA_BLOCK / 32 - 1) / (GS_CUDA_BLOCK / 32);
    if (grid > (int64_t)m->max_blocks[slot]) grid = m->max_blocks[slot];
    if (grid > c->red_blocks) grid = c->red_blocks; /* the dot's partial sums */
    if (grid < 1) grid = 1; /* an empty product still writes its dot */
    return gs_cuda_launch(&e->err, name, __FILE__, __LINE__, kernel, (unsigned)grid,
                          GS_CUDA_BLOCK, 0, c->stream, args...);
}

template <typename V, int MODE>
static int merge_run(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep,
                     int prepare)
{
    merge_args args = {A->n_rows,  A->nnz,      A->n_tiles,   A->n_fix,      A->row_ptr,
                       A->csr_col, A->tile_row, A->fix_tile, A->open_part, A->close_part,
                       A->aux};
    int status = launch_long(e, A, 3 + MODE, merge_tile_kernel<V, MODE>, "merge_tile_kernel",
                             A->n_tiles, prepare, args, (const V *)A->csr_val, x, ep);
    if (status == GS_OK && (A->n_fix > 0 || prepare))
        status = launch_long(e, A, 6 + MODE, merge_fix_kernel<MODE>, "merge_fix_kernel", A->n_fix,
                             prepare, args, ep);
    return status;
}

template <int MODE>
static int merge_mode(gs_engine *e, const gs_mat *A, const double *x, const spmv_epilogue &ep,
                      int prepare)
{
    return A->prec == GS_FP32 ? merge_run<float, MODE>(e, A, x, ep, prepare)
                              : merge_run<double, MODE>(e, A, x, ep, prepare);
}

int spmv_merge(gs_engine *e, const gs_mat *A, int mode, const double *x, const spmv_epilogue &ep,
               int prepare)
{
    switch (mode) {
    case SPMV_DOT: return merge_mode<SPMV_DOT>(e, A, x, ep, prepare);
    case SPMV_AXPBY: return merge_mode<SPMV_AXPBY>(e, A, x, ep, prepare);
    default: return merge_mode<SPMV_PLAIN>(e, A, x, ep, prepare);
    }
}
