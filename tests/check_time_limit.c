/* check_time_limit.c - --time-limit inside the setups (precond.h: gs_pc_hook's
 * deadline, gs_pc_deadline): every registered preconditioner, on the CPU engine
 * and, where a GPU is present, the CUDA engine, stops with GS_ERR_TIME_LIMIT at
 * the end of whichever stage the deadline passes in, naming that stage, with
 * everything it allocated freed (the engine's device bytes back where they were;
 * the sanitizer build checks the host's); the CLI turns that into reason
 * "time limit", exit 2, and goes on with the next file. */
#include <time.h>

#include "cliutil.h"
#include "engine.h"
#include "testutil.h"

/* The hook's context: the stage after which the deadline is made to pass. */
typedef struct stop_at {
    const char *stage;
    double deadline;
    int seen;
} stop_at;

/* stage_done: after `stage`, wait until the deadline has passed, so that the
 * stage's own end (gs_pc_stage_end asks right after telling the hook) stops
 * the setup there. */
static void wait_past_deadline(void *ctx, const char *name)
{
    stop_at *s = ctx;
    if (strcmp(name, s->stage) != 0) return;
    s->seen = 1;
    while (gs_now() <= s->deadline) {
        const struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

/* A setup of `name` on e with the hook; the status, err filled. */
static int setup_with(gs_engine *e, const char *name, const gs_csr *A, const gs_pc_hook *hook,
                      gs_pc **pc, gs_error *err)
{
    gs_params none = {0};
    gs_mat *Ae = NULL;
    int status = e->ops->mat_create(e, A, GS_FP64, &Ae);
    if (status == GS_OK) status = gs_pc_create_hooked(gs_pc_find(name), e, &none, A, Ae, hook, pc, err);
    e->ops->mat_destroy(e, Ae);
    return status;
}

/* For every stage the setup reports: stopped right after it, the message
 * names it, nothing is left allocated on the engine. */
static void stop_after_every_stage(gs_engine *e, const char *name, const gs_csr *A)
{
    gs_error err = {0};
    gs_pc *pc = NULL;
    ck_assert_msg(setup_with(e, name, A, NULL, &pc, &err) == GS_OK, "%s on %s: %s", name,
                  e->ops->name, err.msg);
    gs_stages stages = pc->stages;
    gs_pc_destroy(pc);
    ck_assert_msg(stages.count > 0, "%s: no stages", name);
    for (int i = 0; i < stages.count; i++) {
        stop_at s = {stages.stage[i].name, 0, 0};
        gs_pc_hook hook = {wait_past_deadline, &s, NULL, 0.0};
        gs_error_clear(&err);
        gs_error_clear(&e->err);
        const size_t before = e->device_bytes_now;
        s.deadline = hook.deadline = gs_now() + 0.25;
        pc = NULL;
        const int status = setup_with(e, name, A, &hook, &pc, &err);
        ck_assert_msg(s.seen, "%s on %s: stage '%s' not reached", name, e->ops->name, s.stage);
        ck_assert_msg(status == GS_ERR_TIME_LIMIT && pc == NULL,
                      "%s on %s, stopped after '%s': %s (%s)", name, e->ops->name, s.stage,
                      gs_status_name(status), err.msg);
        char want[128];
        snprintf(want, sizeof want, "stage '%s'", s.stage);
        ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "time limit"),
                      "%s on %s: message '%s' does not name %s", name, e->ops->name, err.msg, want);
        ck_assert_msg(e->device_bytes_now == before, "%s on %s after '%s': %zu device bytes left",
                      name, e->ops->name, s.stage, e->device_bytes_now - before);
        ck_assert_int_eq(gs_status_exit_code(GS_ERR_TIME_LIMIT), 2);
    }
}

static const char *const preconds[] = {"jacobi", "fsai", "spai", "gspai-opt", "isai", "mic",
                                       "ssor-ai", NULL};

static void every_preconditioner(gs_engine *e)
{
    gs_csr A = tu_generated("poisson3d:7"); /* SPD: every type sets up */
    for (int i = 0; preconds[i]; i++) stop_after_every_stage(e, preconds[i], &A);
    gs_csr_free(&A);
}

START_TEST(cpu_setups_stop_at_every_stage)
{
    gs_engine *e = NULL;
    gs_error err = {0};
    ck_assert(gs_engine_cpu_create(&e, &err) == GS_OK);
    every_preconditioner(e);
    gs_engine_destroy(e);
}
END_TEST

START_TEST(cuda_setups_stop_at_every_stage)
{
    if (gs_cuda_device_count() <= 0) {
        printf("check_time_limit: cuda setups: skipped: no CUDA device\n");
        return;
    }
    gs_engine *e = NULL;
    gs_error err = {0};
    ck_assert_msg(gs_engine_cuda_create(&e, &err) == GS_OK, "%s", err.msg);
    every_preconditioner(e);
    gs_engine_destroy(e);
}
END_TEST

/* A deadline already passed: the CPU reference's least squares (a long
 * stage with checks between its columns) stops without a column solved
 * past the first check; the message names "least squares" or an earlier
 * stage's end. */
START_TEST(deadline_already_passed)
{
    gs_engine *e = NULL;
    gs_error err = {0};
    ck_assert(gs_engine_cpu_create(&e, &err) == GS_OK);
    gs_csr A = tu_generated("convdiff3d:6");
    for (int i = 0; preconds[i]; i++) {
        if (!strcmp(preconds[i], "fsai") || !strcmp(preconds[i], "mic") || !strcmp(preconds[i], "ssor-ai"))
            continue; /* SPD types: A is not */
        gs_pc_hook hook = {NULL, NULL, NULL, gs_now() - 1.0};
        gs_pc *pc = NULL;
        gs_error_clear(&err);
        ck_assert_msg(setup_with(e, preconds[i], &A, &hook, &pc, &err) == GS_ERR_TIME_LIMIT,
                      "%s: %s", preconds[i], err.msg);
        ck_assert_ptr_null(pc);
    }
    gs_csr_free(&A);
    gs_engine_destroy(e);
}
END_TEST

/* The CLI: two files with a limit too short for either setup: exit 2, a row
 * for each (reason "time limit", no iterations), the second file run too. */
START_TEST(cli_batch_goes_on)
{
    char a[512], b[512], args[1400];
    tu_tmpname(a, sizeof a, ".mtx");
    tu_tmpname(b, sizeof b, ".mtx");
    snprintf(args, sizeof args, "--engine cpu --generate bordered:30x30x1 --write-matrix %s -q", a);
    tu_assert_exit(tu_run(args), 0);
    snprintf(args, sizeof args, "--engine cpu --generate hub:40 --write-matrix %s -q", b);
    tu_assert_exit(tu_run(args), 0);
    snprintf(args, sizeof args, "--engine cpu --time-limit 1e-9 -p gspai-opt --format csv %s %s", a, b);
    tu_cmd_out r = tu_run(args);
    tu_assert_exit(r, 2);
    int rows = 0;
    for (const char *p = r.text; (p = strstr(p, "not built: the time limit passed")) != NULL; p++) rows++;
    ck_assert_msg(rows == 2, "%d rows stopped in the setup:\n%s", rows, r.text);
    free(r.text);
    remove(a), remove(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("time_limit");
    TCase *tc = tu_add_tcase(s, "setups", 600);
    tcase_add_test(tc, cpu_setups_stop_at_every_stage);
    tcase_add_test(tc, cuda_setups_stop_at_every_stage);
    tcase_add_test(tc, deadline_already_passed);
    tcase_add_test(tc, cli_batch_goes_on);
    return tu_run_suite(s);
}
