/* check_cuda_isai.c - the CUDA setup of ISAI (cuda/precond/isai*.cu) against
 * the CPU reference (src/precond/pc_isai.c, the oracle) and by the property
 * that defines ISAI, (L M_L - I)_ij = 0 and (U M_U - I)_ij = 0 on the
 * patterns (Anzt, Chow, Huckle, Dongarra, ScalA 2016, Algorithm 1),
 * recomputed on the host from the device's own factors. Generated and real
 * matrices, ISAI(1..3), --ilu exact, cusparse and sweeps, --scale yes/no;
 * our exact ILU(0) on one level, thousands of levels, 1 to 32 lanes a row,
 * rows longer than a warp and an arrow (a row of n entries); the batched
 * kernel alone on columns of every length class (1..32 in lane groups of
 * 4, 8, 16, 32; 33..128 in warps with 2 or 4 rows a lane; 129..4096 in
 * blocks with 1, 4 or 16 rows a thread; longer in the sparse excess system),
 * both sides of each threshold, the excess cut also moved down by the debug
 * switch; dense rows and columns (an arrowhead, a bordered grid) whole,
 * with the report's excess columns and entries; the --time-limit inside the
 * generation; the apply (plain, sweeps, exact solves);
 * IDR(4) iterations; bad input (same status and message as the CPU: zero
 * and missing diagonals, zero pivots early and 2000 levels deep, a tiny
 * pivot that overflows). The
 * device heap is filled with NaN before each setup. Without a CUDA device
 * the suite says "skipped" and passes.
 *
 * Tolerances (u = 2^-53):
 * - patterns (|T|^k, the split) are integer work: equal exactly.
 * - the ISAI property, column j of M with m entries: forward or backward
 *   substitution is backward stable, the computed x solves (T(J,J) + dT) x
 *   = e with |dT| <= gamma_m |T(J,J)| (Higham, Thm 8.5), so |(T M - I)_ij|
 *   <= gamma_m (|T| |M|)_ij; the back-scaling of T and M adds two roundings
 *   a value: we allow (2 m + 8) u (|T| |M|)_ij.
 * - ILU(0) on the device (--ilu exact, our level-scheduled IKJ: each
 *   entry sees the reference's operations in the reference's order, each
 *   correctly rounded, no fused multiply-add on either side: equal bit for
 *   bit on x86-64, and we allow the sweeps' 64 u of the row's largest entry;
 *   --ilu cusparse: cuSPARSE's order of updates; the sweeps'), checked by
 *   its own property first: (L U)_ij = a_ij on A's pattern
 *   within (4 m + 8) u (|L| |U|)_ij (Higham, Thm 9.3, m the row length,
 *   plus the scalings); then against the reference value by value, within
 *   1e-9 of the row's largest entry: the two computations differ by
 *   O(u) per operation, amplified by the conditioning of the elimination,
 *   small on the diagonally dominant and moderately conditioned matrices
 *   used here. The sweeps' arithmetic is the reference's (products and
 *   differences rounded alike): there the bound is 64 u of the row's largest.
 * - M_L, M_U against the reference: the same 1e-9 of the column's largest
 *   entry (they inherit the factors' differences through small systems of
 *   modest condition). With T given (the kernel test) M_L is the
 *   reference's forward substitution in the same order: equal to 64 u;
 *   M_U's backward substitution sums its terms in the opposite order, and
 *   a column of the excess system (the sync-free triangular solve: each
 *   row summed by lanes, with fused multiply-adds) in another order again:
 *   1e-12 of the column's largest entry on those well-conditioned T (see
 *   test_kernel_thresholds), and the property bound above, which the
 *   sync-free solve meets as the substitution does (backward stable row by
 *   row, each row's error within gamma of its length <= m).
 * - the excess system's report (columns, entries) is integer work: equal to
 *   the count from the reference's M and T. */
#include <math.h>
#include <string.h>

#include "debug.h"
#include "engine.h"
#include "gen.h"
#include "isai.h"
#include "krylov.h"
#include "precond.h"
#include "testutil.h"
#if GS_HAVE_CUDA
#include "../cuda/engine/gs_cuda.h"
#include "../cuda/precond/isai_hooks.h"
#endif

#define U64 (DBL_EPSILON / 2)

#if GS_HAVE_CUDA

static gs_engine *gpu;
static int64_t excess_cut = 4096; /* the generation's cut (use_excess_cut) */

static void poison_device_heap(void)
{
    gs_vec *v[8] = {0};
    for (int i = 0; i < 8; i++) {
        if (gpu->ops->vec_create(gpu, (int64_t)4 << 20, &v[i]) != GS_OK) break;
        ck_assert_int_eq(gpu->ops->set(gpu, v[i], NAN), GS_OK);
    }
    ck_assert_int_eq(gpu->ops->sync(gpu), GS_OK);
    for (int i = 0; i < 8; i++) gpu->ops->vec_destroy(gpu, v[i]);
    gs_error_clear(&gpu->err);
}

/* ---------------------------------------------------------------- runs */

typedef struct isai_out {
    int status;
    gs_error err;
    gs_csr L, U, ML, MU; /* as saved (ML, MU empty with --trisolve exact) */
    char stages[512];
    double longest_L, longest_U;
    /* the GPU's excess system (ML_excess_columns, ...); -1 where not reported */
    double excess_L, excess_U, excess_nnz_L, excess_nnz_U;
} isai_out;

static double extra_or(const gs_pc *pc, const char *key, double none)
{
    const gs_kv *kv = tu_pc_extra(pc, key);
    return kv ? kv->num : none;
}

static void isai_out_free(isai_out *o)
{
    gs_csr_free(&o->L), gs_csr_free(&o->U), gs_csr_free(&o->ML), gs_csr_free(&o->MU);
}

/* isai on engine e (the GPU one, or a fresh CPU engine when e == NULL). */
static isai_out isai_on(gs_engine *e, const gs_csr *A, const gs_params *p)
{
    isai_out o;
    memset(&o, 0, sizeof o);
    gs_engine *cpu = NULL;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    if (!e) {
        ck_assert_int_eq(gs_engine_cpu_create(&cpu, &o.err), GS_OK);
        e = cpu;
    } else {
        poison_device_heap();
    }
    const size_t base = e->device_bytes_now;
    ck_assert_msg(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK, "%s", e->err.msg);
    o.status = gs_pc_create(gs_pc_find("isai"), e, p, A, Ae, &pc, &o.err);
    if (o.status == GS_OK) {
        tu_pc_saved_matrix(pc, "L", &o.L);
        tu_pc_saved_matrix(pc, "U", &o.U);
        const gs_kv *kv = tu_pc_extra(pc, "trisolve");
        if (kv && strcmp(kv->str, "isai") == 0) {
            tu_pc_saved_matrix(pc, "ML", &o.ML);
            tu_pc_saved_matrix(pc, "MU", &o.MU);
            o.longest_L = tu_pc_extra(pc, "ML_longest_column")->num;
            o.longest_U = tu_pc_extra(pc, "MU_longest_column")->num;
            o.excess_L = extra_or(pc, "ML_excess_columns", -1);
            o.excess_U = extra_or(pc, "MU_excess_columns", -1);
            o.excess_nnz_L = extra_or(pc, "ML_excess_nnz", -1);
            o.excess_nnz_U = extra_or(pc, "MU_excess_nnz", -1);
        }
        size_t used = 0;
        for (int i = 0; i < pc->stages.count; i++)
            used += (size_t)snprintf(o.stages + used, sizeof o.stages - used, "%s;",
                                     pc->stages.stage[i].name);
    }
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    ck_assert_msg(e->device_bytes_now == base, "device bytes leaked: %zu now, %zu before",
                  e->device_bytes_now, base);
    gs_error_clear(&e->err);
    gs_engine_destroy(cpu);
    return o;
}

/* ---------------------------------------------------------- comparisons */

static void assert_same_pattern(const gs_csr *want, const gs_csr *got, const char *what)
{
    ck_assert_msg(got->n_rows == want->n_rows && got->nnz == want->nnz,
                  "%s: %d rows, %lld entries; expected %d, %lld", what, got->n_rows,
                  (long long)got->nnz, want->n_rows, (long long)want->nnz);
    for (int32_t i = 0; i <= want->n_rows; i++)
        ck_assert_msg(got->row_ptr[i] == want->row_ptr[i], "%s: row_ptr[%d] = %lld, expected %lld",
                      what, i, (long long)got->row_ptr[i], (long long)want->row_ptr[i]);
    for (int64_t p = 0; p < want->nnz; p++)
        ck_assert_msg(got->col[p] == want->col[p], "%s: col[%lld] = %d, expected %d", what,
                      (long long)p, got->col[p], want->col[p]);
}

/* Same pattern; |got - want| <= rtol max |row of want| in every row
 * (by_columns: the same over columns). */
static void assert_close(const gs_csr *want, const gs_csr *got, double rtol, int by_columns,
                         const char *what)
{
    assert_same_pattern(want, got, what);
    gs_csr W = {0}, G = {0};
    gs_error err = {0};
    if (by_columns) {
        ck_assert_int_eq(gs_csr_transpose(want, &W, &err), GS_OK);
        ck_assert_int_eq(gs_csr_transpose(got, &G, &err), GS_OK);
        want = &W, got = &G;
    }
    for (int32_t i = 0; i < want->n_rows; i++) {
        double big = 0.0;
        for (int64_t p = want->row_ptr[i]; p < want->row_ptr[i + 1]; p++)
            big = fmax(big, fabs(want->val[p]));
        for (int64_t p = want->row_ptr[i]; p < want->row_ptr[i + 1]; p++)
            ck_assert_msg(isfinite(got->val[p]) && fabs(got->val[p] - want->val[p]) <= rtol * big,
                          "%s: %s %d, entry (%d): %.17g, reference %.17g (tolerance %.3g)", what,
                          by_columns ? "column" : "row", i + 1, want->col[p] + 1, got->val[p],
                          want->val[p], rtol * big);
    }
    gs_csr_free(&W), gs_csr_free(&G);
}

/* (T M - I)_ij on M's pattern within (2 m_j + 8) u (|T| |M|)_ij, m_j the
 * length of column j of M: recomputed from the device's T and M. */
static void assert_isai_property(const gs_csr *T, const gs_csr *M, const char *what)
{
    gs_csr MT = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_transpose(M, &MT, &err), GS_OK); /* row j: column j of M */
    for (int32_t i = 0; i < M->n_rows; i++)
        for (int64_t p = M->row_ptr[i]; p < M->row_ptr[i + 1]; p++) {
            const int32_t j = M->col[p];
            const int64_t m = MT.row_ptr[j + 1] - MT.row_ptr[j];
            double s = i == j ? -1.0 : 0.0, mag = 0.0;
            /* sum_k t_ik m_kj: row i of T merged with column j of M */
            int64_t a = T->row_ptr[i], b = MT.row_ptr[j];
            while (a < T->row_ptr[i + 1] && b < MT.row_ptr[j + 1]) {
                if (T->col[a] < MT.col[b]) a++;
                else if (T->col[a] > MT.col[b]) b++;
                else {
                    s += T->val[a] * MT.val[b];
                    mag += fabs(T->val[a] * MT.val[b]);
                    a++, b++;
                }
            }
            ck_assert_msg(isfinite(s) && fabs(s) <= (2.0 * (double)m + 8.0) * U64 * mag,
                          "%s: (T M - I)_%d,%d = %.3g, bound %.3g", what, i + 1, j + 1, s,
                          (2.0 * (double)m + 8.0) * U64 * mag);
        }
    gs_csr_free(&MT);
}

/* (L U)_ij = a_ij on A's pattern within (4 m + 8) u (|L| |U|)_ij. */
static void assert_ilu0_property(const gs_csr *A, const gs_csr *L, const gs_csr *U,
                                 const char *what)
{
    gs_csr UT = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_transpose(U, &UT, &err), GS_OK);
    for (int32_t i = 0; i < A->n_rows; i++) {
        const double m = (double)(A->row_ptr[i + 1] - A->row_ptr[i]);
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            const int32_t j = A->col[p];
            double s = -A->val[p], mag = fabs(A->val[p]);
            int64_t a = L->row_ptr[i], b = UT.row_ptr[j];
            while (a < L->row_ptr[i + 1] && b < UT.row_ptr[j + 1]) {
                if (L->col[a] < UT.col[b]) a++;
                else if (L->col[a] > UT.col[b]) b++;
                else {
                    s += L->val[a] * UT.val[b];
                    mag += fabs(L->val[a] * UT.val[b]);
                    a++, b++;
                }
            }
            ck_assert_msg(isfinite(s) && fabs(s) <= (4.0 * m + 8.0) * U64 * mag,
                          "%s: (L U - A)_%d,%d = %.3g, bound %.3g", what, i + 1, j + 1, s,
                          (4.0 * m + 8.0) * U64 * mag);
        }
    }
    gs_csr_free(&UT);
}

/* The excess system's size by the reference's M and T: the columns of M
 * longer than cut, and the entries of T(J, J) on T's side over them. */
static void excess_expected(const gs_csr *T, const gs_csr *M, int lower, int64_t cut,
                            double *columns, double *nnz)
{
    gs_csr MT = {0};
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_transpose(M, &MT, &err), GS_OK);
    int64_t *pos = malloc((size_t)T->n_rows * sizeof *pos);
    for (int32_t i = 0; i < T->n_rows; i++) pos[i] = -1;
    *columns = 0, *nnz = 0;
    for (int32_t j = 0; j < MT.n_rows; j++) {
        const int64_t b = MT.row_ptr[j], m = MT.row_ptr[j + 1] - b;
        if (m <= cut) continue;
        *columns += 1;
        for (int64_t q = 0; q < m; q++) pos[MT.col[b + q]] = q;
        for (int64_t p = 0; p < m; p++) {
            const int32_t r = MT.col[b + p];
            for (int64_t a = T->row_ptr[r]; a < T->row_ptr[r + 1]; a++) {
                const int64_t q = pos[T->col[a]];
                if (q >= 0 && (lower ? q <= p : q >= p)) *nnz += 1;
            }
        }
        for (int64_t q = 0; q < m; q++) pos[MT.col[b + q]] = -1;
    }
    free(pos);
    gs_csr_free(&MT);
}

/* The GPU setup against the CPU one, and both properties on the GPU's. */
static void check_against_cpu(const gs_csr *A, const char *const *kv, const char *what)
{
    gs_params p = tu_params(kv);
    isai_out want = isai_on(NULL, A, &p), got = isai_on(gpu, A, &p);
    ck_assert_msg(want.status == GS_OK, "%s: cpu: %s", what, want.err.msg);
    ck_assert_msg(got.status == GS_OK, "%s: cuda: %s", what, got.err.msg);
    const char *ilu = gs_params_lookup(&p, "ilu");
    const int sweeps = ilu && strncmp(ilu, "sweeps:", 7) == 0;
    const int cusparse = ilu && strcmp(ilu, "cusparse") == 0;
    char label[160];
    snprintf(label, sizeof label, "%s: L U = A", what);
    if (!sweeps) assert_ilu0_property(A, &got.L, &got.U, label);
    const double rtol = cusparse ? 1e-9 : 64 * U64; /* our IKJ and the sweeps: the host's order */
    snprintf(label, sizeof label, "%s: L", what);
    assert_close(&want.L, &got.L, rtol, 0, label);
    snprintf(label, sizeof label, "%s: U", what);
    assert_close(&want.U, &got.U, rtol, 0, label);
    if (want.ML.row_ptr) {
        ck_assert_msg(got.ML.row_ptr != NULL, "%s: no M_L from the GPU", what);
        snprintf(label, sizeof label, "%s: M_L", what);
        assert_close(&want.ML, &got.ML, 1e-9, 1, label);
        snprintf(label, sizeof label, "%s: M_U", what);
        assert_close(&want.MU, &got.MU, 1e-9, 1, label);
        snprintf(label, sizeof label, "%s: L M_L - I", what);
        assert_isai_property(&got.L, &got.ML, label);
        snprintf(label, sizeof label, "%s: U M_U - I", what);
        assert_isai_property(&got.U, &got.MU, label);
        ck_assert_msg(got.longest_L == want.longest_L && got.longest_U == want.longest_U,
                      "%s: longest columns %g, %g; reference %g, %g", what, got.longest_L,
                      got.longest_U, want.longest_L, want.longest_U);
        double cols, nnz; /* which columns the excess system took */
        excess_expected(&want.L, &want.ML, 1, excess_cut, &cols, &nnz);
        ck_assert_msg(got.excess_L == cols && got.excess_nnz_L == nnz,
                      "%s: M_L excess %g columns, %g entries; expected %g, %g", what,
                      got.excess_L, got.excess_nnz_L, cols, nnz);
        excess_expected(&want.U, &want.MU, 0, excess_cut, &cols, &nnz);
        ck_assert_msg(got.excess_U == cols && got.excess_nnz_U == nnz,
                      "%s: M_U excess %g columns, %g entries; expected %g, %g", what,
                      got.excess_U, got.excess_nnz_U, cols, nnz);
    }
    /* the stages are the reference's, after the GPU's own first one */
    const char *gs = strchr(got.stages, ';');
    ck_assert_msg((strncmp(got.stages, "csr of A;", 9) == 0 ||
                   strncmp(got.stages, "transfer;", 9) == 0) &&
                      gs && strcmp(gs + 1, want.stages) == 0,
                  "%s: stages '%s', reference '%s'", what, got.stages, want.stages);
    isai_out_free(&want), isai_out_free(&got);
}

/* ---------------------------------------------------------------- tests */

START_TEST(test_generated)
{
    /* sizes above a block of rows; 3D stencils give ISAI(k) columns of 4, 10,
     * 20 (7-point) and 14 .. ~100 (27-point): lane groups and warps */
    const char *specs[] = {"poisson3d:9", "convdiff3d:10x9x8", "aniso3d:7", "poisson3d27:6"};
    const char *powers[] = {"1", "2", "3"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        gs_csr A = tu_generated(specs[s]);
        for (size_t k = 0; k < 3; k++) {
            const char *kv[] = {"isai-power", powers[k], NULL};
            char what[96];
            snprintf(what, sizeof what, "%s ISAI(%s)", specs[s], powers[k]);
            check_against_cpu(&A, kv, what);
        }
        const char *noscale[] = {"scale", "no", NULL};
        check_against_cpu(&A, noscale, specs[s]);
        const char *sweeps[] = {"ilu", "sweeps:3", NULL};
        check_against_cpu(&A, sweeps, specs[s]);
        const char *many[] = {"ilu", "sweeps:40", "isai-power", "2", NULL};
        check_against_cpu(&A, many, specs[s]);
        const char *exact[] = {"trisolve", "exact", NULL};
        check_against_cpu(&A, exact, specs[s]);
        const char *cusparse[] = {"ilu", "cusparse", NULL};
        check_against_cpu(&A, cusparse, specs[s]);
        gs_csr_free(&A);
    }
}
END_TEST

/* Real nonsymmetric and SPD matrices of ../shared/matrices with a full
 * diagonal (ILU(0) exists): every one that the reference sets up. */
START_TEST(test_real)
{
    const char *names[] = {"sherman5", "sherman1", "pores_1", "nos3", "bcsstk08", "orsirr_1",
                           "e05r0000", "fs_541_1", "watt_2", "cage5",
                           "Trefethen_500", "gr_30_30", "hor_131", "steam1"};
    int ran = 0;
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        gs_csr A = {0};
        if (!tu_real_matrix(names[t], &A)) return;
        const char *kv[] = {NULL};
        gs_params p = tu_params(kv);
        isai_out ref = isai_on(NULL, &A, &p);
        const int ok = ref.status == GS_OK;
        isai_out_free(&ref);
        if (ok && A.val) {
            check_against_cpu(&A, kv, names[t]);
            const char *k2[] = {"isai-power", "2", NULL};
            char what[96];
            snprintf(what, sizeof what, "%s ISAI(2)", names[t]);
            check_against_cpu(&A, k2, what);
            ran++;
        }
        gs_csr_free(&A);
    }
    ck_assert_msg(ran >= 5, "only %d real matrices set up", ran);
}
END_TEST

/* T with columns of chosen lengths: a bidiagonal base (every column of
 * length 2, the first (upper) or last (lower) of 1), and for each c a column
 * of len[c] entries: lower (unit diagonal): column at[c], rows at[c] ..
 * at[c] + len[c] - 1; upper (diagonal 2): column n - 1 - at[c], the len[c]
 * rows ending at its diagonal. Off-diagonal entries small: well conditioned. */
static gs_csr kernel_matrix(int32_t n, const int32_t *at, const int32_t *len, int count, int lower)
{
    int64_t cap = 2 * (int64_t)n;
    for (int c = 0; c < count; c++) cap += len[c];
    int32_t *ri = malloc((size_t)cap * sizeof(int32_t)), *ci = malloc((size_t)cap * sizeof(int32_t));
    double *v = malloc((size_t)cap * sizeof(double));
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) {
        ri[nnz] = i, ci[nnz] = i, v[nnz++] = lower ? 1.0 : 2.0;
        if (i > 0 && lower) ri[nnz] = i, ci[nnz] = i - 1, v[nnz++] = -0.3;
        if (i > 0 && !lower) ri[nnz] = i - 1, ci[nnz] = i, v[nnz++] = -0.3;
    }
    for (int c = 0; c < count; c++) {
        const double x = 0.4 / sqrt((double)len[c]);
        if (lower)
            for (int32_t r = at[c] + 2; r < at[c] + len[c] && r < n; r++) /* past the base's two */
                ri[nnz] = r, ci[nnz] = at[c], v[nnz++] = x * (1 + (r % 3));
        else
            for (int32_t r = n - 1 - at[c] - (len[c] - 1); r < n - 1 - at[c] - 1; r++)
                if (r >= 0) ri[nnz] = r, ci[nnz] = n - 1 - at[c], v[nnz++] = x * (1 + (r % 3));
    }
    gs_csr T = {0};
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(n, n, nnz, ri, ci, v, &T, &err) == GS_OK, "%s", err.msg);
    free(ri), free(ci), free(v);
    return T;
}

/* The generation's cut to the excess system: the debug switch (0: the
 * default, ISAI_BLOCK_MAX = 4096), and the cut it gives. */
static int64_t use_excess_cut(long long above)
{
    gs_debug dbg;
    memset(&dbg, 0, sizeof dbg);
    dbg.isai_excess_above = above;
    gs_engine_cuda_set_debug(gpu, &dbg);
    excess_cut = above > 0 && above < 4096 ? above : 4096;
    return excess_cut;
}

/* The generation alone (batched kernels and excess system): columns on both
 * sides of every length class, and of the cut to the excess system at its
 * default (4097 and 5000 go there) and moved down by the switch to 40 and
 * 300. Tolerance: with T given, a column the batch solves is the
 * reference's substitution in the same order for L (64 u); the backward
 * substitution of U, and any column the excess system solves (the sync-free
 * solve sums each row by lanes, with fused multiply-adds), differ by
 * rounding only: T here is diagonally dominant (diagonal 1 or 2, the rest
 * of a column at most 0.3 + 0.4 / sqrt(len) x 3), so the substitution's
 * error stays below m u |x|_max amplified by at most a few: 1e-12 of the
 * column's largest entry, the columns being at most 5000 long. */
START_TEST(test_kernel_thresholds)
{
    /* each list's longest decides the lane-group size of the short columns */
    static const int32_t lens[][4] = {
        {3, 4, 0, 0},          {4, 5, 0, 0},          {7, 8, 0, 0},          {8, 9, 0, 0},
        {15, 16, 0, 0},        {16, 17, 0, 0},        {31, 32, 0, 0},        {32, 33, 0, 0},
        {33, 63, 64, 65},      {64, 127, 128, 129},   {128, 129, 255, 256},  {256, 257, 1023, 1024},
        {1024, 1025, 4095, 4096}, {4096, 4097, 300, 5000}, {39, 40, 41, 300}, {299, 300, 301, 3},
    };
    static const long long cuts[] = {0, 40, 300};
    for (size_t u = 0; u < sizeof cuts / sizeof cuts[0]; u++) {
        const int64_t cut = use_excess_cut(cuts[u]);
        for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
            int32_t at[4], len[4];
            int count = 0, longest = 0;
            for (int c = 0; c < 4; c++)
                if (lens[t][c] > 0) {
                    at[count] = 37 + 311 * c, len[count] = lens[t][c];
                    longest = len[count] > longest ? len[count] : longest;
                    count++;
                }
            const int32_t n = longest + 37 + 311 * 4 + 50;
            for (int lower = 1; lower >= 0; lower--)
                for (int k = 1; k <= (longest <= 64 ? 2 : 1); k++) {
                    gs_csr T = kernel_matrix(n, at, len, count, lower), want = {0}, got = {0};
                    gs_error err = {0};
                    int64_t lw = 0, lg = 0;
                    int32_t bad = -1;
                    ck_assert_msg(gs_isai_generate(NULL, &T, lower, k, &want, &lw, &err) == GS_OK,
                                  "%s", err.msg);
                    ck_assert_msg(gs_isai_cuda_hook_generate(gpu, &T, lower, k, &got, &lg, &bad) ==
                                      GS_OK,
                                  "%s", gpu->err.msg);
                    char what[128];
                    snprintf(what, sizeof what, "%s, k = %d, columns up to %d, cut %lld",
                             lower ? "L" : "U", k, longest, (long long)cut);
                    ck_assert_msg(bad == 0, "%s: column %d flagged", what, bad);
                    ck_assert_msg(lw == lg, "%s: longest %lld, reference %lld", what,
                                  (long long)lg, (long long)lw);
                    if (k == 1) ck_assert_msg(lg >= longest, "%s: longest %lld", what, (long long)lg);
                    assert_close(&want, &got, lower && lw <= cut ? 64 * U64 : 1e-12, 1, what);
                    assert_isai_property(&T, &got, what);
                    gs_csr_free(&T), gs_csr_free(&want), gs_csr_free(&got);
                }
        }
    }
    use_excess_cut(0);
}
END_TEST

/* A zero on T's diagonal: the column that meets it is flagged, whether the
 * batch solves it or (cut 1: every column of 2 or more) the excess system. */
START_TEST(test_kernel_zero_diagonal)
{
    const int32_t at[1] = {5}, len[1] = {40};
    static const long long cuts[] = {0, 1};
    for (size_t u = 0; u < 2; u++) {
        use_excess_cut(cuts[u]);
        gs_csr T = kernel_matrix(200, at, len, 1, 0), M = {0};
        for (int64_t p = T.row_ptr[20]; p < T.row_ptr[21]; p++)
            if (T.col[p] == 20) T.val[p] = 0.0;
        int64_t longest = 0;
        int32_t bad = 0;
        ck_assert_msg(gs_isai_cuda_hook_generate(gpu, &T, 0, 1, &M, &longest, &bad) == GS_OK,
                      "%s", gpu->err.msg);
        /* columns 21 and 22 (1-based) meet row 21; column 21 first */
        ck_assert_msg(bad == 21, "zero u_21,21, cut %lld: flagged column %d", cuts[u], bad);
        gs_csr_free(&T), gs_csr_free(&M);
    }
    use_excess_cut(0);
}
END_TEST

static gs_csr arrow(int32_t n);

/* Dense rows and columns (issue 32): an arrowhead with a dense first row
 * and column, as bloweybq (column 1 of L and M_L has n entries; row 1 of U
 * has n, met by every column of M_U), and a 2D convection-diffusion grid
 * bordered by `border` dense last rows and columns (the last columns of U
 * and M_U have up to n entries; the last rows of L are dense). Non-positive
 * off-diagonals and a row-dominant diagonal: M-matrices, ILU(0) exists. */
static gs_csr arrowhead_first(int32_t n)
{
    const int64_t cap = 5 * (int64_t)n;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        double off = 0.0;
        for (int32_t j = (i == 0 ? 0 : i - 1); j < (i == 0 ? n : i + 2) && j < n; j++) {
            const double x = j == i - 1 || j == i + 1 ? -1.0 : i == 0 && j > 1 ? -1.0 / (1 + j % 5) : 0.0;
            if (x != 0.0) ri[m] = i, ci[m] = j, v[m++] = x, off += -x;
        }
        if (i > 1) ri[m] = i, ci[m] = 0, v[m++] = -0.9, off += 0.9;
        ri[m] = i, ci[m] = i, v[m++] = off + 1.0 + 0.01 * i;
    }
    gs_csr A = tu_from_triplets(n, n, m, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

static gs_csr bordered_grid(int32_t nx, int32_t border)
{
    const int32_t g = nx * nx, n = g + border;
    const int64_t cap = (int64_t)g * (5 + border) + (int64_t)border * n;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        double off = 0.0;
        if (i < g) { /* upwind: west -1.3, east -0.7, north and south -1 */
            const int32_t x = i % nx, y = i / nx;
            const int32_t nb[4] = {x > 0 ? i - 1 : -1, x + 1 < nx ? i + 1 : -1,
                                   y > 0 ? i - nx : -1, y + 1 < nx ? i + nx : -1};
            const double w[4] = {-1.3, -0.7, -1.0, -1.0};
            for (int e = 0; e < 4; e++)
                if (nb[e] >= 0) ri[m] = i, ci[m] = nb[e], v[m++] = w[e], off -= w[e];
            for (int32_t b = 0; b < border; b++)
                ri[m] = i, ci[m] = g + b, v[m++] = -0.5 / border, off += 0.5 / border;
        } else {
            for (int32_t j = 0; j < n; j++)
                if (j != i) {
                    const double x = j < g ? -1.0 / (1 + j % 7) : -0.3;
                    ri[m] = i, ci[m] = j, v[m++] = x, off -= x;
                }
        }
        ri[m] = i, ci[m] = i, v[m++] = off + 1.0;
    }
    gs_csr A = tu_from_triplets(n, n, m, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* Whole setups on dense rows and columns, the cut moved so that columns lie
 * on both sides of it (64: the dense ones in the excess system; 8: also the
 * bordered grid's columns of L of 9 to 11 entries; 1: every column of 2 or
 * more), against the CPU reference (check_against_cpu: patterns exact,
 * values within 1e-9 of the column's largest as for every setup, (T M - I)
 * = 0 on the pattern within (2 m + 8) u (|T| |M|): the sync-free solve is
 * backward stable row by row as the substitution is, its sums in another
 * order, each row's error within gamma of its length <= m; and the
 * report's excess columns and entries, counted from the reference's M).
 * arrowhead 5000: column 1 of M_L past the default cut. */
START_TEST(test_excess_setups)
{
    struct {
        gs_csr A;
        const char *what;
        long long cuts[4];
    } cases[] = {
        {arrowhead_first(1500), "arrowhead 1500", {0, 64, 8, 1}},
        {bordered_grid(30, 8), "bordered grid 30^2 + 8", {0, 64, 8, 1}},
        {bordered_grid(10, 3), "bordered grid 10^2 + 3, ISAI(2)", {64, 8, 1, -1}},
        {arrow(600), "arrow 600", {64, 1, -1, -1}},
        {arrowhead_first(5000), "arrowhead 5000", {0, -1, -1, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int isai2 = strstr(cases[c].what, "ISAI(2)") != NULL;
        const char *kv[] = {"isai-power", isai2 ? "2" : "1", NULL};
        for (int u = 0; u < 4 && cases[c].cuts[u] >= 0; u++) {
            const int64_t cut = use_excess_cut(cases[c].cuts[u]);
            char what[128];
            snprintf(what, sizeof what, "%s, cut %lld", cases[c].what, (long long)cut);
            check_against_cpu(&cases[c].A, kv, what);
        }
        gs_csr_free(&cases[c].A);
    }
    use_excess_cut(0);
}
END_TEST

/* --time-limit inside the generation: the stage hook, told that the excess
 * system starts, waits until the deadline has passed; the setup then stops
 * with GS_ERR_TIME_LIMIT naming the stage, every device byte freed. */
static void wait_past_deadline(void *ctx, const char *name)
{
    const double deadline = *(const double *)ctx;
    if (strstr(name, "excess"))
        while (gs_now() < deadline) {
        }
}

START_TEST(test_excess_time_limit)
{
    gs_csr A = arrowhead_first(1500);
    use_excess_cut(64);
    const char *kv[] = {NULL};
    gs_params p = tu_params(kv);
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_error err = {0};
    poison_device_heap();
    const size_t base = gpu->device_bytes_now;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &Ae), GS_OK);
    double deadline = gs_now() + 3.0; /* the stages before take milliseconds */
    gs_pc_hook hook;
    memset(&hook, 0, sizeof hook);
    hook.stage_begin = wait_past_deadline, hook.ctx = &deadline, hook.deadline = deadline;
    const int status = gs_pc_create_hooked(gs_pc_find("isai"), gpu, &p, &A, Ae, &hook, &pc, &err);
    ck_assert_msg(status == GS_ERR_TIME_LIMIT && pc == NULL, "status %s: %s",
                  gs_status_name(status), err.msg);
    ck_assert_msg(strstr(err.msg, "'isai L'") != NULL, "%s", err.msg);
    gpu->ops->mat_destroy(gpu, Ae);
    ck_assert_msg(gpu->device_bytes_now == base, "device bytes leaked: %zu now, %zu before",
                  gpu->device_bytes_now, base);
    gs_error_clear(&gpu->err);
    use_excess_cut(0);
    gs_csr_free(&A);
}
END_TEST

/* z = M r on both engines, plain, with sweeps, with exact solves. */
START_TEST(test_apply)
{
    gs_csr A = tu_generated("convdiff3d:11x10x9");
    const int32_t n = A.n_rows;
    double *r = malloc((size_t)n * sizeof(double)), *zc = malloc((size_t)n * sizeof(double)),
           *zg = malloc((size_t)n * sizeof(double));
    for (int32_t i = 0; i < n; i++) r[i] = sin(0.37 * i) + 0.1;
    const char *cases[][5] = {{NULL}, {"isai-sweeps", "2", NULL}, {"trisolve", "exact", NULL},
                              {"isai-power", "2", "isai-sweeps", "1", NULL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gs_params p = tu_params(cases[c]);
        gs_engine *cpu = NULL;
        gs_error err = {0};
        gs_mat *Ac = NULL, *Ag = NULL;
        gs_pc *pc = NULL, *pg = NULL;
        ck_assert_int_eq(gs_engine_cpu_create(&cpu, &err), GS_OK);
        ck_assert_int_eq(cpu->ops->mat_create(cpu, &A, GS_FP64, &Ac), GS_OK);
        ck_assert_msg(gs_pc_create(gs_pc_find("isai"), cpu, &p, &A, Ac, &pc, &err) == GS_OK, "%s",
                      err.msg);
        poison_device_heap();
        ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &Ag), GS_OK);
        ck_assert_msg(gs_pc_create(gs_pc_find("isai"), gpu, &p, &A, Ag, &pg, &err) == GS_OK, "%s",
                      err.msg);
        tu_pc_run rc = {cpu, Ac, pc}, rg = {gpu, Ag, pg};
        tu_pc_apply(&rc, r, zc, n);
        tu_pc_apply(&rg, r, zg, n);
        double big = 0.0;
        for (int32_t i = 0; i < n; i++) big = fmax(big, fabs(zc[i]));
        for (int32_t i = 0; i < n; i++)
            ck_assert_msg(isfinite(zg[i]) && fabs(zg[i] - zc[i]) <= 1e-9 * big,
                          "case %zu: z_%d = %.17g, reference %.17g", c, i + 1, zg[i], zc[i]);
        gs_pc_destroy(pc), gs_pc_destroy(pg);
        cpu->ops->mat_destroy(cpu, Ac), gpu->ops->mat_destroy(gpu, Ag);
        gs_engine_destroy(cpu);
    }
    free(r), free(zc), free(zg);
    gs_csr_free(&A);
}
END_TEST

/* A banded nonsymmetric matrix: entries (i, j) for i - lower <= j <= i +
 * upper, a_ii = 2 (lower + upper) + 1, off-diagonal entries in (-1, 0)
 * from a fixed seed (diagonally dominant: ILU(0) exists). */
static gs_csr banded(int32_t n, int32_t lower, int32_t upper, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    const int64_t cap = (int64_t)n * (lower + upper + 1);
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i - lower; j <= i + upper; j++) {
            if (j < 0 || j >= n) continue;
            ri[m] = i, ci[m] = j;
            v[m++] = j == i ? 2.0 * (lower + upper) + 1.0 : -tu_uniform(&r);
        }
    gs_csr A = tu_from_triplets(n, n, m, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* An arrow: a tridiagonal matrix with a full last row and column (the last
 * row depends on every row: n levels, a row of n entries, every other
 * row's upper part reaching column n - 1). */
static gs_csr arrow(int32_t n)
{
    int32_t *ri = malloc((size_t)5 * n * sizeof *ri), *ci = malloc((size_t)5 * n * sizeof *ci);
    double *v = malloc((size_t)5 * n * sizeof *v);
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++) {
            const int near = j >= i - 1 && j <= i + 1, edge = i == n - 1 || j == n - 1;
            if (!near && !edge) continue;
            ri[m] = i, ci[m] = j;
            v[m++] = i == j ? (i == n - 1 ? 2.0 * n : 4.0) : -1.0 / (1.0 + (i + 2 * j) % 7);
        }
    gs_csr A = tu_from_triplets(n, n, m, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* Our exact ILU(0) on level structures the generated problems do not
 * reach: one level (no entry below the diagonal), thousands of levels (a
 * bidiagonal-lower band: a chain), rows longer than a warp with the 32-lane
 * groups striding over row k's upper part (band 40 + 40), the lanes a row
 * from 1 to 32 (the power of two at or above the mean row length), and the arrow's row of n entries.
 * Both --ilu exact and --ilu cusparse against the reference. */
START_TEST(test_ilu0_levels)
{
    struct {
        int32_t n, lower, upper;
        const char *what;
    } bands[] = {
        {3000, 0, 2, "one level (upper band), 4 lanes"}, {700, 0, 0, "diagonal, 1 lane"},
        {3000, 1, 0, "3000 levels (lower bidiagonal), 2 lanes"}, {2500, 1, 1, "tridiagonal"},
        {600, 2, 1, "4 lanes"}, {500, 3, 3, "8 lanes"}, {400, 6, 6, "16 lanes"},
        {300, 40, 40, "rows of 81, 32 lanes"},   {200, 70, 5, "long lower parts"},
    };
    const char *scale_no[] = {"scale", "no", NULL}, *none[] = {NULL},
               *cusparse[] = {"ilu", "cusparse", NULL};
    for (size_t b = 0; b < sizeof bands / sizeof bands[0]; b++) {
        gs_csr A = banded(bands[b].n, bands[b].lower, bands[b].upper, 17 + b);
        char what[96];
        snprintf(what, sizeof what, "%s, scale no", bands[b].what);
        check_against_cpu(&A, scale_no, what);
        check_against_cpu(&A, none, bands[b].what);
        snprintf(what, sizeof what, "%s, cusparse", bands[b].what);
        check_against_cpu(&A, cusparse, what);
        gs_csr_free(&A);
    }
    const int32_t sizes[] = {40, 300};
    for (size_t k = 0; k < 2; k++) {
        gs_csr A = arrow(sizes[k]);
        char what[64];
        snprintf(what, sizeof what, "arrow %d", (int)sizes[k]);
        check_against_cpu(&A, scale_no, what);
        check_against_cpu(&A, none, what);
        gs_csr_free(&A);
    }
}
END_TEST

/* Bad input: the same status and message as the CPU reference. */
static void expect_same_failure(const gs_csr *A, const char *const *kv, const char *what)
{
    gs_params p = tu_params(kv);
    isai_out want = isai_on(NULL, A, &p), got = isai_on(gpu, A, &p);
    ck_assert_msg(want.status != GS_OK, "%s: the reference did not fail", what);
    ck_assert_msg(got.status == want.status && strcmp(got.err.msg, want.err.msg) == 0,
                  "%s: cuda %s '%s', reference %s '%s'", what, gs_status_name(got.status),
                  got.err.msg, gs_status_name(want.status), want.err.msg);
    isai_out_free(&want), isai_out_free(&got);
}

START_TEST(test_bad_input)
{
    /* a zero diagonal entry (scale yes), a missing one (scale no), a zero
     * pivot after elimination (scale no): [[1 1],[1 1]] in a block */
    gs_csr A = tu_generated("poisson3d:5");
    for (int64_t p = A.row_ptr[40]; p < A.row_ptr[41]; p++)
        if (A.col[p] == 40) A.val[p] = 0.0;
    const char *none[] = {NULL}, *noscale[] = {"scale", "no", NULL},
               *sweeps[] = {"ilu", "sweeps:2", NULL};
    expect_same_failure(&A, none, "zero diagonal, scale yes");
    gs_csr_free(&A);
    const int32_t ri[] = {0, 0, 1, 1, 2, 2, 3}, ci[] = {0, 1, 0, 1, 2, 3, 3};
    const double v[] = {1, 1, 1, 1, 2, 1, 3};
    gs_csr B = tu_from_triplets(4, 4, 7, ri, ci, v); /* pivot u_22 = 1 - 1 = 0 */
    expect_same_failure(&B, noscale, "zero pivot, scale no");
    expect_same_failure(&B, none, "zero pivot, scale yes");
    expect_same_failure(&B, sweeps, "zero pivot, sweeps");
    const char *cusparse[] = {"ilu", "cusparse", "scale", "no", NULL};
    expect_same_failure(&B, cusparse, "zero pivot, cusparse");
    gs_csr_free(&B);
    const int32_t r2[] = {0, 1, 1, 2}, c2[] = {0, 0, 2, 2};
    const double v2[] = {1, 1, 1, 1};
    gs_csr C = tu_from_triplets(3, 3, 4, r2, c2, v2); /* row 2 has no diagonal */
    expect_same_failure(&C, noscale, "missing diagonal, scale no");
    expect_same_failure(&C, none, "missing diagonal, scale yes");
    gs_csr_free(&C);
    /* a tiny pivot: l_21 = 1e10 / 1e-300 overflows (the reference names the
     * non-finite entry of row 2); a zero pivot late in a long chain, found
     * in row 2001 of a lower bidiagonal band whose row 2000 cancels */
    const int32_t r3[] = {0, 0, 1, 1}, c3[] = {0, 1, 0, 1};
    const double v3[] = {1e-300, 1e10, 1e10, 1};
    gs_csr D = tu_from_triplets(2, 2, 4, r3, c3, v3);
    expect_same_failure(&D, noscale, "tiny pivot, scale no");
    gs_csr_free(&D);
    gs_csr E = banded(3000, 1, 1, 5);
    for (int64_t p = E.row_ptr[2000]; p < E.row_ptr[2001]; p++) E.val[p] = 1.0; /* row 2001 */
    for (int64_t p = E.row_ptr[1999]; p < E.row_ptr[2000]; p++) E.val[p] = 1.0; /* row 2000 */
    for (int64_t p = E.row_ptr[1998]; p < E.row_ptr[1999]; p++)
        if (E.col[p] == 1999) E.val[p] = 0.0; /* (2000, 2000) keeps its 1 */
    expect_same_failure(&E, noscale, "zero pivot in row 2001, scale no");
    gs_csr_free(&E);
}
END_TEST

/* The device's ISAI (IDR(4)) and its exact triangular solves (BiCGSTAB, whose
 * first apply is inside the captured iteration: the solves' analysis must
 * have happened at setup) take about the reference's iterations. */
static const struct {
    const char *method, *kv[3];
} iteration_cases[] = {
    {"idr", {NULL}},
    {"bicgstab", {"trisolve", "exact", NULL}},
};

START_TEST(test_iterations)
{
    const char *method = iteration_cases[_i].method;
    gs_csr A = tu_generated("convdiff3d:16");
    gs_params p = tu_params(iteration_cases[_i].kv);
    gs_krylov_result rc, rg;
    gs_error err = {0};
    ck_assert_msg(tu_pc_solve(&A, "isai", &p, method, 2000, &rc, &err) == GS_OK, "%s", err.msg);
    /* the same on the GPU engine: A, the setup and the solve there */
    gs_mat *Ag = NULL;
    gs_pc *pg = NULL;
    ck_assert_int_eq(gpu->ops->mat_create(gpu, &A, GS_FP64, &Ag), GS_OK);
    ck_assert_msg(gs_pc_create(gs_pc_find("isai"), gpu, &p, &A, Ag, &pg, &err) == GS_OK, "%s",
                  err.msg);
    const int32_t n = A.n_rows;
    double *ones = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(&A, ones, b);
    gs_vec *vb = NULL, *vx = NULL;
    gs_krylov_opts opts = {.tol = 1e-8, .maxit = 2000, .restart = 30, .idr_s = 4, .check_every = 1};
    ck_assert_int_eq(gpu->ops->vec_create(gpu, n, &vb), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_create(gpu, n, &vx), GS_OK);
    ck_assert_int_eq(gpu->ops->vec_upload(gpu, vb, b), GS_OK);
    ck_assert_int_eq(gpu->ops->set(gpu, vx, 0.0), GS_OK);
    memset(&rg, 0, sizeof rg);
    ck_assert_msg(gs_method_find(method)->solve(gpu, Ag, pg, vb, vx, &opts, &rg) == GS_OK,
                  "%s: %s", method, gpu->err.msg);
    ck_assert_msg(rg.reason == GS_REASON_CONVERGED, "%s: cuda reason %d", method, (int)rg.reason);
    ck_assert_msg(rc.iterations > 0 && rg.iterations <= rc.iterations + rc.iterations / 10 + 2,
                  "%s iterations: cuda %ld, cpu %ld", method, (long)rg.iterations,
                  (long)rc.iterations);
    gpu->ops->vec_destroy(gpu, vb), gpu->ops->vec_destroy(gpu, vx);
    gs_pc_destroy(pg);
    gpu->ops->mat_destroy(gpu, Ag);
    gs_krylov_result_free(&rc), gs_krylov_result_free(&rg);
    free(ones), free(b);
    gs_csr_free(&A);
}
END_TEST

static void gpu_up(void)
{
    gs_error err = {0};
    ck_assert_msg(gs_engine_cuda_create(&gpu, &err) == GS_OK, "%s", err.msg);
}

static void gpu_down(void)
{
    gs_engine_destroy(gpu);
    gpu = NULL;
}

#endif /* GS_HAVE_CUDA */

static Suite *cuda_isai_suite(int have_gpu)
{
    Suite *s = suite_create("cuda_isai");
    TCase *tc = tcase_create("cuda_isai");
    tcase_set_timeout(tc, 600);
#if GS_HAVE_CUDA
    if (have_gpu) {
        tcase_add_unchecked_fixture(tc, gpu_up, gpu_down);
        tcase_add_test(tc, test_kernel_thresholds);
        tcase_add_test(tc, test_kernel_zero_diagonal);
        tcase_add_test(tc, test_excess_setups);
        tcase_add_test(tc, test_excess_time_limit);
        tcase_add_test(tc, test_generated);
        tcase_add_test(tc, test_ilu0_levels);
        tcase_add_test(tc, test_real);
        tcase_add_test(tc, test_apply);
        tcase_add_test(tc, test_bad_input);
        tcase_add_loop_test(tc, test_iterations, 0,
                            (int)(sizeof iteration_cases / sizeof iteration_cases[0]));
    }
#else
    (void)have_gpu;
#endif
    suite_add_tcase(s, tc);
    return s;
}

/* CUDA cannot be used in a child forked after the parent touched it: run
 * the tests in this process. */
int main(void)
{
    const int have_gpu = gs_cuda_device_count() > 0;
    if (!have_gpu) printf("check_cuda_isai: skipped: no CUDA device\n");
    SRunner *sr = srunner_create(cuda_isai_suite(have_gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
