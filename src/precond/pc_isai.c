/* pc_isai.c - ILU(0) with incomplete sparse approximate inverses of its
 * factors, ISAI(k): H. Anzt, E. Chow, T. Huckle, J. Dongarra, "Batched
 * generation of incomplete sparse approximate inverses on GPUs", ScalA 2016
 * (DOI 10.1109/ScalA.2016.11); ISAI itself: Anzt, Huckle, Braeckle,
 * Dongarra, Parallel Computing 71 (2018).
 *
 * A ~ L U (ILU(0)); M_L ~ L^-1 on the pattern S of |L|^k with
 * (L M_L - I)_ij = 0 for (i, j) in S, column by column: for column j with
 * pattern J, L(J, J) M_L(J, j) = I(J, j), a small triangular system (the
 * paper's Algorithm 1); M_U ~ U^-1 likewise. Apply: z = M_U (M_L r), or with
 * s sweeps per factor x <- x + M (b - T x), or exact triangular solves
 * (--trisolve exact, the paper's "trisol" column). Any column length works:
 * the CPU reference has no 32-entry limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ilu0.h"
#include "isai.h"
#include "mmio.h"

const gs_param_decl gs_isai_params[] = {
    GS_PARAM_INT_DECL("isai-power", 1, 8, "1",
                      "k of ISAI(k): M_L, M_U on the patterns of |L|^k, |U|^k"),
    GS_PARAM_INT_DECL("isai-sweeps", 0, 100, "0",
                      "fixed-point sweeps per factor after x = M b: x <- x + M (b - T x)"),
    GS_PARAM_CHOICE_DECL("trisolve", "isai|exact", "isai",
                         "apply L, U by the ISAI products, or by exact triangular solves "
                         "(trisol)"),
    GS_PARAM_CHOICE_DECL("scale", "yes|no", "yes",
                         "factorise S A S with S = diag(|a_ii|)^-1/2 (unit diagonal), then map "
                         "the factors back so M acts on A"),
    GS_PARAM_CHOICE_DECL("ilu", "exact|cusparse|sweeps:N", "exact",
                         "ILU(0) exact (our level-scheduled IKJ on the GPU), exact by "
                         "cuSPARSE's csrilu02 (GPU; the CPU factorises exactly), or N "
                         "fixed-point sweeps (Chow-Patel), 1 <= N <= 1000"),
    GS_PARAM_DECL_END,
};

typedef gs_isai_data isai_data;
typedef gs_isai_options isai_options;

/* ---- generation: one small triangular solve per column ---- */

/* The first position in [lo, hi) of the ascending a with a[pos] >= key (hi
 * if none), galloping from lo: probes lo, lo + 1, lo + 3, ... then a binary
 * search in the last bracket, O(log d) for an answer d places on (a merge
 * step that moves one place costs one probe, as a linear merge does). */
static int64_t gallop(const int32_t *a, int64_t lo, int64_t hi, int32_t key)
{
    int64_t bound = 1;
    while (lo + bound - 1 < hi && a[lo + bound - 1] < key) bound *= 2;
    int64_t left = lo + bound / 2, right = lo + bound - 1 < hi ? lo + bound - 1 : hi;
    while (left < right) {
        const int64_t mid = left + (right - left) / 2;
        if (a[mid] < key) left = mid + 1;
        else right = mid;
    }
    return left;
}

/* Row p of the substitution on T(J, J): (rhs - sum_q t_{J_p J_q} x_q) /
 * t_{J_p J_p} over q in [q0, q1] (q = p gives the diagonal), T(J_p, J_q)
 * found by merging row J_p of T with J (both sorted). The merge gallops on
 * whichever side is behind, so a row costs O(min(nnz(T(J_p, :)), |J|) log)
 * and a column O(nnz(T(J, J)) log |J|) (a plain merge walks all of J for
 * every row: O(|J|^2), 5e7 steps for bloweybq's column of 10001, and all
 * of a dense row of T for every short column that meets it). The terms are
 * the plain merge's, subtracted in the same order: the same values to the
 * bit. A zero diagonal gives Inf, which the caller catches. */
static double isai_solve_row(const gs_csr *T, const int32_t *rows, int64_t p, int64_t q0,
                             int64_t q1, double rhs, const double *x)
{
    const int32_t r = rows[p];
    const int64_t end = T->row_ptr[r + 1];
    double sum = rhs, diag = 0.0;
    int64_t q = q0, a = T->row_ptr[r];
    while (a < end && q <= q1) {
        if (T->col[a] < rows[q])
            a = gallop(T->col, a + 1, end, rows[q]);
        else if (T->col[a] > rows[q])
            q = gallop(rows, q + 1, q1 + 1, T->col[a]);
        else if (q == p)
            diag = T->val[a++], q++;
        else
            sum -= T->val[a++] * x[q++];                    /* - t_{J_p J_q} x_q */
    }
    return sum / diag;
}

/* Column j of M ~ T^-1, T lower: J = rows[0..m) ascending, rows[0] = j.
 * Forward substitution on T(J, J) x = e_1. */
static void isai_column_lower(const gs_csr *T, const int32_t *rows, int64_t m, double *x)
{
    for (int64_t p = 0; p < m; p++) x[p] = isai_solve_row(T, rows, p, 0, p, p == 0 ? 1.0 : 0.0, x);
}

/* Column j of M ~ T^-1, T upper: J ascending, rows[m-1] = j; backward
 * substitution on T(J, J) x = e_m. */
static void isai_column_upper(const gs_csr *T, const int32_t *rows, int64_t m, double *x)
{
    for (int64_t p = m - 1; p >= 0; p--)
        x[p] = isai_solve_row(T, rows, p, p, m - 1, p == m - 1 ? 1.0 : 0.0, x);
}

/* M ~ T^-1 on the pattern of |T|^k, T triangular with its diagonal stored.
 * Columns are independent (the paper's batch): OpenMP over columns. The
 * columns are built as the rows of M^T, then transposed. --time-limit:
 * every 16th column asks; a thread that finds it past sets stop and every
 * thread skips the columns it has left. */
int gs_isai_generate(gs_pc *pc, const gs_csr *T, int lower, int k, gs_csr *M, int64_t *longest,
                     gs_error *err)
{
    gs_csr S = {0}, MT = {0};
    int status = GS_OK, stop = 0;
    GS_TRY(gs_csr_pattern_power(T, k, 0, &S, err));
    GS_TRY(gs_csr_transpose(&S, &MT, err));                 /* row j of MT: column j of S */
    MT.val = gs_malloc((size_t)MT.nnz * sizeof(double) + 1, "ISAI values", err);
    if (!MT.val) GS_TRY(GS_ERR_NOMEM);
    int64_t lmax = 0;
    int32_t bad = MT.n_rows;
#pragma omp parallel for schedule(dynamic, 64) reduction(max : lmax) reduction(min : bad)
    for (int32_t j = 0; j < MT.n_rows; j++) {
        int stopped;
#pragma omp atomic read
        stopped = stop;
        if (stopped) continue;
        if ((j & 15) == 0 && gs_pc_past_deadline(pc)) {
#pragma omp atomic write
            stop = 1;
            continue;
        }
        const int64_t b = MT.row_ptr[j], m = MT.row_ptr[j + 1] - b;
        if (lower)
            isai_column_lower(T, MT.col + b, m, MT.val + b);
        else
            isai_column_upper(T, MT.col + b, m, MT.val + b);
        if (m > lmax) lmax = m;
        for (int64_t p = 0; p < m; p++)
            if (!isfinite(MT.val[b + p]) && j < bad) bad = j;
    }
    if (stop) GS_TRY(gs_pc_deadline(pc, lower ? "isai L" : "isai U", err));
    *longest = lmax;
    if (bad < MT.n_rows)
        GS_TRY(gs_error_set(err, GS_ERR_NUMERIC,
                            "ISAI: column %d of M_%s is not finite (that column's small "
                            "triangular system of %s overflows: the factor is too "
                            "ill-conditioned)",
                            (int)bad + 1, lower ? "L" : "U", lower ? "L" : "U"));
    GS_TRY(gs_csr_transpose(&MT, M, err));
cleanup:
    gs_csr_free(&S);
    gs_csr_free(&MT);
    return status;
}

/* ---- scaling: factors of S A S mapped back to factors of A ---- */

/* x_ij <- left_i x_ij right_j. A similarity (left = 1 / right) leaves the
 * diagonal as it is: skip it, so that L keeps an exact unit diagonal. */
static void scale_two_sided(gs_csr *X, const double *left, const double *right, int similarity)
{
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < X->n_rows; i++)
        for (int64_t p = X->row_ptr[i]; p < X->row_ptr[i + 1]; p++)
            if (!similarity || X->col[p] != i) X->val[p] *= left[i] * right[X->col[p]];
}

/* With ~ for the factors of S A S: L = S^-1 ~L S, U = S^-1 ~U S^-1 (the ILU(0)
 * of A itself, by uniqueness), M_L = S^-1 ~M_L S, M_U = S ~M_U S, so that
 * M_U M_L = S (~M_U ~M_L) S: the scaled preconditioner acting on A. */
static int isai_unscale(isai_data *d, const double *s, gs_error *err)
{
    const int32_t n = d->L.n_rows;
    double *sinv = gs_malloc((size_t)n * sizeof *sinv + 1, "inverse scaling", err);
    if (!sinv) return GS_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) sinv[i] = 1.0 / s[i];
    scale_two_sided(&d->L, sinv, s, 1);
    scale_two_sided(&d->U, sinv, sinv, 0);
    if (d->ML.val) scale_two_sided(&d->ML, sinv, s, 1);
    if (d->MU.val) scale_two_sided(&d->MU, s, s, 0);
    free(sinv);
    return GS_OK;
}

/* S = diag(|a_ii|)^-1/2 and As = S A S. */
static int isai_scale(const gs_csr *A, double *s, gs_csr *As, gs_error *err)
{
    gs_error local = {0};
    if (gs_csr_unit_diagonal_scaling(A, s, &local) != GS_OK)
        return gs_error_set(err, local.status, "--scale yes: %s (--scale no factorises A "
                            "unscaled)", local.msg);
    int status = gs_csr_copy(A, As, err);
    if (status == GS_OK) gs_csr_scale_symmetric(As, s);
    return status;
}

/* ---- apply ---- */

/* x ~ T^-1 b: x = M b, then sweeps x <- x + M (b - T x). */
static int isai_solve(gs_pc *pc, const gs_mat *T, const gs_mat *M, const gs_vec *b, gs_vec *x)
{
    isai_data *d = pc->data;
    const gs_engine_ops *o = pc->eng->ops;
    int status = o->spmv_dot(pc->eng, M, b, x, NULL, GS_SLOT_NONE);
    for (long s = 0; s < d->sweeps && status == GS_OK; s++) {
        status = o->copy(pc->eng, b, d->t);                  /* t = b */
        if (status == GS_OK)                                 /* t = b - T x */
            status = o->spmv_axpby(pc->eng, gs_coef_const(-1), T, x, gs_coef_const(1), d->t);
        if (status == GS_OK)                                 /* x = x + M t */
            status = o->spmv_axpby(pc->eng, gs_coef_const(1), M, d->t, gs_coef_const(1), x);
    }
    return status;
}

int gs_isai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    isai_data *d = pc->data;
    const gs_engine_ops *o = pc->eng->ops;
    if (d->exact) {                                         /* z = U \ (L \ r) */
        int status = o->trisolve(pc->eng, d->L_eng, 1, r, d->y);
        return status == GS_OK ? o->trisolve(pc->eng, d->U_eng, 0, d->y, z) : status;
    }
    int status = isai_solve(pc, d->L_eng, d->ML_eng, r, d->y); /* y ~ L^-1 r */
    return status == GS_OK ? isai_solve(pc, d->U_eng, d->MU_eng, d->y, z) : status;
}

void gs_isai_destroy(gs_pc *pc)
{
    isai_data *d = pc->data;
    if (!d) return;
    gs_engine *e = pc->eng;
    e->ops->mat_destroy(e, d->L_eng);
    e->ops->mat_destroy(e, d->U_eng);
    e->ops->mat_destroy(e, d->ML_eng);
    e->ops->mat_destroy(e, d->MU_eng);
    e->ops->vec_destroy(e, d->y);
    e->ops->vec_destroy(e, d->t);
    gs_csr_free(&d->L);
    gs_csr_free(&d->U);
    gs_csr_free(&d->ML);
    gs_csr_free(&d->MU);
    if (d->device_free) d->device_free(pc);
    free(d);
}

/* PREFIX_L.mtx, PREFIX_U.mtx and (unless --trisolve exact, which builds
 * none) PREFIX_ML.mtx, PREFIX_MU.mtx: the factors of A (unscaled). */
static int isai_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    isai_data *d = pc->data;
    const struct {
        const char *suffix;
        const gs_csr *M;
        const char *what;
    } files[] = {
        {"L", &d->L, "gpusolve isai: ILU(0) factor L (unit lower, diagonal stored)"},
        {"U", &d->U, "gpusolve isai: ILU(0) factor U"},
        {"ML", &d->ML, "gpusolve isai: M_L ~ L^-1, (L M_L - I) = 0 on its pattern"},
        {"MU", &d->MU, "gpusolve isai: M_U ~ U^-1, (U M_U - I) = 0 on its pattern"},
    };
    for (int f = 0; f < 4; f++) {
        if (!files[f].M->row_ptr) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s_%s.mtx", prefix, files[f].suffix);
        int status = gs_mm_write_csr(path, files[f].M, 0, files[f].what, err);
        if (status != GS_OK) return status;
    }
    return GS_OK;
}

/* ---- setup ---- */

int gs_isai_read_options(const gs_params *p, isai_options *o, gs_error *err)
{
    const char *trisolve, *scale, *ilu;
    int status = GS_OK;
    GS_TRY(gs_params_int(p, gs_isai_params, "isai-power", &o->power, err));
    GS_TRY(gs_params_int(p, gs_isai_params, "isai-sweeps", &o->sweeps, err));
    GS_TRY(gs_params_choice(p, gs_isai_params, "trisolve", &trisolve, err));
    GS_TRY(gs_params_choice(p, gs_isai_params, "scale", &scale, err));
    GS_TRY(gs_params_choice(p, gs_isai_params, "ilu", &ilu, err));
    o->exact = strcmp(trisolve, "exact") == 0;
    o->scale = strcmp(scale, "yes") == 0;
    o->ilu_sweeps = strncmp(ilu, "sweeps:", 7) == 0 ? atoi(ilu + 7) : 0; /* checked: 1..1000 */
    o->ilu_cusparse = strcmp(ilu, "cusparse") == 0;
cleanup:
    return status;
}

/* The registry's check_params (precond.h): exact solves build no ISAI, so
 * its options would be ignored. */
int gs_isai_check_params(const gs_params *params, gs_error *err)
{
    isai_options o;
    int status = gs_isai_read_options(params, &o, err);
    if (status == GS_OK && o.exact && (o.sweeps > 0 || o.power != 1))
        status = gs_error_set(err, GS_ERR_USAGE, "--%s %ld has no effect with --trisolve exact",
                              o.sweeps > 0 ? "isai-sweeps" : "isai-power",
                              o.sweeps > 0 ? o.sweeps : o.power);
    return status;
}

int gs_isai_host_factor_check(const gs_csr *A, const isai_options *o, gs_error *err)
{
    gs_csr As = {0}, L = {0}, U = {0};
    double *s = NULL;
    int status = GS_OK;
    if (o->scale) {
        s = gs_malloc((size_t)A->n_rows * sizeof *s + 1, "isai scaling", err);
        if (!s) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(isai_scale(A, s, &As, err));
    }
    if (o->ilu_sweeps > 0)
        GS_TRY(gs_ilu0_sweeps(o->scale ? &As : A, o->ilu_sweeps, &L, &U, err));
    else
        GS_TRY(gs_ilu0(o->scale ? &As : A, &L, &U, err));
cleanup:
    gs_csr_free(&As);
    gs_csr_free(&L);
    gs_csr_free(&U);
    free(s);
    return status;
}

/* --time-limit for gs_ilu0_bounded (ctx: the gs_pc). */
static int isai_past_deadline(const void *pc)
{
    return gs_pc_past_deadline((const gs_pc *)pc);
}

/* ILU(0) (of S A S when scaling), then ISAI of both factors, then back to A. */
static int isai_build_host(gs_pc *pc, const gs_csr *A, const isai_options *o, isai_data *d,
                           gs_error *err)
{
    gs_csr As = {0};
    double *s = NULL;
    int64_t longest_L = 0, longest_U = 0;
    int status = GS_OK;
    double t0;
    if (o->scale) {
        t0 = gs_pc_stage_begin(pc);
        s = gs_malloc((size_t)A->n_rows * sizeof *s + 1, "isai scaling", err);
        if (!s) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(isai_scale(A, s, &As, err));
        GS_TRY(gs_pc_stage_end(pc, "scaling", t0));
    }
    t0 = gs_pc_stage_begin(pc);
    if (o->ilu_sweeps > 0) {
        GS_TRY(gs_ilu0_sweeps(o->scale ? &As : A, o->ilu_sweeps, &d->L, &d->U, err));
    } else {
        status = gs_ilu0_bounded(o->scale ? &As : A, isai_past_deadline, pc, &d->L, &d->U, err);
        if (status == GS_ERR_TIME_LIMIT) status = gs_pc_deadline(pc, "ilu0", err);
        GS_TRY(status);
    }
    GS_TRY(gs_pc_stage_end(pc, "ilu0", t0));
    if (!o->exact) {
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(gs_isai_generate(pc, &d->L, 1, (int)o->power, &d->ML, &longest_L, err));
        GS_TRY(gs_pc_stage_end(pc, "isai L", t0));
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(gs_isai_generate(pc, &d->U, 0, (int)o->power, &d->MU, &longest_U, err));
        GS_TRY(gs_pc_stage_end(pc, "isai U", t0));
        gs_kv_num(&pc->extra, "ML_longest_column", (double)longest_L);
        gs_kv_num(&pc->extra, "MU_longest_column", (double)longest_U);
    }
    if (o->scale) {
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(isai_unscale(d, s, err));
        GS_TRY(gs_pc_stage_end(pc, "scaling", t0));
    }
cleanup:
    gs_csr_free(&As);
    free(s);
    return status;
}

/* Engine objects: L, U for sweeps and exact solves; M_L, M_U for ISAI. */
static int isai_upload(gs_pc *pc, isai_data *d)
{
    gs_engine *e = pc->eng;
    const int need_factors = d->exact || d->sweeps > 0;
    int status = GS_OK;
    if (need_factors) {
        GS_TRY(e->ops->mat_create(e, &d->L, GS_FP64, &d->L_eng));
        GS_TRY(e->ops->mat_create(e, &d->U, GS_FP64, &d->U_eng));
    }
    if (!d->exact) {
        GS_TRY(e->ops->mat_create(e, &d->ML, GS_FP64, &d->ML_eng));
        GS_TRY(e->ops->mat_create(e, &d->MU, GS_FP64, &d->MU_eng));
    }
    GS_TRY(gs_isai_vectors(pc, d, d->L.n_rows));
cleanup:
    return status;
}

/* With exact solves, one solve with each factor now: an engine may analyse a
 * triangular matrix at its first solve (cuSPARSE SpSV), which belongs to the
 * setup and may not happen while a Krylov method captures its iteration
 * (BiCGSTAB's first apply is inside the captured body). */
static int isai_warm_exact(gs_pc *pc, isai_data *d, int32_t n)
{
    gs_engine *e = pc->eng;
    gs_vec *t = NULL;
    int status = e->ops->vec_create(e, n, &t);
    if (status == GS_OK) status = e->ops->set(e, d->y, 1.0);
    if (status == GS_OK) status = e->ops->trisolve(e, d->L_eng, 1, d->y, t);
    if (status == GS_OK) status = e->ops->trisolve(e, d->U_eng, 0, t, d->y);
    e->ops->vec_destroy(e, t);
    return status;
}

int gs_isai_vectors(gs_pc *pc, isai_data *d, int32_t n)
{
    gs_engine *e = pc->eng;
    int status = e->ops->vec_create(e, n, &d->y);
    if (status == GS_OK && d->sweeps > 0 && !d->exact) status = e->ops->vec_create(e, n, &d->t);
    if (status == GS_OK && d->exact && d->L_eng && d->U_eng && e->ops->trisolve) status = isai_warm_exact(pc, d, n);
    return status;
}

/* What the report shows: nnz(M) and the bytes of one apply. */
void gs_isai_describe(gs_pc *pc, const isai_data *d, const gs_isai_sizes *z)
{
    const double n8 = 8.0 * z->n;
    const double bL = z->bytes_L, bU = z->bytes_U;
    if (d->exact) {
        pc->nnz = z->nnz_L + z->nnz_U;
        pc->apply_bytes = bL + bU + 4 * n8;                 /* r, y twice, z */
        snprintf(pc->description, sizeof pc->description,
                 "ILU(0)%s with exact triangular solves (trisol), scale=%s",
                 d->ilu_sweeps > 0 ? " by sweeps" : d->ilu_cusparse ? " by cuSPARSE" : "",
                 d->scaled ? "yes" : "no");
    } else {
        const double bML = z->bytes_ML, bMU = z->bytes_MU;
        pc->nnz = z->nnz_ML + z->nnz_MU + (d->sweeps > 0 ? z->nnz_L + z->nnz_U : 0);
        /* M b: b, x; each sweep: copy (2), t = b - T x (3), x += M t (3). */
        pc->apply_bytes = bML + bMU + 4 * n8 + d->sweeps * (bL + bU + bML + bMU + 16 * n8);
        char ilu[32] = "";
        if (d->ilu_sweeps > 0) snprintf(ilu, sizeof ilu, " ilu=sweeps:%d,", d->ilu_sweeps);
        if (d->ilu_cusparse) snprintf(ilu, sizeof ilu, " ilu=cusparse,");
        snprintf(pc->description, sizeof pc->description,
                 "ILU(0)+ISAI(%ld),%s sweeps=%ld, scale=%s", d->power, ilu, d->sweeps,
                 d->scaled ? "yes" : "no");
        gs_kv_num(&pc->extra, "nnz_ML", (double)z->nnz_ML);
        gs_kv_num(&pc->extra, "nnz_MU", (double)z->nnz_MU);
    }
    gs_kv_num(&pc->extra, "nnz_L", (double)z->nnz_L);
    gs_kv_num(&pc->extra, "nnz_U", (double)z->nnz_U);
    gs_kv_str(&pc->extra, "trisolve", d->exact ? "exact" : "isai");
    if (d->ilu_sweeps > 0) gs_kv_num(&pc->extra, "ilu_sweeps", (double)d->ilu_sweeps);
    pc->symmetric = 0;
}

int gs_isai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    isai_options o;
    isai_data *d = NULL;
    double t0;
    int status = GS_OK;
    GS_TRY(gs_isai_read_options(pc->params, &o, err));
    if (A->n_rows != A->n_cols)
        GS_TRY(gs_error_set(err, GS_ERR_INPUT, "the matrix is %d x %d, not square",
                            (int)A->n_rows, (int)A->n_cols));
    if (o.exact && !pc->eng->ops->trisolve)
        GS_TRY(gs_error_set(err, GS_ERR_UNSUPPORTED,
                            "--trisolve exact: the %s engine has no triangular solve",
                            pc->eng->ops->name));
    d = gs_calloc(1, sizeof *d, "isai", err);
    if (!d) GS_TRY(GS_ERR_NOMEM);
    pc->data = d;
    pc->destroy = gs_isai_destroy;
    d->power = o.power, d->sweeps = o.sweeps, d->exact = o.exact, d->scaled = o.scale;
    d->ilu_sweeps = o.ilu_sweeps;
    GS_TRY(isai_build_host(pc, A, &o, d, err));
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(isai_upload(pc, d));
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
    pc->apply = gs_isai_apply;
    if (!d->exact && d->sweeps == 0) gs_pc_set_products(pc, d->MU_eng, d->ML_eng); /* M_U M_L */
    pc->save = isai_save;
    const gs_isai_sizes z = {
        .n = d->L.n_rows, .nnz_L = d->L.nnz, .nnz_U = d->U.nnz, .nnz_ML = d->ML.nnz,
        .nnz_MU = d->MU.nnz, .bytes_L = gs_csr_stream_bytes(&d->L, GS_FP64),
        .bytes_U = gs_csr_stream_bytes(&d->U, GS_FP64),
        .bytes_ML = d->ML.row_ptr ? gs_csr_stream_bytes(&d->ML, GS_FP64) : 0,
        .bytes_MU = d->MU.row_ptr ? gs_csr_stream_bytes(&d->MU, GS_FP64) : 0};
    gs_isai_describe(pc, d, &z);
cleanup:
    return gs_pc_setup_exit(pc, status, err);
}
