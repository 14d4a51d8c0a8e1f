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

/* Rows i..i+3 of L, columns below i (every column < i of L is final), two
 * columns j, j+1 at a time: eight independent sums, so the additions
 * overlap instead of waiting on each other (a single sum is bound by the
 * adder's latency, about 3 cycles an entry). k starts where the first of
 * the two columns or the last of the four rows leaves the envelope
 * (cholesky_envelope): the other products before that are zero too. */
static void cholesky_four_rows(double *a, int m, const int *first, int i)
{
    double *r0 = a + (long)i * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    const int fb = min_int(min_int(first[i], first[i + 1]), min_int(first[i + 2], first[i + 3]));
    int j = fb;
    for (; j + 1 < i; j += 2) {
        const double *lj = a + (long)j * m, *lk = lj + m;  /* rows j and j+1 */
        double s0 = r0[j], s1 = r1[j], s2 = r2[j], s3 = r3[j];
        double t0 = r0[j + 1], t1 = r1[j + 1], t2 = r2[j + 1], t3 = r3[j + 1];
        for (int k = max_int(fb, min_int(first[j], first[j + 1])); k < j; k++) {
            const double x = lj[k], y = lk[k];
            s0 -= r0[k] * x, s1 -= r1[k] * x, s2 -= r2[k] * x, s3 -= r3[k] * x;
            t0 -= r0[k] * y, t1 -= r1[k] * y, t2 -= r2[k] * y, t3 -= r3[k] * y;
        }
        const double djj = lj[j], y = lk[j], dkk = lk[j + 1];
        r0[j] = s0 / djj, r1[j] = s1 / djj, r2[j] = s2 / djj, r3[j] = s3 / djj;
        t0 -= r0[j] * y, t1 -= r1[j] * y, t2 -= r2[j] * y, t3 -= r3[j] * y; /* k = j */
        r0[j + 1] = t0 / dkk, r1[j + 1] = t1 / dkk;
        r2[j + 1] = t2 / dkk, r3[j + 1] = t3 / dkk;
    }
    for (; j < i; j++) {
        const double *lj = a + (long)j * m;
        const int k0 = max_int(fb, first[j]);
        r0[j] = cholesky_entry(r0, lj, k0, j), r1[j] = cholesky_entry(r1, lj, k0, j);
        r2[j] = cholesky_entry(r2, lj, k0, j), r3[j] = cholesky_entry(r3, lj, k0, j);
    }
}

/* Rows in blocks of four: the part of a block left of its diagonal block by
 * cholesky_four_rows, then the 4 x 4 triangle row by row (its entries depend
 * on each other in order). A failing pivot is found in row order, as by the
 * unblocked loop. */
int gs_dense_cholesky_factor(double *a, int m, int *first)
{
    cholesky_envelope(a, m, first);
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        cholesky_four_rows(a, m, first, i);
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
