/* timer.h - monotonic host clock and named phases (the setup stages of Tp).
 * GPU phases are measured after an engine synchronisation (gs_stage_end). */
#ifndef GS_TIMER_H
#define GS_TIMER_H

#define GS_MAX_STAGES 16
#define GS_STAGE_NAME_LEN 32

typedef struct gs_stage {
    char name[GS_STAGE_NAME_LEN];
    double seconds;
} gs_stage;

typedef struct gs_stages {
    int count;
    gs_stage stage[GS_MAX_STAGES];
} gs_stages;

double gs_now(void); /* seconds, CLOCK_MONOTONIC */

/* Add seconds to the stage called name (created on first use, in order). */
void gs_stages_add(gs_stages *s, const char *name, double seconds);
double gs_stages_total(const gs_stages *s);

#endif
