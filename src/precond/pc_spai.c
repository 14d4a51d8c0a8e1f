/* pc_spai.c - SPAI-ME, the sparse approximate inverse whose column patterns
 * come from the large entries of A (CPU reference setup). Mehri Dehnavi,
 * Fernández, Giannacopoulos, "Accelerating Sparse Approximate Inverse
 * Preconditioners based on Matrix Entries on GPUs" (McGill), eq. (1).
 *
 * Column i of M: J = {j : |a_ji| > (1 - tau) max_j |a_ji|} ∪ {i} (the paper's
 * strict inequality: tau = 0 gives J = {i}, tau = 1 every stored nonzero of
 * column i), I = union of the row patterns of A(:,J), and m_i solves
 * min ||A(I,J) m - e_i(I)||_2 (spai_common.c). A zero diagonal is allowed:
 * only a column whose row i misses A(:,J) entirely (m_i = 0) is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spai_common.h"

const gs_param_decl gs_spai_params[] = {
    GS_PARAM_DOUBLE_DECL("tau", 0, 1, "0.9",
                         "SPAI-ME threshold: column i of M keeps rows j with |a_ji| > (1-tau) "
                         "max_j |a_ji| (and i); the paper's iteration counts (Table II) use 0.9"),
    GS_PARAM_CHOICE_DECL("precond-precision", "double|single", "double",
                         "store M in fp64 or fp32 (the paper builds M in single precision)"),
    GS_PARAM_CHOICE_DECL("group-size", "auto|warp", "auto",
                         "GPU setup: lanes a column; warp is CW-SPAI's (32, as the paper), auto "
                         "gspai-opt's rule from n2max and n2avg (measured faster); the same M "
                         "either way; the CPU setup ignores it"),
    GS_SPAI_QR_MAX_PARAM,
    GS_PARAM_DECL_END,
};

/* J for column i of A (row i of AT), sorted; out == NULL only counts. */
static int32_t column_pattern(const gs_csr *AT, int32_t i, double tau, int32_t *out)
{
    const int64_t start = AT->row_ptr[i], end = AT->row_ptr[i + 1];
    double amax = 0;
    for (int64_t p = start; p < end; p++) amax = fmax(amax, fabs(AT->val[p]));
    const double threshold = (1.0 - tau) * amax;               /* eq. (1) */
    int32_t count = 0;
    int diagonal_placed = 0;
    for (int64_t p = start; p < end; p++) {
        const int32_t j = AT->col[p];
        if (!diagonal_placed && j >= i) {                      /* i always in J */
            if (out) out[count] = i;
            count++, diagonal_placed = 1;
            if (j == i) continue;
        }
        if (fabs(AT->val[p]) > threshold) {
            if (out) out[count] = j;
            count++;
        }
    }
    if (!diagonal_placed) {
        if (out) out[count] = i;
        count++;
    }
    return count;
}

/* MT: row i holds J of column i of M (with room for the values). */
static int spai_pattern(const gs_csr *AT, double tau, gs_csr *MT, gs_error *err)
{
    const int32_t n = AT->n_rows;
    int64_t *counts = gs_malloc(((size_t)n + 1) * sizeof *counts, "spai pattern counts", err);
    if (!counts) return GS_ERR_NOMEM;
    counts[0] = 0;
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < n; i++) counts[i + 1] = column_pattern(AT, i, tau, NULL);
    for (int32_t i = 0; i < n; i++) counts[i + 1] += counts[i];
    int status = gs_csr_alloc(n, n, counts[n], 1, MT, err);
    if (status == GS_OK) {
        memcpy(MT->row_ptr, counts, ((size_t)n + 1) * sizeof *counts);
#pragma omp parallel for schedule(static)
        for (int32_t i = 0; i < n; i++) column_pattern(AT, i, tau, MT->col + MT->row_ptr[i]);
    }
    free(counts);
    return status;
}

int gs_spai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_csr AT = {0}, MT = {0};
    gs_spai_sizes sizes = {0};
    double tau;
    long qr_max;
    const char *precision;
    int status = GS_OK;
    GS_TRY(gs_params_double(pc->params, gs_spai_params, "tau", &tau, err));
    GS_TRY(gs_params_int(pc->params, gs_spai_params, "qr-max", &qr_max, err));
    GS_TRY(gs_params_choice(pc->params, gs_spai_params, "precond-precision", &precision, err));
    if (A->n_rows != A->n_cols) {
        status = gs_error_set(err, GS_ERR_INPUT, "spai: A is %d x %d, not square",
                              (int)A->n_rows, (int)A->n_cols);
        goto cleanup;
    }
    const gs_precision prec = strcmp(precision, "single") == 0 ? GS_FP32 : GS_FP64;

    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_csr_transpose(A, &AT, err));                    /* columns of A as rows */
    GS_TRY(spai_pattern(&AT, tau, &MT, err));
    GS_TRY(gs_spai_n1_sizes(&AT, &MT, qr_max, &sizes, err));
    gs_spai_n2_sizes(&MT, &sizes);
    GS_TRY(gs_pc_stage_end(pc, "pattern", t0));

    GS_TRY(gs_spai_finish(pc, &AT, &MT, qr_max, prec, "spai", "a larger --tau widens J",
                          "gpusolve spai (SPAI-ME): M ~ A^-1, by rows", err));

    snprintf(pc->description, sizeof pc->description, "tau=%g precond-precision=%s", tau,
             precision);
    gs_spai_report_sizes(pc, &sizes);
cleanup:
    if (status != GS_OK) gs_engine_fail(pc->eng, err);
    gs_csr_free(&AT);
    gs_csr_free(&MT);
    return status;
}
