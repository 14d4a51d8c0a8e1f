/* mic.cu - mic's CUDA setup, M = L D L^T (modified incomplete Cholesky), factorised and
 * applied on the device: the MICPCGA paper (../shared/papers/mic-pcg-heat3d.txt, its
 * GPUFBS of Section 3.3) for any pattern; reference src/precond/pc_mic.c.
 *
 * Stages, named as the CPU setup's where they do the same work:
 *   csr of A / transfer  A's CSR on the device (the engine's copy, or uploaded)
 *   factorisation        checks, L's and L^T's patterns, L's levels (device analysis), the
 *                        elimination scheduled by them, one sync-free launch or a launch a
 *                        level (mic_factor.cu; report item factor_scheme), retried with the
 *                        shift sequence of the reference (gs_mic_next_shift)
 *   transpose            L's values gathered from L^T's (the elimination writes L^T)
 *   layout               the substitutions: L^T's levels and the choice of scheme (the
 *                        block scheme's schedules and packed factors), or cuSPARSE's
 *                        matrices (--trisolve exact)
 * Apply: y = L^-1 r, then z = L^-T (D^-1 y) with D^-1 and CG's r.z fused into the backward
 * solve (apply_dot); by the toolkit's sync-free or level-scheduled substitution
 * (cuda/sparse/trisolve_*.cu).
 * --trisolve auto times both on the factors once (after a warm-up) and keeps the faster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mic_cuda.h"

extern "C" {
#include "loop.h" /* GS_FUSED_FACTOR_MAX_ROWS */
#include "mmio.h"
}

typedef struct mic_cuda_data {
    mic_factor f;      /* L, L^T (values), D, L's levels */
    gs_dtri upper;     /* L^T's levels */
    double *dinv;      /* device, n */
    double *y;         /* device, n: L^-1 r */
    gs_dtri_scheme how;
    int exact;         /* --trisolve exact: cuSPARSE on L_eng, LT_eng */
    gs_mat *L_eng, *LT_eng; /* exact, and for a fused kernel (mic_publish_factors) */
    gs_vec *t, *u, *w; /* exact: L \ r, D^-1 (also for a fused kernel), D^-1 (L \ r) */
    double omega, shift;
    int tries;
    int on_host;       /* the factorisation ran on the host (gs_dfactor_on_host) */
} mic_cuda_data;

static void mic_cuda_destroy(gs_pc *pc)
{
    mic_cuda_data *m = (mic_cuda_data *)pc->data;
    if (!m) return;
    gs_engine *e = pc->eng;
    const size_t bytes = ((size_t)m->f.n + 1) * sizeof(double);
    if (gs_cuda_of(e)->stream)
        CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaStreamSynchronize(gs_cuda_of(e)->stream));
    gs_dtri_free(e, &m->upper);
    gs_cuda_free(e, m->dinv, bytes);
    gs_cuda_free(e, m->y, bytes);
    e->ops->mat_destroy(e, m->L_eng);
    e->ops->mat_destroy(e, m->LT_eng);
    e->ops->vec_destroy(e, m->t);
    e->ops->vec_destroy(e, m->u);
    e->ops->vec_destroy(e, m->w);
    mic_factor_free(e, &m->f);
    free(m);
    pc->data = NULL;
}

/* z = L^-T (D^-1 (L^-1 r)), and S[slot] = r.z where slot != GS_SLOT_NONE, in as few
 * kernels as the scheme allows (docs/mic.md, "Kernels per iteration"):
 * - syncfree: the fill of y (NaN bytes), the forward solve, which also fills z for the
 *   backward one (a store per row), and the backward solve with D^-1 and r.z fused
 *   (per-block partials, summed in a fixed order by the last block): 3 operations;
 * - levels: a launch per level, the last level of the backward solve summing r.z;
 * - exact (cuSPARSE's SpSV): t = L \ r, w = D^-1 t with S[slot] = t.w, z = L^T \ w.
 *   t.w = t^T D^-1 t = r^T L^-T D^-1 L^-1 r = r.z, the same number in exact arithmetic
 *   (and positive by construction), without a pass over r and z of its own. */
static int mic_cuda_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    mic_cuda_data *m = (mic_cuda_data *)pc->data;
    gs_engine *e = pc->eng;
    int status = GS_OK;
    if (slot != GS_SLOT_NONE) GS_TRY(gs_cuda_check_slot(e, slot, "mic apply_dot"));
    if (m->exact) {
        GS_TRY(e->ops->trisolve(e, m->L_eng, 1, r, m->t));                 /* t = L \ r    */
        GS_TRY(e->ops->pointwise_mult_dot(e, m->u, m->t, m->w, slot));     /* w = D^-1 t   */
        GS_TRY(e->ops->trisolve(e, m->LT_eng, 1, m->w, z));                /* z = L^T \ w  */
        goto cleanup;
    }
    {
        gs_dtri_fused fwd = {}, bwd = {};
        if (m->how != GS_DTRI_LEVELS) fwd.fill = z->d, bwd.x_filled = 1;
        if (slot != GS_SLOT_NONE) bwd.w = r->d, bwd.dot = gs_cuda_of(e)->S + slot;
        GS_TRY(gs_dtri_solve_fused(e, &m->f.lower, m->how, (const double *)m->f.L.val, 1, NULL,
                                   r->d, m->y, &fwd));                       /* y = L \ r */
        GS_TRY(gs_dtri_solve_fused(e, &m->upper, m->how, (const double *)m->f.U.val, 1, m->dinv,
                                   m->y, z->d, &bwd));           /* z = L^T \ (D^-1 y), r.z */
    }
cleanup:
    return status;
}

static int mic_cuda_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return mic_cuda_apply_dot(pc, r, z, GS_SLOT_NONE);
}

/* PREFIX_L.mtx (unit lower, diagonal stored) and PREFIX_D.mtx, as the reference's. */
static int mic_cuda_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    mic_cuda_data *m = (mic_cuda_data *)pc->data;
    gs_engine *e = pc->eng;
    gs_csr L = {};
    double *d = NULL;
    char path[4096], what[160];
    int status = GS_OK;
    GS_TRY(gs_dcsr_download(e, &m->f.L, &L));
    d = (double *)gs_malloc(((size_t)m->f.n + 1) * sizeof(double), "mic D", err);
    if (!d) GS_TRY(GS_ERR_NOMEM);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d, m->f.d, (size_t)m->f.n * sizeof(double),
                                              cudaMemcpyDeviceToHost, gs_cuda_of(e)->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(gs_cuda_of(e)->stream)));
    snprintf(what, sizeof what, "gpusolve mic (cuda setup): M = L D L^T, L unit lower, "
             "omega=%g shift=%g", m->omega, m->shift);
    snprintf(path, sizeof path, "%s_L.mtx", prefix);
    GS_TRY(gs_mm_write_csr(path, &L, 0, what, err));
    snprintf(what, sizeof what, "gpusolve mic (cuda setup): D of M = L D L^T, omega=%g shift=%g",
             m->omega, m->shift);
    snprintf(path, sizeof path, "%s_D.mtx", prefix);
    GS_TRY(gs_mm_write_vector(path, d, m->f.n, what, err));
cleanup:
    if (status != GS_OK && e->err.status != GS_OK) gs_engine_fail(e, err);
    gs_csr_free(&L);
    free(d);
    return status;
}

/* ------------------------------------------------------------ the stages */

/* A's CSR on the device (gs_dcsr_of_A): the engine's fp64 copy of this A when
 * there is one (stage "csr of A"), else uploaded (stage "transfer"). */
static int mic_device_A(gs_pc *pc, const gs_csr *A, gs_dcsr *dA, gs_cuda_csr_view *view)
{
    int status = GS_OK, from_engine = 0;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_dcsr_of_A(pc->eng, pc->A, A, "mic", dA, view, &from_engine));
    GS_TRY(gs_pc_stage_end(pc, from_engine ? "csr of A" : "transfer", t0));
cleanup:
    return status;
}

/* Factorisations of A + alpha diag(A) until the pivots are positive: alpha = m->shift,
 * then (unless fixed) the reference's sequence up to its bound; the reference's message. */
static int mic_factorise_shifted(gs_pc *pc, const gs_dcsr *dA, mic_cuda_data *m, int fixed,
                                 gs_error *err)
{
    int status = GS_OK;
    for (m->tries = 1;; m->tries++) {
        GS_TRY(mic_cuda_factorise(pc, dA, m->shift, m->omega, &m->f, err)); /* and the deadline */
        if (m->f.fail_row == m->f.n) return GS_OK;
        const double next = fixed ? 0.0 : gs_mic_next_shift(m->shift);
        if (next == 0.0) break;
        m->shift = next;
    }
    status = gs_error_set(err, GS_ERR_NUMERIC,
                          "non-positive pivot d = %g in row %d (A is not positive definite, or "
                          "the incomplete factorisation broke down; --mic-shift X factorises "
                          "A + X diag(A) instead)", m->f.fail_pivot, (int)m->f.fail_row + 1);
    if (!fixed)
        gs_error_prefix(err, "%d shifts up to alpha = %g tried (the bound is %g), the last: ",
                        m->tries, m->shift, 1e3);
cleanup:
    return status;
}

/* The factorisation where the device's would be latency-bound (gs_dfactor_on_host: thin
 * levels, or a hub's long row of L): the reference's code on the host (gs_mic_factor_host,
 * its shifts and messages), L^T's values and D uploaded into the device's arrays (the same
 * pattern, triu(A)'s rows: mic_pattern_kernel). */
static int mic_factorise_host(gs_pc *pc, const gs_csr *A, mic_cuda_data *m, int fixed,
                              gs_error *err)
{
    gs_engine *e = pc->eng;
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = m->f.n;
    gs_csr LT = {};
    gs_mic_stats st = {0, 0.0};
    int status = GS_OK;
    double *d = (double *)gs_malloc(((size_t)n + 1) * sizeof(double), "mic: D on the host", err);
    if (!d) return GS_ERR_NOMEM;
    GS_TRY(gs_mic_factor_host(pc, A, m->omega, fixed, &m->shift, &LT, d, &m->tries, &st, err));
    if (LT.nnz != m->f.U.nnz)
        GS_TRY(gs_error_set(err, GS_ERR_INTERNAL, "the host's L^T has %lld entries, the device's "
                            "pattern %lld", (long long)LT.nnz, (long long)m->f.U.nnz));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->f.U.val, LT.val, (size_t)LT.nnz * sizeof(double),
                                              cudaMemcpyHostToDevice, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->f.d, d, (size_t)n * sizeof(double),
                                              cudaMemcpyHostToDevice, s)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(s))); /* LT and d are freed below */
    m->f.fail_row = n, m->f.fail_pivot = 0.0;
    m->f.dropped = st.dropped, m->f.min_ratio = st.min_ratio;
cleanup:
    gs_csr_free(&LT);
    free(d);
    return status;
}

/* D^-1 on the device. */
__global__ void mic_invert_kernel(int32_t n, const double *__restrict__ d, double *__restrict__ dinv)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinv[i] = 1.0 / d[i];
}

/* One apply (forward and backward substitution, the scheme m->how or cuSPARSE's), timed
 * on the stream: *ms is the first run's time (module loading, cuSPARSE's analysis
 * included) when that passed cap_ms, else the best of two more. The cap keeps a scheme
 * that is hopeless on this matrix from costing the setup seconds. */
static int mic_time_apply(gs_pc *pc, const gs_vec *r, gs_vec *z, float cap_ms, float *ms)
{
    gs_engine *e = pc->eng;
    cudaStream_t s = gs_cuda_of(e)->stream;
    cudaEvent_t ev[2] = {NULL, NULL};
    int status = GS_OK;
    GS_TRY(CUDA_CALL(&e->err, cudaEventCreate(&ev[0])));
    GS_TRY(CUDA_CALL(&e->err, cudaEventCreate(&ev[1])));
    for (int rep = 0; rep < 3; rep++) {
        float t = 0.0f;
        GS_TRY(CUDA_CALL(&e->err, cudaEventRecord(ev[0], s)));
        GS_TRY(mic_cuda_apply(pc, r, z));
        GS_TRY(CUDA_CALL(&e->err, cudaEventRecord(ev[1], s)));
        GS_TRY(CUDA_CALL(&e->err, cudaEventSynchronize(ev[1])));
        GS_TRY(CUDA_CALL(&e->err, cudaEventElapsedTime(&t, ev[0], ev[1])));
        if (rep == 0) {
            *ms = t;
            if (t > cap_ms) break;
        } else if (rep == 1 || t < *ms) {
            *ms = t;
        }
    }
cleanup:
    if (ev[0]) CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaEventDestroy(ev[0]));
    if (ev[1]) CUDA_TEARDOWN(&gs_cuda_of(e)->teardown, cudaEventDestroy(ev[1]));
    return status;
}

static const char *mic_scheme_name(gs_dtri_scheme how)
{
    return how == GS_DTRI_LEVELS ? "levels" : how == GS_DTRI_BLOCKS ? "blocks" : "syncfree";
}

/* The block scheme's schedules and packed factors, both triangles (L unit; L^T unit, D^-1
 * applied as its scaling). */
static int mic_prepare_blocks(gs_pc *pc, mic_cuda_data *m)
{
    gs_engine *e = pc->eng;
    int status = GS_OK;
    GS_TRY(gs_dtri_prepare_blocks(e, &m->f.lower, (const double *)m->f.L.val, 1, 0));
    GS_TRY(gs_dtri_prepare_blocks(e, &m->upper, (const double *)m->f.U.val, 1, 0));
cleanup:
    return status;
}

/* The block scheme's shape in the report (where it is the scheme kept). */
static void mic_describe_blocks(gs_pc *pc, const mic_cuda_data *m)
{
    gs_kv_num(&pc->extra, "fbs_chunk_rows", m->upper.chunk_rows);
    gs_kv_num(&pc->extra, "fbs_chunks", m->upper.n_chunks);
    gs_kv_num(&pc->extra, "fbs_super_rows", (double)m->upper.super_rows);
    gs_kv_num(&pc->extra, "fbs_band_levels", m->upper.band_levels);
    gs_kv_num(&pc->extra, "fbs_steps_LT", m->upper.n_steps);
}

/* --trisolve auto: each scheme timed on the factors (mic_time_apply: one run past its cap
 * ends its timing), the fastest kept. The block scheme first; the others are capped at 20x
 * its time (a scheme that far behind is not worth the setup's time to measure). Where the
 * levels are thin (fewer than MIC_TIMED_ROWS_PER_LEVEL rows a level on the mean) a launch a
 * level cannot win, and neither can the sync-free solve's trip through L2 a level against
 * the blocks' shared memory (docs/perf-notebook.md, issue 33): the block scheme is taken
 * untimed (no fbs_*_ms items then; a 20,000-level chain's one sync-free apply alone took
 * 96 ms on an H200). */
#define MIC_TIMED_ROWS_PER_LEVEL 64
static int mic_choose(gs_pc *pc, mic_cuda_data *m, const gs_vec *r, gs_vec *z)
{
    static const gs_dtri_scheme order[3] = {GS_DTRI_BLOCKS, GS_DTRI_SYNCFREE, GS_DTRI_LEVELS};
    float ms[3] = {0.0f, 0.0f, 0.0f};
    int status = GS_OK, best = -1, first = 0;
    const double rows_per_level = (double)m->f.n / (m->upper.n_levels > 0 ? m->upper.n_levels : 1);
    status = mic_prepare_blocks(pc, m);
    if (status == GS_ERR_NOMEM) { /* the packed copies do not fit: the other schemes only */
        gs_error_clear(&pc->eng->err);
        gs_dtri_free_blocks(pc->eng, &m->f.lower);
        gs_dtri_free_blocks(pc->eng, &m->upper);
        gs_kv_str(&pc->extra, "fbs_blocks", "out of device memory");
        status = GS_OK;
        first = 1;
    }
    GS_TRY(status);
    m->how = first == 0 ? GS_DTRI_BLOCKS : GS_DTRI_SYNCFREE;
    if (rows_per_level < MIC_TIMED_ROWS_PER_LEVEL) goto cleanup; /* thin levels: untimed */
    for (int k = first; k < 3; k++) {
        m->how = order[k];
        const float cap = k == first ? 1e3f : (ms[first] * 20.0f > 20.0f ? ms[first] * 20.0f : 20.0f);
        GS_TRY(mic_time_apply(pc, r, z, cap, &ms[k]));
        char key[32];
        snprintf(key, sizeof key, "fbs_%s_ms", mic_scheme_name(order[k]));
        gs_kv_num(&pc->extra, key, ms[k]);
        if (best < 0 || ms[k] < ms[best]) best = k;
    }
    m->how = order[best];
    if (m->how != GS_DTRI_BLOCKS) { /* the packed copies are not used: give them back */
        gs_dtri_free_blocks(pc->eng, &m->f.lower);
        gs_dtri_free_blocks(pc->eng, &m->upper);
    }
cleanup:
    return status;
}

/* L, L^T and D^-1 as engine objects (m->L_eng, m->LT_eng, m->u), copied from
 * the factorisation's device arrays; lower and upper: how the engine keeps
 * the triangles (GS_CUDA_TRI_LOWER / _UPPER for its exact trisolve, or
 * GS_CUDA_TRI_NONE where only a fused kernel reads them). */
static int mic_engine_factors(gs_engine *e, mic_cuda_data *m, gs_cuda_tri lower,
                              gs_cuda_tri upper)
{
    const int32_t n = m->f.n;
    int status = GS_OK;
    GS_TRY(gs_cuda_mat_from_device_csr(e, n, n, m->f.L.nnz, m->f.L.rp, m->f.L.col,
                                       (const double *)m->f.L.val, GS_FP64, lower, &m->L_eng));
    GS_TRY(gs_cuda_mat_from_device_csr(e, n, n, m->f.U.nnz, m->f.U.rp, m->f.U.col,
                                       (const double *)m->f.U.val, GS_FP64, upper, &m->LT_eng));
    GS_TRY(e->ops->vec_create(e, n, &m->u)); /* D^-1 */
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->u->d, m->dinv, (size_t)n * sizeof(double),
                                              cudaMemcpyDeviceToDevice, gs_cuda_of(e)->stream)));
cleanup:
    return status;
}

/* The substitutions: cuSPARSE's matrices (exact), or L^T's levels and the scheme, chosen
 * by choice ("syncfree", "levels") or, for "auto", by timing both once on the factors.
 * L^T's levels come from A's host rows where thin (gs_dtri_analyse_rows: row i of L^T
 * depends on the j > i of A's row i), and serve the fused kernel too (mic_publish_factors);
 * with exact only where the fused kernel may take the system. */
static int mic_layout(gs_pc *pc, const gs_csr *A, mic_cuda_data *m, const char *choice)
{
    gs_engine *e = pc->eng;
    const int32_t n = m->f.n;
    int status = GS_OK;
    float ms = 0.0f;
    gs_vec *probe = NULL, *out = NULL;
    if (!m->exact || n <= GS_FUSED_FACTOR_MAX_ROWS)
        GS_TRY(gs_dtri_analyse_rows(e, n, m->f.U.nnz, m->f.U.rp, m->f.U.col, A, 1, &m->upper));
    if (m->exact) {
        GS_TRY(mic_engine_factors(e, m, GS_CUDA_TRI_LOWER, GS_CUDA_TRI_UPPER));
        GS_TRY(e->ops->vec_create(e, n, &m->t));
        GS_TRY(e->ops->vec_create(e, n, &m->w));
        gs_kv_str(&pc->extra, "trisolve", "exact");
        /* timed as the others are (cuSPARSE's analysis in the first run, so at setup, not in
         * the first iteration), for the comparison on the same factors */
        GS_TRY(e->ops->vec_create(e, n, &probe));
        GS_TRY(e->ops->vec_create(e, n, &out));
        GS_TRY(e->ops->set(e, probe, 1.0));
        GS_TRY(mic_time_apply(pc, probe, out, 1e3f, &ms));
        gs_kv_num(&pc->extra, "fbs_exact_ms", ms);
        goto cleanup;
    }
    m->how = strcmp(choice, "levels") == 0   ? GS_DTRI_LEVELS
             : strcmp(choice, "blocks") == 0 ? GS_DTRI_BLOCKS
                                             : GS_DTRI_SYNCFREE;
    GS_TRY(e->ops->vec_create(e, n, &probe));
    GS_TRY(e->ops->vec_create(e, n, &out));
    GS_TRY(e->ops->set(e, probe, 1.0));
    if (strcmp(choice, "auto") == 0) {
        GS_TRY(mic_choose(pc, m, probe, out));
    } else { /* the forced scheme timed too, so that every run reports its apply */
        char key[32];
        if (m->how == GS_DTRI_BLOCKS) GS_TRY(mic_prepare_blocks(pc, m));
        GS_TRY(mic_time_apply(pc, probe, out, 1e3f, &ms));
        snprintf(key, sizeof key, "fbs_%s_ms", mic_scheme_name(m->how));
        gs_kv_num(&pc->extra, key, ms);
    }
    GS_TRY(gs_dtri_prepare_dot(e, &m->upper)); /* r.z fused into the backward solve */
    if (m->how == GS_DTRI_BLOCKS) mic_describe_blocks(pc, m);
    gs_kv_str(&pc->extra, "trisolve", mic_scheme_name(m->how));
cleanup:
    e->ops->vec_destroy(e, probe);
    e->ops->vec_destroy(e, out);
    return status;
}

/* The factors as engine matrices and D^-1 as an engine vector, described
 * for a fused kernel (gs_pc.factor): --trisolve exact has them; the other
 * schemes copy them where the fused kernel could take the system at all
 * (GS_FUSED_FACTOR_MAX_ROWS), a few hundred KiB at most. The fused kernel
 * packs them by the levels this setup found (L's, L^T's): no analysis again. */
static int mic_publish_factors(gs_pc *pc, mic_cuda_data *m)
{
    gs_engine *e = pc->eng;
    int status = GS_OK;
    if (!m->exact) {
        if (m->f.n > GS_FUSED_FACTOR_MAX_ROWS) return GS_OK;
        GS_TRY(mic_engine_factors(e, m, GS_CUDA_TRI_NONE, GS_CUDA_TRI_NONE));
    }
    gs_pc_set_factors(pc, m->L_eng, m->LT_eng, m->u);
    GS_TRY(gs_cuda_fused_prepare_factors(e, m->L_eng, m->LT_eng, &m->f.lower,
                                         m->upper.level_ptr ? &m->upper : NULL)); /* in Tp */
cleanup:
    return status;
}

static double mic_stream_bytes(const gs_dcsr *M)
{
    return (double)M->nnz * 12.0 + ((double)M->n + 1.0) * 8.0;
}

static void mic_cuda_describe(gs_pc *pc, const mic_cuda_data *m)
{
    const double n8 = 8.0 * m->f.n;
    pc->nnz = m->f.L.nnz;
    /* L \ r: r, y; L^T \ (D^-1 y) with r.z: y, D^-1, r, z (cuSPARSE's: r, t; D^-1, t, w
     * with t.w; w, z) */
    pc->apply_bytes = mic_stream_bytes(&m->f.L) + mic_stream_bytes(&m->f.U) + (m->exact ? 7 : 6) * n8;
    pc->symmetric = 1;
    snprintf(pc->description, sizeof pc->description, "%s, omega=%g, shift=%g",
             m->omega == 0 ? "IC(0)" : m->omega == 1 ? "MIC(0)" : "relaxed MIC(0)", m->omega,
             m->shift);
    gs_kv_num(&pc->extra, "dropped_fill", (double)m->f.dropped);
    gs_kv_num(&pc->extra, "min_pivot_ratio", m->f.min_ratio);
    gs_kv_num(&pc->extra, "omega", m->omega);
    gs_kv_num(&pc->extra, "shift", m->shift);
    gs_kv_num(&pc->extra, "shift_tries", m->tries);
    gs_kv_num(&pc->extra, "levels_L", m->f.lower.n_levels);
    gs_kv_str(&pc->extra, "levels_L_analysis", m->f.lower.on_host ? "host" : "device");
    gs_kv_str(&pc->extra, "factor_scheme", m->on_host ? "host" : m->f.syncfree ? "syncfree" : "levels");
    if (!m->exact) gs_kv_num(&pc->extra, "levels_LT", m->upper.n_levels);
    if (!m->exact)
        gs_kv_str(&pc->extra, "levels_LT_analysis", m->upper.on_host ? "host" : "device");
}

/* The stages after A is on the device. */
static int mic_cuda_build(gs_pc *pc, const gs_csr *A, const gs_dcsr *dA, mic_cuda_data *m,
                          int fixed, gs_error *err)
{
    gs_engine *e = pc->eng;
    const size_t bytes = ((size_t)A->n_rows + 1) * sizeof(double);
    int status = GS_OK;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(mic_cuda_patterns(e, A, dA, &m->f, err));
    /* thin levels only: a hub's long row of L costs the device's columns no wait of their
     * own (mic_factor.cu: a lane an entry; H200, hub:450: device 0.0175 s, host 0.0215 s) */
    m->on_host = gs_dfactor_on_host(e, &m->f.lower, 0);
    if (m->on_host)
        GS_TRY(mic_factorise_host(pc, A, m, fixed, err));
    else
        GS_TRY(mic_factorise_shifted(pc, dA, m, fixed, err));
    GS_TRY(gs_pc_stage_end(pc, "factorisation", t0));
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(mic_cuda_gather_L(e, &m->f));
    GS_TRY(gs_cuda_alloc(e, &m->dinv, bytes, "mic: D^-1"));
    GS_TRY(gs_cuda_alloc(e, &m->y, bytes, "mic: L^-1 r"));
    GS_TRY(CUDA_LAUNCH(&e->err, mic_invert_kernel, gs_dblocks(A->n_rows, 256), 256, 0,
                       gs_cuda_of(e)->stream, A->n_rows, (const double *)m->f.d, m->dinv));
    GS_TRY(gs_pc_stage_end(pc, "transpose", t0));
cleanup:
    return status;
}

extern "C" int gs_mic_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    if (e->ops->kind != GS_ENGINE_CUDA) return gs_mic_setup_cpu(pc, A, err);
    const int fixed = gs_params_lookup(pc->params, "mic-shift") != NULL;
    const char *choice = NULL;
    gs_dcsr dA = {};
    gs_cuda_csr_view view = {};
    mic_cuda_data *m = NULL;
    double t0 = 0.0;
    int status = GS_OK;
    m = (mic_cuda_data *)gs_calloc(1, sizeof *m, "mic", err);
    if (!m) return GS_ERR_NOMEM;
    pc->data = m;
    pc->destroy = mic_cuda_destroy;
    GS_TRY(gs_params_double(pc->params, gs_mic_params, "omega", &m->omega, err));
    GS_TRY(gs_params_double(pc->params, gs_mic_params, "mic-shift", &m->shift, err));
    GS_TRY(gs_params_choice(pc->params, gs_mic_params, "trisolve", &choice, err));
    m->exact = strcmp(choice, "exact") == 0;
    if (A->n_rows != A->n_cols || !A->val || A->n_rows == 0) GS_TRY(gs_mic_check_input(A, err));
    if (A->n_rows == 0) GS_TRY(gs_error_set(err, GS_ERR_INPUT, "the matrix has no rows"));
    GS_TRY(mic_device_A(pc, A, &dA, &view));
    status = mic_cuda_build(pc, A, &dA, m, fixed, err);
    gs_dcsr_release_A(e, &dA, &view);
    if (status == GS_ERR_UNSUPPORTED) {
        /* a pattern this setup does not take (mic_cuda_patterns): the reference's setup,
         * reported as setup=host */
        mic_cuda_destroy(pc);
        pc->destroy = NULL;
        gs_error_clear(err);
        gs_error_clear(&e->err);
        status = gs_mic_setup_cpu(pc, A, err);
        if (status == GS_OK) gs_kv_str(&pc->extra, "setup", "host");
        return status;
    }
    GS_TRY(status);
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(mic_layout(pc, A, m, choice));
    GS_TRY(mic_publish_factors(pc, m));
    GS_TRY(gs_pc_stage_end(pc, "layout", t0));
    mic_cuda_describe(pc, m);
    pc->apply = mic_cuda_apply;
    pc->apply_dot = mic_cuda_apply_dot;
    pc->save = mic_cuda_save;
cleanup:
    gs_dcsr_release_A(e, &dA, &view);
    return gs_pc_setup_exit(pc, status, err);
}
