/* check_pc_isai.c - ILU(0) (src/sparse/ilu0.c) and the isai preconditioner
 * (src/precond/pc_isai.c), by their defining properties: (L U)_ij = a_ij on A's
 * pattern; (L M_L - I)_ij = 0 and (U M_U - I)_ij = 0 on the patterns of
 * |L|^k and |U|^k, also for columns longer than a warp and for dense rows
 * and columns (an arrowhead, a bordered grid: the galloping merge gives the
 * plain merge's values bit for bit); the --time-limit stops the column loop;
 * the scaled path acts
 * on the original system; --trisolve exact is U^-1 L^-1 against a dense
 * solve; sweeps reduce the triangular residual; fewer IDR(4) iterations than
 * Jacobi; bad input and bad parameters named. */
#include "gen.h"
#include "ilu0.h"
#include "isai.h"
#include "testutil.h"

#define EPS DBL_EPSILON

/* ---- inputs ---- */

typedef struct coo {
    int64_t count, cap;
    int32_t *r, *c;
    double *v;
} coo;

static void coo_add(coo *t, int32_t i, int32_t j, double v)
{
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->r = realloc(t->r, (size_t)t->cap * sizeof *t->r);
        t->c = realloc(t->c, (size_t)t->cap * sizeof *t->c);
        t->v = realloc(t->v, (size_t)t->cap * sizeof *t->v);
        ck_assert(t->r && t->c && t->v);
    }
    t->r[t->count] = i, t->c[t->count] = j, t->v[t->count++] = v;
}

static gs_csr coo_to_csr(coo *t, int32_t n)
{
    gs_csr A = tu_from_triplets(n, n, t->count, t->r, t->c, t->v);
    free(t->r), free(t->c), free(t->v);
    memset(t, 0, sizeof *t);
    return A;
}

/* Random nonsymmetric n x n matrix, `per_row` off-diagonal entries per row
 * at random columns (any distance), values +-[0.5, 1.5), and a diagonal
 * `dominance` times the row's off-diagonal absolute sum. shape: 0 full,
 * 1 lower triangular only, 2 upper triangular only. */
static gs_csr random_dominant(tu_rng *g, int32_t n, int per_row, double dominance, int shape)
{
    coo t = {0};
    for (int32_t i = 0; i < n; i++) {
        double off = 0;
        for (int e = 0; e < per_row; e++) {
            int32_t j = (int32_t)(tu_next(g) % (uint64_t)n);
            if (shape == 1 && j >= i) continue;
            if (shape == 2 && j <= i) continue;
            if (j == i) continue;
            double v = (0.5 + tu_uniform(g)) * (tu_next(g) & 1 ? 1 : -1);
            coo_add(&t, i, j, v);
            off += fabs(v);                                  /* duplicates sum: still a bound */
        }
        coo_add(&t, i, i, dominance * off + 1.0);
    }
    return coo_to_csr(&t, n);
}

/* ---- the preconditioner through the registry ---- */

/* --save-precond, read back: L, U always, M_L, M_U unless exact. */
typedef struct saved {
    gs_csr L, U, ML, MU;
} saved;

static void save_and_read(gs_pc *pc, saved *s, int with_isai)
{
    char prefix[512], path[600];
    gs_error err = {0};
    const char *suffix[4] = {"L", "U", "ML", "MU"};
    gs_csr *dest[4] = {&s->L, &s->U, &s->ML, &s->MU};
    memset(s, 0, sizeof *s);
    tu_tmpname(prefix, sizeof prefix, "");
    ck_assert_msg(pc->save(pc, prefix, &err) == GS_OK, "save: %s", err.msg);
    for (int f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s_%s.mtx", prefix, suffix[f]);
        if (f < 2 || with_isai)
            ck_assert_msg(gs_mm_read_csr(path, dest[f], NULL, &err) == GS_OK, "%s: %s", path,
                          err.msg);
        else
            ck_assert_msg(access(path, F_OK) != 0, "%s written for --trisolve exact", path);
        remove(path);
    }
    remove(prefix);
}

static void saved_free(saved *s)
{
    gs_csr_free(&s->L), gs_csr_free(&s->U), gs_csr_free(&s->ML), gs_csr_free(&s->MU);
}

/* ---- the property checks ---- */

/* Worst ratio |(X Y)_ij - T_ij| / bound_ij over (i, j) in the pattern of P,
 * with T = A (target) or the identity (target NULL). (X Y)_ij sums m
 * products; a backward-stable computation of X and Y (triangular
 * substitution: Higham, Accuracy and Stability, Thm 8.5; LU: Thm 9.3) leaves
 * |(X Y - T)_ij| <= gamma_m (|X||Y|)_ij, and evaluating the product here
 * adds another gamma_m: bound = 8 m eps (|X||Y|)_ij covers both (gamma_m ~
 * m eps / 2), plus the one-rounding-per-entry of mapping scaled factors
 * back (--scale yes). */
static double product_on_pattern(const gs_csr *X, const gs_csr *Y, const gs_csr *P,
                                 const gs_csr *target, int32_t *where_i, int32_t *where_j)
{
    gs_csr YT;
    ck_assert(gs_csr_transpose(Y, &YT, NULL) == GS_OK);
    double worst = 0;
    for (int32_t i = 0; i < P->n_rows; i++)
        for (int64_t p = P->row_ptr[i]; p < P->row_ptr[i + 1]; p++) {
            const int32_t j = P->col[p];
            double sum = 0, mag = 0;
            int64_t m = 0, a = X->row_ptr[i], b = YT.row_ptr[j];
            while (a < X->row_ptr[i + 1] && b < YT.row_ptr[j + 1]) {
                if (X->col[a] < YT.col[b])
                    a++;
                else if (X->col[a] > YT.col[b])
                    b++;
                else {
                    sum += X->val[a] * YT.val[b];
                    mag += fabs(X->val[a] * YT.val[b]);
                    a++, b++, m++;
                }
            }
            double t = 0;
            if (target) {
                int64_t q = gs_csr_find(target, i, j);
                t = q < 0 ? 0.0 : target->val[q];
            } else {
                t = i == j;
            }
            const double bound = 8.0 * (double)(m > 0 ? m : 1) * EPS * (mag + fabs(t)) + DBL_MIN;
            const double ratio = fabs(sum - t) / bound;
            if (!(ratio <= worst)) worst = ratio, *where_i = i + 1, *where_j = j + 1;
        }
    gs_csr_free(&YT);
    return worst;
}

static void assert_same_pattern(const gs_csr *A, const gs_csr *B, const char *what)
{
    ck_assert_msg(A->n_rows == B->n_rows && A->nnz == B->nnz, "%s: nnz %lld vs %lld", what,
                  (long long)A->nnz, (long long)B->nnz);
    for (int32_t i = 0; i <= A->n_rows; i++) ck_assert(A->row_ptr[i] == B->row_ptr[i]);
    for (int64_t p = 0; p < A->nnz; p++)
        ck_assert_msg(A->col[p] == B->col[p], "%s: pattern differs", what);
}

/* L U = A on A's pattern; L unit lower, U upper, together A's pattern. */
static void check_ilu0_factors(const gs_csr *A, const gs_csr *L, const gs_csr *U,
                               const char *what)
{
    int32_t wi = 0, wj = 0;
    ck_assert_int_eq(L->nnz + U->nnz, A->nnz + A->n_rows);
    for (int32_t i = 0; i < A->n_rows; i++) {
        ck_assert_msg(L->col[L->row_ptr[i + 1] - 1] == i && L->val[L->row_ptr[i + 1] - 1] == 1.0,
                      "%s: l_%d,%d is not a stored 1", what, i + 1, i + 1);
        ck_assert_msg(U->col[U->row_ptr[i]] == i, "%s: row %d of U has no pivot", what, i + 1);
        for (int64_t p = L->row_ptr[i]; p < L->row_ptr[i + 1]; p++)
            ck_assert(L->col[p] == i || gs_csr_find(A, i, L->col[p]) >= 0);
        for (int64_t p = U->row_ptr[i]; p < U->row_ptr[i + 1]; p++)
            ck_assert(gs_csr_find(A, i, U->col[p]) >= 0);
    }
    double worst = product_on_pattern(L, U, A, A, &wi, &wj);
    ck_assert_msg(worst <= 1.0, "%s: (L U - A)_%d,%d is %g times its rounding bound", what, wi,
                  wj, worst);
}

/* (T M - I) = 0 on M's pattern, and M's pattern is that of |T|^k. */
static void check_isai(const gs_csr *T, const gs_csr *M, int k, const char *what)
{
    gs_csr P;
    int32_t wi = 0, wj = 0;
    ck_assert(gs_csr_pattern_power(T, k, 0, &P, NULL) == GS_OK);
    assert_same_pattern(&P, M, what);
    gs_csr_free(&P);
    double worst = product_on_pattern(T, M, M, NULL, &wi, &wj);
    ck_assert_msg(worst <= 1.0, "%s: (T M - I)_%d,%d is %g times its rounding bound", what, wi,
                  wj, worst);
}

/* Build isai on A with k and scaling, save, check both factors' ISAI and
 * that L U = A (the original A, also when scaled). */
static void check_isai_on(const gs_csr *A, const char *k, const char *scale, const char *what)
{
    const char *kv[] = {"isai-power", k, "scale", scale, NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    saved s;
    char label[256];
    tu_pc_build_ok(A, "isai", &p, &r);
    save_and_read(r.pc, &s, 1);
    snprintf(label, sizeof label, "%s k=%s scale=%s: LU", what, k, scale);
    check_ilu0_factors(A, &s.L, &s.U, label);
    snprintf(label, sizeof label, "%s k=%s scale=%s: L M_L", what, k, scale);
    check_isai(&s.L, &s.ML, atoi(k), label);
    snprintf(label, sizeof label, "%s k=%s scale=%s: U M_U", what, k, scale);
    check_isai(&s.U, &s.MU, atoi(k), label);
    saved_free(&s);
    tu_pc_release(&r);
}

/* ---- ILU(0) ---- */

START_TEST(ilu0_matches_a_on_its_pattern_generated)
{
    const char *specs[] = {"poisson3d:8", "poisson3d27:6", "convdiff3d:9", "aniso3d:5x7x4"};
    for (int s = 0; s < 4; s++) {
        gs_csr A = tu_generated(specs[s]), L, U;
        gs_error err = {0};
        ck_assert_msg(gs_ilu0(&A, &L, &U, &err) == GS_OK, "%s: %s", specs[s], err.msg);
        check_ilu0_factors(&A, &L, &U, specs[s]);
        gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U);
    }
    tu_rng g = tu_rng_seed(11);
    for (int trial = 0; trial < 6; trial++) {
        gs_csr A = random_dominant(&g, 40 + 37 * trial, 2 + trial, 1.1, 0), L, U;
        ck_assert(gs_ilu0(&A, &L, &U, NULL) == GS_OK);
        check_ilu0_factors(&A, &L, &U, "random");
        gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U);
    }
}
END_TEST

/* Every real matrix of the MANIFEST (complex skipped): either the factors
 * satisfy L U = A on the pattern, or the failure names a row. */
START_TEST(ilu0_on_every_real_matrix)
{
    if (!tu_matrices_dir()) {
        fprintf(stderr, "skipped: no ../shared/matrices\n");
        return;
    }
    char line[4096];
    FILE *f = tu_manifest_open();
    int factorised = 0, refused = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256], sym[64], field[64];
        long rows, cols, nnz;
        if (sscanf(line, "%255s %ld %ld %ld %63s %63s", name, &rows, &cols, &nnz, sym, field) != 6)
            continue;
        if (strcmp(field, "complex") == 0) continue;
        gs_csr A, L, U;
        gs_error err = {0};
        ck_assert(tu_real_matrix(name, &A));
        int status = gs_ilu0(&A, &L, &U, &err);
        if (status == GS_OK) {
            check_ilu0_factors(&A, &L, &U, name);
            factorised++;
        } else {
            ck_assert_msg(status == GS_ERR_INPUT || status == GS_ERR_NUMERIC, "%s: %s", name,
                          err.msg);
            ck_assert_msg(strstr(err.msg, "row ") != NULL, "%s: %s", name, err.msg);
            refused++;
        }
        gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U);
    }
    fclose(f);
    ck_assert_int_gt(factorised, 30);
    ck_assert_int_gt(refused, 0); /* matrices with missing diagonals exist there */
}
END_TEST

/* ---- ISAI: the defining property ---- */

START_TEST(isai_generated_k1_k2)
{
    const char *specs[] = {"poisson3d:8", "convdiff3d:8", "poisson3d27:5"};
    for (int s = 0; s < 3; s++) {
        gs_csr A = tu_generated(specs[s]);
        check_isai_on(&A, "1", "yes", specs[s]);
        check_isai_on(&A, "2", "no", specs[s]);
        gs_csr_free(&A);
    }
    tu_rng g = tu_rng_seed(21);
    gs_csr A = random_dominant(&g, 300, 4, 1.2, 0);
    check_isai_on(&A, "1", "no", "random");
    check_isai_on(&A, "2", "yes", "random");
    check_isai_on(&A, "3", "yes", "random");
    gs_csr_free(&A);
}
END_TEST

START_TEST(isai_real_k1_k2)
{
    /* nonsymmetric and SPD matrices whose ILU(0) exists (no missing
     * diagonal, no zero pivot), with rows up to ~50 entries */
    const char *names[] = {"sherman5", "orsirr_1", "watt_2", "add20", "hor_131",
                           "nos3", "494_bus", "bcsstk14", "cryg2500"};
    for (int m = 0; m < 9; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        check_isai_on(&A, "1", m % 2 ? "yes" : "no", names[m]);
        check_isai_on(&A, "2", m % 2 ? "no" : "yes", names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Arrow matrix: tridiagonal plus a dense first column (so column 1 of L,
 * hence of M_L, has n entries) and a dense last column (column n of U and
 * M_U has n entries); n = 150 > 2 warps, over the paper's 32 limit. Row
 * dominant with non-positive off-diagonals: an M-matrix, so ILU(0) exists. */
START_TEST(isai_long_columns)
{
    const int32_t n = 150;
    coo t = {0};
    for (int32_t i = 0; i < n; i++) {
        coo_add(&t, i, i, 10.0 + 0.01 * i);
        if (i > 0) coo_add(&t, i, i - 1, -1.0);
        if (i + 1 < n) coo_add(&t, i, i + 1, -1.0);
        if (i > 1) coo_add(&t, i, 0, -0.9);
        if (i + 2 < n) coo_add(&t, i, n - 1, -0.8);
    }
    gs_csr A = coo_to_csr(&t, n);
    for (int k = 1; k <= 2; k++) {
        char ks[16];
        snprintf(ks, sizeof ks, "%d", k);
        check_isai_on(&A, ks, k == 1 ? "yes" : "no", "arrow");
        const char *kv[] = {"isai-power", ks, NULL};
        gs_params p = tu_params(kv);
        tu_pc_run r;
        tu_pc_build_ok(&A, "isai", &p, &r);
        const gs_kv *lm = tu_pc_extra(r.pc, "ML_longest_column");
        const gs_kv *um = tu_pc_extra(r.pc, "MU_longest_column");
        ck_assert(lm && um);
        ck_assert_msg(lm->num == n && um->num == n, "longest columns %g, %g", lm->num, um->num);
        tu_pc_release(&r);
    }
    gs_csr_free(&A);
}
END_TEST

/* Dense rows and columns (issue 32): an arrowhead with a dense first row
 * and column, as bloweybq (column 1 of L, hence of M_L, has n entries; row
 * 1 of U has n, so every column of M_U meets it), and a 2D grid bordered by
 * `border` dense last rows and columns (column n of U and M_U has n
 * entries; the last rows of L are dense). Non-positive off-diagonals and a
 * row-dominant diagonal: M-matrices, so ILU(0) exists. */
static gs_csr arrowhead_first(int32_t n)
{
    coo t = {0};
    for (int32_t i = 0; i < n; i++) {
        double off = 0.0;
        for (int32_t j = 0; j < n; j++) {
            double v = 0.0;
            if (j == i - 1 || j == i + 1) v = -1.0;
            else if (i == 0 && j > 1) v = -1.0 / (1 + j % 5);
            else if (j == 0 && i > 1) v = -0.9;
            if (v != 0.0) coo_add(&t, i, j, v), off += fabs(v);
        }
        coo_add(&t, i, i, off + 1.0 + 0.01 * i);
    }
    return coo_to_csr(&t, n);
}

static gs_csr bordered_grid(int32_t nx, int32_t border)
{
    const int32_t g = nx * nx, n = g + border;
    coo t = {0};
    for (int32_t i = 0; i < n; i++) {
        double off = 0.0;
        if (i < g) { /* upwind convection-diffusion: west -1.3, east -0.7, north, south -1 */
            const int32_t x = i % nx, y = i / nx;
            const int32_t nb[4] = {x > 0 ? i - 1 : -1, x + 1 < nx ? i + 1 : -1,
                                   y > 0 ? i - nx : -1, y + 1 < nx ? i + nx : -1};
            const double w[4] = {-1.3, -0.7, -1.0, -1.0};
            for (int e = 0; e < 4; e++)
                if (nb[e] >= 0) coo_add(&t, i, nb[e], w[e]), off += fabs(w[e]);
            for (int32_t b = 0; b < border; b++)
                coo_add(&t, i, g + b, -0.5 / border), off += 0.5 / border;
        } else {
            for (int32_t j = 0; j < n; j++)
                if (j != i) {
                    const double v = j < g ? -1.0 / (1 + j % 7) : -0.3;
                    coo_add(&t, i, j, v), off += fabs(v);
                }
        }
        coo_add(&t, i, i, off + 1.0);
    }
    return coo_to_csr(&t, n);
}

/* The reference's algorithm before galloping: row J_p merged with J one
 * step at a time (O(|J|^2) a column). The galloping merge must give the
 * same terms in the same order: the same bits. */
static double plain_row(const gs_csr *T, const int32_t *rows, int64_t p, int64_t q0, int64_t q1,
                        double rhs, const double *x)
{
    const int32_t r = rows[p];
    double sum = rhs, diag = 0.0;
    int64_t q = q0, a = T->row_ptr[r];
    while (a < T->row_ptr[r + 1] && q <= q1) {
        if (T->col[a] < rows[q]) a++;
        else if (T->col[a] > rows[q]) q++;
        else if (q == p) diag = T->val[a++], q++;
        else sum -= T->val[a++] * x[q++];
    }
    return sum / diag;
}

static void plain_isai(const gs_csr *T, int lower, int k, gs_csr *M)
{
    gs_csr S, MT;
    ck_assert(gs_csr_pattern_power(T, k, 0, &S, NULL) == GS_OK);
    ck_assert(gs_csr_transpose(&S, &MT, NULL) == GS_OK);
    MT.val = malloc((size_t)MT.nnz * sizeof(double) + 1);
    for (int32_t j = 0; j < MT.n_rows; j++) {
        const int64_t b = MT.row_ptr[j], m = MT.row_ptr[j + 1] - b;
        const int32_t *rows = MT.col + b;
        double *x = MT.val + b;
        if (lower)
            for (int64_t p = 0; p < m; p++) x[p] = plain_row(T, rows, p, 0, p, p == 0, x);
        else
            for (int64_t p = m - 1; p >= 0; p--) x[p] = plain_row(T, rows, p, p, m - 1, p == m - 1, x);
    }
    ck_assert(gs_csr_transpose(&MT, M, NULL) == GS_OK);
    gs_csr_free(&S), gs_csr_free(&MT);
}

/* M_L and M_U of the factors of A against the plain merge, bit for bit, and
 * (T M - I) = 0 on the pattern. */
static void check_generate_plain(const gs_csr *A, int k, const char *what)
{
    gs_csr L, U;
    gs_error err = {0};
    ck_assert_msg(gs_ilu0(A, &L, &U, &err) == GS_OK, "%s: %s", what, err.msg);
    for (int lower = 1; lower >= 0; lower--) {
        const gs_csr *T = lower ? &L : &U;
        gs_csr M = {0}, P = {0};
        int64_t longest = 0;
        char label[128];
        snprintf(label, sizeof label, "%s, k = %d, M_%s", what, k, lower ? "L" : "U");
        ck_assert_msg(gs_isai_generate(NULL, T, lower, k, &M, &longest, &err) == GS_OK, "%s: %s",
                      label, err.msg);
        plain_isai(T, lower, k, &P);
        assert_same_pattern(&P, &M, label);
        ck_assert_msg(memcmp(P.val, M.val, (size_t)M.nnz * sizeof(double)) == 0,
                      "%s: values differ from the plain merge's", label);
        check_isai(T, &M, k, label);
        gs_csr_free(&M), gs_csr_free(&P);
    }
    gs_csr_free(&L), gs_csr_free(&U);
}

START_TEST(isai_dense_rows_and_columns)
{
    gs_csr A = arrowhead_first(2000), B = bordered_grid(40, 8), C = bordered_grid(12, 3);
    check_generate_plain(&A, 1, "arrowhead 2000");
    check_generate_plain(&B, 1, "bordered grid 40^2 + 8");
    check_generate_plain(&C, 2, "bordered grid 12^2 + 3");
    check_isai_on(&A, "1", "yes", "arrowhead 2000");
    check_isai_on(&B, "1", "yes", "bordered grid 40^2 + 8");
    check_isai_on(&C, "2", "no", "bordered grid 12^2 + 3");
    const char *kv[] = {NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    tu_pc_build_ok(&A, "isai", &p, &r);
    ck_assert(tu_pc_extra(r.pc, "ML_longest_column")->num == 2000);
    tu_pc_release(&r);
    tu_pc_build_ok(&B, "isai", &p, &r);
    ck_assert(tu_pc_extra(r.pc, "MU_longest_column")->num == 40 * 40 + 8);
    tu_pc_release(&r);
    gs_csr_free(&A), gs_csr_free(&B), gs_csr_free(&C);
}
END_TEST

/* --time-limit in the column loop: a deadline already past stops it with
 * GS_ERR_TIME_LIMIT naming the stage, M left empty. */
START_TEST(isai_generate_time_limit)
{
    gs_csr A = arrowhead_first(500), L, U;
    gs_error err = {0};
    ck_assert(gs_ilu0(&A, &L, &U, &err) == GS_OK);
    gs_pc pc;
    memset(&pc, 0, sizeof pc);
    pc.hook.deadline = DBL_MIN; /* the clock is past it */
    for (int lower = 1; lower >= 0; lower--) {
        gs_csr M = {0};
        int64_t longest = -1;
        gs_error_clear(&err);
        ck_assert_int_eq(gs_isai_generate(&pc, lower ? &L : &U, lower, 1, &M, &longest, &err),
                         GS_ERR_TIME_LIMIT);
        ck_assert_msg(strstr(err.msg, lower ? "'isai L'" : "'isai U'") != NULL, "%s", err.msg);
        ck_assert(M.row_ptr == NULL && M.val == NULL);
    }
    pc.hook.deadline = 0.0; /* no limit */
    gs_csr M = {0};
    int64_t longest = 0;
    ck_assert(gs_isai_generate(&pc, &L, 1, 1, &M, &longest, &err) == GS_OK && longest == 500);
    gs_csr_free(&M), gs_csr_free(&L), gs_csr_free(&U), gs_csr_free(&A);
}
END_TEST

/* ---- the apply ---- */

/* Dense solve of (L U) z = r by Gaussian elimination with partial
 * pivoting (independent of the triangular structure). */
static void dense_solve(int n, double *P, double *x)
{
    for (int k = 0; k < n; k++) {
        int piv = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(P[i * n + k]) > fabs(P[piv * n + k])) piv = i;
        for (int j = 0; j < n; j++) {
            double tmp = P[k * n + j];
            P[k * n + j] = P[piv * n + j], P[piv * n + j] = tmp;
        }
        double tmp = x[k];
        x[k] = x[piv], x[piv] = tmp;
        for (int i = k + 1; i < n; i++) {
            double l = P[i * n + k] / P[k * n + k];
            for (int j = k; j < n; j++) P[i * n + j] -= l * P[k * n + j];
            x[i] -= l * x[k];
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        for (int j = i + 1; j < n; j++) x[i] -= P[i * n + j] * x[j];
        x[i] /= P[i * n + i];
    }
}

static void dense_of(const gs_csr *A, double *D)
{
    memset(D, 0, (size_t)A->n_rows * A->n_cols * sizeof *D);
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            D[(size_t)i * A->n_cols + A->col[p]] = A->val[p];
}

START_TEST(exact_trisolve_is_lu_inverse)
{
    tu_rng g = tu_rng_seed(31);
    const int32_t n = 45;
    gs_csr A = random_dominant(&g, n, 5, 1.5, 0);
    const char *kv[] = {"trisolve", "exact", NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    saved s;
    tu_pc_build_ok(&A, "isai", &p, &r);
    save_and_read(r.pc, &s, 0);
    double *Ld = malloc(sizeof(double) * n * n), *Ud = malloc(sizeof(double) * n * n);
    double *P = calloc((size_t)n * n, sizeof(double));
    double rhs[45], z[45], zref[45];
    dense_of(&s.L, Ld), dense_of(&s.U, Ud);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) P[i * n + j] += Ld[i * n + k] * Ud[k * n + j];
    for (int i = 0; i < n; i++) zref[i] = rhs[i] = tu_uniform(&g) - 0.5;
    dense_solve(n, P, zref);
    tu_pc_apply(&r, rhs, z, n);
    /* L U is diagonally dominant here (dominance 1.5 survives ILU(0) up to
     * small fill), cond(L U) = O(10): both solutions agree to a few hundred
     * eps of max |z|, 1e-12 leaves a wide margin. */
    double zmax = 0;
    for (int i = 0; i < n; i++) zmax = fmax(zmax, fabs(zref[i]));
    ck_assert_msg(tu_max_abs_diff(z, zref, n) <= 1e-12 * zmax, "exact apply differs by %g",
                  tu_max_abs_diff(z, zref, n));
    free(Ld), free(Ud), free(P);
    saved_free(&s);
    tu_pc_release(&r);
    gs_csr_free(&A);
}
END_TEST

/* The ISAI apply is z = M_U (M_L r) with the saved matrices. */
START_TEST(isai_apply_is_mu_ml)
{
    gs_csr A = tu_generated("convdiff3d:7");
    const int32_t n = A.n_rows;
    gs_params p = {0};
    tu_pc_run r;
    saved s;
    tu_pc_build_ok(&A, "isai", &p, &r);
    save_and_read(r.pc, &s, 1);
    double *rhs = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
    double *z = malloc(n * sizeof(double)), *zref = malloc(n * sizeof(double));
    tu_rng g = tu_rng_seed(41);
    for (int32_t i = 0; i < n; i++) rhs[i] = tu_uniform(&g) - 0.5;
    gs_csr_spmv(&s.ML, rhs, y);
    gs_csr_spmv(&s.MU, y, zref);
    tu_pc_apply(&r, rhs, z, n);
    /* same operations in the same order on the same numbers */
    ck_assert(tu_max_abs_diff(z, zref, n) == 0.0);
    free(rhs), free(y), free(z), free(zref);
    saved_free(&s);
    tu_pc_release(&r);
    gs_csr_free(&A);
}
END_TEST

/* Scaling: B = D A D with D spanning 1e-3..1e3, so S is far from a
 * multiple of I. ILU(0) and ISAI commute with diagonal scaling, so the
 * operator must not change: compare D z (which is ~ M_A D^-1 r, of unit
 * size when r = D v) for --scale yes and no, in all three apply modes.
 * Rounding differs between the paths by O(n eps cond) with cond(L), cond(U)
 * = O(10) for this dominant matrix: 1e-11 relative is a wide margin. */
START_TEST(scaling_gives_the_same_operator)
{
    tu_rng g = tu_rng_seed(51);
    const int32_t n = 200;
    gs_csr B = random_dominant(&g, n, 4, 1.3, 0);
    double *d = malloc(n * sizeof(double)), *rhs = malloc(n * sizeof(double));
    double *zy = malloc(n * sizeof(double)), *zn = malloc(n * sizeof(double));
    for (int32_t i = 0; i < n; i++) d[i] = pow(10.0, 6.0 * tu_uniform(&g) - 3.0);
    gs_csr_scale_symmetric(&B, d);
    for (int32_t i = 0; i < n; i++) rhs[i] = d[i] * (tu_uniform(&g) - 0.5);
    const char *modes[3][4] = {{"trisolve", "isai", "isai-sweeps", "0"},
                               {"trisolve", "isai", "isai-sweeps", "2"},
                               {"trisolve", "exact", "isai-sweeps", "0"}};
    for (int mode = 0; mode < 3; mode++) {
        for (int sc = 0; sc < 2; sc++) {
            const char *kv[] = {modes[mode][0], modes[mode][1], modes[mode][2], modes[mode][3],
                                "scale", sc ? "yes" : "no", NULL};
            gs_params p = tu_params(kv);
            tu_pc_run r;
            tu_pc_build_ok(&B, "isai", &p, &r);
            tu_pc_apply(&r, rhs, sc ? zy : zn, n);
            if (sc) { /* the scaled path's saved factors are those of B itself */
                saved s;
                save_and_read(r.pc, &s, mode != 2);
                check_ilu0_factors(&B, &s.L, &s.U, "scaled path");
                saved_free(&s);
            }
            tu_pc_release(&r);
        }
        double diff = 0, size = 0;
        for (int32_t i = 0; i < n; i++) {
            diff = fmax(diff, fabs(d[i] * (zy[i] - zn[i])));
            size = fmax(size, fabs(d[i] * zn[i]));
        }
        ck_assert_msg(diff <= 1e-11 * size, "mode %d: scaled and unscaled differ by %g of %g",
                      mode, diff, size);
    }
    free(d), free(rhs), free(zy), free(zn);
    gs_csr_free(&B);
}
END_TEST

/* Real matrix with a wide range of diagonal entries: the scaled path's
 * factors are those of A (L U = A on the pattern) and its M_L, M_U satisfy
 * the ISAI property for A's factors. */
START_TEST(scaling_real_matrix)
{
    gs_csr A;
    if (!tu_real_matrix("bcsstk14", &A)) return;
    check_isai_on(&A, "1", "yes", "bcsstk14");
    gs_csr_free(&A);
}
END_TEST

/* Sweeps: for a lower triangular A, ILU(0) gives L = A diag(A)^-1 and
 * U = diag(A) with M_U = U^-1 exactly, so ||A z_s - r|| is the L stage's
 * residual ||L x_s - r||; for an upper triangular A, L = I and it is the U
 * stage's. Off-diagonals at fixed offsets (each row and column has at most
 * 4, each |n_ij| <= 0.07): ||N||_2 <= 0.3 for T = I + N. The residual map
 * of a sweep is I - T M; it vanishes on T's pattern and its other entries
 * are sums of products of two or more entries of N, so its norm is
 * O(||N||^2) < 0.3: the residual must fall at every sweep (until rounding
 * level), and four sweeps must gain at least 0.3^4 over none. */
static gs_csr banded_triangular(tu_rng *g, int32_t n, int upper)
{
    static const int offsets[4] = {1, 3, 17, 60};
    coo t = {0};
    for (int32_t i = 0; i < n; i++) {
        coo_add(&t, i, i, 1.0 + 0.5 * tu_uniform(g));
        for (int e = 0; e < 4; e++) {
            int32_t j = upper ? i + offsets[e] : i - offsets[e];
            if (j >= 0 && j < n) coo_add(&t, i, j, 0.07 * (2 * tu_uniform(g) - 1));
        }
    }
    return coo_to_csr(&t, n);
}

START_TEST(sweeps_reduce_the_residual)
{
    tu_rng g = tu_rng_seed(61);
    const int32_t n = 400;
    double *rhs = malloc(n * sizeof(double)), *z = malloc(n * sizeof(double));
    double *az = malloc(n * sizeof(double));
    for (int32_t i = 0; i < n; i++) rhs[i] = tu_uniform(&g) - 0.5;
    for (int upper = 0; upper < 2; upper++) {
        gs_csr A = banded_triangular(&g, n, upper);
        double previous = INFINITY, first = 0;
        for (int s = 0; s <= 4; s++) {
            char sweeps[8];
            snprintf(sweeps, sizeof sweeps, "%d", s);
            const char *kv[] = {"isai-sweeps", sweeps, "scale", "no", NULL};
            gs_params p = tu_params(kv);
            tu_pc_run r;
            tu_pc_build_ok(&A, "isai", &p, &r);
            tu_pc_apply(&r, rhs, z, n);
            tu_pc_release(&r);
            gs_csr_spmv(&A, z, az);
            double res = 0, rn = 0;
            for (int32_t i = 0; i < n; i++) res += (az[i] - rhs[i]) * (az[i] - rhs[i]);
            for (int32_t i = 0; i < n; i++) rn += rhs[i] * rhs[i];
            res = sqrt(res / rn);
            ck_assert_msg(res < previous || res < 1e-14,
                          "%s: sweeps %d: residual %g did not fall below %g",
                          upper ? "upper" : "lower", s, res, previous);
            previous = res;
            if (s == 0) first = res;
        }
        ck_assert_msg(previous <= 0.0081 * first || previous < 1e-14,
                      "4 sweeps: residual %g from %g", previous, first);
        gs_csr_free(&A);
    }
    free(rhs), free(z), free(az);
}
END_TEST

/* ---- iterations: IDR(4), b = 1, x0 = 0, ||r|| <= 1e-10 ||b|| (Table II) ---- */

static long idr_iterations(const gs_csr *A, const char *name, int *converged)
{
    tu_pc_run r;
    gs_params p = {0};
    gs_error err = {0};
    gs_krylov_result res = {0};
    gs_vec *b = NULL, *x = NULL;
    gs_krylov_opts opts = {.tol = 1e-10, .maxit = 10000, .restart = 30, .idr_s = 4, .check_every = 1};
    ck_assert_msg(tu_pc_build(A, name, &p, &r, &err) == GS_OK, "%s: %s", name, err.msg);
    const gs_engine_ops *o = r.eng->ops;
    ck_assert(o->vec_create(r.eng, A->n_rows, &b) == GS_OK);
    ck_assert(o->vec_create(r.eng, A->n_rows, &x) == GS_OK);
    ck_assert(o->set(r.eng, b, 1.0) == GS_OK && o->set(r.eng, x, 0.0) == GS_OK);
    ck_assert(gs_method_find("idr")->solve(r.eng, r.A, r.pc, b, x, &opts, &res) == GS_OK);
    *converged = res.reason == GS_REASON_CONVERGED;
    o->vec_destroy(r.eng, b);
    o->vec_destroy(r.eng, x);
    tu_pc_release(&r);
    long it = res.iterations;
    gs_krylov_result_free(&res);
    return it;
}

static void fewer_than_jacobi(const gs_csr *A, const char *what)
{
    int cj, ci;
    long j = idr_iterations(A, "jacobi", &cj), i = idr_iterations(A, "isai", &ci);
    ck_assert_msg(ci, "%s: isai did not converge", what);
    ck_assert_msg(!cj || i < j, "%s: isai %ld iterations, jacobi %ld", what, i, j);
}

START_TEST(fewer_iterations_than_jacobi)
{
    gs_csr A = tu_generated("poisson3d:12");
    fewer_than_jacobi(&A, "poisson3d:12");
    gs_csr_free(&A);
    /* SPD matrices on which ILU(0)'s factors are well enough conditioned
     * for ISAI(1) (docs/isai.md lists those where they are not) */
    const char *names[] = {"nos3", "494_bus", "bcsstm12", "bcsstk05"};
    for (int m = 0; m < 4; m++) {
        if (!tu_real_matrix(names[m], &A)) return;
        fewer_than_jacobi(&A, names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- bad input ---- */

static void expect_failure(const gs_csr *A, const char *const *kv, int status,
                           const char *fragment)
{
    gs_params p = tu_params(kv);
    tu_pc_expect_failure(A, "isai", &p, status, fragment, NULL);
}

START_TEST(bad_input_named)
{
    /* zero diagonal in row 3 */
    const int32_t r3[] = {0, 1, 1, 2, 2, 3}, c3[] = {0, 1, 2, 1, 2, 3};
    const double v3[] = {2, 2, 1, 1, 0, 2};
    gs_csr Z = tu_from_triplets(4, 4, 6, r3, c3, v3);
    const char *yes[] = {"scale", "yes", NULL}, *no[] = {"scale", "no", NULL};
    expect_failure(&Z, yes, GS_ERR_INPUT, "row 3");
    /* unscaled: u_33 = 0 - 1 * 1 / 2 is not zero, so make a_33 = 1/2 */
    Z.val[4] = 0.5;
    expect_failure(&Z, no, GS_ERR_NUMERIC, "zero pivot u_3,3 in row 3");
    Z.val[4] = 0.0;
    Z.val[0] = 0.0; /* a_11 = 0: the first pivot */
    expect_failure(&Z, no, GS_ERR_NUMERIC, "row 1");
    gs_csr_free(&Z);

    /* n x n matrices of four entries, refused unscaled and scaled */
    static const struct {
        int32_t n, r[4], c[4];
        double v[4];
        int status;
        const char *unscaled, *scaled;
    } small[] = {
        /* a computed zero pivot: [[1 1] [1 1]] has u_22 = 0 */
        {2, {0, 0, 1, 1}, {0, 1, 0, 1}, {1, 1, 1, 1}, GS_ERR_NUMERIC, "row 2", "row 2"},
        /* missing diagonal entry in row 2 */
        {3, {0, 1, 2, 2}, {0, 0, 1, 2}, {1, 1, 1, 1}, GS_ERR_INPUT, "row 2 has no diagonal entry",
         "row 2"},
    };
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        gs_csr S = tu_from_triplets(small[k].n, small[k].n, 4, small[k].r, small[k].c, small[k].v);
        expect_failure(&S, no, small[k].status, small[k].unscaled);
        expect_failure(&S, yes, small[k].status, small[k].scaled);
        gs_csr_free(&S);
    }

    /* NaN off the diagonal */
    gs_csr N = tu_generated("poisson3d:3");
    N.val[N.row_ptr[5] + 1] = NAN;
    expect_failure(&N, no, GS_ERR_NUMERIC, "row 6");
    gs_csr_free(&N);

    /* non-square */
    const int32_t rn[] = {0, 1, 2}, cn[] = {0, 1, 3};
    const double vn[] = {1, 1, 1};
    gs_csr R = tu_from_triplets(3, 4, 3, rn, cn, vn);
    expect_failure(&R, NULL, GS_ERR_INPUT, "3 x 4, not square");
    gs_csr_free(&R);
}
END_TEST

START_TEST(bad_parameters_named)
{
    gs_csr A = tu_generated("poisson3d:3");
    static const tu_bad_param bad[] = {
        {"isai-power", "0", NULL},  {"isai-power", "9", NULL},    {"isai-power", "two", NULL},
        {"isai-sweeps", "-1", NULL}, {"isai-sweeps", "101", NULL}, {"trisolve", "cusparse", NULL},
        {"scale", "maybe", NULL},    {"omega", "1", NULL},         {"ilu", "sweeps:0", NULL},
        {"ilu", "sweeps:1001", NULL}, {"ilu", "sweeps:", NULL},    {"ilu", "sweeps:x", NULL},
        {"ilu", "sweeps:-2", NULL},  {"ilu", "exactly", NULL},     {"ilu", "sweeps:N", NULL},
        {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&A, "isai", bad);
    /* exact triangular solves build no ISAI: its options would be ignored */
    const char *sweeps[] = {"trisolve", "exact", "isai-sweeps", "2", NULL};
    expect_failure(&A, sweeps, GS_ERR_USAGE, "--isai-sweeps 2 has no effect");
    const char *power[] = {"trisolve", "exact", "isai-power", "2", NULL};
    expect_failure(&A, power, GS_ERR_USAGE, "--isai-power 2 has no effect");
    gs_csr_free(&A);
}
END_TEST

/* The fixed-point ILU(0) (Chow-Patel, Jacobi order): the exact ILU(0) is its
 * fixed point, reached once the sweeps outnumber the elimination's depth
 * (here far fewer than 200 on a 6^3 grid); a single sweep is not yet it; the
 * setup reports the sweeps and takes them through --ilu sweeps:N. */
START_TEST(ilu0_sweeps_converge_to_ilu0)
{
    const char *specs[] = {"convdiff3d:6", "poisson3d27:5"};
    for (int s = 0; s < 2; s++) {
        gs_csr A = tu_generated(specs[s]), L = {0}, U = {0}, L1 = {0}, U1 = {0}, Ls = {0}, Us = {0};
        gs_error err = {0};
        ck_assert_int_eq(gs_ilu0(&A, &L, &U, &err), GS_OK);
        ck_assert_msg(gs_ilu0_sweeps(&A, 200, &Ls, &Us, &err) == GS_OK, "%s", err.msg);
        ck_assert_msg(gs_ilu0_sweeps(&A, 1, &L1, &U1, &err) == GS_OK, "%s", err.msg);
        ck_assert_int_eq(Ls.nnz, L.nnz);
        ck_assert_int_eq(Us.nnz, U.nnz);
        double worst = 0.0, moved = 0.0;
        for (int64_t p = 0; p < L.nnz; p++) {
            ck_assert_int_eq(Ls.col[p], L.col[p]);
            worst = fmax(worst, fabs(Ls.val[p] - L.val[p]) / (1.0 + fabs(L.val[p])));
            moved = fmax(moved, fabs(L1.val[p] - L.val[p]));
        }
        for (int64_t p = 0; p < U.nnz; p++) {
            ck_assert_int_eq(Us.col[p], U.col[p]);
            worst = fmax(worst, fabs(Us.val[p] - U.val[p]) / (1.0 + fabs(U.val[p])));
            moved = fmax(moved, fabs(U1.val[p] - U.val[p]));
        }
        ck_assert_msg(worst <= 1e-13, "%s: 200 sweeps are %.3g from ILU(0)", specs[s], worst);
        ck_assert_msg(moved > 1e-6, "%s: one sweep is already ILU(0) (%.3g)", specs[s], moved);
        gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U), gs_csr_free(&L1), gs_csr_free(&U1);
        gs_csr_free(&Ls), gs_csr_free(&Us);
    }
    /* through the setup: the report names the sweeps; a zero pivot is named */
    gs_csr A = tu_generated("convdiff3d:6");
    const char *kv[] = {"ilu", "sweeps:3", NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    tu_pc_build_ok(&A, "isai", &p, &r);
    ck_assert_double_eq(tu_pc_extra(r.pc, "ilu_sweeps")->num, 3.0);
    ck_assert_msg(strstr(r.pc->description, "ilu=sweeps:3") != NULL, "%s", r.pc->description);
    tu_pc_release(&r);
    gs_csr_free(&A);
    const int32_t ri[] = {0, 0, 1, 1}, ci[] = {0, 1, 0, 1};
    const double v[] = {1, 1, 1, 1};
    gs_csr B = tu_from_triplets(2, 2, 4, ri, ci, v);
    const char *noscale[] = {"ilu", "sweeps:2", "scale", "no", NULL};
    gs_params q = tu_params(noscale);
    tu_pc_expect_failure(&B, "isai", &q, GS_ERR_NUMERIC, "zero pivot u_2,2 in row 2", NULL);
    gs_csr_free(&B);
}
END_TEST

/* Report: stages named as documented, nnz and description as used. */
START_TEST(report_items)
{
    gs_csr A = tu_generated("poisson3d:5");
    const char *kv[] = {"isai-sweeps", "1", NULL};
    gs_params p = tu_params(kv);
    tu_pc_run r;
    tu_pc_build_ok(&A, "isai", &p, &r);
    const char *stages[] = {"scaling", "ilu0", "isai L", "isai U", "upload", NULL};
    tu_assert_stages(r.pc, stages);
    /* ISAI(1): nnz(M_L) + nnz(M_U) = nnz(A) + n; sweeps also store L and U */
    ck_assert_int_eq(r.pc->nnz, 2 * (A.nnz + A.n_rows));
    ck_assert_ptr_nonnull(strstr(r.pc->description, "ISAI(1)"));
    ck_assert_ptr_nonnull(strstr(r.pc->description, "sweeps=1"));
    ck_assert(r.pc->apply_bytes > 0);
    tu_pc_release(&r);
    gs_csr_free(&A);
}
END_TEST

/* Every allocation of the setup made to fail in turn (error.h's injector):
 * each failure is reported as GS_ERR_NOMEM, never a crash or a leak. */
START_TEST(allocation_failures_reported)
{
    const char *kv[] = {"isai-sweeps", "1", NULL};
    gs_params p = tu_params(kv);
    tu_assert_allocation_failures("convdiff3d:4", "isai", &p, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_isai");
    TCase *t = tu_add_tcase(s, "isai", 120);
    tcase_add_test(t, ilu0_matches_a_on_its_pattern_generated);
    tcase_add_test(t, ilu0_on_every_real_matrix);
    tcase_add_test(t, isai_generated_k1_k2);
    tcase_add_test(t, isai_real_k1_k2);
    tcase_add_test(t, isai_long_columns);
    tcase_add_test(t, isai_dense_rows_and_columns);
    tcase_add_test(t, isai_generate_time_limit);
    tcase_add_test(t, exact_trisolve_is_lu_inverse);
    tcase_add_test(t, isai_apply_is_mu_ml);
    tcase_add_test(t, scaling_gives_the_same_operator);
    tcase_add_test(t, scaling_real_matrix);
    tcase_add_test(t, sweeps_reduce_the_residual);
    tcase_add_test(t, fewer_iterations_than_jacobi);
    tcase_add_test(t, bad_input_named);
    tcase_add_test(t, bad_parameters_named);
    tcase_add_test(t, ilu0_sweeps_converge_to_ilu0);
    tcase_add_test(t, report_items);
    tcase_add_test(t, allocation_failures_reported);
    return tu_run_suite(s);
}
