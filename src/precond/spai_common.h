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

/* How a column's local problem is solved, the same on both engines, from
 * n2_k, the candidates for I_k (nc_k = sum over J_k of |A(:,j)|, counted
 * without forming I_k) and rows = n1_k = |I_k| where it is cheap to count
 * exactly (GS_SPAI_N1_COUNTED: at most 4096 candidates and 2^18
 * candidate-list pairs, what the CUDA setup's sizes pass counts), else nc_k:
 * - GS_SPAI_ROUTE_QR: Householder QR of the dense Â_k, the papers' method,
 *   where the column fits the batched QR kernels' shared memory
 *   (--qr-max -1, the default: gs_spai_qr_bytes <= gs_spai_qr_capacity,
 *   the GPU's workspace layout against the stride an H100/H200 gives a group
 *   of the column's size), or where rows x (n2 + 1) <= --qr-max N (N >= 0).
 * - GS_SPAI_ROUTE_NE: larger, n2 <= GS_SPAI_NE_MAX: the normal equations
 *   (A^T A)(J,J) m = A(k,J)^T by Cholesky (spai_large.c); a column whose
 *   pivots say Â_k is too ill-conditioned for them (a pivot below
 *   GS_SPAI_NE_PIVOT times its column's squared norm: κ(Â_k) above about
 *   10^4, where their κ^2 u error would pass 10^-8) goes back to QR.
 * - GS_SPAI_ROUTE_CGLS: n2 > GS_SPAI_NE_MAX: CGLS on Â_k kept sparse, at
 *   most GS_SPAI_CGLS_MAXIT iterations, to a relative normal-equations
 *   residual of GS_SPAI_CGLS_TOL (the report gives the worst reached). */
enum { GS_SPAI_ROUTE_QR = 0, GS_SPAI_ROUTE_NE, GS_SPAI_ROUTE_CGLS };
/* The parameter both types declare: its declaration, for their tables. */
#define GS_SPAI_QR_MAX_PARAM                                                                  \
    GS_PARAM_INT_DECL("qr-max", -1, 2147483647, "-1",                                         \
                      "local least-squares problems by Householder QR (the papers') where "     \
                      "they fit the GPU's batched QR kernels (-1), or up to N dense entries "   \
                      "(|I| x (|J| + 1)); larger ones by the normal equations (|J| <= 512) "    \
                      "or CGLS (wider), whose cost follows A's nonzeros; 0: none by QR")
#define GS_SPAI_QR_MAX_DEFAULT (-1)
#define GS_SPAI_NE_MAX 512
#define GS_SPAI_NE_PIVOT 1e-8
#define GS_SPAI_CGLS_MAXIT 200
#define GS_SPAI_CGLS_TOL 1e-8
#define GS_SPAI_N1_EXACT 4096      /* n1 counted up to this many candidates */
#define GS_SPAI_N1_WORK (1 << 18)  /* and while nc n2 stays below this */
#define GS_SPAI_N1_COUNTED(n2, nc) ((nc) <= GS_SPAI_N1_EXACT && (nc) * (n2) <= GS_SPAI_N1_WORK)
/* The shared memory a 256-thread block of the batched QR kernels takes on an H100 or H200:
 * half a multiprocessor's 228 KiB (two blocks resident), less the 1 KiB the runtime keeps
 * and 256 bytes of the kernel's own; a group of q <= 32 lanes gets 1 / (256 / q) of it, a
 * larger one all of it (cuda/precond/spai_lsq.cu, spai_stride, reads the device's own). */
#define GS_SPAI_QR_BLOCK_BYTES 115456
#ifdef __CUDACC__ /* the same rule in the CUDA setup's kernels */
#define GS_SPAI_HOST_DEVICE __host__ __device__
#else
#define GS_SPAI_HOST_DEVICE
#endif
/* The group size GSPAI-Opt's S2 gives a column of n2 unknowns: 2^s >= n2, 4 to 256. */
static inline GS_SPAI_HOST_DEVICE int64_t gs_spai_qr_group(int64_t n2)
{
    int64_t q = 4;
    while (q < 256 && q < n2) q *= 2;
    return q;
}
/* The batched QR's workspace of a column (spai_lsq.cu's layout): header, list offsets,
 * candidates and their first occurrences (int32, to 16 bytes), Â and b (fp64). */
static inline GS_SPAI_HOST_DEVICE int64_t gs_spai_qr_bytes(int64_t n2, int64_t nc, int64_t rows)
{
    return ((32 + 4 * (n2 + 1 + 2 * nc) + 15) & ~(int64_t)15) + 8 * rows * (n2 + 1);
}
static inline GS_SPAI_HOST_DEVICE int64_t gs_spai_qr_capacity(int64_t n2)
{
    const int64_t q = gs_spai_qr_group(n2);
    return q <= 32 ? (GS_SPAI_QR_BLOCK_BYTES / (256 / q)) & ~(int64_t)15 : GS_SPAI_QR_BLOCK_BYTES;
}
/* n1: |I_k| where GS_SPAI_N1_COUNTED, else -1. */
static inline GS_SPAI_HOST_DEVICE int gs_spai_route(int64_t n2, int64_t nc, int64_t n1,
                                                    int64_t qr_max)
{
    const int64_t rows = n1 >= 0 ? n1 : nc;
    const int qr = qr_max < 0 ? gs_spai_qr_bytes(n2, nc, rows) <= gs_spai_qr_capacity(n2)
                              : (double)rows * (double)(n2 + 1) <= (double)qr_max;
    if (qr) return GS_SPAI_ROUTE_QR;
    return n2 <= GS_SPAI_NE_MAX ? GS_SPAI_ROUTE_NE : GS_SPAI_ROUTE_CGLS;
}

/* n2 sizes from the pattern (row k of MT is J_k), and n1 sizes from I_k
 * built for every column that QR solves (AT = A^T gives the columns of A as
 * rows): the other routes never form I_k, so n1max is over QR's columns. */
void gs_spai_n2_sizes(const gs_csr *MT, gs_spai_sizes *sizes);
int gs_spai_n1_sizes(const gs_csr *AT, const gs_csr *MT, int64_t qr_max, gs_spai_sizes *sizes,
                     gs_error *err);

/* ---- spai_large.c: the columns QR does not take ---- */

/* A(:,a) . A(:,b) (rows of AT), summed over the common rows in ascending
 * order, products and sums rounded apart (no fused multiply-add, as
 * everywhere on the host: -ffp-contract=off): by a merge where the lists are within a
 * factor GS_SPAI_DOT_SEARCH in length, else by a binary search of the
 * longer for each entry of the shorter (the same sum: the CUDA setup
 * computes it the same way, to the bit). */
#define GS_SPAI_DOT_SEARCH 8
double gs_spai_column_dot(const gs_csr *AT, int32_t a, int32_t b);
/* The same product in GS_SPAI_DOT_CHUNKS fixed pieces, for the heavy
 * columns' Gram matrix (130k-entry lists: one thread a pair was the GPU's
 * bottleneck): the shorter list (a where the lengths tie) cut by position
 * into chunks c = [c la / C, (c + 1) la / C), each chunk's products over the
 * common rows summed in ascending order from 0, then the chunks' sums added
 * in chunk order from 0. The CUDA setup gives each chunk to a lane of a warp
 * and lane 0 adds them in the same order: the same bits on both engines. */
#define GS_SPAI_DOT_CHUNKS 32
double gs_spai_column_dot_chunked(const gs_csr *AT, int32_t a, int32_t b);

/* The heavy columns of A (at least gs_spai_heavy_min_length(n) entries:
 * max(GS_SPAI_HEAVY_MIN, n / GS_SPAI_HEAVY_FRACTION); the first
 * GS_SPAI_HEAVY_MAX of them) and their Gram matrix, computed once: a dense
 * column of A sits in the J of many columns, and their dot products would
 * otherwise cost O(n) each time. The Gram entries are
 * gs_spai_column_dot_chunked's (a warp a pair on the GPU, the same bits).
 * index[j]: j's place among them, or -1. */
#define GS_SPAI_HEAVY_MIN 1024
#define GS_SPAI_HEAVY_FRACTION 16
#define GS_SPAI_HEAVY_MAX 256
typedef struct gs_spai_heavy {
    int32_t count;
    int64_t min_length;
    int32_t *index; /* n */
    int32_t *cols;  /* count */
    double *gram;   /* count x count */
} gs_spai_heavy;
int64_t gs_spai_heavy_min_length(int32_t n);
int gs_spai_heavy_build(const gs_csr *AT, gs_spai_heavy *h, gs_error *err);
void gs_spai_heavy_free(gs_spai_heavy *h); /* zeroes h */

/* Results of the column solvers below. */
enum { GS_SPAI_NE_OK = 0, GS_SPAI_NE_REJECTED, GS_SPAI_NE_ZERO, GS_SPAI_NE_NOMEM };

/* Column k by the normal equations into m (n2 entries): G = (A^T A)(J,J)
 * (heavy pairs from h, which may be zeroed: none), c = A(k,J)^T, G = L L^T
 * with the pivot test, m = G^-1 c. work: n2 (n2 + 1) doubles.
 * GS_SPAI_NE_REJECTED: a pivot failed the test (m not written: solve by
 * QR); GS_SPAI_NE_ZERO: c = 0, row k is not in I_k. */
int gs_spai_ne_column(const gs_csr *AT, const gs_spai_heavy *h, int32_t k, const int32_t *J,
                      int32_t n2, double *m, double *work);
/* The factorisation and solve of gs_spai_ne_column, for the tests: g (n2 x
 * n2, row-major, lower triangle read) = L L^T in place, right-looking, each
 * entry's updates in ascending steps (the CUDA setup's order); d (n2) gets
 * the diagonal before. Returns 0, or 1 + the first pivot that failed. */
int gs_spai_ne_factor(double *g, double *d, int32_t n2);
/* x = (L L^T)^-1 x by columns (each step divides by the pivot, then updates
 * the rest): the order the CUDA setup's lanes take. */
void gs_spai_ne_solve(const double *l, int32_t n2, double *x);

/* Per-thread scratch of CGLS: dense r, q (n, kept zero outside I_k), the
 * rows of I_k, a marker, and p, s (n2). */
typedef struct gs_spai_cgls_work {
    double *r, *q, *p, *s;
    int32_t *rows;
    unsigned char *seen;
    size_t cap;
} gs_spai_cgls_work;
int gs_spai_cgls_work_init(gs_spai_cgls_work *w, int32_t n); /* 0, or -1: out of memory */
void gs_spai_cgls_work_free(gs_spai_cgls_work *w);
/* Column k by CGLS on Â = A(:,J) (never formed: its columns are rows of
 * AT) from m = 0: at most GS_SPAI_CGLS_MAXIT iterations, until ||Â^T r||
 * falls by GS_SPAI_CGLS_TOL. *iterations and *relres (||Â^T r|| / its
 * start) say how far it got. GS_SPAI_NE_ZERO: row k is not in I_k;
 * GS_SPAI_NE_NOMEM. */
int gs_spai_cgls_column(const gs_csr *AT, int32_t k, const int32_t *J, int32_t n2, double *m,
                        gs_spai_cgls_work *w, int *iterations, double *relres);

/* What the column solvers did, for the report (both engines fill it). */
typedef struct gs_spai_lsq_stats {
    int64_t qr, ne, ne_to_qr, cgls; /* columns by the method that solved them; ne_to_qr: those
                                       the normal equations sent to QR (also in qr) */
    int32_t heavy;                  /* heavy columns of A in the Gram cache */
    int cgls_iterations;            /* the most any CGLS column took */
    double cgls_relres;             /* the worst relative residual a CGLS column reached */
} gs_spai_lsq_stats;
void gs_spai_report_lsq(gs_pc *pc, const gs_spai_lsq_stats *st);

/* The least squares of every column: MT (n x n, pattern J_k in row k, with
 * room for values) gets in row k the m_k solving min ||Â_k m - e_k(I_k)||_2.
 * OpenMP over columns, each by its route (gs_spai_route with qr_max; stats
 * counts them). GS_ERR_NUMERIC naming the first failing column of M
 * (1-based) when Â_k is rank deficient (QR's test: the offending column of
 * A named: A(:,J_k) has dependent columns, so A is singular) or when row k
 * is not in I_k (m_k would be 0, leaving M singular). who prefixes the
 * message, hint ends it (how a larger pattern could be asked for). The
 * run's --time-limit stops it between columns (GS_ERR_TIME_LIMIT). */
int gs_spai_solve_columns(gs_pc *pc, const gs_csr *AT, gs_csr *MT, int64_t qr_max,
                          const char *who, const char *hint, gs_spai_lsq_stats *stats,
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
int gs_spai_finish(gs_pc *pc, const gs_csr *AT, gs_csr *MT, int64_t qr_max, gs_precision prec,
                   const char *who, const char *hint, const char *save_comment, gs_error *err);

/* Adds n1max, n2max, n2avg to the report. */
void gs_spai_report_sizes(gs_pc *pc, const gs_spai_sizes *sizes);

#endif
