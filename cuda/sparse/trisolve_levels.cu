/* trisolve_levels.cu - level analysis of a triangular pattern on the device and the
 * level-scheduled substitution (wavefronts: Anderson & Saad, "Solving sparse triangular
 * linear systems on parallel computers", Int. J. High Speed Comput. 1 (1989); on a 3D grid
 * the planes i + j + k = const of the MIC paper's Fig. 2).
 *
 * Analysis: level[i] = 1 + max level[j] over the rows j that row i depends on. The rows are
 * taken in dependency order by blocks that draw a ticket (a global counter) when they
 * start, a warp a row: a row waits only on rows earlier in that order, which belong to
 * blocks that started earlier (so are resident) or to its own block, so every wait ends.
 * The level doubles as the ready flag (0: not yet). Short rows (a mean of at most
 * LEVEL_THREAD_MEAN entries) take a thread a row instead of a warp: the blocks in flight
 * then hold 32x the rows (all the resident warps hold about 8k rows a warp each, under
 * half a plane of a 128^3 grid, so the wavefront waited for the window to slide; a
 * thread a row holds about 16 planes). A row waiting on a row of its own warp relies on
 * independent thread scheduling (sm_70 on): the lanes of a diverged warp each progress.
 * Then the rows are sorted by level
 * (cub's stable radix sort: increasing within a level) and the level pointers are found
 * where the sorted level changes; they come to the host, one launch a level. */
#include <cuda/atomic>

#include <cub/cub.cuh>

#include "gs_dsparse.h"
#include "reduce.cuh"

#define LEVEL_WARPS 8 /* rows (warps) a 256-thread block of the analysis */
#define LEVEL_THREAD_MEAN 8 /* mean row length up to which a thread takes a row */
#define FULL_MASK 0xffffffffu

/* The rows of t, in dependency order, at position pos (< n). */
static __device__ inline int32_t tri_row_at(int32_t n, bool upper, int64_t pos)
{
    return upper ? (int32_t)(n - 1 - pos) : (int32_t)pos;
}

/* Whether column j is a dependency of row i. */
static __device__ inline bool tri_depends(bool upper, int32_t i, int32_t j)
{
    return upper ? j > i : j < i;
}

__global__ void tri_levels_kernel(int32_t n, bool upper, const int64_t *__restrict__ rp,
                                  const int32_t *__restrict__ col, int32_t *level,
                                  unsigned *ticket, int32_t *max_level)
{
    __shared__ unsigned block;
    if (threadIdx.x == 0) block = atomicAdd(ticket, 1u);
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int64_t pos = (int64_t)block * LEVEL_WARPS + (threadIdx.x >> 5);
    if (pos >= n) return; /* no __syncthreads below */
    const int32_t i = tri_row_at(n, upper, pos);
    int32_t lv = 0;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += 32) {
        const int32_t j = col[p];
        if (!tri_depends(upper, i, j)) continue;
        cuda::atomic_ref<int32_t, cuda::thread_scope_device> flag(level[j]);
        int32_t v;
        while ((v = flag.load(cuda::memory_order_acquire)) == 0) __nanosleep(20);
        lv = max(lv, v);
    }
    for (int o = 16; o > 0; o >>= 1) lv = max(lv, __shfl_xor_sync(FULL_MASK, lv, o));
    if (lane == 0) {
        cuda::atomic_ref<int32_t, cuda::thread_scope_device>(level[i])
            .store(lv + 1, cuda::memory_order_release);
        /* a plain read first: most rows find a level as high already there */
        if (lv + 1 > *(volatile int32_t *)max_level) atomicMax(max_level, lv + 1);
    }
}

/* The same, a thread a row (rows in dependency order within a block too). */
__global__ void tri_levels_thread_kernel(int32_t n, bool upper, const int64_t *__restrict__ rp,
                                         const int32_t *__restrict__ col, int32_t *level,
                                         unsigned *ticket, int32_t *max_level)
{
    __shared__ unsigned block;
    if (threadIdx.x == 0) block = atomicAdd(ticket, 1u);
    __syncthreads();
    const int64_t pos = (int64_t)block * blockDim.x + threadIdx.x;
    if (pos >= n) return; /* no __syncthreads below */
    const int32_t i = tri_row_at(n, upper, pos);
    int32_t lv = 0;
    for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
        const int32_t j = col[p];
        if (!tri_depends(upper, i, j)) continue;
        cuda::atomic_ref<int32_t, cuda::thread_scope_device> flag(level[j]);
        int32_t v;
        while ((v = flag.load(cuda::memory_order_acquire)) == 0) __nanosleep(20);
        lv = max(lv, v);
    }
    cuda::atomic_ref<int32_t, cuda::thread_scope_device>(level[i])
        .store(lv + 1, cuda::memory_order_release);
    if (lv + 1 > *(volatile int32_t *)max_level) atomicMax(max_level, lv + 1);
}

__global__ void tri_iota_kernel(int32_t n, int32_t *__restrict__ out)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (int32_t)i;
}

/* ptr[l] = the first sorted position of level l + 1 (levels 1..L all occur:
 * a row of level l > 1 depends on one of level l - 1); ptr[L] = n. */
__global__ void tri_level_ptr_kernel(int32_t n, const int32_t *__restrict__ sorted_level,
                                     int64_t *__restrict__ ptr)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int32_t l = sorted_level[p];
    if (p == 0 || sorted_level[p - 1] != l) ptr[l - 1] = p;
    if (p == n - 1) ptr[l] = n;
}

static int tri_bits(int32_t v)
{
    int b = 1;
    while (b < 31 && (1 << b) <= v) b++;
    return b;
}

/* Slot p' = slot_ptr[l - 1] + (p - ptr[l - 1]) of the sorted row at position p (level l):
 * each level starts on a fresh warp of the sync-free solve. */
__global__ void tri_slots_kernel(int32_t n, const int32_t *__restrict__ sorted_level,
                                 const int32_t *__restrict__ rows, const int64_t *__restrict__ ptr,
                                 const int64_t *__restrict__ slot_ptr, int32_t *__restrict__ slot_rows)
{
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int32_t l = sorted_level[p];
    slot_rows[slot_ptr[l - 1] + (p - ptr[l - 1])] = rows[p];
}

/* The sync-free solve's schedule (t->slot_rows): the rows by level, each level padded with
 * -1 to a whole number of warps of rows_per_warp rows, so that no warp holds rows of two
 * levels (the rows of one warp never depend on each other: trisolve_syncfree.cu's
 * no-deadlock argument). ptr (device) and sorted_level are tri_sort_levels'. */
static int tri_build_slots(gs_engine *e, gs_dtri *t, const int32_t *sorted_level,
                           const int64_t *ptr)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int64_t per_warp = t->rows_per_warp;
    const size_t ptr_bytes = ((size_t)t->n_levels + 1) * sizeof(int64_t);
    int64_t *slot_ptr = (int64_t *)malloc(ptr_bytes), *d_slot_ptr = NULL;
    int status = GS_OK;
    if (!slot_ptr)
        GS_TRY(gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve: %d slot pointers", (int)t->n_levels));
    slot_ptr[0] = 0;
    for (int32_t l = 0; l < t->n_levels; l++) {
        const int64_t count = t->level_ptr[l + 1] - t->level_ptr[l];
        slot_ptr[l + 1] = slot_ptr[l] + (count + per_warp - 1) / per_warp * per_warp;
    }
    t->n_slots = slot_ptr[t->n_levels];
    GS_TRY(gs_cuda_alloc(e, &t->slot_rows, ((size_t)t->n_slots + 1) * sizeof(int32_t),
                         "trisolve: sync-free schedule"));
    GS_TRY(gs_cuda_alloc(e, &d_slot_ptr, ptr_bytes, "trisolve: slot pointers"));
    GS_TRY(gs_cuda_upload(e, d_slot_ptr, slot_ptr, ptr_bytes));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(t->slot_rows, 0xFF,
                                              ((size_t)t->n_slots + 1) * sizeof(int32_t), s)));
    GS_TRY(CUDA_LAUNCH(&e->err, tri_slots_kernel, gs_dblocks(t->n, 256), 256, 0, s, t->n,
                       sorted_level, (const int32_t *)t->level_rows, ptr,
                       (const int64_t *)d_slot_ptr, t->slot_rows));
cleanup:
    gs_cuda_free(e, d_slot_ptr, ptr_bytes);
    free(slot_ptr);
    return status;
}

/* Sort the rows by level into t->level_rows, the level pointers to the host, and the
 * sync-free schedule. */
static int tri_sort_levels(gs_engine *e, gs_dtri *t)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = t->n;
    int32_t *iota = NULL, *keys = NULL;
    int64_t *ptr = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &iota, (size_t)n * sizeof(int32_t), "trisolve levels: rows"));
    GS_TRY(gs_cuda_alloc(e, &keys, (size_t)n * sizeof(int32_t), "trisolve levels: sorted levels"));
    GS_TRY(gs_cuda_alloc(e, &ptr, ((size_t)t->n_levels + 1) * sizeof(int64_t),
                         "trisolve levels: level pointers"));
    GS_TRY(CUDA_LAUNCH(&e->err, tri_iota_kernel, gs_dblocks(n, 256), 256, 0, s, n, iota));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                  tmp, tmp_bytes, (const int32_t *)t->level, keys,
                                  (const int32_t *)iota, t->level_rows, (int64_t)n, 0,
                                  tri_bits(t->n_levels), s)));
    GS_TRY(gs_cuda_alloc(e, &tmp, tmp_bytes, "trisolve levels: sort buffer"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(
                                  tmp, tmp_bytes, (const int32_t *)t->level, keys,
                                  (const int32_t *)iota, t->level_rows, (int64_t)n, 0,
                                  tri_bits(t->n_levels), s)));
    GS_TRY(CUDA_LAUNCH(&e->err, tri_level_ptr_kernel, gs_dblocks(n, 256), 256, 0, s, n,
                       (const int32_t *)keys, ptr));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(t->level_ptr, ptr,
                                              ((size_t)t->n_levels + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    GS_TRY(tri_build_slots(e, t, keys, ptr));
cleanup:
    gs_cuda_free(e, iota, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, keys, (size_t)n * sizeof(int32_t));
    gs_cuda_free(e, ptr, ((size_t)t->n_levels + 1) * sizeof(int64_t));
    gs_cuda_free(e, tmp, tmp_bytes);
    return status;
}

/* The level kernels' lanes a row: the power of two at or above the mean
 * row length, 1 to 32. */
static int tri_lanes(int32_t n, int64_t nnz)
{
    const double mean = n > 0 ? (double)nnz / n : 1.0;
    int lanes = 1;
    while (lanes < 32 && lanes < mean) lanes *= 2;
    return lanes;
}

/* The sync-free solve's lanes a row: the level kernels' lanes, widened while a warp of
 * 32 / lanes rows is more than the mean level holds, so that padding each level to whole
 * warps adds at most about the rows themselves (a chain of n levels would otherwise take
 * 32 / lanes slots a row). */
static void tri_syncfree_shape(gs_dtri *t)
{
    const double per_level = (double)t->n / t->n_levels;
    int lanes = t->lanes;
    while (lanes < 32 && 32 / lanes > per_level) lanes *= 2;
    t->syncfree_lanes = lanes;
    t->rows_per_warp = 32 / lanes;
}

int gs_dtri_analyse(gs_engine *e, int32_t n, int64_t nnz, const int64_t *rp, const int32_t *col,
                    int upper, gs_dtri *t)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    unsigned *ticket = NULL;
    int32_t *max_level = NULL;
    int status = GS_OK;
    *t = gs_dtri{};
    t->n = n, t->nnz = nnz, t->upper = upper ? 1 : 0, t->rp = rp, t->col = col;
    t->longest_row = -1;
    t->lanes = tri_lanes(n, nnz);
    GS_TRY(gs_cuda_alloc(e, &t->level, ((size_t)n + 1) * sizeof(int32_t), "trisolve: levels"));
    GS_TRY(gs_cuda_alloc(e, &t->level_rows, ((size_t)n + 1) * sizeof(int32_t),
                         "trisolve: rows by level"));
    GS_TRY(gs_cuda_alloc(e, &t->state, GS_DTRI_STATE_WORDS * sizeof(unsigned),
                         "trisolve: ticket, chunks done, blocks left"));
    GS_TRY(gs_cuda_alloc(e, &ticket, 2 * sizeof(unsigned), "trisolve levels: ticket"));
    max_level = (int32_t *)(ticket + 1);
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(t->level, 0, ((size_t)n + 1) * sizeof(int32_t), s)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(t->state, 0, GS_DTRI_STATE_WORDS * sizeof(unsigned), s)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(ticket, 0, 2 * sizeof(unsigned), s)));
    if (n == 0) goto cleanup;
    if ((double)nnz <= (double)LEVEL_THREAD_MEAN * n)
        GS_TRY(CUDA_LAUNCH(&e->err, tri_levels_thread_kernel, gs_dblocks(n, 256), 256, 0, s, n,
                           (bool)t->upper, rp, col, t->level, ticket, max_level));
    else
        GS_TRY(CUDA_LAUNCH(&e->err, tri_levels_kernel, gs_dblocks(n, LEVEL_WARPS),
                           32 * LEVEL_WARPS, 0, s, n, (bool)t->upper, rp, col, t->level, ticket,
                           max_level));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&t->n_levels, max_level, sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s)));
    if (t->n_levels < 1 || t->n_levels > n)
        GS_TRY(gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve levels: %d levels for %d rows",
                            (int)t->n_levels, (int)n));
    t->level_ptr = (int64_t *)malloc(((size_t)t->n_levels + 1) * sizeof(int64_t));
    if (!t->level_ptr)
        GS_TRY(gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve levels: %d level pointers",
                            (int)t->n_levels));
    tri_syncfree_shape(t);
    GS_TRY(tri_sort_levels(e, t));
cleanup:
    gs_cuda_free(e, ticket, 2 * sizeof(unsigned));
    if (status != GS_OK) gs_dtri_free(e, t);
    return status;
}

/* ------------------------------------------------ the same analysis on the host */

/* level[i] for every row in dependency order (lower: rows ascending, upper: descending, so
 * that a row's dependencies come before it), *n_levels the highest, *longest the most
 * dependencies of a row. With budget (gs_dtri_analyse_rows' rule), gives up (returns 0)
 * once the entries read pass GS_DTRI_HOST_ENTRIES_FIXED + GS_DTRI_HOST_ENTRIES_PER_LEVEL x
 * the levels found so far (a row counts one more: its own cost); else returns 1. */
static int tri_host_levels(int32_t n, int upper, const int64_t *h_rp, const int32_t *h_col,
                           int budget, int32_t *level, int32_t *n_levels, int64_t *longest)
{
    int32_t top = 0;
    int64_t read = 0, most = 0;
    for (int64_t pos = 0; pos < n; pos++) {
        const int32_t i = upper ? (int32_t)(n - 1 - pos) : (int32_t)pos;
        int32_t lv = 0;
        int64_t deps = 0;
        for (int64_t p = h_rp[i]; p < h_rp[i + 1]; p++) {
            const int32_t j = h_col[p];
            if (upper ? (j <= i || j >= n) : (j >= i || j < 0)) continue; /* not a dependency */
            deps++;
            if (level[j] > lv) lv = level[j];
        }
        level[i] = lv + 1;
        if (lv + 1 > top) top = lv + 1;
        if (deps > most) most = deps;
        read += h_rp[i + 1] - h_rp[i] + 1;
        if (budget && (double)read > (double)GS_DTRI_HOST_ENTRIES_FIXED +
                                         (double)GS_DTRI_HOST_ENTRIES_PER_LEVEL * top)
            return 0;
    }
    *n_levels = top, *longest = most;
    return 1;
}

/* t->level_ptr from level[0..n) (levels 1..n_levels), and the cursors' start: cur[l] =
 * level_ptr[l], the first place of level l + 1; slot_ptr (n_levels + 1) likewise for the
 * sync-free schedule, each level padded to whole warps of rows_per_warp (tri_build_slots'
 * layout), t->n_slots its length. */
static void tri_host_pointers(gs_dtri *t, const int32_t *level, int64_t *cur, int64_t *slot_ptr)
{
    const int32_t nl = t->n_levels;
    const int64_t per_warp = t->rows_per_warp;
    int64_t *ptr = t->level_ptr;
    for (int32_t l = 0; l <= nl; l++) ptr[l] = 0;
    for (int32_t i = 0; i < t->n; i++) ptr[level[i]]++;    /* ptr[l]: the rows of level l */
    for (int32_t l = 0; l < nl; l++) ptr[l + 1] += ptr[l]; /* ptr[l]: first of level l + 1 */
    slot_ptr[0] = 0;
    for (int32_t l = 0; l < nl; l++) {
        const int64_t count = ptr[l + 1] - ptr[l];
        slot_ptr[l + 1] = slot_ptr[l] + (count + per_warp - 1) / per_warp * per_warp;
        cur[l] = ptr[l];
    }
    t->n_slots = slot_ptr[nl];
}

/* rows[0..n): the rows by level, increasing within a level (what the device's stable sort
 * of the row numbers gives); slots[0..n_slots]: each level's rows from slot_ptr[l], -1 in
 * the padding and the extra last entry (the device fills it with 0xFF bytes). */
static void tri_host_order(const gs_dtri *t, const int32_t *level, int64_t *cur,
                           const int64_t *slot_ptr, int32_t *rows, int32_t *slots)
{
    for (int64_t q = 0; q <= t->n_slots; q++) slots[q] = -1;
    for (int32_t i = 0; i < t->n; i++) {
        const int32_t l = level[i] - 1;
        const int64_t at = cur[l]++;
        rows[at] = i;
        slots[slot_ptr[l] + (at - t->level_ptr[l])] = i;
    }
    rows[t->n] = -1;
}

/* The host's arrays on the device: level (n + 1, the last 0 as the device's memset leaves
 * it), level_rows (n + 1), slot_rows (n_slots + 1), state zeroed. */
static int tri_host_upload(gs_engine *e, gs_dtri *t, const int32_t *level, const int32_t *rows,
                           const int32_t *slots)
{
    const size_t n1 = ((size_t)t->n + 1) * sizeof(int32_t);
    const size_t slot_bytes = ((size_t)t->n_slots + 1) * sizeof(int32_t);
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &t->level, n1, "trisolve: levels"));
    GS_TRY(gs_cuda_alloc(e, &t->level_rows, n1, "trisolve: rows by level"));
    GS_TRY(gs_cuda_alloc(e, &t->state, GS_DTRI_STATE_WORDS * sizeof(unsigned),
                         "trisolve: ticket, chunks done, blocks left"));
    GS_TRY(gs_cuda_alloc(e, &t->slot_rows, slot_bytes, "trisolve: sync-free schedule"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(t->state, 0, GS_DTRI_STATE_WORDS * sizeof(unsigned),
                                              gs_cuda_of(e)->stream)));
    GS_TRY(gs_cuda_upload(e, t->level, level, n1));
    GS_TRY(gs_cuda_upload(e, t->level_rows, rows, n1));
    GS_TRY(gs_cuda_upload(e, t->slot_rows, slots, slot_bytes));
cleanup:
    return status;
}

int gs_dtri_analyse_rows(gs_engine *e, int32_t n, int64_t nnz, const int64_t *rp,
                         const int32_t *col, const gs_csr *H, int upper, gs_dtri *t)
{
    const int force = gs_cuda_debug(e)->tri_analysis;
    int32_t *level = NULL, *rows = NULL, *slots = NULL;
    int64_t *cur = NULL, *slot_ptr = NULL, longest = 0;
    int32_t n_levels = 0;
    int status = GS_OK;
    if (!H || force == GS_DEBUG_PLAN_DEVICE || n == 0)
        return gs_dtri_analyse(e, n, nnz, rp, col, upper, t);
    if (H->n_rows != n || !H->row_ptr || (H->nnz > 0 && !H->col))
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "trisolve levels: the host's rows (%d) "
                            "are not the pattern's (%d)", (int)H->n_rows, (int)n);
    *t = gs_dtri{};
    level = (int32_t *)malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!level)
        return gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve levels: %d levels on the host", (int)n);
    if (!tri_host_levels(n, upper, H->row_ptr, H->col, force != GS_DEBUG_PLAN_HOST, level,
                         &n_levels, &longest)) { /* wide levels: the device's analysis */
        free(level);
        return gs_dtri_analyse(e, n, nnz, rp, col, upper, t);
    }
    level[n] = 0;
    t->n = n, t->nnz = nnz, t->upper = upper ? 1 : 0, t->rp = rp, t->col = col;
    t->n_levels = n_levels, t->on_host = 1, t->longest_row = longest;
    t->lanes = tri_lanes(n, nnz);
    tri_syncfree_shape(t);
    t->level_ptr = (int64_t *)malloc(((size_t)n_levels + 1) * sizeof(int64_t));
    cur = (int64_t *)malloc(((size_t)n_levels + 1) * sizeof(int64_t));
    slot_ptr = (int64_t *)malloc(((size_t)n_levels + 1) * sizeof(int64_t));
    rows = (int32_t *)malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!t->level_ptr || !cur || !slot_ptr || !rows)
        GS_TRY(gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve levels: %d level pointers on the host",
                            (int)n_levels));
    tri_host_pointers(t, level, cur, slot_ptr);
    slots = (int32_t *)malloc(((size_t)t->n_slots + 1) * sizeof(int32_t));
    if (!slots)
        GS_TRY(gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve levels: %lld sync-free slots on the "
                            "host", (long long)t->n_slots));
    tri_host_order(t, level, cur, slot_ptr, rows, slots);
    GS_TRY(tri_host_upload(e, t, level, rows, slots));
cleanup:
    free(level), free(rows), free(slots), free(cur), free(slot_ptr);
    if (status != GS_OK) gs_dtri_free(e, t);
    return status;
}

int gs_dfactor_on_host(gs_engine *e, const gs_dtri *t, int64_t longest_row)
{
    const int force = gs_cuda_debug(e)->factor_scheme;
    if (force) return force == GS_DEBUG_SCHEME_HOST;
    return (double)t->n < (double)GS_DFACTOR_HOST_ROWS_PER_LEVEL * t->n_levels ||
           longest_row > GS_DFACTOR_HOST_LONG_ROW;
}

void gs_dtri_free(gs_engine *e, gs_dtri *t)
{
    if (!t) return;
    gs_cuda_free(e, t->level, ((size_t)t->n + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->level_rows, ((size_t)t->n + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->state, GS_DTRI_STATE_WORDS * sizeof(unsigned));
    gs_cuda_free(e, t->slot_rows, ((size_t)t->n_slots + 1) * sizeof(int32_t));
    gs_cuda_free(e, t->partials, ((size_t)t->n_partials + 1) * sizeof(double));
    gs_cuda_free(e, t->dot_counter, sizeof(unsigned));
    gs_dtri_free_blocks(e, t);
    free(t->level_ptr);
    free(t->level_part);
    *t = gs_dtri{};
}

/* The level kernels' rows a block. */
static int64_t tri_level_rows_per_block(const gs_dtri *t)
{
    return 256 / t->lanes;
}

int gs_dtri_prepare_dot(gs_engine *e, gs_dtri *t)
{
    int status = GS_OK;
    if (t->partials && t->n_partials >= t->n_chunks) return GS_OK;
    gs_cuda_free(e, t->partials, ((size_t)t->n_partials + 1) * sizeof(double));
    gs_cuda_free(e, t->dot_counter, sizeof(unsigned));
    free(t->level_part);
    t->partials = NULL, t->dot_counter = NULL, t->level_part = NULL, t->n_partials = 0;
    t->level_part = (int64_t *)malloc(((size_t)t->n_levels + 1) * sizeof(int64_t));
    if (!t->level_part)
        return gs_error_set(&e->err, GS_ERR_NOMEM, "trisolve: %d level partial pointers",
                            (int)t->n_levels);
    t->level_part[0] = 0;
    for (int32_t l = 0; l < t->n_levels; l++)
        t->level_part[l + 1] = t->level_part[l] +
                               gs_dblocks(t->level_ptr[l + 1] - t->level_ptr[l],
                                          tri_level_rows_per_block(t));
    const int64_t sf = t->n_slots > 0 ? gs_dtri_syncfree_blocks(t) : 0;
    int64_t count = t->level_part[t->n_levels] > sf ? t->level_part[t->n_levels] : sf;
    if (t->n_chunks > count) count = t->n_chunks; /* the block scheme's, where prepared */
    GS_TRY(gs_cuda_alloc(e, &t->dot_counter, sizeof(unsigned), "trisolve: fused dot counter"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(t->dot_counter, 0, sizeof(unsigned),
                                              gs_cuda_of(e)->stream)));
    GS_TRY(gs_cuda_alloc(e, &t->partials, ((size_t)count + 1) * sizeof(double),
                         "trisolve: fused dot partial sums"));
    t->n_partials = count;
cleanup:
    return status;
}

/* ------------------------------------------------------------- the solve */

/* Rows level_rows[first, first + count) of one level, LANES lanes a row:
 * x_i = (s_i b_i - sum_j t_ij x_j) / t_ii (t_ii = 1 when unit).
 * Levels after the first are programmatic dependent launches: the kernel lets the next
 * level's start at once (gs_pdl_start), reads its rows, first entries and s_i b_i while
 * the level before still runs (a chain of three dependent loads off the critical path),
 * and waits for that level (gs_pdl_end: the kernel before it complete, its memory
 * visible) before it reads x. Every thread passes the wait, so a level
 * completes only after the level before it has. The first level is a plain launch: it
 * starts after everything before the solve is complete, so the entries (which a setup
 * may have just written) are final before any level reads them early.
 *
 * Fused dot (dot != NULL): each block sums w_i x_i of its rows by a fixed tree into
 * partials[part0 + blockIdx.x] (part0: the level's first partial); in the last level
 * (counter != NULL) the blocks count themselves done and the last one adds every level's
 * partials, [0, n_parts), in order, writes *dot and resets the counter. The earlier
 * levels' partials are visible there: each level ended before the next passed its wait,
 * so all of them ended before the last level's. Rows, and so partials, are the same each
 * run (the analysis' stable sort): the same bits every run. */
template <int LANES>
__global__ void tri_level_solve_kernel(int64_t first, int64_t count, bool upper,
                                       const int32_t *__restrict__ rows,
                                       const int64_t *__restrict__ rp,
                                       const int32_t *__restrict__ col,
                                       const double *__restrict__ val, bool unit,
                                       const double *__restrict__ s, const double *__restrict__ b,
                                       double *x, const double *__restrict__ w,
                                       double *__restrict__ partials, int64_t part0,
                                       int64_t n_parts, unsigned *counter, double *dot)
{
    gs_pdl_start();
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    const int lane = threadIdx.x % LANES;
    const int32_t i = g < count ? rows[first + g] : -1;
    int64_t p = 0, end = 0;
    int32_t j = -1;
    double v = 0.0, rhs = 0.0, wi = 0.0;
    if (i >= 0) {
        p = rp[i] + lane, end = rp[i + 1];
        if (p < end) j = col[p], v = val[p];
        /* b, s and w are final too: the solve never writes them, and the first level's
         * plain launch started only after everything before the solve was complete */
        if (lane == 0) {
            rhs = (s ? s[i] : 1.0) * b[i];
            if (dot) wi = w[i];
        }
    }
    gs_pdl_end();
    double term = 0.0; /* w_i x_i on the row's first lane */
    /* whole groups of LANES are active or not together, so the shuffles see full groups */
    if (i >= 0) {
        double sum = 0.0, diag = 0.0;
        while (p < end) {
            if (j == i) diag = v;
            else if (tri_depends(upper, i, j)) sum += v * x[j];
            p += LANES;
            if (p < end) j = col[p], v = val[p];
        }
        const unsigned mask = LANES == 32 ? FULL_MASK
                                          : ((1u << LANES) - 1u) << ((threadIdx.x & 31) / LANES * LANES);
        for (int o = LANES / 2; o > 0; o >>= 1) {
            sum += __shfl_down_sync(mask, sum, o, LANES);
            diag += __shfl_down_sync(mask, diag, o, LANES);
        }
        if (lane == 0) {
            const double xi = (rhs - sum) / (unit ? 1.0 : diag);
            x[i] = xi;
            term = wi * xi;
        }
    }
    if (!dot) return; /* uniform: the rest is the whole block's */
    __shared__ double smem[32];
    __shared__ bool is_last;
    const double part = gs_block_sum(term, smem);
    if (threadIdx.x == 0) partials[part0 + blockIdx.x] = part;
    if (!counter) return; /* not the last level */
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    double acc = 0.0;
    for (int64_t k = threadIdx.x; k < n_parts; k += blockDim.x) acc += __ldcg(&partials[k]);
    acc = gs_block_sum(acc, smem);
    if (threadIdx.x == 0) {
        *dot = acc;
        *counter = 0u;
    }
}

template <int LANES>
static int tri_level_launch(gs_engine *e, const gs_dtri *t, int32_t l, const double *val,
                            int unit, const double *s, const double *b, double *x,
                            const gs_dtri_fused *f)
{
    const int64_t first = t->level_ptr[l], count = t->level_ptr[l + 1] - first;
    const int64_t per_block = 256 / LANES;
    const bool last = l == t->n_levels - 1;
    const int64_t part0 = f->dot ? t->level_part[l] : 0;
    const int64_t n_parts = f->dot ? t->level_part[t->n_levels] : 0;
    return CUDA_LAUNCH_PDL(&e->err, first > 0, tri_level_solve_kernel<LANES>, gs_dblocks(count, per_block),
                           256, 0, gs_cuda_of(e)->stream, first, count, (bool)t->upper,
                           (const int32_t *)t->level_rows, t->rp, t->col, val, (bool)unit, s, b, x,
                           f->w, t->partials, part0, n_parts,
                           f->dot && last ? t->dot_counter : (unsigned *)NULL, f->dot);
}

int gs_dtri_solve_levels(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                         const double *s, const double *b, double *x, const gs_dtri_fused *f)
{
    const gs_dtri_fused none = {};
    int status = GS_OK;
    if (!f) f = &none;
    if (f->dot && (!f->w || !t->partials || !t->level_part ||
                   t->n_partials < t->level_part[t->n_levels]))
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "trisolve levels: a fused dot without w or gs_dtri_prepare_dot");
    if (f->dot && t->n_levels == 0) /* no rows: the dot of nothing */
        return CUDA_CALL(&e->err, cudaMemsetAsync(f->dot, 0, sizeof(double), gs_cuda_of(e)->stream));
    for (int32_t l = 0; l < t->n_levels && status == GS_OK; l++) {
        switch (t->lanes) {
        case 1: status = tri_level_launch<1>(e, t, l, val, unit, s, b, x, f); break;
        case 2: status = tri_level_launch<2>(e, t, l, val, unit, s, b, x, f); break;
        case 4: status = tri_level_launch<4>(e, t, l, val, unit, s, b, x, f); break;
        case 8: status = tri_level_launch<8>(e, t, l, val, unit, s, b, x, f); break;
        case 16: status = tri_level_launch<16>(e, t, l, val, unit, s, b, x, f); break;
        default: status = tri_level_launch<32>(e, t, l, val, unit, s, b, x, f); break;
        }
    }
    return status;
}
