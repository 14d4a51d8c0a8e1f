/* csr.c - the compressed-sparse-row matrix and its host operations.
 * Reference: T. Davis, "Direct Methods for Sparse Linear Systems" (CSparse:
 * cs_compress, cs_dupl, cs_transpose) and Gustavson's sparse product (1978). */
#include "csr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many stored entries an OpenMP region costs more than it saves. */
#define CSR_PARALLEL_MIN_NNZ 20000
/* Rows up to this length are sorted by insertion sort. */
#define CSR_INSERTION_SORT_MAX 32

static int csr_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int csr_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- sorting one row: columns ascending, values (may be NULL) follow ---- */

static void row_swap(int32_t *col, double *val, int64_t a, int64_t b)
{
    int32_t c = col[a];
    col[a] = col[b];
    col[b] = c;
    if (val) {
        double v = val[a];
        val[a] = val[b];
        val[b] = v;
    }
}

static void row_insertion_sort(int32_t *col, double *val, int64_t len)
{
    for (int64_t p = 1; p < len; p++) {
        int32_t c = col[p];
        double v = val ? val[p] : 0.0;
        int64_t q = p;
        while (q > 0 && col[q - 1] > c) {
            col[q] = col[q - 1];
            if (val) val[q] = val[q - 1];
            q--;
        }
        col[q] = c;
        if (val) val[q] = v;
    }
}

static void row_sift_down(int32_t *col, double *val, int64_t root, int64_t len)
{
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= len) return;
        if (child + 1 < len && col[child + 1] > col[child]) child++;
        if (col[root] >= col[child]) return;
        row_swap(col, val, root, child);
        root = child;
    }
}

/* Heapsort: in place, O(len log len) in the worst case, no allocation. */
static void row_heap_sort(int32_t *col, double *val, int64_t len)
{
    for (int64_t r = len / 2 - 1; r >= 0; r--) row_sift_down(col, val, r, len);
    for (int64_t end = len - 1; end > 0; end--) {
        row_swap(col, val, 0, end);
        row_sift_down(col, val, 0, end);
    }
}

static void row_sort(int32_t *col, double *val, int64_t len)
{
    int64_t p = 1;
    while (p < len && col[p - 1] <= col[p]) p++;
    if (p >= len) return; /* already sorted: the common case for real files */
    if (len <= CSR_INSERTION_SORT_MAX)
        row_insertion_sort(col, val, len);
    else
        row_heap_sort(col, val, len);
}

/* ---- allocation, copy ---- */

int gs_csr_alloc(int32_t n_rows, int32_t n_cols, int64_t nnz, int with_values, gs_csr *out,
                 gs_error *err)
{
    gs_csr A = {0};
    int status = GS_OK;
    if (n_rows < 0 || n_cols < 0 || nnz < 0) {
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "gs_csr_alloc: negative size %d x %d with %lld entries",
                              (int)n_rows, (int)n_cols, (long long)nnz);
        goto cleanup;
    }
    if ((uint64_t)nnz > SIZE_MAX / sizeof(double)) {
        status = gs_error_set(err, GS_ERR_NOMEM, "CSR with %lld entries exceeds memory",
                              (long long)nnz);
        goto cleanup;
    }
    A.n_rows = n_rows;
    A.n_cols = n_cols;
    A.nnz = nnz;
    A.row_ptr = gs_calloc((size_t)n_rows + 1, sizeof *A.row_ptr, "CSR row pointers", err);
    A.col = gs_malloc((size_t)nnz * sizeof *A.col, "CSR column indices", err);
    A.val = with_values ? gs_malloc((size_t)nnz * sizeof *A.val, "CSR values", err) : NULL;
    if (!A.row_ptr || !A.col || (with_values && !A.val)) status = GS_ERR_NOMEM;
cleanup:
    if (status != GS_OK) gs_csr_free(&A);
    *out = A;
    return status;
}

void gs_csr_free(gs_csr *A)
{
    if (!A) return;
    free(A->row_ptr);
    free(A->col);
    free(A->val);
    memset(A, 0, sizeof *A);
}

int gs_csr_copy(const gs_csr *A, gs_csr *out, gs_error *err)
{
    gs_csr C = {0};
    int status = GS_OK;
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_cols, A->nnz, A->val != NULL, &C, err));
    memcpy(C.row_ptr, A->row_ptr, ((size_t)A->n_rows + 1) * sizeof *C.row_ptr);
    /* In blocks over the threads: on fresh memory the copy is bound by page
     * faults, which the cores take in parallel (the CPU engine's mat_create
     * copies every matrix it is given, G of FSAI included). */
    const int64_t block = (int64_t)1 << 20, nblocks = (A->nnz + block - 1) / block;
#pragma omp parallel for schedule(static) if (nblocks > 1)
    for (int64_t b = 0; b < nblocks; b++) {
        const int64_t lo = b * block, len = A->nnz - lo < block ? A->nnz - lo : block;
        memcpy(C.col + lo, A->col + lo, (size_t)len * sizeof *C.col);
        if (A->val) memcpy(C.val + lo, A->val + lo, (size_t)len * sizeof *C.val);
    }
cleanup:
    if (status != GS_OK) gs_csr_free(&C);
    *out = C;
    return status;
}

/* ---- from coordinate triplets ---- */

/* row_ptr[i+1] = entries in row i, then prefix sums; rejects bad indices. */
static int coo_count_rows(int32_t n_rows, int32_t n_cols, int64_t nnz, const int32_t *rows,
                          const int32_t *cols, int64_t *row_ptr, gs_error *err)
{
    for (int64_t e = 0; e < nnz; e++) {
        int32_t r = rows[e], c = cols[e];
        if (r < 0 || r >= n_rows || c < 0 || c >= n_cols)
            return gs_error_set(err, GS_ERR_INPUT,
                                "entry %lld: index (%d, %d) (0-based) outside a %d x %d matrix",
                                (long long)e, (int)r, (int)c, (int)n_rows, (int)n_cols);
        row_ptr[r + 1]++;
    }
    for (int32_t i = 0; i < n_rows; i++) row_ptr[i + 1] += row_ptr[i];
    return GS_OK;
}

/* First row i with row_ptr[i] >= target (row_ptr ascending, n_rows + 1 long). */
static int32_t row_at_offset(const int64_t *row_ptr, int32_t n_rows, int64_t target)
{
    int32_t lo = 0, hi = n_rows;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (row_ptr[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Stable counting sort of the triplets by row into T (next = row cursors).
 * Each thread owns a block of rows holding ~nnz/threads entries and scans
 * all triplets in order, writing only its own rows: the scatter and the
 * first touch of T's pages run in parallel, at the price of re-reading rows[]. */
static void coo_scatter(int64_t nnz, const int32_t *rows, const int32_t *cols,
                        const double *vals, gs_csr *T, int64_t *next, int parallel)
{
#pragma omp parallel if (parallel)
    {
        int n_threads = 1, t = 0;
#ifdef _OPENMP
        n_threads = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        int32_t lo = row_at_offset(T->row_ptr, T->n_rows, nnz * t / n_threads);
        int32_t hi = t == n_threads - 1
                         ? T->n_rows
                         : row_at_offset(T->row_ptr, T->n_rows, nnz * (t + 1) / n_threads);
        uint32_t width = (uint32_t)(hi - lo);
        for (int64_t e = 0; e < nnz; e++) {
            if ((uint32_t)(rows[e] - lo) >= width) continue;
            int64_t p = next[rows[e]]++;
            T->col[p] = cols[e];
            if (vals) T->val[p] = vals[e];
        }
    }
}

/* Sort row i of (row_ptr, col, val) in place and return its distinct count. */
static int64_t coo_sort_row_count_distinct(const int64_t *row_ptr, int32_t *col, double *val,
                                           int32_t i)
{
    int64_t start = row_ptr[i], len = row_ptr[i + 1] - start;
    row_sort(col + start, val ? val + start : NULL, len);
    int64_t distinct = len > 0;
    for (int64_t p = start + 1; p < start + len; p++) distinct += col[p] != col[p - 1];
    return distinct;
}

/* Copy sorted row i into (out_col, out_val) at out_start, summing duplicates. */
static void coo_merge_row(const int64_t *row_ptr, const int32_t *col, const double *val,
                          int32_t i, int64_t out_start, int32_t *out_col, double *out_val)
{
    int64_t q = out_start - 1;
    for (int64_t p = row_ptr[i]; p < row_ptr[i + 1]; p++) {
        if (q >= out_start && out_col[q] == col[p]) {
            if (val) out_val[q] += val[p];          /* a_ij += duplicate */
            continue;
        }
        q++;
        out_col[q] = col[p];
        if (val) out_val[q] = val[p];
    }
}

int gs_csr_from_coo(int32_t n_rows, int32_t n_cols, int64_t nnz, const int32_t *rows,
                    const int32_t *cols, const double *vals, gs_csr *out, gs_error *err)
{
    gs_csr T = {0}, C = {0};
    int64_t *next = NULL; /* scatter position per row, later distinct count per row */
    int status = GS_OK;
    int parallel = nnz >= CSR_PARALLEL_MIN_NNZ;

    GS_TRY(gs_csr_alloc(n_rows, n_cols, nnz, vals != NULL, &T, err));
    GS_TRY(coo_count_rows(n_rows, n_cols, nnz, rows, cols, T.row_ptr, err));
    next = gs_malloc(((size_t)n_rows + 1) * sizeof *next, "COO row cursors", err);
    if (!next) GS_TRY(GS_ERR_NOMEM);
    memcpy(next, T.row_ptr, ((size_t)n_rows + 1) * sizeof *next);
    coo_scatter(nnz, rows, cols, vals, &T, next, parallel);

    int64_t distinct = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : distinct) if (parallel)
    for (int32_t i = 0; i < n_rows; i++) {
        next[i + 1] = coo_sort_row_count_distinct(T.row_ptr, T.col, T.val, i);
        distinct += next[i + 1];
    }
    if (distinct == nnz) {                                   /* no duplicates: done */
        C = T;
        memset(&T, 0, sizeof T);
        goto cleanup;
    }

    GS_TRY(gs_csr_alloc(n_rows, n_cols, distinct, vals != NULL, &C, err));
    for (int32_t i = 0; i < n_rows; i++) C.row_ptr[i + 1] = C.row_ptr[i] + next[i + 1];
#pragma omp parallel for schedule(dynamic, 1024) if (parallel)
    for (int32_t i = 0; i < n_rows; i++)
        coo_merge_row(T.row_ptr, T.col, T.val, i, C.row_ptr[i], C.col, C.val);

cleanup:
    free(next);
    gs_csr_free(&T);
    if (status != GS_OK) gs_csr_free(&C);
    *out = C;
    return status;
}

/* ---- validation ---- */

int gs_csr_validate(const gs_csr *A, gs_error *err)
{
    if (A->n_rows < 0 || A->n_cols < 0 || A->nnz < 0)
        return gs_error_set(err, GS_ERR_INTERNAL, "CSR: negative size %d x %d, nnz %lld",
                            (int)A->n_rows, (int)A->n_cols, (long long)A->nnz);
    if (!A->row_ptr || (A->nnz > 0 && !A->col))
        return gs_error_set(err, GS_ERR_INTERNAL, "CSR: missing row_ptr or col array");
    if (A->row_ptr[0] != 0)
        return gs_error_set(err, GS_ERR_INTERNAL, "CSR: row_ptr[0] = %lld, not 0",
                            (long long)A->row_ptr[0]);
    for (int32_t i = 0; i < A->n_rows; i++) {
        int64_t start = A->row_ptr[i], end = A->row_ptr[i + 1];
        if (end < start || end > A->nnz)
            return gs_error_set(err, GS_ERR_INTERNAL,
                                "CSR: row %d (0-based): row_ptr %lld..%lld outside 0..nnz = %lld",
                                (int)i, (long long)start, (long long)end, (long long)A->nnz);
        for (int64_t p = start; p < end; p++) {
            int32_t c = A->col[p];
            if (c < 0 || c >= A->n_cols)
                return gs_error_set(err, GS_ERR_INTERNAL,
                                    "CSR: row %d (0-based): column %d outside 0..%d", (int)i,
                                    (int)c, (int)A->n_cols - 1);
            if (p > start && c <= A->col[p - 1])
                return gs_error_set(err, GS_ERR_INTERNAL,
                                    "CSR: row %d (0-based): column %d %s column %d", (int)i,
                                    (int)c, c == A->col[p - 1] ? "duplicates" : "follows",
                                    (int)A->col[p - 1]);
        }
    }
    if (A->row_ptr[A->n_rows] != A->nnz)
        return gs_error_set(err, GS_ERR_INTERNAL, "CSR: row_ptr[n_rows] = %lld but nnz = %lld",
                            (long long)A->row_ptr[A->n_rows], (long long)A->nnz);
    return GS_OK;
}

/* ---- transpose ---- */

/* AT = A^T by a counting sort on columns (CSparse's cs_transpose): rows of A
 * are visited in order, so each row of AT comes out sorted. */
int gs_csr_transpose(const gs_csr *A, gs_csr *AT, gs_error *err)
{
    gs_csr T = {0};
    int64_t *next = NULL;
    int status = GS_OK;
    GS_TRY(gs_csr_alloc(A->n_cols, A->n_rows, A->nnz, A->val != NULL, &T, err));
    next = gs_malloc((size_t)A->n_cols * sizeof *next + 1, "transpose cursors", err);
    if (!next) GS_TRY(GS_ERR_NOMEM);
    for (int64_t p = 0; p < A->nnz; p++) T.row_ptr[A->col[p] + 1]++;
    for (int32_t j = 0; j < A->n_cols; j++) T.row_ptr[j + 1] += T.row_ptr[j];
    memcpy(next, T.row_ptr, (size_t)A->n_cols * sizeof *next);
    for (int32_t i = 0; i < A->n_rows; i++) {
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            int64_t q = next[A->col[p]]++;
            T.col[q] = i;
            if (A->val) T.val[q] = A->val[p];
        }
    }
cleanup:
    free(next);
    if (status != GS_OK) gs_csr_free(&T);
    *AT = T;
    return status;
}

/* ---- symmetry ---- */

int gs_csr_is_structurally_symmetric(const gs_csr *A)
{
    if (A->n_rows != A->n_cols) return 0;
    int asymmetric = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(| : asymmetric) \
    if (A->nnz >= CSR_PARALLEL_MIN_NNZ)
    for (int32_t i = 0; i < A->n_rows; i++) {
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1] && !asymmetric; p++)
            if (A->col[p] != i && gs_csr_find(A, A->col[p], i) < 0) asymmetric = 1;
    }
    return !asymmetric;
}

int gs_csr_is_symmetric(const gs_csr *A, double rtol)
{
    if (!A->val) return gs_csr_is_structurally_symmetric(A);
    if (A->n_rows != A->n_cols) return 0;
    int asymmetric = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(| : asymmetric) \
    if (A->nnz >= CSR_PARALLEL_MIN_NNZ)
    for (int32_t i = 0; i < A->n_rows; i++) {
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1] && !asymmetric; p++) {
            int32_t j = A->col[p];
            if (j == i) continue;
            int64_t q = gs_csr_find(A, j, i);
            double aij = A->val[p], aji = q >= 0 ? A->val[q] : 0.0;
            /* |a_ij - a_ji| <= rtol max(|a_ij|, |a_ji|); NaN fails */
            if (!(fabs(aij - aji) <= rtol * fmax(fabs(aij), fabs(aji)))) asymmetric = 1;
        }
    }
    return !asymmetric;
}

int gs_csr_require_symmetric(const gs_csr *A, double rtol, const char *who, gs_error *err)
{
    if (gs_csr_is_symmetric(A, rtol)) return GS_OK;
    if (A->n_rows != A->n_cols || !A->val)
        return gs_error_set(err, GS_ERR_INPUT, "%s needs a symmetric matrix", who);
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const int32_t j = A->col[p];
            if (j == i) continue; /* as gs_csr_is_symmetric: the diagonal is its own mirror */
            const int64_t q = gs_csr_find(A, j, i);
            const double aij = A->val[p], aji = q >= 0 ? A->val[q] : 0.0;
            if (!isfinite(aij))
                return gs_error_set(err, GS_ERR_INPUT, "%s: a_ij = %g is not finite in row %d, "
                                    "column %d", who, aij, (int)i + 1, (int)j + 1);
            if (fabs(aij - aji) <= rtol * fmax(fabs(aij), fabs(aji))) continue;
            char a[40], b[40]; /* all digits only where %g hides the gap */
            int digits = 6;
            do {
                snprintf(a, sizeof a, "%.*g", digits, aij);
                snprintf(b, sizeof b, "%.*g", digits, aji);
            } while (strcmp(a, b) == 0 && (digits += 11) <= 17);
            return gs_error_set(err, GS_ERR_INPUT,
                                "%s needs a symmetric matrix: a_ij = %s but a_ji = %s%s in "
                                "row %d, column %d",
                                who, a, b, q < 0 ? " (not stored)" : "", (int)i + 1, (int)j + 1);
        }
    return gs_error_set(err, GS_ERR_INPUT, "%s needs a symmetric matrix", who);
}

/* ---- diagonal, lookup, scaling ---- */

int64_t gs_csr_find(const gs_csr *A, int32_t i, int32_t j)
{
    int64_t lo = A->row_ptr[i], hi = A->row_ptr[i + 1] - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (A->col[mid] < j)
            lo = mid + 1;
        else if (A->col[mid] > j)
            hi = mid - 1;
        else
            return mid;
    }
    return -1;
}

int32_t gs_csr_diagonal(const gs_csr *A, double *d)
{
    int32_t missing = 0;
#pragma omp parallel for schedule(static) reduction(+ : missing) \
    if (A->nnz >= CSR_PARALLEL_MIN_NNZ)
    for (int32_t i = 0; i < A->n_rows; i++) {
        int64_t p = i < A->n_cols ? gs_csr_find(A, i, i) : -1;
        d[i] = p < 0 ? 0.0 : A->val ? A->val[p] : 1.0;
        missing += p < 0;
    }
    return missing;
}

int64_t gs_csr_first_nonpositive_diagonal(const gs_csr *A, int64_t row0, double *value)
{
    *value = 0.0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        const int64_t j = row0 + i;
        const int64_t p = j < A->n_cols ? gs_csr_find(A, i, (int32_t)j) : -1;
        const double a = p < 0 ? 0.0 : A->val ? A->val[p] : 1.0;
        if (!(a > 0.0)) {
            *value = a;
            return i;
        }
    }
    return -1;
}

void gs_csr_scale_symmetric(gs_csr *A, const double *s)
{
    if (!A->val) return;
#pragma omp parallel for schedule(static) if (A->nnz >= CSR_PARALLEL_MIN_NNZ)
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            A->val[p] *= s[i] * s[A->col[p]];               /* a_ij <- s_i a_ij s_j */
}

int gs_csr_unit_diagonal_scaling(const gs_csr *A, double *s, gs_error *err)
{
    for (int32_t i = 0; i < A->n_rows; i++) {
        int64_t p = i < A->n_cols ? gs_csr_find(A, i, i) : -1;
        double aii = p < 0 ? 0.0 : A->val ? A->val[p] : 1.0;
        if (p < 0)
            return gs_error_set(err, GS_ERR_INPUT,
                                "row %d (1-based) has no diagonal entry: cannot scale to "
                                "unit diagonal", (int)i + 1);
        if (aii == 0.0 || !isfinite(aii))
            return gs_error_set(err, GS_ERR_INPUT,
                                "row %d (1-based) has diagonal entry %g: cannot scale to unit "
                                "diagonal", (int)i + 1, aii);
        s[i] = 1.0 / sqrt(fabs(aii));                        /* s_i = 1/sqrt|a_ii| */
    }
    return GS_OK;
}

/* ---- triangles ---- */

/* Keep a_ij with lo_off <= j - i <= hi_off (offsets clamp the triangle). */
static int csr_band(const gs_csr *A, int64_t lo_off, int64_t hi_off, gs_csr *out,
                    gs_error *err)
{
    gs_csr B = {0};
    int status = GS_OK;
    int parallel = A->nnz >= CSR_PARALLEL_MIN_NNZ;
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_cols, 0, 0, &B, err));
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t i = 0; i < A->n_rows; i++) {
        int64_t count = 0;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            int64_t off = (int64_t)A->col[p] - i;
            count += off >= lo_off && off <= hi_off;
        }
        B.row_ptr[i + 1] = count;
    }
    for (int32_t i = 0; i < A->n_rows; i++) B.row_ptr[i + 1] += B.row_ptr[i];
    B.nnz = B.row_ptr[A->n_rows];
    free(B.col);
    B.col = gs_malloc((size_t)B.nnz * sizeof *B.col, "CSR column indices", err);
    if (A->val) B.val = gs_malloc((size_t)B.nnz * sizeof *B.val, "CSR values", err);
    if (!B.col || (A->val && !B.val)) GS_TRY(GS_ERR_NOMEM);
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t i = 0; i < A->n_rows; i++) {
        int64_t q = B.row_ptr[i];
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            int64_t off = (int64_t)A->col[p] - i;
            if (off < lo_off || off > hi_off) continue;
            B.col[q] = A->col[p];
            if (A->val) B.val[q] = A->val[p];
            q++;
        }
    }
cleanup:
    if (status != GS_OK) gs_csr_free(&B);
    *out = B;
    return status;
}

int gs_csr_lower(const gs_csr *A, int include_diagonal, gs_csr *L, gs_error *err)
{
    return csr_band(A, INT64_MIN, include_diagonal ? 0 : -1, L, err);
}

int gs_csr_upper(const gs_csr *A, int include_diagonal, gs_csr *U, gs_error *err)
{
    return csr_band(A, include_diagonal ? 0 : 1, INT64_MAX, U, err);
}

/* ---- SpMV ---- */

void gs_csr_spmv(const gs_csr *A, const double *x, double *y)
{
#pragma omp parallel for schedule(static) if (A->nnz >= CSR_PARALLEL_MIN_NNZ)
    for (int32_t i = 0; i < A->n_rows; i++) {
        double sum = 0.0;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            sum += A->val[p] * x[A->col[p]];                 /* y_i = sum_j a_ij x_j */
        y[i] = sum;
    }
}

/* ---- symbolic patterns ---- */

/* One marker array of n entries per OpenMP thread, all -1, so that Gustavson's
 * loops can tell "column j already seen in row i" with marker[j] == i. */
static int alloc_markers(int n_threads, int32_t n, int32_t ***markers, gs_error *err)
{
    int32_t **m = gs_calloc((size_t)n_threads, sizeof *m, "symbolic product markers", err);
    if (!m) return GS_ERR_NOMEM;
    *markers = m;
    for (int t = 0; t < n_threads; t++) {
        m[t] = gs_malloc((size_t)n * sizeof *m[t] + 1, "symbolic product marker", err);
        if (!m[t]) return GS_ERR_NOMEM;
        for (int32_t j = 0; j < n; j++) m[t][j] = -1;
    }
    return GS_OK;
}

static void free_markers(int n_threads, int32_t **markers)
{
    if (!markers) return;
    for (int t = 0; t < n_threads; t++) free(markers[t]);
    free(markers);
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Row i of pattern(A B): the union of the patterns of B(k,:) for a_ik != 0.
 * With out == NULL only counts; otherwise writes the sorted columns. */
static int64_t product_row(const gs_csr *A, const gs_csr *B, int32_t i, int32_t *marker,
                           int32_t *out)
{
    int64_t count = 0;
    for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
        int32_t k = A->col[p];
        for (int64_t q = B->row_ptr[k]; q < B->row_ptr[k + 1]; q++) {
            int32_t j = B->col[q];
            if (marker[j] == i) continue;
            marker[j] = i;
            if (out) out[count] = j;
            count++;
        }
    }
    if (out && count > CSR_INSERTION_SORT_MAX)
        qsort(out, (size_t)count, sizeof *out, compare_int32);
    else if (out)
        row_insertion_sort(out, NULL, count);
    return count;
}

int gs_csr_pattern_product(const gs_csr *A, const gs_csr *B, gs_csr *C, gs_error *err)
{
    gs_csr P = {0};
    int32_t **markers = NULL;
    int n_threads = csr_max_threads();
    int status = GS_OK;
    if (A->n_cols != B->n_rows) {
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "pattern product: %d x %d times %d x %d does not conform",
                              (int)A->n_rows, (int)A->n_cols, (int)B->n_rows, (int)B->n_cols);
        goto cleanup;
    }
    if ((int64_t)A->nnz + B->nnz < CSR_PARALLEL_MIN_NNZ) n_threads = 1;
    GS_TRY(gs_csr_alloc(A->n_rows, B->n_cols, 0, 0, &P, err));
    GS_TRY(alloc_markers(n_threads, B->n_cols, &markers, err));

#pragma omp parallel for schedule(dynamic, 256) num_threads(n_threads)
    for (int32_t i = 0; i < A->n_rows; i++)                  /* pass 1: count */
        P.row_ptr[i + 1] = product_row(A, B, i, markers[csr_thread_id()], NULL);
    for (int32_t i = 0; i < A->n_rows; i++) P.row_ptr[i + 1] += P.row_ptr[i];
    P.nnz = P.row_ptr[A->n_rows];

    free(P.col);
    P.col = gs_malloc((size_t)P.nnz * sizeof *P.col, "pattern product columns", err);
    if (!P.col) GS_TRY(GS_ERR_NOMEM);
    for (int t = 0; t < n_threads; t++)
        for (int32_t j = 0; j < B->n_cols; j++) markers[t][j] = -1;
#pragma omp parallel for schedule(dynamic, 256) num_threads(n_threads)
    for (int32_t i = 0; i < A->n_rows; i++)                  /* pass 2: fill */
        product_row(A, B, i, markers[csr_thread_id()], P.col + P.row_ptr[i]);

cleanup:
    free_markers(n_threads, markers);
    if (status != GS_OK) gs_csr_free(&P);
    *C = P;
    return status;
}

/* Pattern of A, or of E + A when add_identity (A square). */
static int pattern_with_identity(const gs_csr *A, int add_identity, gs_csr *out, gs_error *err)
{
    gs_csr E = {0};
    gs_csr pattern = *A;
    int status = GS_OK;
    pattern.val = NULL;
    if (!add_identity) {
        GS_TRY(gs_csr_copy(&pattern, out, err));
        goto cleanup;
    }
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_cols, A->n_rows, 0, &E, err));
    for (int32_t i = 0; i < A->n_rows; i++) {
        E.row_ptr[i + 1] = i + 1;
        E.col[i] = i;
    }
    GS_TRY(gs_csr_pattern_union(&pattern, &E, out, err));
cleanup:
    gs_csr_free(&E);
    return status;
}

int gs_csr_pattern_power(const gs_csr *A, int k, int add_identity, gs_csr *P, gs_error *err)
{
    gs_csr base = {0}, power = {0}, next = {0};
    int status = GS_OK;
    if (k < 1 || A->n_rows != A->n_cols) {
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "pattern power: needs k >= 1 (got %d) and a square matrix "
                              "(got %d x %d)", k, (int)A->n_rows, (int)A->n_cols);
        goto cleanup;
    }
    GS_TRY(pattern_with_identity(A, add_identity, &base, err));
    GS_TRY(gs_csr_copy(&base, &power, err));
    for (int step = 1; step < k; step++) {                  /* power <- power * base */
        GS_TRY(gs_csr_pattern_product(&power, &base, &next, err));
        gs_csr_free(&power);
        power = next;
        memset(&next, 0, sizeof next);
    }
cleanup:
    gs_csr_free(&base);
    gs_csr_free(&next);
    if (status != GS_OK) gs_csr_free(&power);
    *P = power;
    return status;
}

/* Merge sorted row i of A and B; with out == NULL only counts. */
static int64_t union_row(const gs_csr *A, const gs_csr *B, int32_t i, int32_t *out)
{
    int64_t p = A->row_ptr[i], pe = A->row_ptr[i + 1];
    int64_t q = B->row_ptr[i], qe = B->row_ptr[i + 1];
    int64_t count = 0;
    while (p < pe || q < qe) {
        int32_t j;
        if (q >= qe || (p < pe && A->col[p] < B->col[q]))
            j = A->col[p++];
        else if (p >= pe || B->col[q] < A->col[p])
            j = B->col[q++];
        else {
            j = A->col[p++];
            q++;
        }
        if (out) out[count] = j;
        count++;
    }
    return count;
}

int gs_csr_pattern_union(const gs_csr *A, const gs_csr *B, gs_csr *C, gs_error *err)
{
    gs_csr U = {0};
    int status = GS_OK;
    int parallel = (int64_t)A->nnz + B->nnz >= CSR_PARALLEL_MIN_NNZ;
    if (A->n_rows != B->n_rows || A->n_cols != B->n_cols) {
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "pattern union: shapes %d x %d and %d x %d differ",
                              (int)A->n_rows, (int)A->n_cols, (int)B->n_rows, (int)B->n_cols);
        goto cleanup;
    }
    GS_TRY(gs_csr_alloc(A->n_rows, A->n_cols, 0, 0, &U, err));
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t i = 0; i < A->n_rows; i++) U.row_ptr[i + 1] = union_row(A, B, i, NULL);
    for (int32_t i = 0; i < A->n_rows; i++) U.row_ptr[i + 1] += U.row_ptr[i];
    U.nnz = U.row_ptr[A->n_rows];
    free(U.col);
    U.col = gs_malloc((size_t)U.nnz * sizeof *U.col, "pattern union columns", err);
    if (!U.col) GS_TRY(GS_ERR_NOMEM);
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t i = 0; i < A->n_rows; i++) union_row(A, B, i, U.col + U.row_ptr[i]);
cleanup:
    if (status != GS_OK) gs_csr_free(&U);
    *C = U;
    return status;
}
