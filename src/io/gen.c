/* gen.c - built-in problems (--generate): finite-difference stencils on a 3D grid
 * (the stress set is gen_stress.c, heat3d is heat3d.c).
 * Standard second-order central differences and first-order upwinding (LeVeque,
 * "Finite Difference Methods for ODEs and PDEs", 2007); see docs/problems.md. */
#include "gen.h"
#include "heat3d.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stencil: w[dk+1][dj+1][di+1] is the coefficient coupling unknown (i,j,k)
 * to (i+di, j+dj, k+dk); zero means "no entry" except at the centre. All
 * matrices are scaled by h^2, so the grid spacing h = 1/(N+1) never appears.
 * Unknown (i,j,k) is row i + NX*(j + NY*k); off-grid neighbours are Dirichlet
 * boundary values, folded into the right-hand side (the entry is dropped). */
typedef struct gen_stencil {
    const char *kind;
    double w[3][3][3];
} gen_stencil;

/* convdiff3d: -Laplace(u) + beta (1,1,1).grad(u), h^2-scaled, convection
 * upwinded (backward differences, beta > 0): c = beta h = 0.5 at every size,
 * i.e. cell Peclet number beta h / 2 = 0.25. Per direction the row gets
 * -(1 + c) on the backward neighbour, -1 on the forward one, 2 + c on the
 * diagonal: an irreducibly diagonally dominant, nonsymmetric M-matrix. */
#define GEN_CONVDIFF_C 0.5

static const gen_stencil gen_stencils[] = {
    {"poisson3d",
     {{{0, 0, 0}, {0, -1, 0}, {0, 0, 0}},
      {{0, -1, 0}, {-1, 6, -1}, {0, -1, 0}},
      {{0, 0, 0}, {0, -1, 0}, {0, 0, 0}}}},
    {"poisson3d27",
     {{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}},
      {{-1, -1, -1}, {-1, 26, -1}, {-1, -1, -1}},
      {{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}}},
    {"aniso3d", /* -(u_xx + 0.1 u_yy + 0.01 u_zz) */
     {{{0, 0, 0}, {0, -0.01, 0}, {0, 0, 0}},
      {{0, -0.1, 0}, {-1, 2.22, -1}, {0, -0.1, 0}},
      {{0, 0, 0}, {0, -0.01, 0}, {0, 0, 0}}}},
    {"convdiff3d",
     {{{0, 0, 0}, {0, -(1 + GEN_CONVDIFF_C), 0}, {0, 0, 0}},
      {{0, -(1 + GEN_CONVDIFF_C), 0},
       {-(1 + GEN_CONVDIFF_C), 6 + 3 * GEN_CONVDIFF_C, -1},
       {0, -1, 0}},
      {{0, 0, 0}, {0, -1, 0}, {0, 0, 0}}}},
};
#define GEN_N_KINDS ((int)(sizeof gen_stencils / sizeof gen_stencils[0]))

const char *gs_generate_help(void)
{
    return "  poisson3d:N[xNYxNZ]    7-point Laplacian: diag 6, neighbours -1 (SPD)\n"
           "  poisson3d27:N[xNYxNZ]  27-point stencil: diag 26, all 26 neighbours -1 (SPD)\n"
           "  aniso3d:N[xNYxNZ]      anisotropic diffusion, x/y/z coefficients 1/0.1/0.01 "
           "(SPD)\n"
           "  convdiff3d:N[xNYxNZ]   upwind convection-diffusion, diag 7.5, backward -1.5, "
           "forward -1 (nonsymmetric)\n"
           "  elast3d:N[xNYxNZ]      poisson3d27 (x) [[4,1,1],[1,4,1],[1,1,4]]: 3 unknowns "
           "per node, 81-entry rows (SPD)\n"
           "  bordered:N[xNYxNZ]     convdiff3d plus 8 dense rows and columns (nonsymmetric; "
           "NZ = 1: 2D)\n"
           "  hub:N[xNY]             2D 5-point Laplacian plus one node coupled to every 20th "
           "(SPD)\n"
           "  powerlaw:N             Chung-Lu power-law graph Laplacian + I, mean degree 10 "
           "(SPD)\n"
           "  chain:N                tridiagonal plus a coupling 2..65 rows back per row: "
           "N levels (SPD)\n";
}

/* Parse a positive decimal size (digits only) at *s; advance *s past it. */
static int parse_size(const char **s, int64_t *value)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > INT32_MAX) return 0;
    }
    if (v <= 0) return 0;
    *value = v;
    *s = p;
    return 1;
}

int gs_generate_dims(const char *spec, const char *kind, const char *sizes, int64_t dims[3],
                     gs_error *err)
{
    const char *p = sizes;
    int ok = parse_size(&p, &dims[0]);
    if (ok && *p == '\0') {
        dims[1] = dims[2] = dims[0];
    } else {
        ok = ok && *p++ == 'x' && parse_size(&p, &dims[1]);
        ok = ok && *p++ == 'x' && parse_size(&p, &dims[2]) && *p == '\0';
    }
    if (!ok)
        return gs_error_set(err, GS_ERR_USAGE,
                            "--generate '%s': size must be N or NXxNYxNZ with positive "
                            "integers below 2^31 (e.g. %s:64 or %s:64x32x16)",
                            spec, kind, kind);
    if (dims[0] * dims[1] > INT32_MAX || dims[0] * dims[1] * dims[2] > INT32_MAX)
        return gs_error_set(err, GS_ERR_USAGE,
                            "--generate '%s': %lld x %lld x %lld unknowns exceed the %d rows "
                            "a matrix may have", spec, (long long)dims[0], (long long)dims[1],
                            (long long)dims[2], INT32_MAX);
    return GS_OK;
}

/* "KIND:NX" or "KIND:NXxNYxNZ" -> stencil and grid sizes. */
static int parse_spec(const char *spec, const gen_stencil **stencil, int64_t dims[3],
                      gs_error *err)
{
    const char *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    *stencil = NULL;
    for (int t = 0; t < GEN_N_KINDS; t++)
        if (strlen(gen_stencils[t].kind) == kind_len &&
            strncmp(spec, gen_stencils[t].kind, kind_len) == 0)
            *stencil = &gen_stencils[t];
    if (!*stencil)
        return gs_error_set(err, GS_ERR_USAGE,
                            "--generate '%s': unknown problem kind (known: poisson3d, "
                            "poisson3d27, aniso3d, convdiff3d, heat3d, elast3d, bordered, hub, "
                            "powerlaw, chain)", spec);
    return gs_generate_dims(spec, (*stencil)->kind, colon ? colon + 1 : "", dims, err);
}

int gs_generate_stencil_of(const char *kind, double w[3][3][3], gs_error *err)
{
    for (int t = 0; t < GEN_N_KINDS; t++)
        if (strcmp(kind, gen_stencils[t].kind) == 0) {
            memcpy(w, gen_stencils[t].w, sizeof gen_stencils[t].w);
            return GS_OK;
        }
    return gs_error_set(err, GS_ERR_INTERNAL, "no stencil named '%s'", kind);
}

/* The stencil's entries as offsets, in (dk, dj, di) order: visiting them in
 * that order yields ascending column indices. */
typedef struct gen_offsets {
    int count;
    int d[27][3]; /* di, dj, dk */
    double w[27];
} gen_offsets;

static void stencil_offsets(const double w3[3][3][3], gen_offsets *off)
{
    off->count = 0;
    for (int dk = -1; dk <= 1; dk++)
        for (int dj = -1; dj <= 1; dj++)
            for (int di = -1; di <= 1; di++) {
                double w = w3[dk + 1][dj + 1][di + 1];
                if (w == 0.0 && (di != 0 || dj != 0 || dk != 0)) continue;
                off->d[off->count][0] = di;
                off->d[off->count][1] = dj;
                off->d[off->count][2] = dk;
                off->w[off->count] = w;
                off->count++;
            }
}

/* Entries of row (i,j,k); with col == NULL only counts them. */
static int64_t stencil_row(const gen_offsets *off, const int64_t dims[3], int64_t i, int64_t j,
                           int64_t k, int32_t *col, double *val)
{
    int64_t count = 0;
    for (int e = 0; e < off->count; e++) {
        int64_t ii = i + off->d[e][0], jj = j + off->d[e][1], kk = k + off->d[e][2];
        if (ii < 0 || ii >= dims[0] || jj < 0 || jj >= dims[1] || kk < 0 || kk >= dims[2])
            continue;                                        /* Dirichlet: dropped */
        if (col) {
            col[count] = (int32_t)(ii + dims[0] * (jj + dims[1] * kk));
            val[count] = off->w[e];
        }
        count++;
    }
    return count;
}

/* The whole matrix is the rows [0, n) of its plan (gs_generate_plan_rows,
 * which the distributed runs call for their blocks). */
int gs_generate_stencil(const double w[3][3][3], const int64_t dims[3], gs_csr *out,
                        gs_error *err)
{
    gs_gen_plan plan = {{dims[0], dims[1], dims[2]}, dims[0] * dims[1] * dims[2], 0, {{0}}, {0},
                        0, ""};
    gen_offsets off;
    stencil_offsets(w, &off);
    plan.count = off.count;
    memcpy(plan.d, off.d, sizeof plan.d);
    memcpy(plan.w, off.w, sizeof plan.w);
    return gs_generate_plan_rows(&plan, 0, plan.n, out, err);
}

int gs_generate_check(const char *spec, gs_error *err)
{
    const gen_stencil *stencil = NULL;
    int64_t dims[3];
    gs_heat3d heat;
    if (!spec) return gs_error_set(err, GS_ERR_USAGE, "--generate: no problem given");
    if (gs_heat3d_is_spec(spec)) return gs_heat3d_parse(spec, &heat, err);
    if (gs_stress_is_spec(spec)) return gs_stress_check(spec, err);
    return parse_spec(spec, &stencil, dims, err);
}

int gs_generate(const char *spec, gs_csr *A, char *name, size_t name_len, gs_error *err)
{
    const gen_stencil *stencil = NULL;
    int64_t dims[3] = {0, 0, 0};
    int status = GS_OK;
    memset(A, 0, sizeof *A);
    if (!spec) return gs_error_set(err, GS_ERR_USAGE, "--generate: no problem given");
    if (gs_heat3d_is_spec(spec)) { /* its first step's matrix, at the default time step */
        gs_heat3d heat;
        GS_TRY(gs_heat3d_parse(spec, &heat, err));
        GS_TRY(gs_heat3d_matrix(&heat, A, err));
        gs_heat3d_name(&heat, name, name_len);
        goto cleanup;
    }
    if (gs_stress_is_spec(spec)) return gs_stress_generate(spec, A, name, name_len, err);
    GS_TRY(parse_spec(spec, &stencil, dims, err));
    GS_TRY(gs_generate_stencil(stencil->w, dims, A, err));
    if (name && name_len > 0)
        snprintf(name, name_len, "%s:%lldx%lldx%lld", stencil->kind, (long long)dims[0],
                 (long long)dims[1], (long long)dims[2]);
cleanup:
    return status;
}

int gs_generate_plan(const char *spec, gs_gen_plan *plan, gs_error *err)
{
    const gen_stencil *stencil = NULL;
    gen_offsets off;
    memset(plan, 0, sizeof *plan);
    if (!spec) return gs_error_set(err, GS_ERR_USAGE, "--generate: no problem given");
    if (gs_heat3d_is_spec(spec))
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "--generate %s: the time-stepped problem runs on one process only",
                            spec);
    if (gs_stress_is_spec(spec))
        return gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "--generate %s: the stress problems are generated whole on one "
                            "process, not by row blocks; run it on one process, or write it "
                            "once with --write-matrix FILE and give mpirun the file", spec);
    int status = parse_spec(spec, &stencil, plan->dims, err);
    if (status != GS_OK) return status;
    stencil_offsets(stencil->w, &off);
    plan->n = plan->dims[0] * plan->dims[1] * plan->dims[2];
    plan->count = off.count;
    memcpy(plan->d, off.d, sizeof off.d);
    memcpy(plan->w, off.w, sizeof off.w);
    plan->symmetric = 1;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++)
                plan->symmetric &= stencil->w[a][b][c] == stencil->w[2 - a][2 - b][2 - c];
    snprintf(plan->name, sizeof plan->name, "%s:%lldx%lldx%lld", stencil->kind,
             (long long)plan->dims[0], (long long)plan->dims[1], (long long)plan->dims[2]);
    return GS_OK;
}

static void plan_offsets(const gs_gen_plan *plan, gen_offsets *off)
{
    off->count = plan->count;
    memcpy(off->d, plan->d, sizeof off->d);
    memcpy(off->w, plan->w, sizeof off->w);
}

int64_t gs_generate_plan_row_nnz(void *ctx, int64_t row)
{
    const gs_gen_plan *plan = ctx;
    const int64_t *dims = plan->dims;
    const int64_t i = row % dims[0], j = (row / dims[0]) % dims[1], k = row / (dims[0] * dims[1]);
    int64_t count = 0;
    for (int e = 0; e < plan->count; e++) {
        const int64_t ii = i + plan->d[e][0], jj = j + plan->d[e][1], kk = k + plan->d[e][2];
        count += ii >= 0 && ii < dims[0] && jj >= 0 && jj < dims[1] && kk >= 0 && kk < dims[2];
    }
    return count;
}

int gs_generate_plan_rows(const gs_gen_plan *plan, int64_t row0, int64_t row1, gs_csr *out,
                          gs_error *err)
{
    gs_csr A = {0};
    gen_offsets off;
    int status = GS_OK;
    const int64_t m = row1 - row0, *dims = plan->dims;
    plan_offsets(plan, &off);
    GS_TRY(gs_csr_alloc((int32_t)m, (int32_t)plan->n, 0, 0, &A, err));
#pragma omp parallel for schedule(static) if (m > 4096)
    for (int64_t r = 0; r < m; r++)
        A.row_ptr[r + 1] = gs_generate_plan_row_nnz((void *)plan, row0 + r);
    for (int64_t r = 0; r < m; r++) A.row_ptr[r + 1] += A.row_ptr[r];
    A.nnz = A.row_ptr[m];
    free(A.col);
    A.col = gs_malloc((size_t)A.nnz * sizeof *A.col, "generated matrix columns", err);
    A.val = gs_malloc((size_t)A.nnz * sizeof *A.val, "generated matrix values", err);
    if (!A.col || !A.val) GS_TRY(GS_ERR_NOMEM);
#pragma omp parallel for schedule(static) if (m > 4096)
    for (int64_t r = 0; r < m; r++) {
        const int64_t g = row0 + r;
        const int64_t i = g % dims[0], j = (g / dims[0]) % dims[1], k = g / (dims[0] * dims[1]);
        stencil_row(&off, dims, i, j, k, A.col + A.row_ptr[r], A.val + A.row_ptr[r]);
    }
cleanup:
    if (status != GS_OK) gs_csr_free(&A);
    *out = A;
    return status;
}
