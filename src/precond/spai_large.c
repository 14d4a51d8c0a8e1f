/* spai_large.c - the local least-squares problems of static SPAI too large
 * for a dense Householder QR: the normal equations (Â^T Â) m = Â^T e_k,
 * whose matrix is (A^T A)(J,J) formed by sparse dot products of A's columns
 * (never Â itself), factored by Cholesky; and CGLS on Â kept sparse where J
 * is too wide even for that. Björck, Numerical Methods for Least Squares
 * Problems (SIAM 1996), §2.2 (normal equations; their error grows as
 * κ(Â)^2 u) and §7.4 (CGLS); Higham, Accuracy and Stability of Numerical
 * Algorithms (2nd ed.), §20.4.
 *
 * Why the normal equations are (A^T A)(J,J): I_k holds every row where a
 * column of A(:,J) has an entry, so (Â^T Â)_ab = A(:,J_a) . A(:,J_b) over
 * all rows, and Â^T e_k(I_k) = A(k,J)^T (zero when row k misses I_k). The
 * cost of a column is its n2^2 / 2 sparse dot products and n2^3 / 3 flops,
 * whatever |I_k|: a dense row of A adds one short entry to each column's
 * list, a dense column of A is one heavy list whose dot products with the
 * other heavy lists are computed once (gs_spai_heavy). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spai_common.h"

/* Entries of sorted a[0..len) below key. */
static int64_t lower_bound(const int32_t *a, int64_t len, int32_t key)
{
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Two columns of A as lists (rows ascending), a the shorter (a where they tie). */
typedef struct dot_lists {
    const int32_t *ca, *cb;
    const double *va, *vb;
    int64_t la, lb;
} dot_lists;

static dot_lists dot_lists_of(const gs_csr *AT, int32_t a, int32_t b)
{
    const int64_t a0 = AT->row_ptr[a], b0 = AT->row_ptr[b];
    const int64_t la = AT->row_ptr[a + 1] - a0, lb = AT->row_ptr[b + 1] - b0;
    dot_lists d = {AT->col + a0, AT->col + b0, AT->val + a0, AT->val + b0, la, lb};
    if (la > lb) {
        d.ca = AT->col + b0, d.cb = AT->col + a0, d.va = AT->val + b0, d.vb = AT->val + a0;
        d.la = lb, d.lb = la;
    }
    return d;
}

/* sum of va[p] vb[q] over the common rows of a's entries [p0, p1) and b, ascending, from
 * 0: a merge where the lists are of like length, else a search of the longer one for each
 * entry of the shorter (the same terms in the same order, so the same sum either way). */
static double dot_piece(const dot_lists *d, int64_t p0, int64_t p1)
{
    double s = 0.0;
    if (p0 >= p1) return s;
    int64_t q = lower_bound(d->cb, d->lb, d->ca[p0]);
    if (d->lb <= GS_SPAI_DOT_SEARCH * d->la) {
        for (int64_t p = p0; p < p1 && q < d->lb;) {
            if (d->ca[p] == d->cb[q]) s += d->va[p] * d->vb[q], p++, q++;
            else if (d->ca[p] < d->cb[q]) p++;
            else q++;
        }
    } else {
        for (int64_t p = p0; p < p1; p++) {
            q += lower_bound(d->cb + q, d->lb - q, d->ca[p]);
            if (q < d->lb && d->cb[q] == d->ca[p]) s += d->va[p] * d->vb[q];
        }
    }
    return s;
}

double gs_spai_column_dot(const gs_csr *AT, int32_t a, int32_t b)
{
    const dot_lists d = dot_lists_of(AT, a, b);
    return dot_piece(&d, 0, d.la);
}

double gs_spai_column_dot_chunked(const gs_csr *AT, int32_t a, int32_t b)
{
    const dot_lists d = dot_lists_of(AT, a, b);
    double s = 0.0;
    for (int64_t c = 0; c < GS_SPAI_DOT_CHUNKS; c++) /* a lane's piece each on the GPU */
        s += dot_piece(&d, c * d.la / GS_SPAI_DOT_CHUNKS, (c + 1) * d.la / GS_SPAI_DOT_CHUNKS);
    return s;
}

int64_t gs_spai_heavy_min_length(int32_t n)
{
    const int64_t rule = (int64_t)n / GS_SPAI_HEAVY_FRACTION;
    return rule > GS_SPAI_HEAVY_MIN ? rule : GS_SPAI_HEAVY_MIN;
}

void gs_spai_heavy_free(gs_spai_heavy *h)
{
    free(h->index);
    free(h->cols);
    free(h->gram);
    memset(h, 0, sizeof *h);
}

int gs_spai_heavy_build(const gs_csr *AT, gs_spai_heavy *h, gs_error *err)
{
    const int32_t n = AT->n_rows;
    memset(h, 0, sizeof *h);
    h->min_length = gs_spai_heavy_min_length(n);
    h->index = gs_malloc((size_t)n * sizeof *h->index + 1, "spai: heavy column index", err);
    h->cols = gs_malloc(GS_SPAI_HEAVY_MAX * sizeof *h->cols, "spai: heavy columns", err);
    if (!h->index || !h->cols) goto nomem;
    for (int32_t j = 0; j < n; j++) { /* the first GS_SPAI_HEAVY_MAX long columns */
        h->index[j] = -1;
        if (h->count < GS_SPAI_HEAVY_MAX && AT->row_ptr[j + 1] - AT->row_ptr[j] >= h->min_length)
            h->index[j] = h->count, h->cols[h->count++] = j;
    }
    const int32_t H = h->count;
    h->gram = gs_malloc((size_t)H * (size_t)H * sizeof *h->gram + 1, "spai: heavy Gram matrix", err);
    if (!h->gram) goto nomem;
#pragma omp parallel for schedule(dynamic, 1)
    for (int32_t a = 0; a < H; a++)
        for (int32_t b = 0; b <= a; b++)
            h->gram[(size_t)a * H + b] = h->gram[(size_t)b * H + a] =
                gs_spai_column_dot_chunked(AT, h->cols[a], h->cols[b]);
    return GS_OK;
nomem:
    gs_spai_heavy_free(h);
    return GS_ERR_NOMEM;
}

/* (A^T A)_{ja, jb}: from the heavy Gram matrix where both are there. */
static double gram_entry(const gs_csr *AT, const gs_spai_heavy *h, int32_t ja, int32_t jb)
{
    const int32_t ha = h->index ? h->index[ja] : -1, hb = h->index ? h->index[jb] : -1;
    if (ha >= 0 && hb >= 0) return h->gram[(size_t)ha * h->count + hb];
    return gs_spai_column_dot(AT, ja, jb);
}

/* a_kj, 0 when not stored (row j of AT is column j of A). */
static double entry_of(const gs_csr *AT, int32_t k, int32_t j)
{
    const int64_t start = AT->row_ptr[j], len = AT->row_ptr[j + 1] - start;
    const int64_t q = lower_bound(AT->col + start, len, k);
    return q < len && AT->col[start + q] == k ? AT->val[start + q] : 0.0;
}

int gs_spai_ne_factor(double *g, double *d, int32_t n2)
{
    for (int32_t j = 0; j < n2; j++) d[j] = g[(size_t)j * n2 + j];
    for (int32_t j = 0; j < n2; j++) { /* right-looking: g = L L^T, lower triangle */
        double *gj = g + (size_t)j * n2;
        const double pivot = gj[j];
        if (!(pivot > GS_SPAI_NE_PIVOT * d[j]) || !isfinite(pivot)) return j + 1;
        const double ljj = sqrt(pivot);
        gj[j] = ljj;
        for (int32_t i = j + 1; i < n2; i++) g[(size_t)i * n2 + j] /= ljj; /* l_ij */
        for (int32_t i = j + 1; i < n2; i++) {                             /* g_il -= l_ij l_lj */
            double *gi = g + (size_t)i * n2;
            const double lij = gi[j];
            for (int32_t l = j + 1; l <= i; l++) gi[l] -= lij * g[(size_t)l * n2 + j];
        }
    }
    return 0;
}

void gs_spai_ne_solve(const double *l, int32_t n2, double *x)
{
    for (int32_t j = 0; j < n2; j++) { /* L y = c, by columns */
        x[j] /= l[(size_t)j * n2 + j];
        for (int32_t i = j + 1; i < n2; i++) x[i] -= l[(size_t)i * n2 + j] * x[j];
    }
    for (int32_t j = n2 - 1; j >= 0; j--) { /* L^T m = y, by rows of L */
        x[j] /= l[(size_t)j * n2 + j];
        for (int32_t i = 0; i < j; i++) x[i] -= l[(size_t)j * n2 + i] * x[j];
    }
}

int gs_spai_ne_column(const gs_csr *AT, const gs_spai_heavy *h, int32_t k, const int32_t *J,
                      int32_t n2, double *m, double *work)
{
    double *g = work, *d = work + (size_t)n2 * n2;
    int any = 0;
    for (int32_t a = 0; a < n2; a++) {
        for (int32_t b = 0; b <= a; b++) g[(size_t)a * n2 + b] = gram_entry(AT, h, J[a], J[b]);
        m[a] = entry_of(AT, k, J[a]); /* (Â^T e_k)_a = a_{k, J_a} */
        any |= m[a] != 0.0;
    }
    if (!any) return GS_SPAI_NE_ZERO;  /* row k misses A(:,J): e_k(I) = 0 */
    if (gs_spai_ne_factor(g, d, n2)) return GS_SPAI_NE_REJECTED;
    gs_spai_ne_solve(g, n2, m);
    return GS_SPAI_NE_OK;
}

/* ---------------------------------------------------------------- CGLS */

int gs_spai_cgls_work_init(gs_spai_cgls_work *w, int32_t n)
{
    memset(w, 0, sizeof *w);
    w->r = calloc((size_t)n + 1, sizeof *w->r);
    w->q = calloc((size_t)n + 1, sizeof *w->q);
    w->rows = malloc(((size_t)n + 1) * sizeof *w->rows);
    w->seen = calloc((size_t)n + 1, 1);
    return w->r && w->q && w->rows && w->seen ? 0 : -1;
}

void gs_spai_cgls_work_free(gs_spai_cgls_work *w)
{
    free(w->r), free(w->q), free(w->rows), free(w->seen), free(w->p), free(w->s);
    memset(w, 0, sizeof *w);
}

/* s = Â^T r: s_a = A(:,J_a) . r in ascending rows; returns s . s. */
static double cgls_At(const gs_csr *AT, const int32_t *J, int32_t n2, const double *r, double *s)
{
    double ss = 0.0;
    for (int32_t a = 0; a < n2; a++) {
        double v = 0.0;
        for (int64_t p = AT->row_ptr[J[a]]; p < AT->row_ptr[J[a] + 1]; p++)
            v += AT->val[p] * r[AT->col[p]];
        s[a] = v;
        ss += v * v;
    }
    return ss;
}

int gs_spai_cgls_column(const gs_csr *AT, int32_t k, const int32_t *J, int32_t n2, double *m,
                        gs_spai_cgls_work *w, int *iterations, double *relres)
{
    int64_t n1 = 0;
    *iterations = 0, *relres = 0.0;
    if ((size_t)n2 > w->cap) {
        free(w->p), free(w->s);
        w->p = malloc(((size_t)n2 + 1) * sizeof *w->p);
        w->s = malloc(((size_t)n2 + 1) * sizeof *w->s);
        w->cap = w->p && w->s ? (size_t)n2 : 0;
        if (!w->cap) return GS_SPAI_NE_NOMEM;
    }
    for (int32_t a = 0; a < n2; a++) /* I_k: the rows the residual lives on */
        for (int64_t p = AT->row_ptr[J[a]]; p < AT->row_ptr[J[a] + 1]; p++)
            if (!w->seen[AT->col[p]]) w->seen[AT->col[p]] = 1, w->rows[n1++] = AT->col[p];
    const int in_I = w->seen[k];
    for (int64_t i = 0; i < n1; i++) w->seen[w->rows[i]] = 0;
    if (!in_I) return GS_SPAI_NE_ZERO;
    double *p = w->p, *s = w->s, *r = w->r, *q = w->q;
    r[k] = 1.0;                                           /* r = e_k - Â m, m = 0 */
    double gamma = cgls_At(AT, J, n2, r, s);
    const double gamma0 = gamma;
    for (int32_t a = 0; a < n2; a++) m[a] = 0.0, p[a] = s[a];
    int it = 0;
    while (it < GS_SPAI_CGLS_MAXIT && gamma > GS_SPAI_CGLS_TOL * GS_SPAI_CGLS_TOL * gamma0) {
        for (int32_t a = 0; a < n2; a++)                  /* q = Â p, by columns */
            for (int64_t e = AT->row_ptr[J[a]]; e < AT->row_ptr[J[a] + 1]; e++)
                q[AT->col[e]] += AT->val[e] * p[a];
        double qq = 0.0;
        for (int64_t i = 0; i < n1; i++) qq += q[w->rows[i]] * q[w->rows[i]];
        if (!(qq > 0.0)) {
            for (int64_t i = 0; i < n1; i++) q[w->rows[i]] = 0.0; /* kept zero outside a column */
            break;
        }
        const double alpha = gamma / qq;
        for (int32_t a = 0; a < n2; a++) m[a] += alpha * p[a];
        for (int64_t i = 0; i < n1; i++) {
            const int32_t row = w->rows[i];
            r[row] -= alpha * q[row];
            q[row] = 0.0;
        }
        const double gamma_new = cgls_At(AT, J, n2, r, s);
        const double beta = gamma_new / gamma;
        for (int32_t a = 0; a < n2; a++) p[a] = s[a] + beta * p[a];
        gamma = gamma_new;
        it++;
    }
    for (int64_t i = 0; i < n1; i++) r[w->rows[i]] = 0.0;
    *iterations = it;
    *relres = gamma0 > 0.0 ? sqrt(gamma / gamma0) : 0.0;
    return GS_SPAI_NE_OK;
}
