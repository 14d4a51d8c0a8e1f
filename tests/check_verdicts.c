/* check_verdicts.c - what `converged` promises (docs/verdicts.md), tested as
 * users run the program: the verdict rests on the true residual, singular
 * systems never "converge", exact solutions are never breakdowns, -m auto
 * fits the preconditioner, and batches keep every row. Each case runs on the
 * CPU engine, and also on the CUDA engine where GS_HAVE_GPU is set. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include "cliutil.h"
#include "testutil.h"

static const char *engines[] = {"cpu", "cuda"};

static int engine_count(void) { return getenv("GS_HAVE_GPU") ? 2 : 1; }

/* A Matrix Market file in a fresh temporary path (written to path). */
static void write_matrix(char *path, size_t len, const char *text)
{
    tu_tmpname(path, len, ".mtx");
    tu_write_text(path, text);
}

/* The 5-point Laplacian of an m x m grid with Neumann boundaries: row sums
 * are zero, so A 1 = 0 and A x = 1 has no solution. */
static void write_neumann(char *path, size_t len, int m)
{
    tu_tmpname(path, len, ".mtx");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    int nnz = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", m * m, m * m, nnz);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++) {
                const int row = i * m + j + 1, nb[4][2] = {{i - 1, j}, {i + 1, j}, {i, j - 1}, {i, j + 1}};
                int deg = 0;
                for (int k = 0; k < 4; k++) {
                    if (nb[k][0] < 0 || nb[k][0] >= m || nb[k][1] < 0 || nb[k][1] >= m) continue;
                    deg++, nnz += !pass;
                    if (pass) fprintf(f, "%d %d -1\n", row, nb[k][0] * m + nb[k][1] + 1);
                }
                nnz += !pass;
                if (pass) fprintf(f, "%d %d %d\n", row, row, deg);
            }
    }
    fclose(f);
}

typedef struct singular_case {
    const char *what, *text;
    int code;             /* the exit expected: 2 from a solver, 1 from the reader */
    const char *fragment; /* in the message where code is 1 */
} singular_case;

/* Explicit zero entries keep every row stored, so the reader (which refuses
 * a size line announcing more rows than the entries fill) hands these to the
 * solver; 1e-310 is refused by the reader as an underflow. */
static const singular_case singular[] = {
    {"2x2 with only a_12 = 1",
     "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n2 2 0\n", 2, NULL},
    {"3x3 of zeros",
     "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 0\n2 2 0\n3 3 0\n", 2, NULL},
    {"zero on the diagonal",
     "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 0\n3 3 2\n", 2, NULL},
    {"an empty row",
     "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n1 2 1\n3 2 1\n3 3 1\n", 2,
     NULL},
    {"diagonal 1e-310",
     "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e-310\n2 2 1e-310\n", 1,
     "underflows"},
    {"Neumann 5-point Laplacian", NULL, 2, NULL},
};
#define N_SINGULAR ((int)(sizeof singular / sizeof singular[0]))

/* No method, on no engine, calls a singular system with b = 1 solved: exit
 * 2 and "converged  no" from the solver (or exit 1 from the reader where the
 * case expects it), never "converged  yes". */
START_TEST(singular_systems_never_converge)
{
    static const char *methods[] = {"gmres", "cg", "bicgstab", "idr"};
    const singular_case *c = &singular[_i % N_SINGULAR];
    const char *method = methods[_i / N_SINGULAR];
    char path[256], args[512];
    if (c->text)
        write_matrix(path, sizeof path, c->text);
    else
        write_neumann(path, sizeof path, 6);
    for (int e = 0; e < engine_count(); e++) {
        snprintf(args, sizeof args, "-e %s -m %s -p none --maxit 200 %s", engines[e], method, path);
        tu_cmd_out o = tu_run(args);
        ck_assert_msg(o.code == c->code, "%s, %s on %s: exit %d (want %d)\n%s", c->what, method,
                      engines[e], o.code, c->code, o.text);
        TU_ASSERT_LACKS(o, "converged  yes");
        TU_ASSERT_HAS(o, c->code == 2 ? "converged  no" : c->fragment);
        free(o.text);
    }
    remove(path);
}
END_TEST

/* The tridiagonal (-1, 4, -1) 3x3 system is solved exactly in 3 steps; the
 * frozen zero residual after it is convergence, not "p'Ap <= 0", for every
 * method (IDR with s = min(s, n - 1), said in the report). */
START_TEST(an_exact_solution_is_convergence)
{
    static const char *methods[] = {"cg", "bicgstab", "gmres", "idr"};
    char path[256], args[512];
    write_matrix(path, sizeof path,
                 "%%MatrixMarket matrix coordinate real symmetric\n3 3 5\n1 1 4\n2 1 -1\n2 2 4\n"
                 "3 2 -1\n3 3 4\n");
    for (int e = 0; e < engine_count(); e++) {
        snprintf(args, sizeof args, "-e %s -m %s %s", engines[e], methods[_i], path);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 0);
        TU_ASSERT_HAS(o, "converged  yes");
        TU_ASSERT_LACKS(o, "breakdown");
        if (strcmp(methods[_i], "idr") == 0) TU_ASSERT_HAS(o, "s = 2 (asked 4");
        free(o.text);
    }
    remove(path);
}
END_TEST

/* CG's recurrence drives its own residual to 1e-17 while the true residual
 * of x stalls near 1e-15: asked for 1e-17, that is a residual gap, exit 2,
 * with both numbers in the message, after the 3 residual replacements
 * allowed (each restarts the recurrence from b - A x, which cannot get
 * below rounding), and the attainable accuracy, eps ||A|| ||x|| / ||b||,
 * estimated between the true residual's order and above the tol asked for,
 * so the message says no method can meet it; asked for 1e-8, the same run
 * converges with no replacement. */
START_TEST(a_residual_gap_is_not_convergence)
{
    for (int e = 0; e < engine_count(); e++) {
        char args[256], reason[64], method_rel[64], true_rel[64];
        snprintf(args, sizeof args, "-e %s --generate poisson3d:10 --tol 1e-17 --format csv",
                 engines[e]);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 2);
        ck_assert(tu_csv_field(o.text, 0, "reason", reason, sizeof reason));
        ck_assert(tu_csv_field(o.text, 0, "rel_residual", method_rel, sizeof method_rel));
        ck_assert(tu_csv_field(o.text, 0, "true_rel_residual", true_rel, sizeof true_rel));
        ck_assert_str_eq(reason, "residual gap");
        ck_assert_msg(strtod(method_rel, NULL) <= 1e-17 && strtod(true_rel, NULL) > 1e-16,
                      "method %s true %s", method_rel, true_rel);
        TU_ASSERT_HAS(o, "residual gap: method ");
        TU_ASSERT_HAS(o, "after 3 residual replacements; attainable about ");
        TU_ASSERT_HAS(o, "tol is below it, so it may not be attainable");
        char field[64];
        ck_assert(tu_csv_field(o.text, 0, "replacements", field, sizeof field));
        ck_assert_str_eq(field, "3");
        ck_assert(tu_csv_field(o.text, 0, "attainable_rel_residual", field, sizeof field));
        const double attainable = strtod(field, NULL);
        ck_assert_msg(attainable > 1e-17 && attainable < 1e-12 &&
                          attainable > 0.1 * strtod(true_rel, NULL),
                      "attainable %s, true %s", field, true_rel);
        free(o.text);
        snprintf(args, sizeof args, "-e %s --generate poisson3d:10", engines[e]);
        o = tu_run(args);
        tu_assert_exit(o, 0);
        TU_ASSERT_LACKS(o, "replacement");
        free(o.text);
        /* and in the table, beside the gap */
        snprintf(args, sizeof args, "-e %s --generate poisson3d:10 --tol 1e-17", engines[e]);
        o = tu_run(args);
        tu_assert_exit(o, 2);
        TU_ASSERT_HAS(o, "(3 residual replacements)");
        TU_ASSERT_HAS(o, "attainable about ");
        free(o.text);
        /* --replacements 0: the gap is reported at once */
        snprintf(args, sizeof args, "-e %s --generate poisson3d:10 --tol 1e-17 --replacements 0 "
                 "--format json", engines[e]);
        o = tu_run(args);
        tu_assert_exit(o, 2);
        TU_ASSERT_HAS(o, "\"replacements\": 0,");
        TU_ASSERT_HAS(o, "after 0 residual replacements");
        free(o.text);
    }
}
END_TEST

/* x = A^-1 b = 1e310 overflows: whatever the method's residual says, a
 * non-finite x is never converged (cg, bicgstab and idr end with x holding
 * Inf, which the verdict names; gmres's least-squares step overflows first,
 * a breakdown). */
START_TEST(a_non_finite_solution_is_never_converged)
{
    static const char *methods[] = {"cg", "bicgstab", "gmres", "idr"};
    char a[256], b[256], args[768];
    write_matrix(a, sizeof a,
                 "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e-300\n2 2 1e-300\n");
    tu_tmpname(b, sizeof b, ".mtx");
    tu_write_text(b, "%%MatrixMarket matrix array real general\n2 1\n1e10\n1e10\n");
    for (int e = 0; e < engine_count(); e++) {
        snprintf(args, sizeof args, "-e %s -m %s -p none --rhs %s %s", engines[e], methods[_i], b, a);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 2);
        TU_ASSERT_HAS(o, "converged  no");
        TU_ASSERT_HAS(o, strcmp(methods[_i], "gmres") == 0 ? "overflowed" : "x holds NaN or Inf");
        free(o.text);
    }
    remove(a);
    remove(b);
}
END_TEST

typedef struct auto_case {
    const char *args, *method, *why;
} auto_case;

static const auto_case auto_cases[] = {
    {"-p jacobi data/poisson3d_8.mtx", "cg", "(auto: A and M symmetric, A's diagonal positive)"},
    {"-p spai data/poisson3d_8.mtx", "bicgstab", "(auto: M nonsymmetric; spai's paper method)"},
    {"-p gspai-opt data/poisson3d_8.mtx", "bicgstab", "gspai-opt's paper method"},
    {"-p isai data/poisson3d_8.mtx", "idr", "(auto: M nonsymmetric; isai's paper method)"},
    {"-p jacobi data/convdiff3d_8.mtx", "bicgstab", "(auto: A nonsymmetric)"},
    {"-p isai data/convdiff3d_8.mtx", "idr", "(auto: A nonsymmetric; isai's paper method)"},
};

/* -m auto picks CG only when A and M are both symmetric, else the
 * preconditioner's paper method, and the report says why. */
START_TEST(auto_method_fits_the_preconditioner)
{
    const auto_case *c = &auto_cases[_i];
    for (int e = 0; e < engine_count(); e++) {
        char args[512], want[64];
        snprintf(args, sizeof args, "-e %s %s", engines[e], c->args);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 0);
        snprintf(want, sizeof want, "method     %s (auto: ", c->method);
        TU_ASSERT_HAS(o, want);
        TU_ASSERT_HAS(o, c->why);
        free(o.text);
    }
}
END_TEST

/* The saddle-point matrix [K B^T; B -c I] (symmetric storage): K the 1D
 * Laplacian tridiag(-1, 2, -1) of order nk, B an nb x nk block of full row
 * rank (row k: 1, 0.5, 0.25 in columns 3k..3k+2). With c > 0 it is
 * symmetric and nonsingular but indefinite (nk positive and nb negative
 * eigenvalues), its diagonal -c from row nk + 1 on; with c = 0 those
 * diagonal entries are not stored. */
static void write_saddle_point(char *path, size_t len, int nk, int nb, double c)
{
    tu_tmpname(path, len, ".mtx");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    const int n = nk + nb, nnz = 2 * nk - 1 + 3 * nb + (c != 0.0 ? nb : 0);
    fprintf(f, "%%%%MatrixMarket matrix coordinate real symmetric\n%d %d %d\n", n, n, nnz);
    for (int i = 1; i <= nk; i++) {
        fprintf(f, "%d %d 2\n", i, i);
        if (i > 1) fprintf(f, "%d %d -1\n", i, i - 1);
    }
    for (int k = 0; k < nb; k++) {
        const double b[3] = {1.0, 0.5, 0.25};
        for (int q = 0; q < 3; q++) fprintf(f, "%d %d %g\n", nk + k + 1, 3 * k + q + 1, b[q]);
        if (c != 0.0) fprintf(f, "%d %d %g\n", nk + k + 1, nk + k + 1, -c);
    }
    ck_assert_int_eq(fclose(f), 0);
}

/* Issue 35: on a symmetric indefinite (saddle-point) matrix -m auto picked
 * CG, which broke down at once (as -m cg still does here). A symmetric
 * matrix with a diagonal entry <= 0 is not SPD (e_i' A e_i = a_ii), so auto
 * takes the nonsymmetric choice (bicgstab with jacobi or none) and the
 * report names the entry; the solve then converges. The same K alone
 * (positive diagonal) keeps CG. */
START_TEST(auto_method_refuses_cg_on_a_nonpositive_diagonal)
{
    char saddle[256], zero[256], spd[256];
    write_saddle_point(saddle, sizeof saddle, 30, 8, 0.5);
    write_saddle_point(zero, sizeof zero, 30, 8, 0.0);
    write_saddle_point(spd, sizeof spd, 30, 0, 0.0);
    for (int e = 0; e < engine_count(); e++) {
        char args[512];
        snprintf(args, sizeof args, "-e %s -p jacobi --maxit 2000 %s", engines[e], saddle);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 0);
        TU_ASSERT_HAS(o, "method     bicgstab (auto: A symmetric but not SPD: diagonal "
                         "a_31,31 = -0.5 <= 0)");
        TU_ASSERT_HAS(o, "converged  yes");
        free(o.text);
        snprintf(args, sizeof args, "-e %s -p jacobi -m cg %s", engines[e], saddle);
        o = tu_run(args);
        tu_assert_exit(o, 2);
        TU_ASSERT_HAS(o, "breakdown  at iteration 0");
        free(o.text);
        snprintf(args, sizeof args, "-e %s -p none --maxit 2000 %s", engines[e], zero);
        o = tu_run(args);
        tu_assert_exit(o, 0);
        TU_ASSERT_HAS(o, "method     bicgstab (auto: A symmetric but not SPD: a_31,31 = 0");
        free(o.text);
        snprintf(args, sizeof args, "-e %s -p jacobi --format csv %s", engines[e], spd);
        o = tu_run(args);
        tu_assert_exit(o, 0);
        char method[32];
        ck_assert(tu_csv_field(o.text, 0, "method", method, sizeof method));
        ck_assert_str_eq(method, "cg");
        free(o.text);
    }
    remove(saddle);
    remove(zero);
    remove(spd);
}
END_TEST

/* A batch's CSV row reaches its reader when its run ends: the second input
 * is a FIFO nobody writes, so the program blocks opening it while the test
 * reads the first row from the pipe (it would wait forever on a row still
 * in stdio's buffer: the case's timeout fails the test). */
START_TEST(each_row_is_written_when_its_run_ends)
{
    char fifo[256];
    tu_tmpname(fifo, sizeof fifo, ".fifo");
    remove(fifo); /* a fresh name: tu_tmpname made a plain file there */
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execl(tu_binary(), tu_binary(), "-e", "cpu", "--format", "csv", "data/poisson3d_8.mtx", fifo,
              (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    /* the row must come while the program waits on the FIFO: a minute is
     * plenty; on failure the child is killed and the FIFO removed first */
    struct pollfd pfd = {fd[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, 60000);
    if (ready != 1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        remove(fifo);
        ck_abort_msg("no CSV row reached the pipe while the batch went on");
    }
    FILE *in = fdopen(fd[0], "r");
    char line[8192];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, in)); /* header */
    ck_assert_msg(strncmp(line, "matrix,", 7) == 0, "header: %s", line);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, in)); /* the first run's row */
    ck_assert_msg(strstr(line, "\"data/poisson3d_8.mtx\",512,") == line, "row: %s", line);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fclose(in);
    remove(fifo);
}
END_TEST

/* --time-limit stops each run at its next check, reason "time limit", exit
 * 2, and the batch goes on to the next file. */
START_TEST(time_limit_stops_a_run_and_the_batch_goes_on)
{
    for (int e = 0; e < engine_count(); e++) {
        char args[512], reason[64], conv[16];
        snprintf(args, sizeof args,
                 "-e %s --format csv --time-limit 0.000001 data/poisson3d_8.mtx data/convdiff3d_8.mtx",
                 engines[e]);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 2);
        for (int row = 0; row < 2; row++) {
            ck_assert_msg(tu_csv_field(o.text, row, "reason", reason, sizeof reason), "%s", o.text);
            ck_assert(tu_csv_field(o.text, row, "converged", conv, sizeof conv));
            ck_assert_str_eq(reason, "time limit");
            ck_assert_str_eq(conv, "no");
        }
        TU_ASSERT_HAS(o, "\"data/convdiff3d_8.mtx\"");
        free(o.text);
    }
}
END_TEST

/* Where the user chose no OpenMP wait policy the program runs with passive
 * waiting (it executes itself again with it set); a chosen one is kept. */
START_TEST(openmp_waits_passively_unless_told_otherwise)
{
    tu_cmd_out o = tu_run_env("env -u OMP_WAIT_POLICY", "-e cpu data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "OpenMP threads, passive waiting");
    free(o.text);
    o = tu_run_env("OMP_WAIT_POLICY=active", "-e cpu data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "OpenMP threads, active waiting");
    free(o.text);
}
END_TEST

static Suite *verdicts_suite(void)
{
    Suite *s = suite_create("verdicts");
    TCase *tc = tu_add_tcase(s, "verdicts", 120);
    tcase_add_loop_test(tc, singular_systems_never_converge, 0, 4 * N_SINGULAR);
    tcase_add_loop_test(tc, an_exact_solution_is_convergence, 0, 4);
    tcase_add_test(tc, a_residual_gap_is_not_convergence);
    tcase_add_loop_test(tc, a_non_finite_solution_is_never_converged, 0, 4);
    tcase_add_loop_test(tc, auto_method_fits_the_preconditioner, 0,
                        sizeof auto_cases / sizeof auto_cases[0]);
    tcase_add_test(tc, auto_method_refuses_cg_on_a_nonpositive_diagonal);
    tcase_add_test(tc, each_row_is_written_when_its_run_ends);
    tcase_add_test(tc, time_limit_stops_a_run_and_the_batch_goes_on);
    tcase_add_test(tc, openmp_waits_passively_unless_told_otherwise);
    return s;
}

int main(void) { return tu_run_suite(verdicts_suite()); }
