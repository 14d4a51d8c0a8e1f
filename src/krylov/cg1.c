/* cg1.c - preconditioned conjugate gradients with one reduction an
 * iteration (Chronopoulos & Gear, J. Comput. Appl. Math. 25, 1989; the
 * preconditioned form as in Ghysels & Vanroose, Parallel Comput. 40, 2014,
 * Alg. 2): s = A p is carried by its own recurrence, so the three inner
 * products of an iteration (r.u, w.u, r.r) are taken together after the
 * preconditioner and the product, and one sum over the ranks serves them
 * (the distributed engine merges reductions that nothing has read yet:
 * src/dist/engine_mpi.c). In exact arithmetic the iterates are CG's; one
 * engine table, so every engine and loop path runs it.
 *
 * Iteration i, from p, s, u = M r, w = A u, gamma = r.u, delta = w.u:
 *   beta = gamma / gamma_old, alpha = gamma / (delta - beta gamma / alpha_old)
 *   p = u + beta p;  s = w + beta s;  x += alpha p;  r -= alpha s (and r.r)
 *   u = M r (and r.u);  w = A u (and w.u). */
#include <math.h>

#include "krylov_impl.h"
#include "small.h"

/* The slots (small.h's layout from KR_FREE): RR (KR_RR), GAMMA and DELTA
 * are written by the iteration's three dots and are adjacent (one sum over
 * the ranks); the check reads RR .. PAP together. */
enum {
    C1_GAMMA = KR_FREE + GS_CG1_GAMMA,
    C1_DELTA = KR_FREE + GS_CG1_DELTA,
    C1_PAP = KR_FREE + GS_CG1_PAP,
    C1_GAMMA_OLD = KR_FREE + GS_CG1_GAMMA_OLD,
    C1_ALPHA_OLD = KR_FREE + GS_CG1_ALPHA_OLD,
    C1_ALPHA = KR_FREE + GS_CG1_ALPHA,
    C1_BETA = KR_FREE + GS_CG1_BETA,
    C1_LOG = KR_FREE + GS_CG1_END
};

typedef struct cg1_state {
    gs_vec *x, *r, *u, *w, *p, *s;
} cg1_state;

/* p and s (3 each), x and r with r.r (6), w = A u (2). */
double gs_cg1_vector_accesses(const gs_krylov_opts *opts)
{
    (void)opts;
    return 14.0;
}

static const gs_small cg1_step = {GS_SMALL_CG1_STEP, 0, 1, C1_GAMMA, KR_RR};

static int cg1_body(kr_ctx *k, void *state)
{
    cg1_state *s = state;
    gs_engine *e = k->e;
    int status = GS_OK;
    GS_TRY(k->ops->small_run(e, &cg1_step));                              /* alpha, beta */
    GS_TRY(k->ops->axpby(e, gs_coef_const(1), s->u, gs_coef_slot(1, C1_BETA), s->p));
    GS_TRY(k->ops->axpby(e, gs_coef_const(1), s->w, gs_coef_slot(1, C1_BETA), s->s));
    GS_TRY(k->ops->axpy2_dot(e, gs_coef_slot(1, C1_ALPHA), s->p, s->x,   /* x += alpha p */
                             gs_coef_slot(-1, C1_ALPHA), s->s, s->r,      /* r -= alpha s */
                             KR_RR));
    GS_TRY(gs_pc_apply_dot(k->pc, s->r, s->u, C1_GAMMA));                 /* u = M r, r.u */
    GS_TRY(k->ops->spmv_dot(e, k->A, s->u, s->w, NULL, C1_DELTA));         /* w = A u, w.u */
    /* --history logs r.r after the iteration's last dot: the log reads it,
     * which makes its pending sum over the ranks, and there the three dots'
     * one (logged before them, r.r alone would be a second sum) */
    GS_TRY(kr_log(k));
cleanup:
    return status;
}

/* Tested at each check: p'Ap (the first failing step's denominator: the
 * small operation keeps it) before the newest r'Mr, as CG tests them. */
#define CG1_N_TESTS 4
static const kr_test cg1_tests[CG1_N_TESTS] = {
    {{GS_LOOP_FINITE, C1_PAP}, "p'Ap is not finite (A p overflowed or holds NaN)"},
    {{GS_LOOP_POSITIVE, C1_PAP}, "p'Ap <= 0: A is not positive definite (use bicgstab or gmres)"},
    {{GS_LOOP_FINITE, C1_GAMMA}, "r'Mr is not finite (M r overflowed or holds NaN)"},
    {{GS_LOOP_POSITIVE, C1_GAMMA}, "r'Mr <= 0: the preconditioner is not positive definite"},
};

int gs_cg1_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                 const gs_krylov_opts *opts, gs_krylov_result *res)
{
    kr_ctx k;
    cg1_state s = {x, NULL, NULL, NULL, NULL, NULL};
    int status = kr_init(&k, e, A, pc, opts, res), done = 0;
    const int64_t n = gs_vec_length(b);
    GS_TRY(e->ops->vec_create(e, n, &s.r));
    GS_TRY(e->ops->vec_create(e, n, &s.u));
    GS_TRY(e->ops->vec_create(e, n, &s.w));
    GS_TRY(e->ops->vec_create(e, n, &s.p));
    GS_TRY(e->ops->vec_create(e, n, &s.s));
    GS_TRY(kr_initial_residual(&k, b, x, s.r, &done));
    if (done) goto cleanup;
    GS_TRY(gs_pc_apply_dot(pc, s.r, s.u, C1_GAMMA));
    GS_TRY(e->ops->spmv_dot(e, A, s.u, s.w, NULL, C1_DELTA));
    /* p and s start at zero, so the first step's beta (gamma / gamma_old = 1)
     * adds nothing: p = u, s = w */
    GS_TRY(e->ops->set(e, s.p, 0.0));
    GS_TRY(e->ops->set(e, s.s, 0.0));
    {
        double v[2];
        GS_TRY(e->ops->scalar_read(e, C1_GAMMA, 1, v));
        const char *broke = kr_test_failed(cg1_tests + 2, 2, v, C1_GAMMA);
        if (broke) { /* r0 is above tol here (kr_initial_residual) */
            kr_breakdown(&k, 0, broke);
            goto cleanup;
        }
    }
    /* alpha_old = inf makes the first step's beta gamma / alpha_old vanish;
     * p'Ap = 1 says no step has failed yet */
    GS_TRY(e->ops->scalar_set(e, C1_ALPHA_OLD, gs_coef_const(INFINITY)));
    GS_TRY(e->ops->scalar_set(e, C1_GAMMA_OLD, gs_coef_slot(1, C1_GAMMA)));
    GS_TRY(e->ops->scalar_set(e, C1_PAP, gs_coef_const(1.0)));
    long it = 0;
    int finished = 0;
    GS_TRY(kr_log_begin(&k, C1_LOG));
    GS_TRY(kr_device_loop(&k, 0, kr_loop_per_body(&k), cg1_body, &s, cg1_tests, CG1_N_TESTS,
                          NULL, 0, &it, &finished));
    while (!finished && it < opts->maxit) {
        const long nb = kr_next_block(&k, it);
        for (long i = 0; i < nb; i++) GS_TRY(kr_run_iteration(&k, cg1_body, &s, 0));
        it += nb;
        double rv[C1_PAP - KR_RR + 1];
        GS_TRY(kr_check_read(&k, C1_PAP - KR_RR + 1, rv)); /* rr, gamma, delta, pap */
        if (kr_check_breakdown(&k, it, rv[0], kr_test_failed(cg1_tests, CG1_N_TESTS, rv, KR_RR)))
            break;
    }
cleanup:
    res->spmv_count = res->iterations + 2;
    res->pc_apply_count = res->iterations + 1;
    kr_finish(&k);
    e->ops->vec_destroy(e, s.r);
    e->ops->vec_destroy(e, s.u);
    e->ops->vec_destroy(e, s.w);
    e->ops->vec_destroy(e, s.p);
    e->ops->vec_destroy(e, s.s);
    return status;
}
