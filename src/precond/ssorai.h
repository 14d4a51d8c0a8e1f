/* ssorai.h - what the SSOR-AI reference setup (src/precond/pc_ssorai.c) shares
 * with its CUDA setup (cuda/precond/ssorai.cu): options, input checks, the
 * private data and the apply z = F^T (F r), written once over the engine
 * table. SSOR approximate inverse of Helfenstein and Koko, J. Comput. Appl.
 * Math. 236 (2012), the MIC paper's reference [3] (docs/ssor-ai.md). */
#ifndef GS_SSORAI_H
#define GS_SSORAI_H

#include "precond.h"

typedef struct gs_ssorai_options {
    double omega; /* SSOR relaxation, 0 < omega < 2 */
    long terms;   /* powers of omega L D^-1 kept in the Neumann series of K^-1: 1 or 2 */
} gs_ssorai_options;

/* pc->data of both setups: F = sqrt(omega (2 - omega)) D^-1/2 G_m, lower
 * triangular, so that M^-1 = F^T F. F is the host copy the CPU setup keeps
 * for --save-precond (empty for the CUDA setup, which downloads F_eng). */
typedef struct gs_ssorai_data {
    gs_csr F;
    gs_mat *F_eng, *FT_eng;
    gs_vec *t; /* t = F r */
} gs_ssorai_data;

int gs_ssorai_read_options(const gs_pc *pc, gs_ssorai_options *o, gs_error *err);
/* A square, with values, symmetric, every diagonal entry present, positive
 * and finite; the messages name the first offending row (1-based). */
int gs_ssorai_check_input(const gs_csr *A, gs_error *err);
/* sqrt(omega (2 - omega)): the factor of M^-1 split over F and F^T. */
double gs_ssorai_scale(double omega);

int gs_ssorai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z);
int gs_ssorai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot); /* and S[slot] = r.z */
void gs_ssorai_destroy(gs_pc *pc); /* pc->destroy of both setups */
/* The report fields once F (nnz_F entries, n rows) is on the engine. */
void gs_ssorai_describe(gs_pc *pc, const gs_ssorai_options *o, int64_t nnz_F, int32_t n,
                        int64_t nnz_A);

#endif
