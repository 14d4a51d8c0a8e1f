/* cg.c - preconditioned conjugate gradients (Hestenes & Stiefel 1952;
 * Saad, "Iterative Methods for Sparse Linear Systems", Alg. 9.1), written
 * once over the engine table. All scalars stay in engine slots. */
#include <math.h>
#include <stdio.h>

#include "krylov_impl.h"

/* RR, PAP, RHO_0, RHO_1 are read together at each check: keep them
 * adjacent. rho alternates between two slots, so beta = rho_new / rho_old
 * needs no copy: iteration parity picks which slot is new. */
enum { CG_PAP = KR_FREE, CG_RHO0, CG_RHO1 };

typedef struct cg_state {
    gs_vec *x, *r, *z, *p, *q;
    int par; /* rho is in CG_RHO0 + par */
} cg_state;

/* Vector accesses of one iteration outside A and M: q = A p (2), x += alpha
 * p and r -= alpha q with r.r in one pass (6), p = z + beta p (3). */
double gs_cg_vector_accesses(const gs_krylov_opts *opts)
{
    (void)opts;
    return 11.0;
}

/* One iteration: four kernels with jacobi (counted above). */
static int cg_body(kr_ctx *k, void *state)
{
    cg_state *s = state;
    gs_engine *e = k->e;
    const int rho = CG_RHO0 + s->par, rho_new = CG_RHO0 + !s->par;
    int status = GS_OK;
    GS_TRY(k->ops->spmv_dot(e, k->A, s->p, s->q, NULL, CG_PAP));        /* q = A p, p.q   */
    GS_TRY(k->ops->axpy2_dot(e, gs_coef_ratio(1, rho, CG_PAP), s->p, s->x, /* x += alpha p */
                             gs_coef_ratio(-1, rho, CG_PAP), s->q, s->r,   /* r -= alpha q */
                             KR_RR));
    GS_TRY(gs_pc_apply_dot(k->pc, s->r, s->z, rho_new));                 /* z = M r, r.z  */
    GS_TRY(k->ops->axpby(e, gs_coef_const(1), s->z,                      /* p = z + beta p */
                         gs_coef_ratio(1, rho_new, rho), s->p));
    s->par = !s->par;
cleanup:
    return status;
}

/* 1 and a breakdown record when the slots read show a breakdown;
 * v = {rr, pap, rho} of the iteration just done. */
static int cg_broke_down(kr_ctx *k, long it, const double *v)
{
    const double rr = v[0], pap = v[1], rho = v[2];
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
    cg_state s = {x, NULL, NULL, NULL, NULL, 0};
    int status = kr_init(&k, e, A, pc, opts, res), done = 0;
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.r));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.z));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.p));
    GS_TRY(e->ops->vec_create(e, gs_vec_length(b), &s.q));
    GS_TRY(kr_initial_residual(&k, b, x, s.r, &done));
    if (done) goto cleanup;
    GS_TRY(gs_pc_apply_dot(pc, s.r, s.z, CG_RHO0));
    GS_TRY(e->ops->copy(e, s.z, s.p));
    double v[1];
    GS_TRY(e->ops->scalar_read(e, CG_RHO0, 1, v));
    if (!(v[0] > 0.0)) {
        kr_breakdown(&k, 0, "r'Mr <= 0: the preconditioner is not positive definite");
        goto cleanup;
    }
    int par = 0;
    for (long it = 0; it < opts->maxit;) {
        const long nb = kr_next_block(&k, it);
        for (long i = 0; i < nb; i++, par ^= 1) {
            s.par = par; /* replays do not run cg_body: set the parity here */
            GS_TRY(kr_run_iteration(&k, cg_body, &s, par));
        }
        it += nb;
        double rv[4];
        GS_TRY(e->ops->scalar_read(e, KR_RR, 4, rv)); /* rr, pap, rho0, rho1 */
        const double got[3] = {rv[0], rv[1], rv[2 + par]};
        if (cg_broke_down(&k, it, got)) break;
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
