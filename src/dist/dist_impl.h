/* dist_impl.h - internals of the distributed engine (MPI builds only), shared
 * by the src/dist/ files named _mpi.c and the GPU transport in cuda/dist/: the engine's
 * state, its matrix (diagonal block on the inner engine, off-block part,
 * halo plan) and the transport table that moves halos and reduces slots. */
#ifndef GS_DIST_IMPL_H
#define GS_DIST_IMPL_H

/* C bindings only (the .cu files are C++; MPI's C++ bindings are deprecated) */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dist.h"
#include "engine.h"

typedef struct dist_engine dist_engine;

/* The distributed matrix: y = A_diag x + A_off halo(x). */
typedef struct dist_mat {
    gs_mat *diag;          /* the diagonal block, on the inner engine */
    gs_dist_split split;   /* host: off-block part and halo columns (split.diag freed) */
    int split_borrowed;    /* split is the problem's (gs_engine_dist_mat_create_split) */
    int64_t row0, n_global, nnz_local;
    int n_recv;            /* ranks this one receives halo entries from */
    int *recv_rank;
    int32_t *recv_start;   /* n_recv + 1 offsets into the halo */
    int n_send;            /* ranks this one sends entries of x to */
    int *send_rank;
    int32_t *send_start;   /* n_send + 1 offsets into send_idx */
    int32_t *send_idx;     /* local rows of x to pack */
    void *transport;       /* the transport's per-matrix state (buffers, device copies) */
} dist_mat;

/* How halos and reductions travel: "mpi" (host memory, the CPU engine),
 * "ipc", "nccl" and "mpi-staged" (device memory; cuda/dist/). All calls are
 * collective in the order the engine issues them, identical on every rank. */
typedef struct dist_transport {
    const char *name;
    int (*mat_init)(dist_engine *d, dist_mat *M);
    void (*mat_free)(dist_engine *d, dist_mat *M);
    /* Pack the entries of x the neighbours need and start the exchange
     * into M's halo buffer (returns without waiting where it can). */
    int (*halo_start)(dist_engine *d, dist_mat *M, const gs_vec *x);
    /* Wait for the halo, then y += a A_off halo and, when slot >= 0,
     * S[slot] += sum over the off-block rows of (a A_off halo)_i w_i. */
    int (*halo_finish)(dist_engine *d, dist_mat *M, gs_coef a, gs_vec *y, const gs_vec *w,
                       int slot);
    /* S[slot0[i] .. slot0[i] + count[i]) for i < runs summed over the ranks,
     * in place, in one collective where the transport can (NCCL: a group). */
    int (*allreduce)(dist_engine *d, const int *slot0, const int *count, int runs);
    /* Fold timings still on the device into d->comm_seconds (after a sync). */
    int (*collect)(dist_engine *d);
    void (*destroy)(dist_engine *d);
    /* Optional, collective, after every rank's mat_init succeeded: connect
     * M's neighbours (NCCL connects lazily; not inside a solve). */
    int (*mat_connect)(dist_engine *d, dist_mat *M);
    /* 1: its exchanges are kernels that keep their own epochs on the device,
     * so iterations may be captured and replayed (the engine then offers
     * capture; NCCL's and MPI's transports: 0) */
    int capturable;
} dist_transport;

struct dist_engine {
    gs_engine *inner;
    MPI_Comm comm;
    int rank, size;
    int devices;
    const dist_transport *tr;
    void *tr_state;
    double comm_seconds; /* since the last counters_reset */
    double comm_setup_seconds; /* communicator start and connections (outside Tp, Ts) */
    double halo_bytes;   /* received by this rank since the last reset */
    long spmv_count;
    int halo_overlap;    /* the exchange overlaps the local product (--overlap) */
    double mat_seconds[GS_DIST_MAT_STAGES]; /* the last matrix's creation, by stage */
    /* Sums over the ranks not yet made: slot runs whose local parts are in S,
     * summed together when an operation reads one of them (or any slot, for
     * the operations that read slots they do not name), so that the dots of
     * a step travel in one collective. merge = 0 sums each at once. */
#define GS_DIST_PENDING 16
    int n_pending, pending0[GS_DIST_PENDING], pending_n[GS_DIST_PENDING];
    int merge;
    long reductions;     /* collectives of sums since the last counters_reset */
    long cap_spmv, cap_reductions; /* the counters when a capture began */
    double cap_halo_bytes;
};

/* S[slot0 .. slot0 + count) hold this rank's parts: sum them over the ranks
 * before anything reads them (engine_mpi.c). */
int gs_dist_reduce_later(gs_engine *e, int slot0, int count);

static inline dist_engine *gs_dist_of(gs_engine *e) { return (dist_engine *)e->impl; }

/* The host transport (halo_mpi.c) and the device ones (cuda/dist/halo_cuda.cu;
 * use_nccl = 0: MPI through host copies, for ranks sharing a GPU). */
int gs_dist_transport_host(dist_engine *d, gs_error *err);
enum { GS_DIST_TRANSPORT_STAGED, GS_DIST_TRANSPORT_NCCL, GS_DIST_TRANSPORT_IPC };
int gs_dist_transport_cuda(dist_engine *d, int kind, gs_error *err);

/* comm_mpi.c */
MPI_Comm gs_dist_comm(void);
const char *gs_dist_device_id(void); /* "" when none was chosen */
int gs_dist_mpi_fail(int mpi_code, const char *what, gs_error *err);

#ifdef __cplusplus
}
#endif

#endif
