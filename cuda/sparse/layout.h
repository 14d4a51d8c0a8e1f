/* layout.h - internals shared by the files that build and use the engine's
 * matrix layouts (cuda/sparse: spmv, layout, layout_build, stepped). C++ only. */
#ifndef GS_LAYOUT_H
#define GS_LAYOUT_H

#include "engine_cuda.h"
#include "gs_dsparse.h"

/* Sliced ELL with slice height C = 32 (SELL-C-sigma, Kreutzer et al. 2014):
 * slice s holds rows 32s..32s+31 of the (possibly permuted) row order, its
 * entries column-major: entry k of lane l is at slice_ptr[s] + 32 k + l, so a
 * warp's loads of one k are 32 consecutive words. Padding has col = -1 and
 * val = 0 and contributes exactly 0. perm[r] is the original row of sorted
 * row r (NULL when sigma = 1, i.e. rows in their own order). */
struct gs_mat {
    int32_t n_rows, n_cols;
    int64_t nnz;
    gs_precision prec;
    gs_cuda_format format;
    char layout[24]; /* "SELL-32", "SELL-32-1024", "CSR", "CSR-split", "CSR-merge" */
    size_t bytes;    /* device bytes held (accounting) */

    /* SELL-C-sigma */
    int64_t n_slices, padded; /* padded = stored entries incl. padding */
    int sigma;
    int64_t *slice_ptr; /* n_slices + 1 */
    int32_t *sell_col;
    void *sell_val; /* double or float */
    int32_t *perm;

    /* CSR fallback (format == GS_CUDA_CSR) */
    int64_t *row_ptr;
    int32_t *csr_col;
    void *csr_val;
    int lanes; /* threads per row of the vector-CSR kernel */

    /* Arrays in chunk-mapped memory (gs_cuda_vmm), [0] columns, [1] values:
     * csr_vm backs csr_col / csr_val, sell_vm sell_col / sell_val, where
     * base is set; otherwise those come from gs_cuda_alloc. */
    gs_cuda_vmm csr_vm[2], sell_vm[2];
    /* mat_create_system's matrix until setup_done: kept as CSR for the
     * setup, its layout (the rule) chosen and built by setup_done. */
    int deferred;

    /* Rows of very different lengths (long_rows.cu, spmv_long.cu), on the
     * CSR layout only, whose arrays stay whole (so the CSR view, the
     * diagonal and the downloads read them as they are). long_mode:
     * LONG_NONE; LONG_SPLIT: rows of at least long_min entries are summed
     * in chunks of LONG_CHUNK entries, a warp a chunk, inside the
     * vector-CSR kernel, whose row loop skips them; LONG_MERGE: the merge-path
     * kernel over the whole matrix (tiles of MERGE_TILE rows + entries).
     * The statistics (max_row, n_long, long_nnz for rows >= long_min) are
     * those the rule read; long_min is 0 where it did not run. */
    int long_mode;
    int64_t long_min, max_row, n_long, long_nnz;
    int64_t n_chunks;        /* split: chunks of all long rows */
    int32_t *long_row;       /* split, n_long: the rows */
    int64_t *chunk_ptr;      /* split, n_long + 1: first chunk of long row k */
    int32_t *chunk_row;      /* split, n_chunks: the long row (k) of a chunk */
    double *chunk_sum;       /* split, n_chunks: each chunk's sum */
    double *row_dot;         /* split, n_long: y_row w_row (spmv_dot) */
    unsigned int *ticket;    /* split, n_long: chunks done (reset by the last) */
    int64_t n_tiles, n_fix;  /* merge */
    int32_t *tile_row;       /* merge, n_tiles + 1: the row at each tile's start */
    int32_t *fix_tile;       /* merge, n_fix: tiles that close a row begun before them */
    double *open_part;       /* merge, n_tiles: the part of the row open at the tile's end */
    double *close_part;      /* merge, n_tiles: the tile's part of the row it closes */
    double *aux;             /* merge, 1: the tile kernel's dot when fix-ups follow */

    /* Grid cap per kernel and SpMV variant (plain, dot, axpby): blocks
     * resident at once, from the occupancy calculator, so the grid-stride
     * loop runs one wave. [0..2] the layout's kernel, [3..5] the merge
     * tile kernel, [6..8] the merge fix-up kernel. */
    unsigned max_blocks[9];

    /* Triangular solves (cuSPARSE SpSV, analysis on first use) */
    gs_cuda_tri tri;
    int tri_zero_diag_row; /* 1-based row the CPU engine would report, 0: none */
    int32_t *tri_row_ptr, *tri_col;
    double *tri_val;
    cusparseSpMatDescr_t tri_descr[2];     /* [unit_diagonal] */
    cusparseSpSVDescr_t spsv[2];
    void *spsv_buffer[2];
    size_t spsv_bytes[2];
};

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

/* Long rows (long_rows.cu has the rule and why): a row is long where it has
 * at least max(LONG_ROW_MIN, LONG_ROW_RATIO x mean row length) entries;
 * a split long row is summed in chunks of LONG_CHUNK entries, a warp a
 * chunk (8 loads a lane, all in flight at once); the merge path gives a
 * warp MERGE_TILE items (rows + entries), 8 a lane. */
enum { LONG_NONE = 0, LONG_SPLIT = 1, LONG_MERGE = 2 };
#define LONG_ROW_MIN 128
#define LONG_ROW_RATIO 16
#define LONG_CHUNK 256
#define MERGE_ITEMS 8
#define MERGE_TILE (32 * MERGE_ITEMS)

/* The SpMV variants and what their epilogue needs (spmv.cu, spmv_long.cu). */
enum { SPMV_PLAIN = 0, SPMV_DOT = 1, SPMV_AXPBY = 2 };

struct spmv_epilogue {
    double *__restrict__ y;
    const double *__restrict__ w; /* SPMV_DOT */
    gs_coef ka, kb;               /* SPMV_AXPBY */
    const double *S;
    double *partials;
    unsigned int *counter;
    double *out;
};

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
/* long_rows.cu: the long-row rule on a matrix laid out as CSR (m->row_ptr
 * set), and what its mode needs built; force: GS_CUDA_LAYOUT_CSR_SPLIT or
 * _MERGE, or the rule (the engine's debug switches steer it); longest: the
 * longest row where known (the padding rule's widest slice), else -1.
 * Freed by long_rows_free (also with m->long_mode LONG_NONE). */
int long_rows_plan(gs_engine *e, gs_mat *m, gs_cuda_layout force, int64_t longest);
void long_rows_free(gs_engine *e, gs_mat *m);
/* spmv_long.cu: the merge-path kernels for mode; prepare only looks up
 * their grid caps (spmv_prepare). The split rows are summed inside the
 * vector-CSR kernel (spmv.cu, spmv_split.cuh). */
int spmv_merge(gs_engine *e, const gs_mat *A, int mode, const double *x, const spmv_epilogue &ep,
               int prepare);

#endif
