/* spai_large.cu - the columns of static SPAI that Householder QR does not take,
 * on the GPU, as the CPU reference solves them (src/precond/spai_large.c):
 * the normal equations (A^T A)(J,J) m = A(k,J)^T by Cholesky, a warp a column,
 * and CGLS on Â kept sparse for the widest patterns, every such column at once.
 * Björck, Numerical Methods for Least Squares Problems (SIAM 1996), §2.2, §7.4.
 *
 * Normal equations: the Gram entries are the reference's sparse dot products
 * (gs_spai_column_dot: the common rows in ascending order, a merge or a search
 * of the longer list, products and sums rounded apart) or its heavy columns'
 * Gram matrix (the same rule picks the same columns); the Cholesky factor is
 * right-looking, each entry updated in ascending steps, and both
 * substitutions go by columns: every operation is the reference's, in its
 * order, so a column's m is the reference's to the bit.
 *
 * CGLS: the columns' local problems side by side as one block-diagonal
 * matrix B = diag(Â_c), never formed: q = B p takes row r of A (its columns
 * in order, those in J_c kept), s = B^T r row J_c[a] of A^T; per column
 * scalars, the dot products by one block each in a fixed order, so a run
 * gives the same bits every time (not the reference's: it scatters by
 * columns). A fixed number of sweeps between the host's looks at the
 * columns still running. */
#include <float.h>
#include <math.h>
#include <string.h>

#include <cub/cub.cuh>

#include "spai_cuda.h"
#include "spai_hooks.h"

#define FULL_MASK 0xffffffffu
#define NE_WARPS 4              /* columns (warps) a block of the normal equations */
#define CGLS_BLOCK 256          /* threads of the per-column reductions */
#define CGLS_CHECK_EVERY 25     /* sweeps between the host's looks at the active columns */
#define CGLS_SPREAD 64          /* blocks a column in the set-up kernels */

/* The sum over the common rows of a's entries [p0, p1) and b (ca, cb ascending; a the
 * shorter list, la its length), from 0, ascending: the reference's dot_piece, operation for
 * operation (a merge where lb <= GS_SPAI_DOT_SEARCH la, else a search of b; the same terms
 * in the same order either way). */
static __device__ double large_dot_piece(const int32_t *__restrict__ ca,
                                         const double *__restrict__ va, int64_t la,
                                         const int32_t *__restrict__ cb,
                                         const double *__restrict__ vb, int64_t lb, int64_t p0,
                                         int64_t p1)
{
    double s = 0.0;
    if (p0 >= p1) return s;
    int64_t q = gs_dlower_bound(cb, lb, ca[p0]);
    if (lb <= GS_SPAI_DOT_SEARCH * la) {
        for (int64_t p = p0; p < p1 && q < lb;) {
            const int32_t x = ca[p], y = cb[q];
            if (x == y) s = __dadd_rn(s, __dmul_rn(va[p], vb[q])), p++, q++;
            else if (x < y) p++;
            else q++;
        }
    } else {
        for (int64_t p = p0; p < p1; p++) {
            q += gs_dlower_bound(cb + q, lb - q, ca[p]);
            if (q < lb && cb[q] == ca[p]) s = __dadd_rn(s, __dmul_rn(va[p], vb[q]));
        }
    }
    return s;
}

/* A(:,a) . A(:,b): gs_spai_column_dot's sum, operation for operation. */
static __device__ double large_dot(const int64_t *__restrict__ rp, const int32_t *__restrict__ col,
                                   const double *__restrict__ val, int32_t a, int32_t b)
{
    int64_t a0 = rp[a], b0 = rp[b], la = rp[a + 1] - a0, lb = rp[b + 1] - b0;
    if (la > lb) {
        int64_t t = a0; a0 = b0, b0 = t;
        t = la; la = lb, lb = t;
    }
    const int32_t *ca = col + a0, *cb = col + b0;
    const double *va = val + a0, *vb = val + b0;
    double s = 0.0;
    if (lb <= GS_SPAI_DOT_SEARCH * la) {
        for (int64_t p = 0, q = 0; p < la && q < lb;) {
            const int32_t x = ca[p], y = cb[q];
            if (x == y) s = __dadd_rn(s, __dmul_rn(va[p], vb[q])), p++, q++;
            else if (x < y) p++;
            else q++;
        }
    } else {
        int64_t from = 0;
        for (int64_t p = 0; p < la; p++) {
            from += gs_dlower_bound(cb + from, lb - from, ca[p]);
            if (from < lb && cb[from] == ca[p]) s = __dadd_rn(s, __dmul_rn(va[p], vb[from]));
        }
    }
    return s;
}

/* a_kj (row j of AT is column j of A), 0 when not stored. */
static __device__ inline double large_entry(const int64_t *__restrict__ rp,
                                            const int32_t *__restrict__ col,
                                            const double *__restrict__ val, int32_t k, int32_t j)
{
    const int64_t start = rp[j], len = rp[j + 1] - start;
    const int64_t q = gs_dlower_bound(col + start, len, k);
    return q < len && col[start + q] == k ? val[start + q] : 0.0;
}

/* ----------------------------------------------------- heavy columns */

/* flag[j] = 1 where column j of A has at least min_length entries. */
__global__ void large_heavy_flag_kernel(int32_t n, const int64_t *__restrict__ rp, int64_t min_length,
                                        int64_t *__restrict__ flag)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) flag[j] = rp[j + 1] - rp[j] >= min_length;
}

/* index[j] = j's place among the first GS_SPAI_HEAVY_MAX heavy columns (pos:
 * exclusive scan of the flags), else -1; cols[place] = j. */
__global__ void large_heavy_index_kernel(int32_t n, const int64_t *__restrict__ flag,
                                         const int64_t *__restrict__ pos, int32_t *__restrict__ index,
                                         int32_t *__restrict__ cols)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const bool heavy = flag[j] && pos[j] < GS_SPAI_HEAVY_MAX;
    index[j] = heavy ? (int32_t)pos[j] : -1;
    if (heavy) cols[pos[j]] = (int32_t)j;
}

/* gram[a][b] = gram[b][a] = A(:,cols[a]) . A(:,cols[b]) (b <= a), a warp a pair:
 * gs_spai_column_dot_chunked, lane c summing chunk c of the shorter list (GS_SPAI_DOT_CHUNKS
 * = 32 chunks by position, as the reference cuts them), then every lane adding the 32
 * chunks' sums in chunk order from 0 (shuffles from lane 0 up): the reference's bits. A heavy
 * pair merges two lists of up to n entries; one thread a pair was the bordered matrices'
 * bottleneck (8 columns of 130k: 36 threads of 260k steps each). */
__global__ void large_heavy_gram_kernel(int32_t H, const int32_t *__restrict__ cols,
                                        const int64_t *__restrict__ rp, const int32_t *__restrict__ col,
                                        const double *__restrict__ val, double *__restrict__ gram)
{
    static_assert(GS_SPAI_DOT_CHUNKS == 32, "a lane a chunk");
    const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (t >= (int64_t)H * H) return; /* whole warps leave together */
    const int32_t a = (int32_t)(t / H), b = (int32_t)(t % H);
    if (b > a) return;
    const int32_t ja = cols[a], jb = cols[b];
    int64_t a0 = rp[ja], b0 = rp[jb], la = rp[ja + 1] - a0, lb = rp[jb + 1] - b0;
    if (la > lb) { /* a: the shorter list (a where they tie), as the reference's */
        int64_t x = a0; a0 = b0, b0 = x;
        x = la; la = lb, lb = x;
    }
    const double part = large_dot_piece(col + a0, val + a0, la, col + b0, val + b0, lb,
                                        lane * la / GS_SPAI_DOT_CHUNKS,
                                        (lane + 1) * la / GS_SPAI_DOT_CHUNKS);
    double d = 0.0;
    for (int c = 0; c < GS_SPAI_DOT_CHUNKS; c++) d = __dadd_rn(d, __shfl_sync(FULL_MASK, part, c));
    if (lane != 0) return;
    gram[(int64_t)a * H + b] = d;
    gram[(int64_t)b * H + a] = d;
}

void spai_heavy_free(gs_engine *e, spai_heavy *h)
{
    gs_cuda_free(e, h->index, ((size_t)h->n + 1) * sizeof(int32_t));
    gs_cuda_free(e, h->cols, GS_SPAI_HEAVY_MAX * sizeof(int32_t));
    gs_cuda_free(e, h->gram, (size_t)h->count * (size_t)h->count * sizeof(double) + 8);
    *h = spai_heavy{};
}

int spai_heavy_build(gs_engine *e, const gs_dcsr *AT, spai_heavy *h)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = AT->n;
    int64_t *flag = NULL, *pos = NULL;
    int status = GS_OK;
    *h = spai_heavy{};
    h->n = n;
    GS_TRY(gs_cuda_alloc(e, &h->index, ((size_t)n + 1) * sizeof(int32_t), "spai: heavy column index"));
    GS_TRY(gs_cuda_alloc(e, &h->cols, GS_SPAI_HEAVY_MAX * sizeof(int32_t), "spai: heavy columns"));
    GS_TRY(gs_cuda_alloc(e, &flag, ((size_t)n + 1) * sizeof(int64_t), "spai: heavy flags"));
    GS_TRY(gs_cuda_alloc(e, &pos, ((size_t)n + 1) * sizeof(int64_t), "spai: heavy places"));
    GS_TRY(CUDA_LAUNCH(&e->err, large_heavy_flag_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)AT->rp, gs_spai_heavy_min_length(n), flag));
    GS_TRY(gs_dscan_exclusive(e, flag, pos, n));
    GS_TRY(CUDA_LAUNCH(&e->err, large_heavy_index_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)flag, (const int64_t *)pos, h->index, h->cols));
    {
        int64_t heavy = 0;
        GS_TRY(gs_dread_int64(e, pos + n, &heavy));
        h->count = (int32_t)(heavy < GS_SPAI_HEAVY_MAX ? heavy : GS_SPAI_HEAVY_MAX);
    }
    GS_TRY(gs_cuda_alloc(e, &h->gram, (size_t)h->count * (size_t)h->count * sizeof(double) + 8,
                         "spai: heavy Gram matrix"));
    if (h->count > 0)
        GS_TRY(CUDA_LAUNCH(&e->err, large_heavy_gram_kernel,
                           gs_dblocks((int64_t)h->count * h->count, 4), 128, 0, c->stream,
                           h->count, (const int32_t *)h->cols, (const int64_t *)AT->rp,
                           (const int32_t *)AT->col, (const double *)AT->val, h->gram));
cleanup:
    gs_cuda_free(e, flag, ((size_t)n + 1) * sizeof(int64_t));
    gs_cuda_free(e, pos, ((size_t)n + 1) * sizeof(int64_t));
    return status;
}

/* ------------------------------------------------ normal equations */

typedef struct large_ne_args {
    const int64_t *at_rp;
    const int32_t *at_col;
    const double *at_val;
    const int64_t *mt_rp;
    const int32_t *mt_col;
    double *mt_val;
    const int32_t *heavy_index; /* n, -1: light */
    const double *gram;         /* H x H */
    int32_t H;
    int32_t *n1_out;            /* the columns here form no I_k: 0 */
    unsigned long long *fail;   /* the lowest failing column's key (spai_lsq.cu) */
    int32_t *rejected;          /* columns whose pivots failed the test, for QR */
    unsigned long long *n_rejected;
} large_ne_args;

static __device__ inline int64_t tri_at(int64_t i, int64_t l) { return i * (i + 1) / 2 + l; }

/* (A^T A)_{ja, jb}. */
static __device__ inline double large_gram_entry(const large_ne_args &A, int32_t ja, int32_t jb)
{
    const int32_t ha = A.heavy_index[ja], hb = A.heavy_index[jb];
    if (ha >= 0 && hb >= 0) return A.gram[(int64_t)ha * A.H + hb];
    return large_dot(A.at_rp, A.at_col, A.at_val, ja, jb);
}

/* Column k by one warp on workspace g (packed lower triangle of n2 (n2 + 1)
 * / 2, then d and x, n2 each). Returns false where the pivot test failed. */
static __device__ bool large_ne_column(const large_ne_args &A, int32_t k, double *g, int lane)
{
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    const int32_t *J = A.mt_col + p0;
    double *d = g + tri_at(n2, 0), *x = d + n2;
    const int64_t T = tri_at(n2, 0);
    for (int64_t t = lane; t < T; t += 32) {      /* G = (A^T A)(J,J), packed by rows */
        int32_t i = (int32_t)((sqrt(8.0 * (double)t + 1.0) - 1.0) / 2.0);
        while (tri_at(i + 1, 0) <= t) i++;
        while (tri_at(i, 0) > t) i--;
        g[t] = large_gram_entry(A, J[i], J[t - tri_at(i, 0)]);
    }
    bool any = false;
    for (int32_t a = lane; a < n2; a += 32) {     /* c = A(k,J)^T */
        x[a] = large_entry(A.at_rp, A.at_col, A.at_val, k, J[a]);
        any |= x[a] != 0.0;
    }
    if (!__any_sync(FULL_MASK, any)) {            /* row k misses A(:,J) */
        if (lane == 0) {
            A.n1_out[k] = 0;
            atomicMin(A.fail, ((unsigned long long)(uint32_t)k << 33) |
                                  ((unsigned long long)GS_SPAI_COLUMN_ZERO << 31));
        }
        return true;
    }
    __syncwarp();
    for (int32_t a = lane; a < n2; a += 32) d[a] = g[tri_at(a, a)];
    __syncwarp();
    for (int32_t j = 0; j < n2; j++) {            /* G = L L^T, right-looking */
        const double pivot = g[tri_at(j, j)];
        if (!(pivot > GS_SPAI_NE_PIVOT * d[j]) || !isfinite(pivot)) return false; /* uniform */
        const double ljj = sqrt(pivot);
        __syncwarp();
        if (lane == 0) g[tri_at(j, j)] = ljj;
        for (int32_t i = j + 1 + lane; i < n2; i += 32) g[tri_at(i, j)] = g[tri_at(i, j)] / ljj;
        __syncwarp();
        for (int32_t i = j + 1 + lane; i < n2; i += 32) { /* g_il -= l_ij l_lj, l <= i */
            const double lij = g[tri_at(i, j)];
            double *gi = g + tri_at(i, 0);
            for (int32_t l = j + 1; l <= i; l++) gi[l] = __dsub_rn(gi[l], __dmul_rn(lij, g[tri_at(l, j)]));
        }
        __syncwarp();
    }
    for (int32_t j = 0; j < n2; j++) {            /* L y = c, by columns */
        if (lane == 0) x[j] = x[j] / g[tri_at(j, j)];
        __syncwarp();
        const double xj = x[j];
        for (int32_t i = j + 1 + lane; i < n2; i += 32) x[i] = __dsub_rn(x[i], __dmul_rn(g[tri_at(i, j)], xj));
        __syncwarp();
    }
    for (int32_t j = n2 - 1; j >= 0; j--) {       /* L^T m = y, by rows of L */
        if (lane == 0) x[j] = x[j] / g[tri_at(j, j)];
        __syncwarp();
        const double xj = x[j];
        for (int32_t i = lane; i < j; i += 32) x[i] = __dsub_rn(x[i], __dmul_rn(g[tri_at(j, i)], xj));
        __syncwarp();
    }
    for (int32_t a = lane; a < n2; a += 32) A.mt_val[p0 + a] = x[a];
    if (lane == 0) A.n1_out[k] = 0; /* no I_k (a rejected column keeps the sizes pass's -1) */
    return true;
}

/* The columns list[0..count), a warp each in slots of slot_doubles, the
 * warps striding over them. */
__global__ void __launch_bounds__(32 * NE_WARPS)
    large_ne_kernel(int64_t count, const int32_t *__restrict__ list, int64_t slot_doubles,
                    double *slots, large_ne_args A)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    double *g = slots + warp * slot_doubles;
    for (int64_t i = warp; i < count; i += warps) {
        const int32_t k = list[i];
        if (!large_ne_column(A, k, g, lane) && lane == 0)
            A.rejected[atomicAdd(A.n_rejected, 1ull)] = k;
        __syncwarp();
    }
}

int spai_ne_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const spai_heavy *h,
                  const int32_t *list, int64_t count, int32_t n2max, int32_t *n1_out,
                  unsigned long long *fail, int32_t *rejected, int64_t *n_rejected)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    unsigned long long *d_count = NULL;
    double *slots = NULL;
    int64_t n_slots = 0;
    const int64_t slot_doubles = ((int64_t)n2max * (n2max + 1) / 2 + 2 * (int64_t)n2max + 1) & ~(int64_t)1;
    size_t free_bytes = 0, total_bytes = 0;
    int status = GS_OK;
    *n_rejected = 0;
    if (count <= 0) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaMemGetInfo(&free_bytes, &total_bytes)));
    {   /* a slot a warp, as many warps as a bounded budget allows (at most
         * 32 a multiprocessor: enough to hide the gathers' latency) */
        const size_t budget = free_bytes / 4 < ((size_t)1 << 30) ? free_bytes / 4 : ((size_t)1 << 30);
        n_slots = (int64_t)(budget / ((size_t)slot_doubles * sizeof(double)));
        const int64_t most = (int64_t)c->sm_count * 32;
        if (n_slots > most) n_slots = most;
        if (n_slots > count) n_slots = count;
        n_slots = (n_slots + NE_WARPS - 1) / NE_WARPS * NE_WARPS;
        if (n_slots < NE_WARPS) n_slots = NE_WARPS;
    }
    GS_TRY(gs_cuda_alloc(e, &slots, (size_t)(n_slots * slot_doubles) * sizeof(double),
                         "spai: normal-equation workspaces"));
    GS_TRY(gs_cuda_alloc(e, &d_count, sizeof(unsigned long long), "spai: rejected count"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_count, 0, sizeof(unsigned long long), c->stream)));
    {
        large_ne_args A;
        A.at_rp = AT->rp, A.at_col = AT->col, A.at_val = (const double *)AT->val;
        A.mt_rp = MT->rp, A.mt_col = MT->col, A.mt_val = (double *)MT->val;
        A.heavy_index = h->index, A.gram = h->gram, A.H = h->count;
        A.n1_out = n1_out, A.fail = fail, A.rejected = rejected, A.n_rejected = d_count;
        GS_TRY(CUDA_LAUNCH(&e->err, large_ne_kernel, (unsigned)(n_slots / NE_WARPS), 32 * NE_WARPS, 0,
                           c->stream, count, list, slot_doubles, slots, A));
    }
    GS_TRY(gs_dread_int64(e, (const int64_t *)d_count, n_rejected));
cleanup:
    gs_cuda_free(e, slots, (size_t)(n_slots * slot_doubles) * sizeof(double));
    gs_cuda_free(e, d_count, sizeof(unsigned long long));
    return status;
}

/* ------------------------------------------------------------- CGLS */

/* The batch's layout: column c of the batch (k = cols[c]) owns the
 * unknowns [xoff[c], xoff[c+1]) (its J) and the rows [roff[c], roff[c+1])
 * (its I_k in ascending order: rows[], and rowpos[c n + r] = the place of
 * row r, or -1); colpos[c n + j] = the place of j in J, or -1. */
typedef struct large_cgls {
    int32_t nb, n;
    const int32_t *cols;
    int64_t *xoff, *roff;
    int32_t *colpos, *rowpos, *rows, *rowcol; /* rowcol: each row's batch column */
    double *x, *p, *s, *r, *q;
    double *gamma, *gamma0;                   /* per column */
    int *active, *iterations;                 /* per column */
} large_cgls;

/* colpos[c n + J_c[a]] = a; mark[c n + r] = 1 for the rows of A(:,J_c). */
__global__ void cgls_mark_kernel(int32_t nb, int32_t n, const int32_t *__restrict__ cols,
                                 const int64_t *__restrict__ mt_rp, const int32_t *__restrict__ mt_col,
                                 const int64_t *__restrict__ at_rp, const int32_t *__restrict__ at_col,
                                 int32_t *__restrict__ colpos, int64_t *__restrict__ mark)
{
    const int32_t c = blockIdx.x / CGLS_SPREAD, b = blockIdx.x % CGLS_SPREAD;
    const int32_t k = cols[c];
    const int64_t p0 = mt_rp[k], n2 = mt_rp[k + 1] - p0;
    for (int64_t a = (int64_t)b * blockDim.x + threadIdx.x; a < n2;
         a += (int64_t)CGLS_SPREAD * blockDim.x) {
        const int32_t j = mt_col[p0 + a];
        colpos[(int64_t)c * n + j] = (int32_t)a;
        for (int64_t e = at_rp[j]; e < at_rp[j + 1]; e++) mark[(int64_t)c * n + at_col[e]] = 1;
    }
}

/* rowpos[c n + r]: r's place in I_c or -1, and rows[], rowcol[] of every
 * marked (c, r); pos: the exclusive scan of the marks over c n + r. */
__global__ void cgls_rows_kernel(int32_t nb, int32_t n, const int64_t *__restrict__ mark,
                                 const int64_t *__restrict__ pos, const int64_t *__restrict__ roff,
                                 int32_t *__restrict__ rowpos, int32_t *__restrict__ rows,
                                 int32_t *__restrict__ rowcol)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (int64_t)nb * n) return;
    const int32_t c = (int32_t)(t / n), r = (int32_t)(t % n);
    if (mark[t]) {
        rows[pos[t]] = r;
        rowcol[pos[t]] = c;
        rowpos[t] = (int32_t)(pos[t] - roff[c]);
    } else {
        rowpos[t] = -1;
    }
}

/* q = B p: row i of the batch (row r of A, column c): A's row r, its
 * columns in J_c. A warp a row. */
__global__ void cgls_Bp_kernel(int64_t m, large_cgls B, const int64_t *__restrict__ a_rp,
                               const int32_t *__restrict__ a_col, const double *__restrict__ a_val)
{
    const int lane = threadIdx.x & 31;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (i >= m) return;
    const int32_t c = B.rowcol[i], r = B.rows[i];
    if (!B.active[c]) return;
    const int32_t *cp = B.colpos + (int64_t)c * B.n;
    const double *p = B.p + B.xoff[c];
    double s = 0.0;
    for (int64_t e = a_rp[r] + lane; e < a_rp[r + 1]; e += 32) {
        const int32_t a = cp[a_col[e]];
        if (a >= 0) s = __dadd_rn(s, __dmul_rn(a_val[e], p[a]));
    }
    for (int o = 16; o > 0; o >>= 1) s = __dadd_rn(s, __shfl_xor_sync(FULL_MASK, s, o));
    if (lane == 0) B.q[i] = s;
}

/* s = B^T r: unknown a of column c: row J_c[a] of A^T, its rows in I_c (all
 * are). A warp an unknown; *ss of the column is summed by cgls_dot. */
__global__ void cgls_Btr_kernel(int64_t m, large_cgls B, const int32_t *__restrict__ xcol,
                                const int64_t *__restrict__ mt_rp, const int32_t *__restrict__ mt_col,
                                const int64_t *__restrict__ at_rp, const int32_t *__restrict__ at_col,
                                const double *__restrict__ at_val)
{
    const int lane = threadIdx.x & 31;
    const int64_t u = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (u >= m) return;
    const int32_t c = xcol[u];
    if (!B.active[c]) return;
    const int64_t a = u - B.xoff[c];
    const int32_t j = mt_col[mt_rp[B.cols[c]] + a];
    const int32_t *rp = B.rowpos + (int64_t)c * B.n;
    const double *r = B.r + B.roff[c];
    double s = 0.0;
    for (int64_t e = at_rp[j] + lane; e < at_rp[j + 1]; e += 32)
        s = __dadd_rn(s, __dmul_rn(at_val[e], r[rp[at_col[e]]]));
    for (int o = 16; o > 0; o >>= 1) s = __dadd_rn(s, __shfl_xor_sync(FULL_MASK, s, o));
    if (lane == 0) B.s[u] = s;
}

/* The block's sum of v[lo, hi) . w[lo, hi), in a fixed order. */
static __device__ double cgls_block_dot(const double *v, const double *w, int64_t lo, int64_t hi)
{
    __shared__ double part[CGLS_BLOCK / 32];
    double s = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s = __dadd_rn(s, __dmul_rn(v[i], w[i]));
    for (int o = 16; o > 0; o >>= 1) s = __dadd_rn(s, __shfl_xor_sync(FULL_MASK, s, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    double t = 0.0;
    for (int w2 = 0; w2 < CGLS_BLOCK / 32; w2++) t = __dadd_rn(t, part[w2]);
    __syncthreads();
    return t;
}

/* Start, a block a column: r = e_k(I), done by the caller's s = B^T r;
 * here gamma = gamma0 = s.s, p = s, x = 0. */
__global__ void __launch_bounds__(CGLS_BLOCK) cgls_start_kernel(large_cgls B)
{
    const int32_t c = blockIdx.x;
    const int64_t x0 = B.xoff[c], x1 = B.xoff[c + 1];
    const double g = cgls_block_dot(B.s, B.s, x0, x1);
    for (int64_t u = x0 + threadIdx.x; u < x1; u += blockDim.x) B.p[u] = B.s[u], B.x[u] = 0.0;
    if (threadIdx.x == 0) {
        B.gamma[c] = B.gamma0[c] = g;
        B.active[c] = g > 0.0;
        B.iterations[c] = 0;
    }
}

/* alpha = gamma / q.q; x += alpha p; r -= alpha q (a block a column). */
__global__ void __launch_bounds__(CGLS_BLOCK) cgls_step_kernel(large_cgls B)
{
    const int32_t c = blockIdx.x;
    if (!B.active[c]) return;
    const int64_t r0 = B.roff[c], r1 = B.roff[c + 1], x0 = B.xoff[c], x1 = B.xoff[c + 1];
    const double qq = cgls_block_dot(B.q, B.q, r0, r1);
    if (!(qq > 0.0)) {
        if (threadIdx.x == 0) B.active[c] = 0;
        return;
    }
    const double alpha = B.gamma[c] / qq;
    for (int64_t u = x0 + threadIdx.x; u < x1; u += blockDim.x) B.x[u] = __dadd_rn(B.x[u], __dmul_rn(alpha, B.p[u]));
    for (int64_t i = r0 + threadIdx.x; i < r1; i += blockDim.x) B.r[i] = __dsub_rn(B.r[i], __dmul_rn(alpha, B.q[i]));
}

/* gamma' = s.s, beta = gamma' / gamma, p = s + beta p; a column stops at
 * the tolerance or the iteration limit. */
__global__ void __launch_bounds__(CGLS_BLOCK) cgls_direction_kernel(large_cgls B)
{
    const int32_t c = blockIdx.x;
    if (!B.active[c]) return;
    const int64_t x0 = B.xoff[c], x1 = B.xoff[c + 1];
    const double g = cgls_block_dot(B.s, B.s, x0, x1);
    const double beta = g / B.gamma[c];
    for (int64_t u = x0 + threadIdx.x; u < x1; u += blockDim.x) B.p[u] = __dadd_rn(B.s[u], __dmul_rn(beta, B.p[u]));
    if (threadIdx.x == 0) {
        B.gamma[c] = g;
        const int it = ++B.iterations[c];
        if (it >= GS_SPAI_CGLS_MAXIT || !(g > GS_SPAI_CGLS_TOL * GS_SPAI_CGLS_TOL * B.gamma0[c]))
            B.active[c] = 0;
    }
}

/* r = e_k(I_k) (zero elsewhere: the caller zeroed r); a column whose row
 * k misses I_k records the reference's failure and never runs. */
__global__ void cgls_rhs_kernel(large_cgls B, unsigned long long *fail)
{
    const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= B.nb) return;
    const int32_t k = B.cols[c];
    const int32_t at = B.rowpos[(int64_t)c * B.n + k];
    if (at >= 0) B.r[B.roff[c] + at] = 1.0;
    else atomicMin(fail, ((unsigned long long)(uint32_t)k << 33) |
                             ((unsigned long long)GS_SPAI_COLUMN_ZERO << 31));
}

/* m_k = x, the columns' n1 = 0 (no I_k for the report), and the worst
 * relative residual and most iterations into words[0..1]. */
__global__ void cgls_finish_kernel(large_cgls B, const int64_t *__restrict__ mt_rp, double *mt_val,
                                   int32_t *n1_out, unsigned long long *words)
{
    const int32_t c = blockIdx.x;
    const int32_t k = B.cols[c];
    for (int64_t u = B.xoff[c] + threadIdx.x; u < B.xoff[c + 1]; u += blockDim.x)
        mt_val[mt_rp[k] + (u - B.xoff[c])] = B.x[u];
    if (threadIdx.x != 0) return;
    n1_out[k] = 0;
    const double rel = B.gamma0[c] > 0.0 ? sqrt(B.gamma[c] / B.gamma0[c]) : 0.0;
    atomicMax(&words[0], (unsigned long long)__double_as_longlong(rel)); /* rel >= 0: ordered bits */
    atomicMax(&words[1], (unsigned long long)B.iterations[c]);
}

/* *any = 1 when a column still runs. */
__global__ void cgls_any_kernel(int32_t nb, const int *__restrict__ active, int64_t *any)
{
    const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < nb && active[c]) *any = 1;
}

/* xoff/roff by column (counts then scans), the unknowns' columns. */
__global__ void cgls_counts_kernel(int32_t nb, const int32_t *__restrict__ cols,
                                   const int64_t *__restrict__ mt_rp, const int64_t *__restrict__ pos,
                                   int32_t n, int64_t *__restrict__ xoff, int64_t *__restrict__ roff)
{
    const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c > nb) return;
    if (c == nb) {
        roff[nb] = pos[(int64_t)nb * n];
        return;
    }
    xoff[c + 1] = mt_rp[cols[c] + 1] - mt_rp[cols[c]];
    if (c == 0) xoff[0] = 0;
    roff[c] = pos[(int64_t)c * n];
}

__global__ void cgls_xcol_kernel(int32_t nb, const int64_t *__restrict__ xoff, int32_t *__restrict__ xcol)
{
    const int32_t c = blockIdx.x / CGLS_SPREAD, b = blockIdx.x % CGLS_SPREAD;
    for (int64_t u = xoff[c] + (int64_t)b * blockDim.x + threadIdx.x; u < xoff[c + 1];
         u += (int64_t)CGLS_SPREAD * blockDim.x)
        xcol[u] = c;
}

/* One batch of nb columns: everything for it allocated here, freed at the end. */
static int cgls_batch(gs_engine *e, const gs_dcsr *A, const gs_dcsr *AT, gs_dcsr *MT,
                      const int32_t *cols, int32_t nb, int32_t *n1_out, unsigned long long *fail,
                      unsigned long long *words)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaStream_t s = c->stream;
    const int32_t n = AT->n;
    const int64_t cells = (int64_t)nb * n;
    large_cgls B = {};
    int64_t *mark64 = NULL, *pos = NULL, m_rows = 0, m_x = 0;
    int32_t *xcol = NULL;
    int64_t *any = NULL, running = 0;
    int status = GS_OK;
    B.nb = nb, B.n = n, B.cols = cols;
    GS_TRY(gs_cuda_alloc(e, &B.colpos, (size_t)cells * sizeof(int32_t), "spai: CGLS column places"));
    GS_TRY(gs_cuda_alloc(e, &B.rowpos, (size_t)cells * sizeof(int32_t), "spai: CGLS row places"));
    GS_TRY(gs_cuda_alloc(e, &mark64, ((size_t)cells + 1) * sizeof(int64_t), "spai: CGLS row marks"));
    GS_TRY(gs_cuda_alloc(e, &pos, ((size_t)cells + 1) * sizeof(int64_t), "spai: CGLS row scan"));
    GS_TRY(gs_cuda_alloc(e, &B.xoff, ((size_t)nb + 1) * sizeof(int64_t), "spai: CGLS unknowns"));
    GS_TRY(gs_cuda_alloc(e, &B.roff, ((size_t)nb + 1) * sizeof(int64_t), "spai: CGLS rows"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(B.colpos, 0xff, (size_t)cells * sizeof(int32_t), s)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(mark64, 0, ((size_t)cells + 1) * sizeof(int64_t), s)));
    {
        const unsigned grid = (unsigned)nb * CGLS_SPREAD;
        GS_TRY(CUDA_LAUNCH(&e->err, cgls_mark_kernel, grid, 128, 0, s, nb, n, cols,
                           (const int64_t *)MT->rp, (const int32_t *)MT->col, (const int64_t *)AT->rp,
                           (const int32_t *)AT->col, B.colpos, mark64));
    }
    GS_TRY(gs_dscan_exclusive(e, mark64, pos, cells));
    GS_TRY(CUDA_LAUNCH(&e->err, cgls_counts_kernel, gs_dblocks((int64_t)nb + 1, 128), 128, 0, s, nb,
                       cols, (const int64_t *)MT->rp, (const int64_t *)pos, n, B.xoff, B.roff));
    GS_TRY(gs_dscan_inclusive(e, B.xoff + 1, B.xoff + 1, nb));
    {
        const void *src[2] = {B.roff + nb, B.xoff + nb};
        const int len[2] = {1, 1};
        uint64_t w[2] = {0, 0};
        GS_TRY(gs_dread_words(e, 2, src, len, w));
        m_rows = (int64_t)w[0], m_x = (int64_t)w[1];
    }
    GS_TRY(gs_cuda_alloc(e, &B.rows, ((size_t)m_rows + 1) * sizeof(int32_t), "spai: CGLS rows of I"));
    GS_TRY(gs_cuda_alloc(e, &B.rowcol, ((size_t)m_rows + 1) * sizeof(int32_t), "spai: CGLS row columns"));
    GS_TRY(gs_cuda_alloc(e, &xcol, ((size_t)m_x + 1) * sizeof(int32_t), "spai: CGLS unknown columns"));
    GS_TRY(CUDA_LAUNCH(&e->err, cgls_rows_kernel, gs_dblocks(cells, 256), 256, 0, s, nb, n,
                       (const int64_t *)mark64, (const int64_t *)pos, (const int64_t *)B.roff,
                       B.rowpos, B.rows, B.rowcol));
    GS_TRY(CUDA_LAUNCH(&e->err, cgls_xcol_kernel, (unsigned)nb * CGLS_SPREAD, 256, 0, s, nb,
                       (const int64_t *)B.xoff, xcol));
    GS_TRY(gs_cuda_alloc(e, &B.x, ((size_t)m_x + 1) * sizeof(double), "spai: CGLS x"));
    GS_TRY(gs_cuda_alloc(e, &B.p, ((size_t)m_x + 1) * sizeof(double), "spai: CGLS p"));
    GS_TRY(gs_cuda_alloc(e, &B.s, ((size_t)m_x + 1) * sizeof(double), "spai: CGLS s"));
    GS_TRY(gs_cuda_alloc(e, &B.r, ((size_t)m_rows + 1) * sizeof(double), "spai: CGLS r"));
    GS_TRY(gs_cuda_alloc(e, &B.q, ((size_t)m_rows + 1) * sizeof(double), "spai: CGLS q"));
    GS_TRY(gs_cuda_alloc(e, &B.gamma, (size_t)nb * sizeof(double), "spai: CGLS gamma"));
    GS_TRY(gs_cuda_alloc(e, &B.gamma0, (size_t)nb * sizeof(double), "spai: CGLS gamma0"));
    GS_TRY(gs_cuda_alloc(e, &B.active, (size_t)nb * sizeof(int), "spai: CGLS active"));
    GS_TRY(gs_cuda_alloc(e, &B.iterations, (size_t)nb * sizeof(int), "spai: CGLS iterations"));
    GS_TRY(gs_cuda_alloc(e, &any, sizeof(int64_t), "spai: CGLS columns running"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(B.r, 0, ((size_t)m_rows + 1) * sizeof(double), s)));
    GS_TRY(CUDA_LAUNCH(&e->err, cgls_rhs_kernel, gs_dblocks(nb, 128), 128, 0, s, B, fail));
    {
        const unsigned gx = gs_dblocks(m_x, 8), gr = gs_dblocks(m_rows, 8);
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(B.active, 0xff, (size_t)nb * sizeof(int), s)));
        GS_TRY(CUDA_LAUNCH(&e->err, cgls_Btr_kernel, gx, 256, 0, s, m_x, B, (const int32_t *)xcol,
                           (const int64_t *)MT->rp, (const int32_t *)MT->col, (const int64_t *)AT->rp,
                           (const int32_t *)AT->col, (const double *)AT->val));
        GS_TRY(CUDA_LAUNCH(&e->err, cgls_start_kernel, (unsigned)nb, CGLS_BLOCK, 0, s, B));
        for (int it = 0; it < GS_SPAI_CGLS_MAXIT; it++) {
            GS_TRY(CUDA_LAUNCH(&e->err, cgls_Bp_kernel, gr, 256, 0, s, m_rows, B, (const int64_t *)A->rp,
                               (const int32_t *)A->col, (const double *)A->val));
            GS_TRY(CUDA_LAUNCH(&e->err, cgls_step_kernel, (unsigned)nb, CGLS_BLOCK, 0, s, B));
            GS_TRY(CUDA_LAUNCH(&e->err, cgls_Btr_kernel, gx, 256, 0, s, m_x, B, (const int32_t *)xcol,
                               (const int64_t *)MT->rp, (const int32_t *)MT->col, (const int64_t *)AT->rp,
                               (const int32_t *)AT->col, (const double *)AT->val));
            GS_TRY(CUDA_LAUNCH(&e->err, cgls_direction_kernel, (unsigned)nb, CGLS_BLOCK, 0, s, B));
            if ((it + 1) % CGLS_CHECK_EVERY == 0) { /* every column done: stop early */
                GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(any, 0, sizeof(int64_t), s)));
                GS_TRY(CUDA_LAUNCH(&e->err, cgls_any_kernel, gs_dblocks(nb, 128), 128, 0, s, nb,
                                   (const int *)B.active, any));
                GS_TRY(gs_dread_int64(e, any, &running));
                if (!running) break;
            }
        }
    }
    GS_TRY(CUDA_LAUNCH(&e->err, cgls_finish_kernel, (unsigned)nb, 128, 0, s, B, (const int64_t *)MT->rp,
                       (double *)MT->val, n1_out, words));
cleanup:
    gs_cuda_free(e, B.colpos, (size_t)cells * sizeof(int32_t));
    gs_cuda_free(e, B.rowpos, (size_t)cells * sizeof(int32_t));
    gs_cuda_free(e, mark64, ((size_t)cells + 1) * sizeof(int64_t));
    gs_cuda_free(e, pos, ((size_t)cells + 1) * sizeof(int64_t));
    gs_cuda_free(e, B.xoff, ((size_t)nb + 1) * sizeof(int64_t));
    gs_cuda_free(e, B.roff, ((size_t)nb + 1) * sizeof(int64_t));
    gs_cuda_free(e, B.rows, ((size_t)m_rows + 1) * sizeof(int32_t));
    gs_cuda_free(e, B.rowcol, ((size_t)m_rows + 1) * sizeof(int32_t));
    gs_cuda_free(e, xcol, ((size_t)m_x + 1) * sizeof(int32_t));
    gs_cuda_free(e, B.x, ((size_t)m_x + 1) * sizeof(double));
    gs_cuda_free(e, B.p, ((size_t)m_x + 1) * sizeof(double));
    gs_cuda_free(e, B.s, ((size_t)m_x + 1) * sizeof(double));
    gs_cuda_free(e, B.r, ((size_t)m_rows + 1) * sizeof(double));
    gs_cuda_free(e, B.q, ((size_t)m_rows + 1) * sizeof(double));
    gs_cuda_free(e, B.gamma, (size_t)nb * sizeof(double));
    gs_cuda_free(e, B.gamma0, (size_t)nb * sizeof(double));
    gs_cuda_free(e, B.active, (size_t)nb * sizeof(int));
    gs_cuda_free(e, B.iterations, (size_t)nb * sizeof(int));
    gs_cuda_free(e, any, sizeof(int64_t));
    return status;
}

int spai_cgls_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const int32_t *list, int64_t count,
                    int32_t *n1_out, unsigned long long *fail, gs_pc *pc, spai_lsq_report *rep,
                    gs_error *err)
{
    gs_dcsr A = {};
    unsigned long long *words = NULL;
    uint64_t w[2] = {0, 0};
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    /* A by rows, for q = B p */
    GS_TRY(gs_dcsr_transpose(e, AT, &A, 0));
    GS_TRY(gs_cuda_alloc(e, &words, 2 * sizeof(unsigned long long), "spai: CGLS record"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(words, 0, 2 * sizeof(unsigned long long),
                                              gs_cuda_of(e)->stream)));
    {   /* batches whose n-sized place maps stay within 512 MiB */
        const int64_t per = (int64_t)AT->n * 16 + 64;
        int64_t batch = ((int64_t)512 << 20) / per;
        if (batch < 1) batch = 1;
        for (int64_t b = 0; b < count; b += batch) {
            const int32_t nb = (int32_t)(count - b < batch ? count - b : batch);
            GS_TRY(cgls_batch(e, &A, AT, MT, list + b, nb, n1_out, fail, words));
            GS_TRY(gs_pc_deadline(pc, "least squares", err));
        }
    }
    {
        const void *src[1] = {words};
        const int len[1] = {2};
        GS_TRY(gs_dread_words(e, 1, src, len, w));
    }
    rep->stats.cgls = count;
    memcpy(&rep->stats.cgls_relres, &w[0], sizeof(double));
    rep->stats.cgls_iterations = (int)w[1];
cleanup:
    gs_cuda_free(e, words, 2 * sizeof(unsigned long long));
    gs_dcsr_free(e, &A);
    return status;
}

/* ----------------------------------------------------------- test hook */

extern "C" int gs_spai_cuda_hook_heavy_gram(gs_engine *e, const gs_csr *AT, int32_t *count,
                                            int32_t *cols, double *gram)
{
    gs_dcsr dAT = {};
    spai_heavy h = {};
    void *poison = NULL;
    const size_t poison_bytes = ((size_t)AT->n_rows + 1) * 64 + (size_t)GS_SPAI_HEAVY_MAX *
                                GS_SPAI_HEAVY_MAX * sizeof(double) + 4096;
    int status = GS_OK;
    GS_TRY(gs_dcsr_upload(e, AT, "spai hook", &dAT));
    /* NaN-filled memory freed just before the build allocates */
    GS_TRY(gs_cuda_alloc(e, &poison, poison_bytes, "hook: poison"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(poison, 0xFF, poison_bytes, gs_cuda_of(e)->stream)));
    gs_cuda_free(e, poison, poison_bytes);
    poison = NULL;
    GS_TRY(spai_heavy_build(e, &dAT, &h));
    *count = h.count;
    if (h.count > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(cols, h.cols, (size_t)h.count * sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, gs_cuda_of(e)->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(gram, h.gram,
                                                  (size_t)h.count * h.count * sizeof(double),
                                                  cudaMemcpyDeviceToHost, gs_cuda_of(e)->stream)));
    }
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
cleanup:
    if (gs_cuda_of(e)->stream)
        CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    gs_cuda_free(e, poison, poison_bytes);
    spai_heavy_free(e, &h);
    gs_dcsr_free(e, &dAT);
    return status;
}
