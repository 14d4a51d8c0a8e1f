/* ssorai.cu - SSOR approximate inverse (SSOR-AI), M^-1 = F^T F with
 * F = sqrt(omega (2 - omega)) D^-1/2 G_m, G_m the Neumann series of
 * (I + omega L D^-1)^-1 truncated after m = 1 or 2 powers: the CUDA setup of
 * the reference in src/precond/pc_ssorai.c (Helfenstein and Koko, J. Comput.
 * Appl. Math. 236 (2012), the MIC paper's reference [3]).
 *
 * Stages, each timed after a synchronisation (names as the CPU setup's):
 *   csr of A   A's rows from the engine's own fp64 copy (gs_cuda_mat_device_csr)
 *   factor G   input checks, diag(A) and tril(A)'s pattern in one pass (a thread
 *              a row); for m = 2 the pattern of (E + |tril A|)^2 = I + L + L^2
 *              (gs_dcsr_pattern_power); F's values, a thread a row, in the
 *              reference's order with IEEE round-to-nearest intrinsics (no
 *              contraction into FMAs), so F is the reference's bit for bit
 *   transpose  F^T (gs_dcsr_transpose)
 *   layout     F and F^T as engine matrices (adopted, sliced ELL where it pays)
 * Apply: the reference's z = F^T (F r) (src/precond/ssorai.h), unchanged.
 * Where the engine holds no fp64 copy of A the CPU setup runs instead (its
 * matrices are then uploaded), as Jacobi's CUDA setup does. */
#include <stdio.h>
#include <stdlib.h>

#include "gs_dsparse.h"

extern "C" {
#include "mmio.h"
#include "ssorai.h"
}

#define SSORAI_BLOCK 256
#define SSORAI_NO_FAIL 0x7fffffffffffffffULL /* the check's record: no row failed */

/* Position of column j in the sorted columns col[0, len), or -1. */
static __device__ inline int64_t ssorai_find(const int32_t *__restrict__ col, int64_t len,
                                             int32_t j)
{
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (col[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && col[lo] == j ? lo : -1;
}

/* A thread a row: d[i] = a_ii; l_rp[i + 1] = |{j <= i in row i}| (tril(A)'s
 * row counts, l_rp[0] = 0); *fail = the lowest 0-based row that breaks
 * symmetry (|a_ij - a_ji| <= rtol max(|a_ij|, |a_ji|), a missing mirror read
 * as 0: the host's test) or whose diagonal is missing, not positive or not
 * finite. The host check then words the message. */
__global__ void ssorai_check_kernel(int32_t n, const int64_t *__restrict__ rp,
                                    const int32_t *__restrict__ col,
                                    const double *__restrict__ val, double *__restrict__ d,
                                    int64_t *__restrict__ l_rp, unsigned long long *fail)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i == 0) l_rp[0] = 0;
    double di = 0.0;
    int64_t lower = 0;
    bool ok = true, has_diagonal = false;
    for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
        const int32_t j = col[p];
        const double aij = val[p];
        if (j <= i) lower++;
        if (j == i) {
            di = aij, has_diagonal = true;
            continue;
        }
        const int64_t q = ssorai_find(col + rp[j], rp[j + 1] - rp[j], (int32_t)i);
        const double aji = q >= 0 ? val[rp[j] + q] : 0.0;
        if (!(fabs(aij - aji) <= GS_SYMMETRY_RTOL * fmax(fabs(aij), fabs(aji)))) ok = false;
    }
    d[i] = di;
    l_rp[i + 1] = lower;
    if (!ok || !has_diagonal || !(di > 0.0) || !isfinite(di))
        atomicMin(fail, (unsigned long long)i);
}

/* A thread a row: tril(A)'s columns of row i into l_col. */
__global__ void ssorai_lower_kernel(int32_t n, const int64_t *__restrict__ rp,
                                    const int32_t *__restrict__ col,
                                    const int64_t *__restrict__ l_rp, int32_t *__restrict__ l_col)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t q = l_rp[i];
    for (int64_t p = rp[i]; p < rp[i + 1] && col[p] <= i; p++) l_col[q++] = col[p];
}

/* A thread a row: row i of F on its pattern (f_rp, f_col; sorted, holding
 * I + L (+ L^2 for terms = 2)), the reference's ssorai_row step for step:
 *   g = e_i;  g_k -= c_ik, c_ik = (omega a_ik) / d_k  (k < i, increasing);
 *   terms 2:  g_j += c_ik c_kj right after each k (j < k, increasing);
 *   f = (scale / sqrt(d_i)) g.
 * Every operation is an _rn intrinsic: nvcc would otherwise fuse a product
 * and a sum into an FMA (one rounding less), and the host's x86-64 code has
 * none, so F would differ from the reference in the last bits. */
__global__ void ssorai_values_kernel(int32_t n, const int64_t *__restrict__ rp,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val, const double *__restrict__ d,
                                     double omega, int terms, double scale,
                                     const int64_t *__restrict__ f_rp,
                                     const int32_t *__restrict__ f_col, double *__restrict__ f_val)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t f0 = f_rp[i], len = f_rp[i + 1] - f0;
    const int32_t *fc = f_col + f0;
    double *fv = f_val + f0;
    for (int64_t p = 0; p < len; p++) fv[p] = fc[p] == i ? 1.0 : 0.0;
    for (int64_t q = rp[i]; q < rp[i + 1] && col[q] < i; q++) {
        const int32_t k = col[q];
        const double c_ik = __ddiv_rn(__dmul_rn(omega, val[q]), d[k]);
        const int64_t pk = ssorai_find(fc, len, k);
        fv[pk] = __dsub_rn(fv[pk], c_ik);
        if (terms < 2) continue;
        for (int64_t r = rp[k]; r < rp[k + 1] && col[r] < k; r++) {
            const int32_t j = col[r];
            const double c_kj = __ddiv_rn(__dmul_rn(omega, val[r]), d[j]);
            const int64_t pj = ssorai_find(fc, len, j);
            fv[pj] = __dadd_rn(fv[pj], __dmul_rn(c_ik, c_kj));
        }
    }
    const double s = __ddiv_rn(scale, __dsqrt_rn(d[i]));
    for (int64_t p = 0; p < len; p++) fv[p] = __dmul_rn(fv[p], s);
}

/* Checks, diag(A) into d, and tril(A)'s pattern into low. One host round
 * trip: the failure record rides on the scan's read of nnz. A failed check
 * hands over to the host reference for the message. */
static int ssorai_lower(gs_engine *e, const gs_csr *A, const gs_dcsr *dA, double *d,
                        gs_dcsr *low, gs_error *err)
{
    cudaStream_t s = gs_cuda_of(e)->stream;
    const int32_t n = dA->n;
    const unsigned long long none = SSORAI_NO_FAIL;
    unsigned long long *d_fail = NULL;
    uint64_t fail = SSORAI_NO_FAIL;
    int64_t nnz = 0;
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &d_fail, sizeof *d_fail, "ssor-ai: input check record"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_fail, &none, sizeof none, cudaMemcpyHostToDevice, s)));
    GS_TRY(gs_dcsr_alloc_rows_counted(e, low, n, "ssor-ai: row pointers of tril(A)"));
    GS_TRY(CUDA_LAUNCH(&e->err, ssorai_check_kernel, gs_dblocks(n, SSORAI_BLOCK), SSORAI_BLOCK, 0,
                       s, n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const double *)dA->val, d, low->rp, d_fail));
    GS_TRY(gs_dread_park(e, d_fail, 1));
    GS_TRY(gs_dcsr_counts_to_row_ptr(e, low->rp, n, &nnz)); /* synchronises */
    gs_dread_parked(e, &fail, 1);
    if (fail != SSORAI_NO_FAIL) {
        GS_TRY(gs_ssorai_check_input(A, err));
        GS_TRY(gs_error_set(err, GS_ERR_INTERNAL,
                            "the device check failed row %llu, the host's found nothing",
                            (unsigned long long)fail + 1));
    }
    GS_TRY(gs_dcsr_alloc_entries(e, low, nnz, 0, "ssor-ai: tril(A)"));
    GS_TRY(CUDA_LAUNCH(&e->err, ssorai_lower_kernel, gs_dblocks(n, SSORAI_BLOCK), SSORAI_BLOCK, 0,
                       s, n, (const int64_t *)dA->rp, (const int32_t *)dA->col,
                       (const int64_t *)low->rp, low->col));
cleanup:
    gs_cuda_free(e, d_fail, sizeof *d_fail);
    return status;
}

/* F (values fp64) from A's rows: pattern, then values. */
static int ssorai_factor(gs_engine *e, const gs_csr *A, const gs_dcsr *dA,
                         const gs_ssorai_options *o, gs_dcsr *F, gs_error *err)
{
    const int32_t n = dA->n;
    double *d = NULL;
    gs_dcsr low = {};
    int status = GS_OK;
    GS_TRY(gs_cuda_alloc(e, &d, ((size_t)n + 1) * sizeof(double), "ssor-ai: diagonal of A"));
    GS_TRY(ssorai_lower(e, A, dA, d, &low, err));
    if (o->terms >= 2) {
        GS_TRY(gs_dcsr_pattern_power(e, &low, 2, 1, F)); /* I + L + L^2 */
        gs_dcsr_free(e, &low);
    } else {
        *F = low;
        low = gs_dcsr{};
    }
    GS_TRY(gs_cuda_alloc(e, &F->val, (size_t)F->nnz * sizeof(double), "ssor-ai: F"));
    F->vsize = sizeof(double);
    GS_TRY(CUDA_LAUNCH(&e->err, ssorai_values_kernel, gs_dblocks(n, SSORAI_BLOCK), SSORAI_BLOCK, 0,
                       gs_cuda_of(e)->stream, n, (const int64_t *)dA->rp,
                       (const int32_t *)dA->col, (const double *)dA->val, (const double *)d,
                       o->omega, (int)o->terms, gs_ssorai_scale(o->omega),
                       (const int64_t *)F->rp, (const int32_t *)F->col, (double *)F->val));
cleanup:
    gs_cuda_free(e, d, ((size_t)n + 1) * sizeof(double));
    gs_dcsr_free(e, &low);
    return status;
}

/* M (fp64 values) as an engine matrix; M's arrays are taken over or freed. */
static int ssorai_engine_matrix(gs_engine *e, gs_dcsr *M, gs_mat **out)
{
    int status = GS_OK, taken = 0;
    GS_TRY(gs_cuda_mat_adopt_device_csr(e, M->n, M->n, M->nnz, M->rp, M->col, (double *)M->val,
                                        GS_FP64, NULL, &taken, out));
    if (taken) *M = gs_dcsr{};
cleanup:
    gs_dcsr_free(e, M); /* stream-ordered: after the copies */
    return status;
}

/* PREFIX_F.mtx: F as the engine holds it, turned back into CSR. */
static int ssorai_cuda_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_ssorai_data *s = (gs_ssorai_data *)pc->data;
    gs_cuda_csr_view view = {};
    gs_csr F = {};
    char path[4096], comment[512];
    int status = GS_OK;
    GS_TRY(gs_cuda_mat_device_csr(e, s->F_eng, &view));
    {
        const gs_dcsr dF = {view.n_rows, view.nnz, (int64_t *)view.row_ptr, (int32_t *)view.col,
                            (void *)view.val, sizeof(double)};
        GS_TRY(gs_dcsr_download(e, &dF, &F));
    }
    snprintf(path, sizeof path, "%s_F.mtx", prefix);
    snprintf(comment, sizeof comment, "gpusolve ssor-ai (cuda setup): %s",
             pc->description);
    GS_TRY(gs_mm_write_csr(path, &F, 0, comment, err));
cleanup:
    gs_cuda_csr_view_free(e, &view);
    gs_csr_free(&F);
    if (status != GS_OK) gs_engine_fail(e, err);
    return status;
}

static int ssorai_cuda_build(gs_pc *pc, const gs_csr *A, const gs_ssorai_options *o,
                             gs_ssorai_data *s, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_cuda_csr_view view = {};
    gs_dcsr F = {}, FT = {};
    int status = GS_OK;
    double t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_cuda_mat_device_csr(e, pc->A, &view));
    GS_TRY(gs_pc_stage_end(pc, "csr of A", t0));
    t0 = gs_pc_stage_begin(pc);
    {
        const gs_dcsr dA = {view.n_rows, view.nnz, (int64_t *)view.row_ptr, (int32_t *)view.col,
                            (void *)view.val, sizeof(double)};
        GS_TRY(ssorai_factor(e, A, &dA, o, &F, err));
    }
    GS_TRY(gs_pc_stage_end(pc, "factor G", t0));
    gs_cuda_csr_view_free(e, &view);
    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_dcsr_transpose(e, &F, &FT, 0));
    GS_TRY(gs_pc_stage_end(pc, "transpose", t0));
    t0 = gs_pc_stage_begin(pc);
    gs_ssorai_describe(pc, o, F.nnz, A->n_rows, A->nnz);
    GS_TRY(ssorai_engine_matrix(e, &F, &s->F_eng));
    GS_TRY(ssorai_engine_matrix(e, &FT, &s->FT_eng));
    GS_TRY(e->ops->vec_create(e, A->n_rows, &s->t));
    GS_TRY(gs_pc_stage_end(pc, "layout", t0));
cleanup:
    if (gs_cuda_of(e)->stream) cudaStreamSynchronize(gs_cuda_of(e)->stream);
    gs_cuda_csr_view_free(e, &view);
    gs_dcsr_free(e, &F);
    gs_dcsr_free(e, &FT);
    return status;
}

extern "C" int gs_ssorai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err)
{
    gs_engine *e = pc->eng;
    gs_ssorai_options o;
    int status = GS_OK;
    /* no fp64 copy of this A on the engine (fp32 storage rounds it): the
     * reference builds F on the host, the engine takes its matrices */
    if (e->ops->kind != GS_ENGINE_CUDA) return gs_ssorai_setup_cpu(pc, A, err);
    const gs_cuda_mat_info Ai = pc->A ? gs_cuda_mat_info_of(pc->A) : gs_cuda_mat_info{};
    if (!pc->A || Ai.prec != GS_FP64 || Ai.n_rows != A->n_rows || Ai.n_cols != A->n_cols ||
        Ai.nnz != A->nnz || A->n_rows != A->n_cols || !A->val) {
        status = gs_ssorai_setup_cpu(pc, A, err);
        if (status == GS_OK) gs_kv_str(&pc->extra, "setup", "host");
        return status;
    }
    gs_ssorai_data *s = (gs_ssorai_data *)gs_calloc(1, sizeof *s, "ssor-ai", err);
    if (!s) return GS_ERR_NOMEM;
    pc->data = s;
    pc->destroy = gs_ssorai_destroy;
    GS_TRY(gs_ssorai_read_options(pc, &o, err));
    GS_TRY(ssorai_cuda_build(pc, A, &o, s, err));
    pc->apply = gs_ssorai_apply;
    pc->apply_dot = gs_ssorai_apply_dot;
    gs_pc_set_products(pc, s->FT_eng, s->F_eng);
    pc->save = ssorai_cuda_save;
cleanup:
    return gs_pc_setup_exit(pc, status, err);
}
