/* gs_cuda.h - what C code may ask the CUDA engine beyond the engine table:
 * how a matrix is stored on the device (for the report and the tests).
 * Only in builds with CUDA (GS_HAVE_CUDA); plain C. */
#ifndef GS_CUDA_H
#define GS_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "engine.h"

typedef enum gs_cuda_layout {
    GS_CUDA_LAYOUT_AUTO = 0,        /* the rule in cuda/sparse/layout.cu */
    GS_CUDA_LAYOUT_SELL = 1,        /* SELL-32, rows in their own order */
    GS_CUDA_LAYOUT_SELL_SORTED = 2, /* SELL-32-sigma: never chosen by the rule */
    GS_CUDA_LAYOUT_CSR = 3,         /* vector-CSR, no long-row handling */
    GS_CUDA_LAYOUT_CSR_SPLIT = 4,   /* vector-CSR, long rows (if any) split over warps */
    GS_CUDA_LAYOUT_CSR_MERGE = 5    /* merge-path CSR (balanced by rows + entries) */
} gs_cuda_layout;

/* mat_create with the layout forced (benchmarks and tests of the rule);
 * sigma: the sorting window of GS_CUDA_LAYOUT_SELL_SORTED, 0 for the default
 * (1024). */
int gs_cuda_mat_create_as(gs_engine *e, const gs_csr *A, gs_precision prec,
                          gs_cuda_layout layout, int sigma, gs_mat **out);

/* The device layout of A, e.g. "SELL-32" (rows in their own order),
 * "SELL-32-1024" (rows sorted by length within windows of 1024 rows), "CSR"
 * (vector-CSR fallback, 2..32 lanes a row), "CSR-split" (vector-CSR whose
 * long rows are summed in chunks, a warp each), "CSR-merge" (merge-path
 * CSR). A must come from the CUDA engine. */
const char *gs_cuda_mat_layout(const gs_mat *A);

/* The row-length statistics of the long-row rule (cuda/sparse/long_rows.cu)
 * as it read them for A: its threshold (a row of at least that many
 * entries is long; 0 where the rule did not run: layouts other than CSR,
 * or no row could reach it), the longest row, and the rows at or above the
 * threshold with their entries. */
typedef struct gs_cuda_row_stats {
    int64_t long_min, max_row, n_long, long_nnz;
} gs_cuda_row_stats;
gs_cuda_row_stats gs_cuda_mat_row_stats(const gs_mat *A);

/* Jacobi's CUDA setup (cuda/precond/jacobi.cu): the inverse diagonal read from
 * pc->A on the device. Registered as jacobi's setup[GS_ENGINE_CUDA]. */
struct gs_pc;
int gs_jacobi_setup_cuda(struct gs_pc *pc, const gs_csr *A, gs_error *err);

/* Test hook (cuda/engine/memory.cu): gs_cuda_free of an address the device
 * never gave (a host word), as a free after a CUDA error would fail: the
 * failure is kept for gs_engine_release, nothing else of e changes. */
void gs_cuda_free_foreign_for_test(gs_engine *e);

/* Test hook (cuda/sparse/csr_view.cu): the CSR of A that the engine hands to device
 * setups (gs_cuda_mat_device_csr), downloaded into out, whose arrays the
 * caller allocated for A's n_rows and nnz (values included); *owned says
 * whether the engine built it (SELL) or lent its own arrays (CSR). */
int gs_cuda_mat_device_csr_download(gs_engine *e, const gs_mat *A, gs_csr *out, int *owned);

/* Test hook: matrices of at least min_bytes of CSR entries are uploaded
 * into chunk-mapped memory, and laid out in steps steps (0 for the default
 * count) where building their sliced ELL whole would raise the engine's
 * peak; the default is 64 MiB. Returns the mapping granule in
 * bytes, 0 where the driver offers no virtual memory management (no matrix
 * takes that path then). */
size_t gs_cuda_set_stepped_layout(gs_engine *e, size_t min_bytes, int steps);

/* The device's multiprocessors (the layout rule's unit of device fill);
 * 0 for an engine that is not the CUDA one. */
int gs_cuda_sm_count(gs_engine *e);

/* Entries stored (padding included) over nnz: 1.0 for CSR. */
double gs_cuda_mat_fill_ratio(const gs_mat *A);

/* Device bytes one SpMV reads from A's arrays (values, indices, slice
 * pointers, permutation; padding included): the honest count for the floor. */
double gs_cuda_mat_stream_bytes(const gs_mat *A);

#ifdef __cplusplus
}
#endif

#endif
