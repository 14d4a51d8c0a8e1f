/* check_cuda_engine.c - the CUDA engine against the CPU engine (the oracle):
 * every vector op, scalars, SpMV in each device layout and precision,
 * triangular solves, captured sequences, and the error paths. Outputs are
 * poisoned with NaN before each call; inputs are fresh random numbers; lengths
 * straddle the block and warp sizes. Without a CUDA device the suite says
 * "skipped" and passes, after asserting that the engine refuses cleanly.
 *
 * Tolerances. Elementwise ops: the GPU may contract a*x + b*y into an FMA,
 * the CPU build does not, so results differ by a few ulps of the terms:
 * |gpu - cpu| <= 1e-12 * (|a x| + |b y| + ...), a bound 4000x above that
 * rounding and far below any wrong index or coefficient. Sums of n terms
 * (dots, SpMV rows) are added in different orders: |gpu - cpu| <= n eps
 * sum |terms| (the classical bound for any order is (n-1) eps sum |terms|). */
#include <math.h>

#include "engine.h"
#include "gen.h"
#include "precond.h"
#include "testutil.h"
#if GS_HAVE_CUDA
#include "../cuda/engine/gs_cuda.h"
#endif

#define EPS 2.220446049250313e-16

static gs_engine *cpu, *gpu;

static void engines_up(void)
{
    gs_error err = {0};
    ck_assert_msg(gs_engine_cpu_create(&cpu, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_engine_cuda_create(&gpu, &err) == GS_OK, "%s", err.msg);
}

static void engines_down(void)
{
    gs_engine_destroy(cpu);
    gs_engine_destroy(gpu);
    cpu = gpu = NULL;
}

/* Every op must leave the engine's error record clean. */
static void no_error(gs_engine *e)
{
    ck_assert_int_eq(e->ops->sync(e), GS_OK);
    ck_assert_msg(e->err.status == GS_OK, "%s engine: %s", e->ops->name, e->err.msg);
}

static double *randoms(tu_rng *r, int64_t n)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i] = 2.0 * tu_uniform(r) - 1.0;
    return v;
}

static gs_vec *vec_from(gs_engine *e, const double *h, int64_t n)
{
    gs_vec *v = NULL;
    ck_assert_int_eq(e->ops->vec_create(e, n, &v), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, v, h), GS_OK);
    return v;
}

static gs_vec *vec_nan(gs_engine *e, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) h[i] = NAN;
    gs_vec *v = vec_from(e, h, n);
    free(h);
    return v;
}

static double *vec_get(gs_engine *e, const gs_vec *v, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof(double));
    ck_assert_int_eq(e->ops->vec_download(e, v, h), GS_OK);
    return h;
}

static double slot_get(gs_engine *e, int slot)
{
    double v = NAN;
    ck_assert_int_eq(e->ops->scalar_read(e, slot, 1, &v), GS_OK);
    return v;
}

/* |g - c| <= tol * scale[i] (scale NULL: tol * max(1, |c|)); NaN fails. */
static void assert_close(const double *g, const double *c, const double *scale, int64_t n,
                         double tol, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double s = scale ? scale[i] : fmax(1.0, fabs(c[i]));
        ck_assert_msg(fabs(g[i] - c[i]) <= tol * s, "%s: element %lld: gpu %.17g cpu %.17g",
                      what, (long long)i, g[i], c[i]);
    }
}

static void assert_dot(double g, double c, double abs_sum, int64_t n, const char *what)
{
    double tol = (double)(n + 1) * EPS * abs_sum + 1e-300;
    ck_assert_msg(fabs(g - c) <= tol, "%s: gpu %.17g cpu %.17g (tol %.3g)", what, g, c, tol);
}

static const int64_t lengths[] = {1, 2, 31, 33, 255, 257, 1000, 100003, (1 << 20) + 7};
#define N_LENGTHS ((int)(sizeof lengths / sizeof lengths[0]))

/* Slots 10..13 hold random scalars on both engines (slot 13 = 0), so that
 * coefficients of every shape can be formed. */
static void random_slots(tu_rng *r)
{
    double s[4] = {0.5 + tu_uniform(r), -0.5 - tu_uniform(r), 0.25 + tu_uniform(r), 0.0};
    ck_assert_int_eq(cpu->ops->scalar_write(cpu, 10, 4, s), GS_OK);
    ck_assert_int_eq(gpu->ops->scalar_write(gpu, 10, 4, s), GS_OK);
}

/* ------------------------------------------------------------------ skip */

START_TEST(test_device_or_clean_refusal)
{
    int count = gs_cuda_device_count();
    ck_assert_int_ge(count, 0);
    if (count == 0) {
        gs_engine *e = (gs_engine *)1;
        gs_error err = {0};
        ck_assert_int_eq(gs_engine_cuda_create(&e, &err), GS_ERR_UNSUPPORTED);
        ck_assert_ptr_null(e);
        ck_assert_msg(strlen(err.msg) > 0, "refusal without a message");
        return;
    }
    engines_up();
    ck_assert_str_eq(gpu->ops->name, "cuda");
    ck_assert_int_eq(gpu->ops->kind, GS_ENGINE_CUDA);
    ck_assert_msg(strlen(gpu->device_name) > 0, "no device name");
    ck_assert_msg(gpu->copy_bandwidth > 1e9, "copy bandwidth %.3g B/s", gpu->copy_bandwidth);
    ck_assert_msg(gpu->device_bytes_now > 0 && gpu->device_bytes_peak >= gpu->device_bytes_now,
                  "accounting: now %zu peak %zu", gpu->device_bytes_now, gpu->device_bytes_peak);
    engines_down();
}
END_TEST

/* --------------------------------------------------------------- vectors */

START_TEST(test_set_copy)
{
    engines_up();
    tu_rng r = tu_rng_seed(11);
    for (int t = 0; t < N_LENGTHS; t++) {
        const int64_t n = lengths[t];
        double *x = randoms(&r, n), v = 2.0 * tu_uniform(&r) - 1.0;
        gs_vec *gx = vec_from(gpu, x, n), *gy = vec_nan(gpu, n), *gz = vec_nan(gpu, n);
        ck_assert_int_eq(gpu->ops->set(gpu, gy, v), GS_OK);
        ck_assert_int_eq(gpu->ops->copy(gpu, gx, gz), GS_OK);
        no_error(gpu);
        double *y = vec_get(gpu, gy, n), *z = vec_get(gpu, gz, n);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(y[i] == v, "set n=%lld i=%lld", (long long)n, (long long)i);
            ck_assert_msg(z[i] == x[i], "copy n=%lld i=%lld", (long long)n, (long long)i);
        }
        free(x), free(y), free(z);
        gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gy), gpu->ops->vec_destroy(gpu, gz);
    }
    engines_down();
}
END_TEST

/* y = a x + b y and z = a x + b y + c z, with coefficients of every shape
 * and the zero cases (b = 0 or c = 0 must not read the NaN-poisoned output). */
START_TEST(test_axpby_axpbypcz)
{
    engines_up();
    tu_rng r = tu_rng_seed(12);
    const gs_coef shapes[] = {
        gs_coef_const(0.75), gs_coef_slot(-1.5, 10), gs_coef_ratio(2.0, 10, 12),
        gs_coef_full(0.5, 10, 11, 12, 10), gs_coef_ratio(1.0, 11, 13) /* 0 denominator: 0 */,
        gs_coef_const(0.0)};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int t = 0; t < N_LENGTHS; t++) {
        const int64_t n = lengths[t];
        for (int sa = 0; sa < ns; sa++) {
            const int sb = (sa + 1 + t) % ns, sc = (sa + 3) % ns;
            random_slots(&r);
            double *x = randoms(&r, n), *y = randoms(&r, n), *z = randoms(&r, n);
            double coef[3];
            gs_vec *cx = vec_from(cpu, x, n), *cy = vec_from(cpu, y, n), *cz = vec_from(cpu, z, n);
            gs_vec *gx = vec_from(gpu, x, n), *gy = vec_from(gpu, y, n), *gz = vec_from(gpu, z, n);
            const int poison = shapes[sb].c == 0.0 || shapes[sb].den1 == 13 ||
                               shapes[sb].den0 == 13;
            if (poison) { /* b evaluates to 0: y's NaN must not leak */
                gpu->ops->vec_destroy(gpu, gy);
                gy = vec_nan(gpu, n);
            }
            ck_assert_int_eq(cpu->ops->axpby(cpu, shapes[sa], cx, shapes[sb], cy), GS_OK);
            ck_assert_int_eq(gpu->ops->axpby(gpu, shapes[sa], gx, shapes[sb], gy), GS_OK);
            /* z = a x + b y + c z on the updated y */
            const int poison_z = shapes[sc].c == 0.0 || shapes[sc].den0 == 13;
            if (poison_z) {
                gpu->ops->vec_destroy(gpu, gz);
                gz = vec_nan(gpu, n);
            }
            ck_assert_int_eq(cpu->ops->axpbypcz(cpu, shapes[sb], cx, shapes[sa], cy, shapes[sc], cz),
                             GS_OK);
            ck_assert_int_eq(gpu->ops->axpbypcz(gpu, shapes[sb], gx, shapes[sa], gy, shapes[sc], gz),
                             GS_OK);
            no_error(cpu), no_error(gpu);
            /* coefficient magnitudes for the scale: |a|,|b|,|c| <= 4 here */
            coef[0] = coef[1] = coef[2] = 4.0;
            double *hy = vec_get(gpu, gy, n), *hz = vec_get(gpu, gz, n);
            double *ry = vec_get(cpu, cy, n), *rz = vec_get(cpu, cz, n);
            double *sy = malloc((size_t)n * sizeof(double)), *sz = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++) {
                sy[i] = coef[0] * fabs(x[i]) + coef[1] * fabs(y[i]);
                sz[i] = coef[0] * fabs(x[i]) + coef[1] * fabs(ry[i]) + coef[2] * fabs(z[i]);
            }
            assert_close(hy, ry, sy, n, 1e-12, "axpby");
            assert_close(hz, rz, sz, n, 1e-12, "axpbypcz");
            free(x), free(y), free(z), free(hy), free(hz), free(ry), free(rz), free(sy), free(sz);
            cpu->ops->vec_destroy(cpu, cx), cpu->ops->vec_destroy(cpu, cy), cpu->ops->vec_destroy(cpu, cz);
            gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gy), gpu->ops->vec_destroy(gpu, gz);
        }
    }
    engines_down();
}
END_TEST

static double abs_dot(const double *x, const double *y, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs(x[i] * y[i]);
    return s;
}

/* dot (x.y and x.x), axpby_dot (with w and with w = NULL: y.y),
 * pointwise_mult_dot (with and without the dot). */
START_TEST(test_dots)
{
    engines_up();
    tu_rng r = tu_rng_seed(13);
    for (int t = 0; t < N_LENGTHS; t++) {
        const int64_t n = lengths[t];
        random_slots(&r);
        double *x = randoms(&r, n), *y = randoms(&r, n), *w = randoms(&r, n);
        gs_vec *cx = vec_from(cpu, x, n), *cy = vec_from(cpu, y, n), *cw = vec_from(cpu, w, n);
        gs_vec *gx = vec_from(gpu, x, n), *gy = vec_from(gpu, y, n), *gw = vec_from(gpu, w, n);
        ck_assert_int_eq(gpu->ops->scalar_write(gpu, 20, 1, (double[]){NAN}), GS_OK);
        ck_assert_int_eq(cpu->ops->dot(cpu, cx, cy, 20), GS_OK);
        ck_assert_int_eq(gpu->ops->dot(gpu, gx, gy, 20), GS_OK);
        ck_assert_int_eq(cpu->ops->dot(cpu, cx, cx, 21), GS_OK);
        ck_assert_int_eq(gpu->ops->dot(gpu, gx, gx, 21), GS_OK);
        assert_dot(slot_get(gpu, 20), slot_get(cpu, 20), abs_dot(x, y, n), n, "dot x.y");
        assert_dot(slot_get(gpu, 21), slot_get(cpu, 21), abs_dot(x, x, n), n, "dot x.x");

        /* y = a x + b y, S[22] = y.w; then y = a x + b y, S[23] = y.y */
        gs_coef a = gs_coef_ratio(-1.0, 10, 12), b = gs_coef_const(1.0);
        ck_assert_int_eq(cpu->ops->axpby_dot(cpu, a, cx, b, cy, cw, 22), GS_OK);
        ck_assert_int_eq(gpu->ops->axpby_dot(gpu, a, gx, b, gy, gw, 22), GS_OK);
        double *y1 = vec_get(cpu, cy, n), *g1 = vec_get(gpu, gy, n);
        double *s = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) s[i] = 4.0 * (fabs(x[i]) + fabs(y[i]));
        assert_close(g1, y1, s, n, 1e-12, "axpby_dot y");
        assert_dot(slot_get(gpu, 22), slot_get(cpu, 22), abs_dot(y1, w, n) + 1e-12 * n, n,
                   "axpby_dot y.w");
        ck_assert_int_eq(cpu->ops->axpby_dot(cpu, gs_coef_slot(1, 12), cw, gs_coef_const(0), cy, NULL, 23), GS_OK);
        gpu->ops->vec_destroy(gpu, gy);
        gy = vec_nan(gpu, n); /* b = 0: y is not read */
        ck_assert_int_eq(gpu->ops->axpby_dot(gpu, gs_coef_slot(1, 12), gw, gs_coef_const(0), gy, NULL, 23), GS_OK);
        double *y2 = vec_get(cpu, cy, n), *g2 = vec_get(gpu, gy, n);
        assert_close(g2, y2, NULL, n, 1e-15, "axpby_dot b=0 y");
        assert_dot(slot_get(gpu, 23), slot_get(cpu, 23), abs_dot(y2, y2, n), n, "axpby_dot y.y");

        /* y = d .* x, S[24] = x.y; and without the dot */
        gs_vec *gz = vec_nan(gpu, n), *cz = vec_nan(cpu, n);
        ck_assert_int_eq(cpu->ops->pointwise_mult_dot(cpu, cw, cx, cz, 24), GS_OK);
        ck_assert_int_eq(gpu->ops->pointwise_mult_dot(gpu, gw, gx, gz, 24), GS_OK);
        double *z1 = vec_get(cpu, cz, n), *h1 = vec_get(gpu, gz, n);
        assert_close(h1, z1, NULL, n, 0.0, "pointwise_mult"); /* one rounding each: exact */
        assert_dot(slot_get(gpu, 24), slot_get(cpu, 24), abs_dot(x, z1, n), n, "pointwise_mult x.y");
        gpu->ops->vec_destroy(gpu, gz);
        gz = vec_nan(gpu, n);
        ck_assert_int_eq(gpu->ops->scalar_write(gpu, 25, 1, (double[]){42.0}), GS_OK);
        ck_assert_int_eq(gpu->ops->pointwise_mult_dot(gpu, gw, gx, gz, GS_SLOT_NONE), GS_OK);
        double *h2 = vec_get(gpu, gz, n);
        assert_close(h2, z1, NULL, n, 0.0, "pointwise_mult (no dot)");
        ck_assert(slot_get(gpu, 25) == 42.0);
        no_error(cpu), no_error(gpu);

        free(x), free(y), free(w), free(y1), free(g1), free(s), free(y2), free(g2), free(z1);
        free(h1), free(h2);
        cpu->ops->vec_destroy(cpu, cx), cpu->ops->vec_destroy(cpu, cy), cpu->ops->vec_destroy(cpu, cw);
        cpu->ops->vec_destroy(cpu, cz);
        gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gy), gpu->ops->vec_destroy(gpu, gw);
        gpu->ops->vec_destroy(gpu, gz);
    }
    engines_down();
}
END_TEST

/* axpy2_dot: y1 += a x1, y2 += b x2 and S = y2.y2, and without the dot. */
START_TEST(test_axpy2_dot)
{
    engines_up();
    tu_rng r = tu_rng_seed(17);
    for (int t = 0; t < N_LENGTHS; t++) {
        const int64_t n = lengths[t];
        random_slots(&r);
        double *x1 = randoms(&r, n), *y1 = randoms(&r, n), *x2 = randoms(&r, n), *y2 = randoms(&r, n);
        gs_vec *cx1 = vec_from(cpu, x1, n), *cy1 = vec_from(cpu, y1, n);
        gs_vec *cx2 = vec_from(cpu, x2, n), *cy2 = vec_from(cpu, y2, n);
        gs_vec *gx1 = vec_from(gpu, x1, n), *gy1 = vec_from(gpu, y1, n);
        gs_vec *gx2 = vec_from(gpu, x2, n), *gy2 = vec_from(gpu, y2, n);
        gs_coef a = gs_coef_ratio(1.0, 10, 12), b = gs_coef_ratio(-1.0, 10, 12);
        ck_assert_int_eq(gpu->ops->scalar_write(gpu, 26, 1, (double[]){NAN}), GS_OK);
        ck_assert_int_eq(cpu->ops->axpy2_dot(cpu, a, cx1, cy1, b, cx2, cy2, 26), GS_OK);
        ck_assert_int_eq(gpu->ops->axpy2_dot(gpu, a, gx1, gy1, b, gx2, gy2, 26), GS_OK);
        double *c1 = vec_get(cpu, cy1, n), *g1 = vec_get(gpu, gy1, n);
        double *c2 = vec_get(cpu, cy2, n), *g2 = vec_get(gpu, gy2, n);
        /* one multiply-add per entry on both engines: equal up to an FMA's rounding */
        double *s1 = malloc((size_t)n * sizeof(double)), *s2 = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            s1[i] = 4.0 * (fabs(x1[i]) + fabs(y1[i]));
            s2[i] = 4.0 * (fabs(x2[i]) + fabs(y2[i]));
        }
        assert_close(g1, c1, s1, n, 1e-12, "axpy2_dot y1");
        assert_close(g2, c2, s2, n, 1e-12, "axpy2_dot y2");
        assert_dot(slot_get(gpu, 26), slot_get(cpu, 26), abs_dot(c2, c2, n) + 1e-12 * n, n,
                   "axpy2_dot y2.y2");
        ck_assert_int_eq(gpu->ops->scalar_write(gpu, 27, 1, (double[]){42.0}), GS_OK);
        ck_assert_int_eq(gpu->ops->axpy2_dot(gpu, a, gx1, gy1, b, gx2, gy2, GS_SLOT_NONE), GS_OK);
        ck_assert(slot_get(gpu, 27) == 42.0);
        no_error(cpu), no_error(gpu);
        free(x1), free(y1), free(x2), free(y2), free(c1), free(g1), free(c2), free(g2);
        free(s1), free(s2);
        cpu->ops->vec_destroy(cpu, cx1), cpu->ops->vec_destroy(cpu, cy1);
        cpu->ops->vec_destroy(cpu, cx2), cpu->ops->vec_destroy(cpu, cy2);
        gpu->ops->vec_destroy(gpu, gx1), gpu->ops->vec_destroy(gpu, gy1);
        gpu->ops->vec_destroy(gpu, gx2), gpu->ops->vec_destroy(gpu, gy2);
    }
    engines_down();
}
END_TEST

/* mdot and maxpy for k on both sides of the 16-vector chunk. */
START_TEST(test_mdot_maxpy)
{
    engines_up();
    tu_rng r = tu_rng_seed(14);
    const int ks[] = {1, 5, 16, 17, 33};
    for (int t = 0; t < N_LENGTHS; t++) {
        const int64_t n = lengths[t];
        if (n > 200000) continue; /* 33 vectors of 8 MB: enough at 100003 */
        for (int ki = 0; ki < 5; ki++) {
            const int k = ks[ki];
            double **hv = malloc((size_t)k * sizeof *hv);
            gs_vec **cv = malloc((size_t)k * sizeof *cv), **gv = malloc((size_t)k * sizeof *gv);
            for (int j = 0; j < k; j++) {
                hv[j] = randoms(&r, n);
                cv[j] = vec_from(cpu, hv[j], n);
                gv[j] = vec_from(gpu, hv[j], n);
            }
            double *w = randoms(&r, n);
            gs_vec *cw = vec_from(cpu, w, n), *gw = vec_from(gpu, w, n);
            double nan[40];
            for (int j = 0; j < 40; j++) nan[j] = NAN;
            ck_assert_int_eq(gpu->ops->scalar_write(gpu, 100, k, nan), GS_OK);
            ck_assert_int_eq(cpu->ops->mdot(cpu, (const gs_vec *const *)cv, k, cw, 100), GS_OK);
            ck_assert_int_eq(gpu->ops->mdot(gpu, (const gs_vec *const *)gv, k, gw, 100), GS_OK);
            double gs[40], cs[40];
            ck_assert_int_eq(gpu->ops->scalar_read(gpu, 100, k, gs), GS_OK);
            ck_assert_int_eq(cpu->ops->scalar_read(cpu, 100, k, cs), GS_OK);
            double coef_abs = 0;
            for (int j = 0; j < k; j++) {
                assert_dot(gs[j], cs[j], abs_dot(hv[j], w, n), n, "mdot");
                coef_abs += fabs(cs[j]);
            }
            /* w += c sum_j S[100 + j] V[j] with the same coefficients on both */
            ck_assert_int_eq(gpu->ops->scalar_write(gpu, 100, k, cs), GS_OK);
            ck_assert_int_eq(cpu->ops->maxpy(cpu, -0.5, (const gs_vec *const *)cv, k, 100, cw), GS_OK);
            ck_assert_int_eq(gpu->ops->maxpy(gpu, -0.5, (const gs_vec *const *)gv, k, 100, gw), GS_OK);
            no_error(cpu), no_error(gpu);
            double *rw = vec_get(cpu, cw, n), *hw = vec_get(gpu, gw, n);
            double *s = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++) s[i] = fabs(w[i]) + 0.5 * coef_abs;
            assert_close(hw, rw, s, n, 1e-12, "maxpy");
            free(rw), free(hw), free(s), free(w);
            for (int j = 0; j < k; j++) {
                free(hv[j]);
                cpu->ops->vec_destroy(cpu, cv[j]);
                gpu->ops->vec_destroy(gpu, gv[j]);
            }
            cpu->ops->vec_destroy(cpu, cw), gpu->ops->vec_destroy(gpu, gw);
            free(hv), free(cv), free(gv);
        }
    }
    engines_down();
}
END_TEST

/* Every coefficient shape through scalar_set, and write/read round trips. */
START_TEST(test_scalars)
{
    engines_up();
    tu_rng r = tu_rng_seed(15);
    double v[40];
    for (int j = 0; j < 40; j++) v[j] = 2.0 * tu_uniform(&r) - 1.0;
    v[7] = 0.0;
    ck_assert_int_eq(gpu->ops->scalar_write(gpu, GS_MAX_SCALARS - 40, 40, v), GS_OK);
    ck_assert_int_eq(cpu->ops->scalar_write(cpu, GS_MAX_SCALARS - 40, 40, v), GS_OK);
    double back[40];
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, GS_MAX_SCALARS - 40, 40, back), GS_OK);
    for (int j = 0; j < 40; j++) ck_assert(back[j] == v[j]);
    const int b = GS_MAX_SCALARS - 40;
    const gs_coef shapes[] = {gs_coef_const(3.5),          gs_coef_slot(2.0, b + 1),
                              gs_coef_ratio(-1.0, b + 2, b + 3), gs_coef_full(0.5, b + 4, b + 5, b + 6, b + 8),
                              gs_coef_full(1.0, GS_SLOT_NONE, b + 5, GS_SLOT_NONE, b + 9),
                              gs_coef_ratio(1.0, b + 1, b + 7) /* /0 -> 0 */,
                              gs_coef_full(1.0, b + 1, b + 2, b + 7, b + 3) /* /0 -> 0 */};
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
        ck_assert_int_eq(gpu->ops->scalar_set(gpu, 50 + s, shapes[s]), GS_OK);
        ck_assert_int_eq(cpu->ops->scalar_set(cpu, 50 + s, shapes[s]), GS_OK);
        double g = slot_get(gpu, 50 + s), c = slot_get(cpu, 50 + s);
        ck_assert_msg(g == c, "coef shape %d: gpu %.17g cpu %.17g", s, g, c); /* same operations */
    }
    /* a slot used as its own input */
    ck_assert_int_eq(gpu->ops->scalar_set(gpu, b + 1, gs_coef_ratio(1.0, b + 1, b + 2)), GS_OK);
    ck_assert_int_eq(cpu->ops->scalar_set(cpu, b + 1, gs_coef_ratio(1.0, b + 1, b + 2)), GS_OK);
    ck_assert(slot_get(gpu, b + 1) == slot_get(cpu, b + 1));
    no_error(gpu);
    engines_down();
}
END_TEST

/* ---------------------------------------------------------------- SpMV */

/* kind of random_matrix: every row of exactly len entries (fill 1) */
#define ROWS_OF(len) (100 + (len))

/* A random n_rows x n_cols matrix; row i gets len(i) distinct sorted
 * columns. kind: 0 uniform (7 a row), 1 ragged (0..60, 30% empty: fill
 * about 2.8), 2 uniform 3 a row plus one row of n_cols / 2 entries,
 * 3 mildly ragged (4..12: fill about 1.5, even slice widths), ROWS_OF(len)
 * uniform, len a row. */
static void random_matrix(tu_rng *r, int32_t n_rows, int32_t n_cols, int kind, gs_csr *A)
{
    const int fixed = kind >= ROWS_OF(0) ? kind - ROWS_OF(0) : 0;
    int64_t cap = (int64_t)n_rows * (fixed > 61 ? fixed : 61) + n_cols;
    int32_t *ri = malloc((size_t)cap * sizeof(int32_t)), *ci = malloc((size_t)cap * sizeof(int32_t));
    double *vi = malloc((size_t)cap * sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        int32_t len = fixed       ? fixed
                      : kind == 0 ? 7
                      : kind == 2 ? 3
                      : kind == 3 ? 4 + (int32_t)(tu_uniform(r) * 9)
                                  : (tu_uniform(r) < 0.3 ? 0 : (int32_t)(tu_uniform(r) * 61));
        if (kind == 2 && i == n_rows / 3) len = n_cols / 2;
        if (len > n_cols) len = n_cols;
        int32_t start = (int32_t)(tu_uniform(r) * n_cols);
        int32_t step = len > 0 ? n_cols / len : 1;
        if (step < 1) step = 1;
        for (int32_t k = 0; k < len; k++) { /* distinct: start + k*step mod n_cols */
            ri[nnz] = i;
            ci[nnz] = (int32_t)(((int64_t)start + (int64_t)k * step) % n_cols);
            vi[nnz] = 2.0 * tu_uniform(r) - 1.0;
            nnz++;
        }
    }
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(n_rows, n_cols, nnz, ri, ci, vi, A, &err) == GS_OK, "%s", err.msg);
    free(ri), free(ci), free(vi);
}

/* Row scale for the SpMV tolerance: (len_i + 4) sum_j |a_ij x_j| with the
 * values as stored, so that |gpu - cpu| <= 2 eps * scale is the bound for two
 * summation orders of a row (plus the rounding of a final a s + b y). */
static double *row_scale(const gs_csr *A, const double *x, gs_precision prec)
{
    double *s = malloc((size_t)(A->n_rows ? A->n_rows : 1) * sizeof(double));
    for (int32_t i = 0; i < A->n_rows; i++) {
        s[i] = 0;
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            double v = prec == GS_FP32 ? (double)(float)A->val[k] : A->val[k];
            s[i] += fabs(v * x[A->col[k]]);
        }
        s[i] *= (double)(A->row_ptr[i + 1] - A->row_ptr[i] + 4);
    }
    return s;
}

/* spmv_dot (no dot, w = NULL, w given) and spmv_axpby (b != 0, b = 0) on
 * both engines; expect_layout: the device layout this matrix must get. */
static void check_spmv_as(const gs_csr *A, gs_precision prec, int force,
                          const char *expect_layout, const char *what, tu_rng *r)
{
    const int64_t m = A->n_rows, n = A->n_cols;
    gs_mat *ca = NULL, *ga = NULL;
    ck_assert_int_eq(cpu->ops->mat_create(cpu, A, prec, &ca), GS_OK);
#if GS_HAVE_CUDA
    ck_assert_msg(gs_cuda_mat_create_as(gpu, A, prec, (gs_cuda_layout)force, 0, &ga) == GS_OK, "%s",
                  gpu->err.msg);
#else
    (void)force;
    ck_assert_msg(gpu->ops->mat_create(gpu, A, prec, &ga) == GS_OK, "%s", gpu->err.msg);
#endif
#if GS_HAVE_CUDA
    if (expect_layout)
        ck_assert_msg(strcmp(gs_cuda_mat_layout(ga), expect_layout) == 0, "%s: layout %s, want %s",
                      what, gs_cuda_mat_layout(ga), expect_layout);
#else
    (void)expect_layout;
#endif
    double *x = randoms(r, n), *w = randoms(r, m), *y0 = randoms(r, m);
    double *sx = row_scale(A, x, prec);
    gs_vec *cx = vec_from(cpu, x, n), *cw = vec_from(cpu, w, m), *cy = vec_from(cpu, y0, m);
    gs_vec *gx = vec_from(gpu, x, n), *gw = vec_from(gpu, w, m), *gy = vec_nan(gpu, m);
    char label[160];

    /* y = A x, S[30] = y.w */
    ck_assert_int_eq(cpu->ops->spmv_dot(cpu, ca, cx, cy, cw, 30), GS_OK);
    ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, gw, 30), GS_OK);
    double *yc = vec_get(cpu, cy, m), *yg = vec_get(gpu, gy, m);
    snprintf(label, sizeof label, "%s: spmv", what);
    assert_close(yg, yc, sx, m, 2 * EPS, label);
    snprintf(label, sizeof label, "%s: spmv y.w", what);
    assert_dot(slot_get(gpu, 30), slot_get(cpu, 30), abs_dot(yc, w, m) + 1e-13 * m, m, label);
    free(yg);

    /* y = A x, no dot (slot must stay as it was); and S[31] = y.x when square */
    gpu->ops->vec_destroy(gpu, gy);
    gy = vec_nan(gpu, m);
    ck_assert_int_eq(gpu->ops->scalar_write(gpu, 31, 1, (double[]){-7.0}), GS_OK);
    ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, NULL, GS_SLOT_NONE), GS_OK);
    yg = vec_get(gpu, gy, m);
    snprintf(label, sizeof label, "%s: spmv (no dot)", what);
    assert_close(yg, yc, sx, m, 2 * EPS, label);
    ck_assert(slot_get(gpu, 31) == -7.0);
    free(yg);
    if (m == n) {
        ck_assert_int_eq(cpu->ops->spmv_dot(cpu, ca, cx, cy, NULL, 31), GS_OK);
        ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, NULL, 31), GS_OK);
        snprintf(label, sizeof label, "%s: spmv y.x", what);
        assert_dot(slot_get(gpu, 31), slot_get(cpu, 31), abs_dot(yc, x, m) + 1e-13 * m, m, label);
    }

    /* y = a A x + b y with a, b from slots; then b = 0 on a poisoned y */
    random_slots(r);
    ck_assert_int_eq(cpu->ops->vec_upload(cpu, cy, y0), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_upload(gpu, gy, y0), GS_OK);
    gs_coef a = gs_coef_ratio(1.0, 10, 12), b = gs_coef_slot(-1.0, 11);
    ck_assert_int_eq(cpu->ops->spmv_axpby(cpu, a, ca, cx, b, cy), GS_OK);
    ck_assert_int_eq(gpu->ops->spmv_axpby(gpu, a, ga, gx, b, gy), GS_OK);
    free(yc);
    yc = vec_get(cpu, cy, m);
    yg = vec_get(gpu, gy, m);
    /* |a| = |S10 / S12| <= 6, |b| = |S11| <= 1.5 (random_slots) */
    double *s2 = malloc((size_t)(m ? m : 1) * sizeof(double));
    for (int64_t i = 0; i < m; i++) s2[i] = 6.0 * sx[i] + 8.0 * fabs(y0[i]);
    snprintf(label, sizeof label, "%s: spmv_axpby", what);
    assert_close(yg, yc, s2, m, 2 * EPS, label);
    free(yg);
    gpu->ops->vec_destroy(gpu, gy);
    gy = vec_nan(gpu, m);
    ck_assert_int_eq(cpu->ops->spmv_axpby(cpu, gs_coef_const(-2.0), ca, cx, gs_coef_ratio(1, 10, 13), cy), GS_OK);
    ck_assert_int_eq(gpu->ops->spmv_axpby(gpu, gs_coef_const(-2.0), ga, gx, gs_coef_ratio(1, 10, 13), gy), GS_OK);
    free(yc);
    yc = vec_get(cpu, cy, m);
    yg = vec_get(gpu, gy, m);
    snprintf(label, sizeof label, "%s: spmv_axpby b=0", what);
    assert_close(yg, yc, sx, m, 4 * EPS, label); /* a = -2 */
    no_error(cpu), no_error(gpu);

    free(x), free(w), free(y0), free(sx), free(s2), free(yc), free(yg);
    cpu->ops->vec_destroy(cpu, cx), cpu->ops->vec_destroy(cpu, cw), cpu->ops->vec_destroy(cpu, cy);
    gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gw), gpu->ops->vec_destroy(gpu, gy);
    cpu->ops->mat_destroy(cpu, ca);
    gpu->ops->mat_destroy(gpu, ga);
}

static void check_spmv(const gs_csr *A, gs_precision prec, const char *expect_layout,
                       const char *what, tu_rng *r)
{
    check_spmv_as(A, prec, 0 /* the rule */, expect_layout, what, r);
}

/* The device-fill part of the layout rule (cuda/sparse/layout.cu), as specified: CSR
 * where slices = ceil(n / 32) <= 4 a multiprocessor with nnz >= 8 n, or
 * <= 32 a multiprocessor with nnz >= 128 n; NULL where the padding rule
 * decides. */
static const char *device_fill_layout(const gs_csr *A)
{
#if GS_HAVE_CUDA
    const int64_t sm = gs_cuda_sm_count(gpu), n = A->n_rows, slices = (n + 31) / 32;
    if (n > 0 && ((slices <= 4 * sm && A->nnz >= 8 * n) || (slices <= 32 * sm && A->nnz >= 128 * n)))
        return "CSR";
#else
    (void)A;
#endif
    return NULL;
}

START_TEST(test_spmv_random)
{
    engines_up();
    tu_rng r = tu_rng_seed(16);
    const int32_t sizes[] = {1, 31, 33, 1000, 100003};
    const char *kinds[] = {"uniform", "ragged", "long row", "mildly ragged"};
    for (int s = 0; s < 5; s++)
        for (int kind = 0; kind < 4; kind++)
            for (int p = 0; p < 2; p++) {
                const int32_t n = sizes[s];
                if (n < 8 && kind != 0) continue;
                gs_csr A = {0};
                random_matrix(&r, n, n, kind, &A);
                /* the layout rule (cuda/sparse/layout.cu): fill <= 2 with even slice
                 * widths -> SELL-32, else CSR (ragged: fill 2.8; long row:
                 * one slice 500x wider than the rest, and that row, of n / 2
                 * entries among rows of 3, is split: cuda/sparse/long_rows.cu) */
                const char *want = NULL;
                if (n >= 1000) want = kind == 0 || kind == 3 ? "SELL-32" : kind == 2 ? "CSR-split" : "CSR";
                /* few slices of rows of mean ~8 (kind 3): the device-fill
                 * rule first */
                if (n >= 1000 && device_fill_layout(&A)) want = kind == 2 ? "CSR-split" : "CSR";
                if (n == 33 && kind == 0) want = "SELL-32";
                char what[96];
                snprintf(what, sizeof what, "%s n=%d %s", kinds[kind], (int)n, p ? "fp32" : "fp64");
                check_spmv(&A, p ? GS_FP32 : GS_FP64, want, what, &r);
                gs_csr_free(&A);
            }
    engines_down();
}
END_TEST

/* The device-fill rule (cuda/sparse/layout.cu) on both sides of its bounds, at
 * even widths (fill 1, which the padding rule alone gives to SELL-32):
 * slices 4 a multiprocessor and one more, rows of 8 and 7 there; slices 32
 * a multiprocessor and one more with rows of 128, rows of 127 between the
 * two bounds. Either way the results are the CPU's. */
START_TEST(test_spmv_device_fill)
{
    engines_up();
    tu_rng r = tu_rng_seed(29);
#if GS_HAVE_CUDA
    const int32_t sm = gs_cuda_sm_count(gpu);
#else
    const int32_t sm = 1;
#endif
    const int32_t s4 = 32 * 4 * sm, s32 = 32 * 32 * sm;
    const struct { int32_t n; int len; const char *want; } cases[] = {
        {s4, 8, "CSR"},          {s4, 7, "SELL-32"},        {s4 + 1, 8, "SELL-32"},
        {s4 - 31, 20, "CSR"},    {s32, 128, "CSR"},         {s32 + 1, 128, "SELL-32"},
        {s32 / 2, 127, "SELL-32"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_csr A = {0};
        random_matrix(&r, cases[i].n, cases[i].n, ROWS_OF(cases[i].len), &A);
        for (int p = 0; p < 2; p++) {
            char what[96];
            snprintf(what, sizeof what, "rows of %d, %d rows (%d slices) on %d multiprocessors, %s",
                     cases[i].len, (int)cases[i].n, (int)((cases[i].n + 31) / 32), (int)sm,
                     p ? "fp32" : "fp64");
            check_spmv(&A, p ? GS_FP32 : GS_FP64, cases[i].want, what, &r);
        }
        gs_csr_free(&A);
    }
    engines_down();
}
END_TEST

/* Every layout forced on the same matrices gives the CPU's results. */
START_TEST(test_spmv_forced_layouts)
{
    engines_up();
    tu_rng r = tu_rng_seed(23);
    const char *names[] = {"SELL-32", "SELL-32-1024", "CSR"};
    for (int kind = 0; kind < 4; kind++)
        for (int l = 1; l <= 3; l++) {
            gs_csr A = {0};
            random_matrix(&r, 5003, 5003, kind, &A);
            char what[96];
            snprintf(what, sizeof what, "kind %d forced %s", kind, names[l - 1]);
            check_spmv_as(&A, kind % 2 ? GS_FP32 : GS_FP64, l, names[l - 1], what, &r);
            gs_csr_free(&A);
        }
    engines_down();
}
END_TEST

START_TEST(test_spmv_rectangular_and_empty)
{
    engines_up();
    tu_rng r = tu_rng_seed(17);
    gs_csr A = {0};
    random_matrix(&r, 3001, 77, 0, &A); /* tall */
    check_spmv(&A, GS_FP64, NULL, "tall 3001x77", &r);
    gs_csr_free(&A);
    random_matrix(&r, 70, 5000, 1, &A); /* wide, ragged */
    check_spmv(&A, GS_FP32, NULL, "wide 70x5000", &r);
    gs_csr_free(&A);
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_alloc(500, 500, 0, 1, &A, &err), GS_OK); /* no entries at all */
    check_spmv(&A, GS_FP64, NULL, "zero matrix", &r);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

START_TEST(test_spmv_poisson)
{
    engines_up();
    tu_rng r = tu_rng_seed(18);
    const char *specs[] = {"poisson3d:20", "poisson3d:17x9x5", "convdiff3d:24", "poisson3d27:12",
                           "poisson3d27:40"};
    for (int s = 0; s < 5; s++) {
        gs_csr A = {0};
        gs_error err = {0};
        char name[64];
        ck_assert_msg(gs_generate(specs[s], &A, name, sizeof name, &err) == GS_OK, "%s", err.msg);
        /* the 27-point's rows of ~23 to 26 entries: CSR where the slices
         * are few (1728 rows), else SELL-32 */
        const char *want = device_fill_layout(&A) ? "CSR" : "SELL-32";
        check_spmv(&A, GS_FP64, want, specs[s], &r);
        check_spmv(&A, GS_FP32, want, specs[s], &r);
        gs_csr_free(&A);
    }
    engines_down();
}
END_TEST

/* Same inputs, same bits: the reductions add in a fixed order. */
START_TEST(test_deterministic)
{
    engines_up();
    tu_rng r = tu_rng_seed(19);
    const int64_t n = 1000003;
    double *x = randoms(&r, n), *y = randoms(&r, n);
    gs_vec *gx = vec_from(gpu, x, n), *gy = vec_from(gpu, y, n);
    double first = 0;
    for (int rep = 0; rep < 20; rep++) {
        ck_assert_int_eq(gpu->ops->dot(gpu, gx, gy, 40), GS_OK);
        double v = slot_get(gpu, 40);
        if (rep == 0) first = v;
        ck_assert_msg(v == first, "dot changed between runs: %.17g vs %.17g", v, first);
    }
    free(x), free(y);
    gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gy);
    engines_down();
}
END_TEST

/* ------------------------------------------------------------- trisolve */

/* Random triangular n x n (lower or upper), diagonal 2..3 (or missing
 * in row `hole` when hole >= 0), up to 6 off-diagonal entries a row. */
static void random_triangle(tu_rng *r, int32_t n, int lower, int32_t hole, gs_csr *T)
{
    int64_t cap = (int64_t)n * 7;
    int32_t *ri = malloc((size_t)cap * sizeof(int32_t)), *ci = malloc((size_t)cap * sizeof(int32_t));
    double *vi = malloc((size_t)cap * sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i != hole) ri[nnz] = i, ci[nnz] = i, vi[nnz++] = 2.0 + tu_uniform(r);
        int32_t room = lower ? i : n - 1 - i;
        for (int k = 0; k < 6 && room > 0; k++) {
            int32_t off = 1 + (int32_t)(tu_uniform(r) * room);
            ri[nnz] = i, ci[nnz] = lower ? i - off : i + off;
            vi[nnz++] = (2.0 * tu_uniform(r) - 1.0) / 6.0;
        }
    }
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(n, n, nnz, ri, ci, vi, T, &err) == GS_OK, "%s", err.msg);
    free(ri), free(ci), free(vi);
}

START_TEST(test_trisolve)
{
    engines_up();
    tu_rng r = tu_rng_seed(20);
    const int32_t sizes[] = {1, 33, 1000, 50021};
    for (int s = 0; s < 4; s++)
        for (int lower = 0; lower < 2; lower++)
            for (int unit = 0; unit < 2; unit++)
                for (int p = 0; p < 2; p++) {
                    const int32_t n = sizes[s];
                    gs_csr T = {0};
                    random_triangle(&r, n, lower, -1, &T);
                    gs_mat *ct = NULL, *gt = NULL;
                    ck_assert_int_eq(cpu->ops->mat_create(cpu, &T, p ? GS_FP32 : GS_FP64, &ct), GS_OK);
                    ck_assert_int_eq(gpu->ops->mat_create(gpu, &T, p ? GS_FP32 : GS_FP64, &gt), GS_OK);
                    double *b = randoms(&r, n);
                    gs_vec *cb = vec_from(cpu, b, n), *gb = vec_from(gpu, b, n);
                    gs_vec *cx = vec_nan(cpu, n), *gx = vec_nan(gpu, n);
                    for (int rep = 0; rep < 2; rep++) { /* the second reuses the analysis */
                        ck_assert_int_eq(cpu->ops->trisolve(cpu, ct, unit, cb, cx), GS_OK);
                        ck_assert_msg(gpu->ops->trisolve(gpu, gt, unit, gb, gx) == GS_OK, "%s",
                                      gpu->err.msg);
                        no_error(gpu);
                        double *xc = vec_get(cpu, cx, n), *xg = vec_get(gpu, gx, n);
                        /* |off-diagonal row sum| <= 1 / diag >= 2 (or 1 with unit):
                         * substitution is stable, the error stays near eps |x| */
                        char what[96];
                        snprintf(what, sizeof what, "trisolve n=%d %s unit=%d %s", (int)n,
                                 lower ? "lower" : "upper", unit, p ? "fp32" : "fp64");
                        double xmax = 0;
                        for (int32_t i = 0; i < n; i++) xmax = fmax(xmax, fabs(xc[i]));
                        double *sc = malloc((size_t)n * sizeof(double));
                        for (int32_t i = 0; i < n; i++) sc[i] = 1.0 + xmax;
                        assert_close(xg, xc, sc, n, 1e-12, what);
                        free(xc), free(xg), free(sc);
                    }
                    free(b);
                    cpu->ops->vec_destroy(cpu, cb), cpu->ops->vec_destroy(cpu, cx);
                    gpu->ops->vec_destroy(gpu, gb), gpu->ops->vec_destroy(gpu, gx);
                    cpu->ops->mat_destroy(cpu, ct), gpu->ops->mat_destroy(gpu, gt);
                    gs_csr_free(&T);
                }
    engines_down();
}
END_TEST

START_TEST(test_trisolve_errors)
{
    engines_up();
    tu_rng r = tu_rng_seed(21);
    gs_csr T = {0}, A = {0};
    random_triangle(&r, 200, 1, 57, &T); /* row 58 (1-based) has no diagonal */
    gs_mat *gt = NULL, *ga = NULL;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &T, GS_FP64, &gt), GS_OK);
    double *b = randoms(&r, 200);
    gs_vec *gb = vec_from(gpu, b, 200), *gx = vec_nan(gpu, 200);
    ck_assert_int_eq(gpu->ops->trisolve(gpu, gt, 0, gb, gx), GS_ERR_NUMERIC);
    ck_assert_msg(strstr(gpu->err.msg, "row 58") != NULL, "%s", gpu->err.msg);
    gs_error_clear(&gpu->err);
    ck_assert_int_eq(gpu->ops->trisolve(gpu, gt, 1, gb, gx), GS_OK); /* unit: no diagonal needed */
    no_error(gpu);
    random_matrix(&r, 200, 200, 0, &A);
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
    ck_assert_int_eq(gpu->ops->trisolve(gpu, ga, 0, gb, gx), GS_ERR_INTERNAL);
    gs_error_clear(&gpu->err);
    free(b);
    gpu->ops->vec_destroy(gpu, gb), gpu->ops->vec_destroy(gpu, gx);
    gpu->ops->mat_destroy(gpu, gt), gpu->ops->mat_destroy(gpu, ga);
    gs_csr_free(&T), gs_csr_free(&A);
    engines_down();
}
END_TEST

/* -------------------------------------------------- captured sequences */

/* Three CG-like steps (spmv_dot, ratio coefficients, scalar_set, fused
 * updates, the Jacobi apply) run directly on one set of vectors and as a
 * captured, replayed sequence on a copy: the same bits. */
static void cg_like_step(gs_engine *e, const gs_mat *A, gs_vec *p, gs_vec *q, gs_vec *x,
                         gs_vec *rr, gs_vec *z, const gs_vec *d)
{
    ck_assert_int_eq(e->ops->spmv_dot(e, A, p, q, NULL, 2), GS_OK);
    ck_assert_int_eq(e->ops->axpby(e, gs_coef_ratio(1, 3, 2), p, gs_coef_const(1), x), GS_OK);
    ck_assert_int_eq(e->ops->axpby_dot(e, gs_coef_ratio(-1, 3, 2), q, gs_coef_const(1), rr, NULL, 1), GS_OK);
    ck_assert_int_eq(e->ops->scalar_set(e, 4, gs_coef_slot(1, 3)), GS_OK);
    ck_assert_int_eq(e->ops->pointwise_mult_dot(e, d, rr, z, 3), GS_OK);
    ck_assert_int_eq(e->ops->axpby(e, gs_coef_const(1), z, gs_coef_ratio(1, 3, 4), p), GS_OK);
}

START_TEST(test_capture_replay)
{
    engines_up();
    ck_assert_ptr_nonnull(gpu->ops->capture_begin);
    tu_rng r = tu_rng_seed(22);
    gs_csr A = {0};
    gs_error err = {0};
    char name[64];
    ck_assert_int_eq(gs_generate("poisson3d:30", &A, name, sizeof name, &err), GS_OK);
    const int64_t n = A.n_rows;
    gs_mat *ga = NULL;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
    double *b = randoms(&r, n), *dh = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) dh[i] = 1.0 / 6.0;
    gs_vec *d = vec_from(gpu, dh, n);
    gs_vec *v[2][5];
    for (int s = 0; s < 2; s++) {
        v[s][0] = vec_from(gpu, b, n); /* p */
        v[s][1] = vec_nan(gpu, n);     /* q */
        v[s][2] = vec_nan(gpu, n);     /* x */
        ck_assert_int_eq(gpu->ops->set(gpu, v[s][2], 0.0), GS_OK);
        v[s][3] = vec_from(gpu, b, n); /* r */
        v[s][4] = vec_nan(gpu, n);     /* z */
    }
    double s0[3];
    ck_assert_int_eq(gpu->ops->dot(gpu, v[0][3], v[0][3], 3), GS_OK);
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, 1, 3, s0), GS_OK);
    for (int it = 0; it < 3; it++) cg_like_step(gpu, ga, v[0][0], v[0][1], v[0][2], v[0][3], v[0][4], d);
    double direct[4];
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, 1, 4, direct), GS_OK);
    double *xd = vec_get(gpu, v[0][2], n), *pd = vec_get(gpu, v[0][0], n);

    /* the same from the same starting scalars, captured once, replayed 3x */
    ck_assert_int_eq(gpu->ops->dot(gpu, v[1][3], v[1][3], 3), GS_OK);
    void *seq = NULL;
    ck_assert_int_eq(gpu->ops->capture_begin(gpu), GS_OK);
    cg_like_step(gpu, ga, v[1][0], v[1][1], v[1][2], v[1][3], v[1][4], d);
    double tmp;
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, 1, 1, &tmp), GS_ERR_INTERNAL); /* no sync inside */
    gs_error_clear(&gpu->err);
    ck_assert_int_eq(gpu->ops->capture_end(gpu, &seq), GS_OK);
    ck_assert_ptr_nonnull(seq);
    for (int it = 0; it < 3; it++) ck_assert_int_eq(gpu->ops->replay(gpu, seq), GS_OK);
    double replayed[4];
    ck_assert_int_eq(gpu->ops->scalar_read(gpu, 1, 4, replayed), GS_OK);
    double *xr = vec_get(gpu, v[1][2], n), *pr = vec_get(gpu, v[1][0], n);
    for (int j = 0; j < 4; j++)
        ck_assert_msg(direct[j] == replayed[j], "slot %d: direct %.17g replayed %.17g", j + 1,
                      direct[j], replayed[j]);
    assert_close(xr, xd, NULL, n, 0.0, "capture x");
    assert_close(pr, pd, NULL, n, 0.0, "capture p");
    gpu->ops->seq_destroy(gpu, seq);
    no_error(gpu);
    free(b), free(dh), free(xd), free(pd), free(xr), free(pr);
    for (int s = 0; s < 2; s++)
        for (int j = 0; j < 5; j++) gpu->ops->vec_destroy(gpu, v[s][j]);
    gpu->ops->vec_destroy(gpu, d);
    gpu->ops->mat_destroy(gpu, ga);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* ------------------------------------------------------ jacobi on device */

/* Jacobi's CUDA setup (diagonal read on the device) against the host setup
 * on the same engine: 1/a_ii is one IEEE division either way, so z = M r
 * and r.z agree to the bit; a zero diagonal gives the same message. */
static void check_jacobi(const gs_csr *A, const char *what)
{
#if GS_HAVE_CUDA
    static const gs_pc_type device_type = {.name = "jacobi", .summary = "test",
                                           .setup = {NULL, gs_jacobi_setup_cuda}};
    static const gs_pc_type host_type = {.name = "jacobi", .summary = "test",
                                         .setup = {NULL, gs_jacobi_setup}};
    gs_error e1 = {0}, e2 = {0};
    gs_params params = {0};
    gs_mat *ga = NULL;
    gs_pc *pd = NULL, *ph = NULL;
    const int64_t n = A->n_rows;
    tu_rng r = tu_rng_seed(24);
    ck_assert_int_eq(gpu->ops->mat_create(gpu, A, GS_FP64, &ga), GS_OK);
    int sd = gs_pc_create(&device_type, gpu, &params, A, ga, &pd, &e1);
    int sh = gs_pc_create(&host_type, gpu, &params, A, ga, &ph, &e2);
    ck_assert_msg(sd == sh, "%s: device setup %d (%s), host setup %d (%s)", what, sd, e1.msg, sh,
                  e2.msg);
    if (sd != GS_OK) {
        ck_assert_str_eq(e1.msg, e2.msg);
        gs_error_clear(&gpu->err);
    } else {
        double *rh = randoms(&r, n);
        gs_vec *rv = vec_from(gpu, rh, n), *z1 = vec_nan(gpu, n), *z2 = vec_nan(gpu, n);
        ck_assert_int_eq(gs_pc_apply_dot(pd, rv, z1, 60), GS_OK);
        ck_assert_int_eq(gs_pc_apply_dot(ph, rv, z2, 61), GS_OK);
        double *h1 = vec_get(gpu, z1, n), *h2 = vec_get(gpu, z2, n);
        assert_close(h1, h2, NULL, n, 0.0, what);
        ck_assert(slot_get(gpu, 60) == slot_get(gpu, 61));
        free(rh), free(h1), free(h2);
        gpu->ops->vec_destroy(gpu, rv), gpu->ops->vec_destroy(gpu, z1), gpu->ops->vec_destroy(gpu, z2);
    }
    gs_pc_destroy(pd);
    gs_pc_destroy(ph);
    gpu->ops->mat_destroy(gpu, ga);
#else
    (void)A, (void)what;
#endif
}

START_TEST(test_jacobi_device_setup)
{
    engines_up();
    tu_rng r = tu_rng_seed(25);
    gs_csr A = {0};
    gs_error err = {0};
    char name[64];
    ck_assert_int_eq(gs_generate("convdiff3d:33", &A, name, sizeof name, &err), GS_OK);
    check_jacobi(&A, "convdiff3d:33 (SELL-32)");
    gs_csr_free(&A);
    random_matrix(&r, 4000, 4000, 1, &A); /* ragged: CSR, rows without a diagonal */
    check_jacobi(&A, "ragged (CSR), missing diagonals");
    gs_csr_free(&A);
    /* every row with its diagonal: uniform kind with the diagonal added */
    gs_csr B = {0};
    random_matrix(&r, 30000, 30000, 3, &B); /* 938 slices of rows of ~9 */
    int32_t *ri = malloc((size_t)(B.nnz + B.n_rows) * sizeof(int32_t));
    int32_t *ci = malloc((size_t)(B.nnz + B.n_rows) * sizeof(int32_t));
    double *vi = malloc((size_t)(B.nnz + B.n_rows) * sizeof(double));
    int64_t m = 0;
    for (int32_t i = 0; i < B.n_rows; i++) {
        for (int64_t k = B.row_ptr[i]; k < B.row_ptr[i + 1]; k++)
            ri[m] = i, ci[m] = B.col[k], vi[m++] = B.val[k];
        ri[m] = i, ci[m] = i, vi[m++] = 3.0 + tu_uniform(&r); /* summed with any stored a_ii */
    }
    ck_assert_int_eq(gs_csr_from_coo(B.n_rows, B.n_cols, m, ri, ci, vi, &A, &err), GS_OK);
    check_jacobi(&A, device_fill_layout(&A) ? "mildly ragged with diagonal (CSR: few slices)"
                                            : "mildly ragged with diagonal (SELL-32, fill ~1.4)");
    free(ri), free(ci), free(vi);
    gs_csr_free(&A), gs_csr_free(&B);
    engines_down();
}
END_TEST

/* ---------------------------------------------- A's CSR back from the device */

#if GS_HAVE_CUDA

/* Fill about 64 MiB of the device heap with all-ones bits (a NaN as a
 * double, -1 as an index) and give it back, so that the next allocations
 * likely land on it and an unwritten entry shows. */
static void poison_device_heap(void)
{
    gs_vec *v[8] = {0};
    const uint64_t ones = ~(uint64_t)0;
    double poison;
    memcpy(&poison, &ones, sizeof poison);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(gpu->ops->vec_create(gpu, (int64_t)1 << 20, &v[i]), GS_OK);
        ck_assert_int_eq(gpu->ops->set(gpu, v[i], poison), GS_OK);
    }
    no_error(gpu);
    for (int i = 0; i < 8; i++) gpu->ops->vec_destroy(gpu, v[i]);
}

/* The device CSR of A stored in the given layout equals the host CSR, bit
 * for bit; a rebuilt copy (sliced ELL) is owned and freed, the CSR layout's
 * own arrays are handed out. */
static void check_device_csr(const gs_csr *A, gs_cuda_layout layout, const char *what)
{
    gs_mat *ga = NULL;
    gs_csr B = {0};
    gs_error err = {0};
    int owned = -2;
    ck_assert_msg(gs_cuda_mat_create_as(gpu, A, GS_FP64, layout, layout == GS_CUDA_LAYOUT_SELL_SORTED ? 64 : 0, &ga) == GS_OK,
                  "%s: %s", what, gpu->err.msg);
    const int is_csr = strncmp(gs_cuda_mat_layout(ga), "CSR", 3) == 0; /* CSR-split, -merge too */
    ck_assert_int_eq(gs_csr_alloc(A->n_rows, A->n_cols, A->nnz, 1, &B, &err), GS_OK);
    memset(B.row_ptr, 0xff, ((size_t)A->n_rows + 1) * sizeof(int64_t));
    memset(B.col, 0xff, (size_t)A->nnz * sizeof(int32_t));
    memset(B.val, 0xff, (size_t)A->nnz * sizeof(double));
    const size_t before = gpu->device_bytes_now;
    poison_device_heap();
    ck_assert_msg(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned) == GS_OK, "%s: %s", what,
                  gpu->err.msg);
    ck_assert_uint_eq(gpu->device_bytes_now, before);
    ck_assert_msg(owned == !is_csr, "%s (%s): owned %d", what, gs_cuda_mat_layout(ga), owned);
    char label[160];
    snprintf(label, sizeof label, "%s (%s)", what, gs_cuda_mat_layout(ga));
    tu_assert_same_csr(A, &B, label);
    no_error(gpu);
    gs_csr_free(&B);
    gpu->ops->mat_destroy(gpu, ga);
}

START_TEST(test_device_csr)
{
    engines_up();
    tu_rng r = tu_rng_seed(26);
    const gs_cuda_layout layouts[] = {GS_CUDA_LAYOUT_AUTO, GS_CUDA_LAYOUT_SELL,
                                      GS_CUDA_LAYOUT_SELL_SORTED, GS_CUDA_LAYOUT_CSR};
    const int32_t sizes[] = {1, 31, 33, 1000, 100003};
    char what[96];
    for (int s = 0; s < 5; s++)
        for (int kind = 0; kind < 4; kind++) {
            const int32_t n = sizes[s];
            if (n < 8 && kind != 0) continue;
            gs_csr A = {0};
            random_matrix(&r, n, kind == 2 ? n + 17 : n, kind, &A); /* ragged: empty rows */
            for (int64_t k = 0; k < A.nnz; k += 97) A.val[k] = k % 2 ? 0.0 : -0.0; /* stored zeros */
            for (int l = 0; l < 4; l++) {
                snprintf(what, sizeof what, "kind %d n=%d layout %d", kind, (int)n, l);
                check_device_csr(&A, layouts[l], what);
            }
            gs_csr_free(&A);
        }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_alloc(500, 500, 0, 1, &A, &err), GS_OK); /* no entries at all */
    for (int l = 0; l < 4; l++) check_device_csr(&A, layouts[l], "zero matrix");
    gs_csr_free(&A);
    char name[64];
    ck_assert_int_eq(gs_generate("poisson3d27:12", &A, name, sizeof name, &err), GS_OK);
    for (int l = 0; l < 4; l++) check_device_csr(&A, layouts[l], "poisson3d27:12");
    /* fp32 storage is refused: its values are not A's */
    gs_mat *ga = NULL;
    gs_csr B = {0};
    int owned = -2;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP32, &ga), GS_OK);
    ck_assert_int_eq(gs_csr_alloc(A.n_rows, A.n_cols, A.nnz, 1, &B, &err), GS_OK);
    ck_assert_int_eq(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned), GS_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gpu->err.msg, "fp32") != NULL, "%s", gpu->err.msg);
    gs_error_clear(&gpu->err);
    gpu->ops->mat_destroy(gpu, ga);
    gs_csr_free(&B), gs_csr_free(&A);
    engines_down();
}
END_TEST

/* No entry above the diagonal, or none below (the engine's test). */
static int is_triangular(const gs_csr *A)
{
    int lower = 1, upper = 1;
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            lower &= A->col[k] <= i;
            upper &= A->col[k] >= i;
        }
    return A->n_rows == A->n_cols && (lower || upper);
}

/* y = A x on the GPU for the matrix ga, downloaded (x of A's n_cols). */
static double *gpu_product(gs_mat *ga, const double *x, int64_t m, int64_t n)
{
    gs_vec *gx = vec_from(gpu, x, n), *gy = vec_nan(gpu, m);
    ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, NULL, GS_SLOT_NONE), GS_OK);
    double *y = vec_get(gpu, gy, m);
    gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gy);
    return y;
}

/* mat_create_system from page-locked host arrays (host_pin): the upload is
 * over when it returns (the host arrays, poisoned right after, do not reach
 * the device). Until setup_done the matrix is CSR, the upload itself: the
 * setups' view lends its arrays (not owned, bitwise A) and the engine holds
 * exactly A's CSR. setup_done (*laid_out = 1 where the device-fill rule had
 * not settled the layout at creation) gives it the layout and the bytes
 * that mat_create gives A, and the same product bit for bit; a second
 * setup_done has nothing to do. Destroyed before setup_done or after, every
 * array is freed. */
static void check_system_matrix(const gs_csr *A0, const char *what, tu_rng *r)
{
    gs_csr A = {0}, B = {0};
    gs_error err = {0};
    gs_mat *ga = NULL, *plain = NULL;
    int owned = -2;
    ck_assert_int_eq(gs_csr_copy(A0, &A, &err), GS_OK);
    ck_assert_int_eq(gs_csr_alloc(A.n_rows, A.n_cols, A.nnz, 1, &B, &err), GS_OK);
    const size_t csr_bytes = ((size_t)A.n_rows + 1) * sizeof(int64_t) +
                             (size_t)A.nnz * (sizeof(int32_t) + sizeof(double));
    /* each array alone in whole pages (as gs_problem_pin lays them out) */
    void *arrays[3] = {A.row_ptr, A.col, A.val};
    size_t sizes[3] = {((size_t)A.n_rows + 1) * sizeof(int64_t), (size_t)A.nnz * sizeof(int32_t),
                       (size_t)A.nnz * sizeof(double)};
    for (int k = 0; k < 3; k++) {
        void *q = NULL;
        const size_t len = (sizes[k] + 4095) / 4096 * 4096;
        ck_assert_int_eq(posix_memalign(&q, 4096, len), 0);
        memcpy(q, arrays[k], sizes[k]);
        free(arrays[k]);
        arrays[k] = q, sizes[k] = len;
        ck_assert_msg(gpu->ops->host_pin(gpu, q, len) == 1, "%s: array %d not page-locked", what, k);
    }
    A.row_ptr = arrays[0], A.col = arrays[1], A.val = arrays[2];
    /* what mat_create makes of A */
    size_t base = gpu->device_bytes_now;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &plain), GS_OK);
    const size_t plain_bytes = gpu->device_bytes_now - base;
    char want[24];
    snprintf(want, sizeof want, "%s", gs_cuda_mat_layout(plain));
    /* settled at creation: by the device-fill rule, or triangular (kept
     * as it is made, for the triangular solves) */
    const int want_csr = strncmp(want, "CSR", 3) == 0, /* CSR-split, -merge: CSR arrays too */
              settled = device_fill_layout(&A) != NULL || is_triangular(&A);
    double *x = randoms(r, A.n_cols), *y_plain = gpu_product(plain, x, A.n_rows, A.n_cols);
    base = gpu->device_bytes_now;
    for (int round = 0; round < 2; round++) {
        ck_assert_msg(gpu->ops->mat_create_system(gpu, &A, &ga) == GS_OK, "%s: %s", what,
                      gpu->err.msg);
        gs_csr keep = {0};
        ck_assert_int_eq(gs_csr_copy(&A, &keep, &err), GS_OK);
        memset(A.col, 0xff, (size_t)A.nnz * sizeof(int32_t)); /* after the return: too late */
        memset(A.val, 0xff, (size_t)A.nnz * sizeof(double));
        ck_assert_msg(strcmp(gs_cuda_mat_layout(ga), "CSR") == 0, "%s: %s before setup_done",
                      what, gs_cuda_mat_layout(ga));
        ck_assert_uint_eq(gpu->device_bytes_now - base, csr_bytes);
        if (round == 0) { /* lent, not copied */
            ck_assert_int_eq(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned), GS_OK);
            ck_assert_int_eq(owned, 0);
            tu_assert_same_csr(&keep, &B, what);
            ck_assert_uint_eq(gpu->device_bytes_now - base, csr_bytes);
        }
        int laid = -1;
        ck_assert_msg(gpu->ops->setup_done(gpu, ga, &laid) == GS_OK, "%s: %s", what, gpu->err.msg);
        ck_assert_msg(laid == !settled, "%s: laid out %d, device-fill rule settled %d", what, laid,
                      settled);
        ck_assert_msg(strcmp(gs_cuda_mat_layout(ga), want) == 0, "%s: %s after setup_done, want %s",
                      what, gs_cuda_mat_layout(ga), want);
        ck_assert_uint_eq(gpu->device_bytes_now - base, plain_bytes);
        double *y = gpu_product(ga, x, A.n_rows, A.n_cols);
        ck_assert_msg(memcmp(y, y_plain, (size_t)A.n_rows * sizeof(double)) == 0,
                      "%s: product after setup_done differs from mat_create's", what);
        free(y);
        memset(B.val, 0, (size_t)A.nnz * sizeof(double));
        ck_assert_int_eq(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned), GS_OK);
        ck_assert_int_eq(owned, !want_csr);
        tu_assert_same_csr(&keep, &B, what);
        ck_assert_int_eq(gpu->ops->setup_done(gpu, ga, &laid), GS_OK); /* nothing left to do */
        ck_assert_int_eq(laid, 0);
        no_error(gpu);
        gpu->ops->mat_destroy(gpu, ga);
        ck_assert_uint_eq(gpu->device_bytes_now, base);
        memcpy(A.col, keep.col, (size_t)A.nnz * sizeof(int32_t));
        memcpy(A.val, keep.val, (size_t)A.nnz * sizeof(double));
        gs_csr_free(&keep);
    }
    /* destroyed before setup_done: freed too */
    ck_assert_int_eq(gpu->ops->mat_create_system(gpu, &A, &ga), GS_OK);
    gpu->ops->mat_destroy(gpu, ga);
    ck_assert_uint_eq(gpu->device_bytes_now, base);
    gpu->ops->mat_destroy(gpu, plain);
    free(x), free(y_plain);
    /* the CSR layout takes the upload over with no kernel and no read back
     * of its own: only the upload's own wait keeps the poison out */
    {
        gs_csr keep = {0};
        ck_assert_int_eq(gs_csr_copy(&A, &keep, &err), GS_OK);
        ck_assert_int_eq(gs_cuda_mat_create_as(gpu, &A, GS_FP64, GS_CUDA_LAYOUT_CSR, 0, &ga), GS_OK);
        memset(A.col, 0xff, (size_t)A.nnz * sizeof(int32_t));
        memset(A.val, 0xff, (size_t)A.nnz * sizeof(double));
        ck_assert_int_eq(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned), GS_OK);
        ck_assert_int_eq(owned, 0);
        tu_assert_same_csr(&keep, &B, what);
        gpu->ops->mat_destroy(gpu, ga);
        memcpy(A.col, keep.col, (size_t)A.nnz * sizeof(int32_t));
        memcpy(A.val, keep.val, (size_t)A.nnz * sizeof(double));
        gs_csr_free(&keep);
    }
    for (int k = 0; k < 3; k++) gpu->ops->host_unpin(gpu, arrays[k]);
    no_error(gpu);
    gs_csr_free(&A), gs_csr_free(&B);
}

START_TEST(test_system_matrix)
{
    engines_up();
    ck_assert(gpu->ops->host_pin && gpu->ops->host_unpin && gpu->ops->mat_create_system &&
              gpu->ops->setup_done);
    ck_assert(!cpu->ops->host_pin && !cpu->ops->mat_create_system);
    tu_rng r = tu_rng_seed(27);
    int layouts[2] = {0, 0}; /* SELL, CSR seen */
    const int32_t sizes[] = {33, 1000, 100003};
    char what[64];
    for (int s = 0; s < 3; s++)
        for (int kind = 0; kind < 4; kind++) {
            gs_csr A = {0};
            random_matrix(&r, sizes[s], sizes[s], kind, &A);
            snprintf(what, sizeof what, "kind %d n=%d", kind, (int)sizes[s]);
            gs_mat *ga = NULL;
            ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
            layouts[strncmp(gs_cuda_mat_layout(ga), "CSR", 3) == 0] = 1;
            gpu->ops->mat_destroy(gpu, ga);
            check_system_matrix(&A, what, &r);
            gs_csr_free(&A);
        }
    ck_assert_msg(layouts[0] && layouts[1], "layouts covered: SELL %d, CSR %d", layouts[0],
                  layouts[1]);
    engines_down();
}
END_TEST

#define STEPS 8

/* A chunk of gs_cuda_vmm_reserve for an array of bytes (granule g): a
 * STEPS-th, in whole granules. */
static size_t chunk_of(size_t bytes, size_t g)
{
    const size_t c = (bytes / STEPS + g - 1) / g * g;
    return c < g ? g : c;
}

/* The stepped layout (cuda/sparse/stepped.cu), set here to take every matrix, in
 * STEPS steps: the layout, the product and the device CSR of each matrix are
 * those of the plain build, bit for bit, through mat_create, through
 * mat_create_system and setup_done, and through setup_done after a peak
 * higher than any build (the sliced ELL then built whole from the
 * chunk-mapped CSR, holding exactly the plain build's bytes); and where the
 * layout is sliced ELL and the arrays span several granules, the stepped
 * build's peak stays within the larger layout plus two steps of the sliced
 * ELL, a chunk of each of the four arrays and the plan's arrays, below the
 * plain build's peak (both layouts whole); for the 7-point stencil (fill 1)
 * that bound itself is below it. A matrix of 3 slices takes fewer steps. */
START_TEST(test_stepped_layout)
{
    engines_up();
    const size_t g = (size_t)gs_cuda_set_stepped_layout(gpu, 0, STEPS);
    ck_assert_msg(g > 0, "the driver offers no virtual memory management");
    tu_rng r = tu_rng_seed(31);
    gs_csr As[5] = {tu_generated("poisson3d:100"), {0}, {0}, {0}, tu_generated("poisson3d:4x4x5")};
    random_matrix(&r, 300007, 300007, 3, &As[1]); /* rows of 4..12: sliced ELL */
    random_matrix(&r, 200003, 200003, 2, &As[2]); /* one row of n/2: CSR by the padding rule */
    random_matrix(&r, 4000, 4000, ROWS_OF(200), &As[3]); /* CSR by the device-fill rule */
    int sell_seen = 0;
    for (int t = 0; t < 5; t++) {
        const gs_csr *A = &As[t];
        const int64_t n = A->n_rows, ns = (n + 31) / 32;
        const size_t csr_bytes = ((size_t)n + 1) * sizeof(int64_t) +
                                 (size_t)A->nnz * (sizeof(int32_t) + sizeof(double));
        char what[64];
        snprintf(what, sizeof what, "case %d (n=%lld)", t, (long long)n);
        double *x = randoms(&r, A->n_cols);
        gs_mat *plain = NULL, *ga = NULL;
        gs_cuda_set_stepped_layout(gpu, SIZE_MAX, 0);
        size_t base = gpu->device_bytes_now;
        gpu->device_bytes_peak = base;
        ck_assert_int_eq(gpu->ops->mat_create(gpu, A, GS_FP64, &plain), GS_OK);
        const size_t plain_bytes = gpu->device_bytes_now - base;
        const size_t plain_peak = gpu->device_bytes_peak - base;
        double *y_plain = gpu_product(plain, x, n, A->n_cols);
        const int is_sell = strncmp(gs_cuda_mat_layout(plain), "CSR", 3) != 0;
        sell_seen |= is_sell;
        gs_cuda_set_stepped_layout(gpu, 0, STEPS);
        for (int variant = 0; variant < 3; variant++) {
            const int system = variant > 0, high_peak = variant == 2;
            base = gpu->device_bytes_now;
            gpu->device_bytes_peak = base;
            if (system) {
                ck_assert_int_eq(gpu->ops->mat_create_system(gpu, A, &ga), GS_OK);
                if (high_peak) gpu->device_bytes_peak = SIZE_MAX / 2;
                int laid = -1;
                ck_assert_msg(gpu->ops->setup_done(gpu, ga, &laid) == GS_OK, "%s: %s", what,
                              gpu->err.msg);
                ck_assert_int_eq(laid, device_fill_layout(A) == NULL);
            } else {
                ck_assert_msg(gpu->ops->mat_create(gpu, A, GS_FP64, &ga) == GS_OK, "%s: %s", what,
                              gpu->err.msg);
            }
            ck_assert_msg(strcmp(gs_cuda_mat_layout(ga), gs_cuda_mat_layout(plain)) == 0,
                          "%s: layout %s, plain %s", what, gs_cuda_mat_layout(ga),
                          gs_cuda_mat_layout(plain));
            /* chunk-mapped arrays hold whole chunks: at most one more an array */
            const size_t held = gpu->device_bytes_now - base;
            const size_t cc = chunk_of((size_t)A->nnz * 4, g), cv = chunk_of((size_t)A->nnz * 8, g);
            const size_t sc = chunk_of(plain_bytes / 3, g), sv = chunk_of(plain_bytes * 2 / 3, g);
            ck_assert_msg(held >= plain_bytes && held <= plain_bytes + 2 * (cc > sc ? cc : sc) +
                                                            2 * (cv > sv ? cv : sv),
                          "%s: holds %zu bytes, the plain build %zu", what, held, plain_bytes);
            if (is_sell && high_peak) /* built whole, from the chunk-mapped CSR, freed */
                ck_assert_uint_eq(held, plain_bytes);
            if (high_peak) gpu->device_bytes_peak = gpu->device_bytes_now;
            if (is_sell && !high_peak && csr_bytes >= 8 * g) { /* the build's peak (the checks below allocate) */
                /* step j holds the CSR not yet read and the sliced ELL up
                 * to its end: at most the larger layout (row pointers
                 * kept), two steps and a chunk an array */
                const size_t peak = gpu->device_bytes_peak - base, rp = ((size_t)n + 1) * 8;
                const size_t larger = csr_bytes > plain_bytes + rp ? csr_bytes : plain_bytes + rp;
                const size_t bound = larger + 2 * plain_bytes / STEPS + (cc + cv + sc + sv) +
                                     (size_t)n * 4 + 2 * ((size_t)ns + 1) * 8 + ((size_t)1 << 20);
                ck_assert_msg(peak <= bound && peak < plain_peak && (t > 0 || bound < plain_peak),
                              "%s (variant %d): peak %zu, bound %zu, plain build's peak %zu", what,
                              variant, peak, bound, plain_peak);
            }
            double *y = gpu_product(ga, x, n, A->n_cols);
            ck_assert_msg(memcmp(y, y_plain, (size_t)n * sizeof(double)) == 0,
                          "%s (variant %d): product differs from the plain build's", what, variant);
            free(y);
            gs_csr B = {0};
            gs_error err = {0};
            int owned = -2;
            ck_assert_int_eq(gs_csr_alloc(A->n_rows, A->n_cols, A->nnz, 1, &B, &err), GS_OK);
            ck_assert_int_eq(gs_cuda_mat_device_csr_download(gpu, ga, &B, &owned), GS_OK);
            tu_assert_same_csr(A, &B, what);
            gs_csr_free(&B);
            no_error(gpu);
            gpu->ops->mat_destroy(gpu, ga);
            ck_assert_uint_eq(gpu->device_bytes_now, base);
        }
        gpu->ops->mat_destroy(gpu, plain);
        free(x), free(y_plain);
        gs_csr_free(&As[t]);
    }
    ck_assert(sell_seen);
    gs_cuda_set_stepped_layout(gpu, (size_t)64 << 20, 0);
    engines_down();
}
END_TEST

#endif

/* --------------------------------------------------------------- errors */

START_TEST(test_errors_and_accounting)
{
    engines_up();
    const size_t base = gpu->device_bytes_now;
    gs_vec *v = NULL, *w = NULL;
    ck_assert_int_eq(gpu->ops->vec_create(gpu, 1000, &v), GS_OK);
    ck_assert_uint_eq(gpu->device_bytes_now, base + 8000);
    ck_assert_int_eq(gpu->ops->vec_create(gpu, 999, &w), GS_OK);
    /* misuse is reported, not run */
    ck_assert_int_eq(gpu->ops->dot(gpu, v, w, 0), GS_ERR_INTERNAL);
    gs_error_clear(&gpu->err);
    ck_assert_int_eq(gpu->ops->dot(gpu, v, v, GS_MAX_SCALARS), GS_ERR_INTERNAL);
    gs_error_clear(&gpu->err);
    ck_assert_int_eq(gpu->ops->axpby(gpu, gs_coef_slot(1, GS_MAX_SCALARS), v, gs_coef_const(0), v), GS_ERR_INTERNAL);
    gs_error_clear(&gpu->err);
    gpu->ops->vec_destroy(gpu, w);
    /* an impossible allocation: NOMEM naming what and how much; the engine
     * stays usable */
    gs_vec *huge = NULL;
    ck_assert_int_eq(gpu->ops->vec_create(gpu, (int64_t)1 << 45, &huge), GS_ERR_NOMEM);
    ck_assert_ptr_null(huge);
    ck_assert_msg(strstr(gpu->err.msg, "bytes") && strstr(gpu->err.msg, "vector"), "%s", gpu->err.msg);
    gs_error_clear(&gpu->err);
    ck_assert_int_eq(gpu->ops->set(gpu, v, 1.0), GS_OK);
    ck_assert_int_eq(gpu->ops->dot(gpu, v, v, 0), GS_OK);
    ck_assert(slot_get(gpu, 0) == 1000.0);
    no_error(gpu);
    gpu->ops->vec_destroy(gpu, v);
    ck_assert_uint_eq(gpu->device_bytes_now, base);
    ck_assert_uint_ge(gpu->device_bytes_peak, base + 8000 + 7992);
    engines_down();
}
END_TEST

#if GS_HAVE_CUDA
/* A teardown call that fails (here a free of an address the device never
 * gave) is kept, not dropped: the engine works on and its error record
 * stays clean, and gs_engine_release returns the failure naming the call;
 * a clean engine releases with GS_OK. */
START_TEST(test_teardown_failure_reported)
{
    gs_error err = {0};
    gs_engine *e = NULL, *clean = NULL;
    gs_vec *v = NULL;
    ck_assert_int_eq(gs_engine_cuda_create(&e, &err), GS_OK);
    ck_assert_int_eq(gs_engine_cuda_create(&clean, &err), GS_OK);
    gs_cuda_free_foreign_for_test(e);
    ck_assert_int_eq(e->err.status, GS_OK);
    ck_assert_int_eq(e->ops->vec_create(e, 100, &v), GS_OK);
    ck_assert_int_eq(e->ops->set(e, v, 2.0), GS_OK);
    ck_assert_int_eq(e->ops->dot(e, v, v, 0), GS_OK);
    ck_assert(slot_get(e, 0) == 400.0);
    e->ops->vec_destroy(e, v);
    const int status = gs_engine_release(e, &err);
    ck_assert_int_eq(status, GS_ERR_CUDA);
    ck_assert_int_eq(err.status, GS_ERR_CUDA);
    ck_assert_msg(strstr(err.msg, "cudaFreeAsync") != NULL, "%s", err.msg);
    gs_error none = {0};
    ck_assert_int_eq(gs_engine_release(clean, &none), GS_OK);
    ck_assert_int_eq(none.status, GS_OK);
    ck_assert_int_eq(gs_engine_release(NULL, &none), GS_OK);
}
END_TEST
#endif

static Suite *cuda_engine_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_engine");
    TCase *tc = tcase_create("cuda_engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_device_or_clean_refusal);
    if (have_gpu) {
        tcase_add_test(tc, test_set_copy);
        tcase_add_test(tc, test_axpby_axpbypcz);
        tcase_add_test(tc, test_dots);
        tcase_add_test(tc, test_axpy2_dot);
        tcase_add_test(tc, test_mdot_maxpy);
        tcase_add_test(tc, test_scalars);
        tcase_add_test(tc, test_spmv_random);
        tcase_add_test(tc, test_spmv_device_fill);
        tcase_add_test(tc, test_spmv_forced_layouts);
        tcase_add_test(tc, test_spmv_rectangular_and_empty);
        tcase_add_test(tc, test_spmv_poisson);
        tcase_add_test(tc, test_deterministic);
        tcase_add_test(tc, test_trisolve);
        tcase_add_test(tc, test_trisolve_errors);
        tcase_add_test(tc, test_capture_replay);
        tcase_add_test(tc, test_jacobi_device_setup);
#if GS_HAVE_CUDA
        tcase_add_test(tc, test_device_csr);
        tcase_add_test(tc, test_system_matrix);
        tcase_add_test(tc, test_stepped_layout);
#endif
        tcase_add_test(tc, test_errors_and_accounting);
#if GS_HAVE_CUDA
        tcase_add_test(tc, test_teardown_failure_reported);
#endif
    }
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it, and
 * the device count below does touch it: run the tests in this process. */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    if (!have_gpu) printf("check_cuda_engine: skipped: no CUDA device\n");
    SRunner *sr = srunner_create(cuda_engine_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
