/* main.c - gpusolve's entry point: parse the command line, then for each
 * problem and each engine set up, solve and report. The only place that
 * prints errors and chooses the exit status (DESIGN.md, "Command line"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "dist.h"
#include "engine.h"
#include "mmio.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "run.h"

#define GS_VERSION "0.1.0"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_NOT_CONVERGED = 2, EXIT_RUNTIME = 3 };

typedef struct engines {
    int count;
    gs_engine *e[2]; /* cpu first when both */
} engines;

/* Where a run's by-products go besides the report. */
typedef struct sinks {
    FILE *history;        /* --history, or NULL */
    gs_progress progress; /* the progress line on stderr */
} sinks;

/* Under mpirun (docs/multigpu.md): this rank and the number of ranks; only
 * rank 0 prints (reports, messages, progress) and writes files. */
static int g_rank, g_size = 1;
#define DISTRIBUTED (g_size > 1)
#define ROOT (g_rank == 0)

/* --history is opened (and its header written) before any matrix is read,
 * so that a path that cannot be written fails at once, not after a solve. */
static int sinks_open(const gs_cli *cli, sinks *s)
{
    gs_progress_init(&s->progress, stderr, ROOT ? cli->progress : "never", cli->quiet);
    s->history = NULL;
    if (!cli->history || !ROOT) return EXIT_OK;
    s->history = fopen(cli->history, "w");
    if (!s->history) {
        fprintf(stderr, "gpusolve: --history: cannot open '%s' for writing: %s\n", cli->history,
                strerror(errno));
        return EXIT_INPUT;
    }
    gs_report_history_header(s->history);
    fflush(s->history);
    return EXIT_OK;
}

/* A write that failed (a full disk) is a runtime failure. */
static int sinks_close(const gs_cli *cli, sinks *s)
{
    if (!s->history) return EXIT_OK;
    const int failed = ferror(s->history) | (fclose(s->history) != 0);
    s->history = NULL;
    if (!failed) return EXIT_OK;
    fprintf(stderr, "gpusolve: --history: writing '%s' failed\n", cli->history);
    return EXIT_RUNTIME;
}

/* A forced path the cpu engine cannot run, once --engine auto found no GPU
 * (options.c refuses --engine cpu with them at parse time). */
static int cpu_path_refusals(const gs_cli *cli, const char *why, gs_error *err)
{
    if (strcmp(cli->loop, "device") == 0 || strcmp(cli->loop, "fused") == 0)
        return gs_error_set(err, GS_ERR_USAGE, "--loop %s: %s, and the cpu engine runs the "
                            "host loop only", cli->loop, why);
    if (strcmp(cli->spmv_long, "auto") != 0)
        return gs_error_set(err, GS_ERR_USAGE, "--spmv-long %s: %s, and only the cuda "
                            "engine's SpMV has these paths", cli->spmv_long, why);
    if (strcmp(cli->overlap, "off") == 0)
        return gs_error_set(err, GS_ERR_USAGE, "--overlap off: %s, and the cpu engine's MPI "
                            "exchange always overlaps the local product", why);
    return GS_OK;
}

/* Several ranks: one engine per rank (cpu or cuda, on every rank alike)
 * wrapped in the distributed engine. */
static int engines_open_dist(const gs_cli *cli, engines *en, gs_error *err)
{
    const char *want = cli->engine;
    gs_engine *inner = NULL;
    memset(en, 0, sizeof *en);
    if (strcmp(want, "auto") == 0) {
        const double fewest = -gs_dist_max(-(double)gs_cuda_device_count());
        want = fewest > 0 ? "cuda" : "cpu";
        if (strcmp(want, "cpu") == 0) {
            const int status = cpu_path_refusals(cli, "not every rank has a CUDA device", err);
            if (status != GS_OK) return status;
        }
        if (strcmp(want, "cpu") == 0 && !cli->quiet && ROOT)
            fprintf(stderr, "gpusolve: notice: not every rank has a CUDA device, using the CPU "
                            "engine\n");
    }
    int status = GS_OK;
    if (strcmp(want, "both") == 0)
        status = gs_error_set(err, GS_ERR_UNSUPPORTED,
                              "--engine both: runs on one process only, not under mpirun");
    else if (strcmp(want, "cpu") == 0 && (status = gs_engine_cpu_create(&inner, err)) == GS_OK)
        gs_engine_cpu_set_threads(inner, (int)cli->threads, cli->thread_bytes);
    else
        status = gs_engine_cuda_create_on(gs_dist_device() < 0 ? 0 : gs_dist_device(), &inner,
                                          err);
    if (status == GS_OK && strcmp(want, "cuda") == 0) {
        gs_debug dbg;
        gs_debug_from_env(&dbg);
        gs_debug_choose_paths(&dbg, cli->loop, cli->spmv_long, cli->overlap);
        gs_engine_cuda_set_debug(inner, &dbg);
    }
    status = gs_dist_agree(status, err);
    if (status != GS_OK) {
        gs_engine_destroy(inner);
        return status;
    }
    status = gs_engine_dist_create(inner, &en->e[0], err);
    if (status == GS_OK) en->count = 1;
    return status;
}

/* The options a distributed run refuses (one message, from rank 0). */
static int dist_refusals(const gs_cli *cli, gs_error *err)
{
    static const char *one_process[] = {"time-limit", "save-precond", "pc-blocks", NULL};
    for (int i = 0; one_process[i]; i++)
        if (gs_cli_given(cli, one_process[i]))
            return gs_error_set(err, GS_ERR_UNSUPPORTED,
                                "--%s: runs on one process only, not under mpirun",
                                one_process[i]);
    if (strcmp(cli->loop, "device") == 0 || strcmp(cli->loop, "fused") == 0)
        return gs_error_set(err, GS_ERR_USAGE, "--loop %s: under mpirun the iterations run "
                            "on the host loop only (no CUDA graphs around NCCL calls)",
                            cli->loop);
    return GS_OK;
}

static int engines_open(const gs_cli *cli, engines *en, gs_error *err)
{
    if (DISTRIBUTED) {
        int status = dist_refusals(cli, err);
        return status != GS_OK ? status : engines_open_dist(cli, en, err);
    }
    const char *want = cli->engine;
    memset(en, 0, sizeof *en);
    if (strcmp(want, "auto") == 0) {
        want = gs_cuda_device_count() > 0 ? "cuda" : "cpu";
        if (strcmp(want, "cpu") == 0) {
            const int status = cpu_path_refusals(cli, "no CUDA device found", err);
            if (status != GS_OK) return status;
        }
        if (strcmp(want, "cpu") == 0 && !cli->quiet)
            fprintf(stderr, "gpusolve: notice: no CUDA device found, using the CPU engine\n");
    }
    int status = GS_OK;
    if (strcmp(want, "cpu") == 0 || strcmp(want, "both") == 0) {
        status = gs_engine_cpu_create(&en->e[en->count], err);
        if (status != GS_OK) return status;
        gs_engine_cpu_set_threads(en->e[en->count], (int)cli->threads, cli->thread_bytes);
        en->count++;
    }
    if (strcmp(want, "cuda") == 0 || strcmp(want, "both") == 0) {
        status = gs_engine_cuda_create(&en->e[en->count], err);
        if (status != GS_OK) return status;
        gs_debug dbg; /* the test and sanitizer switches, then the paths asked (debug.h) */
        gs_debug_from_env(&dbg);
        gs_debug_choose_paths(&dbg, cli->loop, cli->spmv_long, cli->overlap);
        gs_engine_cuda_set_debug(en->e[en->count], &dbg);
        en->count++;
    }
    return GS_OK;
}

/* OpenMP threads that spin while they wait slow the CPU engine by orders of
 * magnitude on a shared or busy machine (2 threads, one busy core: a 3.8 MB
 * read 0.051 s against 0.010 s). libgomp reads OMP_WAIT_POLICY once, when
 * the program loads, so where the user chose no policy the program sets
 * passive and executes itself again, once; OMP_WAIT_POLICY=active keeps
 * spinning for dedicated benchmarks. If the exec fails the run goes on. */
static void omp_passive_unless_chosen(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); /* not in force here: the report must not claim it */
}

static int exit_code_for(int status)
{
    return status == GS_OK ? EXIT_OK : gs_status_exit_code((gs_status)status);
}

static int worse(int a, int b) /* runtime > input > not converged > ok */
{
    static const int rank[] = {0, 2, 1, 3};
    return rank[b] > rank[a] ? b : a;
}

/* Solve one problem on every engine; returns the exit code it deserves. */
static int solve_problem(const gs_cli *cli, const char *input, engines *en, sinks *out,
                         int *printed)
{
    gs_problem p;
    gs_error err = {0};
    gs_run runs[2];
    int nruns = 0, code = EXIT_OK;
    double *x = NULL, *x_all = NULL;
    int status = DISTRIBUTED ? gs_dist_problem_load(cli, input, &p, &err)
                             : gs_problem_load(cli, input, &p, &err);
    for (int i = 0; status == GS_OK && i < en->count; i++) gs_problem_pin(&p, en->e[i]);
    if (status == GS_OK && cli->output) {
        x = malloc((size_t)p.A.n_rows * sizeof(double));
        if (DISTRIBUTED && ROOT) x_all = malloc((size_t)p.dist.n_global * sizeof(double));
        if (!x || (DISTRIBUTED && ROOT && !x_all))
            status = gs_error_set(&err, GS_ERR_NOMEM, "out of memory for the solution");
        if (DISTRIBUTED) status = gs_dist_agree(status, &err);
    }
    for (int i = 0; status == GS_OK && i < en->count; i++) {
        gs_progress *pg = out->progress.out ? &out->progress : NULL; /* off: no callbacks */
        status = gs_run_solve(cli, &p, en->e[i], &runs[i], x, pg, &err);
        if (DISTRIBUTED) status = gs_dist_agree(status, &err);
        if (status != GS_OK) break;
        nruns++;
        if (!ROOT) continue;
        if (out->history) {
            gs_report_history_csv(out->history, &runs[i]);
            fflush(out->history); /* rows of a batch cut short survive it */
        }
        if (cli->quiet) continue;
        if (cli->verbose) gs_report_history(stdout, &runs[i]);
        gs_report_print(stdout, cli->format, &runs[i], !(*printed)++);
        fflush(stdout); /* a batch cut short keeps every row already run */
    }
    if (nruns == 2 && !cli->quiet && cli->format == GS_FORMAT_TABLE)
        gs_report_compare(stdout, &runs[0], &runs[1]);
    for (int i = 0; i < nruns; i++)
        if (runs[i].reason != GS_REASON_CONVERGED) code = worse(code, EXIT_NOT_CONVERGED);
    if (status == GS_OK && x && DISTRIBUTED) {
        status = gs_dist_gather(x, p.A.n_rows, x_all, &err);
        if (status == GS_OK && ROOT)
            status = gs_mm_write_vector(cli->output, x_all, (int32_t)p.dist.n_global,
                                        "gpusolve solution", &err);
        status = gs_dist_agree(status, &err);
    } else if (status == GS_OK && x) {
        status = gs_mm_write_vector(cli->output, x, p.A.n_rows, "gpusolve solution", &err);
    }
    if (status != GS_OK && !ROOT) {
        code = worse(code, exit_code_for(status));
    } else if (status != GS_OK) {
        if (err.msg[0])
            fprintf(stderr, "gpusolve: %s\n", err.msg);
        else
            fprintf(stderr, "gpusolve: %s: %s\n", input ? input : cli->generate,
                    gs_status_name((gs_status)status));
        code = worse(code, exit_code_for(status));
    }
    for (int i = 0; i < nruns; i++) gs_run_free(&runs[i]);
    free(x);
    free(x_all);
    gs_problem_free(&p);
    return code;
}

static int run_main(int argc, char **argv)
{
    gs_cli cli;
    gs_error err = {0};
    engines en = {0};
    sinks out;
    int code = EXIT_OK, printed = 0;
    if (gs_cli_parse(argc, argv, &cli, &err) != GS_OK) { /* every rank alike */
        if (ROOT) fprintf(stderr, "gpusolve: %s\n", err.msg);
        gs_cli_free(&cli);
        return EXIT_INPUT;
    }
    if (cli.help || cli.version) {
        if (ROOT && cli.help) gs_cli_print_help(stdout);
        else if (ROOT) printf("gpusolve %s\n", GS_VERSION);
        gs_cli_free(&cli);
        return EXIT_OK;
    }
    if (cli.list) {
        if (ROOT) gs_cli_print_list(stdout, cli.format);
        gs_cli_free(&cli);
        return EXIT_OK;
    }
    code = sinks_open(&cli, &out);
    if (DISTRIBUTED) code = (int)gs_dist_max(code); /* rank 0 opened the files */
    if (code != EXIT_OK) {
        gs_cli_free(&cli);
        return code;
    }
    int status = engines_open(&cli, &en, &err);
    if (status != GS_OK) {
        if (ROOT) fprintf(stderr, "gpusolve: %s\n", err.msg);
        code = DISTRIBUTED || status == GS_ERR_USAGE ? exit_code_for(status) : EXIT_RUNTIME;
    } else if (cli.generate) {
        code = solve_problem(&cli, NULL, &en, &out, &printed);
    } else {
        for (int i = 0; i < cli.n_inputs; i++)
            code = worse(code, solve_problem(&cli, cli.inputs[i], &en, &out, &printed));
    }
    code = worse(code, sinks_close(&cli, &out));
    for (int i = 0; i < en.count; i++) {
        /* a failed free or destroy (a CUDA error after the last checked call)
         * is news only where the run had no error of its own */
        gs_error terr = {0};
        const char *name = en.e[i] ? en.e[i]->ops->name : "";
        if (gs_engine_release(en.e[i], &terr) != GS_OK &&
            (code == EXIT_OK || code == EXIT_NOT_CONVERGED)) {
            fprintf(stderr, "gpusolve: releasing the %s engine: %s\n", name, terr.msg);
            code = worse(code, EXIT_RUNTIME);
        }
    }
    gs_cli_free(&cli);
    return code;
}

int main(int argc, char **argv)
{
    omp_passive_unless_chosen(argv);
    if (gs_dist_init(&argc, &argv, &g_rank, &g_size) != GS_OK) {
        fprintf(stderr, "gpusolve: MPI_Init failed\n");
        return EXIT_RUNTIME;
    }
    const int code = run_main(argc, argv);
    gs_dist_finalize();
    return code;
}
