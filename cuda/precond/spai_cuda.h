/* spai_cuda.h - the CUDA setup shared by spai (CW-SPAI, cuda/precond/spai.cu) and
 * gspai-opt (cuda/precond/gspai.cu): once the pattern of M is known (row k of MT is
 * J_k), one batched engine solves every column's least-squares problem
 * min ||A(I_k,J_k) m - e_k(I_k)||_2 (cuda/precond/spai_lsq.cu), and M = MT^T is
 * handed to the engine. Grote & Huckle 1997 §2; Mehri Dehnavi et al. (CW-SPAI);
 * Chu et al. 2023 (GSPAI-Opt, §2.1-2.3). C++ only (nvcc). */
#ifndef GS_SPAI_CUDA_H
#define GS_SPAI_CUDA_H

#include "engine_cuda.h"
#include "gs_dsparse.h"

extern "C" {
#include "precond.h"
#include "spai_common.h"
}

/* How the columns are mapped to thread groups (GSPAI-Opt §2.1). */
typedef struct spai_lsq_options {
    int strategy;  /* 1: S1, one group size q for every column; 2: S2, q_k per column,
                      columns sorted by q_k descending, blocks of one q each */
    int q;         /* S1: the group size, a power of two in [4, 256] */
    const char *who, *hint; /* the failure message's prefix and hint (spai_common.h) */
    gs_pc *pc;     /* NULL, or told of the library path's progress (gs_pc_stage_progress)
                      and asked for the run's deadline (gs_pc_deadline) */
    int64_t qr_max; /* the parameter --qr-max: the routes (gs_spai_route) */
} spai_lsq_options;

/* S1's group size from alpha (2^(alpha-1) < n2max <= 2^alpha, GSPAI-Opt
 * (1)-(2)): q = 2^alpha, at least 4 lanes (the smallest tile), at most a
 * block. */
static inline int spai_lsq_s1_group(int alpha)
{
    return alpha < 2 ? 4 : alpha > 8 ? 256 : 1 << alpha;
}

/* What the engine did, for the report. */
typedef struct spai_lsq_report {
    int32_t n1max, n2max;
    double n2avg;
    int64_t ncmax;           /* max_k sum_{j in J_k} |A(:,j)|: candidates for I_k */
    int64_t columns[8];      /* columns by kernel: q = 4 .. 256 in shared memory, global */
    int64_t shared_bytes[8]; /* each kernel's per-group shared (or global) workspace */
    int global_slots;        /* columns of the global kernel solved at once */
    int64_t cusolver_columns; /* columns of the library path (cuSOLVER, one at a time) */
    int64_t cusolver_bytes;   /* its largest dense n1 x n2 matrix */
    gs_spai_lsq_stats stats;  /* the routes (spai_common.h), as the CPU setup reports them */
} spai_lsq_report;
#define SPAI_LSQ_GLOBAL 7 /* index of the global-memory kernel in columns[] */

/* Sizes of every column (Pre-GSPAI): n2_k, the candidates of I_k, its route
 * (gs_spai_route with qr_max), n1_k and the workspace QR needs for the
 * columns QR takes, and the report's n1max, n2max, n2avg. The device
 * arrays in *sizes are freed by spai_lsq_sizes_free. AT: the columns of A as
 * rows (values); MT: the pattern (row k = J_k, sorted). Synchronises once. */
typedef struct spai_lsq_sizes {
    int32_t n;
    int64_t *need;    /* device, n: workspace bytes of column k */
    uint8_t *cls;     /* device, n: log2(q_k) - 2 (q_k = 4 .. 256) */
    uint8_t *route;   /* device, n: gs_spai_route of the column */
    int32_t *n1;      /* device, n: |I_k| */
    uint64_t stats[24];
} spai_lsq_sizes;
int spai_lsq_sizes_compute(gs_engine *e, const gs_dcsr *AT, const gs_dcsr *MT, int64_t qr_max,
                           spai_lsq_sizes *sizes, spai_lsq_report *rep);
void spai_lsq_sizes_free(gs_engine *e, spai_lsq_sizes *sizes);

/* MT->val (fp64, allocated by the caller) = the m_k of every column. Columns
 * whose workspace fits the device's shared memory for their group go to the
 * shared-memory kernels, the others to the global-memory kernel (whole
 * blocks, in slots of bounded memory). GS_ERR_NUMERIC with the CPU
 * reference's message for the lowest failing column. Synchronises. */
int spai_lsq_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const spai_lsq_sizes *sizes,
                   const spai_lsq_options *o, spai_lsq_report *rep, gs_error *err);

/* ---- the columns QR does not take (spai_large.cu) ---- */

/* The heavy columns of A and their Gram matrix on the device, picked by the
 * CPU reference's rule (gs_spai_heavy in spai_common.h). */
typedef struct spai_heavy {
    int32_t n, count;
    int32_t *index; /* n: place among the heavy columns, or -1 */
    int32_t *cols;  /* GS_SPAI_HEAVY_MAX */
    double *gram;   /* count x count */
} spai_heavy;
int spai_heavy_build(gs_engine *e, const gs_dcsr *AT, spai_heavy *h);
void spai_heavy_free(gs_engine *e, spai_heavy *h);

/* The normal equations of the columns list[0..count) (device), a warp a
 * column: m_k into MT, the reference's bits; n1_out[k] = 0; the lowest
 * failing column's key into fail (spai_lsq.cu's record); the columns whose
 * pivots failed the test into rejected (device, count entries), their
 * number into *n_rejected (host). n2max: the largest n2 of the list. */
int spai_ne_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const spai_heavy *h,
                  const int32_t *list, int64_t count, int32_t n2max, int32_t *n1_out,
                  unsigned long long *fail, int32_t *rejected, int64_t *n_rejected);

/* CGLS on the columns list[0..count) (device), all of a batch at once; the
 * batch's worst relative residual and most iterations into rep->stats;
 * the run's deadline asked between batches. */
int spai_cgls_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const int32_t *list, int64_t count,
                    int32_t *n1_out, unsigned long long *fail, gs_pc *pc, spai_lsq_report *rep,
                    gs_error *err);

/* ---- shared by both setups (spai_lsq.cu) ---- */

/* A's CSR on the device (a loan from pc->A, or uploaded) and its transpose
 * AT (the columns of A as rows, with values): without a sort where A's
 * pattern is symmetric (gs_dcsr_transpose_symmetric). Report item
 * transpose=pattern-symmetric|sorted. */
int spai_cuda_columns_of_A(gs_pc *pc, const gs_csr *A, gs_dcsr *AT);

/* "assemble" and "upload": M = MT^T (MT freed), handed to the engine in
 * prec as pc->data, with apply, save, nnz, apply_bytes, symmetric = 0. */
int spai_cuda_finish(gs_pc *pc, gs_dcsr *MT, gs_precision prec, const char *save_comment);

/* n1max, n2max, n2avg and the kernels into the report. */
void spai_cuda_report(gs_pc *pc, const spai_lsq_report *rep);

#endif
