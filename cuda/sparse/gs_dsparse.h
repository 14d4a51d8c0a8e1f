/* gs_dsparse.h - the device sparse toolkit: the tools a GPU setup builds
 * with (CSR, scans, row sorts, transpose, read-backs), on the engine's stream.
 * No preconditioner's types here: FSAI's setup is one user, a second setup
 * needs nothing from FSAI's files. C++ only (nvcc).
 *
 * Every function queues its work on the engine's stream (in stream order,
 * no wait) unless it says it synchronises; failures go to e->err (the
 * status is returned). Device allocations go through gs_cuda_alloc, so the
 * engine's accounting sees them. A CSC is the gs_dcsr of the transpose
 * (gs_dcsr_transpose gives it). */
#ifndef GS_DSPARSE_H
#define GS_DSPARSE_H

#include <cuda/atomic>

#include "engine_cuda.h"

extern "C" {
#include "csr.h"
}

/* ----------------------------------------------------------------- CSR */

/* A CSR matrix or pattern on the device, owned by its user: rp (n + 1
 * int64), col (nnz int32), val (nnz values of vsize bytes, or NULL).
 * Square by construction of its users (n rows, column indices < n). */
typedef struct gs_dcsr {
    int32_t n;
    int64_t nnz;
    int64_t *rp;
    int32_t *col;
    void *val;
    size_t vsize; /* 0: a pattern; 4: float; 8: double */
} gs_dcsr;

/* rp for n rows (zeroed), no entries yet. */
int gs_dcsr_alloc_rows(gs_engine *e, gs_dcsr *m, int32_t n, const char *what);
/* The same, not zeroed, for a counting kernel that writes rp[0] = 0 and
 * every row's count (each memset a host call of 1.5 to 5 us, after which
 * the device waits: the small setups are bound by such calls). */
int gs_dcsr_alloc_rows_counted(gs_engine *e, gs_dcsr *m, int32_t n, const char *what);
/* col (and val when vsize > 0) for nnz entries. */
int gs_dcsr_alloc_entries(gs_engine *e, gs_dcsr *m, int64_t nnz, size_t vsize, const char *what);
void gs_dcsr_free(gs_engine *e, gs_dcsr *m); /* NULL-safe, zeroes m */

/* rp[1..n] holds row counts, rp[0] = 0: make it the row pointer (inclusive
 * scan in place). gs_dcsr_counts_to_row_ptr also returns nnz = rp[n] on the
 * host (synchronises). */
int gs_dcsr_counts_scan(gs_engine *e, int64_t *rp, int32_t n);
int gs_dcsr_counts_to_row_ptr(gs_engine *e, int64_t *rp, int32_t n, int64_t *nnz);

/* The host CSR of m (n x n, values widened to fp64; a pattern gets values
 * 1). Synchronises. out is allocated here (gs_csr_free). */
int gs_dcsr_download(gs_engine *e, const gs_dcsr *m, gs_csr *out);

/* A setup's device CSR of its matrix. gs_dcsr_upload: the host CSR A (fp64
 * values) uploaded; allocations named "WHO: row pointers of A", "WHO: A".
 * gs_dcsr_of_A: the engine's own copy Ae (a loan through
 * gs_cuda_mat_device_csr; *from_engine = 1) when Ae holds this A in fp64,
 * else the upload (*from_engine = 0); dA then aliases view's arrays or owns
 * its own, and gs_dcsr_release_A frees whichever it is. */
int gs_dcsr_upload(gs_engine *e, const gs_csr *A, const char *who, gs_dcsr *d);
int gs_dcsr_of_A(gs_engine *e, const gs_mat *Ae, const gs_csr *A, const char *who, gs_dcsr *dA,
                 gs_cuda_csr_view *view, int *from_engine);
void gs_dcsr_release_A(gs_engine *e, gs_dcsr *dA, gs_cuda_csr_view *view);

/* Sort the columns of every row of P (a pattern: values are not carried),
 * cub's segmented sort into a new column array, the old one freed. */
int gs_dcsr_sort_rows(gs_engine *e, gs_dcsr *P);

/* GT = G^T, each row of GT in increasing column order (G's rows need not
 * be sorted). Column counts and their scan give GT's row pointers
 * (gs_dcsr_transpose_rows: GT->rp final on return, in stream order, so that
 * a caller may plan GT's layout from them before the entries arrive); the
 * entries go over in chunks of chunk row-major positions (0: the default,
 * about 256 MiB of sort buffers), each chunk stably radix-sorted by column
 * and scattered after the entries of earlier chunks
 * (gs_dcsr_transpose_fill). G holds values (float or double; a pattern is
 * refused), at most INT32_MAX entries. */
int gs_dcsr_transpose_rows(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT);
int gs_dcsr_transpose_fill(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int64_t chunk);
int gs_dcsr_transpose(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int64_t chunk);

/* GT = G^T without a sort where G's pattern is symmetric and its rows
 * strictly increasing (checked here, one pass: every (i, j) finds (j, i) by
 * a binary search, whose position gives g_ji): GT has G's row pointers and
 * columns (copied) and G^T's values; *done = 1. Otherwise *done = 0 and GT
 * is left empty (the caller runs gs_dcsr_transpose). G holds values (float
 * or double). Synchronises once (the flag). */
int gs_dcsr_transpose_symmetric(gs_engine *e, const gs_dcsr *G, gs_dcsr *GT, int *done);

/* out = the pattern of (E + |P|)^k when add_identity, of |P|^k otherwise
 * (k >= 1; P's values are ignored), rows sorted, no values (vsize 0): the
 * host's gs_csr_pattern_power on the device. k - 1 symbolic products, each
 * expanded whole before its rows are sorted and deduplicated: device memory
 * about 8 bytes per entry of the expansion (sum over rows i of X of the
 * lengths of the rows it meets). Synchronises for each product's size. */
int gs_dcsr_pattern_power(gs_engine *e, const gs_dcsr *P, int k, int add_identity, gs_dcsr *out);

/* A (square, fp64 values, rows sorted, every diagonal entry stored) split
 * into L = its strict lower part plus a stored unit diagonal and U = its
 * diagonal and upper part (the factors of an in-place ILU(0)); L and U are
 * allocated here. One host round trip (nnz(L)). */
int gs_dcsr_split_lu(gs_engine *e, const gs_dcsr *A, gs_dcsr *L, gs_dcsr *U);


/* ---------------------------------------------------------------- scans */

/* out[i] = in[0] + ... + in[i] for i < count; out may be in. Up to
 * GS_DSCAN_SMALL items: one block, one launch (a setup scans a dozen small
 * arrays, and cub's two kernels, workspace query and workspace cost several
 * microseconds each); above, cub's device-wide scan. */
#define GS_DSCAN_SMALL (1024 * 16)
int gs_dscan_inclusive(gs_engine *e, const int64_t *in, int64_t *out, int64_t count);
/* out[i] = in[0] + ... + in[i-1] for i <= count (out has count + 1
 * entries, out[0] = 0); out must not be in. */
int gs_dscan_exclusive(gs_engine *e, const int64_t *in, int64_t *out, int64_t count);

/* ----------------------------------------------------------- read-backs */

/* Runs of 8-byte words from the device in one host round trip (each copy
 * ~3 us of the device's time and the host's, one synchronisation): run r is
 * words[r] words at src[r] (one allocation), out gets them end to end, at
 * most GS_DREAD_WORDS in all (more: GS_ERR_INTERNAL). Through the engine's
 * pinned read-back buffer (gs_cuda_readback), not its scalar buffer. */
#define GS_DREAD_WORDS (GS_CUDA_READBACK_WORDS - GS_DREAD_PARKED)
int gs_dread_words(gs_engine *e, int runs, const void *const *src, const int *words,
                   uint64_t *out);
int gs_dread_int64(gs_engine *e, const int64_t *d, int64_t *h); /* one word */

/* Words parked for a later round trip: gs_dread_park queues the copy of
 * words (at most GS_DREAD_PARKED) from src into the read-back buffer's
 * parking place, with no wait; once the caller has synchronised the stream
 * for its own reasons, gs_dread_parked copies them out. One parked run at a
 * time; gs_dread_words never touches it. */
#define GS_DREAD_PARKED 8
int gs_dread_park(gs_engine *e, const void *src, int words);
void gs_dread_parked(gs_engine *e, uint64_t *out, int words);

/* ------------------------------------- triangular solves without cuSPARSE */

/* A triangular pattern on the device analysed for substitutions (the
 * wavefronts of the MIC paper's GPUFBS, found for any pattern): row i
 * depends on the rows j of its stored columns below it (lower) or above it
 * (upper); level[i] = 1 + max level[j] (1 for a row with none), found on
 * the device by a sync-free pass (trisolve_levels.cu). rp and col are the
 * caller's (sorted columns; entries on the wrong side of the diagonal are
 * ignored) and must outlive the analysis; values come with each solve, so
 * one analysis serves every factorisation on the pattern. */
#define GS_DTRI_STATE_WORDS 3
typedef struct gs_dtri {
    int32_t n;
    int upper;                /* 0: lower, rows solved upwards; 1: upper, downwards */
    int64_t nnz;
    const int64_t *rp;        /* the caller's, n + 1 */
    const int32_t *col;       /* the caller's, nnz */
    int32_t n_levels;
    int on_host;              /* the levels were found on the host (gs_dtri_analyse_rows) */
    int64_t longest_row;      /* the most dependencies of one row where found on the host;
                                 -1 where the device found the levels (not counted) */
    int32_t *level;           /* device, n: each row's level, from 1 */
    int32_t *level_rows;      /* device, n: rows by level, increasing within one */
    int64_t *level_ptr;       /* host, n_levels + 1: level l is level_rows[ptr[l - 1], ptr[l]) */
    int lanes;                /* lanes a row in the level kernels: 1..32, from the mean row */
    int syncfree_lanes;       /* in the sync-free solve: lanes, or more where the levels are
                                 too narrow to fill warps of 32 / lanes rows */
    int rows_per_warp;        /* 32 / syncfree_lanes */
    int64_t n_slots;          /* the sync-free schedule's length */
    int32_t *slot_rows;       /* device, n_slots: level_rows with each level padded by -1 to
                                 whole warps (no warp holds two levels) */
    unsigned *state;          /* device, GS_DTRI_STATE_WORDS: the sync-free and block schemes'
                                 ticket, chunks done, blocks left (trisolve_common.cuh) */
    /* gs_dtri_prepare_dot's (zero before): the fused dot's per-block partial sums */
    double *partials;         /* device, n_partials */
    int64_t n_partials;       /* blocks of a solve, whichever scheme (the larger count) */
    int64_t *level_part;      /* host, n_levels + 1: the level scheme's first partial a level */
    unsigned *dot_counter;    /* device, 1: the level scheme's blocks done in its last level */
    /* gs_dtri_prepare_blocks' (zero before): the block scheme's schedule and packed factor
     * (trisolve_blocks.cu). Positions p = 0..n-1 are the rows in a topological order (by
     * super-chunks of super_rows rows in dependency order, then bands of band_levels
     * levels) cut into chunks of chunk_rows; each chunk is ordered by level, and its rows
     * of one level form a step. The values are packed in that order. */
    int32_t chunk_rows;       /* W: rows a chunk (a thread block's, x_j of its rows in
                                 shared memory) */
    int64_t super_rows;       /* S */
    int32_t band_levels;      /* H */
    int32_t n_chunks, n_steps;
    int blocks_lanes;         /* K: lanes a row, and the packed slots a row */
    int unit_packed;          /* the unit flag the values were packed with */
    const double *val_packed; /* the caller's values the pack was made from */
    int32_t *blk_row;         /* device, n: the row at each position */
    int32_t *step_ptr;        /* device, n_steps + 1: step s = positions [ptr[s], ptr[s+1]) */
    int32_t *chunk_step;      /* device, n_chunks + 1: chunk c = steps [cs[c], cs[c+1]) */
    int32_t *blk_col;         /* device, n K: the first K dependencies of each position, coded
                                 (trisolve_blocks.cu), GS_DTRI_PAD where fewer */
    double *blk_val;          /* device, n K: their values */
    double *blk_diag;         /* device, n: t_ii (1 where unit) */
    int64_t *ovf_ptr;         /* device, n + 1: dependencies past the first K, positions' */
    int32_t *ovf_col;         /* device, ovf_ptr[n] */
    double *ovf_val;
    int64_t n_ovf;
} gs_dtri;

/* Levels of the triangular pattern (rp, col) of n rows, in t (synchronises:
 * the level pointers come to the host). */
int gs_dtri_analyse(gs_engine *e, int32_t n, int64_t nnz, const int64_t *rp, const int32_t *col,
                    int upper, gs_dtri *t);

/* The same analysis (the same levels, rows by level and sync-free schedule, to the row),
 * found on the host where the rows are there already: H holds the pattern's rows (its
 * entries on t's side of the diagonal are those of rp, col; the others are ignored, so A's
 * rows serve for both of its triangles). One pass over the rows in dependency order,
 * level(i) = 1 + max level(j), O(nnz(H)), then a counting sort by level; the arrays are
 * uploaded (one wait). The device's analysis costs a dependent trip to L2 a level (about
 * 1 us: 20 ms for a 20,000-level chain on an H200), the host's pass about a nanosecond an
 * entry. The rule: the host's pass goes on while the entries it has read stay within
 * GS_DTRI_HOST_ENTRIES_FIXED + GS_DTRI_HOST_ENTRIES_PER_LEVEL x (the levels it has found
 * so far), i.e. while the device's analysis of those levels alone would not have been
 * cheaper (its fixed cost, a launch, a sort and two read-backs, about 50 us; a level
 * about 1 us, against 256 entries of host time, a margin of about 4 in the device's
 * favour); past that the levels are wide (a 3D grid: given up within its first two
 * planes) and gs_dtri_analyse runs instead. So the host's cost is bounded by a constant
 * times the device's, and on thin levels (chains, bloweybq, shell matrices) it is
 * O(nnz) instead of a dependent step a level. H NULL, or the engine's
 * debug.tri_analysis: the device (GS_DEBUG_PLAN_DEVICE), or the host to the end, no rule
 * (GS_DEBUG_PLAN_HOST). t->on_host says which ran; a host analysis also counts
 * t->longest_row. Synchronises. */
#define GS_DTRI_HOST_ENTRIES_FIXED 65536
#define GS_DTRI_HOST_ENTRIES_PER_LEVEL 256
int gs_dtri_analyse_rows(gs_engine *e, int32_t n, int64_t nnz, const int64_t *rp,
                         const int32_t *col, const gs_csr *H, int upper, gs_dtri *t);

/* Whether a factorisation scheduled by the levels of t (ILU(0), MIC(0): a row waits for the
 * rows its L-part names) is latency-bound on the device, so that the host's sequential code
 * is faster: the levels thin (fewer than GS_DFACTOR_HOST_ROWS_PER_LEVEL rows a level on the
 * mean: a dependent trip to L2 or a launch a level against the host's nanoseconds a row), or
 * a row of L longer than GS_DFACTOR_HOST_LONG_ROW (its eliminations one after another on one
 * warp). Measured on an H200 against the 16-core host (docs/perf-notebook.md, issue 32). The
 * engine's debug.factor_scheme forces either way (GS_DEBUG_SCHEME_HOST: host; levels or
 * syncfree: the device). longest_row: the longest row of L's strict lower part (0: not a
 * criterion, where the factorisation spreads a long row over lanes: mic). */
#define GS_DFACTOR_HOST_ROWS_PER_LEVEL 16
#define GS_DFACTOR_HOST_LONG_ROW 4096
int gs_dfactor_on_host(gs_engine *e, const gs_dtri *t, int64_t longest_row);
void gs_dtri_free(gs_engine *e, gs_dtri *t); /* NULL-safe, zeroes t */

typedef enum gs_dtri_scheme {
    GS_DTRI_SYNCFREE = 0, /* x filled with NaN bytes, then one launch: rows in level order,
                             rows_per_warp rows a warp, blocks in ticket order, a row
                             waiting until the x_j it needs are written */
    GS_DTRI_LEVELS = 1,   /* a launch a level, rows of one level in parallel */
    GS_DTRI_BLOCKS = 2    /* x filled as for SYNCFREE, then one launch: a thread block a
                             chunk of chunk_rows consecutive rows, its steps (levels) one
                             after another with a block barrier between, the x_j of its own
                             rows in shared memory, of earlier chunks waited for in x
                             (trisolve_blocks.cu); needs gs_dtri_prepare_blocks */
} gs_dtri_scheme;

/* x = T^-1 (s .* b), T = (rp, col, val) of the analysis; unit: the
 * diagonal taken as 1 (a stored one is skipped); s NULL: no scaling.
 * b and x distinct, n doubles each. In stream order, capturable. */
int gs_dtri_solve(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                  int unit, const double *s, const double *b, double *x);

/* What a solve may do besides x = T^-1 (s .* b), in its own kernels (all zero: nothing):
 * - w, dot: *dot = w . x (dot: device, one double, e.g. a slot of the engine's S; w: n
 *   doubles, distinct from x). Each block's rows are summed by a fixed tree into its
 *   partial (the sync-free blocks' in ticket order, the level blocks' level by level) and
 *   the last block to finish adds the partials in their order: the same bits every run,
 *   whatever order the blocks ran in. Needs gs_dtri_prepare_dot once.
 * - fill (sync-free and blocks only): fill[i] = the unset pattern (NaN bytes) for every
 *   row, each row's own store: the x of a sync-free or block solve that follows (n
 *   doubles, distinct from b, x, w), which is then given x_filled.
 * - x_filled (sync-free and blocks only): x was filled so by the solve before; no fill of
 *   its own. */
typedef struct gs_dtri_fused {
    const double *w;
    double *dot;
    double *fill;
    int x_filled;
} gs_dtri_fused;

/* The partial-sum buffer of the fused dot, for both schemes (idempotent; allocates, so
 * not while capturing). Freed by gs_dtri_free. */
int gs_dtri_prepare_dot(gs_engine *e, gs_dtri *t);
int64_t gs_dtri_syncfree_blocks(const gs_dtri *t); /* the sync-free solve's blocks */
int gs_dtri_solve_fused(gs_engine *e, const gs_dtri *t, gs_dtri_scheme how, const double *val,
                        int unit, const double *s, const double *b, double *x,
                        const gs_dtri_fused *f);
int gs_dtri_solve_syncfree(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                           const double *s, const double *b, double *x, const gs_dtri_fused *f);
int gs_dtri_solve_levels(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                         const double *s, const double *b, double *x, const gs_dtri_fused *f);

/* The block scheme's schedule and packed values (val, unit: those every later solve with
 * GS_DTRI_BLOCKS passes; a solve with other values is refused), chunks of chunk_rows rows
 * (0: the rule's, trisolve_blocks.cu). Allocates and sets a kernel attribute, so not while
 * capturing; call before gs_dtri_prepare_dot (its partials cover the chunks). Idempotent
 * for the same values; freed by gs_dtri_free. */
int gs_dtri_prepare_blocks(gs_engine *e, gs_dtri *t, const double *val, int unit,
                           int32_t chunk_rows);
void gs_dtri_free_blocks(gs_engine *e, gs_dtri *t); /* the block scheme's arrays only */
int gs_dtri_solve_blocks(gs_engine *e, const gs_dtri *t, const double *val, int unit,
                         const double *s, const double *b, double *x, const gs_dtri_fused *f);

/* ------------------------------------------------------ launch helpers */

/* Blocks of per_block threads (or items) covering items items. */
static inline unsigned gs_dblocks(int64_t items, int64_t per_block)
{
    return (unsigned)((items + per_block - 1) / per_block);
}

/* The largest j in [lo, hi) with off[j] <= x (off nondecreasing, off[lo] <=
 * x): the row, or system, that holds position x of a row-pointer-like
 * offset array. */
static __device__ inline int32_t gs_dsearch_last_at_or_below(const int64_t *__restrict__ off,
                                                             int32_t lo, int32_t hi, int64_t x)
{
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Entries of the sorted a[0..len) below key: where key is, or would be. */
static __device__ inline int64_t gs_dlower_bound(const int32_t *a, int64_t len, int32_t key)
{
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The synchronisation-free schemes' wait (trisolve_syncfree.cu, mic_factor.cu,
 * isai_ilu0.cu): the word *w until it differs from unset, by loads of the given order
 * (acquire where the waiter then reads what the writer stored before its release), back
 * to back 8 times, then sleeping doubling from 32 to 256 ns: rows several levels ahead
 * of the front would otherwise keep L2 busy with loads that cannot succeed yet, slowing
 * the front's own; the cap bounds the delay a sleeping row adds once the word is there.
 * Returns the word. */
template <typename W>
static __device__ inline W gs_dwait_while(W *w, W unset, cuda::memory_order order)
{
    cuda::atomic_ref<W, cuda::thread_scope_device> ref(*w);
    W v;
    unsigned sleep = 32;
    for (int tries = 0; (v = ref.load(order)) == unset; tries++)
        if (tries >= 8) {
            __nanosleep(sleep);
            sleep = sleep < 256 ? 2 * sleep : 256;
        }
    return v;
}

#endif
