/* isai.cu - ILU(0) with incomplete sparse approximate inverses of its
 * factors, set up entirely on the GPU: the CUDA setup of the reference in
 * src/precond/pc_isai.c (same parameters, same factors up to rounding).
 * Anzt, Chow, Huckle, Dongarra, "Batched generation of incomplete sparse
 * approximate inverses on GPUs", ScalA 2016.
 *
 * Stages, named as the reference's so that --engine both lines them up, each
 * timed after a synchronisation:
 *   csr of A   A's CSR from the engine's copy (or "transfer": an upload)
 *   scaling    S = diag(|a_ii|)^-1/2 and S A S (--scale yes), and at the end
 *              the factors mapped back to A (isai_ilu0.cu, here)
 *   ilu0       ILU(0) in place on S A S: our level-scheduled IKJ (--ilu exact),
 *              cuSPARSE csrilu02 (--ilu cusparse) or
 *              Chow-Patel sweeps (--ilu sweeps:N); L, U split (toolkit)
 *   isai L     M_L on |L|^k, the batched kernel, the long columns in one
 *              sparse excess system (isai_generate.cu)
 *   isai U     M_U on |U|^k
 *   upload     the engine matrices the apply uses (L, U with triangular-solve
 *              data for sweeps and --trisolve exact; M_L, M_U)
 * A failure a device check finds (a missing or zero diagonal, a zero pivot,
 * an overflow) is worded by the host reference (gs_isai_host_factor_check),
 * so that both engines say the same. The apply is the reference's
 * gs_isai_apply over the engine table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isai_cuda.h"
#include "isai_hooks.h"

extern "C" {
#include "mmio.h"
}


/* The CUDA setup's own copies of L and U (gs_isai_data.device). */
typedef struct isai_device_factors {
    gs_dcsr L, U;
    gs_engine *e;
} isai_device_factors;

static void isai_device_factors_free(gs_pc *pc)
{
    gs_isai_data *d = (gs_isai_data *)pc->data;
    isai_device_factors *f = (isai_device_factors *)d->device;
    if (!f) return;
    gs_dcsr_free(f->e, &f->L);
    gs_dcsr_free(f->e, &f->U);
    free(f);
    d->device = NULL;
}

/* ---------------------------------------------------------- back to A */

__global__ void isai_inverse_kernel(int32_t n, const double *__restrict__ s,
                                    double *__restrict__ sinv)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) sinv[i] = 1.0 / s[i];
}

/* LANES lanes a row (isai_row_lanes): x_ij <- x_ij (left_i right_j), the
 * reference's expression; a similarity (left = 1 / right) leaves the
 * diagonal as it is, so that L keeps an exact unit diagonal. */
template <int LANES>
__global__ void isai_scale_two_sided_kernel(int32_t n, const int64_t *__restrict__ rp,
                                            const int32_t *__restrict__ col,
                                            double *__restrict__ val,
                                            const double *__restrict__ left,
                                            const double *__restrict__ right, int similarity)
{
    const int lane = threadIdx.x % LANES;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    if (i >= n) return;
    for (int64_t p = rp[i] + lane; p < rp[i + 1]; p += LANES)
        if (!similarity || col[p] != i) val[p] = __dmul_rn(val[p], __dmul_rn(left[i], right[col[p]]));
}

static int isai_scale_two_sided(gs_engine *e, gs_dcsr *X, const double *left, const double *right,
                                int similarity)
{
    if (!X->rp || X->n == 0) return GS_OK;
    const int lanes = isai_row_lanes(X->n, X->nnz);
    return CUDA_LAUNCH(&e->err, ISAI_ROW_KERNEL(isai_scale_two_sided_kernel, lanes),
                       gs_dblocks(X->n, 256 / lanes), 256, 0, gs_cuda_of(e)->stream, X->n,
                       (const int64_t *)X->rp, (const int32_t *)X->col, (double *)X->val, left,
                       right, similarity);
}

/* L = S^-1 ~L S, U = S^-1 ~U S^-1, M_L = S^-1 ~M_L S, M_U = S ~M_U S (the
 * reference's isai_unscale). */
static int isai_unscale(gs_engine *e, const double *s, gs_dcsr *L, gs_dcsr *U, gs_dcsr *ML,
                        gs_dcsr *MU)
{
    const int32_t n = L->n;
    double *sinv = NULL;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &sinv, (size_t)n * sizeof(double), "isai: inverse scaling"));
    GS_TRY(CUDA_LAUNCH(&e->err, isai_inverse_kernel, gs_dblocks(n, 256), 256, 0,
                       gs_cuda_of(e)->stream, n, s, sinv));
    GS_TRY(isai_scale_two_sided(e, L, sinv, s, 1));
    GS_TRY(isai_scale_two_sided(e, U, sinv, sinv, 0));
    GS_TRY(isai_scale_two_sided(e, ML, sinv, s, 1));
    GS_TRY(isai_scale_two_sided(e, MU, s, s, 0));
cleanup:
    gs_cuda_free(e, sinv, (size_t)n * sizeof(double));
    return status;
}

/* ------------------------------------------------------------- A's CSR */

/* A's CSR on the device (gs_dcsr_of_A): the engine's copy pc->A (stage "csr
 * of A") when it is this A in fp64, else an upload (stage "transfer"). */
static int isai_device_A(gs_pc *pc, const gs_csr *A, gs_dcsr *dA, gs_cuda_csr_view *view)
{
    int status = GS_OK, from_engine = 0;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_dcsr_of_A(pc->eng, pc->A, A, "isai", dA, view, &from_engine));
    GS_TRY(gs_pc_stage_end(pc, from_engine ? "csr of A" : "transfer", t0));
cleanup:
    return status;
}

/* --------------------------------------------------------------- stages */

/* The reference's verdict where a device check failed; a failure the
 * reference does not see (device rounding) is still one, naming the row. */
static int isai_factor_failure(const gs_csr *A, const gs_isai_options *o, int row,
                               const char *what, gs_error *err)
{
    int status = gs_isai_host_factor_check(A, o, err);
    if (status != GS_OK) return status;
    return gs_error_set(err, GS_ERR_NUMERIC,
                        "ILU(0) on the device: %s in row %d (the host reference does not fail "
                        "there: rounding)", what, row);
}

/* Scaling and ILU(0): L and U of S A S (or A) split, on the device. */
static int isai_factor(gs_pc *pc, const gs_csr *A, const gs_isai_options *o, const gs_dcsr *dA,
                       gs_dcsr *L, gs_dcsr *U, double **s, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dcsr W = {};
    int64_t *diag = NULL;
    const char *scheme = NULL;
    int bad = 0, status = GS_OK;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(isai_cuda_scale(e, dA, o->scale, &W, s, &diag, &bad));
    if (bad) GS_TRY(isai_factor_failure(A, o, bad, "a missing or zero diagonal entry", err));
    if (o->scale) GS_TRY(gs_pc_stage_end(pc, "scaling", t0));
    t0 = o->scale ? gs_pc_stage_begin(pc) : t0;
    GS_TRY(isai_cuda_ilu0(pc, A, &W, diag, o->ilu_sweeps, o->ilu_cusparse, &scheme, &bad, err));
    if (bad) GS_TRY(isai_factor_failure(A, o, bad, "a zero pivot or an overflow", err));
    if (scheme) gs_kv_str(&pc->extra, "ilu_scheme", scheme); /* syncfree | levels (exact ILU) */
    GS_TRY(gs_dcsr_split_lu(e, &W, L, U));
    GS_TRY(gs_pc_stage_end(pc, "ilu0", t0));
cleanup:
    gs_cuda_free(e, W.val, (size_t)W.nnz * sizeof(double)); /* W's rp, col: dA's */
    gs_cuda_free(e, diag, (size_t)dA->n * sizeof(int64_t));
    return status;
}

/* M ~ T^-1 and its stage; the reference's message for a non-finite column.
 * Report items: the longest column, and the columns the excess system took
 * (longer than the batched kernels' cut) with that system's entries. */
static int isai_inverse(gs_pc *pc, const gs_dcsr *T, int lower, long k, gs_dcsr *M,
                        gs_error *err)
{
    isai_generate_info info = {};
    int status = GS_OK;
    const double t0 = gs_pc_stage_start(pc, lower ? "isai L" : "isai U");
    GS_TRY(isai_cuda_generate(pc->eng, pc, T, lower, (int)k, M, &info, err));
    if (info.bad_column)
        GS_TRY(gs_error_set(err, GS_ERR_NUMERIC,
                            "ISAI: column %d of M_%s is not finite (that column's small "
                            "triangular system of %s overflows: the factor is too "
                            "ill-conditioned)",
                            (int)info.bad_column, lower ? "L" : "U", lower ? "L" : "U"));
    GS_TRY(gs_pc_stage_end(pc, lower ? "isai L" : "isai U", t0));
    gs_kv_num(&pc->extra, lower ? "ML_longest_column" : "MU_longest_column", (double)info.longest);
    gs_kv_num(&pc->extra, lower ? "ML_excess_columns" : "MU_excess_columns",
              (double)info.excess_columns);
    gs_kv_num(&pc->extra, lower ? "ML_excess_nnz" : "MU_excess_nnz", (double)info.excess_nnz);
cleanup:
    return status;
}

static double isai_stream_bytes(const gs_dcsr *M)
{
    return M->rp ? (double)M->nnz * 12.0 + ((double)M->n + 1.0) * 8.0 : 0.0;
}

/* The engine matrices: L, U (triangular solves; copies) where the apply
 * needs them, else kept in d->device for --save-precond; M_L, M_U taken
 * over where the engine keeps them as CSR. */
static int isai_engine_matrices(gs_pc *pc, gs_isai_data *d, gs_dcsr *L, gs_dcsr *U, gs_dcsr *ML,
                                gs_dcsr *MU)
{
    gs_engine *e = pc->eng;
    const int32_t n = L->n;
    int status = GS_OK, taken = 0;
    if (d->exact || d->sweeps > 0) {
        GS_TRY(gs_cuda_mat_from_device_csr(e, L->n, L->n, L->nnz, L->rp, L->col,
                                           (const double *)L->val, GS_FP64, GS_CUDA_TRI_LOWER,
                                           &d->L_eng));
        GS_TRY(gs_cuda_mat_from_device_csr(e, U->n, U->n, U->nnz, U->rp, U->col,
                                           (const double *)U->val, GS_FP64, GS_CUDA_TRI_UPPER,
                                           &d->U_eng));
    } else {
        isai_device_factors *f =
            (isai_device_factors *)gs_calloc(1, sizeof *f, "isai: device factors", &e->err);
        if (!f) GS_TRY(GS_ERR_NOMEM);
        f->e = e, f->L = *L, f->U = *U;
        *L = gs_dcsr{}, *U = gs_dcsr{};
        d->device = f;
        d->device_free = isai_device_factors_free;
    }
    if (!d->exact) {
        GS_TRY(gs_cuda_mat_adopt_device_csr(e, ML->n, ML->n, ML->nnz, ML->rp, ML->col,
                                            (double *)ML->val, GS_FP64, NULL, &taken, &d->ML_eng));
        if (taken) *ML = gs_dcsr{};
        GS_TRY(gs_cuda_mat_adopt_device_csr(e, MU->n, MU->n, MU->nnz, MU->rp, MU->col,
                                            (double *)MU->val, GS_FP64, NULL, &taken, &d->MU_eng));
        if (taken) *MU = gs_dcsr{};
    }
    GS_TRY(gs_isai_vectors(pc, d, n));
cleanup:
    return status;
}

/* ----------------------------------------------------------------- save */

static int isai_save_one(const char *prefix, const char *suffix, const gs_csr *M,
                         const char *what, gs_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s_%s.mtx", prefix, suffix);
    return gs_mm_write_csr(path, M, 0, what, err);
}

/* PREFIX_L, _U (and _ML, _MU unless --trisolve exact): the factors of A,
 * as the device holds them. */
static int isai_cuda_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_isai_data *d = (gs_isai_data *)pc->data;
    isai_device_factors *f = (isai_device_factors *)d->device;
    gs_csr L = {}, U = {}, ML = {}, MU = {};
    int status = pc->eng->ops->sync(pc->eng);
    if (status != GS_OK) return gs_engine_fail(pc->eng, err);
    if (f) {
        if (gs_dcsr_download(pc->eng, &f->L, &L) != GS_OK ||
            gs_dcsr_download(pc->eng, &f->U, &U) != GS_OK)
            GS_TRY(gs_engine_fail(pc->eng, err));
    } else {
        GS_TRY(gs_cuda_mat_download(d->L_eng, &L, err));
        GS_TRY(gs_cuda_mat_download(d->U_eng, &U, err));
    }
    GS_TRY(isai_save_one(prefix, "L", &L, "gpusolve isai (cuda setup): ILU(0) factor L (unit lower, diagonal stored)", err));
    GS_TRY(isai_save_one(prefix, "U", &U, "gpusolve isai (cuda setup): ILU(0) factor U", err));
    if (d->ML_eng) {
        GS_TRY(gs_cuda_mat_download(d->ML_eng, &ML, err));
        GS_TRY(gs_cuda_mat_download(d->MU_eng, &MU, err));
        GS_TRY(isai_save_one(prefix, "ML", &ML, "gpusolve isai (cuda setup): M_L ~ L^-1, (L M_L - I) = 0 on its pattern", err));
        GS_TRY(isai_save_one(prefix, "MU", &MU, "gpusolve isai (cuda setup): M_U ~ U^-1, (U M_U - I) = 0 on its pattern", err));
    }
cleanup:
    gs_csr_free(&L);
    gs_csr_free(&U);
    gs_csr_free(&ML);
    gs_csr_free(&MU);
    return status;
}

/* ---------------------------------------------------------------- setup */

static int isai_cuda_build(gs_pc *pc, const gs_csr *A, const gs_isai_options *o, gs_isai_data *d,
                           gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_dcsr dA = {}, L = {}, U = {}, ML = {}, MU = {};
    gs_cuda_csr_view viewA = {};
    double *s = NULL;
    gs_isai_sizes z = {};
    int status = GS_OK;
    double t0;
    GS_TRY(isai_device_A(pc, A, &dA, &viewA));
    GS_TRY(isai_factor(pc, A, o, &dA, &L, &U, &s, err));
    gs_dcsr_release_A(e, &dA, &viewA);
    if (!o->exact) {
        GS_TRY(isai_inverse(pc, &L, 1, o->power, &ML, err));
        GS_TRY(isai_inverse(pc, &U, 0, o->power, &MU, err));
    }
    if (o->scale) {
        t0 = gs_pc_stage_begin(pc);
        GS_TRY(isai_unscale(e, s, &L, &U, &ML, &MU));
        GS_TRY(gs_pc_stage_end(pc, "scaling", t0));
    }
    z.n = L.n, z.nnz_L = L.nnz, z.nnz_U = U.nnz, z.nnz_ML = ML.nnz, z.nnz_MU = MU.nnz;
    z.bytes_L = isai_stream_bytes(&L), z.bytes_U = isai_stream_bytes(&U);
    z.bytes_ML = isai_stream_bytes(&ML), z.bytes_MU = isai_stream_bytes(&MU);
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(isai_engine_matrices(pc, d, &L, &U, &ML, &MU));
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
    gs_isai_describe(pc, d, &z);
cleanup:
    if (gs_cuda_of(e)->stream) cudaStreamSynchronize(gs_cuda_of(e)->stream);
    gs_dcsr_release_A(e, &dA, &viewA);
    gs_cuda_free(e, s, (size_t)A->n_rows * sizeof(double));
    gs_dcsr_free(e, &L);
    gs_dcsr_free(e, &U);
    gs_dcsr_free(e, &ML);
    gs_dcsr_free(e, &MU);
    return status;
}

extern "C" int gs_isai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_isai_options o;
    int status = GS_OK;
    /* the reference words non-square and pattern-only input */
    if (e->ops->kind != GS_ENGINE_CUDA || A->n_rows != A->n_cols || !A->val)
        return gs_isai_setup_cpu(pc, A, err);
    gs_isai_data *d = (gs_isai_data *)gs_calloc(1, sizeof *d, "isai", err);
    if (!d) return gs_pc_setup_exit(pc, GS_ERR_NOMEM, err);
    pc->data = d;
    pc->destroy = gs_isai_destroy;
    GS_TRY(gs_isai_read_options(pc->params, &o, err));
    d->power = o.power, d->sweeps = o.sweeps, d->exact = o.exact, d->scaled = o.scale;
    d->ilu_sweeps = o.ilu_sweeps, d->ilu_cusparse = o.ilu_cusparse;
    GS_TRY(isai_cuda_build(pc, A, &o, d, err));
    pc->apply = gs_isai_apply;
    if (!d->exact && d->sweeps == 0) gs_pc_set_products(pc, d->MU_eng, d->ML_eng); /* M_U M_L */
    pc->save = isai_cuda_save;
cleanup:
    return gs_pc_setup_exit(pc, status, err);
}

/* ----------------------------------------------------------- test hook */

extern "C" int gs_isai_cuda_hook_generate(gs_engine *e, const gs_csr *T, int lower, int k,
                                          gs_csr *M, int64_t *longest, int32_t *bad_column)
{
    gs_dcsr dT = {}, dM = {};
    void *poison = NULL;
    const size_t poison_bytes = (size_t)T->nnz * 64 + ((size_t)T->n_rows + 1) * 64 + 4096;
    int status = GS_OK;
    GS_TRY(gs_dcsr_upload(e, T, "isai", &dT));
    /* NaN-filled memory freed just before the generation allocates */
    GS_TRY(gs_cuda_alloc(e, &poison, poison_bytes, "hook: poison"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(poison, 0xFF, poison_bytes, gs_cuda_of(e)->stream)));
    gs_cuda_free(e, poison, poison_bytes);
    poison = NULL;
    {
        isai_generate_info info = {};
        GS_TRY(isai_cuda_generate(e, NULL, &dT, lower, k, &dM, &info, &e->err));
        *longest = info.longest, *bad_column = info.bad_column;
    }
    GS_TRY(gs_dcsr_download(e, &dM, M));
cleanup:
    gs_cuda_free(e, poison, poison_bytes);
    gs_dcsr_free(e, &dT);
    gs_dcsr_free(e, &dM);
    return status;
}
