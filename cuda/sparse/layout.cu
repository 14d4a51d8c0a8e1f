/* layout.cu - the engine's matrices: the layout rule (below), mat_create / create_system /
 * setup_done / destroy, and what C code may ask of a matrix (gs_cuda.h).
 *
 * Format rule (DESIGN.md: sliced ELL unless padding explodes). With slice
 * height C = 32 and w_s the longest row of slice s, the stored entries are
 * P = sum over real rows of w_{slice(i)}; fill = P / nnz; mean width P / n.
 *   fill <= 2.0 and max_s w_s <= 2 x mean width + 1  -> SELL-32, rows in
 *                                                       their own order;
 *   otherwise                                        -> vector-CSR (2..32
 *                                                       lanes a row).
 * Wherever vector-CSR is the answer, the long-row rule follows
 * (long_rows.cu): rows of at least max(128, 16 x mean) entries are split
 * over warps ("CSR-split"), or the merge path takes the whole product
 * ("CSR-merge", GS_SPMV_LONG=merge).
 * Before both, a device-fill rule, decided from n, nnz and the device's
 * multiprocessor count before any slice is built: vector-CSR where the
 * slices are too few to keep the device's warps busy for rows of their
 * length,
 *   ceil(n / 32) <= 4 a multiprocessor and nnz >= 8 n, or
 *   ceil(n / 32) <= 32 a multiprocessor and nnz >= 128 n.
 * A SELL warp walks its slice's widest row by itself, one dependent
 * column-then-x load chain every four entries, with too few other warps to
 * hide the latency; vector-CSR shares a row among up to 32 lanes. Measured
 * on an H200 (`bench_engine --device-fill`, rows of 8 to 256 entries,
 * fill 1): CSR faster at every length up to 4 slices a multiprocessor
 * (rows of 8: 1.9 against 2.7 us; of 128: 2.3-9.5 against 21.7-22.9 us);
 * from 8 a multiprocessor SELL-32 faster or even for rows of 8 to 64, but
 * for one miss (rows of 64 at 16 a multiprocessor: SELL-32 29.3 against
 * 26.9 us); rows of 128 and 256 favour CSR up to 32 a multiprocessor (58
 * against 66 us, 103 against 125 us) and SELL-32 at 64. Rows of 65 to 127
 * between 4 and 32 a multiprocessor are not measured (SELL-32 kept). The
 * small SPD matrices and their FSAI factors are the case (bcsstk16's G: 153
 * slices, rows of 110 entries on average: FSAI-PCG 104 -> 27 us an
 * iteration; docs/perf-notebook.md, "CUDA engine: few slices of long rows").
 * Rows sorted by length within windows (SELL-32-sigma) are built on request
 * (gs_cuda_mat_create_as) but never chosen: on an H200 they lost to one of
 * the two others in every case measured (docs/perf-notebook.md, "CUDA engine";
 * scripts/bench/bench_engine.c): the permutation read, the scattered y writes and
 * the loss of x locality across a warp's rows cost more than the padding
 * saved (visiting the slices in a scrambled order, to spread each window's
 * widest slices over the warps, lost more locality again). Measured, 2M
 * rows: lengths uniform in 8 +- 8 (fill 1.98, even widths) SELL-32 133 us,
 * CSR 171, sorted 139..175;
 * 0.5% of rows of 40 among rows of 6 (fill 1.80, width ratio 3.6) SELL-32
 * 163 us, CSR 112; 3D Poisson (fill 1.002): SELL-32 1.00x its byte floor,
 * sorted 1.12x, CSR 2.2x. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* Choose the layout by the rule at the top of this file and build it;
 * force (benchmarks, tests) overrides the rule. plan (NULL, or started for
 * this matrix with its words read): its slice pointers are taken over
 * (plan->slice_ptr then NULL) instead of built. src (NULL, or with adopt
 * and fp64: the chunk-mapped ranges of col and val): the CSR layout takes
 * them over, the sliced ELL is built from them (in steps where that lowers
 * the peak) and frees them; once that point is reached they are zeroed,
 * and on a failure before it they stay the caller's. defer (with adopt, for
 * mat_create_system): where the device-fill rule does not settle it, the
 * matrix stays CSR for the setup (taking the arrays over) and setup_done
 * builds its layout. */
static int build_layout(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                        const double *val, gs_cuda_layout force, int sigma, int adopt,
                        gs_cuda_sell_plan *plan, gs_cuda_vmm *src, int defer)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows;
    int32_t *len = NULL;
    int64_t *sizes = NULL, P = 0, P_real = 0, width = 0;
    int status = GS_OK, use_sell = 0;
    m->n_slices = (n + SELL_C - 1) / SELL_C;
    m->sigma = 1;
    /* the device-fill rule (top of this file): no slice plan needed */
    const int few_long = (m->n_slices <= (int64_t)SELL_FEW_SLICES_PER_SM * c->sm_count &&
                          m->nnz >= (int64_t)SELL_LONG_ROW * n) ||
                         (m->n_slices <= (int64_t)SELL_SOME_SLICES_PER_SM * c->sm_count &&
                          m->nnz >= (int64_t)SELL_VERY_LONG_ROW * n);
    const int csr_forced = force == GS_CUDA_LAYOUT_CSR || force == GS_CUDA_LAYOUT_CSR_SPLIT ||
                           force == GS_CUDA_LAYOUT_CSR_MERGE;
    if (n == 0 || csr_forced || (force == GS_CUDA_LAYOUT_AUTO && few_long)) {
        status = fill_csr(e, m, row_ptr, col, val, adopt, src);
        /* rows of very different lengths (long_rows.cu) */
        if (status == GS_OK && force != GS_CUDA_LAYOUT_CSR) status = long_rows_plan(e, m, force, -1);
        return status;
    }
    if (defer) {
        m->deferred = 1;
        return fill_csr(e, m, row_ptr, col, val, adopt, src);
    }
    if (plan && plan->slice_ptr && force == GS_CUDA_LAYOUT_AUTO && plan->n_slices == m->n_slices) {
        m->slice_ptr = plan->slice_ptr;
        plan->slice_ptr = NULL;
    } else {
        GS_TRY(gs_cuda_alloc(e, &m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t),
                             "SELL slice pointers"));
        plan = NULL;
    }
    m->bytes += (m->n_slices + 1) * sizeof(int64_t);
    if (plan) {
        slice_plan_sizes(m, (const int64_t *)plan->words, &P, &P_real, &width);
    } else if (force != GS_CUDA_LAYOUT_SELL_SORTED && m->n_slices <= SLICE_SMALL_BLOCK) {
        GS_TRY(build_slice_ptr_small(e, m, row_ptr, &P, &P_real, &width));
    } else {
        GS_TRY(gs_cuda_alloc(e, &len, n * sizeof(int32_t), "SELL build: row lengths"));
        GS_TRY(gs_cuda_alloc(e, &sizes, m->n_slices * sizeof(int64_t), "SELL build: slice sizes"));
        GS_TRY(CUDA_LAUNCH(&e->err, row_length_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                           row_ptr, n, len));
        GS_TRY(build_slice_ptr(e, m, len, sizes, &P, &P_real, &width));
    }
    if (force == GS_CUDA_LAYOUT_AUTO) {
        /* fill: bytes moved; width ratio: how unevenly the static slice to
         * warp assignment is loaded (a few wide slices keep a few warps busy
         * after the others finish). */
        const double fill = m->nnz ? (double)P_real / (double)m->nnz : 1.0;
        const double mean_width = (double)P_real / (double)n;
        use_sell = fill <= SELL_MAX_FILL && (double)width <= SELL_MAX_WIDTH_RATIO * mean_width + 1.0;
    } else {
        use_sell = 1;
    }
    if (force == GS_CUDA_LAYOUT_SELL_SORTED) {
        m->sigma = sigma > 0 ? sigma : SELL_SIGMA;
        GS_TRY(sort_rows(e, m, len));
        GS_TRY(build_slice_ptr(e, m, len, sizes, &P, &P_real, &width));
    }
    if (use_sell) {
        m->format = GS_CUDA_SELL;
        m->padded = P;
        /* in steps only where building it whole would raise the engine's
         * peak (a deferred layout after a setup that held more is built
         * whole: cheaper, and no higher a peak) */
        const size_t whole = (size_t)P * (sizeof(int32_t) + sizeof(double));
        if (src && src[0].base && e->device_bytes_now + whole > e->device_bytes_peak) {
            GS_TRY(fill_sell_stepped(e, m, row_ptr, col, val, src));
        } else {
            GS_TRY(fill_sell(e, m, row_ptr, col, val));
            if (src) gs_cuda_vmm_free(e, &src[0]), gs_cuda_vmm_free(e, &src[1]);
        }
    } else {
        gs_cuda_free(e, m->perm, n * sizeof(int32_t));
        gs_cuda_free(e, m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t));
        m->bytes -= (m->perm ? n * sizeof(int32_t) : 0) + (m->n_slices + 1) * sizeof(int64_t);
        m->perm = NULL;
        m->slice_ptr = NULL;
        m->sigma = 1;
        GS_TRY(fill_csr(e, m, row_ptr, col, val, adopt, src));
        /* rows of very different lengths; the widest slice is the longest row */
        GS_TRY(long_rows_plan(e, m, force, width));
    }
cleanup: /* stream-ordered frees; the matrix is ready in stream order */
    gs_cuda_free(e, sizes, m->n_slices * sizeof(int64_t));
    gs_cuda_free(e, len, n * sizeof(int32_t));
    return status;
}

static void name_layout(gs_mat *m)
{
    if (m->format == GS_CUDA_CSR)
        snprintf(m->layout, sizeof m->layout, "%s",
                 m->long_mode == LONG_SPLIT   ? "CSR-split"
                 : m->long_mode == LONG_MERGE ? "CSR-merge"
                                              : "CSR");
    else if (m->perm)
        snprintf(m->layout, sizeof m->layout, "SELL-32-%d", m->sigma);
    else
        snprintf(m->layout, sizeof m->layout, "SELL-32");
}

/* adopt: row_ptr, col and val are the caller's to give; the CSR layout in
 * fp64 takes them over ((*out)->row_ptr == row_ptr then, and the caller
 * must not free them), any other layout copies them. src and defer: as
 * build_layout; on failure src is the caller's again if not consumed. */
static int mat_from_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                               const int64_t *row_ptr, const int32_t *col, const double *val,
                               gs_precision prec, gs_cuda_tri tri, gs_cuda_layout force,
                               int sigma, int adopt, gs_cuda_sell_plan *plan, gs_cuda_vmm *src,
                               int defer, gs_mat **out)
{
    *out = NULL;
    if (gs_cuda_of(e)->capturing)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda mat_create while capturing");
    gs_mat *m = (gs_mat *)gs_calloc(1, sizeof *m, "matrix header", &e->err);
    if (!m) return GS_ERR_NOMEM;
    m->n_rows = n_rows;
    m->n_cols = n_cols;
    m->nnz = nnz;
    m->prec = prec;
    m->tri = tri;
    int status = build_layout(e, m, row_ptr, col, val, force, sigma, adopt, plan, src, defer);
    name_layout(m);
    if (status == GS_OK) status = spmv_prepare(e, m);
    if (status == GS_OK && tri != GS_CUDA_TRI_NONE) status = keep_triangle(e, m, row_ptr, col, val);
    if (status != GS_OK) {
        if (m->row_ptr == row_ptr) { /* taken over: the caller's to free after all */
            m->row_ptr = NULL, m->csr_col = NULL, m->csr_val = NULL;
            if (src) src[0] = m->csr_vm[0], src[1] = m->csr_vm[1];
            m->csr_vm[0] = gs_cuda_vmm{}, m->csr_vm[1] = gs_cuda_vmm{};
        }
        gs_cuda_mat_destroy(e, m);
        return status;
    }
    *out = m;
    return GS_OK;
}

int gs_cuda_mat_from_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                const int64_t *row_ptr, const int32_t *col, const double *val,
                                gs_precision prec, gs_cuda_tri tri, gs_mat **out)
{
    return mat_from_device_csr(e, n_rows, n_cols, nnz, row_ptr, col, val, prec, tri,
                               GS_CUDA_LAYOUT_AUTO, 0, 0, NULL, NULL, 0, out);
}

int gs_cuda_mat_adopt_device_csr(gs_engine *e, int32_t n_rows, int32_t n_cols, int64_t nnz,
                                 int64_t *row_ptr, int32_t *col, double *val, gs_precision prec,
                                 gs_cuda_sell_plan *plan, int *taken, gs_mat **out)
{
    *taken = 0;
    const int status = mat_from_device_csr(e, n_rows, n_cols, nnz, row_ptr, col, val, prec,
                                           GS_CUDA_TRI_NONE, GS_CUDA_LAYOUT_AUTO, 0, 1, plan,
                                           NULL, 0, out);
    if (status == GS_OK) *taken = (*out)->row_ptr == row_ptr;
    if (plan) gs_cuda_sell_plan_free(e, plan); /* what the layout did not take */
    return status;
}

/* Triangular as stored (the CPU engine's rule): lower if no entry lies
 * above the diagonal, else upper if none lies below. */
static gs_cuda_tri triangle_of(const gs_csr *A)
{
    int lower = 1, upper = 1;
    if (A->n_rows != A->n_cols) return GS_CUDA_TRI_NONE;
    for (int32_t i = 0; i < A->n_rows && (lower || upper); i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            if (A->col[k] > i) lower = 0;
            if (A->col[k] < i) upper = 0;
        }
    return lower ? GS_CUDA_TRI_LOWER : upper ? GS_CUDA_TRI_UPPER : GS_CUDA_TRI_NONE;
}

/* A uploaded as CSR (one DMA an array from page-locked memory), then laid
 * out; the CSR layout in fp64 keeps the upload itself. Large fp64 matrices
 * in the automatic layout go into chunk-mapped memory and are laid out in
 * steps (fill_sell_stepped). system (mat_create_system: fp64, for the
 * setup that follows): unless the device-fill rule settles the layout now,
 * the matrix stays CSR, the upload itself, until setup_done lays it out, so
 * that the setup reads A's CSR while no second copy of A exists. */
static int mat_create_impl(gs_engine *e, const gs_csr *A, gs_precision prec,
                           gs_cuda_layout layout, int sigma, int system, gs_mat **out)
{
    *out = NULL;
    if (e->ops->kind != GS_ENGINE_CUDA)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "gs_cuda_mat_create_as: not a CUDA engine");
    if (!A->val)
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda mat_create: matrix without values");
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = A->n_rows, nnz = A->nnz;
    const gs_cuda_tri tri = triangle_of(A);
    const int automatic = prec == GS_FP64 && layout == GS_CUDA_LAYOUT_AUTO && tri == GS_CUDA_TRI_NONE;
    const int stepped = automatic && c->vmm && nnz > 0 &&
                        (size_t)nnz * (sizeof(int32_t) + sizeof(double)) >= c->vmm_min_bytes;
    gs_cuda_vmm vm[2] = {gs_cuda_vmm{}, gs_cuda_vmm{}};
    int64_t *d_ptr = NULL;
    int32_t *d_col = NULL;
    double *d_val = NULL;
    int status = GS_OK, pending = 0;
    GS_TRY(gs_cuda_alloc(e, &d_ptr, (n + 1) * sizeof(int64_t), "matrix upload: row pointers"));
    if (stepped) {
        GS_TRY(gs_cuda_vmm_reserve(e, &vm[0], nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_vmm_map(e, &vm[0], 0, nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_vmm_reserve(e, &vm[1], nnz * sizeof(double), "matrix upload: values"));
        GS_TRY(gs_cuda_vmm_map(e, &vm[1], 0, nnz * sizeof(double), "matrix upload: values"));
        d_col = (int32_t *)vm[0].base;
        d_val = (double *)vm[1].base;
    } else {
        GS_TRY(gs_cuda_alloc(e, &d_col, nnz * sizeof(int32_t), "matrix upload: column indices"));
        GS_TRY(gs_cuda_alloc(e, &d_val, nnz * sizeof(double), "matrix upload: values"));
    }
    GS_TRY(gs_cuda_upload_start(e, d_ptr, A->row_ptr, (n + 1) * sizeof(int64_t), &pending));
    if (nnz > 0) {
        GS_TRY(gs_cuda_upload_start(e, d_col, A->col, nnz * sizeof(int32_t), &pending));
        GS_TRY(gs_cuda_upload_start(e, d_val, A->val, nnz * sizeof(double), &pending));
    }
    GS_TRY(mat_from_device_csr(e, A->n_rows, A->n_cols, nnz, d_ptr, d_col, d_val, prec, tri,
                               layout, sigma, 1, NULL, stepped ? vm : NULL,
                               system && automatic, out));
    if ((*out)->row_ptr == d_ptr) d_ptr = NULL, d_col = NULL, d_val = NULL; /* the matrix's own now */
cleanup: /* stream-ordered frees: after the kernels that read them */
    status = gs_cuda_upload_finish(e, pending, status);
    if (status != GS_OK && *out) { /* the upload's wait failed: no matrix after all */
        gs_cuda_mat_destroy(e, *out);
        *out = NULL;
    }
    if (stepped) { /* taken over, consumed, or freed here */
        gs_cuda_vmm_free(e, &vm[0]);
        gs_cuda_vmm_free(e, &vm[1]);
        d_col = NULL, d_val = NULL;
    }
    gs_cuda_free(e, d_val, nnz * sizeof(double));
    gs_cuda_free(e, d_col, nnz * sizeof(int32_t));
    gs_cuda_free(e, d_ptr, (n + 1) * sizeof(int64_t));
    return status;
}

extern "C" int gs_cuda_mat_create_as(gs_engine *e, const gs_csr *A, gs_precision prec,
                                      gs_cuda_layout layout, int sigma, gs_mat **out)
{
    return mat_create_impl(e, A, prec, layout, sigma, 0, out);
}

int gs_cuda_mat_create(gs_engine *e, const gs_csr *A, gs_precision prec, gs_mat **out)
{
    return mat_create_impl(e, A, prec, GS_CUDA_LAYOUT_AUTO, 0, 0, out);
}

int gs_cuda_mat_create_system(gs_engine *e, const gs_csr *A, gs_mat **out)
{
    return mat_create_impl(e, A, GS_FP64, GS_CUDA_LAYOUT_AUTO, 0, 1, out);
}

/* A deferred matrix's layout, by the rule, from its own CSR: taken over
 * again where the rule picks CSR, else consumed (in steps where it lies in
 * chunk-mapped memory and building whole would raise the peak) and freed. */
int gs_cuda_setup_done(gs_engine *e, gs_mat *A, int *laid_out)
{
    *laid_out = 0;
    if (!A || !A->deferred) return GS_OK;
    if (gs_cuda_of(e)->capturing) /* it synchronises */
        return gs_error_set(&e->err, GS_ERR_INTERNAL, "cuda setup_done while capturing");
    gs_cuda_fused_forget(e, A);
    const int64_t n = A->n_rows, nnz = A->nnz;
    int64_t *rp = A->row_ptr;
    int32_t *col = A->csr_col;
    double *val = (double *)A->csr_val;
    gs_cuda_vmm src[2] = {A->csr_vm[0], A->csr_vm[1]};
    const int mapped = src[0].base != NULL;
    A->row_ptr = NULL, A->csr_col = NULL, A->csr_val = NULL;
    A->csr_vm[0] = gs_cuda_vmm{}, A->csr_vm[1] = gs_cuda_vmm{};
    A->bytes -= (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + sizeof(double));
    A->deferred = 0;
    memset(A->max_blocks, 0, sizeof A->max_blocks); /* the caps of the layout's own kernels */
    int status = build_layout(e, A, rp, col, val, GS_CUDA_LAYOUT_AUTO, 0, 1, NULL,
                              mapped ? src : NULL, 0);
    name_layout(A);
    if (status == GS_OK) status = spmv_prepare(e, A);
    *laid_out = 1;
    if (A->row_ptr != rp) { /* not taken over again: consumed, or copied */
        gs_cuda_vmm_free(e, &src[0]);
        gs_cuda_vmm_free(e, &src[1]);
        if (!mapped) {
            gs_cuda_free(e, val, nnz * sizeof(double));
            gs_cuda_free(e, col, nnz * sizeof(int32_t));
        }
        gs_cuda_free(e, rp, (n + 1) * sizeof(int64_t));
    }
    return status;
}

void gs_cuda_mat_destroy(gs_engine *e, gs_mat *m)
{
    if (!m) return;
    gs_cuda_fused_forget(e, m);
    const int64_t n = m->n_rows, nnz = m->nnz;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    for (int u = 0; u < 2; u++) {
        if (m->spsv[u]) CUSPARSE_TEARDOWN(&gs_cuda_of(e)->teardown, cusparseSpSV_destroyDescr(m->spsv[u]));
        if (m->tri_descr[u])
            CUSPARSE_TEARDOWN(&gs_cuda_of(e)->teardown, cusparseDestroySpMat(m->tri_descr[u]));
        gs_cuda_free(e, m->spsv_buffer[u], m->spsv_bytes[u]);
    }
    long_rows_free(e, m);
    gs_cuda_free(e, m->slice_ptr, (m->n_slices + 1) * sizeof(int64_t));
    if (m->sell_vm[0].base || m->sell_vm[1].base) {
        gs_cuda_vmm_free(e, &m->sell_vm[0]);
        gs_cuda_vmm_free(e, &m->sell_vm[1]);
    } else {
        gs_cuda_free(e, m->sell_col, m->padded * sizeof(int32_t));
        gs_cuda_free(e, m->sell_val, m->padded * vsize);
    }
    gs_cuda_free(e, m->perm, n * sizeof(int32_t));
    gs_cuda_free(e, m->row_ptr, (n + 1) * sizeof(int64_t));
    if (m->csr_vm[0].base || m->csr_vm[1].base) {
        gs_cuda_vmm_free(e, &m->csr_vm[0]);
        gs_cuda_vmm_free(e, &m->csr_vm[1]);
    } else {
        gs_cuda_free(e, m->csr_col, nnz * sizeof(int32_t));
        gs_cuda_free(e, m->csr_val, nnz * vsize);
    }
    gs_cuda_free(e, m->tri_row_ptr, (n + 1) * sizeof(int32_t));
    gs_cuda_free(e, m->tri_col, nnz * sizeof(int32_t));
    gs_cuda_free(e, m->tri_val, nnz * sizeof(double));
    free(m);
}

/* ------------------------------------------------------------ for C code */

extern "C" const char *gs_cuda_mat_layout(const gs_mat *A) { return A->layout; }

extern "C" double gs_cuda_mat_fill_ratio(const gs_mat *A)
{
    if (A->format == GS_CUDA_CSR || A->nnz == 0) return 1.0;
    return (double)A->padded / (double)A->nnz;
}

extern "C" int gs_cuda_sm_count(gs_engine *e)
{
    return e && e->ops->kind == GS_ENGINE_CUDA ? gs_cuda_of(e)->sm_count : 0;
}

extern "C" double gs_cuda_mat_stream_bytes(const gs_mat *A)
{
    const double vsize = A->prec == GS_FP32 ? 4.0 : 8.0;
    /* the long rows' lists and carries: a chunk's row, pointers and sum;
     * a merge tile's row and two carries, a fix-up's tile */
    const double aux = A->long_mode == LONG_SPLIT   ? (double)A->n_chunks * 28.0 + (double)A->n_long * 16.0
                       : A->long_mode == LONG_MERGE ? (double)A->n_tiles * 20.0 + (double)A->n_fix * 4.0
                                                    : 0.0;
    if (A->format == GS_CUDA_CSR)
        return (double)A->nnz * (vsize + 4.0) + ((double)A->n_rows + 1.0) * 8.0 + aux;
    return (double)A->padded * (vsize + 4.0) + ((double)A->n_slices + 1.0) * 8.0 +
           (A->perm ? 4.0 * (double)A->n_rows : 0.0);
}
