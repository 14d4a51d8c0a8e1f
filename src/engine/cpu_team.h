/* cpu_team.h - the CPU engine's threads: how many a kernel's bytes pay for,
 * and one parallel region per solve whose threads wait actively for the next
 * kernel (DESIGN.md, "The CPU side is a fair baseline"; issue 34).
 *
 * A kernel is fn(args, part, parts): part p of parts, where the split must
 * not change the result (rows and fixed element blocks, never a reduction
 * over whatever a thread got), so a solve gives the same numbers, bit for
 * bit, at any thread count. */
#ifndef GS_CPU_TEAM_H
#define GS_CPU_TEAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* A kernel pays for one more thread per GS_CPU_BYTES_PER_THREAD bytes it
 * moves (values, indices, vectors; the byte model of the floor), unless
 * --thread-bytes says otherwise: a thread that waits actively takes a
 * kernel in about 1 us (issue 34: 1138_bus, 8.9 us an iteration on one
 * thread, 17 with two spinning OpenMP threads) and one thread moves 10-30
 * GB/s from L2 or L3, so a second one saves more than it costs above some
 * 40-80 kB; the constant keeps a factor 4 for barriers over more cores.
 * On the 2-core machine of issue 34, with one other job, two threads were
 * 1.2-1.8x faster from 0.75 MB an iteration; with three or four jobs,
 * 1.7-2.0x slower (docs/perf-notebook.md, 2026-11-27): the region's trial
 * (GS_TEAM_TRIAL) decides between the two as the solve runs. */
#define GS_CPU_BYTES_PER_THREAD (256.0 * 1024.0)

/* Elements summed in order into one partial of a dot product; partials are
 * then added in order. Fixed, so a dot does not depend on the threads. */
#define GS_CPU_DOT_BLOCK 1024

/* The threads a kernel of `bytes` pays for: floor(bytes / per_thread),
 * at least 1, at most max_threads (>= 1). A pure function. */
int gs_cpu_threads_for(double bytes, double per_thread, int max_threads);

typedef void (*gs_team_fn)(void *args, int part, int parts);

typedef struct gs_team {
    int max_threads;    /* OMP_NUM_THREADS (omp_get_max_threads) at creation */
    int fixed;          /* > 0: --threads N (capped by max_threads); 0: by work */
    double per_thread;  /* bytes a kernel needs per thread (GS_CPU_BYTES_PER_THREAD) */
    int region_threads; /* threads of the region running now; 0: none */
    int last_region;    /* threads the last region got (OMP_DYNAMIC may give fewer) */
    /* The region's trial (gs_team_prefer_alone): its first GS_TEAM_TRIAL
     * kernels of each arm, the team's (arm 0) and then the master's alone
     * (arm 1, the others asleep), their bytes and seconds; then the faster
     * arm for the rest of the solve. */
    int arm;             /* 0 team, 1 alone, 2 decided */
    int trial_kernels[2], trial_warmup;
    double trial_bytes[2], trial_seconds[2];
    atomic_int alone;    /* 1: kernels run on the master; the others sleep */
    int last_alone;      /* the last region's decision, and its rates (bytes/s): */
    double last_rate[2];
    /* The decision kept for the next regions of the same solve shape (a
     * time-stepped problem's steps, a solve restarted from the true residual):
     * the first kernel's bytes and the threads of the region that decided. A
     * region whose first kernel moves the same bytes with as many threads
     * takes it without a trial (heat3d M21 on 16 cores: a step of ~90 kernels
     * ran 24 of them on one thread, 8x the old engine's ssor-ai time). */
    double first_bytes;
    int cache_valid, cache_threads, cache_alone;
    double cache_bytes;
    /* The region's dispatch. The master writes fn and args, then publishes
     * state = generation << 32 | parts << 16 | next part; every thread,
     * the master too, claims parts by advancing next (a compare-and-swap on
     * the whole word, so a claim never lands in another generation) and
     * counts them in completed. The master waits only for parts claimed
     * and running, never for a thread that is not on a core. */
    gs_team_fn fn;
    void *args;
    atomic_uint_least64_t state;
    atomic_uint completed;
    atomic_int sleepers; /* threads blocked on wake after spinning a while */
    atomic_int stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} gs_team;

void gs_team_init(gs_team *t, int max_threads);
void gs_team_destroy(gs_team *t);

/* The rule measured on the machine while it solves: a region's first
 * GS_TEAM_TRIAL kernels run with its threads, the next GS_TEAM_TRIAL on the
 * master alone (the others blocked, so their waiting costs the master
 * nothing); the rest of the solve takes whichever moved its bytes faster.
 * Where other processes hold the cores, the team's threads lose (on the
 * 2-core machine, busy: 1.5-2x slower; idle: 1.5x faster, the same
 * matrices). By work only: --threads N runs N threads throughout. The
 * results do not change: the parts do not. */
#define GS_TEAM_TRIAL 24
#define GS_TEAM_TRIAL_WARMUP 4 /* the team's first kernels, not counted */
/* 1 when the alone arm moved its bytes at least as fast as the team's (a
 * pure function: the bytes and seconds of each arm's trial kernels). */
int gs_team_prefer_alone(double team_bytes, double team_seconds, double alone_bytes,
                         double alone_seconds);

/* The cap a kernel's parts are chosen under: the region's threads inside
 * one (1 while its trial runs alone or once it chose to), else --threads
 * N, else max_threads. */
int gs_team_cap(const gs_team *t);

/* Run fn over parts = gs_cpu_threads_for(bytes, per_thread, cap) parts (or parts_fixed
 * when > 0, for tests), on the region's waiting threads when one is open,
 * else one OpenMP parallel region (or the caller alone for one part). */
void gs_team_run(gs_team *t, double bytes, gs_team_fn fn, void *args);
void gs_team_run_parts(gs_team *t, int parts, gs_team_fn fn, void *args);

/* solve(ctx) on the caller, with threads - 1 more OpenMP threads waiting
 * actively for the kernels it issues (spinning for a while, then blocked
 * until the next kernel), from the first to the last: one wake-up a solve
 * while kernels follow each other closely. threads <= 1: solve(ctx)
 * alone, no region. Returns what solve returned. */
int gs_team_region(gs_team *t, int threads, int (*solve)(void *ctx), void *ctx);

/* Part p of the blocks [0, n_blocks) split evenly over parts: [*b0, *b1). */
static inline void gs_team_split(int64_t n_blocks, int part, int parts, int64_t *b0, int64_t *b1)
{
    *b0 = n_blocks * part / parts;
    *b1 = n_blocks * (part + 1) / parts;
}

/* The host's memory floor: a STREAM-like triad a = b + s c over n doubles
 * each, with `threads` threads, best of `reps` passes after a first touch.
 * gs_cpu_triad_length: n for a last-level cache of llc_bytes (0 when
 * unknown): the three arrays four times the cache, between 64 and 256 MB
 * in all. gs_cpu_triad_bandwidth: STREAM's count, 24 bytes an element (two
 * reads, one write; the write-allocate read not counted, as the byte model
 * of an iteration counts each access once). Both pure. */
int64_t gs_cpu_triad_length(double llc_bytes);
double gs_cpu_triad_bandwidth(int64_t n, double seconds);
/* Bytes/s, 0 where the arrays could not be allocated. */
double gs_cpu_triad_measure(int threads, int64_t n, int reps);
/* Linux: restart the process's peak resident size (getrusage's ru_maxrss)
 * from what it holds now (/proc/self/clear_refs, 5), so the probe's freed
 * arrays do not count as a run's host peak; the caller keeps the peak from
 * before. Elsewhere, or where refused, nothing. */
void gs_cpu_reset_peak_rss(void);
/* The last-level cache's size in bytes as the system says, 0 if it says nothing. */
double gs_cpu_llc_bytes(void);

#endif
