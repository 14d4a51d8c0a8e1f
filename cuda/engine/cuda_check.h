/* cuda_check.h - check macros for CUDA runtime, cuSPARSE and cuBLAS calls and
 * for kernel launches (STYLE.md rule 5: the call's text, file and line go into
 * the gs_error; every launch is checked, in release builds too).
 *
 * Each macro is an expression that evaluates to a gs_status, so it composes
 * with GS_TRY and the one-cleanup-label pattern:
 *     GS_TRY(CUDA_CALL(err, cudaMemsetAsync(p, 0, bytes, stream)));
 *     GS_TRY(CUDA_LAUNCH(err, axpby_kernel, grid, block, 0, stream, n, x, y));
 * cudaErrorMemoryAllocation maps to GS_ERR_NOMEM, every other failure to
 * GS_ERR_CUDA. Device allocations go through gs_cuda_alloc (engine_cuda.h),
 * which adds what was being allocated and how many bytes. */
#ifndef GS_CUDA_CHECK_H
#define GS_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include <utility>

extern "C" {
#include "error.h"
}

static inline int gs_cuda_status(gs_error *err, cudaError_t rc, const char *call, const char *file,
                                 int line)
{
    if (rc == cudaSuccess) return GS_OK;
    gs_status st = rc == cudaErrorMemoryAllocation ? GS_ERR_NOMEM : GS_ERR_CUDA;
    /* Clear a non-sticky error so that the next launch check does not report
     * it a second time against an innocent kernel. */
    (void)cudaGetLastError();
    return gs_error_set(err, st, "%s:%d: %s failed: %s (%s)", file, line, call,
                        cudaGetErrorString(rc), cudaGetErrorName(rc));
}

static inline int gs_cusparse_status(gs_error *err, cusparseStatus_t rc, const char *call,
                                     const char *file, int line)
{
    if (rc == CUSPARSE_STATUS_SUCCESS) return GS_OK;
    gs_status st = rc == CUSPARSE_STATUS_ALLOC_FAILED ? GS_ERR_NOMEM : GS_ERR_CUDA;
    return gs_error_set(err, st, "%s:%d: %s failed: %s (%s)", file, line, call,
                        cusparseGetErrorString(rc), cusparseGetErrorName(rc));
}

static inline int gs_cublas_status(gs_error *err, cublasStatus_t rc, const char *call,
                                   const char *file, int line)
{
    if (rc == CUBLAS_STATUS_SUCCESS) return GS_OK;
    gs_status st = rc == CUBLAS_STATUS_ALLOC_FAILED ? GS_ERR_NOMEM : GS_ERR_CUDA;
    return gs_error_set(err, st, "%s:%d: %s failed: %s (%s)", file, line, call,
                        cublasGetStatusString(rc), cublasGetStatusName(rc));
}

static inline int gs_cusolver_status(gs_error *err, cusolverStatus_t rc, const char *call,
                                     const char *file, int line)
{
    if (rc == CUSOLVER_STATUS_SUCCESS) return GS_OK;
    gs_status st = rc == CUSOLVER_STATUS_ALLOC_FAILED ? GS_ERR_NOMEM : GS_ERR_CUDA;
    return gs_error_set(err, st, "%s:%d: %s failed: cuSOLVER status %d", file, line, call,
                        (int)rc);
}

#define CUSOLVER_CALL(err, call) gs_cusolver_status((err), (call), #call, __FILE__, __LINE__)

/* Teardown (destroy and free paths, which return nothing): a failure is
 * kept in *t (gs_error_set keeps the first message: the cause; the others
 * follow from it), for gs_engine_release to report (gs_cuda_impl.teardown). */
#define CUDA_TEARDOWN(t, call) ((void)CUDA_CALL((t), (call)))
#define CUSPARSE_TEARDOWN(t, call) ((void)CUSPARSE_CALL((t), (call)))
#define CUBLAS_TEARDOWN(t, call) ((void)CUBLAS_CALL((t), (call)))
#define CUSOLVER_TEARDOWN(t, call) ((void)CUSOLVER_CALL((t), (call)))
#define CUDA_CALL(err, call) gs_cuda_status((err), (call), #call, __FILE__, __LINE__)
#define CUSPARSE_CALL(err, call) gs_cusparse_status((err), (call), #call, __FILE__, __LINE__)
#define CUBLAS_CALL(err, call) gs_cublas_status((err), (call), #call, __FILE__, __LINE__)

/* Launch kernel<<<grid, block, smem, stream>>>(args...) and check
 * cudaGetLastError; an empty grid is skipped (a zero-sized launch is an
 * error in CUDA, and there is nothing to do). A kernel template with several
 * arguments contains a comma: give it a name first (auto k = f<A, B>;). */
template <typename... KernelArgs, typename... Args>
static inline int gs_cuda_launch(gs_error *err, const char *name, const char *file, int line,
                                 void (*kernel)(KernelArgs...), unsigned grid, unsigned block,
                                 size_t smem, cudaStream_t stream, Args &&...args)
{
    if (grid == 0 || block == 0) return GS_OK;
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    return gs_cuda_status(err, cudaGetLastError(), name, file, line);
}

#define CUDA_LAUNCH(err, kernel, grid, block, smem, stream, ...)                                  \
    gs_cuda_launch((err), #kernel "<<<>>>", __FILE__, __LINE__, kernel, (unsigned)(grid),         \
                   (unsigned)(block), (size_t)(smem), (stream), __VA_ARGS__)

/* The same, as a programmatic dependent launch where programmatic is
 * nonzero (else a plain one): the kernel may start while the stream's
 * previous kernel still runs (once all that kernel's blocks have started),
 * for work that does not read that kernel's results. Such kernels call
 * gs_pdl_start() first and gs_pdl_end() last, on every path: the first lets
 * the next one start, the second makes the kernel end only after the one
 * before it has ended with its memory visible, so the stream's order of
 * completions is kept for everything after them (both are no-ops in a
 * plain launch). */
template <typename... KernelArgs, typename... Args>
static inline int gs_cuda_launch_pdl(gs_error *err, const char *name, const char *file, int line,
                                     int programmatic, void (*kernel)(KernelArgs...),
                                     unsigned grid, unsigned block, size_t smem,
                                     cudaStream_t stream, Args &&...args)
{
    if (grid == 0 || block == 0) return GS_OK;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = programmatic ? 1 : 0;
    return gs_cuda_status(err, cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), name,
                          file, line);
}

#define CUDA_LAUNCH_PDL(err, programmatic, kernel, grid, block, smem, stream, ...)                \
    gs_cuda_launch_pdl((err), #kernel "<<<>>> (programmatic if so asked)", __FILE__, __LINE__,    \
                       (programmatic), kernel, (unsigned)(grid), (unsigned)(block), (size_t)(smem), \
                       (stream), __VA_ARGS__)

#ifdef __CUDACC__
static __device__ __forceinline__ void gs_pdl_start()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

static __device__ __forceinline__ void gs_pdl_end()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
#endif

#endif
