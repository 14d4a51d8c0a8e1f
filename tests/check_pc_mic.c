/* check_pc_mic.c - the mic preconditioner (src/precond/pc_mic.c), M = L D L^T, by
 * its defining properties: off the diagonal (L D L^T)_ij = a_ij on A's
 * pattern; on it, the dropped fill (the entries of L D L^T outside A's
 * pattern) moved to the diagonal times omega, so that omega = 1 preserves
 * row sums (L D L^T e = A e) and omega = 0 (IC(0)) reproduces a_ii; the
 * apply solves M z = r; fewer CG iterations than Jacobi; bad input named. */
#include "gen.h"
#include "timer.h"
#include "testutil.h"

#define EPS DBL_EPSILON

/* ---- the preconditioner and what it saves ---- */

typedef struct factors {
    gs_csr L, LT;
    double *d;
} factors;

/* --save-precond: PREFIX_L.mtx (unit lower, diagonal stored), PREFIX_D.mtx. */
static void save_and_read(gs_pc *pc, factors *f)
{
    char prefix[512], path[600];
    gs_error err = {0};
    int64_t n = 0;
    tu_tmpname(prefix, sizeof prefix, "");
    ck_assert_msg(pc->save(pc, prefix, &err) == GS_OK, "save: %s", err.msg);
    snprintf(path, sizeof path, "%s_L.mtx", prefix);
    ck_assert_msg(gs_mm_read_csr(path, &f->L, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    snprintf(path, sizeof path, "%s_D.mtx", prefix);
    ck_assert_msg(gs_mm_read_vector(path, &f->d, &n, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    remove(prefix);
    ck_assert_int_eq(n, f->L.n_rows);
    ck_assert(gs_csr_transpose(&f->L, &f->LT, NULL) == GS_OK);
    for (int32_t i = 0; i < f->L.n_rows; i++) {
        const int64_t last = f->L.row_ptr[i + 1] - 1;
        ck_assert_msg(f->L.col[last] == i && f->L.val[last] == 1.0, "l_%d,%d is not a stored 1",
                      i + 1, i + 1);
        ck_assert_msg(f->d[i] > 0, "d_%d = %g", i + 1, f->d[i]);
    }
}

static void factors_free(factors *f)
{
    gs_csr_free(&f->L), gs_csr_free(&f->LT);
    free(f->d);
}

static factors factor_ok(const gs_csr *A, const char *omega, const char *shift)
{
    const char *kv[] = {"omega", omega, "mic-shift", shift, NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    factors f;
    tu_pc_build_ok(A, "mic", &p, &r);
    save_and_read(r.pc, &f);
    tu_pc_release(&r);
    return f;
}

/* ---- the defining property ---- */

/* Row i of P = L D L^T: acc[j] = sum_k l_ik d_k l_jk, mag[j] the same sum
 * of absolute values, cnt[j] its number of terms; touched lists the j. */
typedef struct product_row {
    double *acc, *mag;
    int64_t *cnt;
    int32_t *touched, count;
} product_row;

static void product_row_compute(const factors *f, int32_t i, product_row *pr)
{
    pr->count = 0;
    for (int64_t p = f->L.row_ptr[i]; p < f->L.row_ptr[i + 1]; p++) {
        const int32_t k = f->L.col[p];
        const double lik_dk = f->L.val[p] * f->d[k];
        for (int64_t q = f->LT.row_ptr[k]; q < f->LT.row_ptr[k + 1]; q++) {
            const int32_t j = f->LT.col[q];
            if (pr->cnt[j] == 0) pr->touched[pr->count++] = j;
            pr->acc[j] += lik_dk * f->LT.val[q];
            pr->mag[j] += fabs(lik_dk * f->LT.val[q]);
            pr->cnt[j]++;
        }
    }
}

static void product_row_clear(product_row *pr)
{
    for (int32_t t = 0; t < pr->count; t++) {
        const int32_t j = pr->touched[t];
        pr->acc[j] = pr->mag[j] = 0, pr->cnt[j] = 0;
    }
}

/* Checks, for every row i, with F = entries of L D L^T outside A's pattern:
 *   (L D L^T)_ij = a_ij                       (i != j, (i, j) in A's pattern)
 *   (L D L^T)_ii = (1 + X) a_ii - omega sum_j F_ij.
 * Rounding: every term of the factorisation that reaches row i is one of
 * the products l_ik d_k l_jk summed in acc (and the diagonal collects all of
 * the row's dropped ones), each accumulation adding at most one rounding of
 * the running value: |error| <= gamma_K * (magnitudes) with K the number of
 * terms; the product evaluated here adds as much again. So bound =
 * 8 K eps (sum of |terms| + |target|), K = cnt[j] off the diagonal and the
 * row's total count on it. */
static void check_ldlt(const gs_csr *A, const factors *f, double omega, double shift,
                       const char *what)
{
    const int32_t n = A->n_rows;
    product_row pr = {calloc(n, sizeof(double)), calloc(n, sizeof(double)),
                      calloc(n, sizeof(int64_t)), calloc(n, sizeof(int32_t)), 0};
    ck_assert(pr.acc && pr.mag && pr.cnt && pr.touched);
    for (int32_t i = 0; i < n; i++) {
        product_row_compute(f, i, &pr);
        double outside = 0, row_mag = 0, aii = 0;
        int64_t row_terms = 0;
        for (int32_t t = 0; t < pr.count; t++) {
            const int32_t j = pr.touched[t];
            row_mag += pr.mag[j], row_terms += pr.cnt[j];
            if (gs_csr_find(A, i, j) < 0) outside += pr.acc[j];
        }
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const int32_t j = A->col[p];
            if (j == i) {
                aii = A->val[p];
                continue;
            }
            const double bound = 8.0 * (double)(pr.cnt[j] + 1) * EPS * (pr.mag[j] + fabs(A->val[p]));
            ck_assert_msg(fabs(pr.acc[j] - A->val[p]) <= bound,
                          "%s: (L D L^T)_%d,%d = %.17g, a_ij = %.17g", what, i + 1, j + 1,
                          pr.acc[j], A->val[p]);
        }
        const double want = (1.0 + shift) * aii - omega * outside;
        const double bound = 8.0 * (double)(row_terms + 1) * EPS * (row_mag + fabs(aii) * (1 + shift));
        ck_assert_msg(fabs(pr.acc[i] - want) <= bound,
                      "%s: (L D L^T)_%d,%d = %.17g, expected a_ii - omega * fill = %.17g "
                      "(bound %g)", what, i + 1, i + 1, pr.acc[i], want, bound);
        product_row_clear(&pr);
    }
    free(pr.acc), free(pr.mag), free(pr.cnt), free(pr.touched);
}

/* The row sums themselves, as MIC is usually stated: L (D (L^T e)) = A e
 * (+ X diag(A) e with a shift), evaluated with three products; bound as
 * above with K_i = sum over k in row i of L of nnz(column k of L). */
static void check_row_sums(const gs_csr *A, const factors *f, double shift, const char *what)
{
    const int32_t n = A->n_rows;
    double *u = malloc(n * sizeof(double)), *umag = malloc(n * sizeof(double));
    ck_assert(u && umag);
    for (int32_t k = 0; k < n; k++) { /* u = D L^T e, row k of L^T = column k of L */
        double s = 0, m = 0;
        for (int64_t q = f->LT.row_ptr[k]; q < f->LT.row_ptr[k + 1]; q++)
            s += f->LT.val[q], m += fabs(f->LT.val[q]);
        u[k] = f->d[k] * s, umag[k] = f->d[k] * m;
    }
    for (int32_t i = 0; i < n; i++) {
        double y = 0, ymag = 0, ae = 0, aemag = 0, aii = 0;
        int64_t terms = 0;
        for (int64_t p = f->L.row_ptr[i]; p < f->L.row_ptr[i + 1]; p++) {
            const int32_t k = f->L.col[p];
            y += f->L.val[p] * u[k], ymag += fabs(f->L.val[p]) * umag[k];
            terms += f->LT.row_ptr[k + 1] - f->LT.row_ptr[k];
        }
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            ae += A->val[p], aemag += fabs(A->val[p]);
            if (A->col[p] == i) aii = A->val[p];
        }
        ae += shift * aii;
        const double bound = 8.0 * (double)(terms + 1) * EPS * (ymag + aemag * (1 + shift));
        ck_assert_msg(fabs(y - ae) <= bound, "%s: row %d: (L D L^T e)_i = %.17g, (A e)_i = %.17g",
                      what, i + 1, y, ae);
    }
    free(u), free(umag);
}

static void check_mic_on(const gs_csr *A, const char *omega, const char *shift, const char *what)
{
    char label[256];
    factors f = factor_ok(A, omega, shift);
    snprintf(label, sizeof label, "%s omega=%s shift=%s", what, omega, shift);
    /* L is A's lower triangle's pattern */
    gs_csr T;
    ck_assert(gs_csr_lower(A, 1, &T, NULL) == GS_OK);
    ck_assert_int_eq(T.nnz, f.L.nnz);
    for (int64_t p = 0; p < T.nnz; p++) ck_assert(T.col[p] == f.L.col[p]);
    gs_csr_free(&T);
    check_ldlt(A, &f, atof(omega), atof(shift), label);
    if (atof(omega) == 1.0) check_row_sums(A, &f, atof(shift), label);
    factors_free(&f);
}

/* check_mic_on (no shift) on each generated problem of specs, then on each
 * real matrix of names (both NULL-terminated) while the folder is there. */
static void check_mic_on_each(const char *const *specs, const char *const *names,
                              const char *omega)
{
    for (int s = 0; specs[s]; s++) {
        gs_csr A = tu_generated(specs[s]);
        check_mic_on(&A, omega, "0", specs[s]);
        gs_csr_free(&A);
    }
    for (int m = 0; names[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        check_mic_on(&A, omega, "0", names[m]);
        gs_csr_free(&A);
    }
}

START_TEST(mic_preserves_row_sums)
{
    const char *specs[] = {"poisson3d:8", "poisson3d:12", "aniso3d:9x6x5", "poisson3d27:5", NULL};
    /* real SPD matrices on which MIC(0) has positive pivots */
    const char *names[] = {"nos4", "gr_30_30", "bcsstk22", "mesh1e1", "bcsstk02", NULL};
    check_mic_on_each(specs, names, "1");
}
END_TEST

START_TEST(ic0_reproduces_a_on_its_pattern)
{
    const char *specs[] = {"poisson3d:8", "aniso3d:7", "poisson3d27:5", NULL};
    const char *names[] = {"1138_bus", "nos3", "bcsstm12", "lund_a", "bcsstk16", "s3rmt3m3", NULL};
    check_mic_on_each(specs, names, "0");
}
END_TEST

/* omega in between and a shift: the same identity with (1 + X) a_ii and
 * (1 - omega) of the fill left in the row sums. 1138_bus breaks down with
 * omega = 1 and no shift (a non-M-matrix); X = 0.1 cures it. */
START_TEST(relaxed_and_shifted)
{
    gs_csr A = tu_generated("poisson3d:7");
    check_mic_on(&A, "0.5", "0", "poisson3d:7");
    check_mic_on(&A, "1", "0.25", "poisson3d:7");
    gs_csr_free(&A);
    if (!tu_real_matrix("1138_bus", &A)) return;
    check_mic_on(&A, "1", "0.1", "1138_bus");
    const char *kv[] = {"mic-shift", "0.1", NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    tu_pc_build_ok(&A, "mic", &p, &r);
    const gs_kv *shift = tu_pc_extra(r.pc, "shift");
    ck_assert(shift && shift->num == 0.1);
    tu_pc_release(&r);
    gs_csr_free(&A);
}
END_TEST

/* ---- the apply: z solves L D L^T z = r ---- */

START_TEST(apply_solves_ldlt)
{
    const char *specs[] = {"poisson3d:9", "aniso3d:8"};
    for (int s = 0; s < 2; s++) {
        gs_csr A = tu_generated(specs[s]);
        const int32_t n = A.n_rows;
        gs_params p = {0};
        tu_pc_run r;
        factors f;
        tu_pc_build_ok(&A, "mic", &p, &r);
        save_and_read(r.pc, &f);
        double *rhs = malloc(n * sizeof(double)), *z = malloc(n * sizeof(double));
        double *u = malloc(n * sizeof(double)), *umag = malloc(n * sizeof(double));
        tu_rng g = tu_rng_seed(71 + s);
        for (int32_t i = 0; i < n; i++) rhs[i] = tu_uniform(&g) - 0.5;
        tu_pc_apply(&r, rhs, z, n);
        /* triangular substitution is backward stable (Higham Thm 8.5):
         * |r - L D L^T z| <= (2 gamma_m + eps)(|L| D |L^T| |z|), m a row
         * length; the host product here adds gamma_K: 8 K eps covers both */
        for (int32_t k = 0; k < n; k++) {
            double s1 = 0, m1 = 0;
            for (int64_t q = f.LT.row_ptr[k]; q < f.LT.row_ptr[k + 1]; q++)
                s1 += f.LT.val[q] * z[f.LT.col[q]], m1 += fabs(f.LT.val[q] * z[f.LT.col[q]]);
            u[k] = f.d[k] * s1, umag[k] = f.d[k] * m1;
        }
        for (int32_t i = 0; i < n; i++) {
            double y = 0, ymag = 0;
            int64_t terms = 0;
            for (int64_t q = f.L.row_ptr[i]; q < f.L.row_ptr[i + 1]; q++) {
                y += f.L.val[q] * u[f.L.col[q]], ymag += fabs(f.L.val[q]) * umag[f.L.col[q]];
                terms += f.LT.row_ptr[f.L.col[q] + 1] - f.LT.row_ptr[f.L.col[q]];
            }
            ck_assert_msg(fabs(y - rhs[i]) <= 8.0 * (double)terms * EPS * (ymag + fabs(rhs[i])),
                          "%s: row %d: (M z)_i = %.17g, r_i = %.17g", specs[s], i + 1, y, rhs[i]);
        }
        free(rhs), free(z), free(u), free(umag);
        factors_free(&f);
        tu_pc_release(&r);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- iterations: CG, b = A 1, x0 = 0, tol 1e-8 (tu_pc_solve) ---- */

static void fewer_than_jacobi(const gs_csr *A, const char *omega, const char *what)
{
    const char *kv[] = {"omega", omega, NULL};
    gs_params p = tu_params(kv);
    char label[160];
    snprintf(label, sizeof label, "%s omega=%s", what, omega);
    tu_assert_fewer_than_jacobi(A, "mic", &p, "cg", label);
}

START_TEST(fewer_iterations_than_jacobi)
{
    gs_csr A = tu_generated("poisson3d:12");
    fewer_than_jacobi(&A, "1", "poisson3d:12");
    fewer_than_jacobi(&A, "0", "poisson3d:12");
    gs_csr_free(&A);
    /* MIC(0) where its pivots stay positive; IC(0) on others (MIC breaks
     * down on these non-M-matrices: see docs/mic.md) */
    const char *mic_names[] = {"nos4", "gr_30_30", "bcsstk22"};
    const char *ic_names[] = {"1138_bus", "nos3", "bcsstk16"};
    for (int m = 0; m < 3; m++) {
        if (!tu_real_matrix(mic_names[m], &A)) return;
        fewer_than_jacobi(&A, "1", mic_names[m]);
        gs_csr_free(&A);
        if (!tu_real_matrix(ic_names[m], &A)) return;
        fewer_than_jacobi(&A, "0", ic_names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- bad input ---- */

static void expect_failure(const gs_csr *A, const char *const *kv, int status,
                           const char *fragment)
{
    gs_params p = tu_params(kv);
    tu_pc_expect_failure(A, "mic", &p, status, fragment, NULL);
}

START_TEST(bad_input_named)
{
    /* small matrices refused with the default parameters, each as named */
    static const struct {
        int32_t rows, cols, count, r[5], c[5];
        double v[5];
        const char *fragment;
    } small[] = {
        {3, 4, 3, {0, 1, 2}, {0, 1, 3}, {1, 1, 1}, "3 x 4, not square"},
        /* nonsymmetric values: a_12 = 2, a_21 = 1 */
        {3, 3, 5, {0, 0, 1, 1, 2}, {0, 1, 0, 1, 2}, {4, 2, 1, 4, 4},
         "mic needs a symmetric matrix"},
        {3, 3, 5, {0, 0, 1, 1, 2}, {0, 1, 0, 1, 2}, {4, 2, 1, 4, 4}, "row 1, column 2"},
        /* nonsymmetric pattern: a_31 stored, a_13 not */
        {3, 3, 4, {0, 1, 2, 2}, {0, 1, 0, 2}, {4, 4, 1, 4}, "row 3, column 1"},
        /* zero, negative and missing diagonal entries */
        {3, 3, 5, {0, 1, 1, 2, 2}, {0, 1, 2, 1, 2}, {2, 2, 1, 1, 0}, "row 3 has diagonal entry 0"},
        {3, 3, 5, {0, 1, 1, 2, 2}, {0, 1, 2, 1, 2}, {2, 2, 1, 1, -1},
         "row 3 has diagonal entry -1"},
        {3, 3, 2, {0, 2}, {0, 2}, {1, 1}, "row 2 has no diagonal entry"},
    };
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        gs_csr A = tu_from_triplets(small[k].rows, small[k].cols, small[k].count, small[k].r,
                                    small[k].c, small[k].v);
        expect_failure(&A, NULL, GS_ERR_INPUT, small[k].fragment);
        gs_csr_free(&A);
    }

    /* not positive definite, positive diagonal: [[1 2] [2 1]], d_2 = -3 with the
     * shift fixed at 0 (the automatic shift cures it: see shift_sequence) */
    const int32_t r2[] = {0, 0, 1, 1}, c2[] = {0, 1, 0, 1};
    const double v2[] = {1, 2, 2, 1};
    gs_csr S = tu_from_triplets(2, 2, 4, r2, c2, v2);
    const char *fixed[] = {"mic-shift", "0", NULL};
    const char *ic[] = {"omega", "0", "mic-shift", "0", NULL};
    expect_failure(&S, fixed, GS_ERR_NUMERIC, "non-positive pivot d = -3 in row 2");
    expect_failure(&S, ic, GS_ERR_NUMERIC, "non-positive pivot d = -3 in row 2");
    gs_csr_free(&S);

    /* indefinite 3D operator with a positive diagonal: 6 I - 2 (neighbours) */
    gs_csr B = tu_generated("poisson3d:5");
    for (int64_t p = 0; p < B.nnz; p++)
        if (B.val[p] < 0) B.val[p] = -2.0;
    expect_failure(&B, fixed, GS_ERR_NUMERIC, "non-positive pivot");
    expect_failure(&B, ic, GS_ERR_NUMERIC, "in row ");
    /* NaN off the diagonal (symmetrically) */
    gs_csr_free(&B);
    B = tu_generated("poisson3d:3");
    B.val[gs_csr_find(&B, 4, 1)] = NAN;
    B.val[gs_csr_find(&B, 1, 4)] = NAN;
    expect_failure(&B, NULL, GS_ERR_INPUT, "not finite in row 2, column 5");
    gs_csr_free(&B);

    /* real matrices: negative diagonal (sherman1), breakdown (1138_bus) */
    gs_csr A;
    if (!tu_real_matrix("sherman1", &A)) return;
    expect_failure(&A, NULL, GS_ERR_INPUT, "row 1 has diagonal entry");
    gs_csr_free(&A);
    if (!tu_real_matrix("1138_bus", &A)) return;
    expect_failure(&A, fixed, GS_ERR_NUMERIC, "--mic-shift");
    gs_csr_free(&A);
}
END_TEST

/* ---- the automatic shift (Manteuffel): alpha = 0, then 1e-3 doubling up to 1e3 ---- */

static double extra_num(const gs_pc *pc, const char *key)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    ck_assert_msg(kv != NULL, "report item %s missing", key);
    return kv->num;
}

/* [[1 b] [b 1]] (+ alpha diag): d_2 = (1 + alpha) - b^2 / (1 + alpha) > 0 iff alpha > b - 1. */
static gs_csr two_by_two(double b)
{
    const int32_t r[] = {0, 0, 1, 1}, c[] = {0, 1, 0, 1};
    const double v[] = {1, b, b, 1};
    return tu_from_triplets(2, 2, 4, r, c, v);
}

START_TEST(shift_sequence)
{
    /* b = 2: alpha > 1 first at 1e-3 2^10 = 1.024, after alpha = 0 and 1e-3 2^0..2^9 */
    gs_csr S = two_by_two(2.0);
    gs_params none = {0};
    tu_pc_run r;
    tu_pc_build_ok(&S, "mic", &none, &r);
    ck_assert_double_eq_tol(extra_num(r.pc, "shift"), 1.024, 1e-15);
    ck_assert_int_eq((int)extra_num(r.pc, "shift_tries"), 12);
    ck_assert_ptr_nonnull(strstr(r.pc->description, "shift=1.024"));
    tu_pc_release(&r);
    check_mic_on(&S, "1", "1.024", "[[1 2] [2 1]]");
    gs_csr_free(&S);
    /* b = 1e4 needs alpha > 9999, past the bound: 21 tries, the last at 1e-3 2^19 */
    S = two_by_two(1e4);
    expect_failure(&S, NULL, GS_ERR_NUMERIC, "21 shifts up to alpha = 524.288 tried");
    expect_failure(&S, NULL, GS_ERR_NUMERIC, "non-positive pivot d = ");
    gs_csr_free(&S);
    /* a fixed shift is kept even where it breaks down (no retries) */
    S = two_by_two(2.0);
    const char *half[] = {"mic-shift", "0.5", NULL};
    expect_failure(&S, half, GS_ERR_NUMERIC, "non-positive pivot d = ");
    gs_csr_free(&S);
}
END_TEST

/* The shift the setup settles on gives the factorisation of A + X diag(A) (the identity
 * with (1 + X) a_ii), the same factors as --mic-shift X given, on matrices that break
 * down unshifted; and no retry where none is needed. */
START_TEST(automatic_shift_is_the_shifted_factorisation)
{
    gs_csr A = tu_generated("poisson3d:6");
    gs_params none = {0};
    tu_pc_run r;
    tu_pc_build_ok(&A, "mic", &none, &r);
    ck_assert(extra_num(r.pc, "shift") == 0 && extra_num(r.pc, "shift_tries") == 1);
    tu_pc_release(&r);
    gs_csr_free(&A);
    const char *names[] = {"1138_bus", "bcsstk13", "Trefethen_500"};
    for (int m = 0; m < 3; m++) {
        if (!tu_real_matrix(names[m], &A)) return;
        tu_pc_build_ok(&A, "mic", &none, &r);
        const double X = extra_num(r.pc, "shift");
        ck_assert_msg(X > 0 && extra_num(r.pc, "shift_tries") > 1, "%s: shift %g", names[m], X);
        factors automatic;
        save_and_read(r.pc, &automatic);
        tu_pc_release(&r);
        char text[64];
        snprintf(text, sizeof text, "%.17g", X);
        factors given = factor_ok(&A, "1", text);
        ck_assert_int_eq(given.L.nnz, automatic.L.nnz);
        for (int64_t p = 0; p < given.L.nnz; p++)
            ck_assert(given.L.val[p] == automatic.L.val[p]); /* the same computation */
        check_ldlt(&A, &automatic, 1.0, X, names[m]);
        check_row_sums(&A, &automatic, X, names[m]);
        factors_free(&automatic), factors_free(&given);
        gs_csr_free(&A);
    }
}
END_TEST

/* MIC (omega = 1, the default shift) sets up on every SPD matrix of the shared set
 * (MANIFEST.tsv's kind SPD), and its pivots are positive. */
START_TEST(sets_up_on_every_spd_matrix)
{
    static const char *const spd[] = {
        "1138_bus", "494_bus",  "662_bus",  "685_bus",  "bcsstk01", "bcsstk02",  "bcsstk03",
        "bcsstk04", "bcsstk05", "bcsstk06", "bcsstk08", "bcsstk09", "bcsstk10",  "bcsstk13",
        "bcsstk14", "bcsstk15", "bcsstk16", "bcsstk19", "bcsstk20", "bcsstk21",  "bcsstk22",
        "bcsstm07", "bcsstm12", "bcsstm25", "lund_a",   "mesh1e1",  "nos3",      "nos4",
        "plat362",  "s3rmt3m3", "gr_30_30", "Trefethen_500", NULL};
    for (int m = 0; spd[m]; m++) {
        gs_csr A;
        if (!tu_real_matrix(spd[m], &A)) return;
        gs_params none = {0};
        tu_pc_run r;
        gs_error err = {0};
        ck_assert_msg(tu_pc_build(&A, "mic", &none, &r, &err) == GS_OK, "%s: %s", spd[m], err.msg);
        ck_assert_msg(extra_num(r.pc, "min_pivot_ratio") > 0, "%s", spd[m]);
        tu_pc_release(&r);
        gs_csr_free(&A);
    }
}
END_TEST

START_TEST(bad_parameters_named)
{
    gs_csr A = tu_generated("poisson3d:3");
    static const tu_bad_param bad[] = {
        {"omega", "1.5", NULL},    {"omega", "-0.1", NULL}, {"omega", "one", NULL},
        {"mic-shift", "-1", NULL}, {"mic-shift", "x", NULL}, {"isai-power", "1", NULL},
        {"trisolve", "isai", NULL}, {"trisolve", "fast", NULL},
        {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&A, "mic", bad);
    gs_csr_free(&A);
}
END_TEST

START_TEST(report_items)
{
    gs_csr A = tu_generated("poisson3d:5"), T;
    gs_params p = {0};
    tu_pc_run r;
    tu_pc_build_ok(&A, "mic", &p, &r);
    const char *stages[] = {"factorisation", "transpose", "upload", NULL};
    tu_assert_stages(r.pc, stages);
    ck_assert(gs_csr_lower(&A, 1, &T, NULL) == GS_OK);
    ck_assert_int_eq(r.pc->nnz, T.nnz);
    ck_assert(r.pc->symmetric);
    ck_assert_ptr_nonnull(strstr(r.pc->description, "MIC(0)"));
    ck_assert(tu_pc_extra(r.pc, "shift") && tu_pc_extra(r.pc, "shift")->num == 0);
    ck_assert(tu_pc_extra(r.pc, "shift_tries") && tu_pc_extra(r.pc, "shift_tries")->num == 1);
    ck_assert(tu_pc_extra(r.pc, "omega") && tu_pc_extra(r.pc, "omega")->num == 1);
    ck_assert(tu_pc_extra(r.pc, "dropped_fill") && tu_pc_extra(r.pc, "dropped_fill")->num > 0);
    tu_pc_release(&r);
    gs_csr_free(&T);
    gs_csr_free(&A);
}
END_TEST

/* --trisolve given on the CPU engine: one apply timed at setup (stage "timing",
 * fbs_cpu_ms, positive and finite), which leaves the preconditioner as it was: the same z
 * bit for bit as a setup without it (whose stages report_items checks: no "timing"). */
START_TEST(cpu_substitution_timed_when_asked)
{
    gs_csr A = tu_generated("poisson3d:6");
    const char *kv[] = {"trisolve", "exact", NULL};
    gs_params asked = tu_params(kv), plain = {0};
    tu_pc_run r, q;
    tu_pc_build_ok(&A, "mic", &asked, &r);
    tu_pc_build_ok(&A, "mic", &plain, &q);
    const char *stages[] = {"factorisation", "transpose", "upload", "timing", NULL};
    tu_assert_stages(r.pc, stages);
    const gs_kv *ms = tu_pc_extra(r.pc, "fbs_cpu_ms");
    ck_assert(ms && isfinite(ms->num) && ms->num > 0);
    ck_assert(tu_pc_extra(q.pc, "fbs_cpu_ms") == NULL);
    const int32_t n = A.n_rows;
    double *rhs = malloc(n * sizeof(double)), *z1 = malloc(n * sizeof(double));
    double *z2 = malloc(n * sizeof(double));
    ck_assert(rhs && z1 && z2);
    for (int32_t i = 0; i < n; i++) rhs[i] = 1.0 + (i % 5);
    tu_pc_apply(&r, rhs, z1, n);
    tu_pc_apply(&q, rhs, z2, n);
    ck_assert(memcmp(z1, z2, n * sizeof(double)) == 0);
    free(rhs), free(z1), free(z2);
    tu_pc_release(&r);
    tu_pc_release(&q);
    gs_csr_free(&A);
}
END_TEST

/* Every allocation of the setup made to fail in turn (error.h's injector):
 * each failure is reported as GS_ERR_NOMEM, never a crash or a leak. */
START_TEST(allocation_failures_reported)
{
    const char *kv[] = {"omega", "1", NULL};
    gs_params p = tu_params(kv);
    tu_assert_allocation_failures("poisson3d:4", "mic", &p, 5);
}
END_TEST

/* ---- hub rows: the long pivot's sum and the searched rows (pc_mic.c) ---- */

/* The 5-point Laplacian of an nx x nx grid and one hub node coupled (-1) to grid nodes 0,
 * stride, 2 stride, ...; the hub is the last row (where = 'l'), the first ('f') or the
 * middle one ('m'). Diagonals 4 (+1 where tied to the hub), the hub's its degree + 1: a
 * diagonally dominant M-matrix. */
static gs_csr hub_matrix(int32_t nx, int32_t stride, char where)
{
    const int32_t n = nx * nx + 1, hub = where == 'l' ? n - 1 : where == 'f' ? 0 : n / 2;
    const int64_t cap = 7 * (int64_t)n;
    int32_t *r = malloc(cap * sizeof *r), *c = malloc(cap * sizeof *c), degree = 0;
    double *v = malloc(cap * sizeof *v);
    int64_t m = 0;
    ck_assert(r && c && v);
#define ROW(g) ((g) + ((g) >= hub && where != 'l' ? 1 : 0))
#define PUT(i, j, x) (r[m] = (i), c[m] = (j), v[m++] = (x))
    for (int32_t g = 0; g < nx * nx; g++) {
        const int32_t x = g % nx, y = g / nx, i = ROW(g);
        double d = 4.0;
        if (g % stride == 0) PUT(i, hub, -1.0), PUT(hub, i, -1.0), d += 1.0, degree++;
        PUT(i, i, d);
        if (x > 0) PUT(i, ROW(g - 1), -1.0);
        if (x < nx - 1) PUT(i, ROW(g + 1), -1.0);
        if (y > 0) PUT(i, ROW(g - nx), -1.0);
        if (y < nx - 1) PUT(i, ROW(g + nx), -1.0);
    }
    PUT(hub, hub, degree + 1.0);
#undef PUT
#undef ROW
    gs_csr A = tu_from_triplets(n, n, m, r, c, v);
    free(r), free(c), free(v);
    return A;
}

/* The dropped fill updates of the pairwise elimination: for each pivot k, the pairs
 * i > j > k of A's row k (its pattern is that of R's row k throughout) with (j, i)
 * outside A's pattern. */
static double dropped_pairs(const gs_csr *A)
{
    double dropped = 0;
    for (int32_t k = 0; k < A->n_rows; k++)
        for (int64_t p = A->row_ptr[k]; p < A->row_ptr[k + 1]; p++)
            for (int64_t q = p + 1; q < A->row_ptr[k + 1]; q++)
                if (A->col[p] > k && gs_csr_find(A, A->col[p], A->col[q]) < 0) dropped++;
    return dropped;
}

/* The hub last, first and in the middle, its degree below and above the long pivot's
 * threshold (256 entries) and the searched rows' ratio: the defining identities, the row
 * sums (MIC) and the dropped fill counted pair by pair. */
START_TEST(hub_rows)
{
    const struct {
        int32_t nx, stride;
    } sizes[] = {{20, 13}, {30, 3}, {60, 5}};
    const char where[] = {'l', 'f', 'm'};
    for (int s = 0; s < 3; s++)
        for (int w = 0; w < 3; w++) {
            gs_csr A = hub_matrix(sizes[s].nx, sizes[s].stride, where[w]);
            char what[64];
            snprintf(what, sizeof what, "hub %c, %d x %d grid, every %d", where[w],
                     (int)sizes[s].nx, (int)sizes[s].nx, (int)sizes[s].stride);
            check_mic_on(&A, "1", "0", what);
            check_mic_on(&A, "0", "0", what);
            gs_params none = {0};
            tu_pc_run r;
            tu_pc_build_ok(&A, "mic", &none, &r);
            ck_assert_msg(extra_num(r.pc, "dropped_fill") == dropped_pairs(&A),
                          "%s: dropped fill %g, pairs %g", what, extra_num(r.pc, "dropped_fill"),
                          dropped_pairs(&A));
            tu_pc_release(&r);
            gs_csr_free(&A);
        }
}
END_TEST

static void note_stage(void *ctx, const char *name)
{
    if (strcmp(name, "factorisation") == 0) *(int *)ctx = 1;
}

/* --time-limit inside the factorisation: a deadline already past stops it between pivots
 * (every 4096), before its stage ends, with GS_ERR_TIME_LIMIT naming the stage. */
START_TEST(time_limit_inside_factorisation)
{
    gs_csr A = hub_matrix(70, 20, 'f'); /* 4901 rows */
    gs_engine *e = NULL;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_error err = {0};
    int ended = 0;
    gs_pc_hook hook = {0};
    hook.stage_done = note_stage, hook.ctx = &ended, hook.deadline = gs_now() - 1.0;
    gs_params none = {0};
    ck_assert_int_eq(gs_engine_cpu_create(&e, &err), GS_OK);
    ck_assert_int_eq(e->ops->mat_create(e, &A, GS_FP64, &Ae), GS_OK);
    const int status = gs_pc_create_hooked(gs_pc_find("mic"), e, &none, &A, Ae, &hook, &pc, &err);
    ck_assert_msg(status == GS_ERR_TIME_LIMIT, "status %d: %s", status, err.msg);
    ck_assert_msg(strstr(err.msg, "'factorisation'") != NULL, "%s", err.msg);
    ck_assert_msg(!ended, "the factorisation stage ended: the deadline was not asked inside");
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    gs_engine_destroy(e);
    gs_csr_free(&A);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_mic");
    TCase *t = tu_add_tcase(s, "mic", 120);
    tcase_add_test(t, mic_preserves_row_sums);
    tcase_add_test(t, ic0_reproduces_a_on_its_pattern);
    tcase_add_test(t, relaxed_and_shifted);
    tcase_add_test(t, apply_solves_ldlt);
    tcase_add_test(t, fewer_iterations_than_jacobi);
    tcase_add_test(t, bad_input_named);
    tcase_add_test(t, shift_sequence);
    tcase_add_test(t, automatic_shift_is_the_shifted_factorisation);
    tcase_add_test(t, sets_up_on_every_spd_matrix);
    tcase_add_test(t, bad_parameters_named);
    tcase_add_test(t, report_items);
    tcase_add_test(t, cpu_substitution_timed_when_asked);
    tcase_add_test(t, allocation_failures_reported);
    tcase_add_test(t, hub_rows);
    tcase_add_test(t, time_limit_inside_factorisation);
    return tu_run_suite(s);
}
