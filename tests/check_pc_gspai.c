/* check_pc_gspai.c - GSPAI-Opt (src/precond/pc_gspai.c) by its defining property:
 * the pattern of M is exactly (E + |A|)^k and every column of M solves
 * min ||A(I,J) m - e_k(I)||_2 (long-double oracle, perturbation); plus the
 * S1/S2 choice from alpha and beta, iterations against Jacobi, bad input. */
#include "gen.h"
#include "testutil.h"

static gs_params params2(const char *n1, const char *v1, const char *n2, const char *v2)
{
    gs_params p = {0};
    if (n1) gs_params_set(&p, n1, v1, NULL);
    if (n2) gs_params_set(&p, n2, v2, NULL);
    return p;
}

static gs_csr gspai_matrix(const gs_csr *A, const gs_params *p)
{
    return tu_pc_saved_factor(A, "gspai-opt", p, "M", NULL);
}

/* The pattern of (E + |A|)^k by dense boolean products, made here. */
static unsigned char *dense_pattern_power(const gs_csr *A, int k)
{
    const int n = A->n_rows;
    unsigned char *B = calloc((size_t)n * n, 1), *P = calloc((size_t)n * n, 1);
    unsigned char *T = calloc((size_t)n * n, 1);
    ck_assert(B && P && T);
    for (int i = 0; i < n; i++) {
        B[(size_t)i * n + i] = 1;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) B[(size_t)i * n + A->col[p]] = 1;
    }
    memcpy(P, B, (size_t)n * n);
    for (int step = 1; step < k; step++) {                   /* P = P B */
        memset(T, 0, (size_t)n * n);
        for (int i = 0; i < n; i++)
            for (int l = 0; l < n; l++)
                if (P[(size_t)i * n + l])
                    for (int j = 0; j < n; j++) T[(size_t)i * n + j] |= B[(size_t)l * n + j];
        memcpy(P, T, (size_t)n * n);
    }
    free(B), free(T);
    return P;
}

/* Pattern of M is exactly (E + |A|)^k, and the columns are the local
 * least-squares solutions. */
static void check_gspai_on(const gs_csr *A, int k, int check_minimal, const char *what)
{
    char text[8];
    snprintf(text, sizeof text, "%d", k);
    gs_params p = params2("pattern-power", text, NULL, NULL);
    gs_csr M = gspai_matrix(A, &p);
    unsigned char *P = dense_pattern_power(A, k);
    const int n = A->n_rows;
    int64_t count = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int stored = gs_csr_find(&M, i, j) >= 0;
            ck_assert_msg(stored == P[(size_t)i * n + j], "%s k=%d: M(%d,%d) %s", what, k, i + 1,
                          j + 1, stored ? "stored outside (E+|A|)^k" : "missing");
            count += stored;
        }
    ck_assert_int_eq(count, M.nnz);
    tu_spai_report rep = tu_check_spai_columns(A, &M, check_minimal);
    char label[200];
    snprintf(label, sizeof label, "%s k=%d", what, k);
    tu_assert_spai_report(&rep, label);
    free(P);
    gs_csr_free(&M);
}

START_TEST(gspai_columns_are_local_least_squares_solutions)
{
    tu_rng r = tu_rng_seed(31);
    for (int k = 1; k <= 2; k++)
        for (int rep = 0; rep < 4; rep++) {
            gs_csr A = tu_random_matrix(&r, 40 + (int)(tu_next(&r) % 40), 2);
            check_gspai_on(&A, k, 0, "random");
            gs_csr_free(&A);
        }
}
END_TEST

START_TEST(gspai_columns_are_minimal_on_their_pattern)
{
    tu_rng r = tu_rng_seed(32);
    for (int k = 1; k <= 2; k++) {
        gs_csr A = tu_random_matrix(&r, 45, 2);
        check_gspai_on(&A, k, 1, "random");
        gs_csr_free(&A);
    }
    char name[64];
    gs_csr A = tu_generated_named("convdiff3d:4", name, sizeof name);
    check_gspai_on(&A, 1, 1, name);
    check_gspai_on(&A, 2, 1, name);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gspai_property_on_real_matrices)
{
    const char *names[] = {"pores_1", "cage5", "fs_183_1", "arc130", "steam1"};
    for (int m = 0; m < 5; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        check_gspai_on(&A, 1, 0, names[m]);
        check_gspai_on(&A, 2, 0, names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- strategy: alpha, beta from n2max, n2avg (2^(a-1) < x <= 2^a) ---- */

static int log2_ceiling(double x)
{
    int a = 0;
    while (!(x <= pow(2.0, a))) a++;
    ck_assert(a == 0 || pow(2.0, a - 1) < x);
    return a;
}

/* Tridiagonal (n = 64) plus entries in rows 0..d-1 of column 0: n2_0 = d,
 * the other n2_k are 2 or 3, so d sets alpha - beta. */
static gs_csr spread_matrix(int d)
{
    const int n = 64;
    int32_t ri[256], ci[256];
    double v[256];
    int64_t nz = 0;
    for (int i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = i, v[nz++] = 4;
        if (i > 0) ri[nz] = i, ci[nz] = i - 1, v[nz++] = -1;
        if (i + 1 < n) ri[nz] = i, ci[nz] = i + 1, v[nz++] = -1;
    }
    for (int i = 2; i < d; i++) ri[nz] = i, ci[nz] = 0, v[nz++] = 0.5;
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, v, &A, &err) == GS_OK);
    return A;
}

START_TEST(gspai_chooses_the_strategy_from_alpha_and_beta)
{
    const int spreads[] = {3, 8, 16, 64};
    int seen[8] = {0};
    for (int s = 0; s < 4; s++) {
        gs_csr A = spread_matrix(spreads[s]);
        for (int forced = 0; forced < 3; forced++) {
            const char *value = forced == 0 ? "auto" : forced == 1 ? "s1" : "s2";
            gs_params p = params2("strategy", value, NULL, NULL);
            tu_pc_run run;
            gs_error err = {0};
            tu_pc_build_ok(&A, "gspai-opt", &p, &run);
            gs_csr M = {0};
            tu_pc_saved_matrix(run.pc, "M", &M);
            int n2max = 0;
            gs_csr MT = {0};
            ck_assert(gs_csr_transpose(&M, &MT, &err) == GS_OK);
            for (int k = 0; k < MT.n_rows; k++) {
                int n2 = (int)(MT.row_ptr[k + 1] - MT.row_ptr[k]);
                if (n2 > n2max) n2max = n2;
            }
            double n2avg = (double)M.nnz / M.n_rows;
            int alpha = log2_ceiling(n2max), beta = log2_ceiling(n2avg);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "n2max")->num, n2max);
            ck_assert(fabs(tu_pc_extra(run.pc, "n2avg")->num - n2avg) <= 1e-12 * n2avg);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "alpha")->num, alpha);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "beta")->num, beta);
            ck_assert(tu_pc_extra(run.pc, "n1max")->num >= n2max);
            /* paper: alpha = beta -> S1, alpha - beta >= 3 -> S2; between:
             * S1, as measured (docs/gspai-opt.md) */
            const char *want = forced == 1 ? "S1" : forced == 2 ? "S2"
                               : alpha - beta >= 3 ? "S2" : "S1";
            ck_assert_str_eq(tu_pc_extra(run.pc, "strategy")->str, want);
            ck_assert_str_eq(tu_pc_extra(run.pc, "strategy_from")->str,
                             forced ? "forced" : "auto");
            ck_assert(strstr(run.pc->description, want) != NULL);
            seen[alpha - beta < 3 ? alpha - beta : 3] = 1;
            gs_csr_free(&M), gs_csr_free(&MT);
            tu_pc_release(&run);
        }
        gs_csr_free(&A);
    }
    for (int g = 0; g < 4; g++) ck_assert_msg(seen[g], "no case with alpha - beta = %d", g);
}
END_TEST

START_TEST(gspai_reports_its_stages)
{
    gs_csr A = spread_matrix(8);
    tu_pc_run run;
    gs_params p = params2(NULL, NULL, NULL, NULL);
    tu_pc_build_ok(&A, "gspai-opt", &p, &run);
    ck_assert(strstr(run.pc->description, "pattern-power=1") != NULL);
    const char *stages[] = {"pattern", "dimensions", "least squares", "assemble", "upload", NULL};
    tu_assert_stages(run.pc, stages);
    ck_assert(run.pc->apply_bytes > 0 && !run.pc->symmetric);
    tu_pc_release(&run);
    gs_csr_free(&A);
}
END_TEST

/* ---- convergence: fewer BiCGSTAB iterations than Jacobi (pattern of A) ---- */

START_TEST(gspai_needs_fewer_iterations_than_jacobi)
{
    const char *names[] = {"orsirr_1", "sherman5", "pores_1", "fs_541_1", NULL};
    tu_assert_fewer_than_jacobi_on("convdiff3d:10", names, "gspai-opt", "bicgstab");
}
END_TEST

/* ---- zero diagonal and bad input ---- */

/* [[0,0,1],[1,1,0],[0,1,1]] (det 1): with k = 1, J_1 = {1, 2} and row 1
 * meets neither column, so column 1 of M would be zero (refused); with
 * k = 2, J_1 = {1, 2, 3} and M = A^-1 exactly. */
START_TEST(gspai_zero_diagonal)
{
    const int32_t ri[] = {0, 1, 1, 2, 2}, ci[] = {2, 0, 1, 1, 2};
    const double v[] = {1, 1, 1, 1, 1};
    gs_csr A = tu_from_triplets(3, 3, 5, ri, ci, v);
    gs_params k1 = params2(NULL, NULL, NULL, NULL);
    tu_pc_expect_failure(&A, "gspai-opt", &k1, GS_ERR_NUMERIC, "column 1 of M would be zero",
                         "--pattern-power 2");
    check_gspai_on(&A, 2, 1, "3x3 zero diagonal");
    gs_params k2 = params2("pattern-power", "2", NULL, NULL);
    gs_csr M = gspai_matrix(&A, &k2);
    const double inverse[3][3] = {{1, 1, -1}, {-1, 0, 1}, {1, 0, 0}}; /* A^-1 */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int64_t p = gs_csr_find(&M, i, j);
            double mij = p >= 0 ? M.val[p] : 0.0;
            ck_assert(fabs(mij - inverse[i][j]) <= 1e-14); /* 3x3 QR: a few ulps */
        }
    gs_csr_free(&M), gs_csr_free(&A);
}
END_TEST

START_TEST(gspai_rejects_bad_input)
{
    gs_params none = params2(NULL, NULL, NULL, NULL);
    const int32_t ri[] = {0, 1, 2, 0}, ci[] = {0, 1, 2, 3};
    const double v[] = {1, 2, 3, 4};
    gs_csr A = tu_from_triplets(3, 4, 4, ri, ci, v);
    tu_pc_expect_failure(&A, "gspai-opt", &none, GS_ERR_INPUT, "3 x 4, not square", NULL);
    gs_csr_free(&A);

    /* column 9 of A zero (stored zeros): every column of M whose J holds 9
     * fails; the first is reported and column 9 of A is named */
    tu_rng r = tu_rng_seed(33);
    gs_csr B = tu_random_matrix(&r, 25, 2);
    for (int i = 0; i < 25; i++) {
        int64_t p = gs_csr_find(&B, i, 8);
        if (p >= 0) B.val[p] = 0.0;
    }
    /* the first column of M whose J_k = {k} ∪ rows of A(:,k) holds 9 */
    int first = -1;
    for (int k = 0; k < 25 && first < 0; k++)
        if (k == 8 || gs_csr_find(&B, 8, k) >= 0) first = k;
    char want[64];
    snprintf(want, sizeof want, "column %d of M:", first + 1);
    tu_pc_expect_failure(&B, "gspai-opt", &none, GS_ERR_NUMERIC,
                         "column 9 of A is zero or linearly dependent", want);

    /* bad values, and a parameter of another preconditioner */
    static const tu_bad_param bad[] = {
        {"pattern-power", "0", NULL}, {"pattern-power", "3", NULL}, {"pattern-power", "1.5", NULL},
        {"pattern-power", "x", NULL}, {"strategy", "s3", NULL},     {"strategy", "S1", NULL},
        {"tau", "0.5", NULL},         {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&B, "gspai-opt", bad);
    gs_csr_free(&B);
}
END_TEST

/* Every allocation of the setup made to fail in turn (error.h's injector):
 * GS_ERR_NOMEM and a clean unwind (the sanitizer build checks the frees). */
START_TEST(gspai_allocation_failures_unwind)
{
    gs_params p = {0};
    tu_assert_allocation_failures("convdiff3d:4", "gspai-opt", &p, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_gspai");
    TCase *prop = tu_add_tcase(s, "property", 120);
    tcase_add_test(prop, gspai_columns_are_local_least_squares_solutions);
    tcase_add_test(prop, gspai_columns_are_minimal_on_their_pattern);
    tcase_add_test(prop, gspai_property_on_real_matrices);
    tcase_add_test(prop, gspai_chooses_the_strategy_from_alpha_and_beta);
    tcase_add_test(prop, gspai_reports_its_stages);
    TCase *conv = tu_add_tcase(s, "convergence", 120);
    tcase_add_test(conv, gspai_needs_fewer_iterations_than_jacobi);
    TCase *bad = tu_add_tcase(s, "bad input", 0);
    tcase_add_test(bad, gspai_zero_diagonal);
    tcase_add_test(bad, gspai_rejects_bad_input);
    tcase_add_test(bad, gspai_allocation_failures_unwind);
    return tu_run_suite(s);
}
