/* mic_cuda.h - the CUDA setup of mic (M = L D L^T, modified incomplete Cholesky, the
 * MICPCGA paper's preconditioner; reference src/precond/pc_mic.c): what mic.cu (setup,
 * apply) and mic_factor.cu (checks, patterns, the level-scheduled factorisation) share.
 * C++ only (nvcc). */
#ifndef GS_MIC_CUDA_H
#define GS_MIC_CUDA_H

#include "gs_dsparse.h"

extern "C" {
#include "precond.h"
}

/* The factorisation's device state. A's pattern (rows sorted, symmetric)
 * is split at each diagonal: L = tril(A) (row k: columns m <= k, l_kk = 1
 * last) and U = triu(A) = L^T (row k: column k of L, the diagonal first);
 * the elimination writes U's values in place, L's are gathered from them
 * (lmap: L's entry p is U's entry lmap[p]). */
typedef struct mic_factor {
    int32_t n;
    gs_dcsr L, U;
    int64_t *lmap;     /* nnz(L) */
    int64_t *diag_pos; /* n: the diagonal's place in A's arrays */
    double *a_diag;    /* n: (1 + alpha) a_kk of the current try */
    double *d;         /* n: D */
    gs_dtri lower;     /* L's levels: the factorisation's schedule and the forward solve's */
    double *tsum;      /* n: sum_{j > m} l_jm of each long column m of L (mic_factor.cu) */
    unsigned *ticket;  /* 1: the sync-free factorisation's block ticket */
    int syncfree;      /* the last try's scheme: 1 one sync-free launch, 0 a launch a level */
    /* of the last try: the lowest row with a non-positive pivot (n: none),
     * its pivot, min d_k / a_kk, the dropped fill updates */
    int32_t fail_row;
    double fail_pivot, min_ratio;
    int64_t dropped;
} mic_factor;

/* The device checks of A (symmetric within GS_SYMMETRY_RTOL, finite, a
 * positive diagonal), L's and U's patterns, lmap, and L's levels (from A's
 * host rows where the toolkit's rule finds them thin: gs_dtri_analyse_rows).
 * A failed check hands over to the host (gs_mic_check_input) for the
 * message. */
int mic_cuda_patterns(gs_engine *e, const gs_csr *A, const gs_dcsr *dA, mic_factor *f,
                      gs_error *err);
/* One factorisation of A + alpha diag(A) with omega: U's values, d, and the
 * try's record (fail_row = n when every pivot is positive), by one sync-free
 * launch or a launch a level (f->syncfree says which: the rule of
 * mic_factor.cu, or the engine's debug.factor_scheme). Synchronises.
 * GS_ERR_TIME_LIMIT (err names the stage) once pc's deadline has passed:
 * asked on entry and, with a launch a level, every 256 launches (the host's
 * clock only, no added wait). */
int mic_cuda_factorise(gs_pc *pc, const gs_dcsr *dA, double alpha, double omega,
                       mic_factor *f, gs_error *err);
/* L's values from U's (the "transpose"), unit diagonal. */
int mic_cuda_gather_L(gs_engine *e, mic_factor *f);
void mic_factor_free(gs_engine *e, mic_factor *f);

#endif
