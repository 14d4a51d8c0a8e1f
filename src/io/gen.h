/* gen.h - built-in problems (--generate). Coefficients are documented in
 * docs/problems.md; all use a uniform grid with Dirichlet boundaries folded
 * into the right-hand side (only interior unknowns are rows). */
#ifndef GS_GEN_H
#define GS_GEN_H

#include <stddef.h>

#include "csr.h"
#include "error.h"

/* spec is "KIND:NX" or "KIND:NXxNYxNZ" with KIND one of poisson3d,
 * poisson3d27, aniso3d, convdiff3d. On success *A holds the matrix and
 * name (size name_len) a display name like "poisson3d:64x64x64".
 * GS_ERR_USAGE naming the spec for anything malformed or too large. */
int gs_generate(const char *spec, gs_csr *A, char *name, size_t name_len, gs_error *err);

/* The checks of gs_generate without generating: the command line calls it
 * so that a bad spec fails before any work. */
int gs_generate_check(const char *spec, gs_error *err);

/* One line per kind for --help. */
const char *gs_generate_help(void);

#endif
