/* params.c - declared, typed per-preconditioner parameters (params.h): the
 * one parser both the command-line check and the setups' reads go through. */
#include "params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_names[] = {"double", "integer", "choice"};

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

const gs_param_decl *gs_param_find(const gs_param_decl *decls, const char *name)
{
    for (const gs_param_decl *d = decls; d && d->name; d++)
        if (strcmp(d->name, name) == 0) return d;
    return NULL;
}

/* 1 if text is one of the '|'-separated choices. */
/* A choice item "word:N" takes "word:" and a whole number in [1, 1000]
 * (isai's --ilu sweeps:N); every other item is matched as it is. */
static int is_counted_choice(const char *item, size_t ilen, const char *text)
{
    if (ilen < 3 || strncmp(item + ilen - 2, ":N", 2) != 0) return 0;
    const size_t word = ilen - 1; /* "word:" */
    if (strncmp(item, text, word) != 0) return 0;
    const char *digits = text + word;
    if (strlen(digits) == 0 || strlen(digits) > 4 || strspn(digits, "0123456789") != strlen(digits))
        return 0;
    const long count = strtol(digits, NULL, 10);
    return count >= 1 && count <= 1000;
}

static int is_choice(const char *choices, const char *text)
{
    const size_t len = strlen(text);
    for (const char *c = choices; c;) {
        const char *bar = strchr(c, '|');
        const size_t clen = bar ? (size_t)(bar - c) : strlen(c);
        const int counted = clen >= 3 && strncmp(c + clen - 2, ":N", 2) == 0;
        if (!counted && clen == len && strncmp(c, text, len) == 0) return 1;
        if (counted && is_counted_choice(c, clen, text)) return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

void gs_param_describe(const gs_param_decl *d, char *buf, size_t len)
{
    if (d->type == GS_PARAM_CHOICE)
        snprintf(buf, len, "%s", d->choices);
    else
        snprintf(buf, len, "%s in [%g, %g]", type_names[d->type], d->lo, d->hi);
}

int gs_param_parse(const gs_param_decl *d, const char *text, gs_param_value *out, gs_error *err)
{
    char range[160], *end;
    gs_param_describe(d, range, sizeof range);
    memset(out, 0, sizeof *out);
    errno = 0;
    if (d->type == GS_PARAM_CHOICE) {
        if (!is_choice(d->choices, text))
            return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not one of %s", d->name, text,
                                d->choices);
        out->choice = text;
        return GS_OK;
    }
    double v;
    if (d->type == GS_PARAM_INT) {
        out->integer = strtol(text, &end, 10);
        v = (double)out->integer;
    } else {
        v = out->number = strtod(text, &end);
    }
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        return gs_error_set(err, GS_ERR_USAGE, "--%s: '%s' is not %s (want %s)", d->name, text,
                            d->type == GS_PARAM_INT ? "an integer" : "a number", range);
    if (v < d->lo || v > d->hi)
        return gs_error_set(err, GS_ERR_USAGE, "--%s: %s is outside [%g, %g]", d->name, text,
                            d->lo, d->hi);
    return GS_OK;
}

int gs_params_check(const gs_params *p, const gs_param_decl *decls, const char *owner,
                    gs_error *err)
{
    for (int i = 0; p && i < p->count; i++) {
        const gs_param_decl *d = gs_param_find(decls, p->name[i]);
        if (!d)
            return gs_error_set(err, GS_ERR_USAGE,
                                "--%s is not a parameter of preconditioner '%s' "
                                "(see gpusolve --list)",
                                p->name[i], owner);
        gs_param_value v;
        int status = gs_param_parse(d, p->value[i], &v, err);
        if (status != GS_OK) return status;
    }
    return GS_OK;
}

/* The value of name (command line, else default) parsed as declared. */
static int param_read(const gs_params *p, const gs_param_decl *decls, const char *name,
                      gs_param_type type, gs_param_value *out, gs_error *err)
{
    const gs_param_decl *d = gs_param_find(decls, name);
    if (!d || d->type != type)
        return gs_error_set(err, GS_ERR_INTERNAL, "parameter --%s is not declared as %s", name,
                            type_names[type]);
    const char *text = gs_params_lookup(p, name);
    return gs_param_parse(d, text ? text : d->default_value, out, err);
}

int gs_params_double(const gs_params *p, const gs_param_decl *decls, const char *name,
                     double *out, gs_error *err)
{
    gs_param_value v;
    int status = param_read(p, decls, name, GS_PARAM_DOUBLE, &v, err);
    if (status == GS_OK) *out = v.number;
    return status;
}

int gs_params_int(const gs_params *p, const gs_param_decl *decls, const char *name, long *out,
                  gs_error *err)
{
    gs_param_value v;
    int status = param_read(p, decls, name, GS_PARAM_INT, &v, err);
    if (status == GS_OK) *out = v.integer;
    return status;
}

int gs_params_choice(const gs_params *p, const gs_param_decl *decls, const char *name,
                     const char **out, gs_error *err)
{
    gs_param_value v;
    int status = param_read(p, decls, name, GS_PARAM_CHOICE, &v, err);
    if (status == GS_OK) *out = v.choice;
    return status;
}
