/* cg.c - preconditioned conjugate gradients (Hestenes & Stiefel 1952;
 * Saad, "Iterative Methods for Sparse Linear Systems", Alg. 9.1), written
 * once over the engine table. All scalars stay in engine slots. */
#include <math.h>
#include <string.h>

#include "krylov_impl.h"

/* RR, PAP, RHO_0, RHO_1 are read together at each check: keep them
 * adjacent. rho alternates between two slots, so beta = rho_new / rho_old
 * needs no copy: iteration parity picks which slot is new. */
enum { CG_PAP = KR_FREE, CG_RHO0, CG_RHO1, CG_LOG };

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
    GS_TRY(kr_log(k)); /* --history: after r.z, so that r.r's sum is r.z's (one, not two) */
    GS_TRY(k->ops->axpby(e, gs_coef_const(1), s->z,                      /* p = z + beta p */
                         gs_coef_ratio(1, rho_new, rho), s->p));
    s->par = !s->par;
cleanup:
    return status;
}

/* The breakdowns, in the order they are tested, with rho = r'Mr in slot
 * rho: the first two are looked at only when the residual is above tol
 * (kr_check_breakdown): p'Ap = 0 there means p = 0 with r != 0. */
#define CG_N_TESTS 4
static void cg_tests(int rho, kr_test t[CG_N_TESTS])
{
    const kr_test all[CG_N_TESTS] = {
        {{GS_LOOP_FINITE, CG_PAP}, "p'Ap is not finite (A p overflowed or holds NaN)"},
        {{GS_LOOP_POSITIVE, CG_PAP},
         "p'Ap <= 0: A is not positive definite (use bicgstab or gmres)"},
        {{GS_LOOP_FINITE, rho}, "r'Mr is not finite (M r overflowed or holds NaN)"},
        {{GS_LOOP_POSITIVE, rho}, "r'Mr <= 0: the preconditioner is not positive definite"},
    };
    for (int i = 0; i < CG_N_TESTS; i++) t[i] = all[i];
}

/* The loop on the device runs a body of per_body iterations from parity 0
 * (rho in CG_RHO0): even, the newest rho is back in CG_RHO0; odd, it is in
 * CG_RHO1 and the check moves it back. Either way the host goes on (after
 * a handoff) at parity 0. */
static int cg_device_loop(kr_ctx *k, cg_state *s, long *it, int *finished)
{
    kr_test t[CG_N_TESTS];
    static const int moves[1][2] = {{CG_RHO0, CG_RHO1}};
    const long per_body = kr_loop_per_body(k);
    const int odd = (int)(per_body & 1);
    cg_tests(odd ? CG_RHO1 : CG_RHO0, t);
    s->par = 0;
    return kr_device_loop(k, 0, per_body, cg_body, s, t, CG_N_TESTS, moves, odd, it, finished);
}

/* The whole solve in one kernel where M is pointwise (jacobi, none), a
 * product of sparse matrices (gs_pc.product: fsai, ssor-ai, spai,
 * gspai-opt, isai) or given by triangular factors (gs_pc.factor: mic) and
 * the engine can (cuda/engine/fused.cu): it starts from the state the host loop
 * starts from (rho = r'z in CG_RHO0, p = z) and writes p'Ap and the new rho
 * into the slots the tests name; it moves the new rho back itself. */
static int cg_fused(kr_ctx *k, cg_state *s, int *finished)
{
    kr_test t[CG_N_TESTS];
    *finished = 0;
    gs_fused f;
    if (!kr_fused_begin(k, GS_FUSED_CG, &f)) return GS_OK;
    f.x = s->x;
    f.r = s->r;
    f.z = s->z;
    f.p = s->p;
    f.q = s->q;
    f.slot_rho = CG_RHO0;
    f.slot_rho_new = CG_RHO1;
    f.slot_pap = CG_PAP;
    cg_tests(CG_RHO1, t);
    return kr_fused(k, &f, t, CG_N_TESTS, NULL, 0, finished);
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
    kr_test t[CG_N_TESTS];
    cg_tests(CG_RHO0, t);
    GS_TRY(e->ops->scalar_read(e, CG_RHO0, 1, v));
    const char *broke = kr_test_failed(t + 2, 2, v, CG_RHO0);
    if (broke) { /* r0 is above tol here (kr_initial_residual) */
        kr_breakdown(&k, 0, broke);
        goto cleanup;
    }
    int par = 0, finished = 0;
    long it = 0;
    GS_TRY(kr_log_begin(&k, CG_LOG));
    GS_TRY(cg_fused(&k, &s, &finished));
    if (!finished) GS_TRY(cg_device_loop(&k, &s, &it, &finished));
    while (!finished && it < opts->maxit) {
        const long nb = kr_next_block(&k, it);
        for (long i = 0; i < nb; i++, par ^= 1) {
            s.par = par; /* replays do not run cg_body: set the parity here */
            GS_TRY(kr_run_iteration(&k, cg_body, &s, par));
        }
        it += nb;
        double rv[4];
        GS_TRY(kr_check_read(&k, 4, rv)); /* rr, pap, rho0, rho1 (and the log) */
        cg_tests(CG_RHO0 + par, t); /* the new rho (see cg_body) */
        if (kr_check_breakdown(&k, it, rv[0], kr_test_failed(t, CG_N_TESTS, rv, KR_RR))) break;
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
