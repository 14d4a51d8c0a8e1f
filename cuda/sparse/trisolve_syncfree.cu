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
 * No deadlock: a block draws a ticket (state[0]) when it starts, and its next one before
 * it waits on its current chunk (or, without the loads ahead, once it has finished it),
 * and takes the slots at that place of the schedule. A row waits only on rows of lower levels, which lie in slots
 * before its warp's first slot (levels are sorted and no warp holds two levels): rows of
 * blocks that drew earlier tickets, which are resident or done, or of its own block's
 * lower warps; never on a row of its own warp. By induction on the slot: the lowest
 * unfinished warp either belongs to a started block, and all it waits on is done, so it
 * finishes; or it is drawn as a block's next chunk (the loads ahead), then that block's
 * current chunk is lower, so finished, and the block takes it up; or its ticket is not
 * drawn yet, then every block holding a chunk has only finished rows to wait on,
 * finishes and draws the next ticket (or, where no block holds one, a resident block
 * draws it). Whatever order the hardware starts blocks in, every
 * wait ends. The blocks are as many as are resident at once, each taking chunks until
 * they run out (persistent): with a block a chunk, the wavefront of a grid of millions of
 * rows waited, at every level, for blocks to retire and the next ones to launch.
 *
 * The value is the flag: x is filled with GS_DTRI_UNSET (all bits set, a NaN) in stream
 * order before the launch, and a row waits until x_j is no longer that pattern. x_j is one
 * 64-bit word written once, by one relaxed atomic store, and read by relaxed atomic loads:
 * coherence alone makes the reader see the final value, with no fence on either side (a
 * separate ready flag costs a release fence on the writer and a second load on the
 * reader, both a round trip to L2, at every level). A computed x_i that happens to have
 * the unset pattern (a NaN from a NaN input) is stored as the canonical NaN instead, so
 * that no row waits for ever on it; a NaN still comes out, and CG reports it.
 *
 * No reset beyond the fill: the last block to leave (state[2] counts them) zeroes the
 * ticket and the counts (trisolve_common.cuh). The kernel's arguments never change, so the fill and the launch
 * can be captured in a graph and replayed.
 *
 * Fused (gs_dtri_fused): the dot w . x, a block's rows summed by a fixed tree into
 * partials[ticket] (the ticket, not blockIdx.x: it fixes which rows a chunk holds), and
 * the block that finishes the last chunk adds partials[0 .. chunks) in that order;
 * and the fill of the next sync-free solve's x, a store per row, issued before the row's
 * waits (off the wavefront's path). MIC's apply takes both: the forward solve fills z
 * for the backward one, which computes r . z (docs/mic.md). */
#include "trisolve_common.cuh"

#define SYNCFREE_THREADS 256
#define FULL_MASK 0xffffffffu

/* What a lane knows of its row before it waits: the row (-1: an empty slot), its entries
 * [p, end) from the lane's first, the right-hand side and w_i (the row's first lane), and
 * the lane's first entry (j, v). */
typedef struct syncfree_row {
    int32_t i, j;
    int64_t p, end;
    double rhs, wi, v;
} syncfree_row;

/* The lane's row of chunk `chunk`; the fill of the next solve's x_i, issued here (off the
 * wavefront's path). */
template <int LANES>
static __device__ inline syncfree_row syncfree_load(unsigned chunk, int64_t n_slots,
                                                    const int32_t *__restrict__ slots,
                                                    const int64_t *__restrict__ rp,
                                                    const int32_t *__restrict__ col,
                                                    const double *__restrict__ val,
                                                    const double *__restrict__ s,
                                                    const double *__restrict__ b,
                                                    const double *__restrict__ w,
                                                    unsigned long long *__restrict__ fill)
{
    const int sub = threadIdx.x % LANES;
    const int64_t slot = (int64_t)chunk * (SYNCFREE_THREADS / LANES) + threadIdx.x / LANES;
    syncfree_row r = {-1, -1, 0, 0, 0.0, 0.0, 0.0};
    r.i = slot < n_slots ? slots[slot] : -1;
    if (r.i < 0) return r;
    r.p = rp[r.i] + sub, r.end = rp[r.i + 1];
    if (sub == 0) {
        r.rhs = (s ? s[r.i] : 1.0) * b[r.i];
        if (w) r.wi = w[r.i];
        if (fill) fill[r.i] = GS_DTRI_UNSET;
    }
    if (r.p < r.end) r.j = col[r.p], r.v = val[r.p];
    return r;
}

/* LANES lanes a row, SYNCFREE_THREADS / LANES slots a chunk: x_i = (s_i b_i - sum_j t_ij
 * x_j) / t_ii (t_ii = 1 when unit); with dot, *dot = w . x; with fill, fill_i = the unset
 * pattern. The blocks are persistent: each draws tickets (chunks of the schedule) until
 * they run out, so that a chunk starts as soon as a resident block is free instead of
 * after a block's retirement and the next one's launch. PRE: a block draws its next
 * ticket and loads that chunk's rows (slot, row pointers, first entries, right-hand side)
 * before it waits on the current chunk's dependencies, so that those dependent loads are
 * not on the wavefront's path. Either way the same arithmetic in the same order: the same
 * bits. */
template <int LANES, bool PRE>
__global__ void __launch_bounds__(SYNCFREE_THREADS)
    tri_syncfree_kernel(int64_t n_slots, unsigned chunks, bool upper,
                        const int32_t *__restrict__ slots, const int64_t *__restrict__ rp,
                        const int32_t *__restrict__ col, const double *__restrict__ val,
                        bool unit, const double *__restrict__ s, const double *__restrict__ b,
                        double *x, unsigned *state, const double *__restrict__ w,
                        double *__restrict__ partials, double *dot,
                        unsigned long long *__restrict__ fill)
{
    __shared__ unsigned tickets[2]; /* by parity: a slot is rewritten two draws later */
    __shared__ double smem[32];
    const int sub = threadIdx.x % LANES;
    const double *wd = dot ? w : nullptr;
    if (threadIdx.x == 0) tickets[0] = atomicAdd(&state[0], 1u);
    __syncthreads();
    unsigned cur = tickets[0];
    syncfree_row r = {-1, -1, 0, 0, 0.0, 0.0, 0.0};
    if (PRE && cur < chunks)
        r = syncfree_load<LANES>(cur, n_slots, slots, rp, col, val, s, b, wd, fill);
    for (unsigned k = 0; cur < chunks; k++) {
        syncfree_row nr = {-1, -1, 0, 0, 0.0, 0.0, 0.0};
        unsigned next = chunks;
        if (PRE) { /* the next chunk drawn and its rows loaded before this one's waits */
            if (threadIdx.x == 0) tickets[(k + 1) & 1] = atomicAdd(&state[0], 1u);
            __syncthreads();
            next = tickets[(k + 1) & 1];
            if (next < chunks)
                nr = syncfree_load<LANES>(next, n_slots, slots, rp, col, val, s, b, wd, fill);
        } else {
            r = syncfree_load<LANES>(cur, n_slots, slots, rp, col, val, s, b, wd, fill);
        }
        double sum = 0.0, diag = 0.0;
        if (r.i >= 0) {
            for (int64_t q = r.p; q < r.end; q += LANES) {
                const int32_t j = q == r.p ? r.j : col[q];
                const double v = q == r.p ? r.v : val[q];
                if (j == r.i) diag = v;
                else if (upper ? j > r.i : j < r.i) sum += v * gs_dtri_wait_x(x, j);
            }
        }
        /* every lane gets here (empty slots included), so the whole warp shuffles */
        for (int o = LANES / 2; o > 0; o >>= 1) {
            sum += __shfl_xor_sync(FULL_MASK, sum, o, LANES);
            diag += __shfl_xor_sync(FULL_MASK, diag, o, LANES);
        }
        double term = 0.0; /* w_i x_i, on the row's first lane */
        if (r.i >= 0 && sub == 0) {
            const double xi = (r.rhs - sum) / (unit ? 1.0 : diag);
            gs_dtri_store_x(x, r.i, xi);
            term = r.wi * xi;
        }
        if (dot) { /* uniform: the whole block sums (gs_block_sum's barriers) */
            const double part = gs_block_sum(term, smem);
            if (threadIdx.x == 0) partials[cur] = part;
        }
        gs_dtri_chunk_done(state, chunks, partials, dot, smem);
        if (PRE) {
            cur = next, r = nr;
        } else { /* the next ticket, drawn once every thread has read this one */
            if (threadIdx.x == 0) tickets[(k + 1) & 1] = atomicAdd(&state[0], 1u);
            __syncthreads();
            cur = tickets[(k + 1) & 1];
        }
    }
    gs_dtri_block_leaves(state);
}

/* Blocks a launch: the chunks, at most as many as are resident at once; the engine's
 * debug.syncfree_blocks: -1 one a chunk (blocks that each take one ticket), N > 0 at most
 * N (tests: a few blocks take many chunks each). */
template <int LANES, bool PRE>
static int tri_syncfree_grid(gs_engine *e, unsigned chunks, unsigned *grid)
{
    int per_sm = 0;
    const int force = gs_cuda_debug(e)->syncfree_blocks;
    *grid = chunks;
    if (force < 0) return GS_OK;
    if (force > 0) {
        if ((unsigned)force < chunks) *grid = (unsigned)force;
        return GS_OK;
    }
    auto *const kernel = tri_syncfree_kernel<LANES, PRE>;
    const int status = CUDA_CALL(&e->err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                              &per_sm, kernel, SYNCFREE_THREADS, 0));
    if (status != GS_OK) return status;
    const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * gs_cuda_sm_count(e);
    if (resident < (int64_t)chunks) *grid = (unsigned)resident;
    return GS_OK;
}

template <int LANES, bool PRE>
static int tri_syncfree_run(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                            const double *s, const double *b, double *x, const gs_dtri_fused *f)
{
    cudaStream_t st = gs_cuda_of(e)->stream;
    const unsigned chunks = gs_dblocks(t->n_slots, SYNCFREE_THREADS / LANES);
    unsigned grid = chunks;
    int status = tri_syncfree_grid<LANES, PRE>(e, chunks, &grid);
    if (status != GS_OK) return status;
    if (!f->x_filled) {
        status = CUDA_CALL(&e->err, cudaMemsetAsync(x, 0xFF, (size_t)t->n * sizeof(double), st));
        if (status != GS_OK) return status;
    }
    auto *const tri_syncfree = tri_syncfree_kernel<LANES, PRE>;
    return CUDA_LAUNCH(&e->err, tri_syncfree, grid, SYNCFREE_THREADS, 0, st,
                       t->n_slots, chunks, (bool)t->upper, (const int32_t *)t->slot_rows, t->rp,
                       t->col, val, (bool)unit, s, b, x, t->state, f->w, t->partials, f->dot,
                       (unsigned long long *)f->fill);
}

/* The prefetching kernel unless the engine's debug.syncfree_prefetch is off. */
template <int LANES>
static int tri_syncfree_launch(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                               const double *s, const double *b, double *x,
                               const gs_dtri_fused *f)
{
    if (gs_cuda_debug(e)->syncfree_prefetch == GS_DEBUG_FORCE_OFF)
        return tri_syncfree_run<LANES, false>(e, t, val, unit, s, b, x, f);
    return tri_syncfree_run<LANES, true>(e, t, val, unit, s, b, x, f);
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
