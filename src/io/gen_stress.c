/* gen_stress.c - the stress set of built-in problems (--generate elast3d, bordered, hub,
 * powerlaw, chain): 3-dof blocks, dense borders, a hub node, power-law degrees, a long
 * chain. Chung and Lu, "Connected components in random graphs with given expected degree
 * sequences", Ann. Combin. 6 (2002) for powerlaw; splitmix64 (Steele, Lea and Flood,
 * OOPSLA 2014) for every pseudo-random choice. docs/problems.md: each matrix and why it
 * is nonsingular. */
#include "gen.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fixed seeds, one per pseudo-random choice: the same matrix on every run. */
#define SEED_BORDER_COLUMNS 0x62D1A7C3E5F09B41ull /* h1 of bordered */
#define SEED_BORDER_ROWS 0x1F83D9ABFB41BD6Bull    /* h2 of bordered */
#define SEED_POWERLAW_EDGES 0x5BE0CD19137E2179ull
#define SEED_POWERLAW_LABELS 0x9B05688C2B3E6C1Full
#define SEED_CHAIN_REACH 0x510E527FADE682D1ull

#define BORDER_WIDTH 8         /* dense rows and columns of bordered */
#define HUB_STRIDE 20          /* the hub couples to nodes 0, 20, 40, ... */
#define POWERLAW_EXPONENT 0.55 /* w_i = c (i+1)^(-0.55) */
#define POWERLAW_MEAN_DEGREE 10.0
#define CHAIN_REACH 64         /* long coupling of row i: column i - 2 - (h(i) mod 64) */
#define CHAIN_COUPLING (-0.5)
#define CHAIN_SHIFT 0.05       /* d_i = sum_j |a_ij| + 0.05 */
#define PARALLEL_MIN_ROWS 4096

/* Draw k of the splitmix64 stream seeded with seed: a pure function of (seed, k), so
 * draws may be taken in any order, by any thread, with the same result. */
static uint64_t draw(uint64_t seed, uint64_t k)
{
    uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double draw_unit(uint64_t seed, uint64_t k) /* uniform in [0, 1), 53 bits */
{
    return (double)(draw(seed, k) >> 11) * 0x1.0p-53;
}

/* ---- coordinate triplets, for the kinds whose rows are not known in order ---- */

typedef struct stress_coo {
    int64_t count;
    int32_t *row, *col;
    double *val;
} stress_coo;

static int coo_alloc(int64_t capacity, stress_coo *t, gs_error *err)
{
    memset(t, 0, sizeof *t);
    t->row = gs_malloc((size_t)capacity * sizeof *t->row, "generated triplet rows", err);
    t->col = gs_malloc((size_t)capacity * sizeof *t->col, "generated triplet columns", err);
    t->val = gs_malloc((size_t)capacity * sizeof *t->val, "generated triplet values", err);
    return t->row && t->col && t->val ? GS_OK : GS_ERR_NOMEM;
}

static void coo_free(stress_coo *t)
{
    free(t->row);
    free(t->col);
    free(t->val);
    memset(t, 0, sizeof *t);
}

static void coo_set(stress_coo *t, int64_t at, int64_t i, int64_t j, double v)
{
    t->row[at] = (int32_t)i;
    t->col[at] = (int32_t)j;
    t->val[at] = v;
}

/* a_ii = sum_{j != i} |a_ij| + shift on every row (the diagonal is stored). */
static void set_dominant_diagonal(gs_csr *A, double shift)
{
#pragma omp parallel for schedule(dynamic, 1024) if (A->n_rows > PARALLEL_MIN_ROWS)
    for (int32_t i = 0; i < A->n_rows; i++) {
        double off = 0.0;
        int64_t diagonal = -1;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            if (A->col[p] == i) diagonal = p;
            else off += fabs(A->val[p]);
        }
        A->val[diagonal] = off + shift;
    }
}

/* ---- elast3d: A = K27 (x) C ---- */

static const double elast3d_block[3][3] = {{4, 1, 1}, {1, 4, 1}, {1, 1, 4}};

/* Row 3p + c of K (x) C is row p of K with each k_pq spread over columns 3q, 3q+1, 3q+2
 * as k_pq C(c, 0..2): columns stay sorted, the diagonal k_pp C(c, c) stays stored. */
static int kron_block3(const gs_csr *K, const double C[3][3], gs_csr *out, gs_error *err)
{
    gs_csr A = {0};
    int status = GS_OK;
    const int64_t n0 = K->n_rows;
    GS_TRY(gs_csr_alloc((int32_t)(3 * n0), (int32_t)(3 * n0), 9 * K->nnz, 1, &A, err));
#pragma omp parallel for schedule(static) if (n0 > PARALLEL_MIN_ROWS)
    for (int64_t p = 0; p < n0; p++) {
        const int64_t len = K->row_ptr[p + 1] - K->row_ptr[p];
        for (int c = 0; c < 3; c++) {
            int64_t at = 9 * K->row_ptr[p] + 3 * c * len;
            A.row_ptr[3 * p + c + 1] = at + 3 * len;
            for (int64_t e = K->row_ptr[p]; e < K->row_ptr[p + 1]; e++)
                for (int d = 0; d < 3; d++, at++) {
                    A.col[at] = (int32_t)(3 * (int64_t)K->col[e] + d);
                    A.val[at] = K->val[e] * C[c][d];     /* a(3p+c, 3q+d) = k_pq C_cd */
                }
        }
    }
cleanup:
    *out = A;
    return status;
}

static int build_elast3d(const int64_t dims[3], gs_csr *A, gs_error *err)
{
    gs_csr K = {0};
    double w[3][3][3];
    int status = GS_OK;
    GS_TRY(gs_generate_stencil_of("poisson3d27", w, err));
    GS_TRY(gs_generate_stencil(w, dims, &K, err));
    GS_TRY(kron_block3(&K, elast3d_block, A, err));
cleanup:
    gs_csr_free(&K);
    return status;
}

/* ---- bordered: [K E; F D] ---- */

/* a(i, n0+b) = -(1 + h1(i,b) mod 4) / (4 n0), a(n0+b, i) the same with h2. */
static double border_value(uint64_t seed, int64_t i, int b, int64_t n0)
{
    return -(double)(1 + draw(seed, (uint64_t)(i * BORDER_WIDTH + b)) % 4) / (4.0 * (double)n0);
}

/* D = d I: d = 1 keeps the Schur complement d I - F K^-1 E nonsingular once n0 >= 4
 * (||F K^-1 E|| <= 0.8); d = 2 below that (||F K^-1 E|| <= 1.07). docs/problems.md. */
static double border_diagonal(int64_t n0) { return n0 >= 4 ? 1.0 : 2.0; }

/* Grid row i of A: row i of K, then the 8 border columns n0 .. n0+7. */
static void bordered_grid_row(const gs_csr *K, int64_t i, int64_t at, gs_csr *A)
{
    const int64_t n0 = K->n_rows;
    for (int64_t e = K->row_ptr[i]; e < K->row_ptr[i + 1]; e++, at++) {
        A->col[at] = K->col[e];
        A->val[at] = K->val[e];
    }
    for (int b = 0; b < BORDER_WIDTH; b++, at++) {
        A->col[at] = (int32_t)(n0 + b);
        A->val[at] = border_value(SEED_BORDER_COLUMNS, i, b, n0);
    }
}

static int bordered_from(const gs_csr *K, gs_csr *out, gs_error *err)
{
    gs_csr A = {0};
    int status = GS_OK;
    const int64_t n0 = K->n_rows, n = n0 + BORDER_WIDTH;
    const int64_t border0 = K->nnz + BORDER_WIDTH * n0; /* first entry of row n0 */
    GS_TRY(gs_csr_alloc((int32_t)n, (int32_t)n, border0 + BORDER_WIDTH * (n0 + 1), 1, &A, err));
    for (int64_t i = 0; i <= n0; i++) A.row_ptr[i] = K->row_ptr[i] + BORDER_WIDTH * i;
    for (int b = 1; b <= BORDER_WIDTH; b++) A.row_ptr[n0 + b] = border0 + b * (n0 + 1);
#pragma omp parallel for schedule(static) if (n0 > PARALLEL_MIN_ROWS)
    for (int64_t i = 0; i < n0; i++) {
        bordered_grid_row(K, i, A.row_ptr[i], &A);
        for (int b = 0; b < BORDER_WIDTH; b++) {
            A.col[A.row_ptr[n0 + b] + i] = (int32_t)i;
            A.val[A.row_ptr[n0 + b] + i] = border_value(SEED_BORDER_ROWS, i, b, n0);
        }
    }
    for (int b = 0; b < BORDER_WIDTH; b++) {          /* the border block: d I */
        A.col[A.row_ptr[n0 + b] + n0] = (int32_t)(n0 + b);
        A.val[A.row_ptr[n0 + b] + n0] = border_diagonal(n0);
    }
cleanup:
    *out = A;
    return status;
}

static int build_bordered(const int64_t dims[3], gs_csr *A, gs_error *err)
{
    gs_csr K = {0};
    double w[3][3][3];
    int status = GS_OK;
    GS_TRY(gs_generate_stencil_of("convdiff3d", w, err));
    GS_TRY(gs_generate_stencil(w, dims, &K, err));
    GS_TRY(bordered_from(&K, A, err));
cleanup:
    gs_csr_free(&K);
    return status;
}

/* ---- hub: the 5-point Laplacian plus one node coupled to every 20th ---- */

static int64_t hub_count(int64_t n0) { return (n0 + HUB_STRIDE - 1) / HUB_STRIDE; }

/* Grid row i of A: row i of L, diagonal + 1 and column n0 (last) where i mod 20 = 0. */
static void hub_grid_row(const gs_csr *L, int64_t i, int64_t at, gs_csr *A)
{
    const int coupled = i % HUB_STRIDE == 0;
    for (int64_t e = L->row_ptr[i]; e < L->row_ptr[i + 1]; e++, at++) {
        A->col[at] = L->col[e];
        A->val[at] = L->val[e] + (coupled && L->col[e] == i ? 1.0 : 0.0);
    }
    if (coupled) {
        A->col[at] = L->n_rows;
        A->val[at] = -1.0;
    }
}

static int hub_from(const gs_csr *L, gs_csr *out, gs_error *err)
{
    gs_csr A = {0};
    int status = GS_OK;
    const int64_t n0 = L->n_rows, hubs = hub_count(n0);
    GS_TRY(gs_csr_alloc((int32_t)(n0 + 1), (int32_t)(n0 + 1), L->nnz + 2 * hubs + 1, 1, &A,
                        err));
    for (int64_t i = 0; i <= n0; i++) A.row_ptr[i] = L->row_ptr[i] + hub_count(i);
    A.row_ptr[n0 + 1] = A.nnz;
#pragma omp parallel for schedule(static) if (n0 > PARALLEL_MIN_ROWS)
    for (int64_t i = 0; i < n0; i++) hub_grid_row(L, i, A.row_ptr[i], &A);
    int64_t at = A.row_ptr[n0];
    for (int64_t i = 0; i < n0; i += HUB_STRIDE, at++) {
        A.col[at] = (int32_t)i;
        A.val[at] = -1.0;
    }
    A.col[at] = (int32_t)n0;
    A.val[at] = (double)hubs + 1.0;                      /* degree + 1 */
cleanup:
    *out = A;
    return status;
}

static int build_hub(const int64_t dims[3], gs_csr *A, gs_error *err)
{
    static const double laplacian5[3][3][3] = {
        {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
        {{0, -1, 0}, {-1, 4, -1}, {0, -1, 0}},
        {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}};
    gs_csr L = {0};
    int status = GS_OK;
    GS_TRY(gs_generate_stencil(laplacian5, dims, &L, err));
    GS_TRY(hub_from(&L, A, err));
cleanup:
    gs_csr_free(&L);
    return status;
}

/* ---- powerlaw: Chung-Lu graph Laplacian + I ---- */

/* cum[i] = sum_{j <= i} (j+1)^(-0.55): the expected degrees w_j = c (j+1)^(-0.55) up to
 * the factor c, which the endpoint probabilities w_j / sum(w) do not need. */
static int powerlaw_cumulative(int64_t n, double **cum, gs_error *err)
{
    double *c = gs_malloc((size_t)n * sizeof *c, "power-law cumulative weights", err);
    if (!c) return GS_ERR_NOMEM;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) c[i] = sum += pow((double)(i + 1), -POWERLAW_EXPONENT);
    *cum = c;
    return GS_OK;
}

/* The node whose weight interval holds u sum(w): the first i with cum[i] > u cum[n-1]. */
static int64_t powerlaw_endpoint(const double *cum, int64_t n, double u)
{
    const double target = u * cum[n - 1];
    int64_t lo = 0, hi = n - 1;                  /* hi: u rounding to cum[n-1] stays in range */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > target) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* A fixed pseudo-random permutation of 0 .. n-1 (Fisher-Yates), so the hubs (low i) are
 * spread over the rows. */
static int powerlaw_labels(int64_t n, int32_t **label, gs_error *err)
{
    int32_t *p = gs_malloc((size_t)n * sizeof *p, "power-law node labels", err);
    if (!p) return GS_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
    for (int64_t k = n - 1; k > 0; k--) {
        const int64_t j = (int64_t)(draw(SEED_POWERLAW_LABELS, (uint64_t)k) % (uint64_t)(k + 1));
        const int32_t t = p[k];
        p[k] = p[j];
        p[j] = t;
    }
    *label = p;
    return GS_OK;
}

/* Triplets: the n diagonals (0 for now), then for each of the m edges (i, j) the pair
 * a_ij = a_ji = -1 (summed where edges repeat); a self loop becomes two zeros on the
 * diagonal, i.e. it is dropped. Edge e draws its endpoints from draws 2e and 2e + 1. */
static void powerlaw_triplets(const double *cum, const int32_t *label, int64_t n, int64_t m,
                              stress_coo *t)
{
    for (int64_t i = 0; i < n; i++) coo_set(t, i, i, i, 0.0);
#pragma omp parallel for schedule(static) if (m > PARALLEL_MIN_ROWS)
    for (int64_t e = 0; e < m; e++) {
        const int64_t a = label[powerlaw_endpoint(cum, n, draw_unit(SEED_POWERLAW_EDGES,
                                                                    (uint64_t)(2 * e)))];
        const int64_t b = label[powerlaw_endpoint(cum, n, draw_unit(SEED_POWERLAW_EDGES,
                                                                    (uint64_t)(2 * e + 1)))];
        const double v = a == b ? 0.0 : -1.0;
        coo_set(t, n + 2 * e, a, b, v);
        coo_set(t, n + 2 * e + 1, b, a, v);
    }
    t->count = n + 2 * m;
}

static int build_powerlaw(const int64_t dims[3], gs_csr *A, gs_error *err)
{
    const int64_t n = dims[0];
    const int64_t m = llround(POWERLAW_MEAN_DEGREE * (double)n / 2.0); /* round(sum(w) / 2) */
    double *cum = NULL;
    int32_t *label = NULL;
    stress_coo t = {0};
    int status = GS_OK;
    GS_TRY(powerlaw_cumulative(n, &cum, err));
    GS_TRY(powerlaw_labels(n, &label, err));
    GS_TRY(coo_alloc(n + 2 * m, &t, err));
    powerlaw_triplets(cum, label, n, m, &t);
    GS_TRY(gs_csr_from_coo((int32_t)n, (int32_t)n, t.count, t.row, t.col, t.val, A, err));
    set_dominant_diagonal(A, 1.0);                   /* L + I */
cleanup:
    free(cum);
    free(label);
    coo_free(&t);
    return status;
}

/* ---- chain: tridiag(-1, d, -1) plus one symmetric coupling back up to 65 rows ---- */

/* Triplets (at most 5 per row): the diagonal (0 for now), a(i, i-1) = a(i-1, i) = -1,
 * and a(i, j) = a(j, i) = -0.5 for j = i - 2 - (h(i) mod 64) >= 0. A pair {i, j} comes
 * from its larger index only, so no two couplings coincide. */
static void chain_triplets(int64_t n, stress_coo *t)
{
    for (int64_t i = 0; i < n; i++) {
        coo_set(t, t->count++, i, i, 0.0);
        if (i >= 1) {
            coo_set(t, t->count++, i, i - 1, -1.0);
            coo_set(t, t->count++, i - 1, i, -1.0);
        }
        const int64_t j = i - 2 - (int64_t)(draw(SEED_CHAIN_REACH, (uint64_t)i) % CHAIN_REACH);
        if (i >= 2 && j >= 0) {
            coo_set(t, t->count++, i, j, CHAIN_COUPLING);
            coo_set(t, t->count++, j, i, CHAIN_COUPLING);
        }
    }
}

static int build_chain(const int64_t dims[3], gs_csr *A, gs_error *err)
{
    const int64_t n = dims[0];
    stress_coo t = {0};
    int status = GS_OK;
    GS_TRY(coo_alloc(5 * n, &t, err));
    chain_triplets(n, &t);
    GS_TRY(gs_csr_from_coo((int32_t)n, (int32_t)n, t.count, t.row, t.col, t.val, A, err));
    set_dominant_diagonal(A, CHAIN_SHIFT);
cleanup:
    coo_free(&t);
    return status;
}

/* ---- the kinds, their sizes and names ---- */

typedef struct stress_kind {
    const char *name;
    int rank;      /* size forms: 1 "N"; 2 "N" or "NXxNY"; 3 "N" or "NXxNYxNZ" */
    int per_point; /* unknowns per grid point */
    int extra;     /* unknowns beyond the grid's (border, hub) */
    int (*build)(const int64_t dims[3], gs_csr *A, gs_error *err);
} stress_kind;

static const stress_kind stress_kinds[] = {
    {"elast3d", 3, 3, 0, build_elast3d},  {"bordered", 3, 1, BORDER_WIDTH, build_bordered},
    {"hub", 2, 1, 1, build_hub},          {"powerlaw", 1, 1, 0, build_powerlaw},
    {"chain", 1, 1, 0, build_chain},
};
#define STRESS_N_KINDS ((int)(sizeof stress_kinds / sizeof stress_kinds[0]))

static const stress_kind *stress_find(const char *spec)
{
    const char *colon = spec ? strchr(spec, ':') : NULL;
    const size_t len = colon ? (size_t)(colon - spec) : spec ? strlen(spec) : 0;
    for (int t = 0; t < STRESS_N_KINDS; t++)
        if (strlen(stress_kinds[t].name) == len && strncmp(spec, stress_kinds[t].name, len) == 0)
            return &stress_kinds[t];
    return NULL;
}

int gs_stress_is_spec(const char *spec) { return stress_find(spec) != NULL; }

/* A positive decimal (digits only, at most 2^31 - 1) at *s; *s moved past it. */
static int parse_size(const char **s, int64_t *value)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (*p - '0')) > INT32_MAX) return 0;
    *value = v;
    *s = p;
    return v > 0;
}

/* "N" (rank 1), "N" or "NXxNY" (rank 2); dims padded with 1. */
static int parse_flat_dims(const char *spec, const stress_kind *kind, const char *sizes,
                           int64_t dims[3], gs_error *err)
{
    const char *p = sizes;
    int ok = parse_size(&p, &dims[0]);
    dims[1] = dims[2] = 1;
    if (ok && kind->rank == 2) {
        dims[1] = dims[0];
        if (*p == 'x') {
            p++;
            ok = parse_size(&p, &dims[1]);
        }
    }
    if (ok && *p == '\0') return GS_OK;
    if (kind->rank == 1)
        return gs_error_set(err, GS_ERR_USAGE, "--generate '%s': size must be one positive "
                            "integer N below 2^31 (e.g. %s:20000)", spec, kind->name);
    return gs_error_set(err, GS_ERR_USAGE, "--generate '%s': size must be N or NXxNY with "
                        "positive integers below 2^31 (e.g. %s:450 or %s:600x300)", spec,
                        kind->name, kind->name);
}

/* Sizes of spec (kind found) into dims; n = per_point NX NY NZ + extra must be a row count. */
static int stress_parse(const char *spec, const stress_kind *kind, int64_t dims[3],
                        gs_error *err)
{
    const char *colon = strchr(spec, ':'), *sizes = colon ? colon + 1 : "";
    int status = kind->rank == 3 ? gs_generate_dims(spec, kind->name, sizes, dims, err)
                                 : parse_flat_dims(spec, kind, sizes, dims, err);
    if (status != GS_OK) return status;
    const int64_t points = dims[0] * dims[1] * dims[2]; /* < 2^62: rank 3 is capped at 2^31 */
    if (points > (INT32_MAX - kind->extra) / kind->per_point)
        return gs_error_set(err, GS_ERR_USAGE, "--generate '%s': %lld unknowns exceed the %d "
                            "rows a matrix may have", spec,
                            (long long)(kind->per_point * points + kind->extra), INT32_MAX);
    return GS_OK;
}

static void stress_name(const stress_kind *kind, const int64_t dims[3], char *name, size_t len)
{
    if (!name || len == 0) return;
    if (kind->rank == 1)
        snprintf(name, len, "%s:%lld", kind->name, (long long)dims[0]);
    else if (kind->rank == 2)
        snprintf(name, len, "%s:%lldx%lld", kind->name, (long long)dims[0], (long long)dims[1]);
    else
        snprintf(name, len, "%s:%lldx%lldx%lld", kind->name, (long long)dims[0],
                 (long long)dims[1], (long long)dims[2]);
}

/* The kind of spec and its sizes; GS_ERR_USAGE naming spec. */
static int stress_spec(const char *spec, const stress_kind **kind, int64_t dims[3],
                       gs_error *err)
{
    *kind = stress_find(spec);
    if (!*kind)
        return gs_error_set(err, GS_ERR_USAGE, "--generate '%s': not a stress problem",
                            spec ? spec : "");
    return stress_parse(spec, *kind, dims, err);
}

int gs_stress_check(const char *spec, gs_error *err)
{
    const stress_kind *kind;
    int64_t dims[3];
    return stress_spec(spec, &kind, dims, err);
}

int gs_stress_generate(const char *spec, gs_csr *A, char *name, size_t name_len, gs_error *err)
{
    const stress_kind *kind = NULL;
    int64_t dims[3];
    int status = GS_OK;
    memset(A, 0, sizeof *A);
    GS_TRY(stress_spec(spec, &kind, dims, err));
    GS_TRY(kind->build(dims, A, err));
    stress_name(kind, dims, name, name_len);
cleanup:
    if (status != GS_OK) gs_csr_free(A);
    return status;
}
