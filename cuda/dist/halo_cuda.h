/* halo_cuda.h - what the device transports of the distributed engine share
 * (halo_cuda.cu: nccl and mpi-staged; halo_ipc.cu: ipc): their state, the
 * matrix's device arrays, the off-block rows' product and the timing of
 * communication by CUDA events. Private to cuda/dist/. */
#ifndef GS_HALO_CUDA_H
#define GS_HALO_CUDA_H

#include <nccl.h>

#include "reduce.cuh"

#include "dist_impl.h"

static inline int nccl_status(gs_error *err, ncclResult_t r, const char *call, const char *file,
                              int line)
{
    if (r == ncclSuccess) return GS_OK;
    return gs_error_set(err, GS_ERR_CUDA, "%s failed at %s:%d: %s", call, file, line,
                        ncclGetErrorString(r));
}
#define NCCL_CALL(err, call) nccl_status((err), (call), #call, __FILE__, __LINE__)

typedef struct cuda_tr {
    int use_nccl;
    int timing;                /* CUDA events around each exchange (GS_DIST_COMM_TIMING) */
    int overlap;               /* halo on its own stream (--overlap on; else on main) */
    ncclComm_t nccl;
    cudaStream_t main, comm;   /* the engine's stream; the halo stream (nccl; main without
                                * overlap) */
    cudaStream_t own_comm;     /* the stream this transport created (destroyed with it) */
    cudaEvent_t packed, arrived;
    cudaEvent_t *ev;           /* pairs (start, stop) of exchanges since the last collect */
    int n_ev, cap_ev, used_ev; /* events created, capacity, pairs * 2 in use */
    double *host_slots;        /* page-locked, GS_MAX_SCALARS (staged only) */
    struct ipc_tr *ipc;        /* the ipc transport's (halo_ipc.cu), else NULL */
} cuda_tr;

typedef struct cuda_mat {
    int32_t *send_idx, *off_rows, *off_col;
    int64_t *off_ptr;
    double *off_val;                /* device */
    double *send, *halo;            /* device (nccl, staged; ipc: NULL) */
    double *host_send, *host_halo;  /* page-locked (staged) */
    MPI_Request *req;
    size_t bytes[7];
    struct ipc_mat *ipc;            /* the ipc transport's (halo_ipc.cu), else NULL */
} cuda_mat;

static inline cuda_tr *tr_of(dist_engine *d) { return (cuda_tr *)d->tr_state; }
static inline gs_error *err_of(dist_engine *d) { return &d->inner->err; }

/* y_i += a (A_off halo)_i for off-block row r (one thread); returns its
 * share of S[slot]'s sum, a (A_off halo)_i w_i (0 without w). The halo is
 * read through L2 (another GPU may have written it). */
static __device__ __forceinline__ double dist_offblock_row(
    int32_t r, const int32_t *__restrict__ rows, const int64_t *__restrict__ ptr,
    const int32_t *__restrict__ col, const double *__restrict__ val, const double *halo,
    double a, double *__restrict__ y, const double *__restrict__ w)
{
    double s = 0.0;
    for (int64_t k = ptr[r]; k < ptr[r + 1]; k++) s += val[k] * __ldcg(halo + col[k]);
    const int32_t i = rows[r];
    y[i] += a * s;
    return w ? a * s * w[i] : 0.0;
}

/* halo_cuda.cu */
int dist_cuda_timing_begin(dist_engine *d, cudaStream_t s, cudaEvent_t **pair);
int dist_cuda_collect(dist_engine *d);
int dist_cuda_mat_arrays(dist_engine *d, dist_mat *M); /* off-block rows, send list */
void dist_cuda_mat_free(dist_engine *d, dist_mat *M);
void dist_cuda_tr_destroy(dist_engine *d);
/* halo_ipc.cu: the ipc transport's state (a status; *made 1 where it was
 * made, 0 where it is not possible here or failed) and its teardown pieces */
int dist_ipc_create(dist_engine *d, int *made, gs_error *err);
void dist_ipc_destroy(dist_engine *d);
void dist_ipc_mat_free(dist_engine *d, dist_mat *M);
extern const dist_transport dist_ipc_transport;

#endif
