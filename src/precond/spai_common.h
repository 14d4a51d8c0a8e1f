/* spai_common.h - what the two SPAI preconditioners (spai: SPAI-ME, gspai-opt)
 * share once the pattern of M is known: for column k of M with pattern J_k,
 * the row set I_k = union of the row patterns of A(:,J_k), the local matrix
 * Â_k = A(I_k, J_k), the least-squares solve min ||Â_k m - e_k(I_k)||_2
 * (Householder QR, lsq.h), and the assembly of M from its columns; then
 * the apply z = M r, one spmv, shared by both. */
#ifndef GS_SPAI_COMMON_H
#define GS_SPAI_COMMON_H

#include <stdint.h>

#include "csr.h"
#include "precond.h"

/* Sizes of the local problems, as the GSPAI papers name them. */
typedef struct gs_spai_sizes {
    int32_t n1max; /* max_k |I_k| */
    int32_t n2max; /* max_k |J_k| */
    double n2avg;  /* sum_k |J_k| / n */
} gs_spai_sizes;

/* n2 sizes from the pattern (row k of MT is J_k), and n1 sizes from I_k
 * built for every column (AT = A^T gives the columns of A as rows). */
void gs_spai_n2_sizes(const gs_csr *MT, gs_spai_sizes *sizes);
int gs_spai_n1_sizes(const gs_csr *AT, const gs_csr *MT, gs_spai_sizes *sizes, gs_error *err);

/* The least squares of every column: MT (n x n, pattern J_k in row k, with
 * room for values) gets in row k the m_k solving min ||Â_k m - e_k(I_k)||_2.
 * OpenMP over columns. GS_ERR_NUMERIC naming the first failing column of M
 * (1-based) when Â_k is rank deficient (the offending column of A named:
 * A(:,J_k) has dependent columns, so A is singular) or when row k is not in
 * I_k (m_k would be 0, leaving M singular). who prefixes the message, hint
 * ends it (how a larger pattern could be asked for). */
int gs_spai_solve_columns(const gs_csr *AT, gs_csr *MT, const char *who, const char *hint,
                          gs_error *err);

/* How column k of M failed, and the message both engines give for it
 * (GS_ERR_NOMEM for GS_SPAI_COLUMN_NOMEM, else GS_ERR_NUMERIC): k is the
 * column of M (0-based), n1 x n2 its local matrix, a_col the column of A
 * found dependent (GS_SPAI_COLUMN_RANK). Returns the status set. */
enum { GS_SPAI_COLUMN_OK = 0, GS_SPAI_COLUMN_NOMEM, GS_SPAI_COLUMN_RANK, GS_SPAI_COLUMN_ZERO };
int gs_spai_column_failure(int kind, int32_t k, int32_t n1, int32_t n2, int32_t a_col,
                           const char *who, const char *hint, gs_error *err);

/* gspai-opt's strategy rule (pc_gspai.c): alpha, beta with
 * 2^(alpha-1) < n2max <= 2^alpha, 2^(beta-1) < n2avg <= 2^beta, and the
 * strategy (1: S1, 2: S2) from them, or as forced by strategy_param
 * ("auto", "s1", "s2"). */
int gs_gspai_strategy(double n2max, double n2avg, const char *strategy_param, int *alpha,
                      int *beta);

/* M = (MT)^T on the host, values rounded to fp32 when prec is GS_FP32 (so
 * the host copy equals what the engine stores). MT is freed. */
int gs_spai_assemble(gs_csr *MT, gs_precision prec, gs_csr *M, gs_error *err);

/* Hand M (host, taken over: *M is zeroed) to the engine as pc->data and set
 * apply, apply_dot, destroy, save (PREFIX_M.mtx), nnz, apply_bytes and
 * symmetric = 0. The caller times this as the stage "upload". */
int gs_spai_install(gs_pc *pc, gs_csr *M, gs_precision prec, const char *save_comment,
                    gs_error *err);

/* The stages both setups end with, each timed on pc: "least squares"
 * (gs_spai_solve_columns with who, hint), "assemble" (gs_spai_assemble at
 * prec; MT is freed) and "upload" (gs_spai_install with save_comment). */
int gs_spai_finish(gs_pc *pc, const gs_csr *AT, gs_csr *MT, gs_precision prec, const char *who,
                   const char *hint, const char *save_comment, gs_error *err);

/* Adds n1max, n2max, n2avg to the report. */
void gs_spai_report_sizes(gs_pc *pc, const gs_spai_sizes *sizes);

#endif
