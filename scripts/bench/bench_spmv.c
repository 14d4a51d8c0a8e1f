/* bench_spmv.c - SpMV on rows of very different lengths: the layouts before the long-row
 * rule (GS_SPMV_LONG=off), split long rows (the default) and the merge path, on the same
 * matrices in one run, in us per product and as a multiple of the bandwidth floor.
 *   bench_spmv [MATRIX.mtx | SPEC | powerlaw:N ...]
 * powerlaw:N is an N-row matrix with Pareto row lengths (index 1.2, rows of 3 or more,
 * capped at N / 5) and random columns, the shape of a power-law graph. Each product is
 * captured 20 times into a CUDA graph and the graph replayed, so launch gaps stay out; the
 * time is the best of 5 replays after one warm-up. Floor: A's CSR bytes (fp64 values,
 * int32 columns, int64 row pointers: gs_csr_stream_bytes) + x read + y written, over the
 * engine's measured copy bandwidth. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/engine/gs_cuda.h"
#include "debug.h"
#include "engine.h"
#include "gen.h"
#include "mmio.h"
#include "timer.h"

#define OPS_PER_GRAPH 20

static void die(const char *what, const gs_error *err)
{
    fprintf(stderr, "bench_spmv: %s: %s\n", what, err->msg);
    exit(3);
}

/* Seconds per spmv_dot (slot: a dot y.x; GS_SLOT_NONE: none). */
static double time_spmv(gs_engine *e, const gs_mat *A, gs_vec *x, gs_vec *y, int slot)
{
    void *seq = NULL;
    int status = e->ops->capture_begin(e);
    for (int i = 0; status == GS_OK && i < OPS_PER_GRAPH; i++)
        status = e->ops->spmv_dot(e, A, x, y, NULL, slot);
    const int end = e->ops->capture_end(e, &seq);
    if (status != GS_OK || end != GS_OK) die("capture", &e->err);
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        const double t0 = gs_now();
        if (e->ops->replay(e, seq) != GS_OK || e->ops->sync(e) != GS_OK) die("replay", &e->err);
        const double t = gs_now() - t0;
        if (rep > 0 && t < best) best = t;
    }
    e->ops->seq_destroy(e, seq);
    return best / OPS_PER_GRAPH;
}

static gs_vec *random_vec(gs_engine *e, int64_t n, unsigned seed)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof(double));
    srand(seed);
    for (int64_t i = 0; i < n; i++) h[i] = (double)rand() / RAND_MAX + 0.5;
    gs_vec *v = NULL;
    if (e->ops->vec_create(e, n, &v) != GS_OK || e->ops->vec_upload(e, v, h) != GS_OK)
        die("vector", &e->err);
    free(h);
    return v;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* powerlaw:N (header comment). */
static void power_law(int32_t n, gs_csr *A)
{
    uint64_t s = 2024;
    const int32_t cap = n / 5 > 3 ? n / 5 : 3;
    int64_t nnz = 0;
    int32_t *len = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        const double u = ((double)lcg(&s) + 1.0) / 9007199254740993.0; /* (0, 1] */
        const double l = 3.0 * pow(u, -1.0 / 1.2);
        len[i] = l > cap ? cap : (int32_t)l;
        nnz += len[i];
    }
    int32_t *ri = malloc((size_t)nnz * sizeof(int32_t)), *ci = malloc((size_t)nnz * sizeof(int32_t));
    double *vi = malloc((size_t)nnz * sizeof(double));
    int64_t p = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t start = (int32_t)(lcg(&s) % (uint64_t)n), step = n / len[i];
        for (int32_t k = 0; k < len[i]; k++, p++) {
            ri[p] = i;
            ci[p] = (int32_t)(((int64_t)start + (int64_t)k * step) % n);
            vi[p] = (double)(lcg(&s) % 1000) / 1000.0 + 0.5;
        }
    }
    gs_error err = {0};
    if (gs_csr_from_coo(n, n, nnz, ri, ci, vi, A, &err) != GS_OK) die("powerlaw", &err);
    free(len), free(ri), free(ci), free(vi);
}

static void load(const char *spec, gs_csr *A, char *name, size_t len)
{
    gs_error err = {0};
    memset(A, 0, sizeof *A);
    snprintf(name, len, "%s", strrchr(spec, '/') ? strrchr(spec, '/') + 1 : spec);
    if (strncmp(spec, "powerlaw:", 9) == 0) {
        power_law((int32_t)atol(spec + 9), A);
    } else if (strstr(spec, ".mtx")) {
        if (gs_mm_read_csr(spec, A, NULL, &err) != GS_OK) die(spec, &err);
    } else if (gs_generate(spec, A, name, len, &err) != GS_OK) {
        die(spec, &err);
    }
}

int main(int argc, char **argv)
{
    const char *defaults[] = {"poisson3d:128", "powerlaw:270000"};
    const char **specs = argc > 1 ? (const char **)argv + 1 : defaults;
    const int count = argc > 1 ? argc - 1 : 2;
    gs_engine *e = NULL;
    gs_error err = {0};
    if (gs_engine_cuda_create(&e, &err) != GS_OK) die("engine", &err);
    const double bw = e->copy_bandwidth;
    printf("device: %s, copy bandwidth %.0f GB/s\n", e->device_name, bw * 1e-9);
    printf("%-18s %8s %9s %7s %6s %-10s %-10s %8s %8s %8s %6s %8s\n", "matrix", "n", "nnz",
           "max_row", "mean", "variant", "layout", "spmv_us", "dot_us", "floor_us", "ratio",
           "vs_old");
    for (int m = 0; m < count; m++) {
        gs_csr A;
        char name[128];
        load(specs[m], &A, name, sizeof name);
        int64_t longest = 0;
        for (int32_t i = 0; i < A.n_rows; i++)
            if (A.row_ptr[i + 1] - A.row_ptr[i] > longest) longest = A.row_ptr[i + 1] - A.row_ptr[i];
        const int64_t n = A.n_rows;
        gs_vec *x = random_vec(e, A.n_cols, 1), *y = random_vec(e, n, 2);
        const double floor_s = (gs_csr_stream_bytes(&A, GS_FP64) + 8.0 * A.n_cols + 8.0 * n) / bw;
        /* old: the layouts before the long-row rule; split: the rule;
         * merge: the rule with the merge path; merge*: forced on any matrix */
        const struct { const char *name; int mode; gs_cuda_layout force; } variants[] = {
            {"old", GS_DEBUG_LONG_OFF, GS_CUDA_LAYOUT_AUTO},
            {"split", GS_DEBUG_LONG_SPLIT, GS_CUDA_LAYOUT_AUTO},
            {"merge", GS_DEBUG_LONG_MERGE, GS_CUDA_LAYOUT_AUTO},
            {"merge*", 0, GS_CUDA_LAYOUT_CSR_MERGE}};
        double old_us = 0.0;
        for (int v = 0; v < 4; v++) {
            gs_debug d;
            memset(&d, 0, sizeof d);
            d.spmv_long = variants[v].mode;
            gs_engine_cuda_set_debug(e, &d);
            gs_mat *M = NULL;
            if (gs_cuda_mat_create_as(e, &A, GS_FP64, variants[v].force, 0, &M) != GS_OK)
                die(name, &e->err);
            const double t = time_spmv(e, M, x, y, GS_SLOT_NONE) * 1e6;
            const double td = time_spmv(e, M, x, y, 5) * 1e6;
            if (v == 0) old_us = t;
            printf("%-18.18s %8lld %9lld %7lld %6.1f %-10s %-10s %8.2f %8.2f %8.2f %6.2f %7.1fx\n",
                   name, (long long)n, (long long)A.nnz, (long long)longest,
                   n ? (double)A.nnz / (double)n : 0.0, variants[v].name, gs_cuda_mat_layout(M),
                   t, td, floor_s * 1e6, t / (floor_s * 1e6), old_us / t);
            e->ops->mat_destroy(e, M);
        }
        e->ops->vec_destroy(e, x);
        e->ops->vec_destroy(e, y);
        gs_csr_free(&A);
        fflush(stdout);
    }
    gs_engine_destroy(e);
    return 0;
}
