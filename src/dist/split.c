/* split.c - a rank's row block split for the distributed SpMV
 * y = A_diag x_local + A_off x_halo (the diagonal / off-diagonal pair of
 * PETSc's MatMPIAIJ), and the block-diagonal part of a whole matrix. */
#include <stdlib.h>
#include <string.h>

#include "dist.h"

static int cmp_int32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int32_t halo_index(const int32_t *halo, int32_t n, int32_t col)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (halo[mid] < col) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The halo: the sorted distinct columns outside [row0, row1); off_at[i]:
 * where row i's off-block entries start among all of them. */
static int split_halo(const gs_csr *R, int64_t row0, int64_t row1, gs_dist_split *s,
                      const int64_t *off_at, gs_error *err)
{
    const int64_t n_off_entries = off_at[R->n_rows];
    int32_t *cols = gs_malloc((size_t)(n_off_entries ? n_off_entries : 1) * sizeof *cols,
                              "halo columns", err);
    if (!cols) return GS_ERR_NOMEM;
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < R->n_rows; i++) {
        int64_t m = off_at[i];
        for (int64_t k = R->row_ptr[i]; k < R->row_ptr[i + 1]; k++)
            if (R->col[k] < row0 || R->col[k] >= row1) cols[m++] = R->col[k];
    }
    qsort(cols, (size_t)n_off_entries, sizeof *cols, cmp_int32);
    int32_t n = 0;
    for (int64_t k = 0; k < n_off_entries; k++)
        if (n == 0 || cols[k] != cols[n - 1]) cols[n++] = cols[k];
    s->halo = cols;
    s->n_halo = n;
    return GS_OK;
}

/* Rows in parallel (OpenMP): the counts per row, their prefix sums, then each
 * row filled where its entries go (a rank's block of a large matrix: tens of
 * millions of entries, split while the rank's Tp runs). */
int gs_dist_split_rows(const gs_csr *R, int64_t row0, gs_dist_split *s, gs_error *err)
{
    const int64_t row1 = row0 + R->n_rows;
    const int32_t n = R->n_rows;
    int status = GS_OK;
    memset(s, 0, sizeof *s);
    /* off_at[i]: off-block entries of rows < i; off_row_at[i]: rows < i with any */
    int64_t *off_at = gs_malloc(((size_t)n + 1) * sizeof *off_at, "split counts", err);
    int32_t *off_row_at = gs_malloc(((size_t)n + 1) * sizeof *off_row_at, "split counts", err);
    if (!off_at || !off_row_at) GS_TRY(GS_ERR_NOMEM);
    off_at[0] = 0;
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < n; i++) {
        int64_t here = 0;
        for (int64_t k = R->row_ptr[i]; k < R->row_ptr[i + 1]; k++)
            here += R->col[k] < row0 || R->col[k] >= row1;
        off_at[i + 1] = here;
    }
    off_row_at[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        off_row_at[i + 1] = off_row_at[i] + (off_at[i + 1] > 0);
        off_at[i + 1] += off_at[i];
    }
    const int64_t n_off = off_at[n], n_diag = R->row_ptr[n] - R->row_ptr[0] - n_off;
    const int32_t n_off_rows = off_row_at[n];
    GS_TRY(split_halo(R, row0, row1, s, off_at, err));
    GS_TRY(gs_csr_alloc(n, n, n_diag, R->val != NULL, &s->diag, err));
    GS_TRY(gs_csr_alloc(n_off_rows, s->n_halo, n_off, R->val != NULL, &s->off, err));
    s->n_off_rows = n_off_rows;
    s->off_rows = gs_malloc((size_t)(n_off_rows ? n_off_rows : 1) * sizeof *s->off_rows,
                            "off-block rows", err);
    if (!s->off_rows) GS_TRY(GS_ERR_NOMEM);
    s->off.row_ptr[0] = 0;
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < n; i++) {
        int64_t o = off_at[i];
        int64_t d = R->row_ptr[i] - R->row_ptr[0] - off_at[i];
        for (int64_t k = R->row_ptr[i]; k < R->row_ptr[i + 1]; k++) {
            const int32_t c = R->col[k];
            const double v = R->val ? R->val[k] : 1.0;
            if (c >= row0 && c < row1) {
                s->diag.col[d] = (int32_t)(c - row0);
                if (R->val) s->diag.val[d] = v;
                d++;
            } else {
                s->off.col[o] = halo_index(s->halo, s->n_halo, c);
                if (R->val) s->off.val[o] = v;
                o++;
            }
        }
        s->diag.row_ptr[i + 1] = d;
        if (off_at[i + 1] > off_at[i]) {
            const int32_t r = off_row_at[i];
            s->off_rows[r] = i;
            s->off.row_ptr[r + 1] = o;
        }
    }
cleanup:
    free(off_at);
    free(off_row_at);
    if (status != GS_OK) gs_dist_split_free(s);
    return status;
}

void gs_dist_split_free(gs_dist_split *s)
{
    gs_csr_free(&s->diag);
    gs_csr_free(&s->off);
    free(s->off_rows);
    free(s->halo);
    memset(s, 0, sizeof *s);
}

int gs_dist_block_diagonal(const gs_csr *A, int parts, const int64_t *begin, gs_csr *out,
                           gs_error *err)
{
    int64_t nnz = 0;
    for (int b = 0; b < parts; b++)
        for (int64_t i = begin[b]; i < begin[b + 1]; i++)
            for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
                nnz += A->col[k] >= begin[b] && A->col[k] < begin[b + 1];
    int status = gs_csr_alloc(A->n_rows, A->n_cols, nnz, A->val != NULL, out, err);
    if (status != GS_OK) return status;
    int64_t m = 0;
    for (int b = 0; b < parts; b++)
        for (int64_t i = begin[b]; i < begin[b + 1]; i++) {
            for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
                if (A->col[k] < begin[b] || A->col[k] >= begin[b + 1]) continue;
                out->col[m] = A->col[k];
                if (A->val) out->val[m] = A->val[k];
                m++;
            }
            out->row_ptr[i + 1] = m;
        }
    return GS_OK;
}
