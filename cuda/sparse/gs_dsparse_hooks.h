/* gs_dsparse_hooks.h - the device toolkit as C tests can drive it: each hook
 * uploads host input, poisons the outputs, runs one toolkit function, downloads. */
#ifndef GS_DSPARSE_HOOKS_H
#define GS_DSPARSE_HOOKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "csr.h"
#include "engine.h"

/* out = the inclusive (count entries) or exclusive (count + 1 entries)
 * scan of in, by gs_dscan_inclusive / gs_dscan_exclusive; the device
 * output is filled with 0xFF bytes first. in_place: the inclusive scan
 * with out == in on the device. */
int gs_dsparse_hook_scan(gs_engine *e, const int64_t *in, int64_t count, int exclusive,
                         int in_place, int64_t *out);

/* GT = G^T by gs_dcsr_transpose (values in fp32 where fp32, else fp64;
 * chunk as gs_dcsr_transpose takes it), downloaded by gs_dcsr_download;
 * the device pool is filled with 0xFF bytes first, so that GT's
 * allocations start poisoned. GT is allocated here (gs_csr_free). */
int gs_dsparse_hook_transpose(gs_engine *e, const gs_csr *G, int fp32, int64_t chunk, gs_csr *GT);

/* S = P with the columns of every row sorted (gs_dcsr_sort_rows); values
 * are not carried (S's are 1). */
int gs_dsparse_hook_sort_rows(gs_engine *e, const gs_csr *P, gs_csr *S);

/* out = the pattern of (E + |P|)^k (add_identity) or |P|^k
 * (gs_dcsr_pattern_power); values 1. */
int gs_dsparse_hook_pattern_power(gs_engine *e, const gs_csr *P, int k, int add_identity,
                                  gs_csr *out);

/* P uploaded into a gs_dcsr (values fp64, or none where P has none) and
 * brought back by gs_dcsr_download. */
int gs_dsparse_hook_round_trip(gs_engine *e, const gs_csr *P, gs_csr *out);

/* words[0..total) uploaded; run r of gs_dread_words reads len[r] words at
 * offset off[r]; out gets them end to end (poisoned with 0xFF first). */
int gs_dsparse_hook_read_words(gs_engine *e, const uint64_t *words, int64_t total, int runs,
                               const int64_t *off, const int *len, uint64_t *out);

/* out[0..n_rows) = A's diagonal (or its inverse) by gs_cuda_mat_diagonal,
 * *first_zero its lowest 1-based zero-diagonal row (n_rows + 1: none). */
int gs_dsparse_hook_diagonal(gs_engine *e, const gs_mat *A, int invert, double *out,
                             int *first_zero);

/* T (triangular: lower, or upper where upper) analysed by gs_dtri_analyse and solved
 * solves times by gs_dtri_solve_fused (scheme 0: sync-free, 1: levels, 2: blocks of
 * chunk_rows rows, 0: the rule's), x = T^-1 (s .* b) (s may be NULL; unit: T's diagonal
 * taken as 1), the device x filled with 0xFF bytes before every solve; level[0..n) and
 * *n_levels the analysis's; dot (may be NULL): b . x fused into the last solve. */
int gs_dsparse_hook_trisolve(gs_engine *e, const gs_csr *T, int upper, int scheme,
                             int32_t chunk_rows, int unit, const double *s, const double *b,
                             int solves, double *x, int32_t *level, int32_t *n_levels,
                             double *dot);

/* The level analysis of the triangle (lower, or upper where upper) of T's pattern (T's
 * entries on the other side ignored), by gs_dtri_analyse on the uploaded pattern where
 * device, else by gs_dtri_analyse_rows with T's host rows (its rule, or the engine's
 * debug.tri_analysis, picks the host or the device): level[0..n), rows[0..n) (rows by level),
 * slots[0..*n_slots) (the sync-free schedule; room for n + n_levels * 31), *n_levels,
 * *lanes and *syncfree_lanes, *on_host (which ran) and *longest (t->longest_row). */
int gs_dsparse_hook_tri_analyse(gs_engine *e, const gs_csr *T, int upper, int device,
                                int32_t *level, int32_t *rows, int32_t *slots,
                                int64_t *n_slots, int32_t *n_levels, int *lanes,
                                int *syncfree_lanes, int *on_host, int64_t *longest);

/* L, U = A split by gs_dcsr_split_lu (A square, sorted rows, every
 * diagonal stored; values fp64), the device pool poisoned first. */
int gs_dsparse_hook_split_lu(gs_engine *e, const gs_csr *A, gs_csr *L, gs_csr *U);


#ifdef __cplusplus
}
#endif

#endif
