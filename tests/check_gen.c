/* check_gen.c - the built-in problems (src/io/gen.c, src/io/gen_stress.c): every
 * entry against the stencils of docs/problems.md, closed-form nnz, row sums,
 * symmetry, diagonal dominance, the defining facts of each stress problem, and
 * rejection of malformed specs. */
#include "gen.h"
#include "testutil.h"

static const char *const kinds[] = {"poisson3d", "poisson3d27", "aniso3d", "convdiff3d"};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* Grids with every dimension at 1, 2 and larger, and unequal sides. */
static const int grids[][3] = {{1, 1, 1}, {1, 1, 7}, {1, 6, 1}, {5, 1, 1},
                               {2, 2, 2}, {5, 6, 7}, {7, 3, 2}, {9, 9, 9}};
#define N_GRIDS ((int)(sizeof grids / sizeof grids[0]))

/* Coefficient coupling a grid point to its neighbour at offset (di, dj, dk),
 * written from docs/problems.md independently of src/io/gen.c. */
static double expected_coefficient(const char *kind, int di, int dj, int dk)
{
    int centre = di == 0 && dj == 0 && dk == 0;
    int axis = abs(di) + abs(dj) + abs(dk) == 1;
    int backward = di + dj + dk == -1;
    if (strcmp(kind, "poisson3d") == 0) return centre ? 6 : axis ? -1 : 0;
    if (strcmp(kind, "poisson3d27") == 0) return centre ? 26 : -1;
    if (strcmp(kind, "aniso3d") == 0)
        return centre ? 2.22 : !axis ? 0 : di ? -1 : dj ? -0.1 : -0.01;
    if (strcmp(kind, "convdiff3d") == 0) return centre ? 7.5 : !axis ? 0 : backward ? -1.5 : -1;
    ck_abort_msg("unknown kind %s", kind);
    return 0;
}

static gs_csr generate(const char *kind, const int g[3], char *name, size_t name_len)
{
    char spec[128];
    gs_csr A;
    gs_error err = {0};
    snprintf(spec, sizeof spec, "%s:%dx%dx%d", kind, g[0], g[1], g[2]);
    ck_assert_msg(gs_generate(spec, &A, name, name_len, &err) == GS_OK, "%s: %s", spec,
                  err.msg);
    ck_assert_msg(gs_csr_validate(&A, &err) == GS_OK, "%s: %s", spec, err.msg);
    ck_assert_int_eq(A.n_rows, g[0] * g[1] * g[2]);
    ck_assert_int_eq(A.n_cols, A.n_rows);
    ck_assert_ptr_nonnull(A.val);
    return A;
}

/* Loop index _i runs over kind x grid. */
#define KIND(i) kinds[(i) / N_GRIDS]
#define GRID(i) grids[(i) % N_GRIDS]

START_TEST(test_entries_match_stencil)
{
    const char *kind = KIND(_i);
    const int *g = GRID(_i);
    char name[64], expect_name[128];
    gs_csr A = generate(kind, g, name, sizeof name);
    snprintf(expect_name, sizeof expect_name, "%s:%dx%dx%d", kind, g[0], g[1], g[2]);
    ck_assert_str_eq(name, expect_name);
    int n = A.n_rows;
    for (int r = 0; r < n; r++) {
        int i = r % g[0], j = (r / g[0]) % g[1], k = r / (g[0] * g[1]);
        for (int c = 0; c < n; c++) {
            int di = c % g[0] - i, dj = (c / g[0]) % g[1] - j, dk = c / (g[0] * g[1]) - k;
            int near = abs(di) <= 1 && abs(dj) <= 1 && abs(dk) <= 1;
            double expect = near ? expected_coefficient(kind, di, dj, dk) : 0.0;
            int64_t p = gs_csr_find(&A, r, c);
            ck_assert_msg((p >= 0) == (expect != 0.0), "%s row %d col %d: stored %d", name, r,
                          c, p >= 0);
            if (p >= 0)
                ck_assert_msg(fabs(A.val[p] - expect) <= 1e-15 * fabs(expect),
                              "%s a(%d,%d) = %.17g, expected %.17g", name, r, c, A.val[p],
                              expect);
        }
    }
    gs_csr_free(&A);
}
END_TEST

START_TEST(test_nnz_closed_form)
{
    const char *kind = KIND(_i);
    const int *g = GRID(_i);
    gs_csr A = generate(kind, g, NULL, 0);
    int64_t nx = g[0], ny = g[1], nz = g[2], n = nx * ny * nz, expect;
    if (strcmp(kind, "poisson3d27") == 0)
        expect = (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2);
    else
        expect = 7 * n - 2 * (ny * nz + nx * nz + nx * ny);
    ck_assert_int_eq(A.nnz, expect);
    gs_csr_free(&A);
}
END_TEST

/* Interior rows sum to 0 (zero-order-free operators); boundary rows are
 * positive; |a_ii| >= sum_j |a_ij| everywhere; M-matrix signs. */
START_TEST(test_row_sums_and_dominance)
{
    const char *kind = KIND(_i);
    const int *g = GRID(_i);
    gs_csr A = generate(kind, g, NULL, 0);
    for (int r = 0; r < A.n_rows; r++) {
        int i = r % g[0], j = (r / g[0]) % g[1], k = r / (g[0] * g[1]);
        int interior = i > 0 && i < g[0] - 1 && j > 0 && j < g[1] - 1 && k > 0 &&
                       k < g[2] - 1;
        double sum = 0, off = 0, diag = 0, scale = 0;
        for (int64_t p = A.row_ptr[r]; p < A.row_ptr[r + 1]; p++) {
            sum += A.val[p];
            scale += fabs(A.val[p]);
            if (A.col[p] == r)
                diag = A.val[p];
            else {
                off += fabs(A.val[p]);
                ck_assert_msg(A.val[p] < 0, "row %d: positive off-diagonal", r);
            }
        }
        ck_assert_msg(diag > 0, "row %d: diagonal %g", r, diag);
        ck_assert_msg(diag >= off * (1 - 1e-14), "row %d: not diagonally dominant", r);
        if (interior)
            ck_assert_msg(fabs(sum) <= 1e-14 * scale, "interior row %d sums to %g", r, sum);
        else
            ck_assert_msg(sum > 1e-14 * scale, "boundary row %d sums to %g", r, sum);
    }
    gs_csr_free(&A);
}
END_TEST

START_TEST(test_symmetry)
{
    const char *kind = KIND(_i);
    const int *g = GRID(_i);
    gs_csr A = generate(kind, g, NULL, 0);
    ck_assert(gs_csr_is_structurally_symmetric(&A));
    int n_off = A.nnz > A.n_rows; /* any off-diagonal entry at all? */
    if (strcmp(kind, "convdiff3d") == 0)
        ck_assert_int_eq(gs_csr_is_symmetric(&A, 1e-3), !n_off);
    else
        ck_assert(gs_csr_is_symmetric(&A, 0.0));
    gs_csr_free(&A);
}
END_TEST

START_TEST(test_size_forms)
{
    gs_csr A, B;
    gs_error err = {0};
    char name[64];
    ck_assert_int_eq(gs_generate("poisson3d:6", &A, name, sizeof name, &err), GS_OK);
    ck_assert_str_eq(name, "poisson3d:6x6x6");
    ck_assert_int_eq(gs_generate("poisson3d:6x6x6", &B, NULL, 0, &err), GS_OK);
    ck_assert_int_eq(A.nnz, B.nnz);
    ck_assert_mem_eq(A.col, B.col, (size_t)A.nnz * sizeof *A.col);
    gs_csr_free(&A);
    gs_csr_free(&B);
    ck_assert_int_eq(gs_generate("aniso3d:64x32x16", &A, name, 8, &err), GS_OK);
    ck_assert_str_eq(name, "aniso3d");                                /* truncated, terminated */
    ck_assert_int_eq(A.n_rows, 64 * 32 * 16);
    gs_csr_free(&A);
    /* large enough for the OpenMP path */
    ck_assert_int_eq(gs_generate("poisson3d27:40x30x20", &A, NULL, 0, &err), GS_OK);
    ck_assert_int_eq(gs_csr_validate(&A, &err), GS_OK);
    ck_assert_int_eq(A.nnz, (int64_t)118 * 88 * 58);
    gs_csr_free(&A);
}
END_TEST

static const char *const bad_specs[] = {
    "",                     "poisson3d",          "poisson3d:",         ":64",
    "poisson3d:0",          "poisson3d:-4",       "poisson3d:+4",       "poisson3d: 4",
    "poisson3d:4 ",         "poisson3d:4.0",      "poisson3d:4x4",      "poisson3d:4x4x",
    "poisson3d:4x4x4x4",    "poisson3d:4X4X4",    "poisson3d:4x0x4",    "poisson3d:x4x4",
    "Poisson3d:4",          "poisson2d:4",        "poisson3d27x:4",     "poisson:4",
    "poisson3d:1291",       "poisson3d:99999999999", "poisson3d:2147483648x1x1",
    "poisson3d:46341x46341x1", "poisson3d:65536x65536x65536", "convdiff3d:1x1x4294967297",
    /* the stress set: malformed, zero, and n beyond 2^31 - 1 rows */
    "hub:0",                "hub",                "hub:",               "hub:4x4x4",
    "hub:4x",               "hub:x4",             "hub:4 ",             "hub:0x5",
    "hub:46341",            "hub:2147483647x1",   "chain:",             "chain",
    "chain:0",              "chain:1e5",          "chain:+5",           "chain: 5",
    "chain:2147483648",     "Chain:5",            "chains:5",           "powerlaw:3x3",
    "powerlaw:0",           "powerlaw:-5",        "powerlaw:5x",        "powerlaw:99999999999",
    "elast3d:2000",         "elast3d:900",        "elast3d:715827883x1x1", "elast3d:4x4",
    "elast3d:",             "elast2d:4",          "bordered:",          "bordered:4x4",
    "bordered:2147483640x1x1", "bordered:1291",   "bordered:0x4x4",
};

/* Sizes at the row limit (n = 2^31 - 1 or just below) pass the checks. */
static const char *const largest_specs[] = {
    "hub:2147483646x1", "hub:46340", "bordered:2147483639x1x1", "elast3d:715827882x1x1",
    "chain:2147483647", "powerlaw:2147483647",
};

START_TEST(test_bad_specs_rejected)
{
    const char *spec = bad_specs[_i];
    gs_csr A;
    gs_error err = {0};
    memset(&A, 0xAB, sizeof A);
    ck_assert_msg(gs_generate(spec, &A, NULL, 0, &err) == GS_ERR_USAGE, "'%s' accepted", spec);
    ck_assert_int_eq(err.status, GS_ERR_USAGE);
    gs_error check_err = {0};
    ck_assert_msg(gs_generate_check(spec, &check_err) == GS_ERR_USAGE, "'%s' checked", spec);
    ck_assert_str_eq(check_err.msg, err.msg);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "'%s'", spec);
    ck_assert_msg(strstr(err.msg, quoted) != NULL, "message '%s' does not name %s", err.msg,
                  quoted);
    ck_assert_ptr_null(A.row_ptr);
    ck_assert_ptr_null(A.col);
    ck_assert_ptr_null(A.val);
}
END_TEST

START_TEST(test_largest_specs_pass_the_checks)
{
    gs_error err = {0};
    ck_assert_msg(gs_generate_check(largest_specs[_i], &err) == GS_OK, "%s: %s",
                  largest_specs[_i], err.msg);
}
END_TEST

START_TEST(test_allocation_failures)
{
    long k;
    for (k = 0; k < 20; k++) {
        gs_csr A;
        gs_error err = {0};
        gs_alloc_fail_after(k);
        int status = gs_generate("convdiff3d:5x4x3", &A, NULL, 0, &err);
        gs_alloc_fail_after(-1);
        if (status == GS_OK) {
            gs_csr_free(&A);
            break;
        }
        ck_assert_int_eq(status, GS_ERR_NOMEM);
        ck_assert_ptr_null(A.row_ptr);
        ck_assert_ptr_null(A.col);
        ck_assert_ptr_null(A.val);
    }
    ck_assert(k >= 1 && k < 20);
}
END_TEST

static const char *const stress_kinds[] = {"elast3d", "bordered", "hub", "powerlaw", "chain"};
#define N_STRESS ((int)(sizeof stress_kinds / sizeof stress_kinds[0]))

START_TEST(test_help_lists_every_kind)
{
    const char *help = gs_generate_help();
    ck_assert_ptr_nonnull(help);
    int lines = 0;
    for (const char *c = help; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, N_KINDS + N_STRESS);
    for (int t = 0; t < N_KINDS + N_STRESS; t++) {
        const char *kind = t < N_KINDS ? kinds[t] : stress_kinds[t - N_KINDS];
        char needle[64];
        snprintf(needle, sizeof needle, " %s:", kind);
        ck_assert_msg(strstr(help, needle) != NULL, "help lacks %s", kind);
    }
}
END_TEST

/* ---- the stress set (src/io/gen_stress.c), each by the facts that define it ---- */

static gs_csr generate_spec(const char *spec, char *name, size_t name_len)
{
    gs_csr A;
    gs_error err = {0};
    ck_assert_msg(gs_generate(spec, &A, name, name_len, &err) == GS_OK, "%s: %s", spec, err.msg);
    ck_assert_msg(gs_csr_validate(&A, &err) == GS_OK, "%s: %s", spec, err.msg); /* sorted, */
    ck_assert_int_eq(A.n_cols, A.n_rows);                                 /* no duplicates */
    ck_assert_ptr_nonnull(A.val);
    double *d = malloc((size_t)A.n_rows * sizeof *d + 1);
    ck_assert_int_eq(gs_csr_diagonal(&A, d), 0);                         /* diagonal stored */
    free(d);
    return A;
}

static int64_t row_length(const gs_csr *A, int64_t i) { return A->row_ptr[i + 1] - A->row_ptr[i]; }

static double entry(const gs_csr *A, int64_t i, int64_t j) /* 0 where not stored */
{
    const int64_t p = gs_csr_find(A, (int32_t)i, (int32_t)j);
    return p >= 0 ? A->val[p] : 0.0;
}

/* Row i's off-diagonal sum of |a_ij| and its diagonal. */
static void row_dominance(const gs_csr *A, int64_t i, double *off, double *diag)
{
    *off = *diag = 0.0;
    for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
        if (A->col[p] == i) *diag = A->val[p];
        else *off += fabs(A->val[p]);
}

/* K27 of a grid g, written from docs/problems.md: 26 on the diagonal, -1 between
 * nodes whose coordinates differ by at most 1 in each direction. */
static double k27(const int g[3], int64_t p, int64_t q)
{
    const int64_t di = q % g[0] - p % g[0], dj = (q / g[0]) % g[1] - (p / g[0]) % g[1];
    const int64_t dk = q / ((int64_t)g[0] * g[1]) - p / ((int64_t)g[0] * g[1]);
    if (p == q) return 26;
    return llabs(di) <= 1 && llabs(dj) <= 1 && llabs(dk) <= 1 ? -1 : 0;
}

static const double elast3d_c[3][3] = {{4, 1, 1}, {1, 4, 1}, {1, 1, 4}};
static const int elast3d_grids[][3] = {{1, 1, 1}, {2, 3, 4}, {3, 3, 3}, {4, 2, 3}, {5, 1, 2}};

START_TEST(test_elast3d_is_k27_kron_c)
{
    const int *g = elast3d_grids[_i];
    char spec[64], name[64], expect_name[64];
    snprintf(spec, sizeof spec, "elast3d:%dx%dx%d", g[0], g[1], g[2]);
    gs_csr A = generate_spec(spec, name, sizeof name);
    snprintf(expect_name, sizeof expect_name, "elast3d:%dx%dx%d", g[0], g[1], g[2]);
    ck_assert_str_eq(name, expect_name);
    const int64_t n0 = (int64_t)g[0] * g[1] * g[2];
    ck_assert_int_eq(A.n_rows, 3 * n0);
    ck_assert_int_eq(A.nnz, 9LL * (3 * g[0] - 2) * (3 * g[1] - 2) * (3 * g[2] - 2));
    for (int64_t r = 0; r < A.n_rows; r++)                 /* every entry, stored or not */
        for (int64_t c = 0; c < A.n_cols; c++) {
            const double expect = k27(g, r / 3, c / 3) * elast3d_c[r % 3][c % 3];
            ck_assert_msg((gs_csr_find(&A, (int32_t)r, (int32_t)c) >= 0) == (expect != 0.0),
                          "%s (%lld, %lld) stored wrongly", spec, (long long)r, (long long)c);
            ck_assert_msg(entry(&A, r, c) == expect, "%s a(%lld, %lld) = %g, expected %g", spec,
                          (long long)r, (long long)c, entry(&A, r, c), expect);
        }
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    if (g[0] == 3 && g[1] == 3 && g[2] == 3)       /* the centre node: 27 blocks of 3 */
        for (int c = 0; c < 3; c++) ck_assert_int_eq(row_length(&A, 3 * 13 + c), 81);
    gs_csr_free(&A);
}
END_TEST

/* Large enough for the OpenMP path: counts and a few entries. */
START_TEST(test_elast3d_large)
{
    const int g[3] = {20, 19, 18};
    gs_csr A = generate_spec("elast3d:20x19x18", NULL, 0);
    ck_assert_int_eq(A.n_rows, 3 * 20 * 19 * 18);
    ck_assert_int_eq(A.nnz, 9LL * 58 * 55 * 52);
    const int64_t interior = 5 + 20 * (7 + 19 * 9), corner = 20 * 19 * 18 - 1;
    for (int c = 0; c < 3; c++) {
        ck_assert_int_eq(row_length(&A, 3 * interior + c), 81);
        ck_assert_int_eq(row_length(&A, 3 * corner + c), 8 * 3);
    }
    const int64_t q[] = {interior, interior - 1, interior + 20 + 1, interior - 20 * 19 - 20 - 1,
                         interior + 2, interior + 20 * 19 * 2};
    for (size_t t = 0; t < sizeof q / sizeof q[0]; t++)
        for (int c = 0; c < 3; c++)
            for (int d = 0; d < 3; d++)
                ck_assert(entry(&A, 3 * interior + c, 3 * q[t] + d) ==
                          k27(g, interior, q[t]) * elast3d_c[c][d]);
    gs_csr_free(&A);
}
END_TEST

static const int bordered_grids[][3] = {{1, 1, 1}, {2, 1, 1}, {3, 1, 1}, {2, 2, 1},
                                        {3, 4, 1}, {4, 3, 2}, {6, 6, 1}, {3, 3, 3}};

/* Rows n0 .. n0+7 are dense, the last 8 columns are dense, the grid block is
 * convdiff3d's matrix, border values -(1..4) / (4 n0), the border block d I with
 * d = 1 from n0 = 4 on (2 below), and ||E||_F ||F||_F / lambda_min((K + K^T)/2) < d. */
START_TEST(test_bordered_structure)
{
    const int *g = bordered_grids[_i];
    char spec[64], grid_spec[64], name[64];
    snprintf(spec, sizeof spec, "bordered:%dx%dx%d", g[0], g[1], g[2]);
    snprintf(grid_spec, sizeof grid_spec, "convdiff3d:%dx%dx%d", g[0], g[1], g[2]);
    gs_csr A = generate_spec(spec, name, sizeof name), K = generate_spec(grid_spec, NULL, 0);
    ck_assert_str_eq(name, spec);
    const int64_t nx = g[0], ny = g[1], nz = g[2], n0 = nx * ny * nz;
    ck_assert_int_eq(A.n_rows, n0 + 8);
    ck_assert_int_eq(A.nnz, 7 * n0 - 2 * (ny * nz + nx * nz + nx * ny) + 16 * n0 + 8);
    const double d = n0 >= 4 ? 1.0 : 2.0;
    double e2 = 0, f2 = 0;
    int64_t unlike = 0; /* border pairs with a(i, n0+b) != a(n0+b, i): h1 != h2 */
    for (int64_t i = 0; i < n0; i++) {
        ck_assert_int_eq(row_length(&A, i), row_length(&K, i) + 8);
        for (int64_t p = 0; p < row_length(&K, i); p++) {
            ck_assert_int_eq(A.col[A.row_ptr[i] + p], K.col[K.row_ptr[i] + p]);
            ck_assert(A.val[A.row_ptr[i] + p] == K.val[K.row_ptr[i] + p]);
        }
        for (int b = 0; b < 8; b++) {
            const double e = entry(&A, i, n0 + b) * 4 * n0, f = entry(&A, n0 + b, i) * 4 * n0;
            ck_assert_msg(e == floor(e) && e >= -4 && e <= -1, "%s a(%lld, n0+%d)", spec,
                          (long long)i, b);
            ck_assert_msg(f == floor(f) && f >= -4 && f <= -1, "%s a(n0+%d, %lld)", spec, b,
                          (long long)i);
            unlike += e != f;
            e2 += entry(&A, i, n0 + b) * entry(&A, i, n0 + b);
            f2 += entry(&A, n0 + b, i) * entry(&A, n0 + b, i);
        }
    }
    for (int b = 0; b < 8; b++) {
        ck_assert_int_eq(row_length(&A, n0 + b), n0 + 1);
        ck_assert(entry(&A, n0 + b, n0 + b) == d);
    }
    double lambda = 7.5;                      /* 7.5 - 2.5 sum_d cos(pi / (N_d + 1)) */
    for (int k = 0; k < 3; k++) lambda -= 2.5 * cos(3.14159265358979323846 / (g[k] + 1));
    ck_assert_msg(sqrt(e2 * f2) / lambda < d, "%s: Schur bound %g", spec, sqrt(e2 * f2) / lambda);
    ck_assert(gs_csr_is_structurally_symmetric(&A));
    if (n0 >= 4) ck_assert(!gs_csr_is_symmetric(&A, 1e-3));
    if (n0 >= 4) ck_assert_int_gt(unlike, 8 * n0 / 2);   /* about 3/4 of the pairs differ */
    gs_csr_free(&A);
    gs_csr_free(&K);
}
END_TEST

START_TEST(test_bordered_large)
{
    gs_csr A = generate_spec("bordered:70x70x1", NULL, 0);
    const int64_t n0 = 4900;
    ck_assert_int_eq(A.n_rows, n0 + 8);
    ck_assert_int_eq(A.nnz, 7 * n0 - 2 * (70 + 70 + 4900) + 16 * n0 + 8);
    int seen[5] = {0};                         /* every value -(1..4) / (4 n0) occurs */
    for (int64_t i = 0; i < n0; i++)
        for (int b = 0; b < 8; b++) {
            const int64_t p = A.row_ptr[i + 1] - 8 + b;       /* the last 8 columns: dense */
            ck_assert_int_eq(A.col[p], n0 + b);
            seen[(int)lround(-A.val[p] * 4 * n0)]++;
        }
    for (int v = 1; v <= 4; v++) ck_assert_int_gt(seen[v], 8 * n0 / 8);
    for (int b = 0; b < 8; b++) ck_assert_int_eq(row_length(&A, n0 + b), n0 + 1);
    gs_csr_free(&A);
}
END_TEST

static const int hub_grids[][2] = {{1, 1}, {4, 5}, {7, 3}, {21, 1}, {10, 10}, {1, 41}, {100, 100}};

/* The 5-point Laplacian, -1 between the hub and nodes 0, 20, 40, ..., diagonals
 * 4 (+1 where coupled) and ceil(n0/20) + 1 on the hub; symmetric, diagonally
 * dominant, strictly on the hub row. */
START_TEST(test_hub_structure)
{
    const int nx = hub_grids[_i][0], ny = hub_grids[_i][1];
    char spec[64], name[64];
    snprintf(spec, sizeof spec, "hub:%dx%d", nx, ny);
    gs_csr A = generate_spec(spec, name, sizeof name);
    ck_assert_str_eq(name, spec);
    const int64_t n0 = (int64_t)nx * ny, hubs = (n0 + 19) / 20;
    ck_assert_int_eq(A.n_rows, n0 + 1);
    ck_assert_int_eq(A.nnz, 5 * n0 - 2 * nx - 2 * ny + 2 * hubs + 1);
    ck_assert_int_eq(row_length(&A, n0), hubs + 1);
    ck_assert(entry(&A, n0, n0) == (double)hubs + 1);
    const int dense = n0 <= 200;
    for (int64_t r = 0; r < n0; r++) {
        ck_assert(entry(&A, r, n0) == (r % 20 == 0 ? -1.0 : 0.0));
        ck_assert(entry(&A, n0, r) == (r % 20 == 0 ? -1.0 : 0.0));
        ck_assert(entry(&A, r, r) == (r % 20 == 0 ? 5.0 : 4.0));
        for (int64_t c = dense ? 0 : n0; c < n0; c++) {
            const int64_t dx = llabs(c % nx - r % nx), dy = llabs(c / nx - r / nx);
            if (c != r) ck_assert(entry(&A, r, c) == (dx + dy == 1 ? -1.0 : 0.0));
        }
        double off, diag;
        row_dominance(&A, r, &off, &diag);
        ck_assert(diag >= off);
    }
    double off, diag;
    row_dominance(&A, n0, &off, &diag);
    ck_assert(diag > off);
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    gs_csr_free(&A);
}
END_TEST

/* Chung-Lu: symmetric, off-diagonals are minus edge multiplicities, a_ii =
 * sum |a_ij| + 1, about 2 m = 10 N off-diagonal weight, hubs far above the mean
 * and not at row 0 (labels scrambled), the same matrix on every call. */
START_TEST(test_powerlaw_structure)
{
    char name[64];
    gs_csr A = generate_spec("powerlaw:20000", name, sizeof name), B;
    ck_assert_str_eq(name, "powerlaw:20000");
    ck_assert_int_eq(A.n_rows, 20000);
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    double weight = 0;
    int64_t longest = 0;
    for (int64_t i = 0; i < A.n_rows; i++) {
        double off, diag;
        row_dominance(&A, i, &off, &diag);
        ck_assert(diag == off + 1.0);
        for (int64_t p = A.row_ptr[i]; p < A.row_ptr[i + 1]; p++)
            if (A.col[p] != i) ck_assert(A.val[p] <= -1.0 && A.val[p] == floor(A.val[p]));
        weight += off;
        if (row_length(&A, i) > row_length(&A, longest)) longest = i;
    }
    const double m = 5.0 * 20000;               /* round(sum(w) / 2), sum(w) = 10 N */
    ck_assert_msg(weight <= 2 * m && weight >= 0.98 * 2 * m, "off-diagonal weight %g", weight);
    ck_assert_msg(row_length(&A, longest) > 20 * (double)A.nnz / A.n_rows, "longest row %lld",
                  (long long)row_length(&A, longest));
    ck_assert_int_ne(longest, 0);
    gs_error err = {0};
    ck_assert_int_eq(gs_generate("powerlaw:20000", &B, NULL, 0, &err), GS_OK);
    ck_assert_int_eq(B.nnz, A.nnz);
    ck_assert_mem_eq(B.row_ptr, A.row_ptr, ((size_t)A.n_rows + 1) * sizeof *A.row_ptr);
    ck_assert_mem_eq(B.col, A.col, (size_t)A.nnz * sizeof *A.col);
    ck_assert_mem_eq(B.val, A.val, (size_t)A.nnz * sizeof *A.val);
    gs_csr_free(&A);
    gs_csr_free(&B);
}
END_TEST

START_TEST(test_powerlaw_small)
{
    static const int sizes[] = {1, 2, 3, 7, 40};
    char spec[64];
    snprintf(spec, sizeof spec, "powerlaw:%d", sizes[_i]);
    gs_csr A = generate_spec(spec, NULL, 0);
    ck_assert_int_eq(A.n_rows, sizes[_i]);
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    for (int64_t i = 0; i < A.n_rows; i++) {
        double off, diag;
        row_dominance(&A, i, &off, &diag);
        ck_assert(diag == off + 1.0);
    }
    if (sizes[_i] == 1) ck_assert(A.nnz == 1 && A.val[0] == 1.0); /* every edge a self loop */
    gs_csr_free(&A);
}
END_TEST

static const int chain_sizes[] = {1, 2, 3, 66, 67, 1000, 5000};

/* a(i, i-1) = -1 for every i (N levels), one coupling -0.5 from row i back to
 * [i-65, i-2] (for every i >= 65), a_ii = sum |a_ij| + 0.05, symmetric; nnz =
 * N + 2 (N - 1) + 2 (couplings). */
START_TEST(test_chain_structure)
{
    const int n = chain_sizes[_i];
    char spec[64], name[64];
    snprintf(spec, sizeof spec, "chain:%d", n);
    gs_csr A = generate_spec(spec, name, sizeof name);
    ck_assert_str_eq(name, spec);
    ck_assert_int_eq(A.n_rows, n);
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    int64_t couplings = 0, reach_seen[64] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (i >= 1) ck_assert(entry(&A, i, i - 1) == -1.0);
        int64_t lower = 0;
        for (int64_t p = A.row_ptr[i]; p < A.row_ptr[i + 1] && A.col[p] < i - 1; p++, lower++) {
            ck_assert(A.val[p] == -0.5 && A.col[p] >= i - 65);
            reach_seen[i - 2 - A.col[p]] = 1;
        }
        ck_assert_int_le(lower, 1);
        if (i >= 65) ck_assert_int_eq(lower, 1);
        couplings += lower;
        double off, diag;
        row_dominance(&A, i, &off, &diag);
        ck_assert(fabs(diag - off - 0.05) <= 1e-14 * diag);
    }
    ck_assert_int_eq(A.nnz, n + 2 * (n - 1) + 2 * couplings);
    int reaches = 0;
    for (int r = 0; r < 64; r++) reaches += (int)reach_seen[r];
    if (n >= 1000) ck_assert_int_eq(reaches, 64);          /* h(i) mod 64 takes every value */
    gs_csr_free(&A);
}
END_TEST

/* Display names of the short forms, and the distributed plan refused cleanly. */
START_TEST(test_stress_names_and_plan)
{
    static const char *const specs[][2] = {{"elast3d:3", "elast3d:3x3x3"},
                                           {"bordered:4", "bordered:4x4x4"},
                                           {"hub:6", "hub:6x6"},
                                           {"powerlaw:50", "powerlaw:50"},
                                           {"chain:10", "chain:10"}};
    for (int t = 0; t < 5; t++) {
        char name[64];
        gs_csr A = generate_spec(specs[t][0], name, sizeof name);
        ck_assert_str_eq(name, specs[t][1]);
        gs_csr_free(&A);
        gs_gen_plan plan;
        gs_error err = {0};
        ck_assert_int_eq(gs_generate_plan(specs[t][0], &plan, &err), GS_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(err.msg, specs[t][0]));
        ck_assert_ptr_nonnull(strstr(err.msg, "one process"));
    }
}
END_TEST

START_TEST(test_stress_allocation_failures)
{
    static const char *const specs[] = {"elast3d:3", "bordered:4x4x1", "hub:5", "powerlaw:50",
                                        "chain:100"};
    long k;
    for (k = 0; k < 40; k++) {
        gs_csr A;
        gs_error err = {0};
        gs_alloc_fail_after(k);
        int status = gs_generate(specs[_i], &A, NULL, 0, &err);
        gs_alloc_fail_after(-1);
        if (status == GS_OK) {
            gs_csr_free(&A);
            break;
        }
        ck_assert_int_eq(status, GS_ERR_NOMEM);
        ck_assert_ptr_null(A.row_ptr);
        ck_assert_ptr_null(A.col);
        ck_assert_ptr_null(A.val);
    }
    ck_assert(k >= 2 && k < 40);
}
END_TEST

static Suite *gen_suite(void)
{
    Suite *s = suite_create("gen");
    TCase *tc = tcase_create("stencils");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_entries_match_stencil, 0, N_KINDS * N_GRIDS);
    tcase_add_loop_test(tc, test_nnz_closed_form, 0, N_KINDS * N_GRIDS);
    tcase_add_loop_test(tc, test_row_sums_and_dominance, 0, N_KINDS * N_GRIDS);
    tcase_add_loop_test(tc, test_symmetry, 0, N_KINDS * N_GRIDS);
    tcase_add_test(tc, test_size_forms);
    suite_add_tcase(s, tc);

    TCase *tb = tcase_create("specs and failures");
    tcase_add_loop_test(tb, test_bad_specs_rejected, 0,
                        (int)(sizeof bad_specs / sizeof bad_specs[0]));
    tcase_add_test(tb, test_allocation_failures);
    tcase_add_loop_test(tb, test_largest_specs_pass_the_checks, 0,
                        (int)(sizeof largest_specs / sizeof largest_specs[0]));
    tcase_add_test(tb, test_help_lists_every_kind);
    suite_add_tcase(s, tb);

    TCase *ts = tcase_create("stress set");
    tcase_set_timeout(ts, 60);
    tcase_add_loop_test(ts, test_elast3d_is_k27_kron_c, 0,
                        (int)(sizeof elast3d_grids / sizeof elast3d_grids[0]));
    tcase_add_test(ts, test_elast3d_large);
    tcase_add_loop_test(ts, test_bordered_structure, 0,
                        (int)(sizeof bordered_grids / sizeof bordered_grids[0]));
    tcase_add_test(ts, test_bordered_large);
    tcase_add_loop_test(ts, test_hub_structure, 0, (int)(sizeof hub_grids / sizeof hub_grids[0]));
    tcase_add_test(ts, test_powerlaw_structure);
    tcase_add_loop_test(ts, test_powerlaw_small, 0, 5);
    tcase_add_loop_test(ts, test_chain_structure, 0,
                        (int)(sizeof chain_sizes / sizeof chain_sizes[0]));
    tcase_add_test(ts, test_stress_names_and_plan);
    tcase_add_loop_test(ts, test_stress_allocation_failures, 0, 5);
    suite_add_tcase(s, ts);
    return s;
}

int main(void) { return tu_run_suite(gen_suite()); }
