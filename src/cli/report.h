/* report.h - print a run: the table (DESIGN.md "Output"), CSV (one header
 * line, one row per run) or JSON (one object per line), the residual
 * history of --verbose, and the GPU-versus-CPU table of --engine both. */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <stdio.h>

#include "options.h"
#include "run.h"

/* first = 1 for the first run printed by this process (CSV header). */
void gs_report_print(FILE *out, gs_format format, const gs_run *r, int first);
void gs_report_history(FILE *out, const gs_run *r);
/* --history: the CSV header, then per run one row per residual check:
 * matrix,engine,precond,method,iteration,rel_residual,seconds. */
void gs_report_history_header(FILE *out);
void gs_report_history_csv(FILE *out, const gs_run *r);
/* The FSAI paper's Table 7 layout: Tp, Ts, Tt per engine and the speedups. */
void gs_report_compare(FILE *out, const gs_run *cpu, const gs_run *gpu);

#endif
