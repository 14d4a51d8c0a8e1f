/* check_cuda_toolkit.c - the device sparse toolkit (cuda/sparse/gs_dsparse.h),
 * each function on its own against a host version (STYLE rule 7).
 *
 * Inputs larger than a block (and than the one-block scan's 16384 items),
 * lengths on both sides of every size threshold, device outputs filled with
 * 0xFF bytes before the call (read as -1 in an index, NaN in a value);
 * patterns and integer results compared exactly, values too (the toolkit
 * moves them without arithmetic; the triangular solves, which add, within a
 * bound argued at check_trisolve_on). Without a CUDA device the suite says
 * "skipped" and passes, after asserting that the engine refuses cleanly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "engine.h"
#include "testutil.h"

#if GS_HAVE_CUDA
#include "../cuda/engine/gs_cuda.h"
#include "../cuda/sparse/gs_dsparse_hooks.h"
#endif

static gs_engine *gpu;

START_TEST(test_device_or_clean_refusal)
{
    gs_error err = {0};
    if (gs_cuda_device_count() == 0) {
        gs_engine *e = (gs_engine *)1;
        ck_assert_int_eq(gs_engine_cuda_create(&e, &err), GS_ERR_UNSUPPORTED);
        ck_assert_ptr_null(e);
        ck_assert_msg(strlen(err.msg) > 0, "refusal without a message");
        return;
    }
    ck_assert_msg(gs_engine_cuda_create(&gpu, &err) == GS_OK, "%s", err.msg);
    gs_engine_destroy(gpu);
    gpu = NULL;
}
END_TEST

#if GS_HAVE_CUDA

static void gpu_up(void)
{
    gs_error err = {0};
    ck_assert_msg(gs_engine_cuda_create(&gpu, &err) == GS_OK, "%s", err.msg);
}

static void gpu_down(void)
{
    ck_assert_msg(gpu->err.status == GS_OK, "engine: %s", gpu->err.msg);
    gs_engine_destroy(gpu);
    gpu = NULL;
}

/* An n x n matrix with row i holding about density * n entries in random
 * columns, every seventh row empty, row long_row len entries, the diagonal
 * stored in every third row; values distinct, none zero. shuffle: each
 * row's entries in random order (the transpose and the row sort take rows
 * unsorted), else sorted. */
static gs_csr random_rows(tu_rng *r, int32_t n, double density, int32_t long_row, int32_t len,
                          int shuffle)
{
    int64_t cap = (int64_t)(density * n * n) + 4 * (int64_t)n + len + 16;
    int32_t *ri = calloc((size_t)cap, sizeof(int32_t));
    int32_t *ci = calloc((size_t)cap, sizeof(int32_t));
    double *v = calloc((size_t)cap, sizeof(double));
    char *seen = calloc((size_t)n, 1);
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t want = i == long_row ? len : (int32_t)(tu_uniform(r) * 2.0 * density * n);
        if (i % 7 == 3 && i != long_row) want = 0;
        if (want > n) want = n;
        memset(seen, 0, (size_t)n);
        if (i % 3 == 0 && want > 0) {
            seen[i] = 1;
            ri[nnz] = i, ci[nnz] = i, v[nnz] = (double)nnz + 0.25;
            nnz++, want--;
        }
        for (int32_t k = 0; k < want && nnz < cap; k++) {
            int32_t j = (int32_t)(tu_uniform(r) * n);
            while (seen[j]) j = (j + 1) % n;
            seen[j] = 1;
            ri[nnz] = i, ci[nnz] = j, v[nnz] = (double)nnz + 0.25;
            nnz++;
        }
    }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(n, n, nnz, ri, ci, v, &A, &err) == GS_OK, "%s", err.msg);
    /* shuffle each row's entries (gs_csr_from_coo sorts them) */
    for (int32_t i = 0; i < n && shuffle; i++)
        for (int64_t p = A.row_ptr[i + 1] - 1; p > A.row_ptr[i]; p--) {
            const int64_t span = p - A.row_ptr[i] + 1;
            const int64_t q = A.row_ptr[i] + (int64_t)(tu_uniform(r) * (double)span);
            const int32_t c = A.col[p];
            const double x = A.val[p];
            A.col[p] = A.col[q], A.val[p] = A.val[q];
            A.col[q] = c, A.val[q] = x;
        }
    free(ri), free(ci), free(v), free(seen);
    return A;
}

static void assert_same_pattern(const gs_csr *want, const gs_csr *got, const char *what)
{
    ck_assert_msg(got->n_rows == want->n_rows && got->nnz == want->nnz,
                  "%s: %d rows, %lld entries; expected %d, %lld", what, got->n_rows,
                  (long long)got->nnz, want->n_rows, (long long)want->nnz);
    for (int32_t i = 0; i <= want->n_rows; i++)
        ck_assert_msg(got->row_ptr[i] == want->row_ptr[i], "%s: row_ptr[%d] = %lld, expected %lld",
                      what, i, (long long)got->row_ptr[i], (long long)want->row_ptr[i]);
    for (int64_t p = 0; p < want->nnz; p++)
        ck_assert_msg(got->col[p] == want->col[p], "%s: col[%lld] = %d, expected %d", what,
                      (long long)p, got->col[p], want->col[p]);
}

/* ------------------------------------------------------------------ scans */

START_TEST(test_scans)
{
    /* one block up to 16384 items, cub above; a block is 1024 threads */
    const int64_t counts[] = {0, 1, 2, 255, 256, 1023, 1024, 1025, 4097, 16383, 16384, 16385,
                              100003};
    tu_rng r = tu_rng_seed(11);
    gpu_up();
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        const int64_t n = counts[t];
        int64_t *in = malloc((size_t)(n + 1) * sizeof(int64_t));
        int64_t *want = malloc((size_t)(n + 1) * sizeof(int64_t));
        int64_t *got = malloc((size_t)(n + 2) * sizeof(int64_t));
        want[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            in[i] = (int64_t)(tu_uniform(&r) * 1000.0) + (i == n / 2 ? ((int64_t)1 << 40) : 0);
            want[i + 1] = want[i] + in[i]; /* exclusive: want[0..n], inclusive: want[1..n] */
        }
        for (int mode = 0; mode < 3; mode++) { /* inclusive, in place, exclusive */
            const int exclusive = mode == 2;
            ck_assert_msg(gs_dsparse_hook_scan(gpu, in, n, exclusive, mode == 1, got) == GS_OK,
                          "count %lld: %s", (long long)n, gpu->err.msg);
            for (int64_t i = 0; i < n + exclusive; i++)
                ck_assert_msg(got[i] == want[i + !exclusive],
                              "%s scan of %lld items: out[%lld] = %lld, expected %lld",
                              exclusive ? "exclusive" : mode ? "in-place inclusive" : "inclusive",
                              (long long)n, (long long)i, (long long)got[i],
                              (long long)want[i + !exclusive]);
        }
        free(in), free(want), free(got);
    }
    gpu_down();
}
END_TEST

/* -------------------------------------------------------------- transpose */

static void check_transpose(const gs_csr *G, int fp32, int64_t chunk, const char *what)
{
    gs_csr want = {0}, got = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_transpose(G, &want, &err), GS_OK); /* rows sorted */
    ck_assert_msg(gs_dsparse_hook_transpose(gpu, G, fp32, chunk, &got) == GS_OK, "%s: %s", what,
                  gpu->err.msg);
    char label[200];
    snprintf(label, sizeof label, "%s (%s, chunk %lld)", what, fp32 ? "fp32" : "fp64",
             (long long)chunk);
    assert_same_pattern(&want, &got, label);
    for (int64_t p = 0; p < want.nnz; p++) {
        const double v = fp32 ? (double)(float)want.val[p] : want.val[p];
        ck_assert_msg(got.val[p] == v, "%s: val[%lld] = %g, expected %g", label, (long long)p,
                      got.val[p], v);
    }
    gs_csr_free(&want);
    gs_csr_free(&got);
}

START_TEST(test_transpose)
{
    tu_rng r = tu_rng_seed(5);
    gpu_up();
    /* sizes around a block (256 threads) and a warp; a dense row and a
     * dense column (the reversed shape comes from the transpose itself) */
    const int32_t sizes[] = {1, 31, 33, 257, 3000};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const int32_t n = sizes[t];
        gs_csr G = random_rows(&r, n, n < 100 ? 0.2 : 0.004, n / 2, n, 1);
        char what[64];
        snprintf(what, sizeof what, "random %d x %d, %lld entries", n, n, (long long)G.nnz);
        /* chunks of one entry (every column cut) only where few */
        const int64_t chunks[] = {0, 37, G.nnz > 1 ? G.nnz - 1 : 1, G.nnz, G.nnz + 1,
                                  G.nnz <= 5000 ? 1 : 0};
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
            for (int fp32 = 0; fp32 < 2; fp32++) check_transpose(&G, fp32, chunks[c], what);
        gs_csr_free(&G);
    }
    gs_csr E = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_alloc(40, 40, 0, 1, &E, &err), GS_OK); /* no entries at all */
    check_transpose(&E, 0, 0, "empty 40 x 40");
    gs_csr_free(&E);
    gpu_down();
}
END_TEST

/* ------------------------------------------------------------ row sorting */

START_TEST(test_sort_rows)
{
    tu_rng r = tu_rng_seed(9);
    gpu_up();
    /* row lengths on both sides of a warp, a block and cub's small-segment
     * and medium-segment sizes */
    const int32_t long_lens[] = {31, 32, 33, 255, 256, 257, 1500, 4000};
    for (size_t t = 0; t < sizeof long_lens / sizeof long_lens[0]; t++) {
        gs_csr P = random_rows(&r, 4096, 0.002, 100, long_lens[t], 1);
        gs_csr want = {0}, got = {0};
        gs_error err = {0};
        ck_assert_int_eq(gs_csr_copy(&P, &want, &err), GS_OK);
        for (int32_t i = 0; i < want.n_rows; i++) /* host: insertion sort of each row */
            for (int64_t p = want.row_ptr[i] + 1; p < want.row_ptr[i + 1]; p++)
                for (int64_t q = p; q > want.row_ptr[i] && want.col[q - 1] > want.col[q]; q--) {
                    const int32_t c = want.col[q];
                    want.col[q] = want.col[q - 1], want.col[q - 1] = c;
                }
        free(P.val), P.val = NULL; /* a pattern */
        ck_assert_msg(gs_dsparse_hook_sort_rows(gpu, &P, &got) == GS_OK, "%s", gpu->err.msg);
        char what[64];
        snprintf(what, sizeof what, "rows sorted, a row of %d", long_lens[t]);
        assert_same_pattern(&want, &got, what);
        gs_csr_free(&P), gs_csr_free(&want), gs_csr_free(&got);
    }
    gpu_down();
}
END_TEST

/* ---------------------------------------------------------- pattern power */

/* (E + |P|)^k and |P|^k against the host's gs_csr_pattern_power: rows of
 * every length class (empty, a warp, a block, a long row), sorted input
 * (the first step skips the row sort) and unsorted (it sorts). */
START_TEST(test_pattern_power)
{
    tu_rng r = tu_rng_seed(21);
    gpu_up();
    const int32_t long_lens[] = {0, 33, 300};
    for (size_t t = 0; t < sizeof long_lens / sizeof long_lens[0]; t++)
        for (int k = 1; k <= 3; k++)
            for (int ident = 0; ident <= 1; ident++)
            for (int reversed = 0; reversed <= 1; reversed++) {
                gs_csr P = random_rows(&r, 700, 0.004, 50, long_lens[t], 0), want = {0}, got = {0};
                gs_error err = {0};
                ck_assert_int_eq(gs_csr_pattern_power(&P, k, ident, &want, &err), GS_OK);
                for (int32_t i = 0; i < P.n_rows && reversed; i++) /* the device takes rows unsorted */
                    for (int64_t p = P.row_ptr[i], q = P.row_ptr[i + 1] - 1; p < q; p++, q--) {
                        const int32_t c = P.col[p];
                        P.col[p] = P.col[q], P.col[q] = c;
                    }
                free(P.val), P.val = NULL;
                ck_assert_msg(gs_dsparse_hook_pattern_power(gpu, &P, k, ident, &got) == GS_OK,
                              "%s", gpu->err.msg);
                char what[80];
                snprintf(what, sizeof what, "pattern power k %d identity %d long row %d%s", k,
                         ident, long_lens[t], reversed ? " reversed rows" : "");
                assert_same_pattern(&want, &got, what);
                gs_csr_free(&P), gs_csr_free(&want), gs_csr_free(&got);
            }
    gpu_down();
}
END_TEST

/* --------------------------------------------------- CSR up and back down */

START_TEST(test_round_trip)
{
    tu_rng r = tu_rng_seed(3);
    gpu_up();
    gs_csr P = random_rows(&r, 2000, 0.003, 7, 600, 1), got = {0};
    ck_assert_msg(gs_dsparse_hook_round_trip(gpu, &P, &got) == GS_OK, "%s", gpu->err.msg);
    assert_same_pattern(&P, &got, "values round trip");
    for (int64_t p = 0; p < P.nnz; p++) ck_assert(got.val[p] == P.val[p]);
    gs_csr_free(&got);
    free(P.val), P.val = NULL;
    ck_assert_msg(gs_dsparse_hook_round_trip(gpu, &P, &got) == GS_OK, "%s", gpu->err.msg);
    assert_same_pattern(&P, &got, "pattern round trip");
    for (int64_t p = 0; p < P.nnz; p++) ck_assert(got.val[p] == 1.0);
    gs_csr_free(&got), gs_csr_free(&P);
    gpu_down();
}
END_TEST

/* ------------------------------------------------------------- read-backs */

START_TEST(test_read_words)
{
    enum { TOTAL = 5000 };
    uint64_t *w = malloc(TOTAL * sizeof(uint64_t)), out[64];
    for (int i = 0; i < TOTAL; i++) w[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    gpu_up();
    /* one word; runs from far apart; exactly the most one round trip takes */
    const int64_t off[4] = {4999, 0, 2500, 1234};
    const int len1[1] = {1}, len3[3] = {1, 5, 3}, len_max[4] = {1, 20, 20, 15};
    ck_assert_int_eq(gs_dsparse_hook_read_words(gpu, w, TOTAL, 1, off, len1, out), GS_OK);
    ck_assert(out[0] == w[4999]);
    ck_assert_int_eq(gs_dsparse_hook_read_words(gpu, w, TOTAL, 3, off, len3, out), GS_OK);
    ck_assert(out[0] == w[4999]);
    for (int k = 0; k < 5; k++) ck_assert(out[1 + k] == w[k]);
    for (int k = 0; k < 3; k++) ck_assert(out[6 + k] == w[2500 + k]);
    const int64_t off_max[4] = {10, 100, 200, 300};
    ck_assert_int_eq(gs_dsparse_hook_read_words(gpu, w, TOTAL, 4, off_max, len_max, out), GS_OK);
    for (int r = 0, q = 0; r < 4; r++)
        for (int k = 0; k < len_max[r]; k++, q++) ck_assert(out[q] == w[off_max[r] + k]);
    /* one word more than a round trip holds: refused, nothing read */
    const int len_over[4] = {1, 20, 20, 16};
    ck_assert_int_eq(gs_dsparse_hook_read_words(gpu, w, TOTAL, 4, off_max, len_over, out),
                     GS_ERR_INTERNAL);
    ck_assert_msg(strstr(gpu->err.msg, "57 words") && strstr(gpu->err.msg, "at most 56"), "%s",
                  gpu->err.msg);
    gs_engine_destroy(gpu);
    gpu = NULL;
    free(w);
}
END_TEST

/* --------------------------------------------------------- mat_diagonal */

/* Tridiagonal, 4 on the diagonal but 0 in rows zero_a and zero_b. */
static gs_csr tridiagonal(int32_t n, int32_t zero_a, int32_t zero_b)
{
    int32_t *ri = calloc((size_t)3 * n, sizeof(int32_t));
    int32_t *ci = calloc((size_t)3 * n, sizeof(int32_t));
    double *v = calloc((size_t)3 * n, sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < n) {
                ri[nnz] = i, ci[nnz] = j;
                v[nnz++] = j != i ? -1.0 : i == zero_a || i == zero_b ? 0.0 : 4.0 + i;
            }
    gs_csr T = {0};
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(n, n, nnz, ri, ci, v, &T, &err) == GS_OK, "%s", err.msg);
    free(ri), free(ci), free(v);
    return T;
}

/* The diagonal read from each layout, plain and inverted, and the first
 * zero-or-missing row found by the atomics across blocks. */
static void check_diagonal(const gs_csr *A, const char *what)
{
    double *d = malloc((size_t)A->n_rows * sizeof(double));
    double *got = malloc((size_t)A->n_rows * sizeof(double));
    gs_csr_diagonal(A, d);
    int32_t host_zero = A->n_rows + 1; /* 1-based first zero or missing row */
    for (int32_t i = A->n_rows - 1; i >= 0; i--)
        if (d[i] == 0.0) host_zero = i + 1;
    const gs_cuda_layout layouts[3] = {GS_CUDA_LAYOUT_SELL, GS_CUDA_LAYOUT_SELL_SORTED,
                                       GS_CUDA_LAYOUT_CSR};
    for (int l = 0; l < 3; l++) {
        gs_mat *M = NULL;
        ck_assert_int_eq(gs_cuda_mat_create_as(gpu, A, GS_FP64, layouts[l], 64, &M), GS_OK);
        for (int invert = 0; invert < 2; invert++) {
            int first_zero = 0;
            ck_assert_msg(gs_dsparse_hook_diagonal(gpu, M, invert, got, &first_zero) == GS_OK,
                          "%s, %s: %s", what, gs_cuda_mat_layout(M), gpu->err.msg);
            ck_assert_msg(first_zero == host_zero, "%s, %s: first zero row %d, expected %d",
                          what, gs_cuda_mat_layout(M), first_zero, host_zero);
            for (int32_t i = 0; i < A->n_rows; i++) {
                const double want = !invert ? d[i] : d[i] != 0.0 ? 1.0 / d[i] : 0.0;
                ck_assert_msg(got[i] == want, "%s, %s%s: row %d: %g, expected %g", what,
                              gs_cuda_mat_layout(M), invert ? " inverted" : "", i, got[i], want);
            }
        }
        gpu->ops->mat_destroy(gpu, M);
    }
    free(d), free(got);
}

START_TEST(test_mat_diagonal)
{
    tu_rng r = tu_rng_seed(21);
    gpu_up();
    /* a few thousand rows (many blocks of 256), rows of 0 to 40 entries, the
     * diagonal stored in every third row only (row 0's set to 0) */
    gs_csr A = random_rows(&r, 3000, 0.004, 42, 40, 0);
    for (int32_t i = 0; i < A.n_rows; i++) {
        const int64_t p = gs_csr_find(&A, i, i);
        if (p >= 0) A.val[p] = i == 0 ? 0.0 : 2.0 + i;
    }
    check_diagonal(&A, "random 3000");
    /* every diagonal stored: zeros in rows 2901 and 2001 (1-based), blocks
     * 11 and 7, so the lowest comes from a block that is not the first */
    gs_csr T = tridiagonal(3000, 2900, 2000);
    check_diagonal(&T, "tridiagonal 3000");
    gs_csr_free(&T);
    T = tridiagonal(3000, -1, -1); /* none zero: n + 1 */
    check_diagonal(&T, "tridiagonal 3000, no zero");
    gs_csr_free(&T);
    /* fp32 storage rounds the diagonal: refused, with the reason */
    gs_mat *M32 = NULL;
    int first_zero = 0;
    double *got = malloc((size_t)A.n_rows * sizeof(double));
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP32, &M32), GS_OK);
    ck_assert_int_eq(gs_dsparse_hook_diagonal(gpu, M32, 1, got, &first_zero), GS_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gpu->err.msg, "fp32"), "%s", gpu->err.msg);
    gpu->ops->mat_destroy(gpu, M32);
    gs_engine_destroy(gpu);
    gpu = NULL;
    free(got);
    gs_csr_free(&A);
}
END_TEST


/* ---------------------------------------------- triangular solves (gs_dtri) */

/* A lower (or upper) triangular n x n matrix: row i holds its diagonal and up to
 * `width` off-diagonal entries among the `span` rows before (after) it, each with
 * probability density, plus neighbour i -+ 1 always when chain; diagonally dominant
 * (t_ii = 1 + sum |t_ij|), so the substitution is well conditioned. */
static gs_csr random_triangle(tu_rng *r, int32_t n, int upper, int32_t span, double density,
                              int chain)
{
    gs_csr T = {0};
    int64_t cap = (int64_t)n * (span + 2), nnz = 0;
    T.n_rows = T.n_cols = n;
    T.row_ptr = malloc(((size_t)n + 1) * sizeof(int64_t));
    T.col = malloc((size_t)cap * sizeof(int32_t));
    T.val = malloc((size_t)cap * sizeof(double));
    ck_assert(T.row_ptr && T.col && T.val);
    for (int32_t i = 0; i < n; i++) {
        T.row_ptr[i] = nnz;
        double sum = 0;
        int64_t diag = -1;
        for (int32_t o = upper ? 0 : span; o >= 0 && o <= span; o += upper ? 1 : -1) {
            const int32_t j = upper ? i + o : i - o;
            if (j < 0 || j >= n) continue;
            const int keep = o == 0 || (chain && o == 1) || tu_uniform(r) < density;
            if (!keep) continue;
            if (o == 0) diag = nnz;
            T.col[nnz] = j;
            T.val[nnz] = o == 0 ? 0.0 : tu_uniform(r) - 0.5;
            sum += fabs(T.val[nnz]);
            nnz++;
        }
        T.val[diag] = 1.0 + sum;
    }
    T.row_ptr[n] = nnz;
    T.nnz = nnz;
    return T;
}

/* The lower (or upper) triangle of a 7-point stencil on an nx x ny x nz grid (natural
 * order: levels are the planes i + j + k = const, as MIC's factors on poisson3d), rows of
 * 4 entries; every spike-th row (spike > 0) also holds the 100 rows before (after) it, so
 * that a few rows are many times longer than the lanes the mean gives them. Diagonally
 * dominant as random_triangle's. */
static gs_csr grid_triangle(tu_rng *r, int32_t nx, int32_t ny, int32_t nz, int upper, int32_t spike)
{
    const int32_t n = nx * ny * nz, far = 100;
    gs_csr T = {0};
    int64_t nnz = 0;
    T.n_rows = T.n_cols = n;
    T.row_ptr = malloc(((size_t)n + 1) * sizeof(int64_t));
    T.col = malloc((size_t)n * (far + 4) * sizeof(int32_t));
    T.val = malloc((size_t)n * (far + 4) * sizeof(double));
    ck_assert(T.row_ptr && T.col && T.val);
    for (int32_t i = 0; i < n; i++) {
        const int32_t x = i % nx, y = i / nx % ny, z = i / nx / ny, sg = upper ? 1 : -1;
        const int long_row = spike > 0 && i % spike == spike - 1;
        int32_t cols[104], k = 0;
        if (long_row) {
            for (int32_t o = far; o >= 1; o--) cols[k++] = i + sg * o;
        } else {
            const int32_t step[3] = {nx * ny, nx, 1};
            const int inside[3] = {upper ? z + 1 < nz : z > 0, upper ? y + 1 < ny : y > 0,
                                   upper ? x + 1 < nx : x > 0};
            for (int d = 0; d < 3; d++)
                if (inside[d]) cols[k++] = i + sg * step[d];
        }
        cols[k++] = i;
        T.row_ptr[i] = nnz;
        double sum = 0;
        int64_t diag = -1;
        for (int q = 0; q < k; q++) { /* ascending: reversed for upper */
            const int32_t j = upper ? cols[k - 1 - q] : cols[q];
            if (j < 0 || j >= n) continue;
            if (j == i) diag = nnz;
            T.col[nnz] = j;
            T.val[nnz] = j == i ? 0.0 : tu_uniform(r) - 0.5;
            sum += fabs(T.val[nnz]);
            nnz++;
        }
        T.val[diag] = 1.0 + sum;
    }
    T.row_ptr[n] = nnz;
    T.nnz = nnz;
    return T;
}

/* Host reference: levels and x = T^-1 (s .* b). */
static int32_t host_levels(const gs_csr *T, int upper, int32_t *level)
{
    const int32_t n = T->n_rows;
    int32_t top = 0;
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = upper ? n - 1 - k : k;
        int32_t lv = 0;
        for (int64_t p = T->row_ptr[i]; p < T->row_ptr[i + 1]; p++) {
            const int32_t j = T->col[p];
            if (upper ? j > i : j < i) lv = lv > level[j] ? lv : level[j];
        }
        level[i] = lv + 1;
        top = top > lv + 1 ? top : lv + 1;
    }
    return top;
}

static void host_trisolve(const gs_csr *T, int upper, int unit, const double *s, const double *b,
                          double *x)
{
    const int32_t n = T->n_rows;
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = upper ? n - 1 - k : k;
        double sum = (s ? s[i] : 1.0) * b[i], d = 1.0;
        for (int64_t p = T->row_ptr[i]; p < T->row_ptr[i + 1]; p++) {
            const int32_t j = T->col[p];
            if (j == i) d = unit ? 1.0 : T->val[p];
            else if (upper ? j > i : j < i) sum -= T->val[p] * x[j];
        }
        x[i] = sum / d;
    }
}

/* Every scheme against the host on T: levels exactly, x within 64 (row length) u max|x|
 * (all substitute the same rows in another summation order; T diagonally dominant keeps
 * the forward error of that size), after three solves (the sync-free epoch), the last
 * with b . x fused (within the same bound summed over the rows). The block scheme with
 * chunks of one row (every dependency in another chunk: waits only), of 32 and 77 rows
 * (chunk edges everywhere, partial last chunks) and the rule's (one chunk for the small
 * triangles: shared memory only); and its bits the same in a second run. The sync-free
 * scheme as the rule launches it (persistent blocks, the next chunk loaded ahead), with
 * one block and with three taking every chunk in turn, with a block a chunk, and without
 * the loads ahead: the same bits as the first every time. */
static void check_trisolve_on(const gs_csr *T, int upper, const char *what)
{
    const int32_t n = T->n_rows;
    int32_t *lv = malloc(((size_t)n + 1) * sizeof(int32_t)), *lv_gpu = malloc(((size_t)n + 1) * sizeof(int32_t));
    double *b = malloc(((size_t)n + 1) * sizeof(double)), *s = malloc(((size_t)n + 1) * sizeof(double));
    double *x = malloc(((size_t)n + 1) * sizeof(double)), *xh = malloc(((size_t)n + 1) * sizeof(double));
    double *x2 = malloc(((size_t)n + 1) * sizeof(double));
    double *xsf[2] = {malloc(((size_t)n + 1) * sizeof(double)), malloc(((size_t)n + 1) * sizeof(double))};
    double dsf[2] = {0.0, 0.0};
    ck_assert(lv && lv_gpu && b && s && x && xh && x2 && xsf[0] && xsf[1]);
    tu_rng r = tu_rng_seed(99);
    for (int32_t i = 0; i < n; i++) b[i] = tu_uniform(&r) - 0.5, s[i] = 0.5 + tu_uniform(&r);
    const int32_t levels = host_levels(T, upper, lv);
    int32_t maxlen = 1;
    for (int32_t i = 0; i < n; i++)
        if (T->row_ptr[i + 1] - T->row_ptr[i] > maxlen) maxlen = (int32_t)(T->row_ptr[i + 1] - T->row_ptr[i]);
    const struct {
        int scheme;
        int32_t chunk;
        int sf_blocks, sf_prefetch; /* the engine's debug fields for the sync-free runs */
    } runs[] = {{0, 0, 0, 0},  {0, 0, 1, 0}, {0, 0, 3, 0},
                {0, 0, -1, 0}, {0, 0, 3, GS_DEBUG_FORCE_OFF},
                {1, 0, 0, 0},  {2, 1, 0, 0}, {2, 32, 0, 0}, {2, 77, 0, 0}, {2, 0, 0, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++)
        for (int unit = 0; unit < 2; unit++) {
            const int scheme = runs[k].scheme;
            gs_debug d;
            memset(&d, 0, sizeof d);
            d.syncfree_blocks = runs[k].sf_blocks, d.syncfree_prefetch = runs[k].sf_prefetch;
            gs_engine_cuda_set_debug(gpu, &d);
            const double *sc = unit ? s : NULL;
            int32_t got_levels = -1;
            double dot = 0.0, dot2 = 0.0;
            ck_assert_msg(gs_dsparse_hook_trisolve(gpu, T, upper, scheme, runs[k].chunk, unit, sc,
                                                   b, 3, x, lv_gpu, &got_levels, &dot) == GS_OK,
                          "%s: %s", what, gpu->err.msg);
            ck_assert_msg(got_levels == levels, "%s: %d levels, host %d", what, got_levels, levels);
            for (int32_t i = 0; i < n; i++)
                ck_assert_msg(lv_gpu[i] == lv[i], "%s: level of row %d: %d, host %d", what, i + 1,
                              lv_gpu[i], lv[i]);
            host_trisolve(T, upper, unit, sc, b, xh);
            double xmax = 0, want = 0, mag = 0;
            for (int32_t i = 0; i < n; i++) {
                xmax = fmax(xmax, fabs(xh[i]));
                want += b[i] * xh[i], mag += fabs(b[i] * xh[i]);
            }
            const double tol = 64.0 * maxlen * DBL_EPSILON * xmax;
            for (int32_t i = 0; i < n; i++)
                ck_assert_msg(fabs(x[i] - xh[i]) <= tol, "%s (scheme %d, chunk %d, unit %d): x_%d = "
                              "%.17g, host %.17g", what, scheme, runs[k].chunk, unit, i + 1, x[i], xh[i]);
            double bmax = 0;
            for (int32_t i = 0; i < n; i++) bmax = fmax(bmax, fabs(b[i]));
            ck_assert_msg(fabs(dot - want) <= n * tol * bmax + 2.0 * n * DBL_EPSILON * mag,
                          "%s (scheme %d, chunk %d, unit %d): b.x = %.17g, host %.17g", what, scheme,
                          runs[k].chunk, unit, dot, want);
            if (scheme == 0 && k == 0) {
                memcpy(xsf[unit], x, (size_t)n * sizeof(double));
                dsf[unit] = dot;
            } else if (scheme == 0) {
                ck_assert_msg(memcmp(x, xsf[unit], (size_t)n * sizeof(double)) == 0 &&
                                  memcmp(&dot, &dsf[unit], sizeof dot) == 0,
                              "%s (sync-free, blocks %d, prefetch %d, unit %d): other bits than "
                              "the rule's launch", what, runs[k].sf_blocks, runs[k].sf_prefetch, unit);
            }
            if (scheme != 2) continue;
            ck_assert_msg(gs_dsparse_hook_trisolve(gpu, T, upper, scheme, runs[k].chunk, unit, sc,
                                                   b, 1, x2, lv_gpu, &got_levels, &dot2) == GS_OK,
                          "%s: %s", what, gpu->err.msg);
            ck_assert_msg(memcmp(x, x2, (size_t)n * sizeof(double)) == 0 &&
                              memcmp(&dot, &dot2, sizeof dot) == 0,
                          "%s (blocks, chunk %d, unit %d): other bits in a second run", what,
                          runs[k].chunk, unit);
        }
    gs_debug d0;
    memset(&d0, 0, sizeof d0);
    gs_engine_cuda_set_debug(gpu, &d0);
    free(lv), free(lv_gpu), free(b), free(s), free(x), free(xh), free(x2), free(xsf[0]), free(xsf[1]);
}

/* Many levels (a chain: n levels), one level (diagonal), short rows (1, 2, 4 lanes of
 * the level kernel), rows near and past a warp (span 40 dense: up to 41 entries, 32
 * lanes, two passes of a warp), sizes below and above a block of rows (8) and of
 * threads (256), lower and upper; mean row lengths on both sides of the analysis' switch
 * from a warp a row to a thread a row (8: the chain, the diagonal, spans 3 and 12 take a
 * thread, spans 40 and 300 a warp). */
START_TEST(test_trisolve)
{
    tu_rng r = tu_rng_seed(12);
    gpu_up();
    const struct {
        int32_t n, span;
        double density;
        int chain;
    } cases[] = {{5, 2, 0.5, 1}, {3000, 1, 0.0, 1}, {4000, 0, 0.0, 0}, {700, 3, 0.4, 0},
                 {20000, 12, 0.25, 0}, {1500, 40, 1.0, 0}, {9000, 300, 0.05, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int upper = 0; upper < 2; upper++) {
            char what[96];
            snprintf(what, sizeof what, "n %d span %d density %g chain %d %s", cases[c].n,
                     cases[c].span, cases[c].density, cases[c].chain, upper ? "upper" : "lower");
            gs_csr T = random_triangle(&r, cases[c].n, upper, cases[c].span, cases[c].density,
                                       cases[c].chain);
            check_trisolve_on(&T, upper, what);
            gs_csr_free(&T);
        }
    gpu_down();
}
END_TEST

/* ----------------------------------------------- split into L and U */

/* A with a_ii = i + 0.5 stored in every row (random_rows stores it in
 * every third), rows sorted. */
static gs_csr with_diagonal(const gs_csr *A)
{
    const int64_t cap = A->nnz + A->n_rows;
    int32_t *ri = calloc((size_t)cap + 1, sizeof(int32_t)), *ci = calloc((size_t)cap + 1, sizeof(int32_t));
    double *v = calloc((size_t)cap + 1, sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        int diag = 0;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            ri[nnz] = i, ci[nnz] = A->col[p], v[nnz++] = A->val[p];
            diag |= A->col[p] == i;
        }
        if (!diag) ri[nnz] = i, ci[nnz] = i, v[nnz++] = i + 0.5;
    }
    gs_csr B = {0};
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(A->n_rows, A->n_rows, nnz, ri, ci, v, &B, &err) == GS_OK, "%s",
                  err.msg);
    free(ri), free(ci), free(v);
    return B;
}

START_TEST(test_split_lu)
{
    tu_rng r = tu_rng_seed(21);
    gpu_up();
    /* a warp's and a block's worth of rows, rows longer than a warp */
    const int32_t sizes[] = {1, 33, 257, 3000};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const int32_t n = sizes[t];
        gs_csr R = random_rows(&r, n, n < 100 ? 0.2 : 0.004, n / 2, n > 40 ? 40 : n, 0);
        gs_csr A = with_diagonal(&R), L = {0}, U = {0}, wantL = {0}, wantU = {0};
        gs_error err = {0};
        ck_assert_int_eq(gs_csr_lower(&A, 0, &wantL, &err), GS_OK);
        ck_assert_int_eq(gs_csr_upper(&A, 1, &wantU, &err), GS_OK);
        /* host reference of L: strict lower part plus a stored 1 on the diagonal */
        gs_csr unitL = {0};
        ck_assert_int_eq(gs_csr_alloc(n, n, wantL.nnz + n, 1, &unitL, &err), GS_OK);
        int64_t q = 0;
        for (int32_t i = 0; i < n; i++) {
            for (int64_t p = wantL.row_ptr[i]; p < wantL.row_ptr[i + 1]; p++, q++)
                unitL.col[q] = wantL.col[p], unitL.val[q] = wantL.val[p];
            unitL.col[q] = i, unitL.val[q++] = 1.0;
            unitL.row_ptr[i + 1] = q;
        }
        ck_assert_msg(gs_dsparse_hook_split_lu(gpu, &A, &L, &U) == GS_OK, "%s", gpu->err.msg);
        char what[64];
        snprintf(what, sizeof what, "split L of %d x %d", n, n);
        tu_assert_same_csr(&unitL, &L, what);
        snprintf(what, sizeof what, "split U of %d x %d", n, n);
        tu_assert_same_csr(&wantU, &U, what);
        gs_csr_free(&R), gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U);
        gs_csr_free(&wantL), gs_csr_free(&wantU), gs_csr_free(&unitL);
    }
    gpu_down();
}
END_TEST

/* ------------------------------------------------------ pattern power */

START_TEST(test_pattern_power_long_rows)
{
    tu_rng r = tu_rng_seed(33);
    gpu_up();
    /* lower triangles (ISAI's use) and a general matrix; a long row and,
     * in the triangle, long columns: expanded rows of thousands */
    const int32_t sizes[] = {1, 40, 300, 2500};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const int32_t n = sizes[t];
        gs_csr R = random_rows(&r, n, n < 100 ? 0.1 : 0.003, n - 1, n > 600 ? 600 : n, 0);
        gs_csr A = with_diagonal(&R), T = {0};
        gs_error err = {0};
        ck_assert_int_eq(gs_csr_lower(&A, 1, &T, &err), GS_OK);
        for (int general = 0; general < 2; general++)
            for (int k = 1; k <= 3; k++) {
                const gs_csr *X = general ? &A : &T;
                if (general && k == 3 && n > 1000) continue; /* dense: nothing new */
                gs_csr want = {0}, got = {0};
                ck_assert_int_eq(gs_csr_pattern_power(X, k, 0, &want, &err), GS_OK);
                ck_assert_msg(gs_dsparse_hook_pattern_power(gpu, X, k, 0, &got) == GS_OK, "%s",
                              gpu->err.msg);
                char what[80];
                snprintf(what, sizeof what, "|%s|^%d of %d x %d", general ? "A" : "L", k, n, n);
                assert_same_pattern(&want, &got, what);
                gs_csr_free(&want), gs_csr_free(&got);
            }
        gs_csr_free(&R), gs_csr_free(&A), gs_csr_free(&T);
    }
    gpu_down();
}
END_TEST

/* The schedule of the sync-free solve on stencil triangles: levels of every size from one
 * row up, padded to whole warps (4 lanes, 8 rows a warp on a 3D grid; 2D: 3 entries, 4
 * lanes), more levels than a block's rows, a warp's worth of rows in mid levels; a single
 * row; and spikes, rows of 101 entries among rows of 4 (a mean of 5: 8 lanes, 4 rows a
 * warp, 13 passes of a long row), so a warp holds short and long rows of one level. */
START_TEST(test_trisolve_grids)
{
    tu_rng r = tu_rng_seed(21);
    gpu_up();
    const struct {
        int32_t nx, ny, nz, spike;
    } cases[] = {{1, 1, 1, 0}, {20, 20, 20, 0}, {70, 70, 1, 0}, {33, 17, 9, 97}, {9, 31, 5, 7}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int upper = 0; upper < 2; upper++) {
            char what[96];
            snprintf(what, sizeof what, "grid %dx%dx%d spike %d %s", cases[c].nx, cases[c].ny,
                     cases[c].nz, cases[c].spike, upper ? "upper" : "lower");
            gs_csr T = grid_triangle(&r, cases[c].nx, cases[c].ny, cases[c].nz, upper, cases[c].spike);
            check_trisolve_on(&T, upper, what);
            gs_csr_free(&T);
        }
    gpu_down();
}
END_TEST

/* The level analysis on the host (gs_dtri_analyse_rows) against the device's
 * (gs_dtri_analyse) on T: the rows by level and the sync-free schedule are the same
 * arrays entry for entry, the levels are host_levels', the host's longest row is the most
 * dependencies a row of T has; forced to the host (debug.tri_analysis) it runs there
 * whatever T is, and by the rule it runs there exactly where rule_host says (thin levels,
 * or few entries; a 3D grid's planes are given back to the device). */
static void check_analysis_on(const gs_csr *T, int upper, int rule_host, const char *what)
{
    const int32_t n = T->n_rows;
    const size_t cap = 32 * (size_t)n + 32; /* the schedule pads each level to a warp */
    int32_t *want = malloc(((size_t)n + 1) * sizeof(int32_t));
    int32_t *lv[2], *rows[2], *slots[2], nl[2] = {0, 0};
    int64_t n_slots[2] = {0, 0}, longest[2] = {0, 0}, most = 0;
    int lanes[2] = {0, 0}, sf[2] = {0, 0}, on_host[2] = {0, 0};
    gs_debug d;
    ck_assert_ptr_nonnull(want);
    for (int k = 0; k < 2; k++) {
        lv[k] = malloc(((size_t)n + 1) * sizeof(int32_t));
        rows[k] = malloc(((size_t)n + 1) * sizeof(int32_t));
        slots[k] = malloc(cap * sizeof(int32_t));
        ck_assert(lv[k] && rows[k] && slots[k]);
    }
    const int32_t top = host_levels(T, upper, want);
    for (int32_t i = 0; i < n; i++) {
        int64_t deps = 0;
        for (int64_t p = T->row_ptr[i]; p < T->row_ptr[i + 1]; p++)
            deps += upper ? T->col[p] > i : T->col[p] < i;
        most = deps > most ? deps : most;
    }
    memset(&d, 0, sizeof d);
    d.tri_analysis = GS_DEBUG_PLAN_HOST;
    gs_engine_cuda_set_debug(gpu, &d);
    for (int k = 0; k < 2; k++) /* 0: the device's analysis, 1: the host's, forced */
        ck_assert_msg(gs_dsparse_hook_tri_analyse(gpu, T, upper, k == 0, lv[k], rows[k], slots[k],
                                                  &n_slots[k], &nl[k], &lanes[k], &sf[k],
                                                  &on_host[k], &longest[k]) == GS_OK,
                      "%s: %s", what, gpu->err.msg);
    ck_assert_msg(on_host[0] == 0 && on_host[1] == 1, "%s: on_host %d %d", what, on_host[0], on_host[1]);
    ck_assert_msg(nl[0] == top && nl[1] == top, "%s: levels %d (device), %d (host), want %d", what,
                  nl[0], nl[1], top);
    ck_assert_msg(longest[0] == -1 && longest[1] == most, "%s: longest row %lld, want %lld", what,
                  (long long)longest[1], (long long)most);
    ck_assert_msg(lanes[0] == lanes[1] && sf[0] == sf[1] && n_slots[0] == n_slots[1],
                  "%s: lanes %d/%d, sync-free lanes %d/%d, slots %lld/%lld", what, lanes[0],
                  lanes[1], sf[0], sf[1], (long long)n_slots[0], (long long)n_slots[1]);
    ck_assert_msg((size_t)n_slots[1] <= cap, "%s: %lld slots", what, (long long)n_slots[1]);
    for (int32_t i = 0; i < n; i++) {
        ck_assert_msg(lv[0][i] == want[i] && lv[1][i] == want[i], "%s: row %d: level %d / %d, "
                      "want %d", what, i, lv[0][i], lv[1][i], want[i]);
        ck_assert_msg(rows[0][i] == rows[1][i], "%s: rows by level differ at %d", what, i);
    }
    ck_assert_msg(memcmp(slots[0], slots[1], (size_t)n_slots[0] * sizeof(int32_t)) == 0,
                  "%s: the sync-free schedules differ", what);
    memset(&d, 0, sizeof d); /* the rule */
    gs_engine_cuda_set_debug(gpu, &d);
    ck_assert_msg(gs_dsparse_hook_tri_analyse(gpu, T, upper, 0, lv[1], rows[1], slots[1],
                                              &n_slots[1], &nl[1], &lanes[1], &sf[1],
                                              &on_host[1], &longest[1]) == GS_OK,
                  "%s: %s", what, gpu->err.msg);
    ck_assert_msg(on_host[1] == rule_host && nl[1] == top, "%s: the rule: on_host %d (want %d), "
                  "%d levels", what, on_host[1], rule_host, nl[1]);
    ck_assert_msg(memcmp(rows[0], rows[1], (size_t)n * sizeof(int32_t)) == 0,
                  "%s: the rule's rows by level differ", what);
    for (int k = 0; k < 2; k++) free(lv[k]), free(rows[k]), free(slots[k]);
    free(want);
}

/* Chains (a level a row: the host's, by the rule), random bands, a full pattern whose
 * other triangle is ignored, one row, and 3D grids' triangles: 40^3 reads past the rule's
 * budget within its first planes (device), 12^3 (1728 rows) stays within the fixed part
 * (host). */
START_TEST(test_tri_analysis_host)
{
    tu_rng r = tu_rng_seed(33);
    gpu_up();
    for (int upper = 0; upper < 2; upper++) {
        char what[96];
        gs_csr T = random_triangle(&r, 3000, upper, 1, 0.0, 1);
        snprintf(what, sizeof what, "chain 3000 %s", upper ? "upper" : "lower");
        check_analysis_on(&T, upper, 1, what);
        gs_csr_free(&T);
        T = random_triangle(&r, 20000, upper, 66, 0.02, 1);
        snprintf(what, sizeof what, "band 20000 (66) %s", upper ? "upper" : "lower");
        check_analysis_on(&T, upper, 1, what);
        gs_csr_free(&T);
        T = random_triangle(&r, 1, upper, 1, 0.0, 1);
        snprintf(what, sizeof what, "one row %s", upper ? "upper" : "lower");
        check_analysis_on(&T, upper, 1, what);
        gs_csr_free(&T);
        T = grid_triangle(&r, 40, 40, 40, upper, 0);
        snprintf(what, sizeof what, "grid 40^3 %s", upper ? "upper" : "lower");
        check_analysis_on(&T, upper, 0, what);
        gs_csr_free(&T);
        T = grid_triangle(&r, 33, 17, 9, upper, 97);
        snprintf(what, sizeof what, "grid 33x17x9 spikes %s", upper ? "upper" : "lower");
        check_analysis_on(&T, upper, 1, what);
        gs_csr_free(&T);
        gs_csr A = tu_generated("poisson3d:12");
        snprintf(what, sizeof what, "poisson3d:12, both triangles stored, %s", upper ? "upper" : "lower");
        check_analysis_on(&A, upper, 1, what);
        gs_csr_free(&A);
    }
    gpu_down();
}
END_TEST

#endif /* GS_HAVE_CUDA */

static Suite *cuda_toolkit_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_toolkit");
    TCase *tc = tcase_create("cuda_toolkit");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_device_or_clean_refusal);
#if GS_HAVE_CUDA
    if (have_gpu) {
        tcase_add_test(tc, test_scans);
        tcase_add_test(tc, test_transpose);
        tcase_add_test(tc, test_sort_rows);
        tcase_add_test(tc, test_pattern_power);
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_read_words);
        tcase_add_test(tc, test_mat_diagonal);
        tcase_add_test(tc, test_trisolve);
        tcase_add_test(tc, test_split_lu);
        tcase_add_test(tc, test_pattern_power_long_rows);
        tcase_add_test(tc, test_trisolve_grids);
        tcase_add_test(tc, test_tri_analysis_host);
    }
#else
    (void)have_gpu;
#endif
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it, and
 * the device count below does touch it: run the tests in this process. */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    if (!have_gpu) printf("check_cuda_toolkit: skipped: no CUDA device\n");
    SRunner *sr = srunner_create(cuda_toolkit_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
