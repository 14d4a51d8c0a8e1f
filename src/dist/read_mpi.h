/* read_mpi.h - every rank reads its own part of a Matrix Market file
 * (mpirun, --read parallel; docs/multigpu.md): the entries travel to the
 * ranks that own their rows, and each rank builds its row block exactly as
 * the one-process reader builds those rows. MPI builds only. */
#ifndef GS_READ_MPI_H
#define GS_READ_MPI_H

#include <stdint.h>

#include "csr.h"
#include "error.h"
#include "mmio.h"

/* begin[0..parts] of partition.c from counts spread over the ranks: this
 * rank holds count[0..rows) of rows [row0, row0 + rows), the ranks' slabs
 * contiguous in rank order and covering [0, n). Collective; the same
 * blocks as gs_dist_partition on the whole matrix. */
int gs_dist_partition_slabs(const int64_t *count, int64_t row0, int64_t rows, int64_t n,
                            int parts, int64_t *begin, gs_error *err);

typedef struct gs_dist_read {
    gs_csr A;            /* this rank's rows begin[rank] .. begin[rank + 1], global columns */
    gs_mm_info info;     /* the banner and size line (duplicates: the whole file's) */
    int symmetric;       /* gs_csr_is_symmetric(whole A, GS_SYMMETRY_RTOL) */
    int whole;           /* 1: nothing read; the file must be read whole (gzip, a pipe) */
    double read_seconds; /* head and parts read and parsed (the slowest rank) */
    double spread_seconds; /* this rank: counts, partition, exchange, its rows built, symmetry */
} gs_dist_read;

/* Collective: every rank returns the same status and message (the file's
 * first bad line, as gs_mm_read_csr and gs_problem_load word it); begin has
 * size + 1 entries. out->A is freed on failure. */
int gs_dist_read_matrix(const char *path, int64_t *begin, gs_dist_read *out, gs_error *err);

#endif
