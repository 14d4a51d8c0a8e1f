/* engine.h - the engine table: every operation a Krylov method or a
 * preconditioner's apply needs, implemented once per engine (engine_cpu.c,
 * cuda/engine/). Krylov methods see only this table (DESIGN.md).
 *
 * Scalars. Dot products never return a number to the caller: they write into
 * a slot of the engine-owned scalar array S (device memory on the GPU), and
 * vector updates take their coefficients as gs_coef expressions over S that
 * the engine evaluates where the data lives. So CG's alpha = rho / (p.Ap) is
 * gs_coef_ratio(1, RHO, PAP) and never crosses to the host; the stopping test
 * reads one slot with scalar_read (the only synchronising call).
 *
 * Zero coefficients overwrite: in y = a x + b y with b == 0 (and likewise
 * c == 0 in axpbypcz, b == 0 in spmv_axpby) y's old contents are not read,
 * so a NaN there does not leak into the result.
 *
 * Errors. Operations return a gs_status; the message goes to eng->err (the
 * first failure is kept). Operations on the GPU are asynchronous: a kernel's
 * failure may surface at a later call or at sync. */
#ifndef GS_ENGINE_H
#define GS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "csr.h"
#include "error.h"

typedef struct gs_vec gs_vec;       /* engine-owned dense vector of doubles */
typedef struct gs_mat gs_mat;       /* engine-owned sparse matrix, read-only */
typedef struct gs_engine gs_engine;
struct gs_loop;                     /* loop.h */
struct gs_fused;                    /* loop.h */
struct gs_small;                    /* small.h */

/* Every engine's struct gs_vec starts with this header (its length), so the
 * generic layer can ask a vector's length without an engine call. */
typedef struct gs_vec_header {
    int64_t n;
} gs_vec_header;
static inline int64_t gs_vec_length(const gs_vec *v) { return ((const gs_vec_header *)v)->n; }

/* Slots available in S (1 MB of doubles). GMRES keeps its Hessenberg
 * triangle there (about restart^2 / 2 slots, small.h), IDR(s) its s x s
 * matrix, so --restart and --idr-s are capped by this. */
#define GS_MAX_SCALARS (1 << 17)
#define GS_SLOT_NONE (-1)

/* value = c * S[num0] * S[num1] / (S[den0] * S[den1]); a slot of
 * GS_SLOT_NONE stands for 1. Evaluated by the engine, per use. A zero
 * denominator gives 0 (not Inf/NaN): the update is skipped, and the Krylov
 * method, which reads the raw slots, reports the breakdown. */
typedef struct gs_coef {
    double c;
    int32_t num0, num1, den0, den1;
} gs_coef;

static inline gs_coef gs_coef_const(double c)
{
    gs_coef k = {c, GS_SLOT_NONE, GS_SLOT_NONE, GS_SLOT_NONE, GS_SLOT_NONE};
    return k;
}
static inline gs_coef gs_coef_slot(double c, int s)
{
    gs_coef k = {c, (int32_t)s, GS_SLOT_NONE, GS_SLOT_NONE, GS_SLOT_NONE};
    return k;
}
static inline gs_coef gs_coef_ratio(double c, int num, int den)
{
    gs_coef k = {c, (int32_t)num, GS_SLOT_NONE, (int32_t)den, GS_SLOT_NONE};
    return k;
}
static inline gs_coef gs_coef_full(double c, int num0, int num1, int den0, int den1)
{
    gs_coef k = {c, (int32_t)num0, (int32_t)num1, (int32_t)den0, (int32_t)den1};
    return k;
}

typedef enum gs_precision { GS_FP64 = 0, GS_FP32 = 1 } gs_precision;

typedef enum gs_engine_kind { GS_ENGINE_CPU = 0, GS_ENGINE_CUDA = 1, GS_ENGINE_KINDS } gs_engine_kind;

typedef struct gs_engine_ops {
    const char *name; /* "cpu", "cuda" */
    gs_engine_kind kind;
    /* Frees e; returns the first failure of a teardown call in e's life (a
     * free or destroy, e's own included: paths that return nothing keep
     * theirs for this), its message in err (may be NULL). */
    int (*destroy)(gs_engine *e, gs_error *err);

    /* --- memory --- */
    int (*vec_create)(gs_engine *e, int64_t n, gs_vec **out);
    void (*vec_destroy)(gs_engine *e, gs_vec *v); /* NULL-safe */
    int (*vec_upload)(gs_engine *e, gs_vec *dst, const double *src);
    int (*vec_download)(gs_engine *e, const gs_vec *src, double *dst); /* synchronises */
    /* Store A for spmv (and trisolve, if triangular). prec = GS_FP32 keeps
     * the values in single precision (the vectors stay fp64). */
    int (*mat_create)(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out);
    void (*mat_destroy)(gs_engine *e, gs_mat *A); /* NULL-safe */

    /* --- vector operations (x, y, z, w distinct unless stated; y = a x + b y
     * and its fused forms also accept x == y) --- */
    int (*set)(gs_engine *e, gs_vec *y, double value);                /* y = value  */
    int (*copy)(gs_engine *e, const gs_vec *x, gs_vec *y);            /* y = x      */
    int (*axpby)(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y);
    /*                                                                   y = a x + b y */
    int (*axpbypcz)(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, const gs_vec *y,
                    gs_coef c, gs_vec *z);                            /* z = a x + b y + c z */
    int (*dot)(gs_engine *e, const gs_vec *x, const gs_vec *y, int slot); /* S = x.y (x==y ok) */
    /* y = a x + b y, then S[slot] = y.w (w == NULL means y.y). */
    int (*axpby_dot)(gs_engine *e, gs_coef a, const gs_vec *x, gs_coef b, gs_vec *y,
                     const gs_vec *w, int slot);
    /* y1 = y1 + a x1 and y2 = y2 + b x2 in one pass, then S[slot] = y2.y2
     * when slot != GS_SLOT_NONE (CG's x and r updates in one kernel). A
     * zero a (b) leaves y1 (y2) exactly as it was, whatever x1 (x2) holds:
     * an update a method's small operation cancelled (small.h) is no update. */
    int (*axpy2_dot)(gs_engine *e, gs_coef a, const gs_vec *x1, gs_vec *y1, gs_coef b,
                     const gs_vec *x2, gs_vec *y2, int slot);
    /* y = d .* x (elementwise), then S[slot] = x.y when slot != GS_SLOT_NONE. */
    int (*pointwise_mult_dot)(gs_engine *e, const gs_vec *d, const gs_vec *x, gs_vec *y,
                              int slot);
    /* S[slot0 + i] = V[i].w for i < k (one pass over w). */
    int (*mdot)(gs_engine *e, const gs_vec *const *V, int k, const gs_vec *w, int slot0);
    /* w = w + c * sum_i S[slot0 + i] V[i] for i < k. */
    int (*maxpy)(gs_engine *e, double c, const gs_vec *const *V, int k, int slot0, gs_vec *w);

    /* --- sparse operations --- */
    /* y = A x, then S[slot] = y.w when slot != GS_SLOT_NONE (w == NULL: x). */
    int (*spmv_dot)(gs_engine *e, const gs_mat *A, const gs_vec *x, gs_vec *y,
                    const gs_vec *w, int slot);
    /* y = a A x + b y (residuals: r = b - A x is copy then a = -1, b = 1). */
    int (*spmv_axpby)(gs_engine *e, gs_coef a, const gs_mat *A, const gs_vec *x, gs_coef b,
                      gs_vec *y);
    /* Solve T x = b with T triangular as stored (lower or upper is read from
     * the pattern); unit_diagonal = 1 takes the diagonal as 1 whatever is
     * stored. May be NULL in an engine that does not provide it yet. */
    int (*trisolve)(gs_engine *e, const gs_mat *T, int unit_diagonal, const gs_vec *b,
                    gs_vec *x);

    /* --- scalars --- */
    int (*scalar_set)(gs_engine *e, int slot, gs_coef value);  /* S[slot] = value */
    int (*scalar_write)(gs_engine *e, int slot0, int count, const double *src);
    int (*scalar_read)(gs_engine *e, int slot0, int count, double *dst); /* synchronises */
    /* The small dense operation op on S where the slots live (small.h): the
     * Krylov methods' Givens rotations, triangular solves and the like, one
     * implementation for every engine; no synchronisation, capturable. */
    int (*small_run)(gs_engine *e, const struct gs_small *op);

    int (*sync)(gs_engine *e); /* wait for all queued work; report late errors */

    /* --- optional (NULL where the engine has none): replayable sequences ---
     * The operations issued between capture_begin and capture_end are
     * recorded, not run (a CUDA graph); replay runs them again with the
     * same arguments (vector and slot contents as they are at replay time).
     * No synchronising call (scalar_read, vec_download, sync) may be issued
     * while capturing. */
    int (*capture_begin)(gs_engine *e);
    int (*capture_end)(gs_engine *e, void **seq);
    int (*replay)(gs_engine *e, void *seq);
    void (*seq_destroy)(gs_engine *e, void *seq);

    /* --- optional (NULL where the engine has none): host memory, setups ---
     * host_pin page-locks the host array [p, p + bytes) so that uploads
     * from it are one DMA at the link's rate, not the driver's staged copy
     * (the problem's matrix and vectors, when they are read: outside Tt).
     * Returns 1 if pinned, 0 if the system refused (uploads stay pageable:
     * slower, never wrong). host_unpin(e, p) undoes it before p is freed. */
    int (*host_pin)(gs_engine *e, void *p, size_t bytes);
    void (*host_unpin)(gs_engine *e, void *p);
    /* mat_create in fp64 of the system matrix, whose preconditioner is set
     * up next: the engine may keep A in the form the setups read (the CUDA
     * engine: as the CSR it uploaded, which FSAI's setup reads by rows)
     * until setup_done(e, A), which the preconditioner layer issues once
     * the setup is over (gs_pc_create) and which gives A the layout its
     * products want. *laid_out is 1
     * when setup_done did that work (time it as a stage of the setup), 0
     * when there was none; a failure leaves A unusable (destroy it). */
    int (*mat_create_system)(gs_engine *e, const gs_csr *A, gs_mat **out);
    int (*setup_done)(gs_engine *e, gs_mat *A, int *laid_out);

    /* --- optional (NULL where the engine has none): the loop on the device ---
     * Capture body(ctx) once (the rules of capture_begin hold inside it) and
     * run it over and over on the device, each run followed by the check
     * that loop describes (src/engine/loop.h: residual test, breakdown
     * tests on slots, maxit, deadline, history), until the check stops it
     * (a body of steps, loop->n_steps > 1: loop->step(ctx, i) for each step,
     * each with its check, and body unused);
     * the host waits once, at the end. loop->ran = 0 when the engine
     * declines (switched off, or the body cannot run in its loop): then
     * nothing has run and the caller iterates itself. */
    int (*loop_run)(gs_engine *e, int (*body)(void *ctx), void *ctx, struct gs_loop *loop);
    /* --- optional (NULL where the engine has none): raw access for an
     * engine that wraps this one (the distributed engine, src/dist/) ---
     * vec_data: the address of v's n values (host memory on the CPU
     * engine, device memory on the CUDA engine); scalar_data: the address
     * of S (GS_MAX_SCALARS doubles, same memory as the vectors). The
     * wrapper orders its own work after the engine's queued operations
     * (the CUDA engine: on its stream, native_stream). */
    double *(*vec_data)(gs_engine *e, const gs_vec *v);
    double *(*scalar_data)(gs_engine *e);
    void *(*native_stream)(gs_engine *e); /* cudaStream_t, NULL on the CPU engine */
    /* --- optional (NULL where the engine has none): the fused path ---
     * The whole solve that f describes (src/engine/loop.h) in one kernel,
     * checked as loop describes after every iteration inside it; the host
     * waits once. loop->ran = 0 where the engine declines (switched off,
     * too large for its rule, no cooperative launch): nothing has run. */
    int (*fused_run)(gs_engine *e, const struct gs_fused *f, struct gs_loop *loop);
    /* --- optional (NULL where the engine has none): a solve's threads (the
     * CPU engine, cpu_team.h) ---
     * solve_plan, before a solve whose largest kernel moves kernel_bytes
     * (outside Tp and Ts): choose the threads it will use (threads,
     * thread_policy) and, the first time for that count, measure the host's
     * floor with them (copy_bandwidth; on Linux the process's peak resident
     * size then restarts from what it holds, so a caller that reports a
     * peak reads it before this call and keeps the larger). solve_region: run solve(ctx) with
     * those threads waiting for its kernels from start to end (one wake-up
     * a solve, not one a kernel); returns what solve returned. */
    int (*solve_plan)(gs_engine *e, double kernel_bytes);
    int (*solve_region)(gs_engine *e, int (*solve)(void *ctx), void *ctx);
} gs_engine_ops;

struct gs_engine {
    const gs_engine_ops *ops;
    void *impl;             /* the engine's private state */
    gs_error err;           /* first failure of any operation */
    char device_name[128];  /* "NVIDIA H100 80GB HBM3", "CPU: 2 OpenMP threads" */
    double copy_bandwidth;  /* bytes/s (read + written): the CUDA engine's copy at creation,
                             * the CPU engine's triad with the solve's threads (solve_plan);
                             * 0 if not measured */
    int threads;            /* CPU engine: the last planned solve's threads; 0 otherwise */
    char thread_policy[160]; /* CPU engine: how they were chosen ("by work, 1 of 16") */
    size_t device_bytes_now, device_bytes_peak; /* engine allocations (0 for the CPU) */
};

/* Engines. gs_engine_cuda_create fails with GS_ERR_UNSUPPORTED when the
 * build has no CUDA or no device is present (message says which). */
int gs_engine_cpu_create(gs_engine **out, gs_error *err);
int gs_engine_cuda_create(gs_engine **out, gs_error *err);
/* --threads: threads > 0 runs every CPU kernel on that many (at most
 * OMP_NUM_THREADS); 0 (the default) chooses by the work, a thread per
 * bytes_per_thread a kernel moves (--thread-bytes; 0: the engine's default,
 * cpu_team.h). A no-op on other engines. */
void gs_engine_cpu_set_threads(gs_engine *e, int threads, double bytes_per_thread);
/* The same on device `device` (0 .. count - 1): a distributed run's rank r
 * takes its local rank mod the count (NCCL needs every GPU visible to every
 * rank, so ranks choose by index, not by CUDA_VISIBLE_DEVICES). */
int gs_engine_cuda_create_on(int device, gs_engine **out, gs_error *err);
int gs_cuda_device_count(void); /* 0 without a build, driver or device */
/* The CUDA engine's test switches (src/debug.h), copied; a no-op without CUDA. */
struct gs_debug;
void gs_engine_cuda_set_debug(gs_engine *e, const struct gs_debug *dbg);
/* The switches a CUDA engine was given (zeroed: none), for the layers that
 * wrap it (the distributed engine); NULL for any other engine. */
const struct gs_debug *gs_engine_cuda_debug(const gs_engine *e);
void gs_engine_destroy(gs_engine *e); /* NULL-safe; a teardown failure is dropped */
/* gs_engine_destroy, returning the first failure of a teardown call in e's
 * life (ops->destroy) with its message in err: for callers that will not
 * have reported an error of their own (main, at its end). NULL-safe. */
int gs_engine_release(gs_engine *e, gs_error *err);

/* Return eng->err's status after copying its message into err (for callers
 * that report an engine failure through their own error record). */
int gs_engine_fail(gs_engine *e, gs_error *err);

/* Bytes one pass over A moves on this engine's layout (values + indices,
 * padding excluded): nnz * (value + 4) + (n + 1) * 8 for CSR. */
double gs_csr_stream_bytes(const gs_csr *A, gs_precision prec);

#endif
