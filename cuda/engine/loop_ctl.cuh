/* loop_ctl.cuh - what the two device loops share (devloop.cu: the CUDA
 * graph's conditional WHILE node; fused.cu: one cooperative kernel): the
 * loop's state in device memory, the check of kr_check_breakdown on the
 * slots, and the device clock mapped onto gs_now(). */
#ifndef GS_LOOP_CTL_CUH
#define GS_LOOP_CTL_CUH

#include <math.h>
#include <string.h>

#include "engine_ops.h"

extern "C" {
#include "loop.h"
#include "timer.h"
}

/* The loop's state in device memory: set by the host before a launch,
 * advanced by the check kernel, read back once the launch is over. */
struct loop_ctl {
    int64_t it, it0, maxit, check_every, per_body, loop_end;
    double tol, bnorm;
    int32_t slot_rr, n_tests, n_moves, stop, failed, yielded;
    int32_t test_kind[GS_LOOP_MAX_TESTS], test_slot[GS_LOOP_MAX_TESTS];
    int32_t move_dst[GS_LOOP_MAX_MOVES], move_src[GS_LOOP_MAX_MOVES];
    int32_t has_deadline, has_yield, wants_time, running; /* running: fused.cu's */
    int64_t deadline_ns, yield_ns; /* %globaltimer values */
    int64_t h_cap, h_len;
    int64_t *h_it, *h_ns;          /* device, h_cap each */
    double *h_rel;
    int64_t last_it;
    double last_rel;
    int64_t checks, checks_seen; /* a body of steps: checks made, and at the last round's tail */
    /* gs_loop.record_every, log_base (-1: no ring), log_cap */
    int32_t record_every, log_base, log_cap, unused;
};

/* A history entry's time when it has none of its own (an iteration taken
 * from the residual log between checks): the host interpolates. */
#define LOOP_NO_TIME INT64_MIN


/* loop_ctl.stop of a body of steps whose round ran no check (devloop.cu's
 * tail): an internal failure, reported, never a verdict. */
#define LOOP_STALLED 100

/* Hand control back to the host this often when it shows progress. */
#define LOOP_YIELD_NS 250000000LL

static __device__ __forceinline__ int64_t loop_globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (int64_t)t;
}

static inline __device__ bool loop_test_passes(int kind, double v)
{
    switch (kind) {
    case GS_LOOP_FINITE: return isfinite(v);
    case GS_LOOP_POSITIVE: return v > 0.0;
    case GS_LOOP_NONZERO: return v != 0.0;
    }
    return true;
}

/* The stopping test of kr_check_breakdown, in its order, at a check; the
 * slots read through slot(i) (the fused kernel hands the values it holds
 * in registers, sparing dependent global loads on its critical path). */
static inline __device__ void loop_record(loop_ctl *c, int64_t it, double rel, int64_t ns)
{
    if (c->h_len < c->h_cap) {
        c->h_it[c->h_len] = it;
        c->h_rel[c->h_len] = rel;
        c->h_ns[c->h_len] = ns;
        c->h_len++;
    }
}

/* The iterations after the last check and before it from the residual log
 * (small.h, GS_SMALL_LOG: S[log_base] entries so far, the newest it's). */
static inline __device__ void loop_record_logged(const double *S, loop_ctl *c, int64_t it)
{
    if (c->log_base < 0 || c->h_cap == 0) return;
    const double count = S[c->log_base];
    for (int64_t j = c->last_it + 1; j < it; j++) {
        const double q = count - 1.0 - (double)(it - j);
        if (it - j >= c->log_cap || q < 0.0) continue;
        const double rr = S[c->log_base + 1 + (int64_t)fmod(q, (double)c->log_cap)];
        loop_record(c, j, sqrt(fabs(rr)) / c->bnorm, LOOP_NO_TIME);
    }
}

template <class Slot>
static inline __device__ int loop_verdict_of(Slot slot, loop_ctl *c, int64_t it)
{
    const double rel = sqrt(fabs(slot(c->slot_rr))) / c->bnorm;
    const int64_t now = c->wants_time ? loop_globaltimer() : 0;
    loop_record(c, it, rel, now);
    c->last_it = it;
    c->last_rel = rel;
    if (!isfinite(rel)) return GS_LOOP_NAN;
    if (rel <= c->tol) return GS_LOOP_CONVERGED;
    for (int i = 0; i < c->n_tests; i++)
        if (!loop_test_passes(c->test_kind[i], slot(c->test_slot[i]))) {
            c->failed = i;
            return GS_LOOP_BREAKDOWN;
        }
    if (it >= c->maxit) return GS_LOOP_MAXIT;
    if (c->has_deadline && now >= c->deadline_ns) return GS_LOOP_TIME_LIMIT;
    return GS_LOOP_RUNNING;
}

struct loop_slots_global {
    const double *S;
    __device__ double operator()(int i) const { return S[i]; }
};

static inline __device__ int loop_verdict(const double *S, loop_ctl *c, int64_t it)
{
    return loop_verdict_of(loop_slots_global{S}, c, it);
}

static __global__ void loop_clock_kernel(int64_t *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) *out = loop_globaltimer();
}

/* The device clock against gs_now(): t_host = host0 + (t_device - dev0) 1e-9,
 * from one round trip (error: half of it, some microseconds). */
typedef struct loop_clock {
    double host0;
    int64_t dev0;
} loop_clock;

/* The device clock against the host's: a warm-up round trip (the first
 * launch of the kernel may load its module), then the midpoint of the
 * shortest of three. */
static inline int loop_clock_calibrate(gs_engine *e, int64_t *scratch, loop_clock *clk)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int64_t dev = 0;
    double best = -1.0;
    int status = GS_OK;
    for (int trip = 0; trip < 4; trip++) {
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        const double t0 = gs_now();
        GS_TRY(CUDA_LAUNCH(&e->err, loop_clock_kernel, 1, 32, 0, c->stream, scratch));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&dev, scratch, sizeof dev,
                                                  cudaMemcpyDeviceToHost, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        const double t1 = gs_now();
        if (trip > 0 && (best < 0.0 || t1 - t0 < best)) {
            best = t1 - t0;
            clk->host0 = 0.5 * (t0 + t1);
            clk->dev0 = dev;
        }
    }
cleanup:
    return status;
}

static inline int64_t loop_clock_device(const loop_clock *clk, double host)
{
    const double ns = (host - clk->host0) * 1e9; /* a year either way is plenty */
    const double cap = 3.2e16;
    return clk->dev0 + (int64_t)(ns > cap ? cap : ns < -cap ? -cap : ns);
}

/* The device's state for L (history arrays excepted). */
static inline void loop_ctl_fill(loop_ctl *h, const gs_loop *L)
{
    memset(h, 0, sizeof *h);
    h->it = h->it0 = L->it0;
    h->maxit = L->maxit;
    h->check_every = L->check_every;
    h->per_body = L->per_body;
    h->loop_end = L->it0 + L->per_body * ((L->maxit - L->it0) / L->per_body);
    h->tol = L->tol;
    h->bnorm = L->bnorm;
    h->slot_rr = L->slot_rr;
    h->n_tests = L->n_tests;
    for (int i = 0; i < L->n_tests; i++) {
        h->test_kind[i] = L->test[i].kind;
        h->test_slot[i] = L->test[i].slot;
    }
    h->n_moves = L->n_moves;
    for (int i = 0; i < L->n_moves; i++) {
        h->move_dst[i] = L->move_dst[i];
        h->move_src[i] = L->move_src[i];
    }
    h->failed = -1;
    h->record_every = L->record_every;
    h->log_base = L->history_cap > 0 && L->log_cap > 0 ? L->log_base : -1;
    h->log_cap = L->log_cap;
    h->last_it = L->it0;
    h->last_rel = NAN;
}

static inline int loop_spec_valid(gs_engine *e, const gs_loop *L)
{
    int bad = L->it0 < 0 || L->maxit <= L->it0 || L->per_body < 1 ||
              L->per_body > L->maxit - L->it0 || L->check_every < 1 ||
              L->check_every % L->per_body != 0 || !(L->bnorm > 0.0) ||
              L->n_tests < 0 || L->n_tests > GS_LOOP_MAX_TESTS || L->n_moves < 0 ||
              L->n_moves > GS_LOOP_MAX_MOVES || L->history_cap < 0 || L->n_steps < 0 ||
              L->n_steps > GS_LOOP_MAX_STEPS ||
              (L->n_steps > 1 && (!L->step || !L->step_its || L->per_body != 1 ||
                                  L->check_every != 1 || L->n_moves != 0));
    for (int i = 0; !bad && L->n_steps > 1 && i < L->n_steps; i++)
        bad = L->step_its[i] != 0 && L->step_its[i] != 1;
    for (int i = 0; !bad && i < L->n_tests; i++)
        bad = gs_cuda_check_slot(e, L->test[i].slot, "loop_run test") != GS_OK;
    for (int i = 0; !bad && i < L->n_moves; i++)
        bad = gs_cuda_check_slot(e, L->move_dst[i], "loop_run move") != GS_OK ||
              gs_cuda_check_slot(e, L->move_src[i], "loop_run move") != GS_OK;
    if (!bad) bad = gs_cuda_check_slot(e, L->slot_rr, "loop_run rr") != GS_OK;
    return bad ? gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda loop_run: bad loop description")
               : GS_OK;
}

/* The device state for L in *h (the engine's loop_ctl allocated once),
 * its history arrays (*hist, loop_release frees them) and the clock. */
static inline int loop_prepare(gs_engine *e, const gs_loop *L, loop_ctl *h, char **hist,
                               loop_clock *clk)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t hist_bytes = (size_t)L->history_cap * (2 * sizeof(int64_t) + sizeof(double));
    int status = GS_OK;
    *hist = NULL;
    if (!c->loop_ctl) GS_TRY(gs_cuda_alloc(e, &c->loop_ctl, sizeof(loop_ctl), "device loop state"));
    loop_ctl_fill(h, L);
    if (L->history_cap > 0) {
        GS_TRY(gs_cuda_alloc(e, hist, hist_bytes, "device loop history"));
        h->h_cap = L->history_cap;
        h->h_it = (int64_t *)*hist;
        h->h_ns = (int64_t *)(*hist + (size_t)L->history_cap * sizeof(int64_t));
        h->h_rel = (double *)(*hist + (size_t)L->history_cap * 2 * sizeof(int64_t));
    }
    h->has_deadline = L->deadline > 0.0;
    h->has_yield = L->progress != NULL;
    h->wants_time = h->has_deadline || L->history_cap > 0;
    if (h->has_deadline || h->has_yield || h->wants_time) {
        /* kept for 10 s (the clocks drift by ppm) unless a deadline needs it now */
        if (!c->clk_valid || h->has_deadline || gs_now() - c->clk_at > 10.0) {
            GS_TRY(loop_clock_calibrate(e, (int64_t *)c->loop_ctl, clk)); /* before h goes up */
            c->clk_host0 = clk->host0;
            c->clk_dev0 = clk->dev0;
            c->clk_valid = 1;
            c->clk_at = gs_now();
        }
        clk->host0 = c->clk_host0;
        clk->dev0 = c->clk_dev0;
        if (h->has_deadline) h->deadline_ns = loop_clock_device(clk, L->deadline);
    }
cleanup:
    return status;
}

static inline void loop_release(gs_engine *e, const gs_loop *L, char *hist)
{
    if (!hist) return;
    /* nothing may still write the history; an error stays in e->err */
    (void)CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    gs_cuda_free(e, hist, (size_t)L->history_cap * (2 * sizeof(int64_t) + sizeof(double)));
}

/* Launch the loop (launch(e, arg): the graph, or the fused kernel) until
 * it stops (several launches where the host shows progress between them),
 * then copy its outcome and history into L. */
static inline int loop_launches(gs_engine *e, int (*launch)(gs_engine *, void *), void *arg,
                                loop_ctl *d_ctl, loop_ctl *h, const loop_clock *clk, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    for (;;) {
        if (h->has_yield) h->yield_ns = loop_clock_device(clk, gs_now()) + LOOP_YIELD_NS;
        /* pageable h: the upload has read it, the download written it, on return */
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_ctl, h, sizeof *h, cudaMemcpyHostToDevice,
                                                  c->stream)));
        GS_TRY(launch(e, arg));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(h, d_ctl, sizeof *h, cudaMemcpyDeviceToHost,
                                                  c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        if (h->stop != GS_LOOP_RUNNING) break;
        if (!h->yielded)
            return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda device loop: ended at "
                                "iteration %lld without a verdict", (long long)h->it);
        if (L->progress) L->progress(L->progress_ctx, (long)h->last_it, h->last_rel);
    }
    if (h->stop == LOOP_STALLED)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda device loop: a round of steps ran "
                            "no check (iteration %lld)", (long long)h->it);
    L->stop = h->stop;
    L->failed_test = h->failed;
    L->last_it = (long)h->last_it;
    L->it_done = (long)h->it;
    L->last_rel = h->last_rel;
    L->history_len = (long)h->h_len;
    if (h->h_len > 0) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(L->history_rel, h->h_rel,
                                                  (size_t)h->h_len * sizeof(double),
                                                  cudaMemcpyDeviceToHost, c->stream)));
        int64_t *buf = (int64_t *)gs_malloc((size_t)h->h_len * sizeof(int64_t),
                                            "device loop history", &e->err);
        if (!buf) return GS_ERR_NOMEM;
        status = CUDA_CALL(&e->err, cudaMemcpyAsync(buf, h->h_it, (size_t)h->h_len * sizeof(int64_t),
                                                    cudaMemcpyDeviceToHost, c->stream));
        for (int64_t i = 0; status == GS_OK && i < h->h_len; i++) L->history_it[i] = (long)buf[i];
        if (status == GS_OK)
            status = CUDA_CALL(&e->err, cudaMemcpyAsync(buf, h->h_ns,
                                                        (size_t)h->h_len * sizeof(int64_t),
                                                        cudaMemcpyDeviceToHost, c->stream));
        for (int64_t i = 0; status == GS_OK && i < h->h_len; i++)
            L->history_time[i] = buf[i] == LOOP_NO_TIME
                                     ? NAN
                                     : clk->host0 + 1e-9 * (double)(buf[i] - clk->dev0);
        free(buf);
    }
cleanup:
    return status;
}

#endif
