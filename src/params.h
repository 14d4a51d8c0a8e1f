/* params.h - per-preconditioner parameters from the command line.
 * Each preconditioner declares its parameters (name as in its paper, default,
 * help) in its registry entry; the command line collects "--name value" pairs
 * into a gs_params, and the setup reads them back typed, with the declared
 * default when absent. --help prints the same declarations. */
#ifndef GS_PARAMS_H
#define GS_PARAMS_H

#include "error.h"

typedef struct gs_param_decl {
    const char *name;          /* without the leading "--" */
    const char *default_value; /* as text, printed by --help */
    const char *help;
} gs_param_decl;

#define GS_MAX_PARAMS 32

typedef struct gs_params {
    int count;
    const char *name[GS_MAX_PARAMS];
    const char *value[GS_MAX_PARAMS];
} gs_params;

/* Set name=value (a later setting replaces an earlier one). */
int gs_params_set(gs_params *p, const char *name, const char *value, gs_error *err);
/* The value given on the command line, or NULL. */
const char *gs_params_lookup(const gs_params *p, const char *name);

/* Typed lookups: the command-line value if given, else the default declared
 * in decls (a NULL-terminated array). GS_ERR_USAGE naming --name when the
 * text does not parse or is outside [lo, hi]. */
int gs_params_double(const gs_params *p, const gs_param_decl *decls, const char *name,
                     double lo, double hi, double *out, gs_error *err);
int gs_params_int(const gs_params *p, const gs_param_decl *decls, const char *name, long lo,
                  long hi, long *out, gs_error *err);
/* One of the '|'-separated choices, e.g. "fp64|single"; *out points into
 * static storage of the value (command line or default). */
int gs_params_choice(const gs_params *p, const gs_param_decl *decls, const char *name,
                     const char *choices, const char **out, gs_error *err);

#endif
