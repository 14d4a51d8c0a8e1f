/* long_rows.cu - the long-row rule for matrices laid out as CSR, and what its two answers need:
 * split rows (row splitting, as CSR-Adaptive's CSR-VectorL, Greathouse and Daga, SC 2014) and
 * merge-path tiles (Merrill and Garland, "Merge-based parallel sparse matrix-vector
 * multiplication", SC 2016).
 *
 * Why. Vector-CSR gives a row 2 to 32 lanes of one warp (the mean row
 * length decides how many), so a row of L entries costs a chain of L / lanes
 * dependent load rounds while the device's other warps have long finished:
 * bloweybq's dense row (10,001 entries, lanes 8) made its SpMV ~150 us where
 * its bytes take ~1 us. SELL-32 is no answer (its slice would be 10,001
 * wide: the padding rule already refuses it).
 *
 * Rule, from the row-length statistics read at mat_create (or setup_done
 * for the system matrix): with mean = nnz / n, a row is long where it has at
 * least long_min = max(LONG_ROW_MIN, LONG_ROW_RATIO x mean) entries
 * (GS_SPMV_LONG_MIN replaces it). Only where the layout rule chose CSR and
 * the longest row reaches long_min (nnz and n_cols must allow it, or no
 * statistics are read: most matrices pay nothing):
 *   split (default): inside the vector-CSR kernel (spmv_split.cuh), the
 *     long rows are cut into chunks of LONG_CHUNK entries, a warp a chunk,
 *     and the last warp of a row to finish adds the row's chunk sums (fixed
 *     order) and writes y: a row of L entries costs one round of loads on
 *     ceil(L / 256) warps; the row loop skips them, its lanes from the
 *     short rows' mean;
 *   merge (GS_SPMV_LONG=merge): the merge path over rows + entries, a warp
 *     MERGE_TILE items: every warp the same work whatever the lengths.
 * The two are kept so that both can be measured on the same matrices
 * (scripts/bench/bench_spmv.sh); docs/perf-notebook.md has the prediction.
 * LONG_ROW_MIN = 128: a row that vector-CSR's 32 lanes walk in 4 rounds or
 * fewer is left to it; LONG_ROW_RATIO = 16: rows up to 16x the mean cost
 * their warp at most 16x its neighbours', which the device's other warps
 * hide; beyond, one row's chain outlasts the product. Both results are
 * deterministic: every sum is a fixed tree or a fixed order. */
#include "layout.h"

/* The statistics, one thread a row: stats = {longest row, entries of the
 * long rows, long rows, their chunks of LONG_CHUNK} (integer atomics:
 * exact in any order), one atomic a warp after a warp reduction. */
__global__ void long_rows_stats_kernel(const int64_t *__restrict__ row_ptr, int64_t n,
                                       int64_t long_min, unsigned long long *__restrict__ stats)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t len = i < n ? row_ptr[i + 1] - row_ptr[i] : 0;
    const int is_long = i < n && len >= long_min;
    unsigned long long v[4] = {(unsigned long long)len, is_long ? (unsigned long long)len : 0ull,
                               (unsigned long long)is_long,
                               is_long ? (unsigned long long)((len + LONG_CHUNK - 1) / LONG_CHUNK)
                                       : 0ull};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long m = __shfl_down_sync(0xffffffffu, v[0], o);
        v[0] = m > v[0] ? m : v[0];
#pragma unroll
        for (int q = 1; q < 4; q++) v[q] += __shfl_down_sync(0xffffffffu, v[q], o);
    }
    if ((threadIdx.x & 31) == 0 && v[0]) {
        atomicMax(&stats[0], v[0]);
        if (v[2]) {
            atomicAdd(&stats[1], v[1]);
            atomicAdd(&stats[2], v[2]);
            atomicAdd(&stats[3], v[3]);
        }
    }
}

/* flags[i] = 1 and chunks[i] = ceil(len / LONG_CHUNK) for a long row, else 0. */
__global__ void long_rows_mark_kernel(const int64_t *__restrict__ row_ptr, int64_t n,
                                      int64_t long_min, int64_t *__restrict__ flags,
                                      int64_t *__restrict__ chunks)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t len = row_ptr[i + 1] - row_ptr[i];
    flags[i] = len >= long_min;
    chunks[i] = len >= long_min ? (len + LONG_CHUNK - 1) / LONG_CHUNK : 0;
}

/* Long row k (k = pos[i] - 1, pos the inclusive scan of the flags): its row
 * and where its chunks end (cpos, the inclusive scan of the chunk counts). */
__global__ void long_rows_list_kernel(const int64_t *__restrict__ flags,
                                      const int64_t *__restrict__ pos,
                                      const int64_t *__restrict__ cpos, int64_t n,
                                      int32_t *__restrict__ long_row,
                                      int64_t *__restrict__ chunk_ptr)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !flags[i]) return;
    const int64_t k = pos[i] - 1;
    long_row[k] = (int32_t)i;
    chunk_ptr[k + 1] = cpos[i];
    if (k == 0) chunk_ptr[0] = 0;
}

/* chunk_row[c] = k for the chunks of long row k, a warp a long row. */
__global__ void long_rows_chunk_kernel(const int64_t *__restrict__ chunk_ptr, int64_t n_long,
                                       int32_t *__restrict__ chunk_row)
{
    const int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (k >= n_long) return;
    for (int64_t c = chunk_ptr[k] + (threadIdx.x & 31); c < chunk_ptr[k + 1]; c += 32)
        chunk_row[c] = (int32_t)k;
}

/* Merge path: tile_row[t] = the rows ended before path item t x MERGE_TILE
 * (the diagonal search of Merrill and Garland: rows ends first on ties),
 * t = 0..n_tiles; the last is n. */
__global__ void merge_tiles_kernel(const int64_t *__restrict__ row_ptr, int64_t n, int64_t nnz,
                                   int64_t n_tiles, int32_t *__restrict__ tile_row)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t > n_tiles) return;
    const int64_t d = t * MERGE_TILE < n + nnz ? t * MERGE_TILE : n + nnz;
    int64_t lo = d - nnz > 0 ? d - nnz : 0, hi = d < n ? d : n;
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (row_ptr[mid + 1] <= d - mid - 1) lo = mid + 1;
        else hi = mid;
    }
    tile_row[t] = (int32_t)lo;
}

/* flags[t] = 1 where tile t closes a row begun in an earlier tile: its
 * first row ends in it (tile_row[t] < tile_row[t + 1]) and has entries
 * before the tile's first entry j0 = t MERGE_TILE - tile_row[t]. */
__global__ void merge_fix_mark_kernel(const int64_t *__restrict__ row_ptr,
                                      const int32_t *__restrict__ tile_row, int64_t n_tiles,
                                      int64_t *__restrict__ flags)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tiles) return;
    const int64_t i0 = tile_row[t], j0 = t * MERGE_TILE - i0;
    flags[t] = i0 < tile_row[t + 1] && row_ptr[i0] < j0;
}

__global__ void merge_fix_list_kernel(const int64_t *__restrict__ flags,
                                      const int64_t *__restrict__ pos, int64_t n_tiles,
                                      int32_t *__restrict__ fix_tile)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n_tiles && flags[t]) fix_tile[pos[t] - 1] = (int32_t)t;
}

/* ------------------------------------------------------------------ builds */

/* The split rows' lists (n_long, n_chunks known): long row k is the k-th
 * long row in row order, its chunks after those of rows k' < k. */
static int build_split(gs_engine *e, gs_mat *m)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nl = m->n_long, nc = m->n_chunks;
    int64_t *flags = NULL, *chunks = NULL, *pos = NULL, *cpos = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &m->long_row, nl * sizeof(int32_t), "long rows: rows"));
    GS_TRY(gs_cuda_alloc(e, &m->chunk_ptr, (nl + 1) * sizeof(int64_t), "long rows: chunk pointers"));
    GS_TRY(gs_cuda_alloc(e, &m->chunk_row, nc * sizeof(int32_t), "long rows: chunk rows"));
    GS_TRY(gs_cuda_alloc(e, &m->chunk_sum, nc * sizeof(double), "long rows: chunk sums"));
    GS_TRY(gs_cuda_alloc(e, &m->row_dot, nl * sizeof(double), "long rows: dot terms"));
    GS_TRY(gs_cuda_alloc(e, &m->ticket, nl * sizeof(unsigned int), "long rows: tickets"));
    m->bytes += nl * (sizeof(int32_t) + sizeof(int64_t) + sizeof(double) + sizeof(unsigned int)) +
                sizeof(int64_t) + nc * (sizeof(int32_t) + sizeof(double));
    GS_TRY(gs_cuda_alloc(e, &flags, n * sizeof(int64_t), "long rows: flags"));
    GS_TRY(gs_cuda_alloc(e, &chunks, n * sizeof(int64_t), "long rows: chunk counts"));
    GS_TRY(gs_cuda_alloc(e, &pos, n * sizeof(int64_t), "long rows: positions"));
    GS_TRY(gs_cuda_alloc(e, &cpos, n * sizeof(int64_t), "long rows: chunk positions"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(m->ticket, 0, nl * sizeof(unsigned int), c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, long_rows_mark_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                       (const int64_t *)m->row_ptr, n, m->long_min, flags, chunks));
    GS_TRY(gs_dscan_inclusive(e, flags, pos, n));
    GS_TRY(gs_dscan_inclusive(e, chunks, cpos, n));
    GS_TRY(CUDA_LAUNCH(&e->err, long_rows_list_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                       (const int64_t *)flags, (const int64_t *)pos, (const int64_t *)cpos, n,
                       m->long_row, m->chunk_ptr));
    GS_TRY(CUDA_LAUNCH(&e->err, long_rows_chunk_kernel, blocks_for(nl * 32), GS_CUDA_BLOCK, 0,
                       c->stream, (const int64_t *)m->chunk_ptr, nl, m->chunk_row));
    /* vector-CSR's lanes from the short rows' mean, the ones it still walks */
    {
        const double short_mean = n > nl ? (double)(m->nnz - m->long_nnz) / (double)(n - nl) : 0.0;
        m->lanes = 2;
        while (m->lanes < 32 && (double)m->lanes < short_mean) m->lanes *= 2;
    }
    m->long_mode = LONG_SPLIT;
cleanup: /* stream-ordered frees */
    gs_cuda_free(e, cpos, n * sizeof(int64_t));
    gs_cuda_free(e, pos, n * sizeof(int64_t));
    gs_cuda_free(e, chunks, n * sizeof(int64_t));
    gs_cuda_free(e, flags, n * sizeof(int64_t));
    return status;
}

/* The merge path's tiles, their carries and the fix-up list (one round
 * trip: the fix-ups' count). */
static int build_merge(gs_engine *e, gs_mat *m)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nnz = m->nnz, nt = (n + nnz + MERGE_TILE - 1) / MERGE_TILE;
    int64_t *flags = NULL, *pos = NULL;
    int status = GS_OK;
    if (nt >= INT32_MAX)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED, "cuda merge-path SpMV: %lld tiles",
                            (long long)nt);
    m->n_tiles = nt;
    GS_TRY(gs_cuda_alloc(e, &m->tile_row, (nt + 1) * sizeof(int32_t), "merge path: tile rows"));
    GS_TRY(gs_cuda_alloc(e, &m->open_part, nt * sizeof(double), "merge path: carries"));
    GS_TRY(gs_cuda_alloc(e, &m->close_part, nt * sizeof(double), "merge path: carries"));
    GS_TRY(gs_cuda_alloc(e, &m->aux, sizeof(double), "merge path: dot"));
    m->bytes += (nt + 1) * sizeof(int32_t) + 2 * nt * sizeof(double) + sizeof(double);
    GS_TRY(CUDA_LAUNCH(&e->err, merge_tiles_kernel, blocks_for(nt + 1), GS_CUDA_BLOCK, 0,
                       c->stream, (const int64_t *)m->row_ptr, n, nnz, nt, m->tile_row));
    GS_TRY(gs_cuda_alloc(e, &flags, nt * sizeof(int64_t), "merge path: fix-up flags"));
    GS_TRY(gs_cuda_alloc(e, &pos, nt * sizeof(int64_t), "merge path: fix-up positions"));
    GS_TRY(CUDA_LAUNCH(&e->err, merge_fix_mark_kernel, blocks_for(nt), GS_CUDA_BLOCK, 0, c->stream,
                       (const int64_t *)m->row_ptr, (const int32_t *)m->tile_row, nt, flags));
    GS_TRY(gs_dscan_inclusive(e, flags, pos, nt));
    GS_TRY(gs_dread_int64(e, pos + nt - 1, &m->n_fix));
    GS_TRY(gs_cuda_alloc(e, &m->fix_tile, m->n_fix * sizeof(int32_t), "merge path: fix-up tiles"));
    m->bytes += m->n_fix * sizeof(int32_t);
    GS_TRY(CUDA_LAUNCH(&e->err, merge_fix_list_kernel, blocks_for(nt), GS_CUDA_BLOCK, 0, c->stream,
                       (const int64_t *)flags, (const int64_t *)pos, nt, m->fix_tile));
    m->long_mode = LONG_MERGE;
cleanup:
    gs_cuda_free(e, pos, nt * sizeof(int64_t));
    gs_cuda_free(e, flags, nt * sizeof(int64_t));
    return status;
}

int long_rows_plan(gs_engine *e, gs_mat *m, gs_cuda_layout force, int64_t longest)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_debug *dbg = gs_cuda_debug(e);
    const int64_t n = m->n_rows, nnz = m->nnz;
    unsigned long long *stats = NULL;
    int status = GS_OK;
    int mode = force == GS_CUDA_LAYOUT_CSR_MERGE ? LONG_MERGE : LONG_SPLIT;
    if (force == GS_CUDA_LAYOUT_AUTO) {
        if (dbg->spmv_long == GS_DEBUG_LONG_OFF) return GS_OK;
        if (dbg->spmv_long == GS_DEBUG_LONG_MERGE) mode = LONG_MERGE;
    }
    if (n == 0 || m->format != GS_CUDA_CSR) return GS_OK;
    int64_t t = (int64_t)ceil(LONG_ROW_RATIO * (double)nnz / (double)n);
    if (t < LONG_ROW_MIN) t = LONG_ROW_MIN;
    if (dbg->spmv_long_min > 0) t = (int64_t)dbg->spmv_long_min;
    /* no row reaches it (the padding rule's widest slice is the longest
     * row, where it was read; no row can be longer than nnz or n_cols):
     * nothing to read, nothing to do (forced merge takes any matrix) */
    const int none = t > nnz || t > m->n_cols || (longest >= 0 && longest < t);
    if (none && mode == LONG_SPLIT) return GS_OK;
    m->long_min = t;
    GS_TRY(gs_cuda_alloc(e, &stats, 4 * sizeof(unsigned long long), "long rows: statistics"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(stats, 0, 4 * sizeof(unsigned long long), c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, long_rows_stats_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                       (const int64_t *)m->row_ptr, n, t, stats));
    {
        const void *src[1] = {stats};
        const int words[1] = {4};
        uint64_t got[4] = {0, 0, 0, 0};
        GS_TRY(gs_dread_words(e, 1, src, words, got));
        m->max_row = (int64_t)got[0];
        m->long_nnz = (int64_t)got[1];
        m->n_long = (int64_t)got[2];
        m->n_chunks = mode == LONG_SPLIT ? (int64_t)got[3] : 0;
    }
    if (m->n_long == 0 && force == GS_CUDA_LAYOUT_AUTO) goto cleanup; /* even enough */
    if (mode == LONG_MERGE)
        GS_TRY(build_merge(e, m));
    else if (m->n_long > 0)
        GS_TRY(build_split(e, m));
    memset(m->max_blocks, 0, sizeof m->max_blocks);
cleanup:
    gs_cuda_free(e, stats, 4 * sizeof(unsigned long long));
    return status;
}

void long_rows_free(gs_engine *e, gs_mat *m)
{
    const int64_t nl = m->n_long, nc = m->n_chunks, nt = m->n_tiles;
    gs_cuda_free(e, m->long_row, m->long_row ? nl * sizeof(int32_t) : 0);
    gs_cuda_free(e, m->chunk_ptr, m->chunk_ptr ? (nl + 1) * sizeof(int64_t) : 0);
    gs_cuda_free(e, m->chunk_row, m->chunk_row ? nc * sizeof(int32_t) : 0);
    gs_cuda_free(e, m->chunk_sum, m->chunk_sum ? nc * sizeof(double) : 0);
    gs_cuda_free(e, m->row_dot, m->row_dot ? nl * sizeof(double) : 0);
    gs_cuda_free(e, m->ticket, m->ticket ? nl * sizeof(unsigned int) : 0);
    gs_cuda_free(e, m->tile_row, m->tile_row ? (nt + 1) * sizeof(int32_t) : 0);
    gs_cuda_free(e, m->fix_tile, m->fix_tile ? m->n_fix * sizeof(int32_t) : 0);
    gs_cuda_free(e, m->open_part, m->open_part ? nt * sizeof(double) : 0);
    gs_cuda_free(e, m->close_part, m->close_part ? nt * sizeof(double) : 0);
    gs_cuda_free(e, m->aux, m->aux ? sizeof(double) : 0);
    m->long_row = NULL, m->chunk_ptr = NULL, m->chunk_row = NULL, m->chunk_sum = NULL;
    m->row_dot = NULL, m->ticket = NULL, m->tile_row = NULL, m->fix_tile = NULL;
    m->open_part = NULL, m->close_part = NULL, m->aux = NULL;
    m->long_mode = LONG_NONE;
}

extern "C" gs_cuda_row_stats gs_cuda_mat_row_stats(const gs_mat *A)
{
    gs_cuda_row_stats s = {A->long_min, A->max_row, A->n_long, A->long_nnz};
    return s;
}
