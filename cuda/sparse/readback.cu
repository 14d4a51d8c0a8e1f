/* readback.cu - a few device words to the host in one round trip, through
 * the engine's pinned read-back buffer (gs_dsparse.h). */
#include <string.h>

#include "gs_dsparse.h"

int gs_dread_words(gs_engine *e, int runs, const void *const *src, const int *words,
                   uint64_t *out)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    uint64_t *h = gs_cuda_readback(e);
    int status = GS_OK, count = 0;
    for (int r = 0; r < runs; r++) count += words[r];
    if (count > GS_DREAD_WORDS)
        return gs_error_set(&e->err, GS_ERR_INTERNAL,
                            "device read-back of %d words; at most %d in one round trip", count,
                            GS_DREAD_WORDS);
    count = 0;
    for (int r = 0; r < runs; r++) {
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(h + count, src[r], 8 * (size_t)words[r],
                                                  cudaMemcpyDeviceToHost, c->stream)));
        count += words[r];
    }
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    for (int k = 0; k < count; k++) out[k] = h[k];
cleanup:
    return status;
}

int gs_dread_int64(gs_engine *e, const int64_t *d, int64_t *h)
{
    const void *src[1] = {d};
    const int words[1] = {1};
    uint64_t w = 0;
    const int status = gs_dread_words(e, 1, src, words, &w);
    *h = (int64_t)w;
    return status;
}

int gs_dread_park(gs_engine *e, const void *src, int words)
{
    if (words > GS_DREAD_PARKED)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "device read-back: %d words parked, at most %d",
                            words, GS_DREAD_PARKED);
    return CUDA_CALL(&e->err, cudaMemcpyAsync(gs_cuda_readback(e) + GS_DREAD_WORDS, src,
                                              8 * (size_t)words, cudaMemcpyDeviceToHost,
                                              gs_cuda_of(e)->stream));
}

void gs_dread_parked(gs_engine *e, uint64_t *out, int words)
{
    memcpy(out, gs_cuda_readback(e) + GS_DREAD_WORDS, 8 * (size_t)words);
}
