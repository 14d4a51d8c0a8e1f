/* gmres.c - restarted GMRES(m) with right preconditioning (Saad & Schultz,
 * SIAM J. Sci. Stat. Comput. 7(3) 1986; Saad, Alg. 9.5), written once over
 * the engine table. Orthogonalisation is classical Gram-Schmidt applied
 * twice (CGS2: as stable as modified GS, but each pass is one mdot and one
 * maxpy over all basis vectors). The (m+1) x m Hessenberg matrix and its
 * Givens rotations live on the host: one read of 2j+3 numbers per step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "krylov_impl.h"

typedef struct gmres_ws {
    int m;
    gs_vec **V;         /* m + 1 basis vectors */
    gs_vec *z;          /* M v_j, then M (V y) */
    double *H;          /* column-major, (m+1) x m */
    double *cs, *sn, *g;
    int slot_h1, slot_h2, slot_nw; /* slot_h1 also receives y at the end */
} gmres_ws;

/* Per-step vector accesses outside A and M: spmv 2, two CGS passes of
 * (j+2) + (j+3), the norm 1, the scaling 2: 4j + 13, averaged over j < m,
 * plus the end of each cycle (m+1 reads for V y, 3 for x += z) spread over m. */
double gs_gmres_vector_accesses(const gs_krylov_opts *opts)
{
    const double m = opts->restart;
    return 2.0 * m + 11.0 + (m + 6.0) / m;
}

#define H_(ws, i, j) ((ws)->H[(size_t)(j) * ((ws)->m + 1) + (i)])

/* |R(j,j)| at or below this fraction of ||H(:,j)||: A M v_j lies in the
 * span of A M v_0 .. A M v_j-1 up to rounding, so R is singular. A
 * nonsingular A M keeps the ratio above 1 / cond(A M); rounding leaves it
 * at 1e-14 or more where A M is singular (1.8e-14 seen at the 17th step of
 * a 36-unknown Neumann Laplacian, the Arnoldi errors adding up), so only
 * cond(A M) > 1e12 on the Krylov space is taken for singular. */
#define GMRES_SINGULAR 1e-12

/* Apply rotations 0..j-1 to column j, make rotation j, update g. Returns
 * NULL, or what makes R(0:j, 0:j) singular, leaving g as it was (the least
 * squares problem over the first j columns stays solved). */
static const char *gmres_givens(gmres_ws *ws, int j)
{
    double col = 0.0; /* ||H(0:j+1, j)||: rotations keep it */
    for (int i = 0; i <= j + 1; i++) col = hypot(col, H_(ws, i, j));
    if (!isfinite(col)) return "Hessenberg entry not finite (A M v overflowed or holds NaN)";
    for (int i = 0; i < j; i++) {
        double a = H_(ws, i, j), b = H_(ws, i + 1, j);
        H_(ws, i, j) = ws->cs[i] * a + ws->sn[i] * b;
        H_(ws, i + 1, j) = -ws->sn[i] * a + ws->cs[i] * b;
    }
    double a = H_(ws, j, j), b = H_(ws, j + 1, j), rr = hypot(a, b);
    if (!(rr > GMRES_SINGULAR * col))
        return "Hessenberg matrix singular: A M is singular on the Krylov space "
               "(b not in the range of A?)";
    ws->cs[j] = a / rr; /* h(j+1,j) = 0 gives sn = 0, g[j+1] = 0: happy breakdown */
    ws->sn[j] = b / rr;
    H_(ws, j, j) = rr;
    H_(ws, j + 1, j) = 0.0;
    ws->g[j + 1] = -ws->sn[j] * ws->g[j];
    ws->g[j] = ws->cs[j] * ws->g[j];
    return NULL;
}

/* One Arnoldi step j: V[j+1] = orthonormalised A M V[j]; column j of H. */
static int gmres_arnoldi(kr_ctx *k, gmres_ws *ws, int j, double *hn)
{
    gs_engine *e = k->e;
    const gs_engine_ops *o = k->ops;
    const gs_vec *const *V = (const gs_vec *const *)ws->V;
    gs_vec *w = ws->V[j + 1];
    int status = GS_OK;
    GS_TRY(gs_pc_apply_dot(k->pc, ws->V[j], ws->z, GS_SLOT_NONE));
    GS_TRY(o->spmv_dot(e, k->A, ws->z, w, NULL, GS_SLOT_NONE));
    GS_TRY(o->mdot(e, V, j + 1, w, ws->slot_h1));        /* h1 = V' w   */
    GS_TRY(o->maxpy(e, -1.0, V, j + 1, ws->slot_h1, w)); /* w -= V h1   */
    GS_TRY(o->mdot(e, V, j + 1, w, ws->slot_h2));        /* h2 = V' w   */
    GS_TRY(o->maxpy(e, -1.0, V, j + 1, ws->slot_h2, w)); /* w -= V h2   */
    GS_TRY(o->dot(e, w, w, ws->slot_nw));
    double h[2 * GS_MAX_SCALARS];
    const int count = ws->slot_nw - ws->slot_h1 + 1;
    GS_TRY(o->scalar_read(e, ws->slot_h1, count, h));
    for (int i = 0; i <= j; i++) H_(ws, i, j) = h[i] + h[ws->slot_h2 - ws->slot_h1 + i];
    *hn = sqrt(fabs(h[count - 1]));
    H_(ws, j + 1, j) = *hn;
    if (*hn > 0.0) GS_TRY(o->axpby(e, gs_coef_const(1.0 / *hn), w, gs_coef_const(0), w));
cleanup:
    return status;
}

/* x += M V y with H y = g (upper triangular, size jn), kept in z. *finite
 * is 0 (and x untouched) when y overflows: the system's solution is not
 * representable in the space (A M numerically singular or x too large). */
static int gmres_update(kr_ctx *k, gmres_ws *ws, int jn, gs_vec *x, gs_vec *u, int *finite)
{
    double y[GS_MAX_SCALARS];
    int status = GS_OK;
    *finite = 1;
    for (int i = jn - 1; i >= 0; i--) { /* the diagonal is nonzero (gmres_givens) */
        double s = ws->g[i];
        for (int l = i + 1; l < jn; l++) s -= H_(ws, i, l) * y[l];
        y[i] = s / H_(ws, i, i);
        if (!isfinite(y[i])) *finite = 0;
    }
    if (jn == 0 || !*finite) return GS_OK;
    GS_TRY(k->ops->scalar_write(k->e, ws->slot_h1, jn, y));
    GS_TRY(k->ops->set(k->e, u, 0.0));
    GS_TRY(k->ops->maxpy(k->e, 1.0, (const gs_vec *const *)ws->V, jn, ws->slot_h1, u));
    GS_TRY(gs_pc_apply_dot(k->pc, u, ws->z, GS_SLOT_NONE));
    GS_TRY(k->ops->axpby(k->e, gs_coef_const(1), ws->z, gs_coef_const(1), x));
cleanup:
    return status;
}

/* r = b - A x and *rr = r.r: the residual a cycle restarts from, and the
 * one that confirms a cycle's claim of convergence. */
static int gmres_true_residual(kr_ctx *k, const gs_vec *b, const gs_vec *x, gs_vec *r,
                               double *rr)
{
    gs_engine *e = k->e;
    int status = GS_OK;
    GS_TRY(k->ops->copy(e, b, r));
    GS_TRY(k->ops->spmv_axpby(e, gs_coef_const(-1), k->A, x, gs_coef_const(1), r));
    GS_TRY(k->ops->dot(e, r, r, KR_RR));
    GS_TRY(k->ops->scalar_read(e, KR_RR, 1, rr));
cleanup:
    return status;
}

/* One cycle from V[0] = r, ||r|| = beta: Arnoldi steps until m, a stop or
 * a singular R, then x += M V y. *it counts the steps; 1 if it stops. */
static int gmres_cycle(kr_ctx *k, gmres_ws *ws, double beta, gs_vec *x, gs_vec *u, long *it,
                       int *done)
{
    int status = GS_OK, j = 0, finite;
    const char *broke = NULL;
    GS_TRY(k->ops->axpby(k->e, gs_coef_const(1.0 / beta), ws->V[0], gs_coef_const(0), ws->V[0]));
    for (int i = 0; i <= ws->m; i++) ws->g[i] = 0.0;
    ws->g[0] = beta;
    while (j < ws->m && !*done) {
        double hn;
        GS_TRY(gmres_arnoldi(k, ws, j, &hn));
        (*it)++;
        if ((broke = gmres_givens(ws, j))) break;
        j++;
        *done = kr_check(k, *it, ws->g[j] * ws->g[j]);
    }
    GS_TRY(gmres_update(k, ws, j, x, u, &finite)); /* the first j columns: R nonsingular */
    if (!finite) { /* x is as at the cycle's start */
        broke = "least-squares solution y overflowed: A M numerically singular on the "
                "Krylov space, or x not representable";
        j = 0;
    }
    if (broke) *done = kr_check_breakdown(k, *it, ws->g[j] * ws->g[j], broke);
cleanup:
    return status;
}

/* Restarted cycles. A cycle whose estimate reaches tol is confirmed by the
 * true residual b - A x (one spmv per claim). If it disagrees, the next
 * cycle restarts from the true residual, as any restart does, when the
 * cycle lowered it (rounding drift: a restart recovers); when the cycle did
 * not, restarting would rebuild the same space of a numerically singular
 * A M, so the update is undone and the gap reported as a breakdown. */
static int gmres_cycles(kr_ctx *k, gmres_ws *ws, const gs_vec *b, gs_vec *x, gs_vec *u)
{
    gs_engine *e = k->e;
    gs_krylov_result *res = k->res;
    int status = GS_OK, done = 0;
    long it = 0;
    char what[sizeof res->breakdown];
    GS_TRY(kr_initial_residual(k, b, x, ws->V[0], &done));
    double rr;
    GS_TRY(k->ops->scalar_read(e, KR_RR, 1, &rr));
    while (!done) {
        const double start_rel = sqrt(rr) / k->bnorm;
        GS_TRY(gmres_cycle(k, ws, sqrt(rr), x, u, &it, &done));
        if (done && res->reason != GS_REASON_CONVERGED) break;
        const int claimed = done;
        GS_TRY(gmres_true_residual(k, b, x, ws->V[0], &rr));
        done = kr_check(k, it, rr);
        const int confirmed = done && res->reason == GS_REASON_CONVERGED;
        if (claimed && !confirmed && !(res->rel_residual < start_rel)) {
            GS_TRY(k->ops->axpby(e, gs_coef_const(-1), ws->z, gs_coef_const(1), x));
            snprintf(what, sizeof what, "estimate reached tol but ||b - Ax|| / ||b|| = %.1e, no "
                     "lower than at the restart: A M numerically singular", res->rel_residual);
            kr_breakdown(k, it, what);
            res->rel_residual = start_rel;
            break;
        }
    }
cleanup:
    return status;
}

int gs_gmres_solve(gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b, gs_vec *x,
                   const gs_krylov_opts *opts, gs_krylov_result *res)
{
    kr_ctx k;
    gmres_ws ws = {0};
    gs_vec *u = NULL;
    int status = kr_init(&k, e, A, pc, opts, res);
    const int64_t n = gs_vec_length(b);
    ws.m = opts->restart;
    if (ws.m < 1 || 2 * (ws.m + 1) + 1 + KR_FREE > GS_MAX_SCALARS) {
        status = gs_error_set(&e->err, GS_ERR_USAGE, "--restart %d outside [1, %d]", ws.m,
                              (GS_MAX_SCALARS - KR_FREE - 3) / 2);
        goto cleanup;
    }
    ws.slot_h1 = KR_FREE;
    ws.slot_h2 = KR_FREE + ws.m + 1;
    ws.slot_nw = KR_FREE + 2 * (ws.m + 1);
    ws.V = gs_calloc((size_t)ws.m + 1, sizeof *ws.V, "gmres basis", &e->err);
    ws.H = gs_calloc((size_t)(ws.m + 1) * ws.m, sizeof(double), "gmres H", &e->err);
    ws.cs = gs_calloc((size_t)ws.m + 1, sizeof(double), "gmres rotations", &e->err);
    ws.sn = gs_calloc((size_t)ws.m + 1, sizeof(double), "gmres rotations", &e->err);
    ws.g = gs_calloc((size_t)ws.m + 1, sizeof(double), "gmres rhs", &e->err);
    if (!ws.V || !ws.H || !ws.cs || !ws.sn || !ws.g) {
        status = GS_ERR_NOMEM;
        goto cleanup;
    }
    for (int i = 0; i <= ws.m; i++) GS_TRY(e->ops->vec_create(e, n, &ws.V[i]));
    GS_TRY(e->ops->vec_create(e, n, &ws.z));
    GS_TRY(e->ops->vec_create(e, n, &u));
    GS_TRY(gmres_cycles(&k, &ws, b, x, u));
cleanup:
    res->spmv_count = res->iterations + 1;
    res->pc_apply_count = res->iterations;
    kr_finish(&k);
    for (int i = 0; ws.V && i <= ws.m; i++) e->ops->vec_destroy(e, ws.V[i]);
    e->ops->vec_destroy(e, ws.z);
    e->ops->vec_destroy(e, u);
    free(ws.V);
    free(ws.H);
    free(ws.cs);
    free(ws.sn);
    free(ws.g);
    return status;
}
