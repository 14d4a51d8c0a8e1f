/* fused.cu - CG and BiCGSTAB with a pointwise preconditioner (jacobi, none) in one
 * persistent cooperative kernel (engine op fused_run, src/engine/loop.h):
 * every iteration, its stopping and breakdown tests and maxit run inside
 * it, blocks meeting at grid-wide barriers (cooperative groups), as in
 * NVIDIA's conjugateGradientMultiBlockCG sample, but with deterministic
 * dots (per-block partials summed in block order by every block) and the
 * checks of loop_ctl.cuh. CG: Saad, "Iterative Methods for Sparse Linear
 * Systems", Alg. 9.1. */
#include <cooperative_groups.h>
#include <stdio.h>

#include "loop_ctl.cuh"
#include "reduce.cuh"

namespace cg = cooperative_groups;

#define FUSED_BLOCK 256
/* At most this many resident blocks per multiprocessor: a barrier over
 * fewer blocks is cheaper, and small systems cannot fill more. */
#define FUSED_BLOCKS_PER_SM 4
/* The rule: the fused path where every thread group of the product has at
 * most this many rows to walk per iteration (beyond, the engine's own
 * layouts and kernels move the bytes faster; to be measured). */
#define FUSED_ROWS_PER_GROUP 16

struct fused_args {
    int64_t n;
    const int64_t *row_ptr;
    const int32_t *col;
    const double *val;
    const double *d; /* M = diag(d); NULL: M = I */
    double *x, *r, *z, *p, *q; /* BiCGSTAB: x, r, p */
    double *r0, *v, *t;        /* BiCGSTAB */
    double *S;
    loop_ctl *c;
    double *part; /* FUSED_PARTS gridDim.x: one per sum of an iteration, per block */
    int lanes;    /* threads per row of the product: 1, 2, 4, ..., 32 */
    int slot_rho, slot_rho_new, slot_pap, slot_r0v, slot_ts, slot_tt;
};
#define FUSED_PARTS 4

/* The sum over blocks of part[0 .. gridDim.x), in block order, in every
 * block alike (the same bits everywhere: no block needs another's). */
static __device__ double fused_grid_sum(const double *part, double *bcast)
{
    if (threadIdx.x < 32) {
        double s = 0.0;
        for (unsigned j = threadIdx.x; j < gridDim.x; j += 32) s += __ldcg(part + j);
        s = gs_warp_sum(s);
        if (threadIdx.x == 0) *bcast = s;
    }
    __syncthreads();
    const double v = *bcast;
    __syncthreads();
    return v;
}

/* y = A (s .* u) (s NULL: A u), lanes threads a row (a warp's rows side by
 * side, so the warp stays converged for its shuffles); adds this thread's
 * part of y'w to *yw and, with SELF, of y'y to *yy. u, w and y cross
 * blocks: read through L2 (__ldcg). */
template <bool SELF>
static __device__ void fused_spmv(const fused_args &a, const double *u, const double *sc,
                                  double *y, const double *w, double *yw, double *yy)
{
    const int lanes = a.lanes, rows_per_warp = 32 / lanes;
    const int lane = threadIdx.x & 31, sub = lane / lanes, in = lane % lanes;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t base = warp * rows_per_warp; base < a.n; base += nwarps * rows_per_warp) {
        const int64_t i = base + sub;
        double s = 0.0;
        if (i < a.n)
            for (int64_t k = a.row_ptr[i] + in; k < a.row_ptr[i + 1]; k += lanes) {
                const int32_t j = a.col[k];
                s += a.val[k] * (sc ? sc[j] * __ldcg(u + j) : __ldcg(u + j));
            }
        for (int o = lanes >> 1; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o, lanes);
        if (in == 0 && i < a.n) {
            y[i] = s;
            *yw += s * __ldcg(w + i);
            if (SELF) *yy += s * s;
        }
    }
}

/* The step's verdict by block 0 (the slots, the check, the yield); the
 * other blocks read c->running after the next barrier. */
static __device__ void fused_check(const fused_args &a)
{
    loop_ctl *c = a.c;
    const int64_t it = ++c->it;
    int stop = GS_LOOP_RUNNING;
    if ((it - c->it0) % c->check_every == 0 || it >= c->maxit) stop = loop_verdict(a.S, c, it);
    const bool yield = stop == GS_LOOP_RUNNING && c->has_yield && loop_globaltimer() >= c->yield_ns;
    c->stop = stop;
    c->yielded = yield;
    c->running = stop == GS_LOOP_RUNNING && !yield;
}

/* Iterations until the check stops the loop or the host's progress wants
 * a yield; three grid barriers an iteration:
 *   q = A p, p'q | alpha; x += alpha p, r -= alpha q, z = M r, r'r, r'z |
 *   the check (block 0), beta, p = z + beta p | stop?
 * Coefficients as gs_coef_eval makes them (x / 0 = 0), so a breakdown is
 * seen by the tests on the slots, as on the host. */
__global__ void __launch_bounds__(FUSED_BLOCK) fused_cg_kernel(fused_args a)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ double smem[32];
    __shared__ double bcast;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nthreads = (int64_t)gridDim.x * blockDim.x;
    const unsigned G = gridDim.x;
    double rho = __ldcg(a.S + a.slot_rho);
    for (;;) {
        double pq = 0.0, unused = 0.0;
        fused_spmv<false>(a, a.p, NULL, a.q, a.p, &pq, &unused);
        pq = gs_block_sum(pq, smem);
        if (threadIdx.x == 0) a.part[blockIdx.x] = pq;
        grid.sync();
        const double pap = fused_grid_sum(a.part, &bcast);
        const double alpha = pap == 0.0 ? 0.0 : rho / pap;
        double rr = 0.0, rz = 0.0;
        for (int64_t i = tid; i < a.n; i += nthreads) {
            a.x[i] += alpha * a.p[i];
            const double ri = a.r[i] - alpha * __ldcg(a.q + i);
            const double zi = a.d ? a.d[i] * ri : ri;
            a.r[i] = ri;
            a.z[i] = zi;
            rr += ri * ri;
            rz += ri * zi;
        }
        rr = gs_block_sum(rr, smem);
        rz = gs_block_sum(rz, smem);
        if (threadIdx.x == 0) {
            a.part[G + blockIdx.x] = rr;
            a.part[2 * G + blockIdx.x] = rz;
        }
        grid.sync();
        rr = fused_grid_sum(a.part + G, &bcast);
        rz = fused_grid_sum(a.part + 2 * G, &bcast);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.S[a.c->slot_rr] = rr;
            a.S[a.slot_pap] = pap;
            a.S[a.slot_rho_new] = rz;
            fused_check(a);
            a.S[a.slot_rho] = rz; /* a relaunch after a yield starts from here */
        }
        const double beta = rho == 0.0 ? 0.0 : rz / rho;
        rho = rz;
        for (int64_t i = tid; i < a.n; i += nthreads) a.p[i] = a.z[i] + beta * a.p[i];
        grid.sync();
        if (!*(volatile int32_t *)&a.c->running) break;
    }
}

/* BiCGSTAB with right preconditioning M = diag(d) (bicgstab.c's step; phat
 * = M p and shat = M s are formed where they are read, never stored); five
 * grid barriers a step:
 *   v = A M p, r0'v | alpha; s = r - alpha v (in r) |
 *   t = A M s, t's, t't | omega; x += alpha M p + omega M s; r = s - omega t,
 *   r'r, r0'r | the check (block 0), beta, p = r + beta (p - omega v) | stop?
 * Coefficients as bicgstab.c's gs_coef expressions evaluate them (x / 0 = 0). */
__global__ void __launch_bounds__(FUSED_BLOCK) fused_bicgstab_kernel(fused_args a)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ double smem[32];
    __shared__ double bcast;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nthreads = (int64_t)gridDim.x * blockDim.x;
    const unsigned G = gridDim.x;
    double rho = __ldcg(a.S + a.slot_rho);
    for (;;) {
        double r0v = 0.0, ts = 0.0, tt = 0.0, rr = 0.0, rho_new = 0.0;
        fused_spmv<false>(a, a.p, a.d, a.v, a.r0, &r0v, &tt);
        r0v = gs_block_sum(r0v, smem);
        if (threadIdx.x == 0) a.part[blockIdx.x] = r0v;
        grid.sync();
        r0v = fused_grid_sum(a.part, &bcast);
        const double alpha = r0v == 0.0 ? 0.0 : rho / r0v;
        for (int64_t i = tid; i < a.n; i += nthreads) a.r[i] = -alpha * __ldcg(a.v + i) + a.r[i];
        grid.sync();
        fused_spmv<true>(a, a.r, a.d, a.t, a.r, &ts, &tt);
        ts = gs_block_sum(ts, smem);
        tt = gs_block_sum(tt, smem);
        if (threadIdx.x == 0) {
            a.part[G + blockIdx.x] = ts;
            a.part[2 * G + blockIdx.x] = tt;
        }
        grid.sync();
        ts = fused_grid_sum(a.part + G, &bcast);
        tt = fused_grid_sum(a.part + 2 * G, &bcast);
        const double omega = tt == 0.0 ? 0.0 : ts / tt;
        for (int64_t i = tid; i < a.n; i += nthreads) {
            const double si = a.r[i], pi = a.p[i];
            const double ph = a.d ? a.d[i] * pi : pi, sh = a.d ? a.d[i] * si : si;
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
        grid.sync();
        rr = fused_grid_sum(a.part, &bcast);
        rho_new = fused_grid_sum(a.part + 3 * G, &bcast);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.S[a.c->slot_rr] = rr;
            a.S[a.slot_rho] = rho_new;
            a.S[a.slot_r0v] = r0v;
            a.S[a.slot_ts] = ts;
            a.S[a.slot_tt] = tt;
            fused_check(a);
        }
        /* p = r + beta p - beta omega v, beta = (rho_new / rho) (alpha / omega) */
        const double cv = rho == 0.0 ? 0.0 : -1.0 * rho_new * alpha / rho;
        const double dp = rho * omega;
        const double cp = dp == 0.0 ? 0.0 : rho_new * alpha / dp;
        rho = rho_new;
        for (int64_t i = tid; i < a.n; i += nthreads)
            a.p[i] = a.r[i] + cv * __ldcg(a.v + i) + cp * a.p[i];
        grid.sync();
        if (!*(volatile int32_t *)&a.c->running) break;
    }
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

/* The grid: as many blocks as the rows need, at most FUSED_BLOCKS_PER_SM
 * and what the occupancy calculator says can be resident at once (a
 * cooperative launch needs every block resident). 0: none can. */
typedef void (*fused_kernel_fn)(fused_args);

static int fused_grid(gs_engine *e, fused_kernel_fn kernel, int64_t n, int lanes, unsigned *blocks,
                      unsigned *cap)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int coop = 0, occ = 0, status = GS_OK;
    *blocks = *cap = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch,
                                                     c->device)));
    if (!coop) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel,
                                                                            FUSED_BLOCK, 0)));
    if (occ < 1) return GS_OK;
    *cap = (unsigned)c->sm_count * (unsigned)(occ < FUSED_BLOCKS_PER_SM ? occ : FUSED_BLOCKS_PER_SM);
    {
        const int64_t want = (n * lanes + FUSED_BLOCK - 1) / FUSED_BLOCK;
        *blocks = want < (int64_t)*cap ? (unsigned)(want > 0 ? want : 1) : *cap;
    }
cleanup:
    return status;
}

typedef struct fused_launch_arg {
    fused_kernel_fn kernel;
    unsigned blocks;
    fused_args args;
} fused_launch_arg;

/* One cooperative launch (loop_launches). */
static int fused_launch(gs_engine *e, void *arg)
{
    fused_launch_arg *f = (fused_launch_arg *)arg;
    void *params[] = {&f->args};
    return CUDA_CALL(&e->err, cudaLaunchCooperativeKernel((const void *)f->kernel,
                                                          dim3(f->blocks), dim3(FUSED_BLOCK),
                                                          params, 0, gs_cuda_of(e)->stream));
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
    return bad ? gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda fused_run: bad description")
               : GS_OK;
}

void gs_cuda_fused_forget(gs_engine *e, const gs_mat *A)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    if (!c->fused_A || (A && A != c->fused_A)) return;
    if (c->fused_view.owned) cudaStreamSynchronize(c->stream); /* no kernel still reads it */
    gs_cuda_csr_view_free(e, &c->fused_view);
    c->fused_A = NULL;
}

/* A's CSR, the one kept from the last solve where it is A's. */
static int fused_csr(gs_engine *e, const gs_mat *A, const gs_cuda_csr_view **view)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    if (c->fused_A != A) {
        gs_cuda_fused_forget(e, NULL);
        GS_TRY(gs_cuda_mat_device_csr(e, A, &c->fused_view));
        c->fused_A = A;
    }
    *view = &c->fused_view;
cleanup:
    return status;
}

int cuda_fused_run(gs_engine *e, const gs_fused *f, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_cuda_mat_info info = gs_cuda_mat_info_of(f->A);
    const gs_cuda_csr_view *view = NULL;
    fused_launch_arg arg;
    loop_ctl h;
    loop_clock clk = {0.0, 0};
    char *hist = NULL;
    double *part = NULL;
    unsigned blocks = 0, cap = 0;
    int status = not_capturing(e, "fused_run");
    L->ran = 0;
    L->history_len = 0;
    L->declined[0] = '\0';
    if (status != GS_OK) return status;
    if (c->debug.fused == GS_DEBUG_FORCE_OFF) return GS_OK; /* no note: the switch says why */
    if (info.prec != GS_FP64) return fused_decline(L, "A is not stored in fp64");
    const int64_t n = info.n_rows;
    const int lanes = fused_lanes(n, info.nnz);
    const fused_kernel_fn kernel =
        f->method == GS_FUSED_CG ? fused_cg_kernel : fused_bicgstab_kernel;
    GS_TRY(fused_spec_valid(e, f, n));
    GS_TRY(loop_spec_valid(e, L));
    if (L->per_body != 1) return fused_decline(L, "one iteration a body only");
    if (f->method == GS_FUSED_BICGSTAB && c->debug.fused != GS_DEBUG_FORCE_ON)
        return fused_decline(L, "bicgstab only with GS_FUSED=on until measured");
    GS_TRY(fused_grid(e, kernel, n, lanes, &blocks, &cap));
    if (blocks == 0) return fused_decline(L, "no cooperative launch here");
    if (c->debug.fused != GS_DEBUG_FORCE_ON &&
        n > (int64_t)FUSED_ROWS_PER_GROUP * cap * FUSED_BLOCK / lanes) {
        char why[120];
        snprintf(why, sizeof why, "%lld rows above the rule's %lld (GS_FUSED=on forces it)",
                 (long long)n, (long long)FUSED_ROWS_PER_GROUP * cap * FUSED_BLOCK / lanes);
        return fused_decline(L, why);
    }
    GS_TRY(fused_csr(e, f->A, &view));
    GS_TRY(gs_cuda_alloc(e, &part, FUSED_PARTS * (size_t)blocks * sizeof(double),
                         "fused partial sums"));
    GS_TRY(loop_prepare(e, L, &h, &hist, &clk));
    memset(&arg, 0, sizeof arg);
    arg.kernel = kernel;
    arg.blocks = blocks;
    arg.args.n = n;
    arg.args.row_ptr = view->row_ptr;
    arg.args.col = view->col;
    arg.args.val = view->val;
    arg.args.d = f->d ? f->d->d : NULL;
    arg.args.x = f->x->d;
    arg.args.r = f->r->d;
    arg.args.z = f->z ? f->z->d : NULL;
    arg.args.p = f->p->d;
    arg.args.q = f->q ? f->q->d : NULL;
    arg.args.r0 = f->r0 ? f->r0->d : NULL;
    arg.args.v = f->v ? f->v->d : NULL;
    arg.args.t = f->t ? f->t->d : NULL;
    arg.args.S = c->S;
    arg.args.c = (loop_ctl *)c->loop_ctl;
    arg.args.part = part;
    arg.args.lanes = lanes;
    arg.args.slot_rho = f->slot_rho;
    arg.args.slot_rho_new = f->slot_rho_new;
    arg.args.slot_pap = f->slot_pap;
    arg.args.slot_r0v = f->slot_r0v;
    arg.args.slot_ts = f->slot_ts;
    arg.args.slot_tt = f->slot_tt;
    L->ran = 1;
    GS_TRY(loop_launches(e, fused_launch, &arg, (loop_ctl *)c->loop_ctl, &h, &clk, L));
cleanup:
    if (part || hist) cudaStreamSynchronize(c->stream); /* nothing still reads them */
    gs_cuda_free(e, part, FUSED_PARTS * (size_t)blocks * sizeof(double));
    loop_release(e, L, hist);
    return status;
}
