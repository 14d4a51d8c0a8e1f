/* engine_cuda.h - internals of the CUDA engine shared by the files in cuda/
 * (cuda/engine/, cuda/sparse/, and the preconditioners' CUDA setups): the vector
 * and matrix types, device allocation with accounting, and building a gs_mat
 * from CSR arrays that are already on the device. C++ only (nvcc). */
#ifndef GS_ENGINE_CUDA_H
#define GS_ENGINE_CUDA_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include "cuda_check.h"
#include "gs_cuda.h"

extern "C" {
#include "debug.h"
#include "engine.h"
}

/* Launch shapes. Reductions use a capped, grid-stride grid so that the
 * per-block partial sums fit one engine-owned buffer. */
#define GS_CUDA_BLOCK 256
#define GS_CUDA_MDOT_CHUNK 16 /* vectors per pass of mdot / maxpy */
#define GS_CUDA_STAGE_BYTES ((size_t)8 << 20) /* pinned upload staging, two of them */
/* Matrices whose CSR entries (fp64, automatic layout) take at least this
 * many bytes are uploaded into chunk-mapped memory and, where building
 * their sliced ELL whole would raise the engine's peak, laid out in this
 * many steps, each step's CSR released once its sliced ELL is written
 * (cuda/sparse/stepped.cu). */
#define GS_CUDA_VMM_MIN_BYTES ((size_t)64 << 20)
#define GS_CUDA_VMM_STEPS 8

struct gs_vec {
    int64_t n;
    double *d; /* device, n doubles (cudaMalloc: 256-byte aligned) */
};

typedef enum gs_cuda_format { GS_CUDA_SELL = 0, GS_CUDA_CSR = 1 } gs_cuda_format;
typedef enum gs_cuda_tri { GS_CUDA_TRI_NONE = 0, GS_CUDA_TRI_LOWER = 1, GS_CUDA_TRI_UPPER = 2 } gs_cuda_tri;

/* Device memory mapped a chunk at a time (CUDA's virtual memory
 * management): one reserved address range, into which physical chunks are
 * mapped and from which they are released as the data they hold is no
 * longer needed. Lets a large CSR be turned into its sliced ELL while the
 * two never exist whole at once (cuda/sparse/stepped.cu). base is NULL when nothing is
 * reserved; handle[k] is 0 while chunk k is not mapped. */
typedef struct gs_cuda_vmm {
    char *base;
    size_t chunk; /* bytes a physical allocation, a multiple of the granularity */
    int64_t n_chunks;
    unsigned long long *handle;
} gs_cuda_vmm;

/* struct gs_mat (the layouts' fields) is private to cuda/sparse/ (layout.h):
 * setups ask the engine (gs_cuda_mat_info_of, gs_cuda_mat_diagonal,
 * gs_cuda_mat_device_csr) instead of reading it. */

/* A device CSR view of an engine matrix (gs_cuda_mat_device_csr, below). */
typedef struct gs_cuda_csr_view {
    int32_t n_rows, n_cols;
    int64_t nnz;
    const int64_t *row_ptr; /* n_rows + 1 */
    const int32_t *col;     /* nnz */
    const double *val;      /* nnz */
    int owned;
} gs_cuda_csr_view;

#define GS_CUDA_FUSED_MATS 3

typedef struct gs_cuda_impl {
    int device;
    int sm_count;
    int red_blocks; /* grid size cap of reduction kernels (8 blocks of 256 per SM) */
    unsigned mdot_blocks, maxpy_blocks; /* their caps, from the occupancy calculator */
    unsigned vec_caps[10];               /* the same for the vector kernels (run_vec) */
    cudaStream_t stream;
    cusparseHandle_t sparse;
    double *S;             /* device, GS_MAX_SCALARS */
    double *pinned;        /* host pinned, GS_MAX_SCALARS (scalar_read) */
    uint64_t *readback;    /* host pinned, GS_CUDA_READBACK_WORDS (gs_cuda_readback) */
    char *stage[2];        /* host pinned, GS_CUDA_STAGE_BYTES each (uploads); may be NULL */
    cudaEvent_t stage_free[2]; /* the DMA out of stage[b] has finished */
    double *partials;      /* device, red_blocks * GS_CUDA_MDOT_CHUNK */
    unsigned int *counter; /* device, last-block-done ticket */
    int capturing;
    /* The driver's virtual memory management (NULL where the driver does
     * not offer it: every matrix is then built the plain way); matrices
     * whose CSR entries take at least vmm_min_bytes are uploaded into
     * chunk-mapped memory and laid out in vmm_steps steps (gs_cuda_vmm). */
    const struct gs_cuda_vmm_api *vmm; /* vmm_api once loaded, or NULL */
    struct gs_cuda_vmm_api *vmm_api;
    size_t vmm_min_bytes;
    int vmm_steps;
    gs_debug debug; /* the test switches (src/debug.h); zeroed: the defaults */
    /* The first failure of a teardown call (a free, a destroy: paths that
     * return nothing) in this engine's life, reported by gs_engine_release
     * (CUDA_TEARDOWN, cuda_check.h) */
    gs_error teardown;
    void *loop_ctl; /* device, the loop on the device's state (devloop.cu); NULL until used */
    /* The fused path's CSR of the last system it ran on (fused.cu), kept
     * for the next solve with it (time steps, --repeat); dropped when that
     * matrix is destroyed or laid out anew (gs_cuda_fused_forget). */
    const gs_mat *fused_mat[GS_CUDA_FUSED_MATS]; /* A, then M's products or factors */
    gs_cuda_csr_view fused_view[GS_CUDA_FUSED_MATS];
    void *fused_levels[GS_CUDA_FUSED_MATS]; /* a factor's levels (fused.cu's), or NULL */
    /* What the fused launches can do, asked once per kernel (fused.cu):
     * the cudaOccupancy and attribute calls cost tens of us a solve. */
    struct {
        const void *kernel;
        int cap;
        size_t smem; /* the dynamic shared memory a block may take (M's factors) */
    } fused_caps[8];
    /* The device clock (%globaltimer) against the host's (loop_ctl.cuh),
     * kept for 10 s unless a deadline asks for a fresh one */
    int clk_valid;
    double clk_at, clk_host0; /* clk_at: when (gs_now) */
    int64_t clk_dev0;
} gs_cuda_impl;

static inline gs_cuda_impl *gs_cuda_of(gs_engine *e) { return (gs_cuda_impl *)e->impl; }

/* The switches the engine was given (gs_engine_cuda_set_debug), for the
 * setups that run on it. */
static inline const gs_debug *gs_cuda_debug(gs_engine *e) { return &gs_cuda_of(e)->debug; }

/* cudaMalloc / cudaFree with the engine's accounting (device_bytes_now and
 * _peak). A failed allocation records GS_ERR_NOMEM naming what and how many
 * bytes; bytes == 0 gives NULL and succeeds. gs_cuda_free needs the size
 * that was allocated; NULL-safe. */
int gs_cuda_alloc_at(gs_engine *e, void **p, size_t bytes, const char *what, const char *file,
                     int line);
void gs_cuda_free(gs_engine *e, void *p, size_t bytes);
#define gs_cuda_alloc(e, p, bytes, what)                                                          \
    gs_cuda_alloc_at((e), (void **)(p), (bytes), (what), __FILE__, __LINE__)

/* Chunk-mapped memory (gs_cuda_vmm), with the same accounting: reserve an
 * address range for bytes (nothing mapped; GS_ERR_UNSUPPORTED where the
 * driver offers no virtual memory management), map every chunk that meets
 * [lo, hi) and is not mapped yet (GS_ERR_NOMEM naming what, when the device
 * is full), unmap and release every chunk that lies wholly below end (the
 * caller has made sure the device no longer reads them), free all. The
 * chunk size is chosen here: about 1 / GS_CUDA_VMM_STEPS of bytes, in whole
 * granules (each chunk costs about 80 us of driver calls over its life on
 * an H200: create, map, access, unmap, release). */
int gs_cuda_vmm_reserve(gs_engine *e, gs_cuda_vmm *v, size_t bytes, const char *what);
int gs_cuda_vmm_map(gs_engine *e, gs_cuda_vmm *v, size_t lo, size_t hi, const char *what);
void gs_cuda_vmm_unmap_below(gs_engine *e, gs_cuda_vmm *v, size_t end);
void gs_cuda_vmm_free(gs_engine *e, gs_cuda_vmm *v);

/* Host-to-device copy of bytes from src, ordered on the engine's stream;
 * src may be reused when it returns. From page-locked src one DMA (then
 * waited for); large pageable copies go through the engine's pinned staging
 * buffers. */
int gs_cuda_upload(gs_engine *e, void *dst, const void *src, size_t bytes);
/* The same in two halves, so that several copies from page-locked memory
 * run back to back: start sets *pending when the copy may still read src
 * after the return; finish (once, after the last start) waits for them if
 * any is pending, whatever status is, and returns status or the wait's
 * failure. */
int gs_cuda_upload_start(gs_engine *e, void *dst, const void *src, size_t bytes, int *pending);
int gs_cuda_upload_finish(gs_engine *e, int pending, int status);

/* The engine's page-locked read-back buffer, GS_CUDA_READBACK_WORDS words
 * of 8 bytes, for the device toolkit's reads of a few words (gs_dread_*,
 * cuda/sparse/readback.cu): its own, so that a setup's reads never share
 * the scalar buffer that scalar_read uses. */
#define GS_CUDA_READBACK_WORDS 64
static inline uint64_t *gs_cuda_readback(gs_engine *e)
{
    return gs_cuda_of(e)->readback;
}

/* Grid for a reduction over n items, per_block items a block: at least 1 (an
 * empty reduction still writes its 0), at most red_blocks. */
unsigned gs_cuda_red_grid(gs_engine *e, int64_t n, int64_t per_block);

/* Build a matrix from device CSR arrays (row_ptr int64, sorted columns, fp64
 * values); the arrays are copied, not taken over. tri: keep what cuSPARSE's
 * triangular solve needs (the caller knows whether the matrix is lower or
 * upper triangular). Used by mat_create and by the preconditioners' CUDA
 * setups that build their factors on the device. */
int gs_cuda_mat_from_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                const int64_t *row_ptr, const int32_t *col, const double *val,
                                gs_precision prec, gs_cuda_tri tri, gs_mat **out);
/* A sliced-ELL plan started ahead of its matrix, so that its three info
 * words come to the host in a round trip the caller makes anyway (with
 * other sizes, or a stage's synchronisation) instead of one of the build's
 * own: slice pointers and words on the device, for matrices of at most
 * 1024 slices (more: slice_ptr = NULL, no plan, the build plans itself).
 * The caller copies info[0..2] into words before handing the plan to
 * gs_cuda_mat_adopt_device_csr; gs_cuda_sell_plan_free is NULL-safe. */
typedef struct gs_cuda_sell_plan {
    int64_t n_slices;
    int64_t *slice_ptr; /* device, n_slices + 1 */
    int64_t *info;      /* device: stored entries, last slice's size, widest slice's */
    uint64_t words[3];  /* host: info, once read */
} gs_cuda_sell_plan;
int gs_cuda_sell_plan_start(gs_engine *e, int32_t n_rows, const int64_t *row_ptr,
                            gs_cuda_sell_plan *p);
void gs_cuda_sell_plan_free(gs_engine *e, gs_cuda_sell_plan *p);

/* The same (not triangular) from arrays the caller gives away: where the
 * layout is CSR in fp64 the matrix takes them over (*taken = 1: the caller
 * must not free them), else they are copied (*taken = 0) and stay the
 * caller's. Saves the copies of a setup's factors kept as CSR. plan: NULL,
 * or this matrix's plan with its words read (no round trip here); freed. */
int gs_cuda_mat_adopt_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                 int64_t *row_ptr, int32_t *col, double *val, gs_precision prec,
                                 gs_cuda_sell_plan *plan, int *taken, gs_mat **out);

/* A matrix's CSR on the device with fp64 values (sorted columns as given to
 * mat_create), for setups that read A by rows (FSAI's gather and
 * postfilter). The CSR layout hands out the engine's own arrays (owned = 0),
 * as does mat_create_system's matrix until setup_done (it is kept as CSR
 * for its setup); otherwise sliced ELL is turned back into CSR on the
 * device, unpermuted, bitwise the matrix that was created (owned = 1:
 * row_ptr, col and val were allocated here). A
 * stored in fp32 is refused (GS_ERR_UNSUPPORTED): its values are no longer
 * the fp64 ones. Release with gs_cuda_csr_view_free (NULL-safe, frees what
 * the view owns, zeroes the view). In stream order. */
int gs_cuda_mat_device_csr(gs_engine *e, const gs_mat *A, gs_cuda_csr_view *out);
void gs_cuda_csr_view_free(gs_engine *e, gs_cuda_csr_view *v);
/* The fused path drops its CSR of A (A NULL: of any matrix); called where
 * A is destroyed or laid out anew, and by the engine's destroy. */
void gs_cuda_fused_forget(gs_engine *e, const gs_mat *A);
/* The fused path's packed copy of triangular factors (gs_pc.factor: L unit
 * lower, U unit upper) made now, at a setup, instead of in the first solve
 * that takes them (their levels, a synchronising analysis, and the
 * packing: a few hundred us). Does nothing for factors the fused path
 * cannot take (fp32, more than GS_FUSED_FACTOR_MAX_ROWS rows). lower,
 * upper: the setup's own level analyses of L's and U's patterns
 * (gs_dsparse.h), taken instead of analysing again (only read here; the
 * caller keeps them); NULL: the fused path analyses that factor itself. */
struct gs_dtri;
int gs_cuda_fused_prepare_factors(gs_engine *e, const gs_mat *L, const gs_mat *U,
                                  const struct gs_dtri *lower, const struct gs_dtri *upper);

/* gs_cuda_mat_device_csr_download, a test hook, is declared in gs_cuda.h. */

/* A's host CSR as the engine stores it (sliced ELL: padding has column -1
 * and ends each row; CSR: copied), values widened to fp64 (fp32 storage
 * gives its rounded values). Synchronous (legacy stream): the caller has
 * synchronised the engine's stream. out is allocated here (gs_csr_free). */
int gs_cuda_mat_download(const gs_mat *A, gs_csr *out, gs_error *err);

/* The diagonal of A as the engine stores it (whatever its layout), into
 * the device array out (n_rows doubles): out[i] = a_ii, or 1 / a_ii where
 * invert (0 where a_ii is zero or missing); *first_zero (a device int the
 * caller set to n_rows + 1 or more) becomes the lowest 1-based row whose
 * diagonal is zero or missing. In stream order. A stored in fp32 is
 * refused (GS_ERR_UNSUPPORTED): its diagonal is rounded. */
int gs_cuda_mat_diagonal(gs_engine *e, const gs_mat *A, int invert, double *out, int *first_zero);

/* What a setup may know of an engine matrix without reading its fields. */
typedef struct gs_cuda_mat_info {
    int32_t n_rows, n_cols;
    int64_t nnz;
    gs_precision prec;
} gs_cuda_mat_info;
gs_cuda_mat_info gs_cuda_mat_info_of(const gs_mat *A);

/* Engine ops implemented in cuda/sparse/ (layout.cu, spmv.cu, trisolve.cu). */
int gs_cuda_mat_create(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out);
int gs_cuda_mat_create_system(gs_engine *e, const gs_csr *A, gs_mat **out);
int gs_cuda_setup_done(gs_engine *e, gs_mat *A, int *laid_out);
void gs_cuda_mat_destroy(gs_engine *e, gs_mat *A);
int gs_cuda_spmv_dot(gs_engine *e, const gs_mat *A, const gs_vec *x, gs_vec *y, const gs_vec *w,
                     int slot);
int gs_cuda_spmv_axpby(gs_engine *e, gs_coef a, const gs_mat *A, const gs_vec *x, gs_coef b,
                       gs_vec *y);
int gs_cuda_trisolve(gs_engine *e, const gs_mat *T, int unit_diagonal, const gs_vec *b,
                     gs_vec *x);

/* Checks shared by the op implementations (GS_ERR_INTERNAL on a misuse). */
int gs_cuda_check_slot(gs_engine *e, int slot, const char *op);
int gs_cuda_check_coef(gs_engine *e, gs_coef k, const char *op);

#endif
