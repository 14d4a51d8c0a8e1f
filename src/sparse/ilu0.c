/* ilu0.c - ILU(0) of a CSR matrix: unit lower L and upper U on A's pattern.
 * Saad, Iterative Methods for Sparse Linear Systems, 2nd ed., Alg. 10.4. */
#include "ilu0.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Step k of row i walks row k's upper part unless it is more than this many
 * times longer than row i's rest; then it searches row k instead (log). */
#define ILU0_SEARCH_RATIO 8

/* Position of a_ii in each row; GS_ERR_INPUT naming the first row without. */
static int ilu0_diagonal_positions(const gs_csr *A, int64_t *diag, gs_error *err)
{
    for (int32_t i = 0; i < A->n_rows; i++) {
        diag[i] = gs_csr_find(A, i, i);
        if (diag[i] < 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "ILU(0): row %d has no diagonal entry (the pivot u_%d,%d is "
                                "structurally zero)", (int)i + 1, (int)i + 1, (int)i + 1);
    }
    return GS_OK;
}

/* The position of column j in col[*lo, hi) (sorted), or -1; *lo moves to the
 * first column >= j, so that ascending j's search a shrinking range. */
static int64_t ilu0_search(const int32_t *col, int64_t *lo, int64_t hi, int32_t j)
{
    int64_t a = *lo, b = hi;
    while (a < b) {
        const int64_t mid = a + (b - a) / 2;
        if (col[mid] < j) a = mid + 1;
        else b = mid;
    }
    *lo = a;
    return a < hi && col[a] == j ? a : -1;
}

/* Row i of the IKJ loop, in place on w (A's values): for k < i in row i,
 * l_ik = w_ik / u_kk, then w_ij -= l_ik u_kj for j > k kept in row i.
 * pos[j] is the index of column j in row i (-1 outside the pattern). Step k
 * meets the columns j > k of both rows by walking the shorter side: row k's
 * upper part with pos, or (row k far longer: a hub's row, a dense first
 * row) row i's rest with a search of row k, so that no step costs the long
 * row's length; either way each w_ij gets the same one update. */
static int ilu0_row(const gs_csr *A, const int64_t *diag, int32_t i, int64_t *pos, double *w,
                    gs_error *err)
{
    const int64_t begin = A->row_ptr[i], end = A->row_ptr[i + 1];
    for (int64_t p = begin; p < end; p++) pos[A->col[p]] = p;
    for (int64_t p = begin; p < end && A->col[p] < i; p++) {
        const int32_t k = A->col[p];
        const int64_t u0 = diag[k] + 1, u1 = A->row_ptr[k + 1];
        w[p] /= w[diag[k]];                                 /* l_ik = a_ik / u_kk */
        if (u1 - u0 <= ILU0_SEARCH_RATIO * (end - p)) {
            for (int64_t q = u0; q < u1; q++)
                if (pos[A->col[q]] >= 0) w[pos[A->col[q]]] -= w[p] * w[q]; /* a_ij -= l_ik u_kj */
        } else {
            int64_t lo = u0;
            for (int64_t r = p + 1; r < end; r++) {
                const int64_t q = ilu0_search(A->col, &lo, u1, A->col[r]);
                if (q >= 0) w[r] -= w[p] * w[q];            /* a_ij -= l_ik u_kj */
            }
        }
    }
    for (int64_t p = begin; p < end; p++) pos[A->col[p]] = -1;
    for (int64_t p = begin; p < end; p++)
        if (!isfinite(w[p]))
            return gs_error_set(err, GS_ERR_NUMERIC,
                                "ILU(0): factor entry (%d, %d) = %g in row %d is not finite",
                                (int)i + 1, (int)A->col[p] + 1, w[p], (int)i + 1);
    if (w[diag[i]] == 0.0)
        return gs_error_set(err, GS_ERR_NUMERIC,
                            "ILU(0): zero pivot u_%d,%d in row %d (the incomplete "
                            "factorisation breaks down there)",
                            (int)i + 1, (int)i + 1, (int)i + 1);
    return GS_OK;
}

/* Split the factorised values w into L (strict lower part plus a stored
 * unit diagonal) and U (diagonal and upper part). */
static int ilu0_split(const gs_csr *A, const int64_t *diag, const double *w, gs_csr *L,
                      gs_csr *U, gs_error *err)
{
    int status = GS_OK;
    int64_t nnz_strict_lower = 0;
    for (int32_t i = 0; i < A->n_rows; i++) nnz_strict_lower += diag[i] - A->row_ptr[i];
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_rows, nnz_strict_lower + A->n_rows, 1, L, err));
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_rows, A->nnz - nnz_strict_lower, 1, U, err));
    int64_t nl = 0, nu = 0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        for (int64_t p = A->row_ptr[i]; p < diag[i]; p++, nl++)
            L->col[nl] = A->col[p], L->val[nl] = w[p];
        L->col[nl] = i, L->val[nl++] = 1.0;                 /* l_ii = 1 */
        for (int64_t p = diag[i]; p < A->row_ptr[i + 1]; p++, nu++)
            U->col[nu] = A->col[p], U->val[nu] = w[p];
        L->row_ptr[i + 1] = nl;
        U->row_ptr[i + 1] = nu;
    }
cleanup:
    return status;
}

/* (L U)_ij over k < min(i, j) with the factors in old (A's pattern): row i
 * up to min(i, j), each u_kj found by a binary search in row k. */
static double ilu0_sweep_entry(const gs_csr *A, const double *old, int32_t i, int64_t p)
{
    const int32_t j = A->col[p], kmax = i < j ? i : j;
    double s = A->val[p];
    for (int64_t q = A->row_ptr[i]; q < A->row_ptr[i + 1] && A->col[q] < kmax; q++) {
        const int64_t kj = gs_csr_find(A, A->col[q], j);
        if (kj >= 0) s -= old[q] * old[kj];                 /* - l_ik u_kj */
    }
    return s;
}

/* Checks shared with gs_ilu0: square, values, every diagonal stored. */
static int ilu0_check(const gs_csr *A, int64_t **diag, gs_error *err)
{
    if (A->n_rows != A->n_cols)
        return gs_error_set(err, GS_ERR_INPUT, "ILU(0): the matrix is %d x %d, not square",
                            (int)A->n_rows, (int)A->n_cols);
    if (!A->val)
        return gs_error_set(err, GS_ERR_INPUT, "ILU(0): the matrix has no values (a pattern)");
    *diag = gs_malloc((size_t)A->n_rows * sizeof **diag + 1, "ILU(0) diagonal positions", err);
    if (!*diag) return GS_ERR_NOMEM;
    return ilu0_diagonal_positions(A, *diag, err);
}

int gs_ilu0_sweeps(const gs_csr *A, int sweeps, gs_csr *L, gs_csr *U, gs_error *err)
{
    int64_t *diag = NULL;
    double *w = NULL, *old = NULL;
    int status = GS_OK;
    memset(L, 0, sizeof *L);
    memset(U, 0, sizeof *U);
    GS_TRY(ilu0_check(A, &diag, err));
    w = gs_malloc((size_t)A->nnz * sizeof *w + 1, "ILU(0) values", err);
    old = gs_malloc((size_t)A->nnz * sizeof *old + 1, "ILU(0) previous sweep", err);
    if (!w || !old) GS_TRY(GS_ERR_NOMEM);
    memcpy(w, A->val, (size_t)A->nnz * sizeof *w);
    for (int s = 0; s < sweeps; s++) {
        memcpy(old, w, (size_t)A->nnz * sizeof *w);
#pragma omp parallel for schedule(dynamic, 256)
        for (int32_t i = 0; i < A->n_rows; i++)
            for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
                const double v = ilu0_sweep_entry(A, old, i, p);
                w[p] = A->col[p] < i ? v / old[diag[A->col[p]]] : v; /* l_ij, u_ij */
            }
    }
    for (int32_t i = 0; i < A->n_rows; i++) {
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            if (!isfinite(w[p]))
                GS_TRY(gs_error_set(err, GS_ERR_NUMERIC,
                                    "ILU(0): factor entry (%d, %d) = %g in row %d is not finite",
                                    (int)i + 1, (int)A->col[p] + 1, w[p], (int)i + 1));
        if (w[diag[i]] == 0.0)
            GS_TRY(gs_error_set(err, GS_ERR_NUMERIC,
                                "ILU(0): zero pivot u_%d,%d in row %d (the incomplete "
                                "factorisation breaks down there)",
                                (int)i + 1, (int)i + 1, (int)i + 1));
    }
    GS_TRY(ilu0_split(A, diag, w, L, U, err));
cleanup:
    if (status != GS_OK) {
        gs_csr_free(L);
        gs_csr_free(U);
    }
    free(diag);
    free(w);
    free(old);
    return status;
}

/* The IKJ rows of A's values w in place; diag: the diagonal's places. */
static int ilu0_rows(const gs_csr *A, const int64_t *diag, double *w, int (*past)(const void *ctx),
                     const void *ctx, gs_error *err)
{
    const int32_t n = A->n_rows;
    int64_t *pos = gs_malloc((size_t)n * sizeof *pos + 1, "ILU(0) row scatter", err);
    int status = GS_OK;
    if (!pos) return GS_ERR_NOMEM;
    for (int32_t j = 0; j < n; j++) pos[j] = -1;
    for (int32_t i = 0; i < n; i++) {
        if (past && i % GS_ILU0_CHECK_ROWS == GS_ILU0_CHECK_ROWS - 1 && past(ctx))
            GS_TRY(GS_ERR_TIME_LIMIT);
        GS_TRY(ilu0_row(A, diag, i, pos, w, err));
    }
cleanup:
    free(pos);
    return status;
}

static int ilu0_square(const gs_csr *A, gs_error *err)
{
    if (A->n_rows != A->n_cols)
        return gs_error_set(err, GS_ERR_INPUT, "ILU(0): the matrix is %d x %d, not square",
                            (int)A->n_rows, (int)A->n_cols);
    return GS_OK;
}

int gs_ilu0_in_place(const gs_csr *A, double *w, int (*past)(const void *ctx), const void *ctx,
                     gs_error *err)
{
    int status = ilu0_square(A, err);
    if (status != GS_OK) return status;
    int64_t *diag = gs_malloc((size_t)A->n_rows * sizeof *diag + 1, "ILU(0) diagonal positions", err);
    if (!diag) return GS_ERR_NOMEM;
    GS_TRY(ilu0_diagonal_positions(A, diag, err));
    GS_TRY(ilu0_rows(A, diag, w, past, ctx, err));
cleanup:
    free(diag);
    return status;
}

int gs_ilu0_bounded(const gs_csr *A, int (*past)(const void *ctx), const void *ctx, gs_csr *L,
                    gs_csr *U, gs_error *err)
{
    int64_t *diag = NULL;
    double *w = NULL;
    int status = GS_OK;
    memset(L, 0, sizeof *L);
    memset(U, 0, sizeof *U);
    GS_TRY(ilu0_square(A, err));
    if (!A->val)
        return gs_error_set(err, GS_ERR_INPUT, "ILU(0): the matrix has no values (a pattern)");
    const int32_t n = A->n_rows;
    diag = gs_malloc((size_t)n * sizeof *diag + 1, "ILU(0) diagonal positions", err);
    w = gs_malloc((size_t)A->nnz * sizeof *w + 1, "ILU(0) values", err);
    if (!diag || !w) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(ilu0_diagonal_positions(A, diag, err));
    memcpy(w, A->val, (size_t)A->nnz * sizeof *w);
    GS_TRY(ilu0_rows(A, diag, w, past, ctx, err));
    GS_TRY(ilu0_split(A, diag, w, L, U, err));
cleanup:
    if (status != GS_OK) {
        gs_csr_free(L);
        gs_csr_free(U);
    }
    free(diag);
    free(w);
    return status;
}

int gs_ilu0(const gs_csr *A, gs_csr *L, gs_csr *U, gs_error *err)
{
    return gs_ilu0_bounded(A, NULL, NULL, L, U, err);
}
