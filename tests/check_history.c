/* check_history.c - gpusolve's --history (one CSV row per residual check of
 * every run) and --progress (the progress line on stderr), run as users do. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cliutil.h"
#include "testutil.h"

#define HEADER "matrix,engine,precond,method,iteration,rel_residual,seconds,residual,clock"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* stdout and stderr of one run, apart (tu_run merges them). */
typedef struct split_out {
    int code;
    char *out, *err;
} split_out;

static split_out run_split(const char *args)
{
    char errf[256], outf[256], cmd[4096];
    tu_tmpname(errf, sizeof errf, ".err");
    tu_tmpname(outf, sizeof outf, ".out");
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s >%s 2>%s", tu_binary(), args, outf, errf);
    const int st = system(cmd);
    split_out o = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_file(outf), read_file(errf)};
    remove(errf);
    remove(outf);
    return o;
}

static void split_free(split_out *o)
{
    free(o->out);
    free(o->err);
}

/* One parsed row of the history. */
typedef struct hrow {
    char matrix[256], engine[16], precond[32], method[16], rel[64];
    char residual[16], clock[16]; /* method|true, host|device|interpolated */
    long it;
    double seconds;
} hrow;

/* The rows of a history file after its header (which must be exact). */
static int history_rows(const char *text, hrow *rows, int max)
{
    const char *nl = strchr(text, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_msg((size_t)(nl - text) == strlen(HEADER) && strncmp(text, HEADER, strlen(HEADER)) == 0,
                  "header: %.*s", (int)(nl - text), text);
    char *copy = strdup(nl + 1), *save = NULL, *f[16];
    int n = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ck_assert_int_lt(n, max);
        ck_assert_int_eq(tu_csv_split(line, f, 16), 9);
        hrow *r = &rows[n++];
        snprintf(r->matrix, sizeof r->matrix, "%s", f[0]);
        snprintf(r->engine, sizeof r->engine, "%s", f[1]);
        snprintf(r->precond, sizeof r->precond, "%s", f[2]);
        snprintf(r->method, sizeof r->method, "%s", f[3]);
        char *end;
        r->it = strtol(f[4], &end, 10);
        ck_assert_msg(*f[4] && !*end, "iteration '%s'", f[4]);
        snprintf(r->rel, sizeof r->rel, "%s", f[5]);
        r->seconds = strtod(f[6], &end);
        ck_assert_msg(*f[6] && !*end, "seconds '%s'", f[6]);
        snprintf(r->residual, sizeof r->residual, "%s", f[7]);
        snprintf(r->clock, sizeof r->clock, "%s", f[8]);
        ck_assert_msg(strcmp(r->residual, "method") == 0 || strcmp(r->residual, "true") == 0,
                      "residual '%s'", r->residual);
        ck_assert_msg(strcmp(r->clock, "host") == 0 || strcmp(r->clock, "device") == 0 ||
                          strcmp(r->clock, "interpolated") == 0,
                      "clock '%s'", r->clock);
    }
    free(copy);
    return n;
}

/* Split rows into runs: a run starts at iteration 0. Returns the count;
 * start[k] is run k's first row, start[count] = n. */
static int history_runs(const hrow *rows, int n, int *start, int max)
{
    int runs = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].it == 0) {
            ck_assert_int_lt(runs, max);
            start[runs++] = i;
        }
    ck_assert_msg(n == 0 || start[0] == 0, "first row is not iteration 0");
    start[runs] = n;
    return runs;
}

#define MAX_ROWS 20000

/* Every run of the process (files x engines, the last of --repeat) gives one
 * group of rows: iterations strictly increasing from 0, seconds
 * non-decreasing from >= 0, the last rel_residual exactly the report's. */
START_TEST(history_one_group_per_run_matching_the_report)
{
    char hist[256], args[1024];
    const int gpu = getenv("GS_HAVE_GPU") != NULL;
    tu_tmpname(hist, sizeof hist, ".csv");
    snprintf(args, sizeof args,
             "-e %s --format csv --repeat 2 --history %s data/poisson3d_8.mtx data/convdiff3d_8.mtx",
             gpu ? "both" : "cpu", hist);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 0);
    char *text = read_file(hist);
    static hrow rows[MAX_ROWS];
    int start[16];
    const int n = history_rows(text, rows, MAX_ROWS);
    const int runs = history_runs(rows, n, start, 15);
    const int engines = gpu ? 2 : 1;
    ck_assert_int_eq(runs, 2 * engines);
    for (int k = 0; k < runs; k++) {
        char want[256];
        const hrow *last = &rows[start[k + 1] - 1];
        ck_assert_msg(tu_csv_field(o.text, k, "matrix", want, sizeof want), "report row %d", k);
        ck_assert_str_eq(rows[start[k]].matrix, want);
        ck_assert(tu_csv_field(o.text, k, "engine", want, sizeof want));
        ck_assert_str_eq(rows[start[k]].engine, want);
        ck_assert(tu_csv_field(o.text, k, "method", want, sizeof want));
        ck_assert_str_eq(rows[start[k]].method, want);
        ck_assert(tu_csv_field(o.text, k, "precond", want, sizeof want));
        ck_assert_str_eq(rows[start[k]].precond, want);
        ck_assert(tu_csv_field(o.text, k, "rel_residual", want, sizeof want));
        ck_assert_str_eq(last->rel, want);
        ck_assert(tu_csv_field(o.text, k, "iterations", want, sizeof want));
        ck_assert_int_eq(last->it, atol(want));
        ck_assert_msg(start[k + 1] - start[k] >= 2, "run %d has %d rows", k, start[k + 1] - start[k]);
        ck_assert_double_ge(rows[start[k]].seconds, 0.0);
        for (int i = start[k] + 1; i < start[k + 1]; i++) {
            ck_assert_str_eq(rows[i].matrix, rows[start[k]].matrix);
            ck_assert_str_eq(rows[i].engine, rows[start[k]].engine);
            ck_assert_int_gt(rows[i].it, rows[i - 1].it);
            ck_assert_double_ge(rows[i].seconds, rows[i - 1].seconds);
        }
    }
    /* the runs come in the report's order: the files, each on every engine */
    ck_assert_str_eq(rows[start[0]].matrix, "data/poisson3d_8.mtx");
    ck_assert_str_eq(rows[start[engines]].matrix, "data/convdiff3d_8.mtx");
    free(text);
    free(o.text);
    remove(hist);
}
END_TEST

/* Every iteration has its row, 0, 1, ..., N, whatever the checks: cg and
 * bicgstab checking adaptively or every 7 iterations log the iterations in
 * between (clock 'interpolated'); gmres checks every step and confirms its
 * estimate at each restart with b - A x at the same iteration, which must
 * not repeat the row (residual 'true' there). */
static const struct {
    const char *args;
    int interpolated; /* rows between checks expected */
} every_cases[] = {
    {"-p jacobi -m cg --check-every 1 data/poisson3d_8.mtx", 0},
    {"-p jacobi -m cg data/poisson3d_8.mtx", 1},
    {"-p jacobi -m cg --check-every 7 data/poisson3d_8.mtx", 1},
    {"-p jacobi -m bicgstab data/convdiff3d_8.mtx", 1},
    {"-p jacobi -m bicgstab --check-every 7 data/convdiff3d_8.mtx", 1},
    {"-p jacobi -m gmres --restart 5 data/convdiff3d_8.mtx", 0},
    {"-p jacobi -m idr --idr-s 2 data/convdiff3d_8.mtx", 0},
};

START_TEST(every_iteration_one_row)
{
    char hist[256], args[1024];
    tu_tmpname(hist, sizeof hist, ".csv");
    snprintf(args, sizeof args, "-e cpu --format csv --history %s %s", hist, every_cases[_i].args);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 0);
    char *text = read_file(hist), want[64];
    static hrow rows[MAX_ROWS];
    const int n = history_rows(text, rows, MAX_ROWS);
    ck_assert(tu_csv_field(o.text, 0, "iterations", want, sizeof want));
    const long iterations = atol(want);
    ck_assert_int_gt(iterations, 5); /* enough to span gmres restarts */
    ck_assert_int_eq(n, iterations + 1);
    int interpolated = 0, true_rows = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(rows[i].it, i);
        interpolated += strcmp(rows[i].clock, "interpolated") == 0;
        true_rows += strcmp(rows[i].residual, "true") == 0;
        if (i > 0) ck_assert_double_ge(rows[i].seconds, rows[i - 1].seconds);
    }
    ck_assert(tu_csv_field(o.text, 0, "rel_residual", want, sizeof want));
    ck_assert_str_eq(rows[n - 1].rel, want);
    ck_assert_str_eq(rows[n - 1].clock, "host"); /* the last row is a check */
    ck_assert_str_eq(rows[0].rel, "1"); /* x0 = 0: r0 = b */
    ck_assert_str_eq(rows[0].residual, "true");
    ck_assert_msg((interpolated > 0) == every_cases[_i].interpolated, "%d interpolated rows",
                  interpolated);
    if (strstr(every_cases[_i].args, "gmres")) /* 5 columns a cycle: a true row at each end */
        ck_assert_int_ge(true_rows, 1 + (int)((iterations - 1) / 5));
    else
        ck_assert_int_eq(true_rows, 1); /* converged without a replacement */
    free(text);
    free(o.text);
    remove(hist);
}
END_TEST

/* The file is opened before any matrix is read: an unwritable path exits 1
 * naming --history and the path, and the (unreadable) matrix is never
 * reached. */
START_TEST(unwritable_history_exits_1_before_reading)
{
    tu_cmd_out o = tu_run("-e cpu --history /nonexistent_dir/h.csv /nonexistent/a.mtx");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "--history");
    TU_ASSERT_HAS(o, "/nonexistent_dir/h.csv");
    TU_ASSERT_LACKS(o, "/nonexistent/a.mtx");
    free(o.text);
    o = tu_run("-e cpu --progress sometimes data/poisson3d_8.mtx");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "--progress: 'sometimes' is not one of auto|always|never");
    free(o.text);
}
END_TEST

START_TEST(help_says_when_rows_come)
{
    tu_cmd_out o = tu_run("--help");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "--history FILE");
    TU_ASSERT_HAS(o, "one CSV row per iteration");
    TU_ASSERT_HAS(o, "--progress WHEN");
    TU_ASSERT_HAS(o, "[default: auto]");
    free(o.text);
}
END_TEST

#define RUN "-e cpu --format csv -p jacobi -m cg data/poisson3d_8.mtx"

START_TEST(progress_never_and_auto_off_a_terminal_print_nothing)
{
    const char *modes[] = {"--progress never", "--progress auto", "", "--progress always -q"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "%s %s", modes[i], RUN);
        split_out o = run_split(args);
        ck_assert_int_eq(o.code, 0);
        ck_assert_msg(o.err[0] == '\0', "%s: stderr '%s'", modes[i], o.err);
        split_free(&o);
    }
    tu_cmd_out m = tu_run("--progress auto " RUN); /* a pipe (popen) is no terminal */
    tu_assert_exit(m, 0);
    TU_ASSERT_LACKS(m, "\r");
    TU_ASSERT_LACKS(m, "solve  it");
    free(m.text);
}
END_TEST

/* always: the line from the start, on stderr only, rewritten with '\r' and
 * cleared at the end of the run; the report on stdout is untouched. */
START_TEST(progress_always_shows_and_clears_the_line)
{
    split_out o = run_split("--progress always " RUN);
    ck_assert_int_eq(o.code, 0);
    ck_assert_msg(strstr(o.err, "solve") && strstr(o.err, " it "), "stderr '%s'", o.err);
    ck_assert_msg(strstr(o.err, "rel residual"), "stderr '%s'", o.err);
    ck_assert_ptr_nonnull(strstr(o.err, "setup: "));
    ck_assert_int_eq(o.err[0], '\r');
    ck_assert_int_eq(o.err[strlen(o.err) - 1], '\r'); /* cleared, cursor at column 0 */
    ck_assert_ptr_null(strchr(o.err, '\n'));
    ck_assert_ptr_null(strstr(o.out, "solve  it"));
    char conv[16];
    ck_assert(tu_csv_field(o.out, 0, "converged", conv, sizeof conv));
    ck_assert_str_eq(conv, "yes");
    split_free(&o);
}
END_TEST

/* A stage's start reaches the line too (gs_pc_stage_start: spai's least
 * squares, which can take minutes), not only its end. */
START_TEST(progress_shows_a_stage_as_it_starts)
{
    split_out o = run_split("--progress always -e cpu --format csv -p spai -m bicgstab "
                            "data/poisson3d_8.mtx");
    ck_assert_int_eq(o.code, 0);
    ck_assert_msg(strstr(o.err, "setup: least squares ...") != NULL, "stderr '%s'", o.err);
    split_free(&o);
}
END_TEST

/* On a terminal (a pty from script(1)) auto waits GS_PROGRESS_AFTER_S: a run
 * far shorter shows nothing, always shows the line there too. */
START_TEST(progress_auto_on_a_terminal_waits)
{
    if (system("command -v script >/dev/null 2>&1") != 0) return; /* no util-linux script */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "-qec \"OMP_NUM_THREADS=1 %s --progress auto " RUN "\" /dev/null",
             tu_binary());
    char full[1200];
    snprintf(full, sizeof full, "script %s", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    static char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf - 1, p);
    buf[len] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strstr(buf, "converged") != NULL, "no report through script: %s", buf);
    ck_assert_msg(strstr(buf, "solve  it") == NULL, "auto printed on a short run: %s", buf);
    snprintf(full, sizeof full, "script -qec \"OMP_NUM_THREADS=1 %s --progress always " RUN
             "\" /dev/null", tu_binary());
    p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    len = fread(buf, 1, sizeof buf - 1, p);
    buf[len] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strstr(buf, "solve  it") != NULL, "always printed nothing on a pty: %s", buf);
}
END_TEST

Suite *history_suite(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("history");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, history_one_group_per_run_matching_the_report);
    tcase_add_loop_test(tc, every_iteration_one_row, 0, sizeof every_cases / sizeof every_cases[0]);
    tcase_add_test(tc, unwritable_history_exits_1_before_reading);
    tcase_add_test(tc, help_says_when_rows_come);
    tcase_add_test(tc, progress_never_and_auto_off_a_terminal_print_nothing);
    tcase_add_test(tc, progress_always_shows_and_clears_the_line);
    tcase_add_test(tc, progress_shows_a_stage_as_it_starts);
    tcase_add_test(tc, progress_auto_on_a_terminal_waits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(history_suite()); }
