/* krylov.h - Krylov methods, each written once over the engine table and
 * registered by name: cg, bicgstab, gmres, idr. Non-convergence and
 * breakdown are reasons in the result, not errors: a method returns a
 * non-GS_OK status only when an engine operation fails. */
#ifndef GS_KRYLOV_H
#define GS_KRYLOV_H

#include "engine.h"
#include "precond.h"

typedef enum gs_reason {
    GS_REASON_CONVERGED = 0,
    GS_REASON_MAXIT,     /* iteration cap reached */
    GS_REASON_BREAKDOWN, /* see breakdown text */
    GS_REASON_NAN,       /* the residual became NaN or Inf */
    GS_REASON_TIME_LIMIT,   /* opts.deadline passed (checked after convergence) */
    GS_REASON_RESIDUAL_GAP  /* set by the run layer only: the method's estimate says
                             * converged, the true residual b - A x does not agree */
} gs_reason;

typedef struct gs_krylov_opts {
    double tol;      /* stop when ||r_k||_2 <= tol ||b||_2 */
    long maxit;
    int restart;     /* gmres */
    int idr_s;       /* idr */
    int check_every; /* read the residual norm back every this many iterations;
                      * 0: adaptive (cg and bicgstab; the others check every step) */
    int record_history; /* keep ||r_k|| / ||b||, k and the time of every check */
    int use_capture;    /* replay captured iteration blocks where the engine can, and
                         * run the whole loop on the device where it offers loop_run */
    double deadline; /* gs_now() value past which the method stops at its next check with
                      * reason GS_REASON_TIME_LIMIT; 0: none */
    /* Called at every residual check with the iteration and ||r_k|| / ||b||
     * the check read anyway (no extra host round trip); NULL: none. The
     * caller's, e.g. a progress line; the library itself never prints. */
    void (*progress)(void *ctx, long it, double rel);
    void *progress_ctx;
} gs_krylov_opts;

/* One entry per residual check when opts.record_history, iteration 0 (the
 * initial residual) first; a check repeated at the same iteration (gmres
 * confirming its estimate with b - A x) replaces the entry, so the
 * iterations strictly increase and the last entry is the result's
 * rel_residual. Parallel arrays, malloc'ed; gs_krylov_history_free. */
typedef struct gs_krylov_history {
    double *rel;     /* ||r_k|| / ||b|| */
    long *iteration; /* k */
    double *seconds; /* gs_now() at the check minus at the solve's start */
    long len;
} gs_krylov_history;

typedef struct gs_krylov_result {
    long iterations;
    gs_reason reason;
    long breakdown_iteration;
    char breakdown[160];  /* what broke down: "p'Ap <= 0 (A not positive definite)" */
    double rel_residual;  /* the method's own ||r_k|| / ||b|| at exit */
    gs_krylov_history history; /* freed with the result */
    long spmv_count, pc_apply_count;
    int idr_s;            /* the s IDR(s) used (opts.idr_s, at most n - 1); 0 for the others */
    int device_loop;      /* where the iterations ran (gs_loop_path): the host loop,
                           * the engine's loop on the device (loop_run: CG and BiCGSTAB
                           * check after every check_every iterations, adaptive checking
                           * becoming every GS_LOOP_MAX_PER_BODY; GMRES and IDR after
                           * every step), or the fused kernel */
    char loop_note[160];  /* why an engine with a loop on the device declined it, how the fused path ran, or "" */
} gs_krylov_result;

typedef enum gs_loop_path { GS_PATH_HOST = 0, GS_PATH_DEVICE, GS_PATH_FUSED } gs_loop_path;
const char *gs_loop_path_name(int path); /* "host", "device", "fused" */

typedef int (*gs_krylov_fn)(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b,
                            gs_vec *x, const gs_krylov_opts *opts, gs_krylov_result *res);

typedef struct gs_method_type {
    const char *name;
    const char *summary;
    gs_krylov_fn solve;
    /* Vector accesses (reads + writes of length-n fp64 vectors) one iteration
     * makes outside the matrix and the preconditioner, with the engine's fused
     * operations; the bandwidth floor counts 8 n bytes for each. One
     * iteration = one preconditioned spmv for cg/gmres/idr (two for bicgstab:
     * its iteration is counted as one full step). */
    double (*vector_accesses)(const gs_krylov_opts *opts);
    int spmv_per_iteration;
} gs_method_type;

const gs_method_type *gs_method_find(const char *name);
/* m->solve, inside the engine's solve_region where it has one (the CPU
 * engine: its threads wait for the solve's kernels from start to end). */
int gs_method_run(const gs_method_type *m, gs_engine *e, const gs_mat *A, gs_pc *pc,
                  const gs_vec *b, gs_vec *x, const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_method_type_count(void);
const gs_method_type *gs_method_type_at(int i);

const char *gs_reason_name(gs_reason r);
void gs_krylov_result_free(gs_krylov_result *res);
void gs_krylov_history_free(gs_krylov_history *h); /* frees the arrays, zeroes h */

/* The methods' vector accesses per iteration (gs_method_type). */
double gs_cg_vector_accesses(const gs_krylov_opts *opts);
double gs_bicgstab_vector_accesses(const gs_krylov_opts *opts);
double gs_gmres_vector_accesses(const gs_krylov_opts *opts);
double gs_idr_vector_accesses(const gs_krylov_opts *opts);

int gs_cg_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_bicgstab_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                      const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_gmres_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                   const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_idr_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                 const gs_krylov_opts *opts, gs_krylov_result *res);

#endif
