/* pc_ssorai.c - SSOR approximate inverse (SSOR-AI), the CPU reference setup:
 * the comparator (SSORPCGA) of the MIC paper, its reference [3]: Helfenstein
 * and Koko, "Parallel preconditioned conjugate gradient algorithm on GPU",
 * J. Comput. Appl. Math. 236 (2012) 3584-3590.
 *
 * A = L + D + L^T (L strictly lower) and SSOR's
 *   M = (2 - omega)^-1 (D/omega + L) (D/omega)^-1 (D/omega + L)^T,
 * so M^-1 = omega (2 - omega) K^-T D^-1 K^-1 with K = I + omega L D^-1.
 * omega L D^-1 is strictly lower (nilpotent), so K^-1 is the finite Neumann
 * series sum_j (-omega L D^-1)^j; SSOR-AI keeps its first m + 1 terms,
 *   G_m = I - omega L D^-1 (+ (omega L D^-1)^2 for m = 2),
 * and M^-1 = omega (2 - omega) G_m^T D^-1 G_m = F^T F with
 *   F = sqrt(omega (2 - omega)) D^-1/2 G_m          (lower triangular).
 * F is unit-diagonal times a positive diagonal, hence nonsingular, so F^T F
 * is symmetric positive definite for every A with a positive diagonal and
 * 0 < omega < 2. Apply: z = F^T (F r), two SpMVs, no triangular solve.
 *
 * Stages: "factor G" (checks, F's pattern and values), "transpose" (F^T),
 * "upload" (F and F^T to the engine). docs/ssor-ai.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mmio.h"
#include "ssorai.h"

/* omega: SSOR needs 0 < omega < 2 (M^-1 carries omega (2 - omega) > 0); the
 * declared range is closed, as every declaration's, so it stops 1e-3 short
 * of both ends, where omega (2 - omega), and M^-1 with it, vanishes. */
const gs_param_decl gs_ssorai_params[] = {
    GS_PARAM_DOUBLE_DECL("omega", 0.001, 1.999, "1",
                         "SSOR relaxation parameter, inside (0, 2) (ssor-ai: 1 is symmetric "
                         "Gauss-Seidel)"),
    GS_PARAM_INT_DECL("ssor-terms", 1, 2, "1",
                      "powers of omega L D^-1 kept in the Neumann series of (I + omega L "
                      "D^-1)^-1: 1 gives G = I - omega L D^-1 (SSOR-AI), 2 adds (omega L "
                      "D^-1)^2 (pattern of L^2 added)"),
    GS_PARAM_DECL_END,
};

int gs_ssorai_read_options(const gs_pc *pc, gs_ssorai_options *o, gs_error *err)
{
    int status = gs_params_double(pc->params, gs_ssorai_params, "omega", &o->omega, err);
    if (status == GS_OK)
        status = gs_params_int(pc->params, gs_ssorai_params, "ssor-terms", &o->terms, err);
    return status;
}

double gs_ssorai_scale(double omega) { return sqrt(omega * (2.0 - omega)); }

int gs_ssorai_check_input(const gs_csr *A, gs_error *err)
{
    if (A->n_rows != A->n_cols)
        return gs_error_set(err, GS_ERR_INPUT, "the matrix is %d x %d, not square",
                            (int)A->n_rows, (int)A->n_cols);
    if (!A->val) return gs_error_set(err, GS_ERR_INPUT, "the matrix has no values");
    int status = gs_csr_require_symmetric(A, GS_SYMMETRY_RTOL, "ssor-ai", err);
    for (int32_t i = 0; i < A->n_rows && status == GS_OK; i++) {
        const int64_t p = gs_csr_find(A, i, i);
        if (p < 0)
            return gs_error_set(err, GS_ERR_INPUT, "row %d has no diagonal entry: A is not "
                                "positive definite", (int)i + 1);
        if (!(A->val[p] > 0.0) || !isfinite(A->val[p]))
            return gs_error_set(err, GS_ERR_INPUT, "row %d has diagonal entry %g: A is not "
                                "positive definite", (int)i + 1, A->val[p]);
    }
    return status;
}

/* Row i of F on its pattern (row i of P): G_m's row, then the scaling.
 * pos: n entries, -1 outside row i (restored on return). The loop order is
 * the CUDA setup's (ssorai_values_kernel), so both round alike:
 *   g_ik -= c_ik,  c_ik = omega a_ik / d_k                   (k < i)
 *   g_ij += c_ik c_kj                                        (m = 2, j < k)
 * and f_ij = (sqrt(omega (2 - omega)) / sqrt(d_i)) g_ij. */
static void ssorai_row(const gs_csr *A, const double *d, const gs_csr *P, int32_t i,
                       const gs_ssorai_options *o, double scale, int64_t *pos, double *val)
{
    for (int64_t p = P->row_ptr[i]; p < P->row_ptr[i + 1]; p++) {
        pos[P->col[p]] = p;
        val[p] = P->col[p] == i ? 1.0 : 0.0;                 /* I */
    }
    for (int64_t q = A->row_ptr[i]; q < A->row_ptr[i + 1] && A->col[q] < i; q++) {
        const int32_t k = A->col[q];
        const double c_ik = o->omega * A->val[q] / d[k];     /* (omega L D^-1)_ik */
        val[pos[k]] -= c_ik;
        if (o->terms < 2) continue;
        for (int64_t r = A->row_ptr[k]; r < A->row_ptr[k + 1] && A->col[r] < k; r++) {
            const int32_t j = A->col[r];
            const double c_kj = o->omega * A->val[r] / d[j];
            val[pos[j]] += c_ik * c_kj;                      /* ((omega L D^-1)^2)_ij */
        }
    }
    const double s = scale / sqrt(d[i]);
    for (int64_t p = P->row_ptr[i]; p < P->row_ptr[i + 1]; p++) {
        val[p] *= s;
        pos[P->col[p]] = -1;
    }
}

static int ssorai_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int ssorai_thread(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* F on the host: its pattern (tril(A), or that of (E + |tril(A)|)^2 for two
 * terms: I, L and L^2), then the values row by row. */
static int ssorai_factor(const gs_csr *A, const gs_ssorai_options *o, gs_csr *F, gs_error *err)
{
    gs_csr low = {0}, P = {0};
    const int32_t n = A->n_rows;
    const int n_threads = ssorai_threads();
    double *d = NULL;
    int64_t **pos = NULL;
    int status = GS_OK;
    GS_TRY(gs_csr_lower(A, 1, &low, err));
    if (o->terms >= 2) GS_TRY(gs_csr_pattern_power(&low, 2, 1, &P, err));
    else P = low, low = (gs_csr){0};
    free(P.val);
    P.val = gs_malloc((size_t)P.nnz * sizeof *P.val + 1, "ssor-ai F values", err);
    d = gs_malloc((size_t)n * sizeof *d + 1, "ssor-ai diagonal", err);
    pos = gs_calloc((size_t)n_threads, sizeof *pos, "ssor-ai positions", err);
    if (!P.val || !d || !pos) GS_TRY(GS_ERR_NOMEM);
    for (int t = 0; t < n_threads; t++) {
        if (!(pos[t] = gs_malloc((size_t)n * sizeof **pos + 1, "ssor-ai position row", err)))
            GS_TRY(GS_ERR_NOMEM);
        for (int32_t j = 0; j < n; j++) pos[t][j] = -1;
    }
    gs_csr_diagonal(A, d); /* positive: checked */
    const double scale = gs_ssorai_scale(o->omega);
#pragma omp parallel for schedule(dynamic, 256)
    for (int32_t i = 0; i < n; i++) ssorai_row(A, d, &P, i, o, scale, pos[ssorai_thread()], P.val);
cleanup:
    for (int t = 0; pos && t < n_threads; t++) free(pos[t]);
    free(pos);
    free(d);
    gs_csr_free(&low);
    if (status != GS_OK) gs_csr_free(&P);
    *F = P;
    return status;
}

int gs_ssorai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    gs_ssorai_data *s = pc->data;
    const gs_engine_ops *ops = pc->eng->ops;
    int status = ops->spmv_dot(pc->eng, s->F_eng, r, s->t, NULL, GS_SLOT_NONE); /* t = F r */
    if (status != GS_OK) return status;
    return ops->spmv_dot(pc->eng, s->FT_eng, s->t, z, r, slot);                  /* z = F^T t */
}

int gs_ssorai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return gs_ssorai_apply_dot(pc, r, z, GS_SLOT_NONE);
}

void gs_ssorai_destroy(gs_pc *pc)
{
    gs_ssorai_data *s = pc->data;
    if (!s) return;
    pc->eng->ops->mat_destroy(pc->eng, s->F_eng);
    pc->eng->ops->mat_destroy(pc->eng, s->FT_eng);
    pc->eng->ops->vec_destroy(pc->eng, s->t);
    gs_csr_free(&s->F);
    free(s);
}

void gs_ssorai_describe(gs_pc *pc, const gs_ssorai_options *o, int64_t nnz_F, int32_t n,
                        int64_t nnz_A)
{
    const double stream_F = (double)nnz_F * 12.0 + ((double)n + 1.0) * 8.0; /* fp64 CSR */
    pc->nnz = nnz_F;
    pc->apply_bytes = 2.0 * stream_F + 32.0 * n; /* F, F^T; read r, write t, read t, write z */
    pc->symmetric = 1;
    snprintf(pc->description, sizeof pc->description,
             "omega=%g terms=%ld, M^-1 = F^T F, F = sqrt(omega(2-omega)) D^-1/2 (I - omega L "
             "D^-1%s)", o->omega, o->terms, o->terms >= 2 ? " + (omega L D^-1)^2" : "");
    gs_kv_num(&pc->extra, "omega", o->omega);
    gs_kv_num(&pc->extra, "terms", (double)o->terms);
    gs_kv_num(&pc->extra, "mu_F", (double)nnz_F / (double)(nnz_A > 0 ? nnz_A : 1));
}

/* PREFIX_F.mtx: F (lower triangular), M^-1 = F^T F. */
static int ssorai_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_ssorai_data *s = pc->data;
    char path[4096], comment[512];
    snprintf(path, sizeof path, "%s_F.mtx", prefix);
    snprintf(comment, sizeof comment, "gpusolve ssor-ai: %s", pc->description);
    return gs_mm_write_csr(path, &s->F, 0, comment, err);
}

int gs_ssorai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_ssorai_options o;
    gs_csr FT = {0};
    int status = GS_OK;
    gs_ssorai_data *s = gs_calloc(1, sizeof *s, "ssor-ai", err);
    if (!s) return GS_ERR_NOMEM;
    pc->data = s;
    pc->destroy = gs_ssorai_destroy;
    GS_TRY(gs_ssorai_read_options(pc, &o, err));
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_ssorai_check_input(A, err));
    GS_TRY(ssorai_factor(A, &o, &s->F, err));
    GS_TRY(gs_pc_stage_end(pc, "factor G", t0));
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_csr_transpose(&s->F, &FT, err));
    GS_TRY(gs_pc_stage_end(pc, "transpose", t0));
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(pc->eng->ops->mat_create(pc->eng, &s->F, GS_FP64, &s->F_eng));
    GS_TRY(pc->eng->ops->mat_create(pc->eng, &FT, GS_FP64, &s->FT_eng));
    GS_TRY(pc->eng->ops->vec_create(pc->eng, A->n_rows, &s->t));
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
    gs_ssorai_describe(pc, &o, s->F.nnz, A->n_rows, A->nnz);
    pc->apply = gs_ssorai_apply;
    pc->apply_dot = gs_ssorai_apply_dot;
    gs_pc_set_products(pc, s->FT_eng, s->F_eng);
    pc->save = ssorai_save;
cleanup:
    gs_csr_free(&FT);
    return gs_pc_setup_exit(pc, status, err);
}
