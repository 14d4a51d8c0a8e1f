/* krylov.c - the registry of Krylov methods and what they share: the
 * initial residual, the stopping test and the residual history. */
#include "krylov_impl.h"
#include "small.h"
#include "timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each method counts its own vector accesses per iteration (in its file). */
static const gs_method_type methods[] = {
    {"cg", "preconditioned conjugate gradients (SPD A and M)", gs_cg_solve,
     gs_cg_vector_accesses, 1, 0, 1},
    {"cg1", "preconditioned CG with one reduction an iteration (Chronopoulos-Gear; SPD A and M)",
     gs_cg1_solve, gs_cg1_vector_accesses, 1, 0, 0},
    {"bicgstab", "preconditioned BiCGSTAB, right preconditioning", gs_bicgstab_solve,
     gs_bicgstab_vector_accesses, 2, 0, 1},
    {"gmres", "restarted GMRES(m), right preconditioning, CGS2 orthogonalisation",
     gs_gmres_solve, gs_gmres_vector_accesses, 1, 1, 0},
    {"idr", "IDR(s) with biorthogonalisation (van Gijzen & Sonneveld 2011)", gs_idr_solve,
     gs_idr_vector_accesses, 1, 0, 0},
};

const gs_method_type *gs_method_find(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].name, name) == 0) return &methods[i];
    return NULL;
}

typedef struct method_call {
    const gs_method_type *m;
    gs_engine *e;
    const gs_mat *A;
    gs_pc *pc;
    const gs_vec *b;
    gs_vec *x;
    const gs_krylov_opts *opts;
    gs_krylov_result *res;
} method_call;

static int method_call_run(void *ctx)
{
    method_call *c = ctx;
    return c->m->solve(c->e, c->A, c->pc, c->b, c->x, c->opts, c->res);
}

int gs_method_run(const gs_method_type *m, gs_engine *e, const gs_mat *A, gs_pc *pc,
                  const gs_vec *b, gs_vec *x, const gs_krylov_opts *opts, gs_krylov_result *res)
{
    method_call c = {m, e, A, pc, b, x, opts, res};
    if (!e->ops->solve_region) return method_call_run(&c);
    return e->ops->solve_region(e, method_call_run, &c);
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

const char *gs_loop_path_name(int path)
{
    return path == GS_PATH_FUSED ? "fused" : path == GS_PATH_DEVICE ? "device" : "host";
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
    free(h->flags);
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
    k->log_base = GS_SLOT_NONE;
    k->log_cap = 0;
    k->log_read = NULL;
    k->log_fresh = 0;
    k->next_flags = 0;
    k->repeat_is_true = 0;
    res->engine_true_rel = NAN;
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
    *done = kr_check_true(k, 0, s[1]);
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
    unsigned char *hf = realloc(hist->flags, (size_t)cap);
    if (hf) hist->flags = hf;
    if (h && hi && hs && hf) k->history_cap = cap;
}

/* Iteration it had rel at seconds since the start (flags: GS_HISTORY_*);
 * the history only: an entry between checks is no verdict. */
static void kr_history_add(kr_ctx *k, long it, double rel, double seconds, unsigned flags)
{
    gs_krylov_history *hist = &k->res->history;
    long i = hist->len;
    if (i > 0 && hist->iteration[i - 1] == it) i--; /* the later check stands */
    else if (i == k->history_cap) kr_history_grow(k);
    if (i >= k->history_cap) return;
    hist->rel[i] = rel;
    hist->iteration[i] = it;
    hist->seconds[i] = seconds;
    hist->flags[i] = (unsigned char)flags;
    if (i == hist->len) hist->len++;
}

/* The check at iteration it found rel at seconds since the start. */
static void kr_record_at(kr_ctx *k, long it, double rel, double seconds, unsigned flags)
{
    gs_krylov_result *res = k->res;
    res->iterations = it;
    res->rel_residual = rel;
    if (k->opts->record_history) kr_history_add(k, it, rel, seconds, flags);
}

/* The iterations between the last entry and the check at it, from the
 * log the check read with its slots (kr_check_read): entry q of the ring
 * holds iteration it - (count - 1 - q); their times are interpolated
 * (kr_history_interpolate). */
static void kr_record_logged(kr_ctx *k, long it)
{
    const gs_krylov_history *hist = &k->res->history;
    if (!k->log_fresh || hist->len == 0) return;
    k->log_fresh = 0;
    const double *ring = k->log_read + (k->log_base + 1 - KR_RR);
    const double count = k->log_read[k->log_base - KR_RR];
    for (long j = hist->iteration[hist->len - 1] + 1; j < it; j++) {
        const double q = count - 1.0 - (double)(it - j);
        if (it - j >= k->log_cap || q < 0.0) continue; /* overwritten, or never logged */
        const double rr = ring[(long)fmod(q, (double)k->log_cap)];
        kr_history_add(k, j, sqrt(fabs(rr)) / k->bnorm, NAN, GS_HISTORY_INTERPOLATED);
    }
}

static void kr_record(kr_ctx *k, long it, double rel)
{
    const unsigned flags = k->next_flags;
    k->next_flags = 0;
    if (k->opts->record_history) kr_record_logged(k, it);
    kr_record_at(k, it, rel, k->opts->record_history ? gs_now() - k->start : 0.0, flags);
}

/* Entries flagged GS_HISTORY_INTERPOLATED get the time linear in the
 * iteration between the entries with a time of their own around them (the
 * first entry, iteration 0, always has one; so has the last, a check). */
static void kr_history_interpolate(gs_krylov_history *h)
{
    long before = 0;
    for (long i = 1; i < h->len; i++) {
        if (h->flags[i] & GS_HISTORY_INTERPOLATED) continue;
        for (long j = before + 1; j < i; j++) {
            const double f = (double)(h->iteration[j] - h->iteration[before]) /
                             (double)(h->iteration[i] - h->iteration[before]);
            h->seconds[j] = h->seconds[before] + f * (h->seconds[i] - h->seconds[before]);
        }
        before = i;
    }
}

int kr_log_begin(kr_ctx *k, int base)
{
    const gs_krylov_opts *o = k->opts;
    const double zero = 0.0;
    if (!o->record_history) return GS_OK;
    /* the most iterations between two checks: a host block (check_every, or
     * KR_AUTO_MAX adaptive), after a device loop's last check its body's */
    k->log_cap = (o->check_every > KR_AUTO_MAX ? o->check_every : KR_AUTO_MAX) +
                 GS_LOOP_MAX_PER_BODY;
    if (base + 1 + k->log_cap > GS_MAX_SCALARS) return GS_OK; /* no room: checks only */
    k->log_read = gs_malloc((size_t)(base + 1 + k->log_cap - KR_RR) * sizeof(double),
                            "residual log", &k->e->err);
    if (!k->log_read) return GS_ERR_NOMEM;
    k->log_base = base;
    return k->ops->scalar_write(k->e, base, 1, &zero);
}

int kr_log(kr_ctx *k)
{
    if (k->log_base == GS_SLOT_NONE) return GS_OK;
    const gs_small op = {GS_SMALL_LOG, 0, k->log_cap, k->log_base, KR_RR};
    return k->ops->small_run(k->e, &op);
}

int kr_check_read(kr_ctx *k, int count, double *v)
{
    if (k->log_base == GS_SLOT_NONE) return k->ops->scalar_read(k->e, KR_RR, count, v);
    const int status = k->ops->scalar_read(k->e, KR_RR, k->log_base + 1 + k->log_cap - KR_RR,
                                           k->log_read);
    if (status != GS_OK) return status;
    memcpy(v, k->log_read, (size_t)count * sizeof(double));
    k->log_fresh = 1;
    return GS_OK;
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

int kr_check_true(kr_ctx *k, long it, double rr)
{
    k->next_flags = GS_HISTORY_TRUE;
    return kr_check_breakdown(k, it, rr, NULL);
}

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
    kr_history_interpolate(&k->res->history);
    free(k->log_read);
    k->log_read = NULL;
    k->log_base = GS_SLOT_NONE;
    for (int i = 0; i < 2; i++)
        if (k->seq[i]) k->ops->seq_destroy(k->e, k->seq[i]);
    k->seq[0] = k->seq[1] = NULL;
}

static int kr_test_passes(const gs_loop_test *t, double v)
{
    switch (t->kind) {
    case GS_LOOP_FINITE: return isfinite(v);
    case GS_LOOP_POSITIVE: return v > 0.0;
    case GS_LOOP_NONZERO: return v != 0.0;
    }
    return 1;
}

const char *kr_test_failed(const kr_test *tests, int n, const double *v, int slot0)
{
    for (int i = 0; i < n; i++)
        if (!kr_test_passes(&tests[i].t, v[tests[i].t.slot - slot0])) return tests[i].what;
    return NULL;
}

/* The engine captures the body through this (loop_run knows no kr_ctx). */
typedef struct kr_loop_body {
    kr_ctx *k;
    kr_body_fn body;
    void *state;
    long per_body;
} kr_loop_body;

static int kr_loop_body_run(void *ctx)
{
    kr_loop_body *b = ctx;
    int status = GS_OK;
    for (long i = 0; status == GS_OK && i < b->per_body; i++) status = b->body(b->k, b->state);
    return status;
}

long kr_loop_per_body(const kr_ctx *k)
{
    const long c = k->opts->check_every;
    if (c <= 0) return GS_LOOP_MAX_PER_BODY; /* adaptive: a check every per_body */
    for (long d = GS_LOOP_MAX_PER_BODY; d > 1; d--)
        if (c % d == 0) return d;
    return 1;
}

/* The loop's outcome as kr_check_breakdown would have recorded it (a
 * handoff: the checks it made, the host loop goes on from L->it_done). */
static int kr_loop_verdict(kr_ctx *k, const gs_loop *L, const kr_test *tests)
{
    gs_krylov_result *res = k->res;
    for (long i = 0; i < L->history_len; i++) {
        /* no time of its own: an iteration the device loop took from the log */
        const int logged = isnan(L->history_time[i]);
        const int again = res->history.len > 0 &&
                          res->history.iteration[res->history.len - 1] == L->history_it[i];
        unsigned flags = logged ? GS_HISTORY_INTERPOLATED : GS_HISTORY_DEVICE_CLOCK;
        if (again && k->repeat_is_true) flags |= GS_HISTORY_TRUE;
        if (logged) kr_history_add(k, L->history_it[i], L->history_rel[i], NAN, flags);
        else kr_record_at(k, L->history_it[i], L->history_rel[i], L->history_time[i] - k->start,
                          flags);
    }
    if (L->stop == GS_LOOP_HANDOFF) {
        if (L->last_it > L->it0 && k->opts->progress)
            k->opts->progress(k->opts->progress_ctx, L->last_it, L->last_rel);
        return GS_OK;
    }
    if (!k->opts->record_history || L->history_len == 0) kr_record(k, L->last_it, L->last_rel);
    if (k->opts->progress) k->opts->progress(k->opts->progress_ctx, L->last_it, L->last_rel);
    switch (L->stop) {
    case GS_LOOP_CONVERGED: res->reason = GS_REASON_CONVERGED; return GS_OK;
    case GS_LOOP_NAN: res->reason = GS_REASON_NAN; return GS_OK;
    case GS_LOOP_MAXIT: res->reason = GS_REASON_MAXIT; return GS_OK;
    case GS_LOOP_TIME_LIMIT: res->reason = GS_REASON_TIME_LIMIT; return GS_OK;
    case GS_LOOP_BREAKDOWN:
        if (L->failed_test >= 0 && L->failed_test < L->n_tests) {
            kr_breakdown(k, L->last_it, tests[L->failed_test].what);
            return GS_OK;
        }
        break;
    }
    return gs_error_set(&k->e->err, GS_ERR_INTERNAL, "device loop stopped with %d (test %d)",
                        L->stop, L->failed_test);
}

/* The loop description both device paths share: checks, tests and moves,
 * deadline, progress, and the history arrays (*fits = 0, nothing
 * allocated, where the history would pass the engine's cap). */
static int kr_loop_prepare(kr_ctx *k, long it0, long per_body, const kr_test *tests, int n_tests,
                           const int (*moves)[2], int n_moves, long checks, gs_loop *L,
                           int *fits)
{
    const gs_krylov_opts *o = k->opts;
    *fits = 0;
    memset(L, 0, sizeof *L);
    if (n_tests > GS_LOOP_MAX_TESTS || n_moves > GS_LOOP_MAX_MOVES)
        return gs_error_set(&k->e->err, GS_ERR_INTERNAL, "device loop: %d tests, %d moves",
                            n_tests, n_moves);
    L->it0 = it0;
    L->maxit = o->maxit;
    L->per_body = per_body;
    L->check_every = o->check_every > 0 ? o->check_every : per_body; /* no round trip */
    L->tol = o->tol;
    L->bnorm = k->bnorm;
    L->slot_rr = KR_RR;
    L->n_tests = n_tests;
    for (int i = 0; i < n_tests; i++) L->test[i] = tests[i].t;
    L->n_moves = n_moves;
    for (int i = 0; i < n_moves; i++) L->move_dst[i] = moves[i][0], L->move_src[i] = moves[i][1];
    L->deadline = o->deadline;
    L->progress = o->progress;
    L->progress_ctx = o->progress_ctx;
    if (o->record_history) { /* every iteration, or as many checks as said */
        const long cap = checks > 0 ? checks : o->maxit - it0;
        L->record_every = 1;
        L->log_base = k->log_base;
        L->log_cap = k->log_cap;
        if (cap > GS_LOOP_MAX_HISTORY) { /* the host loop records any length */
            snprintf(k->res->loop_note, sizeof k->res->loop_note,
                     "history of %ld checks above the device's %ld", cap, GS_LOOP_MAX_HISTORY);
            return GS_OK;
        }
        L->history_cap = cap;
        L->history_it = gs_malloc((size_t)cap * sizeof(long), "device loop history", &k->e->err);
        L->history_rel = gs_malloc((size_t)cap * sizeof(double), "device loop history",
                                   &k->e->err);
        L->history_time = gs_malloc((size_t)cap * sizeof(double), "device loop history",
                                    &k->e->err);
        if (!L->history_it || !L->history_rel || !L->history_time) return GS_ERR_NOMEM;
    }
    *fits = 1;
    return GS_OK;
}

static void kr_loop_release(gs_loop *L)
{
    free(L->history_it);
    free(L->history_rel);
    free(L->history_time);
}

/* A path declined: its note first, an earlier path's (the fused one's) after it. */
static void kr_loop_note(kr_ctx *k, const char *why)
{
    char earlier[sizeof k->res->loop_note];
    snprintf(earlier, sizeof earlier, "%s", k->res->loop_note);
    if (earlier[0] && why[0])
        snprintf(k->res->loop_note, sizeof k->res->loop_note, "%.80s; %.70s", why, earlier);
    else snprintf(k->res->loop_note, sizeof k->res->loop_note, "%s", why[0] ? why : earlier);
}

int kr_device_loop(kr_ctx *k, long it0, long per_body, kr_body_fn body, void *state,
                   const kr_test *tests, int n_tests, const int (*moves)[2], int n_moves,
                   long *it_done, int *finished)
{
    const gs_krylov_opts *o = k->opts;
    kr_loop_body lb = {k, body, state, per_body};
    gs_loop L;
    int status = GS_OK, fits = 0;
    *it_done = it0;
    *finished = 0;
    memset(&L, 0, sizeof L);
    if (!o->use_capture || !k->ops->loop_run || o->maxit - it0 < per_body) return GS_OK;
    GS_TRY(kr_loop_prepare(k, it0, per_body, tests, n_tests, moves, n_moves, 0, &L, &fits));
    if (!fits) goto cleanup;
    GS_TRY(k->ops->loop_run(k->e, kr_loop_body_run, &lb, &L));
    if (!L.ran) {
        kr_loop_note(k, L.declined);
        goto cleanup;
    }
    *it_done = L.it_done;
    *finished = L.stop != GS_LOOP_HANDOFF;
    /* adaptive checks: the host's rest (fewer than per_body iterations) in
     * one block, checked at maxit, as the device's grid would have been */
    if (!*finished && o->check_every <= 0) k->auto_block = KR_AUTO_MAX;
    k->res->device_loop = GS_PATH_DEVICE;
    status = kr_loop_verdict(k, &L, tests);
cleanup:
    kr_loop_release(&L);
    return status;
}

/* The engine runs the steps through this (loop_run knows no kr_ctx). */
typedef struct kr_loop_steps {
    kr_ctx *k;
    kr_step_fn step;
    void *state;
} kr_loop_steps;

static int kr_loop_step_run(void *ctx, int i)
{
    kr_loop_steps *b = ctx;
    return b->step(b->k, b->state, i);
}

int kr_device_steps(kr_ctx *k, long it0, int n_steps, kr_step_fn step, void *state,
                    const int *step_its, long checks, const kr_test *tests, int n_tests,
                    long *it_done, int *finished)
{
    const gs_krylov_opts *o = k->opts;
    kr_loop_steps ls = {k, step, state};
    gs_loop L;
    int status = GS_OK, fits = 0;
    *it_done = it0;
    *finished = 0;
    memset(&L, 0, sizeof L);
    if (!o->use_capture || !k->ops->loop_run || o->maxit <= it0 || n_steps < 2 ||
        n_steps > GS_LOOP_MAX_STEPS)
        return GS_OK;
    GS_TRY(kr_loop_prepare(k, it0, 1, tests, n_tests, NULL, 0, checks, &L, &fits));
    if (!fits) goto cleanup;
    L.check_every = 1;
    L.n_steps = n_steps;
    L.step = kr_loop_step_run;
    L.step_its = step_its;
    GS_TRY(k->ops->loop_run(k->e, NULL, &ls, &L));
    if (!L.ran) {
        kr_loop_note(k, L.declined);
        goto cleanup;
    }
    if (L.stop == GS_LOOP_HANDOFF) { /* a body of steps checks at maxit itself */
        status = gs_error_set(&k->e->err, GS_ERR_INTERNAL, "device loop of steps handed off");
        goto cleanup;
    }
    *it_done = L.last_it;
    *finished = 1;
    k->res->device_loop = GS_PATH_DEVICE;
    status = kr_loop_verdict(k, &L, tests);
cleanup:
    kr_loop_release(&L);
    return status;
}

int kr_fused_begin(kr_ctx *k, int method, gs_fused *f)
{
    const gs_pc *pc = k->pc;
    if (!pc->pointwise && !pc->pointwise_identity && pc->n_product == 0 && !pc->factor[0]) {
        if (k->ops->fused_run && k->opts->use_capture) /* said where --loop fused falls back */
            kr_loop_note(k, "no fused kernel for this M");
        return 0;
    }
    memset(f, 0, sizeof *f);
    f->method = method;
    f->A = k->A;
    f->d = pc->pointwise;
    if (!f->d && !pc->pointwise_identity) {
        f->nprod = pc->n_product;
        f->prod[0] = pc->product[0];
        f->prod[1] = pc->product[1];
        if (f->nprod == 0) {
            f->factor[0] = pc->factor[0];
            f->factor[1] = pc->factor[1];
            f->factor_dinv = pc->factor_dinv;
        }
    }
    return 1;
}

int kr_fused(kr_ctx *k, const gs_fused *f, const kr_test *tests, int n_tests,
             const int (*moves)[2], int n_moves, int *finished)
{
    const gs_krylov_opts *o = k->opts;
    gs_loop L;
    int status = GS_OK, fits = 0;
    *finished = 0;
    memset(&L, 0, sizeof L);
    if (!o->use_capture || !k->ops->fused_run || o->maxit < 1) return GS_OK;
    GS_TRY(kr_loop_prepare(k, 0, 1, tests, n_tests, moves, n_moves, 0, &L, &fits));
    if (!fits) goto cleanup;
    GS_TRY(k->ops->fused_run(k->e, f, &L));
    if (!L.ran) {
        kr_loop_note(k, L.declined);
        goto cleanup;
    }
    *finished = 1;
    k->res->device_loop = GS_PATH_FUSED;
    snprintf(k->res->loop_note, sizeof k->res->loop_note, "%s", L.declined); /* how it ran */
    status = kr_loop_verdict(k, &L, tests);
cleanup:
    kr_loop_release(&L);
    return status;
}
