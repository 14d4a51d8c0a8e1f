/* spai_lsq.cu - the batched column least squares of static SPAI on the GPU,
 * written once for spai (CW-SPAI) and gspai-opt: for every column k of M with
 * pattern J_k, I_k = union of the row patterns of A(:,J_k), Â_k = A(I_k,J_k),
 * Householder QR Â_k = Q_k R_k, R_k m = (Q_k^T e_k)(1:n2_k), m scattered into
 * row k of MT. Grote & Huckle, SIAM J. Sci. Comput. 18(3) 1997 §2; Mehri
 * Dehnavi et al. (CW-SPAI: a warp a column, Â in shared memory or, when it
 * does not fit, in global memory, processed in bounded chunks); Chu et al.
 * 2023 (GSPAI-Opt: thread groups of q = 2^s lanes, S1 constant, S2 sorted).
 *
 * One device function (spai_column) does a column with a thread group of
 * any size, on a workspace in shared or global memory: the group size and
 * the placement are template parameters of the two kernels, not copies.
 * The arithmetic does not depend on either: every dot product is summed by
 * one thread in row order (a lane owns a column of Â in the reflector
 * updates, lane 0 the norms), every fma explicit, so M is the same to the bit
 * whatever group, kernel or strategy computed a column (the tests use that):
 * products and differences that the compiler could fuse differently in two
 * instantiations are written as __dmul_rn / __dsub_rn, which it never fuses.
 * The QR is the CPU reference's (src/sparse/lsq.c: LAPACK's dlarfg
 * convention, the same rank test |r_jj| <= n1 eps ||Â(:,j)||), except that
 * norms are plain sums of squares (no overflow scaling) and the back
 * substitution subtracts by columns: M agrees with the reference within the
 * least-squares perturbation bound, not to the bit.
 *
 * Workspace of a column (n2 = |J|, nc = candidates for I, n1 = |I|):
 *   header 32 B | off[n2+1] | row[nc] | first[nc] (int32, to 16 B) | Â n1 x n2 | b n1 (fp64)
 * row[c] is candidate c's row of A (the lists A(:,J[a]) end to end, off[a]
 * where list a starts), first[c] the first candidate with the same row:
 * found by binary search in the earlier (sorted) lists, or, in the global
 * kernel, by an atomicMin into a per-slot marker array of n entries (O(nc)
 * for columns of thousands of candidates). The first occurrences in
 * candidate order are I_k in the reference's order. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cub/cub.cuh>

#include "spai_cuda.h"

extern "C" {
#include "mmio.h"
}

namespace cg = cooperative_groups;

#define FULL_MASK 0xffffffffu
#define SPAI_BLOCK 256         /* threads a block of the shared-memory kernels (nt) */
#define SPAI_GLOBAL_BLOCK 256  /* threads a column in the global-memory kernel with markers */
/* The global kernel without markers (QR's route: at most --qr-max dense entries, so few
 * candidates, found by the shared kernels' binary searches) runs a warp a column, this many
 * a multiprocessor: its work is serial per lane (a column's lanes, lane 0's norms), so
 * columns in flight, not lanes, hide the latency (H200, gspai-opt on powerlaw:270000,
 * 207,109 such columns: 256 threads and 4 slots a multiprocessor took most of 1.0 s) */
#define SPAI_GLOBAL_WARPS_PER_SM 32
#define SPAI_CLASSES 7         /* q = 4, 8, ..., 256 */
#define SPAI_WS_HEADER 32
#define SPAI_NONE 0x7f7f7f7f   /* an empty marker (cudaMemset byte 0x7f) */
#define SPAI_SIZES_BLOCK 256   /* threads a block of the sizes kernel */
#define SPAI_N1_FAST_LISTS 32  /* sizes: n1 counted in registers for n2 <= 32 lists */
#define SPAI_N1_FAST_CHUNKS 8  /* and nc <= 8 x 32 candidates; else by binary searches */
#define SPAI_N1_EXACT GS_SPAI_N1_EXACT /* sizes: n1 counted exactly up to this many candidates */
#define SPAI_N1_WORK GS_SPAI_N1_WORK   /* and while nc n2 (the binary searches' bound) stays below */
#define SPAI_NO_FAIL (~0ull)
/* stats words of spai_sizes_kernel */
enum { ST_N2MAX = 0, ST_NCMAX, ST_N2SUM, ST_N1MAX, ST_NEEDMAX, ST_CLASS_NEED = 5,
       ST_CLASS_COUNT = ST_CLASS_NEED + SPAI_CLASSES, ST_NE_COUNT = ST_CLASS_COUNT + SPAI_CLASSES,
       ST_NE_N2MAX, ST_CGLS_COUNT, ST_WORDS };
/* to_global codes: the shared kernels take 0; global QR 1, cuSOLVER 2, the
 * normal equations 3, CGLS 4 (spai_large.cu) */
enum { ROUTE_SHARED = 0, ROUTE_GLOBAL = 1, ROUTE_LIBRARY = 2, ROUTE_NE = 3, ROUTE_CGLS = 4,
       ROUTE_GLOBAL_MARKED = 5 /* the global kernel with row markers: the normal equations'
                                  rejected columns, whose candidates may be many */ };

/* Bytes of the integer part of a column's workspace (to 16 B), and of all. */
static __host__ __device__ inline int64_t spai_ws_int_bytes(int64_t n2, int64_t nc)
{
    return (SPAI_WS_HEADER + 4 * (n2 + 1 + 2 * nc) + 15) & ~(int64_t)15;
}
static __host__ __device__ inline int64_t spai_ws_bytes(int64_t n2, int64_t nc, int64_t n1)
{
    return gs_spai_qr_bytes(n2, nc, n1); /* the routes' model is this layout */
}

/* ------------------------------------------------------- thread groups */

/* A tile of Q <= 32 lanes (cooperative groups: its shuffles and syncs are
 * the tile's own, so tiles of one warp may diverge). */
template <int Q>
struct spai_tile_group {
    cg::thread_block_tile<Q, cg::thread_block> t;
    __device__ int rank() const { return (int)t.thread_rank(); }
    __device__ int size() const { return Q; }
    __device__ void sync() const { t.sync(); }
    /* exclusive prefix sum of v over the tile; *total = the sum */
    __device__ int64_t scan_exclusive(int64_t v, int64_t *total) const
    {
        int64_t x = v;
#pragma unroll
        for (int o = 1; o < Q; o <<= 1) {
            const int64_t u = t.shfl_up(x, o);
            if (rank() >= o) x += u;
        }
        *total = t.shfl(x, Q - 1);
        return x - v;
    }
};

/* A whole block (blockDim.x a multiple of 32); scratch: 32 words of shared
 * memory. Every thread must make each call. */
struct spai_block_group {
    int64_t *scratch;
    __device__ int rank() const { return (int)threadIdx.x; }
    __device__ int size() const { return (int)blockDim.x; }
    __device__ void sync() const { __syncthreads(); }
    __device__ int64_t scan_exclusive(int64_t v, int64_t *total) const
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
        int64_t x = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int64_t u = __shfl_up_sync(FULL_MASK, x, o);
            if (lane >= o) x += u;
        }
        if (lane == 31) scratch[warp] = x;
        __syncthreads();
        if (warp == 0) {
            int64_t w = lane < warps ? scratch[lane] : 0;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int64_t u = __shfl_up_sync(FULL_MASK, w, o);
                if (lane >= o) w += u;
            }
            if (lane < warps) scratch[lane] = w;
        }
        __syncthreads();
        const int64_t before = warp ? scratch[warp - 1] : 0;
        *total = scratch[warps - 1];
        __syncthreads(); /* scratch is reused by the next call */
        return before + x - v;
    }
};

/* ------------------------------------------------------- one column */

/* The list a holding candidate c: the largest a < n2 with off[a] <= c. */
static __device__ inline int32_t spai_segment(const int32_t *off, int32_t n2, int32_t c)
{
    int32_t lo = 0, hi = n2;
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= c) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The failure record: the lowest column wins (k in the top bits). */
static __device__ inline unsigned long long spai_fail_key(int32_t k, int kind, int32_t a_col)
{
    return ((unsigned long long)(uint32_t)k << 33) | ((unsigned long long)kind << 31) |
           (unsigned long long)((uint32_t)a_col & 0x7fffffffu);
}

typedef struct spai_lsq_args {
    const int64_t *at_rp;
    const int32_t *at_col;
    const double *at_val;
    const int64_t *mt_rp;
    const int32_t *mt_col;
    double *mt_val;
    int32_t *n1_out;          /* in: the sizes pass's n1_k (-1: bound only); out: n1_k */
    unsigned long long *fail;
    unsigned long long *n1_differs; /* columns whose n1_k the sizes pass counted otherwise */
} spai_lsq_args;

/* Column k by group g on workspace ws (its bytes: spai_ws_bytes). marker:
 * NULL (first occurrences by binary search) or n entries, all SPAI_NONE on
 * entry and on exit. Every thread of g calls it with the same k. */
template <class Group>
static __device__ void spai_column(const Group &g, int32_t k, const spai_lsq_args &A, char *ws,
                                   int32_t *marker)
{
    const int t = g.rank(), G = g.size();
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    const int32_t *J = A.mt_col + p0;
    double *hdr = (double *)ws;                   /* Householder scale, tau */
    int32_t *ihdr = (int32_t *)(ws + 16);         /* first candidate of row k, pivot ok */
    int32_t *off = (int32_t *)(ws + SPAI_WS_HEADER);
    g.sync(); /* the workspace's previous column is done with */

    int64_t carry = 0;                            /* off: where list a starts */
    for (int32_t base = 0; base < n2; base += G) {
        const int32_t a = base + t;
        int64_t len = 0, total = 0;
        if (a < n2) len = A.at_rp[J[a] + 1] - A.at_rp[J[a]];
        const int64_t before = g.scan_exclusive(len, &total);
        if (a < n2) off[a] = (int32_t)(carry + before);
        carry += total;
    }
    const int32_t nc = (int32_t)carry;
    int32_t *row = off + n2 + 1, *first = row + nc;
    if (t == 0) off[n2] = nc, ihdr[0] = -1;
    g.sync();

    for (int32_t c = t; c < nc; c += G) {         /* row[c]: the candidates */
        const int32_t a = spai_segment(off, n2, c);
        row[c] = A.at_col[A.at_rp[J[a]] + (c - off[a])];
    }
    g.sync();
    if (!marker) {                                /* first occurrences */
        for (int32_t c = t; c < nc; c += G) {
            const int32_t a = spai_segment(off, n2, c), r = row[c];
            int32_t f = c;
            for (int32_t b = 0; b < a; b++) {
                const int32_t len = off[b + 1] - off[b];
                const int32_t q = (int32_t)gs_dlower_bound(row + off[b], len, r);
                if (q < len && row[off[b] + q] == r) {
                    f = off[b] + q;
                    break;
                }
            }
            first[c] = f;
            if (r == k && f == c) ihdr[0] = c;
        }
    } else {
        for (int32_t c = t; c < nc; c += G) atomicMin(&marker[row[c]], c);
        g.sync();
        for (int32_t c = t; c < nc; c += G) {
            const int32_t f = marker[row[c]];
            first[c] = f;
            if (row[c] == k && f == c) ihdr[0] = c;
        }
        g.sync();
        for (int32_t c = t; c < nc; c += G)
            if (first[c] == c) marker[row[c]] = SPAI_NONE;
    }
    g.sync();

    carry = 0;                                    /* ranks of the first occurrences */
    for (int32_t base = 0; base < nc; base += G) {
        const int32_t c = base + t;
        const int64_t kept = c < nc && first[c] == c ? 1 : 0;
        int64_t total = 0;
        const int64_t before = g.scan_exclusive(kept, &total);
        if (kept) row[c] = (int32_t)(carry + before); /* row[] is not read any more */
        carry += total;
    }
    const int32_t n1 = (int32_t)carry;
    g.sync();
    for (int32_t c = t; c < nc; c += G) first[c] = row[first[c]]; /* position in I_k */
    const int32_t kfirst = ihdr[0];
    const int32_t kloc = kfirst >= 0 ? row[kfirst] : -1;          /* e_k(I_k) */

    double *Ahat = (double *)(ws + spai_ws_int_bytes(n2, nc));    /* n1 x n2, by columns */
    double *b = Ahat + (int64_t)n1 * n2;
    for (int64_t q = t; q < (int64_t)n1 * (n2 + 1); q += G) Ahat[q] = 0.0;
    g.sync();
    for (int32_t c = t; c < nc; c += G) {         /* Â = A(I,J) */
        const int32_t a = spai_segment(off, n2, c);
        Ahat[(int64_t)a * n1 + first[c]] = A.at_val[A.at_rp[J[a]] + (c - off[a])];
    }
    if (t == 0 && kloc >= 0) b[kloc] = 1.0;
    g.sync();

    int32_t fail_j = -1;                          /* Â = Q R, b <- Q^T b */
    for (int32_t j = 0; j < n2; j++) {
        if (j >= n1) {                            /* more unknowns than rows */
            fail_j = j;
            break;
        }
        double *v = Ahat + (int64_t)j * n1;
        if (t == 0) {
            double cn = 0.0, xn = 0.0;
            for (int32_t i = 0; i < n1; i++) {
                cn = fma(v[i], v[i], cn);
                if (i > j) xn = fma(v[i], v[i], xn);
            }
            cn = sqrt(cn), xn = sqrt(xn);
            const double alpha = v[j];
            double beta = alpha, tau = 0.0, scale = 1.0;
            if (xn != 0.0) {
                beta = -copysign(hypot(alpha, xn), alpha);   /* beta = -sign(a) ||x|| */
                scale = 1.0 / (alpha - beta);                /* v = x / (alpha - beta) */
                tau = (beta - alpha) / beta;
            }
            hdr[0] = scale, hdr[1] = tau;
            v[j] = beta;                                     /* r_jj */
            ihdr[1] = fabs(beta) > (double)n1 * DBL_EPSILON * cn;
        }
        g.sync();
        if (!ihdr[1]) {
            fail_j = j;
            break;
        }
        const double scale = hdr[0], tau = hdr[1];
        for (int32_t i = j + 1 + t; i < n1; i += G) v[i] = __dmul_rn(v[i], scale);
        g.sync();
        for (int32_t l = j + 1 + t; l <= n2; l += G) {   /* y = (I - tau v v^T) y */
            double *y = l < n2 ? Ahat + (int64_t)l * n1 : b;
            double s = y[j];
            for (int32_t i = j + 1; i < n1; i++) s = fma(v[i], y[i], s);
            s = __dmul_rn(s, tau);                /* never contracted: see the top */
            y[j] = __dsub_rn(y[j], s);
            for (int32_t i = j + 1; i < n1; i++) y[i] = fma(-s, v[i], y[i]);
        }
        g.sync();
    }
    if (t == 0) {                                 /* the workspace was sized from n1_out */
        const int32_t counted = A.n1_out[k];
        if (counted >= 0 && counted != n1 && A.n1_differs) atomicAdd(A.n1_differs, 1ull);
        A.n1_out[k] = n1;
    }
    if (fail_j >= 0) {
        if (t == 0) atomicMin(A.fail, spai_fail_key(k, GS_SPAI_COLUMN_RANK, J[fail_j]));
        return;
    }
    if (kloc < 0) {                               /* e_k(I) = 0: m_k = 0 */
        if (t == 0) atomicMin(A.fail, spai_fail_key(k, GS_SPAI_COLUMN_ZERO, 0));
        return;
    }
    for (int32_t j = n2 - 1; j >= 0; j--) {       /* m = R \ (Q^T b)(1:n2), by columns */
        if (t == 0) b[j] = b[j] / Ahat[(int64_t)j * n1 + j];
        g.sync();
        const double x = b[j];
        const double *r = Ahat + (int64_t)j * n1;
        for (int32_t i = t; i < j; i += G) b[i] = fma(-r[i], x, b[i]);
        g.sync();
    }
    for (int32_t a = t; a < n2; a += G) A.mt_val[p0 + a] = b[a];
}

/* ------------------------------------------------------------- kernels */

/* Groups of Q lanes, SPAI_BLOCK / Q columns a block, each on stride bytes of
 * the block's shared memory. Columns order[begin + i] (order NULL: begin +
 * i), i < count; those routed to the global kernel are skipped. */
template <int Q>
__global__ void __launch_bounds__(SPAI_BLOCK)
    spai_lsq_tile_kernel(int32_t count, const int32_t *__restrict__ order, int32_t begin,
                         const uint8_t *__restrict__ to_global, int64_t stride, spai_lsq_args A)
{
    extern __shared__ __align__(16) char spai_smem[];
    spai_tile_group<Q> g{cg::tiled_partition<Q>(cg::this_thread_block())};
    const int groups = SPAI_BLOCK / Q, gi = threadIdx.x / Q;
    const int64_t i = (int64_t)blockIdx.x * groups + gi;
    if (i >= count) return;
    const int32_t k = order ? order[begin + i] : (int32_t)(begin + i);
    if (to_global[k]) return;
    spai_column(g, k, A, spai_smem + gi * stride, (int32_t *)NULL);
}

/* One column a block (blockDim.x threads, a multiple of 32), the block
 * looping over its columns. GLOBAL: workspace and marker are the block's
 * slot in global memory (the columns the shared kernels cannot hold, order
 * lists them); else stride bytes of shared memory, routed columns skipped. */
template <bool GLOBAL>
__global__ void spai_lsq_block_kernel(int32_t count, const int32_t *__restrict__ order,
                                      int32_t begin, const uint8_t *__restrict__ to_global,
                                      int64_t stride, char *slots, int32_t *markers, int32_t n,
                                      spai_lsq_args A)
{
    extern __shared__ __align__(16) char spai_smem[];
    __shared__ int64_t scratch[32];
    spai_block_group g{scratch};
    char *ws = GLOBAL ? slots + (int64_t)blockIdx.x * stride : spai_smem;
    int32_t *marker = GLOBAL && markers ? markers + (int64_t)blockIdx.x * n : (int32_t *)NULL;
    for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
        const int32_t k = order ? order[begin + i] : (int32_t)(begin + i);
        if (!GLOBAL && to_global[k]) continue;    /* uniform over the block */
        spai_column(g, k, A, ws, marker);
    }
}

/* n1_k = |I_k| for a column of n2 <= 32 lists and nc <= 256 candidates, by
 * one warp with no serial loop over the lists: lane a holds list a (its start
 * in AT and, by a scan, where it ends among the candidates); candidate c,
 * lane c mod 32 of chunk c / 32, finds its list among those ends and loads
 * its row r; c is the first of its row if no lower lane of its chunk holds r
 * (match_any) and no earlier chunk does (its 32 rows shuffled past). Every
 * load of a column is issued at once: a few memory latencies a column
 * where the binary searches below wait on about n2^2 log n2 / 2 dependent
 * loads (49 candidates, n2 = 7: ~60). The count is the same. */
static __device__ int32_t spai_n1_registers(int lane, int32_t n2, int64_t nc, const int32_t *J,
                                            const int64_t *__restrict__ at_rp,
                                            const int32_t *__restrict__ at_col)
{
    int64_t start = 0;
    int32_t end = 0;                              /* candidates of lists 0..lane */
    if (lane < n2) {
        const int32_t j = J[lane];
        start = at_rp[j];
        end = (int32_t)(at_rp[j + 1] - start);
    }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t u = __shfl_up_sync(FULL_MASK, end, o);
        if (lane >= o) end += u;
    }
    int32_t rows[SPAI_N1_FAST_CHUNKS], count = 0;
#pragma unroll
    for (int ch = 0; ch < SPAI_N1_FAST_CHUNKS; ch++) {
        if ((int64_t)ch * 32 >= nc) break;        /* uniform over the warp */
        const int32_t c = ch * 32 + lane;
        int32_t a = 0, before = 0;                /* c's list, its first candidate */
        for (int32_t b = 0; b < n2; b++) {
            const int32_t eb = __shfl_sync(FULL_MASK, end, b);
            if (eb <= c) a = b + 1, before = eb;
        }
        const int64_t list = __shfl_sync(FULL_MASK, start, a & 31);
        const int32_t r = c < nc ? at_col[list + (c - before)] : -1;
        rows[ch] = r;
        const unsigned same = __match_any_sync(FULL_MASK, r);
        bool first = c < nc && __ffs(same) - 1 == lane;
#pragma unroll
        for (int e = 0; e < ch; e++)
            for (int l = 0; l < 32; l++) {        /* every lane shuffles: no short cut */
                const int32_t u = __shfl_sync(FULL_MASK, rows[e], l);
                if (u == r) first = false;
            }
        count += __popc(__ballot_sync(FULL_MASK, first));
    }
    return count;
}

/* Pre-GSPAI, one warp a column (grid-stride): n2_k, nc_k = the candidates,
 * n1_k (in registers for n2_k <= 32 and nc_k <= 256, spai_n1_registers;
 * else exactly up to SPAI_N1_EXACT candidates and SPAI_N1_WORK searches,
 * else nc_k, an upper bound, stands for it in the workspace need),
 * the workspace need[k], the class cls[k] = log2(q_k) - 2 with
 * 2^(s-1) < n2_k <= 2^s, q_k = min(max(2^s, 4), 256) (the paper's (3)-(4));
 * the stats words (maxima, sums, per class) by one atomic per warp. */
__global__ void spai_sizes_kernel(int32_t n, const int64_t *__restrict__ at_rp,
                                  const int32_t *__restrict__ at_col,
                                  const int64_t *__restrict__ mt_rp,
                                  const int32_t *__restrict__ mt_col, int64_t qr_max,
                                  int64_t *__restrict__ need, uint8_t *__restrict__ cls,
                                  uint8_t *__restrict__ route, int32_t *__restrict__ n1_out,
                                  unsigned long long *stats)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    /* the warp's stats, kept by its lane 0 in shared memory: in registers
     * (every lane holding them) they took 38 of the kernel's 90 registers and
     * half its resident warps, which hide the loads' latency */
    __shared__ unsigned long long warp_stats[SPAI_SIZES_BLOCK / 32][ST_WORDS];
    unsigned long long *s = warp_stats[threadIdx.x >> 5];
    if (lane == 0)
        for (int w = 0; w < ST_WORDS; w++) s[w] = 0;
    for (int64_t kk = warp; kk < n; kk += warps) {
        const int32_t k = (int32_t)kk;
        const int64_t p0 = mt_rp[k];
        const int32_t n2 = (int32_t)(mt_rp[k + 1] - p0);
        const int32_t *J = mt_col + p0;
        int64_t nc = 0;
        for (int32_t a = lane; a < n2; a += 32) nc += at_rp[J[a] + 1] - at_rp[J[a]];
        for (int o = 16; o > 0; o >>= 1) nc += __shfl_xor_sync(FULL_MASK, nc, o);
        int64_t n1 = -1;
        if (n2 <= SPAI_N1_FAST_LISTS && nc <= 32 * SPAI_N1_FAST_CHUNKS) {
            n1 = spai_n1_registers(lane, n2, nc, J, at_rp, at_col);
        } else if (nc <= SPAI_N1_EXACT && nc * n2 <= SPAI_N1_WORK) {
            int64_t count = 0;
            for (int32_t a = 0; a < n2; a++) {
                const int32_t *rows = at_col + at_rp[J[a]];
                const int32_t len = (int32_t)(at_rp[J[a] + 1] - at_rp[J[a]]);
                for (int32_t p = lane; p < len; p += 32) {
                    const int32_t r = rows[p];
                    bool is_first = true;
                    for (int32_t b = 0; b < a && is_first; b++) {
                        const int32_t *rb = at_col + at_rp[J[b]];
                        const int32_t lb = (int32_t)(at_rp[J[b] + 1] - at_rp[J[b]]);
                        const int32_t q = (int32_t)gs_dlower_bound(rb, lb, r);
                        is_first = !(q < lb && rb[q] == r);
                    }
                    count += is_first;
                }
            }
            for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(FULL_MASK, count, o);
            n1 = count;
        }
        /* the route needs n1 exactly where GS_SPAI_N1_COUNTED, which the two
         * paths above cover; the other routes form no I_k (n1 -1) */
        const int how = gs_spai_route(n2, nc, n1, qr_max); /* uniform over the warp */
        if (how != GS_SPAI_ROUTE_QR) n1 = -1;
        const int64_t bytes = spai_ws_bytes(n2, nc, n1 >= 0 ? n1 : nc);
        int c = 0;
        while (c < SPAI_CLASSES - 1 && (4 << c) < n2) c++;
        if (lane == 0) {
            need[k] = bytes, cls[k] = (uint8_t)c, n1_out[k] = (int32_t)n1, route[k] = (uint8_t)how;
            s[ST_N2MAX] = max(s[ST_N2MAX], (unsigned long long)n2);
            s[ST_NCMAX] = max(s[ST_NCMAX], (unsigned long long)nc);
            s[ST_N2SUM] += (unsigned long long)n2;
            s[ST_CLASS_COUNT + c]++;                      /* every column: S2's sorted order */
            if (how == GS_SPAI_ROUTE_QR) {
                if (n1 >= 0) s[ST_N1MAX] = max(s[ST_N1MAX], (unsigned long long)n1);
                s[ST_NEEDMAX] = max(s[ST_NEEDMAX], (unsigned long long)bytes);
                s[ST_CLASS_NEED + c] = max(s[ST_CLASS_NEED + c], (unsigned long long)bytes);
            } else if (how == GS_SPAI_ROUTE_NE) {
                s[ST_NE_COUNT]++;
                s[ST_NE_N2MAX] = max(s[ST_NE_N2MAX], (unsigned long long)n2);
            } else {
                s[ST_CGLS_COUNT]++;
            }
        }
    }
    if (lane != 0) return;
    for (int w = 0; w < ST_WORDS; w++) {
        const bool sum = w == ST_N2SUM || (w >= ST_CLASS_COUNT && w != ST_NE_N2MAX);
        if (s[w] == 0) continue;
        if (sum) atomicAdd(&stats[w], s[w]);
        else if (s[w] > *(volatile unsigned long long *)&stats[w]) atomicMax(&stats[w], s[w]);
    }
}

typedef struct spai_strides {
    int64_t of_class[SPAI_CLASSES]; /* shared bytes a group of each class may use */
} spai_strides;

/* Columns whose workspace exceeds their group's shared stride go to the
 * global kernel: to_global[k], flags[k] (0/1, for the scan), and per class
 * their count, their largest need (gstats[0]), their count (gstats[1]). S1
 * (constant q) passes the same stride for every class. */
__global__ void spai_route_kernel(int32_t n, const int64_t *__restrict__ need,
                                  const uint8_t *__restrict__ cls, const uint8_t *__restrict__ route,
                                  spai_strides strides, uint8_t *__restrict__ to_global,
                                  uint8_t *__restrict__ sort_key, unsigned long long *gstats,
                                  const int64_t *__restrict__ mt_rp,
                                  const int32_t *__restrict__ n1_of, double lib_work,
                                  int32_t lib_min_n2, unsigned long long *lib_count)
{
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const int c = cls[k];
    sort_key[k] = (uint8_t)(SPAI_CLASSES - 1 - c); /* S2: q_k descending */
    if (route[k] != GS_SPAI_ROUTE_QR) {            /* spai_large.cu's, not a shared kernel's */
        to_global[k] = route[k] == GS_SPAI_ROUTE_NE ? ROUTE_NE : ROUTE_CGLS;
        atomicAdd(&gstats[2 + c], 1ull);
        return;
    }
    /* the library path: 2 n1 n2^2 flops above lib_work and n2 >= lib_min_n2,
     * from the sizes alone (never the strides), so that S1 and S2 route a
     * column alike. n1 unknown (-1): the candidates, from the workspace
     * need (spai_ws_bytes with n1 = nc), at most n. */
    const int64_t n2 = mt_rp[k + 1] - mt_rp[k];
    int64_t n1 = n1_of[k];
    if (n1 < 0) {
        n1 = (need[k] - SPAI_WS_HEADER - 4 * (n2 + 1)) / (8 * (n2 + 2));
        if (n1 > n) n1 = n;
    }
    const bool lib = n2 >= lib_min_n2 && 2.0 * (double)n1 * (double)n2 * (double)n2 > lib_work;
    const bool global = !lib && need[k] > strides.of_class[c];
    to_global[k] = lib ? ROUTE_LIBRARY : global ? ROUTE_GLOBAL : ROUTE_SHARED; /* shared kernels skip 1, 2 */
    if (lib) {
        atomicAdd(lib_count, 1ull);
        atomicAdd(&gstats[2 + c], 1ull);          /* not the class's shared columns */
    }
    if (global) {
        atomicMax(&gstats[0], (unsigned long long)need[k]);
        atomicAdd(&gstats[1], 1ull);
        atomicAdd(&gstats[2 + c], 1ull);
    }
}

/* flags[k] = 1 where to_global[k] == code. */
__global__ void spai_flag_kernel(int32_t n, const uint8_t *__restrict__ to_global, int code,
                                 int64_t *__restrict__ flags)
{
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) flags[k] = to_global[k] == code;
}

/* list[pos[k]] = k for the flagged columns (pos: exclusive scan of flags). */
__global__ void spai_compact_kernel(int32_t n, const int64_t *__restrict__ flags,
                                    const int64_t *__restrict__ pos, int32_t *__restrict__ list)
{
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n && flags[k]) list[pos[k]] = (int32_t)k;
}

/* The columns the normal equations rejected go to QR: the library path
 * above the work threshold, else the global kernel with row markers (their
 * largest workspace need into *marked_need). */
__global__ void spai_reroute_kernel(int64_t count, const int32_t *__restrict__ rejected,
                                    const int64_t *__restrict__ need, const int64_t *__restrict__ mt_rp,
                                    int32_t n, double lib_work, int32_t lib_min_n2,
                                    uint8_t *__restrict__ to_global,
                                    unsigned long long *marked_need, unsigned long long *lib_count)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int32_t k = rejected[i];
    const int64_t n2 = mt_rp[k + 1] - mt_rp[k];
    int64_t n1 = (need[k] - SPAI_WS_HEADER - 4 * (n2 + 1)) / (8 * (n2 + 2)); /* nc: a bound */
    if (n1 > n) n1 = n;
    const bool lib = n2 >= lib_min_n2 && 2.0 * (double)n1 * (double)n2 * (double)n2 > lib_work;
    to_global[k] = lib ? ROUTE_LIBRARY : ROUTE_GLOBAL_MARKED;
    if (lib) atomicAdd(lib_count, 1ull);
    else atomicMax(marked_need, (unsigned long long)need[k]);
}

/* The columns whose to_global is code into list (device, n entries), their
 * number into *count (one read-back). */
static int spai_list_of(gs_engine *e, int32_t n, const uint8_t *to_global, int code, int64_t *flags,
                        int64_t *pos, int32_t *list, int64_t *count)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const unsigned grid = gs_dblocks(n, 256);
    int status = GS_OK;
    GS_TRY(CUDA_LAUNCH(&e->err, spai_flag_kernel, grid, 256, 0, c->stream, n, to_global, code, flags));
    GS_TRY(gs_dscan_exclusive(e, flags, pos, n));
    GS_TRY(CUDA_LAUNCH(&e->err, spai_compact_kernel, grid, 256, 0, c->stream, n,
                       (const int64_t *)flags, (const int64_t *)pos, list));
    GS_TRY(gs_dread_int64(e, pos + n, count));
cleanup:
    return status;
}

__global__ void spai_iota_kernel(int32_t n, int32_t *__restrict__ out)
{
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) out[k] = (int32_t)k;
}

/* *out = max(v[k]) over the columns QR's route took (not those the normal
 * equations sent back to QR: the CPU's n1max is its sizes pass's), one
 * atomic a warp. */
__global__ void spai_max_kernel(int32_t n, const int32_t *__restrict__ v,
                                const uint8_t *__restrict__ route, unsigned long long *out)
{
    int32_t m = 0;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x)
        if (route[k] == GS_SPAI_ROUTE_QR) m = max(m, v[k]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, o));
    if ((threadIdx.x & 31) == 0 && m > 0) atomicMax(out, (unsigned long long)m);
}

/* ---------------------------------------------------------------- host */

static spai_lsq_args spai_args(const gs_dcsr *AT, gs_dcsr *MT, int32_t *n1,
                               unsigned long long *fail)
{
    spai_lsq_args a;
    a.at_rp = AT->rp, a.at_col = AT->col, a.at_val = (const double *)AT->val;
    a.mt_rp = MT->rp, a.mt_col = MT->col, a.mt_val = (double *)MT->val;
    a.n1_out = n1, a.fail = fail, a.n1_differs = NULL;
    return a;
}

void spai_lsq_sizes_free(gs_engine *e, spai_lsq_sizes *s)
{
    gs_cuda_free(e, s->need, (size_t)s->n * sizeof(int64_t));
    gs_cuda_free(e, s->cls, (size_t)s->n);
    gs_cuda_free(e, s->route, (size_t)s->n);
    gs_cuda_free(e, s->n1, ((size_t)s->n + 2) * sizeof(int32_t));
    s->need = NULL, s->cls = NULL, s->route = NULL, s->n1 = NULL;
}

int spai_lsq_sizes_compute(gs_engine *e, const gs_dcsr *AT, const gs_dcsr *MT, int64_t qr_max,
                           spai_lsq_sizes *s, spai_lsq_report *rep)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = MT->n;
    unsigned long long *d_stats = NULL;
    int status = GS_OK;
    memset(s, 0, sizeof *s);
    s->n = n;
    GS_TRY(gs_cuda_alloc(e, &s->need, (size_t)n * sizeof(int64_t), "spai: workspace of each column"));
    GS_TRY(gs_cuda_alloc(e, &s->cls, (size_t)n, "spai: group class of each column"));
    GS_TRY(gs_cuda_alloc(e, &s->route, (size_t)n, "spai: route of each column"));
    /* two spare entries: the failure read-back takes 8 bytes at any k */
    GS_TRY(gs_cuda_alloc(e, &s->n1, ((size_t)n + 2) * sizeof(int32_t), "spai: n1 of each column"));
    GS_TRY(gs_cuda_alloc(e, &d_stats, ST_WORDS * sizeof(uint64_t), "spai: size statistics"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_stats, 0, ST_WORDS * sizeof(uint64_t), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(s->n1, 0, ((size_t)n + 2) * sizeof(int32_t), c->stream)));
    {
        const int64_t want = gs_dblocks(n, 8);
        const unsigned grid = (unsigned)(want < (int64_t)c->sm_count * 16 ? want : (int64_t)c->sm_count * 16);
        GS_TRY(CUDA_LAUNCH(&e->err, spai_sizes_kernel, grid, SPAI_SIZES_BLOCK, 0, c->stream, n,
                           (const int64_t *)AT->rp, (const int32_t *)AT->col,
                           (const int64_t *)MT->rp, (const int32_t *)MT->col, qr_max, s->need,
                           s->cls, s->route, s->n1, d_stats));
    }
    {
        const void *src[1] = {d_stats};
        const int len[1] = {ST_WORDS};
        GS_TRY(gs_dread_words(e, 1, src, len, s->stats));
    }
    rep->n2max = (int32_t)s->stats[ST_N2MAX];
    rep->n2avg = n ? (double)s->stats[ST_N2SUM] / n : 0.0;
    rep->ncmax = (int64_t)s->stats[ST_NCMAX];
    rep->n1max = (int32_t)s->stats[ST_N1MAX]; /* exact after the solve */
cleanup:
    gs_cuda_free(e, d_stats, ST_WORDS * sizeof(uint64_t));
    return status;
}

static int64_t round16(int64_t x) { return (x + 15) & ~(int64_t)15; }

/* One shared-memory launch: the columns order[begin..begin+count) of group
 * size q (class cls), stride bytes a group. */
static int spai_launch_shared(gs_engine *e, int cls, int32_t count, const int32_t *order,
                              int32_t begin, const uint8_t *to_global, int64_t stride,
                              const spai_lsq_args &a)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int q = 4 << cls;
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    if (q <= 32) {
        const int groups = SPAI_BLOCK / q;
        const size_t smem = (size_t)groups * (size_t)stride;
        const unsigned grid = gs_dblocks(count, groups);
        void (*k)(int32_t, const int32_t *, int32_t, const uint8_t *, int64_t, spai_lsq_args) =
            q == 4 ? spai_lsq_tile_kernel<4> : q == 8 ? spai_lsq_tile_kernel<8>
                   : q == 16 ? spai_lsq_tile_kernel<16> : spai_lsq_tile_kernel<32>;
        GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)smem)));
        GS_TRY(CUDA_LAUNCH(&e->err, k, grid, SPAI_BLOCK, smem, c->stream, count, order, begin,
                           to_global, stride, a));
    } else {
        auto k = spai_lsq_block_kernel<false>;
        const int64_t cap = (int64_t)c->sm_count * 64;
        const unsigned grid = (unsigned)(count < cap ? count : cap);
        GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)stride)));
        GS_TRY(CUDA_LAUNCH(&e->err, k, grid, q, (size_t)stride, c->stream, count, order, begin,
                           to_global, stride, (char *)NULL, (int32_t *)NULL, (int32_t)0, a));
    }
cleanup:
    return status;
}

/* The global-memory kernel over list[0..count): slots of stride bytes and n
 * markers each, as many as a bounded budget allows (chunks of columns run
 * one after another through the same slots). */
static int spai_launch_global(gs_engine *e, int32_t count, const int32_t *list, int64_t need_max,
                              int marked, const spai_lsq_args &a, int32_t n, const char *who,
                              spai_lsq_report *rep, gs_error *err)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t stride = round16(need_max);
    const int64_t per_slot = stride + (marked ? 4 * (int64_t)n : 0);
    size_t free_bytes = 0, total_bytes = 0;
    char *slots = NULL;
    int32_t *markers = NULL;
    int64_t n_slots = 0;
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaMemGetInfo(&free_bytes, &total_bytes)));
    {
        const int64_t budget = (int64_t)(free_bytes / 4 < ((size_t)1 << 30) ? free_bytes / 4 : ((size_t)1 << 30));
        n_slots = budget / per_slot;
        const int64_t most = (int64_t)c->sm_count * (marked ? 4 : SPAI_GLOBAL_WARPS_PER_SM);
        if (n_slots > most) n_slots = most;
        if (n_slots > count) n_slots = count;
        if (n_slots < 1) n_slots = 1;
    }
    if ((size_t)per_slot > free_bytes) {
        status = gs_error_set(err, GS_ERR_NOMEM,
                              "%s: the largest local least-squares problem needs %.1f MiB of "
                              "device workspace, %.1f MiB are free",
                              who, per_slot / 1048576.0, free_bytes / 1048576.0);
        goto cleanup;
    }
    GS_TRY(gs_cuda_alloc(e, &slots, (size_t)(n_slots * stride), "spai: global workspace of the large columns"));
    if (marked) {
        GS_TRY(gs_cuda_alloc(e, &markers, (size_t)(n_slots * n) * sizeof(int32_t), "spai: row markers of the large columns"));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(markers, 0x7f, (size_t)(n_slots * n) * sizeof(int32_t), c->stream)));
    }
    GS_TRY(CUDA_LAUNCH(&e->err, spai_lsq_block_kernel<true>, (unsigned)n_slots,
                       marked ? SPAI_GLOBAL_BLOCK : 32, 0, c->stream, count, list, (int32_t)0,
                       (const uint8_t *)NULL, stride, slots, markers, n, a));
    if ((int)n_slots > rep->global_slots) rep->global_slots = (int)n_slots;
    if (stride > rep->shared_bytes[SPAI_LSQ_GLOBAL]) rep->shared_bytes[SPAI_LSQ_GLOBAL] = stride;
cleanup:
    gs_cuda_free(e, slots, (size_t)(n_slots * stride)); /* stream-ordered */
    if (markers) gs_cuda_free(e, markers, (size_t)(n_slots * n) * sizeof(int32_t));
    return status;
}

/* The shared stride a group of class cls may use (the decision tree's
 * threshold, from the device's properties): half the multiprocessor's
 * shared memory (capped by the opt-in limit per block) split among the
 * block's groups (SPAI_BLOCK / q of them for q <= 32, one otherwise), or
 * less where no column needs more.
 * debug->spai_shared_cap (tests) lowers it, 1: everything global. */
static int64_t spai_stride(gs_engine *e, int cls, int64_t need_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int optin = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device) != cudaSuccess)
        optin = 48 * 1024;
    if (cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, c->device) != cudaSuccess)
        per_sm = optin;
    /* a block may take at most half a multiprocessor's shared memory (two
     * blocks resident at least: a few outsized columns must not cost every
     * block its occupancy; they take the global kernel instead), less 1 KiB
     * the runtime reserves a block and the block kernel's own scratch */
    int64_t block_bytes = (int64_t)(per_sm / 2 < optin ? per_sm / 2 : optin) - 1024 - 256;
    if (block_bytes < 0) block_bytes = 0;
    const int q = 4 << cls;
    int64_t cap = q <= 32 ? block_bytes / (SPAI_BLOCK / q) : block_bytes;
    cap &= ~(int64_t)15;
    const long long forced = gs_cuda_debug(e)->spai_shared_cap;
    if (forced > 0 && forced < cap) cap = forced;
    const int64_t want = round16(need_max);
    return want < cap ? want : cap;
}

/* The reference's message for the failure record key (the lowest failing
 * column k, how, the dependent column of A), with the column's n1 x n2. */
static int spai_failure(gs_engine *e, const gs_dcsr *MT, const spai_lsq_sizes *s,
                        unsigned long long key, const spai_lsq_options *o, gs_error *err)
{
    const int32_t k = (int32_t)(key >> 33), kind = (int)((key >> 31) & 3);
    const int32_t a_col = (int32_t)(key & 0x7fffffffu);
    uint64_t more[3] = {0, 0, 0};
    const void *src[2] = {MT->rp + k, s->n1 + k}; /* n1 has spare entries past n */
    const int len[2] = {2, 1};
    int status = gs_dread_words(e, 2, src, len, more);
    if (status != GS_OK) return status;
    return gs_spai_column_failure(kind, k, (int32_t)(uint32_t)(more[2] & 0xffffffffu),
                                  (int32_t)(more[1] - more[0]), a_col, o->who, o->hint, err);
}

/* ------------------------------------------------- the library path */

/* Columns too big for one block's serial QR (issue 19, item 4) go to
 * cuSOLVER one at a time: Â_k gathered densely (column-major n1 x n2, rows of
 * I_k in ascending order, e_k(I_k) beside it), dgeqrf, the reference's rank
 * test on R's diagonal, dormqr for Q^T e_k, cublasDtrsv for R m = (Q^T e_k)(1:n2),
 * m into row k of MT. The order of I_k differs from the batched kernels'
 * (first occurrence): a row permutation, the same least-squares problem.
 *
 * The threshold. The block kernels do a reflector step as n2 lanes, each
 * streaming its own column of Â (2 n1 fma a step: the dot product and the
 * update, ~24 bytes of L2/HBM traffic for 4 flops); a block of 256 lanes
 * sustains some 30-60 GB/s of such traffic (an H100 SM's fair share of HBM
 * is 25 GB/s, its L2 port ~110 GB/s), i.e. 5-20 GFLOP/s, so one block takes
 * ~1 ms (or more) for 2 n1 n2^2 = 2^24 (1.7e7) flops. Below n2 = 32 lanes the
 * blocked QR of a library has nothing to block and a launch-bound panel
 * loop, while the batched kernels run hundreds of such columns at once:
 * those stay there. debug->spai_cusolver_work replaces both (tests). */
#define SPAI_LIB_WORK ((double)(1 << 24))
#define SPAI_LIB_MIN_N2 32
#define SPAI_LIB_NORM_BLOCK 256

/* mark[r] = 1 for every row r of the lists A(:,J_k). */
__global__ void spai_lib_mark_kernel(int32_t k, spai_lsq_args A, int32_t *__restrict__ mark)
{
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    for (int32_t a = blockIdx.x; a < n2; a += gridDim.x) {
        const int32_t j = A.mt_col[p0 + a];
        for (int64_t p = A.at_rp[j] + threadIdx.x; p < A.at_rp[j + 1]; p += blockDim.x)
            mark[A.at_col[p]] = 1;
    }
}

/* words = {mt_rp[k], mt_rp[k+1], n1}; n1_out[k] = n1 (pos: exclusive scan of mark). */
__global__ void spai_lib_count_kernel(int32_t k, int32_t n, spai_lsq_args A,
                                      const int32_t *__restrict__ mark,
                                      const int32_t *__restrict__ pos, unsigned long long *words)
{
    const int32_t n1 = pos[n - 1] + mark[n - 1];
    words[0] = (unsigned long long)A.mt_rp[k];
    words[1] = (unsigned long long)A.mt_rp[k + 1];
    words[2] = (unsigned long long)n1;
    const int32_t counted = A.n1_out[k];
    if (counted >= 0 && counted != n1 && A.n1_differs) atomicAdd(A.n1_differs, 1ull);
    A.n1_out[k] = n1;
}

/* Ahat(pos[r], a) = A(r, J[a]) (Ahat zeroed), b = e_k(I_k) (b zeroed). */
__global__ void spai_lib_fill_kernel(int32_t k, int32_t n1, spai_lsq_args A,
                                     const int32_t *__restrict__ mark,
                                     const int32_t *__restrict__ pos, double *__restrict__ Ahat,
                                     double *__restrict__ b)
{
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    if (blockIdx.x == 0 && threadIdx.x == 0 && mark[k]) b[pos[k]] = 1.0;
    for (int32_t a = blockIdx.x; a < n2; a += gridDim.x) {
        const int32_t j = A.mt_col[p0 + a];
        double *col = Ahat + (int64_t)a * n1;
        for (int64_t p = A.at_rp[j] + threadIdx.x; p < A.at_rp[j + 1]; p += blockDim.x)
            col[pos[A.at_col[p]]] = A.at_val[p];
    }
}

/* norms[a] = ||Ahat(:,a)||_2 (a fixed summation order: the same every run). */
__global__ void __launch_bounds__(SPAI_LIB_NORM_BLOCK)
    spai_lib_norm_kernel(int32_t n1, int32_t n2, const double *__restrict__ Ahat,
                         double *__restrict__ norms)
{
    __shared__ double part[SPAI_LIB_NORM_BLOCK];
    for (int32_t a = blockIdx.x; a < n2; a += gridDim.x) {
        const double *col = Ahat + (int64_t)a * n1;
        double s = 0.0;
        for (int32_t i = threadIdx.x; i < n1; i += blockDim.x) s = fma(col[i], col[i], s);
        part[threadIdx.x] = s;
        __syncthreads();
        for (int h = SPAI_LIB_NORM_BLOCK / 2; h > 0; h >>= 1) {
            if ((int)threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
            __syncthreads();
        }
        if (threadIdx.x == 0) norms[a] = sqrt(part[0]);
        __syncthreads();
    }
}

/* The reference's rank test (src/sparse/lsq.c) on R = triu(Ahat) after
 * dgeqrf: the first j with !(|r_jj| > n1 eps ||Â(:,j)||), or j = n1 when
 * there are more unknowns than rows; else row k missing from I_k (m_k = 0).
 * The failure key as the batched kernels record it. info: dgeqrf's and
 * dormqr's; any nonzero one lands in *bad. One block. */
__global__ void spai_lib_check_kernel(int32_t k, int32_t n1, spai_lsq_args A,
                                      const int32_t *__restrict__ mark,
                                      const double *__restrict__ Ahat,
                                      const double *__restrict__ norms, const int *info,
                                      unsigned long long *bad)
{
    __shared__ int first;
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    const int32_t kmin = n1 < n2 ? n1 : n2;
    if (threadIdx.x == 0) first = INT_MAX;
    __syncthreads();
    for (int32_t j = threadIdx.x; j < kmin; j += blockDim.x) {
        const double r = Ahat[(int64_t)j * n1 + j];
        if (!(fabs(r) > (double)n1 * DBL_EPSILON * norms[j])) atomicMin(&first, (int)j);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (info[0] != 0) atomicOr(bad, 1ull);
    int fail_j = first;
    if (fail_j == INT_MAX && n1 < n2) fail_j = n1;
    if (fail_j != INT_MAX) atomicMin(A.fail, spai_fail_key(k, GS_SPAI_COLUMN_RANK, A.mt_col[p0 + fail_j]));
    else if (!mark[k]) atomicMin(A.fail, spai_fail_key(k, GS_SPAI_COLUMN_ZERO, 0));
}

/* Row k of MT = b(0:n2). */
__global__ void spai_lib_scatter_kernel(int32_t k, spai_lsq_args A, const double *__restrict__ b,
                                        const int *info, unsigned long long *bad)
{
    const int64_t p0 = A.mt_rp[k];
    const int32_t n2 = (int32_t)(A.mt_rp[k + 1] - p0);
    for (int32_t a = blockIdx.x * blockDim.x + threadIdx.x; a < n2; a += gridDim.x * blockDim.x)
        A.mt_val[p0 + a] = b[a];
    if (blockIdx.x == 0 && threadIdx.x == 0 && info[1] != 0) atomicOr(bad, 2ull);
}

/* *p holds at least want bytes (what was there is lost). */
static int spai_lib_grow(gs_engine *e, void **p, size_t *cap, size_t want, const char *what)
{
    if (want <= *cap) return GS_OK;
    gs_cuda_free(e, *p, *cap);
    *p = NULL, *cap = 0;
    int status = gs_cuda_alloc_at(e, p, want, what, __FILE__, __LINE__);
    if (status == GS_OK) *cap = want;
    return status;
}

/* The library path over the columns cols[0..count) (host), in order, one at
 * a time on the engine's stream: memory bounded by the largest column's
 * dense n1 x n2 (plus O(n)). One read-back a column (its n1, to size the
 * factorisation). bad: nonzero when cuSOLVER reported an invalid argument. */
static int spai_launch_library(gs_engine *e, const int32_t *cols, int64_t count,
                               const spai_lsq_args &a, int32_t n, unsigned long long *bad,
                               const spai_lsq_options *o, spai_lsq_report *rep)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cusolverDnHandle_t solver = NULL;
    cublasHandle_t blas = NULL;
    int32_t *mark = NULL, *pos = NULL;
    int *info = NULL;
    unsigned long long *words = NULL;
    void *scan_tmp = NULL, *Ahat = NULL, *b = NULL, *tau = NULL, *norms = NULL, *work = NULL;
    size_t scan_bytes = 0, cap_A = 0, cap_b = 0, cap_tau = 0, cap_norms = 0, cap_work = 0;
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnCreate(&solver)));
    GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnSetStream(solver, c->stream)));
    GS_TRY(CUBLAS_CALL(&e->err, cublasCreate(&blas)));
    GS_TRY(CUBLAS_CALL(&e->err, cublasSetStream(blas, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &mark, (size_t)n * sizeof(int32_t), "spai: rows of a large column"));
    GS_TRY(gs_cuda_alloc(e, &pos, (size_t)n * sizeof(int32_t), "spai: row positions of a large column"));
    GS_TRY(gs_cuda_alloc(e, &info, 2 * sizeof(int), "spai: cuSOLVER info"));
    GS_TRY(gs_cuda_alloc(e, &words, 3 * sizeof(uint64_t), "spai: large column sizes"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, mark, pos, n, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &scan_tmp, scan_bytes, "spai: scan workspace"));
    for (int64_t i = 0; i < count; i++) {
        const int32_t k = cols[i];
        uint64_t w[3] = {0, 0, 0};
        const unsigned spread = (unsigned)c->sm_count * 2;
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(mark, 0, (size_t)n * sizeof(int32_t), c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(info, 0, 2 * sizeof(int), c->stream)));
        GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_mark_kernel, spread, 256, 0, c->stream, k, a, mark));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, mark, pos, n,
                                                                c->stream)));
        GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_count_kernel, 1, 1, 0, c->stream, k, n, a,
                           (const int32_t *)mark, (const int32_t *)pos, words));
        {
            const void *src[1] = {words};
            const int len[1] = {3};
            GS_TRY(gs_dread_words(e, 1, src, len, w));
        }
        const int32_t n2 = (int32_t)(w[1] - w[0]), n1 = (int32_t)w[2];
        if (o->pc) {                              /* the CLI's progress line: the host waits here */
            char what[96];
            snprintf(what, sizeof what, "least squares: cuSOLVER column %lld of %lld (%d x %d)",
                     (long long)i + 1, (long long)count, (int)n1, (int)n2);
            gs_pc_stage_progress(o->pc, what);
        }
        const int32_t kmin = n1 < n2 ? n1 : n2;
        const size_t a_bytes = (size_t)n1 * (size_t)n2 * sizeof(double);
        GS_TRY(spai_lib_grow(e, &Ahat, &cap_A, a_bytes, "spai: dense matrix of a large column"));
        GS_TRY(spai_lib_grow(e, &b, &cap_b, ((size_t)n1 + 1) * sizeof(double), "spai: right-hand side of a large column"));
        GS_TRY(spai_lib_grow(e, &tau, &cap_tau, ((size_t)kmin + 1) * sizeof(double), "spai: Householder scalars"));
        GS_TRY(spai_lib_grow(e, &norms, &cap_norms, ((size_t)n2 + 1) * sizeof(double), "spai: column norms"));
        if (a_bytes) GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(Ahat, 0, a_bytes, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(b, 0, ((size_t)n1 + 1) * sizeof(double), c->stream)));
        GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_fill_kernel, spread, 256, 0, c->stream, k, n1, a,
                           (const int32_t *)mark, (const int32_t *)pos, (double *)Ahat, (double *)b));
        GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_norm_kernel, spread, SPAI_LIB_NORM_BLOCK, 0, c->stream,
                           n1, n2, (const double *)Ahat, (double *)norms));
        if (kmin > 0) {
            int lw_qr = 0, lw_q = 0;
            const int lda = n1;
            GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnDgeqrf_bufferSize(solver, n1, n2, (double *)Ahat,
                                                                      lda, &lw_qr)));
            if (n1 >= n2)
                GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnDormqr_bufferSize(
                                                  solver, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, n1, 1, n2,
                                                  (const double *)Ahat, lda, (const double *)tau,
                                                  (const double *)b, n1, &lw_q)));
            const int lw = lw_qr > lw_q ? lw_qr : lw_q;
            GS_TRY(spai_lib_grow(e, &work, &cap_work, ((size_t)lw + 1) * sizeof(double), "spai: cuSOLVER workspace"));
            GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnDgeqrf(solver, n1, n2, (double *)Ahat, lda,
                                                           (double *)tau, (double *)work, lw, info)));
        }
        GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_check_kernel, 1, 256, 0, c->stream, k, n1, a,
                           (const int32_t *)mark, (const double *)Ahat, (const double *)norms,
                           (const int *)info, bad));
        if (n2 > 0 && n1 >= n2) {
            const int lw = (int)(cap_work / sizeof(double)) - 1;
            GS_TRY(CUSOLVER_CALL(&e->err, cusolverDnDormqr(solver, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, n1,
                                                           1, n2, (const double *)Ahat, n1,
                                                           (const double *)tau, (double *)b, n1,
                                                           (double *)work, lw, info + 1)));
            /* a zero pivot (a failed rank test above) gives inf/NaN here, never a fault */
            GS_TRY(CUBLAS_CALL(&e->err, cublasDtrsv(blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                                    CUBLAS_DIAG_NON_UNIT, n2, (const double *)Ahat,
                                                    n1, (double *)b, 1)));
            GS_TRY(CUDA_LAUNCH(&e->err, spai_lib_scatter_kernel, gs_dblocks(n2, 256), 256, 0,
                               c->stream, k, a, (const double *)b, (const int *)info, bad));
        }
        if ((int64_t)a_bytes > rep->cusolver_bytes) rep->cusolver_bytes = (int64_t)a_bytes;
    }
    rep->cusolver_columns = count;
cleanup:
    gs_cuda_free(e, mark, (size_t)n * sizeof(int32_t)); /* stream-ordered */
    gs_cuda_free(e, pos, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, info, 2 * sizeof(int));
    gs_cuda_free(e, words, 3 * sizeof(uint64_t));
    gs_cuda_free(e, scan_tmp, scan_bytes);
    gs_cuda_free(e, Ahat, cap_A);
    gs_cuda_free(e, b, cap_b);
    gs_cuda_free(e, tau, cap_tau);
    gs_cuda_free(e, norms, cap_norms);
    gs_cuda_free(e, work, cap_work);
    /* the frees above are ordered after the column's work on the stream;
     * the handles own no buffer of it (cublasDestroy synchronises) */
    if (solver) CUSOLVER_TEARDOWN(&gs_cuda_of(e)->teardown, cusolverDnDestroy(solver));
    if (blas) CUBLAS_TEARDOWN(&gs_cuda_of(e)->teardown, cublasDestroy(blas));
    return status;
}

int spai_lsq_solve(gs_engine *e, const gs_dcsr *AT, gs_dcsr *MT, const spai_lsq_sizes *s,
                   const spai_lsq_options *o, spai_lsq_report *rep, gs_error *err)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = MT->n;
    uint8_t *to_global = NULL, *key = NULL, *key_sorted = NULL;
    int64_t *flags = NULL, *pos = NULL;
    int32_t *list = NULL, *iota = NULL, *order = NULL;
    /* fail key, n1max, global stats (2 + classes), columns whose n1 differs */
    unsigned long long *d_words = NULL;
    /* ..., library columns, cuSOLVER argument errors, the marked global columns' need */
    const int n_words = 8 + SPAI_CLASSES;
    uint8_t *h_route = NULL;
    int32_t *h_lib = NULL;
    int64_t lib_count = 0;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    uint64_t w[4 + SPAI_CLASSES + 1] = {};
    spai_strides strides = {};
    int status = GS_OK, q1_cls = 0;
    int64_t g_need = 0, g_count = 0;
    const int64_t ne_count = (int64_t)s->stats[ST_NE_COUNT], cgls_count = (int64_t)s->stats[ST_CGLS_COUNT];
    int32_t *rejected = NULL;
    spai_heavy heavy = {};
    const unsigned grid = gs_dblocks(n, 256);
    spai_lsq_args a = spai_args(AT, MT, s->n1, NULL);
    const long long forced = gs_cuda_debug(e)->spai_cusolver_work;
    const double lib_work = forced > 0 ? (double)forced : SPAI_LIB_WORK;
    const int32_t lib_min_n2 = forced > 0 ? 1 : SPAI_LIB_MIN_N2;
    if (n == 0) return GS_OK;
    GS_TRY(gs_cuda_alloc(e, &to_global, (size_t)n, "spai: columns for the global kernel"));
    GS_TRY(gs_cuda_alloc(e, &key, (size_t)n, "spai: sort keys"));
    GS_TRY(gs_cuda_alloc(e, &flags, ((size_t)n + 1) * sizeof(int64_t), "spai: route flags"));
    GS_TRY(gs_cuda_alloc(e, &pos, ((size_t)n + 1) * sizeof(int64_t), "spai: route positions"));
    GS_TRY(gs_cuda_alloc(e, &list, (size_t)n * sizeof(int32_t), "spai: global column list"));
    GS_TRY(gs_cuda_alloc(e, &d_words, (size_t)n_words * sizeof(uint64_t), "spai: failure record"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_words, 0, (size_t)n_words * sizeof(uint64_t), c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_words, 0xff, sizeof(uint64_t), c->stream))); /* no failure */

    if (o->strategy == 1) {                       /* the decision: shared or global */
        while (q1_cls < SPAI_CLASSES - 1 && (4 << q1_cls) < o->q) q1_cls++;
        const int64_t st = spai_stride(e, q1_cls, (int64_t)s->stats[ST_NEEDMAX]);
        for (int k = 0; k < SPAI_CLASSES; k++) strides.of_class[k] = st;
    } else {
        for (int k = 0; k < SPAI_CLASSES; k++)
            strides.of_class[k] = spai_stride(e, k, (int64_t)s->stats[ST_CLASS_NEED + k]);
    }
    if (gs_cuda_debug(e)->spai_shared_cap == 1)   /* tests: every column global */
        for (int k = 0; k < SPAI_CLASSES; k++) strides.of_class[k] = 0;
    {
        GS_TRY(CUDA_LAUNCH(&e->err, spai_route_kernel, grid, 256, 0, c->stream, n,
                           (const int64_t *)s->need, (const uint8_t *)s->cls,
                           (const uint8_t *)s->route, strides, to_global, key, d_words + 2,
                           (const int64_t *)MT->rp, (const int32_t *)s->n1, lib_work, lib_min_n2,
                           d_words + 5 + SPAI_CLASSES));
    }
    {
        const void *src[2] = {d_words + 2, d_words + 5 + SPAI_CLASSES};
        const int len[2] = {2 + SPAI_CLASSES, 1};
        GS_TRY(gs_dread_words(e, 2, src, len, w + 2)); /* w[4 + SPAI_CLASSES]: library */
    }
    g_count = (int64_t)w[3], lib_count = (int64_t)w[4 + SPAI_CLASSES];
    a.fail = d_words;
    a.n1_differs = d_words + 4 + SPAI_CLASSES;
    if (o->strategy == 1) {
        GS_TRY(spai_launch_shared(e, q1_cls, n, NULL, 0, to_global, strides.of_class[0], a));
        rep->columns[q1_cls] = n - g_count - lib_count - ne_count - cgls_count;
        rep->shared_bytes[q1_cls] = strides.of_class[0];
    } else {                                      /* S2: columns sorted by q_k, descending */
        GS_TRY(gs_cuda_alloc(e, &iota, (size_t)n * sizeof(int32_t), "spai: column ids"));
        GS_TRY(gs_cuda_alloc(e, &order, (size_t)n * sizeof(int32_t), "spai: columns by group size"));
        GS_TRY(gs_cuda_alloc(e, &key_sorted, (size_t)n, "spai: sorted keys"));
        GS_TRY(CUDA_LAUNCH(&e->err, spai_iota_kernel, grid, 256, 0, c->stream, n, iota));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, key, key_sorted,
                                                                  iota, order, n, 0, 3, c->stream)));
        GS_TRY(gs_cuda_alloc(e, &tmp, tmp_bytes, "spai: sort workspace"));
        GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, key, key_sorted,
                                                                  iota, order, n, 0, 3, c->stream)));
        for (int k = SPAI_CLASSES - 1, begin = 0; k >= 0; k--) {
            const int32_t count = (int32_t)s->stats[ST_CLASS_COUNT + k];
            GS_TRY(spai_launch_shared(e, k, count, order, begin, to_global, strides.of_class[k], a));
            rep->columns[k] = count - (int64_t)w[4 + k];
            if (count) rep->shared_bytes[k] = strides.of_class[k];
            begin += count;
        }
    }
    rep->stats.qr = n - ne_count - cgls_count;
    if (ne_count > 0) {                           /* the normal equations (spai_large.cu) */
        int64_t listed = 0, rejected_count = 0;
        GS_TRY(spai_heavy_build(e, AT, &heavy));
        GS_TRY(spai_list_of(e, n, to_global, ROUTE_NE, flags, pos, list, &listed));
        GS_TRY(gs_cuda_alloc(e, &rejected, (size_t)ne_count * sizeof(int32_t), "spai: rejected columns"));
        GS_TRY(spai_ne_solve(e, AT, MT, &heavy, list, listed, (int32_t)s->stats[ST_NE_N2MAX], s->n1,
                             d_words, rejected, &rejected_count));
        rep->stats.ne = listed - rejected_count, rep->stats.ne_to_qr = rejected_count;
        rep->stats.qr += rejected_count;
        rep->stats.heavy = heavy.count;
        if (rejected_count > 0) {                 /* back to QR: global kernel or library */
            GS_TRY(CUDA_LAUNCH(&e->err, spai_reroute_kernel, gs_dblocks(rejected_count, 256), 256, 0,
                               c->stream, rejected_count, (const int32_t *)rejected,
                               (const int64_t *)s->need, (const int64_t *)MT->rp, n, lib_work,
                               lib_min_n2, to_global, d_words + 7 + SPAI_CLASSES,
                               d_words + 5 + SPAI_CLASSES));
            const void *src[1] = {d_words + 5 + SPAI_CLASSES};
            const int len[1] = {1};
            GS_TRY(gs_dread_words(e, 1, src, len, w + 4 + SPAI_CLASSES));
            lib_count = (int64_t)w[4 + SPAI_CLASSES];
        }
        GS_TRY(gs_pc_deadline(o->pc, "least squares", err));
    }
    for (int marked = 0; marked < 2; marked++) { /* QR's own global columns, then the rejected */
        int64_t listed = 0;
        GS_TRY(gs_dread_int64(e, (const int64_t *)(d_words + (marked ? 7 + SPAI_CLASSES : 2)),
                              &g_need)); /* the columns' largest need */
        GS_TRY(spai_list_of(e, n, to_global, marked ? ROUTE_GLOBAL_MARKED : ROUTE_GLOBAL, flags, pos,
                            list, &listed));
        rep->columns[SPAI_LSQ_GLOBAL] += listed;
        GS_TRY(spai_launch_global(e, (int32_t)listed, list, g_need, marked, a, n, o->who, rep, err));
    }
    if (lib_count > 0) {                          /* the library path, columns in order */
        h_route = (uint8_t *)gs_calloc((size_t)n, 1, "spai: routes of the columns", err);
        h_lib = (int32_t *)gs_calloc((size_t)lib_count, sizeof(int32_t), "spai: large columns", err);
        if (!h_route || !h_lib) {
            status = GS_ERR_NOMEM;
            goto cleanup;
        }
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(h_route, to_global, (size_t)n,
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        GS_TRY(gs_pc_deadline(o->pc, "least squares", err));
        int64_t m = 0;
        for (int32_t k = 0; k < n && m < lib_count; k++)
            if (h_route[k] == ROUTE_LIBRARY) h_lib[m++] = k;
        GS_TRY(spai_launch_library(e, h_lib, m, a, n, d_words + 6 + SPAI_CLASSES, o, rep));
    }
    if (cgls_count > 0) {                         /* CGLS (spai_large.cu) */
        int64_t listed = 0;
        GS_TRY(spai_list_of(e, n, to_global, ROUTE_CGLS, flags, pos, list, &listed));
        GS_TRY(spai_cgls_solve(e, AT, MT, list, listed, s->n1, d_words, o->pc, rep, err));
    }
    GS_TRY(CUDA_LAUNCH(&e->err, spai_max_kernel, gs_cuda_red_grid(e, n, 256), 256, 0, c->stream,
                       n, (const int32_t *)s->n1, (const uint8_t *)s->route, d_words + 1));
    {
        const void *src[3] = {d_words, d_words + 4 + SPAI_CLASSES, d_words + 6 + SPAI_CLASSES};
        const int len[3] = {2, 1, 1};
        GS_TRY(gs_dread_words(e, 3, src, len, w));
    }
    if (w[3] != 0) {  /* dgeqrf or dormqr refused an argument */
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "%s: cuSOLVER reported an invalid argument (%s) on a large column",
                              o->who, (w[3] & 1) ? "dgeqrf" : "dormqr");
        goto cleanup;
    }
    if (w[2] != 0) {  /* a workspace sized for fewer rows than the column has */
        status = gs_error_set(err, GS_ERR_INTERNAL,
                              "%s: the sizes pass and the solve counted different |I_k| for %llu "
                              "columns", o->who, (unsigned long long)w[2]);
        goto cleanup;
    }
    rep->n1max = (int32_t)w[1];
    if (w[0] != SPAI_NO_FAIL) GS_TRY(spai_failure(e, MT, s, w[0], o, err));
cleanup:
    gs_cuda_free(e, to_global, (size_t)n);
    gs_cuda_free(e, key, (size_t)n);
    gs_cuda_free(e, key_sorted, (size_t)n);
    gs_cuda_free(e, flags, ((size_t)n + 1) * sizeof(int64_t));
    gs_cuda_free(e, pos, ((size_t)n + 1) * sizeof(int64_t));
    gs_cuda_free(e, list, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, iota, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, order, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, d_words, (size_t)n_words * sizeof(uint64_t));
    gs_cuda_free(e, tmp, tmp_bytes);
    gs_cuda_free(e, rejected, (size_t)ne_count * sizeof(int32_t));
    spai_heavy_free(e, &heavy);
    free(h_route);
    free(h_lib);
    return status;
}

/* ------------------------------------------------- A, M and the report */

int spai_cuda_columns_of_A(gs_pc *pc, const gs_csr *A, gs_dcsr *AT)
{
    gs_engine *e = pc->eng;
    gs_cuda_csr_view view = {};
    gs_dcsr dA = {};
    int status = GS_OK, from_engine = 0, symmetric = 0;
    GS_TRY(gs_dcsr_of_A(e, pc->A, A, "spai", &dA, &view, &from_engine));
    /* columns of A as rows, sorted: where A's pattern is symmetric (the 3-D
     * stencils, most FEM matrices) they are its rows' patterns, and only the
     * values move, found in place; else the sorting transpose */
    GS_TRY(gs_dcsr_transpose_symmetric(e, &dA, AT, &symmetric));
    if (!symmetric) GS_TRY(gs_dcsr_transpose(e, &dA, AT, 0));
    gs_kv_str(&pc->extra, "transpose", symmetric ? "pattern-symmetric" : "sorted");
cleanup:
    gs_dcsr_release_A(e, &dA, &view); /* stream-ordered */
    return status;
}

/* M as stored on the device (pc->data), and its apply z = M r. */
typedef struct spai_cuda_data {
    gs_mat *M_eng;
    const char *save_comment;
} spai_cuda_data;

static int spai_cuda_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    spai_cuda_data *d = (spai_cuda_data *)pc->data;
    return pc->eng->ops->spmv_dot(pc->eng, d->M_eng, r, z, NULL, slot); /* z = M r */
}

static int spai_cuda_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return spai_cuda_apply_dot(pc, r, z, GS_SLOT_NONE);
}

static void spai_cuda_destroy(gs_pc *pc)
{
    spai_cuda_data *d = (spai_cuda_data *)pc->data;
    if (!d) return;
    pc->eng->ops->mat_destroy(pc->eng, d->M_eng);
    free(d);
}

/* PREFIX_M.mtx: M as stored on the device (fp32 values when stored so). */
static int spai_cuda_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    spai_cuda_data *d = (spai_cuda_data *)pc->data;
    gs_csr M = {};
    char path[4096];
    int status = pc->eng->ops->sync(pc->eng);
    if (status != GS_OK) return gs_engine_fail(pc->eng, err);
    GS_TRY(gs_cuda_mat_download(d->M_eng, &M, err));
    snprintf(path, sizeof path, "%s_M.mtx", prefix);
    status = gs_mm_write_csr(path, &M, 0, d->save_comment, err);
cleanup:
    gs_csr_free(&M);
    return status;
}

int spai_cuda_finish(gs_pc *pc, gs_dcsr *MT, gs_precision prec, const char *save_comment)
{
    gs_engine *e = pc->eng;
    gs_dcsr M = {};
    int status = GS_OK, taken = 0;
    spai_cuda_data *d = (spai_cuda_data *)gs_calloc(1, sizeof *d, "spai preconditioner", &e->err);
    if (!d) return GS_ERR_NOMEM;
    d->save_comment = save_comment;
    pc->data = d;
    pc->destroy = spai_cuda_destroy;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_dcsr_transpose(e, MT, &M, 0));       /* column k of M = row k of MT */
    gs_dcsr_free(e, MT);
    GS_TRY(gs_pc_stage_end(pc, "assemble", t0));

    t0 = gs_pc_stage_begin(pc);
    pc->nnz = M.nnz;
    pc->apply_bytes = (double)M.nnz * ((prec == GS_FP32 ? 4.0 : 8.0) + 4.0) +
                      ((double)M.n + 1.0) * 8.0 + 16.0 * M.n; /* M, r, z */
    GS_TRY(gs_cuda_mat_adopt_device_csr(e, M.n, M.n, M.nnz, M.rp, M.col, (double *)M.val, prec,
                                        NULL, &taken, &d->M_eng));
    if (taken) M = gs_dcsr{};
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
    pc->apply = spai_cuda_apply;
    pc->apply_dot = spai_cuda_apply_dot;
    gs_pc_set_products(pc, d->M_eng, NULL);
    pc->save = spai_cuda_save;
    pc->symmetric = 0;
cleanup:
    gs_dcsr_free(e, &M);
    return status;
}

void spai_cuda_report(gs_pc *pc, const spai_lsq_report *rep)
{
    char kernels[GS_KV_STR_LEN];
    size_t used = 0;
    kernels[0] = '\0';
    for (int k = 0; k <= SPAI_LSQ_GLOBAL; k++) {
        if (!rep->columns[k]) continue;
        int w;
        if (k == SPAI_LSQ_GLOBAL)
            w = snprintf(kernels + used, sizeof kernels - used, "%sglobal:%lld",
                         used ? "," : "", (long long)rep->columns[k]);
        else
            w = snprintf(kernels + used, sizeof kernels - used, "%sq%d:%lld", used ? "," : "",
                         4 << k, (long long)rep->columns[k]);
        if (w < 0 || (size_t)w >= sizeof kernels - used) break;
        used += (size_t)w;
    }
    gs_kv_num(&pc->extra, "n1max", rep->n1max);
    gs_kv_num(&pc->extra, "n2max", rep->n2max);
    gs_kv_num(&pc->extra, "n2avg", rep->n2avg);
    /* columns per kernel: "q8:N" shared-memory groups of 8 lanes, "global:N" a
     * block a column with its workspace in global memory */
    int64_t most = 0;
    for (int k = 0; k < SPAI_LSQ_GLOBAL; k++)
        if (rep->columns[k] && rep->shared_bytes[k] > most) most = rep->shared_bytes[k];
    if (most) gs_kv_num(&pc->extra, "shared_bytes_per_group", (double)most);
    if (rep->cusolver_columns) { /* "cusolver:N" columns by dgeqrf/dormqr/trsv, one at a time */
        const int w = snprintf(kernels + used, sizeof kernels - used, "%scusolver:%lld",
                               used ? "," : "", (long long)rep->cusolver_columns);
        if (w > 0 && (size_t)w < sizeof kernels - used) used += (size_t)w;
    }
    /* "ne:N" by the normal equations, a warp a column; "cgls:N" by CGLS */
    const int64_t more[2] = {rep->stats.ne, rep->stats.cgls};
    const char *more_name[2] = {"ne", "cgls"};
    for (int i = 0; i < 2; i++) {
        if (!more[i]) continue;
        const int w = snprintf(kernels + used, sizeof kernels - used, "%s%s:%lld", used ? "," : "",
                               more_name[i], (long long)more[i]);
        if (w > 0 && (size_t)w < sizeof kernels - used) used += (size_t)w;
    }
    gs_kv_str(&pc->extra, "kernels", kernels);
    gs_spai_report_lsq(pc, &rep->stats);
    if (rep->cusolver_columns)
        gs_kv_num(&pc->extra, "cusolver_bytes_max", (double)rep->cusolver_bytes);
    if (rep->columns[SPAI_LSQ_GLOBAL]) {
        gs_kv_num(&pc->extra, "global_slots", rep->global_slots);
        gs_kv_num(&pc->extra, "global_bytes_per_slot", (double)rep->shared_bytes[SPAI_LSQ_GLOBAL]);
    }
}
