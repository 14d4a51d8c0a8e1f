/* engine_ops.h - the CUDA engine's operations as the files of cuda/engine/
 * implement them, for the one that builds the table (context.cu). C++ only. */
#ifndef GS_ENGINE_OPS_H
#define GS_ENGINE_OPS_H

#include "engine_cuda.h"

/* The driver calls of virtual memory management, fetched through the
 * runtime (cudaGetDriverEntryPointByVersion) so that the program does not
 * link the driver library itself: a machine without a driver still runs
 * the CPU engine. */
struct gs_cuda_vmm_api {
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*error_string)(CUresult, const char **);
    CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t granule;
};

/* The entry points and the granularity for device dev, in a (the engine's
 * own, freed with it); NULL (the plain builds) if any is missing or
 * refused, or the device does not support virtual memory management. */
const gs_cuda_vmm_api *gs_cuda_vmm_api_load(int dev, gs_cuda_vmm_api *a);

/* The vector kernels' grid caps (vector.cu); the copy-bandwidth probe (bandwidth.cu). */
int gs_cuda_vec_caps(gs_engine *e);
int gs_cuda_measure_copy_bandwidth(gs_engine *e);

static inline int check_len(gs_engine *e, const gs_vec *a, const gs_vec *b, const char *op)
{
    if (a->n == b->n) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda %s: vector lengths differ (%lld, %lld)",
                        op, (long long)a->n, (long long)b->n);
}

static inline int not_capturing(gs_engine *e, const char *op)
{
    if (!gs_cuda_of(e)->capturing) return GS_OK;
    return gs_error_set(&e->err, GS_ERR_INTERNAL,
                        "cuda %s: synchronising call issued while capturing a sequence", op);
}

/* The table's operations (upload.cu, vector.cu, scalars.cu, graphs.cu). */
int cuda_vec_create(gs_engine *e, int64_t n, gs_vec **out);
void cuda_vec_destroy(gs_engine *e, gs_vec *v);
int cuda_vec_upload(gs_engine *e, gs_vec *dst, const double *src);
int cuda_vec_download(gs_engine *e, const gs_vec *src, double *dst);
int cuda_host_pin(gs_engine *e, void *p, size_t bytes);
void cuda_host_unpin(gs_engine *e, void *p);
int cuda_set(gs_engine *e, gs_vec *y, double value);
int cuda_copy(gs_engine *e, const gs_vec *x, gs_vec *y);
int cuda_axpby_dot(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y, const gs_vec *w,
                   int slot);
int cuda_axpy2_dot(gs_engine *e, gs_coef a, const gs_vec *x1, gs_vec *y1, gs_coef b,
                   const gs_vec *x2, gs_vec *y2, int slot);
int cuda_axpby(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y);
int cuda_axpbypcz(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, const gs_vec *y, gs_coef c,
                  gs_vec *z);
int cuda_dot(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot);
int cuda_pointwise_mult_dot(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y, int slot);
int cuda_mdot(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0);
int cuda_maxpy(gs_engine *e, double cst, const gs_vec *const *V, int k, int slot0, gs_vec *w);
int cuda_scalar_set(gs_engine *e, int slot, gs_coef value);
int cuda_scalar_write(gs_engine *e, int slot0, int count, const double *src);
int cuda_scalar_read(gs_engine *e, int slot0, int count, double *dst);
int cuda_small_run(gs_engine *e, const struct gs_small *op);
int cuda_sync(gs_engine *e);
int cuda_capture_begin(gs_engine *e);
int cuda_capture_end(gs_engine *e, void **seq);
int cuda_replay(gs_engine *e, void *seq);
void cuda_seq_destroy(gs_engine *e, void *seq);
int cuda_loop_run(gs_engine *e, int (*body)(void *ctx), void *ctx, struct gs_loop *loop);
int cuda_fused_run(gs_engine *e, const struct gs_fused *f, struct gs_loop *loop);
/* Bytes of the loop's device state (freed with the engine). */
size_t gs_cuda_loop_ctl_bytes(void);

#endif
