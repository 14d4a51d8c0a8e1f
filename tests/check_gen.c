/* check_gen.c - the built-in problems (src/io/gen.c): every entry against the
 * stencils of docs/problems.md, closed-form nnz, row sums, symmetry, diagonal
 * dominance, and rejection of malformed specs. */
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
};

START_TEST(test_bad_specs_rejected)
{
    const char *spec = bad_specs[_i];
    gs_csr A;
    gs_error err = {0};
    memset(&A, 0xAB, sizeof A);
    ck_assert_msg(gs_generate(spec, &A, NULL, 0, &err) == GS_ERR_USAGE, "'%s' accepted", spec);
    ck_assert_int_eq(err.status, GS_ERR_USAGE);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "'%s'", spec);
    ck_assert_msg(strstr(err.msg, quoted) != NULL, "message '%s' does not name %s", err.msg,
                  quoted);
    ck_assert_ptr_null(A.row_ptr);
    ck_assert_ptr_null(A.col);
    ck_assert_ptr_null(A.val);
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

START_TEST(test_help_lists_every_kind)
{
    const char *help = gs_generate_help();
    ck_assert_ptr_nonnull(help);
    int lines = 0;
    for (const char *c = help; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, N_KINDS);
    for (int t = 0; t < N_KINDS; t++) {
        char needle[64];
        snprintf(needle, sizeof needle, " %s:", kinds[t]);
        ck_assert_msg(strstr(help, needle) != NULL, "help lacks %s", kinds[t]);
    }
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
    tcase_add_test(tb, test_help_lists_every_kind);
    suite_add_tcase(s, tb);
    return s;
}

int main(void) { return tu_run_suite(gen_suite()); }
