/* debug.h - the switches that steer library code off its defaults: the paths
 * a user forces on the command line (--loop, --spmv-long, --overlap) and the
 * knobs for tests, sanitizer runs and timings, in one documented structure
 * (no getenv in library code). */
#ifndef GS_DEBUG_H
#define GS_DEBUG_H

#include <stddef.h>

/* A zeroed gs_debug is every default. main fills one from the environment
 * (gs_debug_from_env), lays the command line's choices over it
 * (gs_debug_choose_paths) and hands it to the CUDA engine
 * (gs_engine_cuda_set_debug); tests set the fields directly. The
 * environment variables are for tests and measurements only: users have
 * the options. */
typedef struct gs_debug {
    /* GS_FSAI_POSTFILTER=search: FSAI's postfilter searches Z on every row
     * instead of its bitmap lookups (the same G to the bit; tests, timings) */
    int fsai_postfilter_search;
    /* GS_FSAI_TRANSPOSE_CHUNK=N (N > 0): entries a chunk of the device
     * transpose's sort, so that small matrices take many chunks; 0: default */
    long long fsai_transpose_chunk;
    /* GS_FSAI_PLAN=host|device: FSAI's factorisation plan forced to the host
     * (1) or the device (2); 0: the rule (device for small setups) */
    int fsai_plan;
    /* GS_FSAI_CHUNK_BYTES=N (N > 0): the byte budget of a chunk of FSAI's
     * dense systems, so that small matrices take many; 0: default */
    long long fsai_chunk_bytes;
    /* GS_FSAI_GEMM_MIN=N (N > 0): FSAI's fp64 local systems of at least N
     * rows (and every one too large for shared memory) take the
     * batched-DGEMM path (cuda/precond/fsai_factor_gemm.cu) whatever their
     * count, so that small matrices reach it (tests, timings);
     * GS_FSAI_GEMM_MIN=off (-1): never, the block kernel as before (timings,
     * tests of that kernel in fp64); 0: the rule (fsai_factor.cu,
     * factor_gemm_takes) */
    long long fsai_gemm_min;
    /* GS_CUDA_STEPPED_MIN_BYTES=N: matrices of at least N bytes of CSR
     * entries take the stepped layout (0: every one; the sanitizer runs);
     * only where has_stepped_min_bytes is set, else the engine's 64 MiB */
    /* GS_SPAI_SHARED_CAP=N (N > 0): spai's and gspai-opt's shared-memory
     * kernels give a thread group at most N bytes, so that larger columns
     * take the global-memory kernel; 1: every column global; 0: the device's */
    long long spai_shared_cap;
    /* GS_SPAI_CUSOLVER_WORK=N (N > 0): spai's and gspai-opt's columns of
     * more than N flops (2 n1 n2^2) take the cuSOLVER path, whatever their
     * n2, so that small inputs reach it (tests); 0: the default threshold */
    long long spai_cusolver_work;
    /* --loop device|host, GS_DEVICE_LOOP=on|off: the CUDA engine runs loop_run whatever its
     * rule says (on), or declines it (off), so the Krylov methods check on
     * the host after replayed iteration blocks (tests compare the two,
     * timings); 0: the rule (cuda/engine/devloop.cu: loop_pays) */
    int device_loop;
    /* --loop fused (on), --loop host|device (off), GS_FUSED=on|off|cluster|grid:
     * CG and BiCGSTAB with jacobi, none, a
     * preconditioner of sparse products or of triangular factors take the
     * fused one-kernel path (cuda/engine/fused.cu) wherever it can run
     * (on), or never (off); cluster and grid force it with that kind of
     * launch (fused_sync); 0: the rule (fused_choose) */
    int fused, fused_sync;
    /* GS_FUSED_STAGE=off: the fused kernel reads triangular factors from
     * global memory even where they fit its blocks' shared memory (tests
     * hold both ways to the same results, timings compare them); 0: the
     * rule (staged where they fit) */
    int fused_stage;
    int has_stepped_min_bytes;
    size_t stepped_min_bytes;
    /* --spmv-long off|split|merge, GS_SPMV_LONG=off|split|merge: what the CUDA engine does with rows of
     * very different lengths (cuda/sparse/long_rows.cu): off the layouts
     * before it (vector-CSR walks each row with one warp or less), split
     * (the default: long rows summed in chunks, a warp a chunk), merge (the
     * merge-path kernel for every matrix with long rows); 0: the default */
    int spmv_long;
    /* GS_SPMV_LONG_MIN=N (N > 0): rows of at least N entries are long,
     * instead of the rule's max(128, 16 x mean row length); 0: the rule */
    long long spmv_long_min;
    /* GS_ISAI_EXCESS_ABOVE=N (N > 0): isai's GPU generation solves the
     * columns of M_L, M_U longer than N entries in its sparse excess system
     * instead of the default cut, 4096 (cuda/precond/isai_generate.cu), so
     * that small inputs reach it (tests); 0: the default */
    long long isai_excess_above;
    /* GS_FACTOR_SCHEME=levels|syncfree|host: mic's factorisation and isai's
     * exact ILU(0) in the CUDA setup (cuda/precond/mic*.cu, isai_ilu0.cu)
     * run a launch per level of L (levels), one synchronisation-free launch
     * (syncfree) or the host reference's code on the downloaded values
     * (host) whatever their rule says (tests hold the device schemes to the
     * same bits and the host's to the reference, timings compare them); 0:
     * the rule (rows a level, the longest row of L: gs_factor_rule.h) */
    int factor_scheme;
    /* GS_TRI_ANALYSIS=host|device: the level analyses of mic's and isai's
     * triangles made from the host's rows to the end (GS_DEBUG_PLAN_HOST) or
     * on the device (GS_DEBUG_PLAN_DEVICE) whatever the rule says
     * (cuda/sparse/trisolve_levels.cu, gs_dtri_analyse_rows: tests hold both
     * to the same levels, timings compare them); 0: the rule */
    int tri_analysis;
    /* GS_TRI_BLOCK_ROWS=N (N > 0): the block substitution's chunks hold N
     * rows (cuda/sparse/trisolve_blocks.cu) instead of its rule's, for
     * tests (chunk edges inside small triangles) and benchmarks; 0: the rule */
    int tri_block_rows;
    /* GS_TRI_SUPER_ROWS=N, GS_TRI_BAND_LEVELS=N (N > 0): the block
     * substitution's order, super-chunks of N rows and bands of N levels,
     * instead of its rule's (benchmarks); 0: the rule */
    long long tri_super_rows;
    int tri_band_levels;
    /* GS_SYNCFREE_BLOCKS=off|N: the sync-free substitution launches a block a
     * chunk of its schedule (off: -1) or at most N blocks, each taking chunks
     * until they run out (tests: few blocks, many chunks each), instead of as
     * many blocks as are resident (cuda/sparse/trisolve_syncfree.cu; the same
     * bits either way, timings compare them); 0: the rule */
    int syncfree_blocks;
    /* GS_SYNCFREE_PREFETCH=off: the sync-free substitution loads a chunk's rows
     * after drawing its ticket (GS_DEBUG_FORCE_OFF) instead of drawing the next
     * ticket and loading its rows before the current chunk's waits (the same
     * bits either way); 0: prefetch */
    int syncfree_prefetch;
    /* --overlap on|off, GS_DIST_OVERLAP=1|0: under mpirun, the CUDA
     * transport's halo exchange on its own stream, overlapped with the local
     * product (GS_DEBUG_FORCE_ON), or on the engine's stream (FORCE_OFF);
     * 0: the default, off (cuda/dist/halo_cuda.cu says why) */
    int dist_overlap;
    /* GS_DIST_COMM_TIMING=0: the CUDA transport records no events around
     * its communication (comm_s reads 0; their cost is the difference) */
    int dist_comm_timing_off;
    /* GS_DIST_MERGE=0: under mpirun on the CUDA engine, every dot's sum over
     * the ranks is made at once instead of with the others pending when a
     * slot is read (src/dist/engine_mpi.c; timings compare the two) */
    int dist_merge_off;
    /* GS_DIST_TRANSPORT=ipc|nccl|mpi-staged: under mpirun on the CUDA engine,
     * the transport forced (src/dist/engine_mpi.c; ipc falls back to NCCL
     * where it cannot run); 0: the rule (ipc, else NCCL, where every rank has
     * a GPU of its own, else through page-locked host memory) */
    int dist_transport;
    /* GS_DIST_IPC_FAIL=engine:R|matrix:R: the ipc transport's set-up fails
     * on rank R only, as an allocation would (GS_ERR_NOMEM naming the
     * switch): the engine's state (engine) or a matrix's (matrix) is then
     * missing on that rank alone, so tests reach the error path where the
     * other ranks hold state that rank never had (cuda/dist/halo_ipc.cu);
     * 0: no failure (dist_ipc_fail_rank is R) */
    int dist_ipc_fail;
    int dist_ipc_fail_rank;
    /* GS_DIST_IPC_ROUND=N (0 < N < 256): the ipc transport's sums over the
     * ranks carry at most N slots a kernel instead of 256 (the inbox's
     * row), so that small solves take the path in rounds (tests); 0: 256 */
    int dist_ipc_round;
} gs_debug;

#define GS_DEBUG_PLAN_HOST 1
#define GS_DEBUG_PLAN_DEVICE 2
#define GS_DEBUG_FORCE_ON 1
#define GS_DEBUG_FORCE_OFF 2
#define GS_DEBUG_LONG_OFF 1
#define GS_DEBUG_LONG_SPLIT 2
#define GS_DEBUG_LONG_MERGE 3
#define GS_DEBUG_SYNC_GRID 1
#define GS_DEBUG_SYNC_CLUSTER 2
#define GS_DEBUG_SCHEME_LEVELS 1
#define GS_DEBUG_SCHEME_SYNCFREE 2
#define GS_DEBUG_SCHEME_HOST 3
#define GS_DEBUG_TRANSPORT_NCCL 1
#define GS_DEBUG_TRANSPORT_STAGED 2
#define GS_DEBUG_TRANSPORT_IPC 3
#define GS_DEBUG_IPC_FAIL_ENGINE 1
#define GS_DEBUG_IPC_FAIL_MATRIX 2

/* d from the environment variables above; unset or malformed ones keep
 * the default. For main only: library code reads the structure it is given. */
void gs_debug_from_env(gs_debug *d);

/* The command line's --loop, --spmv-long and --overlap (options.c has
 * checked the names) laid over d: "auto" keeps what d says (the rule, or
 * an environment variable's), any other choice replaces it: --loop host
 * turns the device loop and the fused kernel off, device forces the device
 * loop with the fused kernel off, fused forces the fused kernel (where it
 * declines, the rule picks between the device and the host loop). */
void gs_debug_choose_paths(gs_debug *d, const char *loop, const char *spmv_long,
                           const char *overlap);

#endif
