/* timestep.h - a time-stepped problem (heat3d) solved as a sequence of
 * linear systems A u^(n+1) = b^n with one matrix and one preconditioner set
 * up once: each step's right-hand side made on the engine from u^n, each
 * step solved by the chosen Krylov method from u^n (or from zero), each
 * step's true residual checked before the next. docs/heat3d.md. */
#ifndef GS_TIMESTEP_H
#define GS_TIMESTEP_H

#include "engine.h"
#include "krylov.h"
#include "precond.h"

/* What the steps of one run did. */
typedef struct gs_steps_record {
    long steps;          /* asked for */
    int warm_start;      /* the plan's: steps started from the previous solution */
    long steps_run;      /* solved, the failed one included: u is at steps_run * dt */
    long failed_step;    /* 1-based step whose solve did not converge (the run stopped
                          * there); 0: every step converged */
    long it_min, it_max, it_total;  /* iterations per step over steps_run */
    double method_rel_max;          /* worst ||r|| / ||b|| a method reported */
    double true_rel_max;            /* worst ||b - A u|| / ||b||, on the engine */
    double solve_seconds;           /* every step's right-hand side and solve (Ts) */
    double check_seconds;           /* every step's true residual, outside Ts */
} gs_steps_record;

/* How to step. */
typedef struct gs_steps_plan {
    long steps;
    double rhs_coef[2];  /* b = rhs_coef[0] u + rhs_coef[1] A u (gs_heat3d_rhs_coefs) */
    int warm_start;      /* 1: step n+1 starts from u^n; 0: from zero */
    double true_factor;  /* a step converges when its true residual <= true_factor tol */
} gs_steps_plan;

/* Run plan->steps steps on e: u holds u^0 on entry and the last step's
 * solution on return, b the last step's right-hand side. A step that does
 * not converge (its method's reason, or its true residual not finite or
 * above true_factor * tol: reasons NaN and residual gap) stops the loop,
 * recorded in rec->failed_step. res sums the steps as one solve for the
 * report: iterations in total, the failed step's reason and breakdown (or
 * converged), the worst method residual, the last step's history. Returns
 * non-GS_OK only when an engine operation fails (the message in e->err). */
int gs_steps_run(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_method_type *method,
                 const gs_krylov_opts *opts, const gs_steps_plan *plan, gs_vec *u, gs_vec *b,
                 gs_steps_record *rec, gs_krylov_result *res);

#endif
