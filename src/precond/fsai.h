/* fsai.h - what the FSAI CPU reference (src/precond/pc_fsai.c) shares with the CUDA
 * setup (cuda/fsai*.cu): the options, the input checks, the private data and
 * the apply z = G^T (G r), written once over the engine table. Bernaschi,
 * Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016. */
#ifndef GS_FSAI_H
#define GS_FSAI_H

#include "precond.h"

typedef struct gs_fsai_options {
    double tau, delta;
    long k;
    gs_precision prec;
    int fused_gather; /* CUDA setup: systems that fit shared memory gathered by the factorisation kernels */
} gs_fsai_options;

/* pc->data of both setups. G is the host copy the CPU setup keeps for
 * --save-precond (empty for the CUDA setup, which downloads G_eng). */
typedef struct gs_fsai_data {
    gs_csr G;
    gs_mat *G_eng;  /* G on the engine */
    gs_mat *GT_eng; /* G^T on the engine */
    gs_vec *t;      /* t = G r */
} gs_fsai_data;

/* tau, k, delta, precond-precision from pc->params (GS_ERR_USAGE if out of range). */
int gs_fsai_read_options(const gs_pc *pc, gs_fsai_options *o, gs_error *err);
/* A square, symmetric, with values and a positive diagonal; d = diag(A).
 * The messages name the row (1-based). */
int gs_fsai_check_input(const gs_csr *A, double *d, gs_error *err);

int gs_fsai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z);
int gs_fsai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot); /* and S[slot] = r.z */
void gs_fsai_destroy(gs_pc *pc); /* pc->destroy of both setups */

#endif
