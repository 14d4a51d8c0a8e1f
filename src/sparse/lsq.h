/* lsq.h - min ||A x - b||_2 for a small dense matrix by Householder QR, the
 * local least-squares problem of every SPAI column (spai, gspai-opt).
 * Reference: Golub & Van Loan, Matrix Computations (4th ed.), Alg. 5.1.1
 * (Householder vector), 5.2.1 (Householder QR) and §5.3.3 (least squares). */
#ifndef GS_LSQ_H
#define GS_LSQ_H

/* A is m x n, column-major with leading dimension m, any m >= 0, n >= 1.
 * On exit A holds R (on and above the diagonal) and the Householder vectors
 * (below it), b holds Q^T b (its tail b[n..m-1] is the residual), and x (n
 * entries) solves R x = (Q^T b)[0..n-1].
 *
 * Rank: without column pivoting, column j is taken as dependent on columns
 * 0..j-1 when |r_jj| <= m * DBL_EPSILON * ||a_j||_2 (a_j the column as given).
 * Householder QR is column-wise backward stable, ||Δa_j|| <= γ(mn) ||a_j||
 * (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm 19.4),
 * so a pivot that small cannot be told from zero; m·ε sits between the
 * typical and the worst-case size of that error. The test is invariant
 * under column scaling (a column's scale only rescales x_j). A zero column,
 * and every column j >= m, is dependent.
 *
 * Returns 0 on success, or 1 + j for the first dependent column j (0-based):
 * then x is not written. Never prints, never allocates. */
int gs_lsq_solve(int m, int n, double *A, double *b, double *x);

#endif
