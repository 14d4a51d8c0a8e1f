/* dense_cholesky.h - Cholesky factorisation and solve of a small dense SPD
 * matrix (the local systems A[P_i,P_i] w = e_m of FSAI, and any other small
 * SPD block). Plain row-oriented (Cholesky-Crout) reference code; the paper's
 * batched GPU kernel is in cuda/. Golub & Van Loan, Matrix Computations,
 * 4th ed., Alg. 4.2.1; Higham, Accuracy and Stability, ch. 10. */
#ifndef GS_DENSE_CHOLESKY_H
#define GS_DENSE_CHOLESKY_H

/* Bytes of gs_dense_cholesky_factor's workspace for an m x m matrix. */
#define GS_DENSE_CHOLESKY_WORK_BYTES(m) ((size_t)(m) * (4 * sizeof(double) + sizeof(int)) + 32)

/* Factor A = L L^T in place. a is m x m, row-major with leading dimension m;
 * only the lower triangle (a[i*m + j], j <= i) is read, and L overwrites it
 * (the strict upper triangle is left untouched). work: at least
 * GS_DENSE_CHOLESKY_WORK_BYTES(m) bytes, any alignment (rows of
 * L in blocks of four, transposed, and the envelope: the column of each row's
 * first nonzero, whose leading zeros the factorisation skips). L is the plain
 * row-oriented loop's to the last bit. Returns -1 when A is
 * positive definite, else the 0-based index of the first pivot that is not
 * positive (or not finite): the leading principal block of that size is not
 * positive definite, and a is left partly overwritten. */
int gs_dense_cholesky_factor(double *a, int m, void *work);

/* Solve L L^T x = b in place (x holds b on entry), with L from
 * gs_dense_cholesky_factor. */
void gs_dense_cholesky_solve(const double *l, int m, double *x);

/* x = (L L^T)^-1 e_m (the last column of A^-1: FSAI's local solve), with L
 * and work as gs_dense_cholesky_factor left them; the same x, bit for bit,
 * as gs_dense_cholesky_solve of e_m, in about half its operations. */
void gs_dense_cholesky_solve_last(const double *l, int m, const void *work, double *x);

#endif
