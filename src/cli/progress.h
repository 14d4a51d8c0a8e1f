/* progress.h - the one-line progress indicator on a terminal: the setup
 * stage or the solve's iteration and relative residual, rewritten in place. */
#ifndef GS_PROGRESS_H
#define GS_PROGRESS_H

#include <stdio.h>

/* A run shows the line only once it has lasted this long (--progress auto);
 * --progress always drops the wait so that tests see the line at once. */
#define GS_PROGRESS_AFTER_S 2.0
/* The line is rewritten at most every this many seconds. */
#define GS_PROGRESS_EVERY_S 0.1

typedef struct gs_progress {
    FILE *out;        /* NULL: show nothing */
    double after;     /* seconds into a run before the first line */
    double start;     /* gs_now() at the run's start */
    double last;      /* gs_now() at the last line; < 0: none yet */
    int width;        /* characters of the line on screen, 0: none shown */
    int solving;      /* the line shown is the solve's (else the setup's) */
} gs_progress;

/* mode is --progress: "always", "never", or "auto" (only when out is a
 * terminal); quiet shows nothing in every mode. */
void gs_progress_init(gs_progress *pg, FILE *out, const char *mode, int quiet);
void gs_progress_run_begin(gs_progress *pg);
/* The callbacks (gs_pc_hook's stage_done, gs_krylov_opts's progress). */
void gs_progress_stage_done(void *ctx, const char *name);
/* gs_pc_hook's stage_begin: "setup: NAME ..." with the elapsed time. A
 * stage's start (a NAME without ':') is shown even within
 * GS_PROGRESS_EVERY_S of the last line (a stage that starts right after
 * another ends must not hide behind the previous one's "done"); a note
 * within a stage ("least squares: cuSOLVER column 3 of 8") is not. */
void gs_progress_stage_begin(void *ctx, const char *name);
void gs_progress_solve(void *ctx, long it, double rel);
/* Clears the line, if one is shown. */
void gs_progress_run_end(gs_progress *pg);

#endif
