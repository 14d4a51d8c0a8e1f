/* idr.c - IDR(s) with biorthogonalisation (van Gijzen & Sonneveld, ACM TOMS
 * 38(1) 2011, Alg. 913, "An elegant IDR(s) variant that efficiently exploits
 * bi-orthogonality properties"), right preconditioning, written once over
 * the engine table. The s x s matrix M = P'G and f = P'r live on the host:
 * two reads of at most s numbers per spmv. One iteration = one spmv. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "krylov_impl.h"

#define IDR_MAX_S 64
#define IDR_KAPPA 0.7 /* "maintaining the convergence" angle (Sleijpen & van der Vorst) */

typedef struct idr_ws {
    int s;
    gs_vec **P, **G, **U;
    gs_vec *v, *vhat, *tmp, *t;
    double M[IDR_MAX_S][IDR_MAX_S], f[IDR_MAX_S], om;
    double rr; /* ||r||^2 at the last check: a breakdown test's residual */
    int slot_f, slot_pg, slot_c, slot_tt; /* slot_tt + 1 holds t'r */
} idr_ws;

/* Per spmv, outside A and M: an inner step moves 3s + 21 vectors (copy,
 * two maxpy over s-k and k vectors each, spmv, an s-vector mdot, the r and
 * x updates), the reduction step 11, and each cycle one s-vector mdot;
 * s inner steps and one reduction step make a cycle of s + 1 spmv. */
double gs_idr_vector_accesses(const gs_krylov_opts *opts)
{
    const double s = opts->idr_s;
    return (s * (3.0 * s + 21.0) + 11.0 + s + 1.0) / (s + 1.0);
}

/* Entry i of a fixed pseudo-random sequence in [-0.5, 0.5): splitmix64 of
 * the index, so any thread can make any entry and every engine gets the
 * same P. */
static double idr_random(uint64_t i)
{
    uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 - 0.5;
}

/* x.y summed in a fixed order whatever the threads: IDR_DOT_PARTS partial
 * sums over fixed ranges, then added in order. An OpenMP reduction(+) adds
 * the threads' partials in whatever order they finish, so two runs of the
 * same solve could differ in the last bits of P (and so of every residual). */
#define IDR_DOT_PARTS 64
static double idr_host_dot(const double *x, const double *y, int64_t n)
{
    double part[IDR_DOT_PARTS], d = 0;
    const int64_t len = (n + IDR_DOT_PARTS - 1) / IDR_DOT_PARTS;
#pragma omp parallel for schedule(static)
    for (int j = 0; j < IDR_DOT_PARTS; j++) {
        const int64_t lo = j * len, hi = lo + len < n ? lo + len : n;
        double acc = 0;
        for (int64_t l = lo; l < hi; l++) acc += x[l] * y[l];
        part[j] = acc;
    }
    for (int j = 0; j < IDR_DOT_PARTS; j++) d += part[j];
    return d;
}

/* P: s random vectors, orthonormalised by modified Gram-Schmidt on the host
 * (OpenMP; it is part of Ts, n s^2 work once per solve). */
static int idr_shadow_space(kr_ctx *k, idr_ws *ws, int64_t n)
{
    int status = GS_OK;
    double *p = gs_malloc((size_t)n * ws->s * sizeof(double), "idr shadow space", &k->e->err);
    if (!p) return GS_ERR_NOMEM;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n * ws->s; i++) p[i] = idr_random((uint64_t)i);
    for (int j = 0; j < ws->s; j++) {
        double *pj = p + (size_t)j * n;
        for (int i = 0; i < j; i++) {
            const double *pi = p + (size_t)i * n;
            const double d = idr_host_dot(pi, pj, n);
#pragma omp parallel for schedule(static)
            for (int64_t l = 0; l < n; l++) pj[l] -= d * pi[l];
        }
        const double nrm = sqrt(idr_host_dot(pj, pj, n));
#pragma omp parallel for schedule(static)
        for (int64_t l = 0; l < n; l++) pj[l] = nrm > 0 ? pj[l] / nrm : 0.0;
        GS_TRY(k->ops->vec_upload(k->e, ws->P[j], pj));
    }
cleanup:
    free(p);
    return status;
}

/* Solve the lower-triangular system M(k0:k1, k0:k1) y = rhs(k0:k1). */
static void idr_lower_solve(const idr_ws *ws, int k0, int k1, const double *rhs, double *y)
{
    for (int i = k0; i < k1; i++) {
        double acc = rhs[i - k0];
        for (int j = k0; j < i; j++) acc -= ws->M[i][j] * y[j - k0];
        y[i - k0] = ws->M[i][i] == 0.0 ? 0.0 : acc / ws->M[i][i];
    }
}

/* Inner step k: new U_k, G_k = A U_k biorthogonal to P_0..P_k-1, then
 * r -= beta G_k, x += beta U_k. Sets *done. */
static int idr_step(kr_ctx *k, idr_ws *ws, int kk, gs_vec *x, gs_vec *r, long *it, int *done)
{
    gs_engine *e = k->e;
    const gs_engine_ops *o = k->ops;
    const int s = ws->s;
    double c[IDR_MAX_S], pg[IDR_MAX_S];
    int status = GS_OK;
    idr_lower_solve(ws, kk, s, ws->f + kk, c);
    GS_TRY(o->scalar_write(e, ws->slot_c, s - kk, c));
    GS_TRY(o->copy(e, r, ws->v));                                  /* v = r - G c   */
    GS_TRY(o->maxpy(e, -1.0, (const gs_vec *const *)ws->G + kk, s - kk, ws->slot_c, ws->v));
    GS_TRY(gs_pc_apply_dot(k->pc, ws->v, ws->vhat, GS_SLOT_NONE)); /* vhat = M v     */
    GS_TRY(o->axpby(e, gs_coef_const(ws->om), ws->vhat, gs_coef_const(0), ws->tmp));
    GS_TRY(o->maxpy(e, 1.0, (const gs_vec *const *)ws->U + kk, s - kk, ws->slot_c, ws->tmp));
    gs_vec *swap = ws->U[kk];                                      /* U_k = U c + om vhat */
    ws->U[kk] = ws->tmp;
    ws->tmp = swap;
    GS_TRY(o->spmv_dot(e, k->A, ws->U[kk], ws->G[kk], NULL, GS_SLOT_NONE)); /* G_k = A U_k */
    GS_TRY(o->mdot(e, (const gs_vec *const *)ws->P, s, ws->G[kk], ws->slot_pg));
    GS_TRY(o->scalar_read(e, ws->slot_pg, s, pg));
    double alpha[IDR_MAX_S];
    idr_lower_solve(ws, 0, kk, pg, alpha); /* sequential biorthogonalisation, at once */
    if (kk > 0) {
        GS_TRY(o->scalar_write(e, ws->slot_c, kk, alpha));
        GS_TRY(o->maxpy(e, -1.0, (const gs_vec *const *)ws->G, kk, ws->slot_c, ws->G[kk]));
        GS_TRY(o->maxpy(e, -1.0, (const gs_vec *const *)ws->U, kk, ws->slot_c, ws->U[kk]));
    }
    for (int i = kk; i < s; i++) { /* M(i,k) = P_i' G_k after the subtraction */
        double m = pg[i];
        for (int j = 0; j < kk; j++) m -= alpha[j] * ws->M[i][j];
        ws->M[i][kk] = m;
    }
    (*it)++;
    if (ws->M[kk][kk] == 0.0 || !isfinite(ws->M[kk][kk])) { /* r is unchanged: check it again */
        *done = kr_check_breakdown(k, *it, ws->rr, "M(k,k) = P_k'G_k is 0 or not finite");
        goto cleanup;
    }
    const double beta = ws->f[kk] / ws->M[kk][kk];
    GS_TRY(o->axpy2_dot(e, gs_coef_const(beta), ws->U[kk], x,     /* x += beta U_k */
                        gs_coef_const(-beta), ws->G[kk], r, KR_RR)); /* r -= beta G_k */
    GS_TRY(o->scalar_read(e, KR_RR, 1, &ws->rr));
    *done = kr_check(k, *it, ws->rr);
    for (int i = kk + 1; i < s; i++) ws->f[i] -= beta * ws->M[i][kk];
cleanup:
    return status;
}

/* The dimension-reduction step: x += om M r, r -= om A M r. */
static int idr_reduce(kr_ctx *k, idr_ws *ws, gs_vec *x, gs_vec *r, long *it, int *done)
{
    gs_engine *e = k->e;
    const gs_engine_ops *o = k->ops;
    int status = GS_OK;
    GS_TRY(gs_pc_apply_dot(k->pc, r, ws->vhat, GS_SLOT_NONE));
    GS_TRY(o->spmv_dot(e, k->A, ws->vhat, ws->t, r, ws->slot_tt + 1)); /* t = A vhat, t'r */
    GS_TRY(o->dot(e, ws->t, ws->t, ws->slot_tt));
    double v[4 * IDR_MAX_S + 4], rr; /* one read: RR up to t'r (3s + 3 slots) */
    GS_TRY(o->scalar_read(e, KR_RR, ws->slot_tt + 2 - KR_RR, v));
    const double tt = v[ws->slot_tt - KR_RR], tr = v[ws->slot_tt + 1 - KR_RR];
    rr = v[0];
    (*it)++;
    if (!kr_positive(tt) || tr == 0.0 || !isfinite(tr)) { /* r is unchanged: check it again */
        *done = kr_check_breakdown(k, *it, rr, "omega = 0 or not finite (t'r = 0 or t't = 0)");
        goto cleanup;
    }
    const double rho = fabs(tr) / (sqrt(tt) * sqrt(rr));
    ws->om = tr / tt;
    if (rho < IDR_KAPPA) ws->om *= IDR_KAPPA / rho;
    GS_TRY(o->axpy2_dot(e, gs_coef_const(ws->om), ws->vhat, x,  /* x += om vhat */
                        gs_coef_const(-ws->om), ws->t, r, KR_RR)); /* r -= om t    */
    GS_TRY(o->scalar_read(e, KR_RR, 1, &ws->rr));
    *done = kr_check(k, *it, ws->rr);
cleanup:
    return status;
}

static int idr_iterate(kr_ctx *k, idr_ws *ws, gs_vec *x, gs_vec *r)
{
    int status = GS_OK, done = 0;
    long it = 0;
    while (!done) {
        double f[IDR_MAX_S];
        GS_TRY(k->ops->mdot(k->e, (const gs_vec *const *)ws->P, ws->s, r, ws->slot_f));
        GS_TRY(k->ops->scalar_read(k->e, ws->slot_f, ws->s, f));
        for (int i = 0; i < ws->s; i++) ws->f[i] = f[i];
        for (int kk = 0; kk < ws->s && !done; kk++) GS_TRY(idr_step(k, ws, kk, x, r, &it, &done));
        if (!done) GS_TRY(idr_reduce(k, ws, x, r, &it, &done));
    }
cleanup:
    return status;
}

static int idr_alloc(gs_engine *e, idr_ws *ws, int64_t n)
{
    int status = GS_OK;
    const int s = ws->s;
    ws->P = gs_calloc((size_t)s, sizeof *ws->P, "idr P", &e->err);
    ws->G = gs_calloc((size_t)s, sizeof *ws->G, "idr G", &e->err);
    ws->U = gs_calloc((size_t)s, sizeof *ws->U, "idr U", &e->err);
    if (!ws->P || !ws->G || !ws->U) return GS_ERR_NOMEM;
    for (int i = 0; i < s; i++) {
        GS_TRY(e->ops->vec_create(e, n, &ws->P[i]));
        GS_TRY(e->ops->vec_create(e, n, &ws->G[i]));
        GS_TRY(e->ops->vec_create(e, n, &ws->U[i]));
        GS_TRY(e->ops->set(e, ws->G[i], 0.0));
        GS_TRY(e->ops->set(e, ws->U[i], 0.0));
    }
    GS_TRY(e->ops->vec_create(e, n, &ws->v));
    GS_TRY(e->ops->vec_create(e, n, &ws->vhat));
    GS_TRY(e->ops->vec_create(e, n, &ws->tmp));
    GS_TRY(e->ops->vec_create(e, n, &ws->t));
cleanup:
    return status;
}

static void idr_free(gs_engine *e, idr_ws *ws)
{
    for (int i = 0; i < ws->s; i++) {
        if (ws->P) e->ops->vec_destroy(e, ws->P[i]);
        if (ws->G) e->ops->vec_destroy(e, ws->G[i]);
        if (ws->U) e->ops->vec_destroy(e, ws->U[i]);
    }
    free(ws->P);
    free(ws->G);
    free(ws->U);
    e->ops->vec_destroy(e, ws->v);
    e->ops->vec_destroy(e, ws->vhat);
    e->ops->vec_destroy(e, ws->tmp);
    e->ops->vec_destroy(e, ws->t);
}

int gs_idr_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                 const gs_krylov_opts *opts, gs_krylov_result *res)
{
    kr_ctx k;
    idr_ws ws = {0};
    gs_vec *r = NULL;
    int status = kr_init(&k, e, A, pc, opts, res), done = 0;
    const int64_t n = gs_vec_length(b);
    if (opts->idr_s < 1 || opts->idr_s > IDR_MAX_S) {
        status = gs_error_set(&e->err, GS_ERR_USAGE, "--idr-s %d outside [1, %d]", opts->idr_s,
                              IDR_MAX_S);
        goto cleanup;
    }
    /* s = max(1, min(s, n - 1)): P has s independent columns only if
     * s <= n, and s = n - 1 already spans all but one dimension */
    ws.s = (int64_t)opts->idr_s < n - 1 ? opts->idr_s : (int)(n - 1);
    if (ws.s < 1) ws.s = 1;
    res->idr_s = ws.s;
    ws.slot_f = KR_FREE;
    ws.slot_pg = ws.slot_f + ws.s;
    ws.slot_c = ws.slot_pg + ws.s;
    ws.slot_tt = ws.slot_c + ws.s;
    ws.om = 1.0;
    for (int i = 0; i < ws.s; i++)
        for (int j = 0; j < ws.s; j++) ws.M[i][j] = i == j ? 1.0 : 0.0;
    GS_TRY(idr_alloc(e, &ws, n));
    GS_TRY(e->ops->vec_create(e, n, &r));
    GS_TRY(idr_shadow_space(&k, &ws, n));
    GS_TRY(kr_initial_residual(&k, b, x, r, &done));
    if (done) goto cleanup;
    GS_TRY(e->ops->scalar_read(e, KR_RR, 1, &ws.rr));
    GS_TRY(idr_iterate(&k, &ws, x, r));
cleanup:
    res->spmv_count = res->iterations + 1;
    res->pc_apply_count = res->iterations;
    kr_finish(&k);
    idr_free(e, &ws);
    e->ops->vec_destroy(e, r);
    return status;
}
