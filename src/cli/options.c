/* options.c - the option table, its parser and --help (options.h). */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "heat3d.h"
#include "krylov.h"
#include "precond.h"

typedef gs_option opt_decl;

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

#define F(field) .offset = offsetof(gs_cli, field)
static const opt_decl options[] = {
    {"precond", 'p', "NAME", "jacobi", "preconditioner (list below; gpusolve --list for details)",
     GS_OPT_STRING, F(precond)},
    {"method", 'm', "NAME", "auto",
     "cg|cg1|bicgstab|gmres|idr (cg1: CG with one sum over the ranks an iteration, "
     "Chronopoulos-Gear); auto: cg where A can be SPD (symmetric, every a_ii > 0) and M "
     "is symmetric, else the preconditioner's paper method (spai, gspai-opt: bicgstab; isai: "
     "idr), else bicgstab; the report says why",
     GS_OPT_STRING, F(method)},
    {"engine", 'e', "NAME", "auto",
     "cpu|cuda|both; auto: cuda if a GPU is present, else cpu (with a notice)", GS_OPT_STRING,
     F(engine)},
    {"tol", 0, "X", "1e-8", "stop when ||r||_2 <= X ||b||_2", GS_OPT_DOUBLE, F(tol), .lo = 0,
     .hi = 1, .open = 1, .read_by = "*"},
    {"maxit", 0, "N", "10000", "iteration limit", GS_OPT_LONG, F(maxit), .lo = 1, .hi = 1e12,
     .read_by = "*"},
    {"restart", 0, "M", "30", "gmres restart length", GS_OPT_LONG, F(restart), .lo = 1,
     .hi = 500, .read_by = "gmres"},
    {"idr-s", 0, "S", "4", "idr shadow space dimension", GS_OPT_LONG, F(idr_s), .lo = 1,
     .hi = 64, .read_by = "idr"},
    {"check-every", 0, "N", "0",
     "read the residual back every N iterations; 0: adaptively, after about half the "
     "iterations the convergence rate predicts are left (at most 16; gmres and idr check "
     "every step); where the cuda engine runs the loop on the device (by default idr and "
     "gmres with --restart up to 8) a check costs no round trip",
     GS_OPT_LONG, F(check_every), .lo = 0, .hi = 1000, .read_by = "*"},
    {"replacements", 0, "N", "3",
     "where the method's residual says converged and the true residual ||b - Ax|| / ||b|| is "
     "above 10 x tol, replace r by b - Ax and restart the method from x, up to N times, "
     "before reporting 'residual gap' (docs/verdicts.md); 0: never",
     GS_OPT_LONG, F(replacements), .lo = 0, .hi = 100, .read_by = "*"},
    {"time-limit", 0, "S", "0",
     "stop a run (setup + solve) after S seconds: a setup at its next stage end or chunk, a "
     "solve at its next check; reason 'time limit', exit 2; 0: no limit",
     GS_OPT_DOUBLE, F(time_limit), .lo = 0, .hi = 1e9},
    {"history", 0, "FILE", NULL,
     "write one CSV row per iteration of every run (matrix,engine,precond,method,iteration,"
     "rel_residual,seconds,residual,clock; iteration 0 is the initial residual; residual: "
     "'method' (the method's recurrence) or 'true' (b - Ax computed afresh); clock: where "
     "seconds since the solve began come from, 'host' or 'device' at a check, "
     "'interpolated' between checks); no extra check or synchronisation is made for it",
     GS_OPT_STRING, F(history)},
    {"progress", 0, "WHEN", "auto",
     "auto|always|never: a progress line on stderr (stage, iteration, relative residual, "
     "seconds) for a run longer than 2 s; auto: only when stderr is a terminal; always: from "
     "the start, terminal or not; never with --quiet",
     GS_OPT_STRING, F(progress)},
    {"rhs", 0, "ones|ax1|FILE", "ones", "right-hand side: all ones, A*1, or a vector file",
     GS_OPT_STRING, F(rhs)},
    {"x0", 0, "zero|FILE", "zero", "initial guess", GS_OPT_STRING, F(x0)},
    {"output", 'o', "FILE", NULL, "write the solution x (Matrix Market array)", GS_OPT_STRING,
     F(output)},
    {"format", 0, "NAME", "table", "report format: table|csv|json", GS_OPT_STRING,
     F(format_name)},
    {"repeat", 0, "N", "1", "run N times; report the min and median of Tp, Ts, Tt", GS_OPT_LONG,
     F(repeat), .lo = 1, .hi = 10000},
    {"threads", 0, "N", "0",
     "cpu engine: 0 chooses each kernel's threads by its bytes (one for small problems) and a "
     "solve's by its largest kernel; N runs every kernel on N threads; never more than "
     "OMP_NUM_THREADS (the report's threads line says what ran)",
     GS_OPT_LONG, F(threads), .lo = 0, .hi = 4096},
    {"thread-bytes", 0, "B", "262144",
     "cpu engine, --threads 0: a kernel takes one thread per B bytes it moves, and a solve "
     "keeps its threads only where a trial at its start finds them faster than one "
     "(docs/perf-notebook.md; scripts/bench/bench_cpu_threads.py --thread-bytes measures another B)",
     GS_OPT_DOUBLE, F(thread_bytes), .lo = 1024, .hi = 1e15},
    {"pc-blocks", 0, "N", "1",
     "set the preconditioner up on A's block-diagonal part over N row blocks balanced by "
     "nonzeros (the block-local M that N ranks of mpirun build; one process only)",
     GS_OPT_LONG, F(pc_blocks), .lo = 1, .hi = 1 << 20},
    {"generate", 'g', "SPEC", NULL, "solve a built-in problem instead of a file (below)",
     GS_OPT_STRING, F(generate)},
    {"steps", 0, "N", STRINGIFY(GS_HEAT3D_DEFAULT_STEPS),
     "heat3d: implicit time steps to --end-time, dt = end-time / N (docs/heat3d.md says why "
     "this default)",
     GS_OPT_LONG, F(steps), .lo = 1, .hi = 1e7},
    {"dt", 0, "X", NULL,
     "heat3d: the time step, instead of --steps (--end-time / X must be a whole number of "
     "steps); with --steps, the end time is N X",
     GS_OPT_DOUBLE, F(dt), .lo = 1e-12, .hi = 100},
    {"end-time", 0, "T", STRINGIFY(GS_HEAT3D_DEFAULT_END),
     "heat3d: the time the error ER is measured at (the paper's Table 2: t = 0.1)",
     GS_OPT_DOUBLE, F(end_time), .lo = 1e-12, .hi = 100},
    {"time-scheme", 0, "NAME", "crank-nicolson",
     "heat3d: crank-nicolson (2nd order in time, the paper's DVDM scheme) | backward-euler "
     "(1st order)",
     GS_OPT_STRING, F(time_scheme)},
    {"step-x0", 0, "WHAT", "previous",
     "heat3d: each step's initial guess: previous (the last step's solution) | zero",
     GS_OPT_STRING, F(step_x0)},
    {"write-matrix", 0, "FILE", NULL, "write the input matrix (e.g. a generated one) and go on",
     GS_OPT_STRING, F(write_matrix)},
    {"save-precond", 0, "PREFIX", NULL, "write the preconditioner's matrices as PREFIX_*.mtx",
     GS_OPT_STRING, F(save_precond)},
    {"no-graph", 0, NULL, NULL, "do not replay captured iterations (CUDA graphs) nor run the loop on the device", GS_OPT_FLAG,
     F(no_graph)},
    {"loop", 0, "PATH", "auto",
     "where the cuda engine runs the iterations: host (a check on the host after each block "
     "of replayed iterations), device (the whole loop in a CUDA graph, checks on the device), "
     "fused (cg and bicgstab in one kernel, with jacobi, none or a preconditioner of sparse "
     "products or triangular factors); auto: the engine's rule. The report names the path "
     "that ran; where a forced path cannot take the solve (this preconditioner, size or "
     "device) the rule's path runs and the report says why. The cpu engine and mpirun run "
     "the host loop only: device and fused are usage errors there",
     GS_OPT_STRING, F(loop), .choices = "auto|host|device|fused"},
    {"spmv-long", 0, "HOW", "auto",
     "the cuda engine's SpMV on rows far longer than the mean (at least max(128, 16 x mean) "
     "entries): split (long rows summed in chunks, a warp a chunk), merge (the merge-path "
     "product for the whole matrix), off (a warp or less a row, as any other); auto: split; "
     "the report's layout_A names what ran (CSR-split, CSR-merge); not for the cpu engine",
     GS_OPT_STRING, F(spmv_long), .choices = "auto|split|merge|off"},
    {"overlap", 0, "WHEN", "auto",
     "under mpirun on the cuda engine: the halo exchange on a second stream, overlapped with "
     "the local product (on), or on the engine's stream (off); auto: off (measured faster "
     "with NCCL, no faster with ipc: docs/results-multigpu.md); the cpu engine's MPI exchange "
     "always overlaps (off is refused there); one process has no halo (no effect)",
     GS_OPT_STRING, F(overlap), .choices = "auto|on|off"},
    {"read", 0, "HOW", "parallel",
     "under mpirun, a matrix file: parallel (every rank parses its own byte range of the "
     "file and sends each entry to the rank that owns its row) or root (rank 0 reads the "
     "whole file and sends each rank its rows); a gzip file or a pipe is read by rank 0 "
     "either way (no byte ranges); one process: no effect (docs/multigpu.md)",
     GS_OPT_STRING, F(read), .choices = "parallel|root"},
    {"verbose", 'v', NULL, NULL, "print the relative residual at every check", GS_OPT_FLAG,
     F(verbose)},
    {"quiet", 'q', NULL, NULL, "print nothing but errors (exit status only)", GS_OPT_FLAG,
     F(quiet)},
    {"list", 0, NULL, NULL,
     "print the preconditioners (parameters, types, ranges, defaults, engines) and the methods "
     "(options), then exit; --format csv|json for scripts",
     GS_OPT_FLAG, F(list)},
    {"version", 0, NULL, NULL, "print the version and exit", GS_OPT_FLAG, F(version)},
    {"help", 'h', NULL, NULL, "print this help and exit", GS_OPT_FLAG, F(help)},
};
#undef F
#define N_OPTIONS (sizeof options / sizeof options[0])

int gs_cli_option_count(void) { return (int)N_OPTIONS; }

_Static_assert(N_OPTIONS <= 64, "gs_cli.given has one bit per option");

int gs_cli_given(const gs_cli *cli, const char *name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strcmp(options[i].name, name) == 0) return (int)((cli->given >> i) & 1u);
    return 0;
}

const gs_option *gs_cli_option_at(int i) { return &options[i]; }

/* 1 if text is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *text)
{
    const size_t len = strlen(text);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        const size_t clen = bar ? (size_t)(bar - c) : strlen(c);
        if (clen == len && strncmp(c, text, len) == 0) return 1;
        if (!bar) break;
        c = bar + 1;
    }
    return 0;
}

static int opt_store(const opt_decl *o, const char *text, gs_cli *cli, gs_error *err)
{
    void *field = (char *)cli + o->offset;
    const char open = o->open ? '(' : '[', close = o->open ? ')' : ']';
    char *end;
    errno = 0;
    switch (o->kind) {
    case GS_OPT_FLAG: *(int *)field = 1; return GS_OK;
    case GS_OPT_STRING:
        if (o->choices && !is_choice(o->choices, text))
            return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not one of %s", o->name, text,
                                o->choices);
        *(const char **)field = text;
        return GS_OK;
    case GS_OPT_DOUBLE: {
        double v = strtod(text, &end);
        const int outside = o->open ? v <= o->lo || v >= o->hi : v < o->lo || v > o->hi;
        if (end == text || *end || errno == ERANGE || !isfinite(v) || outside)
            return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' must be a number in %c%g, %g%c",
                                o->name, text, open, o->lo, o->hi, close);
        *(double *)field = v;
        return GS_OK;
    }
    case GS_OPT_LONG: {
        long v = strtol(text, &end, 10);
        if (end == text || *end || errno == ERANGE || v < o->lo || v > o->hi)
            return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' must be an integer in [%.0f, %.0f]",
                                o->name, text, o->lo, o->hi);
        *(long *)field = v;
        return GS_OK;
    }
    }
    return GS_ERR_INTERNAL;
}

static const opt_decl *opt_find(const char *name, char short_name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if ((name && strcmp(options[i].name, name) == 0) ||
            (!name && short_name && options[i].short_name == short_name))
            return &options[i];
    return NULL;
}

static int cli_defaults(gs_cli *cli, gs_error *err)
{
    memset(cli, 0, sizeof *cli);
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (options[i].default_value) {
            int status = opt_store(&options[i], options[i].default_value, cli, err);
            if (status != GS_OK) return status;
        }
    return GS_OK;
}

/* --format's name into cli->format. */
static int cli_format(gs_cli *cli, gs_error *err)
{
    static const char *formats[] = {"table", "csv", "json"};
    for (int i = 0; i < 3; i++)
        if (strcmp(cli->format_name, formats[i]) == 0) {
            cli->format = (gs_format)i;
            return GS_OK;
        }
    return gs_error_set(err, GS_ERR_USAGE, "--format: '%s' is not one of table|csv|json",
                        cli->format_name);
}

/* --engine: a known name, and one this build has. */
static int cli_engine(const gs_cli *cli, gs_error *err)
{
    const char *e = cli->engine;
    if (strcmp(e, "auto") && strcmp(e, "cpu") && strcmp(e, "cuda") && strcmp(e, "both"))
        return gs_error_set(err, GS_ERR_USAGE, "--engine: '%s' is not one of cpu|cuda|both|auto",
                            e);
    if (!GS_HAVE_CUDA && (strcmp(e, "cuda") == 0 || strcmp(e, "both") == 0))
        return gs_error_set(err, GS_ERR_USAGE,
                            "--engine %s: this build has no CUDA engine (built with make "
                            "CUDA=0); use --engine cpu, or rebuild with the CUDA toolkit", e);
    return GS_OK;
}

/* Where the matrices come from: files or --generate (a spec that parses). */
static int cli_inputs(const gs_cli *cli, gs_error *err)
{
    const int needs_input = !cli->help && !cli->version && !cli->list;
    if (needs_input && !cli->generate && cli->n_inputs == 0)
        return gs_error_set(err, GS_ERR_USAGE,
                            "no matrix given: name a .mtx file or use --generate SPEC "
                            "(gpusolve --help)");
    if (cli->generate && cli->n_inputs > 0)
        return gs_error_set(err, GS_ERR_USAGE, "give either --generate or matrix files, not both");
    if (cli->output && cli->n_inputs > 1)
        return gs_error_set(err, GS_ERR_USAGE, "--output needs a single matrix (%d given)",
                            cli->n_inputs);
    return cli->generate ? gs_generate_check(cli->generate, err) : GS_OK;
}

/* heat3d's options: refused for other problems; --rhs and --x0 refused for
 * heat3d (the scheme makes each step's right-hand side, the previous step
 * its initial guess); the time grid from whichever of --steps, --dt and
 * --end-time were given, so that steps * dt = end_time afterwards. */
static int cli_time_steps(gs_cli *cli, gs_error *err)
{
    static const char *time_options[] = {"steps", "dt", "end-time", "time-scheme", "step-x0"};
    const int heat = cli->generate && gs_heat3d_is_spec(cli->generate);
    for (size_t i = 0; i < sizeof time_options / sizeof time_options[0]; i++)
        if (!heat && gs_cli_given(cli, time_options[i]))
            return gs_error_set(err, GS_ERR_USAGE,
                                "--%s: only for a time-stepped problem (--generate heat3d:...)",
                                time_options[i]);
    if (!heat) return GS_OK;
    if (gs_cli_given(cli, "rhs"))
        return gs_error_set(err, GS_ERR_USAGE, "--rhs: heat3d makes each step's right-hand "
                            "side from the previous solution");
    if (gs_cli_given(cli, "x0"))
        return gs_error_set(err, GS_ERR_USAGE, "--x0: heat3d starts from u(x,y,z,0) = 3 sin(pi "
                            "x) sin(pi y) sin(pi z); --step-x0 chooses each step's guess");
    if (strcmp(cli->time_scheme, "crank-nicolson") && strcmp(cli->time_scheme, "backward-euler"))
        return gs_error_set(err, GS_ERR_USAGE,
                            "--time-scheme: '%s' is not one of crank-nicolson|backward-euler",
                            cli->time_scheme);
    if (strcmp(cli->step_x0, "previous") && strcmp(cli->step_x0, "zero"))
        return gs_error_set(err, GS_ERR_USAGE, "--step-x0: '%s' is not one of previous|zero",
                            cli->step_x0);
    if (gs_cli_given(cli, "dt") && gs_cli_given(cli, "steps")) {
        const double end = (double)cli->steps * cli->dt;
        if (gs_cli_given(cli, "end-time") && fabs(end - cli->end_time) > 1e-9 * cli->end_time)
            return gs_error_set(err, GS_ERR_USAGE, "--steps %ld x --dt %g = %g is not --end-time "
                                "%g (give two of the three)", cli->steps, cli->dt, end,
                                cli->end_time);
        if (end > 100.0)
            return gs_error_set(err, GS_ERR_USAGE, "--steps %ld x --dt %g: the end time %g is "
                                "past 100", cli->steps, cli->dt, end);
        cli->end_time = end;
    } else if (gs_cli_given(cli, "dt")) {
        const double q = cli->end_time / cli->dt, whole = nearbyint(q);
        if (whole < 1 || whole > 1e7 || fabs(q - whole) > 1e-9 * q)
            return gs_error_set(err, GS_ERR_USAGE, "--dt %g: --end-time %g / --dt is %.9g steps, "
                                "not a whole number in [1, 1e7] (give --steps instead)",
                                cli->dt, cli->end_time, q);
        cli->steps = (long)whole;
    }
    cli->dt = cli->end_time / (double)cli->steps;
    return GS_OK;
}

/* --loop, --spmv-long, --overlap against what the engine and the method
 * can run, as far as the command line tells (docs/architecture.md, "Loop
 * paths"): the cpu engine runs the host loop and its own SpMV, its MPI
 * exchange always overlaps; the fused kernel runs the methods marked so in
 * the registry; --no-graph leaves the host loop only. What depends on the
 * matrix or the device falls back at run time, named in the report. main
 * refuses the rest once the engine is known (auto without a GPU, mpirun). */
static int cli_paths(const gs_cli *cli, gs_error *err)
{
    const int on_gpu = strcmp(cli->engine, "cpu") != 0 && GS_HAVE_CUDA;
    const int gpu_loop = strcmp(cli->loop, "device") == 0 || strcmp(cli->loop, "fused") == 0;
    if (gpu_loop && !on_gpu)
        return gs_error_set(err, GS_ERR_USAGE, "--loop %s: the cpu engine runs the host loop "
                            "only (%s)", cli->loop, GS_HAVE_CUDA ? "--engine cuda or both runs "
                            "the others" : "this build has no CUDA engine");
    if (gpu_loop && cli->no_graph)
        return gs_error_set(err, GS_ERR_USAGE, "--loop %s: --no-graph leaves the host loop only",
                            cli->loop);
    const gs_method_type *m = gs_method_find(cli->method);
    if (strcmp(cli->loop, "fused") == 0 && m && !m->fused) {
        char names[64] = "";
        for (int i = 0; i < gs_method_type_count(); i++)
            if (gs_method_type_at(i)->fused)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", gs_method_type_at(i)->name);
        return gs_error_set(err, GS_ERR_USAGE, "--loop fused: the fused kernel runs %s only, "
                            "not -m %s", names, m->name);
    }
    if (strcmp(cli->spmv_long, "auto") != 0 && !on_gpu)
        return gs_error_set(err, GS_ERR_USAGE, "--spmv-long %s: only the cuda engine's SpMV "
                            "has these paths", cli->spmv_long);
    if (strcmp(cli->overlap, "off") == 0 && !on_gpu)
        return gs_error_set(err, GS_ERR_USAGE, "--overlap off: the cpu engine's MPI exchange "
                            "always overlaps the local product");
    return GS_OK;
}

/* Everything a range check per option cannot see, so that every usage
 * error is found before a matrix is read or generated. */
static int cli_validate(gs_cli *cli, gs_error *err)
{
    int status = cli_format(cli, err);
    if (status != GS_OK) return status;
    const gs_pc_type *type = gs_pc_find(cli->precond);
    if (!type)
        return gs_error_set(err, GS_ERR_USAGE, "--precond: unknown preconditioner '%s'",
                            cli->precond);
    if (strcmp(cli->method, "auto") != 0 && !gs_method_find(cli->method))
        return gs_error_set(err, GS_ERR_USAGE, "--method: unknown method '%s'", cli->method);
    if (strcmp(cli->progress, "auto") && strcmp(cli->progress, "always") &&
        strcmp(cli->progress, "never"))
        return gs_error_set(err, GS_ERR_USAGE, "--progress: '%s' is not one of auto|always|never",
                            cli->progress);
    status = cli_engine(cli, err);
    if (status == GS_OK) status = cli_paths(cli, err);
    if (status == GS_OK) status = cli_inputs(cli, err);
    if (status == GS_OK) status = cli_time_steps(cli, err);
    if (status == GS_OK) status = gs_pc_check_params(type, &cli->params, err);
    return status;
}

/* One argv entry at *i (an option and maybe its value). */
static int cli_parse_one(int argc, char **argv, int *i, gs_cli *cli, gs_error *err)
{
    const char *a = argv[*i], *value = NULL;
    char name[64] = "";
    const opt_decl *o = NULL;
    if (a[1] == '-') { /* --name or --name=value */
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, a + 2, len);
        name[len] = '\0';
        value = eq ? eq + 1 : NULL;
        o = opt_find(name, 0);
    } else if (a[2] == '\0') {
        o = opt_find(NULL, a[1]);
        snprintf(name, sizeof name, "%c", a[1]);
    }
    const int is_param = !o && a[1] == '-' && gs_pc_is_param(name);
    if (!o && !is_param) return gs_error_set(err, GS_ERR_USAGE, "unknown option '%s'", a);
    if (o) cli->given |= 1ull << (o - options);
    if (o && o->kind == GS_OPT_FLAG) {
        if (value) return gs_error_set(err, GS_ERR_USAGE, "--%s takes no value", o->name);
        return opt_store(o, NULL, cli, err);
    }
    if (!value) {
        if (*i + 1 >= argc) return gs_error_set(err, GS_ERR_USAGE, "%s needs a value", a);
        value = argv[++*i];
    }
    if (o) return opt_store(o, value, cli, err);
    /* A preconditioner parameter; gs_cli_free releases the name's copy. */
    char *copy = strdup(name);
    if (!copy) return gs_error_set(err, GS_ERR_NOMEM, "out of memory parsing options");
    const int count_before = cli->params.count;
    int status = gs_params_set(&cli->params, copy, value, err);
    if (cli->params.count == count_before) free(copy); /* replaced an earlier setting */
    return status;
}

int gs_cli_parse(int argc, char **argv, gs_cli *cli, gs_error *err)
{
    int status = cli_defaults(cli, err);
    if (status != GS_OK) return status;
    cli->inputs = gs_calloc((size_t)argc + 1, sizeof(char *), "argument list", err);
    if (!cli->inputs) return GS_ERR_NOMEM;
    int only_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_files && strcmp(a, "--") == 0) {
            only_files = 1;
        } else if (!only_files && a[0] == '-' && a[1] != '\0') {
            status = cli_parse_one(argc, argv, &i, cli, err);
            if (status != GS_OK) return status;
        } else {
            cli->inputs[cli->n_inputs++] = argv[i];
        }
    }
    return cli_validate(cli, err);
}

void gs_cli_free(gs_cli *cli)
{
    for (int i = 0; i < cli->params.count; i++) free((char *)cli->params.name[i]);
    free(cli->inputs);
    memset(cli, 0, sizeof *cli);
}

void gs_cli_print_help(FILE *out)
{
    fprintf(out,
            "usage: gpusolve [options] MATRIX.mtx[.gz] [MORE.mtx ...]\n"
            "       gpusolve [options] --generate poisson3d:64\n\n"
            "Solves A x = b with a preconditioned Krylov method and reports the setup (Tp),\n"
            "solve (Ts) and total (Tt) times. Exit status: 0 converged, 1 bad usage or input,\n"
            "2 not converged or breakdown, 3 runtime failure (CUDA, out of memory).\n\n"
            "options:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_decl *o = &options[i];
        char head[64];
        if (o->short_name)
            snprintf(head, sizeof head, "-%c, --%s%s%s", o->short_name, o->name,
                     o->arg ? " " : "", o->arg ? o->arg : "");
        else
            snprintf(head, sizeof head, "    --%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        fprintf(out, "  %-30s %s", head, o->help);
        if (o->choices) fprintf(out, " [one of %s; default: %s]", o->choices, o->default_value);
        else if (o->default_value) fprintf(out, " [default: %s]", o->default_value);
        fputc('\n', out);
    }
    fprintf(out, "\npreconditioners (-p) and their parameters:\n");
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        const int host_setup = GS_HAVE_CUDA && !t->setup[GS_ENGINE_CUDA];
        fprintf(out, "  %-12s %s%s\n", t->name, t->summary,
                host_setup ? " [cuda engine: set up on the host]" : "");
        for (const gs_param_decl *d = t->params; d && d->name; d++) {
            char head[96], range[160];
            const int choice = d->type == GS_PARAM_CHOICE;
            snprintf(head, sizeof head, "--%s %s", d->name,
                     choice ? d->choices : d->type == GS_PARAM_INT ? "N" : "X");
            gs_param_describe(d, range, sizeof range);
            fprintf(out, "      %-26s %s [%s%sdefault: %s]\n", head, d->help, choice ? "" : range,
                    choice ? "" : ", ", d->default_value);
        }
    }
    fprintf(out, "\nmethods (-m):\n");
    for (int i = 0; i < gs_method_type_count(); i++)
        fprintf(out, "  %-12s %s\n", gs_method_type_at(i)->name, gs_method_type_at(i)->summary);
    fprintf(out, "\nbuilt-in problems (--generate KIND:N or KIND:NXxNYxNZ):\n%s%s",
            gs_generate_help(), gs_heat3d_help());
}
