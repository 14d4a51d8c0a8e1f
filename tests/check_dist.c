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
#include <stdarg.h>

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

/* --history logs each iteration's r.r (a small operation that reads it, so
 * its sum is made there): logged after the iteration's last dot, it adds no
 * sum over the ranks (cg1 stays at one an iteration), and the file still
 * holds a row for every iteration, 0 to the last. */
START_TEST(history_adds_no_sum_over_the_ranks)
{
    static const struct { const char *args; int ranks; double sums; } cases[] = {
        {"-e cpu --generate poisson3d:14 -p jacobi -m cg1", 2, 1.0},
        {"-e cpu --generate poisson3d:14 -p jacobi -m cg", 2, 2.0},
        {"-e cpu --generate convdiff3d:12 -p jacobi -m bicgstab", 3, 3.0},
    };
    char hist[256], args[512], buf[64];
    tu_tmpname(hist, sizeof hist, ".csv");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        snprintf(args, sizeof args, "--format csv --history %s %s", hist, cases[t].args);
        tu_cmd_out o = td_run(cases[t].ranks, args);
        tu_assert_exit(o, 0);
        ck_assert_msg(tu_csv_field(o.text, 0, "reductions_per_iteration", buf, sizeof buf), "%s",
                      o.text);
        const double sums = atof(buf);
        ck_assert(tu_csv_field(o.text, 0, "iterations", buf, sizeof buf));
        const long iterations = atol(buf);
        free(o.text);
        ck_assert_msg(sums >= cases[t].sums && sums < cases[t].sums + 0.15,
                      "%s with --history: %g sums an iteration", cases[t].args, sums);
        FILE *f = fopen(hist, "r");
        ck_assert(f);
        long rows = -1; /* the header */
        for (int c; (c = fgetc(f)) != EOF;) rows += c == '\n';
        fclose(f);
        ck_assert_msg(rows == iterations + 1, "%s: %ld history rows for %ld iterations",
                      cases[t].args, rows, iterations);
    }
    remove(hist);
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

/* ---- parallel reading (--read parallel) against rank 0's (--read root) ---- */

/* A growing text (the test's Matrix Market files). */
typedef struct tr_text {
    char *s;
    size_t len, cap;
} tr_text;

static void tr_add(tr_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr_add(tr_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->len + (size_t)need + 1 > t->cap) {
        t->cap = (t->len + (size_t)need + 1) * 2;
        t->s = realloc(t->s, t->cap);
        ck_assert_ptr_nonnull(t->s);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)need + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)need;
}

enum { TR_GENERAL, TR_SYMMETRIC, TR_PATTERN, TR_UNEVEN };

/* Entry lines of an n x n test matrix, shuffled (coordinate files are
 * unordered), written after header: row 0 is long (n / 2 entries: a row
 * sorted by the heap sort), every row has a few more entries and a
 * diagonal dominant enough for Jacobi; many entries are split into two or
 * three duplicates whose sum depends on the order it is taken in (0.3 v +
 * 0.7 v); symmetric storage puts half of them in the "wrong" triangle, so
 * that a_ij and a_ji stored both are summed; TR_UNEVEN adds comment lines
 * of 100 KB, blank lines and trailing blanks of up to 3000 bytes, so that
 * lines are very unequal and some ranks' ranges hold no line start. */
static void tr_write_matrix(const char *path, int kind, int32_t n, uint64_t seed)
{
    tu_rng rng = tu_rng_seed(seed);
    int64_t cap = 8 * (int64_t)n + n, count = 0;
    char **lines = malloc((size_t)cap * 4 * sizeof *lines);
    ck_assert_ptr_nonnull(lines);
    char line[64];
    for (int32_t i = 0; i < n; i++) {
        const int len = i == 0 ? n / 2 : 4;
        double sum = 0.0;
        for (int k = 0; k < len; k++) {
            int32_t j = i == 0 ? 2 * k + 1 : (int32_t)((i * 7 + (k + 1) * 13) % n);
            if (j == i || (kind == TR_SYMMETRIC && j > i)) continue;
            const double v = tu_uniform(&rng) - 0.5;
            sum += fabs(v) * (kind == TR_SYMMETRIC ? 2 : 1);
            const int parts = 1 + (int)(tu_next(&rng) % 3);
            for (int q = 0; q < parts; q++) {
                const double part = parts == 1 ? v : q == 0 ? 0.3 * v : q == 1 ? 0.7 * v : -v / 3;
                const int swap = kind == TR_SYMMETRIC && (tu_next(&rng) & 1);
                const int32_t r = swap ? j : i, c = swap ? i : j;
                if (kind == TR_PATTERN) snprintf(line, sizeof line, "%d %d\n", r + 1, c + 1);
                else snprintf(line, sizeof line, "%d %d %.17g\n", r + 1, c + 1, part);
                lines[count++] = strdup(line);
            }
        }
        if (kind == TR_PATTERN) snprintf(line, sizeof line, "%d %d\n", i + 1, i + 1);
        else snprintf(line, sizeof line, "%d %d %.17g\n", i + 1, i + 1, 2.0 + n + sum);
        lines[count++] = strdup(line);
    }
    for (int64_t k = count - 1; k > 0; k--) { /* Fisher-Yates */
        const int64_t r = (int64_t)(tu_next(&rng) % (uint64_t)(k + 1));
        char *t = lines[k];
        lines[k] = lines[r], lines[r] = t;
    }
    tr_text t = {0};
    tr_add(&t, "%%%%MatrixMarket matrix coordinate %s %s\n%% a test of --read\n%d %d %lld\n",
           kind == TR_PATTERN ? "pattern" : "real",
           kind == TR_SYMMETRIC ? "symmetric" : "general", n, n, (long long)count);
    for (int64_t k = 0; k < count; k++) {
        if (kind == TR_UNEVEN && k % 97 == 5) {
            tr_add(&t, "%%");
            for (int b = 0; b < 100000; b++) tr_add(&t, "c");
            tr_add(&t, "\n\n   \n");
        }
        if (kind == TR_UNEVEN && k % 3 == 0) {
            lines[k][strlen(lines[k]) - 1] = '\0';
            tr_add(&t, "%s%*s\n", lines[k], (int)(tu_next(&rng) % 3000), "");
        } else {
            tr_add(&t, "%s", lines[k]);
        }
        free(lines[k]);
    }
    free(lines);
    tu_write_text(path, t.s);
    free(t.s);
}

/* One run's report fields that --read must not change. */
typedef struct tr_run {
    int code;
    char fields[12][48];
} tr_run;

static const char *tr_names[12] = {"n", "nnz", "symmetry", "field", "rows_min", "rows_max",
                                   "nnz_min", "nnz_max", "iterations", "rel_residual",
                                   "true_rel_residual", "converged"};

static tr_run tr_solve(int ranks, const char *threads, const char *args)
{
    char prefix[256], full[2048];
    tr_run r = {0};
    snprintf(prefix, sizeof prefix, "timeout -k 5 %d env OMP_NUM_THREADS=%s mpirun %s -np %d",
             TD_TIMEOUT_S, threads, td_mpirun_flags(), ranks);
    snprintf(full, sizeof full, "--format csv %s", args);
    tu_cmd_out o = tu_run_env(ranks > 0 ? prefix : "", full);
    r.code = o.code;
    ck_assert_msg(o.code == 0 || o.code == 2, "exit %d:\n%s", o.code, o.text);
    for (int f = 0; f < 12; f++)
        if (!tu_csv_field(o.text, 0, tr_names[f], r.fields[f], sizeof r.fields[f]))
            ck_assert_msg(ranks == 0 && f >= 4 && f < 8, "no %s in:\n%s", tr_names[f], o.text);
    free(o.text);
    return r;
}

static char *tr_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    tr_text t = {0};
    char buf[4096];
    size_t got;
    tr_add(&t, "%s", "");
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) tr_add(&t, "%.*s", (int)got, buf);
    fclose(f);
    return t.s;
}

/* The file read by one process, by rank 0 and in parallel (ranks ranks):
 * the matrix each writes back (--write-matrix: every row gathered, values
 * to 17 digits) is the same text, and the solves agree bit for bit (the
 * same row blocks, the same iterations and residuals as --read root). */
static void tr_assert_same_reading(const char *matrix, int ranks, const char *threads,
                                   const char *solve)
{
    char out[3][256], args[1024];
    tr_run runs[3];
    const char *modes[3] = {"", "--read root", "--read parallel"};
    for (int m = 0; m < 3; m++) {
        tu_tmpname(out[m], sizeof out[m], ".mtx");
        snprintf(args, sizeof args, "-e cpu %s %s --write-matrix %s %s", solve, modes[m], out[m],
                 matrix);
        runs[m] = tr_solve(m == 0 ? 0 : ranks, threads, args);
    }
    char *text[3];
    for (int m = 0; m < 3; m++) text[m] = tr_slurp(out[m]);
    ck_assert_msg(strcmp(text[0], text[1]) == 0, "%s: --read root wrote another matrix", matrix);
    ck_assert_msg(strcmp(text[0], text[2]) == 0, "%s: --read parallel wrote another matrix "
                  "than one process (%d ranks)", matrix, ranks);
    ck_assert_int_eq(runs[1].code, runs[2].code);
    for (int f = 0; f < 12; f++) {
        ck_assert_msg(strcmp(runs[1].fields[f], runs[2].fields[f]) == 0, "%s: %s %s (root) vs %s "
                      "(parallel)", matrix, tr_names[f], runs[1].fields[f], runs[2].fields[f]);
        if (f < 4) ck_assert_str_eq(runs[0].fields[f], runs[2].fields[f]);
    }
    for (int m = 0; m < 3; m++) {
        free(text[m]);
        remove(out[m]);
    }
}

START_TEST(parallel_reading_gives_the_rows_of_one_reader)
{
    char path[256];
    tu_tmpname(path, sizeof path, ".mtx");
    const struct { int kind; int32_t n; const char *solve; } cases[] = {
        {TR_GENERAL, 300, "-p jacobi -m bicgstab"},
        {TR_SYMMETRIC, 300, "-p jacobi -m cg"},
        {TR_PATTERN, 200, "-p jacobi -m bicgstab --maxit 5"},
        {TR_UNEVEN, 300, "-p jacobi -m bicgstab"},
    };
    for (int c = 0; c < 4; c++) {
        tr_write_matrix(path, cases[c].kind, cases[c].n, 11 + (uint64_t)c);
        for (int ranks = 2; ranks <= 3; ranks++)
            tr_assert_same_reading(path, ranks, "1", cases[c].solve);
    }
    remove(path);
}
END_TEST

/* Parts larger than a parse chunk (256 KiB) with two threads a rank: the
 * chunks of a part continue its line and entry numbers. */
START_TEST(parallel_reading_of_chunked_parts)
{
    char path[256];
    tu_tmpname(path, sizeof path, ".mtx");
    tr_write_matrix(path, TR_SYMMETRIC, 30000, 5);
    tr_assert_same_reading(path, 2, "2", "-p jacobi -m cg");
    remove(path);
}
END_TEST

/* Fewer entry lines than ranks (ranks without a line, or with blank and
 * comment lines only), and a gzip file (no byte ranges: rank 0 reads it). */
START_TEST(parallel_reading_of_tiny_and_compressed_files)
{
    char path[256], gz[256], args[512];
    tu_tmpname(path, sizeof path, ".mtx");
    tu_write_text(path, "%%MatrixMarket matrix coordinate real symmetric\n% one\n% two\n"
                        "3 3 2\n2 1 -1.5\n\n3 3 4\n% the end\n\n\n");
    for (int ranks = 2; ranks <= 3; ranks++)
        tr_assert_same_reading(path, ranks, "1", "-p none -m gmres");
    tu_write_text(path, "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 2\n2 2 3");
    tr_assert_same_reading(path, 2, "1", "-p jacobi -m cg"); /* no '\n' at the end */
    tu_write_text(path, "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 1\n");
    tr_assert_same_reading(path, 2, "1", "-p none -m gmres"); /* one line, two ranks */
    tu_tmpname(gz, sizeof gz, ".mtx.gz");
    snprintf(args, sizeof args, "-e cpu --generate poisson3d:6 --write-matrix %s -q", gz);
    tu_cmd_out w = td_run(0, args);
    tu_assert_exit(w, 0);
    free(w.text);
    tr_assert_same_reading(gz, 3, "1", "-p jacobi -m cg");
    snprintf(args, sizeof args, "-e cpu --read parallel %s", gz);
    w = td_run(2, args);
    tu_assert_exit(w, 0);
    TU_ASSERT_HAS(w, "file read by rank 0 (--read root)"); /* gzip: no byte ranges */
    free(w.text);
    remove(path);
    remove(gz);
}
END_TEST

/* The one-process message for a bad file ("gpusolve: FILE:LINE: what"). */
static char *tr_one_process_message(const char *path)
{
    char args[512];
    snprintf(args, sizeof args, "-e cpu %s", path);
    tu_cmd_out o = td_run(0, args);
    tu_assert_exit(o, 1);
    char *m = strstr(o.text, "gpusolve: ");
    ck_assert_msg(m != NULL, "no message:\n%s", o.text);
    char *end = strchr(m, '\n');
    if (end) *end = '\0';
    char *copy = strdup(m);
    free(o.text);
    return copy;
}

/* A bad file fails on every rank, in both modes, with the one message of
 * one process (the file's first bad line), printed once; want names it. */
static void tr_assert_bad_file(const char *path, const char *want)
{
    char *msg = tr_one_process_message(path), args[512];
    ck_assert_msg(strstr(msg, want) != NULL, "one process says '%s', want '%s'", msg, want);
    for (int ranks = 2; ranks <= 3; ranks++)
        for (int m = 0; m < 2; m++) {
            snprintf(args, sizeof args, "-e cpu --read %s %s", m ? "parallel" : "root", path);
            td_assert_one_failure(ranks, args, 1, msg);
        }
    free(msg);
}

/* n-row diagonal matrix as text, line k (0-based entry) replaced by bad. */
static void tr_write_diagonal(const char *path, int n, int announced, int k_bad,
                              const char *bad, int k_bad2, const char *bad2)
{
    tr_text t = {0};
    tr_add(&t, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", n, n, announced);
    for (int k = 0; k < n; k++) {
        if (k == k_bad) tr_add(&t, "%s\n", bad);
        else if (k == k_bad2) tr_add(&t, "%s\n", bad2);
        else tr_add(&t, "%d %d %d.5\n", k + 1, k + 1, k + 1);
    }
    tu_write_text(path, t.s);
    free(t.s);
}

START_TEST(parallel_reading_of_bad_files)
{
    char path[256], want[512];
    tu_tmpname(path, sizeof path, ".mtx");
    /* line numbers: the banner is line 1, the size line 2, entry k line k + 3 */
    tr_write_diagonal(path, 3000, 3000, 2998, "2999 3001 1.0", -1, "");
    snprintf(want, sizeof want, "%s:3001: column index 3001 out of range 1..3000", path);
    tr_assert_bad_file(path, want); /* in the last rank's range */
    tr_write_diagonal(path, 3000, 3000, 1500, "1501 1501 1.5x", -1, "");
    snprintf(want, sizeof want, "%s:1503: value '1.5x' is not a number", path);
    tr_assert_bad_file(path, want); /* in the middle */
    tr_write_diagonal(path, 3000, 3000, 1200, "1201 1201 nan", 2900, "0 1 1");
    snprintf(want, sizeof want, "%s:1203: value 'nan' is not a finite number", path);
    tr_assert_bad_file(path, want); /* two bad lines in two ranks: the first one */
    tr_write_diagonal(path, 3000, 3100, -1, "", -1, "");
    snprintf(want, sizeof want, "%s:3002: premature end of file: expected 3100 entries, "
             "found 3000", path);
    tr_assert_bad_file(path, want); /* too few entries */
    tr_write_diagonal(path, 3000, 2000, -1, "", -1, "");
    snprintf(want, sizeof want, "%s:2003: too many entries: the size line announced 2000",
             path);
    tr_assert_bad_file(path, want);
    tu_write_text(path, "%%MatrixMarket matrix coordinate real general\n4 4 3\n"
                        "1 1 1\n2 2 1\n4 4 1\n");
    snprintf(want, sizeof want, "%s:2: row 3 has no entries", path);
    tr_assert_bad_file(path, want);
    tu_write_text(path, "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1\n2 2 1\n");
    tr_assert_bad_file(path, "matrix is 2 x 3, not square");
    tu_write_text(path, "%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n");
    tr_assert_bad_file(path, "dense 'array' matrices are not supported");
    tu_write_text(path, "%%MatrixMarket matrix coordinate real general\n");
    tr_assert_bad_file(path, "premature end of file: missing the size line");
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
        tcase_add_test(mpi, history_adds_no_sum_over_the_ranks);
        tcase_add_test(mpi, block_local_preconditioners_match_their_definition);
        tcase_add_test(mpi, block_local_matches_pc_blocks);
        tcase_add_test(mpi, solution_is_gathered);
        tcase_add_test(mpi, the_report_names_the_exchange_and_the_loop);
        tcase_add_test(mpi, bad_input_fails_on_every_rank_once);
        tcase_add_test(mpi, parallel_reading_gives_the_rows_of_one_reader);
        tcase_add_test(mpi, parallel_reading_of_chunked_parts);
        tcase_add_test(mpi, parallel_reading_of_tiny_and_compressed_files);
        tcase_add_test(mpi, parallel_reading_of_bad_files);
    } else {
        printf("check_dist: mpirun tests skipped: %s\n",
               GS_HAVE_MPI ? "no mpirun on PATH" : "built without MPI (make MPI=1)");
    }
    return tu_run_suite(s);
}
