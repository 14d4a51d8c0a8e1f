/* engine_common.c - what every engine shares: destruction, error hand-over
 * and the byte count the bandwidth floor uses (DESIGN.md, "Performance"). */
#include "engine.h"

void gs_engine_destroy(gs_engine *e)
{
    if (e) (void)e->ops->destroy(e, NULL);
}

int gs_engine_release(gs_engine *e, gs_error *err)
{
    return e ? e->ops->destroy(e, err) : GS_OK;
}

int gs_engine_fail(gs_engine *e, gs_error *err)
{
    if (e->err.status == GS_OK) return GS_OK;
    if (err && err->status == GS_OK) *err = e->err;
    return e->err.status;
}

double gs_csr_stream_bytes(const gs_csr *A, gs_precision prec)
{
    const double value_bytes = prec == GS_FP32 ? 4.0 : 8.0;
    return (double)A->nnz * (value_bytes + 4.0) + ((double)A->n_rows + 1.0) * 8.0;
}
