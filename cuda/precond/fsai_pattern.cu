/* fsai_pattern.cu - the static FSAI pattern on the GPU: L_1 = Low(Ã),
 * L_{p+1} = Low(L_p Ã), S = 1NZ(L_k), by the warp-centric kernel of
 * Bernaschi, Bisson, Fantozzi, Janna, SIAM J. Sci. Comput. 38(1) 2016,
 * Algorithm 4.2 (ballot/popc compaction, a per-warp byte map, no atomics).
 *
 * Differences from the paper, and why:
 * - Output in CSR sized exactly: each product runs twice, a counting pass
 *   (row lengths, then a scan) and a fill pass, instead of ELLPACK rows padded
 *   to a width that reserves all free memory. A row that would still exceed
 *   its counted length sets the paper's error flag (never silent).
 * - The map of a warp is a window, not n bytes: with b the lower bandwidth
 *   of Ã (max_r (r - its first column), counted by the prefilter), L_p(r,:)
 *   lies in [r - p b, r], so every candidate column c of a row r of
 *   Low(L_p Ã) lies in [r - (p + 1) b, r]; with W a power of two >=
 *   (p + 1) b + 1, c mod W is one-to-one on that range, so a byte map of W
 *   entries per warp needs no collision handling. On banded matrices
 *   (stencils) W << n: the maps of enough warps to fill the GPU fit in a
 *   bounded budget. W >= n falls back to the paper's n-byte map. (v7: this
 *   bound replaced a kernel that measured the exact span and one host round
 *   trip per product; on stencils the two are equal.)
 * - Rows are sorted where it is cheap: every fill pass sorts rows of at most
 *   PATTERN_SORT_MAX columns in registers (any product may turn out to be
 *   the last, see the fixed point below); cub's segmented sort runs on S
 *   only if a row of S is longer. The intermediate L_p are otherwise sets.
 * - Where the rows of Ã are short, a step of the warp takes 32 candidates
 *   from up to 32 rows of Ã at once (pattern_product_kernel, v4), not one
 *   row of Ã a step.
 * - Once a product adds nothing, the recursion stops (fixed point). */
#include <cub/cub.cuh>

#include "fsai_cuda.h"

#define PATTERN_THREADS 128           /* the paper's 128 threads per block */
#define PATTERN_WARPS (PATTERN_THREADS / 32)
#define PATTERN_SCRATCH 1024          /* counting pass: columns kept to reset the map */
#define PATTERN_MAP_BUDGET ((size_t)256 << 20) /* bytes of maps at most */
#define PATTERN_MAP_SMALL ((size_t)32 << 20)   /* maps this small need no free-memory check */
#define PATTERN_SORT_MAX 256          /* longest row a fill pass sorts itself */
#define FULL_MASK 0xffffffffu

/* Alg. 4.2's compaction step: the lanes with t (each holding a distinct
 * column c, not yet in the map) set their map byte and append c after the
 * row's rind columns in lane order; a fill pass past its counted length cap
 * sets *overflow. Returns the row's new length. Whole warp. */
template <bool FILL>
static __device__ __forceinline__ int64_t pattern_take(bool t, int32_t c, uint32_t slot,
                                                       uint8_t *M, int64_t rind, int64_t cap,
                                                       int32_t *out, int *overflow)
{
    const unsigned z = __ballot_sync(FULL_MASK, t);
    if (t) {
        M[slot] = 1;
        const int64_t pos = rind + __popc(z & ((1u << (threadIdx.x & 31)) - 1));
        if (pos < cap) out[pos] = c;
        else if (FILL) *overflow = 1;
    }
    return rind + __popc(z);
}

/* The len <= 32 U distinct columns of out sorted in place by rank (whole
 * warp): lane l holds entries l, l + 32, ...; each entry's rank is the
 * count of the row's entries below it, every entry broadcast in turn by a
 * shuffle (the padding, INT32_MAX, is below none). len shuffles and about
 * len^2 / 32 comparisons a lane: on bcsstk15 (rows of S up to 204) it added
 * 16 us to the last fill pass and replaced a segmented sort of 75 us with
 * its host round trip. */
template <int U>
static __device__ __forceinline__ void pattern_rank_sort(int32_t *out, int len)
{
    const int lane = threadIdx.x & 31;
    int32_t x[U];
    int rank[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        x[u] = 32 * u + lane < len ? out[32 * u + lane] : INT32_MAX;
        rank[u] = 0;
    }
#pragma unroll
    for (int v = 0; v < U; v++) {
        if (32 * v >= len) break; /* warp-uniform */
        const int last = len - 32 * v < 32 ? len - 32 * v : 32;
        for (int j = 0; j < last; j++) {
            const int32_t y = __shfl_sync(FULL_MASK, x[v], j);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (32 * u < len) rank[u] += y < x[u]; /* warp-uniform */
        }
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < U; u++)
        if (32 * u + lane < len) out[rank[u]] = x[u];
}

/* One warp per row r (rows wid, wid + nwarps, ...): row r of Low(Lin Ã) is
 * the union over s in Lin(r,:) of {c in Ã(s,:) : c <= r} (Alg. 4.2). FILL = 0
 * counts (out_rp[r + 1] = length); FILL = 1 writes the columns at out_rp[r],
 * and with sort_rows a row of at most PATTERN_SORT_MAX columns is sorted in
 * registers on the way (pattern_rank_sort), a longer one sets *unsorted.
 * The map M (one window of `stride` bytes per warp, index c & mask) is all
 * zero on entry and on exit.
 *
 * Up to 32 rows s are taken together (v4): lane l loads the bounds of the
 * Ã row of the l-th s at once, and a warp scan lays the rows end to end.
 * Short rows of Ã (at most 16 entries on average): each step of 32 lanes
 * takes 32 consecutive candidates, whatever row they come from
 * (fsai_lane_of finds it); a column met twice in one step is kept by its
 * lowest lane only (__match_any_sync), so the lanes that test and set M hold
 * distinct columns, as in Alg. 4.2. On a 7-point stencil a row of L_2 (13
 * rows s, 91 candidates) takes 3 steps instead of 13. Longer rows: one row
 * of Ã a step, as in Alg. 4.2 (a step of the first kind costs about 1.6 of
 * these, measured: it only pays where it saves more steps than that). */
template <bool FILL>
__global__ void __launch_bounds__(PATTERN_THREADS)
    pattern_product_kernel(int32_t n, const int64_t *__restrict__ in_rp,
                           const int32_t *__restrict__ in_col, const int64_t *__restrict__ a_rp,
                           const int32_t *__restrict__ a_col, uint8_t *__restrict__ map,
                           uint32_t mask, size_t stride, int32_t nwarps, int64_t *out_rp,
                           int32_t *__restrict__ out_col, int32_t *__restrict__ scratch,
                           int *overflow, int sort_rows, int *unsorted)
{
    const int lane = threadIdx.x & 31;
    const int32_t wid = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (wid >= nwarps) return;
    uint8_t *M = map + (size_t)wid * stride;
    int32_t *list = FILL ? NULL : scratch + (size_t)wid * PATTERN_SCRATCH;
    if (!FILL && wid == 0 && lane == 0) {
        out_rp[0] = 0; /* rows allocated unzeroed */
        *unsorted = 0; /* the flag speaks of the last product's fill */
    }
    int longest = 0; /* the warp's longest row: overflow[2] (rows only grow with p) */
    for (int32_t r = wid; r < n; r += nwarps) {
        int64_t rind = 0;
        const int64_t cap = FILL ? out_rp[r + 1] - out_rp[r] : PATTERN_SCRATCH;
        int32_t *out = FILL ? out_col + out_rp[r] : list;
        const int64_t i0 = in_rp[r], ilen = in_rp[r + 1] - i0;
        for (int64_t i = 0; i < ilen; i += 32) {
            int64_t a0 = 0, len = 0;
            if (i + lane < ilen) {
                const int32_t s = in_col[i0 + i + lane];
                a0 = a_rp[s];
                len = a_rp[s + 1] - a0;
            }
            const int64_t incl = fsai_warp_inclusive_scan(len);
            const int64_t total = __shfl_sync(FULL_MASK, incl, 31), excl = incl - len;
            const int jmax = (int)min((int64_t)32, ilen - i);
            if (total <= 16 * (int64_t)jmax) {
                /* short rows of Ã: 32 candidates a step, from any row */
                for (int64_t base = 0; base < total; base += 32) {
                    const int64_t q = base + lane;
                    const int j = fsai_lane_of(incl, q);
                    const int64_t start = __shfl_sync(FULL_MASK, a0, j);
                    const int64_t first = __shfl_sync(FULL_MASK, excl, j);
                    const int32_t c = q < total ? a_col[start + (q - first)] : INT32_MAX;
                    const unsigned same = __match_any_sync(FULL_MASK, c);
                    const uint32_t slot = (uint32_t)c & mask;
                    const bool t = c <= r && (__ffs(same) - 1) == lane && !M[slot];
                    rind = pattern_take<FILL>(t, c, slot, M, rind, cap, out, overflow);
                    __syncwarp();
                }
            } else {
                /* long rows of Ã: one row a step (Alg. 4.2), bounds already
                 * loaded; the row's columns are distinct and sorted, so the
                 * rest of the row is skipped once past r */
                for (int j = 0; j < jmax; j++) {
                    const int64_t k0 = __shfl_sync(FULL_MASK, a0, j);
                    const int64_t k1 = k0 + __shfl_sync(FULL_MASK, len, j);
                    for (int64_t k = k0; k < k1; k += 32) {
                        const int32_t c = k + lane < k1 ? a_col[k + lane] : INT32_MAX;
                        const uint32_t slot = (uint32_t)c & mask;
                        const bool t = c <= r && !M[slot];
                        rind = pattern_take<FILL>(t, c, slot, M, rind, cap, out, overflow);
                        __syncwarp();
                        if (__shfl_sync(FULL_MASK, c, 31) > r) break;
                    }
                }
            }
        }
        if (!FILL && lane == 0) out_rp[r + 1] = rind;
        if (FILL && rind > longest) longest = (int)rind;
        if (rind <= cap) {                   /* Alg. 4.2 lines 30-32: reset what was set */
            for (int64_t q = lane; q < rind; q += 32) M[(uint32_t)out[q] & mask] = 0;
        } else {                             /* counting pass, long row: reset by a rescan */
            for (int64_t p = i0; p < i0 + ilen; p++) {
                const int32_t s = in_col[p];
                for (int64_t k = a_rp[s] + lane; k < a_rp[s + 1]; k += 32)
                    if (a_col[k] <= r) M[(uint32_t)a_col[k] & mask] = 0;
            }
        }
        if (FILL && sort_rows && rind <= cap) {
            __syncwarp();
            if (rind <= 32) pattern_rank_sort<1>(out, (int)rind);
            else if (rind <= PATTERN_SORT_MAX) pattern_rank_sort<PATTERN_SORT_MAX / 32>(out, (int)rind);
            else if (lane == 0) *unsorted = 1;
        }
        __syncwarp();
    }
    if (FILL && lane == 0) atomicMax(&overflow[2], longest);
}

/* The window of product p (input L_p): W = the power of two at or above
 * (p + 1) bw + 1 (mask W - 1), or n bytes indexed by c itself when that is
 * not smaller. */
static void pattern_window(int32_t n, int64_t bw, long p, uint32_t *mask, size_t *stride)
{
    const uint64_t span = (uint64_t)(p + 1) * (uint64_t)bw + 1;
    uint64_t w = 1;
    while (w < span && w < (uint64_t)n) w <<= 1;
    if (w >= (uint64_t)n) {
        *mask = 0xffffffffu;
        *stride = (size_t)(n > 0 ? n : 1);
    } else {
        *mask = (uint32_t)(w - 1);
        *stride = (size_t)w;
    }
}

/* Warps to launch: all that can be resident (max_warps), at most what the
 * map budget allows, at most one per row, at least 1. */
static int32_t pattern_warps(int32_t n, int64_t max_warps, size_t budget, size_t stride)
{
    int64_t w = max_warps;
    if ((int64_t)(budget / stride) < w) w = (int64_t)(budget / stride);
    if (w > n) w = n;
    return (int32_t)(w > 0 ? w : 1);
}

/* The device maps, reserved for every product at once where that is small,
 * else grown when a product needs more (zeroed once: the kernels leave
 * them zero). */
typedef struct pattern_work {
    int64_t max_warps; /* resident warps of the product kernel */
    size_t budget;     /* bytes of maps at most */
    uint8_t *map;
    size_t map_bytes;
    int32_t *scratch;
    size_t scratch_bytes;
    int *overflow; /* [0] overflow, [1] a row longer than PATTERN_SORT_MAX left unsorted,
                    * [2] the longest row filled */
} pattern_work;

static int pattern_work_reserve(gs_engine *e, pattern_work *w, size_t map_bytes, int32_t nwarps)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    const size_t scratch_bytes = (size_t)nwarps * PATTERN_SCRATCH * sizeof(int32_t);
    if (map_bytes > w->map_bytes) {
        gs_cuda_free(e, w->map, w->map_bytes);
        w->map_bytes = 0;
        GS_TRY(gs_cuda_alloc(e, &w->map, map_bytes, "fsai pattern: per-warp maps"));
        w->map_bytes = map_bytes;
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(w->map, 0, map_bytes, c->stream)));
    }
    if (scratch_bytes > w->scratch_bytes) {
        gs_cuda_free(e, w->scratch, w->scratch_bytes);
        w->scratch_bytes = 0;
        GS_TRY(gs_cuda_alloc(e, &w->scratch, scratch_bytes, "fsai pattern: per-warp lists"));
        w->scratch_bytes = scratch_bytes;
    }
    if (!w->overflow) {
        GS_TRY(gs_cuda_alloc(e, &w->overflow, 3 * sizeof(int), "fsai pattern: flags"));
        GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(w->overflow, 0, 3 * sizeof(int), c->stream)));
    }
cleanup:
    return status;
}

static void pattern_work_free(gs_engine *e, pattern_work *w)
{
    gs_cuda_free(e, w->map, w->map_bytes);
    gs_cuda_free(e, w->scratch, w->scratch_bytes);
    gs_cuda_free(e, w->overflow, 3 * sizeof(int));
}

/* Bytes of maps a product may use, want being what all its warps would
 * take: want itself up to PATTERN_MAP_SMALL, else the budget (a fraction of
 * free memory, at most PATTERN_MAP_BUDGET), asked of the driver once a
 * pattern and only then (the query took 15 us, a tenth of bcsstk15's
 * pattern stage). */
static size_t pattern_budget(pattern_work *w, size_t want)
{
    if (want <= PATTERN_MAP_SMALL) return want;
    if (!w->budget) {
        size_t free_bytes = 0, total = 0;
        if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = PATTERN_MAP_BUDGET;
        (void)cudaGetLastError();
        w->budget = free_bytes / 8 < PATTERN_MAP_BUDGET ? free_bytes / 8 : PATTERN_MAP_BUDGET;
        if (w->budget < PATTERN_MAP_SMALL) w->budget = PATTERN_MAP_SMALL;
    }
    return w->budget;
}

/* Product p's map window (mask, stride) and warps. */
static void pattern_geometry(int32_t n, int64_t bw, long p, pattern_work *w, uint32_t *mask,
                             size_t *stride, int32_t *nwarps)
{
    pattern_window(n, bw, p, mask, stride);
    const int64_t all = w->max_warps < n ? w->max_warps : n;
    *nwarps = pattern_warps(n, w->max_warps, pattern_budget(w, *stride * (size_t)all), *stride);
}

/* out = Low(Lin Ã), Lin = L_p: counting pass, scan (nnz read back: the one
 * host round trip), fill pass. The fill sorts rows of at most
 * PATTERN_SORT_MAX columns and sets w->overflow[1] if a row is longer
 * (reset by the counting pass, so that the flag speaks of the last
 * product); a fill that finds more than was counted sets w->overflow[0].
 * Both are read once, after the last product. */
static int pattern_product(gs_engine *e, const gs_dcsr *Lin, const gs_dcsr *At, long p,
                           int64_t bw, pattern_work *w, gs_dcsr *out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = Lin->n;
    uint32_t mask = 0;
    size_t stride = 0;
    int32_t nwarps = 0;
    int64_t nnz = 0;
    int status = GS_OK;
    pattern_geometry(n, bw, p, w, &mask, &stride, &nwarps);
    const unsigned grid = gs_dblocks(nwarps, PATTERN_WARPS);
    GS_TRY(pattern_work_reserve(e, w, stride * (size_t)nwarps, nwarps));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, out, n, "fsai pattern: row pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_product_kernel<false>, grid, PATTERN_THREADS, 0,
                       c->stream, n, (const int64_t *)Lin->rp, (const int32_t *)Lin->col,
                       (const int64_t *)At->rp, (const int32_t *)At->col, w->map, mask, stride,
                       nwarps, out->rp, (int32_t *)NULL, w->scratch, w->overflow, 0,
                       w->overflow + 1));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, out->rp, n, &nnz));
    GS_TRY(gs_dcsr_alloc_entries(e, out, nnz, 0, "fsai pattern: columns"));
    GS_TRY(CUDA_LAUNCH(&e->err, pattern_product_kernel<true>, grid, PATTERN_THREADS, 0, c->stream,
                       n, (const int64_t *)Lin->rp, (const int32_t *)Lin->col,
                       (const int64_t *)At->rp, (const int32_t *)At->col, w->map, mask, stride,
                       nwarps, out->rp, out->col, (int32_t *)NULL, w->overflow, 1,
                       w->overflow + 1));
cleanup:
    return status;
}

/* The product kernel's resident warps, once per pattern. */
static void pattern_limits(gs_engine *e, pattern_work *w)
{
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pattern_product_kernel<true>,
                                                      PATTERN_THREADS, 0) != cudaSuccess)
        per_sm = 4;
    (void)cudaGetLastError();
    w->max_warps = (int64_t)(per_sm > 0 ? per_sm : 1) * gs_cuda_of(e)->sm_count * PATTERN_WARPS;
}

int fsai_cuda_pattern(gs_engine *e, const gs_dcsr *At, gs_dcsr *L1, long k, int64_t bw,
                      gs_dcsr *S, int64_t *m_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    gs_dcsr L = *L1, next = {};
    pattern_work w = {};
    int status = GS_OK, flags[3] = {0, 0, 0}, products = 0;
    *L1 = gs_dcsr{};
    *m_max = -1;
    pattern_limits(e, &w);
    { /* the maps of every product at once where they are small (a fixed
       * point may stop the products before the widest window): one
       * allocation and one memset, where growing them for a wider window
       * cost a free, an allocation and a memset (host calls the device
       * waits for) */
        size_t map_bytes = 0;
        int32_t warps = 0;
        for (long p = 1; p < k && At->nnz > At->n; p++) {
            uint32_t mask = 0;
            size_t stride = 0;
            int32_t nwarps = 0;
            pattern_geometry(At->n, bw, p, &w, &mask, &stride, &nwarps);
            if (stride * (size_t)nwarps > map_bytes) map_bytes = stride * (size_t)nwarps;
            if (nwarps > warps) warps = nwarps;
        }
        if (warps > 0 && map_bytes <= PATTERN_MAP_SMALL)
            GS_TRY(pattern_work_reserve(e, &w, map_bytes, warps));
    }
    /* Ã contains its diagonal, so L_{p+1} contains L_p: once a product adds
     * nothing (equal counts), every later one returns the same pattern and
     * the recursion stops there. A diagonal Ã gives L_p = L_1 for all p. */
    for (long p = 1; p < k && At->nnz > At->n; p++) {     /* L_{p+1} = Low(L_p Ã) */
        GS_TRY(pattern_product(e, &L, At, p, bw, &w, &next));
        products++;
        const int fixed = next.nnz == L.nnz;
        gs_dcsr_free(e, &L);
        L = next;
        next = gs_dcsr{};
        if (fixed) break;
    }
    if (products > 0) { /* L_1 = Low(Ã) keeps A's sorted rows */
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(flags, w.overflow, sizeof flags,
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        if (flags[0])
            GS_TRY(gs_error_set(&e->err, GS_ERR_INTERNAL,
                                "fsai pattern: a row of Low(L A) outgrew its counted length "
                                "(counting and fill passes disagree)"));
        if (flags[1]) GS_TRY(gs_dcsr_sort_rows(e, &L)); /* rows longer than PATTERN_SORT_MAX */
        *m_max = flags[2];
    }
cleanup:
    pattern_work_free(e, &w);
    gs_dcsr_free(e, &next);
    if (status != GS_OK) gs_dcsr_free(e, &L);
    *S = L;
    return status;
}
