/* cg.c - preconditioned conjugate gradients (Hestenes & Stiefel 1952;
 * Saad, "Iterative Methods for Sparse Linear Systems", Alg. 9.1), written
 * once over the engine table. All scalars stay in engine slots. */
#include <math.h>

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

/* The breakdown rho = r'Mr shows, or NULL. */
static const char *cg_rho_breakdown(double rho)
{
    if (!isfinite(rho)) return "r'Mr is not finite (M r overflowed or holds NaN)";
    if (!(rho > 0.0)) return "r'Mr <= 0: the preconditioner is not positive definite";
    return NULL;
}

/* The breakdown the slots read at a check show, or NULL; v = {pap, rho} of
 * the iteration just done. Only looked at when the residual is above tol
 * (kr_check_breakdown): p'Ap = 0 there means p = 0 with r != 0. */
static const char *cg_breakdown(const double *v)
{
    const double pap = v[0], rho = v[1];
    if (!isfinite(pap)) return "p'Ap is not finite (A p overflowed or holds NaN)";
    if (!(pap > 0.0)) return "p'Ap <= 0: A is not positive definite (use bicgstab or gmres)";
    return cg_rho_breakdown(rho);
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
    if (cg_rho_breakdown(v[0])) { /* r0 is above tol here (kr_initial_residual) */
        kr_breakdown(&k, 0, cg_rho_breakdown(v[0]));
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
        const double got[2] = {rv[1], rv[2 + par]};
        if (kr_check_breakdown(&k, it, rv[0], cg_breakdown(got))) break;
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
