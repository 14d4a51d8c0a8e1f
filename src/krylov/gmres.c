/* gmres.c - restarted GMRES(m) with right preconditioning (Saad & Schultz,
 * SIAM J. Sci. Stat. Comput. 7(3) 1986; Saad, Alg. 9.5), written once over
 * the engine table. Orthogonalisation is classical Gram-Schmidt applied
 * twice (CGS2: as stable as modified GS, but each pass is one mdot and one
 * maxpy over all basis vectors). The Hessenberg matrix's triangle, its
 * Givens rotations and g live in the engine's slots, updated by the
 * engine's small operations (src/engine/small.h): the host loop reads 5
 * numbers a step, and the loop on the device (kr_device_steps) runs whole
 * cycles, their ends and restarts included, without the host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "krylov_impl.h"
#include "small.h"

typedef struct gmres_ws {
    int m;
    gs_vec **V;         /* m + 1 basis vectors */
    gs_vec *z;          /* M v_j, then M (V y) */
    gs_small_gmres L;   /* the slots of H's triangle, the rotations and g (small.h) */
    int host_only;      /* the engine declined the loop on the device: not asked again */
    /* The host loop keeps those slots in hostS (L.end doubles, by slot
     * number) and runs the same small operations there: a step then reads
     * h1, h2 and w'w once, as it always did, and no kernel of the rotation
     * sits between the step and its read. on_host: hostS holds the state. */
    int on_host;
    double *hostS;
    /* the end of a cycle on the device (gmres_device_step) */
    const gs_vec *b;
    gs_vec *x, *u;
} gmres_ws;

/* Per-step vector accesses outside A and M: spmv 2, two CGS passes of
 * (j+2) + (j+3), the norm 1, the scaling 2: 4j + 13, averaged over j < m,
 * plus the end of each cycle (m+1 reads for V y, 3 for x += z) spread over m. */
double gs_gmres_vector_accesses(const gs_krylov_opts *opts)
{
    const double m = opts->restart;
    return 2.0 * m + 11.0 + (m + 6.0) / m;
}

/* The breakdowns, in the order tested, on the slots the small operations
 * leave (small.h): the first two after a step, the third after the
 * least-squares solve. The slots lie right after KR_RR (base KR_FREE), so
 * one read of GMRES_READ slots from KR_RR has the residual, the tests and
 * jn. */
#define GMRES_N_TESTS 3
#define GMRES_READ 5
static void gmres_tests(const gs_small_gmres *L, kr_test t[GMRES_N_TESTS])
{
    const kr_test all[GMRES_N_TESTS] = {
        {{GS_LOOP_FINITE, L->col}, "Hessenberg entry not finite (A M v overflowed or holds NaN)"},
        {{GS_LOOP_POSITIVE, L->rot}, "Hessenberg matrix singular: A M is singular on the Krylov "
                                     "space (b not in the range of A?)"},
        {{GS_LOOP_POSITIVE, L->yok}, "least-squares solution y overflowed: A M numerically "
                                     "singular on the Krylov space, or x not representable"},
    };
    for (int i = 0; i < GMRES_N_TESTS; i++) t[i] = all[i];
}

/* The small operation on the state where it lives (hostS or the engine's S). */
static int gmres_small(kr_ctx *k, const gmres_ws *ws, int kind, int j)
{
    const gs_small op = {kind, j, ws->m, KR_FREE, KR_RR};
    if (!ws->on_host) return k->ops->small_run(k->e, &op);
    gs_small_exec(&op, ws->hostS);
    return GS_OK;
}

/* Read count slots of the state from slot0 (a synchronising read only where
 * the engine holds it). */
static int gmres_get(kr_ctx *k, const gmres_ws *ws, int slot0, int count, double *dst)
{
    if (!ws->on_host) return k->ops->scalar_read(k->e, slot0, count, dst);
    memcpy(dst, ws->hostS + slot0, (size_t)count * sizeof(double));
    return GS_OK;
}

/* The state moves to the host for good (the engine declined its loop):
 * one read of every slot of it. */
static int gmres_to_host(kr_ctx *k, gmres_ws *ws)
{
    const int status = k->ops->scalar_read(k->e, KR_RR, ws->L.end - KR_RR, ws->hostS + KR_RR);
    ws->on_host = 1;
    return status;
}

/* A cycle from V[0] = r with ||r||^2 = rr (in S[KR_RR] on the engine):
 * g = (||r||, 0, ..) and 1 / ||r||, V[0]'s scale (applied by step 0). */
static int gmres_restart(kr_ctx *k, gmres_ws *ws, double rr)
{
    if (ws->on_host) ws->hostS[KR_RR] = rr;
    return gmres_small(k, ws, GS_SMALL_GMRES_RESTART, 0);
}

/* One Arnoldi step j: V[j] scaled to norm 1 (by 1 / ||r|| or the last
 * step's 1 / h(j, j-1): the scaling waits for the next step, so that the
 * host loop's read after a step does not wait for it), then V[j+1] = A M
 * V[j] orthogonalised; column j of H, rotated, with g and the estimate
 * S[KR_RR] = g(j+1)^2 (small.h: where the step breaks down, the old
 * estimate and a failed test). No read. */
static int gmres_step(kr_ctx *k, gmres_ws *ws, int j)
{
    gs_engine *e = k->e;
    const gs_engine_ops *o = k->ops;
    const gs_vec *const *V = (const gs_vec *const *)ws->V;
    gs_vec *w = ws->V[j + 1];
    int status = GS_OK;
    const int scale = j == 0 ? ws->L.invbeta : ws->L.invh;
    GS_TRY(o->axpby(e, ws->on_host ? gs_coef_const(ws->hostS[scale]) : gs_coef_slot(1.0, scale),
                    ws->V[j], gs_coef_const(0), ws->V[j]));
    GS_TRY(gs_pc_apply_dot(k->pc, ws->V[j], ws->z, GS_SLOT_NONE));
    GS_TRY(o->spmv_dot(e, k->A, ws->z, w, NULL, GS_SLOT_NONE));
    GS_TRY(o->mdot(e, V, j + 1, w, ws->L.h1));        /* h1 = V' w   */
    GS_TRY(o->maxpy(e, -1.0, V, j + 1, ws->L.h1, w)); /* w -= V h1   */
    GS_TRY(o->mdot(e, V, j + 1, w, ws->L.h2));        /* h2 = V' w   */
    GS_TRY(o->maxpy(e, -1.0, V, j + 1, ws->L.h2, w)); /* w -= V h2   */
    GS_TRY(o->dot(e, w, w, ws->L.nw));
    if (ws->on_host) /* h1, h2, w'w */
        GS_TRY(o->scalar_read(e, ws->L.h1, ws->L.nw - ws->L.h1 + 1, ws->hostS + ws->L.h1));
    GS_TRY(gmres_small(k, ws, GS_SMALL_GMRES_GIVENS, j));
cleanup:
    return status;
}

/* x += M V y with R y = g over the first jn columns, M V y kept in z. A y
 * that overflows is 0 (small.h), so x stays as it was and S[yok] says so.
 * No read. */
static int gmres_apply_update(kr_ctx *k, gmres_ws *ws, int jn)
{
    int status = GS_OK;
    GS_TRY(gmres_small(k, ws, GS_SMALL_GMRES_SOLVE, jn));
    if (ws->on_host) GS_TRY(k->ops->scalar_write(k->e, ws->L.y, jn, ws->hostS + ws->L.y));
    GS_TRY(k->ops->set(k->e, ws->u, 0.0));
    GS_TRY(k->ops->maxpy(k->e, 1.0, (const gs_vec *const *)ws->V, jn, ws->L.y, ws->u));
    GS_TRY(gs_pc_apply_dot(k->pc, ws->u, ws->z, GS_SLOT_NONE));
    GS_TRY(k->ops->axpby(k->e, gs_coef_const(1), ws->z, gs_coef_const(1), ws->x));
cleanup:
    return status;
}

/* r = b - A x and S[KR_RR] = r.r: the residual a cycle restarts from, and
 * the one that confirms a cycle's claim of convergence. No read. */
static int gmres_true_residual(kr_ctx *k, gmres_ws *ws, gs_vec *r)
{
    gs_engine *e = k->e;
    int status = GS_OK;
    GS_TRY(k->ops->copy(e, ws->b, r));
    GS_TRY(k->ops->spmv_axpby(e, gs_coef_const(-1), k->A, ws->x, gs_coef_const(1), r));
    GS_TRY(k->ops->dot(e, r, r, KR_RR));
cleanup:
    return status;
}

/* The end of a cycle of j columns, after the steps stopped at iteration it
 * (broke: a step's breakdown, else NULL): x += M V y, and the breakdown's
 * check: the estimate g(j) of the last good step, or for an overflowing y
 * the residual the cycle began with (x is as it was then). */
static int gmres_cycle_end(kr_ctx *k, gmres_ws *ws, int j, const char *broke, long it,
                           int *done)
{
    kr_test t[GMRES_N_TESTS];
    double v[GMRES_READ];
    int status = GS_OK, slot = ws->L.g + j, squared = 0;
    gmres_tests(&ws->L, t);
    if (j > 0) {
        GS_TRY(gmres_apply_update(k, ws, j));
        GS_TRY(gmres_get(k, ws, KR_RR, GMRES_READ, v));
        if (kr_test_failed(t + 2, 1, v, KR_RR)) {
            broke = t[2].what;
            slot = ws->L.rr0;
            squared = 1;
        }
    }
    if (broke) {
        double g;
        GS_TRY(gmres_get(k, ws, slot, 1, &g));
        *done = kr_check_breakdown(k, it, squared ? g : g * g, broke);
    }
cleanup:
    return status;
}

/* One cycle on the host from a restart: Arnoldi steps until m, a stop or a
 * breakdown, each read and checked, then the end. *it counts the steps. */
static int gmres_cycle(kr_ctx *k, gmres_ws *ws, long *it, int *done)
{
    kr_test t[GMRES_N_TESTS];
    const char *broke = NULL;
    int status = GS_OK, j = 0;
    gmres_tests(&ws->L, t);
    while (j < ws->m && !*done) {
        double v[GMRES_READ];
        GS_TRY(gmres_step(k, ws, j));
        (*it)++;
        GS_TRY(gmres_get(k, ws, KR_RR, GMRES_READ, v));
        if ((broke = kr_test_failed(t, 2, v, KR_RR))) break;
        j++;
        *done = kr_check(k, *it, v[0]);
    }
    GS_TRY(gmres_cycle_end(k, ws, j, broke, *it, done));
cleanup:
    return status;
}

/* The device loop's steps: 0 .. m-1 are Arnoldi steps (an iteration each);
 * step m ends a whole cycle without the host (x += M V y, the true
 * residual, the restart), its check counting no iteration. */
static int gmres_device_step(kr_ctx *k, void *state, int i)
{
    gmres_ws *ws = state;
    int status = GS_OK;
    if (i < ws->m) return gmres_step(k, ws, i);
    GS_TRY(gmres_apply_update(k, ws, ws->m));
    GS_TRY(gmres_true_residual(k, ws, ws->V[0]));
    GS_TRY(gmres_restart(k, ws, 0.0)); /* on the engine: ||r||^2 from S[KR_RR] */
cleanup:
    return status;
}

/* Cycles on the device from a restart at iteration *it, where the engine
 * can. A check at the end of a cycle (phase 1) is final: it judged the
 * true residual. A check within one stopped it after jn steps: the host
 * ends that cycle as its own loop would (*done set, then gmres_cycle_end). */
static int gmres_device_loop(kr_ctx *k, gmres_ws *ws, long *it, int *ran, int *final)
{
    kr_test t[GMRES_N_TESTS];
    int status = GS_OK;
    int *its = NULL;
    long it_done = *it;
    *ran = *final = 0;
    if (ws->on_host || ws->host_only) return GS_OK;
    its = gs_malloc((size_t)(ws->m + 1) * sizeof(int), "gmres steps", &k->e->err);
    if (!its) return GS_ERR_NOMEM;
    for (int i = 0; i <= ws->m; i++) its[i] = i < ws->m;
    gmres_tests(&ws->L, t);
    const long left = k->opts->maxit - *it, checks = left + left / ws->m + 1;
    GS_TRY(kr_device_steps(k, *it, ws->m + 1, gmres_device_step, ws, its, checks, t,
                           GMRES_N_TESTS, &it_done, ran));
    if (!*ran) { /* the host loop from here on, its state on the host */
        ws->host_only = 1;
        GS_TRY(gmres_to_host(k, ws));
        goto cleanup;
    }
    *it = it_done;
    double ph[4]; /* jn .. phase (small.h) */
    GS_TRY(gmres_get(k, ws, ws->L.jn, ws->L.phase - ws->L.jn + 1, ph));
    if (ph[ws->L.phase - ws->L.jn] != 0.0) {
        *final = 1;
        goto cleanup;
    }
    int done = 1; /* a step's breakdown is judged and recorded: only an overflowing y is left */
    GS_TRY(gmres_cycle_end(k, ws, (int)ph[0], NULL, *it, &done));
cleanup:
    free(its);
    return status;
}

/* Restarted cycles. A cycle whose estimate reaches tol is confirmed by the
 * true residual b - A x (one spmv per claim). If it disagrees, the next
 * cycle restarts from the true residual, as any restart does, when the
 * cycle lowered it (rounding drift: a restart recovers); when the cycle did
 * not, restarting would rebuild the same space of a numerically singular
 * A M, so the update is undone and the gap reported as a breakdown. */
static int gmres_cycles(kr_ctx *k, gmres_ws *ws)
{
    gs_engine *e = k->e;
    gs_krylov_result *res = k->res;
    int status = GS_OK, done = 0;
    long it = 0;
    char what[sizeof res->breakdown];
    GS_TRY(kr_initial_residual(k, ws->b, ws->x, ws->V[0], &done));
    const double yok = 1.0; /* no least-squares solve has overflowed */
    if (ws->on_host) ws->hostS[ws->L.yok] = yok;
    else GS_TRY(k->ops->scalar_write(e, ws->L.yok, 1, &yok));
    double rr;
    GS_TRY(k->ops->scalar_read(e, KR_RR, 1, &rr));
    while (!done) {
        int ran = 0, final = 0;
        GS_TRY(gmres_restart(k, ws, rr));
        GS_TRY(gmres_device_loop(k, ws, &it, &ran, &final));
        if (final) break;
        if (ran) done = 1; /* stopped within a cycle, which the host ended */
        else GS_TRY(gmres_cycle(k, ws, &it, &done));
        if (done && res->reason != GS_REASON_CONVERGED) break;
        const int claimed = done;
        double rr0; /* the cycle's start (the device loop may have restarted since ours) */
        GS_TRY(gmres_get(k, ws, ws->L.rr0, 1, &rr0));
        const double start_rel = sqrt(rr0) / k->bnorm;
        GS_TRY(gmres_true_residual(k, ws, ws->V[0]));
        GS_TRY(k->ops->scalar_read(e, KR_RR, 1, &rr));
        done = kr_check_true(k, it, rr);
        const int confirmed = done && res->reason == GS_REASON_CONVERGED;
        if (claimed && !confirmed && !(res->rel_residual < start_rel)) {
            GS_TRY(k->ops->axpby(e, gs_coef_const(-1), ws->z, gs_coef_const(1), ws->x));
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
    int status = kr_init(&k, e, A, pc, opts, res);
    const int64_t n = gs_vec_length(b);
    k.repeat_is_true = 1; /* the device loop's cycle ends judge b - A x */
    ws.m = opts->restart;
    int max_m = 1;
    while (gs_small_gmres_layout(KR_FREE, max_m + 1).end <= GS_MAX_SCALARS) max_m++;
    if (ws.m < 1 || ws.m > max_m) {
        status = gs_error_set(&e->err, GS_ERR_USAGE, "--restart %d outside [1, %d]", ws.m, max_m);
        goto cleanup;
    }
    ws.L = gs_small_gmres_layout(KR_FREE, ws.m);
    ws.on_host = !opts->use_capture || !e->ops->loop_run; /* else the engine's, at first */
    ws.hostS = gs_calloc((size_t)ws.L.end, sizeof(double), "gmres small state", &e->err);
    if (!ws.hostS) {
        status = GS_ERR_NOMEM;
        goto cleanup;
    }
    ws.b = b;
    ws.x = x;
    ws.V = gs_calloc((size_t)ws.m + 1, sizeof *ws.V, "gmres basis", &e->err);
    if (!ws.V) {
        status = GS_ERR_NOMEM;
        goto cleanup;
    }
    for (int i = 0; i <= ws.m; i++) GS_TRY(e->ops->vec_create(e, n, &ws.V[i]));
    GS_TRY(e->ops->vec_create(e, n, &ws.z));
    GS_TRY(e->ops->vec_create(e, n, &ws.u));
    GS_TRY(gmres_cycles(&k, &ws));
cleanup:
    res->spmv_count = res->iterations + 1;
    res->pc_apply_count = res->iterations;
    kr_finish(&k);
    for (int i = 0; ws.V && i <= ws.m; i++) e->ops->vec_destroy(e, ws.V[i]);
    e->ops->vec_destroy(e, ws.z);
    e->ops->vec_destroy(e, ws.u);
    free(ws.V);
    free(ws.hostS);
    return status;
}
