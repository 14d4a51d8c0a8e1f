/* vector.cu - the vector operations of the engine table: fused elementwise kernels with
 * deterministic dot products (fixed-order grid-stride sums), mdot and maxpy, their grid caps. */
#include "engine_ops.h"
#include "reduce.cuh"

unsigned gs_cuda_red_grid(gs_engine *e, int64_t n, int64_t per_block)
{
    int64_t g = (n + per_block - 1) / per_block;
    int64_t cap = gs_cuda_of(e)->red_blocks;
    if (g < 1) g = 1;
    if (g > cap) g = cap;
    return (unsigned)g;
}

int gs_cuda_check_slot(gs_engine *e, int slot, const char *op)
{
    if (slot >= 0 && slot < GS_MAX_SCALARS) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: scalar slot %d outside [0, %d)", op,
                        slot, GS_MAX_SCALARS);
}

int gs_cuda_check_coef(gs_engine *e, gs_coef k, const char *op)
{
    const int s[4] = {k.num0, k.num1, k.den0, k.den1};
    for (int i = 0; i < 4; i++)
        if (s[i] != GS_SLOT_NONE && (s[i] < 0 || s[i] >= GS_MAX_SCALARS))
            return gs_error_set(&e->err, GS_ERR_INTERNAL,
                                "cuda %s: coefficient slot %d outside [0, %d)", op, s[i],
                                GS_MAX_SCALARS);
    return GS_OK;
}

/* ------------------------------------------------- elementwise and dot ops
 * One kernel template runs every elementwise operation: an Op evaluates its
 * coefficients once per thread (init), then handles index pairs with 16-byte
 * loads (pair) and the odd last element (one); both return the element's
 * contribution to the fused dot product (0 when the op has none). The loop
 * is grid-stride over a capped grid, so a thread's sum has a fixed order. */

/* Plain (coherent) loads: the Krylov code may pass the same vector as input
 * and output (GMRES scales w in place with axpby(w, 0, w)), which the
 * read-only path must not see. Streaming coalesced loads gain nothing from it. */
__device__ __forceinline__ double2 ld2(const double *p, int64_t i)
{
    return reinterpret_cast<const double2 *>(p)[i];
}
__device__ __forceinline__ double2 ldw2(const double *p, int64_t i)
{
    return reinterpret_cast<const double2 *>(p)[i];
}
__device__ __forceinline__ void st2(double *p, int64_t i, double2 v)
{
    reinterpret_cast<double2 *>(p)[i] = v;
}

struct set_op {
    double *y;
    double v;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p) { st2(y, p, make_double2(v, v)); return 0.0; }
    __device__ double one(int64_t i) { y[i] = v; return 0.0; }
};

/* y = a x + b y (y not read when b == 0, as the CPU engine does); DOT: 0
 * none, 1 y.w, 2 y.y (a template argument: no branch, fewer registers). */
template <int DOT>
struct axpby_op {
    gs_coef ka, kb;
    const double *x, *w;
    double *y;
    double a, b;
    __device__ void init(const double *S) { a = gs_coef_eval(ka, S); b = gs_coef_eval(kb, S); }
    __device__ double pair(int64_t p)
    {
        const double2 xv = ld2(x, p);
        double2 r = make_double2(a * xv.x, a * xv.y);
        if (b != 0.0) {
            const double2 yv = ldw2(y, p);
            r = make_double2(a * xv.x + b * yv.x, a * xv.y + b * yv.y);
        }
        st2(y, p, r);
        if (DOT == 0) return 0.0;
        if (DOT == 2) return r.x * r.x + r.y * r.y;
        const double2 wv = ldw2(w, p);
        return r.x * wv.x + r.y * wv.y;
    }
    __device__ double one(int64_t i)
    {
        const double r = b != 0.0 ? a * x[i] + b * y[i] : a * x[i];
        y[i] = r;
        return DOT == 0 ? 0.0 : DOT == 2 ? r * r : r * w[i];
    }
};

/* z = a x + b y + c z (z not read when c == 0). */
struct axpbypcz_op {
    gs_coef ka, kb, kc;
    const double *x, *y;
    double *z;
    double a, b, c;
    __device__ void init(const double *S)
    {
        a = gs_coef_eval(ka, S);
        b = gs_coef_eval(kb, S);
        c = gs_coef_eval(kc, S);
    }
    __device__ double pair(int64_t p)
    {
        double2 xv = ld2(x, p), yv = ld2(y, p);
        double2 r = make_double2(a * xv.x + b * yv.x, a * xv.y + b * yv.y);
        if (c != 0.0) {
            double2 zv = ldw2(z, p);
            r.x += c * zv.x;
            r.y += c * zv.y;
        }
        st2(z, p, r);
        return 0.0;
    }
    __device__ double one(int64_t i)
    {
        double r = a * x[i] + b * y[i];
        if (c != 0.0) r += c * z[i];
        z[i] = r;
        return 0.0;
    }
};

/* y1 += a x1 and y2 += b x2; contribution y2.y2 (CG's x and r updates). */
struct axpy2_op {
    gs_coef ka, kb;
    const double *x1, *x2;
    double *y1, *y2;
    double a, b;
    __device__ void init(const double *S) { a = gs_coef_eval(ka, S); b = gs_coef_eval(kb, S); }
    __device__ double pair(int64_t p)
    {
        const double2 u = ld2(x1, p), v = ld2(x2, p), y = ldw2(y1, p), z = ldw2(y2, p);
        /* a zero coefficient leaves its y as it was (engine.h) */
        const double2 r1 = a == 0.0 ? y : make_double2(y.x + a * u.x, y.y + a * u.y);
        const double2 r2 = b == 0.0 ? z : make_double2(z.x + b * v.x, z.y + b * v.y);
        st2(y1, p, r1);
        st2(y2, p, r2);
        return r2.x * r2.x + r2.y * r2.y;
    }
    __device__ double one(int64_t i)
    {
        if (a != 0.0) y1[i] += a * x1[i];
        const double r = b == 0.0 ? y2[i] : y2[i] + b * x2[i];
        y2[i] = r;
        return r * r;
    }
};

struct dot_op {
    const double *x, *y;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p)
    {
        double2 xv = ld2(x, p), yv = ld2(y, p);
        return xv.x * yv.x + xv.y * yv.y;
    }
    __device__ double one(int64_t i) { return x[i] * y[i]; }
};

/* y = d .* x; contribution x.y. */
struct pmult_op {
    const double *d, *x;
    double *y;
    __device__ void init(const double *) {}
    __device__ double pair(int64_t p)
    {
        double2 dv = ld2(d, p), xv = ld2(x, p);
        double2 r = make_double2(dv.x * xv.x, dv.y * xv.y);
        st2(y, p, r);
        return xv.x * r.x + xv.y * r.y;
    }
    __device__ double one(int64_t i)
    {
        double r = d[i] * x[i];
        y[i] = r;
        return x[i] * r;
    }
};

template <class Op, bool REDUCE>
__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    vec_kernel(Op op, int64_t n, const double *S, double *partials, unsigned int *counter,
               double *out)
{
    op.init(S);
    double acc = 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride)
        acc += op.pair(p);
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) acc += op.one(n - 1);
    if (REDUCE) gs_reduce_finish1(acc, partials, counter, out);
}

/* The vector kernels, by the index of their grid cap in gs_cuda_impl. */
enum {
    VK_SET, VK_AXPBY, VK_AXPBY_DOT_W, VK_AXPBY_DOT_SELF, VK_AXPBYPCZ, VK_DOT, VK_PMULT,
    VK_PMULT_DOT, VK_AXPY2, VK_AXPY2_DOT, VK_COUNT
};

/* One thread per index pair, grid-stride beyond the blocks the device holds
 * at once (the cap, from the occupancy calculator at engine creation): one
 * wave, so no block waits for a second one, and a thread's sum has a fixed
 * order. Reductions are also capped by the partial-sum buffer. */
template <class Op, bool REDUCE>
static int run_vec(gs_engine *e, const Op &op, int64_t n, int slot, int id, const char *name)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    double *out = REDUCE ? c->S + slot : NULL;
    int64_t grid = (n / 2 + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK;
    if (grid > (int64_t)c->vec_caps[id]) grid = c->vec_caps[id];
    if (REDUCE && grid > c->red_blocks) grid = c->red_blocks;
    if (grid == 0 && (n > 0 || REDUCE)) grid = 1; /* an empty dot still writes its 0 */
    auto kernel = vec_kernel<Op, REDUCE>;
    return gs_cuda_launch(&e->err, name, __FILE__, __LINE__, kernel, (unsigned)grid,
                          GS_CUDA_BLOCK, 0, c->stream, op, n, (const double *)c->S, c->partials,
                          c->counter, out);
}

template <class Op, bool REDUCE>
static int vec_cap(gs_engine *e, int id)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int per_sm = 0;
    int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                        &per_sm, vec_kernel<Op, REDUCE>, GS_CUDA_BLOCK, 0));
    c->vec_caps[id] = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    return status;
}

int cuda_set(gs_engine *e, gs_vec *y, double value)
{
    set_op op = {y->d, value};
    return run_vec<set_op, false>(e, op, y->n, 0, VK_SET, "set_kernel");
}

int cuda_copy(gs_engine *e, const gs_vec *x, gs_vec *y)
{
    int status = check_len(e, x, y, "copy");
    if (status != GS_OK || x->n == 0 || x == y) return status;
    return CUDA_CALL(&e->err, cudaMemcpyAsync(y->d, x->d, (size_t)x->n * sizeof(double),
                                              cudaMemcpyDeviceToDevice, gs_cuda_of(e)->stream));
}

int cuda_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                          const gs_vec *w, int slot)
{
    int status = check_len(e, x, y, "axpby_dot");
    if (status == GS_OK && w) status = check_len(e, w, y, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpby_dot");
    if (status == GS_OK) status = gs_cuda_check_slot(e, slot, "axpby_dot");
    if (status != GS_OK) return status;
    if (!w) {
        axpby_op<2> op = {a, b, x->d, NULL, y->d, 0.0, 0.0};
        return run_vec<axpby_op<2>, true>(e, op, y->n, slot, VK_AXPBY_DOT_SELF, "axpby_dot_kernel");
    }
    axpby_op<1> op = {a, b, x->d, w->d, y->d, 0.0, 0.0};
    return run_vec<axpby_op<1>, true>(e, op, y->n, slot, VK_AXPBY_DOT_W, "axpby_dot_kernel");
}

int cuda_axpy2_dot(gs_engine *e, gs_coef a, const gs_vec *x1, gs_vec *y1, gs_coef b,
                          const gs_vec *x2, gs_vec *y2, int slot)
{
    int status = check_len(e, x1, y1, "axpy2_dot");
    if (status == GS_OK) status = check_len(e, x2, y2, "axpy2_dot");
    if (status == GS_OK) status = check_len(e, y1, y2, "axpy2_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpy2_dot");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpy2_dot");
    if (status == GS_OK && slot != GS_SLOT_NONE) status = gs_cuda_check_slot(e, slot, "axpy2_dot");
    if (status != GS_OK) return status;
    axpy2_op op = {a, b, x1->d, x2->d, y1->d, y2->d, 0.0, 0.0};
    if (slot == GS_SLOT_NONE)
        return run_vec<axpy2_op, false>(e, op, y2->n, 0, VK_AXPY2, "axpy2_kernel");
    return run_vec<axpy2_op, true>(e, op, y2->n, slot, VK_AXPY2_DOT, "axpy2_dot_kernel");
}

int cuda_axpby(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y)
{
    int status = check_len(e, x, y, "axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpby");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpby");
    if (status != GS_OK) return status;
    axpby_op<0> op = {a, b, x->d, NULL, y->d, 0.0, 0.0};
    return run_vec<axpby_op<0>, false>(e, op, y->n, 0, VK_AXPBY, "axpby_kernel");
}

int cuda_axpbypcz(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, const gs_vec *y,
                         gs_coef c, gs_vec *z)
{
    int status = check_len(e, x, z, "axpbypcz");
    if (status == GS_OK) status = check_len(e, y, z, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, a, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, b, "axpbypcz");
    if (status == GS_OK) status = gs_cuda_check_coef(e, c, "axpbypcz");
    if (status != GS_OK) return status;
    axpbypcz_op op = {a, b, c, x->d, y->d, z->d, 0.0, 0.0, 0.0};
    return run_vec<axpbypcz_op, false>(e, op, z->n, 0, VK_AXPBYPCZ, "axpbypcz_kernel");
}

int cuda_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot)
{
    int status = check_len(e, x, y, "dot");
    if (status == GS_OK) status = gs_cuda_check_slot(e, slot, "dot");
    if (status != GS_OK) return status;
    dot_op op = {x->d, y->d};
    return run_vec<dot_op, true>(e, op, x->n, slot, VK_DOT, "dot_kernel");
}

int cuda_pointwise_mult_dot(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y,
                                   int slot)
{
    int status = check_len(e, d, y, "pointwise_mult_dot");
    if (status == GS_OK) status = check_len(e, x, y, "pointwise_mult_dot");
    if (status == GS_OK && slot != GS_SLOT_NONE)
        status = gs_cuda_check_slot(e, slot, "pointwise_mult_dot");
    if (status != GS_OK) return status;
    pmult_op op = {d->d, x->d, y->d};
    if (slot == GS_SLOT_NONE)
        return run_vec<pmult_op, false>(e, op, y->n, 0, VK_PMULT, "pointwise_mult_kernel");
    return run_vec<pmult_op, true>(e, op, y->n, slot, VK_PMULT_DOT, "pointwise_mult_dot_kernel");
}

/* ---------------------------------------------------------- mdot and maxpy
 * Up to GS_CUDA_MDOT_CHUNK vectors per pass, their pointers passed by value
 * (a kernel parameter, so a captured graph needs no device-side table):
 * w is read once per chunk of 16 vectors, each V[i] once. */
struct vec_ptrs {
    const double *p[GS_CUDA_MDOT_CHUNK];
};

__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    mdot_kernel(vec_ptrs V, int k, const double *__restrict__ w, int64_t n, double *partials,
                unsigned int *counter, double *out)
{
    double acc[GS_CUDA_MDOT_CHUNK];
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++) acc[j] = 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride) {
        const double2 wp = ld2(w, p);
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) {
                const double2 vp = ld2(V.p[j], p);
                acc[j] += vp.x * wp.x + vp.y * wp.y;
            }
    }
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) {
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) acc[j] += V.p[j][n - 1] * w[n - 1];
    }
    gs_reduce_finish<GS_CUDA_MDOT_CHUNK>(acc, k, partials, counter, out);
}

/* w += c * sum_j S[slot0 + j] V[j], the sum formed first in j order as the
 * CPU engine does (exactly its rounding for k <= 16). */
__device__ __forceinline__ double maxpy_one(const vec_ptrs &V, int k, const double *coef,
                                            int64_t i)
{
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
        if (j < k) s += coef[j] * V.p[j][i];
    return s;
}

__global__ void __launch_bounds__(GS_CUDA_BLOCK)
    maxpy_kernel(vec_ptrs V, int k, double c, const double *__restrict__ S, int slot0,
                 double *__restrict__ w, int64_t n)
{
    double coef[GS_CUDA_MDOT_CHUNK];
#pragma unroll
    for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++) coef[j] = j < k ? S[slot0 + j] : 0.0;
    const int64_t npair = n >> 1, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npair; p += stride) {
        double sx = 0.0, sy = 0.0;
#pragma unroll
        for (int j = 0; j < GS_CUDA_MDOT_CHUNK; j++)
            if (j < k) {
                const double2 vp = ld2(V.p[j], p);
                sx += coef[j] * vp.x;
                sy += coef[j] * vp.y;
            }
        double2 wp = ld2(w, p);
        wp.x += c * sx;
        wp.y += c * sy;
        st2(w, p, wp);
    }
    if ((n & 1) && blockIdx.x == 0 && threadIdx.x == 0) w[n - 1] += c * maxpy_one(V, k, coef, n - 1);
}

static int check_vecs(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0,
                      const char *op)
{
    if (k > 0 && (slot0 < 0 || slot0 + k > GS_MAX_SCALARS))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: slots [%d, %d) outside [0, %d)",
                            op, slot0, slot0 + k, GS_MAX_SCALARS);
    for (int j = 0; j < k; j++) {
        int status = check_len(e, V[j], w, op);
        if (status != GS_OK) return status;
    }
    return GS_OK;
}

int cuda_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_vecs(e, V, k, w, slot0, "mdot");
    unsigned grid = gs_cuda_red_grid(e, w->n / 2, GS_CUDA_BLOCK);
    if (grid > c->mdot_blocks) grid = c->mdot_blocks;
    for (int j0 = 0; status == GS_OK && j0 < k; j0 += GS_CUDA_MDOT_CHUNK) {
        int kc = k - j0 < GS_CUDA_MDOT_CHUNK ? k - j0 : GS_CUDA_MDOT_CHUNK;
        vec_ptrs p = {};
        for (int j = 0; j < kc; j++) p.p[j] = V[j0 + j]->d;
        status = CUDA_LAUNCH(&e->err, mdot_kernel, grid, GS_CUDA_BLOCK, 0, c->stream, p, kc,
                             (const double *)w->d, w->n, c->partials, c->counter,
                             c->S + slot0 + j0);
    }
    return status;
}

int cuda_maxpy(gs_engine *e, double cst, const gs_vec *const *V, int k, int slot0,
                      gs_vec *w)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = check_vecs(e, V, k, w, slot0, "maxpy");
    unsigned grid = (unsigned)((w->n / 2 + GS_CUDA_BLOCK - 1) / GS_CUDA_BLOCK);
    if (grid > c->maxpy_blocks) grid = c->maxpy_blocks;
    if (grid == 0 && w->n > 0) grid = 1;
    for (int j0 = 0; status == GS_OK && j0 < k; j0 += GS_CUDA_MDOT_CHUNK) {
        int kc = k - j0 < GS_CUDA_MDOT_CHUNK ? k - j0 : GS_CUDA_MDOT_CHUNK;
        vec_ptrs p = {};
        for (int j = 0; j < kc; j++) p.p[j] = V[j0 + j]->d;
        status = CUDA_LAUNCH(&e->err, maxpy_kernel, grid, GS_CUDA_BLOCK, 0, c->stream, p, kc, cst,
                             (const double *)c->S, slot0 + j0, w->d, w->n);
    }
    return status;
}

/* The grid caps of the vector kernels (gs_cuda_impl), from the occupancy
 * calculator, once at the engine's creation. */
int gs_cuda_vec_caps(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    /* mdot and maxpy hold 16 sums or coefficients per thread: fewer blocks
     * fit an SM, and a grid-stride grid must not spill into a second wave. */
    int per_sm = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mdot_kernel,
                                                                            GS_CUDA_BLOCK, 0)));
    c->mdot_blocks = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    GS_TRY(CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, maxpy_kernel,
                                                                            GS_CUDA_BLOCK, 0)));
    c->maxpy_blocks = (unsigned)(per_sm > 0 ? per_sm : 1) * (unsigned)c->sm_count;
    GS_TRY((vec_cap<set_op, false>(e, VK_SET)));
    GS_TRY((vec_cap<axpby_op<0>, false>(e, VK_AXPBY)));
    GS_TRY((vec_cap<axpby_op<1>, true>(e, VK_AXPBY_DOT_W)));
    GS_TRY((vec_cap<axpby_op<2>, true>(e, VK_AXPBY_DOT_SELF)));
    GS_TRY((vec_cap<axpbypcz_op, false>(e, VK_AXPBYPCZ)));
    GS_TRY((vec_cap<dot_op, true>(e, VK_DOT)));
    GS_TRY((vec_cap<pmult_op, false>(e, VK_PMULT)));
    GS_TRY((vec_cap<pmult_op, true>(e, VK_PMULT_DOT)));
    GS_TRY((vec_cap<axpy2_op, false>(e, VK_AXPY2)));
    GS_TRY((vec_cap<axpy2_op, true>(e, VK_AXPY2_DOT)));
cleanup:
    return status;
}
