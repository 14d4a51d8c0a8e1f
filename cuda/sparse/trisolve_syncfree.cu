/* trisolve_syncfree.cu - synchronisation-free triangular substitution: one launch, rows in
 * level order, each row waiting until the rows it depends on are written (the MIC paper's
 * GPUFBS, blocks that spin until their neighbours have written; for any pattern as in Liu,
 * Li, Hogg, Vinter, "A synchronization-free algorithm for parallel sparse triangular
 * solves", Euro-Par 2016).
 *
 * Order: the analysis' schedule t->slot_rows, the rows sorted by level, each level padded
 * with empty slots (-1) to whole warps of rows_per_warp = 32 / lanes rows (lanes: the
 * power of two at or above the mean row length, widened where levels are narrower than
 * a warp of rows). Taken in natural order instead, the
 * resident warps (about 8k on an H100) cover about two planes of a 3D grid, and the
 * wavefront advanced one plane per many flag latencies; in level order the resident
 * window holds several whole wavefronts, and the solve costs about one flag latency a
 * level (docs/perf-notebook.md).
 *
 * No deadlock: a block draws a ticket (state[0]) when it starts and takes the slots at that
 * place of the schedule. A row waits only on rows of lower levels, which lie in slots
 * before its warp's first slot (levels are sorted and no warp holds two levels): rows of
 * blocks that drew earlier tickets, which are resident or done, or of its own block's
 * lower warps; never on a row of its own warp. By induction on the slot: the lowest
 * unfinished warp either belongs to a started block, and all it waits on is done, so it
 * finishes; or its ticket is not drawn yet, then every started block has only finished
 * rows to wait on, finishes and leaves room for the next ticket. Whatever order the
 * hardware starts blocks in, every wait ends.
 *
 * The value is the flag: x is filled with SYNCFREE_UNSET (all bits set, a NaN) in stream
 * order before the launch, and a row waits until x_j is no longer that pattern. x_j is one
 * 64-bit word written once, by one relaxed atomic store, and read by relaxed atomic loads:
 * coherence alone makes the reader see the final value, with no fence on either side (a
 * separate ready flag costs a release fence on the writer and a second load on the
 * reader, both a round trip to L2, at every level). A computed x_i that happens to have
 * the unset pattern (a NaN from a NaN input) is stored as the canonical NaN instead, so
 * that no row waits for ever on it; a NaN still comes out, and CG reports it.
 *
 * No reset beyond the fill: the last block to finish (state[1] counts them) zeroes the
 * ticket and the count. The kernel's arguments never change, so the fill and the launch
 * can be captured in a graph and replayed.
 *
 * Fused (gs_dtri_fused): the dot w . x, a block's rows summed by a fixed tree into
 * partials[ticket] (the ticket, not blockIdx.x: it fixes which rows a block holds), and
 * the last block adds partials[0 .. blocks) in that order, before it resets the ticket;
 * and the fill of the next sync-free solve's x, a store per row, issued before the row's
 * waits (off the wavefront's path). MIC's apply takes both: the forward solve fills z
 * for the backward one, which computes r . z (docs/mic.md). */
#include <cuda/atomic>

#include "gs_dsparse.h"
#include "reduce.cuh"

#define SYNCFREE_THREADS 256
#define SYNCFREE_UNSET 0xffffffffffffffffull /* the fill's bytes, 0xFF */
#define SYNCFREE_NAN 0x7ff8000000000000ull   /* a computed x_i that equals the fill */
#define FULL_MASK 0xffffffffu

typedef cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> word_ref;

/* x_j once row j has been solved; waits until then (the header: row j is in an earlier
 * slot, so the wait ends). Polls back to back first (a load takes an L2 round trip, and
 * the row at the front finds its value within a few), then with sleeps doubling from 32 to
 * 256 ns: the rows several levels ahead of the front (about 5 levels of a 3D grid are
 * resident) would otherwise keep L2 busy with loads that cannot succeed yet, slowing the
 * front's own stores and loads. The cap bounds the delay a sleeping row adds to its
 * level once its value is there. */
static __device__ inline double syncfree_wait(double *x, int32_t j)
{
    const unsigned long long v = gs_dwait_while(reinterpret_cast<unsigned long long *>(x + j),
                                                (unsigned long long)SYNCFREE_UNSET,
                                                cuda::memory_order_relaxed);
    return __longlong_as_double((long long)v);
}

/* LANES lanes a row, SYNCFREE_THREADS / LANES slots a block:
 * x_i = (s_i b_i - sum_j t_ij x_j) / t_ii (t_ii = 1 when unit); with dot, *dot = w . x;
 * with fill, fill_i = the unset pattern. */
template <int LANES>
__global__ void tri_syncfree_kernel(int64_t n_slots, bool upper, const int32_t *__restrict__ slots,
                                    const int64_t *__restrict__ rp,
                                    const int32_t *__restrict__ col,
                                    const double *__restrict__ val, bool unit,
                                    const double *__restrict__ s, const double *__restrict__ b,
                                    double *x, unsigned *state, const double *__restrict__ w,
                                    double *__restrict__ partials, double *dot,
                                    unsigned long long *__restrict__ fill)
{
    __shared__ unsigned block;
    __shared__ bool is_last;
    __shared__ double smem[32];
    if (threadIdx.x == 0) block = atomicAdd(&state[0], 1u);
    __syncthreads();
    const int sub = threadIdx.x % LANES;
    const int64_t slot = (int64_t)block * (SYNCFREE_THREADS / LANES) + threadIdx.x / LANES;
    const int32_t i = slot < n_slots ? slots[slot] : -1;
    double sum = 0.0, diag = 0.0, rhs = 0.0, wi = 0.0;
    if (i >= 0) {
        if (sub == 0) { /* issued before the waits */
            rhs = (s ? s[i] : 1.0) * b[i];
            if (dot) wi = w[i];
            if (fill) fill[i] = SYNCFREE_UNSET;
        }
        for (int64_t p = rp[i] + sub; p < rp[i + 1]; p += LANES) {
            const int32_t j = col[p];
            if (j == i) diag = val[p];
            else if (upper ? j > i : j < i) sum += val[p] * syncfree_wait(x, j);
        }
    }
    /* every lane gets here (empty slots included), so the whole warp shuffles */
    for (int o = LANES / 2; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(FULL_MASK, sum, o, LANES);
        diag += __shfl_xor_sync(FULL_MASK, diag, o, LANES);
    }
    double term = 0.0; /* w_i x_i, on the row's first lane */
    if (i >= 0 && sub == 0) {
        const double xi = (rhs - sum) / (unit ? 1.0 : diag);
        unsigned long long v = (unsigned long long)__double_as_longlong(xi);
        if (v == SYNCFREE_UNSET) v = SYNCFREE_NAN;
        word_ref(*reinterpret_cast<unsigned long long *>(x + i)).store(v, cuda::memory_order_relaxed);
        term = wi * xi;
    }
    if (dot) { /* uniform: the whole block sums (gs_block_sum's barriers) */
        const double part = gs_block_sum(term, smem);
        if (threadIdx.x == 0) partials[block] = part;
    }
    __syncthreads(); /* every row of this block written, and its partial */
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(&state[1], 1u) == gridDim.x - 1; /* the last block: all others done */
    }
    __syncthreads();
    if (!is_last) return;
    if (dot) { /* the partials in ticket order, a fixed tree: the same bits every run */
        __threadfence();
        double acc = 0.0;
        for (unsigned k = threadIdx.x; k < gridDim.x; k += blockDim.x) acc += __ldcg(&partials[k]);
        acc = gs_block_sum(acc, smem);
        if (threadIdx.x == 0) *dot = acc;
    }
    if (threadIdx.x == 0) {
        state[0] = 0u;
        state[1] = 0u;
    }
}

template <int LANES>
static int tri_syncfree_launch(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                               const double *s, const double *b, double *x,
                               const gs_dtri_fused *f)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    if (!f->x_filled) {
        const int status = CUDA_CALL(&e->err, cudaMemsetAsync(x, 0xFF, (size_t)t->n * sizeof(double), st));
        if (status != GS_OK) return status;
    }
    return CUDA_LAUNCH(&e->err, tri_syncfree_kernel<LANES>,
                       gs_dblocks(t->n_slots, SYNCFREE_THREADS / LANES), SYNCFREE_THREADS, 0, st,
                       t->n_slots, (bool)t->upper, (const int32_t *)t->slot_rows, t->rp, t->col,
                       val, (bool)unit, s, b, x, t->state, f->w, t->partials, f->dot,
                       (unsigned long long *)f->fill);
}

/* The sync-free solve's blocks (its partials). */
int64_t gs_dtri_syncfree_blocks(const gs_dtri *t)
{
    return gs_dblocks(t->n_slots, SYNCFREE_THREADS / t->syncfree_lanes);
}

int gs_dtri_solve_syncfree(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                           const double *s, const double *b, double *x, const gs_dtri_fused *f)
{
    const gs_dtri_fused none = {};
    if (!f) f = &none;
    if (f->dot && (!f->w || !t->partials || t->n_partials < gs_dtri_syncfree_blocks(t)))
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "trisolve sync-free: a fused dot without w or gs_dtri_prepare_dot");
    if (t->n_slots == 0) /* nothing to solve: the dot of nothing, the fill of nothing */
        return f->dot ? CUDA_CALL(&e->err, cudaMemsetAsync(f->dot, 0, sizeof(double),
                                                           gs_cuda_of(e)->stream))
                      : GS_OK;
    switch (t->syncfree_lanes) {
    case 1: return tri_syncfree_launch<1>(e, t, val, unit, s, b, x, f);
    case 2: return tri_syncfree_launch<2>(e, t, val, unit, s, b, x, f);
    case 4: return tri_syncfree_launch<4>(e, t, val, unit, s, b, x, f);
    case 8: return tri_syncfree_launch<8>(e, t, val, unit, s, b, x, f);
    case 16: return tri_syncfree_launch<16>(e, t, val, unit, s, b, x, f);
    default: return tri_syncfree_launch<32>(e, t, val, unit, s, b, x, f);
    }
}

int gs_dtri_solve_fused(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                        int unit, const double *s, const double *b, double *x,
                        const gs_dtri_fused *f)
{
    if (how == GS_DTRI_SYNCFREE) return gs_dtri_solve_syncfree(e, t, val, unit, s, b, x, f);
    if (how == GS_DTRI_BLOCKS) return gs_dtri_solve_blocks(e, t, val, unit, s, b, x, f);
    if (f && (f->fill || f->x_filled))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve levels: a fill asked of it");
    return gs_dtri_solve_levels(e, t, val, unit, s, b, x, f);
}

int gs_dtri_solve(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                  int unit, const double *s, const double *b, double *x)
{
    return gs_dtri_solve_fused(e, t, how, val, unit, s, b, x, NULL);
}
