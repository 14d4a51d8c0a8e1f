/* isai_hooks.h - the batched ISAI generation (cuda/precond/isai_generate.cu)
 * as a C test drives it: T uploaded, the device pool poisoned, M ~ T^-1 on
 * |T|^k generated, M downloaded. */
#ifndef GS_ISAI_HOOKS_H
#define GS_ISAI_HOOKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "csr.h"
#include "engine.h"

/* M allocated here (gs_csr_free); *longest the longest column of M,
 * *bad_column the first (1-based) non-finite column, 0 if none. */
int gs_isai_cuda_hook_generate(gs_engine *e, const gs_csr *T, int lower, int k, gs_csr *M,
                               int64_t *longest, int32_t *bad_column);

#ifdef __cplusplus
}
#endif

#endif
