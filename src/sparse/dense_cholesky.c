/* dense_cholesky.c - small dense SPD Cholesky factor and solve (the local
 * systems of FSAI). Golub & Van Loan, 4th ed., Alg. 4.2.1, row-oriented. */
#include "dense_cholesky.h"

#include <math.h>

/* Row i of L from rows 0..i-1 (contiguous in memory: the inner loops are
 * dot products of two rows):
 *   l_ij = (a_ij - sum_{k<j} l_ik l_jk) / l_jj    j < i
 *   l_ii = sqrt(a_ii - sum_{k<i} l_ik^2)                           */
int gs_dense_cholesky_factor(double *a, int m)
{
    for (int i = 0; i < m; i++) {
        double *li = a + (long)i * m;
        for (int j = 0; j < i; j++) {
            const double *lj = a + (long)j * m;
            double s = li[j];
            for (int k = 0; k < j; k++) s -= li[k] * lj[k];
            li[j] = s / lj[j];
        }
        double d = li[i];
        for (int k = 0; k < i; k++) d -= li[k] * li[k];
        if (!(d > 0.0) || !isfinite(d)) return i; /* NaN fails here too */
        li[i] = sqrt(d);
    }
    return -1;
}

void gs_dense_cholesky_solve(const double *l, int m, double *x)
{
    for (int i = 0; i < m; i++) {                              /* x = L \ x */
        const double *li = l + (long)i * m;
        double s = x[i];
        for (int k = 0; k < i; k++) s -= li[k] * x[k];
        x[i] = s / li[i];
    }
    for (int i = m - 1; i >= 0; i--) {                         /* x = L^T \ x */
        x[i] /= l[(long)i * m + i];
        const double *li = l + (long)i * m;
        for (int k = 0; k < i; k++) x[k] -= li[k] * x[i];
    }
}
