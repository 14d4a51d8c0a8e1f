/* lsq.c - dense least squares min ||A x - b||_2 by Householder QR.
 * Golub & Van Loan, Matrix Computations (4th ed.), Alg. 5.1.1, 5.2.1, §5.3.3. */
#include "lsq.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* ||x||_2 with scaling, so entries near the overflow threshold still work. */
static double norm2(int len, const double *x)
{
    double scale = 0, sum = 1;
    for (int i = 0; i < len; i++) {
        double a = fabs(x[i]);
        if (a == 0) continue;
        if (a > scale) {
            sum = 1 + sum * (scale / a) * (scale / a);
            scale = a;
        } else {
            sum += (a / scale) * (a / scale);
        }
    }
    return scale * sqrt(sum);
}

/* y = (I - tau v v^T) y with v = (1, v[1..len-1]). */
static void reflect(int len, const double *v, double tau, double *y)
{
    double s = y[0];
    for (int i = 1; i < len; i++) s += v[i] * y[i];          /* s = v^T y   */
    s *= tau;
    y[0] -= s;
    for (int i = 1; i < len; i++) y[i] -= s * v[i];          /* y -= s v    */
}

/* Householder vector of x = A(j:m-1, j) (LAPACK dlarfg's convention): on
 * exit x = (beta, v[1..]) with H x = beta e_1, H = I - tau v v^T. */
static double householder(int len, double *x, double *beta)
{
    double alpha = x[0];
    double xnorm = len > 1 ? norm2(len - 1, x + 1) : 0.0;
    if (xnorm == 0) {                                        /* already e_1-aligned */
        *beta = alpha;
        return 0.0;
    }
    double b = -copysign(hypot(alpha, xnorm), alpha);        /* beta = -sign(a) ||x|| */
    double scale = 1.0 / (alpha - b);
    for (int i = 1; i < len; i++) x[i] *= scale;             /* v = x / (alpha - beta) */
    *beta = b;
    x[0] = b;
    return (b - alpha) / b;                                  /* tau */
}

int gs_lsq_solve(int m, int n, double *A, double *b, double *x)
{
    for (int j = 0; j < n; j++) {                            /* A = Q R, b <- Q^T b */
        if (j >= m) return 1 + j;                            /* more unknowns than rows */
        double *aj = A + (size_t)j * m;
        /* H_0..H_{j-1} are orthogonal: column j still has its original norm. */
        double column_norm = norm2(m, aj);
        double r_jj;
        double tau = householder(m - j, aj + j, &r_jj);
        if (!(fabs(r_jj) > (double)m * DBL_EPSILON * column_norm)) return 1 + j;
        for (int k = j + 1; k < n; k++) reflect(m - j, aj + j, tau, A + (size_t)k * m + j);
        reflect(m - j, aj + j, tau, b + j);
    }
    for (int j = n - 1; j >= 0; j--) {                       /* x = R \ (Q^T b)(0:n-1) */
        double s = b[j];
        for (int k = j + 1; k < n; k++) s -= A[(size_t)k * m + j] * x[k];
        x[j] = s / A[(size_t)j * m + j];
    }
    return 0;
}
