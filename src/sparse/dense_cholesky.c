/* dense_cholesky.c - small dense SPD Cholesky factor and solve (the local
 * systems of FSAI). Golub & Van Loan, 4th ed., Alg. 4.2.1, row-oriented;
 * envelope (profile) storage as in George & Liu, Computer Solution of Large
 * Sparse Positive Definite Systems, 1981, ch. 4. */
#include "dense_cholesky.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* 1 if d is no pivot: not positive or not finite (NaN fails here too). */
static int cholesky_bad_pivot(double d) { return !(d > 0.0) || !isfinite(d); }

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
    if (cholesky_bad_pivot(d)) return 1;
    li[i] = sqrt(d);
    return 0;
}

/* Four doubles, one a row of a block: every operation on it is the scalar
 * IEEE operation done four times (GCC and Clang vector extension: one AVX
 * instruction in the AVX2 clone below, two SSE2 ones otherwise), so the sums
 * round exactly as cholesky_entry's. Never passed by value (the ABI of a
 * 32-byte vector argument depends on AVX). */
typedef double v4d __attribute__((vector_size(32)));

/* The block's columns j..j+nc-1 (nc <= 8): nc vector sums, one a column,
 * side by side over k from k0, then the terms k = j..j+c-1 inside the
 * columns in order, and the division by l_{j+c,j+c}. */
static inline __attribute__((always_inline)) void cholesky_columns(double *const *row,
    const double *a, int m, int j, int k0, int nc, v4d *b)
{
    const double *l[8];
    v4d s[8];
#pragma GCC unroll 8
    for (int c = 0; c < nc; c++) {
        l[c] = a + (long)(j + c) * m;
        s[c] = (v4d){row[0][j + c], row[1][j + c], row[2][j + c], row[3][j + c]};
    }
    for (int k = k0; k < j; k++) {  /* the sums in registers: the c loop unrolled */
        const v4d bk = b[k];
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++) s[c] -= bk * (v4d){l[c][k], l[c][k], l[c][k], l[c][k]};
    }
    for (int c = 0; c < nc; c++) {
        for (int t = 0; t < c; t++) {
            const double y = l[c][j + t];
            s[c] -= b[j + t] * (v4d){y, y, y, y};
        }
        const double d = l[c][j + c];
        s[c] /= (v4d){d, d, d, d};
        b[j + c] = s[c];
        for (int r = 0; r < 4; r++) row[r][j + c] = s[c][r];
    }
}

/* Rows i..i+3 of L, columns below i (every column < i of L is final), eight
 * columns at a time. The block's entries so far are kept transposed in bt
 * (bt[4k + r] = l_{i+r,k}), so that one vector holds the four rows' terms of
 * a column and eight vector sums run side by side: the adders work on 32
 * entries an iteration instead of waiting on one sum's latency. Each sum
 * still runs k upwards from where the envelope lets it start (the columns'
 * or the block's rows: cholesky_envelope), then takes the terms inside the
 * eight columns in order: the same L to the last bit. Cloned for AVX2 where
 * the compiler can (chosen once at load time by the CPU's features). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
static void cholesky_four_rows(double *a, int m, const int *first, int i, double *bt,
                               double *tri)
{
    double *row[4] = {a + (long)i * m, a + (long)(i + 1) * m, a + (long)(i + 2) * m,
                      a + (long)(i + 3) * m};
    const int fb = min_int(min_int(first[i], first[i + 1]), min_int(first[i + 2], first[i + 3]));
    v4d *b = (v4d *)bt;
    int j = fb;
    for (; j + 8 <= i; j += 8) {
        int k0 = first[j];
        for (int c = 1; c < 8; c++) k0 = min_int(k0, first[j + c]);
        cholesky_columns(row, a, m, j, max_int(fb, k0), 8, b);
    }
    if (j < i) {
        int k0 = first[j];
        for (int c = j + 1; c < i; c++) k0 = min_int(k0, first[c]);
        cholesky_columns(row, a, m, j, max_int(fb, k0), i - j, b);
    }
    /* The block's own 4 x 4 triangle, its sums over k < i: with
     * b_k = (l_0k, l_1k, l_2k, l_3k) (rows i..i+3 as 0..3), the diagonal's
     * l_rk^2 are b_k * b_k, the pairs (1,0), (2,1), (3,2), (3,0) are b_k times
     * b_k rotated by one, (2,0), (3,1) by two: three vector sums instead of
     * ten scalar ones, in the same k order (cholesky_block_finish does the
     * rest). */
    v4d dg = {row[0][i], row[1][i + 1], row[2][i + 2], row[3][i + 3]};
    v4d s1 = {row[1][i], row[2][i + 1], row[3][i + 2], row[3][i]};
    v4d s2 = {row[2][i], row[3][i + 1], 0.0, 0.0};
    for (int k = fb; k < i; k++) {
        const v4d bk = b[k];
        dg -= bk * bk;
        s1 -= bk * (v4d){bk[1], bk[2], bk[3], bk[0]};
        s2 -= bk * (v4d){bk[2], bk[3], bk[0], bk[1]};
    }
    for (int r = 0; r < 4; r++) tri[r] = dg[r], tri[4 + r] = s1[r];
    tri[8] = s2[0], tri[9] = s2[1];
}

/* The triangle of rows i..i+3, columns i..i+3, from the sums over k < i in
 * tri (cholesky_four_rows): the terms k >= i in order, row by row, each
 * entry divided by its column's pivot, l_rr = sqrt(d_r). Returns the block
 * row (0..3) of the first pivot that fails, or -1. */
static int cholesky_block_finish(double *a, int m, int i, const double *tri)
{
    double *r0 = a + (long)i * m + i, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    if (cholesky_bad_pivot(tri[0])) return 0;
    r0[0] = sqrt(tri[0]);
    r1[0] = tri[4] / r0[0];                                         /* (1,0) */
    double d = tri[1] - r1[0] * r1[0];
    if (cholesky_bad_pivot(d)) return 1;
    r1[1] = sqrt(d);
    r2[0] = tri[8] / r0[0];                                         /* (2,0) */
    r2[1] = (tri[5] - r2[0] * r1[0]) / r1[1];                       /* (2,1) */
    d = tri[2] - r2[0] * r2[0];
    d -= r2[1] * r2[1];
    if (cholesky_bad_pivot(d)) return 2;
    r2[2] = sqrt(d);
    r3[0] = tri[7] / r0[0];                                         /* (3,0) */
    r3[1] = (tri[9] - r3[0] * r1[0]) / r1[1];                       /* (3,1) */
    double s = tri[6] - r3[0] * r2[0];                              /* (3,2) */
    s -= r3[1] * r2[1];
    r3[2] = s / r2[2];
    d = tri[3] - r3[0] * r3[0];
    d -= r3[1] * r3[1];
    d -= r3[2] * r3[2];
    if (cholesky_bad_pivot(d)) return 3;
    r3[3] = sqrt(d);
    return -1;
}

/* Rows in blocks of four: the part of a block left of its diagonal block and
 * the sums of its triangle by cholesky_four_rows, then the triangle row by
 * row (its entries depend on each other in order). A failing pivot is found in row order, as by the
 * unblocked loop. */
int gs_dense_cholesky_factor(double *a, int m, void *work)
{
    double *bt = (double *)(((uintptr_t)work + 31) & ~(uintptr_t)31); /* 4 m, v4d-aligned */
    int *first = (int *)(bt + 4L * m);                                /* m: the envelope */
    cholesky_envelope(a, m, first);
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        double tri[10];
        cholesky_four_rows(a, m, first, i, bt, tri);
        const int bad = cholesky_block_finish(a, m, i, tri);
        if (bad >= 0) return i + bad;
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

/* x = L^-T y, y = L^-1 e_m = (0, ..., 0, 1/l_mm): the forward substitution
 * of gs_dense_cholesky_solve with b = e_m gives exactly that (its sums are
 * of products with zeros), so it is skipped. Backward, column by column:
 * x_i /= l_ii, then x_k -= l_ik x_i for k < i, from the row's envelope on
 * (l_ik = 0 before it); the updates of one column are independent of each
 * other, so four at a time round as one at a time. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void gs_dense_cholesky_solve_last(const double *l, int m, const void *work, double *x)
{
    const double *bt = (const double *)(((uintptr_t)work + 31) & ~(uintptr_t)31);
    const int *first = (const int *)(bt + 4L * m);
    for (int i = 0; i < m - 1; i++) x[i] = 0.0;
    x[m - 1] = 1.0 / l[(long)(m - 1) * m + m - 1];
    for (int i = m - 1; i >= 0; i--) {                         /* x = L^T \ x */
        const double *li = l + (long)i * m;
        const double xi = x[i] / li[i];
        x[i] = xi;
        const v4d v = {xi, xi, xi, xi};
        int k = first[i];
        for (; k + 4 <= i; k += 4) {
            v4d xk, lk;
            memcpy(&xk, x + k, sizeof xk);
            memcpy(&lk, li + k, sizeof lk);
            xk -= lk * v;
            memcpy(x + k, &xk, sizeof xk);
        }
        for (; k < i; k++) x[k] -= li[k] * xi;
    }
}
