/* run.h - one problem (matrix, right-hand side, initial guess) and one run
 * of it on one engine: Tp (transfer + preconditioner setup), Ts (the Krylov
 * solve) and everything the report prints. Data flows one way:
 * read -> CSR on the host -> engine -> setup -> solve -> report. */
#ifndef GS_RUN_H
#define GS_RUN_H

#include <stddef.h>

#include "csr.h"
#include "engine.h"
#include "heat3d.h"
#include "krylov.h"
#include "kvlist.h"
#include "options.h"
#include "precond.h"
#include "progress.h"
#include "timer.h"
#include "timestep.h"

typedef struct gs_problem {
    char name[256];      /* file path or generated spec */
    gs_csr A;
    int symmetric;       /* numerically symmetric (relative 1e-12) */
    const char *field;   /* "real", "integer", "pattern", "generated" */
    double read_seconds; /* reading (or generating) A, and page-locking it, outside Tt */
    double *b, *x0;      /* heat3d: the first step's right-hand side and u(x,y,z,0) */
    gs_heat3d *heat;     /* a time-stepped problem (--generate heat3d), else NULL */
#define GS_PROBLEM_ARRAYS 5 /* A's row_ptr, col, val; b, x0 */
    void *pinned[GS_PROBLEM_ARRAYS]; /* those page-locked by pinned_by */
    gs_engine *pinned_by;
} gs_problem;

typedef struct gs_run {
    const gs_problem *problem;
    char engine[16];
    char device[128];
    double bandwidth; /* bytes/s, 0 if not measured */
    char precond[32];
    char precond_desc[256];
    long long precond_nnz;
    double mu; /* nnz(M) / nnz(A) */
    gs_kvlist extra;
    char method[16];
    char method_why[96]; /* -m auto: why this method ("A and M symmetric") */
    gs_krylov_opts opts;
    int idr_s_used;      /* idr: the s it ran with (min(s, n - 1)), else 0 */
    int repeat;
    double tp[2], ts[2], tt[2]; /* min and median over the repeats */
    gs_stages stages;           /* Tp's stages of the fastest run */
    long iterations;
    gs_reason reason;
    long breakdown_iteration;
    char breakdown[160];
    int device_loop;     /* the iterations ran in the engine's loop on the device */
    char loop_note[160]; /* why not, where the engine has one (gs_krylov_result) */
    double rel_residual, true_residual;
    char verdict_note[320]; /* why a method's "converged" was not kept */
    gs_krylov_history history; /* the last repeat's residual checks (gs_krylov_result) */
    double bytes_per_iteration; /* what one iteration must move */
    double seconds_per_iteration, floor_ratio;
    size_t host_peak_bytes, device_peak_bytes;
    /* A time-stepped problem (problem->heat): the last repeat's steps, and
     * the paper's errors of its solution at the time it reached (NaN for
     * other problems). The point errors are at x = y = 0.5, z =
     * gs_heat3d_point_z(i), interpolated (gs_heat3d_interpolate). */
    gs_steps_record steps;
    double time_reached;
    double er; /* max over the grid |u - u~| */
    double point_exact[GS_HEAT3D_POINTS], point_error[GS_HEAT3D_POINTS];
} gs_run;

/* Read (input != NULL) or generate (cli->generate) a problem; sets up b and
 * x0 as the options say. Errors name the file and line or the option. */
int gs_problem_load(const gs_cli *cli, const char *input, gs_problem *p, gs_error *err);
void gs_problem_free(gs_problem *p); /* unpins first */
/* Page-locks the problem's arrays where engine e can (host_pin), so that
 * Tp's transfer of A (and the uploads of b and x0) are single DMAs; timed
 * with the reading, outside Tt. For one engine; gs_problem_free undoes it. */
void gs_problem_pin(gs_problem *p, gs_engine *e);

/* "converged" needs ||b - A x|| / ||b|| <= GS_TRUE_RESIDUAL_FACTOR * tol,
 * recomputed on the host from the original matrix (docs/verdicts.md). */
#define GS_TRUE_RESIDUAL_FACTOR 10.0

/* The method -m auto picks once the preconditioner is set up: cg when A and
 * M are both symmetric, else the preconditioner's paper method, else
 * bicgstab; why (len bytes) says which rule chose. */
const char *gs_run_auto_method(const gs_problem *p, const gs_pc *pc, char *why, size_t len);

/* Set up and solve cli->repeat times on e; fills run (the last run's
 * solution is written to x_out, length n, when x_out != NULL). progress
 * (NULL: none) is told each setup stage and residual check. */
int gs_run_solve(const gs_cli *cli, const gs_problem *p, gs_engine *e, gs_run *run,
                 double *x_out, gs_progress *progress, gs_error *err);
void gs_run_free(gs_run *run);

#endif
