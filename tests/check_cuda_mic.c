/* check_cuda_mic.c - mic's CUDA setup (cuda/precond/mic*.cu) and the toolkit's triangular
 * solves (cuda/sparse/trisolve_levels.cu, trisolve_syncfree.cu) against the CPU reference
 * (src/precond/pc_mic.c, the oracle) and a host substitution on the same factors. Without
 * a CUDA device the suite says "skipped" and passes. The device heap is filled with NaN
 * before every setup and every output vector before every apply, so that memory a kernel
 * forgets to write shows.
 *
 * Tolerances (u = 2^-53):
 * - patterns: integer work, equal exactly; so are the shift, the number of tries and the
 *   dropped-fill count (decisions and counts, no rounding).
 * - D and L against the reference: both evaluate the same sums of products l_jm d_m l_km,
 *   in another order (the reference subtracts one term at a time from a_jk, the device
 *   sums the terms and subtracts once). One entry's rounding then differs by at most
 *   2 K u (|a_jk| + sum |terms|) (K terms), which later columns inherit, scaled by their
 *   own multipliers. Allowed: |x_gpu - x_cpu| <= 1e-9 max(|x_cpu|, the scale of x's
 *   column), which leaves an amplification of 1e4 over 2 K u (K < 500 here) for the
 *   inherited part; then the defining identity of L D L^T (check_ldlt, with its own
 *   rounding bound) is checked on the device's own factors, which binds it tightly.
 * - substitutions: z = M^-1 r by the device, checked on the very factors the device
 *   saved, on the host, by the residual |r - L D L^T z| <= 8 K u (|L| D |L^T| |z| + |r|)
 *   (K terms of row i): substitution is backward stable (Higham Thm 8.5), so this holds
 *   for any conditioning, and a wrong or missing row breaks it. The toolkit's own test
 *   (check_cuda_toolkit.c, test_trisolve) compares x with a host substitution. */
#include <math.h>
#include <string.h>

#include "engine.h"
#include "gen.h"
#include "krylov.h"
#include "precond.h"
#include "testutil.h"

#define EPS DBL_EPSILON

static gs_engine *gpu;

/* Fill about 256 MiB of the device heap with NaN and give it back. */
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

/* ---------------------------------------------------------------- runs */

typedef struct mic_run {
    gs_engine *eng; /* the GPU engine (not owned) or a CPU engine (owned) */
    gs_mat *A;
    gs_pc *pc;
} mic_run;

/* mic on the GPU (on_gpu) or on a fresh CPU engine; status returned, err filled. */
static int mic_build(const gs_csr *A, const gs_params *p, int on_gpu, mic_run *r, gs_error *err)
{
    memset(r, 0, sizeof *r);
    int status = GS_OK;
    if (on_gpu) {
        r->eng = gpu;
        poison_device_heap();
    } else {
        status = gs_engine_cpu_create(&r->eng, err);
    }
    if (status == GS_OK) status = r->eng->ops->mat_create(r->eng, A, GS_FP64, &r->A);
    if (status == GS_OK) status = gs_pc_create(gs_pc_find("mic"), r->eng, p, A, r->A, &r->pc, err);
    return status;
}

static void mic_release(mic_run *r)
{
    gs_pc_destroy(r->pc);
    if (r->eng) r->eng->ops->mat_destroy(r->eng, r->A);
    if (r->eng && r->eng != gpu) gs_engine_destroy(r->eng);
    if (r->eng == gpu) gs_error_clear(&gpu->err);
    memset(r, 0, sizeof *r);
}

static double extra(const gs_pc *pc, const char *key)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    ck_assert_msg(kv != NULL, "report item %s missing", key);
    return kv->num;
}

typedef struct factors {
    gs_csr L, LT;
    double *d;
} factors;

static void factors_read(gs_pc *pc, factors *f)
{
    char prefix[512], path[600];
    gs_error err = {0};
    int64_t n = 0;
    tu_tmpname(prefix, sizeof prefix, "");
    ck_assert_msg(pc->save && pc->save(pc, prefix, &err) == GS_OK, "save: %s", err.msg);
    snprintf(path, sizeof path, "%s_L.mtx", prefix);
    ck_assert_msg(gs_mm_read_csr(path, &f->L, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    snprintf(path, sizeof path, "%s_D.mtx", prefix);
    ck_assert_msg(gs_mm_read_vector(path, &f->d, &n, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    remove(prefix);
    ck_assert_int_eq(n, f->L.n_rows);
    ck_assert(gs_csr_transpose(&f->L, &f->LT, NULL) == GS_OK);
}

static void factors_free(factors *f)
{
    gs_csr_free(&f->L), gs_csr_free(&f->LT);
    free(f->d);
}

/* ------------------------------------------------------ the comparisons */

/* (L D L^T)_ij = a_ij off the diagonal on A's pattern, (L D L^T)_ii = (1 + X) a_ii -
 * omega (fill of row i); bounds as check_pc_mic.c's check_ldlt. */
static void check_ldlt(const gs_csr *A, const factors *f, double omega, double shift,
                       const char *what)
{
    const int32_t n = A->n_rows;
    double *acc = calloc(n, sizeof(double)), *mag = calloc(n, sizeof(double));
    int64_t *cnt = calloc(n, sizeof(int64_t));
    int32_t *touched = calloc(n, sizeof(int32_t));
    ck_assert(acc && mag && cnt && touched);
    for (int32_t i = 0; i < n; i++) {
        int32_t count = 0;
        for (int64_t p = f->L.row_ptr[i]; p < f->L.row_ptr[i + 1]; p++) {
            const int32_t k = f->L.col[p];
            const double lik_dk = f->L.val[p] * f->d[k];
            for (int64_t q = f->LT.row_ptr[k]; q < f->LT.row_ptr[k + 1]; q++) {
                const int32_t j = f->LT.col[q];
                if (cnt[j] == 0) touched[count++] = j;
                acc[j] += lik_dk * f->LT.val[q], mag[j] += fabs(lik_dk * f->LT.val[q]);
                cnt[j]++;
            }
        }
        double outside = 0, row_mag = 0, aii = 0;
        int64_t row_terms = 0;
        for (int32_t t = 0; t < count; t++) {
            const int32_t j = touched[t];
            row_mag += mag[j], row_terms += cnt[j];
            if (gs_csr_find(A, i, j) < 0) outside += acc[j];
        }
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const int32_t j = A->col[p];
            if (j == i) {
                aii = A->val[p];
                continue;
            }
            const double bound = 8.0 * (double)(cnt[j] + 1) * EPS * (mag[j] + fabs(A->val[p]));
            ck_assert_msg(fabs(acc[j] - A->val[p]) <= bound, "%s: (L D L^T)_%d,%d = %.17g, a = %.17g",
                          what, i + 1, j + 1, acc[j], A->val[p]);
        }
        const double want = (1.0 + shift) * aii - omega * outside;
        const double bound = 8.0 * (double)(row_terms + 1) * EPS * (row_mag + fabs(aii) * (1 + shift));
        ck_assert_msg(fabs(acc[i] - want) <= bound, "%s: (L D L^T)_%d,%d = %.17g, want %.17g", what,
                      i + 1, i + 1, acc[i], want);
        for (int32_t t = 0; t < count; t++) {
            const int32_t j = touched[t];
            acc[j] = mag[j] = 0, cnt[j] = 0;
        }
    }
    free(acc), free(mag), free(cnt), free(touched);
}

/* Device factors g against the reference's c: pattern exact, values within 1e-9 of the
 * column's scale (see the top). */
static void compare_factors(const factors *g, const factors *c, const char *what)
{
    const int32_t n = c->L.n_rows;
    ck_assert_int_eq(g->L.n_rows, n);
    ck_assert_msg(g->L.nnz == c->L.nnz, "%s: nnz(L) %lld, reference %lld", what,
                  (long long)g->L.nnz, (long long)c->L.nnz);
    for (int32_t i = 0; i <= n; i++) ck_assert(g->L.row_ptr[i] == c->L.row_ptr[i]);
    double worst = 0;
    for (int32_t k = 0; k < n; k++) {
        ck_assert_msg(fabs(g->d[k] - c->d[k]) <= 1e-9 * fabs(c->d[k]), "%s: d_%d = %.17g, reference %.17g",
                      what, k + 1, g->d[k], c->d[k]);
        double scale = 0; /* column k of L: row k of LT */
        for (int64_t q = c->LT.row_ptr[k]; q < c->LT.row_ptr[k + 1]; q++)
            scale = fmax(scale, fabs(c->LT.val[q]));
        for (int64_t q = c->LT.row_ptr[k]; q < c->LT.row_ptr[k + 1]; q++) {
            ck_assert(g->LT.col[q] == c->LT.col[q]);
            const double diff = fabs(g->LT.val[q] - c->LT.val[q]);
            worst = fmax(worst, diff / scale);
            ck_assert_msg(diff <= 1e-9 * scale, "%s: l_%d,%d = %.17g, reference %.17g", what,
                          c->LT.col[q] + 1, k + 1, g->LT.val[q], c->LT.val[q]);
        }
    }
    printf("check_cuda_mic: %s: max |l_gpu - l_cpu| / column scale = %.3g\n", what, worst);
}

/* The GPU setup against the reference on A with kv (NULL-terminated pairs): the same
 * shift, tries and dropped fill, the same pattern, values within tolerance, the identity
 * on the GPU's own factors; and the stages named as documented. */
static void against_reference(const gs_csr *A, const char *const *kv, const char *what)
{
    gs_params p = tu_params(kv);
    mic_run g, c;
    gs_error err = {0};
    ck_assert_msg(mic_build(A, &p, 1, &g, &err) == GS_OK, "%s: gpu setup: %s", what, err.msg);
    ck_assert_msg(mic_build(A, &p, 0, &c, &err) == GS_OK, "%s: cpu setup: %s", what, err.msg);
    ck_assert_msg(tu_pc_extra(g.pc, "setup") == NULL, "%s: the setup ran on the host", what);
    const char *stages[] = {"csr of A", "factorisation", "transpose", "layout", NULL};
    tu_assert_stages(g.pc, stages);
    const double shift = extra(c.pc, "shift");
    ck_assert_msg(extra(g.pc, "shift") == shift, "%s: shift %g, reference %g", what,
                  extra(g.pc, "shift"), shift);
    ck_assert_int_eq((int)extra(g.pc, "shift_tries"), (int)extra(c.pc, "shift_tries"));
    ck_assert_msg(extra(g.pc, "dropped_fill") == extra(c.pc, "dropped_fill"),
                  "%s: dropped fill %g, reference %g", what, extra(g.pc, "dropped_fill"),
                  extra(c.pc, "dropped_fill"));
    ck_assert(fabs(extra(g.pc, "min_pivot_ratio") - extra(c.pc, "min_pivot_ratio")) <=
              1e-9 * extra(c.pc, "min_pivot_ratio"));
    ck_assert_int_eq(g.pc->nnz, c.pc->nnz);
    ck_assert(g.pc->symmetric);
    factors fg, fc;
    factors_read(g.pc, &fg);
    factors_read(c.pc, &fc);
    compare_factors(&fg, &fc, what);
    check_ldlt(A, &fg, extra(g.pc, "omega"), shift, what);
    factors_free(&fg), factors_free(&fc);
    mic_release(&g), mic_release(&c);
}

/* ----------------------------------------------------- the substitutions */

/* |r - L D L^T z| <= 8 K u (|L| D |L^T| |z| + |r|) row by row (K: the terms of row i of
 * the product), the backward error of two substitutions (Higham Thm 8.5) plus this
 * product's own rounding; the bound holds however ill-conditioned L is. */
static void check_residual(const factors *f, const double *r, const double *z, const char *what)
{
    const int32_t n = f->L.n_rows;
    double *u = malloc(n * sizeof(double)), *umag = malloc(n * sizeof(double));
    ck_assert(u && umag);
    for (int32_t k = 0; k < n; k++) { /* u = D L^T z */
        double s1 = 0, m1 = 0;
        for (int64_t q = f->LT.row_ptr[k]; q < f->LT.row_ptr[k + 1]; q++)
            s1 += f->LT.val[q] * z[f->LT.col[q]], m1 += fabs(f->LT.val[q] * z[f->LT.col[q]]);
        u[k] = f->d[k] * s1, umag[k] = f->d[k] * m1;
    }
    for (int32_t i = 0; i < n; i++) {
        double y = 0, ymag = 0;
        int64_t terms = 0;
        for (int64_t q = f->L.row_ptr[i]; q < f->L.row_ptr[i + 1]; q++) {
            y += f->L.val[q] * u[f->L.col[q]], ymag += fabs(f->L.val[q]) * umag[f->L.col[q]];
            terms += f->LT.row_ptr[f->L.col[q] + 1] - f->LT.row_ptr[f->L.col[q]];
        }
        ck_assert_msg(isfinite(z[i]) && fabs(y - r[i]) <= 8.0 * (double)terms * EPS * (ymag + fabs(r[i])),
                      "%s: row %d: (M z)_i = %.17g, r_i = %.17g", what, i + 1, y, r[i]);
    }
    free(u), free(umag);
}

/* z = M r on the GPU, z poisoned with NaN first. */
static void gpu_apply(gs_pc *pc, const double *r, double *z, int32_t n)
{
    gs_vec *vr = NULL, *vz = NULL;
    const gs_engine_ops *o = gpu->ops;
    ck_assert(o->vec_create(gpu, n, &vr) == GS_OK && o->vec_create(gpu, n, &vz) == GS_OK);
    ck_assert(o->vec_upload(gpu, vr, r) == GS_OK);
    ck_assert(o->set(gpu, vz, NAN) == GS_OK);
    ck_assert_msg(gs_pc_apply_dot(pc, vr, vz, GS_SLOT_NONE) == GS_OK, "%s", gpu->err.msg);
    ck_assert_msg(o->vec_download(gpu, vz, z) == GS_OK, "%s", gpu->err.msg);
    o->vec_destroy(gpu, vr);
    o->vec_destroy(gpu, vz);
}

/* The device apply with --trisolve scheme against the host substitution on the device's
 * own factors, for three right-hand sides; the scheme reported as asked. */
static void check_substitutions(const gs_csr *A, const char *scheme, const char *what)
{
    const char *kv[] = {"trisolve", scheme, NULL};
    gs_params p = tu_params(kv);
    mic_run g;
    gs_error err = {0};
    char label[256];
    snprintf(label, sizeof label, "%s --trisolve %s", what, scheme);
    ck_assert_msg(mic_build(A, &p, 1, &g, &err) == GS_OK, "%s: %s", label, err.msg);
    const gs_kv *chosen = tu_pc_extra(g.pc, "trisolve");
    ck_assert_msg(chosen != NULL, "%s: no trisolve item", label);
    if (strcmp(scheme, "auto") != 0) ck_assert_str_eq(chosen->str, scheme);
    else ck_assert(strcmp(chosen->str, "blocks") == 0 || strcmp(chosen->str, "syncfree") == 0 ||
                   strcmp(chosen->str, "levels") == 0);
    factors f;
    factors_read(g.pc, &f);
    const int32_t n = A->n_rows;
    double *r = malloc(n * sizeof(double)), *z = malloc(n * sizeof(double));
    ck_assert(r && z);
    tu_rng rng = tu_rng_seed(17);
    for (int rhs = 0; rhs < 3; rhs++) {
        for (int32_t i = 0; i < n; i++) r[i] = rhs == 0 ? 1.0 : tu_uniform(&rng) - 0.5;
        gpu_apply(g.pc, r, z, n);
        check_residual(&f, r, z, label);
    }
    free(r), free(z);
    factors_free(&f);
    mic_release(&g);
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_device_or_skip)
{
    if (gs_cuda_device_count() == 0) {
        printf("check_cuda_mic: skipped: no CUDA device\n");
        return;
    }
    ck_assert_ptr_nonnull(gs_pc_find("mic")->setup[GS_ENGINE_CUDA]);
}
END_TEST

/* Generated problems: smaller and larger than a block of columns (8) and of threads
 * (256), 7-point (L rows of 4: the level kernels' 4 lanes), 27-point (14: 16 lanes),
 * MIC and IC(0). */
START_TEST(test_generated)
{
    const char *specs[] = {"poisson3d:2", "poisson3d:5", "poisson3d:12", "aniso3d:9x6x5",
                           "poisson3d27:6", "poisson3d:40", NULL};
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        const char *mic[] = {"omega", "1", NULL}, *ic[] = {"omega", "0", NULL};
        const char *relaxed[] = {"omega", "0.5", "mic-shift", "0.25", NULL};
        against_reference(&A, mic, specs[s]);
        against_reference(&A, ic, specs[s]);
        if (s == 2) against_reference(&A, relaxed, specs[s]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Real SPD matrices: long rows (bcsstk16, Trefethen_500: more than 32 entries, several
 * passes of a warp), a diagonal one (bcsstm25: one level), and matrices on which MIC
 * breaks down unshifted (1138_bus, bcsstk13, Trefethen_500: the retries, which must make
 * the same decisions as the reference). */
START_TEST(test_real)
{
    const char *names[] = {"nos4", "gr_30_30", "bcsstk16", "bcsstm25", "1138_bus", "bcsstk13",
                           "Trefethen_500", "s3rmt3m3", NULL};
    for (int m = 0; names[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        against_reference(&A, NULL, names[m]);
        const char *ic[] = {"omega", "0", NULL};
        against_reference(&A, ic, names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Block diagonal of [[1 2] [2 1]] blocks (600 rows, indefinite): the shift path on the
 * device, alpha = 1.024 after 12 tries as the reference; past the bound ([[1 1e4] [1e4 1]]
 * blocks) the reference's message; a fixed shift that breaks down, no retries. */
static gs_csr blocks_2x2(int32_t blocks, double b)
{
    int32_t *r = malloc(4 * blocks * sizeof(int32_t)), *c = malloc(4 * blocks * sizeof(int32_t));
    double *v = malloc(4 * blocks * sizeof(double));
    ck_assert(r && c && v);
    for (int32_t k = 0; k < blocks; k++) {
        const int32_t i = 2 * k;
        const int32_t rr[4] = {i, i, i + 1, i + 1}, cc[4] = {i, i + 1, i, i + 1};
        const double vv[4] = {1, b, b, 1};
        for (int t = 0; t < 4; t++) r[4 * k + t] = rr[t], c[4 * k + t] = cc[t], v[4 * k + t] = vv[t];
    }
    gs_csr A = tu_from_triplets(2 * blocks, 2 * blocks, 4 * blocks, r, c, v);
    free(r), free(c), free(v);
    return A;
}

static void expect_same_failure(const gs_csr *A, const char *const *kv, const char *fragment)
{
    gs_params p = tu_params(kv);
    mic_run g, c;
    gs_error eg = {0}, ec = {0};
    const int sg = mic_build(A, &p, 1, &g, &eg), sc = mic_build(A, &p, 0, &c, &ec);
    ck_assert_msg(sc != GS_OK && sg == sc, "gpu status %d (%s), cpu %d (%s)", sg, eg.msg, sc, ec.msg);
    /* the same message, but for a failing pivot's value (both computed, in other orders) */
    const char *pg = strstr(eg.msg, "pivot d = "), *pc = strstr(ec.msg, "pivot d = ");
    if (pg && pc) {
        ck_assert_msg(pg - eg.msg == pc - ec.msg && strncmp(eg.msg, ec.msg, pg - eg.msg) == 0,
                      "gpu: '%s'\ncpu: '%s'", eg.msg, ec.msg);
        ck_assert_msg(strstr(pg, " in row ") && strcmp(strstr(pg, " in row "), strstr(pc, " in row ")) == 0,
                      "gpu: '%s'\ncpu: '%s'", eg.msg, ec.msg);
    } else {
        ck_assert_msg(strcmp(eg.msg, ec.msg) == 0, "gpu: '%s'\ncpu: '%s'", eg.msg, ec.msg);
    }
    ck_assert_msg(strstr(eg.msg, fragment) != NULL, "'%s' lacks '%s'", eg.msg, fragment);
    mic_release(&g), mic_release(&c);
}

START_TEST(test_shift_path)
{
    gs_csr A = blocks_2x2(300, 2.0);
    against_reference(&A, NULL, "blocks [[1 2] [2 1]]");
    mic_run g;
    gs_error err = {0};
    gs_params none = {0};
    ck_assert(mic_build(&A, &none, 1, &g, &err) == GS_OK);
    ck_assert_double_eq_tol(extra(g.pc, "shift"), 1.024, 1e-15);
    ck_assert_int_eq((int)extra(g.pc, "shift_tries"), 12);
    mic_release(&g);
    const char *fixed[] = {"mic-shift", "0", NULL};
    expect_same_failure(&A, fixed, "non-positive pivot d = -3 in row 2");
    gs_csr_free(&A);
    A = blocks_2x2(300, 1e4);
    expect_same_failure(&A, NULL, "21 shifts up to alpha = 524.288 tried");
    gs_csr_free(&A);
}
END_TEST

/* Device substitutions against the host's on the same factors: every scheme (blocks: the
 * fused fill of z and the r.z of the CG apply too, through gs_pc_apply_dot), on
 * matrices with many levels (a chain of 3000 rows: 3000 levels; poisson3d:40: 118), one
 * level (bcsstm25, diagonal), short rows (7-point: 4 lanes), rows near and past 32
 * (27-point: 16 lanes; Trefethen_500: 32, rows longer than a warp). */
START_TEST(test_substitutions)
{
    const char *schemes[] = {"blocks", "syncfree", "levels", "exact", "auto", NULL};
    const char *specs[] = {"poisson3d:3000x1x1", "poisson3d:40", "poisson3d27:9", "poisson3d:3",
                           NULL};
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        for (int k = 0; schemes[k]; k++) check_substitutions(&A, schemes[k], specs[s]);
        gs_csr_free(&A);
    }
    const char *names[] = {"bcsstm25", "Trefethen_500", "bcsstk16", NULL};
    for (int m = 0; names[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        for (int k = 0; schemes[k]; k++) check_substitutions(&A, schemes[k], names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Every scheme keeps nothing between calls that a replay could get wrong (sync-free: the
 * fill of x and the ticket reset by the last block; levels: programmatic launches after
 * the first level, captured as programmatic edges; exact: cuSPARSE's analysis before the
 * capture): many applies in a row, and the same applies captured in a graph and
 * replayed, give the same z bit for bit. */
static void check_replayed(const char *scheme)
{
    gs_csr A = tu_generated("poisson3d:30");
    const int32_t n = A.n_rows;
    const char *kv[] = {"trisolve", scheme, NULL};
    gs_params p = tu_params(kv);
    mic_run g;
    gs_error err = {0};
    ck_assert(mic_build(&A, &p, 1, &g, &err) == GS_OK);
    double *r = malloc(n * sizeof(double)), *z0 = malloc(n * sizeof(double));
    double *z = malloc(n * sizeof(double));
    ck_assert(r && z0 && z);
    for (int32_t i = 0; i < n; i++) r[i] = 1.0 + (i % 7);
    gpu_apply(g.pc, r, z0, n);
    for (int rep = 0; rep < 20; rep++) {
        gpu_apply(g.pc, r, z, n);
        ck_assert(memcmp(z, z0, n * sizeof(double)) == 0);
    }
    if (gpu->ops->capture_begin) {
        gs_vec *vr = NULL, *vz = NULL;
        void *seq = NULL;
        ck_assert(gpu->ops->vec_create(gpu, n, &vr) == GS_OK);
        ck_assert(gpu->ops->vec_create(gpu, n, &vz) == GS_OK);
        ck_assert(gpu->ops->vec_upload(gpu, vr, r) == GS_OK);
        ck_assert(gpu->ops->capture_begin(gpu) == GS_OK);
        ck_assert(g.pc->apply(g.pc, vr, vz) == GS_OK);
        ck_assert_msg(gpu->ops->capture_end(gpu, &seq) == GS_OK, "%s", gpu->err.msg);
        for (int rep = 0; rep < 5; rep++) {
            ck_assert(gpu->ops->set(gpu, vz, NAN) == GS_OK);
            ck_assert_msg(gpu->ops->replay(gpu, seq) == GS_OK, "%s", gpu->err.msg);
            ck_assert(gpu->ops->vec_download(gpu, vz, z) == GS_OK);
            ck_assert(memcmp(z, z0, n * sizeof(double)) == 0);
        }
        gpu->ops->seq_destroy(gpu, seq);
        gpu->ops->vec_destroy(gpu, vr);
        gpu->ops->vec_destroy(gpu, vz);
    }
    free(r), free(z0), free(z);
    mic_release(&g);
    gs_csr_free(&A);
}

START_TEST(test_repeated_and_replayed)
{
    const char *schemes[] = {"blocks", "syncfree", "levels", "exact", NULL};
    for (int k = 0; schemes[k]; k++) check_replayed(schemes[k]);
}
END_TEST

/* CG + MIC on the GPU takes the reference's iterations (within 2: rounding), b not A 1;
 * on the GPU with each scheme, the iterations captured in graphs as the program runs them. */
START_TEST(test_cg_iterations)
{
    const char *specs[] = {"poisson3d:20", "aniso3d:12", NULL};
    const char *schemes[] = {NULL, "blocks", "syncfree", "levels", "exact"}; /* [0]: the CPU */
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        const int32_t n = A.n_rows;
        long its[5] = {0, 0, 0, 0, 0};
        for (int run = 0; run < 5; run++) {
            const int on_gpu = run > 0;
            mic_run r;
            gs_error err = {0};
            const char *kv[] = {"trisolve", on_gpu ? schemes[run] : "auto", NULL};
            gs_params p = tu_params(kv);
            ck_assert(mic_build(&A, &p, on_gpu, &r, &err) == GS_OK);
            double *b = malloc(n * sizeof(double));
            ck_assert(b);
            /* not b = A 1: M e = A e (omega = 1) solves that in one step */
            for (int32_t i = 0; i < n; i++) b[i] = 1.0 + 0.5 * (i % 3);
            gs_vec *vb = NULL, *vx = NULL;
            gs_krylov_opts opts = {.tol = 1e-8, .maxit = 1000, .restart = 30, .idr_s = 4,
                                   .check_every = 1, .use_capture = on_gpu};
            gs_krylov_result res;
            memset(&res, 0, sizeof res);
            ck_assert(r.eng->ops->vec_create(r.eng, n, &vb) == GS_OK);
            ck_assert(r.eng->ops->vec_create(r.eng, n, &vx) == GS_OK);
            ck_assert(r.eng->ops->vec_upload(r.eng, vb, b) == GS_OK);
            ck_assert(r.eng->ops->set(r.eng, vx, 0.0) == GS_OK);
            ck_assert(gs_method_find("cg")->solve(r.eng, r.A, r.pc, vb, vx, &opts, &res) == GS_OK);
            ck_assert(res.reason == GS_REASON_CONVERGED);
            ck_assert_msg(res.iterations > 5, "%s: %ld iterations", specs[s], res.iterations);
            its[run] = res.iterations;
            gs_krylov_result_free(&res);
            r.eng->ops->vec_destroy(r.eng, vb);
            r.eng->ops->vec_destroy(r.eng, vx);
            free(b);
            mic_release(&r);
        }
        for (int run = 1; run < 5; run++)
            ck_assert_msg(labs(its[run] - its[0]) <= 2, "%s (%s): gpu %ld iterations, cpu %ld",
                          specs[s], schemes[run], its[run], its[0]);
        gs_csr_free(&A);
    }
}
END_TEST

/* ------------------------------------------------- the fused apply_dot */

#define SLOT_FUSED 40 /* S slots of these tests (no Krylov method runs meanwhile) */
#define SLOT_SEPARATE 41

/* On eng: z = M r by apply_dot with S[SLOT_FUSED] = r.z (*rz_fused), z set to `poison`
 * first (not NaN: a row the sync-free forward solve failed to fill for the backward one
 * would then be read as a stale value, and the residual check would see it); then
 * z2 = M r by the plain apply (z2 poisoned with NaN) and r.z2 by the engine's dot
 * (*rz_separate). */
static void apply_dot_on(gs_engine *eng, gs_pc *pc, const double *r, int32_t n, double poison,
                         double *z, double *rz_fused, double *z2, double *rz_separate)
{
    const gs_engine_ops *o = eng->ops;
    gs_vec *vr = NULL, *vz = NULL, *vz2 = NULL;
    ck_assert(o->vec_create(eng, n, &vr) == GS_OK && o->vec_create(eng, n, &vz) == GS_OK &&
              o->vec_create(eng, n, &vz2) == GS_OK);
    ck_assert(o->vec_upload(eng, vr, r) == GS_OK);
    ck_assert(o->set(eng, vz, poison) == GS_OK);
    ck_assert(o->set(eng, vz2, NAN) == GS_OK);
    ck_assert(o->scalar_set(eng, SLOT_FUSED, gs_coef_const(NAN)) == GS_OK);
    ck_assert_msg(gs_pc_apply_dot(pc, vr, vz, SLOT_FUSED) == GS_OK, "%s", eng->err.msg);
    ck_assert_msg(pc->apply(pc, vr, vz2) == GS_OK, "%s", eng->err.msg);
    ck_assert(o->dot(eng, vr, vz2, SLOT_SEPARATE) == GS_OK);
    ck_assert_msg(o->vec_download(eng, vz, z) == GS_OK, "%s", eng->err.msg);
    ck_assert_msg(o->vec_download(eng, vz2, z2) == GS_OK, "%s", eng->err.msg);
    ck_assert(o->scalar_read(eng, SLOT_FUSED, 1, rz_fused) == GS_OK);
    ck_assert(o->scalar_read(eng, SLOT_SEPARATE, 1, rz_separate) == GS_OK);
    o->vec_destroy(eng, vr), o->vec_destroy(eng, vz), o->vec_destroy(eng, vz2);
}

/* sum |r_i z_i|: the scale of the rounding of any order of summing r.z. */
static double abs_dot(const double *r, const double *z, int32_t n)
{
    double s = 0.0;
    for (int32_t i = 0; i < n; i++) s += fabs(r[i] * z[i]);
    return s;
}

/* mic's apply_dot on the GPU with --trisolve scheme, against the plain apply and a separate
 * dot on the same device (z bit for bit: the fused work does not touch the substitution's
 * arithmetic; r.z within the rounding of two summation orders, 2 n u sum |r_i z_i|, or for
 * exact, whose fused value is t^T D^-1 t with t = L^-1 r, within the substitutions'
 * rounding, 1e-9 of the scale), against the CPU engine's apply and dot on its own factors
 * (1e-7 relative: the factors agree to 1e-9 of their columns' scale), and against itself:
 * five more fused applies, and the fused apply captured in a graph and replayed, give the
 * same bits of z and of r.z. z also passes the residual check on the device's factors. */
static void check_apply_dot(const gs_csr *A, const char *scheme, const char *what, int vs_cpu)
{
    const char *kv[] = {"trisolve", scheme, NULL};
    gs_params p = tu_params(kv);
    mic_run g, c;
    gs_error err = {0};
    char label[256];
    snprintf(label, sizeof label, "%s --trisolve %s", what, scheme);
    ck_assert_msg(mic_build(A, &p, 1, &g, &err) == GS_OK, "%s: %s", label, err.msg);
    ck_assert_msg(g.pc->apply_dot != NULL, "%s: no apply_dot installed", label);
    const int32_t n = A->n_rows;
    double *r = malloc(n * sizeof(double)), *z = malloc(n * sizeof(double));
    double *z2 = malloc(n * sizeof(double)), *zc = malloc(n * sizeof(double));
    double *zc2 = malloc(n * sizeof(double)), *zr = malloc(n * sizeof(double));
    ck_assert(r && z && z2 && zc && zc2 && zr);
    tu_rng rng = tu_rng_seed(29);
    for (int32_t i = 0; i < n; i++) r[i] = tu_uniform(&rng) - 0.25;
    double rz = 0.0, rz2 = 0.0;
    apply_dot_on(gpu, g.pc, r, n, 1.0, z, &rz, z2, &rz2);
    ck_assert_msg(memcmp(z, z2, n * sizeof(double)) == 0, "%s: apply_dot's z is not apply's", label);
    const double scale = abs_dot(r, z, n);
    const double tol = strcmp(scheme, "exact") == 0 ? 1e-9 * scale : 2.0 * n * EPS * scale;
    ck_assert_msg(isfinite(rz) && fabs(rz - rz2) <= tol, "%s: fused r.z = %.17g, separate %.17g",
                  label, rz, rz2);
    factors f;
    factors_read(g.pc, &f);
    check_residual(&f, r, z, label);
    factors_free(&f);
    /* deterministic: the same bits every run, direct or replayed */
    for (int rep = 0; rep < 5; rep++) {
        double again = 0.0, sep = 0.0;
        apply_dot_on(gpu, g.pc, r, n, 0.0, zr, &again, z2, &sep);
        ck_assert_msg(memcmp(zr, z, n * sizeof(double)) == 0, "%s: z differs on run %d", label, rep + 2);
        ck_assert_msg(memcmp(&again, &rz, sizeof rz) == 0, "%s: r.z %.17g, then %.17g", label, rz, again);
    }
    if (gpu->ops->capture_begin) {
        gs_vec *vr = NULL, *vz = NULL;
        void *seq = NULL;
        ck_assert(gpu->ops->vec_create(gpu, n, &vr) == GS_OK);
        ck_assert(gpu->ops->vec_create(gpu, n, &vz) == GS_OK);
        ck_assert(gpu->ops->vec_upload(gpu, vr, r) == GS_OK);
        ck_assert(gpu->ops->set(gpu, vz, 0.0) == GS_OK);
        ck_assert(gpu->ops->capture_begin(gpu) == GS_OK);
        ck_assert(gs_pc_apply_dot(g.pc, vr, vz, SLOT_FUSED) == GS_OK);
        ck_assert_msg(gpu->ops->capture_end(gpu, &seq) == GS_OK, "%s", gpu->err.msg);
        for (int rep = 0; rep < 3; rep++) {
            double again = 0.0;
            ck_assert(gpu->ops->scalar_set(gpu, SLOT_FUSED, gs_coef_const(NAN)) == GS_OK);
            ck_assert_msg(gpu->ops->replay(gpu, seq) == GS_OK, "%s", gpu->err.msg);
            ck_assert(gpu->ops->vec_download(gpu, vz, zr) == GS_OK);
            ck_assert(gpu->ops->scalar_read(gpu, SLOT_FUSED, 1, &again) == GS_OK);
            ck_assert_msg(memcmp(zr, z, n * sizeof(double)) == 0, "%s: replayed z differs", label);
            ck_assert_msg(memcmp(&again, &rz, sizeof rz) == 0, "%s: replayed r.z %.17g, direct %.17g",
                          label, again, rz);
        }
        gpu->ops->seq_destroy(gpu, seq);
        gpu->ops->vec_destroy(gpu, vr);
        gpu->ops->vec_destroy(gpu, vz);
    }
    if (vs_cpu) { /* the oracle: the CPU engine's apply and dot (no apply_dot there) */
        double rzc = 0.0, rzc2 = 0.0;
        ck_assert_msg(mic_build(A, &p, 0, &c, &err) == GS_OK, "%s (cpu): %s", label, err.msg);
        apply_dot_on(c.eng, c.pc, r, n, 1.0, zc, &rzc, zc2, &rzc2);
        ck_assert_msg(fabs(rz - rzc) <= 1e-7 * abs_dot(r, zc, n),
                      "%s: r.z gpu %.17g, cpu %.17g", label, rz, rzc);
        double zmax = 0.0;
        for (int32_t i = 0; i < n; i++) zmax = fmax(zmax, fabs(zc[i]));
        for (int32_t i = 0; i < n; i++)
            ck_assert_msg(fabs(z[i] - zc[i]) <= 1e-7 * zmax, "%s: z_%d gpu %.17g, cpu %.17g", label,
                          i + 1, z[i], zc[i]);
        mic_release(&c);
    }
    free(r), free(z), free(z2), free(zc), free(zc2), free(zr);
    mic_release(&g);
}

/* Every scheme, on matrices with many levels (a chain of 3000 rows: 3000 levels, one row
 * each, so the level scheme's partials are one a level; poisson3d:40: 118 levels of up to
 * hundreds of rows, several blocks in the wide ones), with one level (bcsstm25, diagonal:
 * one launch of the level scheme, whose blocks all count toward the last), and with more
 * blocks than a reduction block's threads (poisson3d:64: 262144 rows, over 4096 sync-free
 * blocks of 64 rows). */
START_TEST(test_apply_dot)
{
    const char *schemes[] = {"blocks", "syncfree", "levels", "exact", NULL};
    const char *specs[] = {"poisson3d:3000x1x1", "poisson3d:40", "poisson3d27:9", "aniso3d:9x6x5",
                           "poisson3d:64", NULL};
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        for (int k = 0; schemes[k]; k++)
            check_apply_dot(&A, schemes[k], specs[s], strcmp(specs[s], "poisson3d:64") != 0);
        gs_csr_free(&A);
    }
    const char *names[] = {"bcsstm25", "gr_30_30", NULL};
    for (int m = 0; names[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        for (int k = 0; schemes[k]; k++) check_apply_dot(&A, schemes[k], names[m], 1);
        gs_csr_free(&A);
    }
}
END_TEST

/* Bad input: the same status and message as the reference. */
START_TEST(test_bad_input)
{
    const int32_t r1[] = {0, 0, 1, 1, 2}, c1[] = {0, 1, 0, 1, 2};
    const double v1[] = {4, 2, 1, 4, 4}; /* a_12 = 2, a_21 = 1 */
    gs_csr A = tu_from_triplets(3, 3, 5, r1, c1, v1);
    expect_same_failure(&A, NULL, "row 1, column 2");
    gs_csr_free(&A);
    const int32_t r2[] = {0, 1, 1, 2, 2}, c2[] = {0, 1, 2, 1, 2};
    const double v2[] = {2, 2, 1, 1, 0};
    A = tu_from_triplets(3, 3, 5, r2, c2, v2);
    expect_same_failure(&A, NULL, "row 3 has diagonal entry 0");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:6");
    A.val[gs_csr_find(&A, 40, 41)] = NAN;
    A.val[gs_csr_find(&A, 41, 40)] = NAN;
    expect_same_failure(&A, NULL, "not finite");
    gs_csr_free(&A);
}
END_TEST

static Suite *cuda_mic_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_mic");
    TCase *tc = tcase_create("cuda_mic");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_device_or_skip);
    if (have_gpu) {
        tcase_add_test(tc, test_generated);
        tcase_add_test(tc, test_real);
        tcase_add_test(tc, test_shift_path);
        tcase_add_test(tc, test_substitutions);
        tcase_add_test(tc, test_repeated_and_replayed);
        tcase_add_test(tc, test_cg_iterations);
        tcase_add_test(tc, test_apply_dot);
        tcase_add_test(tc, test_bad_input);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    gs_error err = {0};
    if (!have_gpu) printf("check_cuda_mic: skipped: no CUDA device\n");
    else if (gs_engine_cuda_create(&gpu, &err) != GS_OK) {
        printf("check_cuda_mic: CUDA engine: %s\n", err.msg);
        return 1;
    }
    SRunner *sr = srunner_create(cuda_mic_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    gs_engine_destroy(gpu);
    return failed == 0 ? 0 : 1;
}
