/* gen.h - built-in problems (--generate). Coefficients are documented in
 * docs/problems.md; all use a uniform grid with Dirichlet boundaries folded
 * into the right-hand side (only interior unknowns are rows). */
#ifndef GS_GEN_H
#define GS_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "csr.h"
#include "error.h"

/* spec is "KIND:NX" or "KIND:NXxNYxNZ" with KIND one of poisson3d,
 * poisson3d27, aniso3d, convdiff3d, elast3d, bordered (heat3d: heat3d.h),
 * or "hub:N", "hub:NXxNY", "powerlaw:N", "chain:N". On success *A holds the
 * matrix and name (size name_len) a display name like "poisson3d:64x64x64".
 * GS_ERR_USAGE naming the spec for anything malformed or too large. */
int gs_generate(const char *spec, gs_csr *A, char *name, size_t name_len, gs_error *err);

/* The checks of gs_generate without generating: the command line calls it
 * so that a bad spec fails before any work. */
int gs_generate_check(const char *spec, gs_error *err);

/* The grid of a spec: sizes is the text after "KIND:" ("64" or
 * "64x32x16"), checked as gs_generate checks it (positive sizes, at most
 * 2^31 - 1 unknowns); GS_ERR_USAGE naming spec and showing kind's forms. */
int gs_generate_dims(const char *spec, const char *kind, const char *sizes, int64_t dims[3],
                     gs_error *err);

/* The stencil of a stencil kind (poisson3d, poisson3d27, aniso3d,
 * convdiff3d) into w, indexed as gs_generate_stencil's; GS_ERR_INTERNAL for
 * any other name. */
int gs_generate_stencil_of(const char *kind, double w[3][3][3], gs_error *err);

/* The matrix of a stencil on an NX x NY x NZ interior grid: w[dk+1][dj+1][di+1]
 * couples unknown (i,j,k), row i + NX*(j + NY*k), to (i+di, j+dj, k+dk); a zero
 * weight off the centre means no entry, off-grid neighbours (Dirichlet
 * values) are dropped. Columns sorted, the diagonal always stored. */
int gs_generate_stencil(const double w[3][3][3], const int64_t dims[3], gs_csr *A,
                        gs_error *err);

/* A stencil problem generated a row block at a time (one block per MPI
 * rank, src/dist/): its grid, stencil offsets and display name, whether the
 * stencil is symmetric, and the rows [row0, row1) as a (row1 - row0) x n
 * matrix with global columns, identical to those rows of gs_generate's.
 * heat3d and the stress set are not stencil specs here (GS_ERR_UNSUPPORTED). */
typedef struct gs_gen_plan {
    int64_t dims[3], n;
    int count;         /* stencil entries, in ascending column order */
    int d[27][3];      /* di, dj, dk */
    double w[27];
    int symmetric;     /* w(d) == w(-d) for every offset */
    char name[96];
} gs_gen_plan;
int gs_generate_plan(const char *spec, gs_gen_plan *plan, gs_error *err);
int64_t gs_generate_plan_row_nnz(void *plan, int64_t row); /* a gs_row_count_fn */
int gs_generate_plan_rows(const gs_gen_plan *plan, int64_t row0, int64_t row1, gs_csr *A,
                          gs_error *err);

/* The stress set (src/io/gen_stress.c, docs/problems.md): irregular
 * sparsity that breaks preconditioner setups, generated whole, the same
 * matrix on every run. elast3d:N[xNYxNZ] (K27 (x) [[4,1,1],[1,4,1],[1,1,4]],
 * 3 unknowns per node), bordered:N[xNYxNZ] (convdiff3d with 8 dense rows
 * and columns), hub:N[xNY] (2D Laplacian and one node coupled to every
 * 20th), powerlaw:N (Chung-Lu graph Laplacian + I), chain:N (tridiagonal
 * plus one coupling back up to 65 rows per row). gs_stress_is_spec: 1 if
 * the text before ':' names one of them; check and generate as
 * gs_generate_check and gs_generate do. */
int gs_stress_is_spec(const char *spec);
int gs_stress_check(const char *spec, gs_error *err);
int gs_stress_generate(const char *spec, gs_csr *A, char *name, size_t name_len, gs_error *err);

/* One line per kind for --help. */
const char *gs_generate_help(void);

#endif
