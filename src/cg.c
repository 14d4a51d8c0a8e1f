/* cg.c - preconditioned conjugate gradients (Hestenes & Stiefel 1952;
 * Saad, "Iterative Methods for Sparse Linear Systems", Alg. 9.1), written
 * once over the engine table. All scalars stay in engine slots. */
#include <math.h>
#include <stdio.h>

#include "krylov_impl.h"

/* RR, RHO, PAP are read together at each check: keep them adjacent. */
enum { CG_RHO = KR_FREE, CG_PAP, CG_RHO_OLD };

typedef struct cg_state {
    gs_vec *x, *r, *z, *p, *q;
} cg_state;

/* One iteration. Vector accesses outside A and M (krylov.c's count, 11):
 * q = A p (2), x += alpha p (3), r -= alpha q with r.r (3), p = z + beta p (3). */
static int cg_body(kr_ctx *k, void *state)
{
    cg_state *s = state;
    gs_engine *e = k->e;
    int status = GS_OK;
    GS_TRY(k->ops->spmv_dot(e, k->A, s->p, s->q, NULL, CG_PAP));        /* q = A p, p.q  */
    GS_TRY(k->ops->axpby(e, gs_coef_ratio(1, CG_RHO, CG_PAP), s->p,      /* x += alpha p */
                         gs_coef_const(1), s->x));
    GS_TRY(k->ops->axpby_dot(e, gs_coef_ratio(-1, CG_RHO, CG_PAP), s->q, /* r -= alpha q */
                             gs_coef_const(1), s->r, NULL, KR_RR));
    GS_TRY(k->ops->scalar_set(e, CG_RHO_OLD, gs_coef_slot(1, CG_RHO)));
    GS_TRY(gs_pc_apply_dot(k->pc, s->r, s->z, CG_RHO));                  /* z = M r, r.z */
    GS_TRY(k->ops->axpby(e, gs_coef_const(1), s->z,                      /* p = z + beta p */
                         gs_coef_ratio(1, CG_RHO, CG_RHO_OLD), s->p));
cleanup:
    return status;
}

/* 1 and a breakdown record when the slots read show a breakdown. */
static int cg_broke_down(kr_ctx *k, long it, const double *v)
{
    const double rr = v[0], rho = v[1], pap = v[2];
    if (!(pap > 0.0)) {
        kr_breakdown(k, it, "p'Ap <= 0: A is not positive definite (use bicgstab or gmres)");
        k->res->rel_residual = sqrt(fabs(rr)) / k->bnorm;
        return 1;
    }
    if (!(rho > 0.0) && rr > 0.0 && sqrt(rr) / k->bnorm > k->opts->tol) {
        kr_breakdown(k, it, "r'Mr <= 0: the preconditioner is not positive definite");
        k->res->rel_residual = sqrt(fabs(rr)) / k->bnorm;
        return 1;
    }
    return 0;
}

int gs_cg_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                const gs_krylov_opts *opts, gs_krylov_result *res)
{
    kr_ctx k;
    cg_state s = {x, NULL, NULL, NULL, NULL};
    int status = kr_init(&k, e, A, pc, b, opts, res), done = 0;
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.r));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.z));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.p));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.q));
    GS_TRY(kr_initial_residual(&k, b, x, s.r, &done));
    if (done) goto cleanup;
    GS_TRY(gs_pc_apply_dot(pc, s.r, s.z, CG_RHO));
    GS_TRY(e->ops->copy(e, s.z, s.p));
    double v[1];
    GS_TRY(e->ops->scalar_read(e, CG_RHO, 1, v));
    if (!(v[0] > 0.0)) {
        kr_breakdown(&k, 0, "r'Mr <= 0: the preconditioner is not positive definite");
        goto cleanup;
    }
    const long block = opts->check_every > 0 ? opts->check_every : 1;
    for (long it = 0; it < opts->maxit;) {
        const long nb = opts->maxit - it < block ? opts->maxit - it : block;
        GS_TRY(kr_run_block(&k, cg_body, &s, nb, block));
        it += nb;
        double rv[3];
        GS_TRY(e->ops->scalar_read(e, KR_RR, 3, rv));
        if (cg_broke_down(&k, it, rv)) break;
        if (kr_check(&k, it, rv[0])) break;
    }
cleanup:
    res->spmv_count = res->iterations + 1;
    res->pc_apply_count = res->iterations + 1;
    kr_finish(&k);
    e->ops->vec_destroy(e, s.r);
    e->ops->vec_destroy(e, s.z);
    e->ops->vec_destroy(e, s.p);
    e->ops->vec_destroy(e, s.q);
    return status;
}
