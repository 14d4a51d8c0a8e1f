/* gspai.cu - GSPAI-Opt set up on the GPU: the CUDA setup of the reference in
 * src/precond/pc_gspai.c (same pattern, same strategy rule, M within the
 * least-squares perturbation bound). Chu, Wang, Chen, Gao, "An optimized
 * sparse approximate inverse preconditioning algorithm on GPU", BenchCouncil
 * TBench 3 (2023) 100087, §2.
 *
 * Stages (the reference's names, the paper's Fig. 1):
 *   pattern        A^T on the device, J_k = pattern of (E + |A|)^k by the
 *                  toolkit's symbolic pattern power (gs_dcsr_pattern_power)
 *   dimensions     Pre-GSPAI: n2_k, n1_k, the workspace of every column,
 *                  n2max, n2avg, alpha, beta, the strategy (S1: one group
 *                  size q = min(2^alpha, 256) for every column; S2: q_k per
 *                  column, columns sorted by q_k descending, a block holds
 *                  256 / q_k columns of one size: the paper's Fig. 3)
 *   least squares  Compute-GSPAI by the batched engine (spai_lsq.cu): for
 *                  each group size a shared-memory kernel where the columns'
 *                  workspace fits the device's shared memory (read from the
 *                  device, split among the block's groups), the
 *                  global-memory kernel for the others
 *   assemble       Post-GSPAI: M = MT^T
 *   upload         M as an engine matrix */
#include <stdio.h>
#include <string.h>

#include "spai_cuda.h"

extern "C" int gs_gspai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dcsr AT = {}, MT = {};
    spai_lsq_sizes sizes = {};
    spai_lsq_report rep = {};
    spai_lsq_options o = {1, 4, "gspai-opt", "--pattern-power 2 widens J", NULL, GS_SPAI_QR_MAX_DEFAULT};
    long k, qr_max;
    int alpha = 0, beta = 0;
    double t0;
    const char *strategy;
    int status = GS_OK;
    if (e->ops->kind != GS_ENGINE_CUDA) return gs_gspai_setup_cpu(pc, A, err);
    GS_TRY(gs_params_int(pc->params, gs_gspai_params, "pattern-power", &k, err));
    GS_TRY(gs_params_choice(pc->params, gs_gspai_params, "strategy", &strategy, err));
    GS_TRY(gs_params_int(pc->params, gs_gspai_params, "qr-max", &qr_max, err));
    o.qr_max = qr_max;
    if (A->n_rows != A->n_cols) {
        status = gs_error_set(err, GS_ERR_INPUT, "gspai-opt: A is %d x %d, not square",
                              (int)A->n_rows, (int)A->n_cols);
        goto cleanup;
    }
    t0 = gs_pc_stage_start(pc, "pattern");
    GS_TRY(spai_cuda_columns_of_A(pc, A, &AT));
    GS_TRY(gs_dcsr_pattern_power(e, &AT, (int)k, 1, &MT)); /* row k of (E + |A^T|)^k */
    GS_TRY(gs_cuda_alloc(e, &MT.val, (size_t)MT.nnz * sizeof(double), "gspai-opt: values of M^T"));
    MT.vsize = sizeof(double);
    GS_TRY(gs_pc_stage_end(pc, "pattern", t0));

    t0 = gs_pc_stage_start(pc, "dimensions");    /* Pre-GSPAI */
    GS_TRY(spai_lsq_sizes_compute(e, &AT, &MT, o.qr_max, &sizes, &rep));
    o.strategy = gs_gspai_strategy(rep.n2max, rep.n2avg, strategy, &alpha, &beta);
    o.q = spai_lsq_s1_group(alpha);                /* (1)-(2), at least 4 lanes */
    GS_TRY(gs_pc_stage_end(pc, "dimensions", t0));

    t0 = gs_pc_stage_start(pc, "least squares"); /* Compute-GSPAI */
    o.pc = pc;
    GS_TRY(spai_lsq_solve(e, &AT, &MT, &sizes, &o, &rep, err));
    spai_lsq_sizes_free(e, &sizes);
    gs_dcsr_free(e, &AT);
    GS_TRY(gs_pc_stage_end(pc, "least squares", t0));

    GS_TRY(spai_cuda_finish(pc, &MT, GS_FP64, "gpusolve gspai-opt (cuda setup): M ~ A^-1, by rows"));
    snprintf(pc->description, sizeof pc->description, "pattern-power=%ld strategy=S%d (%s)", k,
             o.strategy, strcmp(strategy, "auto") ? "forced" : "auto");
    spai_cuda_report(pc, &rep);
    gs_kv_num(&pc->extra, "alpha", alpha);
    gs_kv_num(&pc->extra, "beta", beta);
    gs_kv_str(&pc->extra, "strategy", o.strategy == 1 ? "S1" : "S2");
    gs_kv_str(&pc->extra, "strategy_from", strcmp(strategy, "auto") ? "forced" : "auto");
    if (o.strategy == 1) gs_kv_num(&pc->extra, "q", o.q);
cleanup:
    if (gs_cuda_of(e)->stream) cudaStreamSynchronize(gs_cuda_of(e)->stream);
    spai_lsq_sizes_free(e, &sizes);
    gs_dcsr_free(e, &AT);
    gs_dcsr_free(e, &MT);
    if (status != GS_OK) gs_engine_fail(e, err);
    return status;
}
