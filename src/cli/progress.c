/* progress.c - the progress line on stderr (progress.h): shown once a run
 * has lasted GS_PROGRESS_AFTER_S, rewritten with '\r', cleared at the end. */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "timer.h"

void gs_progress_init(gs_progress *pg, FILE *out, const char *mode, int quiet)
{
    memset(pg, 0, sizeof *pg);
    pg->after = GS_PROGRESS_AFTER_S;
    pg->last = -1.0;
    if (quiet) return; /* --quiet: nothing but errors, whatever --progress says */
    if (strcmp(mode, "always") == 0) {
        pg->out = out;
        pg->after = 0.0;
    } else if (strcmp(mode, "auto") == 0 && isatty(fileno(out))) {
        pg->out = out;
    }
}

void gs_progress_run_begin(gs_progress *pg)
{
    pg->start = gs_now();
    pg->last = -1.0;
    pg->solving = 0;
}

/* Rewrite the line if the run is old enough and the last line is not too
 * recent, or the run moved from setup to solve (a run shorter than the
 * rate limit still shows its solve); the padding wipes what a longer
 * previous line left. */
static void progress_show_at(gs_progress *pg, int solving, const char *text, int force)
{
    const double now = gs_now(), elapsed = now - pg->start;
    if (!pg->out || elapsed < pg->after) return;
    if (!force && pg->last >= 0.0 && now - pg->last < GS_PROGRESS_EVERY_S &&
        solving == pg->solving)
        return;
    pg->solving = solving;
    char line[160];
    int n = snprintf(line, sizeof line, "gpusolve: %s  %.1f s", text, elapsed);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    fprintf(pg->out, "\r%s%*s", line, pg->width > n ? pg->width - n : 0, "");
    fflush(pg->out);
    if (n > pg->width) pg->width = n;
    pg->last = now;
}

static void progress_show(gs_progress *pg, int solving, const char *text)
{
    progress_show_at(pg, solving, text, 0);
}

void gs_progress_stage_begin(void *ctx, const char *name)
{
    char text[96];
    snprintf(text, sizeof text, "setup: %s ...", name);
    /* a stage's start is shown at once; a note within a stage ("least
     * squares: cuSOLVER column 3 of 8", gs_pc_stage_progress) is rate-limited */
    progress_show_at(ctx, 0, text, strchr(name, ':') == NULL);
}

void gs_progress_stage_done(void *ctx, const char *name)
{
    char text[96];
    snprintf(text, sizeof text, "setup: %s done", name);
    progress_show(ctx, 0, text);
}

void gs_progress_solve(void *ctx, long it, double rel)
{
    char text[96];
    snprintf(text, sizeof text, "solve  it %ld  rel residual %.3e", it, rel);
    progress_show(ctx, 1, text);
}

void gs_progress_run_end(gs_progress *pg)
{
    if (!pg->out || pg->width == 0) return;
    fprintf(pg->out, "\r%*s\r", pg->width, "");
    fflush(pg->out);
    pg->width = 0;
}
