/* check_cuda_spai.c - the CUDA setups of spai (CW-SPAI) and gspai-opt
 * (cuda/precond/spai*.cu, gspai.cu) against the CPU references
 * (src/precond/pc_spai.c, pc_gspai.c: the oracle). Generated and real
 * matrices, columns on both sides of every size threshold of the batched
 * least-squares engine (the group sizes 4 .. 256 and the shared-memory
 * limit, moved down by the debug switch spai_shared_cap so that small inputs
 * cross it), S1 and S2 forced, fp32 storage, BiCGSTAB iterations, bad input
 * (same status and message as the CPU), the cuSOLVER path of the largest
 * columns (its threshold moved by the debug switch spai_cusolver_work). The device heap is filled with NaN
 * before each setup. Without a CUDA device the suite says "skipped" and
 * passes.
 *
 * Tolerances:
 * - patterns: J_k is integer work (eq. (1) with the reference's expressions,
 *   or a symbolic pattern power): equal exactly.
 * - values, column by column: both setups solve min ||Â_k m - e_k|| by
 *   Householder QR, in different operation orders, so each is within the
 *   LS perturbation bound of the exact m (tu_lsq_tolerance: 10 n1 n2 u
 *   (2 kappa + kappa^2 tan theta), Wedin/Higham, with kappa and tan theta of
 *   this very Â_k from the long-double oracle); their difference within
 *   twice that, relative to ||m_k||. The bound is only computed for a column
 *   that misses the cheap 64 n1 n2 u.
 * - the GPU engine's arithmetic does not depend on the group size, the
 *   kernel or the strategy (spai_lsq.cu): S1 against S2, shared against
 *   global memory, give the same M to the bit.
 * - fp32: M stored in single precision is the fp64 M rounded once.
 * - n1_k: the sizes pass (which sizes the workspaces) and the solve count it
 *   separately; the setup fails (GS_ERR_INTERNAL) where they differ, so every
 *   successful setup here checks the sizes pass's count on every column. */
#include <math.h>
#include <string.h>

#include "debug.h"
#include "engine.h"
#include "gen.h"
#include "krylov.h"
#include "precond.h"
#include "spai_common.h"
#include "testutil.h"
#if GS_HAVE_CUDA
#include "../cuda/precond/spai_hooks.h"
#endif

#define U64 (DBL_EPSILON / 2)

static gs_engine *gpu;
static gs_debug debug_switches;
static void use_debug(void) { gs_engine_cuda_set_debug(gpu, &debug_switches); }
static int64_t qr_max_now;
static void reset_debug(void)
{
    qr_max_now = GS_SPAI_QR_MAX_DEFAULT;
    memset(&debug_switches, 0, sizeof debug_switches);
    if (gpu) use_debug();
}
static double worst_ratio; /* largest |m_gpu - m_cpu| / allowed seen */

typedef struct pc_out {
    int status;
    gs_error err;
    gs_csr M;
    char kernels[GS_KV_STR_LEN], strategy[GS_KV_STR_LEN], transpose[GS_KV_STR_LEN];
    double n1max, n2max, n2avg;
    char stages[256];
} pc_out;

static void poison_device_heap(void)
{
    gs_vec *v[8] = {0};
    for (int i = 0; i < 8; i++) {
        if (gpu->ops->vec_create(gpu, (int64_t)4 << 20, &v[i]) != GS_OK) break;
        ck_assert_int_eq(gpu->ops->set(gpu, v[i], NAN), GS_OK);
    }
    ck_assert_int_eq(gpu->ops->sync(gpu), GS_OK);
    for (int i = 0; i < 8; i++) gpu->ops->vec_destroy(gpu, v[i]);
    gs_error_clear(&gpu->err);
}

/* a_mode: 0 A from mat_create, 1 no engine copy (the setup uploads A),
 * 2 mat_create_system (the engine keeps A's CSR until setup_done). */
static pc_out pc_on(gs_engine *e, const char *name, const gs_csr *A, const gs_params *p,
                    int a_mode)
{
    pc_out o;
    memset(&o, 0, sizeof o);
    gs_engine *cpu = NULL;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    if (!e) {
        ck_assert_int_eq(gs_engine_cpu_create(&cpu, &o.err), GS_OK);
        e = cpu;
    } else {
        poison_device_heap();
    }
    const size_t base = e->device_bytes_now;
    if (a_mode == 2 && e->ops->mat_create_system)
        ck_assert_msg(e->ops->mat_create_system(e, A, &Ae) == GS_OK, "%s", e->err.msg);
    else
        ck_assert_msg(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK, "%s", e->err.msg);
    o.status = gs_pc_create(gs_pc_find(name), e, p, A, a_mode == 1 ? NULL : Ae, &pc, &o.err);
    if (o.status == GS_OK) {
        tu_pc_saved_matrix(pc, "M", &o.M);
        ck_assert_int_eq(o.M.nnz, pc->nnz);
        const gs_kv *kv = tu_pc_extra(pc, "kernels");
        if (kv) snprintf(o.kernels, sizeof o.kernels, "%s", kv->str);
        kv = tu_pc_extra(pc, "strategy");
        if (kv) snprintf(o.strategy, sizeof o.strategy, "%s", kv->str);
        kv = tu_pc_extra(pc, "transpose");
        if (kv) snprintf(o.transpose, sizeof o.transpose, "%s", kv->str);
        ck_assert_ptr_null(tu_pc_extra(pc, "setup")); /* not setup=host */
        o.n1max = tu_pc_extra(pc, "n1max")->num;
        o.n2max = tu_pc_extra(pc, "n2max")->num;
        o.n2avg = tu_pc_extra(pc, "n2avg")->num;
        size_t used = 0;
        for (int i = 0; i < pc->stages.count && used < sizeof o.stages; i++)
            used += (size_t)snprintf(o.stages + used, sizeof o.stages - used, "%s;",
                                     pc->stages.stage[i].name);
    }
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    ck_assert_msg(e->device_bytes_now == base, "device bytes leaked: %zu now, %zu before",
                  e->device_bytes_now, base);
    gs_error_clear(&e->err);
    gs_engine_destroy(cpu);
    return o;
}

static void out_free(pc_out *o) { gs_csr_free(&o->M); }

/* I_k and Â_k = A(I_k, J) of column k (AT: A^T on the host), rhs e_k(I). */
static int local_problem(const gs_csr *AT, int32_t k, const int32_t *J, int n2, int32_t *local,
                         int32_t *rows, double *Ahat, double *rhs)
{
    int n1 = 0;
    for (int a = 0; a < n2; a++)
        for (int64_t p = AT->row_ptr[J[a]]; p < AT->row_ptr[J[a] + 1]; p++)
            if (local[AT->col[p]] < 0) local[AT->col[p]] = n1, rows[n1++] = AT->col[p];
    memset(Ahat, 0, (size_t)n1 * n2 * sizeof *Ahat);
    for (int a = 0; a < n2; a++)
        for (int64_t p = AT->row_ptr[J[a]]; p < AT->row_ptr[J[a] + 1]; p++)
            Ahat[(size_t)a * n1 + local[AT->col[p]]] = AT->val[p];
    for (int i = 0; i < n1; i++) rhs[i] = rows[i] == k;
    for (int i = 0; i < n1; i++) local[rows[i]] = -1;
    return n1;
}

/* GPU M against the CPU's: patterns exactly, columns within the LS bound
 * (the normal equations' columns are the same bits on both engines: within
 * it too; CGLS's within 1e-6, below). qr_max_now: the --qr-max of the
 * setups compared (a test that passes another sets it), for the routes. */
static void compare(const gs_csr *A, const gs_csr *Mg, const gs_csr *Mc, const char *label)
{
    gs_csr MTg = {0}, MTc = {0}, AT = {0};
    gs_error err = {0};
    ck_assert_msg(Mg->n_rows == Mc->n_rows && Mg->nnz == Mc->nnz,
                  "%s: GPU M has %lld entries, the CPU's %lld", label, (long long)Mg->nnz,
                  (long long)Mc->nnz);
    ck_assert(gs_csr_transpose(Mg, &MTg, &err) == GS_OK);
    ck_assert(gs_csr_transpose(Mc, &MTc, &err) == GS_OK);
    ck_assert(gs_csr_transpose(A, &AT, &err) == GS_OK);
    const int32_t n = A->n_rows;
    int32_t *local = malloc((size_t)n * sizeof *local + 4), *rows = malloc((size_t)n * sizeof *rows + 4);
    ck_assert(local && rows);
    for (int32_t i = 0; i < n; i++) local[i] = -1;
    for (int32_t k = 0; k < n; k++) {
        const int64_t a0 = MTg.row_ptr[k], b0 = MTc.row_ptr[k];
        const int n2 = (int)(MTc.row_ptr[k + 1] - b0);
        ck_assert_msg(MTg.row_ptr[k + 1] - a0 == n2, "%s: column %d: GPU |J| = %lld, CPU %d",
                      label, (int)k + 1, (long long)(MTg.row_ptr[k + 1] - a0), n2);
        double diff = 0, norm = 0;
        for (int t = 0; t < n2; t++) {
            ck_assert_msg(MTg.col[a0 + t] == MTc.col[b0 + t], "%s: column %d: J differs at %d",
                          label, (int)k + 1, t);
            const double d = MTg.val[a0 + t] - MTc.val[b0 + t];
            ck_assert_msg(d == d, "%s: column %d: NaN in the GPU's M", label, (int)k + 1);
            diff += d * d, norm += MTc.val[b0 + t] * MTc.val[b0 + t];
        }
        diff = sqrt(diff), norm = sqrt(norm);
        if (diff <= 64.0 * n2 * n2 * U64 * norm) continue; /* n1 >= n2: cheaper than the bound */
        int64_t nc = 0, n1c = -1;
        for (int t = 0; t < n2; t++) nc += AT.row_ptr[MTc.col[b0 + t] + 1] - AT.row_ptr[MTc.col[b0 + t]];
        if (GS_SPAI_N1_COUNTED((int64_t)n2, nc)) { /* |I_k|, as the route counts it */
            n1c = 0;
            for (int t = 0; t < n2; t++)
                for (int64_t p = AT.row_ptr[MTc.col[b0 + t]]; p < AT.row_ptr[MTc.col[b0 + t] + 1]; p++)
                    if (local[AT.col[p]] < 0) local[AT.col[p]] = 0, rows[n1c++] = AT.col[p];
            for (int64_t i = 0; i < n1c; i++) local[rows[i]] = -1;
        }
        if (gs_spai_route(n2, nc, n1c, qr_max_now) == GS_SPAI_ROUTE_CGLS) {
            /* CGLS (spai_large.*): both engines iterate until ||Â^T r|| falls
             * by GS_SPAI_CGLS_TOL, summing in other orders; each iterate is
             * then within about kappa 1e-8 of the other engine's */
            ck_assert_msg(diff <= 1e-6 * norm, "%s: CGLS column %d: ||m_gpu - m_cpu|| = %.3g ||m||",
                          label, (int)k + 1, diff / norm);
            continue;
        }
        int n1 = 0;
        for (int t = 0; t < n2; t++) n1 += (int)(AT.row_ptr[MTc.col[b0 + t] + 1] - AT.row_ptr[MTc.col[b0 + t]]);
        double *Ahat = malloc((size_t)n1 * n2 * sizeof *Ahat + 8), *rhs = malloc((size_t)n1 * sizeof *rhs + 8);
        double *x = malloc((size_t)n2 * sizeof *x + 8);
        ck_assert(Ahat && rhs && x);
        n1 = local_problem(&AT, k, MTc.col + b0, n2, local, rows, Ahat, rhs);
        double kappa = INFINITY, tan_theta = INFINITY;
        const int ok = tu_lsq_reference(n1, n2, Ahat, rhs, x, &kappa, &tan_theta);
        const double allowed = ok ? 2.0 * tu_lsq_tolerance(n1, n2, kappa, tan_theta) * norm : INFINITY;
        ck_assert_msg(diff <= allowed,
                      "%s: column %d (%d x %d, kappa <= %.3g): ||m_gpu - m_cpu|| = %.3g > %.3g",
                      label, (int)k + 1, n1, n2, kappa, diff, allowed);
        if (isfinite(allowed) && allowed > 0 && diff / allowed > worst_ratio) worst_ratio = diff / allowed;
        free(Ahat), free(rhs), free(x);
    }
    free(local), free(rows);
    gs_csr_free(&MTg), gs_csr_free(&MTc), gs_csr_free(&AT);
}

static gs_params params2(const char *n1, const char *v1, const char *n2, const char *v2)
{
    gs_params p = {0};
    gs_error err = {0};
    if (n1) ck_assert(gs_params_set(&p, n1, v1, &err) == GS_OK);
    if (n2) ck_assert(gs_params_set(&p, n2, v2, &err) == GS_OK);
    return p;
}

/* params2 with --qr-max q too (and qr_max_now, for compare). */
static gs_params params_qr(const char *n1, const char *v1, const char *n2, const char *v2,
                           const char *q)
{
    gs_params p = params2(n1, v1, n2, v2);
    gs_error err = {0};
    ck_assert(gs_params_set(&p, "qr-max", q, &err) == GS_OK);
    qr_max_now = strtoll(q, NULL, 10);
    return p;
}
#define QR_ALL "2147483647" /* every column by QR: the paths before the normal equations */

/* The GPU setup against the CPU's on A; returns the GPU's output. */
static pc_out against_cpu(const char *name, const gs_csr *A, const gs_params *p, int a_mode,
                          const char *label)
{
    pc_out g = pc_on(gpu, name, A, p, a_mode), c = pc_on(NULL, name, A, p, 0);
    ck_assert_msg(c.status == GS_OK, "%s: CPU: %s", label, c.err.msg);
    ck_assert_msg(g.status == GS_OK, "%s: GPU: %s", label, g.err.msg);
    compare(A, &g.M, &c.M, label);
    ck_assert_msg(g.n2max == c.n2max && g.n1max == c.n1max && fabs(g.n2avg - c.n2avg) <= 1e-12 * c.n2avg,
                  "%s: sizes n1max %g n2max %g n2avg %g, CPU %g %g %g", label, g.n1max, g.n2max,
                  g.n2avg, c.n1max, c.n2max, c.n2avg);
    ck_assert_msg(strcmp(g.stages, c.stages) == 0 ||
                      (strstr(g.stages, "pattern;") && strstr(g.stages, "least squares;")),
                  "%s: stages '%s', CPU '%s'", label, g.stages, c.stages);
    if (strcmp(name, "gspai-opt") == 0)
        ck_assert_msg(strcmp(g.strategy, c.strategy) == 0, "%s: strategy %s, CPU %s", label,
                      g.strategy, c.strategy);
    out_free(&c);
    return g;
}

/* A banded matrix in runs of 30 columns: the columns of run r hold
 * len[r % count] entries, the diagonal (dominant) and the rows nearest to
 * it (k+1, k-1, k+2, ...), so that n2_k = len (gspai-opt k = 1, spai tau = 1)
 * takes the given values on both sides of each group size while I_k stays
 * an interval of about 2 len rows: small columns fit the shared-memory
 * kernels, the long ones do not. */
static gs_csr columns_of_lengths(int32_t n, const int *len, int count, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    int64_t cap = 0;
    for (int32_t k = 0; k < n; k++) cap += len[(k / 30) % count] + 1;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int32_t k = 0; k < n; k++) {
        const int want = len[(k / 30) % count] < n ? len[(k / 30) % count] : n;
        ri[nz] = k, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 2 + want, 3 + want);
        int placed = 1;
        for (int32_t d = 1; placed < want && d < n; d++) {
            if (k + d < n && placed < want)
                ri[nz] = k + d, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 0.1, 1.0), placed++;
            if (k - d >= 0 && placed < want)
                ri[nz] = k - d, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 0.1, 1.0), placed++;
        }
    }
    gs_csr A = tu_from_triplets(n, n, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* A band of half-width h (columns of 2h + 1 entries, the diagonal dominant)
 * with probe columns at 40 i + 10 that reach L[i] - 1 rows below the
 * diagonal (rows p+h+1 .. p+L-1 added): the probe's J (gspai-opt k = 1,
 * spai tau = 1) is rows p-h .. p+L-1, n2 = h + L, its lists mostly the
 * band's columns: nc = (h + L)(2h + 1) + L - h - 1 or so. Chosen so that n2
 * and nc fall on both sides of the sizes pass's register path (n2 <= 32,
 * nc <= 256). */
static gs_csr band_with_probes(int h, const int *L, int count, uint64_t seed)
{
    const int32_t n = 40 * count + 40;
    tu_rng r = tu_rng_seed(seed);
    int64_t cap = (int64_t)n * (2 * h + 1);
    for (int i = 0; i < count; i++) cap += L[i];
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int32_t k = 0; k < n; k++) {
        ri[nz] = k, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 4.0 + 2 * h, 5.0 + 2 * h);
        for (int d = 1; d <= h; d++) {
            if (k + d < n) ri[nz] = k + d, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 0.1, 1.0);
            if (k - d >= 0) ri[nz] = k - d, ci[nz] = k, v[nz++] = tu_rand_signed(&r, 0.1, 1.0);
        }
    }
    for (int i = 0; i < count; i++)
        for (int32_t row = 40 * i + 10 + h + 1; row < 40 * i + 10 + L[i]; row++)
            ri[nz] = row, ci[nz] = 40 * i + 10, v[nz++] = tu_rand_signed(&r, 0.1, 0.5);
    gs_csr A = tu_from_triplets(n, n, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_device_or_skip)
{
    if (!gpu) printf("check_cuda_spai: skipped: no CUDA device\n");
}
END_TEST

START_TEST(test_generated)
{
    const char *specs[] = {"convdiff3d:12", "poisson3d:11", "poisson3d27:7"};
    const char *taus[] = {"0.7", "0.9", "1"};
    char label[128];
    for (int s = 0; s < 3; s++) {
        gs_csr A = tu_generated(specs[s]);
        for (int t = 0; t < 3; t++) {
            gs_params p = params2("tau", taus[t], NULL, NULL);
            snprintf(label, sizeof label, "spai %s tau %s", specs[s], taus[t]);
            pc_out g = against_cpu("spai", &A, &p, t, label);
            /* 3-D stencils: A^T's pattern is A's, found without a sort */
            ck_assert_msg(strcmp(g.transpose, "pattern-symmetric") == 0, "%s: transpose %s", label,
                          g.transpose);
            /* CW-SPAI's warp a column: the same M to the bit as the default */
            gs_params pw = params2("tau", taus[t], "group-size", "warp");
            pc_out w = pc_on(gpu, "spai", &A, &pw, 0);
            ck_assert_msg(w.status == GS_OK, "%s, warp: %s", label, w.err.msg);
            ck_assert_msg(strncmp(w.kernels, "q32:", 4) == 0,
                          "%s, warp: kernels %s", label, w.kernels);
            if (strcmp(specs[s], "poisson3d:11") == 0 && strcmp(taus[t], "1") == 0)
                ck_assert_msg(strncmp(g.kernels, "q8:", 3) == 0, /* n2max = 7: alpha = 3 */
                              "%s: auto chose %s", label, g.kernels);
            snprintf(label + strlen(label), sizeof label - strlen(label), ": auto (%s) against warp",
                     g.kernels);
            tu_assert_same_csr(&g.M, &w.M, label);
            out_free(&g), out_free(&w);
        }
        for (int k = 1; k <= 2; k++) {
            gs_params p = params2("pattern-power", k == 1 ? "1" : "2", NULL, NULL);
            snprintf(label, sizeof label, "gspai-opt %s k %d", specs[s], k);
            pc_out g = against_cpu("gspai-opt", &A, &p, k, label);
            out_free(&g);
        }
        gs_csr_free(&A);
    }
}
END_TEST

/* Columns with n2 on both sides of every group size (4 .. 256) and of the
 * shared-memory limit (large columns take the global kernel by themselves),
 * S1 and S2 forced: both against the CPU, and S1 = S2 to the bit. */
START_TEST(test_every_size_class)
{
    const int lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                        255, 256, 257, 300, 6, 5, 4, 3, 2};
    gs_csr A = columns_of_lengths(30 * 28 + 17, lens, (int)(sizeof lens / sizeof lens[0]), 11);
    /* every column by QR (--qr-max 2^31 - 1): the global kernel takes what shared memory
     * does not hold; by default (the routes) those take the normal equations instead */
    gs_params s2d = params2("strategy", "s2", NULL, NULL);
    pc_out g0 = against_cpu("gspai-opt", &A, &s2d, 0, "size classes, S2, the routes");
    ck_assert_msg(strstr(g0.kernels, "ne:") != NULL && strstr(g0.kernels, "global:") == NULL,
                  "the routes sent a column to the global kernel: %s", g0.kernels);
    out_free(&g0);
    gs_params s1 = params_qr("strategy", "s1", NULL, NULL, QR_ALL);
    gs_params s2 = params_qr("strategy", "s2", NULL, NULL, QR_ALL);
    pc_out g1 = against_cpu("gspai-opt", &A, &s1, 0, "size classes, S1");
    pc_out g2 = against_cpu("gspai-opt", &A, &s2, 0, "size classes, S2");
    ck_assert_str_eq(g1.strategy, "S1");
    ck_assert_str_eq(g2.strategy, "S2");
    ck_assert_str_eq(g1.transpose, "sorted"); /* the columns' patterns are not the rows' */
    ck_assert_msg(strstr(g2.kernels, "global:") != NULL, "no column took the global kernel: %s",
                  g2.kernels);
    ck_assert_msg(strstr(g2.kernels, "q4:") && strstr(g2.kernels, "q8:"),
                  "S2 did not use the small groups in shared memory: %s", g2.kernels);
    printf("size classes: S1 %s; S2 %s\n", g1.kernels, g2.kernels);
    tu_assert_same_csr(&g1.M, &g2.M, "S1 against S2");
    /* spai (tau = 1: J = the column's nonzeros, the same sizes) */
    gs_params t1 = params_qr("tau", "1", NULL, NULL, QR_ALL);
    pc_out g3 = against_cpu("spai", &A, &t1, 0, "size classes, spai tau 1");
    gs_params tw = params_qr("tau", "1", "group-size", "warp", QR_ALL);
    pc_out g4 = pc_on(gpu, "spai", &A, &tw, 0);
    ck_assert_msg(g4.status == GS_OK, "spai warp: %s", g4.err.msg);
    printf("size classes: spai auto %s (%s); warp %s\n", g3.kernels, g3.strategy, g4.kernels);
    tu_assert_same_csr(&g3.M, &g4.M, "size classes, spai auto against warp");
    out_free(&g1), out_free(&g2), out_free(&g3), out_free(&g4);
    gs_csr_free(&A);
}
END_TEST

/* The sizes pass's register path (n2 <= 32 lists, nc <= 256 candidates)
 * and its binary-search path on both sides of each bound: h = 1 puts the
 * probes at n2 = 31, 32 (registers), 33, 34 (searches) with nc ~ 4 n2;
 * h = 3 at n2 = 32 with nc ~ 249 (registers) and n2 = 33 (searches); h = 4
 * at n2 = 32 with nc ~ 311 (searches) and n2 = 28, nc ~ 270 (searches)
 * beside the band's own columns (n2 = 9, nc = 81: registers). n1 and M
 * against the CPU; a count that differed from the solve's would fail the
 * setup. */
START_TEST(test_sizes_paths)
{
    const int h[] = {1, 3, 4};
    const int L1[] = {30, 31, 32, 33}, L3[] = {29, 30}, L4[] = {28, 24};
    const int *Ls[] = {L1, L3, L4};
    const int counts[] = {4, 2, 2};
    gs_params k1 = params2("pattern-power", "1", NULL, NULL), t1 = params2("tau", "1", NULL, NULL);
    for (int b = 0; b < 3; b++) {
        gs_csr A = band_with_probes(h[b], Ls[b], counts[b], 17 + (uint64_t)b);
        char label[96];
        snprintf(label, sizeof label, "sizes paths, h %d, gspai-opt", h[b]);
        pc_out g = against_cpu("gspai-opt", &A, &k1, 0, label);
        snprintf(label, sizeof label, "sizes paths, h %d, spai tau 1", h[b]);
        pc_out s = against_cpu("spai", &A, &t1, 0, label);
        out_free(&g), out_free(&s);
        gs_csr_free(&A);
    }
}
END_TEST

/* The shared-memory limit moved (spai_shared_cap) so that generated
 * columns fall on both sides of it, and to 1 (every column global): the
 * same M to the bit as with the device's own limit. */
START_TEST(test_shared_limit)
{
    const char *specs[] = {"convdiff3d:9", "poisson3d27:6"};
    const long long caps[] = {1, 1200, 2100, 4000};
    for (int s = 0; s < 2; s++) {
        gs_csr A = tu_generated(specs[s]);
        for (int which = 0; which < 2; which++) {
            const char *name = which ? "gspai-opt" : "spai";
            gs_params p = which ? params2("pattern-power", "2", NULL, NULL) : params2("tau", "1", NULL, NULL);
            reset_debug();
            pc_out ref = pc_on(gpu, name, &A, &p, 0);
            ck_assert_msg(ref.status == GS_OK, "%s: %s", name, ref.err.msg);
            for (int c = 0; c < 4; c++) {
                debug_switches.spai_shared_cap = caps[c];
                use_debug();
                pc_out g = pc_on(gpu, name, &A, &p, 0);
                ck_assert_msg(g.status == GS_OK, "%s cap %lld: %s", name, caps[c], g.err.msg);
                if (caps[c] == 1)
                    ck_assert_msg(strncmp(g.kernels, "global:", 7) == 0, "cap 1: %s", g.kernels);
                char label[96];
                snprintf(label, sizeof label, "%s %s, shared cap %lld (%s)", name, specs[s], caps[c],
                         g.kernels);
                tu_assert_same_csr(&ref.M, &g.M, label);
                out_free(&g);
            }
            reset_debug();
            out_free(&ref);
        }
        gs_csr_free(&A);
    }
}
END_TEST

/* A dense row and a dense column: one column with I = everything, one row
 * in every I (the global kernel's marker path, long candidate lists). */
START_TEST(test_dense_row_and_column)
{
    tu_rng r = tu_rng_seed(5);
    const int32_t n = 1500;
    gs_csr B = tu_random_matrix(&r, n, 2);
    int32_t *ri = malloc(((size_t)B.nnz + 2 * n) * sizeof *ri), *ci = malloc(((size_t)B.nnz + 2 * n) * sizeof *ci);
    double *v = malloc(((size_t)B.nnz + 2 * n) * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = B.row_ptr[i]; p < B.row_ptr[i + 1]; p++)
            if (B.col[p] != 7 && i != 11) ri[nz] = i, ci[nz] = B.col[p], v[nz++] = B.val[p];
    for (int32_t i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = 7, v[nz++] = i == 7 ? 50.0 : tu_rand_signed(&r, 0.01, 0.1);
        if (i != 7) ri[nz] = 11, ci[nz] = i, v[nz++] = i == 11 ? 50.0 : tu_rand_signed(&r, 0.01, 0.1);
    }
    gs_csr A = tu_from_triplets(n, n, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    gs_params t9 = params2("tau", "0.9", NULL, NULL), t1 = params2("tau", "1", NULL, NULL);
    gs_params k1 = params2("pattern-power", "1", NULL, NULL);
    pc_out a = against_cpu("spai", &A, &t9, 0, "dense row and column, spai 0.9");
    pc_out b = against_cpu("spai", &A, &t1, 0, "dense row and column, spai 1");
    pc_out c = against_cpu("gspai-opt", &A, &k1, 0, "dense row and column, gspai-opt");
    /* column 7 of M: J = all 1500 rows, so CGLS */
    ck_assert_msg(strstr(c.kernels, "cgls:1") != NULL, "the dense column missed CGLS: %s", c.kernels);
    gs_params q1 = params_qr("pattern-power", "1", NULL, NULL, QR_ALL);
    pc_out d = against_cpu("gspai-opt", &A, &q1, 0, "dense row and column, gspai-opt, QR only");
    ck_assert_msg(strstr(d.kernels, "global:") != NULL || strstr(d.kernels, "cusolver:") != NULL,
                  "the dense column stayed shared: %s", d.kernels);
    out_free(&a), out_free(&b), out_free(&c), out_free(&d);
    gs_csr_free(&A), gs_csr_free(&B);
}
END_TEST

START_TEST(test_real)
{
    if (!tu_matrices_dir()) {
        printf("test_real: skipped (no ../shared/matrices; set GS_MATRICES)\n");
        return;
    }
    const char *names[] = {"pores_1", "cage5", "fs_183_1", "arc130", "steam1", "orsirr_1",
                           "sherman5", "add20"};
    char label[96];
    for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
        gs_csr A = tu_read_matrix(names[m]);
        gs_params t9 = params2("tau", "0.9", NULL, NULL), t7 = params2("tau", "0.7", NULL, NULL);
        gs_params k1 = params2("pattern-power", "1", NULL, NULL);
        snprintf(label, sizeof label, "%s spai 0.9", names[m]);
        pc_out a = against_cpu("spai", &A, &t9, 2, label);
        snprintf(label, sizeof label, "%s spai 0.7", names[m]);
        pc_out b = against_cpu("spai", &A, &t7, 0, label);
        snprintf(label, sizeof label, "%s gspai-opt k 1", names[m]);
        pc_out c = against_cpu("gspai-opt", &A, &k1, 2, label);
        out_free(&a), out_free(&b), out_free(&c);
        if (A.n_rows <= 1200) {
            gs_params k2 = params2("pattern-power", "2", NULL, NULL);
            snprintf(label, sizeof label, "%s gspai-opt k 2", names[m]);
            pc_out d = against_cpu("gspai-opt", &A, &k2, 0, label);
            out_free(&d);
        }
        gs_csr_free(&A);
    }
}
END_TEST

/* fp32 storage: the fp64 M rounded once, entry by entry. */
START_TEST(test_single_precision)
{
    gs_csr A = tu_generated("convdiff3d:8");
    gs_params p64 = params2("tau", "0.9", NULL, NULL);
    gs_params p32 = params2("tau", "0.9", "precond-precision", "single");
    pc_out a = pc_on(gpu, "spai", &A, &p64, 0), b = pc_on(gpu, "spai", &A, &p32, 0);
    ck_assert(a.status == GS_OK && b.status == GS_OK);
    ck_assert_int_eq(a.M.nnz, b.M.nnz);
    for (int64_t q = 0; q < a.M.nnz; q++) {
        ck_assert_int_eq(a.M.col[q], b.M.col[q]);
        ck_assert_msg(b.M.val[q] == (double)(float)a.M.val[q], "entry %lld: %.17g, want %.17g",
                      (long long)q, b.M.val[q], (double)(float)a.M.val[q]);
    }
    out_free(&a), out_free(&b);
    gs_csr_free(&A);
}
END_TEST

static long bicgstab_iterations(gs_engine *e, const gs_csr *A, const char *name, const gs_params *p)
{
    gs_engine *cpu = NULL;
    gs_error err = {0};
    if (!e) {
        ck_assert(gs_engine_cpu_create(&cpu, &err) == GS_OK);
        e = cpu;
    }
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_vec *b = NULL, *x = NULL;
    const int32_t n = A->n_rows;
    double *ones = malloc((size_t)n * sizeof *ones), *rhs = malloc((size_t)n * sizeof *rhs);
    ck_assert(ones && rhs);
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(A, ones, rhs);
    ck_assert(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK);
    ck_assert_msg(gs_pc_create(gs_pc_find(name), e, p, A, Ae, &pc, &err) == GS_OK, "%s", err.msg);
    ck_assert(e->ops->vec_create(e, n, &b) == GS_OK && e->ops->vec_create(e, n, &x) == GS_OK);
    ck_assert(e->ops->vec_upload(e, b, rhs) == GS_OK && e->ops->set(e, x, 0.0) == GS_OK);
    gs_krylov_opts opts = {.tol = 1e-8, .maxit = 2000, .restart = 30, .idr_s = 4, .check_every = 1};
    gs_krylov_result res;
    memset(&res, 0, sizeof res);
    ck_assert(gs_method_find("bicgstab")->solve(e, Ae, pc, b, x, &opts, &res) == GS_OK);
    ck_assert_msg(res.reason == GS_REASON_CONVERGED, "%s did not converge", name);
    const long it = res.iterations;
    gs_krylov_result_free(&res);
    e->ops->vec_destroy(e, b), e->ops->vec_destroy(e, x);
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    gs_engine_destroy(cpu);
    free(ones), free(rhs);
    return it;
}

START_TEST(test_bicgstab_iterations)
{
    gs_csr A = tu_generated("convdiff3d:16");
    gs_params t9 = params2("tau", "0.9", NULL, NULL), k1 = params2("pattern-power", "1", NULL, NULL);
    for (int w = 0; w < 2; w++) {
        const char *name = w ? "gspai-opt" : "spai";
        const gs_params *p = w ? &k1 : &t9;
        const long g = bicgstab_iterations(gpu, &A, name, p), c = bicgstab_iterations(NULL, &A, name, p);
        ck_assert_msg(labs(g - c) <= 2 + c / 20, "%s: BiCGSTAB %ld iterations with the GPU's M, %ld "
                      "with the CPU's", name, g, c);
    }
    gs_csr_free(&A);
}
END_TEST

/* Bad input: the GPU setup fails with the CPU's status and message. */
static void same_failure(const char *name, const gs_csr *A, const gs_params *p, int status,
                         const char *what)
{
    pc_out g = pc_on(gpu, name, A, p, 0), c = pc_on(NULL, name, A, p, 0);
    ck_assert_msg(c.status == status, "%s: CPU %s: %s", what, gs_status_name(c.status), c.err.msg);
    ck_assert_msg(g.status == status, "%s: GPU %s: %s (CPU: %s)", what, gs_status_name(g.status),
                  g.err.msg, c.err.msg);
    ck_assert_msg(strcmp(g.err.msg, c.err.msg) == 0, "%s: GPU '%s', CPU '%s'", what, g.err.msg,
                  c.err.msg);
    out_free(&g), out_free(&c);
}

START_TEST(test_bad_input)
{
    gs_params none = {0};
    tu_rng r = tu_rng_seed(27);
    gs_csr B = tu_random_matrix(&r, 40, 2);
    for (int i = 0; i < 40; i++) {
        const int64_t p = gs_csr_find(&B, i, 6);
        if (p >= 0) B.val[p] = 0.0; /* stored zeros: column 7 is zero */
    }
    same_failure("spai", &B, &none, GS_ERR_NUMERIC, "spai, zero column");
    same_failure("gspai-opt", &B, &none, GS_ERR_NUMERIC, "gspai-opt, zero column");
    debug_switches.spai_shared_cap = 1;
    use_debug();
    same_failure("gspai-opt", &B, &none, GS_ERR_NUMERIC, "gspai-opt, zero column, global kernel");
    reset_debug();
    gs_csr_free(&B);
    /* columns 3 and 5 equal (check_pc_spai.c's case) */
    const int32_t r2[] = {0, 2, 3, 1, 0, 4, 0, 2, 3, 1, 0, 2};
    const int32_t c2[] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4};
    const double v2[] = {4, 1, 1, 4, 1, 1, 1, 1, 4, 1, 1, 1};
    gs_csr C = tu_from_triplets(5, 5, 12, r2, c2, v2);
    gs_params t1 = params2("tau", "1", NULL, NULL);
    same_failure("spai", &C, &t1, GS_ERR_NUMERIC, "spai, dependent columns");
    same_failure("gspai-opt", &C, &none, GS_ERR_NUMERIC, "gspai-opt, dependent columns");
    gs_csr_free(&C);
    /* zero diagonal, row k outside I_k: m_k would be zero */
    const int32_t r3[] = {1, 2, 0};
    const int32_t c3[] = {0, 1, 2};
    const double v3[] = {1, 1, 1};
    gs_csr D = tu_from_triplets(3, 3, 3, r3, c3, v3);
    same_failure("gspai-opt", &D, &none, GS_ERR_NUMERIC, "gspai-opt, zero diagonal");
    gs_params t0 = params2("tau", "0", NULL, NULL);
    same_failure("spai", &D, &t0, GS_ERR_NUMERIC, "spai tau 0, zero diagonal");
    gs_params k2 = params2("pattern-power", "2", NULL, NULL);
    pc_out g = against_cpu("gspai-opt", &D, &k2, 0, "zero diagonal, k = 2");
    out_free(&g);
    gs_csr_free(&D);
}
END_TEST

/* A (n x n) of tu_random_matrix with column 7 and row 11 dense (|A(:,7)| =
 * n, |A(11,:)| = n). dup >= 0: column dup + 1 a copy of column dup, rows
 * dup and dup + 1 without random entries left of column 11 (so that column 7
 * of M, J = everything, is the lowest with both in J). */
static gs_csr dense_cross(int32_t n, uint64_t seed, int32_t dup)
{
    tu_rng r = tu_rng_seed(seed);
    gs_csr B = tu_random_matrix(&r, n, 2);
    const size_t cap = (size_t)B.nnz + 2 * (size_t)n + 64;
    int32_t *ri = malloc(cap * sizeof *ri), *ci = malloc(cap * sizeof *ci);
    double *v = malloc(cap * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = B.row_ptr[i]; p < B.row_ptr[i + 1]; p++) {
            const int32_t j = B.col[p];
            if (j == 7 || i == 11) continue;
            if (dup >= 0 && (j == dup + 1 || ((i == dup || i == dup + 1) && j < 11 && j != i)))
                continue;
            ri[nz] = i, ci[nz] = j, v[nz++] = B.val[p];
        }
    for (int32_t i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = 7, v[nz++] = i == 7 ? 50.0 : tu_rand_signed(&r, 0.01, 0.1);
        if (i != 7 && !(dup >= 0 && i == dup + 1))
            ri[nz] = 11, ci[nz] = i, v[nz++] = i == 11 ? 50.0 : tu_rand_signed(&r, 0.01, 0.1);
    }
    if (dup >= 0) { /* column dup + 1 = column dup (entries found so far) */
        const int64_t before = nz;
        for (int64_t q = 0; q < before; q++)
            if (ci[q] == dup && (size_t)nz < cap) ri[nz] = ri[q], ci[nz] = dup + 1, v[nz++] = v[q];
    }
    gs_csr A = tu_from_triplets(n, n, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    gs_csr_free(&B);
    return A;
}

/* The library path (cuSOLVER, spai_lsq.cu): the dense column's own column
 * of M (J = I = all n) is far above the default threshold; with the
 * threshold moved down (spai_cusolver_work) the columns of a 3-D stencil
 * fall on both sides of it. Against the CPU, S1 = S2 to the bit (a column's
 * route does not depend on the strategy), and a rank-deficient huge column
 * fails with the CPU's message. */
START_TEST(test_cusolver_path)
{
    gs_csr A = dense_cross(1600, 41, -1);
    gs_params k1 = params_qr("pattern-power", "1", NULL, NULL, QR_ALL);
    pc_out g = against_cpu("gspai-opt", &A, &k1, 0, "dense cross n 1600, gspai-opt");
    ck_assert_msg(strstr(g.kernels, "cusolver:1") != NULL, "the dense column missed cuSOLVER: %s",
                  g.kernels);
    out_free(&g);
    gs_params s1 = params_qr("pattern-power", "1", "strategy", "s1", QR_ALL);
    gs_params s2 = params_qr("pattern-power", "1", "strategy", "s2", QR_ALL);
    pc_out a1 = pc_on(gpu, "gspai-opt", &A, &s1, 0), a2 = pc_on(gpu, "gspai-opt", &A, &s2, 0);
    ck_assert_msg(a1.status == GS_OK && a2.status == GS_OK, "%s / %s", a1.err.msg, a2.err.msg);
    tu_assert_same_csr(&a1.M, &a2.M, "dense cross, S1 against S2");
    out_free(&a1), out_free(&a2);
    gs_csr_free(&A);

    gs_csr P = tu_generated("poisson3d27:6");
    gs_params k2 = params_qr("pattern-power", "2", NULL, NULL, QR_ALL);
    gs_params p1 = params_qr("pattern-power", "2", "strategy", "s1", QR_ALL);
    gs_params p2 = params_qr("pattern-power", "2", "strategy", "s2", QR_ALL);
    /* n2 = 8 .. 125 (corner to interior), n1 up to 343: 2 n1 n2^2 from about
     * 10^3 to 10^7, so 10^6 splits them */
    debug_switches.spai_cusolver_work = 1000000;
    use_debug();
    pc_out q = against_cpu("gspai-opt", &P, &k2, 0, "poisson3d27:6, cuSOLVER above 1e6 flops");
    ck_assert_msg(strstr(q.kernels, "cusolver:") != NULL && strchr(q.kernels, 'q') != NULL,
                  "not both sides of the threshold: %s", q.kernels);
    pc_out q1 = pc_on(gpu, "gspai-opt", &P, &p1, 0), q2 = pc_on(gpu, "gspai-opt", &P, &p2, 0);
    ck_assert_msg(q1.status == GS_OK && q2.status == GS_OK, "%s / %s", q1.err.msg, q2.err.msg);
    tu_assert_same_csr(&q1.M, &q2.M, "poisson3d27:6 with cuSOLVER columns, S1 against S2");
    debug_switches.spai_shared_cap = 1; /* every other column global: still the same routes */
    use_debug();
    pc_out q3 = pc_on(gpu, "gspai-opt", &P, &p1, 0);
    ck_assert_msg(q3.status == GS_OK, "%s", q3.err.msg);
    tu_assert_same_csr(&q1.M, &q3.M, "poisson3d27:6 with cuSOLVER columns, shared cap 1");
    gs_params t1 = params_qr("tau", "1", NULL, NULL, QR_ALL);
    debug_switches.spai_shared_cap = 0;
    debug_switches.spai_cusolver_work = 20000;
    use_debug();
    pc_out q4 = against_cpu("spai", &P, &t1, 0, "poisson3d27:6 spai, cuSOLVER above 2e4 flops");
    ck_assert_msg(strstr(q4.kernels, "cusolver:") != NULL, "spai: no cuSOLVER column: %s", q4.kernels);
    reset_debug();
    out_free(&q), out_free(&q1), out_free(&q2), out_free(&q3), out_free(&q4);
    gs_csr_free(&P);

    /* columns 20 and 21 of A equal: Â of column 7 of M (A itself) is singular */
    gs_csr D = dense_cross(1500, 43, 20);
    pc_out c = pc_on(NULL, "gspai-opt", &D, &k1, 0);
    ck_assert_msg(c.status == GS_ERR_NUMERIC && strstr(c.err.msg, "column 8 of M") &&
                      strstr(c.err.msg, "1500 x 1500"),
                  "CPU: %s", c.err.msg);
    out_free(&c);
    same_failure("gspai-opt", &D, &k1, GS_ERR_NUMERIC, "rank-deficient cuSOLVER column");
    gs_csr_free(&D);
}
END_TEST

/* --qr-max 0: every column by the normal equations (spai_large.cu), the
 * CPU reference's operations in its order: the same M to the bit; with the
 * default, poisson3d27:6 at k = 2 has columns on both sides of --qr-max. */
START_TEST(test_normal_equations)
{
    const char *specs[] = {"poisson3d27:6", "convdiff3d:8"};
    for (int sp = 0; sp < 2; sp++) {
        gs_csr A = tu_generated(specs[sp]);
        for (int which = 0; which < 3; which++) {
            const char *name = which ? "gspai-opt" : "spai";
            gs_params p = which ? params_qr("pattern-power", which == 1 ? "1" : "2", NULL, NULL, "0")
                                : params_qr("tau", "1", NULL, NULL, "0");
            pc_out g = pc_on(gpu, name, &A, &p, 0), c = pc_on(NULL, name, &A, &p, 0);
            ck_assert_msg(g.status == GS_OK && c.status == GS_OK, "%s: %s / %s", name, g.err.msg,
                          c.err.msg);
            char label[96];
            snprintf(label, sizeof label, "%s %s (%d), normal equations", name, specs[sp], which);
            ck_assert_msg(strstr(g.kernels, "ne:") != NULL, "%s: kernels %s", label, g.kernels);
            tu_assert_same_csr(&c.M, &g.M, label);
            out_free(&g), out_free(&c);
        }
        gs_csr_free(&A);
    }
    tu_rng r = tu_rng_seed(57);
    gs_csr R = tu_random_matrix(&r, 400, 3);
    gs_params k2 = params_qr("pattern-power", "2", NULL, NULL, "0");
    pc_out g = pc_on(gpu, "gspai-opt", &R, &k2, 0), c = pc_on(NULL, "gspai-opt", &R, &k2, 0);
    ck_assert_msg(g.status == GS_OK && c.status == GS_OK, "%s / %s", g.err.msg, c.err.msg);
    tu_assert_same_csr(&c.M, &g.M, "random 400, k 2, normal equations");
    out_free(&g), out_free(&c);
    gs_csr_free(&R);
    reset_debug();
    gs_csr P = tu_generated("poisson3d27:6");
    gs_params d2 = params2("pattern-power", "2", NULL, NULL);
    pc_out q = against_cpu("gspai-opt", &P, &d2, 0, "poisson3d27:6 k 2, default --qr-max");
    ck_assert_msg(strstr(q.kernels, "ne:") != NULL && q.kernels[0] == 'q', "kernels %s", q.kernels);
    out_free(&q);
    gs_csr_free(&P);
}
END_TEST

/* The columns of M that took the normal equations (n2 <= GS_SPAI_NE_MAX here: the
 * others are bordered's CGLS columns) are the CPU's to the bit: every operation of them is
 * the reference's, in its order, the heavy columns' Gram entries included
 * (gs_spai_column_dot_chunked). */
static void ne_columns_same_bits(const gs_csr *Mg, const gs_csr *Mc, const char *label)
{
    gs_csr MTg = {0}, MTc = {0};
    ck_assert(gs_csr_transpose(Mg, &MTg, NULL) == GS_OK && gs_csr_transpose(Mc, &MTc, NULL) == GS_OK);
    ck_assert(MTg.nnz == MTc.nnz);
    int64_t columns = 0;
    for (int32_t k = 0; k < MTc.n_rows; k++) {
        const int64_t p0 = MTc.row_ptr[k], n2 = MTc.row_ptr[k + 1] - p0;
        ck_assert(MTg.row_ptr[k] == p0 && MTg.row_ptr[k + 1] == p0 + n2);
        if (n2 > GS_SPAI_NE_MAX) continue;
        columns++;
        ck_assert_msg(memcmp(MTg.val + p0, MTc.val + p0, (size_t)n2 * sizeof(double)) == 0,
                      "%s: column %d of M (normal equations) differs from the CPU's bits", label,
                      (int)k + 1);
    }
    ck_assert_msg(columns > 0, "%s: no normal-equations column", label);
    gs_csr_free(&MTg), gs_csr_free(&MTc);
}

/* bordered:40x40x1 (1608 rows): the 8 dense columns of A are heavy (their
 * Gram entries computed once), every other column takes the normal
 * equations, the 8 border columns of M (n2 = 1601) CGLS; against the CPU
 * (NE to the bit, CGLS within 1e-6), S1 and S2 alike, and spai too. */
START_TEST(test_heavy_and_cgls)
{
    gs_csr A = tu_generated("bordered:40x40x1");
    gs_params k1 = params2("pattern-power", "1", NULL, NULL);
    pc_out g = against_cpu("gspai-opt", &A, &k1, 0, "bordered:40x40x1 gspai-opt");
    ck_assert_msg(strstr(g.kernels, "cgls:8") != NULL && strstr(g.kernels, "ne:1600") != NULL,
                  "kernels %s", g.kernels);
    pc_out c = pc_on(NULL, "gspai-opt", &A, &k1, 0);
    ck_assert_msg(c.status == GS_OK, "%s", c.err.msg);
    ne_columns_same_bits(&g.M, &c.M, "bordered:40x40x1 gspai-opt");
    out_free(&c);
    gs_params s1 = params2("pattern-power", "1", "strategy", "s1");
    gs_params s2 = params2("pattern-power", "1", "strategy", "s2");
    pc_out a1 = pc_on(gpu, "gspai-opt", &A, &s1, 0), a2 = pc_on(gpu, "gspai-opt", &A, &s2, 0);
    ck_assert_msg(a1.status == GS_OK && a2.status == GS_OK, "%s / %s", a1.err.msg, a2.err.msg);
    tu_assert_same_csr(&a1.M, &a2.M, "bordered, S1 against S2");
    pc_out a3 = pc_on(gpu, "gspai-opt", &A, &s1, 0);
    ck_assert_msg(a3.status == GS_OK, "%s", a3.err.msg);
    tu_assert_same_csr(&a1.M, &a3.M, "bordered, run to run");
    gs_params t9 = params2("tau", "0.9", NULL, NULL);
    pc_out sp = against_cpu("spai", &A, &t9, 0, "bordered:40x40x1 spai");
    out_free(&g), out_free(&a1), out_free(&a2), out_free(&a3), out_free(&sp);
    gs_csr_free(&A);
}
END_TEST

#if GS_HAVE_CUDA
/* The heavy columns' Gram matrix on the device (a warp a pair, a lane a chunk of the shorter
 * list, spai_large.cu) against gs_spai_heavy_build's on the host, to the bit: the same
 * columns, every entry the same chunked sum. bordered:40x40x1 (8 dense columns of 1601
 * entries: about 50 a chunk) and bordered:72x72x1 (5192 rows: 162 a chunk); and no heavy
 * column at all in bordered:23x23x1 (537 rows, under GS_SPAI_HEAVY_MIN). */
START_TEST(test_heavy_gram_bits)
{
    const char *specs[] = {"bordered:40x40x1", "bordered:72x72x1", "bordered:23x23x1"};
    const int32_t want_count[] = {8, 8, 0};
    static int32_t cols[GS_SPAI_HEAVY_MAX];
    static double gram[GS_SPAI_HEAVY_MAX * GS_SPAI_HEAVY_MAX];
    for (int s = 0; s < 3; s++) {
        gs_csr A = tu_generated(specs[s]), AT = {0};
        gs_error err = {0};
        gs_spai_heavy h;
        int32_t count = -1;
        ck_assert(gs_csr_transpose(&A, &AT, &err) == GS_OK);
        ck_assert_msg(gs_spai_heavy_build(&AT, &h, &err) == GS_OK, "%s", err.msg);
        poison_device_heap();
        ck_assert_msg(gs_spai_cuda_hook_heavy_gram(gpu, &AT, &count, cols, gram) == GS_OK, "%s: %s",
                      specs[s], gpu->err.msg);
        ck_assert_msg(count == h.count && count == want_count[s], "%s: %d heavy columns, CPU %d",
                      specs[s], count, h.count);
        for (int32_t a = 0; a < count; a++) {
            ck_assert_int_eq(cols[a], h.cols[a]);
            for (int32_t b = 0; b < count; b++) {
                const double g = gram[(size_t)a * count + b], c = h.gram[(size_t)a * count + b];
                ck_assert_msg(isfinite(g) && memcmp(&g, &c, sizeof g) == 0,
                              "%s: gram[%d][%d] = %.17g, CPU %.17g", specs[s], a, b, g, c);
            }
        }
        gs_spai_heavy_free(&h);
        gs_csr_free(&AT), gs_csr_free(&A);
    }
}
END_TEST
#endif

/* Two nearly dependent columns of A (kappa ~ 1e7 for the local problems
 * holding both): their normal equations fail the pivot test and go back
 * to QR (the global kernel), as on the CPU. */
START_TEST(test_normal_equations_rejected)
{
    tu_rng r = tu_rng_seed(43);
    gs_csr B = tu_random_matrix(&r, 600, 3);
    int64_t cap = B.nnz * 2 + 8, nz = 0;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    for (int32_t i = 0; i < 600; i++)
        for (int64_t p = B.row_ptr[i]; p < B.row_ptr[i + 1]; p++) {
            if (B.col[p] == 21) continue;
            ri[nz] = i, ci[nz] = B.col[p], v[nz++] = B.val[p];
            if (B.col[p] == 20) ri[nz] = i, ci[nz] = 21, v[nz++] = B.val[p] * (1.0 + 1e-7 * (i % 5 - 2));
        }
    ri[nz] = 21, ci[nz] = 21, v[nz++] = 1e-7;
    gs_csr A = tu_from_triplets(600, 600, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    gs_params p = params_qr("pattern-power", "1", NULL, NULL, "0");
    pc_out g = against_cpu("gspai-opt", &A, &p, 0, "nearly dependent columns, normal equations");
    ck_assert_msg(strstr(g.kernels, "ne:") != NULL && strstr(g.kernels, "global:") != NULL,
                  "no column went back to QR: %s", g.kernels);
    out_free(&g);
    gs_csr_free(&A), gs_csr_free(&B);
}
END_TEST

static Suite *cuda_spai_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_spai");
    TCase *tc = tcase_create("cuda_spai");
    tcase_set_timeout(tc, 900);
    tcase_add_checked_fixture(tc, reset_debug, NULL);
    tcase_add_test(tc, test_device_or_skip);
    if (have_gpu) {
        tcase_add_test(tc, test_generated);
        tcase_add_test(tc, test_every_size_class);
        tcase_add_test(tc, test_sizes_paths);
        tcase_add_test(tc, test_shared_limit);
        tcase_add_test(tc, test_dense_row_and_column);
        tcase_add_test(tc, test_real);
        tcase_add_test(tc, test_single_precision);
        tcase_add_test(tc, test_bicgstab_iterations);
        tcase_add_test(tc, test_bad_input);
        tcase_add_test(tc, test_cusolver_path);
        tcase_add_test(tc, test_normal_equations);
        tcase_add_test(tc, test_heavy_and_cgls);
#if GS_HAVE_CUDA
        tcase_add_test(tc, test_heavy_gram_bits);
#endif
        tcase_add_test(tc, test_normal_equations_rejected);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it: run the
 * tests in this process (as check_cuda_fsai does). */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    gs_error err = {0};
    if (have_gpu && gs_engine_cuda_create(&gpu, &err) != GS_OK) {
        printf("check_cuda_spai: CUDA engine: %s\n", err.msg);
        return 1;
    }
    SRunner *sr = srunner_create(cuda_spai_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (have_gpu)
        printf("check_cuda_spai: largest ||m_gpu - m_cpu|| / allowed (where the bound was "
               "computed): %.3g\n", worst_ratio);
    gs_engine_destroy(gpu);
    return failed == 0 ? 0 : 1;
}
