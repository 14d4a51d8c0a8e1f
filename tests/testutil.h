/* testutil.h - helpers shared by the Check suites: where the real matrices
 * are, random inputs, and small comparisons. Header-only on purpose (each
 * suite is one executable). */
#ifndef GS_TESTUTIL_H
#define GS_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Folder of the shared SuiteSparse matrices: $GS_MATRICES, else
 * ../shared/matrices (tests run from the repository root). NULL if absent:
 * suites then skip those tests with a message. */
static inline const char *tu_matrices_dir(void)
{
    const char *env = getenv("GS_MATRICES");
    const char *dir = env && *env ? env : "../shared/matrices";
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/MANIFEST.tsv", dir);
    if (access(probe, R_OK) != 0) return NULL;
    return dir;
}

static inline void tu_matrix_path(char *buf, size_t len, const char *name)
{
    int w = snprintf(buf, len, "%s/%s.mtx", tu_matrices_dir(), name);
    ck_assert_msg(w >= 0 && (size_t)w < len, "matrix path too long: %s", name);
}

/* Deterministic per-test generator (xorshift64*), seeded per call site. */
typedef struct tu_rng { uint64_t s; } tu_rng;
static inline tu_rng tu_rng_seed(uint64_t seed)
{
    tu_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    return r;
}
static inline uint64_t tu_next(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
static inline double tu_uniform(tu_rng *r) /* [0, 1) */
{
    return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* A fresh temporary file name under /tmp (the file is created empty). */
static inline void tu_tmpname(char *buf, size_t len, const char *suffix)
{
    snprintf(buf, len, "/tmp/gs_test_XXXXXX");
    int fd = mkstemp(buf);
    if (fd >= 0) close(fd);
    if (suffix && *suffix) {
        char old[64];
        memcpy(old, buf, sizeof "/tmp/gs_test_XXXXXX"); /* mkstemp keeps the length */
        size_t used = strlen(buf);
        if (used + strlen(suffix) < len) {
            memcpy(buf + used, suffix, strlen(suffix) + 1);
            rename(old, buf);
        }
    }
}

static inline void tu_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static inline double tu_max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as the max */
    }
    return m;
}

/* A test case `name` added to s, with a timeout in seconds (0: Check's
 * default); tests are added to it with tcase_add_test. */
static inline TCase *tu_add_tcase(Suite *s, const char *name, double timeout)
{
    TCase *t = tcase_create(name);
    if (timeout > 0) tcase_set_timeout(t, timeout);
    suite_add_tcase(s, t);
    return t;
}

/* The MANIFEST.tsv of tu_matrices_dir() (which must be there), read past its
 * header line; the caller reads the rows and closes it. */
static inline FILE *tu_manifest_open(void)
{
    char path[1024], header[4096];
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", tu_matrices_dir());
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
    return f;
}

/* Run a Check suite with the usual runner and return the process status. */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* ---- preconditioner suites: build through the registry, solve, read back ----
 * (appended for check_pc_spai / check_pc_gspai; usable by every pc suite) */
#include <float.h>

#include "engine.h"
#include "krylov.h"
#include "mmio.h"
#include "precond.h"

/* A CPU engine, A on it, and preconditioner `name` set up through the
 * registry as src/cli/run.c does. On failure everything is released and the
 * status returned (err says why). */
typedef struct tu_pc_run {
    gs_engine *eng;
    gs_mat *A;
    gs_pc *pc;
} tu_pc_run;

static inline void tu_pc_release(tu_pc_run *r)
{
    gs_pc_destroy(r->pc);
    if (r->eng) r->eng->ops->mat_destroy(r->eng, r->A);
    gs_engine_destroy(r->eng);
    memset(r, 0, sizeof *r);
}

static inline int tu_pc_build(const gs_csr *A, const char *name, const gs_params *params,
                              tu_pc_run *r, gs_error *err)
{
    memset(r, 0, sizeof *r);
    const gs_pc_type *type = gs_pc_find(name);
    ck_assert_msg(type != NULL, "preconditioner '%s' is not registered", name);
    int status = gs_engine_cpu_create(&r->eng, err);
    if (status == GS_OK) status = r->eng->ops->mat_create(r->eng, A, GS_FP64, &r->A);
    if (status == GS_OK) status = gs_pc_create(type, r->eng, params, A, r->A, &r->pc, err);
    if (status != GS_OK) tu_pc_release(r);
    return status;
}

/* tu_pc_build, which must succeed. */
static inline void tu_pc_build_ok(const gs_csr *A, const char *name, const gs_params *params,
                                  tu_pc_run *r)
{
    gs_error err = {0};
    ck_assert_msg(tu_pc_build(A, name, params, r, &err) == GS_OK, "%s setup: %s", name, err.msg);
}

/* Preconditioner `name` on A with params must fail with `status`, its message
 * holding fragment (and fragment2 unless NULL). */
static inline void tu_pc_expect_failure(const gs_csr *A, const char *name, const gs_params *params,
                                        int status, const char *fragment, const char *fragment2)
{
    tu_pc_run r;
    gs_error err = {0};
    const int got = tu_pc_build(A, name, params, &r, &err);
    if (got == GS_OK) tu_pc_release(&r);
    ck_assert_msg(got == status, "%s: expected %s ('%s'), got %s: '%s'", name,
                  gs_status_name(status), fragment, gs_status_name(got), err.msg);
    ck_assert_msg(strstr(err.msg, fragment) != NULL, "message '%s' lacks '%s'", err.msg,
                  fragment);
    if (fragment2)
        ck_assert_msg(strstr(err.msg, fragment2) != NULL, "message '%s' lacks '%s'", err.msg,
                      fragment2);
}

/* z = M r with the run's apply (vectors of length n on its engine). */
static inline void tu_pc_apply(tu_pc_run *r, const double *rhs, double *z, int32_t n)
{
    gs_vec *vr = NULL, *vz = NULL;
    const gs_engine_ops *o = r->eng->ops;
    ck_assert(o->vec_create(r->eng, n, &vr) == GS_OK && o->vec_create(r->eng, n, &vz) == GS_OK);
    ck_assert(o->vec_upload(r->eng, vr, rhs) == GS_OK);
    ck_assert(r->pc->apply(r->pc, vr, vz) == GS_OK);
    ck_assert(o->vec_download(r->eng, vz, z) == GS_OK);
    o->vec_destroy(r->eng, vr);
    o->vec_destroy(r->eng, vz);
}

/* Solve A x = A 1 from x0 = 0 with `method` (tol 1e-8, every iteration
 * checked) preconditioned by `name`; res filled (free with
 * gs_krylov_result_free). Returns the setup's or an engine's status. */
static inline int tu_pc_solve(const gs_csr *A, const char *name, const gs_params *params,
                              const char *method, long maxit, gs_krylov_result *res,
                              gs_error *err)
{
    tu_pc_run r;
    memset(res, 0, sizeof *res);
    int status = tu_pc_build(A, name, params, &r, err);
    if (status != GS_OK) return status;
    const int32_t n = A->n_rows;
    double *ones = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    ck_assert(ones && b);
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(A, ones, b);
    gs_vec *vb = NULL, *vx = NULL;
    gs_krylov_opts opts = {.tol = 1e-8, .maxit = maxit, .restart = 30, .idr_s = 4,
                           .check_every = 1};
    status = r.eng->ops->vec_create(r.eng, n, &vb);
    if (status == GS_OK) status = r.eng->ops->vec_create(r.eng, n, &vx);
    if (status == GS_OK) status = r.eng->ops->vec_upload(r.eng, vb, b);
    if (status == GS_OK) status = r.eng->ops->set(r.eng, vx, 0.0);
    if (status == GS_OK)
        status = gs_method_find(method)->solve(r.eng, r.A, r.pc, vb, vx, &opts, res);
    if (status != GS_OK) gs_engine_fail(r.eng, err);
    r.eng->ops->vec_destroy(r.eng, vb);
    r.eng->ops->vec_destroy(r.eng, vx);
    tu_pc_release(&r);
    free(ones);
    free(b);
    return status;
}

/* The matrix pc->save writes as PREFIX_<suffix>.mtx, read back (values are
 * written with 17 digits, so exactly). */
static inline void tu_pc_saved_matrix(gs_pc *pc, const char *suffix, gs_csr *M)
{
    char prefix[512], path[600];
    gs_error err = {0};
    tu_tmpname(prefix, sizeof prefix, "");
    ck_assert_ptr_nonnull(pc->save);
    ck_assert_msg(pc->save(pc, prefix, &err) == GS_OK, "save: %s", err.msg);
    snprintf(path, sizeof path, "%s_%s.mtx", prefix, suffix);
    ck_assert_msg(gs_mm_read_csr(path, M, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
    remove(path);
    remove(prefix);
}

/* got is want bit for bit: shape, row pointers, columns, values (memcmp:
 * -0.0 and NaN payloads count). */
static inline void tu_assert_same_csr(const gs_csr *want, const gs_csr *got, const char *what)
{
    ck_assert_msg(got->n_rows == want->n_rows && got->nnz == want->nnz,
                  "%s: %d rows, %lld entries, want %d, %lld", what, (int)got->n_rows,
                  (long long)got->nnz, (int)want->n_rows, (long long)want->nnz);
    for (int32_t i = 0; i <= want->n_rows; i++)
        ck_assert_msg(got->row_ptr[i] == want->row_ptr[i], "%s: row_ptr[%d] = %lld, want %lld",
                      what, (int)i, (long long)got->row_ptr[i], (long long)want->row_ptr[i]);
    for (int64_t k = 0; k < want->nnz; k++)
        ck_assert_msg(got->col[k] == want->col[k] &&
                          memcmp(&got->val[k], &want->val[k], sizeof(double)) == 0,
                      "%s: entry %lld: (%d, %.17g), want (%d, %.17g)", what, (long long)k,
                      (int)got->col[k], got->val[k], (int)want->col[k], want->val[k]);
}

/* The setup's stages are exactly `names` (NULL-terminated), in order. */
static inline void tu_assert_stages(const gs_pc *pc, const char *const *names)
{
    int count = 0;
    while (names[count]) count++;
    ck_assert_int_eq(pc->stages.count, count);
    for (int s = 0; s < count; s++) ck_assert_str_eq(pc->stages.stage[s].name, names[s]);
}

/* A report item of pc->extra, or NULL. */
static inline const gs_kv *tu_pc_extra(const gs_pc *pc, const char *key)
{
    for (int i = 0; i < pc->extra.count; i++)
        if (strcmp(pc->extra.kv[i].key, key) == 0) return &pc->extra.kv[i];
    return NULL;
}

/* Dense least-squares oracle: x = argmin ||A x - b||_2 for A m x n
 * column-major (m >= n), by the normal equations G x = A^T b, G = A^T A,
 * with a Cholesky factorisation in long double: no code and no method in
 * common with a QR solver under test. Returns 0 if G is not numerically
 * positive definite. *kappa gets an upper bound on cond_2(A), from
 * ||G||_F ||G^-1||_F >= cond_2(G) = cond_2(A)^2 (at most n times too large);
 * *tan_theta = ||A x - b|| / ||A x||. */
static inline int tu_lsq_reference(int m, int n, const double *A, const double *b, double *x,
                                   double *kappa, double *tan_theta)
{
    long double *L = calloc((size_t)n * n + 1, sizeof *L), *y = calloc((size_t)n + 1, sizeof *y);
    long double *col = calloc((size_t)n + 1, sizeof *col);
    ck_assert(L && y && col);
    long double gnorm = 0, ginv_norm = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {                       /* L = tril(A^T A) */
            long double s = 0;
            for (int r = 0; r < m; r++) s += (long double)A[(size_t)i * m + r] * A[(size_t)j * m + r];
            L[(size_t)i * n + j] = s;
            gnorm += (i == j ? 1 : 2) * s * s;
        }
    int ok = 1;
    for (int j = 0; j < n && ok; j++) {                      /* G = L L^T in place */
        long double d = L[(size_t)j * n + j];
        for (int k = 0; k < j; k++) d -= L[(size_t)j * n + k] * L[(size_t)j * n + k];
        if (!(d > 0)) ok = 0;
        else L[(size_t)j * n + j] = sqrtl(d);
        for (int i = j + 1; i < n && ok; i++) {
            long double s = L[(size_t)i * n + j];
            for (int k = 0; k < j; k++) s -= L[(size_t)i * n + k] * L[(size_t)j * n + k];
            L[(size_t)i * n + j] = s / L[(size_t)j * n + j];
        }
    }
    /* solve G v = rhs with the factor: v overwrites rhs */
#define TU_CHOL_SOLVE(v)                                                                   \
    do {                                                                                   \
        for (int i = 0; i < n; i++) {                                                      \
            for (int k = 0; k < i; k++) (v)[i] -= L[(size_t)i * n + k] * (v)[k];           \
            (v)[i] /= L[(size_t)i * n + i];                                                \
        }                                                                                  \
        for (int i = n - 1; i >= 0; i--) {                                                 \
            for (int k = i + 1; k < n; k++) (v)[i] -= L[(size_t)k * n + i] * (v)[k];       \
            (v)[i] /= L[(size_t)i * n + i];                                                \
        }                                                                                  \
    } while (0)
    if (ok) {
        for (int i = 0; i < n; i++) {                        /* y = A^T b */
            y[i] = 0;
            for (int r = 0; r < m; r++) y[i] += (long double)A[(size_t)i * m + r] * b[r];
        }
        TU_CHOL_SOLVE(y);
        for (int e = 0; e < n; e++) {                        /* ||G^-1||_F, column by column */
            for (int i = 0; i < n; i++) col[i] = i == e;
            TU_CHOL_SOLVE(col);
            for (int i = 0; i < n; i++) ginv_norm += col[i] * col[i];
        }
        long double rr = 0, axax = 0;
        for (int r = 0; r < m; r++) {
            long double ax = 0;
            for (int j = 0; j < n; j++) ax += (long double)A[(size_t)j * m + r] * y[j];
            axax += ax * ax;
            rr += (ax - b[r]) * (ax - b[r]);
        }
        for (int j = 0; j < n; j++) x[j] = (double)y[j];
        *kappa = (double)sqrtl(sqrtl(gnorm) * sqrtl(ginv_norm));
        *tan_theta = axax > 0 ? (double)sqrtl(rr / axax) : INFINITY;
    }
#undef TU_CHOL_SOLVE
    free(L);
    free(y);
    free(col);
    return ok;
}

/* Relative error allowed between a backward-stable double-precision LS solve
 * (Householder QR: Higham, Accuracy and Stability, 2nd ed., Thm 20.3, with
 * column-wise backward error gamma(mn)) and the oracle above: to first order
 * ||dx|| / ||x|| <= eps_A (2 kappa + kappa^2 tan_theta) (Wedin), eps_A taken
 * as 10 m n u; plus the oracle's own error, n kappa^2 u_ld, times 10. */
static inline double tu_lsq_tolerance(int m, int n, double kappa, double tan_theta)
{
    double eps_a = 10.0 * m * n * (DBL_EPSILON / 2);
    return eps_a * (2 * kappa + kappa * kappa * tan_theta) +
           10.0 * n * kappa * kappa * (double)LDBL_EPSILON;
}

/* The defining property of a static SPAI (min ||A M - I||_F column by
 * column), checked on dense copies made here: with J_k the stored pattern of
 * column k of M and I_k the rows stored in A(:,J_k), M(J_k,k) must equal the
 * oracle's solution of min ||A(I_k,J_k) m - e_k(I_k)||_2 within
 * tu_lsq_tolerance. With check_minimal, moving any one entry of m_k within
 * J_k by +-delta must not reduce ||A m_k - e_k||_2 (all rows, long double);
 * delta = 1e-6 ||m|| ||A(I,J)||_F / ||a_j|| makes the quadratic term
 * delta^2 ||a_j||^2 exceed the gradient term 2 delta |a_j^T r| as long as m_k
 * is accurate to 5e-7 relative, which the first check bounds. Dense n x n
 * copies: keep n below ~1500. */
typedef struct tu_spai_report {
    double worst_ratio; /* max over columns of error / tolerance (must be <= 1) */
    int worst_column;   /* 0-based */
    double max_kappa;   /* largest cond_2(A(I,J)) bound met */
    long perturbations; /* minimality checks made */
} tu_spai_report;

static inline tu_spai_report tu_check_spai_columns(const gs_csr *A, const gs_csr *M,
                                                   int check_minimal)
{
    const int n = A->n_rows;
    tu_spai_report rep = {0, -1, 0, 0};
    double *Ad = calloc((size_t)n * n + 1, sizeof *Ad), *Md = calloc((size_t)n * n + 1, sizeof *Md);
    unsigned char *Am = calloc((size_t)n * n + 1, 1), *Mm = calloc((size_t)n * n + 1, 1);
    int *J = malloc((size_t)n * sizeof *J + 1), *I = malloc((size_t)n * sizeof *I + 1);
    double *Ahat = malloc((size_t)n * n * sizeof *Ahat + 1), *rhs = malloc((size_t)n * sizeof *rhs + 1);
    double *xref = malloc((size_t)n * sizeof *xref + 1), *mk = malloc((size_t)n * sizeof *mk + 1);
    ck_assert(Ad && Md && Am && Mm && J && I && Ahat && rhs && xref && mk);
    ck_assert_int_eq(M->n_rows, n);
    for (int r = 0; r < n; r++) {
        for (int64_t p = A->row_ptr[r]; p < A->row_ptr[r + 1]; p++)
            Ad[(size_t)r * n + A->col[p]] = A->val[p], Am[(size_t)r * n + A->col[p]] = 1;
        for (int64_t p = M->row_ptr[r]; p < M->row_ptr[r + 1]; p++)
            Md[(size_t)r * n + M->col[p]] = M->val[p], Mm[(size_t)r * n + M->col[p]] = 1;
    }
    for (int k = 0; k < n; k++) {
        int n2 = 0, n1 = 0, krow = -1;
        for (int j = 0; j < n; j++)
            if (Mm[(size_t)j * n + k]) J[n2++] = j;
        ck_assert_msg(n2 > 0, "column %d of M is empty", k + 1);
        for (int r = 0; r < n; r++) {
            int in = 0;
            for (int jj = 0; jj < n2 && !in; jj++) in = Am[(size_t)r * n + J[jj]];
            if (in) {
                if (r == k) krow = n1;
                I[n1++] = r;
            }
        }
        ck_assert_msg(krow >= 0, "column %d: row %d is not in I", k + 1, k + 1);
        double fro = 0;
        for (int jj = 0; jj < n2; jj++)
            for (int ii = 0; ii < n1; ii++) {
                double a = Ad[(size_t)I[ii] * n + J[jj]];
                Ahat[(size_t)jj * n1 + ii] = a;
                fro += a * a;
            }
        for (int ii = 0; ii < n1; ii++) rhs[ii] = ii == krow;
        double kappa, tan_theta;
        ck_assert_msg(tu_lsq_reference(n1, n2, Ahat, rhs, xref, &kappa, &tan_theta),
                      "column %d: A(I,J) is singular for the oracle", k + 1);
        double diff = 0, norm = 0;
        for (int jj = 0; jj < n2; jj++) {
            mk[jj] = Md[(size_t)J[jj] * n + k];
            diff += (mk[jj] - xref[jj]) * (mk[jj] - xref[jj]);
            norm += xref[jj] * xref[jj];
        }
        double ratio = sqrt(diff) / (sqrt(norm) * tu_lsq_tolerance(n1, n2, kappa, tan_theta));
        if (!(ratio <= rep.worst_ratio)) rep.worst_ratio = ratio, rep.worst_column = k;
        if (kappa > rep.max_kappa) rep.max_kappa = kappa;
        if (!check_minimal) continue;
        /* f(v) = ||A(I,J) v - e_k(I)||^2; rows outside I add a constant. */
        for (int jj = 0; jj < n2; jj++) {
            long double f[3];
            double aj = 0;
            for (int ii = 0; ii < n1; ii++) aj += Ahat[(size_t)jj * n1 + ii] * Ahat[(size_t)jj * n1 + ii];
            const double delta = 1e-6 * sqrt(norm) * sqrt(fro) / sqrt(aj);
            for (int s = 0; s < 3; s++) {
                const double shift = s == 0 ? 0.0 : s == 1 ? delta : -delta;
                f[s] = 0;
                for (int ii = 0; ii < n1; ii++) {
                    long double res = -(long double)rhs[ii];
                    for (int q = 0; q < n2; q++)
                        res += (long double)Ahat[(size_t)q * n1 + ii] *
                               ((long double)mk[q] + (q == jj ? shift : 0.0));
                    f[s] += res * res;
                }
            }
            ck_assert_msg(f[1] >= f[0] && f[2] >= f[0],
                          "column %d: moving m_%d,%d by +-%g lowers ||A m - e||", k + 1,
                          J[jj] + 1, k + 1, delta);
            rep.perturbations += 2;
        }
    }
    free(Ad), free(Md), free(Am), free(Mm), free(J), free(I);
    free(Ahat), free(rhs), free(xref), free(mk);
    return rep;
}

/* Parameters from a NULL-terminated list of name, value pairs. */
static inline gs_params tu_params(const char *const *kv)
{
    gs_params p = {0};
    for (int i = 0; kv && kv[i]; i += 2) ck_assert(gs_params_set(&p, kv[i], kv[i + 1], NULL) == GS_OK);
    return p;
}

/* A parameter value a setup must refuse; `also`: a second fragment of the
 * message, or NULL. */
typedef struct tu_bad_param {
    const char *name, *value, *also;
} tu_bad_param;

/* Preconditioner `pc` on A with each parameter of bad alone (a list ended by
 * a NULL name) must fail as a usage error whose message names --<name>. */
static inline void tu_pc_expect_bad_params(const gs_csr *A, const char *pc, const tu_bad_param *bad)
{
    for (; bad->name; bad++) {
        const char *kv[] = {bad->name, bad->value, NULL};
        gs_params p = tu_params(kv);
        char option[64];
        snprintf(option, sizeof option, "--%s", bad->name);
        tu_pc_expect_failure(A, pc, &p, GS_ERR_USAGE, option, bad->also);
    }
}

/* Make each allocation of preconditioner `name`'s setup on A fail in turn
 * (error.h's injector): every failure must be GS_ERR_NOMEM naming host
 * memory, with no preconditioner returned (the sanitizer build checks the
 * frees). Returns how many allocations the setup made before it succeeded. */
static inline int tu_pc_allocation_failures(const gs_csr *A, const char *name,
                                            const gs_params *p)
{
    gs_engine *e = NULL;
    gs_mat *Ae = NULL;
    ck_assert(gs_engine_cpu_create(&e, NULL) == GS_OK);
    ck_assert(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK);
    int k = 0;
    for (;; k++) {
        gs_pc *pc = NULL;
        gs_error err = {0};
        gs_error_clear(&e->err);
        gs_alloc_fail_after(k);
        int status = gs_pc_create(gs_pc_find(name), e, p, A, Ae, &pc, &err);
        gs_alloc_fail_after(-1);
        if (status == GS_OK) {
            gs_pc_destroy(pc);
            break;
        }
        ck_assert_msg(status == GS_ERR_NOMEM, "%s, allocation %d: status %d (%s)", name, k, status,
                      err.msg);
        ck_assert_msg(strstr(err.msg, "out of host memory"), "%s, allocation %d: '%s'", name, k,
                      err.msg);
        ck_assert_ptr_null(pc);
        ck_assert_int_lt(k, 1000);
    }
    e->ops->mat_destroy(e, Ae);
    gs_engine_destroy(e);
    return k;
}

/* ---- inputs and helpers shared by the pc suites ---- */
#include "gen.h"

/* A generated problem (gen.c spec; setup must succeed); its full name, as
 * gs_generate writes it ("convdiff3d:4x4x4"), into name[len] when given. */
static inline gs_csr tu_generated_named(const char *spec, char *name, size_t len)
{
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert_msg(gs_generate(spec, &A, name, len, &err) == GS_OK, "%s", err.msg);
    return A;
}

static inline gs_csr tu_generated(const char *spec)
{
    char name[128];
    return tu_generated_named(spec, name, sizeof name);
}

/* A MANIFEST matrix by name (the folder must be there: see tu_real_matrix). */
static inline gs_csr tu_read_matrix(const char *name)
{
    char path[1024];
    gs_csr A = {0};
    gs_error err = {0};
    tu_matrix_path(path, sizeof path, name);
    ck_assert_msg(gs_mm_read_csr(path, &A, NULL, &err) == GS_OK, "%s: %s", path, err.msg);
    return A;
}

/* Read a MANIFEST matrix; 0 (and a message) when the folder is absent. */
static inline int tu_real_matrix(const char *name, gs_csr *A)
{
    if (!tu_matrices_dir()) {
        fprintf(stderr, "skipped: no ../shared/matrices (set GS_MATRICES)\n");
        return 0;
    }
    *A = tu_read_matrix(name);
    return 1;
}

/* m x n CSR from triplets (duplicates summed; must succeed). */
static inline gs_csr tu_from_triplets(int32_t m, int32_t n, int64_t count, const int32_t *rows,
                                      const int32_t *cols, const double *vals)
{
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert_msg(gs_csr_from_coo(m, n, count, rows, cols, vals, &A, &err) == GS_OK, "%s",
                  err.msg);
    return A;
}

/* Preconditioner `name` set up on A (must succeed), and the matrix it saves
 * as PREFIX_<suffix>.mtx, which must hold pc->nnz entries. With keep, the
 * run is left built there for the caller (release it with tu_pc_release). */
static inline gs_csr tu_pc_saved_factor(const gs_csr *A, const char *name, const gs_params *p,
                                        const char *suffix, tu_pc_run *keep)
{
    tu_pc_run run;
    tu_pc_build_ok(A, name, p, &run);
    gs_csr M = {0};
    tu_pc_saved_matrix(run.pc, suffix, &M);
    ck_assert_int_eq(M.nnz, run.pc->nnz);
    if (keep) *keep = run;
    else tu_pc_release(&run);
    return M;
}

/* rep of tu_check_spai_columns within tolerance; what names the case. */
static inline void tu_assert_spai_report(const tu_spai_report *rep, const char *what)
{
    ck_assert_msg(rep->worst_ratio <= 1.0,
                  "%s: column %d differs from the least-squares oracle by %.3g x its "
                  "tolerance (max cond bound %.3g)",
                  what, rep->worst_column + 1, rep->worst_ratio, rep->max_kappa);
}

/* Preconditioner `name` (params; NULL: the defaults) must converge with
 * `method` (maxit 10000), in fewer iterations than Jacobi where Jacobi
 * converges. */
static inline void tu_assert_fewer_than_jacobi(const gs_csr *A, const char *name,
                                               const gs_params *params, const char *method,
                                               const char *what)
{
    gs_krylov_result rj, rp;
    gs_error err = {0};
    gs_params none = {0};
    ck_assert_msg(tu_pc_solve(A, "jacobi", &none, method, 10000, &rj, &err) == GS_OK,
                  "%s: jacobi: %s", what, err.msg);
    ck_assert_msg(tu_pc_solve(A, name, params ? params : &none, method, 10000, &rp, &err) ==
                      GS_OK, "%s: %s: %s", what, name, err.msg);
    ck_assert_msg(rp.reason == GS_REASON_CONVERGED, "%s: %s did not converge", what, name);
    ck_assert_msg(rp.iterations < rj.iterations || rj.reason != GS_REASON_CONVERGED,
                  "%s: %s %ld iterations, jacobi %ld", what, name, rp.iterations,
                  rj.iterations);
    gs_krylov_result_free(&rj), gs_krylov_result_free(&rp);
}

/* tu_assert_fewer_than_jacobi (default parameters) on the generated problem
 * spec, then on each MANIFEST matrix of the NULL-terminated names (skipped,
 * with a message, when the folder is absent). */
static inline void tu_assert_fewer_than_jacobi_on(const char *spec, const char *const *names,
                                                  const char *name, const char *method)
{
    char full[64];
    gs_csr A = tu_generated_named(spec, full, sizeof full);
    tu_assert_fewer_than_jacobi(&A, name, NULL, method, full);
    gs_csr_free(&A);
    if (!tu_matrices_dir()) {
        fprintf(stderr, "skipped: real matrices (no ../shared/matrices)\n");
        return;
    }
    for (int k = 0; names[k]; k++) {
        A = tu_read_matrix(names[k]);
        tu_assert_fewer_than_jacobi(&A, name, NULL, method, names[k]);
        gs_csr_free(&A);
    }
}

/* tu_pc_allocation_failures on the generated problem spec: the setup must
 * make more than `more_than` allocations (so the injector reached its paths). */
static inline void tu_assert_allocation_failures(const char *spec, const char *name,
                                                 const gs_params *params, int more_than)
{
    gs_csr A = tu_generated(spec);
    ck_assert_int_gt(tu_pc_allocation_failures(&A, name, params), more_than);
    gs_csr_free(&A);
}

/* FSAI parameters that own their text (gs_params keeps pointers): tau, k,
 * delta (negative: default), precond-precision (NULL: default). */
typedef struct tu_fsai_args {
    gs_params p;
    char text[GS_MAX_PARAMS][40];
} tu_fsai_args;

static inline void tu_fsai_arg_set(tu_fsai_args *a, const char *name, const char *value)
{
    snprintf(a->text[a->p.count], sizeof a->text[0], "%s", value);
    ck_assert_int_eq(gs_params_set(&a->p, name, a->text[a->p.count], NULL), GS_OK);
}

static inline const gs_params *tu_fsai_args_make(tu_fsai_args *a, double tau, long k, double delta,
                                                 const char *prec)
{
    char buf[40];
    memset(a, 0, sizeof *a);
    if (tau >= 0) snprintf(buf, sizeof buf, "%.17g", tau), tu_fsai_arg_set(a, "tau", buf);
    if (k >= 0) snprintf(buf, sizeof buf, "%ld", k), tu_fsai_arg_set(a, "k", buf);
    if (delta >= 0) snprintf(buf, sizeof buf, "%.17g", delta), tu_fsai_arg_set(a, "delta", buf);
    if (prec) tu_fsai_arg_set(a, "precond-precision", prec);
    return &a->p;
}

/* Random symmetric n x n SPD matrix: ragged rows (a tenth of them half
 * dense, the others of density `density` times [0, 1)), off-diagonal
 * magnitudes spread over 10^[-3, 0] so that tau cuts inside rows, diagonal =
 * sum of |off-diagonal| + [0.5, 1.5) (strictly diagonally dominant, so SPD),
 * then scaled D A D with d_i in 10^[-1, 1] so that the prefilter's
 * sqrt(a_ii a_jj) matters. */
static inline gs_csr tu_random_spd(tu_rng *r, int32_t n, double density)
{
    int64_t cap = (int64_t)n * n + n;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v), *sum = calloc((size_t)n, sizeof *sum);
    double *s = malloc((size_t)n * sizeof *s);
    ck_assert(ri && ci && v && sum && s);
    int64_t nz = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = tu_uniform(r) < 0.1 ? 0.5 : density * tu_uniform(r);
        for (int32_t j = 0; j < i; j++) {
            if (tu_uniform(r) >= d) continue;
            double a = (tu_next(r) & 1 ? 1 : -1) * pow(10.0, -3.0 * tu_uniform(r));
            ri[nz] = i, ci[nz] = j, v[nz++] = a;
            ri[nz] = j, ci[nz] = i, v[nz++] = a;
            sum[i] += fabs(a), sum[j] += fabs(a);
        }
    }
    for (int32_t i = 0; i < n; i++) {
        ri[nz] = i, ci[nz] = i, v[nz++] = sum[i] + 0.5 + tu_uniform(r);
        s[i] = pow(10.0, 2.0 * tu_uniform(r) - 1.0);
    }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, v, &A, &err) == GS_OK);
    gs_csr_scale_symmetric(&A, s);
    free(ri), free(ci), free(v), free(sum), free(s);
    return A;
}

/* +-[lo, hi), sign and magnitude drawn from r. */
static inline double tu_rand_signed(tu_rng *r, double lo, double hi)
{
    double v = lo + (hi - lo) * tu_uniform(r);
    return tu_next(r) & 1 ? v : -v;
}

/* Nonsymmetric n x n for the SPAI suites: diagonal +-[2, 4), about per_col
 * off-diagonal entries per column (duplicates summed) with magnitudes spread
 * over 10^[-2, 0.2] (so that thresholds cut inside columns), one column
 * denser than a warp (when n allows). Full column rank with probability 1,
 * so every local problem is solvable. */
static inline gs_csr tu_random_matrix(tu_rng *r, int n, int per_col)
{
    int64_t cap = (int64_t)n * (2 * per_col + 2) + 64;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t nz = 0;
    for (int j = 0; j < n; j++) {
        ri[nz] = j, ci[nz] = j, v[nz++] = tu_rand_signed(r, 2, 4);
        int count = j == n / 2 ? (n < 40 ? n - 1 : 40) : (int)(tu_next(r) % (2 * per_col + 1));
        for (int q = 0; q < count; q++) {
            ri[nz] = (int32_t)(tu_next(r) % (uint64_t)n), ci[nz] = j;
            v[nz++] = (tu_next(r) & 1 ? 1 : -1) * pow(10.0, -2 + 2.2 * tu_uniform(r));
        }
    }
    gs_csr A = {0};
    gs_error err = {0};
    ck_assert(gs_csr_from_coo(n, n, nz, ri, ci, v, &A, &err) == GS_OK);
    free(ri), free(ci), free(v);
    return A;
}

static inline int32_t tu_max_row_length(const gs_csr *A)
{
    int64_t m = 0;
    for (int32_t i = 0; i < A->n_rows; i++)
        if (A->row_ptr[i + 1] - A->row_ptr[i] > m) m = A->row_ptr[i + 1] - A->row_ptr[i];
    return (int32_t)m;
}

/* A hub graph's Laplacian + I: a path 0 - 1 - ... - n-1 (weight 1) and
 * `hubs` nodes joined to every `stride`-th node (weight w_hub, or random in
 * [0.5, 1.5) when w_hub = 0). Equal weights give equal keys |a_ij| /
 * sqrt(a_ii a_jj) between nodes of equal degree (ties), and with k >= 2 the
 * hubs' rows fill in (entries outside A: key 0, all tied). fsai's suites. */
static inline gs_csr tu_hub_laplacian(int32_t n, int hubs, int32_t stride, double w_hub, uint64_t seed)
{
    tu_rng r = tu_rng_seed(seed);
    const int64_t cap = 2 * (int64_t)n + 2 * (int64_t)hubs * (n / stride + 1) + n;
    int32_t *ri = malloc((size_t)cap * sizeof *ri), *ci = malloc((size_t)cap * sizeof *ci);
    double *v = malloc((size_t)cap * sizeof *v), *deg = calloc((size_t)n, sizeof *deg);
    ck_assert(ri && ci && v && deg);
    int64_t q = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        ri[q] = i, ci[q] = i + 1, v[q++] = -1.0;
        ri[q] = i + 1, ci[q] = i, v[q++] = -1.0;
        deg[i] += 1.0, deg[i + 1] += 1.0;
    }
    for (int h = 0; h < hubs; h++) {
        const int32_t hub = (int32_t)((2 * (int64_t)h + 1) * n / (2 * hubs));
        for (int32_t j = h % stride; j < n; j += stride) {
            if (j == hub || j == hub - 1 || j == hub + 1) continue; /* no duplicate edges */
            const double w = w_hub > 0 ? w_hub : 0.5 + tu_uniform(&r);
            ri[q] = hub, ci[q] = j, v[q++] = -w;
            ri[q] = j, ci[q] = hub, v[q++] = -w;
            deg[hub] += w, deg[j] += w;
        }
    }
    for (int32_t i = 0; i < n; i++) ri[q] = i, ci[q] = i, v[q++] = deg[i] + 1.0; /* L + I */
    gs_csr A = tu_from_triplets(n, n, q, ri, ci, v);
    free(ri), free(ci), free(v), free(deg);
    return A;
}

/* Arrow n x n: diagonal 4 (a_11 = n), couplings -1 to the neighbours and
 * -1/2 between row 1 and every other row (diagonally dominant, SPD). With
 * fsai's k = 2, S is the whole lower triangle: row i has i local unknowns. */
static inline gs_csr tu_arrow_spd(int32_t n)
{
    int32_t *ri = malloc(5 * (size_t)n * sizeof *ri), *ci = malloc(5 * (size_t)n * sizeof *ci);
    double *v = malloc(5 * (size_t)n * sizeof *v);
    ck_assert(ri && ci && v);
    int64_t q = 0;
    for (int32_t i = 0; i < n; i++) {
        ri[q] = ci[q] = i, v[q++] = i == 0 ? (double)n : 4.0;
        if (i + 1 < n) ri[q] = i, ci[q] = i + 1, v[q++] = -1.0, ri[q] = i + 1, ci[q] = i, v[q++] = -1.0;
        if (i >= 2) ri[q] = 0, ci[q] = i, v[q++] = -0.5, ri[q] = i, ci[q] = 0, v[q++] = -0.5;
    }
    gs_csr A = tu_from_triplets(n, n, q, ri, ci, v);
    free(ri), free(ci), free(v);
    return A;
}

/* The 5-point Laplacian of an nx x nx grid with Neumann boundaries (each
 * row sums to 0): singular, its null space the constants. */
static inline gs_csr tu_neumann_laplacian(int32_t nx)
{
    const int32_t n = nx * nx;
    int32_t *r = malloc(5 * (size_t)n * sizeof(int32_t));
    int32_t *c = malloc(5 * (size_t)n * sizeof(int32_t));
    double *v = malloc(5 * (size_t)n * sizeof(double));
    int64_t k = 0;
    for (int32_t i = 0; i < nx; i++)
        for (int32_t j = 0; j < nx; j++) {
            const int32_t row = i * nx + j, di[] = {1, -1, 0, 0}, dj[] = {0, 0, 1, -1};
            int32_t deg = 0;
            for (int d = 0; d < 4; d++) {
                const int32_t a = i + di[d], bb = j + dj[d];
                if (a < 0 || a >= nx || bb < 0 || bb >= nx) continue;
                r[k] = row, c[k] = a * nx + bb, v[k++] = -1.0;
                deg++;
            }
            r[k] = row, c[k] = row, v[k++] = deg;
        }
    gs_csr A = tu_from_triplets(n, n, k, r, c, v);
    free(r), free(c), free(v);
    return A;
}

typedef struct tu_solve_out {
    gs_krylov_result res;
    double true_rel;
} tu_solve_out;

/* An engine whose next spmv_axpby (a method's r0 = b - A x0) adds delta to
 * its result: the method's recurrence then starts from r0 + delta and
 * converges to A x = b + delta, so its estimate says converged while
 * ||b - A x|| stays near ||delta||: a residual gap that replacing r by
 * b - A x closes. Engine-independent (it wraps the table); the first call
 * happens before any capture, so a loop on the device or a fused kernel
 * iterates on the perturbed r. One at a time (static state). */
typedef struct tu_perturb {
    const gs_engine_ops *inner;
    gs_engine_ops ops;
    gs_vec *delta;
    int armed;
} tu_perturb;
static tu_perturb tu_perturb_state;

static inline int tu_perturb_spmv_axpby(gs_engine *e, gs_coef a, const gs_mat *A,
                                        const gs_vec *x, gs_coef b, gs_vec *y)
{
    const gs_engine_ops *in = tu_perturb_state.inner;
    int status = in->spmv_axpby(e, a, A, x, b, y);
    if (status == GS_OK && tu_perturb_state.armed) {
        tu_perturb_state.armed = 0;
        status = in->axpby(e, gs_coef_const(1.0), tu_perturb_state.delta, gs_coef_const(1.0), y);
    }
    return status;
}

static inline void tu_perturb_install(gs_engine *e, const double *delta, int64_t n)
{
    tu_perturb *t = &tu_perturb_state;
    t->inner = e->ops;
    t->ops = *e->ops;
    t->ops.spmv_axpby = tu_perturb_spmv_axpby;
    ck_assert_int_eq(e->ops->vec_create(e, n, &t->delta), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, t->delta, delta), GS_OK);
    t->armed = 1;
    e->ops = &t->ops;
}

static inline void tu_perturb_remove(gs_engine *e)
{
    tu_perturb *t = &tu_perturb_state;
    e->ops = t->inner;
    e->ops->vec_destroy(e, t->delta);
    t->delta = NULL;
}

/* A Krylov solve on engine e, as the run does it, with what the suites
 * compare (precond: a name, or "name:p=v,q=w" with up to 4 parameters):
 * A x = b (b = A 1 unless b_in) from x = 0 (x is NaN before it is
 * set to 0, so a method that reads it unset shows), the result, and the true
 * residual ||b - A x|| / ||b|| computed on the host (||b - A x|| where b = 0);
 * x_out (n doubles, or NULL) receives x. */
static inline void tu_solve_full(gs_engine *e, const gs_csr *A, const double *b_in,
                                 const char *method, const char *precond,
                                 const gs_krylov_opts *opts, tu_solve_out *out, double *x_out,
                                 int replacing, const double *perturb);

static inline void tu_solve_x(gs_engine *e, const gs_csr *A, const double *b_in,
                              const char *method, const char *precond,
                              const gs_krylov_opts *opts, tu_solve_out *out, double *x_out)
{
    tu_solve_full(e, A, b_in, method, precond, opts, out, x_out, 0, NULL);
}

/* tu_solve_x through gs_krylov_solve (replacing: residual replacement as
 * the run makes it) or the method alone, the method's r0 perturbed by
 * perturb (n doubles: tu_perturb) or not (NULL). */
static inline void tu_solve_full(gs_engine *e, const gs_csr *A, const double *b_in,
                                 const char *method, const char *precond,
                                 const gs_krylov_opts *opts, tu_solve_out *out, double *x_out,
                                 int replacing, const double *perturb)
{
    gs_error err = {0};
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_vec *b = NULL, *x = NULL;
    const int32_t n = A->n_rows;
    double *bh = malloc((size_t)n * sizeof(double)), *xh = malloc((size_t)n * sizeof(double));
    double *ones = malloc((size_t)n * sizeof(double)), *r = malloc((size_t)n * sizeof(double));
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0, xh[i] = NAN;
    if (b_in) memcpy(bh, b_in, (size_t)n * sizeof(double));
    else gs_csr_spmv(A, ones, bh);
    ck_assert_msg(e->ops->mat_create(e, A, GS_FP64, &Ae) == GS_OK, "%s", e->err.msg);
    gs_params params = {0};
    char name[64], text[4][64];
    const char *colon = strchr(precond, ':');
    snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - precond) : 63, precond);
    for (int k = 0; colon && k < 4; k++) { /* name:a=1,b=2: each a param=value of its own */
        const char *next = strchr(colon + 1, ',');
        snprintf(text[k], sizeof text[k], "%.*s", next ? (int)(next - colon - 1) : 63, colon + 1);
        char *eq = strchr(text[k], '=');
        ck_assert_msg(eq != NULL, "tu_solve: '%s' is not name:param=value[,...]", precond);
        *eq = '\0';
        ck_assert_msg(gs_params_set(&params, text[k], eq + 1, &err) == GS_OK, "%s", err.msg);
        colon = next;
        ck_assert_msg(k < 3 || !next, "tu_solve: more than 4 parameters in '%s'", precond);
    }
    ck_assert_msg(gs_pc_find(name) != NULL, "tu_solve: no preconditioner '%s'", name);
    ck_assert_msg(gs_pc_create(gs_pc_find(name), e, &params, A, Ae, &pc, &err) == GS_OK, "%s",
                  err.msg);
    ck_assert_int_eq(e->ops->vec_create(e, n, &b), GS_OK);
    ck_assert_int_eq(e->ops->vec_create(e, n, &x), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, b, bh), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, x, xh), GS_OK); /* NaN: must be overwritten */
    ck_assert_int_eq(e->ops->set(e, x, 0.0), GS_OK);
    memset(&out->res, 0, sizeof out->res);
    if (perturb) tu_perturb_install(e, perturb, n);
    const gs_method_type *m = gs_method_find(method);
    int status = replacing ? gs_krylov_solve(m, e, Ae, pc, b, x, opts, &out->res)
                           : m->solve(e, Ae, pc, b, x, opts, &out->res);
    if (perturb) tu_perturb_remove(e);
    ck_assert_msg(status == GS_OK, "%s on %s: %s", method, e->ops->name, e->err.msg);
    ck_assert_int_eq(e->ops->vec_download(e, x, xh), GS_OK);
    ck_assert_msg(e->err.status == GS_OK, "%s", e->err.msg);
    if (x_out) memcpy(x_out, xh, (size_t)n * sizeof(double));
    double rr = 0, bb = 0;
    gs_csr_spmv(A, xh, r);
    for (int32_t i = 0; i < n; i++) rr += (bh[i] - r[i]) * (bh[i] - r[i]), bb += bh[i] * bh[i];
    out->true_rel = bb > 0 ? sqrt(rr / bb) : sqrt(rr);
    free(bh), free(xh), free(ones), free(r);
    e->ops->vec_destroy(e, b);
    e->ops->vec_destroy(e, x);
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
}

/* tu_solve_x without keeping x. */
static inline void tu_solve(gs_engine *e, const gs_csr *A, const double *b_in, const char *method,
                            const char *precond, const gs_krylov_opts *opts, tu_solve_out *out)
{
    tu_solve_x(e, A, b_in, method, precond, opts, out, NULL);
}

#endif
