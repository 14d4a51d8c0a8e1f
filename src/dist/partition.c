/* partition.c - contiguous row blocks balanced by nonzeros (docs/multigpu.md):
 * the one-dimensional partition of PETSc's MatMPIAIJ and Ginkgo's
 * distributed matrices, with block boundaries placed by nonzero counts. */
#include <stdlib.h>

#include "dist.h"

/* Two passes over the rows (the total, then the boundaries), O(1) memory:
 * the generators call it for every row of a grid they never build whole. */
int gs_dist_partition_check(int64_t n, int parts, gs_error *err)
{
    if (parts < 1 || n < parts)
        return gs_error_set(err, GS_ERR_INPUT,
                            "the matrix has %lld rows, fewer than the %d row blocks (one a rank)", (long long)n,
                            parts);
    return GS_OK;
}

void gs_dist_partition_fix(int64_t n, int parts, int64_t *begin)
{
    begin[0] = 0;
    begin[parts] = n;
    for (int b = 1; b < parts; b++) { /* every block keeps at least one row */
        if (begin[b] <= begin[b - 1]) begin[b] = begin[b - 1] + 1;
        if (begin[b] > n - (parts - b)) begin[b] = n - (parts - b);
    }
    for (int b = parts - 1; b >= 1; b--)
        if (begin[b] >= begin[b + 1]) begin[b] = begin[b + 1] - 1;
}

int gs_dist_partition_rows(gs_row_count_fn nnz_of, void *ctx, int64_t n, int parts,
                           int64_t *begin, gs_error *err)
{
    int status = gs_dist_partition_check(n, parts, err);
    if (status != GS_OK) return status;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) total += nnz_of(ctx, i);
    begin[0] = 0;
    int r = 1;
    int64_t prefix = 0; /* nonzeros of rows < i */
    for (int64_t i = 0; i < n && r < parts; i++) {
        /* block r starts at the first row whose prefix reaches r total / parts */
        while (r < parts && prefix * parts >= (int64_t)r * total) begin[r++] = i;
        prefix += nnz_of(ctx, i);
    }
    while (r < parts) begin[r++] = n;
    gs_dist_partition_fix(n, parts, begin);
    return GS_OK;
}

static int64_t csr_row_count(void *ctx, int64_t row)
{
    const gs_csr *A = ctx;
    return A->row_ptr[row + 1] - A->row_ptr[row];
}

int gs_dist_partition(const gs_csr *A, int parts, int64_t *begin, gs_error *err)
{
    return gs_dist_partition_rows(csr_row_count, (void *)A, A->n_rows, parts, begin, err);
}
