/* cpu_team.c - the CPU engine's threads (cpu_team.h): the rule that sizes a
 * kernel, the region whose threads wait actively through a solve, and the
 * STREAM-like triad (McCalpin's STREAM benchmark) that gives the host's floor. */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE, sysconf's cache sizes */
#include "cpu_team.h"

#include <math.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>

#include "timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void spin_pause(void) { _mm_pause(); }
#else
static inline void spin_pause(void) {}
#endif

/* Polls a waiting thread spins (with a pause each) before it blocks: some
 * tens of microseconds, longer than the host work between two kernels of
 * an iteration, short enough that a thread stuck behind other processes on
 * a busy machine soon stops taking a core from them. */
#define SPINS_BEFORE_SLEEP 20000

#define STATE(gen, parts, next) (((uint64_t)(gen) << 32) | ((uint64_t)(parts) << 16) | (next))
#define STATE_GEN(s) ((unsigned)((s) >> 32))
#define STATE_PARTS(s) ((int)(((s) >> 16) & 0xffffu))
#define STATE_NEXT(s) ((int)((s) & 0xffffu))

int gs_cpu_threads_for(double bytes, double per_thread, int max_threads)
{
    if (max_threads < 1) max_threads = 1;
    if (!(bytes > 0.0) || !(per_thread > 0.0)) return 1; /* NaN, 0: one thread */
    const double t = floor(bytes / per_thread);
    if (t <= 1.0) return 1;
    return t >= (double)max_threads ? max_threads : (int)t;
}

void gs_team_init(gs_team *t, int max_threads)
{
    t->max_threads = max_threads < 1 ? 1 : max_threads > 0xffff ? 0xffff : max_threads;
    t->fixed = 0;
    t->per_thread = GS_CPU_BYTES_PER_THREAD;
    t->region_threads = 0;
    t->last_region = 0;
    t->arm = 2;
    atomic_init(&t->alone, 0);
    t->last_alone = 0;
    t->last_rate[0] = t->last_rate[1] = 0.0;
    t->first_bytes = 0.0;
    t->cache_valid = t->cache_threads = t->cache_alone = 0;
    t->cache_bytes = 0.0;
    t->fn = NULL;
    t->args = NULL;
    atomic_init(&t->state, 0u);
    atomic_init(&t->completed, 0u);
    atomic_init(&t->sleepers, 0);
    atomic_init(&t->stop, 0);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->wake, NULL);
}

void gs_team_destroy(gs_team *t)
{
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->wake);
}

int gs_team_cap(const gs_team *t)
{
    if (t->region_threads > 0)
        return atomic_load_explicit(&t->alone, memory_order_relaxed) ? 1 : t->region_threads;
    if (t->fixed > 0) return t->fixed < t->max_threads ? t->fixed : t->max_threads;
    return t->max_threads;
}

int gs_team_prefer_alone(double team_bytes, double team_seconds, double alone_bytes,
                         double alone_seconds)
{
    if (!(alone_seconds > 0.0) || !(alone_bytes > 0.0)) return 0;
    if (!(team_seconds > 0.0) || !(team_bytes > 0.0)) return 1;
    return alone_bytes / alone_seconds >= team_bytes / team_seconds;
}

/* Claim and run parts of generation gen until none is left; how many. */
static int team_work(gs_team *t, unsigned gen)
{
    int ran = 0;
    uint64_t s = atomic_load_explicit(&t->state, memory_order_acquire);
    while (STATE_GEN(s) == gen && STATE_NEXT(s) < STATE_PARTS(s)) {
        if (!atomic_compare_exchange_weak_explicit(&t->state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* s reloaded */
        t->fn(t->args, STATE_NEXT(s), STATE_PARTS(s)); /* fn, args stay until it completes */
        atomic_fetch_add_explicit(&t->completed, 1u, memory_order_release);
        ran++;
        s = atomic_load_explicit(&t->state, memory_order_acquire);
    }
    return ran;
}

static void team_publish(gs_team *t, uint64_t s)
{
    atomic_store(&t->state, s); /* sequentially consistent, as the sleepers' count */
    if (atomic_load(&t->sleepers) > 0) {
        pthread_mutex_lock(&t->lock);
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
    }
}

static void team_dispatch(gs_team *t, int parts, gs_team_fn fn, void *args)
{
    const unsigned gen = STATE_GEN(atomic_load_explicit(&t->state, memory_order_relaxed)) + 1u;
    t->fn = fn;
    t->args = args;
    atomic_store_explicit(&t->completed, 0u, memory_order_relaxed);
    team_publish(t, STATE(gen, parts, 0));
    team_work(t, gen);
    long spins = 0;
    while (atomic_load_explicit(&t->completed, memory_order_acquire) != (unsigned)parts)
        if (++spins > 64) sched_yield(); /* a claimed part is running elsewhere */
        else spin_pause();
}

/* A waiting thread: spin on the generation, help, spin again; block after
 * SPINS_BEFORE_SLEEP polls with nothing new. */
static void team_serve(gs_team *t, unsigned seen)
{
    for (;;) {
        long spins = 0;
        unsigned gen;
        while ((gen = STATE_GEN(atomic_load_explicit(&t->state, memory_order_acquire))) == seen) {
            if (++spins < SPINS_BEFORE_SLEEP && !atomic_load_explicit(&t->alone, memory_order_relaxed)) {
                spin_pause();
                continue;
            }
            pthread_mutex_lock(&t->lock);
            atomic_fetch_add(&t->sleepers, 1);
            while (STATE_GEN(atomic_load(&t->state)) == seen) pthread_cond_wait(&t->wake, &t->lock);
            atomic_fetch_sub(&t->sleepers, 1);
            pthread_mutex_unlock(&t->lock);
            spins = 0;
        }
        seen = gen;
        if (atomic_load_explicit(&t->stop, memory_order_acquire)) return;
        team_work(t, gen);
    }
}

void gs_team_run_parts(gs_team *t, int parts, gs_team_fn fn, void *args)
{
    if (parts <= 1) {
        fn(args, 0, 1);
        return;
    }
    if (t->region_threads > 0) {
        /* only the region's master issues kernels; anyone else (a nested,
         * inactive region) runs every part itself */
        if (omp_get_level() == 1 && omp_get_thread_num() == 0) team_dispatch(t, parts, fn, args);
        else
            for (int p = 0; p < parts; p++) fn(args, p, parts);
        return;
    }
#pragma omp parallel num_threads(parts)
    {
        const int id = omp_get_thread_num(), n = omp_get_num_threads(); /* n may be fewer */
        for (int p = id; p < parts; p += n) fn(args, p, parts);
    }
}

/* The region's trial: the kernel's bytes and seconds to its arm; after
 * GS_TEAM_TRIAL kernels the team's arm gives way to the alone one, and
 * after as many of those the faster stays. */
static void trial_record(gs_team *t, double bytes, double seconds)
{
    if (t->arm == 0 && t->trial_warmup < GS_TEAM_TRIAL_WARMUP) {
        t->trial_warmup++; /* the others may still be waking from the region's start */
        return;
    }
    t->trial_bytes[t->arm] += bytes;
    t->trial_seconds[t->arm] += seconds;
    if (++t->trial_kernels[t->arm] < GS_TEAM_TRIAL) return;
    if (t->arm == 0) {
        t->arm = 1;
        atomic_store(&t->alone, 1);
        return;
    }
    t->arm = 2;
    t->last_alone = gs_team_prefer_alone(t->trial_bytes[0], t->trial_seconds[0],
                                         t->trial_bytes[1], t->trial_seconds[1]);
    for (int a = 0; a < 2; a++)
        t->last_rate[a] = t->trial_seconds[a] > 0.0 ? t->trial_bytes[a] / t->trial_seconds[a] : 0.0;
    atomic_store(&t->alone, t->last_alone);
    t->cache_valid = 1, t->cache_bytes = t->first_bytes;
    t->cache_threads = t->region_threads, t->cache_alone = t->last_alone;
}

/* The region's first kernel: the decision of an earlier region of the same shape (the same
 * first kernel's bytes, as many threads), where there is one, instead of a trial. */
static void trial_begin(gs_team *t, double bytes)
{
    t->first_bytes = bytes;
    if (!t->cache_valid || t->cache_bytes != bytes || t->cache_threads != t->region_threads) return;
    t->arm = 2;
    t->last_alone = t->cache_alone;
    atomic_store(&t->alone, t->cache_alone);
}

void gs_team_run(gs_team *t, double bytes, gs_team_fn fn, void *args)
{
    const int cap = gs_team_cap(t);
    const int parts = t->fixed > 0 ? cap : gs_cpu_threads_for(bytes, t->per_thread, cap);
    if (t->region_threads <= 1 || t->arm == 2 || t->fixed > 0 || omp_get_thread_num() != 0) {
        /* no trial: none running, decided, or --threads N (exactly N) */
        gs_team_run_parts(t, parts, fn, args);
        return;
    }
    if (t->arm == 0 && t->trial_warmup == 0 && t->trial_kernels[0] == 0) {
        trial_begin(t, bytes);
        if (t->arm == 2) {
            gs_team_run_parts(t, t->last_alone ? 1 : parts, fn, args);
            return;
        }
    }
    const double t0 = gs_now();
    gs_team_run_parts(t, parts, fn, args);
    trial_record(t, bytes, gs_now() - t0);
}

int gs_team_region(gs_team *t, int threads, int (*solve)(void *ctx), void *ctx)
{
    if (threads <= 1 || t->region_threads > 0 || omp_in_parallel()) return solve(ctx);
    int status = 0;
    atomic_store(&t->stop, 0);
    const unsigned gen0 = STATE_GEN(atomic_load(&t->state)); /* before any publish */
#pragma omp parallel num_threads(threads)
    {
        if (omp_get_thread_num() == 0) {
            t->region_threads = omp_get_num_threads(); /* read by the master only */
            t->last_region = t->region_threads;
            t->arm = 0;
            t->trial_kernels[0] = t->trial_kernels[1] = t->trial_warmup = 0;
            t->trial_bytes[0] = t->trial_bytes[1] = t->trial_seconds[0] = t->trial_seconds[1] = 0;
            t->last_alone = 0;
            t->last_rate[0] = t->last_rate[1] = 0.0;
            atomic_store(&t->alone, 0);
            status = solve(ctx);
            t->arm = 2;
            atomic_store(&t->alone, 0);
            t->region_threads = 0;
            atomic_store(&t->stop, 1);
            const unsigned gen = STATE_GEN(atomic_load(&t->state)) + 1u;
            team_publish(t, STATE(gen, 0, 0));
        } else {
            team_serve(t, gen0);
        }
    }
    return status;
}

int64_t gs_cpu_triad_length(double llc_bytes)
{
    const double lo = 64.0 * 1024 * 1024, hi = 256.0 * 1024 * 1024;
    double total = 4.0 * (llc_bytes > 0.0 ? llc_bytes : 0.0);
    if (total < lo) total = lo;
    if (total > hi) total = hi;
    return (int64_t)(total / 24.0); /* three arrays of doubles */
}

double gs_cpu_triad_bandwidth(int64_t n, double seconds)
{
    return seconds > 0.0 && n > 0 ? 24.0 * (double)n / seconds : 0.0;
}

/* a = b + s c over this thread's share (the split the touch used, so each
 * thread streams the pages it placed) */
static double triad_pass(double *a, const double *b, const double *c, int64_t n, int threads,
                         int touch)
{
    const double t0 = gs_now();
#pragma omp parallel num_threads(threads)
    {
        const int id = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t lo = n * id / nt, hi = n * (id + 1) / nt;
        if (touch)
            for (int64_t i = lo; i < hi; i++) {
                a[i] = 0.0;
                ((double *)b)[i] = 1.0;
                ((double *)c)[i] = 2.0;
            }
        else
            for (int64_t i = lo; i < hi; i++) a[i] = b[i] + 3.0 * c[i];
    }
    return gs_now() - t0;
}

/* n doubles on 2 MB boundaries, as huge pages where the system gives them
 * (madvise): the first touch of 128 MB then costs milliseconds, not the
 * tenths of a second 4 kB page faults cost in a virtual machine. */
static double *triad_alloc(int64_t n)
{
    void *p = NULL;
    const size_t align = (size_t)2 << 20, bytes = ((size_t)n * sizeof(double) + align - 1) / align * align;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
    return p;
}

double gs_cpu_triad_measure(int threads, int64_t n, int reps)
{
    double *a = triad_alloc(n), *b = triad_alloc(n), *c = triad_alloc(n);
    double best = 0.0;
    volatile double sink = 0.0; /* the stores are read, so none is dropped */
    if (a && b && c && n > 0) {
        triad_pass(a, b, c, n, threads, 1);
        for (int r = 0; r < reps; r++) {
            const double s = triad_pass(a, b, c, n, threads, 0);
            sink += a[(int64_t)r % n];
            if (best == 0.0 || s < best) best = s;
        }
    }
    free(a);
    free(b);
    free(c);
    (void)sink;
    return gs_cpu_triad_bandwidth(n, best);
}

void gs_cpu_reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

double gs_cpu_llc_bytes(void)
{
    /* Linux's sysfs first: sysconf's answer comes from CPUID, which a
     * hypervisor may fill with the host's (320 MB on the 2-core test VM,
     * whose guest sees 32 MB) */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        long v = 0;
        char unit = 0;
        const int got = fscanf(f, "%ld%c", &v, &unit);
        fclose(f);
        if (got >= 1 && v > 0)
            return (double)v * (unit == 'K' ? 1024.0 : unit == 'M' ? 1048576.0 : 1.0);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (s > 0) return (double)s;
#endif
    return 0.0;
}
