/* dist.h - several processes (mpirun -np P gpusolve ...): rows of A in
 * contiguous blocks balanced by nonzeros, one block per MPI rank, and a
 * distributed engine behind the engine table (docs/multigpu.md). The parts
 * without MPI (the partition, the split of a row block into its diagonal
 * block, its off-block part and its halo) are in every build; the rest needs
 * `make MPI=1` and is stubbed otherwise (dist_stub.c: one process). */
#ifndef GS_DIST_H
#define GS_DIST_H

#include <stdint.h>

#include "csr.h"
#include "engine.h"
#include "error.h"
#include "precond.h"

/* What the report says about a distributed run; ranks == 0: not distributed. */
typedef struct gs_dist_summary {
    int ranks;
    int devices;         /* distinct GPUs the ranks use (0 on the CPU engine) */
    char transport[16];  /* "mpi" (CPU engine), "nccl", "mpi-staged" (GPUs through host) */
    char pc_scope[16];   /* "exact" (jacobi, none) or "block-local" */
    int halo_overlap;    /* the halo exchange overlapped the local product (--overlap) */
    int64_t n_global, nnz_global;
    int64_t rows_min, rows_max, nnz_min, nnz_max;
    double distribute_seconds;       /* --read root: rank 0's sends of the rows and vectors;
                                      * parallel: the counts, row blocks, exchange of the
                                      * entries, rows built, symmetry test, vectors */
    double split_seconds;            /* the rank's rows split into the diagonal block, the
                                      * off-block part and the halo, with the problem */
    char read_mode[16];              /* "root", "parallel" (--read) or "generated" */
    double halo_bytes_per_iteration; /* x entries received per iteration, all ranks */
    double comm_seconds;             /* time in communication during Ts, max over ranks */
    double reductions_per_iteration; /* collectives of sums over the ranks, Ts / iterations */
    double comm_setup_seconds;       /* NCCL communicator start and connections, once,
                                      * outside Tp and Ts (0 without NCCL) */
} gs_dist_summary;

/* ---- in every build (partition.c, split.c) ---- */

/* begin[0..parts]: contiguous row blocks of an n-row matrix with
 * nnz_of(row) nonzeros, balanced by nonzeros: block r starts at the first
 * row whose prefix count reaches round(r nnz / parts), moved so that every
 * block keeps at least one row. GS_ERR_INPUT when n < parts. */
typedef int64_t (*gs_row_count_fn)(void *ctx, int64_t row);
int gs_dist_partition_rows(gs_row_count_fn nnz_of, void *ctx, int64_t n, int parts,
                           int64_t *begin, gs_error *err);
int gs_dist_partition(const gs_csr *A, int parts, int64_t *begin, gs_error *err);
/* Its two halves: the refusal of n < parts, and, given begin[1..parts-1] as
 * the first rows whose prefix count reaches r total / parts (n where none),
 * the moves that give every block at least one row. */
int gs_dist_partition_check(int64_t n, int parts, gs_error *err);
void gs_dist_partition_fix(int64_t n, int parts, int64_t *begin);

/* A row block [row0, row0 + R->n_rows) of an n_global-column matrix, split
 * for y = A x: diag the block's diagonal block (columns shifted by row0),
 * off the other columns as a compressed matrix (only the rows that have
 * any, rows[i] their local row) over halo indices: halo[h] is the global
 * column of halo entry h, ascending, so the entries each other block owns
 * are contiguous. */
typedef struct gs_dist_split {
    gs_csr diag;
    int32_t n_off_rows;
    int32_t *off_rows;
    gs_csr off;        /* n_off_rows x n_halo, columns are halo indices */
    int32_t n_halo;
    int32_t *halo;
} gs_dist_split;
int gs_dist_split_rows(const gs_csr *R, int64_t row0, gs_dist_split *s, gs_error *err);
void gs_dist_split_free(gs_dist_split *s);

/* The block-diagonal part of A for blocks [begin[b], begin[b+1]): what each
 * rank's block-local preconditioner sees, on one process (--pc-blocks). */
int gs_dist_block_diagonal(const gs_csr *A, int parts, const int64_t *begin, gs_csr *out,
                           gs_error *err);

/* ---- MPI (stubs without it) ---- */

/* Before anything else in main: starts MPI when the process was launched by
 * an MPI launcher; *rank, *size = 0, 1 otherwise. */
int gs_dist_init(int *argc, char ***argv, int *rank, int *size);
void gs_dist_finalize(void);
/* Every rank calls it with its own status; returns the status of the lowest
 * failing rank (GS_OK if none) and copies that rank's message into err. */
int gs_dist_agree(int status, gs_error *err);
/* Ends every rank (a failure that the others cannot learn about otherwise). */
void gs_dist_abort(int exit_code);
double gs_dist_max(double v);
double gs_dist_sum(double v);
/* The CUDA device index this rank uses: its local rank (among the ranks on
 * its host) mod the device count; -1 without a device or MPI. */
int gs_dist_device(void);

/* The distributed engine over inner (taken over: destroyed with it);
 * collective. Vectors are the inner engine's, holding this rank's rows. */
int gs_engine_dist_create(gs_engine *inner, gs_engine **out, gs_error *err);
int gs_engine_is_dist(const gs_engine *e);
gs_engine *gs_engine_dist_inner(gs_engine *e);
/* A distributed matrix from this rank's rows already split (s, made with
 * the problem: gs_dist_split_rows); s is borrowed, not copied: it must
 * outlive the matrix. system = 1 as mat_create_system (the preconditioner's
 * setup reads s->diag next). Collective. */
int gs_engine_dist_mat_create_split(gs_engine *e, const gs_dist_split *s, int system,
                                    gs_mat **out);
/* A matrix of the distributed engine: this rank's diagonal block, a matrix
 * of the inner engine (whose layout queries it answers); A itself on any
 * other engine. */
const gs_mat *gs_engine_dist_local_mat(gs_engine *e, const gs_mat *A);
/* Fills the summary's engine part (ranks, devices, transport). */
void gs_engine_dist_describe(gs_engine *e, gs_dist_summary *s);
/* The stages of the last matrix made on the engine (this rank's seconds):
 * split (diagonal block, off-block part, halo), plan (the neighbours'
 * all-to-all), upload (the diagonal block to the inner engine), halo (the
 * transport's buffers and connections). */
enum { GS_DIST_MAT_SPLIT, GS_DIST_MAT_PLAN, GS_DIST_MAT_UPLOAD, GS_DIST_MAT_HALO,
       GS_DIST_MAT_STAGES };
void gs_engine_dist_mat_seconds(gs_engine *e, double out[GS_DIST_MAT_STAGES]);
/* Resets / reads the communication counters (comm seconds, halo bytes;
 * the GPU's are read at the next synchronisation). */
void gs_engine_dist_counters_reset(gs_engine *e);
void gs_engine_dist_counters(gs_engine *e, double *comm_seconds, double *halo_bytes,
                             long *spmv_count, long *reductions);

/* The preconditioner of a distributed run: jacobi (and none) exactly, the
 * types marked block-local (gs_pc_type.distributed) on each rank's diagonal
 * block of A_eng with their own setups on the inner engine; the others
 * refused (GS_ERR_UNSUPPORTED). A is this rank's rows (global columns).
 * Collective; failures are agreed. */
int gs_dist_pc_create(const gs_pc_type *type, gs_engine *dist, const gs_params *params,
                      const gs_csr *A, gs_mat *A_eng, const gs_pc_hook *hook, gs_pc **out,
                      gs_error *err);

/* ||b - A x|| / ||b|| (||b - A x|| when b = 0) on the distributed engine. */
int gs_dist_true_residual(gs_engine *dist, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                          double *out);

/* Gathers the rows of every rank of v (local length n_local) on rank 0 into
 * all (n_global, rank 0 only). */
int gs_dist_gather(const double *v, int64_t n_local, double *all, gs_error *err);

#endif
