/* dense_cholesky.c - small dense SPD Cholesky factor and solve (the local
 * systems of FSAI). Golub & Van Loan, 4th ed., Alg. 4.2.1, row-oriented;
 * envelope (profile) storage as in George & Liu, Computer Solution of Large
 * Sparse Positive Definite Systems, 1981, ch. 4. */
#include "dense_cholesky.h"

#include <math.h>

/* The envelope: first[r] = the first column c <= r with a_rc != 0 (r when
 * there is none). Cholesky keeps it: l_rc = 0 exactly for c < first[r]
 * (George & Liu, Thm 4.1.1), so a product l_rk l_jk with
 * k < max(first[r], first[j]) is zero and every sum below skips it. Skipping
 * an exact zero term changes no sum (at most the sign of a zero), so L is the
 * unblocked, non-envelope loop's L value for value. */
static void cholesky_envelope(const double *a, int m, int *first)
{
    for (int r = 0; r < m; r++) {
        const double *ar = a + (long)r * m;
        int c = 0;
        while (c < r && ar[c] == 0.0) c++;
        first[r] = c;
    }
}

static int max_int(int x, int y) { return x > y ? x : y; }
static int min_int(int x, int y) { return x < y ? x : y; }

/* l_ij = (a_ij - sum_{k0<=k<j} l_ik l_jk) / l_jj, j < i. The sum runs k
 * upwards in every code path of this file, so the blocked and the plain
 * paths round alike. */
static double cholesky_entry(const double *li, const double *lj, int k0, int j)
{
    double s = li[j];
    for (int k = k0; k < j; k++) s -= li[k] * lj[k];
    return s / lj[j];
}

/* Row i of L, columns j0..i (columns < j0 already done), then its pivot
 *   l_ii = sqrt(a_ii - sum_{k<i} l_ik^2).
 * Returns 0, or 1 when the pivot is not positive or not finite. */
static int cholesky_row_tail(double *a, int m, const int *first, int i, int j0)
{
    double *li = a + (long)i * m;
    for (int j = max_int(j0, first[i]); j < i; j++)
        li[j] = cholesky_entry(li, a + (long)j * m, max_int(first[i], first[j]), j);
    double d = li[i];
    for (int k = first[i]; k < i; k++) d -= li[k] * li[k];
    if (!(d > 0.0) || !isfinite(d)) return 1; /* NaN fails here too */
    li[i] = sqrt(d);
    return 0;
}

/* Two doubles, one a row of a block: every operation on it is the scalar
 * IEEE operation done twice (GCC and Clang vector extension; SSE2 on x86-64,
 * NEON on aarch64), so the sums round exactly as cholesky_entry's. */
typedef double v2d __attribute__((vector_size(16)));

/* Rows i..i+3 of L, columns below i (every column < i of L is final), four
 * columns j..j+3 at a time. The block's entries so far are kept transposed
 * in bt (bt[4k + r] = l_{i+r,k}), so that one vector holds two rows' terms
 * of a column and eight vector sums run side by side: the adder works on 16
 * entries an iteration instead of waiting on one sum's latency. Each sum
 * still runs k upwards from where the envelope lets it start (columns j..j+3
 * or the block's rows: cholesky_envelope), then takes the terms k = j..j+2
 * inside the four columns in order: the same L to the last bit. */
static void cholesky_four_rows(double *a, int m, const int *first, int i, double *bt)
{
    double *row[4] = {a + (long)i * m, a + (long)(i + 1) * m, a + (long)(i + 2) * m,
                      a + (long)(i + 3) * m};
    const int fb = min_int(min_int(first[i], first[i + 1]), min_int(first[i + 2], first[i + 3]));
    v2d *b = (v2d *)bt; /* b[2k]: rows i, i+1 of column k; b[2k+1]: rows i+2, i+3 */
    int j = fb;
    for (; j + 3 < i; j += 4) {
        const double *l0 = a + (long)j * m, *l1 = l0 + m, *l2 = l1 + m, *l3 = l2 + m;
        const int k0 = max_int(fb, min_int(min_int(first[j], first[j + 1]),
                                           min_int(first[j + 2], first[j + 3])));
        v2d s[4][2];
        for (int c = 0; c < 4; c++) {
            s[c][0] = (v2d){row[0][j + c], row[1][j + c]};
            s[c][1] = (v2d){row[2][j + c], row[3][j + c]};
        }
        for (int k = k0; k < j; k++) {
            const v2d lo = b[2 * k], hi = b[2 * k + 1];
            const v2d x0 = {l0[k], l0[k]}, x1 = {l1[k], l1[k]};
            const v2d x2 = {l2[k], l2[k]}, x3 = {l3[k], l3[k]};
            s[0][0] -= lo * x0, s[0][1] -= hi * x0, s[1][0] -= lo * x1, s[1][1] -= hi * x1;
            s[2][0] -= lo * x2, s[2][1] -= hi * x2, s[3][0] -= lo * x3, s[3][1] -= hi * x3;
        }
        const double *lc[4] = {l0, l1, l2, l3};
        for (int c = 0; c < 4; c++) {         /* k = j..j+c-1, then / l_{j+c,j+c} */
            for (int t = 0; t < c; t++) {
                const v2d y = {lc[c][j + t], lc[c][j + t]};
                s[c][0] -= b[2 * (j + t)] * y, s[c][1] -= b[2 * (j + t) + 1] * y;
            }
            const v2d d = {lc[c][j + c], lc[c][j + c]};
            s[c][0] /= d, s[c][1] /= d;
            b[2 * (j + c)] = s[c][0], b[2 * (j + c) + 1] = s[c][1];
            row[0][j + c] = s[c][0][0], row[1][j + c] = s[c][0][1];
            row[2][j + c] = s[c][1][0], row[3][j + c] = s[c][1][1];
        }
    }
    for (; j < i; j++) {
        const double *lj = a + (long)j * m;
        const int k0 = max_int(fb, first[j]);
        for (int r = 0; r < 4; r++) row[r][j] = cholesky_entry(row[r], lj, k0, j);
    }
}

/* Rows in blocks of four: the part of a block left of its diagonal block by
 * cholesky_four_rows, then the 4 x 4 triangle row by row (its entries depend
 * on each other in order). A failing pivot is found in row order, as by the
 * unblocked loop. */
int gs_dense_cholesky_factor(double *a, int m, void *work)
{
    double *bt = work;                  /* 4 m doubles: cholesky_four_rows */
    int *first = (int *)(bt + 4L * m);  /* m ints: the envelope */
    cholesky_envelope(a, m, first);
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        cholesky_four_rows(a, m, first, i, bt);
        for (int r = 0; r < 4; r++)
            if (cholesky_row_tail(a, m, first, i + r, i)) return i + r;
    }
    for (; i < m; i++)
        if (cholesky_row_tail(a, m, first, i, 0)) return i;
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
