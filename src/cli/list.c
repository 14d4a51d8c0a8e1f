/* list.c - gpusolve --list: what runs where, read from the preconditioner
 * and method registries and the option table (options.h), never restated. */
#include <stdio.h>
#include <string.h>

#include "krylov.h"
#include "loop.h"
#include "options.h"
#include "precond.h"

/* One parameter of a preconditioner or one option of a method: a CSV row,
 * a JSON object, or a line of the table under its type's heading. */
typedef struct list_row {
    const char *kind;         /* "precond", "method" or "loop" (a --loop path) */
    const char *name;         /* registry name */
    const char *summary;
    const char *engines;      /* where the setup (precond) or the method runs */
    const char *paper_method; /* precond: gs_pc_type.paper_method, else "" */
    const char *option;       /* "--tau", or "" for a type without parameters */
    const char *type;         /* double|integer|choice, or "" */
    char range[160];          /* "[0, 1]", "(0, 1)", "double|single", or "" */
    int has_range;
    double lo, hi;
    const char *choices, *default_value, *help;
} list_row;

typedef struct list_sink {
    FILE *out;
    gs_format format;
    const char *group; /* table: the heading printed last */
    int rows;
} list_sink;

static void csv_text(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out); /* RFC 4180: a quote is doubled */
        fputc(*s, out);
    }
    fputc('"', out);
}

static void json_text(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

#define LIST_FIELDS 13
static const char *field_names[LIST_FIELDS] = {
    "kind", "name", "summary", "engines", "paper_method", "option", "type",
    "range", "lo", "hi", "choices", "default", "help"};

static void emit_machine(list_sink *s, const list_row *r)
{
    const int json = s->format == GS_FORMAT_JSON;
    const char *text[LIST_FIELDS] = {r->kind, r->name, r->summary, r->engines, r->paper_method,
                                     r->option, r->type, r->range, NULL, NULL,
                                     r->choices ? r->choices : "",
                                     r->default_value ? r->default_value : "", r->help};
    if (!json && s->rows == 0)
        for (int i = 0; i < LIST_FIELDS; i++)
            fprintf(s->out, "%s%s", field_names[i], i + 1 < LIST_FIELDS ? "," : "\n");
    if (json) fputc('{', s->out);
    for (int i = 0; i < LIST_FIELDS; i++) {
        if (json) fprintf(s->out, "%s\"%s\": ", i ? ", " : "", field_names[i]);
        else if (i) fputc(',', s->out);
        if (text[i])
            (json ? json_text : csv_text)(s->out, text[i]);
        else if (r->has_range)
            fprintf(s->out, "%.17g", i == 8 ? r->lo : r->hi); /* lo, hi */
        else if (json)
            fputs("null", s->out);
    }
    fputs(json ? "}\n" : "\n", s->out);
}

static void emit_table(list_sink *s, const list_row *r)
{
    if (!s->group || strcmp(s->group, r->name) != 0) {
        fprintf(s->out, "  %-12s %s\n", r->name, r->summary);
        fprintf(s->out, "  %-12s runs on: %s", "", r->engines);
        if (*r->paper_method) fprintf(s->out, "; paper method: %s", r->paper_method);
        fputc('\n', s->out);
        s->group = r->name;
    }
    if (!*r->option) {
        fprintf(s->out, "      (no parameters)\n");
        return;
    }
    if (strcmp(r->kind, "loop") == 0) { /* a path: what it runs, not its option again */
        fprintf(s->out, "  %-12s runs: %s\n", "", r->help);
        return;
    }
    char kind[200];
    if (*r->range && strcmp(r->type, "choice") != 0)
        snprintf(kind, sizeof kind, "%s in %s", r->type, r->range);
    else
        snprintf(kind, sizeof kind, "%s", *r->range ? r->range : r->type);
    fprintf(s->out, "      %-20s %-28s default %s\n", r->option, kind,
            r->default_value ? r->default_value : "(none)");
}

static void emit(list_sink *s, const list_row *r)
{
    if (s->format == GS_FORMAT_TABLE) emit_table(s, r);
    else emit_machine(s, r);
    s->rows++;
}

/* Where a type's setup runs: a CUDA engine without the type's CUDA setup
 * builds M with the CPU reference and uploads it (gs_pc_create). */
static const char *pc_engines(const gs_pc_type *t)
{
    if (!GS_HAVE_CUDA) return "cpu";
    return t->setup[GS_ENGINE_CUDA] ? "cpu, cuda" : "cpu, cuda via host setup";
}

static void list_preconditioners(list_sink *s)
{
    for (int i = 0; i < gs_pc_type_count(); i++) {
        const gs_pc_type *t = gs_pc_type_at(i);
        list_row r = {.kind = "precond", .name = t->name, .summary = t->summary,
                      .engines = pc_engines(t),
                      .paper_method = t->paper_method ? t->paper_method : "", .option = "",
                      .type = "", .help = ""};
        if (!t->params || !t->params->name) emit(s, &r);
        for (const gs_param_decl *d = t->params; d && d->name; d++) {
            char option[80];
            snprintf(option, sizeof option, "--%s", d->name);
            static const char *types[] = {"double", "integer", "choice"};
            r.option = option, r.type = types[d->type];
            r.has_range = d->type != GS_PARAM_CHOICE;
            r.lo = d->lo, r.hi = d->hi;
            r.choices = d->choices, r.default_value = d->default_value, r.help = d->help;
            if (r.has_range) snprintf(r.range, sizeof r.range, "[%g, %g]", d->lo, d->hi);
            else snprintf(r.range, sizeof r.range, "%s", d->choices);
            emit(s, &r);
        }
    }
}

/* 1 if method reads option o (gs_option.read_by). */
static int reads_option(const gs_method_type *m, const gs_option *o)
{
    return o->read_by && (strcmp(o->read_by, "*") == 0 || strcmp(o->read_by, m->name) == 0);
}

static void list_methods(list_sink *s)
{
    static const char *types[] = {"flag", "integer", "double", "string"}; /* gs_opt_kind */
    for (int i = 0; i < gs_method_type_count(); i++) {
        const gs_method_type *m = gs_method_type_at(i);
        list_row r = {.kind = "method", .name = m->name, .summary = m->summary,
                      .engines = GS_HAVE_CUDA ? "cpu, cuda" : "cpu", .paper_method = ""};
        for (int k = 0; k < gs_cli_option_count(); k++) {
            const gs_option *o = gs_cli_option_at(k);
            if (!reads_option(m, o)) continue;
            char option[80];
            snprintf(option, sizeof option, "--%s", o->name);
            r.option = option, r.type = types[o->kind];
            r.has_range = o->kind == GS_OPT_LONG || o->kind == GS_OPT_DOUBLE;
            r.lo = o->lo, r.hi = o->hi;
            r.range[0] = '\0';
            if (r.has_range)
                snprintf(r.range, sizeof r.range, "%c%g, %g%c", o->open ? '(' : '[', o->lo,
                         o->hi, o->open ? ')' : ']');
            r.default_value = o->default_value, r.help = o->help;
            emit(s, &r);
        }
    }
}

/* The loop paths --loop chooses from: where each runs and what it takes
 * (the methods marked fused in the registry for the fused kernel). */
static void list_loop_paths(list_sink *s)
{
    char fused[64] = "", fused_help[256];
    for (int i = 0; i < gs_method_type_count(); i++)
        if (gs_method_type_at(i)->fused)
            snprintf(fused + strlen(fused), sizeof fused - strlen(fused), "%s%s",
                     fused[0] ? ", " : "", gs_method_type_at(i)->name);
    snprintf(fused_help, sizeof fused_help,
             "%s with a preconditioner applied pointwise (jacobi, none), as one or two sparse "
             "products, or as two triangular factors (mic, up to %d rows); else the rule's loop, "
             "named in the report", fused, GS_FUSED_FACTOR_MAX_ROWS);
    const char *cuda = GS_HAVE_CUDA ? "cuda" : "cuda (not in this build)";
    const struct { const char *name, *summary, *engines, *help; } paths[] = {
        {"host", "the host drives the iterations, checking the residual after each block "
                 "(replayed as a CUDA graph on the cuda engine)",
         GS_HAVE_CUDA ? "cpu, cuda" : "cpu", "every method"},
        {"device", "the whole loop in a CUDA graph; the stopping and breakdown tests on the "
                   "device, no round trip per check",
         cuda, "every method (the rule takes it for gmres and idr bodies of at most 9 steps; "
               "cg and bicgstab take the fused kernel or the host loop); where the loop cannot "
               "be built, the host loop, named in the report"},
        {"fused", "the whole solve in one kernel (a thread-block cluster or a cooperative grid)",
         cuda, fused_help},
    };
    const gs_option *o = NULL;
    for (int k = 0; k < gs_cli_option_count(); k++)
        if (strcmp(gs_cli_option_at(k)->name, "loop") == 0) o = gs_cli_option_at(k);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        list_row r = {.kind = "loop", .name = paths[i].name, .summary = paths[i].summary,
                      .engines = paths[i].engines, .paper_method = "", .option = "--loop",
                      .type = "choice", .choices = o->choices, .default_value = o->default_value,
                      .help = paths[i].help};
        snprintf(r.range, sizeof r.range, "%s", o->choices);
        emit(s, &r);
    }
}

void gs_cli_print_list(FILE *out, gs_format format)
{
    list_sink s = {out, format, NULL, 0};
    if (format == GS_FORMAT_TABLE) {
        fprintf(out, "preconditioners (-p NAME): parameters, and the engines the setup runs on%s\n",
                GS_HAVE_CUDA ? "" : " (this build has no CUDA engine: make CUDA=0)");
    }
    list_preconditioners(&s);
    if (format == GS_FORMAT_TABLE) {
        s.group = NULL;
        fprintf(out, "\nmethods (-m NAME) and the options they read:\n");
    }
    list_methods(&s);
    if (format == GS_FORMAT_TABLE) {
        s.group = NULL;
        fprintf(out, "\nloop paths (--loop NAME; auto: the engine's rule), where each runs and "
                     "what it takes:\n");
    }
    list_loop_paths(&s);
}
