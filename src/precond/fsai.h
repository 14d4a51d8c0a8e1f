/* fsai.h - what the FSAI CPU reference (src/precond/pc_fsai.c) shares with the CUDA
 * setup (cuda/fsai*.cu): the options, the input checks, the private data and
 * the apply z = G^T (G r), written once over the engine table. Bernaschi,
 * Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016. */
#ifndef GS_FSAI_H
#define GS_FSAI_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "precond.h"

typedef struct gs_fsai_options {
    double tau, delta;
    long k;
    long max_row;     /* --max-row N: rows of S cut to N entries; 0: no cap */
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

/* The key by which --max-row ranks the off-diagonal entries j of a row i of
 * S (docs/fsai.md, "Capping the pattern"): the normalised coupling
 * c = |a_ij| / (sqrt(a_ii) sqrt(a_jj)) as an integer that orders as c does
 * (the bits of c >= 0, plus one), and 0 for j outside A's pattern (an entry
 * of the fill, a_ij = 0: below every entry of A, explicit zeros included).
 * A long row keeps its diagonal and the N - 1 largest keys, of equal keys
 * the smaller columns. One expression for both setups (correctly rounded
 * sqrt and division, no contraction possible), so both rank alike to the bit. */
#ifdef __CUDACC__
#define GS_FSAI_HOST_DEVICE __host__ __device__
#else
#define GS_FSAI_HOST_DEVICE
#endif
static inline GS_FSAI_HOST_DEVICE uint64_t gs_fsai_cap_key(int in_A, double aij, double aii,
                                                           double ajj)
{
    if (!in_A) return 0;
    double c = fabs(aij) / (sqrt(aii) * sqrt(ajj));
    if (!(c >= 0.0)) c = 0.0; /* NaN: not reached for an A that passed the checks */
    uint64_t bits;
    memcpy(&bits, &c, sizeof bits);
    return bits + 1;
}

/* tau, k, delta, max-row, precond-precision from pc->params (GS_ERR_USAGE if
 * out of range). */
int gs_fsai_read_options(const gs_pc *pc, gs_fsai_options *o, gs_error *err);
/* A square, symmetric, with values and a positive diagonal; d = diag(A).
 * The messages name the row (1-based). */
int gs_fsai_check_input(const gs_csr *A, double *d, gs_error *err);

int gs_fsai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z);
int gs_fsai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot); /* and S[slot] = r.z */
void gs_fsai_destroy(gs_pc *pc); /* pc->destroy of both setups */

#endif
