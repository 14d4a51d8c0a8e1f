/* check_cuda_fsai.c - the CUDA setup of FSAI (cuda/precond/fsai*.cu) against the CPU
 * reference (src/precond/pc_fsai.c, the oracle), and by the property that defines
 * FSAI, diag(G A G^T) = I (Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci.
 * Comput. 38(1) 2016, (3.10)). Generated and real SPD matrices, k = 1..4,
 * with and without the filters, local systems on both sides of every size
 * class of the batched Cholesky (32, 64, 128, 256, and larger); fp32; the
 * apply; CG iterations; bad input (same status and message as the CPU).
 * The device heap is filled with NaN before each setup, so that memory the
 * setup forgets to write shows. Without a CUDA device the suite says
 * "skipped" and passes.
 *
 * Tolerances (u = 2^-53 for fp64, u32 = 2^-24 for the fp32 setup):
 * - patterns: S = 1NZ(L_k) is integer work: equal exactly. After the
 *   postfilter (delta > 0), an entry may fall on the other side of
 *   delta ||g_i|| by rounding: such a flip is accepted only where the
 *   reference's unfiltered |g_ij| lies within 1e-6 (fp32: 1e-3) ||g_i|| of
 *   the threshold, and at most 1% of the rows may have one.
 * - values, row by row: both setups solve A[P,P] w = e_m by Cholesky in
 *   different operation orders; each computed w has a relative error of at
 *   most ~ m cond(A[P,P]) u (Higham, Thm 10.4 with the usual forward bound),
 *   and the scalings (3.7), (3.13) add O(m u). So
 *   max_j |g_gpu - g_cpu| <= 8 m kappa u ||g_cpu||_2 with kappa =
 *   ||A_P||_F ||A_P^-1||_F >= cond_2(A_P), computed (dense) only for a row
 *   that misses the cheap bound 64 m u ||g||_2. The fp32 setup: the same
 *   with u32.
 * - diag(G A G^T) = I: as check_pc_fsai.c, the rounding of one quadratic
 *   form (2 (2 (m + r) + 6) u |g|^T |A| |g|), plus 4 u32 |g|^T |A| |g| for
 *   values stored in fp32.
 * - --max-row: which entries a long row keeps is integer work on keys both
 *   setups compute with one expression (gs_fsai_cap_key): the capped
 *   patterns equal exactly, and so do the report items max_row and
 *   capped_rows. */
#include <math.h>
#include <string.h>

#include "debug.h"
#include "dense_cholesky.h"
#include "engine.h"
#include "fsai.h"
#include "gen.h"
#include "krylov.h"
#include "precond.h"
#include "testutil.h"
#if GS_HAVE_CUDA
#include "../cuda/engine/gs_cuda.h"
#endif

#define U64 (DBL_EPSILON / 2)
#define U32 (5.9604644775390625e-08)

static gs_engine *gpu;
/* The engine's test switches (src/debug.h), handed to gpu by use_debug;
 * zeroed: the defaults. */
static gs_debug debug_switches;
static void use_debug(void) { gs_engine_cuda_set_debug(gpu, &debug_switches); }
static void reset_debug(void)
{
    memset(&debug_switches, 0, sizeof debug_switches);
    use_debug();
}
/* Where the setup finds A: 0 pc->A from mat_create (its sliced ELL turned
 * back into CSR, or its CSR arrays); 1 no pc->A: the setup uploads A; 2
 * pc->A from mat_create_system, which the engine keeps as the CSR it
 * uploaded until setup_done (after the setup, as run.c does). */
static int a_mode;
static double worst64, worst32; /* largest max |g_gpu - g_cpu| / ||g|| seen, per precision */
static const char *gather_mode; /* the setups' --gather (NULL: the default, fused) */
/* the setups' --max-row (NULL: the default); "0" where a test wants the
 * huge local systems the default cap would cut */
static const char *max_row_mode;
/* where set, check_case asserts that the GPU's factor_large starts with it
 * ("gemm:", "block:"; "" for none) */
static const char *large_expect;

/* --------------------------------------------------------------- setups */

typedef struct fsai_out {
    int status;
    gs_error err;
    gs_csr G;
    double mu_hat, mu, m_max;
    double max_row, capped; /* report items: S's longest row before --max-row, rows cut */
    char stages[512];
    char plan[GS_KV_STR_LEN]; /* factor_plan (CUDA setups that factor systems), else "" */
    char large[GS_KV_STR_LEN]; /* factor_large (CUDA: gemm:N or block:N), else "" */
} fsai_out;

static double extra(const gs_pc *pc, const char *key)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    ck_assert_msg(kv != NULL, "report item %s missing", key);
    return kv->num;
}

/* Fill about 256 MiB of the device heap with NaN and give it back, so that
 * the next allocations are likely to land on poisoned memory. */
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

/* fsai on engine e (the GPU one, or a fresh CPU engine when e == NULL). */
static fsai_out fsai_on(gs_engine *e, const gs_csr *A, const gs_params *p)
{
    fsai_out o;
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
    o.status = gs_pc_create(gs_pc_find("fsai"), e, p, A, a_mode == 1 ? NULL : Ae, &pc, &o.err);
    if (a_mode == 2 && e->ops->setup_done) {
        int laid = -1;
        ck_assert_msg(e->ops->setup_done(e, Ae, &laid) == GS_OK, "%s", e->err.msg);
    }
    if (o.status == GS_OK) {
        tu_pc_saved_matrix(pc, "G", &o.G);
        ck_assert_int_eq(o.G.nnz, pc->nnz);
        o.mu_hat = extra(pc, "mu_G_hat");
        o.mu = extra(pc, "mu_G");
        o.m_max = extra(pc, "local_m_max");
        o.max_row = extra(pc, "max_row");
        o.capped = extra(pc, "capped_rows");
        const gs_kv *kv = tu_pc_extra(pc, "factor_plan");
        if (kv) snprintf(o.plan, sizeof o.plan, "%s", kv->str);
        kv = tu_pc_extra(pc, "factor_large");
        if (kv) snprintf(o.large, sizeof o.large, "%s", kv->str);
        size_t used = 0;
        for (int i = 0; i < pc->stages.count; i++)
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

/* ------------------------------------------------------------ checks */

/* ||A_P||_F ||A_P^-1||_F for P = the columns of row i of G (>= cond_2). */
static double local_kappa(const gs_csr *A, const int32_t *P, int m)
{
    double *a = calloc((size_t)m * m, sizeof *a), *x = malloc((size_t)m * sizeof *x);
    void *work = malloc(GS_DENSE_CHOLESKY_WORK_BYTES(m));
    ck_assert(a && x && work);
    double fa = 0, fi = 0;
    for (int r = 0; r < m; r++)
        for (int c = 0; c <= r; c++) {
            const int64_t q = gs_csr_find(A, P[r], P[c]);
            a[(size_t)r * m + c] = q >= 0 ? A->val[q] : 0.0;
            fa += (r == c ? 1 : 2) * a[(size_t)r * m + c] * a[(size_t)r * m + c];
        }
    const int failed = gs_dense_cholesky_factor(a, m, work) >= 0;
    free(work);
    if (failed) {
        free(a), free(x);
        return INFINITY;
    }
    for (int e = 0; e < m; e++) {
        for (int r = 0; r < m; r++) x[r] = r == e;
        gs_dense_cholesky_solve(a, m, x);
        for (int r = 0; r < m; r++) fi += x[r] * x[r];
    }
    free(a), free(x);
    return sqrt(fa) * sqrt(fi);
}

static double row_norm(const gs_csr *G, int32_t i)
{
    double s = 0;
    for (int64_t p = G->row_ptr[i]; p < G->row_ptr[i + 1]; p++) s += G->val[p] * G->val[p];
    return sqrt(s);
}

/* Is the pattern difference of row i a rounding flip at the postfilter's
 * threshold? Ghat: the reference's unfiltered G (delta = 0). */
static int is_threshold_flip(const gs_csr *Ghat, int32_t i, const gs_csr *Ga, const gs_csr *Gb,
                             double delta, double rel)
{
    const double thr = delta * row_norm(Ghat, i), scale = row_norm(Ghat, i);
    for (int64_t p = Ghat->row_ptr[i]; p < Ghat->row_ptr[i + 1]; p++) {
        const int32_t j = Ghat->col[p];
        const int in_a = gs_csr_find(Ga, i, j) >= 0, in_b = gs_csr_find(Gb, i, j) >= 0;
        if (in_a != in_b && fabs(fabs(Ghat->val[p]) - thr) > rel * scale) return 0;
    }
    return 1;
}

/* GPU G against the reference: patterns, then values row by row (see the
 * tolerances at the top). Ghat: the reference with delta = 0, for delta > 0. */
static void compare(const gs_csr *A, const gs_csr *Gg, const gs_csr *Gc, const gs_csr *Ghat,
                    double delta, double u, const char *label)
{
    ck_assert_int_eq(Gg->n_rows, Gc->n_rows);
    int32_t flips = 0;
    double worst = 0;
    for (int32_t i = 0; i < Gc->n_rows; i++) {
        const int64_t a0 = Gg->row_ptr[i], b0 = Gc->row_ptr[i];
        const int64_t m = Gc->row_ptr[i + 1] - b0;
        int same = Gg->row_ptr[i + 1] - a0 == m;
        for (int64_t t = 0; same && t < m; t++) same = Gg->col[a0 + t] == Gc->col[b0 + t];
        if (!same) {
            ck_assert_msg(delta > 0 && Ghat &&
                              is_threshold_flip(Ghat, i, Gg, Gc, delta, u == U32 ? 1e-3 : 1e-6),
                          "%s: row %d: GPU pattern (%lld entries) differs from the CPU's (%lld)",
                          label, (int)i + 1, (long long)(Gg->row_ptr[i + 1] - a0), (long long)m);
            flips++;
            continue;
        }
        double err = 0;
        for (int64_t t = 0; t < m; t++) err = fmax(err, fabs(Gg->val[a0 + t] - Gc->val[b0 + t]));
        ck_assert_msg(err == err, "%s: row %d: NaN in the GPU's G", label, (int)i + 1);
        const double gn = row_norm(Gc, i);
        err /= gn;
        if (err > worst) worst = err;
        if (err <= 64.0 * (double)m * u) continue;
        const double kappa = local_kappa(A, Gc->col + b0, (int)m);
        ck_assert_msg(err <= 8.0 * (double)m * kappa * u,
                      "%s: row %d (m = %lld, kappa <= %.3g): max |g_gpu - g_cpu| / ||g|| = %.3g > "
                      "bound %.3g",
                      label, (int)i + 1, (long long)m, kappa, err, 8.0 * (double)m * kappa * u);
    }
    ck_assert_msg(flips * 100 <= Gc->n_rows, "%s: %d rows with threshold flips", label, flips);
    if (u == U32) worst32 = fmax(worst32, worst);
    else worst64 = fmax(worst64, worst);
}

/* (G A G^T)_ii = 1 (check_pc_fsai.c's bound; + 4 u32 q for fp32 values). */
static void check_unit_diagonal(const gs_csr *A, const gs_csr *G, int fp32, const char *label)
{
    const int32_t n = A->n_rows, r = tu_max_row_length(A);
    double *x = calloc((size_t)n + 1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int32_t i = 0; i < n; i++) {
        const int64_t p0 = G->row_ptr[i], p1 = G->row_ptr[i + 1];
        ck_assert_msg(p1 > p0 && G->col[p1 - 1] == i && G->val[p1 - 1] > 0,
                      "%s: row %d of G does not end with a positive diagonal entry", label,
                      (int)i + 1);
        for (int64_t p = p0; p < p1; p++) x[G->col[p]] = G->val[p];
        double d = 0, q = 0;
        for (int64_t p = p0; p < p1; p++) {
            const int32_t j = G->col[p];
            double s = 0, sa = 0;
            for (int64_t t = A->row_ptr[j]; t < A->row_ptr[j + 1]; t++) {
                s += A->val[t] * x[A->col[t]];
                sa += fabs(A->val[t] * x[A->col[t]]);
            }
            d += G->val[p] * s;
            q += fabs(G->val[p]) * sa;
        }
        for (int64_t p = p0; p < p1; p++) x[G->col[p]] = 0;
        const double tol = 2.0 * (2.0 * ((double)(p1 - p0) + r) + 6.0) * U64 * q +
                           (fp32 ? 4.0 * U32 * q : 0.0);
        ck_assert_msg(fabs(d - 1.0) <= tol, "%s: (G A G^T)_ii = %.17g in row %d, bound %.3g",
                      label, d, (int)i + 1, tol);
    }
    free(x);
}

/* One configuration: GPU and CPU setups, report items, stages, pattern and
 * values, diag(G A G^T) = I. */
static void check_case(const gs_csr *A, double tau, long k, double delta, const char *prec,
                       const char *what)
{
    char label[200];
    tu_fsai_args a;
    const gs_params *p = tu_fsai_args_make(&a, tau, k, delta, prec);
    if (gather_mode) tu_fsai_arg_set(&a, "gather", gather_mode);
    if (max_row_mode) tu_fsai_arg_set(&a, "max-row", max_row_mode);
    snprintf(label, sizeof label, "%s tau=%g k=%ld delta=%g %s gather=%s max-row=%s", what, tau,
             k, delta, prec ? prec : "double", gather_mode ? gather_mode : "fused",
             max_row_mode ? max_row_mode : "default");
    fsai_out g = fsai_on(gpu, A, p), c = fsai_on(NULL, A, p);
    ck_assert_msg(c.status == GS_OK, "%s: CPU: %s", label, c.err.msg);
    ck_assert_msg(g.status == GS_OK, "%s: GPU: %s", label, g.err.msg);
    ck_assert_msg(g.mu_hat == c.mu_hat, "%s: mu_G_hat %.17g (GPU) vs %.17g", label, g.mu_hat,
                  c.mu_hat);
    ck_assert_msg(g.m_max == c.m_max, "%s: local_m_max %g vs %g", label, g.m_max, c.m_max);
    if (large_expect)
        ck_assert_msg(*large_expect ? strncmp(g.large, large_expect, strlen(large_expect)) == 0
                                    : g.large[0] == 0,
                      "%s: factor_large '%s', expected '%s...'", label, g.large, large_expect);
    ck_assert_msg(g.max_row == c.max_row && g.capped == c.capped,
                  "%s: max_row %g, capped_rows %g (GPU) vs %g, %g", label, g.max_row, g.capped,
                  c.max_row, c.capped);
    /* S's longest row is 1 exactly when Ã is diagonal: then G = diag(A)^-1/2
     * directly (--max-row 1 makes every m_i 1 through the whole setup) */
    ck_assert_msg(strstr(g.stages, c.max_row == 1 ? "csr of A;prefilter;factorisation;layout"
                                                : "csr of A;prefilter;pattern;gather;"
                                                  "factorisation;postfilter;transpose;layout") != NULL,
                  "%s: stages %s", label, g.stages);
    gs_csr Ghat = {0};
    if (delta > 0) {
        tu_fsai_args_make(&a, tau, k, 0.0, NULL);
        if (max_row_mode) tu_fsai_arg_set(&a, "max-row", max_row_mode);
        fsai_out h = fsai_on(NULL, A, &a.p);
        ck_assert_int_eq(h.status, GS_OK);
        Ghat = h.G;
    }
    const int fp32 = prec && strcmp(prec, "single") == 0;
    compare(A, &g.G, &c.G, delta > 0 ? &Ghat : NULL, delta, fp32 ? U32 : U64, label);
    check_unit_diagonal(A, &g.G, fp32, label);
    gs_csr_free(&Ghat);
    gs_csr_free(&g.G);
    gs_csr_free(&c.G);
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_device_or_skip)
{
    if (gs_cuda_device_count() == 0) {
        printf("check_cuda_fsai: skipped: no CUDA device\n");
        return;
    }
    ck_assert_ptr_nonnull(gs_pc_find("fsai")->setup[GS_ENGINE_CUDA]);
}
END_TEST

START_TEST(test_generated)
{
    const struct {
        const char *spec;
        double tau;
    } cases[] = {{"poisson3d:12", 0.05}, {"poisson3d27:8", 0.01}, {"aniso3d:12", 0.05},
                 {"aniso3d:10", 0.005}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gs_csr A = tu_generated(cases[c].spec);
        for (long k = 1; k <= 3; k++) {
            check_case(&A, cases[c].tau, k, 0.0, NULL, cases[c].spec);
            check_case(&A, cases[c].tau, k, 0.0035, NULL, cases[c].spec);
        }
        check_case(&A, 0.0, 2, 0.05, NULL, cases[c].spec);
        gs_csr_free(&A);
    }
}
END_TEST

/* A diagonal Ã (the 27-point stencil's couplings are 1/26 of its diagonal
 * after scaling, below the default tau = 0.05; a diagonal matrix): every
 * local system is 1 x 1 and the setup takes its direct path, which must
 * give the reference's G for every k and delta, in both precisions. */
START_TEST(test_diagonal)
{
    gs_csr A = tu_generated("poisson3d27:8");
    for (long k = 1; k <= 3; k++) check_case(&A, 0.05, k, 0.0035, NULL, "poisson3d27:8");
    check_case(&A, 0.05, 2, 0.0, "single", "poisson3d27:8");
    check_case(&A, 0.04, 3, 0.0, NULL, "poisson3d27:8"); /* still diagonal: 1/26 < 0.04 */
    gs_csr_free(&A);
    tu_rng r = tu_rng_seed(21);
    const int32_t n = 500;
    int32_t *ri = malloc((size_t)n * sizeof *ri);
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert(ri && v);
    for (int32_t i = 0; i < n; i++) ri[i] = i, v[i] = 0.5 + 100.0 * tu_uniform(&r);
    gs_csr D = tu_from_triplets(n, n, n, ri, ri, v);
    check_case(&D, 0.0, 3, 0.0035, NULL, "diagonal:500");
    check_case(&D, 0.0, 1, 0.0, "single", "diagonal:500");
    free(ri), free(v);
    gs_csr_free(&D);
}
END_TEST

/* Local systems on both sides of 32, 64, 128 and 256 rows: the 27-point
 * stencil without prefilter has m <= 14, 63, 172, 365 for k = 1..4. */
START_TEST(test_every_size_class)
{
    gs_csr A = tu_generated("poisson3d27:9");
    for (long k = 1; k <= 4; k++) check_case(&A, 0.0, k, 0.0, NULL, "poisson3d27:9");
    check_case(&A, 0.0, 4, 0.0035, NULL, "poisson3d27:9");
    gs_csr_free(&A);
}
END_TEST

/* G from the postfilter's bitmap lookups of Z (the default) and from its
 * searches of Z (the switch fsai_postfilter_search): the same sums in the same
 * order, so the same G to the bit. */
static void check_postfilter_paths(const gs_csr *A, double tau, long k, double delta,
                                   const char *what)
{
    tu_fsai_args a;
    const gs_params *p = tu_fsai_args_make(&a, tau, k, delta, NULL);
    fsai_out o[2];
    for (int d = 0; d < 2; d++) {
        debug_switches.fsai_postfilter_search = d;
        use_debug();
        o[d] = fsai_on(gpu, A, p);
        ck_assert_msg(o[d].status == GS_OK, "%s: %s", what, o[d].err.msg);
    }
    reset_debug();
    char label[160];
    snprintf(label, sizeof label, "%s: G by the postfilter's search against its bitmap", what);
    tu_assert_same_csr(&o[0].G, &o[1].G, label);
    gs_csr_free(&o[0].G), gs_csr_free(&o[1].G);
}

/* Rows of G longer than 32 (the postfilter's z^T A z with z staged in
 * shared memory) whose columns span far (9500 columns: beyond the bitmap
 * of Z, searched instead) next to banded ones: a band of half-width 40 (no
 * prefilter, k = 1, every entry kept: 41 columns a row; off-diagonals
 * -1/(1+d)^2, so A is diagonally dominant) and, for a few rows i, one
 * coupling to column i - 9500. Then the bitmap and the search give the
 * same G here and on matrices with long rows of G. */
START_TEST(test_postfilter_wide_rows)
{
    const int32_t n = 12000, hw = 40;
    const int64_t cap = (int64_t)n * (2 * hw + 1) + 64;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i - hw; j <= i + hw; j++)
            if (j >= 0 && j < n) {
                ri[nnz] = i, ci[nnz] = j;
                v[nnz++] = i == j ? 4.0 : -1.0 / ((1.0 + abs(i - j)) * (1.0 + abs(i - j)));
            }
    for (int32_t i = 11000; i < 11008; i++) { /* symmetric far couplings */
        ri[nnz] = i, ci[nnz] = i - 9500, v[nnz++] = -0.05;
        ri[nnz] = i - 9500, ci[nnz] = i, v[nnz++] = -0.05;
    }
    gs_csr A = tu_from_triplets(n, n, nnz, ri, ci, v);
    free(ri), free(ci), free(v);
    check_case(&A, 0.0, 1, 0.0, NULL, "band with far couplings");
    check_case(&A, 0.0, 1, 0.0035, NULL, "band with far couplings");
    check_postfilter_paths(&A, 0.0, 1, 0.0035, "band with far couplings");
    gs_csr_free(&A);
    A = tu_generated("poisson3d27:9");
    check_postfilter_paths(&A, 0.0, 3, 0.0035, "poisson3d27:9 k=3");
    gs_csr_free(&A);
    tu_rng r = tu_rng_seed(31);
    A = tu_random_spd(&r, 300, 0.02);
    check_postfilter_paths(&A, 0.001, 2, 0.01, "random with dense rows");
    gs_csr_free(&A);
}
END_TEST

/* The factorisation's plan kept on the device (the default for small
 * setups whose every system is gathered fused: class ranges read by the
 * kernels, no host round trip) and read back to the host (larger setups)
 * give the same G bit for bit, within the CPU reference's bound both; the
 * random matrix's systems above the shared-memory limit take the host plan
 * even when the device one is asked for. */
START_TEST(test_host_and_device_plans)
{
    tu_rng r = tu_rng_seed(13);
    gs_csr As[2] = {tu_generated("poisson3d27:9"), tu_random_spd(&r, 300, 0.02)};
    const char *names[2] = {"poisson3d27:9", "random"};
    tu_fsai_args a;
    for (int t = 0; t < 2; t++)
        for (long k = 1; k <= 3; k++) {
            const gs_params *p = tu_fsai_args_make(&a, t ? 0.001 : 0.0, k, t ? 0.01 : 0.0, NULL);
            fsai_out o[2];
            for (int d = 0; d < 2; d++) {
                debug_switches.fsai_plan = d ? GS_DEBUG_PLAN_DEVICE : GS_DEBUG_PLAN_HOST;
                use_debug();
                check_case(&As[t], t ? 0.001 : 0.0, k, t ? 0.01 : 0.0, NULL, names[t]);
                o[d] = fsai_on(gpu, &As[t], p);
                ck_assert_msg(o[d].status == GS_OK, "%s k=%ld: %s", names[t], k, o[d].err.msg);
            }
            reset_debug();
            char label[160];
            snprintf(label, sizeof label, "%s k=%ld: G by the device plan against the host plan",
                     names[t], k);
            tu_assert_same_csr(&o[0].G, &o[1].G, label);
            ck_assert(o[0].m_max == o[1].m_max);
            /* the plan each run took: host when asked; device when asked
             * and possible (products made, every system fused) */
            ck_assert_msg(strcmp(o[0].plan, "host") == 0, "%s k=%ld: plan %s", names[t], k, o[0].plan);
            if (t == 0 && k >= 2)
                ck_assert_msg(strcmp(o[1].plan, "device") == 0, "%s k=%ld: plan %s", names[t], k,
                              o[1].plan);
            if (t == 1 && k >= 2 && o[1].m_max > 256) /* above any device's fit */
                ck_assert_msg(strcmp(o[1].plan, "host") == 0, "%s k=%ld: plan %s", names[t], k,
                              o[1].plan);
            gs_csr_free(&o[0].G), gs_csr_free(&o[1].G);
        }
    gs_csr_free(&As[0]), gs_csr_free(&As[1]);
}
END_TEST

/* Random SPD (tu_random_spd, sparse rows of density 0.02 [0, 1)): a tenth
 * of the rows half dense, so that k = 2 gives local systems of several
 * hundred rows next to tiny ones. */
START_TEST(test_random_with_dense_rows)
{
    tu_rng r = tu_rng_seed(5);
    for (int t = 0; t < 2; t++) {
        gs_csr A = tu_random_spd(&r, t == 0 ? 300 : 900, 0.02);
        check_case(&A, 0.0, 1, 0.0, NULL, "random");
        check_case(&A, 0.001, 2, 0.0, NULL, "random");
        check_case(&A, 0.001, 2, 0.01, NULL, "random");
        check_case(&A, 0.01, 3, 0.0035, "single", "random");
        gs_csr_free(&A);
    }
}
END_TEST

/* An arrowhead (tridiagonal, the last row and column dense; diagonally
 * dominant): with k = 1 the last row's local system is the whole matrix,
 * m = n, next to systems of 1 and 2 rows. n = 600: the panel factorisation
 * in place in global memory; n = 2000 in fp64: past the largest panel that
 * fits shared memory (m >= 1815), the step-by-step path; in fp32 the panel
 * again. */
/* Arrowhead n x n: tridiagonal (diagonal 4, couplings -[0, 1)), the last
 * row and column dense (couplings +-[lo, hi), corner a_nn). */
static gs_csr arrowhead(int32_t n, double corner, double lo, double hi, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    int32_t *ri = malloc(5 * (size_t)n * sizeof *ri), *ci = malloc(5 * (size_t)n * sizeof *ci);
    double *v = malloc(5 * (size_t)n * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t q = 0;
    for (int32_t i = 0; i < n; i++) {
        ri[q] = ci[q] = i, v[q++] = i == n - 1 ? corner : 4.0;
        if (i + 1 < n - 1) {
            const double w = -tu_uniform(&r);
            ri[q] = i, ci[q] = i + 1, v[q++] = w;
            ri[q] = i + 1, ci[q] = i, v[q++] = w;
        }
        if (i < n - 1) {
            const double w = tu_rand_signed(&r, lo, hi);
            ri[q] = i, ci[q] = n - 1, v[q++] = w;
            ri[q] = n - 1, ci[q] = i, v[q++] = w;
        }
    }
    gs_csr A = tu_from_triplets(n, n, q, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* A with its rows and columns in reverse order (an arrowhead's dense last
 * row and column become the first). */
static gs_csr reversed(const gs_csr *A)
{
    const int32_t n = A->n_rows;
    int32_t *ri = malloc((size_t)A->nnz * sizeof *ri), *ci = malloc((size_t)A->nnz * sizeof *ci);
    ck_assert(ri && ci);
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            ri[p] = n - 1 - i, ci[p] = n - 1 - A->col[p];
    gs_csr R = tu_from_triplets(n, n, A->nnz, ri, ci, A->val);
    free(ri), free(ci);
    return R;
}

/* The pattern recursion's fixed point: on the reversed arrowhead L_2 is the
 * whole lower triangle, so L_3 = L_2 and the recursion stops after the
 * second product whatever k; G must still be the reference's. */
START_TEST(test_fixed_point)
{
    gs_csr A = arrowhead(120, 120.0, 0.1, 0.5, 17);
    gs_csr R = reversed(&A);
    check_case(&R, 0.0, 5, 0.0, NULL, "reversed arrowhead:120");
    check_case(&R, 0.0, 5, 0.0035, NULL, "reversed arrowhead:120");
    gs_csr_free(&A);
    gs_csr_free(&R);
}
END_TEST

START_TEST(test_one_huge_system)
{
    max_row_mode = "0"; /* systems of every size: the default cap would cut the row of 2000 */
    const int32_t sizes[] = {600, 2000};
    for (int t = 0; t < 2; t++) {
        const int32_t n = sizes[t];
        gs_csr A = arrowhead(n, (double)n, 0.1, 0.5, 11 + (uint64_t)t); /* diagonally dominant */
        check_case(&A, 0.0, 1, 0.0, NULL, t ? "arrowhead:2000" : "arrowhead:600");
        if (t) check_case(&A, 0.0, 1, 0.0, "single", "arrowhead:2000");
        gs_csr_free(&A);
    }
    max_row_mode = NULL;
}
END_TEST

/* The gather kernel for every system (--gather separate, the paper's
 * mapping) gives the same G as the default, where the factorisation kernels
 * gather every system that fits shared memory themselves: generated and
 * random matrices with systems on both sides of 32, 64 and 128 rows and of
 * the shared-memory limit (poisson3d27:9 with k = 3: up to 172 rows; the
 * random dense rows: several hundred), fp64 and fp32. The other suites
 * check the default against the CPU reference. */
START_TEST(test_separate_gather)
{
    gather_mode = "separate";
    gs_csr A = tu_generated("poisson3d27:9");
    for (long k = 1; k <= 3; k++) check_case(&A, 0.0, k, 0.0, NULL, "poisson3d27:9");
    check_case(&A, 0.0, 2, 0.0035, "single", "poisson3d27:9");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:12");
    check_case(&A, 0.05, 3, 0.0035, NULL, "poisson3d:12");
    gs_csr_free(&A);
    tu_rng r = tu_rng_seed(9);
    A = tu_random_spd(&r, 300, 0.02);
    check_case(&A, 0.001, 2, 0.01, NULL, "random");
    gs_csr_free(&A);
    gather_mode = NULL;
}
END_TEST

/* Many chunks of dense systems (the switch fsai_chunk_bytes = 64 KiB: a chunk per
 * few systems; by default every test matrix fits one chunk), in both gather
 * modes: the chunk list, each chunk's gather and the packed offsets that
 * the factorisation reads, with the fused systems (size 0 in the buffer)
 * ahead of the others. */
START_TEST(test_many_chunks)
{
    debug_switches.fsai_chunk_bytes = 65536;
    use_debug();
    max_row_mode = "0"; /* the arrowhead's whole row, whatever the default cap */
    gs_csr A = tu_generated("poisson3d27:9");
    gs_csr H = arrowhead(600, 600.0, 0.1, 0.5, 13);
    const char *modes[] = {NULL, "separate"};
    for (int t = 0; t < 2; t++) {
        gather_mode = modes[t];
        check_case(&A, 0.0, 3, 0.0, NULL, "poisson3d27:9, chunks of 64 KiB");
        check_case(&A, 0.0, 4, 0.0035, NULL, "poisson3d27:9, chunks of 64 KiB");
        check_case(&H, 0.0, 1, 0.0, NULL, "arrowhead:600, chunks of 64 KiB");
    }
    gather_mode = NULL;
    max_row_mode = NULL;
    reset_debug();
    gs_csr_free(&A);
    gs_csr_free(&H);
}
END_TEST

/* --max-row: the device's cut (fsai_pattern.cu: a block a long row, radix
 * select, ordered compaction; short rows copied) against the reference's,
 * pattern exactly and values as everywhere. Caps on both sides of rows of
 * every length the block kernel treats differently: a compaction pass of
 * 256 entries (rows of 100 to 2000 entries), 1 (the diagonal alone), 2,
 * and around a warp; k = 1 (S = L_1, no product: its longest row from the
 * prefilter) and k = 2, 3; distinct keys (random SPD), ties and fill (hub
 * Laplacians with equal weights), fp32, the separate gather, and a cut
 * arrowhead row of 2000. max_row and capped_rows equal the reference's. */
START_TEST(test_max_row)
{
    tu_rng r = tu_rng_seed(32);
    gs_csr R = tu_random_spd(&r, 600, 0.02);
    const char *caps[] = {"1", "2", "31", "32", "33", "100", "257", "0"};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        max_row_mode = caps[c];
        check_case(&R, 0.0, 1, 0.0, NULL, "random:600");
        check_case(&R, 0.001, 2, 0.0, NULL, "random:600");
        check_case(&R, 0.001, 2, 0.0035, NULL, "random:600");
    }
    max_row_mode = "40";
    check_case(&R, 0.01, 3, 0.0035, "single", "random:600");
    gather_mode = "separate";
    check_case(&R, 0.001, 2, 0.0, NULL, "random:600");
    gather_mode = NULL;
    gs_csr_free(&R);
    /* hub rows of S: 836 entries with k = 1; with k = 2 (3, random weights)
     * 1501 (1500) rows longer than 33, up to 2501 (2000) entries; the caps
     * keep the reference's factorisation cheap (k = 2, --max-row 300: 1.3e10
     * flops) */
    gs_csr H = tu_hub_laplacian(3000, 3, 3, 1.0, 1), W = tu_hub_laplacian(2000, 2, 2, 0.0, 2);
    const char *hub_caps[] = {"2", "33", "100", "300", "500"};
    for (size_t c = 0; c < sizeof hub_caps / sizeof hub_caps[0]; c++) {
        max_row_mode = hub_caps[c];
        check_case(&H, 0.0, 1, 0.0, NULL, "hub Laplacian:3000, equal weights");
        if (c < 4) check_case(&H, 0.0, 2, 0.0, NULL, "hub Laplacian:3000, equal weights");
        if (c < 3) check_case(&W, 0.0, 3, 0.0035, NULL, "hub Laplacian:2000, random weights");
    }
    gs_csr_free(&H), gs_csr_free(&W);
    gs_csr A = arrowhead(2000, 2000.0, 0.1, 0.5, 11);
    max_row_mode = "1000";
    check_case(&A, 0.0, 1, 0.0, NULL, "arrowhead:2000");
    gs_csr_free(&A);
    max_row_mode = NULL;
}
END_TEST

/* --time-limit inside the GPU setup: a deadline already past stops it at
 * its first stage end; one that passes during a long factorisation (the
 * arrow, tu_arrow_spd, with 3000 rows and k = 2: S is the whole lower
 * triangle, 6.8e12 flops of local systems in chunks, the largest class cut
 * into pieces of 2e11 flops because a deadline is set) stops it between
 * pieces or chunks, long before the stage would end. Either way
 * GS_ERR_TIME_LIMIT naming the stage, no preconditioner, every device byte
 * given back. */
START_TEST(test_time_limit)
{
    gs_csr T = tu_arrow_spd(3000);
    const double limits[] = {-1.0, 0.3};
    for (int t = 0; t < 2; t++) {
        gs_mat *Ae = NULL;
        gs_pc *pc = NULL;
        gs_error err = {0};
        tu_fsai_args a;
        tu_fsai_args_make(&a, 0.0, 2, 0.0, NULL);
        tu_fsai_arg_set(&a, "max-row", "0");
        poison_device_heap();
        const size_t base = gpu->device_bytes_now;
        ck_assert(gpu->ops->mat_create(gpu, &T, GS_FP64, &Ae) == GS_OK);
        gs_pc_hook hook;
        memset(&hook, 0, sizeof hook);
        const double t0 = gs_now();
        hook.deadline = t0 + limits[t];
        const int status = gs_pc_create_hooked(gs_pc_find("fsai"), gpu, &a.p, &T, Ae, &hook, &pc,
                                               &err);
        const double took = gs_now() - t0;
        ck_assert_msg(status == GS_ERR_TIME_LIMIT, "limit %g: %s: %s", limits[t],
                      gs_status_name(status), err.msg);
        ck_assert_ptr_null(pc);
        ck_assert_msg(strstr(err.msg, "setup stage") != NULL, "limit %g: '%s'", limits[t], err.msg);
        ck_assert_msg(t == 0 || strstr(err.msg, "factorisation") || strstr(err.msg, "gather"),
                      "limit %g: '%s'", limits[t], err.msg);
        ck_assert_msg(t == 0 || took < 3.0, "stopped after %.3g s", took);
        gpu->ops->mat_destroy(gpu, Ae);
        ck_assert_msg(gpu->device_bytes_now == base, "device bytes leaked: %zu now, %zu before",
                      gpu->device_bytes_now, base);
        gs_error_clear(&gpu->err);
    }
    gs_csr_free(&T);
}
END_TEST

START_TEST(test_single_precision)
{
    gs_csr A = tu_generated("poisson3d:12");
    check_case(&A, 0.05, 3, 0.0, "single", "poisson3d:12");
    check_case(&A, 0.05, 3, 0.0035, "single", "poisson3d:12");
    gs_csr_free(&A);
    A = tu_generated("poisson3d27:9");
    check_case(&A, 0.0, 3, 0.0, "single", "poisson3d27:9");
    check_case(&A, 0.0, 4, 0.0, "single", "poisson3d27:9");
    gs_csr_free(&A);
}
END_TEST

/* Every real SPD matrix of ../shared/matrices (skipped if absent): unfiltered
 * with k = 1, 2, and the defaults (k = 3, with both filters). */
START_TEST(test_real_spd)
{
    const char *dir = tu_matrices_dir();
    if (!dir) {
        printf("test_real_spd: skipped (no ../shared/matrices; set GS_MATRICES)\n");
        return;
    }
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], sym[32], field[32], kind[32];
        long rows, cols, nnz;
        if (sscanf(line, "%63s %ld %ld %ld %31s %31s %31s", name, &rows, &cols, &nnz, sym, field,
                   kind) != 7 ||
            strcmp(kind, "SPD") != 0 || strcmp(field, "complex") == 0)
            continue;
        gs_csr A = {0};
        gs_error err = {0};
        tu_matrix_path(path, sizeof path, name);
        ck_assert_msg(gs_mm_read_csr(path, &A, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
        check_case(&A, 0.02, 1, 0.0, NULL, name);
        check_case(&A, 0.02, 2, 0.0, NULL, name);
        check_case(&A, -1, -1, -1, NULL, name); /* tau 0.05, k 3, delta 0.0035 */
        gs_csr_free(&A);
        checked++;
    }
    fclose(f);
    ck_assert_int_ge(checked, 10);
}
END_TEST

/* A's CSR taken from the engine's copy (pc->A: its sliced ELL turned back
 * into CSR, or its own CSR arrays), from mat_create_system's matrix (kept as
 * CSR until setup_done), or uploaded from the host (no pc->A): the same A,
 * so the same G, bit for bit, in both layouts of A. */
START_TEST(test_engine_copy_of_A)
{
    tu_rng r = tu_rng_seed(7);
    gs_csr As[3] = {tu_generated("poisson3d:12"), tu_generated("poisson3d27:8"), tu_random_spd(&r, 300, 0.02)};
    int layouts[2] = {0, 0}; /* SELL-32, CSR seen */
    tu_fsai_args a;
    for (int t = 0; t < 3; t++) {
        const gs_params *p = tu_fsai_args_make(&a, t == 2 ? 0.001 : 0.01, 2, 0.0035, NULL);
#if GS_HAVE_CUDA
        gs_mat *Ae = NULL;
        ck_assert_int_eq(gpu->ops->mat_create(gpu, &As[t], GS_FP64, &Ae), GS_OK);
        const char *layout = gs_cuda_mat_layout(Ae);
        layouts[0] |= strcmp(layout, "SELL-32") == 0;
        layouts[1] |= strcmp(layout, "CSR") == 0;
        gpu->ops->mat_destroy(gpu, Ae);
#endif
        fsai_out dev = fsai_on(gpu, &As[t], p);
        a_mode = 1;
        fsai_out up = fsai_on(gpu, &As[t], p);
        a_mode = 2;
        fsai_out kept = fsai_on(gpu, &As[t], p);
        a_mode = 0;
        ck_assert_msg(dev.status == GS_OK && up.status == GS_OK && kept.status == GS_OK,
                      "case %d: %s / %s / %s", t, dev.err.msg, up.err.msg, kept.err.msg);
        ck_assert_msg(strncmp(dev.stages, "csr of A;", 9) == 0, "case %d: stages %s", t, dev.stages);
        ck_assert_msg(strncmp(up.stages, "transfer;", 9) == 0, "case %d: stages %s", t, up.stages);
        ck_assert_msg(strncmp(kept.stages, "csr of A;", 9) == 0, "case %d: stages %s", t, kept.stages);
        const fsai_out *other[2] = {&up, &kept};
        for (int k = 0; k < 2; k++) {
            char label[120];
            snprintf(label, sizeof label, "case %d: G from A %s against A from the engine", t,
                     k ? "kept from the upload" : "uploaded");
            tu_assert_same_csr(&dev.G, &other[k]->G, label);
        }
        gs_csr_free(&dev.G), gs_csr_free(&up.G), gs_csr_free(&kept.G), gs_csr_free(&As[t]);
    }
#if GS_HAVE_CUDA
    ck_assert_msg(layouts[0] && layouts[1], "layouts covered: SELL-32 %d, CSR %d", layouts[0],
                  layouts[1]);
#else
    (void)layouts;
#endif
}
END_TEST

/* z = G^T (G r) on the device against the host product with the GPU's own G:
 * |difference| <= 2 γ_{2w} (|G^T| |G| |r|) per entry, w the longest row. */
/* The device's G^T (fp64: downloaded as CSR) is the host transpose of the
 * saved G (17 digits: exact) bit for bit, rows in increasing column order;
 * fp32 values are checked through the apply only. */
static void check_device_transpose(const gs_pc *pc, const gs_csr *GT, const char *label)
{
#if GS_HAVE_CUDA /* a CPU-only build has no device (the GPU tests do not run) */
    const gs_fsai_data *d = (const gs_fsai_data *)pc->data;
    gs_csr B = {0};
    gs_error err = {0};
    int owned = 0;
    ck_assert_int_eq(gs_csr_alloc(GT->n_rows, GT->n_cols, GT->nnz, 1, &B, &err), GS_OK);
    const int status = gs_cuda_mat_device_csr_download(gpu, d->GT_eng, &B, &owned);
    if (status == GS_ERR_UNSUPPORTED) { /* stored in fp32 */
        gs_error_clear(&gpu->err);
        gs_csr_free(&B);
        return;
    }
    ck_assert_msg(status == GS_OK, "%s: G^T download: %s", label, gpu->err.msg);
    for (int32_t i = 0; i <= GT->n_rows; i++)
        ck_assert_msg(B.row_ptr[i] == GT->row_ptr[i], "%s: G^T row_ptr[%d] = %lld, want %lld",
                      label, (int)i, (long long)B.row_ptr[i], (long long)GT->row_ptr[i]);
    for (int64_t k = 0; k < GT->nnz; k++)
        ck_assert_msg(B.col[k] == GT->col[k] && B.val[k] == GT->val[k],
                      "%s: G^T entry %lld: (%d, %.17g), want (%d, %.17g)", label, (long long)k,
                      (int)B.col[k], B.val[k], (int)GT->col[k], GT->val[k]);
    gs_csr_free(&B);
#else
    (void)pc, (void)GT, (void)label;
#endif
}

/* z = G^T G r and r.z on the GPU (G^T transposed on the device) against
 * the host's product with the downloaded G and its host transpose. */
static void check_apply(const gs_csr *Ain, const gs_params *p, const char *label)
{
    const gs_csr A = *Ain;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_error err = {0};
    gs_vec *r = NULL, *z = NULL;
    const int32_t n = A.n_rows;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &Ae), GS_OK);
    ck_assert_msg(gs_pc_create(gs_pc_find("fsai"), gpu, p, &A, Ae, &pc, &err) == GS_OK, "%s",
                  err.msg);
    gs_csr G = {0}, GT = {0};
    tu_pc_saved_matrix(pc, "G", &G);
    ck_assert_int_eq(gs_csr_transpose(&G, &GT, &err), GS_OK);
    check_device_transpose(pc, &GT, label);
    tu_rng rng = tu_rng_seed(9);
    double *rh = malloc((size_t)n * sizeof *rh), *t = malloc((size_t)n * sizeof *t);
    double *zh = malloc((size_t)n * sizeof *zh), *zg = malloc((size_t)n * sizeof *zg);
    double *at = malloc((size_t)n * sizeof *at), *az = malloc((size_t)n * sizeof *az);
    double *ar = malloc((size_t)n * sizeof *ar);
    for (int32_t i = 0; i < n; i++) rh[i] = 2 * tu_uniform(&rng) - 1, zg[i] = NAN, ar[i] = fabs(rh[i]);
    ck_assert_int_eq(gpu->ops->vec_create(gpu, n, &r), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_create(gpu, n, &z), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_upload(gpu, r, rh), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_upload(gpu, z, zg), GS_OK);
    ck_assert_int_eq(gs_pc_apply_dot(pc, r, z, 3), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_download(gpu, z, zg), GS_OK);
    gs_csr_spmv(&G, rh, t);
    gs_csr_spmv(&GT, t, zh);
    gs_csr Ga = {0}, GTa = {0};                                  /* |G|, |G|^T */
    ck_assert_int_eq(gs_csr_copy(&G, &Ga, &err), GS_OK);
    for (int64_t q = 0; q < Ga.nnz; q++) Ga.val[q] = fabs(Ga.val[q]);
    ck_assert_int_eq(gs_csr_transpose(&Ga, &GTa, &err), GS_OK);
    gs_csr_spmv(&Ga, ar, at);
    gs_csr_spmv(&GTa, at, az);
    const double w = (double)tu_max_row_length(&G) + (double)tu_max_row_length(&GT);
    double rz = 0, rza = 0, slot = NAN;
    for (int32_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(zg[i] - zh[i]) <= 4.0 * w * U64 * az[i] + 1e-300,
                      "%s: apply: z[%d] = %.17g on the GPU, %.17g on the host", label, (int)i,
                      zg[i], zh[i]);
        rz += rh[i] * zh[i], rza += fabs(rh[i]) * az[i];
    }
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, 3, 1, &slot), GS_OK);
    ck_assert_msg(fabs(slot - rz) <= 4.0 * (w + n) * U64 * rza, "%s: r.z %.17g vs %.17g", label,
                  slot, rz);
    gs_csr_free(&Ga);
    gs_csr_free(&GTa);
    gs_csr_free(&GT);
    gs_csr_free(&G);
    free(rh), free(t), free(zh), free(zg), free(at), free(az), free(ar);
    gpu->ops->vec_destroy(gpu, r);
    gpu->ops->vec_destroy(gpu, z);
    gs_pc_destroy(pc);
    gpu->ops->mat_destroy(gpu, Ae);
}

/* Patterns whose transposes differ in shape: short rows both ways (7-point),
 * G diagonal (27-point, default tau: the direct path), long rows of G^T
 * (random with dense rows), one row of G as long as the matrix (arrowhead),
 * fp32 values. */
START_TEST(test_apply)
{
    tu_fsai_args a;
    gs_csr A = tu_generated("poisson3d:10");
    check_apply(&A, tu_fsai_args_make(&a, 0.05, 3, 0.0035, NULL), "poisson3d:10");
    check_apply(&A, tu_fsai_args_make(&a, 0.05, 3, 0.0035, "single"), "poisson3d:10 single");
    gs_csr_free(&A);
    A = tu_generated("poisson3d27:8");
    check_apply(&A, tu_fsai_args_make(&a, 0.05, 3, 0.0035, NULL), "poisson3d27:8 diagonal G");
    gs_csr_free(&A);
    tu_rng r = tu_rng_seed(7);
    A = tu_random_spd(&r, 900, 0.02);
    check_apply(&A, tu_fsai_args_make(&a, 0.001, 2, 0.0, NULL), "random:900");
    gs_csr_free(&A);
    A = arrowhead(600, 600.0, 0.1, 0.5, 3);
    check_apply(&A, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), "arrowhead:600");
    gs_csr R = reversed(&A);                  /* dense first row: row 0 of G^T is full */
    check_apply(&R, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), "reversed arrowhead:600");
    gs_csr_free(&A);
    /* the transpose in chunks of a few entries (columns of G cut across
     * chunks, so rows of G^T are assembled from several) */
    debug_switches.fsai_transpose_chunk = 37;
    use_debug();
    check_apply(&R, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), "reversed arrowhead:600, chunks of 37");
    A = tu_random_spd(&r, 300, 0.02);
    check_apply(&A, tu_fsai_args_make(&a, 0.001, 2, 0.0, "single"), "random:300 single, chunks of 37");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:10");
    check_apply(&A, tu_fsai_args_make(&a, 0.05, 3, 0.0035, NULL), "poisson3d:10, chunks of 37");
    reset_debug();
    gs_csr_free(&A);
    gs_csr_free(&R);
}
END_TEST

/* CG with the GPU's FSAI converges like CG with the CPU's (b = A 1). */
static long cg_iterations(gs_engine *e, const gs_csr *A, const gs_params *p, int32_t *reason)
{
    gs_engine *own = NULL;
    gs_error err = {0};
    if (!e) {
        ck_assert_int_eq(gs_engine_cpu_create(&own, &err), GS_OK);
        e = own;
    }
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_vec *b = NULL, *x = NULL;
    const int32_t n = A->n_rows;
    double *ones = malloc((size_t)n * sizeof *ones), *bh = malloc((size_t)n * sizeof *bh);
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(A, ones, bh);
    ck_assert_int_eq(e->ops->mat_create(e, A, GS_FP64, &Ae), GS_OK);
    ck_assert_msg(gs_pc_create(gs_pc_find("fsai"), e, p, A, Ae, &pc, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(e->ops->vec_create(e, n, &b), GS_OK);
    ck_assert_int_eq(e->ops->vec_create(e, n, &x), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, b, bh), GS_OK);
    ck_assert_int_eq(e->ops->set(e, x, 0.0), GS_OK);
    gs_krylov_opts opts = {.tol = 1e-8, .maxit = 5000, .restart = 30, .idr_s = 4,
                           .check_every = 1, .record_history = 0, .use_capture = 0};
    gs_krylov_result res;
    memset(&res, 0, sizeof res);
    ck_assert_int_eq(gs_method_find("cg")->solve(e, Ae, pc, b, x, &opts, &res), GS_OK);
    *reason = (int32_t)res.reason;
    long its = res.iterations;
    gs_krylov_result_free(&res);
    e->ops->vec_destroy(e, b), e->ops->vec_destroy(e, x);
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    gs_engine_destroy(own);
    free(ones), free(bh);
    return its;
}

START_TEST(test_cg_iterations)
{
    const char *specs[] = {"poisson3d:20", "aniso3d:16"};
    for (int s = 0; s < 2; s++) {
        gs_csr A = tu_generated(specs[s]);
        tu_fsai_args a;
        int32_t rg = 0, rc = 0;
        for (int prec = 0; prec < 2; prec++) {
            const gs_params *p = tu_fsai_args_make(&a, -1, -1, -1, prec ? "single" : NULL);
            const long g = cg_iterations(gpu, &A, p, &rg), c = cg_iterations(NULL, &A, p, &rc);
            const long margin = c / 20 > 2 ? c / 20 : 2;
            ck_assert_msg(labs(g - c) <= margin, "%s %s: CG %ld iterations with the GPU's fsai, "
                          "%ld with the CPU's", specs[s], prec ? "single" : "double", g, c);
            ck_assert_int_eq(rg, rc);
        }
        gs_csr_free(&A);
    }
}
END_TEST

/* Bad input: the GPU setup fails with the CPU's status and message. */
static void same_failure(const gs_csr *A, const gs_params *p, int status, const char *what)
{
    fsai_out g = fsai_on(gpu, A, p), c = fsai_on(NULL, A, p);
    ck_assert_msg(c.status == status, "%s: CPU %s: %s", what, gs_status_name(c.status), c.err.msg);
    ck_assert_msg(g.status == status, "%s: GPU %s: %s (CPU: %s)", what, gs_status_name(g.status),
                  g.err.msg, c.err.msg);
    ck_assert_msg(strcmp(g.err.msg, c.err.msg) == 0, "%s: GPU '%s', CPU '%s'", what, g.err.msg,
                  c.err.msg);
    gs_csr_free(&g.G);
    gs_csr_free(&c.G);
}

START_TEST(test_bad_input)
{
    gs_params none = {0};
    tu_fsai_args a;
    gs_csr C = tu_generated("convdiff3d:5");
    same_failure(&C, &none, GS_ERR_INPUT, "nonsymmetric");
    gs_csr_free(&C);
    gs_csr T = tu_generated("poisson3d:6");
    const int64_t d17 = gs_csr_find(&T, 16, 16);
    T.val[d17] = 0.0;
    same_failure(&T, &none, GS_ERR_INPUT, "zero diagonal");
    T.val[d17] = NAN;
    same_failure(&T, &none, GS_ERR_INPUT, "NaN diagonal");
    T.val[d17] = -6.0;
    same_failure(&T, &none, GS_ERR_NUMERIC, "negative diagonal");
    T.val[d17] = 6.0;
    const int64_t e1 = gs_csr_find(&T, 40, 41);
    T.val[e1] = -1.5;
    same_failure(&T, &none, GS_ERR_INPUT, "nonsymmetric value");
    T.val[e1] = -1.0;
    /* symmetric, positive diagonal, indefinite local systems: a_{i,i-1} = -7 */
    const int32_t rows[] = {100, 135, 170}; /* x > 0 on the 6^3 grid: i - 1 is a neighbour */
    for (int t = 0; t < 3; t++) {
        const int32_t i = rows[t];
        T.val[gs_csr_find(&T, i, i - 1)] = T.val[gs_csr_find(&T, i - 1, i)] = -7.0;
    }
    same_failure(&T, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), GS_ERR_NUMERIC, "indefinite, k = 1");
    same_failure(&T, &none, GS_ERR_NUMERIC, "indefinite, defaults");
    same_failure(&T, tu_fsai_args_make(&a, 0.0, 3, 0.0, "single"), GS_ERR_NUMERIC, "indefinite, single");
    gs_csr_free(&T);
    /* an indefinite local system of more than 256 rows (the in-place path) */
    gs_csr P = tu_generated("poisson3d27:9");
    const int32_t mid = 4 * 81 + 4 * 9 + 4;
    for (int64_t q = P.row_ptr[mid]; q < P.row_ptr[mid + 1]; q++)
        if (P.col[q] != mid) P.val[q] = P.val[gs_csr_find(&P, P.col[q], mid)] = -30.0;
    same_failure(&P, tu_fsai_args_make(&a, 0.0, 4, 0.0, NULL), GS_ERR_NUMERIC,
                 "indefinite, m = 365 (panel in global memory)");
    gs_csr_free(&P);
    /* the whole matrix as the last row's local system, indefinite (corner 1
     * against couplings of 0.5 to 0.9): the panel in shared memory (150,
     * gathered by its kernel or not) and the step-by-step path (2000) */
    const int32_t sizes[] = {150, 2000};
    for (int t = 0; t < 2; t++) {
        gs_csr H = arrowhead(sizes[t], 1.0, 0.5, 0.9, 17);
        tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL);
        tu_fsai_arg_set(&a, "max-row", "0"); /* the whole system, whatever the default cap */
        same_failure(&H, &a.p, GS_ERR_NUMERIC,
                     t ? "indefinite arrowhead 2000" : "indefinite arrowhead 150");
        if (t == 0) {
            tu_fsai_arg_set(&a, "gather", "separate");
            same_failure(&H, &a.p, GS_ERR_NUMERIC, "indefinite arrowhead 150, separate");
        }
        gs_csr_free(&H);
    }
}
END_TEST

/* ------------------------------------------ the large systems' DGEMM path */

/* fsai_factor_gemm.cu against the reference. It is the rule's path for
 * fp64 systems too large for shared memory (m > 225 on an H100/H200) where
 * their work bound count x m_max^3 reaches 1e12 (the power-law graph) or a
 * system has more than 640 rows (the suites above reach it that way: the
 * arrowheads of 600 and 2000), so the arrow of 400 and the hubs of 500 here
 * take the block kernel by the rule (checked: the rule's other side), and
 * the switch fsai_gemm_min = N forces
 * it onto every system of at least N rows: buckets of one panel (m <= 64:
 * the diagonal kernel alone, no DGEMM) and of several (65..172 on the
 * 27-point stencil with k = 3; 1..400 on the arrow with k = 2), with the
 * other classes beside it, in many chunks (the switch fsai_chunk_bytes),
 * and off (the block kernel in fp64). The tolerance is compare's, as for
 * every GPU path: the blocked Cholesky (DGEMM updates, the diagonal block
 * inverted for the panel solve) is backward stable like the step-by-step
 * one; only the order of the roundings differs, so a row of G differs by
 * at most a small multiple of m kappa(A[P,P]) u of its norm. */
static void gemm_switch(long long gemm_min, long long chunk_bytes)
{
    debug_switches.fsai_gemm_min = gemm_min;
    debug_switches.fsai_chunk_bytes = chunk_bytes;
    use_debug();
}

START_TEST(test_gemm_path)
{
    max_row_mode = "0";
    gs_csr A = tu_generated("poisson3d27:9"), T = tu_arrow_spd(400);
    const long long mins[] = {1, 65, 100};
    large_expect = "gemm:";
    for (size_t t = 0; t < sizeof mins / sizeof mins[0]; t++) {
        gemm_switch(mins[t], 0);
        check_case(&A, 0.0, 3, 0.0, NULL, "poisson3d27:9, gemm forced");
        if (mins[t] == 1) /* k = 2: m <= 63 */
            check_case(&A, 0.0, 2, 0.0035, NULL, "poisson3d27:9, gemm forced");
    }
    large_expect = "block:"; /* the rule: the arrow's systems of 226 to 400 rows, */
    gemm_switch(0, 0);       /* at most 400 x 400^3 = 2.6e10 of work: the block kernel */
    check_case(&T, 0.0, 2, 0.0, NULL, "arrow:400, block by the rule");
    check_case(&T, 0.0, 2, 0.0035, NULL, "arrow:400, block by the rule");
    large_expect = "gemm:";
    gemm_switch(200, 0);
    check_case(&T, 0.0, 2, 0.0, NULL, "arrow:400, gemm from 200");
    gemm_switch(1, 65536); /* a chunk or a few systems each */
    check_case(&T, 0.0, 2, 0.0, NULL, "arrow:400, gemm forced, chunks of 64 KiB");
    gather_mode = "separate";
    check_case(&A, 0.0, 3, 0.0035, NULL, "poisson3d27:9, gemm forced, chunks of 64 KiB");
    gather_mode = NULL;
    large_expect = "block:"; /* off: the block kernel, fp64 */
    gemm_switch(-1, 0);
    check_case(&T, 0.0, 2, 0.0, NULL, "arrow:400, gemm off");
    gemm_switch(1, 0); /* fp32: the switch does not apply */
    check_case(&T, 0.0, 2, 0.0, "single", "arrow:400, single");
    /* hubs: two systems above shared memory (502 rows, and 835 cut to 500 by
     * --max-row) by the rule (the block kernel: 2 x 500^3 of work), then
     * every system from 33 rows */
    gs_csr H = tu_hub_laplacian(3000, 3, 3, 1.0, 1);
    max_row_mode = "500";
    large_expect = "block:";
    gemm_switch(0, 0);
    check_case(&H, 0.0, 1, 0.0, NULL, "hub Laplacian:3000, block by the rule");
    large_expect = "gemm:";
    gemm_switch(33, 0);
    max_row_mode = "300"; /* k = 2: 1501 rows longer than 33 */
    check_case(&H, 0.0, 2, 0.0035, NULL, "hub Laplacian:3000, gemm from 33");
    large_expect = NULL;
    max_row_mode = NULL;
    reset_debug();
    gs_csr_free(&A), gs_csr_free(&T), gs_csr_free(&H);
}
END_TEST

/* A local system that is not positive definite, factored by the DGEMM
 * path: the same status and message as the reference (the smallest
 * failing row, its first pivot that is not positive). The arrow of 400
 * rows with a_300,300 = 0.5 (< 1/(2 + sqrt 3) + 1/4, so the pivot of row
 * 300 or 301 fails in every system that holds rows 299..301: k = 2 makes
 * P_i = 0..i): a pivot in the fifth panel, forced (the rule's run, the block
 * kernel, gives the same message);
 * and the small indefinite grid of test_bad_input, every system forced
 * through the path (one panel). */
START_TEST(test_gemm_failure)
{
    tu_fsai_args a;
    gs_csr T = tu_arrow_spd(400);
    T.val[gs_csr_find(&T, 300, 300)] = 0.5;
    for (int t = 0; t < 2; t++) {
        gemm_switch(t ? 1 : 0, 0);
        same_failure(&T, tu_fsai_args_make(&a, 0.0, 2, 0.0, NULL), GS_ERR_NUMERIC,
                     t ? "arrow:400 indefinite, gemm forced" : "arrow:400 indefinite, gemm rule");
    }
    gs_csr_free(&T);
    gs_csr G = tu_generated("poisson3d:6");
    const int32_t rows[] = {100, 135, 170};
    for (int t = 0; t < 3; t++) {
        const int32_t i = rows[t];
        G.val[gs_csr_find(&G, i, i - 1)] = G.val[gs_csr_find(&G, i - 1, i)] = -7.0;
    }
    gemm_switch(1, 0);
    same_failure(&G, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), GS_ERR_NUMERIC,
                 "indefinite grid, k = 1, gemm forced");
    same_failure(&G, tu_fsai_args_make(&a, 0.0, 3, 0.0, NULL), GS_ERR_NUMERIC,
                 "indefinite grid, k = 3, gemm forced");
    reset_debug();
    gs_csr_free(&G);
}
END_TEST

/* The kind of matrix: a power-law graph Laplacian (rows of S up to
 * the default --max-row, 640), every system of 65 rows or more forced
 * through the DGEMM path: G as the reference's (compare) and CG's
 * iterations within one of the CPU engine's (b = A 1, defaults). */
START_TEST(test_gemm_powerlaw)
{
    gs_csr A = tu_generated("powerlaw:20000");
    tu_fsai_args a;
    int32_t rg = 0, rc = 0;
    gemm_switch(65, 0);
    large_expect = "gemm:";
    check_case(&A, 0.05, 3, 0.0035, NULL, "powerlaw:20000, gemm from 65");
    large_expect = NULL;
    const gs_params *p = tu_fsai_args_make(&a, -1, -1, -1, NULL);
    const long g = cg_iterations(gpu, &A, p, &rg), c = cg_iterations(NULL, &A, p, &rc);
    ck_assert_msg(labs(g - c) <= 1, "powerlaw:20000: CG %ld iterations with the GPU's fsai "
                  "(gemm from 65), %ld with the CPU's", g, c);
    ck_assert_int_eq(rg, rc);
    reset_debug();
    gs_csr_free(&A);
}
END_TEST

static void reset_gather_mode(void) /* after a failed test, too */
{
    gather_mode = NULL;
    max_row_mode = NULL;
    large_expect = NULL;
}

static Suite *cuda_fsai_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_fsai");
    TCase *tc = tcase_create("cuda_fsai");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, reset_gather_mode, NULL);
    tcase_add_test(tc, test_device_or_skip);
    if (have_gpu) {
        tcase_add_test(tc, test_generated);
        tcase_add_test(tc, test_diagonal);
        tcase_add_test(tc, test_every_size_class);
        tcase_add_test(tc, test_host_and_device_plans);
        tcase_add_test(tc, test_postfilter_wide_rows);
        tcase_add_test(tc, test_random_with_dense_rows);
        tcase_add_test(tc, test_one_huge_system);
        tcase_add_test(tc, test_fixed_point);
        tcase_add_test(tc, test_separate_gather);
        tcase_add_test(tc, test_many_chunks);
        tcase_add_test(tc, test_single_precision);
        tcase_add_test(tc, test_real_spd);
        tcase_add_test(tc, test_engine_copy_of_A);
        tcase_add_test(tc, test_apply);
        tcase_add_test(tc, test_cg_iterations);
        tcase_add_test(tc, test_bad_input);
        tcase_add_test(tc, test_max_row);
        tcase_add_test(tc, test_time_limit);
        tcase_add_test(tc, test_gemm_path);
        tcase_add_test(tc, test_gemm_failure);
        tcase_add_test(tc, test_gemm_powerlaw);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it: run the
 * tests in this process (as check_cuda_engine does). */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    gs_error err = {0};
    if (!have_gpu) printf("check_cuda_fsai: skipped: no CUDA device\n");
    else if (gs_engine_cuda_create(&gpu, &err) != GS_OK) {
        printf("check_cuda_fsai: CUDA engine: %s\n", err.msg);
        return 1;
    }
    SRunner *sr = srunner_create(cuda_fsai_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (have_gpu)
        printf("check_cuda_fsai: largest row error max|g_gpu - g_cpu| / ||g_cpu||: %.3g (fp64), "
               "%.3g (fp32 setup against the fp64 reference)\n", worst64, worst32);
    gs_engine_destroy(gpu);
    return failed == 0 ? 0 : 1;
}
