/* bicgstab.c - BiCGSTAB with right preconditioning (van der Vorst, SIAM J.
 * Sci. Stat. Comput. 13(2) 1992; Saad, Alg. 7.7 with M applied on the
 * right), written once over the engine table. One iteration = one full
 * step (two spmv, two applies of M). */
#include <math.h>
#include <string.h>

#include "krylov_impl.h"

/* RR .. TT are read together at each check: keep them adjacent. */
enum { BI_RHO = KR_FREE, BI_R0V, BI_TS, BI_TT, BI_ALPHA, BI_OMEGA, BI_RHO_OLD, BI_LOG };

typedef struct bicgstab_state {
    gs_vec *x, *r, *r0, *p, *v, *phat, *shat, *t;
} bicgstab_state;

/* Vector accesses of one step outside A and M: v = A phat with r0.v (3),
 * s = r - alpha v with s.s (3), t = A shat with t.s (3), t.t (1),
 * x += alpha phat + omega shat (4), r = s - omega t (3), r0.r (2),
 * p = r + beta (p - omega v) (4). */
double gs_bicgstab_vector_accesses(const gs_krylov_opts *opts)
{
    (void)opts;
    return 23.0;
}

/* One step (counted above); r holds s in between. */
static int bicgstab_body(kr_ctx *k, void *state)
{
    bicgstab_state *s = state;
    gs_engine *e = k->e;
    const gs_engine_ops *o = k->ops;
    const gs_coef one = gs_coef_const(1);
    int status = GS_OK;
    GS_TRY(gs_pc_apply_dot(k->pc, s->p, s->phat, GS_SLOT_NONE));           /* phat = M p */
    GS_TRY(o->spmv_dot(e, k->A, s->phat, s->v, s->r0, BI_R0V));           /* v = A phat  */
    GS_TRY(o->scalar_set(e, BI_ALPHA, gs_coef_ratio(1, BI_RHO, BI_R0V))); /* alpha       */
    GS_TRY(o->axpby_dot(e, gs_coef_slot(-1, BI_ALPHA), s->v, one, s->r,   /* s = r - a v */
                        NULL, KR_RR));
    GS_TRY(gs_pc_apply_dot(k->pc, s->r, s->shat, GS_SLOT_NONE));          /* shat = M s  */
    GS_TRY(o->spmv_dot(e, k->A, s->shat, s->t, s->r, BI_TS));             /* t = A shat  */
    GS_TRY(o->dot(e, s->t, s->t, BI_TT));
    GS_TRY(o->scalar_set(e, BI_OMEGA, gs_coef_ratio(1, BI_TS, BI_TT)));   /* omega       */
    GS_TRY(o->axpbypcz(e, gs_coef_slot(1, BI_ALPHA), s->phat,             /* x += ...    */
                       gs_coef_slot(1, BI_OMEGA), s->shat, one, s->x));
    GS_TRY(o->axpby_dot(e, gs_coef_slot(-1, BI_OMEGA), s->t, one, s->r,   /* r = s - w t */
                        NULL, KR_RR));
    GS_TRY(o->scalar_set(e, BI_RHO_OLD, gs_coef_slot(1, BI_RHO)));
    GS_TRY(o->dot(e, s->r0, s->r, BI_RHO));
    GS_TRY(kr_log(k)); /* --history: after r0.r, so that r.r's sum is r0.r's (one, not two) */
    /* p = r + beta p - beta omega v, beta = (rho / rho_old) (alpha / omega) */
    GS_TRY(o->axpbypcz(e, one, s->r, gs_coef_full(-1, BI_RHO, BI_ALPHA, BI_RHO_OLD, -1), s->v,
                       gs_coef_full(1, BI_RHO, BI_ALPHA, BI_RHO_OLD, BI_OMEGA), s->p));
cleanup:
    return status;
}

/* The breakdowns, in the order they are tested, on the scalars of the
 * step just done. Only looked at when the residual is above tol
 * (kr_check_breakdown). */
#define BI_NOT_FINITE "rho, r0'v, t's or t't is not finite (overflow or NaN)"
#define BI_OMEGA_ZERO "omega = 0 (t's = 0 or t't = 0)"
static const kr_test bicgstab_tests[] = {
    {{GS_LOOP_FINITE, BI_RHO}, BI_NOT_FINITE},
    {{GS_LOOP_FINITE, BI_R0V}, BI_NOT_FINITE},
    {{GS_LOOP_FINITE, BI_TS}, BI_NOT_FINITE},
    {{GS_LOOP_FINITE, BI_TT}, BI_NOT_FINITE},
    {{GS_LOOP_NONZERO, BI_R0V}, "r0'v = 0 (alpha undefined)"},
    {{GS_LOOP_NONZERO, BI_TT}, BI_OMEGA_ZERO},
    {{GS_LOOP_NONZERO, BI_TS}, BI_OMEGA_ZERO},
    {{GS_LOOP_NONZERO, BI_RHO}, "rho = r0'r = 0"},
};
#define BI_N_TESTS ((int)(sizeof bicgstab_tests / sizeof bicgstab_tests[0]))

/* The whole solve in one kernel where M is pointwise, a product of sparse
 * matrices (gs_pc.product) or given by triangular factors (gs_pc.factor)
 * and the engine can (cuda/engine/fused.cu): from the state the host loop
 * starts from. */
static int bicgstab_fused(kr_ctx *k, bicgstab_state *s, int *finished)
{
    *finished = 0;
    gs_fused f;
    if (!kr_fused_begin(k, GS_FUSED_BICGSTAB, &f)) return GS_OK;
    if (f.nprod > 0 || f.factor[0]) {
        f.phat = s->phat;
        f.shat = s->shat;
    }
    f.x = s->x;
    f.r = s->r;
    f.p = s->p;
    f.r0 = s->r0;
    f.v = s->v;
    f.t = s->t;
    f.slot_rho = BI_RHO;
    f.slot_r0v = BI_R0V;
    f.slot_ts = BI_TS;
    f.slot_tt = BI_TT;
    return kr_fused(k, &f, bicgstab_tests, BI_N_TESTS, NULL, 0, finished);
}

int gs_bicgstab_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                      const gs_krylov_opts *opts, gs_krylov_result *res)
{
    kr_ctx k;
    bicgstab_state s = {x, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    gs_vec **owned[] = {&s.r, &s.r0, &s.p, &s.v, &s.phat, &s.shat, &s.t};
    const int n_owned = (int)(sizeof owned / sizeof owned[0]);
    int status = kr_init(&k, e, A, pc, opts, res), done = 0;
    for (int i = 0; i < n_owned; i++) GS_TRY(e->ops->vec_create(e, gs_vec_length(b), owned[i]));
    GS_TRY(kr_initial_residual(&k, b, x, s.r, &done));
    if (done) goto cleanup;
    GS_TRY(e->ops->copy(e, s.r, s.r0));
    GS_TRY(e->ops->copy(e, s.r, s.p));
    GS_TRY(e->ops->dot(e, s.r0, s.r, BI_RHO));
    int finished = 0;
    long it = 0;
    GS_TRY(kr_log_begin(&k, BI_LOG));
    GS_TRY(bicgstab_fused(&k, &s, &finished));
    if (!finished)
        GS_TRY(kr_device_loop(&k, 0, kr_loop_per_body(&k), bicgstab_body, &s, bicgstab_tests,
                              BI_N_TESTS, NULL, 0, &it, &finished));
    while (!finished && it < opts->maxit) {
        const long nb = kr_next_block(&k, it);
        for (long i = 0; i < nb; i++) GS_TRY(kr_run_iteration(&k, bicgstab_body, &s, 0));
        it += nb;
        double rv[5]; /* rr, rho, r0'v, t's, t't */
        GS_TRY(kr_check_read(&k, 5, rv)); /* and the log */
        const char *broke = kr_test_failed(bicgstab_tests, BI_N_TESTS, rv, KR_RR);
        if (kr_check_breakdown(&k, it, rv[0], broke)) break;
    }
cleanup:
    res->spmv_count = 2 * res->iterations + 1;
    res->pc_apply_count = 2 * res->iterations;
    kr_finish(&k);
    for (int i = 0; i < n_owned; i++) e->ops->vec_destroy(e, *owned[i]);
    return status;
}
