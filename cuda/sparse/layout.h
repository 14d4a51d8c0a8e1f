/* layout.h - internals shared by the files that build and use the engine's
 * matrix layouts (cuda/sparse: spmv, layout, layout_build, stepped). C++ only. */
#ifndef GS_LAYOUT_H
#define GS_LAYOUT_H

#include "engine_cuda.h"
#include "gs_dsparse.h"

#define SELL_C 32
#define SELL_SIGMA 1024
#define SELL_MAX_FILL 2.0
#define SELL_MAX_WIDTH_RATIO 2.0
#define SELL_FEW_SLICES_PER_SM 4
#define SELL_LONG_ROW 8
#define SELL_SOME_SLICES_PER_SM 32
#define SELL_VERY_LONG_ROW 128
/* slice pointers of at most this many slices: one block (build_slice_ptr_small) */
#define SLICE_SMALL_BLOCK 1024

static inline unsigned blocks_for(int64_t threads)
{
    return (unsigned)((threads + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
}

/* len[i] = the length of row i. */
static __global__ void row_length_kernel(const int64_t *__restrict__ row_ptr, int64_t n,
                                         int32_t *__restrict__ len)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) len[i] = (int32_t)(row_ptr[i + 1] - row_ptr[i]);
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

/* Shared between the files (spmv.cu: spmv_prepare; layout_build.cu: slice
 * plans, SELL and CSR builders; stepped.cu: fill_sell_stepped); each is
 * described where it is defined. */
int spmv_prepare(gs_engine *e, const gs_mat *A);
void slice_plan_sizes(const gs_mat *m, const int64_t info[3], int64_t *P, int64_t *P_real,
                      int64_t *width_max);
int build_slice_ptr_small(gs_engine *e, gs_mat *m, const int64_t *row_ptr, int64_t *P,
                          int64_t *P_real, int64_t *width_max);
int build_slice_ptr(gs_engine *e, gs_mat *m, const int32_t *len, int64_t *sizes, int64_t *P,
                    int64_t *P_real, int64_t *width_max);
int sort_rows(gs_engine *e, gs_mat *m, const int32_t *len);
int fill_sell(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
              const double *val);
int fill_sell_stepped(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                      const double *val, gs_cuda_vmm src[2]);
int fill_csr(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col, const double *val,
             int adopt, gs_cuda_vmm *src);
int keep_triangle(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                  const double *val);

#endif
