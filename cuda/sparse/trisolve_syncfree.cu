/* trisolve_syncfree.cu - synchronisation-free triangular substitution: one launch, rows in
 * level order, each row waiting on ready flags of the rows it depends on (the MIC paper's
 * GPUFBS, blocks that spin until their neighbours have written; for any pattern as in Liu,
 * Li, Hogg, Vinter, "A synchronization-free algorithm for parallel sparse triangular
 * solves", Euro-Par 2016).
 *
 * Order: the analysis' schedule t->slot_rows, the rows sorted by level, each level padded
 * with empty slots (-1) to whole warps of rows_per_warp = 32 / lanes rows (lanes: the
 * power of two at or above the mean row length). Taken in natural order instead, the
 * resident warps (about 8k on an H100) cover about two planes of a 3D grid, and the
 * wavefront advanced one plane per many flag latencies; in level order the resident
 * window holds several whole wavefronts, and the solve costs about one flag latency a
 * level (docs/perf-notes.md).
 *
 * No deadlock: a block draws a ticket (state[1]) when it starts and takes the slots at that
 * place of the schedule. A row waits only on rows of lower levels, which lie in slots
 * before its warp's first slot (levels are sorted and no warp holds two levels): rows of
 * blocks that drew earlier tickets, which are resident or done, or of its own block's
 * lower warps; never on a row of its own warp. By induction on the slot: the lowest
 * unfinished warp either belongs to a started block, and all it waits on is done, so it
 * finishes; or its ticket is not drawn yet, then every started block has only finished
 * rows to wait on, finishes and leaves room for the next ticket. Whatever order the
 * hardware starts blocks in, every wait ends.
 *
 * No reset between solves: a flag holds the epoch (state[0] + 1) of the solve that wrote
 * it; the last block to finish (state[2] counts them) stores the new epoch and zeroes the
 * ticket and the count. Every solve writes every row's flag, so a flag holds the current
 * or the previous epoch, never a stale equal one, even when the counter wraps. The
 * kernel's arguments never change, so it can be captured in a graph and replayed. */
#include <cuda/atomic>

#include "gs_dsparse.h"

#define SYNCFREE_THREADS 256
#define FULL_MASK 0xffffffffu

typedef cuda::atomic_ref<unsigned, cuda::thread_scope_device> flag_ref;

/* LANES lanes a row, SYNCFREE_THREADS / LANES slots a block:
 * x_i = (s_i b_i - sum_j t_ij x_j) / t_ii (t_ii = 1 when unit). */
template <int LANES>
__global__ void tri_syncfree_kernel(int64_t n_slots, bool upper, const int32_t *__restrict__ slots,
                                    const int64_t *__restrict__ rp,
                                    const int32_t *__restrict__ col,
                                    const double *__restrict__ val, bool unit,
                                    const double *__restrict__ s, const double *__restrict__ b,
                                    double *x, unsigned *ready, unsigned *state)
{
    __shared__ unsigned block, epoch;
    if (threadIdx.x == 0) {
        block = atomicAdd(&state[1], 1u);
        epoch = flag_ref(state[0]).load(cuda::memory_order_relaxed) + 1u;
    }
    __syncthreads();
    const int sub = threadIdx.x % LANES;
    const int64_t slot = (int64_t)block * (SYNCFREE_THREADS / LANES) + threadIdx.x / LANES;
    const int32_t i = slot < n_slots ? slots[slot] : -1;
    double sum = 0.0, diag = 0.0;
    if (i >= 0) {
        for (int64_t p = rp[i] + sub; p < rp[i + 1]; p += LANES) {
            const int32_t j = col[p];
            if (j == i) {
                diag = val[p];
            } else if (upper ? j > i : j < i) {
                /* ends: row j is of a lower level, so in an earlier slot (the header) */
                flag_ref f(ready[j]);
                while (f.load(cuda::memory_order_acquire) != epoch) __nanosleep(10);
                sum += val[p] * __ldcg(x + j); /* from L2: x_j was written by another SM */
            }
        }
    }
    /* every lane gets here (empty slots included), so the whole warp shuffles */
    for (int o = LANES / 2; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(FULL_MASK, sum, o, LANES);
        diag += __shfl_xor_sync(FULL_MASK, diag, o, LANES);
    }
    if (i >= 0 && sub == 0) {
        __stcg(x + i, ((s ? s[i] : 1.0) * b[i] - sum) / (unit ? 1.0 : diag));
        flag_ref(ready[i]).store(epoch, cuda::memory_order_release);
    }
    __syncthreads(); /* every row of this block written */
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&state[2], 1u) == gridDim.x - 1) { /* the last block: all others done */
            state[1] = 0u;
            state[2] = 0u;
            flag_ref(state[0]).store(epoch, cuda::memory_order_release);
        }
    }
}

template <int LANES>
static int tri_syncfree_launch(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                               const double *s, const double *b, double *x)
{
    if (t->n_slots == 0) return GS_OK;
    return CUDA_LAUNCH(&e->err, tri_syncfree_kernel<LANES>,
                       gs_dblocks(t->n_slots, SYNCFREE_THREADS / LANES), SYNCFREE_THREADS, 0,
                       gs_cuda_of(e)->stream, t->n_slots, (bool)t->upper,
                       (const int32_t *)t->slot_rows, t->rp, t->col, val, (bool)unit, s, b, x,
                       t->ready, t->state);
}

int gs_dtri_solve_syncfree(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                           const double *s, const double *b, double *x)
{
    switch (t->lanes) {
    case 1: return tri_syncfree_launch<1>(e, t, val, unit, s, b, x);
    case 2: return tri_syncfree_launch<2>(e, t, val, unit, s, b, x);
    case 4: return tri_syncfree_launch<4>(e, t, val, unit, s, b, x);
    case 8: return tri_syncfree_launch<8>(e, t, val, unit, s, b, x);
    case 16: return tri_syncfree_launch<16>(e, t, val, unit, s, b, x);
    default: return tri_syncfree_launch<32>(e, t, val, unit, s, b, x);
    }
}

int gs_dtri_solve(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                  int unit, const double *s, const double *b, double *x)
{
    if (how == GS_DTRI_SYNCFREE) return gs_dtri_solve_syncfree(e, t, val, unit, s, b, x);
    return gs_dtri_solve_levels(e, t, val, unit, s, b, x);
}
