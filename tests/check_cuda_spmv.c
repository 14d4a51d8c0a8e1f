/* check_cuda_spmv.c - SpMV on rows of very different lengths (cuda/sparse/long_rows.cu,
 * spmv_long.cu): split long rows and the merge path against the CPU engine's product, on
 * generated matrices with one dense row, a few long rows, power-law row lengths, empty
 * rows, rows at and around each threshold (the long-row threshold, the chunk and tile
 * sizes), fp64 and fp32 storage; the fused dot and axpby variants; the same bits on every
 * run (also through a captured sequence replayed); the rule's statistics and its switches.
 * Without a CUDA device the suite says "skipped" and passes.
 *
 * Tolerance. Row i of A x is a sum of len_i products, added in another order
 * on the GPU (chunks of 256, warp trees, merge-path lanes) than on the CPU
 * (left to right); each order's error is at most (len_i - 1) eps sum_j
 * |a_ij x_j| (the classical bound for recursive summation in any order,
 * with FMAs one rounding less), so the two differ by at most
 * 2 (len_i - 1) eps sum_j |a_ij x_j|; we allow 2 eps (len_i + 4) sum_j
 * |a_ij x_j| (+4: the final a s + b y). A dense row of 10,001 entries thus
 * gets 2.2e-12 of its absolute sum: a wrong index or a lost chunk is
 * off by a whole term. A dot of y and w: (n + 1) eps sum |y_i w_i| for its
 * own order plus the y's own allowed errors weighted by |w_i|. */
#include <math.h>

#include "debug.h"
#include "engine.h"
#include "gen.h"
#include "precond.h"
#include "testutil.h"
#include "cliutil.h"
#if GS_HAVE_CUDA
#include "../cuda/engine/gs_cuda.h"
#else
enum { GS_CUDA_LAYOUT_CSR = 3, GS_CUDA_LAYOUT_CSR_SPLIT = 4, GS_CUDA_LAYOUT_CSR_MERGE = 5 };
#endif

#define EPS 2.220446049250313e-16
/* cuda/sparse/layout.h: the rule's floor and ratio, the chunk and tile sizes */
#define LONG_ROW_MIN 128
#define LONG_ROW_RATIO 16
#define LONG_CHUNK 256
#define MERGE_TILE 256

static gs_engine *cpu, *gpu;

static void engines_up(void)
{
    gs_error err = {0};
    ck_assert_msg(gs_engine_cpu_create(&cpu, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_engine_cuda_create(&gpu, &err) == GS_OK, "%s", err.msg);
}

static void engines_down(void)
{
    gs_engine_destroy(cpu);
    gs_engine_destroy(gpu);
    cpu = gpu = NULL;
}

static void set_switches(int mode, long long long_min)
{
    gs_debug d;
    memset(&d, 0, sizeof d);
    d.spmv_long = mode;
    d.spmv_long_min = long_min;
    gs_engine_cuda_set_debug(gpu, &d);
}

static void no_error(gs_engine *e)
{
    ck_assert_int_eq(e->ops->sync(e), GS_OK);
    ck_assert_msg(e->err.status == GS_OK, "%s engine: %s", e->ops->name, e->err.msg);
}

static double *randoms(tu_rng *r, int64_t n)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i] = 2.0 * tu_uniform(r) - 1.0;
    return v;
}

static gs_vec *vec_from(gs_engine *e, const double *h, int64_t n)
{
    gs_vec *v = NULL;
    ck_assert_int_eq(e->ops->vec_create(e, n, &v), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, v, h), GS_OK);
    return v;
}

static gs_vec *vec_nan(gs_engine *e, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) h[i] = NAN;
    gs_vec *v = vec_from(e, h, n);
    free(h);
    return v;
}

static double *vec_get(gs_engine *e, const gs_vec *v, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof(double));
    ck_assert_int_eq(e->ops->vec_download(e, v, h), GS_OK);
    return h;
}

static double slot_get(gs_engine *e, int slot)
{
    double v = NAN;
    ck_assert_int_eq(e->ops->scalar_read(e, slot, 1, &v), GS_OK);
    return v;
}

/* ---------------------------------------------------------------- matrices */

/* n_rows x n_cols with row i of len[i] distinct columns (start + k step
 * mod n_cols, start random), values uniform in [-1, 1). */
static gs_csr rows_of(tu_rng *r, int32_t n_rows, int32_t n_cols, const int32_t *len)
{
    int64_t cap = 0;
    for (int32_t i = 0; i < n_rows; i++) cap += len[i] < n_cols ? len[i] : n_cols;
    int32_t *ri = malloc((size_t)(cap + 1) * sizeof(int32_t));
    int32_t *ci = malloc((size_t)(cap + 1) * sizeof(int32_t));
    double *vi = malloc((size_t)(cap + 1) * sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        const int32_t l = len[i] < n_cols ? len[i] : n_cols;
        const int32_t start = (int32_t)(tu_uniform(r) * n_cols);
        int32_t step = l > 0 ? n_cols / l : 1;
        if (step < 1) step = 1;
        for (int32_t k = 0; k < l; k++) {
            ri[nnz] = i;
            ci[nnz] = (int32_t)(((int64_t)start + (int64_t)k * step) % n_cols);
            vi[nnz] = 2.0 * tu_uniform(r) - 1.0;
            nnz++;
        }
    }
    gs_csr A = tu_from_triplets(n_rows, n_cols, nnz, ri, ci, vi);
    free(ri), free(ci), free(vi);
    return A;
}

enum { ONE_DENSE, FEW_LONG, POWER_LAW, EMPTY_AND_LONG, AT_THRESHOLDS, N_SHAPES };
static const char *shape_names[] = {"one dense row", "a few long rows", "power-law rows",
                                    "empty rows and long rows", "rows at the thresholds"};

/* The shapes of the suite. at_thresholds: rows of 4 (mean under 8, so the
 * threshold is LONG_ROW_MIN = 128) with rows of 127, 128, 129 (the
 * threshold), 255..257 and 511..513 (chunks), a row of n_cols, and 1000
 * empty rows in a run (longer than a merge tile). */
static gs_csr shape(tu_rng *r, int kind, int32_t n)
{
    int32_t *len = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        switch (kind) {
        case ONE_DENSE: len[i] = 1 + (int32_t)(tu_uniform(r) * 6); break; /* bloweybq's shape */
        case FEW_LONG: len[i] = 3 + (int32_t)(tu_uniform(r) * 7); break;
        case POWER_LAW: { /* Pareto, index 1.1: mean ~ 20, a few rows of thousands */
            const double u = 1.0 - tu_uniform(r);
            const double l = 2.0 * pow(u, -1.0 / 1.1);
            len[i] = l > n ? n : (int32_t)l;
            break;
        }
        case EMPTY_AND_LONG: len[i] = tu_uniform(r) < 0.4 ? 0 : (int32_t)(tu_uniform(r) * 8); break;
        default: len[i] = 4;
        }
    }
    if (kind == ONE_DENSE) len[n / 2] = n;
    if (kind == FEW_LONG) {
        const int32_t at[] = {0, n / 7, n / 3, n / 2, n - 1}, l[] = {300, 1000, 5000, n, 257};
        for (int k = 0; k < 5; k++) len[at[k]] = l[k];
    }
    if (kind == EMPTY_AND_LONG) {
        for (int32_t i = n / 4; i < n / 4 + 1500 && i < n; i++) len[i] = 0;
        len[1] = n, len[n / 2] = 700, len[n - 2] = 129;
    }
    if (kind == AT_THRESHOLDS) {
        const int32_t l[] = {127, 128, 129, 255, 256, 257, 511, 512, 513, MERGE_TILE - 1,
                             MERGE_TILE + 1, n};
        for (int k = 0; k < 12; k++) len[37 * (k + 1)] = l[k];
        for (int32_t i = n / 2; i < n / 2 + 1000; i++) len[i] = 0;
    }
    gs_csr A = rows_of(r, n, n, len);
    free(len);
    return A;
}

/* The rule's threshold and its count of long rows, as specified. */
static int64_t rule_min(const gs_csr *A)
{
    int64_t t = (int64_t)ceil(LONG_ROW_RATIO * (double)A->nnz / (double)A->n_rows);
    return t < LONG_ROW_MIN ? LONG_ROW_MIN : t;
}

static int64_t rows_at_least(const gs_csr *A, int64_t t, int64_t *longest)
{
    int64_t count = 0;
    *longest = 0;
    for (int32_t i = 0; i < A->n_rows; i++) {
        const int64_t l = A->row_ptr[i + 1] - A->row_ptr[i];
        count += l >= t;
        if (l > *longest) *longest = l;
    }
    return count;
}

/* ------------------------------------------------------------------ checks */

/* (len_i + 4) sum_j |a_ij x_j|, values as stored (header comment). */
static double *row_scale(const gs_csr *A, const double *x, gs_precision prec)
{
    double *s = malloc((size_t)(A->n_rows ? A->n_rows : 1) * sizeof(double));
    for (int32_t i = 0; i < A->n_rows; i++) {
        s[i] = 0;
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            const double v = prec == GS_FP32 ? (double)(float)A->val[k] : A->val[k];
            s[i] += fabs(v * x[A->col[k]]);
        }
        s[i] *= (double)(A->row_ptr[i + 1] - A->row_ptr[i] + 4);
    }
    return s;
}

static void assert_rows(const double *g, const double *c, const double *scale, double factor,
                        int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(g[i] - c[i]) <= 2 * EPS * factor * scale[i],
                      "%s: row %lld: gpu %.17g cpu %.17g (bound %.3g)", what, (long long)i, g[i],
                      c[i], 2 * EPS * factor * scale[i]);
}

/* (n + 1) eps sum |y_i w_i| + sum |w_i| (allowed error of y_i) */
static double dot_bound(const double *y, const double *w, const double *scale, int64_t n)
{
    double s = 0.0, e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs(y[i] * w[i]);
        e += fabs(w[i]) * 2 * EPS * scale[i];
    }
    return (double)(n + 1) * EPS * s + e + 1e-300;
}

typedef struct products {
    double *y, *yx, *ya, *yb; /* A x; A x (no dot); a A x + b y0; -2 A x + 0 y */
    double dot_w, dot_x;      /* y.w, y.x */
} products;

static void products_free(products *p) { free(p->y), free(p->yx), free(p->ya), free(p->yb); }

/* The four products of an engine matrix; y poisoned with NaN before each
 * call that must not read it. */
static products run_products(gs_engine *e, const gs_mat *M, int64_t m, int64_t n, const double *x,
                             const double *w, const double *y0)
{
    products p;
    gs_vec *vx = vec_from(e, x, n), *vw = vec_from(e, w, m), *vy = vec_nan(e, m);
    ck_assert_int_eq(e->ops->spmv_dot(e, M, vx, vy, vw, 30), GS_OK);
    p.y = vec_get(e, vy, m);
    p.dot_w = slot_get(e, 30);
    e->ops->vec_destroy(e, vy);
    vy = vec_nan(e, m);
    ck_assert_int_eq(e->ops->spmv_dot(e, M, vx, vy, NULL, GS_SLOT_NONE), GS_OK);
    p.yx = vec_get(e, vy, m);
    p.dot_x = NAN;
    if (m == n) {
        ck_assert_int_eq(e->ops->spmv_dot(e, M, vx, vy, NULL, 31), GS_OK);
        p.dot_x = slot_get(e, 31);
    }
    /* S10 = 0.75, S11 = -1.25, S12 = 0.5, S13 = 0: a = S10 / S12, b = -S11 */
    const double s[4] = {0.75, -1.25, 0.5, 0.0};
    ck_assert_int_eq(e->ops->scalar_write(e, 10, 4, s), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, vy, y0), GS_OK);
    ck_assert_int_eq(e->ops->spmv_axpby(e, gs_coef_ratio(1.0, 10, 12), M, vx, gs_coef_slot(-1.0, 11), vy),
                     GS_OK);
    p.ya = vec_get(e, vy, m);
    e->ops->vec_destroy(e, vy);
    vy = vec_nan(e, m);
    ck_assert_int_eq(e->ops->spmv_axpby(e, gs_coef_const(-2.0), M, vx, gs_coef_ratio(1, 10, 13), vy),
                     GS_OK);
    p.yb = vec_get(e, vy, m);
    no_error(e);
    e->ops->vec_destroy(e, vx), e->ops->vec_destroy(e, vw), e->ops->vec_destroy(e, vy);
    return p;
}

static void assert_same_bits(const products *a, const products *b, int64_t m, const char *what)
{
    ck_assert_msg(memcmp(a->y, b->y, (size_t)m * sizeof(double)) == 0, "%s: y differs between runs", what);
    ck_assert_msg(memcmp(a->yx, b->yx, (size_t)m * sizeof(double)) == 0, "%s: y (no dot) differs", what);
    ck_assert_msg(memcmp(a->ya, b->ya, (size_t)m * sizeof(double)) == 0, "%s: axpby differs", what);
    ck_assert_msg(memcmp(a->yb, b->yb, (size_t)m * sizeof(double)) == 0, "%s: axpby b=0 differs", what);
    ck_assert_msg(memcmp(&a->dot_w, &b->dot_w, sizeof(double)) == 0, "%s: y.w differs: %.17g %.17g",
                  what, a->dot_w, b->dot_w);
    ck_assert_msg(memcmp(&a->dot_x, &b->dot_x, sizeof(double)) == 0, "%s: y.x differs", what);
}

/* A on the GPU (force: a gs_cuda_layout, or -1 for plain mat_create)
 * against the CPU engine, every product twice (same bits); returns the
 * layout's name in layout (if not NULL). */
static void check_as(const gs_csr *A, gs_precision prec, int force, const char *want,
                     const char *what, tu_rng *r, char *layout)
{
    const int64_t m = A->n_rows, n = A->n_cols;
    gs_mat *ca = NULL, *ga = NULL;
    char label[200];
    ck_assert_int_eq(cpu->ops->mat_create(cpu, A, prec, &ca), GS_OK);
#if GS_HAVE_CUDA
    if (force >= 0)
        ck_assert_msg(gs_cuda_mat_create_as(gpu, A, prec, (gs_cuda_layout)force, 0, &ga) == GS_OK,
                      "%s: %s", what, gpu->err.msg);
    else
#endif
        ck_assert_msg(gpu->ops->mat_create(gpu, A, prec, &ga) == GS_OK, "%s: %s", what, gpu->err.msg);
#if GS_HAVE_CUDA
    const char *got = gs_cuda_mat_layout(ga);
    if (want) ck_assert_msg(strcmp(got, want) == 0, "%s: layout %s, want %s", what, got, want);
    if (layout) snprintf(layout, 24, "%s", got);
#else
    (void)want, (void)layout, (void)force;
#endif
    double *x = randoms(r, n), *w = randoms(r, m), *y0 = randoms(r, m);
    double *sx = row_scale(A, x, prec), *sa = malloc((size_t)(m ? m : 1) * sizeof(double));
    products c = run_products(cpu, ca, m, n, x, w, y0);
    products g = run_products(gpu, ga, m, n, x, w, y0);
    products g2 = run_products(gpu, ga, m, n, x, w, y0);
    snprintf(label, sizeof label, "%s (%s)", what, prec == GS_FP32 ? "fp32" : "fp64");
    assert_same_bits(&g, &g2, m, label);
    assert_rows(g.y, c.y, sx, 1.0, m, label);
    assert_rows(g.yx, c.y, sx, 1.0, m, label);
    const double bw = dot_bound(c.y, w, sx, m);
    ck_assert_msg(fabs(g.dot_w - c.dot_w) <= bw, "%s: y.w gpu %.17g cpu %.17g (bound %.3g)", label,
                  g.dot_w, c.dot_w, bw);
    if (m == n) {
        const double bx = dot_bound(c.y, x, sx, m);
        ck_assert_msg(fabs(g.dot_x - c.dot_x) <= bx, "%s: y.x gpu %.17g cpu %.17g (bound %.3g)",
                      label, g.dot_x, c.dot_x, bx);
    }
    /* a = 1.5, b = 1.25: bound 1.5 (row's) + 4 eps (|a s| + |b y0|) */
    for (int64_t i = 0; i < m; i++) sa[i] = 1.5 * sx[i] + 2.0 * (fabs(1.5 * c.y[i]) + fabs(1.25 * y0[i]));
    assert_rows(g.ya, c.ya, sa, 1.0, m, label);
    assert_rows(g.yb, c.yb, sx, 2.0, m, label); /* a = -2 */
    products_free(&c), products_free(&g), products_free(&g2);
    free(x), free(w), free(y0), free(sx), free(sa);
    cpu->ops->mat_destroy(cpu, ca);
    gpu->ops->mat_destroy(gpu, ga);
    no_error(gpu);
}

/* ------------------------------------------------------------------- tests */

/* The rule: each shape gets CSR-split with the rows it must find long,
 * the statistics it read are the host's, and the products are the CPU's;
 * the same shapes forced to the merge path, and to plain CSR. */
START_TEST(test_shapes_rule_split_merge)
{
    engines_up();
    tu_rng r = tu_rng_seed(2401);
    const int32_t sizes[N_SHAPES] = {10001, 20000, 50000, 9000, 4096};
    for (int kind = 0; kind < N_SHAPES; kind++) {
        gs_csr A = shape(&r, kind, sizes[kind]);
        int64_t longest = 0;
        const int64_t t = rule_min(&A), n_long = rows_at_least(&A, t, &longest);
        ck_assert_msg(n_long > 0, "%s: the shape has no long row (threshold %lld)",
                      shape_names[kind], (long long)t);
        if (kind == AT_THRESHOLDS) { /* 128, 129, 255..257, 511..513, 255, 257, n */
            ck_assert_int_eq(t, LONG_ROW_MIN);
            ck_assert_int_eq(n_long, 11);
        }
        for (int p = 0; p < 2; p++) {
            const gs_precision prec = p ? GS_FP32 : GS_FP64;
            char what[128];
            snprintf(what, sizeof what, "%s, n=%d, rule", shape_names[kind], (int)A.n_rows);
            check_as(&A, prec, -1, "CSR-split", what, &r, NULL);
#if GS_HAVE_CUDA
            gs_mat *ga = NULL;
            ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, prec, &ga), GS_OK);
            const gs_cuda_row_stats st = gs_cuda_mat_row_stats(ga);
            ck_assert_int_eq(st.long_min, t);
            ck_assert_int_eq(st.n_long, n_long);
            ck_assert_int_eq(st.max_row, longest);
            gpu->ops->mat_destroy(gpu, ga);
            snprintf(what, sizeof what, "%s, n=%d, merge", shape_names[kind], (int)A.n_rows);
            check_as(&A, prec, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", what, &r, NULL);
            snprintf(what, sizeof what, "%s, n=%d, forced CSR", shape_names[kind], (int)A.n_rows);
            check_as(&A, prec, GS_CUDA_LAYOUT_CSR, "CSR", what, &r, NULL);
#endif
        }
        gs_csr_free(&A);
    }
    engines_down();
}
END_TEST

/* The ratio side of the threshold: rows of 10 (16 x mean above 128) with
 * two rows of L - 1, L, L + 1 entries, L the threshold the rule computes
 * for this very matrix (a fixed point: L moves the mean): exactly the rows
 * of L and L + 1 are long. */
START_TEST(test_ratio_threshold)
{
    engines_up();
    tu_rng r = tu_rng_seed(2407);
    const int32_t n = 10000;
    int32_t L = LONG_ROW_MIN;
    for (int it = 0; it < 20; it++) { /* nnz = 10 (n - 3) + 3 L */
        const int32_t t = (int32_t)ceil(LONG_ROW_RATIO * (10.0 * (n - 3) + 3.0 * L) / n);
        if (t == L) break;
        L = t;
    }
    ck_assert_int_gt(L, LONG_ROW_MIN);
    int32_t *len = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) len[i] = 10;
    len[100] = L - 1, len[5000] = L, len[n - 1] = L + 1;
    gs_csr A = rows_of(&r, n, n, len);
    free(len);
    ck_assert_int_eq(rule_min(&A), L);
    check_as(&A, GS_FP64, -1, "CSR-split", "ratio threshold", &r, NULL);
    check_as(&A, GS_FP32, -1, "CSR-split", "ratio threshold", &r, NULL);
#if GS_HAVE_CUDA
    gs_mat *ga = NULL;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
    const gs_cuda_row_stats st = gs_cuda_mat_row_stats(ga);
    ck_assert_int_eq(st.long_min, L);
    ck_assert_int_eq(st.n_long, 2);
    ck_assert_int_eq(st.long_nnz, 2 * L + 1);
    ck_assert_int_eq(st.max_row, L + 1);
    gpu->ops->mat_destroy(gpu, ga);
#endif
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* The switches: GS_SPMV_LONG=off gives the layouts before (CSR), merge
 * the merge path, split the default; GS_SPMV_LONG_MIN moves the threshold
 * (down to rows of 2: nearly every row split, most of one chunk). */
START_TEST(test_switches)
{
    engines_up();
    tu_rng r = tu_rng_seed(2402);
    gs_csr A = shape(&r, POWER_LAW, 30000);
    const struct { int mode; long long min; const char *want; } cases[] = {
        {GS_DEBUG_LONG_OFF, 0, "CSR"},         {GS_DEBUG_LONG_MERGE, 0, "CSR-merge"},
        {GS_DEBUG_LONG_SPLIT, 0, "CSR-split"}, {0, 2, "CSR-split"},
        {0, 40, "CSR-split"},                  {GS_DEBUG_LONG_MERGE, 40, "CSR-merge"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        set_switches(cases[k].mode, cases[k].min);
        char what[96];
        snprintf(what, sizeof what, "power law, switch %d, min %lld", cases[k].mode, cases[k].min);
        check_as(&A, k % 2 ? GS_FP32 : GS_FP64, -1, cases[k].want, what, &r, NULL);
#if GS_HAVE_CUDA
        if (cases[k].min > 0 && cases[k].mode != GS_DEBUG_LONG_MERGE) {
            gs_mat *ga = NULL;
            int64_t longest = 0;
            ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
            const gs_cuda_row_stats st = gs_cuda_mat_row_stats(ga);
            ck_assert_int_eq(st.long_min, cases[k].min);
            ck_assert_int_eq(st.n_long, rows_at_least(&A, cases[k].min, &longest));
            gpu->ops->mat_destroy(gpu, ga);
        }
#endif
    }
    set_switches(0, 0);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* --spmv-long as users run it: the option reaches the engine's long-row
 * rule (layout_A in the report's extras: the hub row of hub:60, coupled
 * to every 20th of 3600 nodes, about 180 entries against a mean of 5, is
 * long: at least max(128, 16 x mean), and far too wide for SELL-32) and
 * wins over GS_SPMV_LONG; auto is split. */
START_TEST(test_spmv_long_option)
{
    static const struct { const char *env, *args, *want; } cases[] = {
        {"", "", "layout_A=CSR-split"},
        {"", "--spmv-long split", "layout_A=CSR-split"},
        {"", "--spmv-long merge", "layout_A=CSR-merge"},
        {"", "--spmv-long off", "layout_A=CSR;"},
        {"GS_SPMV_LONG=merge", "--spmv-long split", "layout_A=CSR-split"},
        {"GS_SPMV_LONG=merge", "", "layout_A=CSR-merge"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256], extra[512];
        snprintf(args, sizeof args, "-e cuda --generate hub:60 -p jacobi --maxit 3 --format csv "
                 "%s", cases[i].args);
        tu_cmd_out o = tu_run_env(cases[i].env, args);
        ck_assert_msg(o.code == 0 || o.code == 2, "exit %d:\n%s", o.code, o.text);
        ck_assert(tu_csv_field(o.text, 0, "precond_extra", extra, sizeof extra));
        strcat(extra, ";");
        ck_assert_msg(strstr(extra, cases[i].want), "case %zu: %s", i, extra);
        free(o.text);
    }
}
END_TEST

/* Matrices the rule leaves alone keep their layout (poisson: SELL-32, no
 * statistics read); the merge path forced on them, on a zero matrix, on
 * rectangular ones and on rows of exactly a tile is still the CPU's. */
START_TEST(test_merge_everywhere)
{
    engines_up();
    tu_rng r = tu_rng_seed(2403);
    char layout[24];
    gs_csr P = tu_generated("poisson3d:24");
    check_as(&P, GS_FP64, -1, NULL, "poisson3d:24 rule", &r, layout);
    ck_assert_msg(strncmp(layout, "SELL", 4) == 0, "poisson3d:24 got %s", layout);
    check_as(&P, GS_FP64, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", "poisson3d:24 merge", &r, NULL);
    check_as(&P, GS_FP32, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", "poisson3d:24 merge", &r, NULL);
    /* forced split without a long row: plain vector-CSR */
    check_as(&P, GS_FP64, GS_CUDA_LAYOUT_CSR_SPLIT, "CSR", "poisson3d:24 split", &r, NULL);
    gs_csr_free(&P);
    gs_error err = {0};
    gs_csr Z = {0};
    ck_assert_int_eq(gs_csr_alloc(700, 700, 0, 1, &Z, &err), GS_OK);
    check_as(&Z, GS_FP64, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", "zero matrix merge", &r, NULL);
    check_as(&Z, GS_FP64, -1, NULL, "zero matrix rule", &r, NULL);
    gs_csr_free(&Z);
    const int32_t tile_rows[] = {MERGE_TILE - 1, MERGE_TILE, MERGE_TILE + 1, 1, 0};
    for (int k = 0; k < 5; k++) { /* every row the same length, around a tile */
        int32_t *len = malloc(3000 * sizeof(int32_t));
        for (int i = 0; i < 3000; i++) len[i] = tile_rows[k];
        gs_csr T = rows_of(&r, 3000, 3000, len);
        char what[64];
        snprintf(what, sizeof what, "rows of %d, merge", tile_rows[k]);
        check_as(&T, GS_FP64, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", what, &r, NULL);
        free(len);
        gs_csr_free(&T);
    }
    int32_t *len = malloc(40000 * sizeof(int32_t));
    for (int i = 0; i < 40000; i++) len[i] = i % 997 == 0 ? 2500 : i % 5;
    gs_csr W = rows_of(&r, 300, 40000, len); /* wide: 300 rows, some of 2500 */
    check_as(&W, GS_FP64, -1, NULL, "wide 300x40000 rule", &r, NULL);
    check_as(&W, GS_FP32, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", "wide 300x40000 merge", &r, NULL);
    gs_csr_free(&W);
    gs_csr T = rows_of(&r, 40000, 3000, len); /* tall: rows of 2500 every 997 */
    check_as(&T, GS_FP64, -1, "CSR-split", "tall 40000x3000 rule", &r, NULL);
    check_as(&T, GS_FP64, GS_CUDA_LAYOUT_CSR_MERGE, "CSR-merge", "tall 40000x3000 merge", &r, NULL);
    gs_csr_free(&T);
    free(len);
    engines_down();
}
END_TEST

/* bloweybq itself (one dense row of 10,001 entries): CSR-split, the CPU's
 * product; with mat_create_system the layout comes at setup_done, the
 * same bits as mat_create's. */
START_TEST(test_bloweybq_and_system_matrix)
{
    engines_up();
    tu_rng r = tu_rng_seed(2404);
    gs_csr A = {0};
    if (!tu_real_matrix("bloweybq", &A)) {
        A = shape(&r, ONE_DENSE, 10001);
    } else {
        int64_t longest = 0;
        rows_at_least(&A, 1, &longest);
        ck_assert_int_eq(longest, 10001);
    }
    check_as(&A, GS_FP64, -1, "CSR-split", "bloweybq", &r, NULL);
    check_as(&A, GS_FP32, -1, "CSR-split", "bloweybq", &r, NULL);
    gs_mat *plain = NULL, *sys = NULL;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &plain), GS_OK);
    ck_assert_int_eq(gpu->ops->mat_create_system(gpu, &A, &sys), GS_OK);
    int laid = -1;
    ck_assert_int_eq(gpu->ops->setup_done(gpu, sys, &laid), GS_OK);
    ck_assert_int_eq(laid, 1);
#if GS_HAVE_CUDA
    ck_assert_str_eq(gs_cuda_mat_layout(sys), "CSR-split");
#endif
    double *x = randoms(&r, A.n_cols), *w = randoms(&r, A.n_rows), *y0 = randoms(&r, A.n_rows);
    products a = run_products(gpu, plain, A.n_rows, A.n_cols, x, w, y0);
    products b = run_products(gpu, sys, A.n_rows, A.n_cols, x, w, y0);
    assert_same_bits(&a, &b, A.n_rows, "bloweybq: system matrix against mat_create");
    products_free(&a), products_free(&b);
    free(x), free(w), free(y0);
    gpu->ops->mat_destroy(gpu, plain);
    gpu->ops->mat_destroy(gpu, sys);
    no_error(gpu);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* A product captured once and replayed (the tickets of the split rows are
 * reset by each product's last warp; the merge path's carries rewritten):
 * every replay gives the direct call's bits, for both layouts. */
START_TEST(test_capture_replay)
{
    engines_up();
    tu_rng r = tu_rng_seed(2405);
    gs_csr A = shape(&r, FEW_LONG, 20000);
    const int64_t n = A.n_rows;
    for (int mode = 0; mode < 2; mode++) {
        set_switches(mode ? GS_DEBUG_LONG_MERGE : 0, 0);
        gs_mat *ga = NULL;
        ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &ga), GS_OK);
        double *x = randoms(&r, n), *w = randoms(&r, n);
        gs_vec *gx = vec_from(gpu, x, n), *gw = vec_from(gpu, w, n), *gy = vec_nan(gpu, n);
        ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, gw, 5), GS_OK);
        const double direct = slot_get(gpu, 5);
        double *yd = vec_get(gpu, gy, n);
        void *seq = NULL;
        ck_assert_int_eq(gpu->ops->capture_begin(gpu), GS_OK);
        ck_assert_int_eq(gpu->ops->spmv_dot(gpu, ga, gx, gy, gw, 6), GS_OK);
        ck_assert_int_eq(gpu->ops->capture_end(gpu, &seq), GS_OK);
        for (int rep = 0; rep < 3; rep++) {
            ck_assert_int_eq(gpu->ops->set(gpu, gy, NAN), GS_OK);
            ck_assert_int_eq(gpu->ops->replay(gpu, seq), GS_OK);
            const double again = slot_get(gpu, 6);
            double *yr = vec_get(gpu, gy, n);
            ck_assert_msg(memcmp(&again, &direct, sizeof again) == 0,
                          "replay %d (mode %d): dot %.17g, direct %.17g", rep, mode, again, direct);
            ck_assert_msg(memcmp(yr, yd, (size_t)n * sizeof(double)) == 0,
                          "replay %d (mode %d): y differs", rep, mode);
            free(yr);
        }
        gpu->ops->seq_destroy(gpu, seq);
        no_error(gpu);
        free(x), free(w), free(yd);
        gpu->ops->vec_destroy(gpu, gx), gpu->ops->vec_destroy(gpu, gw), gpu->ops->vec_destroy(gpu, gy);
        gpu->ops->mat_destroy(gpu, ga);
    }
    set_switches(0, 0);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* A preconditioner's products go through the same engine matrices: on an
 * SPD arrow matrix (tridiagonal plus a dense first row and column), A and
 * ssor-ai's F^T (whose first row is dense) have a long row; the GPU apply
 * z = F^T (F r) against the CPU's, within what two SpMVs summed in other
 * orders can differ by: 2 K u (|F^T| |F| |r|)_i, K = 2 + 2 x the longest
 * row of F or F^T (Higham 3.5), F from the CPU setup. */
START_TEST(test_preconditioner_apply)
{
    engines_up();
    const int32_t n = 6000;
    int32_t *ri = malloc((size_t)5 * n * sizeof(int32_t)), *ci = malloc((size_t)5 * n * sizeof(int32_t));
    double *vi = malloc((size_t)5 * n * sizeof(double));
    int64_t q = 0;
    for (int32_t i = 0; i < n; i++) {
        ri[q] = i, ci[q] = i, vi[q++] = i == 0 ? 0.1 * (n - 1) + 1.0 : 3.1;
        if (i > 1) ri[q] = i, ci[q] = i - 1, vi[q++] = -1.0;
        if (i > 0 && i + 1 < n) ri[q] = i, ci[q] = i + 1, vi[q++] = -1.0;
        if (i > 0) {
            ri[q] = i, ci[q] = 0, vi[q++] = 0.1;
            ri[q] = 0, ci[q] = i, vi[q++] = 0.1;
        }
    }
    gs_csr A = tu_from_triplets(n, n, q, ri, ci, vi);
    free(ri), free(ci), free(vi);
    const char *kv[] = {"omega", "1", "ssor-terms", "1", NULL};
    gs_params p = tu_params(kv);
    gs_mat *ca = NULL, *ga = NULL;
    gs_pc *pc_c = NULL, *pc_g = NULL;
    gs_error err = {0};
    ck_assert_int_eq(cpu->ops->mat_create(cpu, &A, GS_FP64, &ca), GS_OK);
    ck_assert_int_eq(gpu->ops->mat_create_system(gpu, &A, &ga), GS_OK);
    ck_assert_msg(gs_pc_create(gs_pc_find("ssor-ai"), cpu, &p, &A, ca, &pc_c, &err) == GS_OK, "%s", err.msg);
    ck_assert_msg(gs_pc_create(gs_pc_find("ssor-ai"), gpu, &p, &A, ga, &pc_g, &err) == GS_OK, "%s", err.msg);
#if GS_HAVE_CUDA
    ck_assert_str_eq(gs_cuda_mat_layout(ga), "CSR-split");
#endif
    gs_csr F = {0};
    tu_pc_saved_matrix(pc_c, "F", &F);
    tu_rng r = tu_rng_seed(2408);
    double *rhs = randoms(&r, n), *t = calloc((size_t)n, sizeof(double)), *w = calloc((size_t)n, sizeof(double));
    gs_vec *vr_c = vec_from(cpu, rhs, n), *vz_c = vec_nan(cpu, n);
    gs_vec *vr_g = vec_from(gpu, rhs, n), *vz_g = vec_nan(gpu, n);
    ck_assert_int_eq(gs_pc_apply_dot(pc_c, vr_c, vz_c, GS_SLOT_NONE), GS_OK);
    ck_assert_msg(gs_pc_apply_dot(pc_g, vr_g, vz_g, GS_SLOT_NONE) == GS_OK, "%s", gpu->err.msg);
    double *zc = vec_get(cpu, vz_c, n), *zg = vec_get(gpu, vz_g, n);
    int64_t longest = 0, col_count_max = 0;
    int64_t *col_count = calloc((size_t)n, sizeof(int64_t));
    for (int32_t i = 0; i < n; i++) {
        if (F.row_ptr[i + 1] - F.row_ptr[i] > longest) longest = F.row_ptr[i + 1] - F.row_ptr[i];
        for (int64_t k = F.row_ptr[i]; k < F.row_ptr[i + 1]; k++) {
            t[i] += fabs(F.val[k] * rhs[F.col[k]]); /* t = |F| |r| */
            col_count[F.col[k]]++;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        if (col_count[i] > col_count_max) col_count_max = col_count[i];
        for (int64_t k = F.row_ptr[i]; k < F.row_ptr[i + 1]; k++) w[F.col[k]] += fabs(F.val[k]) * t[i];
    }
    ck_assert_int_ge(col_count_max, n - 1); /* F^T's first row is dense */
    const double K = 2.0 + 2.0 * (double)(longest > col_count_max ? longest : col_count_max);
    for (int32_t i = 0; i < n; i++)
        ck_assert_msg(fabs(zg[i] - zc[i]) <= 2 * K * (EPS / 2) * w[i],
                      "ssor-ai apply on the arrow: z_%d = %.17g, want %.17g", i + 1, zg[i], zc[i]);
    free(rhs), free(t), free(w), free(zc), free(zg), free(col_count);
    cpu->ops->vec_destroy(cpu, vr_c), cpu->ops->vec_destroy(cpu, vz_c);
    gpu->ops->vec_destroy(gpu, vr_g), gpu->ops->vec_destroy(gpu, vz_g);
    gs_pc_destroy(pc_c), gs_pc_destroy(pc_g);
    cpu->ops->mat_destroy(cpu, ca), gpu->ops->mat_destroy(gpu, ga);
    gs_csr_free(&F), gs_csr_free(&A);
    no_error(gpu);
    engines_down();
}
END_TEST

/* Memory: every array of the long-row layouts is returned on destroy. */
START_TEST(test_accounting)
{
    engines_up();
    tu_rng r = tu_rng_seed(2406);
    gs_csr A = shape(&r, EMPTY_AND_LONG, 9000);
    for (int mode = 0; mode < 3; mode++) {
        set_switches(mode == 0 ? 0 : mode == 1 ? GS_DEBUG_LONG_MERGE : GS_DEBUG_LONG_OFF, 0);
        const size_t base = gpu->device_bytes_now;
        gs_mat *ga = NULL;
        ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP32, &ga), GS_OK);
        ck_assert_uint_gt(gpu->device_bytes_now, base);
        gpu->ops->mat_destroy(gpu, ga);
        no_error(gpu);
        ck_assert_uint_eq(gpu->device_bytes_now, base);
    }
    set_switches(0, 0);
    gs_csr_free(&A);
    engines_down();
}
END_TEST

/* Without a device the engine refuses cleanly (and the suite skips). */
START_TEST(test_device_or_clean_refusal)
{
    if (gs_cuda_device_count() > 0) return;
    gs_engine *e = (gs_engine *)1;
    gs_error err = {0};
    ck_assert_int_eq(gs_engine_cuda_create(&e, &err), GS_ERR_UNSUPPORTED);
    ck_assert_ptr_null(e);
}
END_TEST

static Suite *cuda_spmv_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_spmv");
    TCase *tc = tcase_create("cuda_spmv");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_device_or_clean_refusal);
    if (have_gpu) {
        tcase_add_test(tc, test_shapes_rule_split_merge);
        tcase_add_test(tc, test_ratio_threshold);
        tcase_add_test(tc, test_switches);
        tcase_add_test(tc, test_spmv_long_option);
        tcase_add_test(tc, test_merge_everywhere);
        tcase_add_test(tc, test_bloweybq_and_system_matrix);
        tcase_add_test(tc, test_capture_replay);
        tcase_add_test(tc, test_preconditioner_apply);
        tcase_add_test(tc, test_accounting);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it: run
 * the tests in this process. */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    if (!have_gpu) printf("check_cuda_spmv: skipped: no CUDA device\n");
    SRunner *sr = srunner_create(cuda_spmv_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
