/* partition_mpi.c - partition.c's nonzero-balanced row blocks computed by
 * the ranks together from per-row counts that no rank holds whole (parallel
 * reading, docs/multigpu.md): the same begin[] as the one-process rule. */
#include <stdlib.h>

#include "dist_impl.h"
#include "read_mpi.h"

/* Block r starts at the first row i whose prefix (nonzeros of rows < i)
 * reaches r total / parts: each rank finds, in its slab, the first such row
 * for every r (n where none), and the least over the ranks is the first
 * over the matrix, as partition.c's single pass finds it. */
int gs_dist_partition_slabs(const int64_t *count, int64_t row0, int64_t rows, int64_t n,
                            int parts, int64_t *begin, gs_error *err)
{
    MPI_Comm c = gs_dist_comm();
    int status = gs_dist_partition_check(n, parts, err);
    if (status != GS_OK) return status;
    int64_t sum = 0, prefix = 0, total = 0;
    for (int64_t i = 0; i < rows; i++) sum += count[i];
    MPI_Exscan(&sum, &prefix, 1, MPI_INT64_T, MPI_SUM, c);
    int rank;
    MPI_Comm_rank(c, &rank);
    if (rank == 0) prefix = 0; /* MPI_Exscan leaves rank 0's undefined */
    MPI_Allreduce(&sum, &total, 1, MPI_INT64_T, MPI_SUM, c);
    int64_t *first = malloc((size_t)parts * sizeof *first);
    status = gs_dist_agree(first ? GS_OK : gs_error_set(err, GS_ERR_NOMEM, "out of memory "
                                                        "for the row blocks"), err);
    if (status != GS_OK) {
        free(first);
        return status;
    }
    for (int r = 0; r < parts; r++) first[r] = n;
    int r = 1;
    for (int64_t i = 0; i < rows && r < parts; i++) {
        while (r < parts && prefix * parts >= (int64_t)r * total) first[r++] = row0 + i;
        prefix += count[i];
    }
    MPI_Allreduce(first, begin, parts, MPI_INT64_T, MPI_MIN, c);
    free(first);
    gs_dist_partition_fix(n, parts, begin);
    return GS_OK;
}
