/* check_pc_spai.c - SPAI-ME (src/precond/pc_spai.c) by its defining property: every
 * column of M solves min ||A(I,J) m - e_i(I)||_2 with J the thresholded
 * pattern of column i of A (checked against a long-double oracle and by
 * perturbation), plus the Householder least squares (src/sparse/lsq.c) itself,
 * tau's edge cases, fp32 storage, iterations against Jacobi and bad input. */
#include "gen.h"
#include "lsq.h"
#include "testutil.h"

/* ---- inputs ---- */

static gs_params params1(const char *name, const char *value)
{
    gs_params p = {0};
    if (name) gs_params_set(&p, name, value, NULL);
    return p;
}

/* M as spai builds it for A (setup must succeed). */
static gs_csr spai_matrix(const gs_csr *A, const gs_params *p)
{
    return tu_pc_saved_factor(A, "spai", p, "M", NULL);
}

/* The test's own J for column i: {j : |a_ji| > (1 - tau) max_j |a_ji|} ∪ {i}. */
static int expected_pattern(const gs_csr *A, int i, double tau, unsigned char *in)
{
    double amax = 0;
    int count = 0;
    for (int j = 0; j < A->n_rows; j++) {
        int64_t p = gs_csr_find(A, j, i);
        if (p >= 0 && fabs(A->val[p]) > amax) amax = fabs(A->val[p]);
    }
    for (int j = 0; j < A->n_rows; j++) {
        int64_t p = gs_csr_find(A, j, i);
        in[j] = j == i || (p >= 0 && fabs(A->val[p]) > (1 - tau) * amax);
        count += in[j];
    }
    return count;
}

/* The stored pattern of every column of M is exactly the expected J. */
static void assert_spai_pattern(const gs_csr *A, const gs_csr *M, double tau)
{
    const int n = A->n_rows;
    unsigned char *in = malloc((size_t)n);
    ck_assert_ptr_nonnull(in);
    for (int i = 0; i < n; i++) {
        int count = expected_pattern(A, i, tau, in), stored = 0;
        for (int j = 0; j < n; j++) {
            int s = gs_csr_find(M, j, i) >= 0;
            ck_assert_msg(s == in[j], "tau %g: column %d of M: row %d %s", tau, i + 1, j + 1,
                          s ? "stored but not in J" : "in J but not stored");
            stored += s;
        }
        ck_assert_int_eq(stored, count);
    }
    free(in);
}

/* Pattern and least-squares property of spai on A with this tau. */
static void check_spai_on(const gs_csr *A, double tau, int check_minimal, const char *what)
{
    char text[32];
    snprintf(text, sizeof text, "%.17g", tau);
    gs_params p = params1("tau", text);
    gs_csr M = spai_matrix(A, &p);
    assert_spai_pattern(A, &M, tau);
    tu_spai_report rep = tu_check_spai_columns(A, &M, check_minimal);
    char label[200];
    snprintf(label, sizeof label, "%s tau %g", what, tau);
    tu_assert_spai_report(&rep, label);
    gs_csr_free(&M);
}

/* ---- lsq.c: Householder least squares ---- */

START_TEST(lsq_matches_oracle_on_random_problems)
{
    tu_rng r = tu_rng_seed(11);
    for (int trial = 0; trial < 40; trial++) {
        int n = 1 + (int)(tu_next(&r) % 40), m = n + (int)(tu_next(&r) % 41);
        double *A = malloc((size_t)m * n * sizeof *A), *W = malloc((size_t)m * n * sizeof *W);
        double *b = malloc((size_t)m * sizeof *b), *c = malloc((size_t)m * sizeof *c);
        double *x = malloc((size_t)n * sizeof *x), *xr = malloc((size_t)n * sizeof *xr);
        for (int k = 0; k < m * n; k++) A[k] = tu_rand_signed(&r, 0, 1) * (tu_uniform(&r) < 0.5);
        for (int j = 0; j < n; j++) A[(size_t)j * m + j] += 3; /* full rank */
        for (int k = 0; k < m; k++) b[k] = tu_rand_signed(&r, 0, 1);
        memcpy(W, A, (size_t)m * n * sizeof *A);
        memcpy(c, b, (size_t)m * sizeof *b);
        ck_assert_int_eq(gs_lsq_solve(m, n, W, c, x), 0);
        double kappa, tan_theta;
        ck_assert(tu_lsq_reference(m, n, A, b, xr, &kappa, &tan_theta));
        double d = 0, s = 0;
        for (int j = 0; j < n; j++) d += (x[j] - xr[j]) * (x[j] - xr[j]), s += xr[j] * xr[j];
        ck_assert_msg(sqrt(d) <= tu_lsq_tolerance(m, n, kappa, tan_theta) * sqrt(s),
                      "trial %d (%d x %d): error %g", trial, m, n, sqrt(d / s));
        free(A), free(W), free(b), free(c), free(x), free(xr);
    }
}
END_TEST

START_TEST(lsq_reports_the_first_dependent_column)
{
    /* 5 x 4, columns 0, 1 independent, column 2 = 0, column 3 = 2 c1 - c0
     * (small integers: the dependence is exact). */
    double A[20] = {1, 2, 0, 1, 3, /**/ 0, 1, 1, 4, 1, /**/ 0, 0, 0, 0, 0, /**/ -1, 0, 2, 7, -1};
    double B[20], b[5] = {1, 0, 0, 0, 0}, x[4] = {0};
    memcpy(B, A, sizeof A);
    ck_assert_int_eq(gs_lsq_solve(5, 4, B, b, x), 1 + 2);    /* the zero column */
    double C[15] = {1, 2, 0, 1, 3, /**/ 0, 1, 1, 4, 1, /**/ -1, 0, 2, 7, -1};
    double c[5] = {1, 0, 0, 0, 0};
    ck_assert_int_eq(gs_lsq_solve(5, 3, C, c, x), 1 + 2);    /* 2 c1 - c0 */
    double D[6] = {1, 2, 3, 4, 5, 7}, d[2] = {1, 0};
    ck_assert_int_eq(gs_lsq_solve(2, 3, D, d, x), 1 + 2);    /* 3 unknowns, 2 rows */
    ck_assert_int_eq(gs_lsq_solve(0, 1, D, d, x), 1);        /* no rows at all */
    double E[4] = {2, 0, 0, 1e-300}, e[2] = {1, 1};          /* tiny but independent */
    ck_assert_int_eq(gs_lsq_solve(2, 2, E, e, x), 0);
    ck_assert(fabs(x[1] - 1e300) <= 1e285);
}
END_TEST

/* ---- the defining property ---- */

START_TEST(spai_columns_are_local_least_squares_solutions)
{
    tu_rng r = tu_rng_seed(21);
    const double taus[] = {0.2, 0.5, 0.7, 0.9, 1.0};
    for (int t = 0; t < 5; t++)
        for (int rep = 0; rep < 2; rep++) {
            gs_csr A = tu_random_matrix(&r, 40 + (int)(tu_next(&r) % 50), 3);
            check_spai_on(&A, taus[t], 0, "random");
            gs_csr_free(&A);
        }
}
END_TEST

START_TEST(spai_columns_are_minimal_on_their_pattern)
{
    tu_rng r = tu_rng_seed(22);
    for (int rep = 0; rep < 3; rep++) {
        gs_csr A = tu_random_matrix(&r, 50, 3);
        check_spai_on(&A, 0.9, 1, "random");
        gs_csr_free(&A);
    }
    char name[64];
    gs_csr A = tu_generated_named("convdiff3d:5", name, sizeof name);
    check_spai_on(&A, 0.9, 1, name);
    gs_csr_free(&A);
}
END_TEST

/* Small real nonsymmetric matrices, with the paper's two tau values. */
START_TEST(spai_property_on_real_matrices)
{
    const char *names[] = {"pores_1", "cage5", "fs_183_1", "arc130", "steam1"};
    for (int k = 0; k < 5; k++) {
        gs_csr A;
        if (!tu_real_matrix(names[k], &A)) return;
        check_spai_on(&A, 0.7, 0, names[k]);
        check_spai_on(&A, 0.9, 0, names[k]);
        gs_csr_free(&A);
    }
}
END_TEST

/* tau = 0: J = {i} (strict inequality, as in the paper's eq. (1)), so M is
 * diagonal with m_ii = a_ii / ||A(:,i)||^2. tau = 1: every stored nonzero of
 * the column. Ties: entries equal to the maximum enter for any tau > 0. */
START_TEST(spai_tau_edge_cases)
{
    tu_rng r = tu_rng_seed(23);
    gs_csr A = tu_random_matrix(&r, 60, 3);
    gs_params p0 = params1("tau", "0");
    gs_csr M = spai_matrix(&A, &p0);
    ck_assert_int_eq(M.nnz, A.n_rows);
    for (int i = 0; i < A.n_rows; i++) {
        double aii = A.val[gs_csr_find(&A, i, i)], norm2 = 0;
        for (int j = 0; j < A.n_rows; j++) {
            int64_t p = gs_csr_find(&A, j, i);
            if (p >= 0) norm2 += A.val[p] * A.val[p];
        }
        int64_t q = gs_csr_find(&M, i, i);
        ck_assert(q >= 0);
        /* one column: a 1-column QR, relative error a few ulps (m u bound) */
        ck_assert(fabs(M.val[q] - aii / norm2) <= 1e-14 * fabs(aii / norm2));
    }
    gs_csr_free(&M);
    check_spai_on(&A, 1.0, 0, "random");
    gs_csr_free(&A);

    /* column 0 = (1, -4, 4, 2)^T: two entries tie at the maximum 4. */
    int32_t ri[] = {0, 1, 2, 3, 0, 1, 2, 3}, ci[] = {0, 0, 0, 0, 1, 1, 2, 3};
    double v[] = {1, -4, 4, 2, 1, 5, 6, 7};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(4, 4, 8, ri, ci, v, &A, &err) == GS_OK);
    gs_params tiny = params1("tau", "1e-12");
    M = spai_matrix(&A, &tiny);
    ck_assert(gs_csr_find(&M, 0, 0) >= 0 && gs_csr_find(&M, 1, 0) >= 0 &&
              gs_csr_find(&M, 2, 0) >= 0 && gs_csr_find(&M, 3, 0) < 0);
    gs_csr_free(&M);
    M = spai_matrix(&A, &p0);
    ck_assert(gs_csr_find(&M, 1, 0) < 0 && gs_csr_find(&M, 2, 0) < 0);
    gs_csr_free(&M);
    gs_csr_free(&A);
}
END_TEST

/* fp32 storage: each stored value is the fp64 one rounded once, so
 * |m32 - m64| <= 2^-24 |m64| exactly (round to nearest), on the same
 * pattern; the apply multiplies by those values. */
START_TEST(spai_single_precision_storage)
{
    tu_rng r = tu_rng_seed(24);
    gs_csr A = tu_random_matrix(&r, 70, 3);
    gs_params p64 = params1(NULL, NULL);
    gs_params p32 = params1("precond-precision", "single");
    gs_csr M64 = spai_matrix(&A, &p64);
    tu_pc_run run;
    tu_pc_build_ok(&A, "spai", &p32, &run);
    gs_csr M32 = {0};
    tu_pc_saved_matrix(run.pc, "M", &M32);
    ck_assert_int_eq(M32.nnz, M64.nnz);
    for (int64_t k = 0; k < M64.nnz; k++) {
        ck_assert_int_eq(M32.col[k], M64.col[k]);
        ck_assert(fabs(M32.val[k] - M64.val[k]) <= ldexp(fabs(M64.val[k]), -24));
        ck_assert(M32.val[k] == (double)(float)M32.val[k]);
    }
    /* z = M32 r through the engine, against the host product */
    const int n = A.n_rows;
    double *x = malloc(n * sizeof *x), *z = malloc(n * sizeof *z), *zh = malloc(n * sizeof *zh);
    for (int i = 0; i < n; i++) x[i] = tu_rand_signed(&r, 0, 1);
    gs_vec *vr = NULL, *vz = NULL;
    gs_engine *e = run.eng;
    ck_assert(e->ops->vec_create(e, n, &vr) == GS_OK && e->ops->vec_create(e, n, &vz) == GS_OK);
    ck_assert(e->ops->vec_upload(e, vr, x) == GS_OK);
    ck_assert(gs_pc_apply_dot(run.pc, vr, vz, GS_SLOT_NONE) == GS_OK);
    ck_assert(e->ops->vec_download(e, vz, z) == GS_OK);
    gs_csr_spmv(&M32, x, zh);
    for (int i = 0; i < n; i++) /* same products, maybe another summation order */
        ck_assert(fabs(z[i] - zh[i]) <= 1e-13 * (1 + fabs(zh[i])));
    ck_assert(strstr(run.pc->description, "single") != NULL);
    e->ops->vec_destroy(e, vr), e->ops->vec_destroy(e, vz);
    free(x), free(z), free(zh);
    tu_pc_release(&run);
    gs_csr_free(&M32), gs_csr_free(&M64), gs_csr_free(&A);
}
END_TEST

START_TEST(spai_reports_what_it_built)
{
    tu_rng r = tu_rng_seed(25);
    gs_csr A = tu_random_matrix(&r, 50, 3);
    tu_pc_run run;
    gs_params p = params1(NULL, NULL);
    tu_pc_build_ok(&A, "spai", &p, &run);
    ck_assert(strstr(run.pc->description, "tau=0.9") != NULL); /* the documented default */
    ck_assert(tu_pc_extra(run.pc, "n1max") && tu_pc_extra(run.pc, "n2max") &&
              tu_pc_extra(run.pc, "n2avg"));
    const char *stages[] = {"pattern", "least squares", "assemble", "upload", NULL};
    tu_assert_stages(run.pc, stages);
    ck_assert(run.pc->apply_bytes > 0 && !run.pc->symmetric);
    tu_pc_release(&run);
    gs_csr_free(&A);
}
END_TEST

/* ---- convergence: fewer BiCGSTAB iterations than Jacobi ----
 * On the nonsymmetric test matrices where both converge and SPAI-ME's
 * default pattern helps. Not here: pores_1 (tau = 0.9 drops the small but
 * significant entries of its badly scaled columns, and SPAI-ME then needs
 * more iterations than Jacobi) and fs_541_1 (both take a handful). */
START_TEST(spai_needs_fewer_iterations_than_jacobi)
{
    const char *names[] = {"orsirr_1", "sherman5", "add20", NULL};
    tu_assert_fewer_than_jacobi_on("convdiff3d:10", names, "spai", "bicgstab");
}
END_TEST

/* ---- zero diagonal and bad input ---- */

/* [[0, B], [B^T, 0]] with B diagonally dominant: every diagonal entry is
 * zero, yet for tau > 0 J holds the large entry of each column and row i
 * meets A(:,J), so SPAI works; for tau = 0, J = {i} and column i of M would
 * be zero: refused, naming column 1. */
static gs_csr zero_diagonal_matrix(tu_rng *r, int h)
{
    int32_t ri[4096], ci[4096];
    double v[4096];
    int64_t nz = 0;
    for (int i = 0; i < h; i++)
        for (int j = 0; j < h; j++)
            if (i == j || tu_uniform(r) < 0.1) {
                double b = i == j ? tu_rand_signed(r, 4, 5) : tu_rand_signed(r, 0.1, 0.5);
                ri[nz] = i, ci[nz] = h + j, v[nz++] = b;       /* B(i,j)   */
                ri[nz] = h + j, ci[nz] = i, v[nz++] = b;       /* B^T(j,i) */
            }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(2 * h, 2 * h, nz, ri, ci, v, &A, &err) == GS_OK);
    return A;
}

START_TEST(spai_zero_diagonal)
{
    tu_rng r = tu_rng_seed(26);
    gs_csr A = zero_diagonal_matrix(&r, 30);
    check_spai_on(&A, 0.9, 0, "zero diagonal");
    gs_krylov_result res;
    gs_error err = {0};
    gs_params none = params1(NULL, NULL);
    ck_assert(tu_pc_solve(&A, "spai", &none, "bicgstab", 1000, &res, &err) == GS_OK);
    ck_assert(res.reason == GS_REASON_CONVERGED);
    gs_krylov_result_free(&res);

    gs_params p0 = params1("tau", "0");
    tu_pc_expect_failure(&A, "spai", &p0, GS_ERR_NUMERIC, "column 1 of M would be zero", NULL);
    gs_csr_free(&A);
}
END_TEST

START_TEST(spai_rejects_bad_input)
{
    gs_params none = params1(NULL, NULL);
    /* non-square */
    const int32_t ri[] = {0, 1, 2, 0}, ci[] = {0, 1, 2, 3};
    const double v[] = {1, 2, 3, 4};
    gs_csr A = tu_from_triplets(3, 4, 4, ri, ci, v);
    tu_pc_expect_failure(&A, "spai", &none, GS_ERR_INPUT, "3 x 4, not square", NULL);
    gs_csr_free(&A);

    /* a zero column (column 7): A(I,J) rank deficient, A singular */
    tu_rng r = tu_rng_seed(27);
    gs_csr B = tu_random_matrix(&r, 20, 2);
    for (int i = 0; i < 20; i++) {
        int64_t p = gs_csr_find(&B, i, 6);
        if (p >= 0) B.val[p] = 0.0; /* stored zeros: the column is still zero */
    }
    tu_pc_expect_failure(&B, "spai", &none, GS_ERR_NUMERIC,
                         "column 7 of A is zero or linearly dependent", NULL);

    /* columns 3 and 5 equal: found in column 5 of M, the first whose J
     * (tau = 1: the column's pattern) holds both; the later one is named */
    const int32_t r2[] = {0, 2, 3, 1, 0, 4, 0, 2, 3, 1, 0, 2};
    const int32_t c2[] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4};
    const double v2[] = {4, 1, 1, 4, 1, 1, 1, 2, 4, 1, 1, 2};
    gs_csr C = tu_from_triplets(5, 5, 12, r2, c2, v2);
    gs_params t1 = params1("tau", "1");
    tu_pc_expect_failure(&C, "spai", &t1, GS_ERR_NUMERIC, "column 5 of M",
                         "column 5 of A is zero or linearly dependent");
    gs_csr_free(&C);

    /* parameters: bad values, and a parameter of another preconditioner */
    static const tu_bad_param bad[] = {
        {"tau", "1.5", NULL},
        {"tau", "-0.1", NULL},
        {"tau", "abc", NULL},
        {"tau", "nan", NULL},
        {"precond-precision", "half", NULL},
        {"precond-precision", "", NULL},
        {"pattern-power", "2", NULL},
        {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&B, "spai", bad);
    gs_csr_free(&B);
}
END_TEST

/* Every allocation of the setup made to fail in turn (error.h's injector):
 * GS_ERR_NOMEM and a clean unwind (the sanitizer build checks the frees). */
START_TEST(spai_allocation_failures_unwind)
{
    gs_params p = {0};
    tu_assert_allocation_failures("convdiff3d:4", "spai", &p, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_spai");
    TCase *lsq = tu_add_tcase(s, "lsq", 0);
    tcase_add_test(lsq, lsq_matches_oracle_on_random_problems);
    tcase_add_test(lsq, lsq_reports_the_first_dependent_column);
    TCase *prop = tu_add_tcase(s, "property", 120);
    tcase_add_test(prop, spai_columns_are_local_least_squares_solutions);
    tcase_add_test(prop, spai_columns_are_minimal_on_their_pattern);
    tcase_add_test(prop, spai_property_on_real_matrices);
    tcase_add_test(prop, spai_tau_edge_cases);
    tcase_add_test(prop, spai_single_precision_storage);
    tcase_add_test(prop, spai_reports_what_it_built);
    TCase *conv = tu_add_tcase(s, "convergence", 120);
    tcase_add_test(conv, spai_needs_fewer_iterations_than_jacobi);
    tcase_add_test(conv, spai_zero_diagonal);
    TCase *bad = tu_add_tcase(s, "bad input", 0);
    tcase_add_test(bad, spai_rejects_bad_input);
    tcase_add_test(bad, spai_allocation_failures_unwind);
    return tu_run_suite(s);
}
