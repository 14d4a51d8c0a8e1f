/* check_cpu_threads.c - the CPU engine's threads (src/engine/cpu_team.h): the
 * thread rule and the floor probe's arithmetic as pure functions, the
 * region's dispatch (every part of every kernel runs once), and solves that
 * give the same numbers at 1, 2 and 3 threads. No timing is asserted. */
#include <omp.h>
#include <stdatomic.h>

#include "cliutil.h"
#include "cpu_team.h"
#include "engine.h"
#include "gen.h"
#include "krylov.h"
#include "precond.h"
#include "testutil.h"

START_TEST(the_thread_rule_is_a_function_of_bytes_and_the_cap)
{
    const double B = GS_CPU_BYTES_PER_THREAD;
    ck_assert_int_eq(gs_cpu_threads_for(0.0, B, 16), 1);
    ck_assert_int_eq(gs_cpu_threads_for(-5.0, B, 16), 1);
    ck_assert_int_eq(gs_cpu_threads_for(NAN, B, 16), 1);
    ck_assert_int_eq(gs_cpu_threads_for(INFINITY, B, 16), 16);
    ck_assert_int_eq(gs_cpu_threads_for(1.999 * B, B, 16), 1); /* each thread has >= B */
    ck_assert_int_eq(gs_cpu_threads_for(2.0 * B, B, 16), 2);
    ck_assert_int_eq(gs_cpu_threads_for(7.5 * B, B, 16), 7);
    ck_assert_int_eq(gs_cpu_threads_for(1e12, B, 16), 16); /* OMP_NUM_THREADS bounds it */
    ck_assert_int_eq(gs_cpu_threads_for(1e12, B, 0), 1);
    ck_assert_int_eq(gs_cpu_threads_for(1e12, 0.0, 8), 1);
    int last = 1; /* never fewer threads for more bytes, and the same answer twice */
    for (double bytes = 1.0; bytes < 1e10; bytes *= 1.37) {
        const int t = gs_cpu_threads_for(bytes, B, 64);
        ck_assert_int_ge(t, last);
        ck_assert_int_eq(t, gs_cpu_threads_for(bytes, B, 64));
        last = t;
    }
}
END_TEST

START_TEST(a_region_keeps_the_faster_arm_of_its_trial)
{
    ck_assert(!gs_team_prefer_alone(1e6, 1e-3, 1e6, 2e-3)); /* the team twice as fast */
    ck_assert(gs_team_prefer_alone(1e6, 2e-3, 1e6, 1e-3));  /* alone twice as fast */
    ck_assert(gs_team_prefer_alone(2e6, 2e-3, 1e6, 1e-3));  /* the same rate: fewer threads */
    ck_assert(!gs_team_prefer_alone(1e6, 1e-3, 0.0, 0.0));  /* no alone kernels: keep the team */
    ck_assert(gs_team_prefer_alone(0.0, 0.0, 1e6, 1e-3));   /* no team kernels */
    ck_assert(!gs_team_prefer_alone(1e6, 1e-3, 1e6, NAN));
}
END_TEST

START_TEST(the_floor_probe_arithmetic_is_streams)
{
    const double MB = 1024.0 * 1024.0;
    ck_assert_int_eq(gs_cpu_triad_length(0.0), (int64_t)(64.0 * MB / 24.0)); /* unknown cache */
    ck_assert_int_eq(gs_cpu_triad_length(-1.0), (int64_t)(64.0 * MB / 24.0));
    ck_assert_int_eq(gs_cpu_triad_length(32.0 * MB), (int64_t)(128.0 * MB / 24.0));
    ck_assert_int_eq(gs_cpu_triad_length(1024.0 * MB), (int64_t)(256.0 * MB / 24.0));
    /* two reads and one write of 8 bytes an element, per second */
    ck_assert_double_eq(gs_cpu_triad_bandwidth(1000, 1e-3), 24.0e6);
    ck_assert_double_eq(gs_cpu_triad_bandwidth(1 << 20, 0.5), 24.0 * (1 << 20) * 2.0);
    ck_assert_double_eq(gs_cpu_triad_bandwidth(1000, 0.0), 0.0);
    ck_assert_double_eq(gs_cpu_triad_bandwidth(0, 1.0), 0.0);
    /* the measurement itself answers something positive (its value is the machine's) */
    ck_assert(gs_cpu_triad_measure(2, 1 << 16, 2) > 0.0);
}
END_TEST

/* ---- the region: every part of every kernel runs exactly once ---- */
enum { KERNELS = 3000, MAX_PARTS = 5 };
typedef struct count_args {
    atomic_int runs[MAX_PARTS];
    int bad_parts;
} count_args;

static void count_kernel(void *args, int part, int parts)
{
    count_args *c = args;
    if (parts < 1 || parts > MAX_PARTS || part < 0 || part >= parts) c->bad_parts = 1;
    else atomic_fetch_add(&c->runs[part], 1);
}

typedef struct region_ctx {
    gs_team *team;
    count_args *c;
} region_ctx;

static int many_kernels(void *ctx)
{
    region_ctx *r = ctx;
    for (int k = 0; k < KERNELS; k++) gs_team_run_parts(r->team, 1 + k % MAX_PARTS, count_kernel, r->c);
    return 7; /* handed back by the region */
}

/* ---- a decided trial serves the next regions of the same shape ---- */
typedef struct trial_ctx {
    gs_team *team;
    count_args *c;
    double first_bytes;
    int arm_after_first; /* the team's arm right after the region's first kernel */
} trial_ctx;

static int trial_kernels(void *ctx)
{
    trial_ctx *r = ctx;
    for (int k = 0; k < 4 * GS_TEAM_TRIAL; k++) {
        gs_team_run(r->team, k == 0 ? r->first_bytes : 64.0 * GS_CPU_BYTES_PER_THREAD,
                    count_kernel, r->c);
        if (k == 0) r->arm_after_first = r->team->arm;
    }
    return 0;
}

START_TEST(a_decided_trial_serves_the_next_region_of_the_same_shape)
{
    gs_team t;
    gs_team_init(&t, 2);
    count_args c;
    for (int p = 0; p < MAX_PARTS; p++) atomic_init(&c.runs[p], 0);
    c.bad_parts = 0;
    trial_ctx r = {&t, &c, 64.0 * GS_CPU_BYTES_PER_THREAD, -1};
    ck_assert_int_eq(gs_team_region(&t, 2, trial_kernels, &r), 0);
    ck_assert_int_eq(r.arm_after_first, 0); /* the first region tries both arms */
    ck_assert_int_eq(t.cache_valid, 1);
    const int decided = t.cache_alone;
    ck_assert_int_eq(gs_team_region(&t, 2, trial_kernels, &r), 0);
    ck_assert_int_eq(r.arm_after_first, 2); /* same shape: the decision, no trial */
    ck_assert_int_eq(t.last_alone, decided);
    r.first_bytes = 65.0 * GS_CPU_BYTES_PER_THREAD; /* another shape: a trial again */
    ck_assert_int_eq(gs_team_region(&t, 2, trial_kernels, &r), 0);
    ck_assert_int_eq(r.arm_after_first, 0);
    ck_assert_int_eq(c.bad_parts, 0);
    gs_team_destroy(&t);
}
END_TEST

START_TEST(a_region_runs_every_part_of_every_kernel_once)
{
    const int threads = 1 + _i; /* 1 (no region), 2, 3 */
    gs_team t;
    gs_team_init(&t, threads);
    count_args c;
    for (int p = 0; p < MAX_PARTS; p++) atomic_init(&c.runs[p], 0);
    c.bad_parts = 0;
    region_ctx r = {&t, &c};
    ck_assert_int_eq(gs_team_region(&t, threads, many_kernels, &r), 7);
    ck_assert_int_eq(c.bad_parts, 0);
    for (int p = 0; p < MAX_PARTS; p++) { /* part p exists in kernels with parts > p */
        int want = 0;
        for (int k = 0; k < KERNELS; k++) want += 1 + k % MAX_PARTS > p;
        ck_assert_int_eq(atomic_load(&c.runs[p]), want);
    }
    ck_assert_int_eq(t.region_threads, 0);
    /* outside a region, the same through OpenMP */
    many_kernels(&r);
    ck_assert_int_eq(c.bad_parts, 0);
    gs_team_destroy(&t);
}
END_TEST

/* ---- solves at 1, 2 and 3 threads: the same numbers ---- */
typedef struct threaded_solve {
    gs_krylov_result res;
    double *x;
    int threads;
} threaded_solve;

/* A x = A 1 from x = 0 on a CPU engine with every kernel on `threads`
 * (0: by work), planned and run in a region as the command line does. */
static void solve_with(const gs_csr *A, const char *method, const char *precond, int threads,
                       threaded_solve *out)
{
    gs_error err = {0};
    gs_engine *e = NULL;
    gs_mat *Ae = NULL;
    gs_pc *pc = NULL;
    gs_vec *b = NULL, *x = NULL;
    const int32_t n = A->n_rows;
    double *ones = malloc((size_t)n * sizeof(double)), *bh = malloc((size_t)n * sizeof(double));
    for (int32_t i = 0; i < n; i++) ones[i] = 1.0;
    gs_csr_spmv(A, ones, bh);
    ck_assert_int_eq(gs_engine_cpu_create(&e, &err), GS_OK);
    gs_engine_cpu_set_threads(e, threads, 0.0);
    ck_assert_int_eq(e->ops->mat_create(e, A, GS_FP64, &Ae), GS_OK);
    gs_params params = {0};
    ck_assert_msg(gs_pc_create(gs_pc_find(precond), e, &params, A, Ae, &pc, &err) == GS_OK, "%s",
                  err.msg);
    ck_assert_int_eq(e->ops->solve_plan(e, gs_csr_stream_bytes(A, GS_FP64)), GS_OK);
    out->threads = e->threads;
    ck_assert(e->copy_bandwidth > 0.0); /* the floor is measured for the threads planned */
    ck_assert_int_eq(e->ops->vec_create(e, n, &b), GS_OK);
    ck_assert_int_eq(e->ops->vec_create(e, n, &x), GS_OK);
    ck_assert_int_eq(e->ops->vec_upload(e, b, bh), GS_OK);
    ck_assert_int_eq(e->ops->set(e, x, 0.0), GS_OK);
    gs_krylov_opts o = {.tol = 1e-8, .maxit = 3000, .restart = 30, .idr_s = 4,
                        .check_every = 1, .use_capture = 1};
    memset(&out->res, 0, sizeof out->res);
    ck_assert_int_eq(gs_method_run(gs_method_find(method), e, Ae, pc, b, x, &o, &out->res), GS_OK);
    out->x = malloc((size_t)n * sizeof(double));
    ck_assert_int_eq(e->ops->vec_download(e, x, out->x), GS_OK);
    e->ops->vec_destroy(e, b);
    e->ops->vec_destroy(e, x);
    gs_pc_destroy(pc);
    e->ops->mat_destroy(e, Ae);
    gs_engine_destroy(e);
    free(ones);
    free(bh);
}

/* The dots add fixed blocks of GS_CPU_DOT_BLOCK in a fixed order and every
 * other kernel writes each entry from the same operands whatever thread
 * does it, so the margin a reduction order would need is zero here: the
 * same iterations and the same x, bit for bit. Problems of several blocks
 * (poisson3d:24 has 13824 rows), so the parts split them differently. */
static const char *methods[] = {"cg", "bicgstab", "gmres", "idr"};

START_TEST(solves_agree_at_one_two_and_three_threads)
{
    const char *method = methods[_i];
    gs_csr A;
    gs_error err = {0};
    char name[64];
    const char *spec = _i == 0 ? "poisson3d:24" : "convdiff3d:16";
    ck_assert_msg(gs_generate(spec, &A, name, sizeof name, &err) == GS_OK, "%s", err.msg);
    omp_set_num_threads(3); /* the engines' cap: 3 threads, even on fewer cores */
    threaded_solve one, two, three, auto_;
    solve_with(&A, method, "jacobi", 1, &one);
    solve_with(&A, method, "jacobi", 2, &two);
    solve_with(&A, method, "jacobi", 3, &three);
    solve_with(&A, method, "jacobi", 0, &auto_);
    ck_assert_int_eq(one.threads, 1);
    ck_assert_int_eq(two.threads, 2);
    ck_assert_int_eq(three.threads, 3);
    ck_assert_msg(one.res.reason == GS_REASON_CONVERGED, "%s: %s", method,
                  gs_reason_name(one.res.reason));
    const threaded_solve *other[3] = {&two, &three, &auto_};
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(other[k]->res.reason, one.res.reason);
        ck_assert_int_eq(other[k]->res.iterations, one.res.iterations);
        ck_assert_msg(other[k]->res.rel_residual == one.res.rel_residual,
                      "%s at %d threads: residual %.17g, at 1 %.17g", method, other[k]->threads,
                      other[k]->res.rel_residual, one.res.rel_residual);
        ck_assert_msg(memcmp(other[k]->x, one.x, (size_t)A.n_rows * sizeof(double)) == 0,
                      "%s at %d threads: x differs from 1 thread's", method, other[k]->threads);
    }
    threaded_solve *all[4] = {&one, &two, &three, &auto_};
    for (int k = 0; k < 4; k++) {
        gs_krylov_result_free(&all[k]->res);
        free(all[k]->x);
    }
    gs_csr_free(&A);
}
END_TEST

/* The command line: the report says the threads, how they were chosen and
 * the floor; a bad --threads is a usage error. */
START_TEST(the_report_names_threads_policy_and_floor)
{
    tu_cmd_out o = tu_run_env("OMP_NUM_THREADS=2", "-e cpu data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "threads    1 (by work, 1 of 2)"); /* 512 rows: one thread pays */
    TU_ASSERT_HAS(o, "triad bandwidth");
    TU_ASSERT_HAS(o, "x the floor");
    free(o.text);
    o = tu_run_env("OMP_NUM_THREADS=2", "-e cpu --threads 2 --format csv data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    char v[128];
    ck_assert(tu_csv_field(o.text, 0, "threads", v, sizeof v));
    ck_assert_msg(strcmp(v, "2") == 0 || strcmp(v, "1") == 0, "threads '%s'", v); /* 1: gone alone */
    ck_assert(tu_csv_field(o.text, 0, "thread_policy", v, sizeof v));
    ck_assert_msg(strstr(v, "fixed (--threads), 2 of 2") != NULL, "policy '%s'", v);
    ck_assert(tu_csv_field(o.text, 0, "floor_ratio", v, sizeof v));
    ck_assert_msg(atof(v) > 0.0, "floor_ratio '%s' on a CPU run", v);
    free(o.text);
    o = tu_run_env("OMP_NUM_THREADS=1", "-e cpu --threads 8 data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "threads    1 (fixed (--threads), 1 of 1)"); /* OMP_NUM_THREADS bounds */
    free(o.text);
    o = tu_run("-e cpu --threads -1 data/poisson3d_8.mtx");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "--threads");
    free(o.text);
    o = tu_run("-e cpu --thread-bytes 10 data/poisson3d_8.mtx");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "--thread-bytes");
    free(o.text);
    /* a small --thread-bytes gives the 512-row problem both threads */
    o = tu_run_env("OMP_NUM_THREADS=2", "-e cpu --thread-bytes 4096 data/poisson3d_8.mtx");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "(by work, 2 of 2"); /* then 1 where the cores are busy */
    free(o.text);
}
END_TEST

static Suite *cpu_threads_suite(void)
{
    Suite *s = suite_create("cpu_threads");
    TCase *tc = tu_add_tcase(s, "rule and floor", 60);
    tcase_add_test(tc, the_thread_rule_is_a_function_of_bytes_and_the_cap);
    tcase_add_test(tc, the_floor_probe_arithmetic_is_streams);
    tcase_add_test(tc, a_region_keeps_the_faster_arm_of_its_trial);
    tcase_add_test(tc, a_decided_trial_serves_the_next_region_of_the_same_shape);
    tcase_add_loop_test(tc, a_region_runs_every_part_of_every_kernel_once, 0, 3);
    TCase *ts = tu_add_tcase(s, "solves", 300);
    tcase_add_loop_test(ts, solves_agree_at_one_two_and_three_threads, 0, 4);
    tcase_add_test(ts, the_report_names_threads_policy_and_floor);
    return s;
}

int main(void) { return tu_run_suite(cpu_threads_suite()); }
