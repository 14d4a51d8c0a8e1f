/* timestep.c - implicit time steps with one preconditioner (timestep.h):
 * the theta scheme's systems (LeVeque 2007, ch. 9) solved one after the
 * other over the engine table, so both engines run the same loop. */
#include "timestep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "timer.h"

/* The step's true residual reads two slots no method keeps between solves
 * (GMRES, the widest user, stays below GS_SLOT_FREE + 502). */
enum { STEP_SLOT_RR = GS_MAX_SCALARS - 2 }; /* and STEP_SLOT_RR + 1 for b.b */

/* b = c0 u + c1 A u: the scheme's (I - (1 - theta) dt L) u^n. */
static int step_rhs(gs_engine *e, const gs_mat *A, const gs_steps_plan *plan, const gs_vec *u,
                    gs_vec *b)
{
    int status = e->ops->copy(e, u, b);
    if (status == GS_OK && plan->rhs_coef[1] != 0.0)
        status = e->ops->spmv_axpby(e, gs_coef_const(plan->rhs_coef[1]), A, u,
                                    gs_coef_const(plan->rhs_coef[0]), b);
    else if (status == GS_OK && plan->rhs_coef[0] != 1.0)
        status = e->ops->axpby(e, gs_coef_const(0.0), u, gs_coef_const(plan->rhs_coef[0]), b);
    return status;
}

/* *rel = ||b - A u|| / ||b|| (||b - A u|| when b = 0), from the engine's A. */
static int step_true_residual(gs_engine *e, const gs_mat *A, const gs_vec *b, const gs_vec *u,
                              gs_vec *r, double *rel)
{
    double rr = 0.0, bb = 0.0;
    const int status = gs_true_residual_norms(e, A, b, u, r, STEP_SLOT_RR, &rr, &bb);
    if (status == GS_OK) *rel = bb > 0.0 ? sqrt(rr) / sqrt(bb) : sqrt(rr);
    return status;
}

/* The step's verdict, as docs/verdicts.md gives a run's: a non-finite true
 * residual is NaN, a method's "converged" above true_factor tol a gap. */
static gs_reason step_verdict(const gs_krylov_result *step, double true_rel,
                              const gs_steps_plan *plan, double tol)
{
    if (!isfinite(true_rel) && (step->reason == GS_REASON_CONVERGED ||
                                step->reason == GS_REASON_MAXIT))
        return GS_REASON_NAN;
    if (step->reason == GS_REASON_CONVERGED && !(true_rel <= plan->true_factor * tol))
        return GS_REASON_RESIDUAL_GAP;
    return step->reason;
}

/* Fold one step into the record and the summed result. */
static void step_record(gs_steps_record *rec, gs_krylov_result *res, gs_krylov_result *step,
                        double true_rel)
{
    const long it = step->iterations;
    rec->steps_run++;
    rec->it_min = rec->steps_run == 1 || it < rec->it_min ? it : rec->it_min;
    rec->it_max = it > rec->it_max ? it : rec->it_max;
    rec->it_total += it;
    if (!(step->rel_residual <= rec->method_rel_max)) rec->method_rel_max = step->rel_residual;
    if (!(true_rel <= rec->true_rel_max)) rec->true_rel_max = true_rel;
    res->iterations = rec->it_total;
    res->rel_residual = rec->method_rel_max;
    res->spmv_count += step->spmv_count;
    res->pc_apply_count += step->pc_apply_count;
    res->replacements += step->replacements;
    res->reason = step->reason;
    res->breakdown_iteration = step->breakdown_iteration;
    snprintf(res->breakdown, sizeof res->breakdown, "%s", step->breakdown);
    res->idr_s = step->idr_s;
    res->device_loop = step->device_loop;
    snprintf(res->loop_note, sizeof res->loop_note, "%s", step->loop_note);
    gs_krylov_history_free(&res->history);
    res->history = step->history; /* taken over: the last step's checks */
    memset(&step->history, 0, sizeof step->history);
}

int gs_steps_run(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_method_type *method,
                 const gs_krylov_opts *opts, const gs_steps_plan *plan, gs_vec *u, gs_vec *b,
                 gs_steps_record *rec, gs_krylov_result *res)
{
    gs_vec *r = NULL;
    gs_krylov_result step;
    int status = GS_OK;
    memset(rec, 0, sizeof *rec);
    memset(res, 0, sizeof *res);
    memset(&step, 0, sizeof step);
    rec->steps = plan->steps;
    rec->warm_start = plan->warm_start;
    GS_TRY(e->ops->vec_create(e, gs_vec_length(u), &r));
    for (long n = 1; n <= plan->steps; n++) {
        const double t0 = gs_now();
        GS_TRY(step_rhs(e, A, plan, u, b));
        if (!plan->warm_start) GS_TRY(e->ops->set(e, u, 0.0));
        GS_TRY(gs_krylov_solve(method, e, A, pc, b, u, opts, &step));
        GS_TRY(e->ops->sync(e));
        const double t1 = gs_now();
        double true_rel = NAN;
        GS_TRY(step_true_residual(e, A, b, u, r, &true_rel));
        rec->solve_seconds += t1 - t0;
        rec->check_seconds += gs_now() - t1;
        step.reason = step_verdict(&step, true_rel, plan, opts->tol);
        step_record(rec, res, &step, true_rel);
        gs_krylov_result_free(&step);
        if (res->reason != GS_REASON_CONVERGED) {
            rec->failed_step = n;
            break;
        }
    }
cleanup:
    gs_krylov_result_free(&step);
    e->ops->vec_destroy(e, r);
    return status;
}
