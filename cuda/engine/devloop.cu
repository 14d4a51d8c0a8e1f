/* devloop.cu - the iteration loop on the device (engine op loop_run,
 * src/engine/loop.h): one CUDA graph whose conditional WHILE node (CUDA
 * 12.4+) runs the captured iteration body and a one-thread check kernel
 * that tests the slots and clears the condition when the method stops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_ops.h"
#include "loop_ctl.cuh"

size_t gs_cuda_loop_ctl_bytes(void) { return sizeof(loop_ctl); }


/* After each body (per_body iterations): count them, check where due, move
 * slots, and keep the loop going or not; past loop_end (the last whole body
 * before maxit) the host does the rest. One thread: a handful of slots. */
__global__ void loop_check_kernel(double *S, loop_ctl *c, cudaGraphConditionalHandle handle)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const int64_t it = (c->it += c->per_body);
    int stop = GS_LOOP_RUNNING;
    if ((it - c->it0) % c->check_every == 0 || it >= c->maxit) {
        loop_record_logged(S, c, it);
        stop = loop_verdict(S, c, it);
    }
    for (int i = 0; i < c->n_moves; i++) S[c->move_dst[i]] = S[c->move_src[i]];
    if (stop == GS_LOOP_RUNNING && it >= c->loop_end) stop = GS_LOOP_HANDOFF;
    c->stop = stop;
    const bool yield = stop == GS_LOOP_RUNNING && c->has_yield &&
                       loop_globaltimer() >= c->yield_ns;
    c->yielded = yield;
    cudaGraphSetConditional(handle, stop == GS_LOOP_RUNNING && !yield ? 1u : 0u);
}

/* A body of steps (gs_loop.n_steps > 1): after step i, count its
 * iterations and judge (every check of such a body is a verdict); a stop
 * clears the conditions of the IF nodes of the steps after it (a handle
 * belongs to one conditional node: each step has its own, runs[]). */
__global__ void loop_step_check_kernel(double *S, loop_ctl *c,
                                       const cudaGraphConditionalHandle *runs, int i, int n,
                                       int add_it)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const int64_t it = (c->it += add_it);
    const int stop = loop_verdict(S, c, it);
    c->stop = stop;
    c->checks++;
    if (stop != GS_LOOP_RUNNING)
        for (int j = i + 1; j < n; j++) cudaGraphSetConditional(runs[j], 0u);
}

/* After the last step's IF node: go round again with every step's
 * condition set, or end the WHILE (a stop, or a yield to the host). A
 * round in which no check ran ends the loop as stalled (never expected:
 * it keeps a wrong condition from spinning the loop for ever). */
__global__ void loop_tail_kernel(loop_ctl *c, cudaGraphConditionalHandle loop,
                                 const cudaGraphConditionalHandle *runs, int n)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    if (c->stop == GS_LOOP_RUNNING && c->checks == c->checks_seen) c->stop = LOOP_STALLED;
    c->checks_seen = c->checks;
    const bool going = c->stop == GS_LOOP_RUNNING;
    const bool yield = going && c->has_yield && loop_globaltimer() >= c->yield_ns;
    c->yielded = yield;
    cudaGraphSetConditional(loop, going && !yield ? 1u : 0u);
    if (going)
        for (int j = 0; j < n; j++) cudaGraphSetConditional(runs[j], 1u);
}

/* A conditional node of type `type` in graph after the nodes deps[0..n),
 * its body graph in *body. */
static int loop_add_conditional(gs_engine *e, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                size_t n, cudaGraphConditionalHandle handle,
                                cudaGraphConditionalNodeType type, cudaGraphNode_t *node,
                                cudaGraph_t *body)
{
    /* zeroed storage: the struct's union has no default constructor */
    alignas(cudaGraphNodeParams) unsigned char raw[sizeof(cudaGraphNodeParams)] = {};
    cudaGraphNodeParams &p = *reinterpret_cast<cudaGraphNodeParams *>(raw);
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = handle;
    p.conditional.type = type;
    p.conditional.size = 1;
    const int status = CUDA_CALL(&e->err, cudaGraphAddNode(node, graph, deps, NULL, n, &p));
    if (status == GS_OK) *body = p.conditional.phGraph_out[0];
    return status;
}

/* The WHILE node's body for a body of steps: IF(run 0){step 0; check},
 * IF(run 1){step 1; check}, ..., then the tail; the handles in *d_runs
 * (device memory, the caller frees it after the graph). Each step is
 * captured straight into its IF node's body. *capturing says whether a
 * capture is open (for the caller's cleanup). */
static int loop_build_steps(gs_engine *e, cudaGraph_t inner, cudaGraphConditionalHandle loop,
                            const gs_loop *L, void *ctx, loop_ctl *d_ctl,
                            cudaGraphConditionalHandle **d_runs, int *capturing)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int n = L->n_steps;
    const size_t bytes = (size_t)n * sizeof(cudaGraphConditionalHandle);
    cudaGraphConditionalHandle *runs = NULL;
    cudaGraphNode_t prev = NULL;
    int status = GS_OK;
    runs = (cudaGraphConditionalHandle *)gs_malloc(bytes, "device loop handles", &e->err);
    if (!runs) return GS_ERR_NOMEM;
    GS_TRY(gs_cuda_alloc(e, d_runs, bytes, "device loop handles"));
    for (int i = 0; i < n; i++)
        GS_TRY(CUDA_CALL(&e->err, cudaGraphConditionalHandleCreate(&runs[i], inner, 1,
                                                                   cudaGraphCondAssignDefault)));
    /* on the engine's stream, before any capture: ordered after the allocation
     * and before the graph's launch (a pageable copy has read runs on return) */
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(*d_runs, runs, bytes, cudaMemcpyHostToDevice,
                                              c->stream)));
    for (int i = 0; i < n; i++) {
        cudaGraphNode_t node;
        cudaGraph_t body;
        GS_TRY(loop_add_conditional(e, inner, prev ? &prev : NULL, prev ? 1 : 0, runs[i],
                                    cudaGraphCondTypeIf, &node, &body));
        GS_TRY(CUDA_CALL(&e->err, cudaStreamBeginCaptureToGraph(c->stream, body, NULL, NULL, 0,
                                                                cudaStreamCaptureModeThreadLocal)));
        *capturing = c->capturing = 1;
        status = L->step(ctx, i);
        if (status == GS_OK)
            status = CUDA_LAUNCH(&e->err, loop_step_check_kernel, 1, 32, 0, c->stream, c->S, d_ctl,
                                 *d_runs, i, n, L->step_its[i]);
        *capturing = c->capturing = 0;
        cudaGraph_t captured = NULL; /* the IF node's body: owned by the node */
        const int end = CUDA_CALL(&e->err, cudaStreamEndCapture(c->stream, &captured));
        if (status == GS_OK) status = end;
        GS_TRY(status);
        prev = node;
    }
    GS_TRY(CUDA_CALL(&e->err, cudaStreamBeginCaptureToGraph(c->stream, inner, &prev, NULL, 1,
                                                            cudaStreamCaptureModeThreadLocal)));
    *capturing = 1;
    status = CUDA_LAUNCH(&e->err, loop_tail_kernel, 1, 32, 0, c->stream, d_ctl, loop, *d_runs, n);
    *capturing = 0;
    {
        cudaGraph_t captured = NULL;
        const int end = CUDA_CALL(&e->err, cudaStreamEndCapture(c->stream, &captured));
        if (status == GS_OK) status = end;
    }
cleanup:
    free(runs);
    return status;
}

/* The parent graph: one WHILE node whose body is body(ctx) then the check,
 * captured straight into the node's body graph. A body the node cannot
 * hold (a kind of node conditional bodies refuse) fails here: *declined is
 * then set, the engine's error record restored and the capture ended. */
static int loop_build(gs_engine *e, int (*body)(void *), void *ctx, const gs_loop *L,
                      loop_ctl *d_ctl, cudaGraphExec_t *exec,
                      cudaGraphConditionalHandle **d_runs, int *declined, char *why,
                      size_t why_len)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const gs_error saved = e->err;
    cudaGraph_t graph = NULL;
    cudaGraph_t inner = NULL;
    cudaGraphConditionalHandle handle;
    cudaGraphNode_t node;
    int status = GS_OK, capturing = 0;
    *exec = NULL;
    *declined = 0;
    GS_TRY(CUDA_CALL(&e->err, cudaGraphCreate(&graph, 0)));
    GS_TRY(CUDA_CALL(&e->err, cudaGraphConditionalHandleCreate(&handle, graph, 1,
                                                               cudaGraphCondAssignDefault)));
    GS_TRY(loop_add_conditional(e, graph, NULL, 0, handle, cudaGraphCondTypeWhile, &node,
                                &inner));
    if (L->n_steps > 1) {
        status = loop_build_steps(e, inner, handle, L, ctx, d_ctl, d_runs, &capturing);
    } else {
        GS_TRY(CUDA_CALL(&e->err, cudaStreamBeginCaptureToGraph(c->stream, inner, NULL, NULL, 0,
                                                                cudaStreamCaptureModeThreadLocal)));
        capturing = c->capturing = 1;
        status = body(ctx);
        if (status == GS_OK)
            status = CUDA_LAUNCH(&e->err, loop_check_kernel, 1, 32, 0, c->stream, c->S, d_ctl,
                                 handle);
        c->capturing = 0;
        capturing = 0;
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
        /* checked, and ignored: ending a capture that an error invalidated
         * fails too, and the path declines or reports the first error */
        (void)cudaStreamEndCapture(c->stream, &captured);
    }
    if (graph) CUDA_TEARDOWN(&c->teardown, cudaGraphDestroy(graph));
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

/* One launch of the loop's graph (loop_launches). */
static int loop_graph_launch(gs_engine *e, void *exec)
{
    return CUDA_CALL(&e->err, cudaGraphLaunch((cudaGraphExec_t)exec, gs_cuda_of(e)->stream));
}

/* Where the loop on the device beats the host loop over replayed blocks.
 * Measured (docs/perf-notebook.md, issue 24): CG and BiCGSTAB with a check
 * kernel after every iteration lost to the host loop by 10-17% at every
 * size from 512 to 262k rows on an H100, and bodies of 8 iterations won on
 * one card and lost on another: the host loop stays theirs. A body of
 * steps (IDR(s), GMRES(m)) costs a graph of one IF node per step, built
 * once per solve (about 2 ms for GMRES(30)'s 31 steps on an H200, a few
 * hundred us for IDR(4)'s 5): short bodies won on every problem measured
 * (IDR(4) + Jacobi 1.09-1.87x on 512 to 262k rows), GMRES(30) lost below
 * about 100 iterations, so bodies of at most LOOP_SHORT_STEPS steps run on
 * the device. */
#define LOOP_SHORT_STEPS 9
static int loop_pays(gs_engine *e, const gs_loop *L)
{
    (void)e;
    return L->n_steps > 1 && L->n_steps <= LOOP_SHORT_STEPS;
}

int cuda_loop_run(gs_engine *e, int (*body)(void *), void *ctx, gs_loop *L)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    cudaGraphExec_t exec = NULL;
    cudaGraphConditionalHandle *d_runs = NULL; /* a body of steps: its IF nodes' handles */
    loop_ctl h;
    loop_clock clk = {0.0, 0};
    char *hist = NULL;
    int status = not_capturing(e, "loop_run"), declined = 0;
    L->ran = 0;
    L->history_len = 0;
    L->declined[0] = '\0';
    if (status != GS_OK) return status;
    if (c->debug.device_loop == GS_DEBUG_FORCE_OFF) {
        snprintf(L->declined, sizeof L->declined, "host loop forced (--loop host)");
        return GS_OK;
    }
    if (c->debug.device_loop != GS_DEBUG_FORCE_ON && !loop_pays(e, L)) {
        snprintf(L->declined, sizeof L->declined, "host loop: faster here (--loop device "
                 "forces the device loop)");
        return GS_OK;
    }
    if (L->n_steps <= 1 && !body)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda loop_run: no body");
    GS_TRY(loop_spec_valid(e, L));
    GS_TRY(loop_prepare(e, L, &h, &hist, &clk));
    GS_TRY(loop_build(e, body, ctx, L, (loop_ctl *)c->loop_ctl, &exec, &d_runs, &declined,
                      L->declined, sizeof L->declined));
    if (declined) goto cleanup;
    L->ran = 1;
    GS_TRY(loop_launches(e, loop_graph_launch, exec, (loop_ctl *)c->loop_ctl, &h, &clk, L));
cleanup:
    if (exec) CUDA_TEARDOWN(&c->teardown, cudaGraphExecDestroy(exec));
    if (d_runs) { /* the graph may still read it: after the stream's work */
        if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
        else CUDA_TEARDOWN(&c->teardown, cudaStreamSynchronize(c->stream)); /* reported first: status */
        gs_cuda_free(e, d_runs, (size_t)L->n_steps * sizeof(cudaGraphConditionalHandle));
    }
    loop_release(e, L, hist);
    return status;
}
