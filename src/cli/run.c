/* run.c - load a problem, and set up and solve it on one engine, timing Tp
 * and Ts as DESIGN.md says (GPU phases measured after a synchronisation). */
#include "run.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "gen.h"
#include "mmio.h"
#include "precond.h"
#if GS_HAVE_CUDA
#include "../../cuda/engine/gs_cuda.h"
#endif

static const char *field_name(gs_mm_field f)
{
    return f == GS_MM_INTEGER ? "integer" : f == GS_MM_PATTERN ? "pattern" : "real";
}

/* b = 1, b = A 1 or a file; x0 = 0 or a file. */
static int problem_vectors(const gs_cli *cli, gs_problem *p, gs_error *err)
{
    const int32_t n = p->A.n_rows;
    int64_t len = 0;
    p->b = gs_malloc((size_t)n * sizeof(double), "right-hand side", err);
    p->x0 = gs_calloc((size_t)n, sizeof(double), "initial guess", err);
    if (!p->b || !p->x0) return GS_ERR_NOMEM;
    if (strcmp(cli->rhs, "ones") == 0 || strcmp(cli->rhs, "ax1") == 0) {
        for (int32_t i = 0; i < n; i++) p->x0[i] = 1.0;
        if (strcmp(cli->rhs, "ones") == 0)
            memcpy(p->b, p->x0, (size_t)n * sizeof(double));
        else
            gs_csr_spmv(&p->A, p->x0, p->b);
        memset(p->x0, 0, (size_t)n * sizeof(double));
    } else {
        free(p->b);
        p->b = NULL;
        int status = gs_mm_read_vector_of_length(cli->rhs, n, &p->b, &len, err);
        if (status != GS_OK) {
            gs_error_prefix(err, "--rhs: ");
            return status;
        }
    }
    if (strcmp(cli->x0, "zero") != 0) {
        free(p->x0);
        p->x0 = NULL;
        int status = gs_mm_read_vector_of_length(cli->x0, n, &p->x0, &len, err);
        if (status != GS_OK) {
            gs_error_prefix(err, "--x0: ");
            return status;
        }
    }
    return GS_OK;
}

/* heat3d: A = I + theta dt L_h for the time grid of the options, x0 =
 * u(x,y,z,0), b = the first step's right-hand side (the loop makes every
 * step's own on the engine). */
static int heat3d_load(const gs_cli *cli, gs_problem *p, gs_error *err)
{
    gs_heat3d *h = gs_calloc(1, sizeof *h, "heat3d problem", err);
    if (!h) return GS_ERR_NOMEM;
    p->heat = h;
    int status = gs_heat3d_parse(cli->generate, h, err);
    if (status != GS_OK) return status;
    h->theta = strcmp(cli->time_scheme, "backward-euler") == 0 ? 1.0 : 0.5;
    h->steps = cli->steps;
    h->dt = cli->dt;
    h->end_time = cli->end_time;
    gs_heat3d_name(h, p->name, sizeof p->name);
    p->field = "generated";
    status = gs_heat3d_matrix(h, &p->A, err);
    if (status != GS_OK) return status;
    const size_t n = (size_t)p->A.n_rows;
    p->x0 = gs_malloc(n * sizeof(double), "initial condition", err);
    p->b = gs_malloc(n * sizeof(double), "right-hand side", err);
    if (!p->x0 || !p->b) return GS_ERR_NOMEM;
    gs_heat3d_exact_grid(h, 0.0, p->x0);
    double c[2];
    gs_heat3d_rhs_coefs(h->theta, c);
    gs_csr_spmv(&p->A, p->x0, p->b);
    for (size_t i = 0; i < n; i++) p->b[i] = c[0] * p->x0[i] + c[1] * p->b[i];
    return GS_OK;
}

int gs_problem_load(const gs_cli *cli, const char *input, gs_problem *p, gs_error *err)
{
    memset(p, 0, sizeof *p);
    int status;
    double t0 = gs_now();
    if (input) {
        gs_mm_info info;
        status = gs_mm_read_csr(input, &p->A, &info, err);
        if (status != GS_OK) return status;
        snprintf(p->name, sizeof p->name, "%s", input);
        p->field = field_name(info.field);
        if (p->A.n_rows != p->A.n_cols)
            return gs_error_set(err, GS_ERR_INPUT, "%s: matrix is %d x %d, not square", input,
                                (int)p->A.n_rows, (int)p->A.n_cols);
    } else if (gs_heat3d_is_spec(cli->generate)) {
        status = heat3d_load(cli, p, err);
        if (status != GS_OK) return status;
    } else {
        status = gs_generate(cli->generate, &p->A, p->name, sizeof p->name, err);
        if (status != GS_OK) return status;
        p->field = "generated";
    }
    p->read_seconds = gs_now() - t0;
    if (p->A.n_rows == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: the matrix has no rows", p->name);
    p->symmetric = gs_csr_is_symmetric(&p->A, GS_SYMMETRY_RTOL);
    p->nonpositive_diag_row = gs_csr_first_nonpositive_diagonal(&p->A, 0,
                                                                &p->nonpositive_diag_value);
    if (cli->write_matrix) {
        status = gs_mm_write_csr(cli->write_matrix, &p->A, p->symmetric, p->name, err);
        if (status != GS_OK) return status;
    }
    return p->heat ? GS_OK : problem_vectors(cli, p, err);
}

/* *slot (bytes) moved to page-aligned memory of whole pages and page-locked
 * there (whole pages: a page shared with another array could not be
 * registered twice); NULL, and *slot untouched, where either fails. */
static void *pin_array(gs_engine *e, void **slot, size_t bytes)
{
    const long ps = sysconf(_SC_PAGESIZE);
    const size_t page = ps > 0 ? (size_t)ps : 4096, len = (bytes + page - 1) / page * page;
    void *q = NULL;
    if (!*slot || bytes == 0 || posix_memalign(&q, page, len) != 0) return NULL;
    memcpy(q, *slot, bytes);
    if (!e->ops->host_pin(e, q, len)) {
        free(q);
        return NULL;
    }
    free(*slot);
    *slot = q;
    return q;
}

void gs_problem_pin(gs_problem *p, gs_engine *e)
{
    if (!e->ops->host_pin || p->pinned_by) return;
    double t0 = gs_now();
    /* what the engine uploads: A, or a rank's diagonal block of it */
    gs_csr *U = p->dist.ranks > 0 ? &p->split.diag : &p->A;
    const size_t n = (size_t)p->A.n_rows, nnz = (size_t)U->nnz;
    void *arrays[GS_PROBLEM_ARRAYS] = {U->row_ptr, U->col, U->val, p->b, p->x0};
    const size_t bytes[GS_PROBLEM_ARRAYS] = {(n + 1) * sizeof(int64_t), nnz * sizeof(int32_t),
                                             nnz * sizeof(double), n * sizeof(double),
                                             n * sizeof(double)};
    for (int k = 0; k < GS_PROBLEM_ARRAYS; k++) p->pinned[k] = pin_array(e, &arrays[k], bytes[k]);
    U->row_ptr = arrays[0], U->col = arrays[1], U->val = arrays[2];
    p->b = arrays[3], p->x0 = arrays[4];
    p->pinned_by = e;
    p->read_seconds += gs_now() - t0;
}

static void problem_unpin(gs_problem *p)
{
    if (!p->pinned_by) return;
    for (int k = 0; k < GS_PROBLEM_ARRAYS; k++)
        if (p->pinned[k]) p->pinned_by->ops->host_unpin(p->pinned_by, p->pinned[k]);
    p->pinned_by = NULL;
}

void gs_problem_free(gs_problem *p)
{
    problem_unpin(p);
    gs_csr_free(&p->A);
    gs_dist_split_free(&p->split);
    free(p->b);
    free(p->x0);
    free(p->heat);
    memset(p, 0, sizeof *p);
}

const char *gs_run_auto_method(const gs_problem *p, const gs_pc *pc, char *why, size_t len)
{
    const int64_t bad = p->nonpositive_diag_row;
    if (p->symmetric && pc->symmetric && bad < 0) {
        snprintf(why, len, "A and M symmetric, A's diagonal positive");
        return "cg";
    }
    char what[96];
    if (!p->symmetric)
        snprintf(what, sizeof what, "A nonsymmetric");
    else if (bad >= 0 && p->nonpositive_diag_value == 0.0)
        snprintf(what, sizeof what, "A symmetric but not SPD: a_%lld,%lld = 0 (zero or not stored)",
                 (long long)bad + 1, (long long)bad + 1);
    else if (bad >= 0)
        snprintf(what, sizeof what, "A symmetric but not SPD: diagonal a_%lld,%lld = %.3g <= 0",
                 (long long)bad + 1, (long long)bad + 1, p->nonpositive_diag_value);
    else
        snprintf(what, sizeof what, "M nonsymmetric");
    if (pc->type->paper_method) {
        snprintf(why, len, "%s; %s's paper method", what, pc->type->name);
        return pc->type->paper_method;
    }
    snprintf(why, len, "%s", what);
    return "bicgstab";
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void min_median(double *v, int n, double out[2])
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    out[0] = v[0];
    out[1] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ||v||_2 without overflow or underflow: scaled by the largest |v_i|. */
static double scaled_norm(const double *v, int32_t n)
{
    double big = 0.0, ss = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (isnan(v[i])) return NAN; /* fmax would skip it */
        big = fmax(big, fabs(v[i]));
    }
    if (!(big > 0.0) || !isfinite(big)) return big;
    for (int32_t i = 0; i < n; i++) ss += (v[i] / big) * (v[i] / big);
    return big * sqrt(ss);
}

/* *out = ||b - A x|| / ||b|| (||b - A x|| when b = 0) on the host, from the
 * original matrix. */
static int true_residual(const gs_csr *A, const double *b, const double *x, double *out,
                         gs_error *err)
{
    double *r = gs_malloc((size_t)A->n_rows * sizeof(double), "true residual", err);
    if (!r) return GS_ERR_NOMEM;
    gs_csr_spmv(A, x, r);
    for (int32_t i = 0; i < A->n_rows; i++) r[i] = b[i] - r[i];
    const double rn = scaled_norm(r, A->n_rows), bn = scaled_norm(b, A->n_rows);
    free(r);
    *out = bn > 0 ? rn / bn : rn;
    return GS_OK;
}

typedef struct one_run {
    double tp, ts;
    double true_residual;          /* several ranks: computed on the engine */
    double comm_seconds, halo_bytes; /* several ranks: during Ts (this rank's) */
    long spmv_count, reductions; /* several ranks: products, sums over the ranks */
    gs_stages stages;
    gs_steps_record steps; /* a time-stepped problem's */
} one_run;

/* The method of this run: the one asked for, or -m auto's choice now that
 * M is known (run->method_why says why). */
static const gs_method_type *run_method(const gs_cli *cli, const gs_problem *p, const gs_pc *pc,
                                        gs_run *run)
{
    const char *name = cli->method;
    run->method_why[0] = '\0';
    if (strcmp(name, "auto") == 0)
        name = gs_run_auto_method(p, pc, run->method_why, sizeof run->method_why);
    snprintf(run->method, sizeof run->method, "%s", name);
    return gs_method_find(name);
}

/* The solve of a time-stepped problem: every step from x = u^0 on, the
 * last step's right-hand side left in b; its Ts leaves out the steps' true
 * residual checks (t->steps.check_seconds). */
static int solve_steps(const gs_cli *cli, const gs_problem *p, gs_engine *e, const gs_mat *A,
                       gs_pc *pc, const gs_method_type *method, gs_run *run, gs_vec *b,
                       gs_vec *x, one_run *t, gs_krylov_result *res)
{
    gs_steps_plan plan = {p->heat->steps, {0, 0}, strcmp(cli->step_x0, "previous") == 0,
                          GS_TRUE_RESIDUAL_FACTOR};
    gs_heat3d_rhs_coefs(p->heat->theta, plan.rhs_coef);
    return gs_steps_run(e, A, pc, method, &run->opts, &plan, x, b, &t->steps, res);
}

/* Tp: A to the engine and the preconditioner's setup; Ts: the solve (every
 * step of a time-stepped problem, whose last right-hand side goes to
 * b_host). A run whose setup outlasts --time-limit ends there, reason
 * "time limit". */
static int run_once(const gs_cli *cli, const gs_problem *p, gs_engine *e, gs_run *run,
                    double *x_host, double *b_host, one_run *t, gs_krylov_result *res,
                    gs_progress *progress, gs_error *err)
{
    gs_pc_hook hook = {progress ? gs_progress_stage_done : NULL, progress,
                       progress ? gs_progress_stage_begin : NULL, 0.0};
    gs_mat *A = NULL, *A_pc = NULL;
    gs_pc *pc = NULL;
    gs_vec *b = NULL, *x = NULL;
    gs_csr A_blocks = {0};
    int64_t *begin = NULL;
    int status = GS_OK;
    memset(t, 0, sizeof *t);
    if (gs_engine_is_dist(e)) (void)gs_dist_max(0.0); /* the ranks start the setup together */
    double t0 = gs_now();
    if (progress) gs_progress_run_begin(progress);
    run->opts.deadline = cli->time_limit > 0 ? t0 + cli->time_limit : 0.0;
    /* the setup stops at the deadline too; not under mpirun, where a rank that
     * stopped alone would leave the others waiting in a collective */
    hook.deadline = gs_engine_is_dist(e) ? 0.0 : run->opts.deadline;
    const gs_pc_type *type = gs_pc_find(cli->precond);
    const int blocks = (int)cli->pc_blocks;
    if (blocks > 1) { /* M from A's block-diagonal part: what `blocks` ranks would build */
        begin = gs_malloc(((size_t)blocks + 1) * sizeof *begin, "row blocks", err);
        if (!begin) GS_TRY(GS_ERR_NOMEM);
        GS_TRY(gs_dist_partition(&p->A, blocks, begin, err));
        GS_TRY(gs_dist_block_diagonal(&p->A, blocks, begin, &A_blocks, err));
        GS_TRY(e->ops->mat_create(e, &p->A, GS_FP64, &A));
        if (e->ops->mat_create_system)
            GS_TRY(e->ops->mat_create_system(e, &A_blocks, &A_pc));
        else
            GS_TRY(e->ops->mat_create(e, &A_blocks, GS_FP64, &A_pc));
    } else if (gs_engine_is_dist(e)) { /* the rank's rows split with the problem */
        GS_TRY(gs_engine_dist_mat_create_split(e, &p->split, 1, &A));
    } else if (e->ops->mat_create_system) { /* the engine keeps A as it likes until the setup */
        GS_TRY(e->ops->mat_create_system(e, &p->A, &A));
    } else {
        GS_TRY(e->ops->mat_create(e, &p->A, GS_FP64, &A));
    }
    GS_TRY(e->ops->sync(e));
    if (gs_engine_is_dist(e)) { /* the rank's split and halo plan, named apart */
        double ms[GS_DIST_MAT_STAGES];
        gs_engine_dist_mat_seconds(e, ms);
        if (ms[GS_DIST_MAT_SPLIT] > 0) gs_stages_add(&t->stages, "split A", ms[GS_DIST_MAT_SPLIT]);
        gs_stages_add(&t->stages, "halo plan", ms[GS_DIST_MAT_PLAN]);
        gs_stages_add(&t->stages, "halo buffers", ms[GS_DIST_MAT_HALO]);
        gs_stages_add(&t->stages, "transfer A", gs_now() - t0 - ms[GS_DIST_MAT_SPLIT] -
                                                    ms[GS_DIST_MAT_PLAN] - ms[GS_DIST_MAT_HALO]);
    } else {
        gs_stages_add(&t->stages, "transfer A", gs_now() - t0);
    }
    if (progress) gs_progress_stage_done(progress, "transfer A");
    if (gs_engine_is_dist(e)) /* each rank's diagonal block (docs/multigpu.md) */
        GS_TRY(gs_dist_pc_create(type, e, &cli->params, &p->A, A, &hook, &pc, err));
    else if (blocks > 1)
        status = gs_pc_create_hooked(type, e, &cli->params, &A_blocks, A_pc, &hook, &pc, err);
    else
        status = gs_pc_create_hooked(type, e, &cli->params, &p->A, A, &hook, &pc, err);
    if (status == GS_ERR_TIME_LIMIT) { /* stopped inside the setup: no M, nothing solved */
        t->tp = gs_now() - t0;
        snprintf(run->precond_desc, sizeof run->precond_desc, "not built: %.200s", err->msg);
        gs_error_clear(err);
        status = GS_OK;
        res->reason = GS_REASON_TIME_LIMIT;
        res->rel_residual = NAN;
        memcpy(x_host, p->x0, (size_t)p->A.n_rows * sizeof(double));
        if (b_host) memcpy(b_host, p->b, (size_t)p->A.n_rows * sizeof(double));
        goto cleanup;
    }
    GS_TRY(status);
    if (blocks > 1) {
        gs_kv_str(&pc->extra, "scope", "block-local");
        gs_kv_num(&pc->extra, "blocks", blocks);
    }
    for (int i = 0; i < pc->stages.count; i++)
        gs_stages_add(&t->stages, pc->stages.stage[i].name, pc->stages.stage[i].seconds);
    t->tp = gs_now() - t0;
    const gs_method_type *method = run_method(cli, p, pc, run);
    snprintf(run->precond_desc, sizeof run->precond_desc, "%s", pc->description);
    run->precond_nnz = pc->nnz;
    run->extra = pc->extra;
#if GS_HAVE_CUDA
    /* A's device layout, and the rows its rule found long: asked of a matrix of the
     * CUDA engine only (a distributed engine's matrix is not one, whatever its kind
     * says: its diagonal block, on the inner CUDA engine, answers for this rank) */
    gs_engine *e_local = gs_engine_is_dist(e) ? gs_engine_dist_inner(e) : e;
    const gs_mat *A_local = gs_engine_dist_local_mat(e, A);
    if (e_local->ops->kind == GS_ENGINE_CUDA && !gs_engine_is_dist(e_local) && A_local) {
        const gs_cuda_row_stats rows = gs_cuda_mat_row_stats(A_local);
        gs_kv_str(&run->extra, "layout_A", gs_cuda_mat_layout(A_local));
        if (rows.long_min > 0) {
            gs_kv_num(&run->extra, "max_row", (double)rows.max_row);
            gs_kv_num(&run->extra, "long_rows", (double)rows.n_long);
        }
    }
#endif
    run->bytes_per_iteration = method->spmv_per_iteration *
                                   (gs_csr_stream_bytes(&p->A, GS_FP64) + pc->apply_bytes) +
                               method->vector_accesses(&run->opts) * 8.0 * p->A.n_rows;
    if (run->opts.deadline > 0 && gs_now() > run->opts.deadline) {
        res->reason = GS_REASON_TIME_LIMIT; /* x stays x0: nothing solved */
        res->rel_residual = NAN;            /* no method ran */
        memcpy(x_host, p->x0, (size_t)p->A.n_rows * sizeof(double));
        if (b_host) memcpy(b_host, p->b, (size_t)p->A.n_rows * sizeof(double));
        goto cleanup;
    }
    const int dist = gs_engine_is_dist(e);
    if (dist) { /* the ranks start the solve together; Tp is the slowest rank's */
        GS_TRY(e->ops->sync(e));
        gs_engine_dist_counters_reset(e);
        t->tp = gs_dist_max(t->tp);
    }
    if (e->ops->solve_plan) { /* the CPU engine's threads and floor: outside Tp and Ts */
        struct rusage ru; /* the peak so far: the floor probe's arrays are not the run's */
        if (getrusage(RUSAGE_SELF, &ru) == 0 && (size_t)ru.ru_maxrss * 1024 > run->host_peak_bytes)
            run->host_peak_bytes = (size_t)ru.ru_maxrss * 1024;
        const double spmv = gs_csr_stream_bytes(&p->A, GS_FP64) + 16.0 * p->A.n_rows;
        GS_TRY(e->ops->solve_plan(e, spmv > pc->apply_bytes ? spmv : pc->apply_bytes));
        run->bandwidth = e->copy_bandwidth;
    }
    double ts0 = gs_now();
    GS_TRY(e->ops->vec_create(e, p->A.n_rows, &b));
    GS_TRY(e->ops->vec_create(e, p->A.n_rows, &x));
    GS_TRY(e->ops->vec_upload(e, b, p->b));
    GS_TRY(e->ops->vec_upload(e, x, p->x0));
    if (p->heat)
        GS_TRY(solve_steps(cli, p, e, A, pc, method, run, b, x, t, res));
    else
        GS_TRY(gs_krylov_solve(method, e, A, pc, b, x, &run->opts, res));
    GS_TRY(e->ops->sync(e));
    t->ts = gs_now() - ts0 - t->steps.check_seconds;
    if (e->ops->solve_plan) { /* the threads that ran (the region may have got fewer) */
        run->threads = e->threads;
        snprintf(run->thread_policy, sizeof run->thread_policy, "%s", e->thread_policy);
    }
    if (dist) {
        t->ts = gs_dist_max(t->ts);
        gs_engine_dist_counters(e, &t->comm_seconds, &t->halo_bytes, &t->spmv_count,
                                &t->reductions);
        GS_TRY(gs_dist_true_residual(e, A, b, x, &t->true_residual));
    }
    GS_TRY(e->ops->vec_download(e, x, x_host));
    if (p->heat) GS_TRY(e->ops->vec_download(e, b, b_host));
    if (cli->save_precond) {
        if (!pc->save)
            status = gs_error_set(err, GS_ERR_UNSUPPORTED, "--save-precond: '%s' has nothing to save",
                                  cli->precond);
        else
            status = pc->save(pc, cli->save_precond, err);
    }
cleanup:
    if (progress) gs_progress_run_end(progress);
    if (status != GS_OK) gs_engine_fail(e, err);
    gs_pc_destroy(pc);
    e->ops->vec_destroy(e, b);
    e->ops->vec_destroy(e, x);
    e->ops->mat_destroy(e, A);
    e->ops->mat_destroy(e, A_pc);
    gs_csr_free(&A_blocks);
    free(begin);
    return status;
}

static void run_header(const gs_cli *cli, const gs_problem *p, gs_engine *e, gs_run *run)
{
    memset(run, 0, sizeof *run);
    run->problem = p;
    snprintf(run->engine, sizeof run->engine, "%s", e->ops->name);
    snprintf(run->device, sizeof run->device, "%s", e->device_name);
    run->bandwidth = e->copy_bandwidth;
    snprintf(run->precond, sizeof run->precond, "%s", cli->precond);
    snprintf(run->method, sizeof run->method, "%s", cli->method);
    run->opts.tol = cli->tol;
    run->opts.maxit = cli->maxit;
    run->opts.restart = (int)cli->restart;
    run->opts.idr_s = (int)cli->idr_s;
    run->opts.check_every = cli->verbose ? 1 : (int)cli->check_every;
    run->opts.record_history = cli->verbose || cli->history;
    run->opts.replacements = (int)cli->replacements;
    run->opts.use_capture = !cli->no_graph;
    /* --loop steers the cuda engine; the cpu engine of --engine both runs its
     * host loop, asked nothing (options.c refuses --loop device|fused alone) */
    const int asked = e->ops->kind == GS_ENGINE_CUDA || strcmp(cli->loop, "host") == 0;
    snprintf(run->loop_asked, sizeof run->loop_asked, "%s", asked ? cli->loop : "auto");
    run->repeat = (int)cli->repeat;
    run->time_reached = run->er = NAN;
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) run->point_exact[i] = run->point_error[i] = NAN;
}

/* The verdict rests on the true residual (docs/verdicts.md): a method that
 * says converged keeps that word only when x is finite and
 * ||b - A x|| / ||b|| <= GS_TRUE_RESIDUAL_FACTOR tol. */
static void run_verdict(gs_run *run, const double *x, int32_t n)
{
    int finite = 1;
    for (int32_t i = 0; i < n && finite; i++) finite = isfinite(x[i]);
    if (!finite || !isfinite(run->true_residual)) {
        if (run->reason == GS_REASON_CONVERGED || run->reason == GS_REASON_RESIDUAL_GAP ||
            run->reason == GS_REASON_MAXIT)
            run->reason = GS_REASON_NAN;
        snprintf(run->verdict_note, sizeof run->verdict_note, "%s",
                 finite ? "the true residual is not finite" : "x holds NaN or Inf");
        return;
    }
    if (run->reason == GS_REASON_CONVERGED &&
        !(run->true_residual <= GS_TRUE_RESIDUAL_FACTOR * run->opts.tol)) {
        run->reason = GS_REASON_RESIDUAL_GAP;
        snprintf(run->verdict_note, sizeof run->verdict_note,
                 "residual gap: method %.3e, true %.3e (above %g x tol) after %d residual "
                 "replacement%s; attainable about %.1e (eps || |A| |x| || / ||b||)%s",
                 run->rel_residual, run->true_residual, GS_TRUE_RESIDUAL_FACTOR,
                 run->replacements, run->replacements == 1 ? "" : "s", run->attainable,
                 run->attainable >= run->opts.tol
                     ? ": tol is below it, so it may not be attainable"
                     : "");
    }
}

double gs_run_attainable(const gs_csr *A, const double *x, const double *b)
{
    double *ax = malloc((size_t)(A->n_rows > 0 ? A->n_rows : 1) * sizeof(double));
    if (!ax) return NAN;
    for (int32_t i = 0; i < A->n_rows; i++) { /* (|A| |x|)_i */
        double s = 0.0;
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++)
            s += fabs(A->val[p]) * fabs(x[A->col[p]]);
        ax[i] = s;
    }
    const double bn = scaled_norm(b, A->n_rows), est = DBL_EPSILON * scaled_norm(ax, A->n_rows) / bn;
    free(ax);
    return bn > 0.0 && isfinite(est) ? est : NAN;
}

static void run_record(gs_run *run, const gs_krylov_result *res)
{
    run->replacements = res->replacements;
    run->iterations = res->iterations;
    run->reason = res->reason;
    run->breakdown_iteration = res->breakdown_iteration;
    snprintf(run->breakdown, sizeof run->breakdown, "%s", res->breakdown);
    run->device_loop = res->device_loop;
    snprintf(run->loop_note, sizeof run->loop_note, "%s", res->loop_note);
    const gs_method_type *m = gs_method_find(run->method);
    if (strcmp(run->loop_asked, "fused") == 0 && m && !m->fused) /* -m auto chose it */
        snprintf(run->loop_note, sizeof run->loop_note, "no fused kernel for %s%s%.120s",
                 run->method, res->loop_note[0] ? "; " : "", res->loop_note);
    run->rel_residual = res->rel_residual;
    run->idr_s_used = res->idr_s;
    gs_krylov_history_free(&run->history);
    run->history = res->history; /* taken over */
}

/* A time-stepped run's verdict and errors: the true residual is the worst
 * of the steps' (engine) and the last step's recomputed on the host from
 * the original matrix; a failed step is named in the verdict; ER and the
 * five points' errors at the time u reached. */
static void run_steps_finish(gs_run *run, const gs_heat3d *h, const double *x,
                             double host_true_residual)
{
    const gs_steps_record *st = &run->steps;
    const double worst = st->true_rel_max;
    run->true_residual = isnan(worst) || worst > host_true_residual ? worst : host_true_residual;
    const gs_reason before = run->reason;
    run_verdict(run, x, run->problem->A.n_rows);
    if (before == GS_REASON_CONVERGED && run->reason != GS_REASON_CONVERGED)
        run->steps.failed_step = st->steps_run; /* the host disagreed on the last step */
    run->time_reached = (double)st->steps_run * h->dt;
    if (st->failed_step > 0) {
        char note[sizeof run->verdict_note];
        snprintf(note, sizeof note, "time step %ld of %ld did not converge (%s)%s%.160s; the run "
                 "stopped at t = %.6g", st->failed_step, st->steps, gs_reason_name(run->reason),
                 run->verdict_note[0] ? ": " : "", run->verdict_note, run->time_reached);
        snprintf(run->verdict_note, sizeof run->verdict_note, "%s", note);
    }
    run->er = gs_heat3d_max_error(h, x, run->time_reached);
    for (int i = 0; i < GS_HEAT3D_POINTS; i++) {
        const double pt[3] = {0.5, 0.5, gs_heat3d_point_z(i)};
        run->point_exact[i] = gs_heat3d_exact(pt[0], pt[1], pt[2], run->time_reached);
        run->point_error[i] = fabs(run->point_exact[i] - gs_heat3d_interpolate(h, x, pt));
    }
}

int gs_run_solve(const gs_cli *cli, const gs_problem *p, gs_engine *e, gs_run *run,
                 double *x_out, gs_progress *progress, gs_error *err)
{
    run_header(cli, p, e, run);
    run->opts.progress = progress ? gs_progress_solve : NULL;
    run->opts.progress_ctx = progress;
    const int nrep = run->repeat;
    double *tp = calloc((size_t)nrep, sizeof(double)), *ts = calloc((size_t)nrep, sizeof(double));
    double *tt = calloc((size_t)nrep, sizeof(double));
    double *x = x_out ? x_out : malloc((size_t)p->A.n_rows * sizeof(double));
    double *b_last = p->heat ? malloc((size_t)p->A.n_rows * sizeof(double)) : NULL;
    int status = GS_OK;
    if (!tp || !ts || !tt || !x || (p->heat && !b_last)) {
        status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory for run records");
        goto cleanup;
    }
    double best = INFINITY;
    for (int i = 0; i < nrep; i++) {
        one_run t;
        gs_krylov_result res;
        memset(&res, 0, sizeof res);
        status = run_once(cli, p, e, run, x, b_last, &t, &res, progress, err);
        if (status != GS_OK) {
            gs_krylov_result_free(&res);
            goto cleanup;
        }
        tp[i] = t.tp, ts[i] = t.ts, tt[i] = t.tp + t.ts;
        if (p->dist.ranks > 0) {
            run->true_residual = t.true_residual;
            run->dist.comm_seconds = gs_dist_max(t.comm_seconds);
            run->dist.halo_bytes_per_iteration =
                t.spmv_count > 0 && res.iterations > 0
                    ? gs_dist_sum(t.halo_bytes) / (double)t.spmv_count *
                          gs_method_find(run->method)->spmv_per_iteration
                    : 0.0;
            run->dist.reductions_per_iteration =
                res.iterations > 0 ? (double)t.reductions / (double)res.iterations : 0.0;
        }
        if (tt[i] < best) best = tt[i], run->stages = t.stages;
        run_record(run, &res);
        run->steps = t.steps;
    }
    min_median(tp, nrep, run->tp);
    min_median(ts, nrep, run->ts);
    min_median(tt, nrep, run->tt);
    if (p->dist.ranks == 0)
        GS_TRY(true_residual(&p->A, p->heat ? b_last : p->b, x, &run->true_residual, err));
    run->attainable = p->dist.ranks > 0 ? NAN /* this rank's rows only */
                                        : gs_run_attainable(&p->A, x, p->heat ? b_last : p->b);
    if (p->heat)
        run_steps_finish(run, p->heat, x, run->true_residual);
    else
        run_verdict(run, x, p->A.n_rows);
    const double nnz_A = p->dist.ranks > 0 ? (double)p->dist.nnz_global : (double)p->A.nnz;
    run->mu = nnz_A > 0 ? (double)run->precond_nnz / nnz_A : 0;
    if (p->dist.ranks > 0) { /* the slowest rank's share bounds the iteration */
        run->bytes_per_iteration = gs_dist_max(run->bytes_per_iteration);
        gs_dist_summary keep = run->dist;
        run->dist = p->dist;
        run->dist.comm_seconds = keep.comm_seconds;
        run->dist.halo_bytes_per_iteration = keep.halo_bytes_per_iteration;
        run->dist.reductions_per_iteration = keep.reductions_per_iteration;
        gs_engine_dist_describe(e, &run->dist);
        snprintf(run->dist.pc_scope, sizeof run->dist.pc_scope, "%s",
                 gs_pc_find(cli->precond)->distributed == GS_PC_DIST_BLOCK_LOCAL ? "block-local"
                                                                                 : "exact");
    }
    if (run->iterations > 0) run->seconds_per_iteration = run->ts[0] / (double)run->iterations;
    if (run->bandwidth > 0 && run->iterations > 0)
        run->floor_ratio = run->seconds_per_iteration / (run->bytes_per_iteration / run->bandwidth);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && (size_t)ru.ru_maxrss * 1024 > run->host_peak_bytes)
        run->host_peak_bytes = (size_t)ru.ru_maxrss * 1024; /* with the peak before the probe */
    run->device_peak_bytes = e->device_bytes_peak;
    if (p->dist.ranks > 0) {
        run->host_peak_bytes = (size_t)gs_dist_max((double)run->host_peak_bytes);
        run->device_peak_bytes = (size_t)gs_dist_max((double)run->device_peak_bytes);
    }
cleanup:
    if (status != GS_OK) {
        gs_error_prefix(err, "%s: ", p->name);
        gs_run_free(run); /* the caller keeps only the runs that succeeded */
    }
    free(tp);
    free(ts);
    free(tt);
    free(b_last);
    if (x != x_out) free(x);
    return status;
}

void gs_run_free(gs_run *run)
{
    gs_krylov_history_free(&run->history);
}
