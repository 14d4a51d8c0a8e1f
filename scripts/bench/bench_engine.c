/* bench_engine.c - microbenchmarks of the CUDA engine's operations against
 * their byte floors (bytes each op must move / measured copy bandwidth), and
 * the measurement behind the SELL / CSR layout rule of cuda/sparse/layout.cu.
 *   bench_engine [SPEC ...]     default: poisson3d:64 poisson3d:128 poisson3d:160
 *   bench_engine --device-fill  SELL-32 against CSR on few slices of long rows
 *                               (the device-fill part of the rule)
 * Each op is captured 20 times into a CUDA graph and the graph replayed, so
 * launch gaps stay out; the time is the best of 5 replays (one warm-up). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/engine/gs_cuda.h"
#include "engine.h"
#include "gen.h"
#include "precond.h"
#include "timer.h"

#define OPS_PER_GRAPH 20

typedef struct bench_ctx {
    gs_engine *e;
    const gs_mat *A;
    gs_vec *x, *y, *w, *v[16];
    int kind;
} bench_ctx;

static int run_op(bench_ctx *c)
{
    gs_engine *e = c->e;
    const gs_engine_ops *o = e->ops;
    switch (c->kind) {
    case 0: return o->spmv_dot(e, c->A, c->x, c->y, NULL, 5);
    case 1: return o->spmv_dot(e, c->A, c->x, c->y, NULL, GS_SLOT_NONE);
    case 2: return o->axpby_dot(e, gs_coef_ratio(-1, 6, 7), c->x, gs_coef_const(1), c->y, NULL, 5);
    case 3: return o->pointwise_mult_dot(e, c->w, c->x, c->y, 5);
    case 4: return o->dot(e, c->x, c->w, 5);
    case 5: return o->axpby(e, gs_coef_const(1), c->x, gs_coef_ratio(1, 6, 7), c->y);
    case 6: return o->mdot(e, (const gs_vec *const *)c->v, 16, c->w, 100);
    case 7: return o->maxpy(e, -1.0, (const gs_vec *const *)c->v, 16, 100, c->w);
    case 8: return o->spmv_axpby(e, gs_coef_const(-1), c->A, c->x, gs_coef_const(1), c->y);
    }
    return GS_ERR_INTERNAL;
}

/* Seconds per op: graph of OPS_PER_GRAPH ops, best of 5 replays. */
static double time_op(bench_ctx *c)
{
    gs_engine *e = c->e;
    void *seq = NULL;
    int status = e->ops->capture_begin(e);
    for (int i = 0; status == GS_OK && i < OPS_PER_GRAPH; i++) status = run_op(c);
    int end = e->ops->capture_end(e, &seq);
    if (status != GS_OK || end != GS_OK) {
        fprintf(stderr, "bench_engine: capture failed: %s\n", e->err.msg);
        exit(3);
    }
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = gs_now();
        if (e->ops->replay(e, seq) != GS_OK || e->ops->sync(e) != GS_OK) {
            fprintf(stderr, "bench_engine: replay failed: %s\n", e->err.msg);
            exit(3);
        }
        double t = gs_now() - t0;
        if (rep > 0 && t < best) best = t;
    }
    e->ops->seq_destroy(e, seq);
    return best / OPS_PER_GRAPH;
}

static gs_vec *random_vec(gs_engine *e, int64_t n, unsigned seed)
{
    double *h = malloc((size_t)n * sizeof(double));
    srand(seed);
    for (int64_t i = 0; i < n; i++) h[i] = (double)rand() / RAND_MAX + 0.5;
    gs_vec *v = NULL;
    if (e->ops->vec_create(e, n, &v) != GS_OK || e->ops->vec_upload(e, v, h) != GS_OK) {
        fprintf(stderr, "bench_engine: %s\n", e->err.msg);
        exit(3);
    }
    free(h);
    return v;
}

static void row(const char *problem, const char *op, const char *layout, double sec, double bytes,
                double bw)
{
    printf("%-22s %-20s %-19s %9.2f %8.0f %9.2f %6.2f\n", problem, op, layout, sec * 1e6,
           bytes / sec * 1e-9, bytes / bw * 1e6, sec / (bytes / bw));
}

static void header(void)
{
    printf("%-22s %-20s %-19s %9s %8s %9s %6s\n", "problem", "op", "layout", "us", "GB/s",
           "floor_us", "ratio");
}

/* Every op on one matrix; SpMV in each layout and precision. */
static void bench_problem(gs_engine *e, const char *problem, const gs_csr *A, int all_ops)
{
    const int64_t n = A->n_rows;
    const double bw = e->copy_bandwidth;
    bench_ctx c = {e, NULL, NULL, NULL, NULL, {NULL}, 0};
    c.x = random_vec(e, n, 1);
    c.y = random_vec(e, n, 2);
    c.w = random_vec(e, n, 3);
    e->ops->scalar_write(e, 6, 2, (double[]){1e-3, 1.0});
    const struct { gs_cuda_layout layout; gs_precision prec; } variants[] = {
        {GS_CUDA_LAYOUT_AUTO, GS_FP64}, {GS_CUDA_LAYOUT_SELL_SORTED, GS_FP64},
        {GS_CUDA_LAYOUT_CSR, GS_FP64}, {GS_CUDA_LAYOUT_AUTO, GS_FP32}};
    for (int v = 0; v < 4; v++) {
        gs_mat *M = NULL;
        if (gs_cuda_mat_create_as(e, A, variants[v].prec, variants[v].layout, 0, &M) != GS_OK) {
            fprintf(stderr, "bench_engine: %s\n", e->err.msg);
            exit(3);
        }
        c.A = M;
        char layout[32];
        snprintf(layout, sizeof layout, "%s%s", gs_cuda_mat_layout(M),
                 variants[v].prec == GS_FP32 ? "/f32" : "");
        /* floor: the CSR bytes of A (values, int32 columns, row pointers)
         * + x read + y written; the dot's second operand is x (cached) */
        const double floor_bytes = gs_csr_stream_bytes(A, variants[v].prec) + 16.0 * n;
        c.kind = 0;
        row(problem, "spmv_dot", layout, time_op(&c), floor_bytes, bw);
        if (v == 0) {
            c.kind = 1;
            row(problem, "spmv", layout, time_op(&c), floor_bytes, bw);
            c.kind = 8;
            row(problem, "spmv_axpby", layout, time_op(&c), floor_bytes + 8.0 * n, bw);
            printf("%-22s fill ratio %.3f, device bytes/SpMV %.1f MB vs CSR floor %.1f MB\n",
                   problem, gs_cuda_mat_fill_ratio(M), gs_cuda_mat_stream_bytes(M) * 1e-6,
                   gs_csr_stream_bytes(A, GS_FP64) * 1e-6);
            /* Jacobi setup: host diagonal + upload vs read on the device */
            static const gs_pc_type host = {"jacobi", "host", NULL, {NULL, gs_jacobi_setup}};
            static const gs_pc_type dev = {"jacobi", "device", NULL, {NULL, gs_jacobi_setup_cuda}};
            const gs_pc_type *types[2] = {&host, &dev};
            for (int t = 0; t < 2; t++) {
                double best = INFINITY;
                for (int rep = 0; rep < 3; rep++) {
                    gs_pc *pc = NULL;
                    gs_params params = {0};
                    gs_error err = {0};
                    double t0 = gs_now();
                    if (gs_pc_create(types[t], e, &params, A, M, &pc, &err) != GS_OK) {
                        fprintf(stderr, "bench_engine: %s\n", err.msg);
                        exit(3);
                    }
                    double dt = gs_now() - t0;
                    if (dt < best) best = dt;
                    gs_pc_destroy(pc);
                }
                printf("%-22s jacobi setup (%s) %.3f ms\n", problem, types[t]->summary, best * 1e3);
            }
        }
        e->ops->mat_destroy(e, M);
    }
    if (all_ops) {
        c.kind = 2;
        row(problem, "axpby_dot", "-", time_op(&c), 24.0 * n, bw);
        c.kind = 3;
        row(problem, "pointwise_mult_dot", "-", time_op(&c), 24.0 * n, bw);
        c.kind = 4;
        row(problem, "dot", "-", time_op(&c), 16.0 * n, bw);
        c.kind = 5;
        row(problem, "axpby", "-", time_op(&c), 24.0 * n, bw);
        for (int j = 0; j < 16; j++) c.v[j] = random_vec(e, n, 10 + j);
        c.kind = 6;
        row(problem, "mdot k=16", "-", time_op(&c), 17.0 * 8 * n, bw);
        c.kind = 7;
        row(problem, "maxpy k=16", "-", time_op(&c), 18.0 * 8 * n, bw);
        for (int j = 0; j < 16; j++) e->ops->vec_destroy(e, c.v[j]);
    }
    e->ops->vec_destroy(e, c.x);
    e->ops->vec_destroy(e, c.y);
    e->ops->vec_destroy(e, c.w);
}

/* n rows; spread >= 0: lengths uniform in [8 - spread, 8 + spread] (mean
 * 8); spread < 0: bimodal, a fraction -spread / 1000 of the rows has 40
 * entries, the others 6. Random columns within +-4096 of the diagonal (an x
 * access pattern with locality, like a reordered mesh matrix). */
static void ragged(int32_t n, int spread, unsigned seed, gs_csr *A)
{
    gs_error err = {0};
    srand(seed);
    int64_t cap = (int64_t)n * (spread >= 0 ? 8 + spread : 40);
    gs_csr_alloc(n, n, cap, 1, A, &err);
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) {
        int len = spread >= 0 ? 8 - spread + (int)(rand() % (2 * spread + 1))
                              : (rand() % 1000 < -spread ? 40 : 6);
        int32_t c0 = i - 4096 < 0 ? 0 : i - 4096;
        if (c0 + 8192 > n) c0 = n - 8192;
        int32_t step = 8192 / (len + 1);
        for (int k = 0; k < len; k++) {
            A->col[nnz] = c0 + k * step + (int32_t)(rand() % step);
            A->val[nnz++] = 1.0 + (double)rand() / RAND_MAX;
        }
        A->row_ptr[i + 1] = nnz;
    }
    A->nnz = nnz;
}

/* n rows of len entries each (len <= 1024), columns spread over a window of
 * 1024 around the diagonal (clipped to the matrix): even widths, fill 1. */
static void banded(int32_t n, int len, gs_csr *A)
{
    gs_error err = {0};
    if (gs_csr_alloc(n, n, (int64_t)n * len, 1, A, &err) != GS_OK) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        exit(3);
    }
    const int32_t window = n < 1024 ? n : 1024, step = window / len > 0 ? window / len : 1;
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t c0 = i - window / 2 < 0 ? 0 : i - window / 2;
        if (c0 + window > n) c0 = n - window;
        for (int k = 0; k < len && k < window; k++) {
            A->col[nnz] = c0 + k * step;
            A->val[nnz++] = 1.0 + (double)(k % 7) / 8.0;
        }
        A->row_ptr[i + 1] = nnz;
    }
    A->nnz = nnz;
}

/* The device-fill rule: few slices of long rows, SELL-32 against CSR. */
static void device_fill_sweep(gs_engine *e)
{
    printf("\ndevice fill: n = 32 x slices rows of len entries (fill 1), SELL-32 vs CSR spmv\n");
    printf("%-8s %-5s %9s %9s %9s %s\n", "slices", "len", "SELL us", "CSR us", "floor us",
           "rule picks");
    const int lens[] = {8, 16, 32, 64, 128, 256};
    const int slices[] = {33, 66, 132, 264, 528, 1056, 2112, 4224, 8448};
    for (int l = 0; l < 6; l++)
        for (int s = 0; s < 9; s++) {
            if (lens[l] < 64 && slices[s] > 4224) continue;
            gs_csr A = {0};
            banded(32 * slices[s], lens[l], &A);
            bench_ctx c = {e, NULL, NULL, NULL, NULL, {NULL}, 1};
            c.x = random_vec(e, A.n_rows, 1);
            c.y = random_vec(e, A.n_rows, 2);
            const gs_cuda_layout layouts[] = {GS_CUDA_LAYOUT_SELL, GS_CUDA_LAYOUT_CSR,
                                              GS_CUDA_LAYOUT_AUTO};
            double us[2] = {0, 0};
            char picks[24] = "";
            for (int v = 0; v < 3; v++) {
                gs_mat *M = NULL;
                if (gs_cuda_mat_create_as(e, &A, GS_FP64, layouts[v], 0, &M) != GS_OK) {
                    fprintf(stderr, "bench_engine: %s\n", e->err.msg);
                    exit(3);
                }
                c.A = M;
                if (v < 2) us[v] = time_op(&c) * 1e6;
                else snprintf(picks, sizeof picks, "%s", gs_cuda_mat_layout(M));
                e->ops->mat_destroy(e, M);
            }
            printf("%-8d %-5d %9.2f %9.2f %9.2f %s\n", slices[s], lens[l], us[0], us[1],
                   (gs_csr_stream_bytes(&A, GS_FP64) + 16.0 * A.n_rows) / e->copy_bandwidth * 1e6,
                   picks);
            e->ops->vec_destroy(e, c.x);
            e->ops->vec_destroy(e, c.y);
            gs_csr_free(&A);
        }
}

int main(int argc, char **argv)
{
    gs_error err = {0};
    gs_engine *e = NULL;
    if (gs_engine_cuda_create(&e, &err) != GS_OK) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 3;
    }
    printf("device %s, copy bandwidth %.0f GB/s (read + write)\n\n", e->device_name,
           e->copy_bandwidth * 1e-9);
    if (argc == 2 && strcmp(argv[1], "--device-fill") == 0) {
        device_fill_sweep(e);
        int status = e->err.status;
        gs_engine_destroy(e);
        return status == GS_OK ? 0 : 3;
    }
    header();
    const char *defaults[] = {"poisson3d:64", "poisson3d:128", "poisson3d:160"};
    const int nspec = argc > 1 ? argc - 1 : 3;
    for (int s = 0; s < nspec; s++) {
        const char *spec = argc > 1 ? argv[1 + s] : defaults[s];
        gs_csr A = {0};
        char name[64];
        if (gs_generate(spec, &A, name, sizeof name, &err) != GS_OK) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            return 1;
        }
        bench_problem(e, spec, &A, 1);
        gs_csr_free(&A);
    }
    /* the layout rule: mean 8 entries a row, growing spread of lengths */
    printf("\nlayout rule: 2M rows, lengths uniform in [8-s, 8+s], or bimodal: a fraction f of "
           "rows with 40 entries, the others 6\n");
    header();
    const int spreads[] = {0, 2, 4, 8, -5, -20, -50, -100};
    for (int s = 0; s < 8; s++) {
        gs_csr A = {0};
        ragged(1 << 21, spreads[s], 7u + (unsigned)s, &A);
        char problem[32];
        if (spreads[s] >= 0)
            snprintf(problem, sizeof problem, "ragged s=%d", spreads[s]);
        else
            snprintf(problem, sizeof problem, "bimodal f=%.1f%%", -spreads[s] / 10.0);
        gs_mat *M = NULL;
        gs_cuda_mat_create_as(e, &A, GS_FP64, GS_CUDA_LAYOUT_AUTO, 0, &M);
        printf("%-22s rule picks %s\n", problem, gs_cuda_mat_layout(M));
        e->ops->mat_destroy(e, M);
        bench_ctx c = {e, NULL, NULL, NULL, NULL, {NULL}, 0};
        c.x = random_vec(e, A.n_rows, 1);
        c.y = random_vec(e, A.n_rows, 2);
        const struct { gs_cuda_layout layout; int sigma; } layouts[] = {
            {GS_CUDA_LAYOUT_SELL, 0}, {GS_CUDA_LAYOUT_SELL_SORTED, 64},
            {GS_CUDA_LAYOUT_SELL_SORTED, 256}, {GS_CUDA_LAYOUT_SELL_SORTED, 1024},
            {GS_CUDA_LAYOUT_CSR, 0}};
        for (int l = 0; l < 5; l++) {
            if (gs_cuda_mat_create_as(e, &A, GS_FP64, layouts[l].layout, layouts[l].sigma, &M) !=
                GS_OK) {
                fprintf(stderr, "bench_engine: %s\n", e->err.msg);
                return 3;
            }
            c.A = M;
            c.kind = 1;
            char name[40];
            snprintf(name, sizeof name, "%s f%.2f", gs_cuda_mat_layout(M), gs_cuda_mat_fill_ratio(M));
            row(problem, "spmv", name, time_op(&c),
                gs_csr_stream_bytes(&A, GS_FP64) + 16.0 * A.n_rows, e->copy_bandwidth);
            e->ops->mat_destroy(e, M);
        }
        e->ops->vec_destroy(e, c.x);
        e->ops->vec_destroy(e, c.y);
        gs_csr_free(&A);
    }
    int status = e->err.status;
    if (status != GS_OK) fprintf(stderr, "bench_engine: %s\n", e->err.msg);
    gs_engine_destroy(e);
    return status == GS_OK ? 0 : 3;
}
