/* params.c - typed access to the per-preconditioner parameters (params.h). */
#include "params.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int gs_params_set(gs_params *p, const char *name, const char *value, gs_error *err)
{
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->name[i], name) == 0) {
            p->value[i] = value;
            return GS_OK;
        }
    if (p->count == GS_MAX_PARAMS)
        return gs_error_set(err, GS_ERR_USAGE, "too many preconditioner parameters");
    p->name[p->count] = name;
    p->value[p->count] = value;
    p->count++;
    return GS_OK;
}

const char *gs_params_lookup(const gs_params *p, const char *name)
{
    for (int i = 0; p && i < p->count; i++)
        if (strcmp(p->name[i], name) == 0) return p->value[i];
    return NULL;
}

/* The command-line text for name, else its declared default. */
static int param_text(const gs_params *p, const gs_param_decl *decls, const char *name,
                      const char **text, gs_error *err)
{
    *text = gs_params_lookup(p, name);
    if (*text) return GS_OK;
    for (const gs_param_decl *d = decls; d && d->name; d++)
        if (strcmp(d->name, name) == 0) {
            *text = d->default_value;
            return GS_OK;
        }
    return gs_error_set(err, GS_ERR_INTERNAL, "parameter --%s is not declared", name);
}

int gs_params_double(const gs_params *p, const gs_param_decl *decls, const char *name,
                     double lo, double hi, double *out, gs_error *err)
{
    const char *text;
    int status = param_text(p, decls, name, &text, err);
    if (status != GS_OK) return status;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not a number", name, text);
    if (v < lo || v > hi)
        return gs_error_set(err, GS_ERR_USAGE, "--%s: %g is outside [%g, %g]", name, v, lo, hi);
    *out = v;
    return GS_OK;
}

int gs_params_int(const gs_params *p, const gs_param_decl *decls, const char *name, long lo,
                  long hi, long *out, gs_error *err)
{
    const char *text;
    int status = param_text(p, decls, name, &text, err);
    if (status != GS_OK) return status;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE)
        return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not an integer", name, text);
    if (v < lo || v > hi)
        return gs_error_set(err, GS_ERR_USAGE, "--%s: %ld is outside [%ld, %ld]", name, v, lo,
                            hi);
    *out = v;
    return GS_OK;
}

int gs_params_choice(const gs_params *p, const gs_param_decl *decls, const char *name,
                     const char *choices, const char **out, gs_error *err)
{
    const char *text;
    int status = param_text(p, decls, name, &text, err);
    if (status != GS_OK) return status;
    size_t len = strlen(text);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t clen = bar ? (size_t)(bar - c) : strlen(c);
        if (clen == len && strncmp(c, text, len) == 0) {
            *out = text;
            return GS_OK;
        }
        if (!bar) break;
        c = bar + 1;
    }
    return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not one of %s", name, text, choices);
}
