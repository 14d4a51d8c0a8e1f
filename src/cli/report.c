/* report.c - the report of DESIGN.md ("Output"): the table a person reads,
 * and CSV and JSON carrying every number of it for batch scripts. */
#include "report.h"

#include <math.h>
#include <string.h>

static const char *yes_no(int b) { return b ? "yes" : "no"; }

static void print_time_row(FILE *out, const gs_run *r, const char *label, const double v[2])
{
    if (r->repeat > 1)
        fprintf(out, "  %-28s %12.6f s %12.6f s\n", label, v[0], v[1]);
    else
        fprintf(out, "  %-28s %12.6f s\n", label, v[0]);
}

static void print_extra_table(FILE *out, const gs_kvlist *l)
{
    if (l->count == 0) return;
    fprintf(out, "           ");
    for (int i = 0; i < l->count; i++) {
        if (l->kv[i].is_string)
            fprintf(out, " %s=%s", l->kv[i].key, l->kv[i].str);
        else
            fprintf(out, " %s=%.6g", l->kv[i].key, l->kv[i].num);
    }
    fputc('\n', out);
}

static const char *scheme_name(const gs_heat3d *h)
{
    return h->theta == 1.0 ? "backward-euler" : "crank-nicolson";
}

/* A time-stepped run: its steps, iterations per step and the paper's errors. */
static void report_steps_table(FILE *out, const gs_run *r)
{
    const gs_heat3d *h = r->problem->heat;
    const gs_steps_record *st = &r->steps;
    fprintf(out, "time steps %ld of %ld, dt = %.6g to t = %.6g (%s), x0 = %s\n", st->steps_run,
            st->steps, h->dt, h->end_time, scheme_name(h),
            st->warm_start ? "previous step's solution" : "zero");
    if (st->steps_run > 0)
        fprintf(out, "           iterations per step: min %ld  mean %.2f  max %ld;"
                " true residual checks %.6f s (outside Ts)\n", st->it_min,
                (double)st->it_total / (double)st->steps_run, st->it_max, st->check_seconds);
    fprintf(out, "error      ER = max |u - u~| over the grid = %.4e at t = %.6g\n", r->er,
            r->time_reached);
    fprintf(out, "           at x = y = 0.5 (interpolated)  z =");
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) fprintf(out, " %11.1f", gs_heat3d_point_z(i));
    fprintf(out, "\n           %-37s", "exact u");
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) fprintf(out, " %11.4e", r->point_exact[i]);
    fprintf(out, "\n           %-37s", "|u - u~|");
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) fprintf(out, " %11.4e", r->point_error[i]);
    fputc('\n', out);
}

/* n and nnz of the whole matrix (a distributed run's problem holds one
 * rank's rows). */
static long long run_n(const gs_run *r)
{
    return r->dist.ranks > 0 ? (long long)r->dist.n_global : (long long)r->problem->A.n_rows;
}

static long long run_nnz(const gs_run *r)
{
    return r->dist.ranks > 0 ? (long long)r->dist.nnz_global : (long long)r->problem->A.nnz;
}

/* A distributed run: how A was spread and what the ranks exchanged. */
static void report_dist(FILE *out, const gs_run *r)
{
    const gs_dist_summary *d = &r->dist;
    fprintf(out, "ranks      %d, %d GPU%s, transport %s (halo %s), preconditioner %s\n",
            d->ranks, d->devices, d->devices == 1 ? "" : "s", d->transport,
            d->halo_overlap ? "overlapped with the local product" : "on the engine's stream",
            d->pc_scope);
    fprintf(out, "           rows per rank %lld .. %lld, nonzeros per rank %lld .. %lld; "
            "read %s, distributed in %.6f s (outside Tt)\n", (long long)d->rows_min,
            (long long)d->rows_max, (long long)d->nnz_min, (long long)d->nnz_max,
            d->read_mode, d->distribute_seconds);
    fprintf(out, "           halo %.0f bytes per iteration (all ranks); communication %.6f s "
            "of Ts (slowest rank); communicator set up in %.6f s (outside Tt)\n",
            d->halo_bytes_per_iteration, d->comm_seconds, d->comm_setup_seconds);
}

/* Where the iterations ran and what was asked (--loop): "fused (auto):
 * how it ran", or "host, not fused as asked (--loop fused): why not". */
static void report_loop(FILE *out, const gs_run *r)
{
    const char *ran = gs_loop_path_name(r->device_loop);
    if (strcmp(r->loop_asked, "auto") == 0 || strcmp(r->loop_asked, ran) == 0)
        fprintf(out, "loop       %s (%s%s)", ran, strcmp(r->loop_asked, "auto") ? "--loop " : "",
                r->loop_asked);
    else
        fprintf(out, "loop       %s, not %s as asked (--loop %s)", ran, r->loop_asked,
                r->loop_asked);
    if (r->loop_note[0]) fprintf(out, ": %s", r->loop_note);
    fputc('\n', out);
}

static void report_table(FILE *out, const gs_run *r)
{
    const gs_problem *p = r->problem;
    fprintf(out, "matrix     %s (%s)  n = %lld  nnz = %lld  %s\n", p->name, p->field, run_n(r),
            run_nnz(r), p->symmetric ? "symmetric" : "nonsymmetric");
    fprintf(out, "read       %.6f s (not part of Tt)\n", p->read_seconds);
    fprintf(out, "engine     %s: %s", r->engine, r->device);
    if (r->bandwidth > 0)
        fprintf(out, ", %s bandwidth %.0f GB/s", r->threads > 0 ? "triad" : "copy",
                r->bandwidth * 1e-9);
    fputc('\n', out);
    if (r->threads > 0) fprintf(out, "threads    %d (%s)\n", r->threads, r->thread_policy);
    if (r->dist.ranks > 0) report_dist(out, r);
    fprintf(out, "precond    %s: %s  nnz(M) = %lld  mu = %.3f\n", r->precond, r->precond_desc,
            r->precond_nnz, r->mu);
    print_extra_table(out, &r->extra);
    fprintf(out, "method     %s", r->method);
    if (r->method_why[0]) fprintf(out, " (auto: %s)", r->method_why);
    fprintf(out, "  tol = %.3g  maxit = %ld", r->opts.tol, r->opts.maxit);
    if (strcmp(r->method, "gmres") == 0) fprintf(out, "  restart = %d", r->opts.restart);
    if (r->idr_s_used && r->idr_s_used != r->opts.idr_s)
        fprintf(out, "  s = %d (asked %d; s < n = %lld)", r->idr_s_used, r->opts.idr_s,
                run_n(r));
    else if (strcmp(r->method, "idr") == 0)
        fprintf(out, "  s = %d", r->opts.idr_s);
    fputc('\n', out);
    fputc('\n', out);
    if (r->repeat > 1) fprintf(out, "  %-28s %14s %14s   (%d runs)\n", "", "min", "median", r->repeat);
    print_time_row(out, r, "Tp  setup", r->tp);
    for (int i = 0; i < r->stages.count; i++) {
        char label[64];
        snprintf(label, sizeof label, "      %s", r->stages.stage[i].name);
        fprintf(out, "  %-28s %12.6f s\n", label, r->stages.stage[i].seconds);
    }
    char label[64];
    snprintf(label, sizeof label, "Ts  solve (%ld iterations)", r->iterations);
    print_time_row(out, r, label, r->ts);
    print_time_row(out, r, "Tt  total", r->tt);
    fputc('\n', out);
    if (p->heat) report_steps_table(out, r);
    fprintf(out, "converged  %s", yes_no(r->reason == GS_REASON_CONVERGED));
    if (r->reason != GS_REASON_CONVERGED && r->steps.failed_step > 0)
        fprintf(out, " (%s at time step %ld of %ld)", gs_reason_name(r->reason),
                r->steps.failed_step, r->steps.steps);
    else if (r->reason != GS_REASON_CONVERGED)
        fprintf(out, " (%s)", gs_reason_name(r->reason));
    fprintf(out, "  relative residual %.3e  true relative residual %.3e", r->rel_residual,
            r->true_residual);
    if (r->replacements > 0)
        fprintf(out, "  (%d residual replacement%s)", r->replacements,
                r->replacements == 1 ? "" : "s");
    fputc('\n', out);
    if (r->reason == GS_REASON_BREAKDOWN)
        fprintf(out, "breakdown  at iteration %ld: %s\n", r->breakdown_iteration, r->breakdown);
    if (r->verdict_note[0]) fprintf(out, "verdict    %s\n", r->verdict_note);
    if (r->iterations > 0) {
        fprintf(out, "iteration  %.2f us, %.2f MB moved", r->seconds_per_iteration * 1e6,
                r->bytes_per_iteration * 1e-6);
        if (r->floor_ratio > 0)
            fprintf(out, ", floor %.2f us, %.2fx the floor",
                    r->bytes_per_iteration / r->bandwidth * 1e6, r->floor_ratio);
        fputc('\n', out);
    }
    report_loop(out, r);
    fprintf(out, "memory     host peak %.1f MB", r->host_peak_bytes * 1e-6);
    if (strcmp(r->engine, "cpu") != 0) fprintf(out, ", device peak %.1f MB", r->device_peak_bytes * 1e-6);
    fprintf(out, "\n");
}

/* The same fields, in this order, for CSV and JSON. */
typedef enum { V_STR, V_NUM, V_INT } vkind;
typedef struct field { const char *name; vkind kind; const char *s; double d; long long i; } field;

/* Names of the five points' error fields: er_z0.1 ... er_z0.9. */
static const char *point_field[GS_HEAT3D_POINTS] = {"er_z0.1", "er_z0.3", "er_z0.5", "er_z0.7",
                                                    "er_z0.9"};

static int run_fields(const gs_run *r, field *f, char *stages, size_t slen, char *extra, size_t elen)
{
    const gs_problem *p = r->problem;
    const gs_heat3d *h = p->heat;
    const gs_steps_record *st = &r->steps;
    size_t used = 0;
    stages[0] = extra[0] = '\0';
    for (int i = 0; i < r->stages.count && used < slen; i++)
        used += (size_t)snprintf(stages + used, slen - used, "%s%s=%.9g", i ? ";" : "",
                                 r->stages.stage[i].name, r->stages.stage[i].seconds);
    used = 0;
    for (int i = 0; i < r->extra.count && used < elen; i++) {
        const gs_kv *kv = &r->extra.kv[i];
        if (kv->is_string)
            used += (size_t)snprintf(extra + used, elen - used, "%s%s=%s", i ? ";" : "", kv->key, kv->str);
        else
            used += (size_t)snprintf(extra + used, elen - used, "%s%s=%.9g", i ? ";" : "", kv->key, kv->num);
    }
    int n = 0;
#define S(nm, v) f[n++] = (field){nm, V_STR, v, 0, 0}
#define D(nm, v) f[n++] = (field){nm, V_NUM, NULL, v, 0}
#define I(nm, v) f[n++] = (field){nm, V_INT, NULL, 0, (long long)(v)}
    S("matrix", p->name); I("n", run_n(r)); I("nnz", run_nnz(r));
    S("symmetry", p->symmetric ? "symmetric" : "nonsymmetric"); S("field", p->field);
    D("read_s", p->read_seconds); S("engine", r->engine); S("device", r->device);
    D("bandwidth_Bps", r->bandwidth); S("precond", r->precond); S("precond_params", r->precond_desc);
    I("nnz_M", r->precond_nnz); D("mu", r->mu); S("precond_extra", extra);
    S("method", r->method); S("method_auto", r->method_why); D("tol", r->opts.tol);
    I("maxit", r->opts.maxit); I("restart", r->opts.restart);
    I("idr_s", r->idr_s_used ? r->idr_s_used : r->opts.idr_s); I("repeat", r->repeat);
    D("tp_min_s", r->tp[0]); D("tp_median_s", r->tp[1]); S("tp_stages", stages);
    D("ts_min_s", r->ts[0]); D("ts_median_s", r->ts[1]);
    D("tt_min_s", r->tt[0]); D("tt_median_s", r->tt[1]);
    I("iterations", r->iterations); S("converged", yes_no(r->reason == GS_REASON_CONVERGED));
    S("reason", gs_reason_name(r->reason)); I("breakdown_iteration", r->breakdown_iteration);
    S("breakdown", r->breakdown); S("verdict", r->verdict_note); D("rel_residual", r->rel_residual);
    D("true_rel_residual", r->true_residual); I("replacements", r->replacements);
    D("attainable_rel_residual", r->attainable); D("s_per_iteration", r->seconds_per_iteration);
    D("bytes_per_iteration", r->bytes_per_iteration); D("floor_ratio", r->floor_ratio);
    I("threads", r->threads); S("thread_policy", r->thread_policy);
    S("loop", gs_loop_path_name(r->device_loop)); S("loop_note", r->loop_note);
    S("loop_asked", r->loop_asked);
    I("host_peak_bytes", r->host_peak_bytes); I("device_peak_bytes", r->device_peak_bytes);
    /* a time-stepped problem's (heat3d); empty strings, 0 and NaN for others */
    I("time_steps", st->steps); I("steps_run", st->steps_run); I("failed_step", st->failed_step);
    D("dt", h ? h->dt : NAN); D("end_time", h ? h->end_time : NAN);
    S("time_scheme", h ? scheme_name(h) : "");
    S("step_x0", !h ? "" : st->warm_start ? "previous" : "zero");
    I("step_iterations_min", st->it_min);
    D("step_iterations_mean", st->steps_run ? (double)st->it_total / (double)st->steps_run : NAN);
    I("step_iterations_max", st->it_max); D("step_check_s", h ? st->check_seconds : NAN);
    D("time_reached", r->time_reached); D("er", r->er);
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) D(point_field[i], r->point_error[i]);
    if (r->dist.ranks > 0) { /* a distributed run's (docs/multigpu.md); absent otherwise */
        const gs_dist_summary *d = &r->dist;
        I("ranks", d->ranks); I("devices", d->devices); S("transport", d->transport);
        I("halo_overlap", d->halo_overlap);
        S("precond_scope", d->pc_scope); I("rows_min", d->rows_min); I("rows_max", d->rows_max);
        I("nnz_min", d->nnz_min); I("nnz_max", d->nnz_max);
        D("halo_bytes_per_iteration", d->halo_bytes_per_iteration);
        D("comm_s", d->comm_seconds); D("distribute_s", d->distribute_seconds);
        S("read_mode", d->read_mode);
        D("comm_setup_s", d->comm_setup_seconds);
    }
#undef S
#undef D
#undef I
    return n;
}

#define MAX_FIELDS 96

static void csv_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void number(FILE *out, double d, int json)
{
    if (isfinite(d)) fprintf(out, "%.9g", d);
    else fputs(json ? "null" : "nan", out);
}

void gs_report_print(FILE *out, gs_format format, const gs_run *r, int first)
{
    if (format == GS_FORMAT_TABLE) {
        if (!first) fputc('\n', out);
        report_table(out, r);
        return;
    }
    field f[MAX_FIELDS];
    char stages[1024], extra[1024];
    const int n = run_fields(r, f, stages, sizeof stages, extra, sizeof extra);
    const int json = format == GS_FORMAT_JSON;
    if (!json && first)
        for (int i = 0; i < n; i++) fprintf(out, "%s%s", f[i].name, i + 1 < n ? "," : "\n");
    if (json) fputc('{', out);
    for (int i = 0; i < n; i++) {
        if (json) fprintf(out, "%s\"%s\": ", i ? ", " : "", f[i].name);
        else if (i) fputc(',', out);
        if (f[i].kind == V_STR) (json ? json_string : csv_string)(out, f[i].s);
        else if (f[i].kind == V_INT) fprintf(out, "%lld", f[i].i);
        else number(out, f[i].d, json);
    }
    if (json) fputc('}', out);
    fputc('\n', out);
}

void gs_report_history(FILE *out, const gs_run *r)
{
    for (long i = 0; i < r->history.len; i++)
        fprintf(out, "%s %s iteration %6ld  relative residual %.6e%s\n", r->engine, r->method,
                r->history.iteration[i], r->history.rel[i],
                r->history.flags[i] & GS_HISTORY_TRUE ? "  (true: b - Ax)" : "");
}

/* residual and clock say, row by row, where rel_residual and seconds come
 * from (gs_krylov_history.flags). */
void gs_report_history_header(FILE *out)
{
    fputs("matrix,engine,precond,method,iteration,rel_residual,seconds,residual,clock\n", out);
}

static const char *history_clock(unsigned flags)
{
    return flags & GS_HISTORY_INTERPOLATED ? "interpolated"
           : flags & GS_HISTORY_DEVICE_CLOCK ? "device" : "host";
}

/* rel_residual in the report's own format (number()), so that the last row
 * and the CSV report's field read the same. */
void gs_report_history_csv(FILE *out, const gs_run *r)
{
    for (long i = 0; i < r->history.len; i++) {
        csv_string(out, r->problem->name);
        fprintf(out, ",%s,%s,%s,%ld,", r->engine, r->precond, r->method, r->history.iteration[i]);
        number(out, r->history.rel[i], 0);
        fprintf(out, ",%.6f,%s,%s\n", r->history.seconds[i],
                r->history.flags[i] & GS_HISTORY_TRUE ? "true" : "method",
                history_clock(r->history.flags[i]));
    }
}

/* A stage's seconds in st, or -1 where it has no stage of that name. */
static double stage_seconds(const gs_stages *st, const char *name)
{
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->stage[i].name, name) == 0) return st->stage[i].seconds;
    return -1.0;
}

static void print_stage_cell(FILE *out, double v)
{
    if (v < 0) fprintf(out, " %12s", "-");
    else fprintf(out, " %12.6f", v);
}

/* Tp by stage on both engines (the FSAI paper's Figure 5 split): the CPU's
 * stages in order, then those only the GPU has; "-" where an engine has no
 * stage of that name. */
static void report_compare_stages(FILE *out, const gs_run *cpu, const gs_run *gpu)
{
    const gs_stages *c = &cpu->stages, *g = &gpu->stages;
    fprintf(out, "\n  %-22s %12s %12s %8s\n", "Tp by stage", "CPU (s)", "GPU (s)", "speedup");
    for (int pass = 0; pass < 2; pass++) {
        const gs_stages *st = pass ? g : c;
        for (int i = 0; i < st->count; i++) {
            const char *name = st->stage[i].name;
            if (pass && stage_seconds(c, name) >= 0) continue; /* printed in the first pass */
            const double tc = stage_seconds(c, name), tg = stage_seconds(g, name);
            fprintf(out, "  %-22s", name);
            print_stage_cell(out, tc);
            print_stage_cell(out, tg);
            if (tc > 0 && tg > 0) fprintf(out, " %7.1fx", tc / tg);
            fputc('\n', out);
        }
    }
}

void gs_report_compare(FILE *out, const gs_run *cpu, const gs_run *gpu)
{
    fprintf(out, "\nGPU versus CPU (%s, %s + %s)\n", cpu->problem->name, gpu->precond, gpu->method);
    fprintf(out, "  %-8s %12s %12s %12s %8s\n", "", "Tp (s)", "Ts (s)", "Tt (s)", "iters");
    fprintf(out, "  %-8s %12.6f %12.6f %12.6f %8ld\n", "CPU", cpu->tp[0], cpu->ts[0], cpu->tt[0],
            cpu->iterations);
    fprintf(out, "  %-8s %12.6f %12.6f %12.6f %8ld\n", "GPU", gpu->tp[0], gpu->ts[0], gpu->tt[0],
            gpu->iterations);
    fprintf(out, "  %-8s %11.1fx %11.1fx %11.1fx\n", "speedup", cpu->tp[0] / gpu->tp[0],
            cpu->ts[0] / gpu->ts[0], cpu->tt[0] / gpu->tt[0]);
    report_compare_stages(out, cpu, gpu);
}
