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

/* The halo: the sorted distinct columns outside [row0, row1). */
static int split_halo(const gs_csr *R, int64_t row0, int64_t row1, gs_dist_split *s,
                      int64_t n_off_entries, gs_error *err)
{
    int32_t *cols = gs_malloc((size_t)(n_off_entries ? n_off_entries : 1) * sizeof *cols,
                              "halo columns", err);
    if (!cols) return GS_ERR_NOMEM;
    int64_t m = 0;
    for (int64_t k = 0; k < R->nnz; k++)
        if (R->col[k] < row0 || R->col[k] >= row1) cols[m++] = R->col[k];
    qsort(cols, (size_t)m, sizeof *cols, cmp_int32);
    int32_t n = 0;
    for (int64_t k = 0; k < m; k++)
        if (n == 0 || cols[k] != cols[n - 1]) cols[n++] = cols[k];
    s->halo = cols;
    s->n_halo = n;
    return GS_OK;
}

int gs_dist_split_rows(const gs_csr *R, int64_t row0, gs_dist_split *s, gs_error *err)
{
    const int64_t row1 = row0 + R->n_rows;
    int64_t n_diag = 0, n_off = 0;
    int32_t n_off_rows = 0;
    int status = GS_OK;
    memset(s, 0, sizeof *s);
    for (int32_t i = 0; i < R->n_rows; i++) {
        int64_t here = 0;
        for (int64_t k = R->row_ptr[i]; k < R->row_ptr[i + 1]; k++)
            here += R->col[k] < row0 || R->col[k] >= row1;
        n_off += here;
        n_diag += R->row_ptr[i + 1] - R->row_ptr[i] - here;
        n_off_rows += here > 0;
    }
    GS_TRY(split_halo(R, row0, row1, s, n_off, err));
    GS_TRY(gs_csr_alloc(R->n_rows, R->n_rows, n_diag, R->val != NULL, &s->diag, err));
    GS_TRY(gs_csr_alloc(n_off_rows, s->n_halo, n_off, R->val != NULL, &s->off, err));
    s->n_off_rows = n_off_rows;
    s->off_rows = gs_malloc((size_t)(n_off_rows ? n_off_rows : 1) * sizeof *s->off_rows,
                            "off-block rows", err);
    if (!s->off_rows) GS_TRY(GS_ERR_NOMEM);
    int64_t d = 0, o = 0;
    int32_t r = 0;
    for (int32_t i = 0; i < R->n_rows; i++) {
        const int64_t o_start = o;
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
        if (o > o_start) {
            s->off_rows[r] = i;
            s->off.row_ptr[++r] = o;
        }
    }
cleanup:
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
