/* check_pc_gspai.c - GSPAI-Opt (src/precond/pc_gspai.c) by its defining property:
 * the pattern of M is exactly (E + |A|)^k and every column of M solves
 * min ||A(I,J) m - e_k(I)||_2 (long-double oracle, perturbation); plus the
 * S1/S2 choice from alpha and beta, iterations against Jacobi, bad input. */
#include "gen.h"
#include "spai_common.h"
#include "testutil.h"

static gs_params params2(const char *n1, const char *v1, const char *n2, const char *v2)
{
    gs_params p = {0};
    if (n1) gs_params_set(&p, n1, v1, NULL);
    if (n2) gs_params_set(&p, n2, v2, NULL);
    return p;
}

static gs_csr gspai_matrix(const gs_csr *A, const gs_params *p)
{
    return tu_pc_saved_factor(A, "gspai-opt", p, "M", NULL);
}

/* The pattern of (E + |A|)^k by dense boolean products, made here. */
static unsigned char *dense_pattern_power(const gs_csr *A, int k)
{
    const int n = A->n_rows;
    unsigned char *B = calloc((size_t)n * n, 1), *P = calloc((size_t)n * n, 1);
    unsigned char *T = calloc((size_t)n * n, 1);
    ck_assert(B && P && T);
    for (int i = 0; i < n; i++) {
        B[(size_t)i * n + i] = 1;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) B[(size_t)i * n + A->col[p]] = 1;
    }
    memcpy(P, B, (size_t)n * n);
    for (int step = 1; step < k; step++) {                   /* P = P B */
        memset(T, 0, (size_t)n * n);
        for (int i = 0; i < n; i++)
            for (int l = 0; l < n; l++)
                if (P[(size_t)i * n + l])
                    for (int j = 0; j < n; j++) T[(size_t)i * n + j] |= B[(size_t)l * n + j];
        memcpy(P, T, (size_t)n * n);
    }
    free(B), free(T);
    return P;
}

/* Pattern of M is exactly (E + |A|)^k, and the columns are the local
 * least-squares solutions. */
static void check_gspai_on(const gs_csr *A, int k, int check_minimal, const char *what)
{
    char text[8];
    snprintf(text, sizeof text, "%d", k);
    gs_params p = params2("pattern-power", text, NULL, NULL);
    gs_csr M = gspai_matrix(A, &p);
    unsigned char *P = dense_pattern_power(A, k);
    const int n = A->n_rows;
    int64_t count = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int stored = gs_csr_find(&M, i, j) >= 0;
            ck_assert_msg(stored == P[(size_t)i * n + j], "%s k=%d: M(%d,%d) %s", what, k, i + 1,
                          j + 1, stored ? "stored outside (E+|A|)^k" : "missing");
            count += stored;
        }
    ck_assert_int_eq(count, M.nnz);
    tu_spai_report rep = tu_check_spai_columns(A, &M, check_minimal);
    char label[200];
    snprintf(label, sizeof label, "%s k=%d", what, k);
    tu_assert_spai_report(&rep, label);
    free(P);
    gs_csr_free(&M);
}

START_TEST(gspai_columns_are_local_least_squares_solutions)
{
    tu_rng r = tu_rng_seed(31);
    for (int k = 1; k <= 2; k++)
        for (int rep = 0; rep < 4; rep++) {
            gs_csr A = tu_random_matrix(&r, 40 + (int)(tu_next(&r) % 40), 2);
            check_gspai_on(&A, k, 0, "random");
            gs_csr_free(&A);
        }
}
END_TEST

START_TEST(gspai_columns_are_minimal_on_their_pattern)
{
    tu_rng r = tu_rng_seed(32);
    for (int k = 1; k <= 2; k++) {
        gs_csr A = tu_random_matrix(&r, 45, 2);
        check_gspai_on(&A, k, 1, "random");
        gs_csr_free(&A);
    }
    char name[64];
    gs_csr A = tu_generated_named("convdiff3d:4", name, sizeof name);
    check_gspai_on(&A, 1, 1, name);
    check_gspai_on(&A, 2, 1, name);
    gs_csr_free(&A);
}
END_TEST

START_TEST(gspai_property_on_real_matrices)
{
    const char *names[] = {"pores_1", "cage5", "fs_183_1", "arc130", "steam1"};
    for (int m = 0; m < 5; m++) {
        gs_csr A;
        if (!tu_real_matrix(names[m], &A)) return;
        check_gspai_on(&A, 1, 0, names[m]);
        check_gspai_on(&A, 2, 0, names[m]);
        gs_csr_free(&A);
    }
}
END_TEST

/* ---- strategy: alpha, beta from n2max, n2avg (2^(a-1) < x <= 2^a) ---- */

static int log2_ceiling(double x)
{
    int a = 0;
    while (!(x <= pow(2.0, a))) a++;
    ck_assert(a == 0 || pow(2.0, a - 1) < x);
    return a;
}

/* Tridiagonal (n = 64) plus entries in rows 0..d-1 of column 0: n2_0 = d,
 * the other n2_k are 2 or 3, so d sets alpha - beta. */
static gs_csr spread_matrix(int d)
{
    const int n = 64;
    int32_t ri[256], ci[256];
    double v[256];
    int64_t nz = 0;
    for (int i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = i, v[nz++] = 4;
        if (i > 0) ri[nz] = i, ci[nz] = i - 1, v[nz++] = -1;
        if (i + 1 < n) ri[nz] = i, ci[nz] = i + 1, v[nz++] = -1;
    }
    for (int i = 2; i < d; i++) ri[nz] = i, ci[nz] = 0, v[nz++] = 0.5;
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, v, &A, &err) == GS_OK);
    return A;
}

START_TEST(gspai_chooses_the_strategy_from_alpha_and_beta)
{
    const int spreads[] = {3, 8, 16, 64};
    int seen[8] = {0};
    for (int s = 0; s < 4; s++) {
        gs_csr A = spread_matrix(spreads[s]);
        for (int forced = 0; forced < 3; forced++) {
            const char *value = forced == 0 ? "auto" : forced == 1 ? "s1" : "s2";
            gs_params p = params2("strategy", value, NULL, NULL);
            tu_pc_run run;
            gs_error err = {0};
            tu_pc_build_ok(&A, "gspai-opt", &p, &run);
            gs_csr M = {0};
            tu_pc_saved_matrix(run.pc, "M", &M);
            int n2max = 0;
            gs_csr MT = {0};
            ck_assert(gs_csr_transpose(&M, &MT, &err) == GS_OK);
            for (int k = 0; k < MT.n_rows; k++) {
                int n2 = (int)(MT.row_ptr[k + 1] - MT.row_ptr[k]);
                if (n2 > n2max) n2max = n2;
            }
            double n2avg = (double)M.nnz / M.n_rows;
            int alpha = log2_ceiling(n2max), beta = log2_ceiling(n2avg);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "n2max")->num, n2max);
            ck_assert(fabs(tu_pc_extra(run.pc, "n2avg")->num - n2avg) <= 1e-12 * n2avg);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "alpha")->num, alpha);
            ck_assert_int_eq((int)tu_pc_extra(run.pc, "beta")->num, beta);
            ck_assert(tu_pc_extra(run.pc, "n1max")->num >= n2max);
            /* paper: alpha = beta -> S1, alpha - beta >= 3 -> S2; between:
             * S1, as measured (docs/gspai-opt.md) */
            const char *want = forced == 1 ? "S1" : forced == 2 ? "S2"
                               : alpha - beta >= 3 ? "S2" : "S1";
            ck_assert_str_eq(tu_pc_extra(run.pc, "strategy")->str, want);
            ck_assert_str_eq(tu_pc_extra(run.pc, "strategy_from")->str,
                             forced ? "forced" : "auto");
            ck_assert(strstr(run.pc->description, want) != NULL);
            seen[alpha - beta < 3 ? alpha - beta : 3] = 1;
            gs_csr_free(&M), gs_csr_free(&MT);
            tu_pc_release(&run);
        }
        gs_csr_free(&A);
    }
    for (int g = 0; g < 4; g++) ck_assert_msg(seen[g], "no case with alpha - beta = %d", g);
}
END_TEST

START_TEST(gspai_reports_its_stages)
{
    gs_csr A = spread_matrix(8);
    tu_pc_run run;
    gs_params p = params2(NULL, NULL, NULL, NULL);
    tu_pc_build_ok(&A, "gspai-opt", &p, &run);
    ck_assert(strstr(run.pc->description, "pattern-power=1") != NULL);
    const char *stages[] = {"pattern", "dimensions", "least squares", "assemble", "upload", NULL};
    tu_assert_stages(run.pc, stages);
    ck_assert(run.pc->apply_bytes > 0 && !run.pc->symmetric);
    tu_pc_release(&run);
    gs_csr_free(&A);
}
END_TEST

/* ---- the columns QR does not take (spai_large.c) ---- */

/* Column k of M against the normal equations of its local problem, in long
 * double: t = Â^T (Â m - e_k) over every row (rows outside I_k add 0).
 * Returns ||t|| / allowed, allowed = 4 (n1 + n2) u (||Â||_F^2 ||m|| +
 * ||Â||_F ||r|| + ||Â^T e_k||): the normal equations formed and factored
 * in floating point (each Gram entry a dot product of at most n1 terms, a
 * Cholesky of n2: Higham Thms 3.5, 10.3) leave a residual of that order,
 * and so does a backward-stable QR solution (its residual term). *relres:
 * ||t|| / ||Â^T e_k||, CGLS's measure. */
static double normal_residual(const gs_csr *AT, const gs_csr *MT, int32_t k, double *relres)
{
    const int32_t n = AT->n_rows;
    const int64_t m0 = MT->row_ptr[k];
    const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - m0);
    long double *v = calloc((size_t)n + 1, sizeof *v);
    ck_assert(v);
    long double fro = 0, mm = 0, rr = 0, tt = 0, cc = 0;
    int32_t n1 = 0;
    for (int32_t a = 0; a < n2; a++) { /* v = Â m */
        const int32_t j = MT->col[m0 + a];
        mm += (long double)MT->val[m0 + a] * MT->val[m0 + a];
        for (int64_t p = AT->row_ptr[j]; p < AT->row_ptr[j + 1]; p++) {
            v[AT->col[p]] += (long double)AT->val[p] * MT->val[m0 + a];
            fro += (long double)AT->val[p] * AT->val[p];
        }
    }
    v[k] -= 1.0L;                      /* v = Â m - e_k */
    for (int32_t r = 0; r < n; r++) rr += v[r] * v[r], n1 += v[r] != 0;
    for (int32_t a = 0; a < n2; a++) {
        const int32_t j = MT->col[m0 + a];
        long double t = 0, c = 0;
        for (int64_t p = AT->row_ptr[j]; p < AT->row_ptr[j + 1]; p++) {
            t += (long double)AT->val[p] * v[AT->col[p]];
            if (AT->col[p] == k) c = AT->val[p];
        }
        tt += t * t, cc += c * c;
    }
    free(v);
    const double u = DBL_EPSILON / 2;
    const double allowed = 4.0 * (n1 + n2) * u *
                           (double)(fro * sqrtl(mm) + sqrtl(fro) * sqrtl(rr) + sqrtl(cc));
    *relres = cc > 0 ? (double)sqrtl(tt / cc) : 0.0;
    return (double)sqrtl(tt) / allowed;
}

/* M of gspai-opt on A with --qr-max, and its report's numbers. */
static gs_csr gspai_with_qr_max(const gs_csr *A, const char *k, const char *qr_max, double lsq[4])
{
    gs_params p = params2("pattern-power", k, "qr-max", qr_max);
    tu_pc_run run;
    gs_csr M = {0};
    tu_pc_build_ok(A, "gspai-opt", &p, &run);
    const char *keys[4] = {"lsq_qr", "lsq_ne", "lsq_cgls", "lsq_cgls_relres"};
    for (int i = 0; i < 4; i++) {
        const gs_kv *kv = tu_pc_extra(run.pc, keys[i]);
        lsq[i] = kv ? kv->num : -1;
    }
    tu_pc_saved_matrix(run.pc, "M", &M);
    tu_pc_release(&run);
    return M;
}

/* --qr-max 0: every column by the normal equations (or, n2 > 512, CGLS);
 * each satisfies its normal equations within the rounding bound, and M
 * agrees with the all-QR M within 10 n2 u kappa^2 (kappa of these local
 * problems below 10^2 for the generated stencils, a few 10^3 for the
 * random matrices: the bound is computed per matrix from the oracle). */
START_TEST(gspai_normal_equations_columns)
{
    tu_rng r = tu_rng_seed(41);
    gs_csr mats[4] = {tu_generated("poisson3d27:5"), tu_generated("convdiff3d:6"),
                      tu_random_matrix(&r, 70, 3), tu_random_matrix(&r, 90, 2)};
    gs_error err = {0};
    for (int i = 0; i < 4; i++) {
        for (int k = 1; k <= 2; k++) {
            double ne[4], qr[4];
            const char *kk = k == 1 ? "1" : "2";
            gs_csr Mn = gspai_with_qr_max(&mats[i], kk, "0", ne);
            gs_csr Mq = gspai_with_qr_max(&mats[i], kk, "2147483647", qr);
            ck_assert_msg(ne[0] == 0 && ne[1] == mats[i].n_rows && ne[2] <= 0,
                          "matrix %d k %d: routes qr %g ne %g cgls %g", i, k, ne[0], ne[1], ne[2]);
            ck_assert_msg(qr[1] < 0, "matrix %d k %d: --qr-max 2^31-1 still took the normal "
                          "equations", i, k);
            gs_csr MTn = {0}, MTq = {0}, AT = {0};
            ck_assert(gs_csr_transpose(&Mn, &MTn, &err) == GS_OK);
            ck_assert(gs_csr_transpose(&Mq, &MTq, &err) == GS_OK);
            ck_assert(gs_csr_transpose(&mats[i], &AT, &err) == GS_OK);
            ck_assert(MTn.nnz == MTq.nnz);
            ck_assert(memcmp(MTn.row_ptr, MTq.row_ptr, ((size_t)MTn.n_rows + 1) * sizeof(int64_t)) == 0);
            ck_assert(memcmp(MTn.col, MTq.col, (size_t)MTn.nnz * sizeof(int32_t)) == 0);
            tu_spai_report rep = tu_check_spai_columns(&mats[i], &Mq, 0);
            const double kappa = rep.max_kappa;
            for (int32_t c = 0; c < MTn.n_rows; c++) {
                double rel = 0;
                const double ratio = normal_residual(&AT, &MTn, c, &rel);
                ck_assert_msg(ratio <= 1.0, "matrix %d k %d column %d: normal residual %.3g of "
                              "its bound", i, k, c + 1, ratio);
                double diff = 0, norm = 0;
                const int64_t p0 = MTn.row_ptr[c], n2 = MTn.row_ptr[c + 1] - p0;
                for (int64_t p = p0; p < p0 + n2; p++) {
                    diff += (MTn.val[p] - MTq.val[p]) * (MTn.val[p] - MTq.val[p]);
                    norm += MTq.val[p] * MTq.val[p];
                }
                ck_assert_msg(sqrt(diff) <= 10.0 * (double)n2 * (DBL_EPSILON / 2) * kappa * kappa * sqrt(norm),
                              "matrix %d k %d column %d: ||m_ne - m_qr|| = %.3g ||m||, kappa %.3g",
                              i, k, c + 1, sqrt(diff / norm), kappa);
            }
            gs_csr_free(&MTn), gs_csr_free(&MTq), gs_csr_free(&AT);
            gs_csr_free(&Mn), gs_csr_free(&Mq);
        }
        gs_csr_free(&mats[i]);
    }
}
END_TEST

/* Two nearly dependent columns of A (one a copy of the other, 1e-7 apart):
 * every local problem holding both has kappa ~ 10^7, whose normal
 * equations fail the pivot test and go back to QR (lsq_ne_to_qr); the
 * result then satisfies its normal equations as QR's does. */
START_TEST(gspai_normal_equations_reject_ill_conditioned_columns)
{
    tu_rng r = tu_rng_seed(43);
    gs_csr B = tu_random_matrix(&r, 60, 3);
    gs_error err = {0};
    int64_t cap = B.nnz * 2 + 8, nz = 0;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    for (int32_t i = 0; i < 60; i++)
        for (int64_t p = B.row_ptr[i]; p < B.row_ptr[i + 1]; p++) {
            if (B.col[p] == 21) continue;
            ri[nz] = i, ci[nz] = B.col[p], v[nz++] = B.val[p];
            if (B.col[p] == 20) ri[nz] = i, ci[nz] = 21, v[nz++] = B.val[p] * (1.0 + 1e-7 * (i % 5 - 2));
        }
    ri[nz] = 21, ci[nz] = 21, v[nz++] = 1e-7; /* keeps the diagonal */
    gs_csr A = tu_from_triplets(60, 60, nz, ri, ci, v);
    free(ri), free(ci), free(v);
    tu_pc_run run;
    gs_params p = params2("qr-max", "0", NULL, NULL);
    tu_pc_build_ok(&A, "gspai-opt", &p, &run);
    const gs_kv *back = tu_pc_extra(run.pc, "lsq_ne_to_qr");
    ck_assert_msg(back && back->num > 0, "no column went back to QR");
    gs_csr M = {0}, MT = {0}, AT = {0};
    tu_pc_saved_matrix(run.pc, "M", &M);
    tu_pc_release(&run);
    ck_assert(gs_csr_transpose(&M, &MT, &err) == GS_OK);
    ck_assert(gs_csr_transpose(&A, &AT, &err) == GS_OK);
    for (int32_t c = 0; c < 60; c++) {
        double rel;
        ck_assert_msg(normal_residual(&AT, &MT, c, &rel) <= 1.0, "column %d", c + 1);
    }
    gs_csr_free(&M), gs_csr_free(&MT), gs_csr_free(&AT), gs_csr_free(&A), gs_csr_free(&B);
}
END_TEST

/* bordered:23x23x1: the 8 dense columns of A put every row in each I_k
 * and give the 8 border columns of M n2 = 530 > 512 unknowns: CGLS (the
 * other columns, 13 x 4305 candidates, stay under --qr-max). Every column meets
 * its normal equations; every CGLS column reaches the reported relative
 * residual (at most GS_SPAI_CGLS_TOL or it ran out of iterations), and the
 * solve still converges in about the iterations of the all-QR M. */
START_TEST(gspai_cgls_columns_of_a_bordered_matrix)
{
    gs_csr A = tu_generated("bordered:23x23x1");
    gs_error err = {0};
    double st[4], qr[4];
    gs_csr M = gspai_with_qr_max(&A, "1", "65536", st);
    ck_assert_msg(st[2] == 8 && st[0] + st[1] == A.n_rows - 8, "routes qr %g ne %g cgls %g", st[0],
                  st[1], st[2]);
    gs_csr MT = {0}, AT = {0};
    ck_assert(gs_csr_transpose(&M, &MT, &err) == GS_OK);
    ck_assert(gs_csr_transpose(&A, &AT, &err) == GS_OK);
    for (int32_t c = 0; c < A.n_rows; c++) {
        double rel = 0;
        const double ratio = normal_residual(&AT, &MT, c, &rel);
        if (MT.row_ptr[c + 1] - MT.row_ptr[c] <= GS_SPAI_NE_MAX)
            ck_assert_msg(ratio <= 1.0, "column %d: normal residual %.3g of its bound", c + 1, ratio);
        else
            ck_assert_msg(rel <= 1.01 * st[3] + 1e-12 && st[3] <= GS_SPAI_CGLS_TOL * 1.0001,
                          "CGLS column %d: relative normal residual %.3g, reported %.3g", c + 1,
                          rel, st[3]);
    }
    (void)qr;
    long its[2] = {0, 0};
    for (int which = 0; which < 2; which++) {
        gs_params p = params2("qr-max", which ? "2147483647" : "65536", NULL, NULL);
        gs_krylov_result res;
        ck_assert(tu_pc_solve(&A, "gspai-opt", &p, "bicgstab", 200, &res, &err) == GS_OK);
        ck_assert_msg(res.reason == GS_REASON_CONVERGED, "qr-max %s: %s", which ? "max" : "default",
                      gs_reason_name(res.reason));
        its[which] = res.iterations;
        gs_krylov_result_free(&res);
    }
    ck_assert_msg(its[0] <= its[1] + 2, "BiCGSTAB: %ld iterations with CGLS columns, %ld with QR's",
                  its[0], its[1]);
    gs_csr_free(&M), gs_csr_free(&MT), gs_csr_free(&AT), gs_csr_free(&A);
}
END_TEST

/* bordered:40x40x1: n0 = 1600 rows, so the dense columns (1601 entries) are
 * heavy (gs_spai_heavy_min_length: 1024) and the grid columns (13 x 12873
 * candidates) take the normal equations with their Gram entries cached:
 * lsq_heavy = 8, and every column meets its normal equations (NE) or the
 * reported CGLS residual. */
START_TEST(gspai_heavy_columns_of_a_bordered_matrix)
{
    gs_csr A = tu_generated("bordered:40x40x1");
    gs_error err = {0};
    gs_params p = params2("pattern-power", "1", NULL, NULL);
    tu_pc_run run;
    tu_pc_build_ok(&A, "gspai-opt", &p, &run);
    const gs_kv *heavy = tu_pc_extra(run.pc, "lsq_heavy"), *ne = tu_pc_extra(run.pc, "lsq_ne");
    const gs_kv *cgls = tu_pc_extra(run.pc, "lsq_cgls"), *rel = tu_pc_extra(run.pc, "lsq_cgls_relres");
    ck_assert_msg(heavy && heavy->num == 8 && ne && ne->num == A.n_rows - 8 && cgls && cgls->num == 8,
                  "heavy %g ne %g cgls %g", heavy ? heavy->num : -1, ne ? ne->num : -1,
                  cgls ? cgls->num : -1);
    gs_csr M = {0}, MT = {0}, AT = {0};
    tu_pc_saved_matrix(run.pc, "M", &M);
    tu_pc_release(&run);
    ck_assert(gs_csr_transpose(&M, &MT, &err) == GS_OK);
    ck_assert(gs_csr_transpose(&A, &AT, &err) == GS_OK);
    for (int32_t c = 0; c < A.n_rows; c++) {
        double r = 0;
        const double ratio = normal_residual(&AT, &MT, c, &r);
        if (MT.row_ptr[c + 1] - MT.row_ptr[c] <= GS_SPAI_NE_MAX)
            ck_assert_msg(ratio <= 1.0, "column %d: normal residual %.3g of its bound", c + 1, ratio);
        else
            ck_assert_msg(r <= 1.01 * rel->num + 1e-12, "CGLS column %d: %.3g, reported %.3g", c + 1,
                          r, rel->num);
    }
    gs_csr_free(&M), gs_csr_free(&MT), gs_csr_free(&AT), gs_csr_free(&A);
}
END_TEST

/* ---- the heavy columns' Gram entries: the chunked dot product ---- */

/* Place of row r in the sorted list c[0..len), or -1. */
static int64_t find_row(const int32_t *c, int64_t len, int32_t r)
{
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (c[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && c[lo] == r ? lo : -1;
}

/* gs_spai_column_dot_chunked's definition, written out: the shorter list (a on a tie) cut
 * by position into GS_SPAI_DOT_CHUNKS pieces, each piece's products over the rows also in
 * b summed in ascending order from 0, the pieces added in order from 0. *mag: sum |terms|,
 * *exact: the sum in long double. */
static double chunked_by_definition(const gs_csr *AT, int32_t a, int32_t b, double *mag,
                                    long double *exact)
{
    if (AT->row_ptr[a + 1] - AT->row_ptr[a] > AT->row_ptr[b + 1] - AT->row_ptr[b]) {
        const int32_t t = a;
        a = b, b = t;
    }
    const int64_t a0 = AT->row_ptr[a], la = AT->row_ptr[a + 1] - a0, b0 = AT->row_ptr[b];
    const int64_t lb = AT->row_ptr[b + 1] - b0;
    double s = 0.0;
    *mag = 0.0, *exact = 0.0L;
    for (int64_t c = 0; c < GS_SPAI_DOT_CHUNKS; c++) {
        double piece = 0.0;
        for (int64_t p = c * la / GS_SPAI_DOT_CHUNKS; p < (c + 1) * la / GS_SPAI_DOT_CHUNKS; p++) {
            const int64_t q = find_row(AT->col + b0, lb, AT->col[a0 + p]);
            if (q < 0) continue;
            piece += AT->val[a0 + p] * AT->val[b0 + q];
            *mag += fabs(AT->val[a0 + p] * AT->val[b0 + q]);
            *exact += (long double)AT->val[a0 + p] * AT->val[b0 + q];
        }
        s += piece;
    }
    return s;
}

/* Rows of AT (columns of A) of the given lengths, random rows of n ascending, random values;
 * list 0 and 1 share every row of list 0 (a tie: equal lengths). */
static gs_csr random_columns(const int64_t *len, int count, int32_t n, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    gs_csr AT = {0};
    int64_t total = 0;
    for (int c = 0; c < count; c++) total += len[c];
    AT.n_rows = count, AT.n_cols = n, AT.nnz = total;
    AT.row_ptr = malloc(((size_t)count + 1) * sizeof(int64_t));
    AT.col = malloc((size_t)total * sizeof(int32_t) + 4);
    AT.val = malloc((size_t)total * sizeof(double) + 8);
    ck_assert(AT.row_ptr && AT.col && AT.val);
    AT.row_ptr[0] = 0;
    for (int c = 0; c < count; c++) {
        int64_t at = AT.row_ptr[c], left = len[c];
        for (int32_t row = 0; row < n && left > 0; row++) /* selection sampling: ascending */
            if (c == 1 ? find_row(AT.col, len[0], row) >= 0
                       : (double)(tu_next(&r) % (uint64_t)(n - row)) < (double)left)
                AT.col[at] = row, AT.val[at++] = tu_uniform(&r) - 0.5, left--;
        ck_assert_int_eq(left, 0);
        AT.row_ptr[c + 1] = at;
    }
    return AT;
}

/* gs_spai_column_dot_chunked is its definition to the bit (merge and search sides of
 * GS_SPAI_DOT_SEARCH, lists shorter and longer than the 32 chunks, a tie, either order),
 * within its rounding bound of the exact product ((m + 33) u sum |terms|: a piece of m
 * terms, 32 pieces, each product rounded), and gs_spai_column_dot itself where the shorter
 * list has at most 32 entries (a term a piece at most: the same sums). */
START_TEST(spai_chunked_dot_products)
{
    const int64_t len[6] = {3000, 3000, 31, 32, 400, 12000};
    gs_csr AT = random_columns(len, 6, 20000, 5);
    for (int32_t a = 0; a < 6; a++)
        for (int32_t b = 0; b < 6; b++) {
            double mag = 0.0;
            long double exact = 0.0L;
            const double got = gs_spai_column_dot_chunked(&AT, a, b);
            const double want = chunked_by_definition(&AT, a, b, &mag, &exact);
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "lists %d, %d: %.17g, by the "
                          "definition %.17g", a, b, got, want);
            const int64_t m = (len[a] < len[b] ? len[a] : len[b]) / GS_SPAI_DOT_CHUNKS + 1;
            ck_assert_msg(fabsl((long double)got - exact) <= (m + 33) * (DBL_EPSILON / 2) * mag,
                          "lists %d, %d: %.17g, exact %.17Lg", a, b, got, exact);
            if (len[a] <= GS_SPAI_DOT_CHUNKS || len[b] <= GS_SPAI_DOT_CHUNKS) {
                const double plain = gs_spai_column_dot(&AT, a, b);
                ck_assert_msg(memcmp(&got, &plain, sizeof got) == 0, "lists %d, %d: %.17g, "
                              "plain %.17g", a, b, got, plain);
            }
        }
    gs_csr_free(&AT);
}
END_TEST

/* The heavy columns of bordered:40x40x1 (its 8 dense columns) and their Gram matrix: every
 * entry the chunked product of its pair, to the bit, and symmetric. */
START_TEST(spai_heavy_gram_is_chunked)
{
    gs_csr A = tu_generated("bordered:40x40x1"), AT = {0};
    gs_error err = {0};
    gs_spai_heavy h;
    ck_assert(gs_csr_transpose(&A, &AT, &err) == GS_OK);
    ck_assert_msg(gs_spai_heavy_build(&AT, &h, &err) == GS_OK, "%s", err.msg);
    ck_assert_int_eq(h.count, 8);
    for (int32_t a = 0; a < h.count; a++) {
        ck_assert(AT.row_ptr[h.cols[a] + 1] - AT.row_ptr[h.cols[a]] >= h.min_length);
        for (int32_t b = 0; b < h.count; b++) {
            const double want = gs_spai_column_dot_chunked(&AT, h.cols[a], h.cols[b]);
            const double got = h.gram[(size_t)a * h.count + b];
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0 &&
                              memcmp(&got, &h.gram[(size_t)b * h.count + a], sizeof got) == 0,
                          "gram[%d][%d] = %.17g, chunked %.17g", a, b, got, want);
        }
    }
    gs_spai_heavy_free(&h);
    gs_csr_free(&AT), gs_csr_free(&A);
}
END_TEST

/* ---- convergence: fewer BiCGSTAB iterations than Jacobi (pattern of A) ---- */

START_TEST(gspai_needs_fewer_iterations_than_jacobi)
{
    const char *names[] = {"orsirr_1", "sherman5", "pores_1", "fs_541_1", NULL};
    tu_assert_fewer_than_jacobi_on("convdiff3d:10", names, "gspai-opt", "bicgstab");
}
END_TEST

/* ---- zero diagonal and bad input ---- */

/* [[0,0,1],[1,1,0],[0,1,1]] (det 1): with k = 1, J_1 = {1, 2} and row 1
 * meets neither column, so column 1 of M would be zero (refused); with
 * k = 2, J_1 = {1, 2, 3} and M = A^-1 exactly. */
START_TEST(gspai_zero_diagonal)
{
    const int32_t ri[] = {0, 1, 1, 2, 2}, ci[] = {2, 0, 1, 1, 2};
    const double v[] = {1, 1, 1, 1, 1};
    gs_csr A = tu_from_triplets(3, 3, 5, ri, ci, v);
    gs_params k1 = params2(NULL, NULL, NULL, NULL);
    tu_pc_expect_failure(&A, "gspai-opt", &k1, GS_ERR_NUMERIC, "column 1 of M would be zero",
                         "--pattern-power 2");
    check_gspai_on(&A, 2, 1, "3x3 zero diagonal");
    gs_params k2 = params2("pattern-power", "2", NULL, NULL);
    gs_csr M = gspai_matrix(&A, &k2);
    const double inverse[3][3] = {{1, 1, -1}, {-1, 0, 1}, {1, 0, 0}}; /* A^-1 */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int64_t p = gs_csr_find(&M, i, j);
            double mij = p >= 0 ? M.val[p] : 0.0;
            ck_assert(fabs(mij - inverse[i][j]) <= 1e-14); /* 3x3 QR: a few ulps */
        }
    gs_csr_free(&M), gs_csr_free(&A);
}
END_TEST

START_TEST(gspai_rejects_bad_input)
{
    gs_params none = params2(NULL, NULL, NULL, NULL);
    const int32_t ri[] = {0, 1, 2, 0}, ci[] = {0, 1, 2, 3};
    const double v[] = {1, 2, 3, 4};
    gs_csr A = tu_from_triplets(3, 4, 4, ri, ci, v);
    tu_pc_expect_failure(&A, "gspai-opt", &none, GS_ERR_INPUT, "3 x 4, not square", NULL);
    gs_csr_free(&A);

    /* column 9 of A zero (stored zeros): every column of M whose J holds 9
     * fails; the first is reported and column 9 of A is named */
    tu_rng r = tu_rng_seed(33);
    gs_csr B = tu_random_matrix(&r, 25, 2);
    for (int i = 0; i < 25; i++) {
        int64_t p = gs_csr_find(&B, i, 8);
        if (p >= 0) B.val[p] = 0.0;
    }
    /* the first column of M whose J_k = {k} ∪ rows of A(:,k) holds 9 */
    int first = -1;
    for (int k = 0; k < 25 && first < 0; k++)
        if (k == 8 || gs_csr_find(&B, 8, k) >= 0) first = k;
    char want[64];
    snprintf(want, sizeof want, "column %d of M:", first + 1);
    tu_pc_expect_failure(&B, "gspai-opt", &none, GS_ERR_NUMERIC,
                         "column 9 of A is zero or linearly dependent", want);

    /* bad values, and a parameter of another preconditioner */
    static const tu_bad_param bad[] = {
        {"pattern-power", "0", NULL}, {"pattern-power", "3", NULL}, {"pattern-power", "1.5", NULL},
        {"pattern-power", "x", NULL}, {"strategy", "s3", NULL},     {"strategy", "S1", NULL},
        {"tau", "0.5", NULL},         {NULL, NULL, NULL}};
    tu_pc_expect_bad_params(&B, "gspai-opt", bad);
    gs_csr_free(&B);
}
END_TEST

/* Every allocation of the setup made to fail in turn (error.h's injector):
 * GS_ERR_NOMEM and a clean unwind (the sanitizer build checks the frees). */
START_TEST(gspai_allocation_failures_unwind)
{
    gs_params p = {0};
    tu_assert_allocation_failures("convdiff3d:4", "gspai-opt", &p, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_gspai");
    TCase *prop = tu_add_tcase(s, "property", 120);
    tcase_add_test(prop, gspai_columns_are_local_least_squares_solutions);
    tcase_add_test(prop, gspai_columns_are_minimal_on_their_pattern);
    tcase_add_test(prop, gspai_property_on_real_matrices);
    tcase_add_test(prop, gspai_chooses_the_strategy_from_alpha_and_beta);
    tcase_add_test(prop, gspai_reports_its_stages);
    tcase_add_test(prop, gspai_normal_equations_columns);
    tcase_add_test(prop, gspai_normal_equations_reject_ill_conditioned_columns);
    tcase_add_test(prop, gspai_cgls_columns_of_a_bordered_matrix);
    tcase_add_test(prop, gspai_heavy_columns_of_a_bordered_matrix);
    tcase_add_test(prop, spai_chunked_dot_products);
    tcase_add_test(prop, spai_heavy_gram_is_chunked);
    TCase *conv = tu_add_tcase(s, "convergence", 120);
    tcase_add_test(conv, gspai_needs_fewer_iterations_than_jacobi);
    TCase *bad = tu_add_tcase(s, "bad input", 0);
    tcase_add_test(bad, gspai_zero_diagonal);
    tcase_add_test(bad, gspai_rejects_bad_input);
    tcase_add_test(bad, gspai_allocation_failures_unwind);
    return tu_run_suite(s);
}
