/* scan.cu - prefix sums of int64 counts on the device (gs_dsparse.h): one
 * block for short arrays, cub's decoupled look-back scan (Merrill, Garland 2016) above. */
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "gs_dsparse.h"

#define SCAN_BLOCK 1024

/* One block: thread t sums its run of ceil(count / SCAN_BLOCK) items, a
 * block scan offsets the runs, each thread rewrites its own run (so in ==
 * out is safe: an item is read before it is written, by its thread only). */
__global__ void __launch_bounds__(SCAN_BLOCK)
    scan_small_kernel(const int64_t *in, int64_t *out, int64_t count)
{
    typedef cub::BlockScan<int64_t, SCAN_BLOCK> block_scan;
    __shared__ typename block_scan::TempStorage tmp;
    const int64_t per = (count + SCAN_BLOCK - 1) / SCAN_BLOCK;
    const int64_t b = (int64_t)threadIdx.x * per, end = b + per < count ? b + per : count;
    int64_t sum = 0, before = 0;
    for (int64_t k = b; k < end; k++) sum += in[k];
    block_scan(tmp).ExclusiveSum(sum, before);
    for (int64_t k = b; k < end; k++) {
        before += in[k];
        out[k] = before;
    }
}

int gs_dscan_inclusive(gs_engine *e, const int64_t *in, int64_t *out, int64_t count)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    void *tmp = NULL;
    size_t bytes = 0;
    int status = GS_OK;
    if (count <= 0) return GS_OK;
    if (count <= GS_DSCAN_SMALL)
        return CUDA_LAUNCH(&e->err, scan_small_kernel, 1, SCAN_BLOCK, 0, c->stream, in, out, count);
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::InclusiveSum((void *)NULL, bytes, in, out, count,
                                                            c->stream)));
    GS_TRY(gs_cuda_alloc(e, &tmp, bytes, "scan workspace"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceScan::InclusiveSum(tmp, bytes, in, out, count, c->stream)));
cleanup:
    gs_cuda_free(e, tmp, bytes); /* stream-ordered: after the scan */
    return status;
}

int gs_dscan_exclusive(gs_engine *e, const int64_t *in, int64_t *out, int64_t count)
{
    int status = CUDA_CALL(&e->err, cudaMemsetAsync(out, 0, sizeof(int64_t),
                                                    gs_cuda_of(e)->stream));
    if (status == GS_OK) status = gs_dscan_inclusive(e, in, out + 1, count);
    return status;
}
