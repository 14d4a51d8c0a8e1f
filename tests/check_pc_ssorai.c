/* check_pc_ssorai.c - the ssor-ai preconditioner (src/precond/pc_ssorai.c) by
 * its definition: with A = L + D + L^T, K = I + omega L D^-1 and G_m its
 * Neumann series truncated after m powers of omega L D^-1,
 *   M^-1 = omega (2 - omega) G_m^T D^-1 G_m,
 * computed here densely from A, compared with the apply (z = F^T (F r)); M^-1
 * symmetric and positive definite (even for a symmetric indefinite A with a
 * positive diagonal); omega and the number of terms change it as the formula
 * says; m = n - 1 terms would be SSOR exactly (checked: m = 2 on a matrix
 * whose L^3 = 0); CG converges in fewer iterations than with Jacobi; bad
 * parameters and inputs refused with a message.
 *
 * Tolerance of the dense comparisons: both sides evaluate the same products
 * of at most K = 2 + 2 (longest row of G_m) factors and sums, in different
 * orders, so |z - M^-1 r|_i <= 2 K u W_i with W = omega (2 - omega) |G|^T
 * D^-1 |G| |r| (Higham, Accuracy and Stability, 3.5: sums of products);
 * |G| is computed with the absolute values of every term. */
#include "dense_cholesky.h"
#include "testutil.h"

#define U (DBL_EPSILON / 2)

/* ---- the dense oracle ---- */

/* Dense n x n row-major: G_m = sum_{j <= m} (-omega L D^-1)^j and the same
 * with |terms| (absG). */
static void dense_g(const gs_csr *A, double omega, int terms, double *G, double *absG)
{
    const int32_t n = A->n_rows;
    double *C = calloc((size_t)n * n, sizeof *C), *d = malloc((size_t)n * sizeof *d);
    ck_assert(C && d);
    gs_csr_diagonal(A, d);
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            if (A->col[p] < i) C[(size_t)i * n + A->col[p]] = omega * A->val[p] / d[A->col[p]];
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++) {
            const double c = C[(size_t)i * n + j];
            G[(size_t)i * n + j] = (i == j) - c;
            absG[(size_t)i * n + j] = (i == j) + fabs(c);
        }
    if (terms >= 2)
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = 0; j < n; j++) {
                double s = 0, a = 0;
                for (int32_t k = 0; k < n; k++) {
                    s += C[(size_t)i * n + k] * C[(size_t)k * n + j];
                    a += fabs(C[(size_t)i * n + k] * C[(size_t)k * n + j]);
                }
                G[(size_t)i * n + j] += s;
                absG[(size_t)i * n + j] += a;
            }
    free(C), free(d);
}

/* want = omega (2 - omega) G^T D^-1 G r, bound = the same with |G|, |r|. */
static void dense_apply(const gs_csr *A, double omega, int terms, const double *r, double *want,
                        double *bound)
{
    const int32_t n = A->n_rows;
    double *G = malloc((size_t)n * n * sizeof *G), *aG = malloc((size_t)n * n * sizeof *aG);
    double *t = calloc((size_t)n, sizeof *t), *at = calloc((size_t)n, sizeof *at);
    double *d = malloc((size_t)n * sizeof *d);
    ck_assert(G && aG && t && at && d);
    dense_g(A, omega, terms, G, aG);
    gs_csr_diagonal(A, d);
    for (int32_t i = 0; i < n; i++) {
        for (int32_t j = 0; j < n; j++) {
            t[i] += G[(size_t)i * n + j] * r[j];
            at[i] += aG[(size_t)i * n + j] * fabs(r[j]);
        }
        t[i] /= d[i], at[i] /= d[i];
    }
    for (int32_t j = 0; j < n; j++) {
        want[j] = bound[j] = 0;
        for (int32_t i = 0; i < n; i++) {
            want[j] += G[(size_t)i * n + j] * t[i];
            bound[j] += aG[(size_t)i * n + j] * at[i];
        }
        want[j] *= omega * (2 - omega), bound[j] *= omega * (2 - omega);
    }
    free(G), free(aG), free(t), free(at), free(d);
}

static gs_params ssorai_params(char omega[32], char terms[8], double w, int m)
{
    snprintf(omega, 32, "%.17g", w);
    snprintf(terms, 8, "%d", m);
    const char *kv[] = {"omega", omega, "ssor-terms", terms, NULL};
    return tu_params(kv);
}

/* The apply on A equals the dense formula for r = a random vector; returns
 * max |z| for the callers that compare settings. */
static void check_apply(const gs_csr *A, double omega, int terms, const char *what, double *z_out)
{
    const int32_t n = A->n_rows;
    char w[32], m[8];
    gs_params p = ssorai_params(w, m, omega, terms);
    double *r = malloc((size_t)n * sizeof *r), *z = malloc((size_t)n * sizeof *z);
    double *want = malloc((size_t)n * sizeof *want), *bound = malloc((size_t)n * sizeof *bound);
    ck_assert(r && z && want && bound);
    tu_rng g = tu_rng_seed(1234 + (uint64_t)(omega * 100) + (uint64_t)terms);
    for (int32_t i = 0; i < n; i++) r[i] = tu_uniform(&g) - 0.5;
    tu_pc_run run;
    tu_pc_build_ok(A, "ssor-ai", &p, &run);
    ck_assert(run.pc->symmetric);
    for (int32_t i = 0; i < n; i++) z[i] = NAN;
    tu_pc_apply(&run, r, z, n);
    gs_csr F = {0};
    tu_pc_saved_matrix(run.pc, "F", &F);
    const int32_t K = 2 + 2 * tu_max_row_length(&F);
    dense_apply(A, omega, terms, r, want, bound);
    for (int32_t i = 0; i < n; i++)
        ck_assert_msg(fabs(z[i] - want[i]) <= 2 * K * U * bound[i],
                      "%s omega=%g terms=%d: z_%d = %.17g, formula %.17g (bound %.3g)", what,
                      omega, terms, i + 1, z[i], want[i], 2 * K * U * bound[i]);
    if (z_out) memcpy(z_out, z, (size_t)n * sizeof *z);
    gs_csr_free(&F);
    tu_pc_release(&run);
    free(r), free(z), free(want), free(bound);
}

static gs_csr small_inputs(int k, char *name, size_t len)
{
    tu_rng g = tu_rng_seed(77 + (uint64_t)k);
    switch (k) {
    case 0: return tu_generated_named("poisson3d:4", name, len);
    case 1: snprintf(name, len, "random SPD 60"); return tu_random_spd(&g, 60, 0.1);
    default: snprintf(name, len, "random SPD 37, dense rows"); return tu_random_spd(&g, 37, 0.6);
    }
}

START_TEST(apply_equals_formula)
{
    const double omegas[] = {1.0, 0.4, 1.75};
    for (int k = 0; k < 3; k++) {
        char name[64];
        gs_csr A = small_inputs(k, name, sizeof name);
        for (int w = 0; w < 3; w++)
            for (int m = 1; m <= 2; m++) check_apply(&A, omegas[w], m, name, NULL);
        gs_csr_free(&A);
    }
}
END_TEST

/* omega and m change M^-1 (not merely its scale): the normalised applies
 * differ where the formula says they do. */
START_TEST(omega_and_terms_change_it)
{
    gs_csr A = tu_generated("poisson3d:4");
    const int32_t n = A.n_rows;
    double *z1 = malloc((size_t)n * sizeof *z1), *z2 = malloc((size_t)n * sizeof *z2);
    double *z3 = malloc((size_t)n * sizeof *z3);
    ck_assert(z1 && z2 && z3);
    check_apply(&A, 1.0, 1, "poisson3d:4", z1);
    check_apply(&A, 1.0, 2, "poisson3d:4", z2);
    check_apply(&A, 0.5, 1, "poisson3d:4", z3);
    double d12 = 0, d13 = 0, s1 = 0;
    for (int32_t i = 0; i < n; i++) {
        d12 = fmax(d12, fabs(z1[i] - z2[i]));
        s1 = fmax(s1, fabs(z1[i]));
    }
    /* omega: compare shapes, the factor omega (2 - omega) set aside */
    for (int32_t i = 0; i < n; i++) d13 = fmax(d13, fabs(z1[i] / 1.0 - z3[i] / 0.75));
    ck_assert_msg(d12 > 1e-3 * s1, "terms 1 and 2 give the same apply");
    ck_assert_msg(d13 > 1e-3 * s1, "omega 1 and 0.5 give the same apply up to scale");
    free(z1), free(z2), free(z3);
    gs_csr_free(&A);
}
END_TEST

/* The columns of M^-1 (applies to e_j): symmetric to rounding, and positive
 * definite (dense Cholesky). Also for a symmetric indefinite A with a
 * positive diagonal: F is nonsingular whatever A's spectrum. */
static void check_spd(const gs_csr *A, int terms, const char *what)
{
    const int32_t n = A->n_rows;
    char w[32], m[8];
    gs_params p = ssorai_params(w, m, 1.3, terms);
    tu_pc_run run;
    tu_pc_build_ok(A, "ssor-ai", &p, &run);
    double *M = malloc((size_t)n * n * sizeof *M), *e = calloc((size_t)n, sizeof *e);
    double *col = malloc((size_t)n * sizeof *col);
    ck_assert(M && e && col);
    for (int32_t j = 0; j < n; j++) {
        e[j] = 1;
        tu_pc_apply(&run, e, col, n);
        e[j] = 0;
        for (int32_t i = 0; i < n; i++) M[(size_t)i * n + j] = col[i];
    }
    double scale = 0;
    for (int64_t q = 0; q < (int64_t)n * n; q++) scale = fmax(scale, fabs(M[q]));
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < i; j++)
            ck_assert_msg(fabs(M[(size_t)i * n + j] - M[(size_t)j * n + i]) <= 64 * U * scale,
                          "%s: M^-1 not symmetric at (%d, %d)", what, i + 1, j + 1);
    void *work = malloc(GS_DENSE_CHOLESKY_WORK_BYTES(n));
    ck_assert(work);
    ck_assert_msg(gs_dense_cholesky_factor(M, n, work) < 0, "%s: M^-1 not positive definite",
                  what);
    free(work);
    tu_pc_release(&run);
    free(M), free(e), free(col);
}

START_TEST(symmetric_positive_definite)
{
    for (int k = 0; k < 3; k++) {
        char name[64];
        gs_csr A = small_inputs(k, name, sizeof name);
        check_spd(&A, 1, name);
        check_spd(&A, 2, name);
        gs_csr_free(&A);
    }
    /* symmetric, positive diagonal, indefinite: [[1, 2], [2, 1]] blocks */
    const int32_t r[] = {0, 0, 1, 1, 2, 2, 3, 3}, c[] = {0, 1, 0, 1, 2, 3, 2, 3};
    const double v[] = {1, 2, 2, 1, 1, 2, 2, 1};
    gs_csr B = tu_from_triplets(4, 4, 8, r, c, v);
    check_spd(&B, 1, "indefinite 2x2 blocks");
    gs_csr_free(&B);
}
END_TEST

/* F's pattern: tril(A) for one term, that of (E + |tril A|)^2 for two; the
 * diagonal of F is sqrt(omega (2 - omega) / a_ii) exactly as rounded. */
START_TEST(factor_pattern_and_diagonal)
{
    gs_csr A = tu_generated("poisson3d:6"), low = {0}, P = {0};
    ck_assert(gs_csr_lower(&A, 1, &low, NULL) == GS_OK);
    ck_assert(gs_csr_pattern_power(&low, 2, 1, &P, NULL) == GS_OK);
    for (int m = 1; m <= 2; m++) {
        char w[32], t[8];
        gs_params p = ssorai_params(w, t, 1.2, m);
        tu_pc_run run;
        gs_csr F = tu_pc_saved_factor(&A, "ssor-ai", &p, "F", &run);
        const gs_csr *want = m == 1 ? &low : &P;
        ck_assert_int_eq(F.nnz, want->nnz);
        for (int32_t i = 0; i <= A.n_rows; i++) ck_assert(F.row_ptr[i] == want->row_ptr[i]);
        for (int64_t q = 0; q < F.nnz; q++) ck_assert(F.col[q] == want->col[q]);
        for (int32_t i = 0; i < A.n_rows; i++) {
            const double fii = F.val[F.row_ptr[i + 1] - 1];
            const double aii = A.val[gs_csr_find(&A, i, i)];
            ck_assert_msg(fabs(fii - sqrt(1.2 * 0.8 / aii)) <= 4 * U * fii, "f_%d,%d", i + 1,
                          i + 1);
        }
        const char *stages[] = {"factor G", "transpose", "upload", NULL};
        tu_assert_stages(run.pc, stages);
        ck_assert_int_eq(run.pc->nnz, want->nnz);
        tu_pc_release(&run);
        gs_csr_free(&F);
    }
    gs_csr_free(&A), gs_csr_free(&low), gs_csr_free(&P);
}
END_TEST

/* a_ij, 0 where not stored (a tridiagonal A has no a_20) */
static double entry(const gs_csr *A, int32_t i, int32_t j)
{
    const int64_t k = gs_csr_find(A, i, j);
    return k < 0 ? 0.0 : A->val[k];
}

/* When L^(m+1) = 0 the truncated series is K^-1 itself and ssor-ai is SSOR:
 * a tridiagonal matrix of 3 rows has L^3 = 0, so with two terms the apply is
 * the exact SSOR solve, M z = r with M = (2 - omega)^-1 (D/omega + L)
 * (D/omega)^-1 (D/omega + L)^T (which also pins down the scale omega
 * (2 - omega) of M^-1), checked by multiplying z by M. */
START_TEST(two_terms_exact_when_l_cubed_vanishes)
{
    const int32_t r[] = {0, 0, 1, 1, 1, 2, 2}, c[] = {0, 1, 0, 1, 2, 1, 2};
    const double v[] = {4, -1.5, -1.5, 3, -2, -2, 5};
    gs_csr A = tu_from_triplets(3, 3, 7, r, c, v);
    const double omega = 1.4, rhs[3] = {1, -2, 0.5};
    char w[32], t[8];
    gs_params p = ssorai_params(w, t, omega, 2);
    tu_pc_run run;
    tu_pc_build_ok(&A, "ssor-ai", &p, &run);
    double z[3], y[3] = {0, 0, 0}, u[3] = {0, 0, 0};
    tu_pc_apply(&run, rhs, z, 3);
    const double d[3] = {4, 3, 5};
    /* y = (D/omega + L)^T z */
    for (int i = 0; i < 3; i++) {
        y[i] = d[i] / omega * z[i];
        for (int j = i + 1; j < 3; j++) y[i] += entry(&A, j, i) * z[j];
    }
    /* u = (2 - omega)^-1 (D/omega + L) (D/omega)^-1 y */
    for (int i = 0; i < 3; i++) {
        u[i] = y[i];
        for (int j = 0; j < i; j++) u[i] += entry(&A, i, j) * omega / d[j] * y[j];
        u[i] /= 2 - omega;
    }
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(u[i] - rhs[i]) <= 1e-13, "M z = %.17g, r = %g (row %d)", u[i], rhs[i],
                      i + 1);
    tu_pc_release(&run);
    gs_csr_free(&A);
}
END_TEST

/* CG: fewer iterations than Jacobi (and than none) on poisson3d and on real
 * SPD matrices where SSOR-AI is known to help. */
START_TEST(fewer_iterations_than_jacobi)
{
    const char *names[] = {"nos4", "bcsstk22", "mesh1e1", "nos3", "lund_a", "bcsstk08", NULL};
    tu_assert_fewer_than_jacobi_on("poisson3d:16", names, "ssor-ai", "cg");
    gs_csr A = tu_generated("poisson3d:16");
    gs_krylov_result rn, rs;
    gs_params none = {0};
    gs_error err = {0};
    ck_assert(tu_pc_solve(&A, "none", &none, "cg", 10000, &rn, &err) == GS_OK);
    ck_assert(tu_pc_solve(&A, "ssor-ai", &none, "cg", 10000, &rs, &err) == GS_OK);
    ck_assert_msg(rs.reason == GS_REASON_CONVERGED && rs.iterations < rn.iterations,
                  "ssor-ai %ld iterations, none %ld", rs.iterations, rn.iterations);
    gs_krylov_result_free(&rn), gs_krylov_result_free(&rs);
    const char *kv[] = {"ssor-terms", "2", NULL};
    gs_params two = tu_params(kv);
    tu_assert_fewer_than_jacobi(&A, "ssor-ai", &two, "cg", "poisson3d:16, two terms");
    gs_csr_free(&A);
}
END_TEST

START_TEST(bad_parameters_refused)
{
    gs_csr A = tu_generated("poisson3d:3");
    const tu_bad_param bad[] = {
        {"omega", "0", "outside"},  {"omega", "2", "outside"},      {"omega", "-0.5", NULL},
        {"omega", "2.5", NULL},    {"omega", "abc", NULL},        {"ssor-terms", "0", NULL},
        {"ssor-terms", "3", NULL}, {"ssor-terms", "1.5", NULL},   {"tau", "0.1", NULL},
        {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&A, "ssor-ai", bad);
    gs_csr_free(&A);
}
END_TEST

static void expect_input_failure(const gs_csr *A, const char *fragment)
{
    gs_params none = {0};
    tu_pc_expect_failure(A, "ssor-ai", &none, GS_ERR_INPUT, "ssor-ai", fragment);
}

START_TEST(bad_input_named)
{
    gs_csr A = tu_generated("poisson3d:4");
    A.val[gs_csr_find(&A, 5, 6)] = -0.5; /* a_67 != a_76 */
    expect_input_failure(&A, "needs a symmetric matrix");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:4");
    A.val[gs_csr_find(&A, 2, 2)] = 0;
    expect_input_failure(&A, "row 3 has diagonal entry 0");
    A.val[gs_csr_find(&A, 2, 2)] = -6;
    expect_input_failure(&A, "row 3 has diagonal entry -6");
    gs_csr_free(&A);
    const int32_t r[] = {0, 0, 1, 1, 2}, c[] = {0, 1, 0, 2, 1};
    const double v[] = {2, -1, -1, -1, -1};
    A = tu_from_triplets(3, 3, 5, r, c, v); /* row 2 has no diagonal */
    expect_input_failure(&A, "row 2 has no diagonal entry");
    gs_csr_free(&A);
    const int32_t r2[] = {0, 1}, c2[] = {0, 1};
    const double v2[] = {1, 1};
    A = tu_from_triplets(2, 3, 2, r2, c2, v2);
    expect_input_failure(&A, "not square");
    gs_csr_free(&A);
}
END_TEST

START_TEST(allocation_failures)
{
    tu_assert_allocation_failures("poisson3d:4", "ssor-ai", NULL, 5);
    const char *kv[] = {"ssor-terms", "2", NULL};
    gs_params two = tu_params(kv);
    tu_assert_allocation_failures("poisson3d:4", "ssor-ai", &two, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_ssorai");
    TCase *tc = tu_add_tcase(s, "ssorai", 300);
    tcase_add_test(tc, apply_equals_formula);
    tcase_add_test(tc, omega_and_terms_change_it);
    tcase_add_test(tc, symmetric_positive_definite);
    tcase_add_test(tc, factor_pattern_and_diagonal);
    tcase_add_test(tc, two_terms_exact_when_l_cubed_vanishes);
    tcase_add_test(tc, fewer_iterations_than_jacobi);
    tcase_add_test(tc, bad_parameters_refused);
    tcase_add_test(tc, bad_input_named);
    tcase_add_test(tc, allocation_failures);
    return tu_run_suite(s);
}
