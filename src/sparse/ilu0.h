/* ilu0.h - ILU(0): the incomplete LU factorisation of a square CSR matrix on
 * its own pattern (Saad, Iterative Methods for Sparse Linear Systems, 2nd ed.,
 * SIAM 2003, Alg. 10.4, the IKJ variant). Used by the isai preconditioner
 * (Anzt et al., batched ISAI generation, ScalA 2016). */
#ifndef GS_ILU0_H
#define GS_ILU0_H

#include "csr.h"
#include "error.h"

/* A ~ L U with (L U)_ij = a_ij for every (i, j) stored in A. L is unit lower
 * triangular with its unit diagonal stored explicitly (so it can be
 * multiplied with as well as solved with), U upper triangular with the
 * pivots on its diagonal; together they have A's pattern (plus nothing).
 * Errors: GS_ERR_INPUT for a non-square A or a row with no stored diagonal
 * entry, GS_ERR_NUMERIC for a zero or non-finite pivot u_ii; the message
 * names the row (1-based). On failure L and U are left empty. */
int gs_ilu0(const gs_csr *A, gs_csr *L, gs_csr *U, gs_error *err);

/* gs_ilu0 that can be stopped: every GS_ILU0_CHECK_ROWS rows it calls
 * past(ctx) and, once that returns nonzero, stops with GS_ERR_TIME_LIMIT and
 * sets no message (the caller names its stage: the run's --time-limit).
 * past NULL: gs_ilu0. */
#define GS_ILU0_CHECK_ROWS 4096
int gs_ilu0_bounded(const gs_csr *A, int (*past)(const void *ctx), const void *ctx, gs_csr *L,
                    gs_csr *U, gs_error *err);

/* The factorisation of gs_ilu0_bounded in place: w (A->nnz values in A's
 * pattern, A->val ignored) becomes L (strictly below the diagonal, unit
 * diagonal implied) and U (on and above it), the layout the CUDA setup keeps
 * them in. The CUDA setup calls it where its device factorisation would be
 * latency-bound (cuda/precond/isai_ilu0.cu). Same errors and stops. */
int gs_ilu0_in_place(const gs_csr *A, double *w, int (*past)(const void *ctx), const void *ctx,
                     gs_error *err);

/* The fine-grained fixed-point ILU(0) (E. Chow, A. Patel, "Fine-grained
 * parallel incomplete LU factorization", SIAM J. Sci. Comput. 37(2) 2015):
 * starting from the values of A, each sweep updates every stored entry from
 * the previous sweep's values (Jacobi order, so the result does not depend on
 * the order of the updates), for i > j: l_ij = (a_ij - sum_{k<j} l_ik u_kj)
 * / u_jj, for i <= j: u_ij = a_ij - sum_{k<i} l_ik u_kj. The exact ILU(0) is
 * its fixed point, reached after at most n sweeps. Same factors' layout and
 * errors as gs_ilu0 (a non-finite entry after the last sweep names its row). */
int gs_ilu0_sweeps(const gs_csr *A, int sweeps, gs_csr *L, gs_csr *U, gs_error *err);

#endif
