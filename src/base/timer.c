/* timer.c - monotonic clock and the named stage list of timer.h. */
#include "timer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

double gs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gs_stages_add(gs_stages *s, const char *name, double seconds)
{
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->stage[i].name, name) == 0) {
            s->stage[i].seconds += seconds;
            return;
        }
    if (s->count == GS_MAX_STAGES) return; /* fixed table: later stages fold away */
    snprintf(s->stage[s->count].name, GS_STAGE_NAME_LEN, "%s", name);
    s->stage[s->count].seconds = seconds;
    s->count++;
}

double gs_stages_total(const gs_stages *s)
{
    double t = 0;
    for (int i = 0; i < s->count; i++) t += s->stage[i].seconds;
    return t;
}
