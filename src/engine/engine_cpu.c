/* engine_cpu.c - the CPU engine: the engine table (engine.h) in plain C with
 * OpenMP. It is the oracle the CUDA engine is tested against, so it favours
 * clarity; reductions use OpenMP's reduction clause. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

typedef struct cpu_impl {
    double S[GS_MAX_SCALARS];
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
    if (prec == GS_FP32) {
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < A->nnz; k++) M->A.val[k] = (double)(float)M->A.val[k];
    }
    int above = 0, below = 0; /* entries right / left of the diagonal exist */
#pragma omp parallel for schedule(static) reduction(| : above, below)
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            above |= A->col[k] > i;
            below |= A->col[k] < i;
        }
    M->is_lower = !above;
    M->is_upper = !below;
    *out = M;
    return GS_OK;
}

static void cpu_mat_destroy(gs_engine *e, gs_mat *M)
{
    (void)e;
    if (!M) return;
    gs_csr_free(&M->A);
    free(M);
}

static int cpu_set(gs_engine *e, gs_vec *y, double value)
{
    (void)e;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < y->n; i++) y->x[i] = value;
    return GS_OK;
}

static int cpu_copy(gs_engine *e, const gs_vec *x, gs_vec *y)
{
    (void)e;
    memcpy(y->x, x->x, (size_t)x->n * sizeof(double));
    return GS_OK;
}

static int cpu_axpby(gs_engine *e, gs_coef ka, const gs_vec *x, gs_coef kb, gs_vec *y)
{
    const double a = coef_eval(e, ka), b = coef_eval(e, kb);
    const double *xx = x->x;
    double *yy = y->x;
    if (b == 0.0) { /* y = a x: y's old contents (maybe NaN) must not leak in */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < y->n; i++) yy[i] = a * xx[i];
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < y->n; i++) yy[i] = a * xx[i] + b * yy[i];
    }
    return GS_OK;
}

static int cpu_axpbypcz(gs_engine *e, gs_coef ka, const gs_vec *x, gs_coef kb,
                        const gs_vec *y, gs_coef kc, gs_vec *z)
{
    const double a = coef_eval(e, ka), b = coef_eval(e, kb), c = coef_eval(e, kc);
    const double *xx = x->x, *yy = y->x;
    double *zz = z->x;
    if (c == 0.0) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < z->n; i++) zz[i] = a * xx[i] + b * yy[i];
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < z->n; i++) zz[i] = a * xx[i] + b * yy[i] + c * zz[i];
    }
    return GS_OK;
}

static double dot_plain(const double *x, const double *y, int64_t n)
{
    double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

static int cpu_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot)
{
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    slots(e)[slot] = dot_plain(x->x, y->x, x->n);
    return GS_OK;
}

static int cpu_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                         const gs_vec *w, int slot)
{
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    cpu_axpby(e, a, x, b, y);
    slots(e)[slot] = dot_plain(y->x, w ? w->x : y->x, y->n);
    return GS_OK;
}

static int cpu_axpy2_dot(gs_engine *e, gs_coef ka, const gs_vec *x1, gs_vec *y1, gs_coef kb,
                         const gs_vec *x2, gs_vec *y2, int slot)
{
    const double a = coef_eval(e, ka), b = coef_eval(e, kb);
    double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < y2->n; i++) {
        if (a != 0.0) y1->x[i] += a * x1->x[i];
        if (b != 0.0) y2->x[i] += b * x2->x[i];
        s += y2->x[i] * y2->x[i];
    }
    if (slot == GS_SLOT_NONE) return GS_OK;
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    slots(e)[slot] = s;
    return GS_OK;
}

static int cpu_pointwise_mult_dot(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y,
                                  int slot)
{
    const double *dd = d->x, *xx = x->x;
    double *yy = y->x;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < y->n; i++) yy[i] = dd[i] * xx[i];
    if (slot == GS_SLOT_NONE) return GS_OK;
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    slots(e)[slot] = dot_plain(xx, yy, y->n);
    return GS_OK;
}

static int cpu_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0)
{
    if (k <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + k - 1)) return GS_ERR_INTERNAL;
    for (int j = 0; j < k; j++) slots(e)[slot0 + j] = dot_plain(V[j]->x, w->x, w->n);
    return GS_OK;
}

static int cpu_maxpy(gs_engine *e, double c, const gs_vec *const *V, int k, int slot0,
                     gs_vec *w)
{
    if (k <= 0) return GS_OK;
    if (bad_slot(e, slot0) || bad_slot(e, slot0 + k - 1)) return GS_ERR_INTERNAL;
    const double *S = slots(e) + slot0;
    double *ww = w->x;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < w->n; i++) {
        double s = 0;
        for (int j = 0; j < k; j++) s += S[j] * V[j]->x[i];
        ww[i] += c * s;
    }
    return GS_OK;
}

static int cpu_spmv_dot(gs_engine *e, const gs_mat *M, const gs_vec *x, gs_vec *y,
                        const gs_vec *w, int slot)
{
    gs_csr_spmv(&M->A, x->x, y->x);
    if (slot == GS_SLOT_NONE) return GS_OK;
    if (bad_slot(e, slot)) return GS_ERR_INTERNAL;
    slots(e)[slot] = dot_plain(y->x, w ? w->x : x->x, y->n);
    return GS_OK;
}

static int cpu_spmv_axpby(gs_engine *e, gs_coef ka, const gs_mat *M, const gs_vec *x,
                          gs_coef kb, gs_vec *y)
{
    const double a = coef_eval(e, ka), b = coef_eval(e, kb);
    const gs_csr *A = &M->A;
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < A->n_rows; i++) {
        double s = 0;
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) s += A->val[k] * x->x[A->col[k]];
        y->x[i] = b == 0.0 ? a * s : a * s + b * y->x[i];
    }
    return GS_OK;
}

/* Serial substitution: the reference for the GPU's parallel solves. */
static int cpu_trisolve(gs_engine *e, const gs_mat *M, int unit_diagonal, const gs_vec *b,
                        gs_vec *x)
{
    const gs_csr *T = &M->A;
    if (!M->is_lower && !M->is_upper)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve: matrix is not triangular");
    const int lower = M->is_lower;
    for (int32_t step = 0; step < T->n_rows; step++) {
        const int32_t i = lower ? step : T->n_rows - 1 - step;
        double s = b->x[i], diag = unit_diagonal ? 1.0 : 0.0;
        for (int64_t k = T->row_ptr[i]; k < T->row_ptr[i + 1]; k++) {
            if (T->col[k] == i) {
                if (!unit_diagonal) diag = T->val[k];
            } else {
                s -= T->val[k] * x->x[T->col[k]];
            }
        }
        if (diag == 0.0)
            return gs_error_set(&e->err, GS_ERR_NUMERIC, "trisolve: zero diagonal in row %d",
                                (int)i + 1);
        x->x[i] = s / diag;
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

static int cpu_destroy(gs_engine *e, gs_error *err)
{
    (void)err; /* nothing of the CPU engine's teardown can fail */
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
};

int gs_engine_cpu_create(gs_engine **out, gs_error *err)
{
    gs_engine *e = gs_calloc(1, sizeof *e, "cpu engine", err);
    if (!e) return GS_ERR_NOMEM;
    e->impl = gs_calloc(1, sizeof(cpu_impl), "cpu engine scalars", err);
    if (!e->impl) {
        free(e);
        return GS_ERR_NOMEM;
    }
    e->ops = &cpu_ops;
    const char *wait = getenv("OMP_WAIT_POLICY"); /* main sets passive unless chosen */
    snprintf(e->device_name, sizeof e->device_name, "CPU, %d OpenMP threads, %s waiting",
             omp_get_max_threads(), wait && *wait ? wait : "default");
    *out = e;
    return GS_OK;
}
