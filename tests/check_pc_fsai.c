/* check_pc_fsai.c - static FSAI (src/precond/pc_fsai.c) by the properties that
 * define it (Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 2016,
 * section 3): diag(G A G^T) = I (3.10); each row solves its local system,
 * (G̃ A)_ij = δ_ij on the pattern (3.4); the pattern is the recursion (3.9);
 * the postfilter is (3.11)-(3.13). Plus the dense Cholesky it relies on,
 * the apply, fp32 storage, iterations against Jacobi, bad input and
 * allocation failures. Tolerances are rounding-error bounds (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 2nd ed.: dot products
 * (3.5), Cholesky Thm 10.3-10.4), stated where used; u = DBL_EPSILON / 2. */
#include "dense_cholesky.h"
#include "gen.h"
#include "testutil.h"

#define U_ROUND (DBL_EPSILON / 2)

/* ---- running fsai ---- */

/* G as fsai builds it for A (setup must succeed); mu_G_hat into *mu_hat. */
static gs_csr fsai_factor(const gs_csr *A, const gs_params *p, double *mu_hat)
{
    tu_pc_run run;
    gs_csr G = tu_pc_saved_factor(A, "fsai", p, "G", &run);
    const gs_kv *kv = tu_pc_extra(run.pc, "mu_G_hat");
    ck_assert_ptr_nonnull(kv);
    if (mu_hat) *mu_hat = kv->num;
    tu_pc_release(&run);
    return G;
}

/* G is lower triangular, every row ends with a positive diagonal entry. */
static void check_lower_with_diagonal(const gs_csr *G, const char *label)
{
    for (int32_t i = 0; i < G->n_rows; i++) {
        int64_t last = G->row_ptr[i + 1] - 1;
        ck_assert_msg(last >= G->row_ptr[i] && G->col[last] == i && G->val[last] > 0,
                      "%s: row %d of G does not end with a positive diagonal entry", label,
                      (int)i + 1);
    }
}

/* (A x)_j with x dense; *abs_out = (|A||x|)_j. */
static double row_times(const gs_csr *A, int32_t j, const double *x, double *abs_out)
{
    double s = 0, a = 0;
    for (int64_t p = A->row_ptr[j]; p < A->row_ptr[j + 1]; p++) {
        s += A->val[p] * x[A->col[p]];
        a += fabs(A->val[p] * x[A->col[p]]);
    }
    *abs_out = a;
    return s;
}

/* The property (3.10): (G A G^T)_ii = g_i^T A g_i = 1 for every row.
 * Tolerance: the setup divides row i by the computed sqrt(z^T A z); that
 * quadratic form is m dot products of A's rows (length <= r) and one of
 * length m, so its error is <= γ_{m+r} q with q = |g|^T |A| |g| (Higham
 * (3.5)); the division by sqrt rounds each g_ij by <= 3u (6u on q); this
 * test's own evaluation adds another γ_{m+r} q. First order: (2(m+r)+6) u q;
 * we allow twice that for the second-order terms. */
static void check_unit_diagonal(const gs_csr *A, const gs_csr *G, const char *label)
{
    const int32_t n = A->n_rows, r = tu_max_row_length(A);
    double *x = calloc((size_t)n, sizeof *x), worst = 0;
    ck_assert_ptr_nonnull(x);
    check_lower_with_diagonal(G, label);
    for (int32_t i = 0; i < n; i++) {
        const int64_t p0 = G->row_ptr[i], p1 = G->row_ptr[i + 1];
        for (int64_t p = p0; p < p1; p++) x[G->col[p]] = G->val[p];
        double d = 0, q = 0, abs_row;
        for (int64_t p = p0; p < p1; p++) {
            d += G->val[p] * row_times(A, G->col[p], x, &abs_row);   /* g^T A g */
            q += fabs(G->val[p]) * abs_row;                          /* |g|^T |A| |g| */
        }
        for (int64_t p = p0; p < p1; p++) x[G->col[p]] = 0;
        const double tol = 2.0 * (2.0 * ((double)(p1 - p0) + r) + 6.0) * U_ROUND * q;
        ck_assert_msg(fabs(d - 1.0) <= tol,
                      "%s: (G A G^T)_ii = %.17g in row %d, |error| %.3g > bound %.3g", label,
                      d, (int)i + 1, fabs(d - 1.0), tol);
        if (fabs(d - 1.0) > worst) worst = fabs(d - 1.0);
    }
    free(x);
}

/* The property (3.4): with g̃_i = g_ii g_i (= the local solution w of
 * A[P,P] w = e_m, since g_i = w / sqrt(w_m) and g_ii = sqrt(w_m)),
 * (g̃_i^T A)_j = (A g̃_i)_j = [j == i] for every j in P_i. Only for
 * delta = 0 (no postfilter: G's row pattern is P_i).
 * Off-diagonal tolerance, scale-free (||(A g̃)_off|| / ||g̃|| does not depend
 * on g̃'s scaling): Cholesky's computed w solves (A_P + ΔA) w = e_m with
 * ||ΔA||_2 <= γ_{3m+1} m ||A_P||_2 (Higham Thm 10.4 with || |L||L^T| ||_2 <=
 * m ||A_P||_2), so ||(A_P w)_off||_2 <= γ_{3m+1} m ||A_P||_F ||w||_2; the
 * scalings round each entry by <= 4u and this test's products add γ_m
 * || |A_P| |g̃| || <= γ_m ||A_P||_F ||g̃||. Twice the first-order sum.
 * Diagonal: g_ii (A g)_i = g^T A g - g_off^T (A g)_off, so its distance to 1
 * is at most the unit-diagonal bound plus ||g_off|| ||(A g)_off||. */
static void check_local_systems(const gs_csr *A, const gs_csr *G, const char *label)
{
    const int32_t n = A->n_rows, r = tu_max_row_length(A);
    const size_t len = (size_t)(n > 0 ? n : 1);
    double *x = calloc(len, sizeof *x);
    int32_t *in_p = calloc(len, sizeof *in_p);
    ck_assert(x && in_p);
    for (int32_t i = 0; i < n; i++) {
        const int64_t p0 = G->row_ptr[i], p1 = G->row_ptr[i + 1];
        const double m = (double)(p1 - p0), gii = G->val[p1 - 1];
        double gnorm = 0, goff = 0, apf = 0, off = 0, diag = 0, q = 0, abs_row;
        for (int64_t p = p0; p < p1; p++) {
            x[G->col[p]] = gii * G->val[p];                         /* g̃ = g_ii g */
            in_p[G->col[p]] = 1;
            gnorm += x[G->col[p]] * x[G->col[p]];
            if (p < p1 - 1) goff += G->val[p] * G->val[p];
        }
        for (int64_t p = p0; p < p1; p++) {
            const int32_t j = G->col[p];
            for (int64_t t = A->row_ptr[j]; t < A->row_ptr[j + 1]; t++)
                if (in_p[A->col[t]]) apf += A->val[t] * A->val[t]; /* ||A_P||_F^2 */
            const double agj = row_times(A, j, x, &abs_row);        /* (A g̃)_j */
            q += fabs(G->val[p]) * abs_row / gii;
            if (j == i)
                diag = agj;
            else
                off += agj * agj;
        }
        gnorm = sqrt(gnorm), goff = sqrt(goff), apf = sqrt(apf), off = sqrt(off);
        const double tol_off = 2.0 * ((3 * m + 1) * m + m + 4) * U_ROUND * apf * gnorm;
        ck_assert_msg(off <= tol_off,
                      "%s: row %d: ||(G̃ A)_ij, j in P_i, j != i|| = %.3g > bound %.3g", label,
                      (int)i + 1, off, tol_off);
        const double tol_diag =
            2.0 * (2.0 * (m + r) + 6.0) * U_ROUND * q + goff * tol_off / gii;
        ck_assert_msg(fabs(diag - 1.0) <= tol_diag,
                      "%s: row %d: (G̃ A)_ii = %.17g, |error| %.3g > bound %.3g", label,
                      (int)i + 1, diag, fabs(diag - 1.0), tol_diag);
        for (int64_t p = p0; p < p1; p++) x[G->col[p]] = 0, in_p[G->col[p]] = 0;
    }
    free(x);
    free(in_p);
}

/* The documented pattern, built here with csr.c's generic operations:
 * Ã by (3.8), L_1 = Low(Ã), L_{p+1} = Low(pattern(L_p Ã)). */
static gs_csr expected_pattern(const gs_csr *A, double tau, long k)
{
    gs_error err = {0};
    const int32_t n = A->n_rows;
    double *d = malloc((size_t)n * sizeof *d);
    int32_t *ri = malloc((size_t)A->nnz * sizeof *ri), *ci = malloc((size_t)A->nnz * sizeof *ci);
    ck_assert(d && ri && ci);
    gs_csr_diagonal(A, d);
    int64_t nz = 0;
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            if (A->col[p] == i || fabs(A->val[p]) > tau * sqrt(d[i] * d[A->col[p]]))
                ri[nz] = i, ci[nz++] = A->col[p];
    gs_csr At = {0}, L = {0}, P = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, NULL, &At, &err) == GS_OK);
    ck_assert(gs_csr_lower(&At, 1, &L, &err) == GS_OK);
    for (long p = 1; p < k; p++) {
        ck_assert(gs_csr_pattern_product(&L, &At, &P, &err) == GS_OK);
        gs_csr_free(&L);
        ck_assert(gs_csr_lower(&P, 1, &L, &err) == GS_OK);
        gs_csr_free(&P);
    }
    gs_csr_free(&At);
    free(d), free(ri), free(ci);
    return L;
}

static void check_same_pattern(const gs_csr *S, const gs_csr *G, const char *label)
{
    ck_assert_int_eq(S->n_rows, G->n_rows);
    for (int32_t i = 0; i < S->n_rows; i++) {
        int64_t a = S->row_ptr[i + 1] - S->row_ptr[i], b = G->row_ptr[i + 1] - G->row_ptr[i];
        ck_assert_msg(a == b, "%s: row %d has %lld entries in G, %lld in the recursion", label,
                      (int)i + 1, (long long)b, (long long)a);
        for (int64_t t = 0; t < a; t++)
            ck_assert_msg(S->col[S->row_ptr[i] + t] == G->col[G->row_ptr[i] + t],
                          "%s: row %d: column %d of G, %d in the recursion", label, (int)i + 1,
                          (int)G->col[G->row_ptr[i] + t] + 1, (int)S->col[S->row_ptr[i] + t] + 1);
    }
    ck_assert_int_eq(S->nnz, G->nnz);
}

/* All three properties of one setup (tau, k; delta = 0). */
static void check_unfiltered(const gs_csr *A, double tau, long k, const char *what)
{
    char label[160];
    snprintf(label, sizeof label, "%s tau=%g k=%ld", what, tau, k);
    tu_fsai_args a;
    double mu_hat;
    gs_csr G = fsai_factor(A, tu_fsai_args_make(&a, tau, k, 0.0, NULL), &mu_hat);
    gs_csr S = expected_pattern(A, tau, k);
    check_same_pattern(&S, &G, label);
    ck_assert_double_eq_tol(mu_hat, (double)G.nnz / (double)A->nnz, 1e-12);
    check_unit_diagonal(A, &G, label);
    check_local_systems(A, &G, label);
    gs_csr_free(&S);
    gs_csr_free(&G);
}

/* ---- dense Cholesky ---- */

/* A = B B^T + I, m x m, row-major (B entries in [-1, 1)). */
static double *random_dense_spd(tu_rng *r, int m)
{
    double *b = malloc((size_t)m * m * sizeof *b), *a = malloc((size_t)m * m * sizeof *a);
    ck_assert(a && b);
    for (int t = 0; t < m * m; t++) b[t] = 2 * tu_uniform(r) - 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            double s = i == j ? 1.0 : 0.0;
            for (int t = 0; t < m; t++) s += b[i * m + t] * b[j * m + t];
            a[i * m + j] = s;
        }
    free(b);
    return a;
}

/* Higham Thm 10.3: L L^T = A + ΔA, |ΔA| <= γ_{m+1} |L| |L^T|, checked
 * entrywise; then the solve's residual against Thm 10.4 (normwise, with
 * ||A||_F and || |L||L^T| || <= m ||A||_2 <= m ||A||_F), twice the bounds. */
START_TEST(dense_cholesky_factor_and_solve)
{
    tu_rng r = tu_rng_seed(11);
    const int sizes[] = {1, 2, 3, 7, 32, 33, 70};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const int m = sizes[c];
        double *a = random_dense_spd(&r, m), *l = malloc((size_t)m * m * sizeof *l);
        double *x = malloc((size_t)m * sizeof *x), *b = malloc((size_t)m * sizeof *b);
        ck_assert(l && x && b);
        void *work = malloc(GS_DENSE_CHOLESKY_WORK_BYTES(70));
        ck_assert(work);
        memcpy(l, a, (size_t)m * m * sizeof *l);
        ck_assert_int_eq(gs_dense_cholesky_factor(l, m, work), -1);
        const double gamma = (m + 1) * U_ROUND / (1 - (m + 1) * U_ROUND);
        double anorm = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j <= i; j++) {
                double s = 0, sa = 0;
                for (int t = 0; t <= j; t++) {
                    s += l[i * m + t] * l[j * m + t];
                    sa += fabs(l[i * m + t] * l[j * m + t]);
                }
                ck_assert_msg(fabs(s - a[i * m + j]) <= 2 * gamma * sa,
                              "m=%d: (L L^T)_%d%d = %.17g, a = %.17g", m, i, j, s, a[i * m + j]);
            }
        for (int t = 0; t < m * m; t++) anorm += a[t] * a[t];
        anorm = sqrt(anorm);
        for (int i = 0; i < m; i++) x[i] = b[i] = 2 * tu_uniform(&r) - 1;
        gs_dense_cholesky_solve(l, m, x);
        double res = 0, xn = 0;
        for (int i = 0; i < m; i++) {
            double s = -b[i];
            for (int j = 0; j < m; j++) s += a[i * m + j] * x[j];
            res += s * s, xn += x[i] * x[i];
        }
        const double tol = 2.0 * ((3.0 * m + 1) * m + m) * U_ROUND * anorm * sqrt(xn);
        ck_assert_msg(sqrt(res) <= tol, "m=%d: ||A x - b|| = %.3g > %.3g", m, sqrt(res), tol);
        free(a), free(l), free(x), free(b), free(work);
    }
}
END_TEST

/* The return value names the first pivot whose leading block is not
 * positive definite (0-based), also for zero and NaN pivots. */
START_TEST(dense_cholesky_reports_the_failing_pivot)
{
    const int m = 6;
    double a[36];
    double work[32]; /* GS_DENSE_CHOLESKY_WORK_BYTES(6) = 248 bytes */
    for (int fail = 0; fail < m; fail++) {
        for (int t = 0; t < m * m; t++) a[t] = (t / m == t % m) ? 2.0 : 0.0;
        if (fail == 0)
            a[0] = -1.0;
        else
            a[fail * m + fail - 1] = a[(fail - 1) * m + fail] = 3.0; /* [[2,3],[3,2]] */
        ck_assert_int_eq(gs_dense_cholesky_factor(a, m, work), fail);
    }
    for (int t = 0; t < m * m; t++) a[t] = (t / m == t % m) ? 1.0 : 0.0;
    a[3 * m + 3] = 0.0;
    ck_assert_int_eq(gs_dense_cholesky_factor(a, m, work), 3);
    for (int t = 0; t < m * m; t++) a[t] = (t / m == t % m) ? 1.0 : 0.0;
    a[4 * m + 2] = NAN;
    ck_assert_int_eq(gs_dense_cholesky_factor(a, m, work), 4);
}
END_TEST

/* The plain row-oriented loop (Golub & Van Loan Alg. 4.2.1, every k from 0):
 * the oracle for the blocked, envelope-skipping gs_dense_cholesky_factor. */
static int plain_cholesky(double *a, int m)
{
    for (int i = 0; i < m; i++) {
        double *li = a + (long)i * m;
        for (int j = 0; j < i; j++) {
            const double *lj = a + (long)j * m;
            double s = li[j];
            for (int k = 0; k < j; k++) s -= li[k] * lj[k];
            li[j] = s / lj[j];
        }
        double d = li[i];
        for (int k = 0; k < i; k++) d -= li[k] * li[k];
        if (!(d > 0.0) || !isfinite(d)) return i;
        li[i] = sqrt(d);
    }
    return -1;
}

/* The blocks of four rows and the skipped envelope change no entry of L
 * (nor of the solution of L L^T x = e_m, solve_last against solve):
 * every sum keeps its order and loses only products that are exactly zero,
 * so L equals the plain loop's entry for entry (==, which a zero's sign does
 * not affect). SPD matrices with a random envelope (row r starts at a random
 * column, some rows only their diagonal), sizes on both sides of multiples of
 * four; also the failing pivot of a matrix made indefinite at row m/2. */
START_TEST(dense_cholesky_blocked_envelope_is_the_plain_loop)
{
    tu_rng r = tu_rng_seed(5);
    const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 64, 70, 131};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const int m = sizes[c];
        double *a = malloc((size_t)m * m * sizeof *a), *b = malloc((size_t)m * m * sizeof *b);
        void *work = malloc(GS_DENSE_CHOLESKY_WORK_BYTES(m));
        ck_assert(a && b && work);
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < m; i++) {
                const int f = (i % 5 == 3) ? i : (int)(tu_uniform(&r) * (i + 1));
                for (int j = 0; j < m; j++)
                    a[i * m + j] = j > i ? NAN : j < f ? 0.0 : 2 * tu_uniform(&r) - 1;
                a[i * m + i] = m; /* diagonally dominant: SPD */
            }
            if (pass == 1) a[(m / 2) * m + m / 2] = -1.0;
            memcpy(b, a, (size_t)m * m * sizeof *b);
            const int want = plain_cholesky(b, m);
            ck_assert_int_eq(gs_dense_cholesky_factor(a, m, work), want);
            const int rows = want < 0 ? m : want;
            for (int i = 0; i < rows; i++)
                for (int j = 0; j <= i; j++)
                    ck_assert_msg(a[i * m + j] == b[i * m + j],
                                  "m=%d pass %d: l_%d%d = %.17g, plain loop %.17g", m, pass, i,
                                  j, a[i * m + j], b[i * m + j]);
            if (want >= 0) continue;
            /* FSAI's local solve: (L L^T)^-1 e_m, the same as the general solve's */
            double *x = malloc((size_t)m * sizeof *x), *y = malloc((size_t)m * sizeof *y);
            ck_assert(x && y);
            for (int i = 0; i < m; i++) y[i] = i == m - 1;
            gs_dense_cholesky_solve(a, m, y);
            gs_dense_cholesky_solve_last(a, m, work, x);
            for (int i = 0; i < m; i++)
                ck_assert_msg(x[i] == y[i], "m=%d: solve_last x_%d = %.17g, solve %.17g", m, i,
                              x[i], y[i]);
            free(x), free(y);
        }
        free(a), free(b), free(work);
    }
}
END_TEST

/* ---- the defining properties ---- */

START_TEST(fsai_properties_on_generated_problems)
{
    gs_csr P = tu_generated("poisson3d:6"), N = tu_generated("aniso3d:6x5x4"),
           Q = tu_generated("poisson3d27:4");
    for (long k = 1; k <= 4; k++) check_unfiltered(&P, 0.0, k, "poisson3d:6");
    /* aniso3d: |a_ij| / sqrt(a_ii a_jj) is 0.45 (x), 0.045 (y), 0.0045 (z): these
     * taus keep all, drop z, drop y and z */
    const double taus[] = {0.0, 0.02, 0.05};
    for (int t = 0; t < 3; t++)
        for (long k = 1; k <= 3; k++) check_unfiltered(&N, taus[t], k, "aniso3d:6x5x4");
    check_unfiltered(&Q, 0.02, 2, "poisson3d27:4");
    gs_csr_free(&P), gs_csr_free(&N), gs_csr_free(&Q);
}
END_TEST

START_TEST(fsai_properties_on_random_spd_matrices)
{
    tu_rng r = tu_rng_seed(2016);
    for (int trial = 0; trial < 6; trial++) {
        gs_csr A = tu_random_spd(&r, 40 + (int32_t)(tu_next(&r) % 90), 0.08);
        const double tau = trial % 3 == 0 ? 0.0 : 0.3 * tu_uniform(&r);
        check_unfiltered(&A, tau, 1 + trial % 4, "random SPD");
        gs_csr_free(&A);
    }
}
END_TEST

/* Postfilter (3.11)-(3.13): against the unfiltered G0 of the same tau, k,
 * row i of G_delta keeps exactly the diagonal and the entries with
 * |g0_ij| > delta ||g0_i||_2, scaled by s = 1/sqrt(1 + ε^T A ε). The paper
 * derives s from ε^T A g0 = 0 and g0^T A g0 = 1, which hold only up to the
 * local solve's and the scaling's rounding; the setup divides by the exact
 * z^T A z = 1 + ε^T A ε + (g0^T A g0 - 1) - 2 ε^T A g0 instead. So the ratio
 * g_ij / (s g0_ij) must be 1 within half the relative size of those two
 * terms (both computed here, sqrt halves a relative error) plus rounding
 * (the two quadratic forms, 4 (m + r) u, and the scalings, 8u). Entries
 * within 1e-9 ||g0|| of the threshold are not judged (rounding may flip them). */
static void check_postfilter(const gs_csr *A, double tau, long k, double delta, const char *what)
{
    tu_fsai_args a;
    const int32_t n = A->n_rows, r = tu_max_row_length(A);
    gs_csr G0 = fsai_factor(A, tu_fsai_args_make(&a, tau, k, 0.0, NULL), NULL);
    gs_csr G = fsai_factor(A, tu_fsai_args_make(&a, tau, k, delta, NULL), NULL);
    check_unit_diagonal(A, &G, what);
    double *eps = calloc((size_t)n, sizeof *eps), *g0 = calloc((size_t)n, sizeof *g0);
    ck_assert(eps && g0);
    for (int32_t i = 0; i < n; i++) {
        const int64_t p0 = G0.row_ptr[i], p1 = G0.row_ptr[i + 1];
        double norm = 0, abs_row;
        for (int64_t p = p0; p < p1; p++) norm += G0.val[p] * G0.val[p];
        norm = sqrt(norm);
        int64_t q = G.row_ptr[i];
        for (int64_t p = p0; p < p1; p++) {
            const int32_t j = G0.col[p];
            const int kept = q < G.row_ptr[i + 1] && G.col[q] == j;
            const double v = fabs(G0.val[p]), thr = delta * norm;
            g0[j] = G0.val[p];
            if (!kept) eps[j] = G0.val[p];
            q += kept;
            if (j == i) {
                ck_assert_msg(kept, "%s: row %d lost its diagonal", what, (int)i + 1);
            } else if (fabs(v - thr) > 1e-9 * norm) {
                ck_assert_msg(kept == (v > thr), "%s: row %d, column %d: |g0_ij| = %.3g, "
                              "delta ||g0_i|| = %.3g, but %s", what, (int)i + 1, (int)j + 1,
                              v, thr, kept ? "kept" : "dropped");
            }
        }
        ck_assert_msg(q == G.row_ptr[i + 1], "%s: row %d of G has entries outside the pattern",
                      what, (int)i + 1);
        double eae = 0, eag = 0, gag = 0;
        for (int64_t p = p0; p < p1; p++) {
            const int32_t j = G0.col[p];
            eae += eps[j] * row_times(A, j, eps, &abs_row);         /* ε^T A ε */
            const double agj = row_times(A, j, g0, &abs_row);       /* (A g0)_j */
            eag += eps[j] * agj;                                    /* ε^T A g0 */
            gag += g0[j] * agj;                                     /* g0^T A g0 */
        }
        const double s = 1.0 / sqrt(1.0 + eae);                      /* (3.13) */
        const double tol = 0.5 * (fabs(gag - 1.0) + 2.0 * fabs(eag)) / (1.0 + eae) +
                           (4.0 * ((double)(p1 - p0) + r) + 8.0) * U_ROUND;
        for (int64_t t = G.row_ptr[i]; t < G.row_ptr[i + 1]; t++) {
            const double ratio = G.val[t] / (s * g0[G.col[t]]);
            ck_assert_msg(fabs(ratio - 1.0) <= tol,
                          "%s: row %d, column %d: g_ij / (g0_ij / sqrt(1 + ε^T A ε)) = %.17g, "
                          "bound %.3g", what, (int)i + 1, (int)G.col[t] + 1, ratio, tol);
        }
        for (int64_t p = p0; p < p1; p++) eps[G0.col[p]] = g0[G0.col[p]] = 0;
    }
    free(eps), free(g0);
    gs_csr_free(&G0), gs_csr_free(&G);
}

START_TEST(fsai_postfilter_is_the_papers_3_13)
{
    gs_csr P = tu_generated("poisson3d:7"), N = tu_generated("aniso3d:6x5x4");
    tu_rng r = tu_rng_seed(313);
    gs_csr R = tu_random_spd(&r, 90, 0.08);
    const double deltas[] = {0.0035, 0.05, 0.2, 1.0};
    for (int t = 0; t < 4; t++) {
        check_postfilter(&P, 0.02, 3, deltas[t], "poisson3d:7");
        check_postfilter(&N, 0.0, 3, deltas[t], "aniso3d:6x5x4");
        check_postfilter(&R, 0.01, 2, deltas[t], "random SPD");
    }
    /* delta = 1 keeps only the diagonal: G = diag(A)^-1/2, i.e. M = Jacobi */
    tu_fsai_args a;
    gs_csr G = fsai_factor(&P, tu_fsai_args_make(&a, 0.0, 3, 1.0, NULL), NULL);
    ck_assert_int_eq(G.nnz, P.n_rows);
    gs_csr_free(&G);
    gs_csr_free(&P), gs_csr_free(&N), gs_csr_free(&R);
}
END_TEST

/* MANIFEST rows: name, rows, kind, field (first `max` SPD matrices with at
 * most max_rows rows). */
typedef struct manifest_row {
    char name[64], kind[32], field[32];
    long rows, nnz;
} manifest_row;

static int manifest_spd(manifest_row *out, int max, long max_rows)
{
    char line[4096];
    FILE *f = tu_manifest_open();
    int count = 0;
    while (count < max && fgets(line, sizeof line, f)) {
        manifest_row m;
        char sym[32];
        long cols;
        if (sscanf(line, "%63s %ld %ld %ld %31s %31s %31s", m.name, &m.rows, &cols, &m.nnz, sym,
                   m.field, m.kind) != 7)
            continue;
        if (strcmp(m.kind, "SPD") == 0 && strcmp(m.field, "complex") != 0 && m.rows <= max_rows)
            out[count++] = m;
    }
    fclose(f);
    return count;
}

/* The same properties on every small real SPD matrix of the collection
 * (structural, power network, mass matrices; condition numbers up to 4e12),
 * without and with the postfilter. */
START_TEST(fsai_properties_on_real_spd_matrices)
{
    if (!tu_matrices_dir()) {
        printf("fsai_properties_on_real_spd_matrices: skipped (no ../shared/matrices; set "
               "GS_MATRICES)\n");
        return;
    }
    manifest_row rows[64];
    int count = manifest_spd(rows, 64, 1500), checked = 0;
    for (int c = 0; c < count; c++) {
        gs_csr A = tu_read_matrix(rows[c].name);
        const long k = A.nnz > 6000 ? 1 : 2; /* keep the suite fast on the denser ones */
        check_unfiltered(&A, 0.02, k, rows[c].name);
        tu_fsai_args a;
        gs_csr G = fsai_factor(&A, tu_fsai_args_make(&a, 0.02, k, 0.05, NULL), NULL);
        check_unit_diagonal(&A, &G, rows[c].name);
        gs_csr_free(&G);
        gs_params defaults = {0}; /* tau 0.05, k 3, delta 0.0035 */
        G = fsai_factor(&A, &defaults, NULL);
        check_unit_diagonal(&A, &G, rows[c].name);
        gs_csr_free(&G);
        gs_csr_free(&A);
        checked++;
    }
    ck_assert_int_ge(checked, 10);
}
END_TEST

/* ---- --max-row: the cap on the pattern ---- */

/* G, max_row and capped_rows of fsai on A (tau, k, delta, --max-row N;
 * N < 0: the default). */
static gs_csr fsai_capped(const gs_csr *A, double tau, long k, double delta, long N,
                          double *max_row, double *capped)
{
    tu_fsai_args a;
    char text[32];
    tu_fsai_args_make(&a, tau, k, delta, NULL);
    if (N >= 0) snprintf(text, sizeof text, "%ld", N), tu_fsai_arg_set(&a, "max-row", text);
    tu_pc_run run;
    gs_csr G = tu_pc_saved_factor(A, "fsai", &a.p, "G", &run);
    const gs_kv *mr = tu_pc_extra(run.pc, "max_row"), *cr = tu_pc_extra(run.pc, "capped_rows");
    ck_assert(mr && cr);
    if (max_row) *max_row = mr->num;
    if (capped) *capped = cr->num;
    tu_pc_release(&run);
    return G;
}

/* The kept off-diagonal columns of a long row i of S as documented, ranked
 * here without the setup's integer key: entries of A before entries outside
 * it, then larger |a_ij| / (sqrt(a_ii) sqrt(a_jj)), then smaller column.
 * out: the first N - 1, sorted by column. */
typedef struct ranked_entry {
    int in_a;
    double c;
    int32_t col;
} ranked_entry;

static int compare_documented(const void *x, const void *y)
{
    const ranked_entry *a = x, *b = y;
    if (a->in_a != b->in_a) return b->in_a - a->in_a;
    if (a->c != b->c) return a->c < b->c ? 1 : -1;
    return (a->col > b->col) - (a->col < b->col);
}

static int compare_col(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void expected_capped_row(const gs_csr *A, const gs_csr *S, int32_t i, long N, int32_t *out)
{
    const int64_t p0 = S->row_ptr[i], len = S->row_ptr[i + 1] - p0;
    ranked_entry *e = malloc((size_t)len * sizeof *e);
    ck_assert_ptr_nonnull(e);
    const double aii = A->val[gs_csr_find(A, i, i)];
    int64_t m = 0;
    for (int64_t t = 0; t < len; t++) {
        const int32_t j = S->col[p0 + t];
        if (j == i) continue;
        const int64_t q = gs_csr_find(A, i, j);
        const double ajj = A->val[gs_csr_find(A, j, j)];
        e[m].in_a = q >= 0;
        e[m].c = q >= 0 ? fabs(A->val[q]) / (sqrt(aii) * sqrt(ajj)) : 0.0;
        e[m++].col = j;
    }
    qsort(e, (size_t)m, sizeof *e, compare_documented);
    for (long t = 0; t < N - 1; t++) out[t] = e[t].col;
    qsort(out, (size_t)(N - 1), sizeof *out, compare_col);
    free(e);
}

/* fsai with --max-row N against the uncapped setup and the recursion S:
 * rows of S within N give the same row of G to the bit (same P_i); longer
 * rows have exactly N entries, their diagonal last and the N - 1 entries
 * ranked first by the documented key; (3.4) and diag(G A G^T) = I hold on
 * the capped pattern; the report names S's longest row and the rows cut. */
static void check_cap(const gs_csr *A, double tau, long k, long N, const char *what)
{
    char label[200];
    snprintf(label, sizeof label, "%s tau=%g k=%ld max-row=%ld", what, tau, k, N);
    gs_csr S = expected_pattern(A, tau, k);
    double max_row = 0, capped = 0, max_row0 = 0, capped0 = 0;
    gs_csr G = fsai_capped(A, tau, k, 0.0, N, &max_row, &capped);
    gs_csr G0 = fsai_capped(A, tau, k, 0.0, 0, &max_row0, &capped0);
    int32_t *want = malloc(((size_t)N + 1) * sizeof *want);
    ck_assert_ptr_nonnull(want);
    int64_t longest = 0, cut = 0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        const int64_t len = S.row_ptr[i + 1] - S.row_ptr[i], g0 = G.row_ptr[i];
        const int64_t glen = G.row_ptr[i + 1] - g0;
        if (len > longest) longest = len;
        if (len <= N) {
            ck_assert_msg(glen == len, "%s: row %d (%lld <= N entries) has %lld in G", label,
                          (int)i + 1, (long long)len, (long long)glen);
            for (int64_t t = 0; t < len; t++)
                ck_assert_msg(G.col[g0 + t] == G0.col[G0.row_ptr[i] + t] &&
                                  G.val[g0 + t] == G0.val[G0.row_ptr[i] + t],
                              "%s: row %d within the cap differs from the uncapped G at "
                              "entry %lld", label, (int)i + 1, (long long)t + 1);
            continue;
        }
        cut++;
        ck_assert_msg(glen == N, "%s: row %d (%lld entries in S) has %lld in G, want %ld",
                      label, (int)i + 1, (long long)len, (long long)glen, N);
        ck_assert_msg(G.col[g0 + N - 1] == i, "%s: row %d lost its diagonal", label, (int)i + 1);
        expected_capped_row(A, &S, i, N, want);
        for (long t = 0; t < N - 1; t++)
            ck_assert_msg(G.col[g0 + t] == want[t],
                          "%s: row %d keeps column %d where the documented ranking keeps %d",
                          label, (int)i + 1, (int)G.col[g0 + t] + 1, (int)want[t] + 1);
    }
    ck_assert_msg(max_row == (double)longest && max_row0 == (double)longest,
                  "%s: max_row %g (uncapped %g), S's longest row %lld", label, max_row, max_row0,
                  (long long)longest);
    ck_assert_msg(capped == (double)cut && capped0 == 0.0, "%s: capped_rows %g, want %lld",
                  label, capped, (long long)cut);
    check_unit_diagonal(A, &G, label);
    check_local_systems(A, &G, label);
    free(want);
    gs_csr_free(&S), gs_csr_free(&G), gs_csr_free(&G0);
}

START_TEST(fsai_max_row_keeps_the_strongest_couplings)
{
    tu_rng r = tu_rng_seed(4662);
    gs_csr R = tu_random_spd(&r, 160, 0.03);             /* distinct keys, dense rows */
    gs_csr H = tu_hub_laplacian(200, 3, 3, 1.0, 1);         /* ties: equal weights */
    gs_csr W = tu_hub_laplacian(240, 2, 2, 0.0, 2);         /* random hub weights */
    const long caps[] = {1, 2, 3, 7, 20, 45};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        check_cap(&R, 0.0, 1, caps[c], "random SPD");
        check_cap(&R, 0.001, 2, caps[c], "random SPD");
        check_cap(&H, 0.0, 1, caps[c], "hub Laplacian, equal weights");
        check_cap(&H, 0.0, 2, caps[c], "hub Laplacian, equal weights");
        check_cap(&W, 0.0, 3, caps[c], "hub Laplacian, random weights");
    }
    gs_csr_free(&R), gs_csr_free(&H), gs_csr_free(&W);
}
END_TEST

/* --max-row 0 is no cap: the same G to the bit as a cap above every row,
 * and S is the recursion's pattern; --max-row 1 keeps the diagonal alone,
 * G = diag(A)^-1/2 (Jacobi). With the postfilter, the capped G still has
 * diag(G A G^T) = I. */
START_TEST(fsai_max_row_zero_and_one)
{
    tu_rng r = tu_rng_seed(77);
    gs_csr A = tu_random_spd(&r, 150, 0.03);
    double max_row = 0, capped = 0;
    gs_csr G0 = fsai_capped(&A, 0.001, 2, 0.0, 0, &max_row, &capped);
    ck_assert(max_row > 20 && capped == 0);
    gs_csr Gbig = fsai_capped(&A, 0.001, 2, 0.0, (long)max_row, NULL, &capped);
    ck_assert(capped == 0);
    tu_assert_same_csr(&G0, &Gbig, "--max-row 0 against a cap at the longest row");
    gs_csr S = expected_pattern(&A, 0.001, 2);
    check_same_pattern(&S, &G0, "--max-row 0");
    gs_csr G1 = fsai_capped(&A, 0.001, 2, 0.0, 1, NULL, &capped);
    ck_assert_int_eq(G1.nnz, A.n_rows);
    ck_assert(capped > 0);
    for (int32_t i = 0; i < A.n_rows; i++)
        ck_assert_double_eq_tol(G1.val[i], 1.0 / sqrt(A.val[gs_csr_find(&A, i, i)]),
                                4 * U_ROUND * G1.val[i]);
    gs_csr Gf = fsai_capped(&A, 0.001, 2, 0.0035, 10, NULL, &capped);
    check_unit_diagonal(&A, &Gf, "--max-row 10 with the postfilter");
    for (int32_t i = 0; i < A.n_rows; i++) ck_assert(Gf.row_ptr[i + 1] - Gf.row_ptr[i] <= 10);
    gs_csr_free(&G0), gs_csr_free(&Gbig), gs_csr_free(&S), gs_csr_free(&G1), gs_csr_free(&Gf);
    gs_csr_free(&A);
}
END_TEST

/* The default cap is above S's longest row on the paper's kind of problem
 * with its Table 5 settings (docs/fsai.md, "Capping the pattern"): S's
 * longest row (max_row, reported before the cap; --max-row 1 keeps the
 * setup cheap) against the declared default. */
START_TEST(fsai_max_row_default_spares_the_papers_settings)
{
    const gs_param_decl *d = gs_param_find(gs_fsai_params, "max-row");
    ck_assert_ptr_nonnull(d);
    const double cap = atof(d->default_value);
    const struct {
        const char *spec;
        double tau;
        long k;
    } cases[] = {{"poisson3d:20", 0.01, 9},  {"poisson3d:20", 0.025, 6}, {"poisson3d:20", 0.02, 7},
                 {"poisson3d:20", 0.05, 5},  {"aniso3d:20", 0.01, 9}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gs_csr A = tu_generated(cases[c].spec);
        double max_row = 0;
        gs_csr G = fsai_capped(&A, cases[c].tau, cases[c].k, 0.0, 1, &max_row, NULL);
        ck_assert_msg(max_row <= cap, "%s tau=%g k=%ld: S's longest row %g > the default cap %g",
                      cases[c].spec, cases[c].tau, cases[c].k, max_row, cap);
        gs_csr_free(&G);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- --time-limit inside the setup ---- */

/* A deadline already past stops the setup at its first stage end; one that
 * passes during the factorisation stops it there, within a row or so per
 * thread, long before the stage would end (the arrow's rows hold up to 1000
 * unknowns: the whole factorisation is about 1000^4 / 12 = 8e10 flops,
 * several seconds on these cores; one row 3e8). Either way:
 * GS_ERR_TIME_LIMIT naming the stage, no preconditioner, and (under ASan)
 * nothing leaked. */
START_TEST(fsai_stops_at_the_time_limit)
{
    gs_csr T = tu_arrow_spd(1000);
    const double limits[] = {-1.0, 0.2};
    for (int t = 0; t < 2; t++) {
        gs_engine *e = NULL;
        gs_mat *Ae = NULL;
        gs_pc *pc = NULL;
        gs_error err = {0};
        tu_fsai_args a;
        tu_fsai_args_make(&a, 0.0, 2, 0.0, NULL);
        tu_fsai_arg_set(&a, "max-row", "0");
        ck_assert(gs_engine_cpu_create(&e, NULL) == GS_OK);
        ck_assert(e->ops->mat_create(e, &T, GS_FP64, &Ae) == GS_OK);
        gs_pc_hook hook = {0};
        const double t0 = gs_now();
        hook.deadline = t0 + limits[t];
        const int status = gs_pc_create_hooked(gs_pc_find("fsai"), e, &a.p, &T, Ae, &hook, &pc, &err);
        const double took = gs_now() - t0;
        ck_assert_msg(status == GS_ERR_TIME_LIMIT, "limit %g: %s: %s", limits[t],
                      gs_status_name(status), err.msg);
        ck_assert_ptr_null(pc);
        ck_assert_msg(strstr(err.msg, t ? "factorisation" : "prefilter") != NULL,
                      "limit %g: '%s'", limits[t], err.msg);
        ck_assert_msg(t == 0 || took < 2.0, "stopped after %.3g s, not within the stage", took);
        e->ops->mat_destroy(e, Ae);
        gs_engine_destroy(e);
    }
    gs_csr_free(&T);
}
END_TEST

/* ---- apply, precision, report ---- */

/* z = G^T (G r) through the engine against the host product; the apply's
 * dot slot is r.z. Host and engine sum the same terms, in possibly another
 * order: |difference| <= 2 γ_{2r} (|G^T| |G| |r|) per entry (twice the
 * bound for two products). fp32 storage rounds each g_ij once more (2^-24
 * relative, u_32): the bound then uses u_32 for that term. */
static void check_apply(const gs_csr *A, const char *precision)
{
    tu_fsai_args a;
    tu_fsai_args_make(&a, 0.02, 2, 0.05, NULL);
    tu_fsai_arg_set(&a, "precond-precision", precision);
    tu_pc_run run;
    tu_pc_build_ok(A, "fsai", &a.p, &run);
    gs_csr G = {0};
    tu_pc_saved_matrix(run.pc, "G", &G);
    const int32_t n = A->n_rows, rg = tu_max_row_length(&G);
    double *r = malloc((size_t)n * sizeof *r), *t = malloc((size_t)n * sizeof *t);
    double *z = malloc((size_t)n * sizeof *z), *tz = malloc((size_t)n * sizeof *tz);
    double *ta = calloc((size_t)n, sizeof *ta), *za = calloc((size_t)n, sizeof *za);
    ck_assert(r && t && z && tz && ta && za);
    tu_rng rng = tu_rng_seed(7);
    for (int32_t i = 0; i < n; i++) r[i] = 2 * tu_uniform(&rng) - 1;
    gs_csr_spmv(&G, r, t);
    for (int32_t i = 0; i < n; i++) tz[i] = 0;
    for (int32_t i = 0; i < n; i++)                                 /* tz = G^T t */
        for (int64_t p = G.row_ptr[i]; p < G.row_ptr[i + 1]; p++) {
            tz[G.col[p]] += G.val[p] * t[i];
            ta[i] += fabs(G.val[p] * r[G.col[p]]);
        }
    for (int32_t i = 0; i < n; i++)
        for (int64_t p = G.row_ptr[i]; p < G.row_ptr[i + 1]; p++)
            za[G.col[p]] += fabs(G.val[p]) * ta[i];                 /* |G^T| |G| |r| */
    gs_engine *e = run.eng;
    gs_vec *vr = NULL, *vz = NULL;
    ck_assert_int_eq(e->ops->vec_create(e, n, &vr), GS_OK);
    ck_assert_int_eq(e->ops->vec_create(e, n, &vz), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, vr, r), GS_OK);
    ck_assert_int_eq(gs_pc_apply_dot(run.pc, vr, vz, 0), GS_OK);
    ck_assert_int_eq(e->ops->vec_download(e, vz, z), GS_OK);
    double rz_engine, rz = 0, rz_abs = 0;
    ck_assert_int_eq(e->ops->scalar_read(e, 0, 1, &rz_engine), GS_OK);
    const double u_store = strcmp(precision, "single") == 0 ? 0x1p-24 : U_ROUND;
    const double rel = 2.0 * (4.0 * rg * U_ROUND + 2.0 * u_store);
    for (int32_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(z[i] - tz[i]) <= rel * za[i], "%s: z_%d = %.17g, host %.17g",
                      precision, (int)i + 1, z[i], tz[i]);
        rz += r[i] * z[i], rz_abs += fabs(r[i]) * za[i];
    }
    ck_assert_msg(fabs(rz_engine - rz) <= (rel + 2.0 * n * U_ROUND) * rz_abs,
                  "%s: r.z %.17g, host %.17g", precision, rz_engine, rz);
    e->ops->vec_destroy(e, vr), e->ops->vec_destroy(e, vz);
    free(r), free(t), free(z), free(tz), free(ta), free(za);
    gs_csr_free(&G);
    tu_pc_release(&run);
}

START_TEST(fsai_apply_is_gt_g)
{
    gs_csr A = tu_generated("poisson3d27:5");
    check_apply(&A, "double");
    check_apply(&A, "single");
    gs_csr_free(&A);
}
END_TEST

START_TEST(fsai_reports_what_it_built)
{
    gs_csr A = tu_generated("poisson3d:8");
    tu_fsai_args a;
    tu_pc_run run;
    tu_pc_build_ok(&A, "fsai", tu_fsai_args_make(&a, 0.02, 3, 0.05, NULL), &run);
    gs_pc *pc = run.pc;
    const char *stages[] = {"prefilter", "pattern", "factorisation", "postfilter",
                            "transpose", "upload", NULL};
    tu_assert_stages(pc, stages);
    ck_assert_ptr_nonnull(strstr(pc->description, "tau=0.02 k=3 delta=0.05"));
    const gs_kv *hat = tu_pc_extra(pc, "mu_G_hat"), *mu = tu_pc_extra(pc, "mu_G");
    ck_assert(hat && mu);
    ck_assert_double_eq_tol(mu->num, (double)pc->nnz / (double)A.nnz, 1e-12);
    ck_assert(hat->num > mu->num); /* delta = 0.05 drops entries of poisson3d's G */
    ck_assert(pc->symmetric);
    gs_csr G = {0};
    tu_pc_saved_matrix(pc, "G", &G);
    /* G and G^T once each (same size), r and t read, t and z written */
    ck_assert_double_eq(pc->apply_bytes, 2 * gs_csr_stream_bytes(&G, GS_FP64) + 32.0 * A.n_rows);
    gs_csr_free(&G);
    tu_pc_release(&run);
    gs_csr_free(&A);
    /* tau above every normalised coupling (1/26 in the 27-point stencil) leaves
     * G = diag(A)^-1/2: M = G^T G is Jacobi */
    A = tu_generated("poisson3d27:5");
    gs_params none = {0};
    G = fsai_factor(&A, &none, NULL);
    ck_assert_int_eq(G.nnz, A.n_rows);
    for (int32_t i = 0; i < A.n_rows; i++)
        ck_assert_double_eq_tol(G.val[i], 1.0 / sqrt(26.0), 4 * U_ROUND);
    gs_csr_free(&G);
    gs_csr_free(&A);
}
END_TEST

/* ---- convergence against Jacobi ---- */

static long cg_iterations(const gs_csr *A, const char *pc, const gs_params *p)
{
    gs_krylov_result res;
    gs_error err = {0};
    ck_assert_msg(tu_pc_solve(A, pc, p, "cg", 20000, &res, &err) == GS_OK, "%s: %s", pc, err.msg);
    ck_assert_msg(res.reason == GS_REASON_CONVERGED, "%s: CG did not converge (%s)", pc,
                  gs_reason_name(res.reason));
    long its = res.iterations;
    gs_krylov_result_free(&res);
    return its;
}

START_TEST(fsai_needs_fewer_iterations_than_jacobi)
{
    gs_params none = {0};
    tu_fsai_args single, a;
    /* the 27-point stencil's couplings |a_ij| / sqrt(a_ii a_jj) = 1/26 are below
     * the default tau (0.05), which would leave G diagonal (= Jacobi, see
     * fsai_reports_what_it_built): it runs with tau = 0.02 */
    const char *specs[] = {"poisson3d:16", "aniso3d:12", "poisson3d27:10"};
    const double taus[] = {-1, -1, 0.02};
    for (int s = 0; s < 3; s++) {
        gs_csr A = tu_generated(specs[s]);
        long jac = cg_iterations(&A, "jacobi", &none);
        long fsai = cg_iterations(&A, "fsai", tu_fsai_args_make(&a, taus[s], -1, -1, NULL));
        tu_fsai_args_make(&single, taus[s], -1, -1, NULL);
        tu_fsai_arg_set(&single, "precond-precision", "single");
        long fsai32 = cg_iterations(&A, "fsai", &single.p);
        ck_assert_msg(fsai < jac && fsai32 < jac, "%s: fsai %ld (single %ld), jacobi %ld",
                      specs[s], fsai, fsai32, jac);
        gs_csr_free(&A);
    }
    if (!tu_matrices_dir()) {
        printf("fsai_needs_fewer_iterations_than_jacobi: real matrices skipped (no "
               "../shared/matrices)\n");
        return;
    }
    /* SPD matrices of MANIFEST (structural, power network, ocean model; cond up
     * to 2e11), with the defaults */
    const char *names[] = {"bcsstk05", "bcsstk08", "bcsstk10", "bcsstk20",
                           "bcsstk21", "nos3",     "1138_bus", "plat362"};
    for (size_t s = 0; s < sizeof names / sizeof names[0]; s++) {
        gs_csr A = tu_read_matrix(names[s]);
        long jac = cg_iterations(&A, "jacobi", &none);
        long fsai = cg_iterations(&A, "fsai", &none);
        ck_assert_msg(fsai < jac, "%s: fsai %ld, jacobi %ld", names[s], fsai, jac);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- bad input ---- */

static void expect_failure(const gs_csr *A, const gs_params *p, int status, const char *fragment,
                           const char *fragment2)
{
    tu_pc_expect_failure(A, "fsai", p, status, fragment, fragment2);
}

/* Tridiagonal n x n, diagonal 2, off-diagonal -1 (SPD). */
static gs_csr tridiagonal(int32_t n)
{
    int32_t *ri = malloc(3 * (size_t)n * sizeof *ri), *ci = malloc(3 * (size_t)n * sizeof *ci);
    double *v = malloc(3 * (size_t)n * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int32_t i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = i, v[nz++] = 2.0;
        if (i > 0) ri[nz] = i, ci[nz] = i - 1, v[nz++] = -1.0;
        if (i + 1 < n) ri[nz] = i, ci[nz] = i + 1, v[nz++] = -1.0;
    }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, v, &A, &err) == GS_OK);
    free(ri), free(ci), free(v);
    return A;
}

START_TEST(fsai_rejects_bad_input)
{
    gs_params none = {0};
    tu_fsai_args a;
    gs_error err = {0};
    /* nonsymmetric: convection-diffusion */
    gs_csr C = tu_generated("convdiff3d:5");
    expect_failure(&C, &none, GS_ERR_INPUT, "fsai needs a symmetric matrix", NULL);
    gs_csr_free(&C);
    /* non-square: 3 x 4 */
    {
        const int32_t ri[] = {0, 1, 2, 0}, ci[] = {0, 1, 2, 3};
        const double v[] = {1, 1, 1, 1};
        gs_csr R = tu_from_triplets(3, 4, 4, ri, ci, v);
        expect_failure(&R, &none, GS_ERR_INPUT, "square", "3 x 4");
        gs_csr_free(&R);
    }
    /* zero, missing and NaN diagonal entries, named by row */
    gs_csr T = tridiagonal(50);
    T.val[gs_csr_find(&T, 16, 16)] = 0.0;
    expect_failure(&T, &none, GS_ERR_INPUT, "diagonal", "row 17");
    T.val[gs_csr_find(&T, 16, 16)] = NAN;
    expect_failure(&T, &none, GS_ERR_INPUT, "diagonal", "row 17");
    T.val[gs_csr_find(&T, 16, 16)] = 2.0;
    {
        /* T without its diagonal entry in row 9, rebuilt from triplets */
        gs_csr M = {0};
        int32_t *ri = malloc((size_t)T.nnz * sizeof *ri), *ci = malloc((size_t)T.nnz * sizeof *ci);
        double *v = malloc((size_t)T.nnz * sizeof *v);
        ck_assert(ri && ci && v);
        int64_t nz = 0;
        for (int32_t i = 0; i < T.n_rows; i++)
            for (int64_t p = T.row_ptr[i]; p < T.row_ptr[i + 1]; p++)
                if (!(i == 8 && T.col[p] == 8)) ri[nz] = i, ci[nz] = T.col[p], v[nz++] = T.val[p];
        ck_assert(gs_csr_from_coo(T.n_rows, T.n_cols, nz, ri, ci, v, &M, &err) == GS_OK);
        expect_failure(&M, &none, GS_ERR_INPUT, "missing", "row 9");
        free(ri), free(ci), free(v);
        gs_csr_free(&M);
    }
    /* nonsymmetric values on a symmetric pattern: the first offending entry named */
    T.val[gs_csr_find(&T, 11, 10)] = -1.5;
    expect_failure(&T, &none, GS_ERR_INPUT, "fsai needs a symmetric matrix", "row 11, column 12");
    T.val[gs_csr_find(&T, 11, 10)] = -1.0;
    /* a negative diagonal entry: not SPD, named by row */
    T.val[gs_csr_find(&T, 29, 29)] = -2.0;
    expect_failure(&T, &none, GS_ERR_NUMERIC, "not positive definite", "row 30");
    T.val[gs_csr_find(&T, 29, 29)] = 2.0;
    /* symmetric, positive diagonal, indefinite: a_{37,36} = a_{36,37} = -3 makes
     * row 37's local system [[2,-3],[-3,2]] (k = 1) indefinite at its pivot 2 */
    T.val[gs_csr_find(&T, 36, 35)] = T.val[gs_csr_find(&T, 35, 36)] = -3.0;
    expect_failure(&T, tu_fsai_args_make(&a, 0.0, 1, 0.0, NULL), GS_ERR_NUMERIC, "row 37",
                   "not positive definite");
    expect_failure(&T, &none, GS_ERR_NUMERIC, "not positive definite", "row 37");
    gs_csr_free(&T);
    /* bad parameter values, named by --param (and the value, where given) */
    static const tu_bad_param bad[] = {
        {"tau", "-0.1", "-0.1"}, {"delta", "-1e-3", NULL},
        {"tau", "1.5", NULL},    {"k", "0", NULL},
        {"k", "31", NULL},       {"delta", "2", NULL},
        {"k", "two", "two"},     {"precond-precision", "half", NULL},
        {"max-row", "-1", "-1"}, {"max-row", "2.5", NULL},
        {"max-row", "3000000000", NULL}, {"max-row", "many", "many"},
        {"restart-fsai", "1", NULL}, {NULL, NULL, NULL}};
    gs_csr P = tu_generated("poisson3d:4");
    tu_pc_expect_bad_params(&P, "fsai", bad);
    gs_csr_free(&P);
}
END_TEST

/* Real non-SPD symmetric matrices of the collection: refused, never a crash. */
START_TEST(fsai_rejects_real_non_spd_matrices)
{
    if (!tu_matrices_dir()) {
        printf("fsai_rejects_real_non_spd_matrices: skipped (no ../shared/matrices)\n");
        return;
    }
    gs_params none = {0};
    struct {
        const char *name;
        int status;
        const char *fragment;
    } cases[] = {
        {"sherman1", GS_ERR_NUMERIC, "row 1"},         /* negative definite: a_11 < 0 */
        {"bcsstm13", GS_ERR_INPUT, "diagonal"},        /* semi-definite, zero diagonal */
        {"zenios", GS_ERR_INPUT, "row 1"},             /* every diagonal entry 0 */
        {"reorientation_1", GS_ERR_NUMERIC, "row 1"},  /* KKT: a_11 < 0 */
        {"tuma1", GS_ERR_INPUT, "diagonal"},           /* saddle point: missing diagonal */
        {"can_1072", GS_ERR_NUMERIC, "not positive definite"}, /* pattern: all ones */
        {"orsirr_1", GS_ERR_INPUT, "symmetric"},       /* nonsymmetric: entry named */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gs_csr A = tu_read_matrix(cases[c].name);
        expect_failure(&A, &none, cases[c].status, cases[c].fragment, "row");
        gs_csr_free(&A);
    }
}
END_TEST

/* Every allocation of the setup can fail: GS_ERR_NOMEM, never a crash
 * (run under valgrind/ASan for the leaks). */
START_TEST(fsai_survives_allocation_failures)
{
    tu_fsai_args a;
    const gs_params *p = tu_fsai_args_make(&a, 0.02, 2, 0.05, NULL);
    tu_assert_allocation_failures("poisson3d:5", "fsai", p, 10);
    tu_fsai_arg_set(&a, "max-row", "4"); /* the cap's allocations too (rows of up to 13 cut) */
    tu_assert_allocation_failures("poisson3d:5", "fsai", &a.p, 12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_fsai");
    TCase *dense = tu_add_tcase(s, "dense_cholesky", 0);
    tcase_add_test(dense, dense_cholesky_factor_and_solve);
    tcase_add_test(dense, dense_cholesky_reports_the_failing_pivot);
    tcase_add_test(dense, dense_cholesky_blocked_envelope_is_the_plain_loop);
    TCase *prop = tu_add_tcase(s, "properties", 120);
    tcase_add_test(prop, fsai_properties_on_generated_problems);
    tcase_add_test(prop, fsai_properties_on_random_spd_matrices);
    tcase_add_test(prop, fsai_postfilter_is_the_papers_3_13);
    tcase_add_test(prop, fsai_properties_on_real_spd_matrices);
    tcase_add_test(prop, fsai_apply_is_gt_g);
    tcase_add_test(prop, fsai_reports_what_it_built);
    TCase *cap = tu_add_tcase(s, "max_row", 120);
    tcase_add_test(cap, fsai_max_row_keeps_the_strongest_couplings);
    tcase_add_test(cap, fsai_max_row_zero_and_one);
    tcase_add_test(cap, fsai_max_row_default_spares_the_papers_settings);
    tcase_add_test(cap, fsai_stops_at_the_time_limit);
    TCase *conv = tu_add_tcase(s, "convergence", 120);
    tcase_add_test(conv, fsai_needs_fewer_iterations_than_jacobi);
    TCase *bad = tu_add_tcase(s, "bad_input", 60);
    tcase_add_test(bad, fsai_rejects_bad_input);
    tcase_add_test(bad, fsai_rejects_real_non_spd_matrices);
    tcase_add_test(bad, fsai_survives_allocation_failures);
    return tu_run_suite(s);
}
