/* options.h - the command line: one table of {name, default, help} that both
 * the parser and --help read (STYLE.md rule 9), plus the preconditioner
 * parameters declared in the registry. */
#ifndef GS_OPTIONS_H
#define GS_OPTIONS_H

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
    const char *rhs;        /* ones|ax1|FILE */
    const char *x0;         /* zero|FILE */
    const char *output;     /* solution file, or NULL */
    const char *format_name;
    gs_format format;
    long repeat;
    double time_limit;
    int verbose, quiet, no_graph, help, version;
    const char *generate;     /* built-in problem spec, or NULL */
    const char *write_matrix; /* write the (read or generated) matrix here */
    const char *save_precond; /* prefix, or NULL */
    gs_params params;         /* per-preconditioner --name value pairs */
    int n_inputs;
    char **inputs;            /* matrix files (argv entries) */
} gs_cli;

/* Parse argv. GS_ERR_USAGE with a message naming the option for anything
 * wrong (unknown option, missing or bad value, no input). */
int gs_cli_parse(int argc, char **argv, gs_cli *cli, gs_error *err);
void gs_cli_free(gs_cli *cli);
void gs_cli_print_help(FILE *out);

#endif
