/* check_cuda_ssorai.c - ssor-ai's CUDA setup (cuda/precond/ssorai.cu) against the CPU
 * reference (src/precond/pc_ssorai.c, the oracle): F's pattern exactly, its values, the
 * apply z = F^T (F r), CG iterations, and bad input (same status and message). Without
 * a CUDA device the suite says "skipped" and passes. The device heap is filled with NaN
 * before every setup and every output vector before every apply, so that memory a
 * kernel forgets to write shows. Sizes: below and above one block of rows (256), below
 * and above the toolkit's one-block scan (GS_DSCAN_SMALL = 16384 rows), rows longer
 * than a warp (random SPD with half-dense rows), real SPD matrices; A read from the
 * engine's sliced ELL (mat_create) and from its CSR kept for the setup
 * (mat_create_system).
 *
 * Tolerances (u = 2^-53):
 * - F's pattern (tril(A), or (E + |tril A|)^2): integer work, equal exactly.
 * - F's values: the device evaluates every entry with the reference's operations in
 *   the reference's order, each an IEEE round-to-nearest intrinsic (__dmul_rn,
 *   __ddiv_rn, __dadd_rn, __dsub_rn, __dsqrt_rn), so it is expected bit for bit; the
 *   check allows 2 K u sum|terms| (K = 4 + 2 * longest row of tril(A), the most
 *   operations one entry sees), which is what any reordering could cost, and counts
 *   entries that are not bitwise equal (reported, 0 expected).
 * - the apply: two SpMVs summed in another order (sliced ELL): |z_gpu - z_cpu| <=
 *   2 K u (|F^T| |F| |r|)_i with K = 2 + 2 * longest row of F (Higham 3.5).
 * - CG: iterations within 2 of the CPU's (the residual histories differ by rounding). */
#include <math.h>
#include <string.h>

#include "engine.h"
#include "gen.h"
#include "krylov.h"
#include "precond.h"
#include "testutil.h"

#define U (DBL_EPSILON / 2)

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

typedef struct ssorai_run {
    gs_engine *eng; /* the GPU engine (not owned) or a CPU engine (owned) */
    gs_mat *A;
    gs_pc *pc;
} ssorai_run;

/* ssor-ai on the GPU (A from mat_create, or with system: mat_create_system) or on a
 * fresh CPU engine; status returned, err filled. */
static int ssorai_build(const gs_csr *A, const gs_params *p, int on_gpu, int system,
                        ssorai_run *r, gs_error *err)
{
    memset(r, 0, sizeof *r);
    int status = GS_OK;
    if (on_gpu) {
        r->eng = gpu;
        poison_device_heap();
    } else {
        status = gs_engine_cpu_create(&r->eng, err);
    }
    if (status == GS_OK && on_gpu && system)
        status = r->eng->ops->mat_create_system(r->eng, A, &r->A);
    else if (status == GS_OK)
        status = r->eng->ops->mat_create(r->eng, A, GS_FP64, &r->A);
    if (status == GS_OK)
        status = gs_pc_create(gs_pc_find("ssor-ai"), r->eng, p, A, r->A, &r->pc, err);
    if (status != GS_OK && r->eng) gs_engine_fail(r->eng, err);
    return status;
}

static void ssorai_release(ssorai_run *r)
{
    gs_pc_destroy(r->pc);
    if (r->eng) r->eng->ops->mat_destroy(r->eng, r->A);
    if (r->eng && r->eng != gpu) gs_engine_destroy(r->eng);
    if (r->eng == gpu) gs_error_clear(&gpu->err);
    memset(r, 0, sizeof *r);
}

/* z = M r on the run's engine, z poisoned first. */
static void run_apply(ssorai_run *r, const double *rhs, double *z, int32_t n)
{
    gs_vec *vr = NULL, *vz = NULL;
    const gs_engine_ops *o = r->eng->ops;
    ck_assert(o->vec_create(r->eng, n, &vr) == GS_OK && o->vec_create(r->eng, n, &vz) == GS_OK);
    ck_assert(o->vec_upload(r->eng, vr, rhs) == GS_OK);
    ck_assert(o->set(r->eng, vz, NAN) == GS_OK);
    ck_assert_msg(gs_pc_apply_dot(r->pc, vr, vz, GS_SLOT_NONE) == GS_OK, "%s", r->eng->err.msg);
    ck_assert_msg(o->vec_download(r->eng, vz, z) == GS_OK, "%s", r->eng->err.msg);
    o->vec_destroy(r->eng, vr);
    o->vec_destroy(r->eng, vz);
}

/* F on the GPU against F on the CPU (pattern exact, values as the header says), then
 * the applies. */
static void against_reference(const gs_csr *A, const char *omega, const char *terms,
                              int system, const char *what)
{
    const char *kv[] = {"omega", omega, "ssor-terms", terms, NULL};
    gs_params p = tu_params(kv);
    ssorai_run rc, rg;
    gs_error err = {0};
    ck_assert_msg(ssorai_build(A, &p, 0, 0, &rc, &err) == GS_OK, "%s cpu: %s", what, err.msg);
    ck_assert_msg(ssorai_build(A, &p, 1, system, &rg, &err) == GS_OK, "%s gpu: %s", what,
                  err.msg);
    ck_assert_msg(tu_pc_extra(rg.pc, "setup") == NULL, "%s: the gpu setup fell back to the host",
                  what);
    const char *stages[] = {"csr of A", "factor G", "transpose", "layout", NULL};
    ck_assert_int_ge(rg.pc->stages.count, 4);
    for (int s = 0; s < 4; s++) ck_assert_str_eq(rg.pc->stages.stage[s].name, stages[s]);
    gs_csr Fc = {0}, Fg = {0};
    tu_pc_saved_matrix(rc.pc, "F", &Fc);
    tu_pc_saved_matrix(rg.pc, "F", &Fg);
    ck_assert_int_eq(rg.pc->nnz, rc.pc->nnz);
    ck_assert_msg(Fg.nnz == Fc.nnz, "%s: nnz(F) %lld, want %lld", what, (long long)Fg.nnz,
                  (long long)Fc.nnz);
    for (int32_t i = 0; i <= A->n_rows; i++)
        ck_assert_msg(Fg.row_ptr[i] == Fc.row_ptr[i], "%s: row_ptr[%d]", what, i);
    const double K = 4 + 2 * tu_max_row_length(A);
    int64_t not_bitwise = 0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        double row_scale = 0;
        for (int64_t q = Fc.row_ptr[i]; q < Fc.row_ptr[i + 1]; q++)
            row_scale += fabs(Fc.val[q]); /* >= sum |terms| up to the diagonal's factor */
        for (int64_t q = Fc.row_ptr[i]; q < Fc.row_ptr[i + 1]; q++) {
            ck_assert_msg(Fg.col[q] == Fc.col[q], "%s: row %d, entry %lld: column %d, want %d",
                          what, i + 1, (long long)q, Fg.col[q] + 1, Fc.col[q] + 1);
            ck_assert_msg(fabs(Fg.val[q] - Fc.val[q]) <= 2 * K * U * row_scale,
                          "%s: f_%d,%d = %.17g, want %.17g", what, i + 1, Fc.col[q] + 1,
                          Fg.val[q], Fc.val[q]);
            not_bitwise += memcmp(&Fg.val[q], &Fc.val[q], sizeof(double)) != 0;
        }
    }
    if (not_bitwise) printf("%s: %lld entries of F not bitwise equal\n", what, (long long)not_bitwise);
    const int32_t n = A->n_rows;
    double *r = malloc((size_t)n * sizeof *r), *zc = malloc((size_t)n * sizeof *zc);
    double *zg = malloc((size_t)n * sizeof *zg), *t = calloc((size_t)n, sizeof *t);
    double *w = calloc((size_t)n, sizeof *w);
    ck_assert(r && zc && zg && t && w);
    tu_rng g = tu_rng_seed(4242 + (uint64_t)n);
    for (int32_t i = 0; i < n; i++) r[i] = tu_uniform(&g) - 0.5;
    run_apply(&rc, r, zc, n);
    run_apply(&rg, r, zg, n);
    for (int32_t i = 0; i < n; i++) /* t = |F| |r|, w = |F^T| t */
        for (int64_t q = Fc.row_ptr[i]; q < Fc.row_ptr[i + 1]; q++) t[i] += fabs(Fc.val[q] * r[Fc.col[q]]);
    for (int32_t i = 0; i < n; i++)
        for (int64_t q = Fc.row_ptr[i]; q < Fc.row_ptr[i + 1]; q++) w[Fc.col[q]] += fabs(Fc.val[q]) * t[i];
    const double Ka = 2 + 2 * tu_max_row_length(&Fc);
    for (int32_t i = 0; i < n; i++)
        ck_assert_msg(fabs(zg[i] - zc[i]) <= 2 * Ka * U * w[i], "%s: z_%d = %.17g, want %.17g",
                      what, i + 1, zg[i], zc[i]);
    free(r), free(zc), free(zg), free(t), free(w);
    gs_csr_free(&Fc), gs_csr_free(&Fg);
    ssorai_release(&rc);
    ssorai_release(&rg);
}

START_TEST(test_device_or_skip)
{
    if (gs_cuda_device_count() == 0) {
        printf("check_cuda_ssorai: skipped: no CUDA device\n");
        return;
    }
    ck_assert_ptr_nonnull(gs_pc_find("ssor-ai")->setup[GS_ENGINE_CUDA]);
}
END_TEST

/* 216 rows (one partial block), 8000 (one-block scan), 27000 (cub's scan). */
START_TEST(test_generated)
{
    const char *specs[] = {"poisson3d:6", "poisson3d:20", "poisson3d:30", "aniso3d:12", NULL};
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        against_reference(&A, "1", "1", 0, specs[s]);
        against_reference(&A, "1.6", "2", 1, specs[s]);
        against_reference(&A, "0.3", "1", 1, specs[s]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Rows longer than a warp and than a block's worth of columns. */
START_TEST(test_long_rows)
{
    tu_rng g = tu_rng_seed(99);
    gs_csr A = tu_random_spd(&g, 700, 0.05);
    ck_assert_int_gt(tu_max_row_length(&A), 300);
    against_reference(&A, "1", "1", 0, "random SPD 700");
    against_reference(&A, "1.2", "2", 1, "random SPD 700");
    gs_csr_free(&A);
}
END_TEST

START_TEST(test_real)
{
    const char *names[] = {"nos3", "bcsstk08", "1138_bus", "s3rmt3m3", NULL};
    for (int m = 0; names[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        against_reference(&A, "1", "1", 0, names[m]);
        against_reference(&A, "1.4", "2", 1, names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

START_TEST(test_cg_iterations)
{
    const char *specs[] = {"poisson3d:24", "aniso3d:12", NULL};
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        const int32_t n = A.n_rows;
        long its[2] = {0, 0};
        for (int on_gpu = 0; on_gpu < 2; on_gpu++) {
            ssorai_run r;
            gs_error err = {0};
            gs_params none = {0};
            ck_assert_msg(ssorai_build(&A, &none, on_gpu, on_gpu, &r, &err) == GS_OK, "%s",
                          err.msg);
            double *ones = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
            ck_assert(ones && b);
            for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
            gs_csr_spmv(&A, ones, b);
            gs_vec *vb = NULL, *vx = NULL;
            gs_krylov_opts opts = {.tol = 1e-8, .maxit = 2000, .restart = 30, .idr_s = 4,
                                   .check_every = 1};
            gs_krylov_result res;
            memset(&res, 0, sizeof res);
            ck_assert(r.eng->ops->vec_create(r.eng, n, &vb) == GS_OK);
            ck_assert(r.eng->ops->vec_create(r.eng, n, &vx) == GS_OK);
            ck_assert(r.eng->ops->vec_upload(r.eng, vb, b) == GS_OK);
            ck_assert(r.eng->ops->set(r.eng, vx, 0.0) == GS_OK);
            ck_assert(gs_method_find("cg")->solve(r.eng, r.A, r.pc, vb, vx, &opts, &res) == GS_OK);
            ck_assert(res.reason == GS_REASON_CONVERGED);
            its[on_gpu] = res.iterations;
            gs_krylov_result_free(&res);
            r.eng->ops->vec_destroy(r.eng, vb);
            r.eng->ops->vec_destroy(r.eng, vx);
            free(ones), free(b);
            ssorai_release(&r);
        }
        ck_assert_msg(labs(its[1] - its[0]) <= 2, "%s: gpu %ld iterations, cpu %ld", specs[s],
                      its[1], its[0]);
        gs_csr_free(&A);
    }
}
END_TEST

/* The GPU's failure: the same status and message as the CPU's. */
static void expect_same_failure(const gs_csr *A, const char *fragment)
{
    gs_params none = {0};
    ssorai_run rc, rg;
    gs_error ec = {0}, eg = {0};
    const int sc = ssorai_build(A, &none, 0, 0, &rc, &ec);
    const int sg = ssorai_build(A, &none, 1, 1, &rg, &eg);
    ssorai_release(&rc);
    ssorai_release(&rg);
    ck_assert_msg(sc != GS_OK && sc == sg, "status cpu %d, gpu %d", sc, sg);
    ck_assert_str_eq(eg.msg, ec.msg);
    ck_assert_msg(strstr(ec.msg, fragment), "'%s' lacks '%s'", ec.msg, fragment);
}

START_TEST(test_bad_input)
{
    gs_csr A = tu_generated("poisson3d:8");
    A.val[gs_csr_find(&A, 300, 301)] = -0.5;
    expect_same_failure(&A, "needs a symmetric matrix");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:8");
    A.val[gs_csr_find(&A, 410, 410)] = 0;
    expect_same_failure(&A, "row 411 has diagonal entry 0");
    A.val[gs_csr_find(&A, 410, 410)] = -1;
    expect_same_failure(&A, "row 411 has diagonal entry -1");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:6");
    A.val[gs_csr_find(&A, 40, 41)] = NAN;
    A.val[gs_csr_find(&A, 41, 40)] = NAN;
    expect_same_failure(&A, "not finite");
    gs_csr_free(&A);
}
END_TEST

/* No fp64 copy of A on the engine (pc->A NULL): the reference setup runs, its F is
 * uploaded, and the report says setup=host. */
START_TEST(test_host_fallback)
{
    gs_csr A = tu_generated("poisson3d:10");
    gs_params none = {0};
    gs_pc *pc = NULL;
    gs_error err = {0};
    poison_device_heap();
    ck_assert_msg(gs_pc_create(gs_pc_find("ssor-ai"), gpu, &none, &A, NULL, &pc, &err) == GS_OK,
                  "%s", err.msg);
    const gs_kv *kv = tu_pc_extra(pc, "setup");
    ck_assert_msg(kv && strcmp(kv->str, "host") == 0, "setup=host not reported");
    ssorai_run rg = {gpu, NULL, pc}, rc;
    ck_assert(ssorai_build(&A, &none, 0, 0, &rc, &err) == GS_OK);
    const int32_t n = A.n_rows;
    double *r = malloc((size_t)n * sizeof *r), *zg = malloc((size_t)n * sizeof *zg);
    double *zc = malloc((size_t)n * sizeof *zc);
    ck_assert(r && zg && zc);
    for (int32_t i = 0; i < n; i++) r[i] = sin(0.1 * i);
    run_apply(&rg, r, zg, n);
    run_apply(&rc, r, zc, n);
    for (int32_t i = 0; i < n; i++) ck_assert(fabs(zg[i] - zc[i]) <= 1e-13 * (1 + fabs(zc[i])));
    free(r), free(zg), free(zc);
    ssorai_release(&rg);
    ssorai_release(&rc);
    gs_csr_free(&A);
}
END_TEST

static Suite *cuda_ssorai_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_ssorai");
    TCase *tc = tcase_create("cuda_ssorai");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_device_or_skip);
    if (have_gpu) {
        tcase_add_test(tc, test_generated);
        tcase_add_test(tc, test_long_rows);
        tcase_add_test(tc, test_real);
        tcase_add_test(tc, test_cg_iterations);
        tcase_add_test(tc, test_bad_input);
        tcase_add_test(tc, test_host_fallback);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    gs_error err = {0};
    if (!have_gpu) printf("check_cuda_ssorai: skipped: no CUDA device\n");
    else if (gs_engine_cuda_create(&gpu, &err) != GS_OK) {
        printf("check_cuda_ssorai: CUDA engine: %s\n", err.msg);
        return 1;
    }
    SRunner *sr = srunner_create(cuda_ssorai_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    gs_engine_destroy(gpu);
    return failed == 0 ? 0 : 1;
}
