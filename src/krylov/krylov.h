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
    int record_history; /* keep ||r_k|| / ||b||, k and the time of every iteration
                         * (gs_krylov_history) */
    int replacements;   /* gs_krylov_solve: residual replacements allowed where the
                         * method's estimate says converged and b - A x does not */
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

/* "converged" needs ||b - A x|| / ||b|| <= GS_TRUE_RESIDUAL_FACTOR * tol
 * (docs/verdicts.md): the run layer's verdict, and the bound below which
 * gs_krylov_solve replaces no residual. */
#define GS_TRUE_RESIDUAL_FACTOR 10.0

/* Where a history entry's numbers come from (gs_krylov_history.flags). */
enum {
    GS_HISTORY_TRUE = 1,         /* rel is ||b - A x_k|| / ||b|| computed afresh (iteration
                                  * 0, gmres's cycle ends, a residual replacement), not the
                                  * method's recurrence */
    GS_HISTORY_INTERPOLATED = 2, /* seconds interpolated between the checks around it (an
                                  * iteration without a check of its own) */
    GS_HISTORY_DEVICE_CLOCK = 4  /* seconds from the device's clock (the loop on the device,
                                  * the fused kernel), mapped onto the host's */
};

/* One entry per iteration when opts.record_history, iteration 0 (the
 * initial residual) first: iterations a method runs between two residual
 * checks come from a log of ||r_k||^2 on the engine (small.h,
 * GS_SMALL_LOG), read with the next check, so len = iterations + 1. A check
 * repeated at the same iteration (gmres confirming its estimate with
 * b - A x, a residual replacement) replaces the entry, so the iterations
 * strictly increase and the last entry is the result's rel_residual.
 * Parallel arrays, malloc'ed; gs_krylov_history_free. */
typedef struct gs_krylov_history {
    double *rel;     /* ||r_k|| / ||b|| */
    long *iteration; /* k */
    double *seconds; /* the time of iteration k minus the solve's start (flags say how) */
    unsigned char *flags; /* GS_HISTORY_* */
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
    int replacements;     /* residual replacements gs_krylov_solve made */
    double engine_true_rel; /* its last ||b - A x|| / ||b|| on the engine; NaN: not computed */
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
    /* 1: the method's "converged" already rests on b - A x within tol
     * (gmres confirms every claim): gs_krylov_solve checks nothing more */
    int confirms_true_residual;
    /* 1: an engine's fused one-kernel path (fused_run) can run it, so
     * --loop fused may ask for it (cg.c, bicgstab.c: kr_fused) */
    int fused;
} gs_method_type;

/* r = b - A x on the engine (r: the caller's, length n), then S[slot] = r.r and
 * S[slot + 1] = b.b read back together into *rr and *bb: the true residual of a
 * run (gs_krylov_solve's replacement test, a time step's verdict). */
int gs_true_residual_norms(gs_engine *e, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                           gs_vec *r, int slot, double *rr, double *bb);

/* method->solve, then, while the method says converged and the true
 * residual ||b - A x|| / ||b|| (on the engine: one spmv and one read) is
 * above GS_TRUE_RESIDUAL_FACTOR * tol, up to opts->replacements times:
 * replace r by b - A x and run the method again from x (its recurrence
 * restarted), within the iterations left. res then covers the whole solve:
 * iterations, counts and the history add up (a replacement's row is
 * flagged GS_HISTORY_TRUE), res->replacements says how many were made.
 * The same on every engine and loop path: only the method's solve runs
 * there. */
int gs_krylov_solve(const gs_method_type *method, gs_engine *e, const gs_mat *A, gs_pc *pc,
                    const gs_vec *b, gs_vec *x, const gs_krylov_opts *opts,
                    gs_krylov_result *res);

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
double gs_cg1_vector_accesses(const gs_krylov_opts *opts);
double gs_bicgstab_vector_accesses(const gs_krylov_opts *opts);
double gs_gmres_vector_accesses(const gs_krylov_opts *opts);
double gs_idr_vector_accesses(const gs_krylov_opts *opts);

int gs_cg_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_cg1_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                 const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_bicgstab_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                      const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_gmres_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                   const gs_krylov_opts *opts, gs_krylov_result *res);
int gs_idr_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                 const gs_krylov_opts *opts, gs_krylov_result *res);

#endif
