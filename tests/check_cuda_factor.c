/* check_cuda_factor.c - the device factorisations scheduled by L's levels, each scheme forced
 * through the engine's debug.factor_scheme (one synchronisation-free launch, or a launch a
 * level): mic's MIC(0) (cuda/precond/mic_factor.cu) and isai's exact ILU(0)
 * (cuda/precond/isai_ilu0.cu), against the CPU references (src/precond/pc_mic.c,
 * src/sparse/ilu0.c) and against each other, on the matrices that break level scheduling and
 * per-pair work: a hub row (2D Laplacian with one node coupled to every 5th, 10th, ... node;
 * the hub last, first and in the middle, its degree on both sides of every length threshold
 * of the kernels: 16 (merge), 32 (a lane an entry), 64 (long column), 256 (the CPU's long
 * pivot)), a long chain (tridiagonal plus random couplings up to 66 rows back: thousands of
 * levels of one row), a 3D grid (wide levels), and bloweybq (arrowhead: a dense first row
 * and column). Without a CUDA device the suite says "skipped" and passes. The device heap is
 * filled with NaN before every setup, so an entry a kernel forgets to write shows.
 *
 * Tolerances (u = 2^-53):
 * - sync-free against levels: the same device code per column (mic_column) and per row
 *   (ilu0_row), explicit roundings (no fused multiply-add the compiler could place
 *   differently in the two kernels): equal to the bit, and every value finite.
 * - patterns, dropped-fill counts, shifts and tries: integer work or decisions, equal.
 * - MIC against the reference: the same sums of products l_jm d_m l_km in another order
 *   (the reference subtracts one term at a time, and for a pivot row of more than 256
 *   entries sums a row's fill at once, as the device sums a long column's). One entry's
 *   rounding differs by at most 2 K u (|a| + sum |terms|) for K terms, inherited by later
 *   columns through their multipliers; we allow 1e-9 of the column's scale (the reasoning of
 *   check_cuda_mic.c: an amplification of 1e4 over 2 K u for K < 500, small on these
 *   diagonally dominant M-matrices).
 * - ILU(0) against the reference: each entry sees the reference's operations in the
 *   reference's order, each correctly rounded, on both sides (the host builds with
 *   -ffp-contract=off): equal to the bit on x86-64; we allow 64 u of the row's largest entry
 *   (as check_cuda_isai.c) so that another host's rounding of the same operations passes. */
#include <math.h>
#include <string.h>

#include "debug.h"
#include "engine.h"
#include "ilu0.h"
#include "mmio.h"
#include "precond.h"
#include "testutil.h"

#define U64 (DBL_EPSILON / 2)

static gs_engine *gpu;

/* Fill about 256 MiB of the device heap with NaN and give it back. */
static void poison_device_heap(void)
{
    gs_vec *v[8] = {0};
    for (int i = 0; i < 8; i++) {
        if (gpu->ops->vec_create(gpu, (int64_t)4 << 20, &v[i]) != GS_OK) break;
        ck_assert_int_eq(gpu->ops->set(gpu, v[i], NAN), GS_OK);
    }
    ck_assert_int_eq(gpu->ops->sync(gpu), GS_OK);
    for (int i = 0; i < 8; i++) gpu->ops->vec_destroy(gpu, v[i]);
    gs_error_clear(&gpu->err);
}

/* The level analyses forced (GS_DEBUG_PLAN_HOST / _DEVICE) in the runs that follow, 0: the
 * rule (gs_dtri_analyse_rows). */
static int analysis_forced;

/* The factorisation scheme forced on the GPU engine (GS_DEBUG_SCHEME_*, 0: the rule), with
 * analysis_forced. */
static void force_scheme(int scheme)
{
    gs_debug d;
    memset(&d, 0, sizeof d);
    d.factor_scheme = scheme;
    d.tri_analysis = analysis_forced;
    gs_engine_cuda_set_debug(gpu, &d);
}

static const char *scheme_name(int scheme)
{
    return scheme == GS_DEBUG_SCHEME_SYNCFREE ? "syncfree"
           : scheme == GS_DEBUG_SCHEME_HOST   ? "host"
                                              : "levels";
}

/* ------------------------------------------------------------ matrices */

/* Triplets gathered into a CSR (duplicates summed by tu_from_triplets' rule). */
typedef struct triplets {
    int64_t count, cap;
    int32_t *r, *c;
    double *v;
} triplets;

static void add(triplets *t, int32_t i, int32_t j, double v)
{
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->r = realloc(t->r, (size_t)t->cap * sizeof *t->r);
        t->c = realloc(t->c, (size_t)t->cap * sizeof *t->c);
        t->v = realloc(t->v, (size_t)t->cap * sizeof *t->v);
        ck_assert(t->r && t->c && t->v);
    }
    t->r[t->count] = i, t->c[t->count] = j, t->v[t->count++] = v;
}

static gs_csr triplets_csr(triplets *t, int32_t n)
{
    gs_csr A = tu_from_triplets(n, n, t->count, t->r, t->c, t->v);
    free(t->r), free(t->c), free(t->v);
    memset(t, 0, sizeof *t);
    return A;
}

/* The 5-point Laplacian of an nx x nx grid and one hub node coupled (-1) to grid nodes 0,
 * stride, 2 stride, ...: the hub is row nx^2 (where = 'l'ast), row 0 ('f'irst) or the middle
 * row ('m'). Diagonals: 4 (+1 for a node tied to the hub), the hub's its degree + 1: a
 * symmetric, strictly diagonally dominant M-matrix (MIC exists without a shift). */
static gs_csr hub_matrix(int32_t nx, int32_t stride, char where)
{
    const int32_t n = nx * nx + 1;
    const int32_t hub = where == 'l' ? n - 1 : where == 'f' ? 0 : n / 2;
    triplets t = {0};
    int32_t degree = 0;
    for (int32_t g = 0; g < nx * nx; g++) {
        const int32_t x = g % nx, y = g / nx;
        const int32_t i = g + (g >= hub && where != 'l' ? 1 : 0);
#define ROW(h) ((h) + ((h) >= hub && where != 'l' ? 1 : 0))
        double d = 4.0;
        if (g % stride == 0) add(&t, i, hub, -1.0), add(&t, hub, i, -1.0), d += 1.0, degree++;
        add(&t, i, i, d);
        if (x > 0) add(&t, i, ROW(g - 1), -1.0);
        if (x < nx - 1) add(&t, i, ROW(g + 1), -1.0);
        if (y > 0) add(&t, i, ROW(g - nx), -1.0);
        if (y < nx - 1) add(&t, i, ROW(g + nx), -1.0);
#undef ROW
    }
    add(&t, hub, hub, degree + 1.0);
    return triplets_csr(&t, n);
}

/* A long chain: tridiagonal (-1) plus, for about one row in ten, a coupling (-0.5) back 2 to
 * 66 rows, mirrored; diagonal = sum |a_ij| + 0.05: symmetric, diagonally dominant, about n
 * levels of one row. */
static gs_csr chain_matrix(int32_t n, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    triplets t = {0};
    double *d = calloc((size_t)n, sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (int32_t i = 1; i < n; i++) {
        add(&t, i, i - 1, -1.0), add(&t, i - 1, i, -1.0), d[i] += 1.0, d[i - 1] += 1.0;
        const int32_t back = 2 + (int32_t)(tu_next(&r) % 65);
        if (tu_uniform(&r) < 0.1 && i - back >= 0) {
            add(&t, i, i - back, -0.5), add(&t, i - back, i, -0.5);
            d[i] += 0.5, d[i - back] += 0.5;
        }
    }
    for (int32_t i = 0; i < n; i++) add(&t, i, i, d[i] + 0.05);
    free(d);
    return triplets_csr(&t, n);
}

/* A's pattern as a symmetric M-matrix: off-diagonal -|a_ij| - 0.01 (stored zeros become
 * entries), diagonal the row's sum + 1 (bloweybq itself is indefinite: MIC needs SPD). */
static gs_csr m_matrix_of(const gs_csr *A)
{
    gs_csr M = {0};
    ck_assert_int_eq(gs_csr_copy(A, &M, NULL), GS_OK);
    for (int32_t i = 0; i < M.n_rows; i++) {
        double sum = 0.0;
        int64_t dpos = -1;
        for (int64_t p = M.row_ptr[i]; p < M.row_ptr[i + 1]; p++) {
            if (M.col[p] == i) {
                dpos = p;
                continue;
            }
            M.val[p] = -fabs(A->val[p]) - 0.01;
            sum += -M.val[p];
        }
        ck_assert(dpos >= 0);
        M.val[dpos] = sum + 1.0;
    }
    /* symmetric values: -|a_ij| - 0.01 is symmetric when A's values are */
    ck_assert(gs_csr_is_symmetric(&M, 1e-12));
    return M;
}

/* ----------------------------------------------------------------- mic */

typedef struct mic_out {
    gs_csr L;
    double *d;
    double dropped, shift, tries;
    double levels_L, levels_LT;                                 /* GPU runs */
    char scheme[GS_KV_STR_LEN], analysis_L[GS_KV_STR_LEN], analysis_LT[GS_KV_STR_LEN];
} mic_out;

static void copy_str(const gs_pc *pc, const char *key, char *out, size_t size)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    ck_assert_msg(kv != NULL, "report item %s missing", key);
    snprintf(out, size, "%s", kv->str);
}

static double extra_num(const gs_pc *pc, const char *key)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    ck_assert_msg(kv != NULL, "report item %s missing", key);
    return kv->num;
}

/* mic on the GPU with the scheme forced (scheme > 0) or by the rule (0), or on a CPU
 * engine (scheme < 0). */
static mic_out mic_on(const gs_csr *A, const char *const *kv, int scheme, const char *what)
{
    gs_params p = tu_params(kv);
    mic_out o;
    memset(&o, 0, sizeof o);
    gs_engine *e = gpu, *cpu = NULL;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_error err = {0};
    if (scheme < 0) {
        ck_assert_int_eq(gs_engine_cpu_create(&cpu, &err), GS_OK);
        e = cpu;
    } else {
        force_scheme(scheme);
        poison_device_heap();
    }
    ck_assert_msg(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK, "%s", e->err.msg);
    ck_assert_msg(gs_pc_create(gs_pc_find("mic"), e, &p, A, Ae, &pc, &err) == GS_OK,
                  "%s (%s): %s", what, scheme < 0 ? "cpu" : scheme_name(scheme), err.msg);
    ck_assert_msg(tu_pc_extra(pc, "setup") == NULL, "%s: the setup ran on the host", what);
    char prefix[512], path[600];
    int64_t n = 0;
    tu_tmpname(prefix, sizeof prefix, "");
    ck_assert_msg(pc->save(pc, prefix, &err) == GS_OK, "save: %s", err.msg);
    snprintf(path, sizeof path, "%s_L.mtx", prefix);
    ck_assert_msg(gs_mm_read_csr(path, &o.L, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    snprintf(path, sizeof path, "%s_D.mtx", prefix);
    ck_assert_msg(gs_mm_read_vector(path, &o.d, &n, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    remove(prefix);
    ck_assert_int_eq(n, A->n_rows);
    o.dropped = extra_num(pc, "dropped_fill");
    o.shift = extra_num(pc, "shift");
    o.tries = extra_num(pc, "shift_tries");
    if (scheme >= 0) {
        copy_str(pc, "factor_scheme", o.scheme, sizeof o.scheme);
        copy_str(pc, "levels_L_analysis", o.analysis_L, sizeof o.analysis_L);
        copy_str(pc, "levels_LT_analysis", o.analysis_LT, sizeof o.analysis_LT);
        o.levels_L = extra_num(pc, "levels_L");
        o.levels_LT = extra_num(pc, "levels_LT");
    }
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    if (cpu) gs_engine_destroy(cpu);
    else gs_error_clear(&gpu->err), force_scheme(0);
    return o;
}

static void mic_out_free(mic_out *o)
{
    gs_csr_free(&o->L);
    free(o->d);
}

/* Device factors g against the reference's c: pattern exact, values within 1e-9 of the
 * column's scale (the top); D within 1e-9 of itself. */
static void mic_close(const mic_out *g, const mic_out *c, const char *what)
{
    const int32_t n = c->L.n_rows;
    gs_csr gt = {0}, ct = {0}; /* columns of L as rows */
    ck_assert_msg(g->L.nnz == c->L.nnz, "%s: nnz(L) %lld, reference %lld", what,
                  (long long)g->L.nnz, (long long)c->L.nnz);
    ck_assert_int_eq(gs_csr_transpose(&g->L, &gt, NULL), GS_OK);
    ck_assert_int_eq(gs_csr_transpose(&c->L, &ct, NULL), GS_OK);
    double worst = 0.0;
    for (int32_t k = 0; k < n; k++) {
        ck_assert_msg(fabs(g->d[k] - c->d[k]) <= 1e-9 * fabs(c->d[k]),
                      "%s: d_%d = %.17g, reference %.17g", what, k + 1, g->d[k], c->d[k]);
        double scale = 0.0;
        for (int64_t q = ct.row_ptr[k]; q < ct.row_ptr[k + 1]; q++)
            scale = fmax(scale, fabs(ct.val[q]));
        ck_assert(gt.row_ptr[k + 1] == ct.row_ptr[k + 1]);
        for (int64_t q = ct.row_ptr[k]; q < ct.row_ptr[k + 1]; q++) {
            ck_assert(gt.col[q] == ct.col[q]);
            const double diff = fabs(gt.val[q] - ct.val[q]);
            worst = fmax(worst, diff / scale);
            ck_assert_msg(diff <= 1e-9 * scale, "%s: l_%d,%d = %.17g, reference %.17g", what,
                          ct.col[q] + 1, k + 1, gt.val[q], ct.val[q]);
        }
    }
    printf("check_cuda_factor: mic %s: max |l_gpu - l_cpu| / column scale = %.3g\n", what, worst);
    gs_csr_free(&gt), gs_csr_free(&ct);
}

/* Two device runs equal to the bit (and finite: a poisoned entry is NaN in both). */
static void same_bits(const double *a, const double *b, int64_t count, const char *what)
{
    for (int64_t i = 0; i < count; i++) {
        ck_assert_msg(isfinite(a[i]), "%s: value %lld is %g", what, (long long)i, a[i]);
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof(double)) == 0,
                      "%s: value %lld: %.17g and %.17g", what, (long long)i, a[i], b[i]);
    }
}

/* mic on A: each scheme against the reference, and the two schemes against each other. */
static void mic_check(const gs_csr *A, const char *const *kv, const char *what)
{
    char label[200];
    mic_out c = mic_on(A, kv, -1, what);
    mic_out g[2];
    const int schemes[2] = {GS_DEBUG_SCHEME_LEVELS, GS_DEBUG_SCHEME_SYNCFREE};
    for (int s = 0; s < 2; s++) {
        g[s] = mic_on(A, kv, schemes[s], what);
        snprintf(label, sizeof label, "%s, %s", what, scheme_name(schemes[s]));
        ck_assert_msg(strcmp(g[s].scheme, scheme_name(schemes[s])) == 0,
                      "%s: factor_scheme %s", label, g[s].scheme);
        ck_assert_msg(g[s].shift == c.shift && g[s].tries == c.tries,
                      "%s: shift %g (%g tries), reference %g (%g)", label, g[s].shift,
                      g[s].tries, c.shift, c.tries);
        ck_assert_msg(g[s].dropped == c.dropped, "%s: dropped fill %.0f, reference %.0f", label,
                      g[s].dropped, c.dropped);
        mic_close(&g[s], &c, label);
    }
    snprintf(label, sizeof label, "mic %s: syncfree against levels, L", what);
    ck_assert(g[0].L.nnz == g[1].L.nnz);
    same_bits(g[0].L.val, g[1].L.val, g[0].L.nnz, label);
    snprintf(label, sizeof label, "mic %s: syncfree against levels, D", what);
    same_bits(g[0].d, g[1].d, A->n_rows, label);
    /* the host scheme runs the reference's own code on the same A: its factors */
    mic_out h = mic_on(A, kv, GS_DEBUG_SCHEME_HOST, what);
    snprintf(label, sizeof label, "mic %s: host against the reference", what);
    ck_assert_msg(strcmp(h.scheme, "host") == 0, "%s: factor_scheme %s", label, h.scheme);
    ck_assert_msg(h.shift == c.shift && h.tries == c.tries && h.dropped == c.dropped, "%s", label);
    ck_assert(h.L.nnz == c.L.nnz);
    same_bits(h.L.val, c.L.val, c.L.nnz, label);
    same_bits(h.d, c.d, A->n_rows, label);
    mic_out_free(&c), mic_out_free(&g[0]), mic_out_free(&g[1]), mic_out_free(&h);
}

/* ---------------------------------------------------------------- ILU(0) */

typedef struct ilu_out {
    gs_csr L, U;
    double levels;
    char scheme[GS_KV_STR_LEN], analysis[GS_KV_STR_LEN];
} ilu_out;

/* isai's exact ILU(0) of A itself (--scale no, --trisolve exact: the factors, no ISAI) on
 * the GPU with the scheme forced. */
static ilu_out ilu_on_gpu(const gs_csr *A, int scheme, const char *what)
{
    const char *kv[] = {"scale", "no", "trisolve", "exact", NULL};
    gs_params p = tu_params(kv);
    ilu_out o;
    memset(&o, 0, sizeof o);
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_error err = {0};
    force_scheme(scheme);
    poison_device_heap();
    ck_assert_msg(gpu->ops->mat_create(gpu, A, GS_FP64, &Ae) == GS_OK, "%s", gpu->err.msg);
    ck_assert_msg(gs_pc_create(gs_pc_find("isai"), gpu, &p, A, Ae, &pc, &err) == GS_OK,
                  "%s (%s): %s", what, scheme_name(scheme), err.msg);
    tu_pc_saved_matrix(pc, "L", &o.L);
    tu_pc_saved_matrix(pc, "U", &o.U);
    copy_str(pc, "ilu_scheme", o.scheme, sizeof o.scheme);
    copy_str(pc, "ilu_levels_analysis", o.analysis, sizeof o.analysis);
    o.levels = extra_num(pc, "ilu_levels");
    gs_pc_destroy(pc);
    gpu->ops->mat_destroy(gpu, Ae);
    gs_error_clear(&gpu->err);
    force_scheme(0);
    return o;
}

/* got against want: the same pattern, values within 64 u of the row's largest (the top). */
static void ilu_close(const gs_csr *want, const gs_csr *got, const char *what)
{
    ck_assert_msg(got->nnz == want->nnz, "%s: nnz %lld, reference %lld", what,
                  (long long)got->nnz, (long long)want->nnz);
    double worst = 0.0;
    for (int32_t i = 0; i < want->n_rows; i++) {
        ck_assert(got->row_ptr[i + 1] == want->row_ptr[i + 1]);
        double scale = 0.0;
        for (int64_t p = want->row_ptr[i]; p < want->row_ptr[i + 1]; p++)
            scale = fmax(scale, fabs(want->val[p]));
        for (int64_t p = want->row_ptr[i]; p < want->row_ptr[i + 1]; p++) {
            ck_assert(got->col[p] == want->col[p]);
            const double diff = fabs(got->val[p] - want->val[p]);
            worst = fmax(worst, scale > 0 ? diff / scale : diff);
            ck_assert_msg(diff <= 64 * U64 * scale, "%s: (%d, %d) = %.17g, reference %.17g",
                          what, i + 1, want->col[p] + 1, got->val[p], want->val[p]);
        }
    }
    printf("check_cuda_factor: ilu0 %s: max |gpu - cpu| / row scale = %.3g\n", what, worst);
}

static void ilu_check(const gs_csr *A, const char *what)
{
    char label[200];
    gs_csr L = {0}, U = {0};
    gs_error err = {0};
    ck_assert_msg(gs_ilu0(A, &L, &U, &err) == GS_OK, "%s: reference: %s", what, err.msg);
    ilu_out g[2];
    const int schemes[2] = {GS_DEBUG_SCHEME_LEVELS, GS_DEBUG_SCHEME_SYNCFREE};
    for (int s = 0; s < 2; s++) {
        g[s] = ilu_on_gpu(A, schemes[s], what);
        snprintf(label, sizeof label, "%s, %s", what, scheme_name(schemes[s]));
        ck_assert_msg(strcmp(g[s].scheme, scheme_name(schemes[s])) == 0,
                      "%s: ilu_scheme %s", label, g[s].scheme);
        snprintf(label, sizeof label, "%s, %s: L", what, scheme_name(schemes[s]));
        ilu_close(&L, &g[s].L, label);
        snprintf(label, sizeof label, "%s, %s: U", what, scheme_name(schemes[s]));
        ilu_close(&U, &g[s].U, label);
    }
    snprintf(label, sizeof label, "ilu0 %s: syncfree against levels, L", what);
    same_bits(g[0].L.val, g[1].L.val, g[0].L.nnz, label);
    snprintf(label, sizeof label, "ilu0 %s: syncfree against levels, U", what);
    same_bits(g[0].U.val, g[1].U.val, g[0].U.nnz, label);
    /* the host scheme: the reference's IKJ code on A's values (no scaling here): its bits */
    ilu_out h = ilu_on_gpu(A, GS_DEBUG_SCHEME_HOST, what);
    snprintf(label, sizeof label, "ilu0 %s: host against the reference", what);
    ck_assert_msg(strcmp(h.scheme, "host") == 0, "%s: ilu_scheme %s", label, h.scheme);
    ck_assert(h.L.nnz == L.nnz && h.U.nnz == U.nnz);
    same_bits(h.L.val, L.val, L.nnz, label);
    same_bits(h.U.val, U.val, U.nnz, label);
    gs_csr_free(&h.L), gs_csr_free(&h.U);
    for (int s = 0; s < 2; s++) gs_csr_free(&g[s].L), gs_csr_free(&g[s].U);
    gs_csr_free(&L), gs_csr_free(&U);
}

/* ----------------------------------------------------------------- tests */

START_TEST(test_device_or_skip)
{
    if (gs_cuda_device_count() == 0) {
        printf("check_cuda_factor: skipped: no CUDA device\n");
        return;
    }
    ck_assert_ptr_nonnull(gs_pc_find("mic")->setup[GS_ENGINE_CUDA]);
    ck_assert_ptr_nonnull(gs_pc_find("isai")->setup[GS_ENGINE_CUDA]);
}
END_TEST

/* The hub last (the case: 899 levels on 450 x 450), first (a dense first row and
 * column, like bloweybq's) and in the middle; degrees 16 (the merge's limit), 31 and 40
 * (either side of a lane an entry, 32), 80 (a long column, over 64) and 720 (over the CPU's
 * long pivot, 256). */
START_TEST(test_hub)
{
    const struct {
        int32_t nx, stride;
    } sizes[] = {{20, 25}, {20, 13}, {20, 10}, {20, 5}, {60, 5}};
    const char where[] = {'l', 'f', 'm'};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int w = 0; w < 3; w++) {
            gs_csr A = hub_matrix(sizes[s].nx, sizes[s].stride, where[w]);
            char what[96];
            snprintf(what, sizeof what, "hub %s, %dx%d grid, every %d", where[w] == 'l' ? "last"
                     : where[w] == 'f' ? "first" : "middle", (int)sizes[s].nx, (int)sizes[s].nx,
                     (int)sizes[s].stride);
            mic_check(&A, NULL, what);
            ilu_check(&A, what);
            gs_csr_free(&A);
        }
    gs_csr A = hub_matrix(60, 5, 'f');
    const char *ic0[] = {"omega", "0", NULL};
    mic_check(&A, ic0, "hub first, 60x60 grid, every 5, IC(0)");
    gs_csr_free(&A);
}
END_TEST

/* Thousands of levels of one row each. */
START_TEST(test_chain)
{
    gs_csr A = chain_matrix(6000, 7);
    mic_check(&A, NULL, "chain 6000");
    ilu_check(&A, "chain 6000");
    gs_csr_free(&A);
}
END_TEST

/* Wide levels (the planes of a 3D grid), and a stencil with longer rows. */
START_TEST(test_grid)
{
    gs_csr A = tu_generated("poisson3d:24");
    mic_check(&A, NULL, "poisson3d:24");
    ilu_check(&A, "poisson3d:24");
    gs_csr_free(&A);
    A = tu_generated("poisson3d27:12");
    mic_check(&A, NULL, "poisson3d27:12");
    ilu_check(&A, "poisson3d27:12");
    gs_csr_free(&A);
}
END_TEST

/* bloweybq (skipped without ../shared/matrices): ILU(0) of the matrix itself, an arrowhead
 * whose L has 10,000 levels of one row; MIC of its pattern made an M-matrix. */
START_TEST(test_bloweybq)
{
    gs_csr A = {0};
    if (!tu_real_matrix("bloweybq", &A)) return;
    ilu_check(&A, "bloweybq");
    gs_csr M = m_matrix_of(&A);
    mic_check(&M, NULL, "bloweybq's pattern, M-matrix");
    gs_csr_free(&M);
    gs_csr_free(&A);
}
END_TEST

/* The rule (no scheme forced) names one of the two, and the factors are those of the
 * scheme it names. */
START_TEST(test_rule)
{
    gs_csr A = chain_matrix(3000, 11);
    mic_out r = mic_on(&A, NULL, 0, "chain 3000, the rule");
    /* a chain's levels are single rows: the host (gs_dfactor_on_host) */
    ck_assert_msg(strcmp(r.scheme, "host") == 0, "factor_scheme %s", r.scheme);
    mic_out f = mic_on(&A, NULL, GS_DEBUG_SCHEME_HOST, "chain 3000, forced");
    same_bits(r.L.val, f.L.val, r.L.nnz, "chain 3000: the rule against its scheme");
    mic_out_free(&r), mic_out_free(&f);
    gs_csr_free(&A);
}
END_TEST

/* The levels of A's lower (upper) triangle, one pass in dependency order: the oracle of the
 * counts reported. */
static double levels_of(const gs_csr *A, int upper)
{
    const int32_t n = A->n_rows;
    int32_t *level = calloc((size_t)n + 1, sizeof *level), top = 0;
    ck_assert_ptr_nonnull(level);
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = upper ? n - 1 - k : k;
        int32_t lv = 0;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const int32_t j = A->col[p];
            if ((upper ? j > i : j < i) && level[j] > lv) lv = level[j];
        }
        level[i] = lv + 1;
        top = lv + 1 > top ? lv + 1 : top;
    }
    free(level);
    return top;
}

/* mic and isai's ILU(0) on A with the level analyses made on the host and on the device
 * (debug.tri_analysis forced), the factorisation scheme by the rule: the same scheme, the
 * level counts of the oracle, the analysis each names, and the same factors to the bit;
 * then by the rule, which must name rule_analysis ("host" or "device") for L. */
static void analysis_check(const gs_csr *A, const char *rule_analysis, const char *what)
{
    static const int forced[2] = {GS_DEBUG_PLAN_DEVICE, GS_DEBUG_PLAN_HOST};
    static const char *names[2] = {"device", "host"};
    const double want_L = levels_of(A, 0), want_LT = levels_of(A, 1);
    char label[200];
    mic_out m[3];
    ilu_out u[3];
    for (int k = 0; k < 3; k++) { /* device, host, the rule */
        analysis_forced = k < 2 ? forced[k] : 0;
        snprintf(label, sizeof label, "%s, analysis %s", what, k < 2 ? names[k] : "by the rule");
        m[k] = mic_on(A, NULL, 0, label);
        u[k] = ilu_on_gpu(A, 0, label);
        const char *want = k < 2 ? names[k] : rule_analysis;
        ck_assert_msg(m[k].levels_L == want_L && m[k].levels_LT == want_LT,
                      "%s: mic levels_L %g levels_LT %g, want %g %g", label, m[k].levels_L,
                      m[k].levels_LT, want_L, want_LT);
        ck_assert_msg(u[k].levels == want_L, "%s: ilu_levels %g, want %g", label, u[k].levels,
                      want_L);
        ck_assert_msg(strcmp(m[k].analysis_L, want) == 0 && strcmp(u[k].analysis, want) == 0,
                      "%s: L analysed on the %s (mic), the %s (isai), want %s", label,
                      m[k].analysis_L, u[k].analysis, want);
        if (k < 2) /* forced: both triangles */
            ck_assert_msg(strcmp(m[k].analysis_LT, want) == 0, "%s: L^T analysed on the %s",
                          label, m[k].analysis_LT);
        ck_assert_msg(strcmp(m[k].scheme, m[0].scheme) == 0 && strcmp(u[k].scheme, u[0].scheme) == 0,
                      "%s: schemes %s / %s, with the device's analysis %s / %s", label,
                      m[k].scheme, u[k].scheme, m[0].scheme, u[0].scheme);
        ck_assert(m[k].L.nnz == m[0].L.nnz && u[k].L.nnz == u[0].L.nnz && u[k].U.nnz == u[0].U.nnz);
        same_bits(m[k].L.val, m[0].L.val, m[0].L.nnz, label);
        same_bits(m[k].d, m[0].d, A->n_rows, label);
        same_bits(u[k].L.val, u[0].L.val, u[0].L.nnz, label);
        same_bits(u[k].U.val, u[0].U.val, u[0].U.nnz, label);
    }
    analysis_forced = 0;
    for (int k = 0; k < 3; k++)
        mic_out_free(&m[k]), gs_csr_free(&u[k].L), gs_csr_free(&u[k].U);
}

/* Both sides of gs_dtri_analyse_rows' rule, through mic and isai: a chain (a level a row,
 * the host's) and a 3D grid too large for the rule's fixed budget (poisson3d:32, its planes
 * wide: the device's), plus the hub (host: under the fixed budget) and bloweybq. */
START_TEST(test_analysis)
{
    gs_csr A = chain_matrix(5000, 3);
    analysis_check(&A, "host", "chain 5000");
    gs_csr_free(&A);
    A = tu_generated("poisson3d:32");
    analysis_check(&A, "device", "poisson3d:32");
    gs_csr_free(&A);
    A = hub_matrix(60, 5, 'l');
    analysis_check(&A, "host", "hub last, 60x60 grid, every 5");
    gs_csr_free(&A);
    gs_csr B = {0};
    if (tu_real_matrix("bloweybq", &B)) {
        gs_csr M = m_matrix_of(&B);
        analysis_check(&M, "host", "bloweybq's pattern, M-matrix");
        gs_csr_free(&M);
        gs_csr_free(&B);
    }
}
END_TEST

/* ------------------------------------------ the CPU reference (no device needed) */

/* The IKJ loop as written before the search of long rows (src/sparse/ilu0.c): row k's upper
 * part always walked, row i scattered. w: A's values in, the factors out. */
static void ikj_walked(const gs_csr *A, double *w)
{
    const int32_t n = A->n_rows;
    int64_t *pos = malloc((size_t)n * sizeof *pos), *diag = malloc((size_t)n * sizeof *diag);
    ck_assert(pos && diag);
    for (int32_t i = 0; i < n; i++) pos[i] = -1, diag[i] = gs_csr_find(A, i, i);
    memcpy(w, A->val, (size_t)A->nnz * sizeof *w);
    for (int32_t i = 0; i < n; i++) {
        const int64_t b = A->row_ptr[i], e = A->row_ptr[i + 1];
        for (int64_t p = b; p < e; p++) pos[A->col[p]] = p;
        for (int64_t p = b; p < e && A->col[p] < i; p++) {
            const int32_t k = A->col[p];
            w[p] /= w[diag[k]];
            for (int64_t q = diag[k] + 1; q < A->row_ptr[k + 1]; q++)
                if (pos[A->col[q]] >= 0) w[pos[A->col[q]]] -= w[p] * w[q];
        }
        for (int64_t p = b; p < e; p++) pos[A->col[p]] = -1;
    }
    free(pos), free(diag);
}

/* gs_ilu0's values against ikj_walked's, to the bit: each entry gets the same updates in the
 * same order whichever side a step walks. */
static void ilu0_same_as_walked(const gs_csr *A, const char *what)
{
    gs_csr L = {0}, U = {0};
    gs_error err = {0};
    double *w = malloc((size_t)A->nnz * sizeof *w);
    ck_assert_ptr_nonnull(w);
    ck_assert_msg(gs_ilu0(A, &L, &U, &err) == GS_OK, "%s: %s", what, err.msg);
    ikj_walked(A, w);
    int64_t nl = 0, nu = 0;
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const double got = A->col[p] < i ? L.val[nl++] : U.val[nu++];
            if (A->col[p] == i) nl++; /* L's stored unit diagonal */
            ck_assert_msg(memcmp(&got, &w[p], sizeof got) == 0,
                          "%s: (%d, %d) = %.17g, walked %.17g", what, i + 1, A->col[p] + 1, got,
                          w[p]);
        }
    free(w);
    gs_csr_free(&L), gs_csr_free(&U);
}

START_TEST(test_ilu0_reference_hub)
{
    const char where[] = {'l', 'f', 'm'};
    for (int w = 0; w < 3; w++) {
        gs_csr A = hub_matrix(60, 5, where[w]);
        ilu0_same_as_walked(&A, where[w] == 'l' ? "hub last" : where[w] == 'f' ? "hub first"
                                                                                 : "hub middle");
        gs_csr_free(&A);
    }
    gs_csr A = {0};
    if (!tu_real_matrix("bloweybq", &A)) return;
    ilu0_same_as_walked(&A, "bloweybq");
    gs_csr_free(&A);
}
END_TEST

static int stop_calls;
static int stop_now(const void *ctx)
{
    stop_calls++;
    return *(const int *)ctx;
}

/* gs_ilu0_bounded asks every GS_ILU0_CHECK_ROWS rows: told to stop, GS_ERR_TIME_LIMIT, no
 * message, no factors; never told, gs_ilu0's factors. */
START_TEST(test_ilu0_bounded)
{
    gs_csr A = chain_matrix(3 * GS_ILU0_CHECK_ROWS + 5, 3), L = {0}, U = {0}, L0 = {0}, U0 = {0};
    gs_error err = {0};
    const int yes = 1, no = 0;
    stop_calls = 0;
    ck_assert_int_eq(gs_ilu0_bounded(&A, stop_now, &yes, &L, &U, &err), GS_ERR_TIME_LIMIT);
    ck_assert_int_eq(stop_calls, 1);
    ck_assert(err.status == GS_OK && L.nnz == 0 && U.nnz == 0);
    stop_calls = 0;
    ck_assert_int_eq(gs_ilu0_bounded(&A, stop_now, &no, &L, &U, &err), GS_OK);
    ck_assert_int_eq(stop_calls, 3);
    ck_assert_int_eq(gs_ilu0(&A, &L0, &U0, &err), GS_OK);
    ck_assert(L.nnz == L0.nnz && U.nnz == U0.nnz);
    ck_assert(memcmp(L.val, L0.val, (size_t)L.nnz * sizeof(double)) == 0);
    ck_assert(memcmp(U.val, U0.val, (size_t)U.nnz * sizeof(double)) == 0);
    gs_csr_free(&L), gs_csr_free(&U), gs_csr_free(&L0), gs_csr_free(&U0), gs_csr_free(&A);
}
END_TEST

static Suite *cuda_factor_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_factor");
    TCase *tc = tcase_create("cuda_factor");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_device_or_skip);
    tcase_add_test(tc, test_ilu0_reference_hub);
    tcase_add_test(tc, test_ilu0_bounded);
    if (have_gpu) {
        tcase_add_test(tc, test_hub);
        tcase_add_test(tc, test_chain);
        tcase_add_test(tc, test_grid);
        tcase_add_test(tc, test_bloweybq);
        tcase_add_test(tc, test_rule);
        tcase_add_test(tc, test_analysis);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it: the tests run in this
 * process. */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    gs_error err = {0};
    if (!have_gpu) printf("check_cuda_factor: skipped: no CUDA device\n");
    else if (gs_engine_cuda_create(&gpu, &err) != GS_OK) {
        printf("check_cuda_factor: CUDA engine: %s\n", err.msg);
        return 1;
    }
    SRunner *sr = srunner_create(cuda_factor_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    gs_engine_destroy(gpu);
    return failed == 0 ? 0 : 1;
}
