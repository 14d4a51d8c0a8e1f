/* check_krylov.c - the Krylov methods on the CPU engine: convergence on SPD
 * and nonsymmetric problems (generated and real), the stopping rule, the
 * reasons (maxit, breakdown, time limit, NaN) and that a verdict of
 * convergence holds for the true residual on singular and tiny systems. */
#include <math.h>

#include "engine.h"
#include "gen.h"
#include "krylov.h"
#include "mmio.h"
#include "precond.h"
#include "testutil.h"
#include "timer.h"

typedef struct solve_out {
    gs_krylov_result res;
    double true_rel; /* ||b - A x|| / ||b|| on the host */
    double *x;
} solve_out;

/* Solve A x = b (b = A * ones unless b given) with method / precond on the
 * CPU engine (tu_solve_x), keeping x. */
static void solve(const gs_csr *A, const double *b_in, const char *method, const char *precond,
                  const gs_krylov_opts *opts, solve_out *out)
{
    gs_error err = {0};
    gs_engine *e = NULL;
    tu_solve_out o;
    ck_assert_int_eq(gs_engine_cpu_create(&e, &err), GS_OK);
    out->x = malloc((size_t)A->n_rows * sizeof(double) + 1); /* + 1: never malloc(0) */
    tu_solve_x(e, A, b_in, method, precond, opts, &o, out->x);
    out->res = o.res;
    out->true_rel = o.true_rel;
    gs_engine_destroy(e);
}

static gs_krylov_opts default_opts(void)
{
    gs_krylov_opts o = {.tol = 1e-8, .maxit = 5000, .restart = 30, .idr_s = 4,
                        .check_every = 1, .record_history = 0, .use_capture = 1};
    return o;
}

static void generated(const char *spec, gs_csr *A)
{
    gs_error err = {0};
    char name[64];
    ck_assert_msg(gs_generate(spec, A, name, sizeof name, &err) == GS_OK, "%s", err.msg);
}

/* The recurrence's residual may drift from the true one by rounding: a
 * factor 10 over tol (1e-8) leaves room for that on these well-scaled
 * problems while still failing any wrong update. */
static void assert_converged(const solve_out *o, double tol, const char *what)
{
    ck_assert_msg(o->res.reason == GS_REASON_CONVERGED, "%s: reason %s after %ld its", what,
                  gs_reason_name(o->res.reason), o->res.iterations);
    ck_assert_msg(o->res.rel_residual <= tol, "%s: rel residual %g", what, o->res.rel_residual);
    ck_assert_msg(o->true_rel <= 10 * tol, "%s: true residual %g", what, o->true_rel);
}

static const char *methods[] = {"cg", "bicgstab", "gmres", "idr"};
static const char *precs[] = {"none", "jacobi"};

START_TEST(every_method_converges_on_spd_poisson)
{
    gs_csr A;
    generated("poisson3d:10x9x8", &A);
    gs_krylov_opts o = default_opts();
    solve_out out;
    const char *m = methods[_i / 2], *p = precs[_i % 2];
    solve(&A, NULL, m, p, &o, &out);
    char what[64];
    snprintf(what, sizeof what, "%s+%s", m, p);
    assert_converged(&out, o.tol, what);
    /* b = A 1 so the solution is 1: the error is bounded by cond * residual */
    for (int32_t i = 0; i < A.n_rows; i++) ck_assert_double_eq_tol(out.x[i], 1.0, 1e-5);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(nonsymmetric_methods_converge_on_convdiff)
{
    gs_csr A;
    generated("convdiff3d:9", &A);
    ck_assert(!gs_csr_is_symmetric(&A, 1e-12));
    gs_krylov_opts o = default_opts();
    solve_out out;
    const char *m = methods[1 + _i / 2], *p = precs[_i % 2]; /* not cg */
    solve(&A, NULL, m, p, &o, &out);
    assert_converged(&out, o.tol, m);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(jacobi_helps_on_badly_scaled_spd)
{
    /* D A D with a wildly varying D: jacobi undoes the scaling exactly. */
    gs_csr A;
    generated("poisson3d:8", &A);
    double *s = malloc((size_t)A.n_rows * sizeof(double));
    tu_rng rng = tu_rng_seed(7);
    for (int32_t i = 0; i < A.n_rows; i++) s[i] = pow(10.0, 3.0 * tu_uniform(&rng));
    gs_csr_scale_symmetric(&A, s);
    gs_krylov_opts o = default_opts();
    solve_out none, jac;
    solve(&A, NULL, "cg", "none", &o, &none);
    solve(&A, NULL, "cg", "jacobi", &o, &jac);
    assert_converged(&jac, o.tol, "cg+jacobi");
    ck_assert_msg(jac.res.iterations < none.res.iterations, "jacobi %ld, none %ld",
                  jac.res.iterations, none.res.iterations);
    gs_krylov_result_free(&none.res);
    gs_krylov_result_free(&jac.res);
    free(none.x);
    free(jac.x);
    free(s);
    gs_csr_free(&A);
}
END_TEST

static int read_real(const char *name, gs_csr *A)
{
    if (!tu_matrices_dir()) return 0;
    char path[1024];
    tu_matrix_path(path, sizeof path, name);
    gs_error err = {0};
    ck_assert_msg(gs_mm_read_csr(path, A, NULL, &err) == GS_OK, "%s", err.msg);
    return 1;
}

START_TEST(methods_converge_on_real_spd_matrix)
{
    gs_csr A;
    if (!read_real("bcsstk14", &A)) {
        fprintf(stderr, "skipped: ../shared/matrices not found\n");
        return;
    }
    gs_krylov_opts o = default_opts();
    o.maxit = 20000;
    solve_out out;
    solve(&A, NULL, methods[_i], "jacobi", &o, &out);
    assert_converged(&out, o.tol, methods[_i]);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(methods_converge_on_real_nonsymmetric_matrix)
{
    gs_csr A;
    if (!read_real("orsirr_1", &A)) {
        fprintf(stderr, "skipped: ../shared/matrices not found\n");
        return;
    }
    ck_assert(!gs_csr_is_symmetric(&A, 1e-12));
    gs_krylov_opts o = default_opts();
    o.maxit = 20000;
    solve_out out;
    solve(&A, NULL, methods[1 + _i], "jacobi", &o, &out);
    assert_converged(&out, o.tol, methods[1 + _i]);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

/* diag(1, -1, 1, -1, ...) with b = 1: p'Ap = 0 at the first step. */
static void indefinite_diagonal(int32_t n, gs_csr *A)
{
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_alloc(n, n, n, 1, A, &err), GS_OK);
    for (int32_t i = 0; i < n; i++) {
        A->row_ptr[i + 1] = i + 1;
        A->col[i] = i;
        A->val[i] = i % 2 ? -1.0 : 1.0;
    }
}

/* cg and cg1 (whose verdicts are cg's) */
static const char *cgs[] = {"cg", "cg1"};

START_TEST(cg_reports_indefinite_matrix_as_breakdown)
{
    gs_csr A;
    indefinite_diagonal(40, &A);
    double *b = malloc(40 * sizeof(double));
    for (int i = 0; i < 40; i++) b[i] = 1.0;
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, cgs[_i], "none", &o, &out);
    ck_assert_int_eq(out.res.reason, GS_REASON_BREAKDOWN);
    ck_assert_int_eq(out.res.breakdown_iteration, 1);
    ck_assert_ptr_nonnull(strstr(out.res.breakdown, "not positive definite"));
    gs_krylov_result_free(&out.res);
    free(out.x);
    free(b);
    gs_csr_free(&A);
}
END_TEST

/* cg1 (Chronopoulos-Gear) against cg: the same iterates in exact
 * arithmetic, so the same verdict and iteration counts within rounding's
 * few (2 or 5%), x = 1 to the same accuracy. Cases: poisson with none,
 * jacobi and fsai; a badly scaled SPD matrix with jacobi; bcsstk14. */
START_TEST(cg1_matches_cg)
{
    static const char *pc[] = {"none", "jacobi", "fsai", "jacobi", "jacobi"};
    gs_csr A;
    if (_i == 4) {
        if (!read_real("bcsstk14", &A)) {
            fprintf(stderr, "skipped: ../shared/matrices not found\n");
            return;
        }
    } else {
        generated("poisson3d:10x9x8", &A);
    }
    if (_i == 3) { /* D A D, D from 1 to 1e3 */
        double *s = malloc((size_t)A.n_rows * sizeof(double));
        tu_rng rng = tu_rng_seed(11);
        for (int32_t i = 0; i < A.n_rows; i++) s[i] = pow(10.0, 3.0 * tu_uniform(&rng));
        gs_csr_scale_symmetric(&A, s);
        free(s);
    }
    gs_krylov_opts o = default_opts();
    o.maxit = 20000;
    o.check_every = 0; /* adaptive: cg1's checks read its slots as cg's do */
    solve_out cg, cg1;
    solve(&A, NULL, "cg", pc[_i], &o, &cg);
    solve(&A, NULL, "cg1", pc[_i], &o, &cg1);
    char what[64];
    snprintf(what, sizeof what, "cg1+%s case %d", pc[_i], _i);
    assert_converged(&cg, o.tol, "cg");
    assert_converged(&cg1, o.tol, what);
    const long a = cg.res.iterations, b = cg1.res.iterations, d = a > b ? a - b : b - a;
    ck_assert_msg(d <= 2 + a / 20, "%s: %ld iterations, cg %ld", what, b, a);
    /* x = 1 as closely as cg's (the scaled case's error is cond-bound) */
    double e_cg = 0.0, e_cg1 = 0.0;
    for (int32_t i = 0; _i != 4 && i < A.n_rows; i++) {
        e_cg = fmax(e_cg, fabs(cg.x[i] - 1.0));
        e_cg1 = fmax(e_cg1, fabs(cg1.x[i] - 1.0));
    }
    ck_assert_msg(e_cg1 <= fmax(1e-5, 4.0 * e_cg), "%s: |x - 1| %g, cg's %g", what, e_cg1, e_cg);
    gs_krylov_result_free(&cg.res);
    gs_krylov_result_free(&cg1.res);
    free(cg.x);
    free(cg1.x);
    gs_csr_free(&A);
}
END_TEST

/* cg1's history has a row for every iteration whatever the checks. */
START_TEST(cg1_history_has_every_iteration)
{
    gs_csr A;
    gs_krylov_opts o = default_opts();
    solve_out out;
    generated("poisson3d:9", &A);
    o.record_history = 1;
    o.check_every = 5;
    solve(&A, NULL, "cg1", "jacobi", &o, &out);
    assert_converged(&out, o.tol, "cg1 history");
    ck_assert_int_eq(out.res.history.len, out.res.iterations + 1);
    for (long i = 0; i < out.res.history.len; i++)
        ck_assert_int_eq(out.res.history.iteration[i], i);
    ck_assert_double_eq(out.res.history.rel[out.res.history.len - 1], out.res.rel_residual);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(cg_breakdown_on_real_indefinite_matrix)
{
    /* A symmetric indefinite matrix (negative diagonal entries among positive
     * ones): CG must stop with a breakdown (p'Ap <= 0 at some step) rather
     * than run silently to maxit. */
    gs_csr A;
    if (!read_real("reorientation_1", &A)) {
        fprintf(stderr, "skipped: ../shared/matrices not found\n");
        return;
    }
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, NULL, cgs[_i], "none", &o, &out);
    ck_assert_msg(out.res.reason == GS_REASON_BREAKDOWN, "reason %s",
                  gs_reason_name(out.res.reason));
    ck_assert(out.res.breakdown_iteration >= 1 && out.res.breakdown_iteration < o.maxit);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(bicgstab_reports_rho_breakdown)
{
    /* A = [0 1; 1 0], b = e1: r0 = e1, v = A r0 = e2, r0'v = 0. */
    gs_csr A;
    gs_error err = {0};
    int32_t rows[] = {0, 1}, cols[] = {1, 0};
    double vals[] = {1.0, 1.0}, b[] = {1.0, 0.0};
    ck_assert_int_eq(gs_csr_from_coo(2, 2, 2, rows, cols, vals, &A, &err), GS_OK);
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, "bicgstab", "none", &o, &out);
    ck_assert_int_eq(out.res.reason, GS_REASON_BREAKDOWN);
    ck_assert_int_eq(out.res.breakdown_iteration, 1);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(maxit_is_a_reason_not_an_error)
{
    gs_csr A;
    generated("poisson3d:10", &A);
    gs_krylov_opts o = default_opts();
    o.maxit = 3;
    solve_out out;
    solve(&A, NULL, methods[_i], "jacobi", &o, &out);
    ck_assert_int_eq(out.res.reason, GS_REASON_MAXIT);
    ck_assert_int_eq(out.res.iterations, 3);
    ck_assert(out.res.rel_residual > o.tol);
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(zero_rhs_gives_zero_solution)
{
    gs_csr A;
    generated("poisson3d:5", &A);
    double *b = calloc((size_t)A.n_rows, sizeof(double));
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, methods[_i], "jacobi", &o, &out);
    ck_assert_int_eq(out.res.reason, GS_REASON_CONVERGED);
    ck_assert_int_eq(out.res.iterations, 0);
    for (int32_t i = 0; i < A.n_rows; i++) ck_assert(out.x[i] == 0.0);
    gs_krylov_result_free(&out.res);
    free(out.x);
    free(b);
    gs_csr_free(&A);
}
END_TEST

START_TEST(check_every_and_history)
{
    /* Reading the residual every 4 iterations converges too; iterations are
     * then a multiple of 4 and at least the count of a per-iteration check. */
    gs_csr A;
    generated("poisson3d:9", &A);
    gs_krylov_opts o = default_opts();
    o.record_history = 1;
    solve_out every1, every4;
    solve(&A, NULL, "cg", "jacobi", &o, &every1);
    o.check_every = 4;
    solve(&A, NULL, "cg", "jacobi", &o, &every4);
    assert_converged(&every4, o.tol, "check every 4");
    ck_assert_int_eq(every4.res.iterations % 4, 0);
    ck_assert(every4.res.iterations >= every1.res.iterations);
    ck_assert(every4.res.iterations < every1.res.iterations + 4);
    /* one history entry per check, the initial residual included; CG's
     * residual is not monotone, but the last entry is the final one */
    ck_assert_int_eq(every1.res.history.len, every1.res.iterations + 1);
    ck_assert_double_eq(every1.res.history.rel[0], 1.0); /* x0 = 0: r0 = b */
    ck_assert_double_eq(every1.res.history.rel[every1.res.history.len - 1], every1.res.rel_residual);
    gs_krylov_result_free(&every1.res);
    gs_krylov_result_free(&every4.res);
    free(every1.x);
    free(every4.x);
    gs_csr_free(&A);
}
END_TEST

/* --history has a row for every iteration whatever the checks: with a
 * check every iteration, every 5 or adaptive (0), the entries are
 * iterations 0, 1, ..., N, their residuals those of the check-every-1 run
 * (the same arithmetic on the CPU engine: a check reads, it changes
 * nothing), the initial one flagged as a true residual, the rows between
 * checks as interpolated in time, the times non-decreasing. */
START_TEST(history_has_every_iteration)
{
    static const char *spec[] = {"poisson3d:9", "convdiff3d:8"};
    const char *m = methods[_i];
    gs_csr A;
    generated(spec[strcmp(m, "cg") != 0], &A);
    gs_krylov_opts o = default_opts();
    o.record_history = 1;
    solve_out every[3];
    static const int check[3] = {1, 5, 0};
    for (int c = 0; c < 3; c++) {
        o.check_every = check[c];
        solve(&A, NULL, m, "jacobi", &o, &every[c]);
        const gs_krylov_result *r = &every[c].res;
        const gs_krylov_history *h = &r->history;
        ck_assert_msg(r->reason == GS_REASON_CONVERGED, "%s check %d: %s", m, check[c],
                      gs_reason_name(r->reason));
        ck_assert_msg(h->len == r->iterations + 1, "%s check %d: %ld rows, %ld iterations", m,
                      check[c], h->len, r->iterations);
        ck_assert(h->flags[0] & GS_HISTORY_TRUE);
        ck_assert(!(h->flags[h->len - 1] & GS_HISTORY_INTERPOLATED)); /* a check */
        ck_assert_double_eq(h->rel[h->len - 1], r->rel_residual);
        long interpolated = 0;
        for (long i = 0; i < h->len; i++) {
            ck_assert_int_eq(h->iteration[i], i);
            interpolated += (h->flags[i] & GS_HISTORY_INTERPOLATED) != 0;
            if (i > 0) ck_assert_double_ge(h->seconds[i], h->seconds[i - 1]);
            const long common = every[0].res.history.len;
            if (c > 0 && i < common)
                ck_assert_msg(h->rel[i] == every[0].res.history.rel[i],
                              "%s check %d, iteration %ld: %.17g, every iteration %.17g", m,
                              check[c], i, h->rel[i], every[0].res.history.rel[i]);
        }
        /* cg and bicgstab log the iterations between their checks; gmres
         * and idr check every step */
        const int logs = strcmp(m, "cg") == 0 || strcmp(m, "bicgstab") == 0;
        ck_assert_msg((interpolated > 0) == (logs && check[c] != 1), "%s check %d: %ld "
                      "interpolated", m, check[c], interpolated);
    }
    for (int c = 0; c < 3; c++) {
        gs_krylov_result_free(&every[c].res);
        free(every[c].x);
    }
    gs_csr_free(&A);
}
END_TEST

/* A residual gap a restart closes (tu_perturb: the recurrence starts from
 * r0 + delta, ||delta|| = 1e-5 ||b||, so it converges to A x = b + delta):
 * without replacements cg, bicgstab and idr say converged with the true
 * residual near 1e-5, a gap; with them, one replacement (r = b - A x, the
 * recurrence restarted) reaches the true tolerance, and the history counts
 * on: one row an iteration, the replacement's row a true residual near
 * 1e-5. gmres confirms its claims with b - A x and restarts from it
 * itself: converged with no replacement. */
START_TEST(replacement_closes_a_constructed_gap)
{
    const char *m = methods[_i];
    gs_csr A;
    generated(strcmp(m, "cg") == 0 ? "poisson3d:9" : "convdiff3d:8", &A);
    const int32_t n = A.n_rows;
    double *b = malloc((size_t)n * sizeof(double)), *ones = malloc((size_t)n * sizeof(double));
    double *delta = calloc((size_t)n, sizeof(double));
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(&A, ones, b);
    double bb = 0;
    for (int32_t i = 0; i < n; i++) bb += b[i] * b[i];
    delta[n / 2] = 1e-5 * sqrt(bb);
    gs_error err = {0};
    gs_engine *e = NULL;
    ck_assert_int_eq(gs_engine_cpu_create(&e, &err), GS_OK);
    gs_krylov_opts o = default_opts();
    o.check_every = 0;
    o.record_history = 1;
    tu_solve_out without, with;
    o.replacements = 0;
    tu_solve_full(e, &A, b, m, "jacobi", &o, &without, NULL, 1, delta);
    o.replacements = 3;
    tu_solve_full(e, &A, b, m, "jacobi", &o, &with, NULL, 1, delta);
    const int gmres = strcmp(m, "gmres") == 0;
    ck_assert_msg(with.res.reason == GS_REASON_CONVERGED, "%s: %s", m,
                  gs_reason_name(with.res.reason));
    ck_assert_msg(with.true_rel <= GS_TRUE_RESIDUAL_FACTOR * o.tol, "%s: true %g", m,
                  with.true_rel);
    ck_assert_int_eq(with.res.replacements, gmres ? 0 : 1);
    const gs_krylov_history *h = &with.res.history;
    ck_assert_int_eq(h->len, with.res.iterations + 1);
    for (long i = 0; i < h->len; i++) ck_assert_int_eq(h->iteration[i], i);
    if (!gmres) {
        ck_assert_msg(without.res.reason == GS_REASON_CONVERGED && without.true_rel > 1e-6,
                      "%s: no gap constructed: %s, true %g", m,
                      gs_reason_name(without.res.reason), without.true_rel);
        ck_assert_int_eq(without.res.replacements, 0);
        /* the method's first solve, then the replacement at its last iteration */
        const long at = without.res.iterations;
        ck_assert(with.res.iterations > at);
        ck_assert(h->flags[at] & GS_HISTORY_TRUE);
        ck_assert_msg(h->rel[at] > 1e-6 && h->rel[at] < 1e-4, "%s: replaced at %g", m,
                      h->rel[at]);
        ck_assert(fabs(with.res.engine_true_rel - with.true_rel) <= 1e-3 * o.tol);
    }
    gs_krylov_result_free(&without.res);
    gs_krylov_result_free(&with.res);
    gs_engine_destroy(e);
    free(b), free(ones), free(delta);
    gs_csr_free(&A);
}
END_TEST

START_TEST(adaptive_checks_stop_soon_after_convergence)
{
    /* check_every = 0 reads the residual at predicted points: it never stops
     * before the per-iteration check would, and at most KR_AUTO_MAX (16)
     * iterations after it; the answer is as accurate. */
    static const char *spec[] = {"poisson3d:12", "convdiff3d:12"};
    static const char *meth[] = {"cg", "bicgstab"};
    gs_csr A;
    generated(spec[_i], &A);
    gs_krylov_opts o = default_opts();
    solve_out exact, adaptive;
    solve(&A, NULL, meth[_i], "jacobi", &o, &exact);
    o.check_every = 0;
    solve(&A, NULL, meth[_i], "jacobi", &o, &adaptive);
    assert_converged(&adaptive, o.tol, meth[_i]);
    ck_assert_int_ge(adaptive.res.iterations, exact.res.iterations);
    ck_assert_int_le(adaptive.res.iterations, exact.res.iterations + 16);
    gs_krylov_result_free(&exact.res);
    gs_krylov_result_free(&adaptive.res);
    free(exact.x);
    free(adaptive.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_restart_lengths)
{
    /* Full GMRES (restart >= iterations) never needs more iterations than a
     * short restart on the same problem; both converge. */
    gs_csr A;
    generated("convdiff3d:7", &A);
    gs_krylov_opts o = default_opts();
    solve_out full, short_m;
    o.restart = 300;
    solve(&A, NULL, "gmres", "jacobi", &o, &full);
    o.restart = 5;
    solve(&A, NULL, "gmres", "jacobi", &o, &short_m);
    assert_converged(&full, o.tol, "gmres(300)");
    assert_converged(&short_m, o.tol, "gmres(5)");
    ck_assert(full.res.iterations <= short_m.res.iterations);
    gs_krylov_result_free(&full.res);
    gs_krylov_result_free(&short_m.res);
    free(full.x);
    free(short_m.x);
    gs_csr_free(&A);
}
END_TEST

START_TEST(idr_s_values)
{
    gs_csr A;
    generated("convdiff3d:7", &A);
    gs_krylov_opts o = default_opts();
    static const int s_values[] = {1, 2, 4, 8};
    o.idr_s = s_values[_i];
    solve_out out;
    solve(&A, NULL, "idr", "jacobi", &o, &out);
    assert_converged(&out, o.tol, "idr");
    gs_krylov_result_free(&out.res);
    free(out.x);
    gs_csr_free(&A);
}
END_TEST

/* ---- trustworthy verdicts (issue 17) ---- */

/* Whatever the reason: converged only where the true residual, computed on
 * the host, is within 10 tol (rounding drift allowance, as above); a
 * breakdown names its iteration and what broke; never a NaN called done. */
static void assert_honest(const solve_out *o, double tol, const char *what)
{
    const gs_krylov_result *r = &o->res;
    if (r->reason == GS_REASON_CONVERGED)
        ck_assert_msg(o->true_rel <= 10 * tol, "%s: converged with true residual %g", what,
                      o->true_rel);
    if (r->reason == GS_REASON_BREAKDOWN) {
        ck_assert_msg(r->breakdown_iteration == r->iterations, "%s: breakdown at %ld of %ld",
                      what, r->breakdown_iteration, r->iterations);
        ck_assert_msg(strlen(r->breakdown) > 0, "%s: breakdown without a text", what);
    }
}

static void solve_free(solve_out *o)
{
    gs_krylov_result_free(&o->res);
    free(o->x);
}

/* A x = b with b = 1 (the CLI's default right-hand side). */
static void solve_ones(const gs_csr *A, const char *method, const gs_krylov_opts *o,
                       solve_out *out)
{
    double *b = malloc((size_t)A->n_rows * sizeof(double));
    for (int32_t i = 0; i < A->n_rows; i++) b[i] = 1.0;
    solve(A, b, method, "none", o, out);
    free(b);
}

/* GMRES on a singular system b is not in the range of: a breakdown at step
 * `at` (the Arnoldi step whose column makes R singular), x the least-squares
 * solution over the steps before it, so the residual left is b's part
 * outside range(A): want_rel of ||b||. */
static void assert_gmres_singular(const gs_csr *A, const double *b, long at, double want_rel)
{
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(A, b, "gmres", "none", &o, &out);
    assert_honest(&out, o.tol, "gmres");
    ck_assert_msg(out.res.reason == GS_REASON_BREAKDOWN, "reason %s",
                  gs_reason_name(out.res.reason));
    ck_assert_int_eq(out.res.breakdown_iteration, at);
    ck_assert_ptr_nonnull(strstr(out.res.breakdown, "singular"));
    ck_assert_double_eq_tol(out.true_rel, want_rel, 1e-12);
    ck_assert_double_eq_tol(out.res.rel_residual, out.true_rel, 1e-12);
    solve_free(&out);
}

static double *ones_vector(int32_t n)
{
    double *b = malloc((size_t)n * sizeof(double));
    for (int32_t i = 0; i < n; i++) b[i] = 1.0;
    return b;
}

START_TEST(gmres_lone_superdiagonal_entry_is_a_breakdown)
{
    /* A = [0 1; 0 0], b = 1: row 2 of b - A x is 1 for every x. Step 1
     * gives x2 = 1; step 2 finds A v_1 in span(A v_0): R(1,1) = 0. */
    int32_t r[] = {0}, c[] = {1};
    double v[] = {1.0}, *b = ones_vector(2);
    gs_csr A = tu_from_triplets(2, 2, 1, r, c, v);
    assert_gmres_singular(&A, b, 2, sqrt(0.5));
    free(b);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_matrix_without_entries_is_a_breakdown)
{
    int32_t none_i[1] = {0};
    double none_v[1] = {0.0}; /* not read: the values array must exist */
    gs_csr A = tu_from_triplets(3, 3, 0, none_i, none_i, none_v);
    double *b = ones_vector(3);
    assert_gmres_singular(&A, b, 1, 1.0); /* A v_0 = 0 */
    free(b);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_neumann_laplacian_with_constant_rhs_is_a_breakdown)
{
    /* b = 1 spans the null space: no progress is possible, the residual
     * stays ||b||. On 4 x 4, v_0 = 1/4 is exact and A v_0 = 0: R(0,0) = 0
     * at step 1. On 6 x 6, v_0 = 1/6 is rounded and A v_0 is rounding
     * noise the Arnoldi process builds on until the estimate claims tol;
     * the true residual refutes it, the update is undone. */
    const int32_t nx = _i ? 6 : 4;
    gs_csr A = tu_neumann_laplacian(nx);
    double *b = ones_vector(A.n_rows);
    if (nx == 4) assert_gmres_singular(&A, b, 1, 1.0);
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, "gmres", "none", &o, &out);
    assert_honest(&out, o.tol, "gmres");
    ck_assert_msg(out.res.reason == GS_REASON_BREAKDOWN, "reason %s",
                  gs_reason_name(out.res.reason));
    ck_assert_ptr_nonnull(strstr(out.res.breakdown, "singular"));
    ck_assert_double_eq_tol(out.true_rel, 1.0, 1e-12);
    ck_assert_double_eq_tol(out.res.rel_residual, 1.0, 1e-12);
    free(b);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_neumann_laplacian_with_point_rhs_is_a_breakdown)
{
    /* b = e_0: its mean (1/n) 1 is out of range(A), so the best residual
     * is ||(1/n) 1|| = 1/sqrt(n); R becomes singular only to rounding
     * (|R(j,j)| ~ 1e-14 ||H(:,j)|| at the 17th step). */
    gs_csr A = tu_neumann_laplacian(6);
    const int32_t n = A.n_rows;
    double *b = calloc((size_t)n, sizeof(double));
    b[0] = 1.0;
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, "gmres", "none", &o, &out);
    assert_honest(&out, o.tol, "gmres");
    ck_assert_msg(out.res.reason == GS_REASON_BREAKDOWN, "reason %s",
                  gs_reason_name(out.res.reason));
    ck_assert(out.res.breakdown_iteration >= 2 && out.res.breakdown_iteration <= n);
    ck_assert_double_eq_tol(out.true_rel, 1.0 / sqrt(n), 1e-9);
    free(b);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_zero_on_the_diagonal_is_a_breakdown)
{
    /* diag(1, 0, 2), b = 1: K_3 is all of R^3, A K_3 only 2-dimensional;
     * b_2 = 1 stays: 1 / sqrt(3) of ||b||. */
    int32_t r[] = {0, 2}, c[] = {0, 2};
    double v[] = {1.0, 2.0}, *b = ones_vector(3);
    gs_csr A = tu_from_triplets(3, 3, 2, r, c, v);
    assert_gmres_singular(&A, b, 3, 1.0 / sqrt(3.0));
    free(b);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_empty_row_is_a_breakdown)
{
    /* [2 1 0; 0 0 0; 0 1 2], b = 1: row 2 of the residual stays 1. */
    int32_t r[] = {0, 0, 2, 2}, c[] = {0, 1, 1, 2};
    double v[] = {2.0, 1.0, 1.0, 2.0}, *b = ones_vector(3);
    gs_csr A = tu_from_triplets(3, 3, 4, r, c, v);
    assert_gmres_singular(&A, b, 2, 1.0 / sqrt(3.0));
    free(b);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_overflowing_solution_is_a_breakdown)
{
    /* A = 1e-310 I, b = 1: x = 1e310 is not a double. Not converged, and x
     * is left finite (the overflowing update is not applied). */
    int32_t r[] = {0, 1, 2};
    double v[] = {1e-310, 1e-310, 1e-310}, *b = ones_vector(3);
    gs_csr A = tu_from_triplets(3, 3, 3, r, r, v);
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, "gmres", "none", &o, &out);
    assert_honest(&out, o.tol, "gmres");
    ck_assert_msg(out.res.reason == GS_REASON_BREAKDOWN, "reason %s",
                  gs_reason_name(out.res.reason));
    ck_assert_int_eq(out.res.breakdown_iteration, 1);
    ck_assert_ptr_nonnull(strstr(out.res.breakdown, "overflow"));
    for (int i = 0; i < 3; i++) ck_assert(isfinite(out.x[i]));
    free(b);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gmres_happy_breakdown_is_convergence)
{
    /* diag(1, 2, 3), b = 1: K_3 holds x, h(3,2) = 0 with R nonsingular:
     * converged at step 3, before the restart length 30. */
    int32_t r[] = {0, 1, 2};
    double v[] = {1.0, 2.0, 3.0}, *b = ones_vector(3);
    gs_csr A = tu_from_triplets(3, 3, 3, r, r, v);
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, "gmres", "none", &o, &out);
    assert_converged(&out, o.tol, "gmres");
    ck_assert_int_eq(out.res.iterations, 3);
    ck_assert_double_eq_tol(out.x[2], 1.0 / 3.0, 1e-12);
    free(b);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

/* tridiag(-1, 4, -1) of order n */
static gs_csr tridiagonal(int32_t n)
{
    int32_t *r = malloc(3 * (size_t)n * sizeof(int32_t));
    int32_t *c = malloc(3 * (size_t)n * sizeof(int32_t));
    double *v = malloc(3 * (size_t)n * sizeof(double));
    int64_t k = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < n) r[k] = i, c[k] = j, v[k++] = i == j ? 4.0 : -1.0;
    gs_csr A = tu_from_triplets(n, n, k, r, c, v);
    free(r), free(c), free(v);
    return A;
}

START_TEST(exact_solution_is_convergence_not_breakdown)
{
    /* n = 3: CG's residual is exactly 0 after 3 steps; with adaptive checks
     * (the CLI default) the next check comes later, p'Ap = 0 there. IDR(4)
     * runs with s = 2. Every method, adaptive and per-step checks. */
    gs_csr A = tridiagonal(3);
    gs_krylov_opts o = default_opts();
    o.check_every = _i / 4 ? 1 : 0;
    solve_out out;
    solve_ones(&A, methods[_i % 4], &o, &out);
    assert_honest(&out, o.tol, methods[_i % 4]);
    assert_converged(&out, o.tol, methods[_i % 4]);
    ck_assert_int_eq(out.res.idr_s, strcmp(methods[_i % 4], "idr") == 0 ? 2 : 0);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(idr_s_is_capped_below_n)
{
    /* s = max(1, min(s, n - 1)), recorded in the result; it converges. */
    static const int32_t n[] = {1, 2, 3, 5, 9};
    gs_csr A = tridiagonal(n[_i]);
    gs_krylov_opts o = default_opts();
    o.idr_s = 4;
    solve_out out;
    solve_ones(&A, "idr", &o, &out);
    const int want = n[_i] <= 2 ? 1 : n[_i] - 1 < 4 ? n[_i] - 1 : 4;
    ck_assert_int_eq(out.res.idr_s, want);
    assert_converged(&out, o.tol, "idr");
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(past_deadline_stops_with_time_limit)
{
    gs_csr A;
    generated("poisson3d:10", &A);
    gs_krylov_opts o = default_opts();
    o.check_every = _i / 4 ? 1 : 0;
    o.deadline = gs_now() - 1.0;
    solve_out out;
    solve(&A, NULL, methods[_i % 4], "jacobi", &o, &out);
    ck_assert_msg(out.res.reason == GS_REASON_TIME_LIMIT, "%s: reason %s", methods[_i % 4],
                  gs_reason_name(out.res.reason));
    ck_assert_int_le(out.res.iterations, 1);
    ck_assert(out.res.rel_residual > o.tol);
    ck_assert_str_eq(gs_reason_name(GS_REASON_TIME_LIMIT), "time limit");
    solve_free(&out);
    o.deadline = gs_now() + 3600.0; /* a deadline not reached changes nothing */
    solve(&A, NULL, methods[_i % 4], "jacobi", &o, &out);
    assert_converged(&out, o.tol, methods[_i % 4]);
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(residual_gap_has_a_name)
{
    ck_assert_str_eq(gs_reason_name(GS_REASON_RESIDUAL_GAP), "residual gap");
}
END_TEST

START_TEST(overflowing_products_are_never_convergence)
{
    /* A = 1e200 I, b = 1e60 (x = 1e-140): p'Ap = 4e320 overflows while
     * every vector stays finite. CG's alpha = rho / Inf was taken as 0 and
     * it ran frozen to maxit; it is a breakdown at the first check. */
    int32_t r[] = {0, 1, 2, 3};
    double v[] = {1e200, 1e200, 1e200, 1e200}, b[] = {1e60, 1e60, 1e60, 1e60};
    gs_csr A = tu_from_triplets(4, 4, 4, r, r, v);
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, methods[_i], "none", &o, &out);
    assert_honest(&out, o.tol, methods[_i]);
    ck_assert_msg(out.res.iterations < 10, "%s: %ld iterations, reason %s", methods[_i],
                  out.res.iterations, gs_reason_name(out.res.reason));
    if (_i == 0) {
        ck_assert_int_eq(out.res.reason, GS_REASON_BREAKDOWN);
        ck_assert_int_eq(out.res.breakdown_iteration, 1);
        ck_assert_ptr_nonnull(strstr(out.res.breakdown, "not finite"));
    }
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

START_TEST(non_finite_rhs_is_nan_never_converged)
{
    gs_csr A = tridiagonal(5);
    double b[] = {1.0, NAN, 1.0, 1.0, 1.0};
    if (_i >= 4) b[1] = INFINITY;
    gs_krylov_opts o = default_opts();
    solve_out out;
    solve(&A, b, methods[_i % 4], "none", &o, &out);
    ck_assert_msg(out.res.reason == GS_REASON_NAN, "%s: reason %s", methods[_i % 4],
                  gs_reason_name(out.res.reason));
    solve_free(&out);
    gs_csr_free(&A);
}
END_TEST

Suite *krylov_suite(void)
{
    Suite *s = suite_create("krylov");
    TCase *tc = tcase_create("methods");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, every_method_converges_on_spd_poisson, 0, 8);
    tcase_add_loop_test(tc, nonsymmetric_methods_converge_on_convdiff, 0, 6);
    tcase_add_test(tc, jacobi_helps_on_badly_scaled_spd);
    tcase_add_loop_test(tc, methods_converge_on_real_spd_matrix, 0, 4);
    tcase_add_loop_test(tc, methods_converge_on_real_nonsymmetric_matrix, 0, 3);
    tcase_add_loop_test(tc, cg_reports_indefinite_matrix_as_breakdown, 0, 2);
    tcase_add_loop_test(tc, cg_breakdown_on_real_indefinite_matrix, 0, 2);
    tcase_add_loop_test(tc, cg1_matches_cg, 0, 5);
    tcase_add_test(tc, cg1_history_has_every_iteration);
    tcase_add_test(tc, bicgstab_reports_rho_breakdown);
    tcase_add_loop_test(tc, maxit_is_a_reason_not_an_error, 0, 4);
    tcase_add_loop_test(tc, zero_rhs_gives_zero_solution, 0, 4);
    tcase_add_test(tc, check_every_and_history);
    tcase_add_loop_test(tc, history_has_every_iteration, 0, 4);
    tcase_add_loop_test(tc, replacement_closes_a_constructed_gap, 0, 4);
    tcase_add_loop_test(tc, adaptive_checks_stop_soon_after_convergence, 0, 2);
    tcase_add_test(tc, gmres_restart_lengths);
    tcase_add_loop_test(tc, idr_s_values, 0, 4);
    suite_add_tcase(s, tc);
    TCase *tv = tcase_create("verdicts");
    tcase_set_timeout(tv, 300);
    tcase_add_test(tv, gmres_lone_superdiagonal_entry_is_a_breakdown);
    tcase_add_test(tv, gmres_matrix_without_entries_is_a_breakdown);
    tcase_add_loop_test(tv, gmres_neumann_laplacian_with_constant_rhs_is_a_breakdown, 0, 2);
    tcase_add_test(tv, gmres_neumann_laplacian_with_point_rhs_is_a_breakdown);
    tcase_add_test(tv, gmres_zero_on_the_diagonal_is_a_breakdown);
    tcase_add_test(tv, gmres_empty_row_is_a_breakdown);
    tcase_add_test(tv, gmres_overflowing_solution_is_a_breakdown);
    tcase_add_test(tv, gmres_happy_breakdown_is_convergence);
    tcase_add_loop_test(tv, exact_solution_is_convergence_not_breakdown, 0, 8);
    tcase_add_loop_test(tv, idr_s_is_capped_below_n, 0, 5);
    tcase_add_loop_test(tv, past_deadline_stops_with_time_limit, 0, 8);
    tcase_add_test(tv, residual_gap_has_a_name);
    tcase_add_loop_test(tv, overflowing_products_are_never_convergence, 0, 4);
    tcase_add_loop_test(tv, non_finite_rhs_is_nan_never_converged, 0, 8);
    suite_add_tcase(s, tv);
    return s;
}

int main(void) { return tu_run_suite(krylov_suite()); }
