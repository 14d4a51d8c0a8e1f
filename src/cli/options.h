/* options.h - the command line: one table of {name, default, help} that the
 * parser, --help and --list read (STYLE.md rule 9), plus the preconditioner
 * parameters declared in the registry. */
#ifndef GS_OPTIONS_H
#define GS_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"
#include "params.h"

typedef enum gs_format { GS_FORMAT_TABLE, GS_FORMAT_CSV, GS_FORMAT_JSON } gs_format;

typedef struct gs_cli {
    const char *precond;    /* registry name */
    const char *method;     /* "auto" or a method name */
    const char *engine;     /* auto|cpu|cuda|both */
    double tol;
    long maxit;
    long restart;
    long idr_s;
    long check_every;
    long replacements;      /* residual replacements before a residual gap is reported */
    const char *rhs;        /* ones|ax1|FILE */
    const char *x0;         /* zero|FILE */
    const char *output;     /* solution file, or NULL */
    const char *format_name;
    gs_format format;
    long repeat;
    long threads;           /* cpu engine: 0 by work, N fixed (capped by OMP_NUM_THREADS) */
    double thread_bytes;    /* cpu engine: bytes a kernel needs per thread, by work */
    long pc_blocks;         /* > 1: M set up on A's block-diagonal part (docs/multigpu.md) */
    double time_limit;      /* seconds per run (setup + solve); 0: no limit */
    const char *history;    /* CSV of the residual checks of every run, or NULL */
    const char *progress;   /* auto|always|never: the progress line on stderr */
    int verbose, quiet, no_graph, help, version;
    /* the paths a user may force (docs/architecture.md, "Loop paths"):
     * auto (the engine's rule) or one of the option's choices */
    const char *loop;       /* auto|host|device|fused: where the iterations run */
    const char *spmv_long;  /* auto|split|merge|off: the CUDA engine's long-row SpMV */
    const char *overlap;    /* auto|on|off: the halo exchange under mpirun */
    const char *read;       /* parallel|root: who reads a matrix file under mpirun */
    int list;               /* --list: print the registries and exit */
    const char *generate;     /* built-in problem spec, or NULL */
    /* heat3d (a time-stepped problem): after parsing, steps * dt = end_time
     * whichever two were given (docs/heat3d.md) */
    long steps;
    double dt, end_time;
    const char *time_scheme;  /* crank-nicolson|backward-euler */
    const char *step_x0;      /* previous|zero: each step's initial guess */
    const char *write_matrix; /* write the (read or generated) matrix here */
    const char *save_precond; /* prefix, or NULL */
    gs_params params;         /* per-preconditioner --name value pairs */
    int n_inputs;
    char **inputs;            /* matrix files (argv entries) */
    unsigned long long given; /* bit i: option i of the table was on the command line */
} gs_cli;

typedef enum gs_opt_kind { GS_OPT_FLAG, GS_OPT_LONG, GS_OPT_DOUBLE, GS_OPT_STRING } gs_opt_kind;

/* One row of the option table. */
typedef struct gs_option {
    const char *name;
    char short_name;
    const char *arg;           /* argument's name in --help, NULL for flags */
    const char *default_value; /* parsed into the field before argv is read */
    const char *help;
    gs_opt_kind kind;
    size_t offset;             /* of the field in gs_cli */
    double lo, hi;             /* range of a number: [lo, hi], or (lo, hi) when open */
    const char *choices;       /* a string's only values, "a|b|c" (checked), or NULL */
    int open;
    /* the Krylov methods that read it, for --list: "*" every method, else
     * one registered method name; NULL: not a method's option */
    const char *read_by;
} gs_option;

int gs_cli_option_count(void);
/* 1 if the option (its long name) was given on the command line, not
 * defaulted. */
int gs_cli_given(const gs_cli *cli, const char *name);
const gs_option *gs_cli_option_at(int i);

/* Parse argv. GS_ERR_USAGE with a message naming the option for anything
 * wrong (unknown option, missing or bad value, no input, a preconditioner
 * parameter outside its declaration, a malformed --generate spec, an engine
 * this build lacks), all found before any matrix is read or generated. */
int gs_cli_parse(int argc, char **argv, gs_cli *cli, gs_error *err);
void gs_cli_free(gs_cli *cli);
void gs_cli_print_help(FILE *out);

/* --list (src/cli/list.c): every registered preconditioner with its parameters
 * (type, range or choices, default) and the engines its setup runs on, and
 * every method with the options it reads; as a table, or one CSV row / one
 * JSON object per parameter or option. Read from the registries and the
 * option table, so it cannot drift from them. */
void gs_cli_print_list(FILE *out, gs_format format);

#endif
