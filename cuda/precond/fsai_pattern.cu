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

/* ------------------------------------------------------------ --max-row */

/* The cap (docs/fsai.md, "Capping the pattern") is a selection per long row,
 * never a sort of S: a row of len > N entries keeps its diagonal and the
 * N - 1 off-diagonal entries whose (gs_fsai_cap_key, -column) is largest.
 * One block a long row finds the (N - 1)-th largest key by a radix select
 * (eight passes of 8 bits over the row's keys, a histogram in shared memory
 * each: the cost follows the row's length, whatever N), then writes the
 * entries above it and the first of those equal to it, in column order,
 * by block scans: the output is sorted without a sort. Rows of at most N
 * entries are copied by a warp each. */
#define CAP_THREADS 256
#define CAP_DIGITS 256 /* 8 bits a pass */

/* One thread a row: new lengths min(len, N) into out_rp[i + 1]; a row
 * longer than N is listed (rows[t], its keys' place key_off[t]; list
 * order is irrelevant, every row is written to its own place). counts =
 * {rows listed, keys}. */
__global__ void cap_count_kernel(int32_t n, const int64_t *__restrict__ rp, int64_t N,
                                 int64_t *out_rp, int32_t *__restrict__ rows,
                                 int64_t *__restrict__ key_off, unsigned long long *counts)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) out_rp[0] = 0; /* rows allocated unzeroed */
    if (i >= n) return;
    const int64_t len = rp[i + 1] - rp[i];
    out_rp[i + 1] = len > N ? N : len;
    if (len <= N) return;
    const unsigned long long t = atomicAdd(&counts[0], 1ull);
    rows[t] = (int32_t)i;
    key_off[t] = (int64_t)atomicAdd(&counts[1], (unsigned long long)len);
}

/* One warp a row: rows of at most N entries copied unchanged. */
__global__ void cap_copy_kernel(int32_t n, const int64_t *__restrict__ rp,
                                const int32_t *__restrict__ col, int64_t N,
                                const int64_t *__restrict__ out_rp, int32_t *__restrict__ out_col)
{
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t p0 = rp[i], len = rp[i + 1] - p0, q0 = out_rp[i];
    if (len > N) return;
    for (int64_t t = threadIdx.x & 31; t < len; t += 32) out_col[q0 + t] = col[p0 + t];
}

/* The (N - 1)-th largest of the row's m keys (m > N - 1 >= 1), a digit a
 * pass from the top: *prefix holds the chosen top bits (mask), *take how
 * many of the keys with those bits are kept (the first in column order);
 * keys whose top bits exceed prefix are all kept. A pass whose chosen
 * digit's keys are all taken ends the search. Whole block. */
static __device__ void cap_select(const uint64_t *__restrict__ key, int64_t m, int64_t need,
                                  unsigned long long *hist, uint64_t *prefix, uint64_t *mask,
                                  int64_t *take)
{
    __shared__ uint64_t s_prefix;
    __shared__ int64_t s_take, s_bin;
    uint64_t pre = 0, msk = 0;
    int64_t left = need;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < CAP_DIGITS; d += blockDim.x) hist[d] = 0;
        __syncthreads();
        for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
            const uint64_t k = key[t];
            if ((k & msk) == pre) atomicAdd(&hist[(k >> shift) & 0xff], 1ull);
        }
        __syncthreads();
        if (threadIdx.x == 0) { /* the digit where the count from the top reaches left */
            int64_t above = 0;
            int d = CAP_DIGITS - 1;
            while (d > 0 && above + (int64_t)hist[d] < left) above += (int64_t)hist[d--];
            s_prefix = pre | ((uint64_t)d << shift);
            s_take = left - above;
            s_bin = (int64_t)hist[d];
        }
        __syncthreads();
        pre = s_prefix, msk |= (uint64_t)0xff << shift, left = s_take;
        const bool all_of_bin = s_bin == left;
        __syncthreads(); /* s_* read by every thread before the next pass writes them */
        if (all_of_bin) break;
    }
    *prefix = pre, *mask = msk, *take = left;
}

/* One block a listed row i (len > N entries, sorted, i last): keys of its
 * off-diagonal entries (a_ij found by a binary search of A's sorted row i),
 * the selection, then the kept entries in column order at out_rp[i]. */
__global__ void __launch_bounds__(CAP_THREADS)
    cap_rows_kernel(const int32_t *__restrict__ rows, const int64_t *__restrict__ key_off,
                    const int64_t *__restrict__ rp, const int32_t *__restrict__ col, int64_t N,
                    const int64_t *__restrict__ a_rp, const int32_t *__restrict__ a_col,
                    const double *__restrict__ a_val, const double *__restrict__ diag,
                    uint64_t *__restrict__ keys, const int64_t *__restrict__ out_rp,
                    int32_t *__restrict__ out_col)
{
    typedef cub::BlockScan<int, CAP_THREADS> scan_t;
    __shared__ typename scan_t::TempStorage scan_tmp;
    __shared__ unsigned long long hist[CAP_DIGITS];
    const int32_t i = rows[blockIdx.x];
    const int64_t p0 = rp[i], m = rp[i + 1] - p0 - 1; /* off-diagonal entries */
    const int32_t *row = col + p0;
    uint64_t *key = keys + key_off[blockIdx.x];
    const int64_t a0 = a_rp[i], alen = a_rp[i + 1] - a0;
    const double aii = diag[i];
    for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
        const int32_t j = row[t];
        const int64_t q = fsai_find_col(a_col + a0, alen, j);
        key[t] = gs_fsai_cap_key(q >= 0, q >= 0 ? a_val[a0 + q] : 0.0, aii, diag[j]);
    }
    __syncthreads();
    uint64_t prefix = 0, mask = 0;
    int64_t take = 0; /* need = 0 (N = 1): mask 0, every key "equal", none taken */
    if (N > 1) cap_select(key, m, N - 1, hist, &prefix, &mask, &take);
    int32_t *out = out_col + out_rp[i];
    int64_t kept = 0, ties = 0;
    for (int64_t base = 0; base <= m; base += CAP_THREADS) { /* m + 1 entries, i last */
        const int64_t t = base + threadIdx.x;
        const uint64_t k = t < m ? key[t] & mask : 0;
        const int tie = t < m && k == prefix, above = t < m && k > prefix;
        int tie_rank, tie_total, pos, keep_total;
        scan_t(scan_tmp).ExclusiveSum(tie, tie_rank, tie_total);
        __syncthreads();
        const int keep = above || (tie && ties + tie_rank < take) || t == m;
        scan_t(scan_tmp).ExclusiveSum(keep, pos, keep_total);
        __syncthreads();
        if (keep) out[kept + pos] = row[t];
        kept += keep_total, ties += tie_total;
    }
}

int fsai_cuda_cap(gs_engine *e, const gs_dcsr *A, const double *diag, int64_t N, gs_dcsr *S,
                  int64_t *capped)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = S->n;
    gs_dcsr out = {};
    int32_t *rows = NULL;
    int64_t *key_off = NULL;
    uint64_t *keys = NULL, words[3] = {0, 0, 0}; /* nnz after the cut, rows listed, keys */
    unsigned long long *counts = NULL;
    int status = GS_OK;
    *capped = 0;
    GS_TRY(gs_cuda_alloc(e, &rows, ((size_t)n + 1) * sizeof(int32_t), "fsai cap: long rows"));
    GS_TRY(gs_cuda_alloc(e, &key_off, ((size_t)n + 1) * sizeof(int64_t), "fsai cap: long rows"));
    GS_TRY(gs_cuda_alloc(e, &counts, 2 * sizeof(unsigned long long), "fsai cap: counts"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(counts, 0, 2 * sizeof(unsigned long long),
                                              c->stream)));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, &out, n, "fsai cap: row pointers of S"));
    GS_TRY(CUDA_LAUNCH(&e->err, cap_count_kernel, gs_dblocks(n, 256), 256, 0, c->stream, n,
                       (const int64_t *)S->rp, N, out.rp, rows, key_off, counts));
    GS_TRY(gs_dcsr_counts_scan(e, out.rp, n));
    {
        const void *src[2] = {out.rp + n, counts};
        const int len[2] = {1, 2};
        GS_TRY(gs_dread_words(e, 2, src, len, words));
    }
    *capped = (int64_t)words[1];
    GS_TRY(gs_dcsr_alloc_entries(e, &out, (int64_t)words[0], 0, "fsai cap: S"));
    GS_TRY(gs_cuda_alloc(e, &keys, (size_t)words[2] * sizeof(uint64_t) + 8, "fsai cap: keys"));
    GS_TRY(CUDA_LAUNCH(&e->err, cap_copy_kernel, gs_dblocks(n, PATTERN_WARPS), PATTERN_THREADS, 0,
                       c->stream, n, (const int64_t *)S->rp, (const int32_t *)S->col, N,
                       (const int64_t *)out.rp, out.col));
    if (*capped > 0)
        GS_TRY(CUDA_LAUNCH(&e->err, cap_rows_kernel, (unsigned)*capped, CAP_THREADS, 0,
                           c->stream, (const int32_t *)rows, (const int64_t *)key_off,
                           (const int64_t *)S->rp, (const int32_t *)S->col, N,
                           (const int64_t *)A->rp, (const int32_t *)A->col,
                           (const double *)A->val, diag, keys, (const int64_t *)out.rp, out.col));
    gs_dcsr_free(e, S); /* stream-ordered: after the kernels that read it */
    *S = out;
    out = gs_dcsr{};
cleanup:
    gs_cuda_free(e, rows, ((size_t)n + 1) * sizeof(int32_t));
    gs_cuda_free(e, key_off, ((size_t)n + 1) * sizeof(int64_t));
    gs_cuda_free(e, counts, 2 * sizeof(unsigned long long));
    gs_cuda_free(e, keys, (size_t)words[2] * sizeof(uint64_t) + 8);
    gs_dcsr_free(e, &out);
    return status;
}
