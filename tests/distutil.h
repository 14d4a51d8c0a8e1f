/* distutil.h - running gpusolve under mpirun from a Check suite (check_dist,
 * check_cuda_dist): every run under `timeout`, so that a rank left waiting
 * fails the test instead of hanging it; fields of the CSV report. */
#ifndef GS_DISTUTIL_H
#define GS_DISTUTIL_H

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "cliutil.h"
#include "gen.h"
#include "mmio.h"

#define TD_TIMEOUT_S 120 /* per mpirun: far above a healthy run's seconds */

/* 1 if this build has MPI and mpirun is on PATH (else the caller says
 * "skipped"); lets mpirun run as root (this machine's CI). */
static inline int td_mpi_ready(void)
{
    if (!GS_HAVE_MPI) return 0;
    if (system("command -v mpirun >/dev/null 2>&1") != 0) return 0;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    return 1;
}

/* Open MPI's mpirun needs --oversubscribe for more ranks than cores (this
 * machine has two); other launchers (MPICH's) neither need nor know it. */
static inline const char *td_mpirun_flags(void)
{
    static int open_mpi = -1;
    if (open_mpi < 0)
        open_mpi = system("mpirun --version 2>&1 | grep -q 'Open MPI\\|OpenRTE'") == 0;
    return open_mpi ? "--oversubscribe" : "";
}

/* gpusolve args on `ranks` ranks (ranks == 0: without mpirun, one process). */
static inline tu_cmd_out td_run(int ranks, const char *args)
{
    char prefix[256];
    if (ranks > 0)
        snprintf(prefix, sizeof prefix, "timeout -k 5 %d mpirun %s -np %d", TD_TIMEOUT_S,
                 td_mpirun_flags(), ranks);
    else
        snprintf(prefix, sizeof prefix, "timeout -k 5 %d", TD_TIMEOUT_S);
    return tu_run_env(prefix, args);
}

typedef struct td_result {
    long iterations;
    double rel, true_rel;
    char converged[8];
} td_result;

/* A CSV run that must exit `code`; its first report row, and with field,
 * that field's text in value too (the same run). */
static inline td_result td_csv_field(int ranks, const char *args, int code, const char *field,
                                     char *value, size_t len)
{
    char full[2048], buf[64];
    td_result r = {0, NAN, NAN, ""};
    snprintf(full, sizeof full, "--format csv %s", args);
    tu_cmd_out o = td_run(ranks, full);
    tu_assert_exit(o, code);
    if (field)
        ck_assert_msg(tu_csv_field(o.text, 0, field, value, len), "no %s:\n%s", field, o.text);
    ck_assert_msg(tu_csv_field(o.text, 0, "iterations", buf, sizeof buf), "no report:\n%s", o.text);
    r.iterations = atol(buf);
    ck_assert(tu_csv_field(o.text, 0, "rel_residual", buf, sizeof buf));
    r.rel = atof(buf);
    ck_assert(tu_csv_field(o.text, 0, "true_rel_residual", buf, sizeof buf));
    r.true_rel = atof(buf);
    ck_assert(tu_csv_field(o.text, 0, "converged", r.converged, sizeof r.converged));
    if (ranks > 1) { /* only rank 0 reports: one data row */
        ck_assert_msg(!tu_csv_field(o.text, 1, "iterations", buf, sizeof buf),
                      "more than one report row:\n%s", o.text);
        ck_assert(tu_csv_field(o.text, 0, "ranks", buf, sizeof buf));
        ck_assert_int_eq(atoi(buf), ranks);
    }
    free(o.text);
    return r;
}

static inline td_result td_csv(int ranks, const char *args, int code)
{
    return td_csv_field(ranks, args, code, NULL, NULL, 0);
}

/* The same method on P ranks and on one: the same iterations, residuals
 * equal up to the rounding of sums taken in another order. slack: the
 * iterations may differ by this much (0 for CG with an exact preconditioner). */
static inline void td_assert_same(td_result one, td_result many, long slack, double rtol)
{
    ck_assert_str_eq(one.converged, "yes");
    ck_assert_str_eq(many.converged, "yes");
    ck_assert_msg(labs(one.iterations - many.iterations) <= slack, "iterations %ld vs %ld",
                  one.iterations, many.iterations);
    if (slack == 0) { /* floor: residuals near 1e-15 carry no relative digits */
        ck_assert_msg(fabs(one.rel - many.rel) <= rtol * one.rel + 1e-11, "residual %.9e vs %.9e",
                      one.rel, many.rel);
        ck_assert_msg(fabs(one.true_rel - many.true_rel) <= rtol * one.true_rel + 1e-11,
                      "true residual %.9e vs %.9e", one.true_rel, many.true_rel);
    }
}

/* One CSV field of a run on `ranks` ranks, as a number. */
static inline double td_number(int ranks, const char *args, const char *field)
{
    char full[1024], buf[64];
    snprintf(full, sizeof full, "--format csv %s", args);
    tu_cmd_out o = td_run(ranks, full);
    tu_assert_exit(o, 0);
    ck_assert_msg(tu_csv_field(o.text, 0, field, buf, sizeof buf), "no %s:\n%s", field, o.text);
    free(o.text);
    return atof(buf);
}

/* How often "gpusolve:" starts a line of text (messages are printed once). */
static inline int td_count_messages(const char *text)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, "gpusolve:")); p++) n += p == text || p[-1] == '\n';
    return n;
}

/* A failure on every rank: exit `code`, one message containing frag. */
static inline void td_assert_one_failure(int ranks, const char *args, int code, const char *frag)
{
    tu_cmd_out o = td_run(ranks, args);
    tu_assert_exit(o, code);
    TU_ASSERT_HAS(o, frag);
    ck_assert_msg(td_count_messages(o.text) == 1, "want one message:\n%s", o.text);
    free(o.text);
}

/* A block-diagonal matrix of `copies` copies of poisson3d:m (so that a
 * nonzero-balanced split into `copies` ranks falls on the blocks, and every
 * block-local preconditioner is the global one), written to path. */
static inline void td_write_block_diagonal(const char *path, int m, int copies)
{
    gs_csr B, A;
    gs_error err = {0};
    char spec[64];
    snprintf(spec, sizeof spec, "poisson3d:%d", m);
    ck_assert_int_eq(gs_generate(spec, &B, NULL, 0, &err), GS_OK);
    ck_assert_int_eq(gs_csr_alloc(B.n_rows * copies, B.n_rows * copies, B.nnz * copies, 1, &A,
                                  &err), GS_OK);
    for (int c = 0; c < copies; c++)
        for (int32_t i = 0; i < B.n_rows; i++) {
            const int32_t row = c * B.n_rows + i;
            const int64_t at = c * B.nnz + B.row_ptr[i];
            for (int64_t k = B.row_ptr[i]; k < B.row_ptr[i + 1]; k++) {
                A.col[at + k - B.row_ptr[i]] = B.col[k] + c * B.n_rows;
                A.val[at + k - B.row_ptr[i]] = B.val[k] * (1.0 + 0.25 * c); /* blocks differ */
            }
            A.row_ptr[row + 1] = c * B.nnz + B.row_ptr[i + 1];
        }
    ck_assert_int_eq(gs_mm_write_csr(path, &A, 1, "block diagonal", &err), GS_OK);
    gs_csr_free(&A);
    gs_csr_free(&B);
}

#endif
