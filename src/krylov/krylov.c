/* krylov.c - the registry of Krylov methods and what they share: the
 * initial residual, the stopping test and the residual history. */
#include "krylov_impl.h"
#include "timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each method counts its own vector accesses per iteration (in its file). */
static const gs_method_type methods[] = {
    {"cg", "preconditioned conjugate gradients (SPD A and M)", gs_cg_solve,
     gs_cg_vector_accesses, 1},
    {"bicgstab", "preconditioned BiCGSTAB, right preconditioning", gs_bicgstab_solve,
     gs_bicgstab_vector_accesses, 2},
    {"gmres", "restarted GMRES(m), right preconditioning, CGS2 orthogonalisation",
     gs_gmres_solve, gs_gmres_vector_accesses, 1},
    {"idr", "IDR(s) with biorthogonalisation (van Gijzen & Sonneveld 2011)", gs_idr_solve,
     gs_idr_vector_accesses, 1},
};

const gs_method_type *gs_method_find(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].name, name) == 0) return &methods[i];
    return NULL;
}

int gs_method_type_count(void) { return (int)(sizeof methods / sizeof methods[0]); }

const gs_method_type *gs_method_type_at(int i) { return &methods[i]; }

const char *gs_reason_name(gs_reason r)
{
    switch (r) {
    case GS_REASON_CONVERGED: return "converged";
    case GS_REASON_MAXIT: return "iteration limit reached";
    case GS_REASON_BREAKDOWN: return "breakdown";
    case GS_REASON_NAN: return "residual became NaN or Inf";
    case GS_REASON_TIME_LIMIT: return "time limit";
    case GS_REASON_RESIDUAL_GAP: return "residual gap";
    }
    return "unknown";
}

void gs_krylov_result_free(gs_krylov_result *res)
{
    gs_krylov_history_free(&res->history);
}

void gs_krylov_history_free(gs_krylov_history *h)
{
    free(h->rel);
    free(h->iteration);
    free(h->seconds);
    memset(h, 0, sizeof *h);
}

int kr_init(kr_ctx *k, gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_krylov_opts *opts,
            gs_krylov_result *res)
{
    memset(res, 0, sizeof *res);
    k->e = e;
    k->ops = e->ops;
    k->A = A;
    k->pc = pc;
    k->opts = opts;
    k->res = res;
    k->bnorm = 0;
    k->history_cap = 0;
    k->start = gs_now();
    k->seq[0] = k->seq[1] = NULL;
    k->auto_block = 1;
    k->last_it = -1;
    k->last_rel = 0.0;
    return GS_OK;
}

/* r = b - A x, S[KR_RR] = r.r, S[KR_BB] = b.b; sets k->bnorm. *done is set
 * when b = 0 (x = 0 is then the answer) or x already solves the system. */
int kr_initial_residual(kr_ctx *k, const gs_vec *b, gs_vec *x, gs_vec *r, int *done)
{
    gs_engine *e = k->e;
    int status = GS_OK;
    *done = 0;
    GS_TRY(k->ops->copy(e, b, r));
    GS_TRY(k->ops->spmv_axpby(e, gs_coef_const(-1.0), k->A, x, gs_coef_const(1.0), r));
    GS_TRY(k->ops->dot(e, b, b, KR_BB));
    GS_TRY(k->ops->dot(e, r, r, KR_RR));
    double s[2];
    GS_TRY(k->ops->scalar_read(e, KR_BB, 2, s));
    k->bnorm = sqrt(s[0]);
    if (!isfinite(k->bnorm)) { /* ||r|| / ||b|| would read 0 or NaN: never converged */
        k->res->reason = GS_REASON_NAN;
        k->res->rel_residual = NAN;
        *done = 1;
        return GS_OK;
    }
    if (k->bnorm == 0.0) { /* A x = 0 has the answer x = 0 */
        GS_TRY(k->ops->set(e, x, 0.0));
        k->res->reason = GS_REASON_CONVERGED;
        k->res->rel_residual = 0.0;
        *done = 1;
        return GS_OK;
    }
    *done = kr_check(k, 0, s[1]);
cleanup:
    return status;
}

/* The adaptive check interval: if the residual fell from last_rel to rel
 * over the last it - last_it iterations at a steady rate, about
 * log(tol / rel) / log(rate) iterations are left; checking again after half
 * of them overshoots convergence by little while saving most reads. */
static void kr_plan_checks(kr_ctx *k, long it, double rel)
{
    long b = 1;
    if (k->last_it >= 0 && it > k->last_it && rel > 0.0 && rel < k->last_rel) {
        const double log_rate = log(rel / k->last_rel) / (double)(it - k->last_it);
        const double left = log(k->opts->tol / rel) / log_rate;
        if (left > 2.0) b = (long)(0.5 * left);
    }
    k->auto_block = b < 1 ? 1 : b > KR_AUTO_MAX ? KR_AUTO_MAX : b;
    k->last_it = it;
    k->last_rel = rel;
}

long kr_next_block(const kr_ctx *k, long it)
{
    const long left = k->opts->maxit - it;
    const long b = k->opts->check_every > 0 ? k->opts->check_every : k->auto_block;
    return b < left ? b : left;
}

/* Grow the three history arrays together; on failure they keep their
 * capacity and the history stops growing (a record, not a result). */
static void kr_history_grow(kr_ctx *k)
{
    gs_krylov_result *res = k->res;
    const long cap = k->history_cap ? 2 * k->history_cap : 256;
    gs_krylov_history *hist = &res->history;
    double *h = realloc(hist->rel, (size_t)cap * sizeof(double));
    if (h) hist->rel = h;
    long *hi = realloc(hist->iteration, (size_t)cap * sizeof(long));
    if (hi) hist->iteration = hi;
    double *hs = realloc(hist->seconds, (size_t)cap * sizeof(double));
    if (hs) hist->seconds = hs;
    if (h && hi && hs) k->history_cap = cap;
}

static void kr_record(kr_ctx *k, long it, double rel)
{
    gs_krylov_result *res = k->res;
    res->iterations = it;
    res->rel_residual = rel;
    if (!k->opts->record_history) return;
    gs_krylov_history *hist = &res->history;
    long i = hist->len;
    if (i > 0 && hist->iteration[i - 1] == it) i--; /* the later check stands */
    else if (i == k->history_cap) kr_history_grow(k);
    if (i >= k->history_cap) return;
    hist->rel[i] = rel;
    hist->iteration[i] = it;
    hist->seconds[i] = gs_now() - k->start;
    if (i == hist->len) hist->len++;
}

int kr_positive(double v) { return isfinite(v) && v > 0.0; }

/* The order is the verdict's: a residual within tol is convergence even
 * where the scalars that follow it are 0 (r = 0 exactly makes p'Ap, r0'v,
 * t'r ... vanish, and the engines turn their x / 0 into 0, so the
 * iteration sits at r = 0); a NaN or Inf is never within tol. */
int kr_check_breakdown(kr_ctx *k, long it, double rr, const char *what)
{
    gs_krylov_result *res = k->res;
    const double rel = sqrt(fabs(rr)) / k->bnorm;
    kr_record(k, it, rel);
    if (k->opts->progress) k->opts->progress(k->opts->progress_ctx, it, rel);
    if (!isfinite(rel)) {
        res->reason = GS_REASON_NAN;
        return 1;
    }
    kr_plan_checks(k, it, rel);
    if (rel <= k->opts->tol) {
        res->reason = GS_REASON_CONVERGED;
        return 1;
    }
    if (what) {
        kr_breakdown(k, it, what);
        return 1;
    }
    if (it >= k->opts->maxit) {
        res->reason = GS_REASON_MAXIT;
        return 1;
    }
    if (k->opts->deadline > 0.0 && gs_now() >= k->opts->deadline) {
        res->reason = GS_REASON_TIME_LIMIT;
        return 1;
    }
    return 0;
}

int kr_check(kr_ctx *k, long it, double rr) { return kr_check_breakdown(k, it, rr, NULL); }

void kr_breakdown(kr_ctx *k, long it, const char *what)
{
    k->res->reason = GS_REASON_BREAKDOWN;
    k->res->breakdown_iteration = it;
    k->res->iterations = it;
    snprintf(k->res->breakdown, sizeof k->res->breakdown, "%s", what);
}

int kr_run_iteration(kr_ctx *k, kr_body_fn body, void *state, int key)
{
    gs_engine *e = k->e;
    int status = GS_OK;
    if (!k->opts->use_capture || !k->ops->capture_begin) return body(k, state);
    if (!k->seq[key]) {
        GS_TRY(k->ops->capture_begin(e));
        status = body(k, state);
        int end_status = k->ops->capture_end(e, &k->seq[key]);
        if (status == GS_OK) status = end_status;
        if (status != GS_OK) goto cleanup;
    }
    GS_TRY(k->ops->replay(e, k->seq[key]));
cleanup:
    return status;
}

void kr_finish(kr_ctx *k)
{
    for (int i = 0; i < 2; i++)
        if (k->seq[i]) k->ops->seq_destroy(k->e, k->seq[i]);
    k->seq[0] = k->seq[1] = NULL;
}
