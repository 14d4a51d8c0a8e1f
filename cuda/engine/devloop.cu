/* devloop.cu - the iteration loop on the device (engine op loop_run,
 * src/engine/loop.h): one CUDA graph whose conditional WHILE node (CUDA
 * 12.4+) runs the captured iteration body and a one-thread check kernel
 * that tests the slots and clears the condition when the method stops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    int32_t has_deadline, has_yield, wants_time, pad;
    int64_t deadline_ns, yield_ns; /* %globaltimer values */
    int64_t h_cap, h_len;
    int64_t *h_it, *h_ns;          /* device, h_cap each */
    double *h_rel;
    int64_t last_it;
    double last_rel;
};

size_t gs_cuda_loop_ctl_bytes(void) { return sizeof(loop_ctl); }

/* Hand control back to the host this often when it shows progress. */
#define LOOP_YIELD_NS 250000000LL

static __device__ __forceinline__ int64_t loop_globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (int64_t)t;
}

static __device__ bool loop_test_passes(int kind, double v)
{
    switch (kind) {
    case GS_LOOP_FINITE: return isfinite(v);
    case GS_LOOP_POSITIVE: return v > 0.0;
    case GS_LOOP_NONZERO: return v != 0.0;
    }
    return true;
}

/* The stopping test of kr_check_breakdown, in its order, at a check. */
static __device__ int loop_verdict(const double *S, loop_ctl *c, int64_t it)
{
    const double rel = sqrt(fabs(S[c->slot_rr])) / c->bnorm;
    const int64_t now = c->wants_time ? loop_globaltimer() : 0;
    if (c->h_len < c->h_cap) {
        c->h_it[c->h_len] = it;
        c->h_rel[c->h_len] = rel;
        c->h_ns[c->h_len] = now;
        c->h_len++;
    }
    c->last_it = it;
    c->last_rel = rel;
    if (!isfinite(rel)) return GS_LOOP_NAN;
    if (rel <= c->tol) return GS_LOOP_CONVERGED;
    for (int i = 0; i < c->n_tests; i++)
        if (!loop_test_passes(c->test_kind[i], S[c->test_slot[i]])) {
            c->failed = i;
            return GS_LOOP_BREAKDOWN;
        }
    if (it >= c->maxit) return GS_LOOP_MAXIT;
    if (c->has_deadline && now >= c->deadline_ns) return GS_LOOP_TIME_LIMIT;
    return GS_LOOP_RUNNING;
}

/* After each body (per_body iterations): count them, check where due, move
 * slots, and keep the loop going or not; past loop_end (the last whole body
 * before maxit) the host does the rest. One thread: a handful of slots. */
__global__ void loop_check_kernel(double *S, loop_ctl *c, cudaGraphConditionalHandle handle)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const int64_t it = (c->it += c->per_body);
    int stop = GS_LOOP_RUNNING;
    if ((it - c->it0) % c->check_every == 0 || it >= c->maxit) stop = loop_verdict(S, c, it);
    for (int i = 0; i < c->n_moves; i++) S[c->move_dst[i]] = S[c->move_src[i]];
    if (stop == GS_LOOP_RUNNING && it >= c->loop_end) stop = GS_LOOP_HANDOFF;
    c->stop = stop;
    const bool yield = stop == GS_LOOP_RUNNING && c->has_yield &&
                       loop_globaltimer() >= c->yield_ns;
    c->yielded = yield;
    cudaGraphSetConditional(handle, stop == GS_LOOP_RUNNING && !yield ? 1u : 0u);
}

__global__ void loop_clock_kernel(int64_t *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) *out = loop_globaltimer();
}

/* The device clock against gs_now(): t_host = host0 + (t_device - dev0) 1e-9,
 * from one round trip (error: half of it, some microseconds). */
typedef struct loop_clock {
    double host0;
    int64_t dev0;
} loop_clock;

static int loop_clock_calibrate(gs_engine *e, int64_t *scratch, loop_clock *clk)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int64_t dev = 0;
    double t0 = 0.0;
    int status = GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    t0 = gs_now();
    GS_TRY(CUDA_LAUNCH(&e->err, loop_clock_kernel, 1, 32, 0, c->stream, scratch));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&dev, scratch, sizeof dev, cudaMemcpyDeviceToHost,
                                              c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    clk->host0 = 0.5 * (t0 + gs_now());
    clk->dev0 = dev;
cleanup:
    return status;
}

static int64_t loop_clock_device(const loop_clock *clk, double host)
{
    const double ns = (host - clk->host0) * 1e9; /* a year either way is plenty */
    const double cap = 3.2e16;
    return clk->dev0 + (int64_t)(ns > cap ? cap : ns < -cap ? -cap : ns);
}

/* The device's state for L (history arrays excepted). */
static void loop_ctl_fill(loop_ctl *h, const gs_loop *L)
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
    h->last_it = L->it0;
    h->last_rel = NAN;
}

static int loop_spec_valid(gs_engine *e, const gs_loop *L)
{
    int bad = L->it0 < 0 || L->maxit <= L->it0 || L->per_body < 1 ||
              L->per_body > L->maxit - L->it0 || L->check_every < 1 ||
              L->check_every % L->per_body != 0 || !(L->bnorm > 0.0) ||
              L->n_tests < 0 || L->n_tests > GS_LOOP_MAX_TESTS || L->n_moves < 0 ||
              L->n_moves > GS_LOOP_MAX_MOVES || L->history_cap < 0;
    for (int i = 0; !bad && i < L->n_tests; i++)
        bad = gs_cuda_check_slot(e, L->test[i].slot, "loop_run test") != GS_OK;
    for (int i = 0; !bad && i < L->n_moves; i++)
        bad = gs_cuda_check_slot(e, L->move_dst[i], "loop_run move") != GS_OK ||
              gs_cuda_check_slot(e, L->move_src[i], "loop_run move") != GS_OK;
    if (!bad) bad = gs_cuda_check_slot(e, L->slot_rr, "loop_run rr") != GS_OK;
    return bad ? gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda loop_run: bad loop description")
               : GS_OK;
}

/* The parent graph: one WHILE node whose body is body(ctx) then the check,
 * captured straight into the node's body graph. A body the node cannot
 * hold (a kind of node conditional bodies refuse) fails here: *declined is
 * then set, the engine's error record restored and the capture ended. */
static int loop_build(gs_engine *e, int (*body)(void *), void *ctx, loop_ctl *d_ctl,
                      cudaGraphExec_t *exec, int *declined, char *why, size_t why_len)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_error saved = e->err;
    cudaGraph_t graph = NULL;
    cudaGraphConditionalHandle handle;
    cudaGraphNode_t node;
    int status = GS_OK, capturing = 0;
    *exec = NULL;
    *declined = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaGraphCreate(&graph, 0)));
    GS_TRY(CUDA_CALL(&e->err, cudaGraphConditionalHandleCreate(&handle, graph, 1,
                                                               cudaGraphCondAssignDefault)));
    {
        /* zeroed storage: the struct's union has no default constructor */
        alignas(cudaGraphNodeParams) unsigned char raw[sizeof(cudaGraphNodeParams)] = {};
        cudaGraphNodeParams &p = *reinterpret_cast<cudaGraphNodeParams *>(raw);
        p.type = cudaGraphNodeTypeConditional;
        p.conditional.handle = handle;
        p.conditional.type = cudaGraphCondTypeWhile;
        p.conditional.size = 1;
        GS_TRY(CUDA_CALL(&e->err, cudaGraphAddNode(&node, graph, NULL, NULL, 0, &p)));
        cudaGraph_t inner = p.conditional.phGraph_out[0];
        GS_TRY(CUDA_CALL(&e->err, cudaStreamBeginCaptureToGraph(c->stream, inner, NULL, NULL, 0,
                                                                cudaStreamCaptureModeThreadLocal)));
    }
    capturing = c->capturing = 1;
    status = body(ctx);
    if (status == GS_OK)
        status = CUDA_LAUNCH(&e->err, loop_check_kernel, 1, 32, 0, c->stream, c->S, d_ctl, handle);
    c->capturing = 0;
    capturing = 0;
    {
        cudaGraph_t captured = NULL; /* the node's body graph: owned by the node */
        const int end = CUDA_CALL(&e->err, cudaStreamEndCapture(c->stream, &captured));
        if (status == GS_OK) status = end;
    }
    if (status == GS_OK && e->err.status != GS_OK) status = e->err.status;
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGraphInstantiate(exec, graph, 0));
cleanup:
    if (capturing) { /* failed between begin and the body: end the capture */
        cudaGraph_t captured = NULL;
        c->capturing = 0;
        (void)cudaStreamEndCapture(c->stream, &captured);
    }
    if (graph) cudaGraphDestroy(graph);
    if (status != GS_OK) *exec = NULL;
    if (status != GS_OK && status != GS_ERR_NOMEM) { /* the body does not fit the node */
        (void)cudaGetLastError();
        snprintf(why, why_len, "%.*s", (int)why_len - 1, e->err.msg); /* cut to fit */
        e->err = saved;
        *declined = 1;
        status = GS_OK;
    }
    return status;
}

/* Launch the loop until it stops (several launches where the host shows
 * progress between them), then copy its outcome and history into L. */
static int loop_launch(gs_engine *e, cudaGraphExec_t exec, loop_ctl *d_ctl, loop_ctl *h,
                       const loop_clock *clk, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    for (;;) {
        if (h->has_yield) h->yield_ns = loop_clock_device(clk, gs_now()) + LOOP_YIELD_NS;
        /* pageable h: the upload has read it, the download written it, on return */
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_ctl, h, sizeof *h, cudaMemcpyHostToDevice,
                                                  c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaGraphLaunch(exec, c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(h, d_ctl, sizeof *h, cudaMemcpyDeviceToHost,
                                                  c->stream)));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
        if (h->stop != GS_LOOP_RUNNING) break;
        if (!h->yielded)
            return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda loop_run: loop ended at "
                                "iteration %lld without a verdict", (long long)h->it);
        if (L->progress) L->progress(L->progress_ctx, (long)h->last_it, h->last_rel);
    }
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
            L->history_time[i] = clk->host0 + 1e-9 * (double)(buf[i] - clk->dev0);
        free(buf);
    }
cleanup:
    return status;
}

/* Where the loop on the device beats the host loop over replayed blocks.
 * Measured on an H100 (docs/perf-notes.md, issue 24): with a check kernel
 * after every iteration it lost by 10-17% at every size from 512 to 262k
 * rows (the conditional node and the check cost more than the host's
 * reads at adaptive intervals). Bodies of several iterations are not
 * measured yet: until they are, the host loop stays the default. */
static int loop_pays(gs_engine *e, const gs_loop *L)
{
    (void)e;
    (void)L;
    return 0;
}

int cuda_loop_run(gs_engine *e, int (*body)(void *), void *ctx, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaGraphExec_t exec = NULL;
    loop_ctl h;
    loop_clock clk = {0.0, 0};
    const size_t hist_bytes = (size_t)L->history_cap * (2 * sizeof(int64_t) + sizeof(double));
    char *hist = NULL;
    int status = not_capturing(e, "loop_run"), declined = 0;
    L->ran = 0;
    L->history_len = 0;
    L->declined[0] = '\0';
    if (status != GS_OK) return status;
    if (c->debug.device_loop == GS_DEBUG_FORCE_OFF) {
        snprintf(L->declined, sizeof L->declined, "GS_DEVICE_LOOP=off");
        return GS_OK;
    }
    if (c->debug.device_loop != GS_DEBUG_FORCE_ON && !loop_pays(e, L)) {
        snprintf(L->declined, sizeof L->declined, "host loop: faster here (GS_DEVICE_LOOP=on "
                 "forces the device loop)");
        return GS_OK;
    }
    GS_TRY(loop_spec_valid(e, L));
    if (!c->loop_ctl) GS_TRY(gs_cuda_alloc(e, &c->loop_ctl, gs_cuda_loop_ctl_bytes(), "device loop state"));
    loop_ctl_fill(&h, L);
    if (L->history_cap > 0) {
        GS_TRY(gs_cuda_alloc(e, &hist, hist_bytes, "device loop history"));
        h.h_cap = L->history_cap;
        h.h_it = (int64_t *)hist;
        h.h_ns = (int64_t *)(hist + (size_t)L->history_cap * sizeof(int64_t));
        h.h_rel = (double *)(hist + (size_t)L->history_cap * 2 * sizeof(int64_t));
    }
    h.has_deadline = L->deadline > 0.0;
    h.has_yield = L->progress != NULL;
    h.wants_time = h.has_deadline || L->history_cap > 0;
    if (h.has_deadline || h.has_yield || h.wants_time) {
        GS_TRY(loop_clock_calibrate(e, (int64_t *)c->loop_ctl, &clk)); /* before h goes up */
        if (h.has_deadline) h.deadline_ns = loop_clock_device(&clk, L->deadline);
    }
    GS_TRY(loop_build(e, body, ctx, (loop_ctl *)c->loop_ctl, &exec, &declined, L->declined,
                      sizeof L->declined));
    if (declined) goto cleanup;
    L->ran = 1;
    GS_TRY(loop_launch(e, exec, (loop_ctl *)c->loop_ctl, &h, &clk, L));
cleanup:
    if (exec) cudaGraphExecDestroy(exec);
    if (hist) {
        cudaStreamSynchronize(c->stream); /* nothing may still write the history */
        gs_cuda_free(e, hist, hist_bytes);
    }
    return status;
}
