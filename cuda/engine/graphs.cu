/* graphs.cu - replayable sequences: the operations issued between capture_begin
 * and capture_end recorded as a CUDA graph and replayed. */
#include "engine_ops.h"

int cuda_capture_begin(gs_engine *e)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    if (c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda capture_begin: already capturing");
    int status = CUDA_CALL(&e->err, cudaStreamBeginCapture(c->stream,
                                                           cudaStreamCaptureModeThreadLocal));
    if (status == GS_OK) c->capturing = 1;
    return status;
}

int cuda_capture_end(gs_engine *e, void **seq)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    *seq = NULL;
    if (!c->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda capture_end: not capturing");
    c->capturing = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int status = CUDA_CALL(&e->err, cudaStreamEndCapture(c->stream, &graph));
    if (status == GS_OK && e->err.status != GS_OK) status = e->err.status; /* an op failed inside */
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaGraphInstantiate(&exec, graph, 0));
    if (graph) CUDA_TEARDOWN(&c->teardown, cudaGraphDestroy(graph));
    if (status == GS_OK) *seq = (void *)exec;
    return status;
}

int cuda_replay(gs_engine *e, void *seq)
{
    if (!seq) return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda replay: NULL sequence");
    return CUDA_CALL(&e->err, cudaGraphLaunch((cudaGraphExec_t)seq, gs_cuda_of(e)->stream));
}

void cuda_seq_destroy(gs_engine *e, void *seq)
{
    if (seq) CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaGraphExecDestroy((cudaGraphExec_t)seq));
}
