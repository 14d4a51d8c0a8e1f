/* check_cuda_dist.c - several processes on the CUDA engine (docs/multigpu.md),
 * against one process on the CUDA engine: CG + Jacobi with 2 and 3 ranks on
 * however many GPUs there are (ranks beyond the GPUs share one: the
 * "mpi-staged" transport, as NCCL refuses two ranks on one device; with 2
 * GPUs or more, 2 ranks write into each other's GPUs, "ipc", checked
 * against NCCL and the staged path) gives the same iterations and residuals;
 * block-local FSAI, ISAI, SPAI, GSPAI-Opt (their GPU setups) give the
 * iterations of one process building the same M (--pc-blocks P, and on a
 * block-diagonal matrix the global definition); adaptive checks stop every
 * rank at the same check, within a block of the first crossing of tol; a
 * bad input fails once. Every
 * mpirun under timeout. Without a device (or MPI) the suite says skipped. */
#include "dist.h"
#include "distutil.h"
#include "engine.h"
#include "testutil.h"

static int g_devices;

/* One GPU may run CG and BiCGSTAB in its fused kernel, which checks the
 * residual every iteration; the ranks run the host loop (no capture with NCCL), which
 * by default checks adaptively and may stop a few iterations past
 * convergence (up to half the iterations predicted left at its last check:
 * 17 against 12 on the block-diagonal matrix). Iteration counts compare only
 * at the same checks: every iteration on both sides. */
static td_result gd_csv(int ranks, const char *args)
{
    char full[1024];
    snprintf(full, sizeof full, "--check-every 1 %s", args);
    return td_csv(ranks, full, 0);
}

START_TEST(jacobi_matches_one_process_on_gpus)
{
    const char *args[] = {"-e cuda --generate poisson3d:24 -p jacobi -m cg",
                          "-e cuda --generate convdiff3d:20 -p jacobi -m bicgstab",
                          "-e cuda --generate poisson3d:24 -p jacobi -m gmres --restart 30"};
    for (int t = 0; t < 3; t++) {
        td_result one = gd_csv(0, args[t]);
        for (int ranks = 2; ranks <= 3; ranks++)
            td_assert_same(one, gd_csv(ranks, args[t]), t == 1 ? 1 : 0, 1e-5);
        if (t == 0) { /* the halo on a second stream, overlapped (opt-in) */
            char with[512];
            snprintf(with, sizeof with, "--overlap on %s", args[t]);
            td_result overlapped = gd_csv(2, with);
            td_assert_same(one, overlapped, 0, 1e-5);
        }
    }
}
END_TEST

/* Adaptive checks (the default --check-every 0) across ranks on GPUs: every
 * rank plans its checks from the same all-reduced residuals, so all stop at
 * the same check; that check is no earlier than the first iteration whose
 * residual is within tol (where the same ranks checking every iteration
 * stop) and, on this SPD problem whose CG residual keeps falling past tol,
 * at most one block of checks later (KR_AUTO_MAX = 16 iterations). */
START_TEST(adaptive_checks_across_ranks_on_gpus)
{
    const char *args = "-e cuda --generate poisson3d:24 -p jacobi -m cg";
    for (int ranks = 2; ranks <= 3; ranks++) {
        td_result every = gd_csv(ranks, args), adaptive = td_csv(ranks, args, 0);
        ck_assert_str_eq(every.converged, "yes");
        ck_assert_str_eq(adaptive.converged, "yes");
        ck_assert_msg(adaptive.iterations >= every.iterations &&
                          adaptive.iterations <= every.iterations + 16,
                      "%d ranks: adaptive checks stopped at %ld, every iteration at %ld", ranks,
                      adaptive.iterations, every.iterations);
        ck_assert_msg(adaptive.true_rel <= 1e-7, "%d ranks: true residual %g", ranks,
                      adaptive.true_rel);
    }
}
END_TEST

/* --overlap reaches the CUDA transport (cuda/dist/halo_cuda.cu, from the
 * inner engine's switches) and the report: off by default, on when asked,
 * off when asked over the environment's GS_DIST_OVERLAP=1; --loop device
 * or fused is refused under mpirun (no loop on the device there). */
START_TEST(overlap_option_reaches_the_transport)
{
    static const struct { const char *env, *args, *want; } cases[] = {
        {"", "", "0"},
        {"", "--overlap on", "1"},
        {"GS_DIST_OVERLAP=1", "--overlap off", "0"},
        {"GS_DIST_OVERLAP=1", "", "1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], prefix[512], buf[16];
        snprintf(prefix, sizeof prefix, "%s timeout -k 5 %d mpirun %s -np 2", cases[i].env,
                 TD_TIMEOUT_S, td_mpirun_flags());
        snprintf(args, sizeof args, "-e cuda --generate poisson3d:16 --format csv %s",
                 cases[i].args);
        tu_cmd_out o = tu_run_env(prefix, args);
        tu_assert_exit(o, 0);
        ck_assert_msg(tu_csv_field(o.text, 0, "halo_overlap", buf, sizeof buf), "%s", o.text);
        ck_assert_msg(strcmp(buf, cases[i].want) == 0, "case %zu: halo_overlap %s", i, buf);
        free(o.text);
    }
    td_assert_one_failure(2, "-e cuda --generate poisson3d:8 --loop device", 1,
                          "--loop device: under mpirun the iterations run on the host loop");
}
END_TEST

/* cg1 on 2 and 3 ranks (NCCL where the GPUs allow) against cg on one GPU,
 * its sums over the ranks one an iteration (the NCCL group of the pending
 * runs), and the merged sums the same answer as one collective a dot
 * (GS_DIST_MERGE=0). */
START_TEST(one_reduction_cg_on_gpus)
{
    const char *cg = "-e cuda --generate poisson3d:24 -p jacobi -m cg";
    const char *cg1 = "-e cuda --generate poisson3d:24 -p jacobi -m cg1";
    td_result one = gd_csv(0, cg);
    for (int ranks = 2; ranks <= 3; ranks++) td_assert_same(one, gd_csv(ranks, cg1), 2, 1e-5);
    const double sums = td_number(2, cg1, "reductions_per_iteration");
    ck_assert_msg(sums >= 1.0 && sums < 1.15, "cg1: %g sums an iteration", sums);
    setenv("GS_DIST_MERGE", "0", 1);
    td_result unmerged = gd_csv(2, cg);
    unsetenv("GS_DIST_MERGE");
    td_assert_same(gd_csv(2, cg), unmerged, 0, 1e-12);
}
END_TEST

START_TEST(transport_follows_the_devices)
{
    char buf[32];
    tu_cmd_out o = td_run(2, "-e cuda --generate poisson3d:16 --format csv");
    tu_assert_exit(o, 0);
    ck_assert(tu_csv_field(o.text, 0, "transport", buf, sizeof buf));
    ck_assert_str_eq(buf, g_devices >= 2 ? "ipc" : "mpi-staged");
    ck_assert(tu_csv_field(o.text, 0, "devices", buf, sizeof buf));
    ck_assert_int_eq(atoi(buf), g_devices >= 2 ? 2 : 1);
    free(o.text);
    if (g_devices >= 2) { /* NCCL and the host path on separate GPUs too, same answer */
        const char *args[] = {"-e cuda --generate poisson3d:24 -p jacobi -m cg",
                              "-e cuda --generate convdiff3d:20 -p jacobi -m gmres --restart 40"};
        for (int t = 0; t < 2; t++) {
            td_result ipc = gd_csv(2, args[t]);
            setenv("GS_DIST_TRANSPORT", "mpi-staged", 1);
            td_result staged = gd_csv(2, args[t]);
            setenv("GS_DIST_TRANSPORT", "nccl", 1);
            td_result nccl = gd_csv(2, args[t]);
            unsetenv("GS_DIST_TRANSPORT");
            td_assert_same(ipc, staged, 0, 1e-5);
            td_assert_same(ipc, nccl, 0, 1e-5);
            /* ipc's iterations are captured and replayed (its epochs live on the
             * device): the same arithmetic as issuing them one by one */
            char plain[512];
            snprintf(plain, sizeof plain, "--no-graph %s", args[t]);
            td_assert_same(ipc, gd_csv(2, plain), 0, 1e-13);
        }
    }
}
END_TEST

/* gd_csv's run with the transport it used asserted: an ipc case that fell
 * back to NCCL would test nothing of ipc. */
static td_result gd_csv_on(int ranks, const char *args, const char *transport)
{
    char full[1024], used[32];
    snprintf(full, sizeof full, "--check-every 1 %s", args);
    td_result r = td_csv_field(ranks, full, 0, "transport", used, sizeof used);
    ck_assert_msg(strcmp(used, transport) == 0, "%s: transport %s, want %s", args, used, transport);
    return r;
}

/* ipc's sums over the ranks carry at most 256 slots a kernel (a row of the
 * inbox); more are summed in rounds (cuda/dist/halo_ipc.cu, ipc_sum_round).
 * With GS_DIST_IPC_ROUND=1 and 3 every sum of CG (r.r with r.z: two
 * slots) and GMRES (V'w: up to restart + 1) runs in rounds that cut runs
 * at every place; each slot is still the sum of the same parts in rank
 * order, so the answers are ipc's in one round to the bit (1e-13 leaves
 * only the printing). GMRES(300) on a problem that takes more than 256
 * iterations in its first cycle sums V'w of more than 256 slots at the
 * default size, against NCCL's sums. */
START_TEST(ipc_sums_in_rounds)
{
    const char *cg = "-e cuda --generate poisson3d:24 -p jacobi -m cg";
    const char *gm = "-e cuda --generate poisson3d:24 -p jacobi -m gmres --restart 30";
    /* 317 iterations, one cycle, on one CPU process and on 2 ranks */
    const char *big = "-e cuda --generate aniso3d:40 -p none --tol 1e-12 -m gmres --restart 300";
    for (int t = 0; t < 2; t++) {
        const char *args = t == 0 ? cg : gm;
        const td_result whole = gd_csv_on(2, args, "ipc");
        setenv("GS_DIST_IPC_ROUND", "1", 1);
        const td_result ones = gd_csv_on(2, args, "ipc");
        setenv("GS_DIST_IPC_ROUND", "3", 1);
        const td_result threes = gd_csv_on(2, args, "ipc");
        unsetenv("GS_DIST_IPC_ROUND");
        td_assert_same(whole, ones, 0, 1e-13);
        td_assert_same(whole, threes, 0, 1e-13);
    }
    const td_result ipc = gd_csv_on(2, big, "ipc");
    ck_assert_msg(ipc.iterations > 256, "%ld iterations: no sum of more than 256 slots",
                  ipc.iterations);
    setenv("GS_DIST_TRANSPORT", "nccl", 1);
    const td_result nccl = gd_csv_on(2, big, "nccl");
    unsetenv("GS_DIST_TRANSPORT");
    td_assert_same(ipc, nccl, 0, 1e-5);
    printf("check_cuda_dist: ran ipc sums in rounds (GS_DIST_IPC_ROUND=1, 3; gmres %ld "
           "iterations in one cycle, against nccl)\n", ipc.iterations);
    fflush(stdout);
}
END_TEST

/* The ipc transport's set-up failing on one rank only (GS_DIST_IPC_FAIL:
 * its engine state, or a matrix's, never made there): the other ranks hold
 * state that rank lacks, and must still leave together, with one message
 * and the allocation failure's exit code (3) on every rank, not wait in a
 * barrier of the teardown for ever (timeout's 124 would show that). */
START_TEST(ipc_failure_on_one_rank_ends_every_rank)
{
    const char *at[] = {"engine:1", "engine:0", "matrix:1", "matrix:0"};
    for (int i = 0; i < 4; i++) {
        setenv("GS_DIST_IPC_FAIL", at[i], 1);
        td_assert_one_failure(2, "-e cuda --generate poisson3d:16 -p jacobi -m cg", 3,
                              "GS_DIST_IPC_FAIL");
    }
    unsetenv("GS_DIST_IPC_FAIL");
    printf("check_cuda_dist: ran ipc set-up failing on one rank (engine, matrix; rank 0, 1)\n");
    fflush(stdout);
}
END_TEST

START_TEST(block_local_gpu_setups_match_their_definition)
{
    char path[256], args[512];
    tu_tmpname(path, sizeof path, ".mtx");
    const char *pcs[] = {"fsai", "isai -m cg", "spai -m bicgstab"};
    for (int ranks = 2; ranks <= 3; ranks++) {
        td_write_block_diagonal(path, 10, ranks);
        for (int t = 0; t < 3; t++) {
            snprintf(args, sizeof args, "-e cuda -p %s %s", pcs[t], path);
            td_result one = gd_csv(0, args), many = gd_csv(ranks, args);
            td_assert_same(one, many, t == 2 ? 1 : 0, 1e-5);
        }
    }
    remove(path);
}
END_TEST

/* With a halo: P ranks against one process building the same block-local
 * M (--pc-blocks P), both with the GPU setups. */
START_TEST(block_local_gpu_setups_match_pc_blocks)
{
    const char *pcs[] = {"fsai -m cg", "isai -m cg", "gspai-opt -m bicgstab"};
    char one[320], many[256];
    for (int ranks = 2; ranks <= 3; ranks++)
        for (int t = 0; t < 3; t++) {
            snprintf(many, sizeof many, "-e cuda --generate poisson3d:20 -p %s", pcs[t]);
            snprintf(one, sizeof one, "%s --pc-blocks %d", many, ranks);
            td_assert_same(gd_csv(0, one), gd_csv(ranks, many), t == 2 ? 1 : 0, 1e-5);
        }
}
END_TEST

START_TEST(bad_input_fails_once_on_gpus)
{
    td_assert_one_failure(2, "-e cuda /nonexistent/b.mtx", 1, "/nonexistent/b.mtx");
    td_assert_one_failure(2, "-e cuda --generate poisson3d:8 -p mic", 1, "no distributed version");
}
END_TEST

int main(void)
{
    g_devices = gs_cuda_device_count();
    if (g_devices == 0) {
        printf("check_cuda_dist: skipped: no CUDA device\n");
        Suite *s = suite_create("cuda_dist");
        return tu_run_suite(s);
    }
    Suite *s = suite_create("cuda_dist");
    if (td_mpi_ready()) {
        TCase *t = tu_add_tcase(s, "mpirun on GPUs", 900);
        tcase_add_test(t, jacobi_matches_one_process_on_gpus);
        tcase_add_test(t, adaptive_checks_across_ranks_on_gpus);
        tcase_add_test(t, overlap_option_reaches_the_transport);
        tcase_add_test(t, one_reduction_cg_on_gpus);
        tcase_add_test(t, transport_follows_the_devices);
        tcase_add_test(t, block_local_gpu_setups_match_their_definition);
        tcase_add_test(t, block_local_gpu_setups_match_pc_blocks);
        tcase_add_test(t, bad_input_fails_once_on_gpus);
        if (g_devices >= 2) { /* ipc: a GPU a rank */
            tcase_add_test(t, ipc_sums_in_rounds);
            tcase_add_test(t, ipc_failure_on_one_rank_ends_every_rank);
        }
        printf("check_cuda_dist: %d GPUs: %s\n", g_devices,
               g_devices >= 2 ? "the ipc cases run (transport asserted), and ipc against nccl "
                                "and mpi-staged"
                              : "ranks share a GPU (mpi-staged); the ipc and nccl cases are "
                                "skipped (they need 2 GPUs)");
        fflush(stdout);
    } else {
        printf("check_cuda_dist: skipped: %s\n",
               GS_HAVE_MPI ? "no mpirun on PATH" : "built without MPI (make MPI=1)");
    }
    return tu_run_suite(s);
}
