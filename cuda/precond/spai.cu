/* spai.cu - SPAI-ME set up on the GPU, CW-SPAI: the CUDA setup of the
 * reference in src/precond/pc_spai.c (same parameters, same pattern, M within
 * the least-squares perturbation bound). Mehri Dehnavi, Fernández,
 * Giannacopoulos, "Accelerating Sparse Approximate Inverse Preconditioners
 * based on Matrix Entries on GPUs" (McGill), eq. (1) and §III.
 *
 * Stages (the reference's names):
 *   pattern        A^T on the device (the columns of A as rows), J of every
 *                  column by eq. (1), one warp a column (ballot compaction),
 *                  and the sizes n1_k, n2_k of every local problem
 *   least squares  the batched engine (spai_lsq.cu); --group-size warp is
 *                  CW-SPAI's mapping: a warp a column, 8 columns a 256-thread
 *                  block, Â in shared memory; columns too large for it in
 *                  global memory, a block a column, in slots of bounded
 *                  memory. --group-size auto (the default) maps the columns
 *                  by gspai-opt's rule instead (S1 with q = 2^alpha lanes, or
 *                  S2): the column's work is serial per lane (lane 0's norms,
 *                  a lane per reflector update), so a warp a column leaves 24
 *                  of its 32 lanes idle on the n2 <= 8 columns of a 3-D
 *                  stencil and holds a quarter of the columns in flight that
 *                  q = 8 does: 15.8 ms against 8.0 ms for the same columns on
 *                  poisson3d:128 (H100; docs/perf-notebook.md). Same M to the bit.
 *   assemble       M = MT^T (the toolkit's transpose)
 *   upload         M as an engine matrix (fp32 with --precond-precision single) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "spai_cuda.h"

#define FULL_MASK 0xffffffffu
#define COLUMN_WARPS 8

/* Column i of A (row i of AT): J = {j != i : |a_ji| > (1 - tau) max_j |a_ji|}
 * ∪ {i}, sorted (the reference's column_pattern, the same expressions).
 * One warp a column. COUNT: |J| into mt_rp[i + 1]; else J into mt_col. */
template <bool FILL>
__global__ void spai_pattern_kernel(int32_t n, const int64_t *__restrict__ at_rp,
                                    const int32_t *__restrict__ at_col,
                                    const double *__restrict__ at_val, double tau,
                                    int64_t *mt_rp, int32_t *__restrict__ mt_col)
{
    const int lane = threadIdx.x & 31;
    const int32_t i = (int32_t)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (i >= n) return;
    const int64_t b = at_rp[i], e = at_rp[i + 1];
    double amax = 0.0;
    for (int64_t p = b + lane; p < e; p += 32) amax = fmax(amax, fabs(at_val[p]));
    for (int o = 16; o > 0; o >>= 1) amax = fmax(amax, __shfl_xor_sync(FULL_MASK, amax, o));
    const double threshold = (1.0 - tau) * amax;              /* eq. (1) */
    int64_t q = FILL ? mt_rp[i] : 0, below = 0;
    for (int64_t p0 = b; p0 < e; p0 += 32) {
        const int64_t p = p0 + lane;
        int32_t j = -1;
        bool keep = false;
        if (p < e) {
            j = at_col[p];
            keep = j != i && fabs(at_val[p]) > threshold;
        }
        const unsigned m = __ballot_sync(FULL_MASK, keep);
        const unsigned mb = __ballot_sync(FULL_MASK, keep && j < i);
        if (FILL && keep) /* i sits between the entries below and above it */
            mt_col[q + __popc(m & ((1u << lane) - 1)) + (j > i ? 1 : 0)] = j;
        q += __popc(m);
        below += __popc(mb);
    }
    if (lane == 0) {
        if (FILL) {
            mt_col[mt_rp[i] + below] = i;
        } else {
            mt_rp[i + 1] = q + 1;
            if (i == 0) mt_rp[0] = 0;
        }
    }
}

/* MT: row k = J_k, with room for the values (fp64). */
static int spai_pattern(gs_engine *e, const gs_dcsr *AT, double tau, gs_dcsr *MT)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int32_t n = AT->n;
    const unsigned grid = gs_dblocks(n, COLUMN_WARPS);
    int64_t nnz = 0;
    int status = GS_OK;
    GS_TRY(gs_dcsr_alloc_rows_counted(e, MT, n, "spai: row pointers of M^T"));
    GS_TRY(CUDA_LAUNCH(&e->err, spai_pattern_kernel<false>, grid, 32 * COLUMN_WARPS, 0, c->stream,
                       n, (const int64_t *)AT->rp, (const int32_t *)AT->col,
                       (const double *)AT->val, tau, MT->rp, (int32_t *)NULL));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, MT->rp, n, &nnz));
    GS_TRY(gs_dcsr_alloc_entries(e, MT, nnz, sizeof(double), "spai: M^T"));
    GS_TRY(CUDA_LAUNCH(&e->err, spai_pattern_kernel<true>, grid, 32 * COLUMN_WARPS, 0, c->stream,
                       n, (const int64_t *)AT->rp, (const int32_t *)AT->col,
                       (const double *)AT->val, tau, MT->rp, MT->col));
cleanup:
    return status;
}

extern "C" int gs_spai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dcsr AT = {}, MT = {};
    spai_lsq_sizes sizes = {};
    spai_lsq_report rep = {};
    /* CW-SPAI: a warp (q = 32) a column, eight columns a block, for every column */
    spai_lsq_options o = {1, 32, "spai", "a larger --tau widens J", NULL, GS_SPAI_QR_MAX_DEFAULT};
    double tau, t0;
    long qr_max;
    int alpha = 0, beta = 0;
    const char *precision, *group;
    int status = GS_OK;
    if (e->ops->kind != GS_ENGINE_CUDA) return gs_spai_setup_cpu(pc, A, err);
    GS_TRY(gs_params_double(pc->params, gs_spai_params, "tau", &tau, err));
    GS_TRY(gs_params_choice(pc->params, gs_spai_params, "precond-precision", &precision, err));
    GS_TRY(gs_params_choice(pc->params, gs_spai_params, "group-size", &group, err));
    GS_TRY(gs_params_int(pc->params, gs_spai_params, "qr-max", &qr_max, err));
    o.qr_max = qr_max;
    if (A->n_rows != A->n_cols) {
        status = gs_error_set(err, GS_ERR_INPUT, "spai: A is %d x %d, not square",
                              (int)A->n_rows, (int)A->n_cols);
        goto cleanup;
    }
    t0 = gs_pc_stage_start(pc, "pattern");
    GS_TRY(spai_cuda_columns_of_A(pc, A, &AT));
    GS_TRY(spai_pattern(e, &AT, tau, &MT));
    GS_TRY(spai_lsq_sizes_compute(e, &AT, &MT, o.qr_max, &sizes, &rep));
    if (strcmp(group, "auto") == 0) {             /* gspai-opt's S1/S2 rule */
        o.strategy = gs_gspai_strategy(rep.n2max, rep.n2avg, "auto", &alpha, &beta);
        o.q = spai_lsq_s1_group(alpha);
    }
    GS_TRY(gs_pc_stage_end(pc, "pattern", t0));

    t0 = gs_pc_stage_start(pc, "least squares");
    o.pc = pc;
    GS_TRY(spai_lsq_solve(e, &AT, &MT, &sizes, &o, &rep, err));
    spai_lsq_sizes_free(e, &sizes);
    gs_dcsr_free(e, &AT);
    GS_TRY(gs_pc_stage_end(pc, "least squares", t0));

    GS_TRY(spai_cuda_finish(pc, &MT, strcmp(precision, "single") == 0 ? GS_FP32 : GS_FP64,
                            "gpusolve spai (SPAI-ME, cuda setup): M ~ A^-1, by rows"));
    snprintf(pc->description, sizeof pc->description, "tau=%g precond-precision=%s group-size=%s",
             tau, precision, group);
    spai_cuda_report(pc, &rep);
    gs_kv_str(&pc->extra, "strategy", o.strategy == 1 ? "S1" : "S2");
    if (o.strategy == 1) gs_kv_num(&pc->extra, "q", o.q);
cleanup:
    if (gs_cuda_of(e)->stream) cudaStreamSynchronize(gs_cuda_of(e)->stream);
    spai_lsq_sizes_free(e, &sizes);
    gs_dcsr_free(e, &AT);
    gs_dcsr_free(e, &MT);
    if (status != GS_OK) gs_engine_fail(e, err);
    return status;
}
