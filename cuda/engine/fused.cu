/* fused.cu - CG and BiCGSTAB with a pointwise preconditioner (jacobi, none),
 * one of sparse products (gs_pc.product: fsai, ssor-ai, spai, gspai-opt,
 * isai) or one of unit triangular factors (gs_pc.factor: mic) in one
 * persistent kernel (engine op fused_run, src/engine/loop.h):
 * every iteration, its stopping and breakdown tests and maxit run inside
 * it, blocks meeting at barriers of one thread-block cluster or of a
 * cooperative grid (cooperative groups), as in NVIDIA's
 * conjugateGradientMultiBlockCG sample, but with deterministic
 * dots (per-block partials summed in block order by every block) and the
 * checks of loop_ctl.cuh. CG: Saad, "Iterative Methods for Sparse Linear
 * Systems", Alg. 9.1. */
#include <cooperative_groups.h>
#include <stddef.h>
#include <stdio.h>

#include "gs_dsparse.h" /* gs_dtri: the factors' levels */
#include "loop_ctl.cuh"
#include "reduce.cuh"

namespace cg = cooperative_groups;

/* Two ways to meet: a cooperative grid (grid.sync: a fence and an atomic
 * counter in global memory, 1.1-1.6 us a barrier on an H100,
 * scripts/bench/bench_sync.cu) or one thread-block cluster (cluster.sync: the
 * hardware barrier of one GPC, up to 16 blocks on an H100, 0.7 us). Block
 * sizes of each: */
#define FUSED_BLOCK 256
#define FUSED_CLUSTER_BLOCK 1024
/* At most this many resident blocks per multiprocessor: a barrier over
 * fewer blocks is cheaper, and small systems cannot fill more. */
#define FUSED_BLOCKS_PER_SM 4
/* The rule (fused_choose; measured on an H100 and an H200,
 * docs/perf-notebook.md):
 *  - a cluster where its blocks' threads walk at most FUSED_CLUSTER_PASSES
 *    rows a lane group (n lanes <= passes x cluster threads): on an H200,
 *    CG + Jacobi on poisson3d:16 (2 passes) took 14.6 us an iteration
 *    against the host loop's 19.9, on poisson3d:32 (16 passes) 31.1
 *    against 18.2;
 *  - else (no cluster launch) a cooperative grid where it needs at most
 *    FUSED_GRID_MAX_BLOCKS blocks of FUSED_BLOCK (each lane group one row):
 *    at 128 blocks (poisson3d:16) 15.0 us against the host loop's 21.8 on
 *    an H100, at 528 (poisson3d:32) 28.2 against 19.7;
 *  - never on rows the long-row rule split (a lane group walking a dense
 *    row alone: bloweybq 392 us an iteration against 21);
 *  - BiCGSTAB with M pointwise takes a grid of FUSED_GRID_FIRST_BLOCKS to
 *    FUSED_GRID_MAX_BLOCKS blocks before the cluster (its phases spread over
 *    more SMs; H100, cluster / grid us a step, one call: convdiff3d:16, 128
 *    blocks, 24.5 / 21.0; sherman5, 104 blocks, 25.2 / 22.3; hor_131, 28
 *    blocks, 19.6 / 19.6; but convdiff3d:8, 16 blocks, 23.6 / 25.3 and
 *    fs_541_1, 17 blocks, 43.9 / 45.5: few blocks meet faster in a cluster);
 *  - M of triangular factors (mic): the cluster wherever M u fits a block's
 *    shared memory (GS_FUSED_FACTOR_MAX_ROWS), whatever the passes: the
 *    substitutions, a barrier a level, dominate, and a block barrier costs a
 *    fraction of a launch a level (H200, CG + MIC, host loop / fused us an
 *    iteration: poisson3d:24, 13824 rows at 8 lanes, 6.75 passes, 198 / 171;
 *    poisson3d:30, 27000 rows, 13 passes, 283 / 282; bcsstk15, 3948 rows at
 *    32 lanes, 7.7 passes, 1254 / 654; poisson3d:1x1x20000, 40000 levels,
 *    204 / 115 ms a solve). */
#define FUSED_CLUSTER_PASSES 4
#define FUSED_GRID_MAX_BLOCKS 128
#define FUSED_GRID_FIRST_BLOCKS 32

struct fused_bar_grid {
    static __device__ __forceinline__ void sync() { cg::this_grid().sync(); }
};
struct fused_bar_cluster {
    static __device__ __forceinline__ void sync()
    {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
        cg::this_cluster().sync();
#else
        __trap(); /* never launched below sm_90 (fused_choose) */
#endif
    }
};

/* A sparse matrix as the fused kernel reads it: CSR, lanes threads a row
 * (1, 2, 4, ..., 32). */
struct fused_csr {
    const int64_t *row_ptr;
    const int32_t *col;
    const double *val;
    int lanes;
};

/* A triangular factor packed for the fused kernel: its rows in level order
 * (positions), each position's entries off the diagonal on the factor's
 * side contiguous (CSR over positions), so that a row's loads need only
 * its position. */
struct fused_tri {
    const int32_t *ptr; /* nlev + 1: level l is positions ptr[l] .. ptr[l + 1] */
    const int32_t *row; /* n: the row at each position */
    const int32_t *rp;  /* n + 1: position p's entries are rp[p] .. rp[p + 1] */
    const int32_t *col; /* nnz */
    const double *val;  /* nnz */
    int nlev, lanes;    /* lanes: threads a row, from the mean row */
    int64_t nnz;
};

struct fused_args {
    int64_t n;
    fused_csr A;
    const double *d; /* M = diag(d); NULL: M = I (with nprod 0) */
    /* M = P[0] (P[1] r) (nprod 2) or P[0] r (nprod 1): sparse products
     * (fsai, ssor-ai, spai, gspai-opt, isai); w is P[1] r */
    int nprod;
    fused_csr P[2];
    double *w;
    double *x, *r, *z, *p, *q; /* BiCGSTAB: x, r, p */
    double *r0, *v, *t;        /* BiCGSTAB */
    double *ph, *sh;           /* BiCGSTAB with nprod > 0: M p, M s */
    /* M u = U^-1 (dinv .* (L^-1 u)) (the TRI kernels): T[0] = L unit lower,
     * T[1] = U unit upper, each packed by levels (fused_tri); every block
     * substitutes all rows into its shared memory (fused_tri_apply), the
     * factors and dinv staged there too where staged (fused_tri_stage) */
    fused_tri T[2];
    const double *dinv;
    int staged;
    double *S;
    loop_ctl *c;
    double *part; /* FUSED_PARTS gridDim.x: one per sum of an iteration, per block */
    int slot_rho, slot_rho_new, slot_pap, slot_r0v, slot_ts, slot_tt;
};
#define FUSED_PARTS 4

/* The sums over blocks of part[0 .. gridDim.x) and of part2[..] (part2
 * NULL: one sum), in block order, in every block alike (the same bits
 * everywhere: no block needs another's). */
static __device__ double fused_grid_sum(const double *part, const double *part2, double *bcast,
                                        double *second)
{
    if (threadIdx.x < 32) {
        double s = 0.0, s2 = 0.0;
        for (unsigned j = threadIdx.x; j < gridDim.x; j += 32) {
            s += __ldcg(part + j);
            if (part2) s2 += __ldcg(part2 + j);
        }
        s = gs_warp_sum(s);
        if (part2) s2 = gs_warp_sum(s2);
        if (threadIdx.x == 0) {
            bcast[0] = s;
            bcast[1] = s2;
        }
    }
    __syncthreads();
    const double v = bcast[0];
    if (second) *second = bcast[1];
    __syncthreads();
    return v;
}

/* y = M (s .* u) (s NULL: M u), lanes threads a row (a warp's rows side by
 * side, so the warp stays converged for its shuffles); with DOT adds this
 * thread's part of y'w to *yw and, with SELF, of y'y to *yy. u, w and y
 * cross blocks: read through L2 (__ldcg); SH: u is this block's whole copy
 * in shared memory (fused_tri_apply's). */
template <bool SELF, bool DOT = true, bool SH = false>
static __device__ void fused_spmv(const fused_csr &M, int64_t n, const double *u,
                                  const double *sc, double *y, const double *w, double *yw,
                                  double *yy)
{
    const int lanes = M.lanes, rows_per_warp = 32 / lanes;
    const int lane = threadIdx.x & 31, sub = lane / lanes, in = lane % lanes;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t base = warp * rows_per_warp; base < n; base += nwarps * rows_per_warp) {
        const int64_t i = base + sub;
        double s = 0.0;
        if (i < n)
            for (int64_t k = M.row_ptr[i] + in; k < M.row_ptr[i + 1]; k += lanes) {
                const int32_t j = M.col[k];
                const double uj = SH ? u[j] : __ldcg(u + j);
                s += M.val[k] * (sc ? sc[j] * uj : uj);
            }
        for (int o = lanes >> 1; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o, lanes);
        if (in == 0 && i < n) {
            y[i] = s;
            if (DOT) *yw += s * __ldcg(w + i);
            if (DOT && SELF) *yy += s * s;
        }
    }
}

/* z = M r for a preconditioner of sparse products, r complete (after a
 * barrier); adds this thread's part of r'z to *rz. nprod 2: w = P[1] r, a
 * barrier, z = P[0] w. */
template <class Bar>
static __device__ void fused_products(const fused_args &a, const double *r, double *z,
                                      double *rz)
{
    double unused = 0.0;
    if (a.nprod == 2) {
        fused_spmv<false, false>(a.P[1], a.n, r, NULL, a.w, NULL, NULL, NULL);
        Bar::sync();
        fused_spmv<false>(a.P[0], a.n, a.w, NULL, z, r, rz, &unused);
    } else {
        fused_spmv<false>(a.P[0], a.n, r, NULL, z, r, rz, &unused);
    }
}

/* out = M u for a preconditioner of sparse products, u whole on entry;
 * ends with a barrier (out whole). */
template <class Bar>
static __device__ void fused_apply(const fused_args &a, const double *u, double *out)
{
    if (a.nprod == 2) {
        fused_spmv<false, false>(a.P[1], a.n, u, NULL, a.w, NULL, NULL, NULL);
        Bar::sync();
        fused_spmv<false, false>(a.P[0], a.n, a.w, NULL, out, NULL, NULL, NULL);
    } else {
        fused_spmv<false, false>(a.P[0], a.n, u, NULL, out, NULL, NULL, NULL);
    }
    Bar::sync();
}

/* One substitution with the factor T in place in zs (this block's shared
 * memory, n doubles), level by level, a block barrier after each; every
 * block solves all rows alike (the same bits in every block: no barrier
 * across blocks, and the products that follow read zs from shared memory).
 * UPPER 0: zs = L^-1 zs; 1: zs = U^-1 (dinv .* zs) (a row's own zs read
 * before it is overwritten; the rows it needs are solved). A level's rows
 * side by side in a warp, lanes threads a row, as fused_spmv; T's arrays
 * in shared memory where staged, else in global memory (plain loads: the
 * pointers are generic). The level's end is read one level ahead. */
template <bool UPPER>
static __device__ void fused_tri_sweep(const fused_tri &T, const double *dinv, double *zs)
{
    const int lanes = T.lanes, rows_per_warp = 32 / lanes;
    const int lane = threadIdx.x & 31, sub = lane / lanes, in = lane % lanes;
    const int first = (int)(threadIdx.x >> 5) * rows_per_warp;
    const int stride = (int)(blockDim.x >> 5) * rows_per_warp;
    int lo = 0, hi_next = T.ptr[1];
    for (int l = 0; l < T.nlev; l++) {
        const int hi = hi_next;
        if (l + 1 < T.nlev) hi_next = T.ptr[l + 2];
        for (int base = lo + first; base < hi; base += stride) {
            const int p = base + sub;
            int32_t i = -1;
            double s = 0.0, d = 1.0;
            if (p < hi) {
                i = T.row[p];
                if (UPPER) d = dinv[i];
                const int end = T.rp[p + 1];
                for (int k = T.rp[p] + in; k < end; k += lanes) s += T.val[k] * zs[T.col[k]];
            }
            for (int o = lanes >> 1; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o, lanes);
            if (in == 0 && i >= 0) zs[i] = (UPPER ? d * zs[i] : zs[i]) - s;
        }
        lo = hi;
        __syncthreads();
    }
}

/* The factors and dinv copied once into this block's shared memory after
 * zs (the layout cuda_fused_run sized: doubles first, then the indices);
 * st and *sdinv then point there. Read-only for the rest of the kernel. */
static __device__ void fused_tri_stage(const fused_args &a, double *zs, fused_tri *st,
                                       const double **sdinv)
{
    double *dp = zs + a.n;
    const double *vals[3] = {a.T[0].val, a.T[1].val, a.dinv};
    const int64_t vlen[3] = {a.T[0].nnz, a.T[1].nnz, a.n};
    double *vdst[3];
    for (int k = 0; k < 3; k++) {
        vdst[k] = dp;
        for (int64_t j = threadIdx.x; j < vlen[k]; j += blockDim.x) dp[j] = __ldg(vals[k] + j);
        dp += vlen[k];
    }
    int32_t *ip = (int32_t *)dp;
    int32_t *idst[2][4];
    for (int f = 0; f < 2; f++) {
        const fused_tri &T = a.T[f];
        const int32_t *src[4] = {T.ptr, T.row, T.rp, T.col};
        const int64_t len[4] = {(int64_t)T.nlev + 1, a.n, a.n + 1, T.nnz};
        for (int k = 0; k < 4; k++) {
            idst[f][k] = ip;
            for (int64_t j = threadIdx.x; j < len[k]; j += blockDim.x) ip[j] = __ldg(src[k] + j);
            ip += len[k];
        }
    }
    if (threadIdx.x == 0) {
        for (int f = 0; f < 2; f++) {
            st[f] = a.T[f];
            st[f].ptr = idst[f][0], st[f].row = idst[f][1], st[f].rp = idst[f][2];
            st[f].col = idst[f][3], st[f].val = vdst[f];
        }
        *sdinv = vdst[2];
    }
    __syncthreads();
}

/* The factors this block reads: staged into its shared memory, or a.T
 * and a.dinv as they are. */
static __device__ void fused_tri_begin(const fused_args &a, double *zs, fused_tri *st,
                                       const double **sdinv)
{
    if (a.staged) {
        fused_tri_stage(a, zs, st, sdinv);
        return;
    }
    if (threadIdx.x == 0) st[0] = a.T[0], st[1] = a.T[1], *sdinv = a.dinv;
    __syncthreads();
}

/* zs = M u for M of triangular factors T (T[0] lower, T[1] upper), u whole
 * (after a barrier); zs whole in this block on return. */
static __device__ void fused_tri_apply(const fused_tri *T, const double *dinv, int64_t n,
                                       const double *u, double *zs)
{
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) zs[i] = __ldcg(u + i);
    __syncthreads();
    fused_tri_sweep<false>(T[0], dinv, zs);
    fused_tri_sweep<true>(T[1], dinv, zs);
}

/* *dst = *src for the host, but for running: the other blocks may still be
 * reading it after the last barrier (the same value, but no write may race
 * with those reads). */
static __device__ void fused_ctl_write_back(loop_ctl *dst, const loop_ctl *src)
{
    const int32_t *s = (const int32_t *)src;
    int32_t *d = (int32_t *)dst;
    const size_t skip = offsetof(loop_ctl, running) / sizeof(int32_t);
    for (size_t i = 0; i < sizeof(loop_ctl) / sizeof(int32_t); i++)
        if (i != skip) d[i] = s[i];
}

/* The slots the check reads, from the values block 0 holds (each
 * written to S as well); any other slot from S. */
struct fused_slots {
    const double *S;
    int n;
    int slot[5];
    double v[5];
    __device__ double operator()(int i) const
    {
        for (int k = 0; k < n; k++)
            if (slot[k] == i) return v[k];
        return __ldcg(S + i);
    }
};

/* The step's verdict by block 0's thread 0 on its shared-memory copy of
 * the loop state (ctl: read once at the start, written back at the end:
 * no dependent global loads on the iteration's critical path); the other
 * blocks read c->running after the next barrier. */
static __device__ void fused_check(const fused_args &a, loop_ctl *ctl, const fused_slots &sl)
{
    const int64_t it = ++ctl->it;
    int stop = GS_LOOP_RUNNING;
    if ((it - ctl->it0) % ctl->check_every == 0 || it >= ctl->maxit)
        stop = loop_verdict_of(sl, ctl, it);
    else if (ctl->record_every) /* --history: every iteration, with its time */
        loop_record(ctl, it, sqrt(fabs(sl(ctl->slot_rr))) / ctl->bnorm, loop_globaltimer());
    const bool yield =
        stop == GS_LOOP_RUNNING && ctl->has_yield && loop_globaltimer() >= ctl->yield_ns;
    ctl->stop = stop;
    ctl->yielded = yield;
    ctl->running = stop == GS_LOOP_RUNNING && !yield;
    a.c->running = ctl->running;
}

/* Iterations until the check stops the loop or the host's progress wants
 * a yield; three grid barriers an iteration:
 *   q = A p, p'q | alpha; x += alpha p, r -= alpha q, z = M r, r'r, r'z |
 *   the check (block 0), beta, p = z + beta p | stop?
 * and one more before z = M r where M needs the whole r (products: one
 * after P[1] r too; triangular factors: every block substitutes all of z
 * into its shared memory, a block barrier a level, and keeps its rows). 
 * Coefficients as gs_coef_eval makes them (x / 0 = 0), so a breakdown is
 * seen by the tests on the slots, as on the host. */
template <class Bar, bool TRI>
__global__ void __launch_bounds__(FUSED_CLUSTER_BLOCK) fused_cg_kernel(fused_args a)
{
    extern __shared__ double zs[]; /* TRI: M r, n doubles (then the staged factors) */
    __shared__ double smem[32];
    __shared__ double bcast[2];
    __shared__ loop_ctl ctl; /* block 0's thread 0 */
    __shared__ fused_tri tri[2];
    __shared__ const double *tri_dinv;
    if (blockIdx.x == 0 && threadIdx.x == 0) ctl = *a.c;
    if (TRI) fused_tri_begin(a, zs, tri, &tri_dinv);
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nthreads = (int64_t)gridDim.x * blockDim.x;
    const unsigned G = gridDim.x;
    double rho = __ldcg(a.S + a.slot_rho);
    for (;;) {
        double pq = 0.0, unused = 0.0;
        fused_spmv<false>(a.A, a.n, a.p, NULL, a.q, a.p, &pq, &unused);
        pq = gs_block_sum(pq, smem);
        if (threadIdx.x == 0) a.part[blockIdx.x] = pq;
        Bar::sync();
        const double pap = fused_grid_sum(a.part, NULL, bcast, NULL);
        const double alpha = pap == 0.0 ? 0.0 : rho / pap;
        double rr = 0.0, rz = 0.0;
        for (int64_t i = tid; i < a.n; i += nthreads) {
            a.x[i] += alpha * a.p[i];
            const double ri = a.r[i] - alpha * __ldcg(a.q + i);
            a.r[i] = ri;
            rr += ri * ri;
            if (!TRI && a.nprod == 0) {
                const double zi = a.d ? a.d[i] * ri : ri;
                a.z[i] = zi;
                rz += ri * zi;
            }
        }
        if (TRI) { /* z = M r needs the whole r; each block's own copy */
            Bar::sync();
            fused_tri_apply(tri, tri_dinv, a.n, a.r, zs);
            for (int64_t i = tid; i < a.n; i += nthreads) {
                const double zi = zs[i];
                a.z[i] = zi;
                rz += a.r[i] * zi;
            }
        } else if (a.nprod > 0) { /* z = M r needs the whole r */
            Bar::sync();
            fused_products<Bar>(a, a.r, a.z, &rz);
        }
        rr = gs_block_sum(rr, smem);
        rz = gs_block_sum(rz, smem);
        if (threadIdx.x == 0) {
            a.part[G + blockIdx.x] = rr;
            a.part[2 * G + blockIdx.x] = rz;
        }
        Bar::sync();
        rr = fused_grid_sum(a.part + G, a.part + 2 * G, bcast, &rz);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.S[ctl.slot_rr] = rr;
            a.S[a.slot_pap] = pap;
            a.S[a.slot_rho_new] = rz;
            const fused_slots sl = {a.S, 3, {ctl.slot_rr, a.slot_pap, a.slot_rho_new}, {rr, pap, rz}};
            fused_check(a, &ctl, sl);
            a.S[a.slot_rho] = rz; /* a relaunch after a yield starts from here */
        }
        const double beta = rho == 0.0 ? 0.0 : rz / rho;
        rho = rz;
        for (int64_t i = tid; i < a.n; i += nthreads) /* z[i]: another block's, with products */
            a.p[i] = (TRI ? zs[i] : __ldcg(a.z + i)) + beta * a.p[i];
        Bar::sync();
        if (!*(volatile int32_t *)&a.c->running) break;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) fused_ctl_write_back(a.c, &ctl); /* for the host */
}

/* BiCGSTAB with right preconditioning (bicgstab.c's step). M = diag(d) or I:
 * phat = M p and shat = M s are formed where they are read, never stored,
 * five barriers a step as below; M of sparse products: phat and shat are
 * formed and stored first (fused_apply: one barrier after each product, so
 * 7 or 9 barriers a step); M of triangular factors: every block forms all
 * of phat (shat) in its shared memory, keeps its rows and multiplies by A
 * from there, so five barriers as for M pointwise:
 *   v = A M p, r0'v | alpha; s = r - alpha v (in r) |
 *   t = A M s, t's, t't | omega; x += alpha M p + omega M s; r = s - omega t,
 *   r'r, r0'r | the check (block 0), beta, p = r + beta (p - omega v) | stop?
 * Coefficients as bicgstab.c's gs_coef expressions evaluate them (x / 0 = 0). */
template <class Bar, bool TRI>
__global__ void __launch_bounds__(FUSED_CLUSTER_BLOCK) fused_bicgstab_kernel(fused_args a)
{
    extern __shared__ double zs[]; /* TRI: M p, then M s, n doubles (then the staged factors) */
    __shared__ double smem[32];
    __shared__ double bcast[2];
    __shared__ loop_ctl ctl; /* block 0's thread 0 */
    __shared__ fused_tri tri[2];
    __shared__ const double *tri_dinv;
    if (blockIdx.x == 0 && threadIdx.x == 0) ctl = *a.c;
    if (TRI) fused_tri_begin(a, zs, tri, &tri_dinv);
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nthreads = (int64_t)gridDim.x * blockDim.x;
    const unsigned G = gridDim.x;
    double rho = __ldcg(a.S + a.slot_rho);
    for (;;) {
        double r0v = 0.0, ts = 0.0, tt = 0.0, rr = 0.0, rho_new = 0.0;
        if (TRI) { /* phat = M p (this block's copy; its rows kept), v = A phat */
            fused_tri_apply(tri, tri_dinv, a.n, a.p, zs);
            for (int64_t i = tid; i < a.n; i += nthreads) a.ph[i] = zs[i];
            fused_spmv<false, true, true>(a.A, a.n, zs, NULL, a.v, a.r0, &r0v, &tt);
        } else if (a.nprod > 0) { /* phat = M p, then v = A phat */
            fused_apply<Bar>(a, a.p, a.ph);
            fused_spmv<false>(a.A, a.n, a.ph, NULL, a.v, a.r0, &r0v, &tt);
        } else {
            fused_spmv<false>(a.A, a.n, a.p, a.d, a.v, a.r0, &r0v, &tt);
        }
        r0v = gs_block_sum(r0v, smem);
        if (threadIdx.x == 0) a.part[blockIdx.x] = r0v;
        Bar::sync();
        r0v = fused_grid_sum(a.part, NULL, bcast, NULL);
        const double alpha = r0v == 0.0 ? 0.0 : rho / r0v;
        for (int64_t i = tid; i < a.n; i += nthreads) a.r[i] = -alpha * __ldcg(a.v + i) + a.r[i];
        Bar::sync();
        if (TRI) { /* shat = M s, t = A shat */
            fused_tri_apply(tri, tri_dinv, a.n, a.r, zs);
            for (int64_t i = tid; i < a.n; i += nthreads) a.sh[i] = zs[i];
            fused_spmv<true, true, true>(a.A, a.n, zs, NULL, a.t, a.r, &ts, &tt);
        } else if (a.nprod > 0) { /* shat = M s, then t = A shat */
            fused_apply<Bar>(a, a.r, a.sh);
            fused_spmv<true>(a.A, a.n, a.sh, NULL, a.t, a.r, &ts, &tt);
        } else {
            fused_spmv<true>(a.A, a.n, a.r, a.d, a.t, a.r, &ts, &tt);
        }
        ts = gs_block_sum(ts, smem);
        tt = gs_block_sum(tt, smem);
        if (threadIdx.x == 0) {
            a.part[G + blockIdx.x] = ts;
            a.part[2 * G + blockIdx.x] = tt;
        }
        Bar::sync();
        ts = fused_grid_sum(a.part + G, a.part + 2 * G, bcast, &tt);
        const double omega = tt == 0.0 ? 0.0 : ts / tt;
        for (int64_t i = tid; i < a.n; i += nthreads) {
            const double si = a.r[i], pi = a.p[i];
            const double ph = TRI || a.nprod ? __ldcg(a.ph + i) : a.d ? a.d[i] * pi : pi;
            const double sh = TRI || a.nprod ? __ldcg(a.sh + i) : a.d ? a.d[i] * si : si;
            a.x[i] = alpha * ph + omega * sh + a.x[i];
            const double ri = -omega * __ldcg(a.t + i) + si;
            a.r[i] = ri;
            rr += ri * ri;
            rho_new += __ldcg(a.r0 + i) * ri;
        }
        rr = gs_block_sum(rr, smem);
        rho_new = gs_block_sum(rho_new, smem);
        if (threadIdx.x == 0) {
            a.part[blockIdx.x] = rr; /* r0'v's partials are read: free again */
            a.part[3 * G + blockIdx.x] = rho_new;
        }
        Bar::sync();
        rr = fused_grid_sum(a.part, a.part + 3 * G, bcast, &rho_new);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.S[ctl.slot_rr] = rr;
            a.S[a.slot_rho] = rho_new;
            a.S[a.slot_r0v] = r0v;
            a.S[a.slot_ts] = ts;
            a.S[a.slot_tt] = tt;
            const fused_slots sl = {a.S, 5, {ctl.slot_rr, a.slot_rho, a.slot_r0v, a.slot_ts, a.slot_tt},
                                    {rr, rho_new, r0v, ts, tt}};
            fused_check(a, &ctl, sl);
        }
        /* p = r + beta p - beta omega v, beta = (rho_new / rho) (alpha / omega) */
        const double cv = rho == 0.0 ? 0.0 : -1.0 * rho_new * alpha / rho;
        const double dp = rho * omega;
        const double cp = dp == 0.0 ? 0.0 : rho_new * alpha / dp;
        rho = rho_new;
        for (int64_t i = tid; i < a.n; i += nthreads)
            a.p[i] = a.r[i] + cv * __ldcg(a.v + i) + cp * a.p[i];
        Bar::sync();
        if (!*(volatile int32_t *)&a.c->running) break;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) fused_ctl_write_back(a.c, &ctl); /* for the host */
}

/* Threads a row: the power of two at or above the mean row length, up to
 * a warp (vector CSR's rule). */
static int fused_lanes(int64_t n, int64_t nnz)
{
    const double mean = n > 0 ? (double)nnz / (double)n : 1.0;
    int lanes = 1;
    while (lanes < 32 && lanes < mean) lanes *= 2;
    return lanes;
}

static int fused_decline(gs_loop *L, const char *why)
{
    snprintf(L->declined, sizeof L->declined, "fused: %s", why);
    return GS_OK;
}

typedef void (*fused_kernel_fn)(fused_args);

/* One launch of the fused path: the kernel, how its blocks meet, how many. */
typedef struct fused_launch_arg {
    fused_kernel_fn kernel;
    int cluster; /* 1: one cluster of `blocks` blocks; 0: a cooperative grid */
    unsigned blocks;
    size_t smem;     /* dynamic shared memory a block (M u of triangular factors) */
    size_t smem_max; /* what the device lets a block of the kernel take */
    fused_args args;
} fused_launch_arg;

/* The largest cluster of FUSED_CLUSTER_BLOCK threads a block that the
 * device can launch with this kernel (0: none, e.g. below sm_90). */
/* The cache of fused_caps: slot of kernel (found or new), -1 when full. */
static int fused_cap_slot(gs_cuda_impl *c, const void *kernel, int *found)
{
    const int n = (int)(sizeof c->fused_caps / sizeof c->fused_caps[0]);
    for (int i = 0; i < n; i++) {
        if (c->fused_caps[i].kernel == kernel) return *found = 1, i;
        if (!c->fused_caps[i].kernel) return *found = 0, i;
    }
    return *found = 0, -1;
}

/* tri (a kernel of M's triangular factors): with as much dynamic shared
 * memory a block as the device lets the kernel take, in *smem. */
static int fused_cluster_cap_query(gs_engine *e, fused_kernel_fn kernel, int tri, int *cap,
                                   size_t *smem)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int cc = 0, size = 0, active = 0, optin = 0, status = GS_OK;
    cudaFuncAttributes fa;
    *cap = 0;
    *smem = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor,
                                                     c->device)));
    if (cc < 9) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute((const void *)kernel,
                                                   cudaFuncAttributeNonPortableClusterSizeAllowed,
                                                   1)));
    if (tri) {
        GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(
                                      &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device)));
        GS_TRY(CUDA_CALL(&e->err, cudaFuncGetAttributes(&fa, (const void *)kernel)));
        if ((size_t)optin <= fa.sharedSizeBytes) return GS_OK;
        *smem = (size_t)optin - fa.sharedSizeBytes;
        GS_TRY(CUDA_CALL(&e->err, cudaFuncSetAttribute((const void *)kernel,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)*smem)));
    }
    {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(16);
        cfg.blockDim = dim3(FUSED_CLUSTER_BLOCK);
        cfg.dynamicSmemBytes = *smem;
        GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxPotentialClusterSize(&size, (const void *)kernel,
                                                                       &cfg)));
        if (size < 1) return GS_OK;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = (unsigned)size;
        attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)size);
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveClusters(&active, (const void *)kernel,
                                                                 &cfg)));
    }
    *cap = active >= 1 ? size : 0;
cleanup:
    return status;
}

/* The cooperative grid's cap: FUSED_BLOCKS_PER_SM or what the occupancy
 * calculator says can be resident at once (a cooperative launch needs every
 * block resident). 0: no cooperative launch here. */
static int fused_grid_cap_query(gs_engine *e, fused_kernel_fn kernel, int tri, int *cap,
                                size_t *smem)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int coop = 0, occ = 0, status = GS_OK;
    *cap = 0;
    *smem = 0;
    if (tri) return GS_OK; /* the factors' kernels run in a cluster only */
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch,
                                                     c->device)));
    if (!coop) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel,
                                                                            FUSED_BLOCK, 0)));
    if (occ < 1) return GS_OK;
    *cap = c->sm_count * (occ < FUSED_BLOCKS_PER_SM ? occ : FUSED_BLOCKS_PER_SM);
cleanup:
    return status;
}

/* A cap above (query: fused_cluster_cap_query or fused_grid_cap_query)
 * and its shared memory, asked once per engine and kernel (the cluster and
 * the grid kernels are distinct instances, so one cache serves both). */
typedef int (*fused_cap_query_fn)(gs_engine *, fused_kernel_fn, int, int *, size_t *);
static int fused_cap(gs_engine *e, fused_kernel_fn kernel, int tri, fused_cap_query_fn query,
                     int *cap, size_t *smem)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int found = 0, status = GS_OK;
    const int i = fused_cap_slot(c, (const void *)kernel, &found);
    if (found) return *cap = c->fused_caps[i].cap, *smem = c->fused_caps[i].smem, GS_OK;
    GS_TRY(query(e, kernel, tri, cap, smem));
    if (i >= 0)
        c->fused_caps[i].kernel = (const void *)kernel, c->fused_caps[i].cap = *cap,
        c->fused_caps[i].smem = *smem;
cleanup:
    return status;
}

static unsigned fused_blocks_for(int64_t lane_rows, int64_t block, unsigned cap)
{
    const int64_t want = (lane_rows + block - 1) / block;
    return want < (int64_t)cap ? (unsigned)(want > 0 ? want : 1) : cap;
}

/* The rule (see FUSED_CLUSTER_PASSES): which launch, how many blocks, or a
 * reason to decline in L->declined. --loop fused (GS_FUSED=on) takes the cluster where
 * it holds every row in its passes' rule, else the grid, wherever they can
 * launch; GS_FUSED=cluster / grid force one kind. tri (M of triangular
 * factors): the cluster only, where n doubles fit a block's shared memory
 * (arg->smem). */
static int fused_choose(gs_engine *e, fused_kernel_fn cl, fused_kernel_fn gr, int tri,
                        int64_t n, int lanes, int grid_first, fused_launch_arg *arg, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int force = c->debug.fused, want = c->debug.fused_sync;
    int ccap = 0, gcap = 0, status = GS_OK;
    size_t csmem = 0, gsmem = 0;
    char why[150];
    arg->blocks = 0;
    arg->smem = arg->smem_max = 0;
    if (want != GS_DEBUG_SYNC_GRID &&
        (status = fused_cap(e, cl, tri, fused_cluster_cap_query, &ccap, &csmem)) != GS_OK)
        return status;
    if (!tri && want != GS_DEBUG_SYNC_CLUSTER && /* tri: no grid (gr is not a tri kernel) */
        (status = fused_cap(e, gr, tri, fused_grid_cap_query, &gcap, &gsmem)) != GS_OK)
        return status;
    if (tri) {
        if (ccap == 0) return fused_decline(L, "M's triangular factors run in a cluster only");
        if ((size_t)n * sizeof(double) > csmem) {
            snprintf(why, sizeof why, "%lld rows: M u in a block's shared memory needs %lld "
                     "bytes, the device gives %lld", (long long)n,
                     (long long)n * (long long)sizeof(double), (long long)csmem);
            return fused_decline(L, why);
        }
        arg->smem = (size_t)n * sizeof(double);
        arg->smem_max = csmem;
    }
    if (ccap == 0 && gcap == 0) return fused_decline(L, "no cluster or cooperative launch here");
    const int64_t cluster_rows = (int64_t)FUSED_CLUSTER_PASSES * ccap * FUSED_CLUSTER_BLOCK;
    const int64_t lane_rows = n * lanes;
    const int64_t grid_blocks = (lane_rows + FUSED_BLOCK - 1) / FUSED_BLOCK;
    if (grid_first && want == 0 && gcap > 0 && grid_blocks >= FUSED_GRID_FIRST_BLOCKS &&
        grid_blocks <= FUSED_GRID_MAX_BLOCKS)
        ccap = 0; /* the grid where it fits (BiCGSTAB with M pointwise, below) */
    if (ccap > 0 && (tri || want == GS_DEBUG_SYNC_CLUSTER || lane_rows <= cluster_rows ||
                     (force == GS_DEBUG_FORCE_ON && gcap == 0))) {
        arg->kernel = cl;
        arg->cluster = 1;
        arg->blocks = fused_blocks_for(lane_rows, FUSED_CLUSTER_BLOCK, (unsigned)ccap);
    } else if (gcap > 0) {
        arg->kernel = gr;
        arg->cluster = 0;
        arg->blocks = fused_blocks_for(lane_rows, FUSED_BLOCK, (unsigned)gcap);
        const int64_t want_blocks = (lane_rows + FUSED_BLOCK - 1) / FUSED_BLOCK;
        if (force != GS_DEBUG_FORCE_ON && want != GS_DEBUG_SYNC_GRID &&
            want_blocks > FUSED_GRID_MAX_BLOCKS) {
            snprintf(why, sizeof why,
                     "%lld rows of %d lanes above the rule's cluster (%lld) and grid (%d blocks) "
                     "limits (--loop fused forces it)",
                     (long long)n, lanes, (long long)cluster_rows, FUSED_GRID_MAX_BLOCKS);
            arg->blocks = 0;
            return fused_decline(L, why);
        }
    } else {
        snprintf(why, sizeof why, "%lld rows of %d lanes above the cluster's %lld (no cooperative "
                 "launch here)", (long long)n, lanes, (long long)cluster_rows);
        return fused_decline(L, why);
    }
    return GS_OK;
}

/* One launch (loop_launches): a single cluster, or a cooperative grid. */
static int fused_launch(gs_engine *e, void *arg)
{
    fused_launch_arg *f = (fused_launch_arg *)arg;
    cudaStream_t stream = gs_cuda_of(e)->stream;
    if (!f->cluster) {
        void *params[] = {&f->args};
        return CUDA_CALL(&e->err, cudaLaunchCooperativeKernel((const void *)f->kernel,
                                                              dim3(f->blocks), dim3(FUSED_BLOCK),
                                                              params, 0, stream));
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = f->blocks;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(f->blocks);
    cfg.blockDim = dim3(FUSED_CLUSTER_BLOCK);
    cfg.dynamicSmemBytes = f->smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return CUDA_CALL(&e->err, cudaLaunchKernelEx(&cfg, f->kernel, f->args));
}

static int fused_spec_valid(gs_engine *e, const gs_fused *f, int64_t n)
{
    const int is_cg = f->method == GS_FUSED_CG;
    const gs_vec *cg_v[] = {f->x, f->r, f->z, f->p, f->q}, *bi_v[] = {f->x, f->r, f->p, f->r0,
                                                                       f->v, f->t};
    const int cg_s[] = {f->slot_rho, f->slot_rho_new, f->slot_pap};
    const int bi_s[] = {f->slot_rho, f->slot_r0v, f->slot_ts, f->slot_tt};
    int bad = (!is_cg && f->method != GS_FUSED_BICGSTAB) || (f->d && f->d->n != n);
    for (int i = 0; !bad && i < (is_cg ? 5 : 6); i++) {
        const gs_vec *v = is_cg ? cg_v[i] : bi_v[i];
        bad = !v || v->n != n;
    }
    for (int i = 0; !bad && i < (is_cg ? 3 : 4); i++)
        bad = gs_cuda_check_slot(e, is_cg ? cg_s[i] : bi_s[i], "fused_run") != GS_OK;
    if (!bad) bad = f->nprod < 0 || f->nprod > 2 || (f->nprod > 0 && f->d);
    if (!bad && f->factor[0])
        bad = f->nprod != 0 || f->d || !f->factor[1] || !f->factor_dinv ||
              f->factor_dinv->n != n;
    for (int k = 0; !bad && f->factor[0] && k < 2; k++) {
        const gs_cuda_mat_info fi = gs_cuda_mat_info_of(f->factor[k]);
        bad = fi.n_rows != n || fi.n_cols != n;
    }
    if (!bad && !is_cg && (f->nprod > 0 || f->factor[0]))
        bad = !f->phat || !f->shat || f->phat->n != n || f->shat->n != n;
    for (int k = 0; !bad && k < f->nprod; k++) {
        const gs_cuda_mat_info pi = f->prod[k] ? gs_cuda_mat_info_of(f->prod[k])
                                               : gs_cuda_mat_info{0, 0, 0, GS_FP64};
        bad = pi.n_rows != n || pi.n_cols != n;
    }
    return bad ? gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda fused_run: bad description")
               : GS_OK;
}

/* A factor packed for the fused kernel (fused_tri), on the device: its
 * levels (gs_dtri, the toolkit's analysis), then its rows in level order
 * with their entries off the diagonal on its side. */
typedef struct fused_levels {
    int32_t n_levels;
    int upper;
    int64_t n, nnz;
    int lanes;
    int32_t *ptr, *row, *rp, *col; /* device: n_levels + 1, n, n + 1, nnz */
    double *val;                   /* device, nnz */
} fused_levels;

static void fused_levels_free(gs_engine *e, fused_levels *lv)
{
    if (!lv) return;
    gs_cuda_free(e, lv->ptr, ((size_t)lv->n_levels + 1) * sizeof(int32_t));
    gs_cuda_free(e, lv->row, (size_t)lv->n * sizeof(int32_t));
    gs_cuda_free(e, lv->rp, ((size_t)lv->n + 1) * sizeof(int32_t));
    gs_cuda_free(e, lv->col, (size_t)lv->nnz * sizeof(int32_t));
    gs_cuda_free(e, lv->val, (size_t)lv->nnz * sizeof(double));
    free(lv);
}

/* Drops the cache's place k. */
static void fused_drop(gs_engine *e, int k)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    if (!c->fused_mat[k]) return;
    if (c->fused_view[k].owned || c->fused_levels[k]) /* no kernel reads them; an error stays in e->err */
        (void)CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    fused_levels_free(e, (fused_levels *)c->fused_levels[k]);
    c->fused_levels[k] = NULL;
    gs_cuda_csr_view_free(e, &c->fused_view[k]);
    c->fused_mat[k] = NULL;
}

void gs_cuda_fused_forget(gs_engine *e, const gs_mat *A)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    for (int k = 0; k < GS_CUDA_FUSED_MATS; k++)
        if (c->fused_mat[k] && (!A || A == c->fused_mat[k])) fused_drop(e, k);
}

/* Whether the fused kernel may read M (k: 0 for A, 1 and 2 for the
 * preconditioner's products): declines (0 in *ok, why in L) for fp32
 * storage and for long rows (one lane group would walk a long row alone)
 * unless forced; out->lanes from M's shape. Nothing is
 * allocated: the CSR view is built only once the rule has said yes. */
static void fused_mat_check(gs_engine *e, const gs_mat *M, int k, fused_csr *out, int *ok,
                            gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_cuda_mat_info info = gs_cuda_mat_info_of(M);
    *ok = 0;
    if (info.prec != GS_FP64) {
        fused_decline(L, k ? "M is not stored in fp64" : "A is not stored in fp64");
        return;
    }
    if (c->debug.fused != GS_DEBUG_FORCE_ON) {
        const gs_cuda_row_stats st = gs_cuda_mat_row_stats(M);
        if (st.n_long > 0) {
            char why[140];
            snprintf(why, sizeof why, "%s: %lld long rows (up to %lld entries; --loop fused "
                     "forces it)", k ? "M" : "A", (long long)st.n_long, (long long)st.max_row);
            fused_decline(L, why);
            return;
        }
    }
    out->lanes = fused_lanes(info.n_rows, info.nnz);
    *ok = 1;
}

/* M's CSR as the fused kernel reads it, in the cache's place k, the one
 * kept from the last solve where it is M's (a copy where M is laid out in
 * sliced ELL). */
static int fused_mat_view(gs_engine *e, const gs_mat *M, int k, fused_csr *out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    if (c->fused_mat[k] != M) { /* this place only: the others hold A or the other product */
        fused_drop(e, k);
        GS_TRY(gs_cuda_mat_device_csr(e, M, &c->fused_view[k]));
        c->fused_mat[k] = M;
    }
    out->row_ptr = c->fused_view[k].row_ptr;
    out->col = c->fused_view[k].col;
    out->val = c->fused_view[k].val;
cleanup:
    return status;
}

/* The factor in the cache's place k (its view made by fused_mat_view)
 * packed for the kernel, once while that matrix stays there: lower
 * (upper 0) or upper triangular, entries on the other side and the
 * diagonal ignored. The levels are given's where the setup passes its own
 * analysis of this triangle (the same pattern: gs_cuda_fused_prepare_factors),
 * else the toolkit's analysis on the device, made here and freed once
 * packed; the packing itself is done on the host (the fused path takes at
 * most GS_FUSED_FACTOR_MAX_ROWS rows: a copy each way of a few MB at most,
 * once per factor) and uploaded. */
static int fused_factor_levels(gs_engine *e, int k, int upper, const gs_dtri *given,
                               fused_levels **out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_cuda_csr_view *v = &c->fused_view[k];
    fused_levels *lv = (fused_levels *)c->fused_levels[k];
    int64_t *rp = NULL;
    int32_t *col = NULL, *by_level = NULL, *h = NULL;
    double *val = NULL, *pval = NULL;
    gs_dtri own = {};
    const gs_dtri *t = given;
    int status = GS_OK;
    if (lv && lv->upper == upper) return *out = lv, GS_OK;
    fused_levels_free(e, lv);
    c->fused_levels[k] = NULL;
    lv = (fused_levels *)gs_calloc(1, sizeof *lv, "fused: factor levels", &e->err);
    if (!lv) return GS_ERR_NOMEM;
    lv->n = v->n_rows, lv->upper = upper;
    if (!t || t->n != v->n_rows || t->upper != (upper ? 1 : 0) || !t->level_ptr) {
        GS_TRY(gs_dtri_analyse(e, v->n_rows, v->nnz, v->row_ptr, v->col, upper, &own));
        t = &own;
    }
    lv->n_levels = t->n_levels;
    {
        const int64_t n = lv->n, nnz = v->nnz, nl = t->n_levels;
        rp = (int64_t *)gs_malloc(((size_t)n + 1) * sizeof(int64_t), "fused: factor", &e->err);
        col = (int32_t *)gs_malloc((size_t)nnz * sizeof(int32_t) + 1, "fused: factor", &e->err);
        val = (double *)gs_malloc((size_t)nnz * sizeof(double) + 1, "fused: factor", &e->err);
        by_level = (int32_t *)gs_malloc((size_t)n * sizeof(int32_t) + 1, "fused: factor", &e->err);
        /* h: ptr, row, rp, col of the packed factor, one allocation */
        h = (int32_t *)gs_malloc(((size_t)nl + 1 + 2 * (size_t)n + 1 + (size_t)nnz) *
                                 sizeof(int32_t), "fused: factor", &e->err);
        pval = (double *)gs_malloc((size_t)nnz * sizeof(double) + 1, "fused: factor", &e->err);
        if (!rp || !col || !val || !by_level || !h || !pval) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(rp, v->row_ptr, ((size_t)n + 1) * sizeof(int64_t),
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(col, v->col, (size_t)nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(val, v->val, (size_t)nnz * sizeof(double),
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(by_level, t->level_rows,
                                                  (size_t)n * sizeof(int32_t),
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        int32_t *hptr = h, *hrow = h + nl + 1, *hrp = hrow + n, *hcol = hrp + n + 1;
        int64_t m = 0;
        for (int64_t l = 0; l <= nl; l++) hptr[l] = (int32_t)t->level_ptr[l];
        for (int64_t p = 0; p < n; p++) {
            const int32_t i = by_level[p];
            hrow[p] = i;
            hrp[p] = (int32_t)m;
            for (int64_t q = rp[i]; q < rp[i + 1]; q++)
                if (upper ? col[q] > i : col[q] < i) hcol[m] = col[q], pval[m++] = val[q];
        }
        hrp[n] = (int32_t)m;
        lv->nnz = m;
        lv->lanes = fused_lanes(n, m);
        GS_TRY(gs_cuda_alloc(e, &lv->ptr, ((size_t)nl + 1) * sizeof(int32_t), "fused: levels"));
        GS_TRY(gs_cuda_alloc(e, &lv->row, (size_t)n * sizeof(int32_t), "fused: rows by level"));
        GS_TRY(gs_cuda_alloc(e, &lv->rp, ((size_t)n + 1) * sizeof(int32_t), "fused: factor rows"));
        GS_TRY(gs_cuda_alloc(e, &lv->col, (size_t)m * sizeof(int32_t), "fused: factor columns"));
        GS_TRY(gs_cuda_alloc(e, &lv->val, (size_t)m * sizeof(double), "fused: factor values"));
        const void *src[5] = {hptr, hrow, hrp, hcol, pval};
        void *dst[5] = {lv->ptr, lv->row, lv->rp, lv->col, lv->val};
        const size_t bytes[5] = {((size_t)nl + 1) * 4, (size_t)n * 4, ((size_t)n + 1) * 4,
                                 (size_t)m * 4, (size_t)m * 8};
        for (int j = 0; j < 5; j++)
            if (bytes[j])
                GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(dst[j], src[j], bytes[j],
                                                          cudaMemcpyHostToDevice, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream))); /* h, pval: freed below */
    }
    c->fused_levels[k] = lv;
    *out = lv;
    lv = NULL;
cleanup:
    if (lv) CUDA_TEARDOWN(&c->teardown, cudaStreamSynchronize(c->stream)); /* nothing reads it after */
    fused_levels_free(e, lv);
    gs_dtri_free(e, &own);
    free(rp), free(col), free(val), free(by_level), free(h), free(pval);
    return status;
}

int gs_cuda_fused_prepare_factors(gs_engine *e, const gs_mat *L, const gs_mat *U,
                                  const gs_dtri *lower, const gs_dtri *upper)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_mat *M[2] = {L, U};
    const gs_dtri *given[2] = {lower, upper};
    int cc = 0, status = not_capturing(e, "fused_prepare_factors");
    if (status != GS_OK) return status;
    if (c->debug.fused == GS_DEBUG_FORCE_OFF) return GS_OK; /* no fused path will read them */
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor,
                                                     c->device)));
    if (cc < 9) return GS_OK; /* no cluster: the factors' kernels never launch here */
    for (int k = 0; k < 2; k++) {
        const gs_cuda_mat_info info = gs_cuda_mat_info_of(M[k]);
        if (info.prec != GS_FP64 || info.n_rows > GS_FUSED_FACTOR_MAX_ROWS) return GS_OK;
    }
    for (int k = 0; k < 2; k++) {
        fused_csr unused = {};
        fused_levels *lv = NULL;
        GS_TRY(fused_mat_view(e, M[k], 1 + k, &unused));
        GS_TRY(fused_factor_levels(e, 1 + k, k, given[k], &lv));
    }
cleanup:
    return status;
}

int cuda_fused_run(gs_engine *e, const gs_fused *f, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_cuda_mat_info info = gs_cuda_mat_info_of(f->A);
    fused_launch_arg arg = {};
    loop_ctl h;
    loop_clock clk = {0.0, 0};
    char *hist = NULL;
    double *part = NULL, *w = NULL;
    unsigned blocks = 0;
    int ok = 0, lanes = 0, status = not_capturing(e, "fused_run");
    L->ran = 0;
    L->history_len = 0;
    L->declined[0] = '\0';
    if (status != GS_OK) return status;
    if (c->debug.fused == GS_DEBUG_FORCE_OFF) return GS_OK; /* no note: the switch says why */
    const int64_t n = info.n_rows;
    const int is_cg = f->method == GS_FUSED_CG;
    const int tri = f->factor[0] != NULL;
    const gs_mat *const *Pm = tri ? f->factor : f->prod; /* the cache's places 1 and 2 */
    const int np = tri ? 2 : f->nprod;
    fused_csr Tc[2] = {}; /* the factors' CSR: checked, viewed and packed (fused_tri) */
    fused_csr *const Pc = tri ? Tc : arg.args.P;
    GS_TRY(fused_spec_valid(e, f, n));
    GS_TRY(loop_spec_valid(e, L));
    if (L->per_body != 1) return fused_decline(L, "one iteration a body only");
    if (L->n_moves != 0) return fused_decline(L, "slot moves are not supported");
    if (tri && n == 0) return fused_decline(L, "no rows");
    fused_mat_check(e, f->A, 0, &arg.args.A, &ok, L);
    for (int k = 0; ok && k < np; k++) fused_mat_check(e, Pm[k], 1 + k, &Pc[k], &ok, L);
    if (!ok) return GS_OK; /* declined: L->declined says why */
    lanes = arg.args.A.lanes; /* the widest product sets the grid */
    for (int k = 0; k < np; k++)
        if (Pc[k].lanes > lanes) lanes = Pc[k].lanes;
    {
        fused_kernel_fn cl = is_cg ? (tri ? fused_cg_kernel<fused_bar_cluster, true>
                                          : fused_cg_kernel<fused_bar_cluster, false>)
                                   : (tri ? fused_bicgstab_kernel<fused_bar_cluster, true>
                                          : fused_bicgstab_kernel<fused_bar_cluster, false>);
        fused_kernel_fn gr = is_cg ? fused_cg_kernel<fused_bar_grid, false>
                                   : fused_bicgstab_kernel<fused_bar_grid, false>;
        GS_TRY(fused_choose(e, cl, gr, tri, n, lanes, !is_cg && f->nprod == 0 && !tri, &arg, L));
    }
    if (arg.blocks == 0) return GS_OK; /* declined: L->declined says why */
    blocks = arg.blocks;
    GS_TRY(fused_mat_view(e, f->A, 0, &arg.args.A));
    for (int k = 0; k < np; k++) GS_TRY(fused_mat_view(e, Pm[k], 1 + k, &Pc[k]));
    if (tri) { /* the packed factors; staged in shared memory where all fits */
        size_t stage = (size_t)n * sizeof(double); /* dinv */
        for (int k = 0; k < 2; k++) {
            fused_levels *lv = NULL;
            GS_TRY(fused_factor_levels(e, 1 + k, k, NULL, &lv));
            fused_tri *T = &arg.args.T[k];
            T->ptr = lv->ptr, T->row = lv->row, T->rp = lv->rp, T->col = lv->col, T->val = lv->val;
            T->nlev = lv->n_levels, T->lanes = lv->lanes, T->nnz = lv->nnz;
            stage += (size_t)lv->nnz * (sizeof(double) + sizeof(int32_t)) +
                     ((size_t)lv->n_levels + 1 + 2 * (size_t)n + 1) * sizeof(int32_t);
        }
        arg.args.staged = c->debug.fused_stage != GS_DEBUG_FORCE_OFF &&
                          arg.smem + stage <= arg.smem_max;
        if (arg.args.staged) arg.smem += stage;
    }
    arg.args.dinv = tri ? f->factor_dinv->d : NULL;
    GS_TRY(gs_cuda_alloc(e, &part, FUSED_PARTS * (size_t)blocks * sizeof(double),
                         "fused partial sums"));
    if (f->nprod == 2) GS_TRY(gs_cuda_alloc(e, &w, (size_t)n * sizeof(double), "fused M work"));
    GS_TRY(loop_prepare(e, L, &h, &hist, &clk));
    arg.args.n = n;
    arg.args.d = f->d ? f->d->d : NULL;
    arg.args.nprod = f->nprod;
    arg.args.w = w;
    arg.args.x = f->x->d;
    arg.args.r = f->r->d;
    arg.args.z = f->z ? f->z->d : NULL;
    arg.args.p = f->p->d;
    arg.args.q = f->q ? f->q->d : NULL;
    arg.args.r0 = f->r0 ? f->r0->d : NULL;
    arg.args.v = f->v ? f->v->d : NULL;
    arg.args.t = f->t ? f->t->d : NULL;
    arg.args.ph = f->phat ? f->phat->d : NULL;
    arg.args.sh = f->shat ? f->shat->d : NULL;
    arg.args.S = c->S;
    arg.args.c = (loop_ctl *)c->loop_ctl;
    arg.args.part = part;
    arg.args.slot_rho = f->slot_rho;
    arg.args.slot_rho_new = f->slot_rho_new;
    arg.args.slot_pap = f->slot_pap;
    arg.args.slot_r0v = f->slot_r0v;
    arg.args.slot_ts = f->slot_ts;
    arg.args.slot_tt = f->slot_tt;
    L->ran = 1;
    snprintf(L->declined, sizeof L->declined,
             "fused: %s of %u blocks of %d threads, %d lanes a row%s", arg.cluster ? "a cluster"
             : "a cooperative grid", blocks, arg.cluster ? FUSED_CLUSTER_BLOCK : FUSED_BLOCK,
             arg.args.A.lanes, f->nprod ? ", M as sparse products"
                               : !tri ? "" : arg.args.staged ? ", M as triangular factors in "
                               "shared memory" : ", M as triangular factors");
    GS_TRY(loop_launches(e, fused_launch, &arg, (loop_ctl *)c->loop_ctl, &h, &clk, L));
cleanup:
    if (part || hist || w) { /* nothing still reads them */
        const int synced = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
        if (status == GS_OK) status = synced;
    }
    gs_cuda_free(e, part, FUSED_PARTS * (size_t)blocks * sizeof(double));
    gs_cuda_free(e, w, (size_t)n * sizeof(double));
    loop_release(e, L, hist);
    return status;
}
