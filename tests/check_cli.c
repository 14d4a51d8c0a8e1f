/* check_cli.c - the program as users run it: exit codes, the report in its
 * three formats (CSV and JSON must parse and agree with the table), options,
 * and bad input, which must give a message naming the culprit and exit 1. */
#include <ctype.h>
#include <sys/wait.h>

#include "mmio.h"
#include "testutil.h"

static const char *binary(void)
{
    const char *b = getenv("GPUSOLVE");
    return b && *b ? b : "build/gpusolve";
}

typedef struct cmd_out {
    int code;
    char *text; /* stdout and stderr */
} cmd_out;

/* Run gpusolve with args (CPU engine unless args name one). */
static cmd_out run(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s 2>&1", binary(), args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    int st = pclose(p);
    cmd_out o = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf};
    return o;
}

#define ASSERT_HAS(out, frag)                                                                     \
    ck_assert_msg(strstr((out).text, frag) != NULL, "expected '%s' in:\n%s", frag, (out).text)

static void assert_exit(cmd_out o, int code) { ck_assert_msg(o.code == code, "exit %d (want %d):\n%s", o.code, code, o.text); }

START_TEST(generated_problem_solves_and_reports)
{
    cmd_out o = run("-e cpu --generate poisson3d:6 -p jacobi -m cg");
    assert_exit(o, 0);
    ASSERT_HAS(o, "Tp  setup");
    ASSERT_HAS(o, "Ts  solve (");
    ASSERT_HAS(o, "Tt  total");
    ASSERT_HAS(o, "converged  yes");
    ASSERT_HAS(o, "transfer A");
    ASSERT_HAS(o, "n = 216");
    free(o.text);
}
END_TEST

START_TEST(not_converged_exits_2)
{
    cmd_out o = run("-e cpu --generate poisson3d:10 --maxit 2");
    assert_exit(o, 2);
    ASSERT_HAS(o, "iteration limit");
    free(o.text);
}
END_TEST

/* Split one CSV line into fields (quotes honoured); returns the count. */
static int csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *w = line, *r = line;
    while (n < max) {
        f[n++] = w;
        if (*r == '"') {
            r++;
            while (*r && !(*r == '"' && r[1] != '"')) {
                if (*r == '"') r++;
                *w++ = *r++;
            }
            if (*r == '"') r++;
        } else {
            while (*r && *r != ',' && *r != '\n') *w++ = *r++;
        }
        if (*r != ',') {
            *w = '\0';
            break;
        }
        *w++ = '\0';
        r++;
    }
    return n;
}

/* A flat JSON object of strings, numbers and null: keys and raw values. */
static int json_parse(const char *s, char keys[][64], char vals[][1100], int max)
{
    int n = 0;
    while (isspace((unsigned char)*s)) s++;
    if (*s++ != '{') return -1;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        if (*s == '}') return n;
        if (*s++ != '"' || n == max) return -1;
        int k = 0;
        while (*s && *s != '"') keys[n][k++] = *s++;
        keys[n][k] = '\0';
        if (*s++ != '"') return -1;
        while (isspace((unsigned char)*s)) s++;
        if (*s++ != ':') return -1;
        while (isspace((unsigned char)*s)) s++;
        int v = 0;
        if (*s == '"') {
            s++;
            while (*s && *s != '"') {
                if (*s == '\\') s++;
                vals[n][v++] = *s++;
            }
            if (*s++ != '"') return -1;
        } else {
            while (*s && *s != ',' && *s != '}' && !isspace((unsigned char)*s)) vals[n][v++] = *s++;
            char *end;
            vals[n][v] = '\0';
            if (strcmp(vals[n], "null") != 0) {
                strtod(vals[n], &end);
                if (*end) return -1;
            }
        }
        vals[n][v] = '\0';
        n++;
        while (isspace((unsigned char)*s)) s++;
        if (*s == ',') s++;
        else if (*s != '}') return -1;
    }
}

static long table_iterations(const char *text)
{
    const char *p = strstr(text, "Ts  solve (");
    ck_assert_ptr_nonnull(p);
    return strtol(p + strlen("Ts  solve ("), NULL, 10);
}

static double table_true_residual(const char *text)
{
    const char *p = strstr(text, "true relative residual ");
    ck_assert_ptr_nonnull(p);
    return strtod(p + strlen("true relative residual "), NULL);
}

START_TEST(csv_and_json_parse_and_match_the_table)
{
    const char *args = "-e cpu data/convdiff3d_8.mtx -p jacobi -m bicgstab";
    char buf[512];
    cmd_out t = run(args);
    assert_exit(t, 0);
    snprintf(buf, sizeof buf, "%s --format csv", args);
    cmd_out c = run(buf);
    assert_exit(c, 0);
    snprintf(buf, sizeof buf, "%s --format json", args);
    cmd_out j = run(buf);
    assert_exit(j, 0);

    char *nl = strchr(c.text, '\n');
    ck_assert_ptr_nonnull(nl);
    *nl = '\0';
    char *hf[64], *rf[64];
    int nh = csv_split(c.text, hf, 64), nr = csv_split(nl + 1, rf, 64);
    ck_assert_int_eq(nh, nr);
    static char keys[64][64], vals[64][1100];
    int nj = json_parse(j.text, keys, vals, 64);
    ck_assert_msg(nj == nh, "json fields %d, csv %d:\n%s", nj, nh, j.text);
    const long iters = table_iterations(t.text);
    const double tres = table_true_residual(t.text);
    for (int i = 0; i < nh; i++) {
        ck_assert_str_eq(hf[i], keys[i]);
        if (strcmp(hf[i], "iterations") == 0) {
            ck_assert_int_eq(strtol(rf[i], NULL, 10), iters);
            ck_assert_int_eq(strtol(vals[i], NULL, 10), iters);
        }
        if (strcmp(hf[i], "true_rel_residual") == 0) { /* table prints 4 digits */
            ck_assert_double_eq_tol(strtod(rf[i], NULL), tres, 1e-3 * tres);
            ck_assert_double_eq_tol(strtod(vals[i], NULL), tres, 1e-3 * tres);
        }
        if (strcmp(hf[i], "n") == 0) ck_assert_str_eq(rf[i], "512");
        if (strcmp(hf[i], "converged") == 0) ck_assert_str_eq(vals[i], "yes");
        if (strcmp(hf[i], "tt_min_s") == 0) ck_assert(strtod(rf[i], NULL) > 0);
    }
    free(t.text);
    free(c.text);
    free(j.text);
}
END_TEST

START_TEST(several_files_one_row_each)
{
    cmd_out o = run("-e cpu --format csv data/poisson3d_8.mtx data/convdiff3d_8.mtx "
                    "data/poisson3d27_6.mtx.gz");
    assert_exit(o, 0);
    int lines = 0;
    for (const char *p = o.text; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 4); /* header + 3 rows */
    ASSERT_HAS(o, "\"data/poisson3d27_6.mtx.gz\",216");
    free(o.text);
}
END_TEST

START_TEST(output_writes_the_solution)
{
    char out[256], args[512];
    tu_tmpname(out, sizeof out, ".mtx");
    snprintf(args, sizeof args, "-e cpu data/poisson3d_8.mtx --rhs ax1 --tol 1e-10 --output %s", out);
    cmd_out o = run(args);
    assert_exit(o, 0);
    double *x = NULL;
    int64_t n = 0;
    gs_error err = {0};
    ck_assert_int_eq(gs_mm_read_vector(out, &x, &n, &err), GS_OK);
    ck_assert_int_eq(n, 512);
    for (int64_t i = 0; i < n; i++) ck_assert_double_eq_tol(x[i], 1.0, 1e-7); /* b = A 1 */
    free(x);
    free(o.text);
    remove(out);
}
END_TEST

START_TEST(rhs_and_x0_from_files)
{
    /* x0 = the exact solution of b = A 1 gives convergence in 0 iterations. */
    char xf[256], args[700];
    tu_tmpname(xf, sizeof xf, ".mtx");
    double ones[512];
    for (int i = 0; i < 512; i++) ones[i] = 1.0;
    gs_error err = {0};
    ck_assert_int_eq(gs_mm_write_vector(xf, ones, 512, NULL, &err), GS_OK);
    snprintf(args, sizeof args, "-e cpu data/poisson3d_8.mtx --rhs ax1 --x0 %s", xf);
    cmd_out o = run(args);
    assert_exit(o, 0);
    ck_assert_int_eq(table_iterations(o.text), 0);
    free(o.text);
    snprintf(args, sizeof args, "-e cpu data/convdiff3d_8.mtx --rhs %s", xf);
    o = run(args);
    assert_exit(o, 0);
    free(o.text);
    remove(xf);
}
END_TEST

START_TEST(repeat_reports_min_and_median)
{
    cmd_out o = run("-e cpu --generate poisson3d:5 --repeat 3");
    assert_exit(o, 0);
    ASSERT_HAS(o, "median");
    ASSERT_HAS(o, "(3 runs)");
    free(o.text);
}
END_TEST

START_TEST(help_lists_every_option_with_default)
{
    cmd_out o = run("--help");
    assert_exit(o, 0);
    const char *opts[] = {"--precond", "--method", "--engine", "--tol", "--maxit", "--restart",
                          "--idr-s", "--rhs", "--x0", "--output", "--format", "--repeat",
                          "--generate", "--verbose", "--quiet", "[default: 1e-8]",
                          "poisson3d", "convdiff3d", "jacobi", "bicgstab", "idr", "gmres"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) ASSERT_HAS(o, opts[i]);
    free(o.text);
}
END_TEST

START_TEST(verbose_prints_residual_history_and_quiet_prints_nothing)
{
    cmd_out v = run("-e cpu --generate poisson3d:5 --verbose");
    assert_exit(v, 0);
    ASSERT_HAS(v, "iteration      1  relative residual");
    free(v.text);
    cmd_out q = run("-e cpu --generate poisson3d:5 --quiet");
    assert_exit(q, 0);
    ck_assert_str_eq(q.text, "");
    free(q.text);
}
END_TEST

typedef struct bad_case {
    const char *args;
    int code;
    const char *fragment;
} bad_case;

static const bad_case usage_cases[] = {
    {"--bogus data/poisson3d_8.mtx", 1, "unknown option '--bogus'"},
    {"--tol abc data/poisson3d_8.mtx", 1, "--tol"},
    {"--tol -1 data/poisson3d_8.mtx", 1, "--tol"},
    {"--maxit 0 data/poisson3d_8.mtx", 1, "--maxit"},
    {"-p nosuch data/poisson3d_8.mtx", 1, "unknown preconditioner 'nosuch'"},
    {"-m nosuch data/poisson3d_8.mtx", 1, "unknown method 'nosuch'"},
    {"--format xml data/poisson3d_8.mtx", 1, "--format"},
    {"--engine gpu data/poisson3d_8.mtx", 1, "--engine"},
    {"", 1, "no matrix given"},
    {"--generate poisson3d:0", 1, "poisson3d:0"},
    {"--generate nosuch:4", 1, "nosuch"},
    {"/nonexistent/a.mtx", 1, "/nonexistent/a.mtx"},
    {"--rhs /nonexistent/b.mtx data/poisson3d_8.mtx", 1, "/nonexistent/b.mtx"},
    {"--tol", 1, "needs a value"},
};

START_TEST(bad_usage_exits_1_with_a_message)
{
    const bad_case *c = &usage_cases[_i];
    char args[512];
    snprintf(args, sizeof args, "-e cpu %s", c->args);
    cmd_out o = run(args);
    assert_exit(o, c->code);
    ASSERT_HAS(o, c->fragment);
    free(o.text);
}
END_TEST

/* Bad files: each must name the file (and the line where one exists). */
static const struct {
    const char *text;
    const char *fragment;
    int code;
} bad_files[] = {
    {"%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 1\n", ":4", 1}, /* truncated */
    {"%%MatrixMarket matrix blob real general\n2 2 1\n1 1 1\n", ":1", 1},              /* header */
    {"%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n", ":3", 1},        /* range */
    {"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 nan\n2 2 1\n", ":3", 1},
    {"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 inf\n2 2 1\n", ":3", 1},
    {"%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1\n2 2 1\n", "not square", 1},
    {"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "complex", 1},
    /* empty row 2: jacobi finds no diagonal there */
    {"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n3 3 1\n", "row 2", 1},
    /* zero diagonal */
    {"%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 0\n2 1 1\n2 2 4\n", "row 1", 1},
    /* symmetric indefinite: cg reports a breakdown (exit 2) */
    {"%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 1\n2 2 -1\n", "breakdown", 2},
};

START_TEST(bad_input_files)
{
    char path[256], args[512];
    tu_tmpname(path, sizeof path, ".mtx");
    tu_write_text(path, bad_files[_i].text);
    snprintf(args, sizeof args, "-e cpu -p jacobi -m cg %s", path);
    cmd_out o = run(args);
    assert_exit(o, bad_files[_i].code);
    ASSERT_HAS(o, bad_files[_i].fragment);
    if (bad_files[_i].code == 1) ASSERT_HAS(o, path);
    free(o.text);
    remove(path);
}
END_TEST

START_TEST(one_bad_file_does_not_stop_the_batch)
{
    cmd_out o = run("-e cpu --format csv /nonexistent/a.mtx data/poisson3d_8.mtx");
    assert_exit(o, 1);
    ASSERT_HAS(o, "/nonexistent/a.mtx");
    ASSERT_HAS(o, "\"data/poisson3d_8.mtx\",512");
    free(o.text);
}
END_TEST

START_TEST(cuda_engine_without_a_device_is_a_runtime_failure)
{
    if (getenv("GS_HAVE_GPU")) return; /* on a GPU machine this path is the normal one */
    cmd_out o = run("-e cuda data/poisson3d_8.mtx");
    ck_assert_msg(o.code == 3 || o.code == 1, "exit %d:\n%s", o.code, o.text);
    ck_assert(strlen(o.text) > 0);
    free(o.text);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, generated_problem_solves_and_reports);
    tcase_add_test(tc, not_converged_exits_2);
    tcase_add_test(tc, csv_and_json_parse_and_match_the_table);
    tcase_add_test(tc, several_files_one_row_each);
    tcase_add_test(tc, output_writes_the_solution);
    tcase_add_test(tc, rhs_and_x0_from_files);
    tcase_add_test(tc, repeat_reports_min_and_median);
    tcase_add_test(tc, help_lists_every_option_with_default);
    tcase_add_test(tc, verbose_prints_residual_history_and_quiet_prints_nothing);
    tcase_add_loop_test(tc, bad_usage_exits_1_with_a_message, 0,
                        sizeof usage_cases / sizeof usage_cases[0]);
    tcase_add_loop_test(tc, bad_input_files, 0, sizeof bad_files / sizeof bad_files[0]);
    tcase_add_test(tc, one_bad_file_does_not_stop_the_batch);
    tcase_add_test(tc, cuda_engine_without_a_device_is_a_runtime_failure);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(cli_suite()); }
