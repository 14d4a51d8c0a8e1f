/* replace.c - residual replacement around any Krylov method: where the
 * method's recurrence says converged and b - A x disagrees, r = b - A x and
 * the method restarts from x (van der Vorst & Ye, "Residual replacement
 * strategies for Krylov subspace iterative methods", SIAM J. Sci. Comput.
 * 22(3) 2000, applied at the end instead of along the way). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "krylov_impl.h"
#include "timer.h"

int gs_true_residual_norms(gs_engine *e, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                           gs_vec *r, int slot, double *rr, double *bb)
{
    double s[2];
    int status = GS_OK;
    GS_TRY(e->ops->copy(e, b, r));
    GS_TRY(e->ops->spmv_axpby(e, gs_coef_const(-1.0), A, x, gs_coef_const(1.0), r));
    GS_TRY(e->ops->dot(e, r, r, slot));
    GS_TRY(e->ops->dot(e, b, b, slot + 1));
    GS_TRY(e->ops->scalar_read(e, slot, 2, s));
    *rr = s[0], *bb = s[1];
cleanup:
    return status;
}

/* *rel = ||b - A x|| / ||b||, in the method's slots (free after its solve). */
static int rp_true_residual(gs_engine *e, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                            double *rel)
{
    gs_vec *r = NULL;
    double rr = 0.0, bb = 0.0;
    int status = GS_OK;
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &r));
    GS_TRY(gs_true_residual_norms(e, A, b, x, r, KR_BB, &rr, &bb));
    *rel = sqrt(rr) / sqrt(bb);
cleanup:
    e->ops->vec_destroy(e, r);
    return status;
}

/* h += more, more's iterations shifted by it0 and its seconds by t0 (its
 * start after h's); more's first entry (its initial residual, b - A x at
 * it0) replaces h's last (the estimate at it0). more's arrays are freed. On
 * a failed allocation h keeps what it had. */
static void rp_history_append(gs_krylov_history *h, gs_krylov_history *more, long it0,
                              double t0)
{
    const long keep = h->len > 0 && more->len > 0 && h->iteration[h->len - 1] == it0
                          ? h->len - 1 : h->len;
    const long len = keep + more->len;
    double *rel = realloc(h->rel, (size_t)(len ? len : 1) * sizeof(double));
    if (rel) h->rel = rel;
    long *iteration = realloc(h->iteration, (size_t)(len ? len : 1) * sizeof(long));
    if (iteration) h->iteration = iteration;
    double *seconds = realloc(h->seconds, (size_t)(len ? len : 1) * sizeof(double));
    if (seconds) h->seconds = seconds;
    unsigned char *flags = realloc(h->flags, (size_t)(len ? len : 1));
    if (flags) h->flags = flags;
    if (rel && iteration && seconds && flags) {
        for (long i = 0; i < more->len; i++) {
            h->rel[keep + i] = more->rel[i];
            h->iteration[keep + i] = more->iteration[i] + it0;
            h->seconds[keep + i] = more->seconds[i] + t0;
            h->flags[keep + i] = more->flags[i];
        }
        h->len = len;
    }
    gs_krylov_history_free(more);
}

/* res += more: the second solve of x ran more->iterations after res's. */
static void rp_merge(gs_krylov_result *res, gs_krylov_result *more, double t0)
{
    const long it0 = res->iterations;
    res->iterations = it0 + more->iterations;
    res->reason = more->reason;
    res->breakdown_iteration = more->reason == GS_REASON_BREAKDOWN
                                   ? it0 + more->breakdown_iteration : res->breakdown_iteration;
    snprintf(res->breakdown, sizeof res->breakdown, "%s", more->breakdown);
    res->rel_residual = more->rel_residual;
    res->spmv_count += more->spmv_count;
    res->pc_apply_count += more->pc_apply_count;
    res->device_loop = more->device_loop;
    if (more->loop_note[0]) snprintf(res->loop_note, sizeof res->loop_note, "%s", more->loop_note);
    rp_history_append(&res->history, &more->history, it0, t0);
}

int gs_krylov_solve(const gs_method_type *method, gs_engine *e, const gs_mat *A, gs_pc *pc,
                    const gs_vec *b, gs_vec *x, const gs_krylov_opts *opts,
                    gs_krylov_result *res)
{
    const double start = gs_now(); /* the history's clock: the first solve's start */
    int status = gs_method_run(method, e, A, pc, b, x, opts, res); /* the engine's region */
    while (status == GS_OK && res->reason == GS_REASON_CONVERGED &&
           !method->confirms_true_residual && res->iterations > 0) {
        double rel;
        GS_TRY(rp_true_residual(e, A, b, x, &rel));
        res->engine_true_rel = rel;
        res->spmv_count++;
        if (!isfinite(rel) || rel <= GS_TRUE_RESIDUAL_FACTOR * opts->tol) break;
        if (res->replacements >= opts->replacements || res->iterations >= opts->maxit) break;
        gs_krylov_opts more_opts = *opts;
        more_opts.maxit = opts->maxit - res->iterations;
        gs_krylov_result more;
        const double t0 = gs_now() - start;
        status = gs_method_run(method, e, A, pc, b, x, &more_opts, &more);
        res->replacements++;
        rp_merge(res, &more, t0);
        gs_krylov_result_free(&more);
    }
cleanup:
    return status;
}
