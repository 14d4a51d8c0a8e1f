/* check_dist.c - several processes (docs/multigpu.md) on the CPU engine.
 * In every build: the nonzero-balanced partition, the split of a row block
 * into diagonal block, off-block part and halo (y = A x recomposed exactly),
 * and per-rank generation (row blocks equal the whole matrix's rows). With
 * make MPI=1 and mpirun present: gpusolve under mpirun with 2 and 3 ranks
 * gives the iterations and residuals of one process (jacobi exactly;
 * block-local preconditioners against one process with --pc-blocks P, and
 * on a block-diagonal matrix, where block-local is the global definition),
 * the same solution in --output, and bad input
 * fails on every rank with one message and a non-zero exit, never a hang
 * (every mpirun runs under timeout). Without MPI those say "skipped". */
#include <math.h>

#include "dist.h"
#include "distutil.h"
#include "gen.h"
#include "mmio.h"
#include "testutil.h"

/* Rows of length 1 + (i * 7) % 13: uneven, so rows and nonzeros disagree. */
static void uneven_matrix(int32_t n, gs_csr *A)
{
    gs_error err = {0};
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++) nnz += 1 + (i * 7) % 13;
    ck_assert_int_eq(gs_csr_alloc(n, n, nnz, 1, A, &err), GS_OK);
    tu_rng rng = tu_rng_seed(23);
    int64_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        const int len = 1 + (i * 7) % 13;
        for (int j = 0; j < len; j++) { /* sorted distinct columns spread over the matrix */
            A->col[k] = (int32_t)(((int64_t)j * n) / len + (i % 3)) % n;
            A->val[k] = tu_uniform(&rng) - 0.5;
            k++;
        }
        A->row_ptr[i + 1] = k;
    }
}

START_TEST(partition_balances_nonzeros)
{
    gs_csr A;
    gs_error err = {0};
    uneven_matrix(1000, &A);
    for (int parts = 1; parts <= 7; parts++) {
        int64_t begin[8];
        ck_assert_int_eq(gs_dist_partition(&A, parts, begin, &err), GS_OK);
        ck_assert_int_eq(begin[0], 0);
        ck_assert_int_eq(begin[parts], 1000);
        for (int b = 0; b < parts; b++) {
            ck_assert_int_lt(begin[b], begin[b + 1]); /* no empty block */
            const double nnz = (double)(A.row_ptr[begin[b + 1]] - A.row_ptr[begin[b]]);
            /* within one row (at most 13 nonzeros) of the ideal at each end */
            ck_assert_double_le(fabs(nnz - (double)A.nnz / parts), 2 * 13);
        }
    }
    ck_assert_int_eq(gs_dist_partition(&A, 1001, (int64_t[1002]){0}, &err), GS_ERR_INPUT);
    gs_csr_free(&A);
}
END_TEST

START_TEST(split_recomposes_the_product)
{
    gs_csr A;
    gs_error err = {0};
    uneven_matrix(300, &A);
    double x[300], y[300];
    tu_rng rng = tu_rng_seed(5);
    for (int i = 0; i < 300; i++) x[i] = tu_uniform(&rng);
    gs_csr_spmv(&A, x, y);
    int64_t begin[4];
    ck_assert_int_eq(gs_dist_partition(&A, 3, begin, &err), GS_OK);
    for (int b = 0; b < 3; b++) {
        gs_csr R = A; /* rows begin[b] .. begin[b+1] as a view */
        R.n_rows = (int32_t)(begin[b + 1] - begin[b]);
        int64_t *rp = malloc((size_t)(R.n_rows + 1) * sizeof *rp);
        for (int32_t i = 0; i <= R.n_rows; i++) rp[i] = A.row_ptr[begin[b] + i] - A.row_ptr[begin[b]];
        R.row_ptr = rp;
        R.col = A.col + A.row_ptr[begin[b]];
        R.val = A.val + A.row_ptr[begin[b]];
        R.nnz = rp[R.n_rows];
        gs_dist_split s;
        ck_assert_int_eq(gs_dist_split_rows(&R, begin[b], &s, &err), GS_OK);
        ck_assert_int_eq(s.diag.nnz + s.off.nnz, R.nnz);
        double *yl = calloc((size_t)R.n_rows, sizeof *yl), *h = malloc(((size_t)s.n_halo + 1) * sizeof *h);
        for (int32_t k = 0; k < s.n_halo; k++) {
            ck_assert(s.halo[k] < begin[b] || s.halo[k] >= begin[b + 1]);
            if (k) ck_assert_int_lt(s.halo[k - 1], s.halo[k]);
            h[k] = x[s.halo[k]];
        }
        gs_csr_spmv(&s.diag, x + begin[b], yl);
        for (int32_t r = 0; r < s.n_off_rows; r++)
            for (int64_t k = s.off.row_ptr[r]; k < s.off.row_ptr[r + 1]; k++)
                yl[s.off_rows[r]] += s.off.val[k] * h[s.off.col[k]];
        for (int32_t i = 0; i < R.n_rows; i++)
            ck_assert_double_le(fabs(yl[i] - y[begin[b] + i]), 1e-12 * (1 + fabs(y[begin[b] + i])));
        free(yl), free(h), free(rp);
        gs_dist_split_free(&s);
    }
    gs_csr_free(&A);
}
END_TEST

START_TEST(generated_blocks_are_the_whole_matrix_rows)
{
    const char *specs[] = {"poisson3d:5x4x6", "poisson3d27:4", "convdiff3d:5"};
    for (int t = 0; t < 3; t++) {
        gs_csr W;
        gs_gen_plan plan;
        gs_error err = {0};
        ck_assert_int_eq(gs_generate(specs[t], &W, NULL, 0, &err), GS_OK);
        ck_assert_int_eq(gs_generate_plan(specs[t], &plan, &err), GS_OK);
        ck_assert_int_eq(plan.symmetric, gs_csr_is_symmetric(&W, 0.0));
        int64_t begin[4];
        ck_assert_int_eq(gs_dist_partition_rows(gs_generate_plan_row_nnz, &plan, plan.n, 3, begin,
                                                &err), GS_OK);
        int64_t wb[4];
        ck_assert_int_eq(gs_dist_partition(&W, 3, wb, &err), GS_OK);
        for (int b = 0; b < 3; b++) {
            ck_assert_int_eq(begin[b], wb[b]);
            gs_csr R;
            ck_assert_int_eq(gs_generate_plan_rows(&plan, begin[b], begin[b + 1], &R, &err), GS_OK);
            for (int32_t i = 0; i < R.n_rows; i++) {
                const int64_t g = begin[b] + i;
                ck_assert_int_eq(R.row_ptr[i + 1] - R.row_ptr[i], W.row_ptr[g + 1] - W.row_ptr[g]);
                for (int64_t k = 0; k < R.row_ptr[i + 1] - R.row_ptr[i]; k++) {
                    ck_assert_int_eq(R.col[R.row_ptr[i] + k], W.col[W.row_ptr[g] + k]);
                    ck_assert(R.val[R.row_ptr[i] + k] == W.val[W.row_ptr[g] + k]);
                }
            }
            gs_csr_free(&R);
        }
        gs_csr_free(&W);
    }
    gs_error err = {0};
    gs_gen_plan plan;
    ck_assert_int_eq(gs_generate_plan("heat3d:8", &plan, &err), GS_ERR_UNSUPPORTED);
}
END_TEST

/* --pc-blocks on one process: jacobi is block-local already (the same
 * run); fsai on the block-diagonal part drops the couplings across blocks
 * (fewer nonzeros in G, more iterations than the global FSAI). */
START_TEST(pc_blocks_on_one_process)
{
    char buf[64];
    td_result a = td_csv(0, "-e cpu --generate poisson3d:12 -p jacobi", 0);
    td_result b = td_csv(0, "-e cpu --generate poisson3d:12 -p jacobi --pc-blocks 3", 0);
    ck_assert_int_eq(a.iterations, b.iterations);
    ck_assert(a.rel == b.rel);
    tu_cmd_out g = td_run(0, "-e cpu --generate poisson3d:12 -p fsai --format csv");
    tu_cmd_out l = td_run(0, "-e cpu --generate poisson3d:12 -p fsai --pc-blocks 4 --format csv");
    tu_assert_exit(g, 0);
    tu_assert_exit(l, 0);
    ck_assert(tu_csv_field(g.text, 0, "nnz_M", buf, sizeof buf));
    const long nnz_global = atol(buf);
    ck_assert(tu_csv_field(l.text, 0, "nnz_M", buf, sizeof buf));
    ck_assert_int_lt(atol(buf), nnz_global);
    char extra[1024];
    ck_assert(tu_csv_field(l.text, 0, "precond_extra", extra, sizeof extra));
    ck_assert_ptr_nonnull(strstr(extra, "scope=block-local"));
    free(g.text), free(l.text);
    tu_cmd_out o = td_run(0, "-e cpu --generate poisson3d:2 --pc-blocks 9");
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, "fewer than the 9 row blocks");
    free(o.text);
}
END_TEST

/* ---- under mpirun ---- */

/* Block-local preconditioners with a halo (poisson3d: every block couples
 * to its neighbours): P ranks against one process building the same M
 * (--pc-blocks P), with their CPU setups. */
START_TEST(block_local_matches_pc_blocks)
{
    const char *pcs[] = {"fsai -m cg", "isai -m cg", "spai -m bicgstab", "gspai-opt -m bicgstab"};
    char one[320], many[256];
    for (int ranks = 2; ranks <= 3; ranks++)
        for (int t = 0; t < 4; t++) {
            snprintf(many, sizeof many, "-e cpu --generate poisson3d:12 -p %s", pcs[t]);
            snprintf(one, sizeof one, "%s --pc-blocks %d", many, ranks);
            td_assert_same(td_csv(0, one, 0), td_csv(ranks, many, 0), t >= 2 ? 1 : 0, 1e-5);
        }
}
END_TEST

START_TEST(jacobi_matches_one_process)
{
    const char *args[] = {"-e cpu --generate poisson3d:14 -p jacobi -m cg",
                          "-e cpu --generate poisson3d:14 -p none -m cg",
                          "-e cpu --generate convdiff3d:12 -p jacobi -m bicgstab",
                          "-e cpu --generate convdiff3d:12 -p jacobi -m gmres --restart 20",
                          "-e cpu --generate convdiff3d:12 -p jacobi -m idr"};
    for (int t = 0; t < 5; t++) {
        td_result one = td_csv(0, args[t], 0);
        for (int ranks = 2; ranks <= 3; ranks++) {
            td_result many = td_csv(ranks, args[t], 0);
            /* CG and GMRES: the same iterations; BiCGSTAB's recurrences
             * amplify the rounding of reordered sums a little more; IDR(s)
             * draws its shadow space per rank (another random space, so
             * other iterations: only convergence and a 15% band) */
            const long slack = t == 4 ? (long)(0.15 * one.iterations) + 1 : t == 2 ? 1 : 0;
            td_assert_same(one, many, slack, 1e-5);
        }
    }
}
END_TEST

/* One CSV field of a run on `ranks` ranks, as a number. */
static double td_number(int ranks, const char *args, const char *field)
{
    char full[1024], buf[64];
    snprintf(full, sizeof full, "--format csv %s", args);
    tu_cmd_out o = td_run(ranks, full);
    tu_assert_exit(o, 0);
    ck_assert_msg(tu_csv_field(o.text, 0, field, buf, sizeof buf), "no %s:\n%s", field, o.text);
    free(o.text);
    return atof(buf);
}

/* cg1 (one reduction an iteration) on 2 and 3 ranks: cg's iterations on
 * one process within rounding's few, converged; and the sums over the ranks
 * an iteration are what the merged reductions promise: cg1 one, cg two
 * (p.Ap; then r.r with r.z), bicgstab three (r0.v; s.s with t.s and t.t;
 * r.r with r0.r). The counts include the solve's start, so a little above. */
START_TEST(one_reduction_cg_and_merged_sums)
{
    const char *cg = "-e cpu --generate poisson3d:14 -p jacobi -m cg";
    const char *cg1 = "-e cpu --generate poisson3d:14 -p jacobi -m cg1";
    const char *bi = "-e cpu --generate convdiff3d:12 -p jacobi -m bicgstab";
    td_result one = td_csv(0, cg, 0);
    for (int ranks = 2; ranks <= 3; ranks++) {
        td_result many = td_csv(ranks, cg1, 0);
        td_assert_same(one, many, 2, 1e-5);
    }
    const double r1 = td_number(2, cg1, "reductions_per_iteration");
    const double r2 = td_number(2, cg, "reductions_per_iteration");
    const double r3 = td_number(3, bi, "reductions_per_iteration");
    ck_assert_msg(r1 >= 1.0 && r1 < 1.15, "cg1: %g sums an iteration", r1);
    ck_assert_msg(r2 >= 2.0 && r2 < 2.15, "cg: %g sums an iteration", r2);
    ck_assert_msg(r3 >= 3.0 && r3 < 3.15, "bicgstab: %g sums an iteration", r3);
}
END_TEST

START_TEST(file_input_is_scattered)
{
    char path[256], args[512];
    tu_tmpname(path, sizeof path, ".mtx");
    snprintf(args, sizeof args, "-e cpu --generate poisson3d27:9 --write-matrix %s -q", path);
    tu_cmd_out w = td_run(0, args);
    tu_assert_exit(w, 0);
    free(w.text);
    snprintf(args, sizeof args, "-e cpu -p jacobi -m cg --rhs ones %s", path);
    td_result one = td_csv(0, args, 0);
    td_assert_same(one, td_csv(2, args, 0), 0, 1e-5);
    td_assert_same(one, td_csv(3, args, 0), 0, 1e-5);
    remove(path);
}
END_TEST

START_TEST(block_local_preconditioners_match_their_definition)
{
    char path[256], args[512];
    tu_tmpname(path, sizeof path, ".mtx");
    const char *pcs[] = {"fsai", "isai -m cg", "spai -m bicgstab", "gspai-opt -m bicgstab"};
    for (int ranks = 2; ranks <= 3; ranks++) {
        td_write_block_diagonal(path, 6, ranks);
        for (int t = 0; t < 4; t++) {
            snprintf(args, sizeof args, "-e cpu -p %s %s", pcs[t], path);
            td_result one = td_csv(0, args, 0), many = td_csv(ranks, args, 0);
            td_assert_same(one, many, t >= 2 ? 1 : 0, 1e-5);
        }
    }
    remove(path);
}
END_TEST

START_TEST(solution_is_gathered)
{
    char p1[256], p2[256], args[512];
    tu_tmpname(p1, sizeof p1, ".mtx");
    tu_tmpname(p2, sizeof p2, ".mtx");
    snprintf(args, sizeof args, "-e cpu --generate poisson3d:9 -q --tol 1e-12 --output %s", p1);
    tu_cmd_out o = td_run(0, args);
    tu_assert_exit(o, 0);
    free(o.text);
    snprintf(args, sizeof args, "-e cpu --generate poisson3d:9 -q --tol 1e-12 --output %s", p2);
    o = td_run(3, args);
    tu_assert_exit(o, 0);
    free(o.text);
    double *x1 = NULL, *x2 = NULL;
    int64_t n1 = 0, n2 = 0;
    gs_error err = {0};
    ck_assert_int_eq(gs_mm_read_vector_of_length(p1, 729, &x1, &n1, &err), GS_OK);
    ck_assert_int_eq(gs_mm_read_vector_of_length(p2, 729, &x2, &n2, &err), GS_OK);
    ck_assert_double_le(tu_max_abs_diff(x1, x2, 729), 1e-9);
    free(x1), free(x2);
    remove(p1), remove(p2);
}
END_TEST

/* The cpu engine's exchange always overlaps the local product (Isend/Irecv,
 * the diagonal block, Waitall): the report says so, --overlap on is what it
 * does, and --loop host is the loop the ranks run (loop_asked names it). */
START_TEST(the_report_names_the_exchange_and_the_loop)
{
    char buf[32];
    tu_cmd_out o = td_run(2, "-e cpu --generate poisson3d:10 --overlap on --loop host "
                             "--format csv");
    tu_assert_exit(o, 0);
    ck_assert(tu_csv_field(o.text, 0, "halo_overlap", buf, sizeof buf));
    ck_assert_str_eq(buf, "1");
    ck_assert(tu_csv_field(o.text, 0, "loop", buf, sizeof buf));
    ck_assert_str_eq(buf, "host");
    ck_assert(tu_csv_field(o.text, 0, "loop_asked", buf, sizeof buf));
    ck_assert_str_eq(buf, "host");
    free(o.text);
    o = td_run(2, "-e cpu --generate poisson3d:10");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "transport mpi (halo overlapped with the local product)");
    free(o.text);
}
END_TEST

START_TEST(bad_input_fails_on_every_rank_once)
{
    for (int ranks = 2; ranks <= 3; ranks++) {
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 --overlap off", 1,
                              "--overlap off: the cpu engine's MPI exchange always overlaps");
        /* no loop on the device under mpirun (a CUDA build refuses it there;
         * without CUDA, --engine auto is the cpu engine's host loop) */
        td_assert_one_failure(ranks, "--generate poisson3d:8 --loop fused", 1,
                              GS_HAVE_CUDA ? "--loop fused: under mpirun the iterations run "
                                             "on the host loop only"
                                           : "--loop fused: the cpu engine runs the host loop");
        td_assert_one_failure(ranks, "-e cpu /nonexistent/a.mtx", 1, "/nonexistent/a.mtx");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 --tol -1", 1, "--tol");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 -p mic", 1,
                              "no distributed version");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 -p ssor-ai", 1,
                              "no distributed version");
        td_assert_one_failure(ranks, "-e both --generate poisson3d:8", 1, "--engine both");
        td_assert_one_failure(ranks, "-e cpu --generate heat3d:8", 1, "one process");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 --time-limit 5", 1,
                              "--time-limit");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:1", 1, "fewer than the");
        td_assert_one_failure(ranks, "-e cpu --generate poisson3d:8 --pc-blocks 2", 1,
                              "--pc-blocks");
    }
    /* a setup that fails on one block only: an indefinite block for FSAI */
    char path[256];
    tu_tmpname(path, sizeof path, ".mtx");
    tu_write_text(path, "%%MatrixMarket matrix coordinate real general\n4 4 4\n"
                        "1 1 1\n2 2 1\n3 3 -1\n4 4 1\n");
    char args[512];
    snprintf(args, sizeof args, "-e cpu -p fsai %s", path);
    tu_cmd_out o = td_run(2, args);
    ck_assert_msg(o.code != 0 && o.code != 124, "exit %d:\n%s", o.code, o.text);
    ck_assert_msg(td_count_messages(o.text) == 1, "want one message:\n%s", o.text);
    free(o.text);
    remove(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dist");
    TCase *unit = tu_add_tcase(s, "partition and split", 60);
    tcase_add_test(unit, partition_balances_nonzeros);
    tcase_add_test(unit, split_recomposes_the_product);
    tcase_add_test(unit, generated_blocks_are_the_whole_matrix_rows);
    tcase_add_test(unit, pc_blocks_on_one_process);
    if (td_mpi_ready()) {
        TCase *mpi = tu_add_tcase(s, "mpirun", 900);
        tcase_add_test(mpi, jacobi_matches_one_process);
        tcase_add_test(mpi, file_input_is_scattered);
        tcase_add_test(mpi, one_reduction_cg_and_merged_sums);
        tcase_add_test(mpi, block_local_preconditioners_match_their_definition);
        tcase_add_test(mpi, block_local_matches_pc_blocks);
        tcase_add_test(mpi, solution_is_gathered);
        tcase_add_test(mpi, the_report_names_the_exchange_and_the_loop);
        tcase_add_test(mpi, bad_input_fails_on_every_rank_once);
    } else {
        printf("check_dist: mpirun tests skipped: %s\n",
               GS_HAVE_MPI ? "no mpirun on PATH" : "built without MPI (make MPI=1)");
    }
    return tu_run_suite(s);
}
