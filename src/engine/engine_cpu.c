/* engine_cpu.c - the CPU engine: the engine table (engine.h) in plain C with
 * OpenMP. It is the oracle the CUDA engine is tested against and the
 * baseline of every speedup, so it is plain but not slow: each kernel takes
 * the threads its bytes pay for, a solve keeps its threads waiting actively
 * in one region (cpu_team.h), and dots add fixed blocks in a fixed order, so
 * results do not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cpu_team.h"
#include "engine.h"
#include "small.h"

struct gs_vec {
    int64_t n;
    double *x;
};

struct gs_mat {
    gs_csr A;     /* own copy; fp32 values are rounded on the way in */
    int is_lower; /* trisolve direction, from the pattern */
    int is_upper;
    int triangular; /* square, and lower or upper: trisolve reads A in place (its
                     * rows sorted, no duplicates: the diagonal is a lower row's
                     * last entry or an upper row's first, where present) */
    double *diag_inv; /* triangular with every diagonal entry stored: 1 / t_ii (0 where
                       * t_ii = 0), a product instead of a division a row; else NULL */
};

typedef struct cpu_impl {
    double S[GS_MAX_SCALARS];
    gs_team team;
    double *part;      /* partial sums of the dots, one per block */
    int64_t part_cap;
    int solve_threads; /* the planned solve's (solve_plan) */
    double *floor;     /* triad bytes/s by thread count (0: not measured), max_threads + 1 */
} cpu_impl;

static double *slots(gs_engine *e) { return ((cpu_impl *)e->impl)->S; }

static double coef_eval(gs_engine *e, gs_coef k)
{
    const double *S = slots(e);
    double v = k.c;
    if (k.num0 >= 0) v *= S[k.num0];
    if (k.num1 >= 0) v *= S[k.num1];
    double d = 1.0;
    if (k.den0 >= 0) d *= S[k.den0];
    if (k.den1 >= 0) d *= S[k.den1];
    return d == 0.0 ? 0.0 : v / d;
}

static int bad_slot(gs_engine *e, int slot)
{
    if (slot >= 0 && slot < GS_MAX_SCALARS) return 0;
    gs_error_set(&e->err, GS_ERR_INTERNAL, "cpu engine: scalar slot %d out of range", slot);
    return 1;
}

static int cpu_vec_create(gs_engine *e, int64_t n, gs_vec **out)
{
    gs_vec *v = gs_malloc(sizeof *v, "vector", &e->err);
    if (!v) return GS_ERR_NOMEM;
    v->n = n;
    v->x = gs_malloc((size_t)n * sizeof(double), "vector values", &e->err);
    if (!v->x) {
        free(v);
        return GS_ERR_NOMEM;
    }
    *out = v;
    return GS_OK;
}

static void cpu_vec_destroy(gs_engine *e, gs_vec *v)
{
    (void)e;
    if (!v) return;
    free(v->x);
    free(v);
}

static int cpu_vec_upload(gs_engine *e, gs_vec *dst, const double *src)
{
    (void)e;
    memcpy(dst->x, src, (size_t)dst->n * sizeof(double));
    return GS_OK;
}

static int cpu_vec_download(gs_engine *e, const gs_vec *src, double *dst)
{
    (void)e;
    memcpy(dst, src->x, (size_t)src->n * sizeof(double));
    return GS_OK;
}

/* M->diag_inv where every row of the triangular M->A has its diagonal entry
 * (the last of a lower row, the first of an upper one): n doubles, not a
 * copy of T without its diagonal, so that G and G^T of FSAI (triangular,
 * never solved with) cost their upload no second copy. */
static int triangular_diagonal(gs_mat *M, gs_error *err)
{
    const gs_csr *T = &M->A;
    for (int32_t i = 0; i < T->n_rows; i++) {
        const int64_t lo = T->row_ptr[i], hi = T->row_ptr[i + 1];
        if (hi == lo || T->col[M->is_lower ? hi - 1 : lo] != i) return GS_OK;
    }
    M->diag_inv = gs_malloc((size_t)T->n_rows * sizeof *M->diag_inv + 1,
                            "engine triangular matrix, inverse diagonal", err);
    if (!M->diag_inv) return GS_ERR_NOMEM;
    for (int32_t i = 0; i < T->n_rows; i++) {
        const double d = T->val[M->is_lower ? T->row_ptr[i + 1] - 1 : T->row_ptr[i]];
        M->diag_inv[i] = d == 0.0 ? 0.0 : 1.0 / d;
    }
    return GS_OK;
}

static int cpu_mat_create(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out)
{
    if (!A->val)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cpu engine: matrix without values");
    gs_mat *M = gs_calloc(1, sizeof *M, "engine matrix", &e->err);
    if (!M) return GS_ERR_NOMEM;
    int status = gs_csr_copy(A, &M->A, &e->err);
    if (status != GS_OK) {
        free(M);
        return status;
    }
    const gs_team *team = &((cpu_impl *)e->impl)->team;
    const int threads =
        gs_cpu_threads_for(gs_csr_stream_bytes(A, GS_FP64), team->per_thread, gs_team_cap(team));
    if (prec == GS_FP32) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t k = 0; k < A->nnz; k++) M->A.val[k] = (double)(float)M->A.val[k];
    }
    int above = 0, below = 0; /* entries right / left of the diagonal exist */
#pragma omp parallel for schedule(static) reduction(| : above, below) num_threads(threads)
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            above |= A->col[k] > i;
            below |= A->col[k] < i;
        }
    M->is_lower = !above;
    M->is_upper = !below;
    M->triangular = (M->is_lower || M->is_upper) && A->n_rows == A->n_cols;
    if (M->triangular) status = triangular_diagonal(M, &e->err);
    if (status != GS_OK) {
        gs_csr_free(&M->A);
        free(M);
        return status;
    }
    *out = M;
    return GS_OK;
}

static void cpu_mat_destroy(gs_engine *e, gs_mat *M)
{
    (void)e;
    if (!M) return;
    gs_csr_free(&M->A);
    free(M->diag_inv);
    free(M);
}

/* ---- kernels: fn(args, part, parts) over fixed blocks of GS_CPU_DOT_BLOCK
 * elements (cpu_team.h), so a dot's partial sums, one a block, and their
 * order do not depend on the threads ---- */

typedef struct kargs {
    int64_t n;
    double a, b, c;
    const double *x, *y, *w, *d;
    double *out, *out2; /* the vectors written */
    const double *x2;
    const gs_csr *A;
    const double *const *V; /* mdot, maxpy */
    const double *coef;     /* maxpy's S[slot0 ..] */
    int k;
    double *part; /* one partial sum a block (mdot: k of them, vector-major) */
} kargs;

static int64_t blocks_of(int64_t n) { return (n + GS_CPU_DOT_BLOCK - 1) / GS_CPU_DOT_BLOCK; }

/* Block j's elements [*lo, *hi) of n. */
static void block_range(int64_t j, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = j * GS_CPU_DOT_BLOCK;
    *hi = *lo + GS_CPU_DOT_BLOCK < n ? *lo + GS_CPU_DOT_BLOCK : n;
}

/* x.y over [lo, hi) in four fixed lanes, added in a fixed order. */
static double block_dot(const double *x, const double *y, int64_t lo, int64_t hi)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < hi; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

static double sum_parts(const double *part, int64_t count)
{
    double s = 0;
    for (int64_t j = 0; j < count; j++) s += part[j];
    return s;
}

/* The partial sums' buffer, grown before a kernel needs count of them. */
static int parts_reserve(gs_engine *e, int64_t count)
{
    cpu_impl *c = e->impl;
    if (count <= c->part_cap) return GS_OK;
    double *p = realloc(c->part, (size_t)count * sizeof(double));
    if (!p)
        return gs_error_set(&e->err, GS_ERR_NOMEM, "cpu engine: %lld partial sums",
                            (long long)count);
    c->part = p;
    c->part_cap = count;
    return GS_OK;
}

static void run_kernel(gs_engine *e, double bytes, gs_team_fn fn, kargs *k)
{
    gs_team_run(&((cpu_impl *)e->impl)->team, bytes, fn, k);
}

#define FOR_MY_BLOCKS(k, part, parts)                                                              \
    int64_t b0_, b1_;                                                                              \
    gs_team_split(blocks_of((k)->n), part, parts, &b0_, &b1_);                                     \
    for (int64_t j = b0_; j < b1_; j++)

static void set_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) k->out[i] = k->a;
    }
}

static int cpu_set(gs_engine *e, gs_vec *y, double value)
{
    kargs k = {.n = y->n, .a = value, .out = y->x};
    run_kernel(e, 8.0 * y->n, set_kernel, &k);
    return GS_OK;
}

static void copy_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    int64_t b0, b1;
    gs_team_split(blocks_of(k->n), part, parts, &b0, &b1);
    const int64_t lo = b0 * GS_CPU_DOT_BLOCK, hi = b1 * GS_CPU_DOT_BLOCK < k->n ? b1 * GS_CPU_DOT_BLOCK : k->n;
    if (hi > lo) memcpy(k->out + lo, k->x + lo, (size_t)(hi - lo) * sizeof(double));
}

static int cpu_copy(gs_engine *e, const gs_vec *x, gs_vec *y)
{
    kargs k = {.n = x->n, .x = x->x, .out = y->x};
    run_kernel(e, 16.0 * x->n, copy_kernel, &k);
    return GS_OK;
}

/* y = a x + b y (b == 0: y's old contents, maybe NaN, must not leak in),
 * then, with part, the block's y.w */
static void axpby_block(const kargs *k, int64_t j)
{
    int64_t lo, hi;
    block_range(j, k->n, &lo, &hi);
    const double a = k->a, b = k->b, *x = k->x;
    double *y = k->out;
    if (b == 0.0)
        for (int64_t i = lo; i < hi; i++) y[i] = a * x[i];
    else
        for (int64_t i = lo; i < hi; i++) y[i] = a * x[i] + b * y[i];
    if (k->part) k->part[j] = block_dot(y, k->w, lo, hi);
}

static void axpby_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    FOR_MY_BLOCKS(k, part, parts) axpby_block(k, j);
}

static int cpu_axpby(gs_engine *e, gs_coef ka, const gs_vec *x, gs_coef kb, gs_vec *y)
{
    kargs k = {.n = y->n, .a = coef_eval(e, ka), .b = coef_eval(e, kb), .x = x->x, .out = y->x};
    run_kernel(e, (k.b == 0.0 ? 16.0 : 24.0) * y->n, axpby_kernel, &k);
    return GS_OK;
}

static void axpbypcz_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    const double a = k->a, b = k->b, c = k->c, *x = k->x, *y = k->y;
    double *z = k->out;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        if (c == 0.0)
            for (int64_t i = lo; i < hi; i++) z[i] = a * x[i] + b * y[i];
        else
            for (int64_t i = lo; i < hi; i++) z[i] = a * x[i] + b * y[i] + c * z[i];
    }
}

static int cpu_axpbypcz(gs_engine *e, gs_coef ka, const gs_vec *x, gs_coef kb,
                        const gs_vec *y, gs_coef kc, gs_vec *z)
{
    kargs k = {.n = z->n, .a = coef_eval(e, ka), .b = coef_eval(e, kb), .c = coef_eval(e, kc),
               .x = x->x, .y = y->x, .out = z->x};
    run_kernel(e, 32.0 * z->n, axpbypcz_kernel, &k);
    return GS_OK;
}

static void dot_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        k->part[j] = block_dot(k->x, k->y, lo, hi);
    }
}

/* S[slot] = x.y in the fixed block order */
static int dot_into(gs_engine *e, const double *x, const double *y, int64_t n, int slot)
{
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    int status = parts_reserve(e, blocks_of(n));
    if (status != GS_OK) return status;
    kargs k = {.n = n, .x = x, .y = y, .part = ((cpu_impl *)e->impl)->part};
    run_kernel(e, (x == y ? 8.0 : 16.0) * n, dot_kernel, &k);
    slots(e)[slot] = sum_parts(k.part, blocks_of(n));
    return GS_OK;
}

static int cpu_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot)
{
    return dot_into(e, x->x, y->x, x->n, slot);
}

static int cpu_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                         const gs_vec *w, int slot)
{
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    int status = parts_reserve(e, blocks_of(y->n));
    if (status != GS_OK) return status;
    kargs k = {.n = y->n, .a = coef_eval(e, a), .b = coef_eval(e, b), .x = x->x, .out = y->x,
               .w = w ? w->x : y->x, .part = ((cpu_impl *)e->impl)->part};
    run_kernel(e, (w ? 32.0 : 24.0) * y->n, axpby_kernel, &k);
    slots(e)[slot] = sum_parts(k.part, blocks_of(y->n));
    return GS_OK;
}

static void axpy2_dot_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    const double a = k->a, b = k->b;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        if (a != 0.0)
            for (int64_t i = lo; i < hi; i++) k->out[i] += a * k->x[i];
        if (b != 0.0)
            for (int64_t i = lo; i < hi; i++) k->out2[i] += b * k->x2[i];
        if (k->part) k->part[j] = block_dot(k->out2, k->out2, lo, hi);
    }
}

static int cpu_axpy2_dot(gs_engine *e, gs_coef ka, const gs_vec *x1, gs_vec *y1, gs_coef kb,
                         const gs_vec *x2, gs_vec *y2, int slot)
{
    const int want = slot != GS_SLOT_NONE;
    if (want && bad_slot(e, slot)) return GS_ERR_INTERNAL;
    int status = want ? parts_reserve(e, blocks_of(y2->n)) : GS_OK;
    if (status != GS_OK) return status;
    kargs k = {.n = y2->n, .a = coef_eval(e, ka), .b = coef_eval(e, kb), .x = x1->x,
               .out = y1->x, .x2 = x2->x, .out2 = y2->x,
               .part = want ? ((cpu_impl *)e->impl)->part : NULL};
    run_kernel(e, 48.0 * y2->n, axpy2_dot_kernel, &k);
    if (want) slots(e)[slot] = sum_parts(k.part, blocks_of(y2->n));
    return GS_OK;
}

static void pointwise_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) k->out[i] = k->d[i] * k->x[i];
        if (k->part) k->part[j] = block_dot(k->x, k->out, lo, hi);
    }
}

static int cpu_pointwise_mult_dot(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y,
                                  int slot)
{
    const int want = slot != GS_SLOT_NONE;
    if (want && bad_slot(e, slot)) return GS_ERR_INTERNAL;
    int status = want ? parts_reserve(e, blocks_of(y->n)) : GS_OK;
    if (status != GS_OK) return status;
    kargs k = {.n = y->n, .d = d->x, .x = x->x, .out = y->x,
               .part = want ? ((cpu_impl *)e->impl)->part : NULL};
    run_kernel(e, 24.0 * y->n, pointwise_kernel, &k);
    if (want) slots(e)[slot] = sum_parts(k.part, blocks_of(y->n));
    return GS_OK;
}

static void mdot_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    const int64_t nb = blocks_of(k->n);
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        for (int v = 0; v < k->k; v++) k->part[v * nb + j] = block_dot(k->V[v], k->w, lo, hi);
    }
}

static int cpu_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0)
{
    if (k <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + k - 1)) return GS_ERR_INTERNAL;
    const int64_t nb = blocks_of(w->n);
    const double *stack[64], **data = k <= 64 ? stack : malloc((size_t)k * sizeof *data);
    int status = data ? parts_reserve(e, nb * k) : gs_error_set(&e->err, GS_ERR_NOMEM, "mdot");
    if (status != GS_OK) goto cleanup;
    for (int v = 0; v < k; v++) data[v] = V[v]->x;
    kargs a = {.n = w->n, .V = data, .k = k, .w = w->x, .part = ((cpu_impl *)e->impl)->part};
    run_kernel(e, 8.0 * (k + 1) * w->n, mdot_kernel, &a);
    for (int v = 0; v < k; v++) slots(e)[slot0 + v] = sum_parts(a.part + v * nb, nb);
cleanup:
    if (data != stack) free(data);
    return status;
}

static void maxpy_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    FOR_MY_BLOCKS(k, part, parts)
    {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            double s = 0;
            for (int v = 0; v < k->k; v++) s += k->coef[v] * k->V[v][i];
            k->out[i] += k->a * s;
        }
    }
}

static int cpu_maxpy(gs_engine *e, double c, const gs_vec *const *V, int k, int slot0,
                     gs_vec *w)
{
    if (k <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + k - 1)) return GS_ERR_INTERNAL;
    const double *stack[64], **data = k <= 64 ? stack : malloc((size_t)k * sizeof *data);
    if (!data) return gs_error_set(&e->err, GS_ERR_NOMEM, "maxpy");
    for (int v = 0; v < k; v++) data[v] = V[v]->x;
    kargs a = {.n = w->n, .a = c, .V = data, .k = k, .coef = slots(e) + slot0, .out = w->x};
    run_kernel(e, 8.0 * (k + 2) * w->n, maxpy_kernel, &a);
    if (data != stack) free(data);
    return GS_OK;
}

/* Part p's rows of A: split where row_ptr[r] + 2 r (entries, plus a row's
 * two vector accesses in entry units) crosses p / parts of its total,
 * rounded to a block boundary so a fused dot sums whole blocks. */
static int64_t spmv_row_at(const gs_csr *A, int part, int parts)
{
    const int64_t n = A->n_rows;
    if (part <= 0) return 0;
    if (part >= parts) return n;
    const int64_t total = A->row_ptr[n] + 2 * n, target = total * part / parts;
    int64_t lo = 0, hi = n; /* first r with row_ptr[r] + 2 r >= target */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (A->row_ptr[mid] + 2 * mid < target) lo = mid + 1;
        else hi = mid;
    }
    const int64_t r = (lo + GS_CPU_DOT_BLOCK / 2) / GS_CPU_DOT_BLOCK * GS_CPU_DOT_BLOCK;
    return r < n ? r : n;
}

/* y = a A x + b y over the rows [lo, hi) (b == 0: y not read) */
static void spmv_rows(const kargs *k, int64_t lo, int64_t hi)
{
    const gs_csr *A = k->A;
    const double a = k->a, b = k->b, *x = k->x;
    double *y = k->out;
    for (int64_t i = lo; i < hi; i++) {
        double s = 0;
        for (int64_t q = A->row_ptr[i]; q < A->row_ptr[i + 1]; q++) s += A->val[q] * x[A->col[q]];
        y[i] = b == 0.0 ? a * s : a * s + b * y[i];
    }
}

static void spmv_kernel(void *args, int part, int parts)
{
    const kargs *k = args;
    const int64_t r0 = spmv_row_at(k->A, part, parts), r1 = spmv_row_at(k->A, part + 1, parts);
    if (!k->part) {
        spmv_rows(k, r0, r1);
        return;
    }
    for (int64_t j = r0 / GS_CPU_DOT_BLOCK; j * GS_CPU_DOT_BLOCK < r1; j++) {
        int64_t lo, hi;
        block_range(j, k->n, &lo, &hi);
        spmv_rows(k, lo, hi);
        k->part[j] = block_dot(k->out, k->w, lo, hi);
    }
}

static double spmv_bytes(const gs_csr *A)
{
    return gs_csr_stream_bytes(A, GS_FP64) + 16.0 * A->n_rows;
}

static int cpu_spmv_dot(gs_engine *e, const gs_mat *M, const gs_vec *x, gs_vec *y,
                        const gs_vec *w, int slot)
{
    const int want = slot != GS_SLOT_NONE;
    if (want && bad_slot(e, slot)) return GS_ERR_INTERNAL;
    int status = want ? parts_reserve(e, blocks_of(y->n)) : GS_OK;
    if (status != GS_OK) return status;
    kargs k = {.n = y->n, .a = 1.0, .b = 0.0, .A = &M->A, .x = x->x, .out = y->x,
               .w = w ? w->x : x->x, .part = want ? ((cpu_impl *)e->impl)->part : NULL};
    run_kernel(e, spmv_bytes(&M->A), spmv_kernel, &k);
    if (want) slots(e)[slot] = sum_parts(k.part, blocks_of(y->n));
    return GS_OK;
}

static int cpu_spmv_axpby(gs_engine *e, gs_coef ka, const gs_mat *M, const gs_vec *x,
                          gs_coef kb, gs_vec *y)
{
    kargs k = {.n = y->n, .a = coef_eval(e, ka), .b = coef_eval(e, kb), .A = &M->A, .x = x->x,
               .out = y->x};
    run_kernel(e, spmv_bytes(&M->A) + (k.b == 0.0 ? 0.0 : 8.0 * y->n), spmv_kernel, &k);
    return GS_OK;
}

/* Entries [lo, hi) of row i of the off-diagonal part, summed in four fixed
 * lanes (one chain of dependent additions a row would cost most of a
 * substitution's time). */
static double trisolve_lanes(const double *val, const int32_t *col, const double *x, int64_t lo,
                             int64_t hi)
{
    double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
    int64_t k = lo;
    for (; k + 4 <= hi; k += 4) {
        p0 += val[k] * x[col[k]];
        p1 += val[k + 1] * x[col[k + 1]];
        p2 += val[k + 2] * x[col[k + 2]];
        p3 += val[k + 3] * x[col[k + 3]];
    }
    for (; k < hi; k++) p0 += val[k] * x[col[k]];
    return (p0 + p1) + (p2 + p3);
}

/* Serial substitution: the reference for the GPU's parallel solves. Row i
 * is x_i = (b_i - sum_far - t_near x_near) / t_ii: the entry nearest the
 * diagonal (the last off-diagonal one of a lower row, the first of an upper
 * one: columns are sorted) is the one whose x was computed just before, so
 * it is subtracted last, alone; the lanes over the far entries need only
 * older x and overlap the previous row's work. What waits on the previous
 * row is then one product and one subtraction, and the product by 1 / t_ii
 * (its division does not wait on x) instead of a division of about 13
 * cycles' latency; a unit diagonal skips it. T is read as stored, its
 * diagonal found in place (no copy without it). */
/* cpu_trisolve where every row stores its diagonal (M->diag_inv): the
 * loops without a test of the direction or of the diagonal a row. */
static void trisolve_stored_diagonal(const gs_mat *M, int unit_diagonal, const double *bb,
                                     double *xx)
{
    const gs_csr *T = &M->A;
    const double *val = T->val, *dinv = M->diag_inv;
    const int32_t *col = T->col;
    const int32_t n = T->n_rows;
    if (M->is_lower) {
        for (int32_t i = 0; i < n; i++) {
            const int64_t lo = T->row_ptr[i], hi = T->row_ptr[i + 1] - 1;  /* t_ii at hi */
            double s = bb[i];
            if (hi > lo)
                s = (s - trisolve_lanes(val, col, xx, lo, hi - 1)) - val[hi - 1] * xx[col[hi - 1]];
            xx[i] = unit_diagonal ? s : s * dinv[i];
        }
        return;
    }
    for (int32_t i = n - 1; i >= 0; i--) {
        const int64_t lo = T->row_ptr[i] + 1, hi = T->row_ptr[i + 1];      /* t_ii at lo - 1 */
        double s = bb[i];
        if (hi > lo) s = (s - trisolve_lanes(val, col, xx, lo + 1, hi)) - val[lo] * xx[col[lo]];
        xx[i] = unit_diagonal ? s : s * dinv[i];
    }
}

static int cpu_trisolve(gs_engine *e, const gs_mat *M, int unit_diagonal, const gs_vec *b,
                        gs_vec *x)
{
    const gs_csr *T = &M->A;
    if (!M->triangular)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve: matrix is not triangular");
    const int lower = M->is_lower;
    const double *bb = b->x, *val = T->val;
    const int32_t *col = T->col;
    double *xx = x->x;
    if (M->diag_inv) {
        for (int32_t i = 0; i < T->n_rows && !unit_diagonal; i++)
            if (M->diag_inv[i] == 0.0)
                return gs_error_set(&e->err, GS_ERR_NUMERIC, "trisolve: zero diagonal in row %d",
                                    (int)i + 1);
        trisolve_stored_diagonal(M, unit_diagonal, bb, xx);
        return GS_OK;
    }
    for (int32_t step = 0; step < T->n_rows; step++) {
        const int32_t i = lower ? step : T->n_rows - 1 - step;
        int64_t lo = T->row_ptr[i], hi = T->row_ptr[i + 1];
        double d = 0.0;                                             /* t_ii, 0 if absent */
        if (lower && hi > lo && col[hi - 1] == i) d = val[--hi];
        if (!lower && hi > lo && col[lo] == i) d = val[lo++];
        double s = bb[i];
        if (hi > lo) {
            const int64_t near = lower ? hi - 1 : lo;              /* t_i,near */
            const double far = lower ? trisolve_lanes(val, col, xx, lo, hi - 1)
                                     : trisolve_lanes(val, col, xx, lo + 1, hi);
            s = (s - far) - val[near] * xx[col[near]];
        }
        if (unit_diagonal) {
            xx[i] = s;
            continue;
        }
        if (d == 0.0)
            return gs_error_set(&e->err, GS_ERR_NUMERIC, "trisolve: zero diagonal in row %d",
                                (int)i + 1);
        xx[i] = s * (1.0 / d);
    }
    return GS_OK;
}

static int cpu_scalar_set(gs_engine *e, int slot, gs_coef value)
{
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    slots(e)[slot] = coef_eval(e, value);
    return GS_OK;
}

static int cpu_scalar_write(gs_engine *e, int slot0, int count, const double *src)
{
    if (count <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + count - 1)) return GS_ERR_INTERNAL;
    memcpy(slots(e) + slot0, src, (size_t)count * sizeof(double));
    return GS_OK;
}

static int cpu_scalar_read(gs_engine *e, int slot0, int count, double *dst)
{
    if (count <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + count - 1)) return GS_ERR_INTERNAL;
    memcpy(dst, slots(e) + slot0, (size_t)count * sizeof(double));
    return GS_OK;
}

static int cpu_small_run(gs_engine *e, const gs_small *op)
{
    if (!gs_small_valid(op, GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cpu engine: small operation %d (j %d, "
                            "m %d, slots from %d) out of range", op->kind, op->j, op->m, op->base);
    gs_small_exec(op, slots(e));
    return GS_OK;
}

static int cpu_sync(gs_engine *e) { return e->err.status; }

static double *cpu_vec_data(gs_engine *e, const gs_vec *v)
{
    (void)e;
    return v->x;
}

static double *cpu_scalar_data(gs_engine *e) { return slots(e); }

static void *cpu_native_stream(gs_engine *e)
{
    (void)e;
    return NULL;
}

/* The solve's threads: --threads N, else what its largest kernel's bytes
 * pay for; the host's floor for that many threads measured the first time
 * (outside Tp and Ts: run.c plans between them). */
static int cpu_solve_plan(gs_engine *e, double kernel_bytes)
{
    cpu_impl *c = e->impl;
    const int cap = gs_team_cap(&c->team);
    const int threads = c->team.fixed > 0
                            ? cap
                            : gs_cpu_threads_for(kernel_bytes, c->team.per_thread, cap);
    c->solve_threads = threads;
    if (c->floor[threads] == 0.0) {
        c->floor[threads] =
            gs_cpu_triad_measure(threads, gs_cpu_triad_length(gs_cpu_llc_bytes()), 3);
        gs_cpu_reset_peak_rss(); /* the probe's arrays are gone: not the run's peak */
    }
    e->copy_bandwidth = c->floor[threads];
    e->threads = threads;
    snprintf(e->thread_policy, sizeof e->thread_policy, "%s, %d of %d%s",
             c->team.fixed > 0 ? "fixed (--threads)" : "by work", threads, c->team.max_threads,
             threads > 1 ? ", one region a solve, threads waiting actively" : "");
    return GS_OK;
}

/* The region's threads are OpenMP's answer to solve_threads (with
 * OMP_DYNAMIC=true it may give fewer on a busy machine), and a region whose
 * trial found the master alone faster ran the rest of the solve so
 * (cpu_team.h):
 * the report says what ran. */
static int cpu_solve_region(gs_engine *e, int (*solve)(void *ctx), void *ctx)
{
    cpu_impl *c = e->impl;
    c->team.last_region = 0;
    const int status = gs_team_region(&c->team, c->solve_threads, solve, ctx);
    const int got = c->team.last_region;
    const char *how = c->team.fixed > 0 ? "fixed (--threads)" : "by work";
    if (c->solve_threads > 1 && got > 0 && got < c->solve_threads) {
        e->threads = got;
        snprintf(e->thread_policy, sizeof e->thread_policy,
                 "%s, %d asked (of %d), OpenMP gave %d (OMP_DYNAMIC)", how, c->solve_threads,
                 c->team.max_threads, got);
    }
    if (c->solve_threads > 1 && got > 1 && c->team.last_alone) {
        snprintf(e->thread_policy, sizeof e->thread_policy,
                 "%s, %d of %d, then 1: alone %.3g GB/s, %d threads %.3g GB/s (busy cores)",
                 how, got, c->team.max_threads, c->team.last_rate[1] * 1e-9, got,
                 c->team.last_rate[0] * 1e-9);
        e->threads = 1;
    }
    return status;
}

static int cpu_destroy(gs_engine *e, gs_error *err)
{
    (void)err; /* nothing of the CPU engine's teardown can fail */
    cpu_impl *c = e->impl;
    gs_team_destroy(&c->team);
    free(c->part);
    free(c->floor);
    free(e->impl);
    free(e);
    return GS_OK;
}

static const gs_engine_ops cpu_ops = {
    .name = "cpu",
    .kind = GS_ENGINE_CPU,
    .destroy = cpu_destroy,
    .vec_create = cpu_vec_create,
    .vec_destroy = cpu_vec_destroy,
    .vec_upload = cpu_vec_upload,
    .vec_download = cpu_vec_download,
    .mat_create = cpu_mat_create,
    .mat_destroy = cpu_mat_destroy,
    .set = cpu_set,
    .copy = cpu_copy,
    .axpby = cpu_axpby,
    .axpbypcz = cpu_axpbypcz,
    .dot = cpu_dot,
    .axpby_dot = cpu_axpby_dot,
    .axpy2_dot = cpu_axpy2_dot,
    .pointwise_mult_dot = cpu_pointwise_mult_dot,
    .mdot = cpu_mdot,
    .maxpy = cpu_maxpy,
    .spmv_dot = cpu_spmv_dot,
    .spmv_axpby = cpu_spmv_axpby,
    .trisolve = cpu_trisolve,
    .scalar_set = cpu_scalar_set,
    .scalar_write = cpu_scalar_write,
    .scalar_read = cpu_scalar_read,
    .small_run = cpu_small_run,
    .sync = cpu_sync,
    .vec_data = cpu_vec_data,
    .scalar_data = cpu_scalar_data,
    .native_stream = cpu_native_stream,
    .solve_plan = cpu_solve_plan,
    .solve_region = cpu_solve_region,
};

/* Freed heap memory stays mapped (glibc: no trimming, no mmap below 32 MB,
 * the largest threshold it takes), so that what a solve allocates (its
 * vectors, inside Ts) reuses pages the setup's temporaries already faulted
 * in, as a solver that allocates its work vectors at setup (PETSc's KSPSetUp)
 * never faults in KSPSolve. A fault costs about 0.5 us under KVM: 0.33 ms of
 * the 0.5 ms one-iteration IC(0) solve of bcsstm25 (n = 15439) before. A
 * hint: where it is refused (mallopt returns 0) or there is no glibc, memory
 * behaves as the C library's default, slower, never wrong. */
static void cpu_keep_freed_memory(void)
{
#if defined(__GLIBC__)
    (void)mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    (void)mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
}

int gs_engine_cpu_create(gs_engine **out, gs_error *err)
{
    cpu_keep_freed_memory();
    gs_engine *e = gs_calloc(1, sizeof *e, "cpu engine", err);
    if (!e) return GS_ERR_NOMEM;
    e->impl = gs_calloc(1, sizeof(cpu_impl), "cpu engine scalars", err);
    if (!e->impl) {
        free(e);
        return GS_ERR_NOMEM;
    }
    cpu_impl *c = e->impl;
    gs_team_init(&c->team, omp_get_max_threads());
    c->solve_threads = 1;
    c->floor = gs_calloc((size_t)c->team.max_threads + 1, sizeof(double), "cpu engine floors",
                         err);
    if (!c->floor) {
        free(e->impl);
        free(e);
        return GS_ERR_NOMEM;
    }
    e->ops = &cpu_ops;
    e->threads = 0;
    const char *wait = getenv("OMP_WAIT_POLICY"); /* main sets passive unless chosen */
    snprintf(e->device_name, sizeof e->device_name, "CPU, up to %d OpenMP threads, %s waiting",
             c->team.max_threads, wait && *wait ? wait : "default");
    *out = e;
    return GS_OK;
}

void gs_engine_cpu_set_threads(gs_engine *e, int threads, double bytes_per_thread)
{
    if (e->ops != &cpu_ops) return; /* not the CPU engine */
    gs_team *t = &((cpu_impl *)e->impl)->team;
    t->fixed = threads > 0 ? threads : 0;
    t->per_thread = bytes_per_thread > 0.0 ? bytes_per_thread : GS_CPU_BYTES_PER_THREAD;
}
