/* check_cli.c - the program as users run it: exit codes, the report in its
 * three formats (CSV and JSON must parse and agree with the table), options,
 * and bad input, which must give a message naming the culprit and exit 1. */
#include <ctype.h>
#include <sys/wait.h>

#include "gen.h"
#include "krylov.h"
#include "mmio.h"
#include "options.h"
#include "precond.h"
#include "cliutil.h"
#include "testutil.h"

START_TEST(generated_problem_solves_and_reports)
{
    tu_cmd_out o = tu_run("-e cpu --generate poisson3d:6 -p jacobi -m cg");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "Tp  setup");
    TU_ASSERT_HAS(o, "Ts  solve (");
    TU_ASSERT_HAS(o, "Tt  total");
    TU_ASSERT_HAS(o, "converged  yes");
    TU_ASSERT_HAS(o, "transfer A");
    TU_ASSERT_HAS(o, "n = 216");
    free(o.text);
}
END_TEST

/* One small instance of each stress problem (src/io/gen_stress.c), solved end
 * to end on the CPU engine: the size and name reach the report. */
static const char *const stress_runs[][2] = {
    {"elast3d:4", "elast3d:4x4x4 (generated)  n = 192 "},
    {"bordered:8x8x1", "bordered:8x8x1 (generated)  n = 72 "},
    {"hub:30", "hub:30x30 (generated)  n = 901 "},
    {"powerlaw:2000", "powerlaw:2000 (generated)  n = 2000 "},
    {"chain:500", "chain:500 (generated)  n = 500 "},
};

START_TEST(stress_problem_solves_on_the_cpu_engine)
{
    char args[128];
    snprintf(args, sizeof args, "-e cpu --generate %s -p jacobi", stress_runs[_i][0]);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, stress_runs[_i][1]);
    TU_ASSERT_HAS(o, "converged  yes");
    free(o.text);
}
END_TEST

START_TEST(not_converged_exits_2)
{
    tu_cmd_out o = tu_run("-e cpu --generate poisson3d:10 --maxit 2");
    tu_assert_exit(o, 2);
    TU_ASSERT_HAS(o, "iteration limit");
    free(o.text);
}
END_TEST


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
    tu_cmd_out t = tu_run(args);
    tu_assert_exit(t, 0);
    snprintf(buf, sizeof buf, "%s --format csv", args);
    tu_cmd_out c = tu_run(buf);
    tu_assert_exit(c, 0);
    snprintf(buf, sizeof buf, "%s --format json", args);
    tu_cmd_out j = tu_run(buf);
    tu_assert_exit(j, 0);

    char *nl = strchr(c.text, '\n');
    ck_assert_ptr_nonnull(nl);
    *nl = '\0';
    enum { MAX_FIELDS = 160 }; /* above the report's field count, which the merges grew past 64 */
    char *hf[MAX_FIELDS], *rf[MAX_FIELDS];
    int nh = tu_csv_split(c.text, hf, MAX_FIELDS), nr = tu_csv_split(nl + 1, rf, MAX_FIELDS);
    ck_assert_int_eq(nh, nr);
    ck_assert_msg(nh < MAX_FIELDS, "%d csv fields: raise MAX_FIELDS", nh);
    static char keys[MAX_FIELDS][64], vals[MAX_FIELDS][1100];
    int nj = json_parse(j.text, keys, vals, MAX_FIELDS);
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
    tu_cmd_out o = tu_run("-e cpu --format csv data/poisson3d_8.mtx data/convdiff3d_8.mtx "
                    "data/poisson3d27_6.mtx.gz");
    tu_assert_exit(o, 0);
    int lines = 0;
    for (const char *p = o.text; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 4); /* header + 3 rows */
    TU_ASSERT_HAS(o, "\"data/poisson3d27_6.mtx.gz\",216");
    free(o.text);
}
END_TEST

START_TEST(output_writes_the_solution)
{
    char out[256], args[512];
    tu_tmpname(out, sizeof out, ".mtx");
    snprintf(args, sizeof args, "-e cpu data/poisson3d_8.mtx --rhs ax1 --tol 1e-10 --output %s", out);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 0);
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
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 0);
    ck_assert_int_eq(table_iterations(o.text), 0);
    free(o.text);
    snprintf(args, sizeof args, "-e cpu data/convdiff3d_8.mtx --rhs %s", xf);
    o = tu_run(args);
    tu_assert_exit(o, 0);
    free(o.text);
    remove(xf);
}
END_TEST

START_TEST(repeat_reports_min_and_median)
{
    tu_cmd_out o = tu_run("-e cpu --generate poisson3d:5 --repeat 3");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "median");
    TU_ASSERT_HAS(o, "(3 runs)");
    free(o.text);
}
END_TEST

START_TEST(help_lists_every_option_with_default)
{
    tu_cmd_out o = tu_run("--help");
    tu_assert_exit(o, 0);
    const char *opts[] = {"--precond", "--method", "--engine", "--tol", "--maxit", "--restart",
                          "--idr-s", "--rhs", "--x0", "--output", "--format", "--repeat",
                          "--generate", "--verbose", "--quiet", "[default: 1e-8]",
                          "--loop PATH", "[one of auto|host|device|fused; default: auto]",
                          "--spmv-long HOW", "[one of auto|split|merge|off; default: auto]",
                          "--overlap WHEN", "[one of auto|on|off; default: auto]",
                          "poisson3d", "convdiff3d", "jacobi", "bicgstab", "idr", "gmres"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) TU_ASSERT_HAS(o, opts[i]);
    free(o.text);
}
END_TEST

START_TEST(verbose_prints_residual_history_and_quiet_prints_nothing)
{
    tu_cmd_out v = tu_run("-e cpu --generate poisson3d:5 --verbose");
    tu_assert_exit(v, 0);
    TU_ASSERT_HAS(v, "iteration      1  relative residual");
    free(v.text);
    tu_cmd_out q = tu_run("-e cpu --generate poisson3d:5 --quiet");
    tu_assert_exit(q, 0);
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
    /* the path options: unknown values name the option and its choices */
    {"--loop bogus data/poisson3d_8.mtx", 1, "--loop: 'bogus' is not one of auto|host|device|fused"},
    {"--loop=Host data/poisson3d_8.mtx", 1, "--loop: 'Host' is not one of"},
    {"--spmv-long on data/poisson3d_8.mtx", 1, "--spmv-long: 'on' is not one of auto|split|merge|off"},
    {"--overlap yes data/poisson3d_8.mtx", 1, "--overlap: 'yes' is not one of auto|on|off"},
    {"--loop", 1, "needs a value"},
    /* ... and a path the cpu engine cannot run is a usage error, before any input */
    {"--loop fused /nonexistent/a.mtx", 1, "--loop fused: the cpu engine runs the host loop only"},
    {"--loop device data/poisson3d_8.mtx", 1, "--loop device: the cpu engine runs the host loop only"},
    {"--spmv-long merge data/poisson3d_8.mtx", 1, "--spmv-long merge: only the cuda engine"},
    {"--overlap off data/poisson3d_8.mtx", 1, "--overlap off: the cpu engine's MPI exchange always overlaps"},
};

START_TEST(bad_usage_exits_1_with_a_message)
{
    const bad_case *c = &usage_cases[_i];
    char args[512];
    snprintf(args, sizeof args, "-e cpu %s", c->args);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, c->code);
    TU_ASSERT_HAS(o, c->fragment);
    free(o.text);
}
END_TEST

/* --loop reaches the engine, and the report names the path that ran and
 * the one asked: the cpu engine runs the host loop, asked (--loop host) or
 * not (auto), in the table and in CSV; --engine both applies --loop to the
 * cuda engine only (its cpu run asks nothing). */
START_TEST(loop_option_reaches_the_engine_and_the_report)
{
    char loop[16], asked[16];
    tu_cmd_out o = tu_run("-e cpu --loop host --generate poisson3d:6 --format csv");
    tu_assert_exit(o, 0);
    ck_assert(tu_csv_field(o.text, 0, "loop", loop, sizeof loop));
    ck_assert(tu_csv_field(o.text, 0, "loop_asked", asked, sizeof asked));
    ck_assert_str_eq(loop, "host");
    ck_assert_str_eq(asked, "host");
    free(o.text);
    o = tu_run("-e cpu --generate poisson3d:6 --format json");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "\"loop\": \"host\"");
    TU_ASSERT_HAS(o, "\"loop_asked\": \"auto\"");
    free(o.text);
    o = tu_run("-e cpu --loop host --generate poisson3d:6");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "\nloop       host (--loop host)\n");
    free(o.text);
    o = tu_run("-e cpu --generate poisson3d:6");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "\nloop       host (auto)\n");
    free(o.text);
}
END_TEST

/* A forced path that the command line shows cannot run is refused before
 * any input is read (exit 1, the message names the option): the fused
 * kernel runs cg and bicgstab only, --no-graph leaves the host loop only
 * (where this build has the cuda engine; without it --engine cuda itself
 * is refused), and --engine auto that finds no GPU refuses device and fused
 * (the cpu engine's loop is the host's). */
START_TEST(a_forced_path_that_cannot_run_is_a_usage_error)
{
    static const struct { const char *args, *cuda_msg; } cases[] = {
        {"-e cuda -m gmres --loop fused", "--loop fused: the fused kernel runs cg, bicgstab only, not -m gmres"},
        {"-e both -m idr --loop fused", "--loop fused: the fused kernel runs cg, bicgstab only, not -m idr"},
        {"-e cuda --no-graph --loop device", "--loop device: --no-graph leaves the host loop only"},
        {"-e cuda --no-graph --loop fused", "--loop fused: --no-graph leaves the host loop only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s /nonexistent/a.mtx", cases[i].args);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 1);
        TU_ASSERT_HAS(o, GS_HAVE_CUDA ? cases[i].cuda_msg : "this build has no CUDA engine");
        TU_ASSERT_LACKS(o, "/nonexistent/a.mtx");
        free(o.text);
    }
    if (GS_HAVE_CUDA && !getenv("GS_HAVE_GPU")) { /* --engine auto finds no GPU here */
        tu_cmd_out o = tu_run("--loop fused --generate poisson3d:6");
        tu_assert_exit(o, 1);
        TU_ASSERT_HAS(o, "--loop fused: no CUDA device found, and the cpu engine runs the host "
                         "loop only");
        free(o.text);
        o = tu_run("--spmv-long split --generate poisson3d:6");
        tu_assert_exit(o, 1);
        TU_ASSERT_HAS(o, "--spmv-long split: no CUDA device found");
        free(o.text);
    }
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
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, bad_files[_i].code);
    TU_ASSERT_HAS(o, bad_files[_i].fragment);
    if (bad_files[_i].code == 1) TU_ASSERT_HAS(o, path);
    free(o.text);
    remove(path);
}
END_TEST

START_TEST(one_bad_file_does_not_stop_the_batch)
{
    tu_cmd_out o = tu_run("-e cpu --format csv /nonexistent/a.mtx data/poisson3d_8.mtx");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "/nonexistent/a.mtx");
    TU_ASSERT_HAS(o, "\"data/poisson3d_8.mtx\",512");
    free(o.text);
}
END_TEST

START_TEST(cuda_engine_without_a_device_is_a_runtime_failure)
{
    if (!GS_HAVE_CUDA) return; /* a CPU-only build refuses at parse time (next test) */
    if (getenv("GS_HAVE_GPU")) return; /* on a GPU machine this path is the normal one */
    tu_cmd_out o = tu_run("-e cuda data/poisson3d_8.mtx");
    ck_assert_msg(o.code == 3 || o.code == 1, "exit %d:\n%s", o.code, o.text);
    ck_assert(strlen(o.text) > 0);
    free(o.text);
}
END_TEST

/* --engine both prints Tp by stage for both engines under the speedup table:
 * every stage of either engine has its row (FSAI's postfilter runs on both). */
START_TEST(engine_both_prints_tp_by_stage)
{
    if (!getenv("GS_HAVE_GPU")) return; /* needs a GPU */
    tu_cmd_out o = tu_run("-e both -p fsai data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    const char *table = strstr(o.text, "Tp by stage");
    ck_assert_msg(table != NULL, "%s", o.text);
    double cpu, gpu;
    const char *row = strstr(table, "  transfer A ");
    ck_assert_msg(row && sscanf(row, " transfer A %lf %lf", &cpu, &gpu) == 2, "%s", table);
    row = strstr(table, "  postfilter ");
    ck_assert_msg(row && sscanf(row, " postfilter %lf %lf", &cpu, &gpu) == 2, "%s", table);
    ck_assert(cpu >= 0 && gpu >= 0);
    free(o.text);
}
END_TEST

/* A CPU-only build has no CUDA engine: asking for one is bad usage (exit 1),
 * said before any matrix is read, not a runtime failure (exit 3). */
START_TEST(cuda_engine_on_a_cpu_only_build_is_a_usage_error)
{
    if (GS_HAVE_CUDA) return;
    const char *engines[] = {"cuda", "both"};
    for (int i = 0; i < 2; i++) {
        char args[256];
        snprintf(args, sizeof args, "-e %s data/poisson3d_8.mtx", engines[i]);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 1);
        TU_ASSERT_HAS(o, "this build has no CUDA engine");
        TU_ASSERT_HAS(o, "--engine");
        ck_assert_msg(!strstr(o.text, "matrix "), "a matrix was read:\n%s", o.text);
        free(o.text);
    }
}
END_TEST

/* ---- the parser in-process: argv from a space-separated line ---- */

typedef struct parsed {
    char buf[1024];
    char *argv[64];
    gs_cli cli;
    gs_error err;
    int status;
} parsed;

static parsed *parse_line(const char *line)
{
    parsed *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    snprintf(p->buf, sizeof p->buf, "gpusolve %s", line);
    int argc = 0;
    for (char *t = strtok(p->buf, " "); t && argc < 63; t = strtok(NULL, " ")) p->argv[argc++] = t;
    p->status = gs_cli_parse(argc, p->argv, &p->cli, &p->err);
    return p;
}

static void parsed_free(parsed *p)
{
    gs_cli_free(&p->cli);
    free(p);
}

/* line must be refused as bad usage with a message holding fragment. */
static void expect_parse_error(const char *line, const char *fragment)
{
    parsed *p = parse_line(line);
    ck_assert_msg(p->status == GS_ERR_USAGE, "'%s': status %d (%s)", line, p->status, p->err.msg);
    ck_assert_msg(strstr(p->err.msg, fragment), "'%s': '%s' lacks '%s'", line, p->err.msg,
                  fragment);
    parsed_free(p);
}

static void expect_parse_ok(const char *line)
{
    parsed *p = parse_line(line);
    ck_assert_msg(p->status == GS_OK, "'%s' refused: %s", line, p->err.msg);
    parsed_free(p);
}

/* A bad parameter value is refused by the parser, so a problem that would
 * take minutes and gigabytes to generate (poisson3d:400: 64M rows) is never
 * built: the program prints the parser's one line and nothing else (the
 * run path would name the problem, "poisson3d:400x400x400: fsai: ..."). */
START_TEST(bad_parameter_fails_before_generating)
{
    const char *args = "-e cpu -p fsai --tau 2 --generate poisson3d:400";
    expect_parse_error(args, "--tau");
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "gpusolve: --tau");
    ck_assert_msg(strchr(o.text, '\n') == o.text + strlen(o.text) - 1, "more than one line:\n%s",
                  o.text);
    ck_assert_msg(!strstr(o.text, "poisson3d:400x"), "the problem was built:\n%s", o.text);
    free(o.text);
}
END_TEST

START_TEST(bad_parameter_with_two_files_is_reported_once)
{
    tu_cmd_out o = tu_run("-e cpu -p fsai --k 0 data/poisson3d_8.mtx data/poisson3d27_6.mtx.gz");
    tu_assert_exit(o, 1);
    int count = 0;
    for (const char *p = o.text; (p = strstr(p, "--k")); p++) count++;
    ck_assert_msg(count == 1, "--k named %d times:\n%s", count, o.text);
    ck_assert_msg(!strstr(o.text, "data/poisson3d"), "a file was read:\n%s", o.text);
    free(o.text);
}
END_TEST

/* Text of a value just outside d's range on the high (side 1) or low side. */
static void value_outside(const gs_param_decl *d, int side, char *buf, size_t len)
{
    const double v = side ? d->hi : d->lo;
    const double step = d->type == GS_PARAM_INT ? 1 : fmax(1, fabs(v));
    snprintf(buf, len, "%.17g", side ? v + step : v - step);
}

/* Every declared parameter of every registered type: values outside the
 * range or not of the type are refused at parse time naming the option;
 * the range's ends and every choice are accepted. */
START_TEST(every_parameter_is_checked_against_its_declaration)
{
    int checked = 0;
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        for (const gs_param_decl *d = t->params; d && d->name; d++, checked++) {
            char line[512], option[80], bad[64];
            snprintf(option, sizeof option, "--%s", d->name);
            if (d->type == GS_PARAM_CHOICE) {
                snprintf(line, sizeof line, "-p %s --%s nosuch a.mtx", t->name, d->name);
                expect_parse_error(line, option);
                char choices[256];
                snprintf(choices, sizeof choices, "%s", d->choices);
                for (char *c = strtok(choices, "|"); c; c = strtok(NULL, "|")) {
                    snprintf(line, sizeof line, "-p %s --%s %s a.mtx", t->name, d->name, c);
                    expect_parse_ok(line);
                }
                continue;
            }
            for (int side = 0; side < 2; side++) {
                value_outside(d, side, bad, sizeof bad);
                snprintf(line, sizeof line, "-p %s --%s %s a.mtx", t->name, d->name, bad);
                expect_parse_error(line, option);
                snprintf(line, sizeof line, "-p %s --%s %.17g a.mtx", t->name, d->name,
                         side ? d->hi : d->lo);
                expect_parse_ok(line);
            }
            snprintf(line, sizeof line, "-p %s --%s abc a.mtx", t->name, d->name);
            expect_parse_error(line, option);
            if (d->type == GS_PARAM_INT) {
                snprintf(line, sizeof line, "-p %s --%s %g.5 a.mtx", t->name, d->name, d->lo);
                expect_parse_error(line, option);
            }
        }
    }
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* The program end to end, one parameter of each type: exit 1 naming it. */
START_TEST(out_of_range_parameter_of_each_type_exits_1)
{
    static const struct {
        const char *args, *fragment;
    } cases[] = {
        {"-p fsai --delta 1.5", "--delta"},                 /* double */
        {"-p isai --isai-power 9", "--isai-power"},         /* integer */
        {"-p spai --precond-precision half", "--precond-precision"}, /* choice */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "-e cpu %s data/poisson3d_8.mtx", cases[i].args);
        tu_cmd_out o = tu_run(args);
        tu_assert_exit(o, 1);
        TU_ASSERT_HAS(o, cases[i].fragment);
        ck_assert_msg(!strstr(o.text, "data/poisson3d_8.mtx"), "the file was read:\n%s", o.text);
        free(o.text);
    }
}
END_TEST

/* Each declared default passes its own declaration; each paper method and
 * each method named by an option is registered. */
START_TEST(declarations_are_consistent)
{
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        for (const gs_param_decl *d = t->params; d && d->name; d++) {
            gs_param_value v;
            gs_error err = {0};
            ck_assert_msg(gs_param_parse(d, d->default_value, &v, &err) == GS_OK,
                          "%s --%s default: %s", t->name, d->name, err.msg);
            ck_assert_msg(d->type == GS_PARAM_CHOICE || d->lo <= d->hi, "%s --%s", t->name,
                          d->name);
        }
        if (t->paper_method)
            ck_assert_msg(gs_method_find(t->paper_method), "%s: paper method '%s'", t->name,
                          t->paper_method);
        ck_assert_int_eq(gs_pc_check_params(t, NULL, NULL), GS_OK);
    }
    for (int k = 0; k < gs_cli_option_count(); k++) {
        const gs_option *o = gs_cli_option_at(k);
        if (o->read_by && strcmp(o->read_by, "*") != 0)
            ck_assert_msg(gs_method_find(o->read_by), "--%s read by '%s'", o->name, o->read_by);
    }
}
END_TEST

/* Rules between options, and the --generate spec, at parse time. */
START_TEST(cross_option_rules_and_generate_spec_at_parse_time)
{
    expect_parse_error("-p isai --trisolve exact --isai-sweeps 2 a.mtx",
                       "--isai-sweeps 2 has no effect with --trisolve exact");
    expect_parse_error("-p isai --trisolve exact --isai-power 3 a.mtx", "--isai-power 3");
    expect_parse_ok("-p isai --trisolve exact a.mtx");
    expect_parse_error("-p fsai --omega 0.5 a.mtx", "--omega is not a parameter of");
    expect_parse_error("--output x.mtx a.mtx b.mtx", "--output needs a single matrix");
    static const char *bad_specs[] = {"nosuch:4", "poisson3d:0", "poisson3d:4x4", "poisson3d",
                                      "poisson3d:2000x2000x1000", "aniso3d:-3", "hub:0",
                                      "chain:", "powerlaw:3x3", "elast3d:2000"};
    for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++) {
        char line[128];
        snprintf(line, sizeof line, "--generate %s", bad_specs[i]);
        expect_parse_error(line, "--generate");
        gs_error err = {0};
        ck_assert_int_eq(gs_generate_check(bad_specs[i], &err), GS_ERR_USAGE);
    }
    gs_error err = {0};
    ck_assert_int_eq(gs_generate_check("convdiff3d:3x4x5", &err), GS_OK);
    expect_parse_ok("--generate poisson3d27:400");
    expect_parse_ok("--generate powerlaw:270000");
}
END_TEST

START_TEST(time_limit_option)
{
    parsed *p = parse_line("a.mtx");
    ck_assert_int_eq(p->status, GS_OK);
    ck_assert_double_eq(p->cli.time_limit, 0.0);
    parsed_free(p);
    p = parse_line("--time-limit 2.5 a.mtx");
    ck_assert_int_eq(p->status, GS_OK);
    ck_assert_double_eq(p->cli.time_limit, 2.5);
    parsed_free(p);
    expect_parse_ok("--time-limit 0 a.mtx");
    expect_parse_ok("--time-limit 1e9 a.mtx");
    expect_parse_error("--time-limit -1 a.mtx", "--time-limit");
    expect_parse_error("--time-limit 2e9 a.mtx", "--time-limit");
    expect_parse_error("--time-limit soon a.mtx", "--time-limit");
}
END_TEST

/* The --help lines of the parameters carry their types and ranges. */
START_TEST(help_prints_parameter_types_and_ranges)
{
    tu_cmd_out o = tu_run("--help");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "--time-limit S");
    TU_ASSERT_HAS(o, "--list");
    TU_ASSERT_HAS(o, "isai: idr");
    for (int i = 0; i < gs_pc_type_count(); i++)
        for (const gs_param_decl *d = gs_pc_type_at(i)->params; d && d->name; d++) {
            char range[160], line[256];
            gs_param_describe(d, range, sizeof range);
            snprintf(line, sizeof line, "--%s %s", d->name,
                     d->type == GS_PARAM_CHOICE ? d->choices : d->type == GS_PARAM_INT ? "N" : "X");
            TU_ASSERT_HAS(o, line);
            snprintf(line, sizeof line, "%s%sdefault: %s]", d->type == GS_PARAM_CHOICE ? "" : range,
                     d->type == GS_PARAM_CHOICE ? "" : ", ", d->default_value);
            TU_ASSERT_HAS(o, line);
        }
    free(o.text);
}
END_TEST

/* gs_cli_print_list into a string. */
static char *list_text(gs_format f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    gs_cli_print_list(out, f);
    fclose(out);
    return text;
}

START_TEST(list_needs_no_matrix)
{
    parsed *p = parse_line("--list --format json");
    ck_assert_msg(p->status == GS_OK, "%s", p->err.msg);
    ck_assert_int_eq(p->cli.list, 1);
    ck_assert_int_eq(p->cli.format, GS_FORMAT_JSON);
    parsed_free(p);
}
END_TEST

/* Index of field name in the CSV header, or fail. */
static int csv_column(char **head, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(head[i], name) == 0) return i;
    ck_abort_msg("no column '%s' in --list's CSV", name);
    return -1;
}

/* The CSV row for (kind, name, option), or NULL. */
static char **csv_find(char *rows[][16], int nrows, const int col[3], const char *kind,
                       const char *name, const char *option)
{
    for (int r = 0; r < nrows; r++)
        if (!strcmp(rows[r][col[0]], kind) && !strcmp(rows[r][col[1]], name) &&
            !strcmp(rows[r][col[2]], option))
            return rows[r];
    return NULL;
}

/* --list --format csv: a row for every parameter of every registered type,
 * with its declared type, range and default, and the engines from the
 * registry's setups; a row for every option every method reads. */
START_TEST(list_csv_covers_every_registry_entry)
{
    char *text = list_text(GS_FORMAT_CSV);
    static char *rows[256][16];
    char *head[16];
    char *line = strtok(text, "\n");
    ck_assert_ptr_nonnull(line);
    const int nh = tu_csv_split(line, head, 16);
    int nrows = 0;
    while ((line = strtok(NULL, "\n")) && nrows < 256) {
        ck_assert_int_eq(tu_csv_split(line, rows[nrows], 16), nh);
        nrows++;
    }
    const int col[3] = {csv_column(head, nh, "kind"), csv_column(head, nh, "name"),
                        csv_column(head, nh, "option")};
    const int c_type = csv_column(head, nh, "type"), c_def = csv_column(head, nh, "default");
    const int c_lo = csv_column(head, nh, "lo"), c_hi = csv_column(head, nh, "hi");
    const int c_eng = csv_column(head, nh, "engines"), c_ch = csv_column(head, nh, "choices");
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        char **r = NULL;
        for (const gs_param_decl *d = t->params; d && d->name; d++) {
            char option[80];
            snprintf(option, sizeof option, "--%s", d->name);
            r = csv_find(rows, nrows, col, "precond", t->name, option);
            ck_assert_msg(r, "--list lacks %s %s", t->name, option);
            ck_assert_str_eq(r[c_def], d->default_value);
            static const char *types[] = {"double", "integer", "choice"};
            ck_assert_str_eq(r[c_type], types[d->type]);
            if (d->type == GS_PARAM_CHOICE) {
                ck_assert_str_eq(r[c_ch], d->choices);
            } else {
                ck_assert_double_eq(strtod(r[c_lo], NULL), d->lo);
                ck_assert_double_eq(strtod(r[c_hi], NULL), d->hi);
            }
        }
        if (!t->params || !t->params->name)
            r = csv_find(rows, nrows, col, "precond", t->name, "");
        ck_assert_msg(r, "--list lacks %s", t->name);
        const char *want = !GS_HAVE_CUDA                ? "cpu"
                           : t->setup[GS_ENGINE_CUDA] ? "cpu, cuda"
                                                       : "cpu, cuda via host setup";
        ck_assert_str_eq(r[c_eng], want);
    }
    for (int i = 0; i < gs_method_type_count(); i++) {
        const gs_method_type *m = gs_method_type_at(i);
        ck_assert_msg(csv_find(rows, nrows, col, "method", m->name, "--tol"), "%s --tol", m->name);
        ck_assert_msg(csv_find(rows, nrows, col, "method", m->name, "--maxit"), "%s", m->name);
        const int is_gmres = strcmp(m->name, "gmres") == 0;
        ck_assert_int_eq(csv_find(rows, nrows, col, "method", m->name, "--restart") != NULL,
                         is_gmres);
    }
    /* the --loop paths: host on every engine, device and fused on cuda only;
     * fused names the methods the registry marks */
    static const char *paths[] = {"host", "device", "fused"};
    for (int i = 0; i < 3; i++) {
        char **r = csv_find(rows, nrows, col, "loop", paths[i], "--loop");
        ck_assert_msg(r, "--list lacks the loop path %s", paths[i]);
        ck_assert_str_eq(r[c_ch], "auto|host|device|fused");
        ck_assert_str_eq(r[c_def], "auto");
        ck_assert_int_eq(strstr(r[c_eng], "cpu") != NULL, i == 0);
    }
    char **fused = csv_find(rows, nrows, col, "loop", "fused", "--loop");
    ck_assert_ptr_nonnull(strstr(fused[csv_column(head, nh, "help")], "cg, bicgstab with"));
    free(text);
}
END_TEST

/* --format json: one flat object per line, with the CSV's fields; the table
 * names every type and every parameter. */
START_TEST(list_json_and_table_forms)
{
    char *csv = list_text(GS_FORMAT_CSV), *json = list_text(GS_FORMAT_JSON);
    int csv_lines = 0, json_lines = 0, nh = 0;
    for (const char *p = csv; *p; p++) csv_lines += *p == '\n';
    char *hline = strtok(csv, "\n"), *head[16];
    nh = tu_csv_split(hline, head, 16);
    static char keys[64][64], vals[64][1100];
    for (char *line = strtok(json, "\n"); line; line = strtok(NULL, "\n"), json_lines++) {
        const int n = json_parse(line, keys, vals, 64);
        ck_assert_msg(n == nh, "%d fields in: %s", n, line);
        for (int i = 0; i < n; i++) ck_assert_str_eq(keys[i], head[i]);
    }
    ck_assert_int_eq(json_lines, csv_lines - 1);
    free(csv);
    free(json);

    char *table = list_text(GS_FORMAT_TABLE);
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        ck_assert_msg(strstr(table, t->name), "table lacks %s", t->name);
        for (const gs_param_decl *d = t->params; d && d->name; d++) {
            char option[80];
            snprintf(option, sizeof option, "--%s ", d->name);
            ck_assert_msg(strstr(table, option), "table lacks %s", option);
        }
    }
    for (int i = 0; i < gs_method_type_count(); i++)
        ck_assert_msg(strstr(table, gs_method_type_at(i)->name), "table lacks a method");
    free(table);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, generated_problem_solves_and_reports);
    tcase_add_loop_test(tc, stress_problem_solves_on_the_cpu_engine, 0,
                        (int)(sizeof stress_runs / sizeof stress_runs[0]));
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
    tcase_add_test(tc, loop_option_reaches_the_engine_and_the_report);
    tcase_add_test(tc, a_forced_path_that_cannot_run_is_a_usage_error);
    tcase_add_loop_test(tc, bad_input_files, 0, sizeof bad_files / sizeof bad_files[0]);
    tcase_add_test(tc, one_bad_file_does_not_stop_the_batch);
    tcase_add_test(tc, cuda_engine_without_a_device_is_a_runtime_failure);
    tcase_add_test(tc, cuda_engine_on_a_cpu_only_build_is_a_usage_error);
    tcase_add_test(tc, engine_both_prints_tp_by_stage);
    tcase_add_test(tc, bad_parameter_fails_before_generating);
    tcase_add_test(tc, bad_parameter_with_two_files_is_reported_once);
    tcase_add_test(tc, every_parameter_is_checked_against_its_declaration);
    tcase_add_test(tc, out_of_range_parameter_of_each_type_exits_1);
    tcase_add_test(tc, declarations_are_consistent);
    tcase_add_test(tc, cross_option_rules_and_generate_spec_at_parse_time);
    tcase_add_test(tc, time_limit_option);
    tcase_add_test(tc, help_prints_parameter_types_and_ranges);
    tcase_add_test(tc, list_needs_no_matrix);
    tcase_add_test(tc, list_csv_covers_every_registry_entry);
    tcase_add_test(tc, list_json_and_table_forms);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(cli_suite()); }
