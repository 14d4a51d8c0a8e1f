/* spai_hooks.h - the heavy columns' Gram matrix of the least-squares engine
 * (cuda/precond/spai_large.cu) as a C test drives it: A^T uploaded, the
 * device pool poisoned, spai_heavy_build, its columns and Gram downloaded. */
#ifndef GS_SPAI_HOOKS_H
#define GS_SPAI_HOOKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "csr.h"
#include "engine.h"

/* AT: A^T on the host (its rows are A's columns). *count the heavy columns
 * found (at most GS_SPAI_HEAVY_MAX), cols[0..count) their numbers and
 * gram[0..count^2) their Gram matrix, row-major (the caller's arrays:
 * GS_SPAI_HEAVY_MAX and GS_SPAI_HEAVY_MAX^2 entries). */
int gs_spai_cuda_hook_heavy_gram(gs_engine *e, const gs_csr *AT, int32_t *count, int32_t *cols,
                                 double *gram);

#ifdef __cplusplus
}
#endif

#endif
