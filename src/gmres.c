/* gmres.c - restarted GMRES(m) with right preconditioning (Saad & Schultz,
 * SIAM J. Sci. Stat. Comput. 7(3) 1986; Saad, Alg. 9.5), written once over
 * the engine table. Orthogonalisation is classical Gram-Schmidt applied
 * twice (CGS2: as stable as modified GS, but each pass is one mdot and one
 * maxpy over all basis vectors). The (m+1) x m Hessenberg matrix and its
 * Givens rotations live on the host: one read of 2j+3 numbers per step. */
#include <math.h>
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

/* Apply rotations 0..j-1 to column j, make rotation j, update g. */
static void gmres_givens(gmres_ws *ws, int j)
{
    for (int i = 0; i < j; i++) {
        double a = H_(ws, i, j), b = H_(ws, i + 1, j);
        H_(ws, i, j) = ws->cs[i] * a + ws->sn[i] * b;
        H_(ws, i + 1, j) = -ws->sn[i] * a + ws->cs[i] * b;
    }
    double a = H_(ws, j, j), b = H_(ws, j + 1, j), rr = hypot(a, b);
    ws->cs[j] = rr == 0.0 ? 1.0 : a / rr;
    ws->sn[j] = rr == 0.0 ? 0.0 : b / rr;
    H_(ws, j, j) = rr;
    H_(ws, j + 1, j) = 0.0;
    ws->g[j + 1] = -ws->sn[j] * ws->g[j];
    ws->g[j] = ws->cs[j] * ws->g[j];
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

/* x += M V y with H y = g (upper triangular, size jn). */
static int gmres_update(kr_ctx *k, gmres_ws *ws, int jn, gs_vec *x, gs_vec *u)
{
    double y[GS_MAX_SCALARS];
    int status = GS_OK;
    for (int i = jn - 1; i >= 0; i--) {
        double s = ws->g[i];
        for (int l = i + 1; l < jn; l++) s -= H_(ws, i, l) * y[l];
        y[i] = H_(ws, i, i) == 0.0 ? 0.0 : s / H_(ws, i, i);
    }
    GS_TRY(k->ops->scalar_write(k->e, ws->slot_h1, jn, y));
    GS_TRY(k->ops->set(k->e, u, 0.0));
    GS_TRY(k->ops->maxpy(k->e, 1.0, (const gs_vec *const *)ws->V, jn, ws->slot_h1, u));
    GS_TRY(gs_pc_apply_dot(k->pc, u, ws->z, GS_SLOT_NONE));
    GS_TRY(k->ops->axpby(k->e, gs_coef_const(1), ws->z, gs_coef_const(1), x));
cleanup:
    return status;
}

static int gmres_cycles(kr_ctx *k, gmres_ws *ws, const gs_vec *b, gs_vec *x, gs_vec *u)
{
    gs_engine *e = k->e;
    int status = GS_OK, done = 0;
    long it = 0;
    GS_TRY(kr_initial_residual(k, b, x, ws->V[0], &done));
    double rr;
    GS_TRY(k->ops->scalar_read(e, KR_RR, 1, &rr));
    while (!done) {
        const double beta = sqrt(rr);
        GS_TRY(k->ops->axpby(e, gs_coef_const(1.0 / beta), ws->V[0], gs_coef_const(0),
                             ws->V[0]));
        for (int i = 0; i <= ws->m; i++) ws->g[i] = 0.0;
        ws->g[0] = beta;
        int j = 0;
        while (j < ws->m && !done) {
            double hn;
            GS_TRY(gmres_arnoldi(k, ws, j, &hn));
            gmres_givens(ws, j);
            j++;
            it++;
            done = kr_check(k, it, ws->g[j] * ws->g[j]);
            if (!done && hn == 0.0) { /* invariant subspace but not converged */
                kr_breakdown(k, it, "Arnoldi breakdown: h(j+1,j) = 0 without convergence");
                done = 1;
            }
        }
        GS_TRY(gmres_update(k, ws, j, x, u));
        if (done) break;
        GS_TRY(k->ops->copy(e, b, ws->V[0])); /* restart: true residual */
        GS_TRY(k->ops->spmv_axpby(e, gs_coef_const(-1), k->A, x, gs_coef_const(1), ws->V[0]));
        GS_TRY(k->ops->dot(e, ws->V[0], ws->V[0], KR_RR));
        GS_TRY(k->ops->scalar_read(e, KR_RR, 1, &rr));
        done = kr_check(k, it, rr);
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
