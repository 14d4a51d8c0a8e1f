/* csr.h - the compressed-sparse-row matrix and its host operations.
 * Conventions (every function keeps them): columns sorted ascending within a
 * row, no duplicates, row_ptr[0] = 0. val == NULL marks a pattern-only matrix. */
#ifndef GS_CSR_H
#define GS_CSR_H

#include <stdint.h>

#include "error.h"

typedef struct gs_csr {
    int32_t n_rows;
    int32_t n_cols;
    int64_t nnz;
    int64_t *row_ptr; /* n_rows + 1 */
    int32_t *col;     /* nnz */
    double *val;      /* nnz, or NULL for a pattern */
} gs_csr;

/* Allocate an uninitialised n_rows x n_cols matrix with room for nnz entries;
 * with_values = 0 gives a pattern. row_ptr is zeroed. */
int gs_csr_alloc(int32_t n_rows, int32_t n_cols, int64_t nnz, int with_values, gs_csr *out,
                 gs_error *err);
void gs_csr_free(gs_csr *A); /* frees arrays, zeroes the struct; NULL-safe */
int gs_csr_copy(const gs_csr *A, gs_csr *out, gs_error *err);

/* Build from coordinate triplets (0-based): sorts each row and sums
 * duplicates (patterns: duplicates merged). vals may be NULL (pattern).
 * Explicit zeros are kept. GS_ERR_INPUT naming the first triplet whose index
 * is out of range. */
int gs_csr_from_coo(int32_t n_rows, int32_t n_cols, int64_t nnz, const int32_t *rows,
                    const int32_t *cols, const double *vals, gs_csr *out, gs_error *err);

/* Check the conventions above and that indices are in range; GS_ERR_INTERNAL
 * with the first offending row (0-based) on failure. */
int gs_csr_validate(const gs_csr *A, gs_error *err);

int gs_csr_transpose(const gs_csr *A, gs_csr *AT, gs_error *err); /* AT = A^T */

/* 1 if the pattern of A equals the pattern of A^T. */
int gs_csr_is_structurally_symmetric(const gs_csr *A);
/* 1 if |a_ij - a_ji| <= rtol * max(|a_ij|, |a_ji|) for all i, j (pattern
 * included: a missing mirror counts as 0). Patterns are symmetric iff
 * structurally symmetric. */
int gs_csr_is_symmetric(const gs_csr *A, double rtol);

/* The relative tolerance under which the program calls a matrix symmetric
 * (method auto-selection, fsai and mic input checks). */
#define GS_SYMMETRY_RTOL 1e-12

/* GS_OK if gs_csr_is_symmetric(A, rtol); else GS_ERR_INPUT with a message
 * "WHO needs a symmetric matrix: a_ij = X but a_ji = Y in row i, column j"
 * naming the first such entry (rows in order; 1-based), or naming the first
 * entry that is NaN or Inf (which fails the symmetry test too). */
int gs_csr_require_symmetric(const gs_csr *A, double rtol, const char *who, gs_error *err);

/* d[i] = a_ii (0 where the diagonal entry is not stored; 1 where stored in a
 * pattern), d has n_rows entries. Returns the number of rows with no stored
 * diagonal entry (rows i >= n_cols count as missing). */
int32_t gs_csr_diagonal(const gs_csr *A, double *d);
/* The first row i whose diagonal entry a_(row0+i),(row0+i) is not > 0
 * (not stored, zero, negative or NaN), or -1 where every one is positive:
 * a symmetric A can be positive definite only then. *value is that entry
 * (0 where it is not stored); row0 is the global index of row 0 (a rank's
 * row block; 0 for a whole matrix). A pattern's stored entries are 1. */
int64_t gs_csr_first_nonpositive_diagonal(const gs_csr *A, int64_t row0, double *value);
/* Index of a_ij in col/val, or -1. Binary search within row i. */
int64_t gs_csr_find(const gs_csr *A, int32_t i, int32_t j);

/* A <- diag(s) A diag(s) in place (A square, s has n_rows entries; a pattern
 * is left unchanged). */
void gs_csr_scale_symmetric(gs_csr *A, const double *s);
/* s_i = 1/sqrt(|a_ii|): the scaling to unit diagonal. GS_ERR_INPUT naming the
 * row (1-based, "row 7 ") when a diagonal entry is zero, non-finite or missing. */
int gs_csr_unit_diagonal_scaling(const gs_csr *A, double *s, gs_error *err);

/* Lower (j <= i) / upper (j >= i) triangle; include_diagonal = 0 drops j == i. */
int gs_csr_lower(const gs_csr *A, int include_diagonal, gs_csr *L, gs_error *err);
int gs_csr_upper(const gs_csr *A, int include_diagonal, gs_csr *U, gs_error *err);

/* y = A x (OpenMP over rows). A must carry values. */
void gs_csr_spmv(const gs_csr *A, const double *x, double *y);

/* Pattern of C = A * B (symbolic product; values ignored, C->val = NULL).
 * GS_ERR_INTERNAL if A->n_cols != B->n_rows. Uses one B->n_cols marker array
 * (4 bytes per column) per OpenMP thread. */
int gs_csr_pattern_product(const gs_csr *A, const gs_csr *B, gs_csr *C, gs_error *err);
/* Pattern of (E + |A|)^k when add_identity, of |A|^k otherwise; k >= 1 and A
 * square, else GS_ERR_INTERNAL. Computed as k - 1 symbolic products. */
int gs_csr_pattern_power(const gs_csr *A, int k, int add_identity, gs_csr *P, gs_error *err);
/* Pattern union of A and B (same shape). */
int gs_csr_pattern_union(const gs_csr *A, const gs_csr *B, gs_csr *C, gs_error *err);

#endif
