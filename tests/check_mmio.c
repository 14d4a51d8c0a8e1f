/* check_mmio.c - Check suite for the Matrix Market reader and writer (src/io/mmio.c).
 * Reference: NIST Matrix Market format; values compared bit for bit with strtod. */
#include <errno.h>
#include <float.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "testutil.h"

#include "csr.h"
#include "error.h"
#include "mmio.h"

/* ---- helpers ---- */

/* Check sends every passing ck_assert to its parent process through a pipe;
 * in loops over 10^5 entries that dominates the run, so loops use CHECK,
 * which calls Check only on failure. */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                              \
    } while (0)

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

static void write_tmp(char *path, size_t len, const char *suffix, const char *text)
{
    tu_tmpname(path, len, suffix);
    tu_write_text(path, text);
}

static void write_gz(const char *path, const char *text)
{
    gzFile gz = gzopen(path, "wb");
    ck_assert_ptr_nonnull(gz);
    ck_assert_int_eq(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    ck_assert_int_eq(gzclose(gz), Z_OK);
}

/* a_ij, and whether it is stored (linear search: independent of csr.c). */
static double entry(const gs_csr *A, int32_t i, int32_t j, int *stored)
{
    *stored = 0;
    for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
        if (A->col[k] == j) {
            *stored = 1;
            return A->val ? A->val[k] : 1.0;
        }
    return 0.0;
}

static void assert_entry(const gs_csr *A, int32_t i, int32_t j, double want)
{
    int stored;
    double got = entry(A, i, j, &stored);
    CHECK(stored, "a(%d,%d) not stored", i, j);
    CHECK(memcmp(&got, &want, sizeof got) == 0, "a(%d,%d) = %.17g, want %.17g", i, j, got, want);
}

/* The CSR conventions of csr.h: row_ptr[0] = 0, columns strictly increasing. */
static void assert_csr_conventions(const gs_csr *A)
{
    CHECK(A->row_ptr[0] == 0 && A->row_ptr[A->n_rows] == A->nnz, "bad row_ptr ends");
    for (int32_t i = 0; i < A->n_rows; i++) {
        CHECK(A->row_ptr[i] <= A->row_ptr[i + 1], "row_ptr decreases at row %d", i);
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            CHECK(A->col[k] >= 0 && A->col[k] < A->n_cols &&
                      (k == A->row_ptr[i] || A->col[k - 1] < A->col[k]),
                  "row %d: column %d out of range or out of order", i, A->col[k]);
    }
}

static void assert_csr_equal(const gs_csr *A, const gs_csr *B)
{
    ck_assert_int_eq(A->n_rows, B->n_rows);
    ck_assert_int_eq(A->n_cols, B->n_cols);
    ck_assert_int_eq(A->nnz, B->nnz);
    ck_assert(memcmp(A->row_ptr, B->row_ptr, ((size_t)A->n_rows + 1) * sizeof *A->row_ptr) == 0);
    ck_assert(memcmp(A->col, B->col, (size_t)A->nnz * sizeof *A->col) == 0);
    ck_assert(memcmp(A->val, B->val, (size_t)A->nnz * sizeof *A->val) == 0); /* bit for bit */
}

/* Read text as a matrix; the read must succeed. */
static void read_text(const char *text, gs_csr *A, gs_mm_info *info)
{
    char path[256];
    gs_error err = {GS_OK, ""};
    write_tmp(path, sizeof path, ".mtx", text);
    int status = gs_mm_read_csr(path, A, info, &err);
    ck_assert_msg(status == GS_OK, "read failed: %s", err.msg);
    assert_csr_conventions(A);
    remove(path);
}

/* The message must start "PATH:LINE: " and contain phrase. */
static void assert_message(const gs_error *err, const char *path, long line, const char *phrase)
{
    char where[600];
    snprintf(where, sizeof where, "%s:%ld: ", path, line);
    ck_assert_msg(strncmp(err->msg, where, strlen(where)) == 0,
                  "message '%s' does not start with '%s'", err->msg, where);
    ck_assert_msg(!phrase || strstr(err->msg, phrase), "message '%s' lacks '%s'", err->msg,
                  phrase);
}

static void expect_read_error(const char *text, long line, const char *phrase)
{
    char path[256];
    gs_csr A;
    gs_error err = {GS_OK, ""};
    write_tmp(path, sizeof path, ".mtx", text);
    int status = gs_mm_read_csr(path, &A, NULL, &err);
    ck_assert_msg(status == GS_ERR_INPUT, "status %d (%s) for %s", status, err.msg, text);
    ck_assert_int_eq(err.status, GS_ERR_INPUT);
    ck_assert_ptr_null(A.row_ptr);
    assert_message(&err, path, line, phrase);
    remove(path);
}

static void expect_vector_error(const char *text, long line, const char *phrase)
{
    char path[256];
    double *x = NULL;
    int64_t n = -1;
    gs_error err = {GS_OK, ""};
    write_tmp(path, sizeof path, ".mtx", text);
    int status = gs_mm_read_vector(path, &x, &n, &err);
    ck_assert_msg(status == GS_ERR_INPUT, "status %d (%s)", status, err.msg);
    ck_assert_ptr_null(x);
    assert_message(&err, path, line, phrase);
    remove(path);
}

/* A random matrix with awkward values: all scales, signs, -0, the smallest
 * normal double, extremes, integers; empty rows on purpose (fewer than the
 * entries: see test_header_lies). Subnormals are refused on reading. */
static double random_value(tu_rng *r)
{
    static const double special[] = {0.0, -0.0, DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN,
                                     -3 * DBL_MIN, 1.0, -1.0, 0.1, 1e22, 1e23, 123456789.0};
    uint64_t pick = tu_next(r) % 16;
    if (pick < 3) return special[tu_next(r) % (sizeof special / sizeof special[0])];
    if (pick < 5) return (double)((int64_t)(tu_next(r) % 2001) - 1000);
    double v = tu_uniform(r) * pow(10.0, (double)(int)(tu_next(r) % 81) - 40);
    return tu_next(r) & 1 ? -v : v;
}

static void random_csr(tu_rng *r, int32_t rows, int32_t cols, int64_t nnz, int values,
                       int symmetric, gs_csr *A)
{
    int32_t *ri = malloc((size_t)(2 * nnz + 1) * sizeof *ri);
    int32_t *ci = malloc((size_t)(2 * nnz + 1) * sizeof *ci);
    double *v = malloc((size_t)(2 * nnz + 1) * sizeof *v);
    int64_t m = 0;
    for (int64_t k = 0; k < nnz; k++, m++) {
        ri[m] = (int32_t)(tu_next(r) % (uint64_t)rows);
        ci[m] = (int32_t)(tu_next(r) % (uint64_t)cols);
        v[m] = random_value(r);
        if (symmetric && ri[m] != ci[m]) { /* the mirror, same value */
            ri[m + 1] = ci[m];
            ci[m + 1] = ri[m];
            v[m + 1] = v[m];
            m++;
        }
    }
    for (int64_t k = 0; symmetric && k < m; k++) { /* a value per position, mirrors equal */
        int64_t lo = ri[k] < ci[k] ? ri[k] : ci[k], hi = ri[k] < ci[k] ? ci[k] : ri[k];
        v[k] = ldexp((double)((lo * 7919 + hi * 104729) % 100003) - 50000.0,
                     (int)((lo + hi) % 80) - 40);
    }
    gs_error err = {GS_OK, ""};
    ck_assert_int_eq(gs_csr_from_coo(rows, cols, m, ri, ci, values ? v : NULL, A, &err), GS_OK);
    free(ri);
    free(ci);
    free(v);
}

/* ---- every variant ---- */

START_TEST(test_real_general)
{
    gs_csr A;
    gs_mm_info info;
    read_text("%%MatrixMarket matrix coordinate real general\n"
              "% a comment\n"
              "3 4 5\n"
              "1 1 1.5\n"
              "3 4 -2e3\n"
              "2 2 .25\n"
              "1 3 7\n"
              "3 1 -0.0\n",
              &A, &info);
    ck_assert_int_eq(A.n_rows, 3);
    ck_assert_int_eq(A.n_cols, 4);
    ck_assert_int_eq(A.nnz, 5);
    ck_assert_int_eq(info.is_array, 0);
    ck_assert_int_eq(info.field, GS_MM_REAL);
    ck_assert_int_eq(info.symmetry, GS_MM_GENERAL);
    ck_assert_int_eq(info.rows, 3);
    ck_assert_int_eq(info.cols, 4);
    ck_assert_int_eq(info.entries_stored, 5);
    ck_assert_int_eq(info.duplicates, 0);
    assert_entry(&A, 0, 0, 1.5);
    assert_entry(&A, 2, 3, -2e3);
    assert_entry(&A, 1, 1, 0.25);
    assert_entry(&A, 0, 2, 7.0);
    assert_entry(&A, 2, 0, -0.0);
    gs_csr_free(&A);
}
END_TEST

/* A file that must read, what its gs_mm_info must say (-1: not checked;
 * info is asked for only where something of it is checked), and entries the
 * matrix must store, bit for bit. */
typedef struct read_case {
    const char *text;
    int field, symmetry;
    long long stored, duplicates; /* info.entries_stored, info.duplicates */
    int values;                   /* 1: A.val must be allocated */
    int64_t nnz;
    int count;
    struct {
        int32_t i, j;
        double v;
    } entry[8];
} read_case;

static void check_read_case(const read_case *c)
{
    gs_csr A;
    gs_mm_info info;
    const int with_info =
        c->field >= 0 || c->symmetry >= 0 || c->stored >= 0 || c->duplicates >= 0;
    read_text(c->text, &A, with_info ? &info : NULL);
    if (c->field >= 0) ck_assert_int_eq(info.field, c->field);
    if (c->symmetry >= 0) ck_assert_int_eq(info.symmetry, c->symmetry);
    if (c->stored >= 0) ck_assert_int_eq(info.entries_stored, c->stored);
    if (c->duplicates >= 0) ck_assert_int_eq(info.duplicates, c->duplicates);
    if (c->values) ck_assert_ptr_nonnull(A.val);
    ck_assert_int_eq(A.nnz, c->nnz);
    for (int k = 0; k < c->count; k++)
        assert_entry(&A, c->entry[k].i, c->entry[k].j, c->entry[k].v);
    gs_csr_free(&A);
}

static const read_case variant_cases[] = {
    {"%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 2 -7\n2 1 +12\n2 2 0\n",
     GS_MM_INTEGER, -1, -1, -1, 0, 3, 3, {{0, 1, -7.0}, {1, 0, 12.0}, {1, 1, 0.0}}},
    {"%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n1 1 4\n3 1 -2\n3 3 5\n",
     -1, GS_MM_SYMMETRIC, -1, -1, 0, 4, 4,
     {{0, 0, 4.0}, {2, 0, -2.0}, {0, 2, -2.0}, {2, 2, 5.0}}},
    {"%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 3\n3 2 -4\n",
     -1, -1, -1, -1, 0, 4, 4, {{1, 0, 3.0}, {0, 1, -3.0}, {2, 1, -4.0}, {1, 2, 4.0}}},
    /* the last entry sits in the upper triangle: mirrored all the same; the
     * diagonal is not doubled */
    {"%%MatrixMarket matrix coordinate real symmetric\n4 4 5\n1 1 2\n2 1 -1\n"
     "2 2 2\n4 3 0.5\n2 4 3.25\n",
     -1, GS_MM_SYMMETRIC, 5, 0, 0, 8, 8,
     {{1, 0, -1.0}, {0, 1, -1.0}, {3, 2, 0.5}, {2, 3, 0.5}, {1, 3, 3.25}, {3, 1, 3.25},
      {0, 0, 2.0}, {1, 1, 2.0}}},
    /* an explicit zero on the diagonal is allowed and kept */
    {"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n2 1 1.5\n"
     "3 1 -2.5\n2 2 0\n",
     -1, GS_MM_SKEW_SYMMETRIC, -1, -1, 0, 5, 5,
     {{1, 0, 1.5}, {0, 1, -1.5}, {2, 0, -2.5}, {0, 2, 2.5}, {1, 1, 0.0}}},
    /* pattern files get value 1 */
    {"%%MatrixMarket matrix coordinate pattern general\n2 3 3\n1 3\n2 1\n2 2\n",
     GS_MM_PATTERN, -1, -1, -1, 1, 3, 3, {{0, 2, 1.0}, {1, 0, 1.0}, {1, 1, 1.0}}},
    {"%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n3 1\n3 2\n",
     -1, -1, -1, -1, 0, 5, 5,
     {{0, 2, 1.0}, {2, 0, 1.0}, {1, 2, 1.0}, {2, 1, 1.0}, {0, 0, 1.0}}},
    /* duplicates merged, not summed to 2 */
    {"%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 2\n1 2\n2 1\n",
     -1, -1, -1, 1, 0, 2, 1, {{0, 1, 1.0}}},
    /* the banner is case-insensitive */
    {"%%matrixmarket MATRIX Coordinate REAL Symmetric\n2 2 1\n2 1 3\n",
     -1, GS_MM_SYMMETRIC, -1, -1, 0, 2, 0, {{0}}},
};

START_TEST(test_variant)
{
    check_read_case(&variant_cases[_i]);
}
END_TEST

START_TEST(test_nonsquare_and_empty)
{
    gs_csr A;
    gs_mm_info info;
    read_text("%%MatrixMarket matrix coordinate real general\n2 5 2\n2 5 9\n2 1 3\n", &A, &info);
    ck_assert_int_eq(info.rows, 2);
    ck_assert_int_eq(info.cols, 5);
    ck_assert_int_eq(A.n_cols, 5);
    assert_entry(&A, 1, 4, 9.0);
    ck_assert_int_eq(A.row_ptr[1], 0); /* row 1 empty: read, entries could have filled it */
    gs_csr_free(&A);
    /* rows no more than the entries with their mirrors: read */
    read_text("%%MatrixMarket matrix coordinate real symmetric\n4 4 2\n2 1 1\n4 3 1\n", &A, &info);
    ck_assert_int_eq(A.n_rows, 4);
    ck_assert_int_eq(A.nnz, 4);
    gs_csr_free(&A);
    read_text("%%MatrixMarket matrix coordinate real general\n0 0 0", &A, &info);
    ck_assert_int_eq(A.n_rows, 0);
    gs_csr_free(&A);
}
END_TEST

/* ---- layout: CRLF, comments, blank lines, blanks ---- */

static const char *layout_lf = "%%MatrixMarket matrix coordinate real general\n"
                               "3 3 4\n"
                               "1 1 1.0\n"
                               "2 3 -2.5e-3\n"
                               "3 2 4\n"
                               "3 3 1e10\n";

static void crlf_from(const char *lf, char *out)
{
    for (; *lf; lf++) {
        if (*lf == '\n') *out++ = '\r';
        *out++ = *lf;
    }
    *out = '\0';
}

START_TEST(test_crlf)
{
    gs_csr A, B;
    char crlf[512];
    crlf_from(layout_lf, crlf);
    read_text(layout_lf, &A, NULL);
    read_text(crlf, &B, NULL);
    assert_csr_equal(&A, &B);
    gs_csr_free(&B);
    crlf[strlen(crlf) - 2] = '\0'; /* no final line break */
    read_text(crlf, &B, NULL);
    assert_csr_equal(&A, &B);
    gs_csr_free(&A);
    gs_csr_free(&B);
}
END_TEST

START_TEST(test_comments_blanks_everywhere)
{
    gs_csr A, B;
    read_text(layout_lf, &A, NULL);
    read_text("%%MatrixMarket   matrix\tcoordinate real general  \n"
              "\n"
              "% comment before the size line\n"
              "   \t\n"
              "  %indented comment\n"
              "\t 3   3\t4   \n"
              "\n"
              "  1 1 1.0\n"
              "% comment between entries\n"
              "2\t3 -2.5e-3\t \n"
              "\n"
              "   \n"
              "3 2      4\n"
              "\t3 3 1e10\n"
              "% trailing comment\n"
              "\n\n",
              &B, NULL);
    assert_csr_equal(&A, &B);
    gs_csr_free(&B);
    char crlf[1024];
    crlf_from("%%MatrixMarket matrix coordinate real general\r\n\n%c\n3 3 4\n\n1 1 1.0 \n"
              "%x\n2 3 -2.5e-3\n 3 2 4\t\n3 3 1e10",
              crlf);
    read_text(crlf, &B, NULL);
    assert_csr_equal(&A, &B);
    gs_csr_free(&A);
    gs_csr_free(&B);
}
END_TEST

/* Duplicates summed: a sum that cancels stays stored; in symmetric storage
 * an entry and its mirror are summed too. */
static const read_case summed_cases[] = {
    {"%%MatrixMarket matrix coordinate real general\n3 3 5\n1 1 1\n2 2 5\n1 1 2\n"
     "1 1 4\n2 2 -5\n",
     -1, -1, -1, 3, 0, 2, 2, {{0, 0, 7.0}, {1, 1, 0.0}}},
    {"%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n2 1 1\n1 2 2\n1 1 3\n",
     -1, -1, -1, 1, 0, 3, 2, {{1, 0, 3.0}, {0, 1, 3.0}}},
};

START_TEST(test_duplicates_summed)
{
    check_read_case(&summed_cases[_i]);
}
END_TEST

START_TEST(test_unsorted_input_sorted)
{
    tu_rng r = tu_rng_seed(11);
    enum { N = 40, M = 300 };
    int32_t ri[M], ci[M];
    double v[M];
    char *text = malloc(64 * M + 128);
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n",
                                 N, N, M);
    for (int k = 0; k < M; k++) { /* distinct positions in random order */
        ri[k] = (int32_t)(tu_next(&r) % N);
        ci[k] = (int32_t)((k * 7 + ri[k]) % N);
        for (int q = 0; q < k; q++)
            if (ri[q] == ri[k] && ci[q] == ci[k]) { ri[k] = (int32_t)((ri[k] + 1) % N); q = -1; }
        v[k] = (double)(k + 1) / 8.0;
        len += (size_t)sprintf(text + len, "%d %d %.17g\n", ri[k] + 1, ci[k] + 1, v[k]);
    }
    gs_csr A;
    read_text(text, &A, NULL); /* assert_csr_conventions: rows sorted */
    ck_assert_int_eq(A.nnz, M);
    for (int k = 0; k < M; k++) assert_entry(&A, ri[k], ci[k], v[k]);
    gs_csr_free(&A);
    free(text);
}
END_TEST

/* ---- numbers: bit for bit what strtod gives ---- */

/* text read as a vector, which must succeed; *n gets its length. */
static double *read_vector_text(const char *text, int64_t *n)
{
    char path[256];
    double *x = NULL;
    gs_error err = {GS_OK, ""};
    write_tmp(path, sizeof path, ".mtx", text);
    ck_assert_msg(gs_mm_read_vector(path, &x, n, &err) == GS_OK, "%s", err.msg);
    remove(path);
    return x;
}

/* x[k] is bit for bit what strtod gives for token k (tokens width bytes apart). */
static void assert_strtod_values(const double *x, const char *tokens, size_t width, int count)
{
    for (int k = 0; k < count; k++) {
        const char *tok = tokens + (size_t)k * width;
        double want = strtod(tok, NULL);
        CHECK(memcmp(&x[k], &want, sizeof want) == 0, "'%s' read as %.17g, strtod %.17g", tok,
              x[k], want);
    }
}

/* Whether strtod underflows on the token: a nonzero significand read as 0,
 * or a subnormal. The reader refuses those (test_underflow). */
static int underflows(const char *s)
{
    double d = strtod(s, NULL);
    if (fpclassify(d) == FP_SUBNORMAL) return 1;
    for (; d == 0.0 && *s && *s != 'e' && *s != 'E'; s++)
        if (*s >= '1' && *s <= '9') return 1;
    return 0;
}

static size_t random_decimal_any(tu_rng *r, char *s)
{
    size_t n = 0;
    uint64_t shape = tu_next(r);
    if (shape & 1) s[n++] = '-';
    else if (shape & 2) s[n++] = '+';
    int int_digits = (int)(tu_next(r) % 12), frac_digits = (int)(tu_next(r) % 24);
    if (shape & 4) int_digits = (int)(tu_next(r) % 3);
    for (int i = 0; i < int_digits; i++) s[n++] = (char)('0' + tu_next(r) % 10);
    if (frac_digits > 0 || int_digits == 0 || (shape & 8)) {
        s[n++] = '.';
        if (int_digits == 0 && frac_digits == 0) frac_digits = 1;
        for (int i = 0; i < frac_digits; i++) s[n++] = (char)('0' + tu_next(r) % 10);
    }
    if (shape & 16) {
        s[n++] = shape & 32 ? 'e' : 'E';
        if (shape & 64) s[n++] = shape & 128 ? '-' : '+';
        int e = (int)(tu_next(r) % (shape & 256 ? 330 : 30));
        if ((shape & 64) == 0 || (shape & 128) == 0) e = e % 290; /* stay finite */
        n += (size_t)sprintf(s + n, shape & 512 ? "%03d" : "%d", e);
    }
    s[n] = '\0';
    return n;
}

static size_t random_decimal(tu_rng *r, char *s)
{
    size_t n;
    do n = random_decimal_any(r, s); while (underflows(s));
    return n;
}

START_TEST(test_values_bit_exact)
{
    enum { N = 40000 };
    tu_rng r = tu_rng_seed(2024);
    char *text = malloc((size_t)N * 64 + 128), (*tok)[60] = malloc((size_t)N * 60);
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix array real general\n%d 1\n", N);
    for (int k = 0; k < N; k++) {
        random_decimal(&r, tok[k]);
        len += (size_t)sprintf(text + len, "%s%s\n", k % 5 == 0 ? "  " : "", tok[k]);
    }
    int64_t n = 0;
    double *x = read_vector_text(text, &n);
    ck_assert_int_eq(n, N);
    assert_strtod_values(x, tok[0], sizeof tok[0], N);
    free(x);
    free(text);
    free(tok);
}
END_TEST

/* Values as printf writes them (%.17g and shorter) and integers halfway
 * between two doubles: the Eisel-Lemire path and its halfway refusals. */
static void random_printed_any(tu_rng *r, char *s)
{
    uint64_t kind = tu_next(r) % 4, bits = tu_next(r);
    double d;
    memcpy(&d, &bits, sizeof d);
    if (!isfinite(d)) d = 1.0 / 3.0;
    if (kind == 0 || (kind == 1 && fabs(d) >= 1e307)) /* fewer digits could round to inf */
        sprintf(s, "%.17g", d);
    else if (kind == 1) sprintf(s, "%.*g", 1 + (int)(tu_next(r) % 17), d);
    else if (kind == 2) sprintf(s, "%.17g", ldexp(tu_uniform(r) + 0.5, (int)(tu_next(r) % 600) - 300));
    else { /* 2^k + (odd) 2^(k-53): exactly between two doubles */
        int k = 54 + (int)(tu_next(r) % 9);
        uint64_t v = (1ull << k) + ((tu_next(r) % (1ull << 40)) << (k - 52)) + (1ull << (k - 53));
        sprintf(s, "%llu", (unsigned long long)(v + tu_next(r) % 3 - 1));
    }
}

static void random_printed(tu_rng *r, char *s)
{
    do random_printed_any(r, s); while (underflows(s));
}

START_TEST(test_values_printed_bit_exact)
{
    enum { N = 60000 };
    tu_rng r = tu_rng_seed(4711);
    char *text = malloc((size_t)N * 40 + 128), (*tok)[40] = malloc((size_t)N * 40);
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix array real general\n%d 1\n", N);
    for (int k = 0; k < N; k++) {
        random_printed(&r, tok[k]);
        len += (size_t)sprintf(text + len, "%s\n", tok[k]);
    }
    int64_t n = 0;
    double *x = read_vector_text(text, &n);
    assert_strtod_values(x, tok[0], sizeof tok[0], N);
    free(x);
    free(text);
    free(tok);
}
END_TEST

START_TEST(test_value_forms)
{
    static const char *forms[] = {"1.",  ".5",    "+3",   "1E5",  "1e+05", "-0",
                                  "007", "0.000", "1e-300", "0e-400", "1.7976931348623157e308",
                                  "123456789012345678901234567890", "0.1000000000000000055511151231257827",
                                  "9007199254740993", "-9007199254740992", "1e22", "1e23",
                                  "00000000000000000000000000001.5", "2.2250738585072014e-308",
                                  "2.22507385850720138e-308", "0.000000000000000000000e-999"};
    enum { N = sizeof forms / sizeof forms[0] };
    char text[2048];
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix coordinate real general\n%d 1 %d\n",
                                 N, N);
    for (int k = 0; k < N; k++) len += (size_t)sprintf(text + len, "%03d 1 %s\n", k + 1, forms[k]);
    gs_csr A;
    read_text(text, &A, NULL); /* indices with leading zeros too */
    for (int k = 0; k < N; k++) assert_entry(&A, k, 0, strtod(forms[k], NULL));
    gs_csr_free(&A);
}
END_TEST

/* ---- gzip ---- */

START_TEST(test_gz_read)
{
    char gzpath[256], plain[256], disguised[256];
    gs_csr A, B, C;
    gs_error err = {GS_OK, ""};
    tu_tmpname(gzpath, sizeof gzpath, ".mtx.gz");
    write_gz(gzpath, layout_lf);
    read_text(layout_lf, &A, NULL);
    ck_assert_msg(gs_mm_read_csr(gzpath, &B, NULL, &err) == GS_OK, "%s", err.msg);
    assert_csr_equal(&A, &B);
    tu_tmpname(disguised, sizeof disguised, ".mtx"); /* gzip content, plain name */
    write_gz(disguised, layout_lf);
    ck_assert_msg(gs_mm_read_csr(disguised, &C, NULL, &err) == GS_OK, "%s", err.msg);
    assert_csr_equal(&A, &C);
    gs_csr_free(&C);
    write_tmp(plain, sizeof plain, ".mtx.gz", layout_lf); /* plain content, .gz name */
    ck_assert_msg(gs_mm_read_csr(plain, &C, NULL, &err) == GS_OK, "%s", err.msg);
    assert_csr_equal(&A, &C);
    gs_csr_free(&A);
    gs_csr_free(&B);
    gs_csr_free(&C);
    remove(gzpath);
    remove(disguised);
    remove(plain);
}
END_TEST

/* A gzip error reads "PATH: cannot read: corrupt or truncated gzip data
 * (zlib: ...)": the path, not the name zlib gives the descriptor. */
static void assert_gz_message(const gs_error *err, const char *path, const char *zlib_says)
{
    ck_assert_msg(strncmp(err->msg, path, strlen(path)) == 0 && err->msg[strlen(path)] == ':',
                  "'%s' does not start with the path", err->msg);
    ck_assert_msg(!strstr(err->msg, "<fd:"), "'%s' names zlib's descriptor", err->msg);
    ck_assert_msg(strstr(err->msg, "gzip data"), "'%s' does not say gzip", err->msg);
    ck_assert_msg(!zlib_says || strstr(err->msg, zlib_says), "'%s' lacks '%s'", err->msg,
                  zlib_says);
}

START_TEST(test_gz_truncated)
{
    char path[256];
    tu_tmpname(path, sizeof path, ".mtx.gz");
    char *text = malloc(200000);
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix coordinate real general\n5000 1 5000\n");
    for (int k = 0; k < 5000; k++) len += (size_t)sprintf(text + len, "%d 1 %d.125\n", k + 1, k);
    write_gz(path, text);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    ck_assert_int_eq(truncate(path, size / 2), 0);
    gs_csr A;
    gs_error err = {GS_OK, ""};
    ck_assert_int_eq(gs_mm_read_csr(path, &A, NULL, &err), GS_ERR_IO);
    assert_gz_message(&err, path, "unexpected end of file");
    ck_assert_ptr_null(A.row_ptr);
    double *x = NULL;
    int64_t n = 0;
    gs_error_clear(&err);
    ck_assert_int_eq(gs_mm_read_vector(path, &x, &n, &err), GS_ERR_IO);
    assert_gz_message(&err, path, "unexpected end of file");
    ck_assert_ptr_null(x);
    remove(path);
    free(text);
}
END_TEST

/* The gzip magic and a deflate header, then bytes that are no deflate stream. */
START_TEST(test_gz_corrupt)
{
    char path[256];
    static const unsigned char bytes[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff,
                                          0xff, 0xff, 'g', 'a', 'r', 'b', 'a', 'g', 'e'};
    tu_tmpname(path, sizeof path, ".mtx");
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(bytes, 1, sizeof bytes, f), sizeof bytes);
    ck_assert_int_eq(fclose(f), 0);
    gs_csr A;
    gs_error err = {GS_OK, ""};
    ck_assert_int_eq(gs_mm_read_csr(path, &A, NULL, &err), GS_ERR_IO);
    assert_gz_message(&err, path, NULL);
    ck_assert_ptr_null(A.row_ptr);
    remove(path);
}
END_TEST

/* ---- round trips: write, read back, exact equality ---- */

static void roundtrip(const char *suffix, int32_t rows, int32_t cols, int64_t nnz, int values,
                      int symmetric, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    gs_csr A, B;
    gs_mm_info info;
    gs_error err = {GS_OK, ""};
    char path[256];
    random_csr(&r, rows, cols, nnz, values, symmetric, &A);
    tu_tmpname(path, sizeof path, suffix);
    ck_assert_msg(gs_mm_write_csr(path, &A, symmetric, "written by check_mmio\nsecond line", &err)
                  == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_mm_read_csr(path, &B, &info, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(info.symmetry, symmetric ? GS_MM_SYMMETRIC : GS_MM_GENERAL);
    ck_assert_int_eq(info.field, values ? GS_MM_REAL : GS_MM_PATTERN);
    ck_assert_int_eq(info.duplicates, 0);
    if (!values) { /* a pattern reads back with ones */
        A.val = malloc((size_t)A.nnz * sizeof *A.val + 1);
        for (int64_t k = 0; k < A.nnz; k++) A.val[k] = 1.0;
    }
    assert_csr_equal(&A, &B);
    gs_csr_free(&A);
    gs_csr_free(&B);
    remove(path);
}

START_TEST(test_roundtrip_general) { roundtrip(".mtx", 57, 43, 900, 1, 0, 1); }
END_TEST
START_TEST(test_roundtrip_general_gz) { roundtrip(".mtx.gz", 80, 80, 2000, 1, 0, 2); }
END_TEST
START_TEST(test_roundtrip_symmetric) { roundtrip(".mtx", 60, 60, 700, 1, 1, 3); }
END_TEST
START_TEST(test_roundtrip_symmetric_gz) { roundtrip(".mtx.gz", 60, 60, 700, 1, 1, 4); }
END_TEST
START_TEST(test_roundtrip_pattern) { roundtrip(".mtx", 30, 50, 400, 0, 0, 5); }
END_TEST
START_TEST(test_roundtrip_pattern_symmetric_gz) { roundtrip(".mtx.gz", 30, 30, 200, 0, 1, 6); }
END_TEST

static void roundtrip_vector(const char *suffix)
{
    tu_rng r = tu_rng_seed(77);
    enum { N = 3000 };
    double *x = malloc(N * sizeof *x), *y = NULL;
    int64_t n = 0;
    char path[256];
    gs_error err = {GS_OK, ""};
    for (int i = 0; i < N; i++) x[i] = random_value(&r);
    tu_tmpname(path, sizeof path, suffix);
    ck_assert_msg(gs_mm_write_vector(path, x, N, "a vector", &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_mm_read_vector(path, &y, &n, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(n, N);
    ck_assert(memcmp(x, y, N * sizeof *x) == 0);
    free(x);
    free(y);
    remove(path);
}

START_TEST(test_roundtrip_vector) { roundtrip_vector(".mtx"); }
END_TEST
START_TEST(test_roundtrip_vector_gz) { roundtrip_vector(".mtx.gz"); }
END_TEST

START_TEST(test_write_layout)
{
    gs_csr A;
    char path[256], text[1024];
    gs_error err = {GS_OK, ""};
    read_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 0.5\n2 1 -3\n", &A,
              NULL);
    tu_tmpname(path, sizeof path, ".mtx");
    ck_assert_int_eq(gs_mm_write_csr(path, &A, 1, "line one\nline two", &err), GS_OK);
    FILE *f = fopen(path, "rb");
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_str_eq(text, "%%MatrixMarket matrix coordinate real symmetric\n% line one\n"
                           "% line two\n2 2 2\n1 1 0.5\n2 1 -3\n");
    ck_assert_int_eq(gs_mm_write_csr(path, &A, 0, NULL, &err), GS_OK);
    f = fopen(path, "rb");
    len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_str_eq(text, "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 0.5\n"
                           "1 2 -3\n2 1 -3\n");
    gs_csr_free(&A);
    remove(path);
}
END_TEST

/* ---- vectors ---- */

START_TEST(test_vector_forms)
{
    static const struct { const char *text; int64_t n; double x[4]; } cases[] = {
        {"%%MatrixMarket matrix array real general\n3 1\n1.5\n-2\n1e-3\n", 3, {1.5, -2, 1e-3}},
        {"%%MatrixMarket matrix array real general\n% c\n\n1 3\n 1.5 \r\n-2\r\n\r\n1e-3", 3,
         {1.5, -2, 1e-3}},
        {"%%MatrixMarket matrix array integer general\n2 1\n4\n-5\n", 2, {4, -5}},
        {"%%MatrixMarket matrix coordinate real general\n4 1 3\n3 1 2.5\n1 1 1\n3 1 0.5\n", 4,
         {1, 0, 3.0, 0}},
        {"%%MatrixMarket matrix coordinate real general\n1 4 1\n1 2 7\n", 4, {0, 7, 0, 0}},
        {"%%MatrixMarket matrix array real general\n0 1\n", 0, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[256];
        double *x = NULL;
        int64_t n = -1;
        gs_error err = {GS_OK, ""};
        write_tmp(path, sizeof path, ".mtx", cases[c].text);
        ck_assert_msg(gs_mm_read_vector(path, &x, &n, &err) == GS_OK, "case %zu: %s", c, err.msg);
        ck_assert_int_eq(n, cases[c].n);
        for (int64_t i = 0; i < n; i++) CHECK(x[i] == cases[c].x[i], "case %zu: x[%lld]", c, (long long)i);
        free(x);
        remove(path);
    }
}
END_TEST

START_TEST(test_vector_errors)
{
    char path[256];
    double *x = NULL;
    int64_t n = 0;
    gs_error err = {GS_OK, ""};
    write_tmp(path, sizeof path, ".mtx", "%%MatrixMarket matrix coordinate real general\n3 1 1\n2 1 5\n");
    ck_assert_msg(gs_mm_read_vector_of_length(path, 3, &x, &n, &err) == GS_OK, "%s", err.msg);
    ck_assert(n == 3 && x[0] == 0.0 && x[1] == 5.0 && x[2] == 0.0);
    free(x);
    x = NULL;
    ck_assert_int_eq(gs_mm_read_vector_of_length(path, 4, &x, &n, &err), GS_ERR_INPUT);
    assert_message(&err, path, 2, "a vector of 3 entries, expected 4");
    ck_assert_ptr_null(x);
    remove(path);
    expect_vector_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 2,
                        "not a vector");
    expect_vector_error("%%MatrixMarket matrix coordinate pattern general\n2 1 1\n1 1\n", 1,
                        "pattern");
    expect_vector_error("%%MatrixMarket matrix array real symmetric\n1 1\n1\n", 1, "general");
    expect_vector_error("%%MatrixMarket matrix array real general\n3 1\n1\n2\n", 4,
                        "premature end of file");
    expect_vector_error("%%MatrixMarket matrix array real general\n2 1\n1\n2 3\n", 4,
                        "too many tokens");
    expect_vector_error("%%MatrixMarket matrix array real general\n2 1\n1\nnan\n", 4,
                        "not a finite number");
    expect_vector_error("%%MatrixMarket matrix array real general\n2 1 2\n1\n2\n", 2,
                        "bad size line");
    expect_vector_error("%%MatrixMarket matrix coordinate real general\n3 1 1\n4 1 1\n", 3,
                        "row index 4 out of range 1..3");
}
END_TEST

/* ---- every content error: status, "FILE:LINE: " and what ---- */

#define BANNER "%%MatrixMarket matrix coordinate real general\n"

static const struct bad_input {
    const char *text;
    long line;
    const char *phrase;
} bad_inputs[] = {
    {"", 1, "empty file"},
    {"3 3 1\n1 1 1\n", 1, "missing banner"},
    {"% comment\n" BANNER "1 1 1\n1 1 1\n", 1, "missing banner"},
    {"%%MatrixMarket\n1 1 1\n", 1, "incomplete banner"},
    {"%%MatrixMarket matrix coordinate real\n1 1 1\n", 1, "incomplete banner"},
    {"%%MatrixMarket matrix coordinate real general extra\n1 1 1\n", 1, "unexpected 'extra'"},
    {"%%MatrixMarket vector coordinate real general\n1 1 1\n", 1, "object 'vector'"},
    {"%%MatrixMarket matrix coord real general\n1 1 1\n", 1, "unknown format 'coord'"},
    {"%%MatrixMarket matrix coordinate float general\n1 1 1\n", 1, "unknown field 'float'"},
    {"%%MatrixMarket matrix coordinate real symetric\n1 1 1\n", 1, "unknown symmetry 'symetric'"},
    {"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", 1, "complex"},
    {"%%MatrixMarket matrix coordinate complex hermitian\n1 1 1\n1 1 1 0\n", 1, "complex"},
    {"%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", 1, "hermitian"},
    {"%%MatrixMarket matrix coordinate pattern skew-symmetric\n2 2 1\n2 1\n", 1, "skew"},
    {"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 1, "array"},
    {"%%MatrixMarket matrix array pattern general\n2 2\n", 1, "pattern"},
    {"\x7f" "ELF\x02\x01\x01\n\x01\x02", 1, "missing banner"},
    {BANNER "% c\n\n", 3, "missing the size line"},
    {BANNER, 1, "missing the size line"},
    {BANNER "%c\n\n3 3\n1 1 1\n", 4, "bad size line"},
    {BANNER "3 3 1 1\n1 1 1\n", 2, "bad size line"},
    {BANNER "3 x 1\n1 1 1\n", 2, "not an integer"},
    {BANNER "3 3 1.0\n1 1 1\n", 2, "not an integer"},
    {BANNER "-3 3 1\n1 1 1\n", 2, "negative"},
    {BANNER "3 3 -1\n", 2, "negative"},
    {BANNER "3000000000 3 1\n1 1 1\n", 2, "32-bit"},
    {BANNER "3 99999999999999999999999 1\n1 1 1\n", 2, "too large"},
    {BANNER "2 2 5\n1 1 1\n", 2, "exceed rows x columns = 4"},
    {"%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n", 2, "square"},
    {BANNER "3 3 3\n1 1 1\n2 2 1\n", 4, "premature end of file: expected 3 entries, found 2"},
    {BANNER "3 3 3\n1 1 1\n2 2 1", 4, "premature end of file"},
    {BANNER "3 3 3\n1 1 1\n2 2 1\n% end\n\n", 6, "premature end of file"},
    {BANNER "3 3 1\n", 2, "premature end of file"},
    {BANNER "3 3 1\n1 1 1\n2 2 1\n", 4, "too many entries"},
    {BANNER "3 3 1\n1 1 1\n\n% c\n  2 2 1\n", 6, "too many entries"},
    {BANNER "3 3 1\n4 1 1\n", 3, "row index 4 out of range 1..3"},
    {BANNER "3 3 1\n1 5 1\n", 3, "column index 5 out of range 1..3"},
    {BANNER "3 3 1\n0 1 1\n", 3, "1-based"},
    {BANNER "3 3 1\n1 0 1\n", 3, "1-based"},
    {BANNER "3 3 1\n-1 1 1\n", 3, "row index -1 out of range"},
    {BANNER "3 3 1\n99999999999999999999 1 1\n", 3, "out of range"},
    {BANNER "3 3 1\na 1 1\n", 3, "row index 'a' is not an integer"},
    {BANNER "3 3 1\n1 1.5 1\n", 3, "column index '1.5' is not an integer"},
    {BANNER "3 3 2\n1 1 1\n2 2 abc\n", 4, "value 'abc' is not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1.5.5\n", 4, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 --1\n", 4, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1e\n", 4, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 0x1p3\n", 4, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1,5\n", 4, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 nan\n", 4, "not a finite number"},
    {BANNER "3 3 2\n1 1 1\n2 2 NaN\n", 4, "not a finite number"},
    {BANNER "3 3 2\n1 1 1\n2 2 inf\n", 4, "not a finite number"},
    {BANNER "3 3 2\n1 1 1\n2 2 -Infinity\n", 4, "not a finite number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1e999\n", 4, "not a finite number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1 2\n", 4, "too many tokens: '2'"},
    {"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 2 1.0\n", 4,
     "a pattern entry has no value"},
    {BANNER "3 3 2\n1 1 1\n2 2\n", 4, "missing value"},
    {BANNER "3 3 2\n1 1 1\n2\n", 4, "missing column index"},
    {"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n", 3, "not an integer"},
    {"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1e3\n", 3, "not an integer"},
    {"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n2 2 4\n", 4,
     "nonzero diagonal"},
    {BANNER "\r\n3 3 2\r\n1 1 1\r\n\r\n2 2 x\r\n", 6, "not a number"},
    {BANNER "3 3 2\n1 1 1\n2 2 1\x01\n", 4, "not a number"},
    /* values that underflow: strtod gives 0 or a subnormal */
    {BANNER "3 3 3\n1 1 1\n2 2 1e-320\n3 3 1\n", 4, "value '1e-320' underflows"},
    {BANNER "3 3 3\n1 1 1\n2 2 1e-400\n3 3 1\n", 4, "value '1e-400' underflows"},
    {BANNER "3 3 3\n1 1 1\n2 2 -4.9e-324\n3 3 1\n", 4, "underflows"},
    {BANNER "3 3 3\n1 1 1\n2 2 2.2250738585072011e-308\n3 3 1\n", 4, "underflows"},
    {BANNER "3 3 3\n1 1 1\n2 2 0.0001e-305\n3 3 1\n", 4, "underflows"},
    {BANNER "3 3 3\n1 1 1\n2 2 7e-99999999\n3 3 1\n", 4, "underflows"},
    {"%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n2 1 1e-310\n3 3 1\n", 4,
     "underflows"},
    /* more rows than the entries can fill: refused, with the first empty row */
    {BANNER "4 4 0\n", 2, "row 1 has no entries"},
    {BANNER "3 3 2\n1 1 1\n3 3 1\n", 2, "row 2 has no entries"},
    {BANNER "100000000 100000000 5\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 5 1\n", 2,
     "row 6 has no entries"},
    {BANNER "2147483647 2147483647 3\n%c\n7 1 1\n1 3 1\n3 2 1\n", 2, "row 2 has no entries"},
    {"%%MatrixMarket matrix coordinate real symmetric\n5 5 2\n2 1 1\n3 3 1\n", 2,
     "row 4 has no entries"},
    {"%%MatrixMarket matrix coordinate pattern symmetric\n1000000000 1000000000 2\n2 1\n1 1\n", 2,
     "row 3 has no entries"},
    /* a bad line is reported first: errors come in file order */
    {BANNER "1000 1000 2\n1 1 1\n2 2 1e-400\n", 4, "underflows"},
    {BANNER "1000 1000 2\n1 1 1\n", 3, "premature end of file"},
};

START_TEST(test_bad_input)
{
    expect_read_error(bad_inputs[_i].text, bad_inputs[_i].line, bad_inputs[_i].phrase);
}
END_TEST

/* ---- I/O errors ---- */

START_TEST(test_io_errors)
{
    gs_csr A;
    gs_error err = {GS_OK, ""};
    const char *missing = "/tmp/gs_test_no_such_dir/none.mtx";
    ck_assert_int_eq(gs_mm_read_csr(missing, &A, NULL, &err), GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, missing) && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
    gs_error_clear(&err);
    ck_assert_int_eq(gs_mm_read_csr("/tmp", &A, NULL, &err), GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, "/tmp") && strstr(err.msg, strerror(EISDIR)), "%s", err.msg);
    gs_error_clear(&err);
    double *x = NULL;
    int64_t n = 0;
    ck_assert_int_eq(gs_mm_read_vector(missing, &x, &n, &err), GS_ERR_IO);
    ck_assert_ptr_null(x);
}
END_TEST

START_TEST(test_write_errors)
{
    gs_csr A;
    gs_error err = {GS_OK, ""};
    tu_rng r = tu_rng_seed(9);
    random_csr(&r, 200, 200, 3000, 1, 0, &A);
    ck_assert_int_eq(gs_mm_write_csr("/tmp/gs_test_no_such_dir/a.mtx", &A, 0, NULL, &err),
                     GS_ERR_IO);
    ck_assert_msg(strstr(err.msg, "gs_test_no_such_dir/a.mtx"), "%s", err.msg);
    if (access("/dev/full", W_OK) == 0) { /* a disk that is always full */
        char link[256];
        gs_error_clear(&err);
        ck_assert_int_eq(gs_mm_write_csr("/dev/full", &A, 0, NULL, &err), GS_ERR_IO);
        ck_assert_msg(strstr(err.msg, "/dev/full") && strstr(err.msg, strerror(ENOSPC)), "%s",
                      err.msg);
        tu_tmpname(link, sizeof link, ".mtx.gz");
        remove(link);
        ck_assert_int_eq(symlink("/dev/full", link), 0);
        gs_error_clear(&err);
        ck_assert_int_eq(gs_mm_write_csr(link, &A, 0, NULL, &err), GS_ERR_IO);
        ck_assert_msg(strstr(err.msg, link), "%s", err.msg);
        double x[3] = {1, 2, 3};
        gs_error_clear(&err);
        ck_assert_int_eq(gs_mm_write_vector("/dev/full", x, 3, NULL, &err), GS_ERR_IO);
        remove(link);
    }
    A.n_cols = 100; /* a non-square matrix cannot be written as symmetric */
    gs_error_clear(&err);
    ck_assert_int_eq(gs_mm_write_csr("/tmp/gs_test_never.mtx", &A, 1, NULL, &err), GS_ERR_INPUT);
    A.n_cols = 200;
    gs_csr_free(&A);
}
END_TEST

/* Every allocation failure is reported as GS_ERR_NOMEM, with nothing returned. */
START_TEST(test_out_of_memory)
{
    char path[256], out[256];
    write_tmp(path, sizeof path, ".mtx",
              "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n2 1 2\n2 1 3\n");
    tu_tmpname(out, sizeof out, ".mtx.gz");
    int reached_ok = 0;
    for (long k = 0; k < 64 && !reached_ok; k++) {
        gs_csr A;
        gs_error err = {GS_OK, ""};
        gs_alloc_fail_after(k);
        int status = gs_mm_read_csr(path, &A, NULL, &err);
        gs_alloc_fail_after(-1);
        if (status == GS_OK) {
            reached_ok = 1;
            gs_csr_free(&A);
        } else {
            ck_assert_msg(status == GS_ERR_NOMEM, "k=%ld: %s", k, err.msg);
            ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 && strstr(err.msg, "memory"),
                          "k=%ld: '%s' does not name the file", k, err.msg);
            ck_assert_ptr_null(A.row_ptr);
        }
    }
    ck_assert(reached_ok);
    for (int kind = 0; kind < 2; kind++) {
        gs_csr A;
        gs_error err = {GS_OK, ""};
        double x[2] = {1, 2}, *y = NULL;
        int64_t n;
        read_text("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 1 1\n", &A, NULL);
        gs_alloc_fail_after(0);
        int status = kind ? gs_mm_write_vector(out, x, 2, NULL, &err)
                          : gs_mm_write_csr(out, &A, 0, NULL, &err);
        ck_assert_int_eq(status, GS_ERR_NOMEM);
        gs_alloc_fail_after(0);
        gs_error_clear(&err);
        ck_assert_int_eq(gs_mm_read_vector(path, &y, &n, &err), GS_ERR_NOMEM);
        gs_alloc_fail_after(-1);
        ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "'%s'", err.msg);
        gs_csr_free(&A);
    }
    remove(path);
    remove(out);
}
END_TEST

/* ---- memory bounded by the file, not by its size line ---- */

typedef struct capped_read {
    int status;
    char msg[GS_ERROR_MSG_LEN];
} capped_read;

enum { MEMORY_CAP = 512 << 20 }; /* bytes of address space: far below what a lie asks */

/* Read path (vector: 0 a matrix, 1 a vector, 2 a vector of length 3) in a
 * child process whose address space is capped (RLIMIT_AS), so a reader that
 * sized anything by a lying size line fails there with out-of-memory. The
 * child sends status and message. */
static capped_read read_capped(const char *path, int vector)
{
    capped_read out = {-1, ""};
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit cap = {MEMORY_CAP, MEMORY_CAP};
        gs_error err = {GS_OK, ""};
        close(fd[0]);
        if (setrlimit(RLIMIT_AS, &cap) == 0) {
            gs_csr A;
            double *x = NULL;
            int64_t n;
            out.status = vector == 2  ? gs_mm_read_vector_of_length(path, 3, &x, &n, &err)
                         : vector == 1 ? gs_mm_read_vector(path, &x, &n, &err)
                                       : gs_mm_read_csr(path, &A, NULL, &err);
            if (out.status == GS_OK && !vector) gs_csr_free(&A);
            free(x);
            memcpy(out.msg, err.msg, sizeof out.msg);
        }
        _exit(write(fd[1], &out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    for (ssize_t r = 1; got < sizeof out && r > 0; got += r > 0 ? (size_t)r : 0)
        r = read(fd[0], (char *)&out + got, sizeof out - got);
    close(fd[0]);
    int wstatus = 0;
    ck_assert_int_eq(waitpid(pid, &wstatus, 0), pid);
    ck_assert_msg(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0, "child failed: %d", wstatus);
    ck_assert_int_eq(got, sizeof out);
    ck_assert_msg(out.status != -1, "setrlimit failed in the child");
    return out;
}

static const struct header_lie {
    const char *text;
    int vector, status;
    long line;
    const char *phrase;
} header_lies[] = {
    /* 10^8 rows (8e8 bytes of row pointers) and 5 entries: the case of issue 17 */
    {BANNER "100000000 100000000 5\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 5 1\n", 0, GS_ERR_INPUT,
     2, "row 6 has no entries"},
    {"%%MatrixMarket matrix coordinate pattern symmetric\n2147483647 2147483647 3\n"
     "1 1\n2 1\n4 2\n", 0, GS_ERR_INPUT, 2, "row 3 has no entries"},
    /* 4e18 entries announced, 5 present: the entry arrays follow the text */
    {BANNER "2000000000 2000000000 4000000000000000000\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 5 1\n",
     0, GS_ERR_INPUT, 7, "premature end of file: expected 4000000000000000000 entries, found 5"},
    {"%%MatrixMarket matrix coordinate real symmetric\n2000000000 2000000000 "
     "2000000000000000000\n%\n1 1 1\n2 1 1\n", 0, GS_ERR_INPUT, 5, "premature end of file"},
    {"%%MatrixMarket matrix array real general\n2000000000 1\n1\n2\n", 1, GS_ERR_INPUT, 4,
     "premature end of file"},
    /* a coordinate vector's absent entries are 0: its length is allocated
     * once its entries are read; an allocation that fails names the file.
     * Given the length it must have (vector 2), the size line is refused */
    {"%%MatrixMarket matrix coordinate real general\n2000000000 1 1\n7 1 2\n", 1, GS_ERR_NOMEM,
     0, "memory"},
    {"%%MatrixMarket matrix coordinate real general\n2000000000 1 1\n7 1 2\n", 2, GS_ERR_INPUT,
     2, "a vector of 2000000000 entries, expected 3"},
    {"%%MatrixMarket matrix array real general\n1 2000000000\n1\n", 2, GS_ERR_INPUT, 2,
     "expected 3"},
    {"%%MatrixMarket matrix coordinate real general\n3 1 2\n3 1 2\n2 1 1e-400\n", 2,
     GS_ERR_INPUT, 4, "underflows"},
};

static void check_header_lie(const struct header_lie *c, const char *path)
{
    capped_read r = read_capped(path, c->vector);
    ck_assert_msg(r.status == c->status, "status %d, want %d: %s", r.status, c->status, r.msg);
    if (c->line > 0) {
        gs_error err = {(gs_status)r.status, ""};
        memcpy(err.msg, r.msg, sizeof err.msg);
        assert_message(&err, path, c->line, c->phrase);
    } else {
        ck_assert_msg(strncmp(r.msg, path, strlen(path)) == 0 && strstr(r.msg, c->phrase),
                      "'%s' does not name the file or lacks '%s'", r.msg, c->phrase);
    }
}

/* Each lie fails as input (or names the file on out-of-memory) within the
 * cap, plain and gzip-compressed alike (gzip: the size is unknown ahead). */
START_TEST(test_header_lies)
{
    const struct header_lie *c = &header_lies[_i];
    char path[256];
    write_tmp(path, sizeof path, ".mtx", c->text);
    check_header_lie(c, path);
    remove(path);
    tu_tmpname(path, sizeof path, ".mtx.gz");
    write_gz(path, c->text);
    check_header_lie(c, path);
    remove(path);
}
END_TEST

/* ---- large files: several parse chunks, line numbers across chunks ---- */

typedef struct big_file {
    char *text;
    size_t len;
    int64_t entries;
    int64_t *line_of;  /* line number of entry k */
    size_t *offset_of; /* where entry k's line starts in text */
} big_file;

static double big_value(int64_t k, char *buf) /* what the file says, as strtod reads it */
{
    sprintf(buf, "%.6f", (double)k * 0.001 - 17.0);
    return strtod(buf, NULL);
}

/* n entries of a 5000 x 5000 general matrix, a comment or blank line every
 * 97 entries; entry `bad` (if >= 0) gets the value `bad_value`; the size line
 * announces `announced` entries. */
static big_file big_make(int64_t n, int64_t announced, int64_t bad, const char *bad_value)
{
    big_file b = {malloc((size_t)n * 48 + 256), 0, n, malloc((size_t)n * sizeof(int64_t)),
                  malloc((size_t)n * sizeof(size_t))};
    int64_t line = 2;
    char value[64];
    b.len = (size_t)sprintf(b.text, "%s5000 5000 %lld\n", BANNER, (long long)announced);
    for (int64_t k = 0; k < n; k++) {
        if (k % 97 == 5) {
            b.len += (size_t)sprintf(b.text + b.len, k % 2 ? "%% comment %lld\n" : "\n",
                                     (long long)k);
            line++;
        }
        b.line_of[k] = ++line;
        b.offset_of[k] = b.len;
        big_value(k, value);
        b.len += (size_t)sprintf(b.text + b.len, "%lld %lld %s\n", (long long)(k % 5000 + 1),
                                 (long long)(k / 5000 + 1), k == bad ? bad_value : value);
    }
    return b;
}

static void big_free(big_file *b)
{
    free(b->text);
    free(b->line_of);
    free(b->offset_of);
}

static void big_set_threads(void)
{
#ifdef _OPENMP
    omp_set_num_threads(4); /* the reader cuts >= 256 KiB into chunks per thread */
#endif
}

START_TEST(test_big_file_reads)
{
    big_set_threads();
    big_file b = big_make(150000, 150000, -1, NULL);
    gs_csr A;
    gs_mm_info info;
    char buf[64];
    read_text(b.text, &A, &info);
    ck_assert_int_eq(A.nnz, 150000);
    for (int64_t k = 0; k < b.entries; k++)
        assert_entry(&A, (int32_t)(k % 5000), (int32_t)(k / 5000), big_value(k, buf));
    gs_csr_free(&A);
    big_free(&b);
}
END_TEST

START_TEST(test_big_file_error_lines)
{
    big_set_threads();
    static const int64_t where[] = {0, 40000, 77777, 149999};
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        big_file b = big_make(150000, 150000, where[w], "nan");
        expect_read_error(b.text, (long)b.line_of[where[w]], "not a finite number");
        big_free(&b);
    }
    big_file b = big_make(150000, 149000, -1, NULL); /* too many: the first extra entry */
    expect_read_error(b.text, (long)b.line_of[149000], "too many entries");
    big_free(&b);
    b = big_make(150000, 151000, -1, NULL); /* too few: the last line */
    expect_read_error(b.text, (long)b.line_of[149999], "premature end of file");
    big_free(&b);
    b = big_make(150000, 149000, 120000, "x"); /* an error before the extra entries wins */
    expect_read_error(b.text, (long)b.line_of[120000], "not a number");
    big_free(&b);
}
END_TEST

START_TEST(test_big_file_first_error_wins)
{
    big_set_threads();
    big_file b = big_make(150000, 150000, 140000, "inf");
    b.text[b.offset_of[30000]] = 'z'; /* an earlier error, in another chunk */
    expect_read_error(b.text, (long)b.line_of[30000], "is not an integer");
    big_free(&b);
}
END_TEST

/* Symmetric storage across chunks: every mirror lands, negated for skew. */
static int big_symmetric_keeps(int64_t k, int skew) /* lower triangle only: no duplicates */
{
    int64_t i = k % 5000, j = k / 5000;
    return i > j || (i == j && !skew);
}

static void big_symmetric(int skew)
{
    big_set_threads();
    enum { N = 5000, ENTRIES = 160000 };
    char *text = malloc((size_t)ENTRIES * 48 + 256), value[64];
    int64_t stored = 0, diagonal = 0;
    for (int64_t k = 0; k < ENTRIES; k++) {
        stored += big_symmetric_keeps(k, skew);
        diagonal += big_symmetric_keeps(k, skew) && k % N == k / N;
    }
    size_t len = (size_t)sprintf(text, "%%%%MatrixMarket matrix coordinate real %s\n%d %d %lld\n",
                                 skew ? "skew-symmetric" : "symmetric", N, N, (long long)stored);
    for (int64_t k = 0; k < ENTRIES; k++)
        if (big_symmetric_keeps(k, skew)) {
            big_value(k, value);
            len += (size_t)sprintf(text + len, "%lld %lld %s\n", (long long)(k % N + 1),
                                   (long long)(k / N + 1), value);
        }
    gs_csr A;
    gs_mm_info info;
    read_text(text, &A, &info);
    ck_assert_int_eq(info.entries_stored, stored);
    ck_assert_int_eq(A.nnz, 2 * stored - diagonal);
    for (int64_t k = 0; k < ENTRIES; k++) {
        if (!big_symmetric_keeps(k, skew)) continue;
        int32_t i = (int32_t)(k % N), j = (int32_t)(k / N);
        double v = big_value(k, value);
        assert_entry(&A, i, j, v);
        if (i != j) assert_entry(&A, j, i, skew ? -v : v);
    }
    gs_csr_free(&A);
    free(text);
}

START_TEST(test_big_file_symmetric) { big_symmetric(0); }
END_TEST
START_TEST(test_big_file_skew) { big_symmetric(1); }
END_TEST

/* ---- the shared SuiteSparse matrices ---- */

typedef struct manifest_row {
    char name[128], symmetry[32], field[32];
    long long rows, cols, nnz_stored;
} manifest_row;

/* Independent reference: stored entries with sscanf, distinct positions by sorting. */
typedef struct ref_entry {
    long long i, j;
    double v;
} ref_entry;

static int ref_cmp(const void *a, const void *b)
{
    const ref_entry *x = a, *y = b;
    if (x->i != y->i) return x->i < y->i ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

static ref_entry *ref_read(const char *path, int pattern, long long *count)
{
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    long long rows, cols, nnz, k = 0, at_size = 0;
    ref_entry *e = NULL;
    ck_assert_ptr_nonnull(f);
    ck_assert(getline(&line, &cap, f) > 0); /* banner */
    while (getline(&line, &cap, f) > 0) {
        char *p = line + strspn(line, " \t\r\n");
        if (*p == '%' || *p == '\0') continue;
        if (!at_size) {
            ck_assert_int_eq(sscanf(p, "%lld %lld %lld", &rows, &cols, &nnz), 3);
            e = malloc((size_t)(nnz + 1) * sizeof *e);
            at_size = 1;
            continue;
        }
        e[k].v = 1.0;
        CHECK(sscanf(p, "%lld %lld %lf", &e[k].i, &e[k].j, &e[k].v) >= (pattern ? 2 : 3),
              "%s: reference cannot read '%s'", path, p);
        k++;
    }
    free(line);
    fclose(f);
    *count = k;
    return e;
}

/* A against the reference reading of its file: every stored entry present
 * (with its mirror), values exact when nothing was summed, and the number of
 * duplicates and of entries from the distinct stored positions. */
static void check_against_reference(const char *path, const manifest_row *m, const gs_csr *A,
                                    const gs_mm_info *info)
{
    int general = !strcmp(m->symmetry, "general"), skew = !strcmp(m->symmetry, "skew-symmetric");
    long long count, distinct = 0, diagonal = 0;
    ref_entry *e = ref_read(path, !strcmp(m->field, "pattern"), &count);
    ck_assert_int_eq(count, m->nnz_stored);
    for (long long k = 0; k < count; k++) {
        int stored;
        double v = entry(A, (int32_t)(e[k].i - 1), (int32_t)(e[k].j - 1), &stored);
        CHECK(stored, "%s: stored entry %lld missing", m->name, k);
        CHECK(info->duplicates != 0 || memcmp(&v, &e[k].v, sizeof v) == 0, "%s: entry %lld",
              m->name, k);
        if (general) continue;
        double w = entry(A, (int32_t)(e[k].j - 1), (int32_t)(e[k].i - 1), &stored);
        CHECK(stored, "%s: mirror of entry %lld missing", m->name, k);
        CHECK(info->duplicates != 0 || e[k].i == e[k].j || w == (skew ? -v : v),
              "%s: mirror of entry %lld", m->name, k);
        if (e[k].i < e[k].j) { /* one triangle: positions as stored-or-mirrored */
            long long t = e[k].i;
            e[k].i = e[k].j;
            e[k].j = t;
        }
    }
    qsort(e, (size_t)count, sizeof *e, ref_cmp);
    for (long long k = 0; k < count; k++)
        if (k == 0 || ref_cmp(&e[k], &e[k - 1]) != 0) {
            distinct++;
            diagonal += e[k].i == e[k].j;
        }
    ck_assert_int_eq(info->duplicates, count - distinct);
    ck_assert_int_eq(A->nnz, general ? distinct : 2 * distinct - diagonal);
    free(e);
}

static void check_manifest_matrix(const char *dir, const manifest_row *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.mtx", dir, m->name);
    gs_csr A;
    gs_mm_info info;
    gs_error err = {GS_OK, ""};
    int status = gs_mm_read_csr(path, &A, &info, &err);
    if (!strcmp(m->field, "complex") || !strcmp(m->symmetry, "hermitian")) {
        ck_assert_msg(status == GS_ERR_INPUT, "%s: status %d", m->name, status);
        ck_assert_msg(strstr(err.msg, path) == err.msg && strstr(err.msg, "not supported"), "%s",
                      err.msg);
        return;
    }
    ck_assert_msg(status == GS_OK, "%s: %s", m->name, err.msg);
    assert_csr_conventions(&A);
    ck_assert_int_eq(info.rows, m->rows);
    ck_assert_int_eq(info.cols, m->cols);
    ck_assert_int_eq(A.n_rows, m->rows);
    ck_assert_int_eq(A.n_cols, m->cols);
    ck_assert_int_eq(info.entries_stored, m->nnz_stored);
    if (!strcmp(m->symmetry, "general")) ck_assert_int_eq(A.nnz, m->nnz_stored - info.duplicates);
    else ck_assert_int_le(A.nnz, 2 * m->nnz_stored);
    check_against_reference(path, m, &A, &info);
    gs_csr_free(&A);
}

START_TEST(test_shared_matrices)
{
    const char *dir = tu_matrices_dir();
    if (!dir) {
        fprintf(stderr, "check_mmio: shared matrices not found: test_shared_matrices skipped\n");
        return;
    }
    char line[4096];
    FILE *f = tu_manifest_open();
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        manifest_row m;
        if (sscanf(line, "%127[^\t]\t%lld\t%lld\t%lld\t%31[^\t]\t%31[^\t]", m.name, &m.rows,
                   &m.cols, &m.nnz_stored, m.symmetry, m.field) != 6)
            continue;
        check_manifest_matrix(dir, &m);
        seen++;
    }
    fclose(f);
    ck_assert_int_gt(seen, 0);
}
END_TEST

static Suite *mmio_suite(void)
{
    Suite *s = suite_create("mmio");
    TCase *variants = tcase_create("variants");
    tcase_add_test(variants, test_real_general);
    tcase_add_loop_test(variants, test_variant, 0, COUNT(variant_cases));
    tcase_add_test(variants, test_nonsquare_and_empty);
    tcase_add_test(variants, test_vector_forms);
    suite_add_tcase(s, variants);

    TCase *layout = tcase_create("layout");
    tcase_add_test(layout, test_crlf);
    tcase_add_test(layout, test_comments_blanks_everywhere);
    tcase_add_loop_test(layout, test_duplicates_summed, 0, COUNT(summed_cases));
    tcase_add_test(layout, test_unsorted_input_sorted);
    tcase_add_test(layout, test_values_bit_exact);
    tcase_add_test(layout, test_values_printed_bit_exact);
    tcase_add_test(layout, test_value_forms);
    suite_add_tcase(s, layout);

    TCase *io = tcase_create("gzip and round trips");
    tcase_add_test(io, test_gz_read);
    tcase_add_test(io, test_gz_truncated);
    tcase_add_test(io, test_gz_corrupt);
    tcase_add_test(io, test_roundtrip_general);
    tcase_add_test(io, test_roundtrip_general_gz);
    tcase_add_test(io, test_roundtrip_symmetric);
    tcase_add_test(io, test_roundtrip_symmetric_gz);
    tcase_add_test(io, test_roundtrip_pattern);
    tcase_add_test(io, test_roundtrip_pattern_symmetric_gz);
    tcase_add_test(io, test_roundtrip_vector);
    tcase_add_test(io, test_roundtrip_vector_gz);
    tcase_add_test(io, test_write_layout);
    suite_add_tcase(s, io);

    TCase *errors = tcase_create("errors");
    tcase_add_loop_test(errors, test_bad_input, 0, COUNT(bad_inputs));
    tcase_add_test(errors, test_vector_errors);
    tcase_add_test(errors, test_io_errors);
    tcase_add_test(errors, test_write_errors);
    tcase_add_test(errors, test_out_of_memory);
    tcase_add_loop_test(errors, test_header_lies, 0, COUNT(header_lies));
    suite_add_tcase(s, errors);

    TCase *large = tcase_create("large and real files");
    tcase_set_timeout(large, 120);
    tcase_add_test(large, test_big_file_reads);
    tcase_add_test(large, test_big_file_error_lines);
    tcase_add_test(large, test_big_file_first_error_wins);
    tcase_add_test(large, test_big_file_symmetric);
    tcase_add_test(large, test_big_file_skew);
    tcase_add_test(large, test_shared_matrices);
    suite_add_tcase(s, large);
    return s;
}

int main(void) { return tu_run_suite(mmio_suite()); }
