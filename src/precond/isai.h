/* isai.h - what the ISAI CPU reference (src/precond/pc_isai.c) shares with
 * the CUDA setup (cuda/precond/isai*.cu): the options, the private data, the
 * apply z = M_U (M_L r) (with sweeps, or exact triangular solves) written
 * once over the engine table, and the report. Anzt, Chow, Huckle, Dongarra,
 * "Batched generation of incomplete sparse approximate inverses on GPUs",
 * ScalA 2016. */
#ifndef GS_ISAI_H
#define GS_ISAI_H

#include "precond.h"

typedef struct gs_isai_options {
    long power, sweeps;
    int exact, scale;
    int ilu_sweeps; /* --ilu sweeps:N: N (Chow-Patel fixed-point ILU(0)); 0: exact */
    int ilu_cusparse; /* --ilu cusparse: the GPU factorises by cuSPARSE's csrilu02 (the CPU: exact) */
} gs_isai_options;

/* pc->data of both setups. The host factors are the CPU setup's (empty for
 * the CUDA setup, which keeps L and U on the engine and downloads them for
 * --save-precond). */
typedef struct gs_isai_data {
    gs_csr L, U, ML, MU;       /* host factors of A itself (also when scaled) */
    gs_mat *L_eng, *U_eng;     /* sweeps and exact solves (and the CUDA setup's save) */
    gs_mat *ML_eng, *MU_eng;   /* the ISAI apply, else NULL */
    gs_vec *y, *t;             /* y = L-stage result; t = sweep residual */
    long power, sweeps;
    int exact, scaled, ilu_sweeps, ilu_cusparse;
    /* The CUDA setup's device copies of L and U where no engine matrix holds
     * them (for --save-precond), freed by device_free; NULL for the CPU setup. */
    void *device;
    void (*device_free)(gs_pc *pc);
} gs_isai_data;

/* What the report needs of the four matrices (either setup's copies). */
typedef struct gs_isai_sizes {
    int32_t n;
    int64_t nnz_L, nnz_U, nnz_ML, nnz_MU;
    double bytes_L, bytes_U, bytes_ML, bytes_MU; /* one stream of each (values, indices) */
} gs_isai_sizes;

int gs_isai_read_options(const gs_params *p, gs_isai_options *o, gs_error *err);
int gs_isai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z);
void gs_isai_destroy(gs_pc *pc);
/* nnz, apply_bytes, description, report items, symmetric = 0. */
void gs_isai_describe(gs_pc *pc, const gs_isai_data *d, const gs_isai_sizes *s);
/* The y and t vectors the apply uses. */
/* The scaling and ILU(0) of the CPU reference, run for their verdict only:
 * a GPU setup whose device checks flagged a failure calls it for the
 * reference's status and message (GS_OK: the reference does not fail). */
int gs_isai_host_factor_check(const gs_csr *A, const gs_isai_options *o, gs_error *err);
/* The reference's generation: M ~ T^-1 on the pattern of |T|^k (T lower with
 * lower = 1, else upper; its diagonal stored), *longest its longest column;
 * GS_ERR_NUMERIC naming the first non-finite column. Each column costs
 * O(nnz(T(J, J)) log |J|), whatever |J|. pc (may be NULL) gives the run's
 * --time-limit: past it, GS_ERR_TIME_LIMIT naming stage "isai L" or
 * "isai U", M left empty. */
int gs_isai_generate(gs_pc *pc, const gs_csr *T, int lower, int k, gs_csr *M, int64_t *longest,
                     gs_error *err);
int gs_isai_vectors(gs_pc *pc, gs_isai_data *d, int32_t n);

#endif
