/* sort_rows.cu - the columns of every row of a device pattern sorted: cub's
 * segmented sort (gs_dsparse.h). */
#include <cub/cub.cuh>

#include "gs_dsparse.h"

int gs_dcsr_sort_rows(gs_engine *e, gs_dcsr *P)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int32_t *sorted = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    int status = GS_OK;
    if (P->nnz == 0) return GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceSegmentedSort::SortKeys(
                                  (void *)NULL, tmp_bytes, (const int32_t *)P->col, sorted,
                                  P->nnz, (int64_t)P->n, (const int64_t *)P->rp,
                                  (const int64_t *)P->rp + 1, c->stream)));
    GS_TRY(gs_cuda_alloc(e, &tmp, tmp_bytes, "row sort: workspace"));
    GS_TRY(gs_cuda_alloc(e, &sorted, (size_t)P->nnz * sizeof(int32_t), "row sort: sorted columns"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceSegmentedSort::SortKeys(
                                  tmp, tmp_bytes, (const int32_t *)P->col, sorted, P->nnz,
                                  (int64_t)P->n, (const int64_t *)P->rp,
                                  (const int64_t *)P->rp + 1, c->stream)));
    gs_cuda_free(e, P->col, (size_t)P->nnz * sizeof(int32_t)); /* stream-ordered */
    P->col = sorted;
    sorted = NULL;
cleanup:
    gs_cuda_free(e, tmp, tmp_bytes);
    gs_cuda_free(e, sorted, (size_t)P->nnz * sizeof(int32_t));
    return status;
}
