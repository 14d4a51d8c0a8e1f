/* params.h - per-preconditioner parameters from the command line.
 * Each preconditioner declares its parameters (name as in its paper, type,
 * range or choices, default, help) in its registry entry; the parser checks
 * every given value against that declaration before any matrix is read, the
 * setup reads the values back typed (the declared default when absent), and
 * --help and --list print the same declarations. */
#ifndef GS_PARAMS_H
#define GS_PARAMS_H

#include <stddef.h>

#include "error.h"

typedef enum gs_param_type { GS_PARAM_DOUBLE, GS_PARAM_INT, GS_PARAM_CHOICE } gs_param_type;

typedef struct gs_param_decl {
    const char *name;          /* without the leading "--" */
    gs_param_type type;
    double lo, hi;             /* GS_PARAM_DOUBLE, GS_PARAM_INT: the closed range [lo, hi] */
    const char *choices;       /* GS_PARAM_CHOICE: '|'-separated, e.g. "double|single" */
    const char *default_value; /* as text: it passes its own declaration (a test checks) */
    const char *help;          /* what it does; the range is printed from lo/hi/choices */
} gs_param_decl;

/* Declaration tables (NULL-name terminated) are written with these. */
#define GS_PARAM_DOUBLE_DECL(name, lo, hi, def, help) {name, GS_PARAM_DOUBLE, lo, hi, NULL, def, help}
#define GS_PARAM_INT_DECL(name, lo, hi, def, help) {name, GS_PARAM_INT, lo, hi, NULL, def, help}
#define GS_PARAM_CHOICE_DECL(name, choices, def, help) \
    {name, GS_PARAM_CHOICE, 0, 0, choices, def, help}
#define GS_PARAM_DECL_END {NULL, GS_PARAM_DOUBLE, 0, 0, NULL, NULL, NULL}

#define GS_MAX_PARAMS 32

typedef struct gs_params {
    int count;
    const char *name[GS_MAX_PARAMS];
    const char *value[GS_MAX_PARAMS];
} gs_params;

/* A value parsed as its declaration says (the field of d->type is set). */
typedef struct gs_param_value {
    double number;      /* GS_PARAM_DOUBLE */
    long integer;       /* GS_PARAM_INT */
    const char *choice; /* GS_PARAM_CHOICE: the text itself, one of d->choices */
} gs_param_value;

/* Set name=value (a later setting replaces an earlier one). */
int gs_params_set(gs_params *p, const char *name, const char *value, gs_error *err);
/* The value given on the command line, or NULL. */
const char *gs_params_lookup(const gs_params *p, const char *name);

/* The declaration of name in decls (NULL-terminated, may be NULL), or NULL. */
const gs_param_decl *gs_param_find(const gs_param_decl *decls, const char *name);
/* Parse text as d declares it: GS_ERR_USAGE naming --name and the text when
 * it does not parse, lies outside [lo, hi] or is not one of the choices. */
int gs_param_parse(const gs_param_decl *d, const char *text, gs_param_value *out, gs_error *err);
/* d's type and range as --help and --list print them: "double in [0, 1]",
 * "integer in [1, 30]", "double|single". */
void gs_param_describe(const gs_param_decl *d, char *buf, size_t len);

/* Every parameter in p is declared in decls and its value passes
 * gs_param_parse; GS_ERR_USAGE naming the first that does not (owner: the
 * preconditioner's name, for the message). */
int gs_params_check(const gs_params *p, const gs_param_decl *decls, const char *owner,
                    gs_error *err);

/* Typed reads for the setups: the command-line value if given, else the
 * declared default, parsed by gs_param_parse (the one reading path, so a
 * setup never restates a range). GS_ERR_INTERNAL if name is not declared
 * with that type; GS_ERR_USAGE only for values that skipped gs_params_check.
 * A choice's *out points at the value's own text (argv or the default). */
int gs_params_double(const gs_params *p, const gs_param_decl *decls, const char *name,
                     double *out, gs_error *err);
int gs_params_int(const gs_params *p, const gs_param_decl *decls, const char *name, long *out,
                  gs_error *err);
int gs_params_choice(const gs_params *p, const gs_param_decl *decls, const char *name,
                     const char **out, gs_error *err);

#endif
