/* check_heat3d.c - the MIC paper's heat equation (--generate heat3d;
 * src/io/heat3d.c, src/cli/timestep.c; docs/heat3d.md): the operator entry
 * by entry, the initial condition, the interpolation at the paper's points,
 * the program's solution against the exact discrete time stepping (u^0 is
 * an eigenvector of L_h, so u^S = 3 R^S sin sin sin with R the scheme's
 * amplification of the discrete eigenvalue), ER's order in h and dt, the
 * warm start, failed steps and refused options. CPU engine; the CUDA
 * engine's run of the oracle case where GS_HAVE_GPU is set. */
#include "heat3d.h"
#include "gen.h"

#include "cliutil.h"
#include "testutil.h"

static const double PI = 3.14159265358979323846;

/* ---- independent formulas (docs/heat3d.md), not the code under test ---- */

/* lambda_h = sum_d (4 / h_d^2) sin^2(pi h_d / 2): L_h's eigenvalue for
 * sin(pi x) sin(pi y) sin(pi z) on an NX x NY x NZ interior grid. */
static double discrete_eigenvalue(const int dims[3])
{
    double lam = 0.0;
    for (int d = 0; d < 3; d++) {
        const double h = 1.0 / (dims[d] + 1), s = sin(PI * h / 2);
        lam += 4.0 / (h * h) * s * s;
    }
    return lam;
}

/* The theta scheme's amplification of that eigenvalue over one step. */
static double amplification(const int dims[3], double dt, double theta)
{
    const double z = dt * discrete_eigenvalue(dims);
    return (1.0 - (1.0 - theta) * z) / (1.0 + theta * z);
}

/* sin(pi x_i) sin(pi y_j) sin(pi z_k) at row r = i + NX (j + NY k). */
static double mode_at(const int dims[3], int64_t r)
{
    const int64_t i = r % dims[0], j = (r / dims[0]) % dims[1], k = r / (dims[0] * dims[1]);
    return sin(PI * (i + 1) / (dims[0] + 1)) * sin(PI * (j + 1) / (dims[1] + 1)) *
           sin(PI * (k + 1) / (dims[2] + 1));
}

static gs_heat3d parse_ok(const char *spec)
{
    gs_heat3d h;
    gs_error err = {0};
    ck_assert_msg(gs_heat3d_parse(spec, &h, &err) == GS_OK, "%s: %s", spec, err.msg);
    return h;
}

/* ---- the problem (library) ---- */

static const int op_grids[][3] = {{1, 1, 1}, {3, 4, 5}, {1, 6, 2}, {7, 1, 1}, {5, 5, 5}};
#define N_OP_GRIDS ((int)(sizeof op_grids / sizeof op_grids[0]))

/* A = I + theta dt L_h: every entry against the stencil, symmetry, size and
 * the closed-form nnz, on grids with sides of 1 and unequal sides (so h
 * differs per direction), for both schemes. */
START_TEST(operator_entries)
{
    const int *g = op_grids[_i % N_OP_GRIDS];
    char spec[64];
    snprintf(spec, sizeof spec, "heat3d:%dx%dx%d", g[0], g[1], g[2]);
    gs_heat3d h = parse_ok(spec);
    h.theta = _i < N_OP_GRIDS ? 0.5 : 1.0;
    h.dt = 0.003;
    gs_csr A;
    gs_error err = {0};
    ck_assert_int_eq(gs_heat3d_matrix(&h, &A, &err), GS_OK);
    ck_assert_int_eq(gs_csr_validate(&A, &err), GS_OK);
    const int n = g[0] * g[1] * g[2];
    ck_assert_int_eq(A.n_rows, n);
    ck_assert_int_eq(A.n_cols, n);
    ck_assert_int_eq(A.nnz, 7 * n - 2 * (g[1] * g[2] + g[0] * g[2] + g[0] * g[1]));
    double c[3], diag = 1.0;
    for (int d = 0; d < 3; d++) {
        c[d] = h.theta * h.dt * (g[d] + 1) * (g[d] + 1); /* theta dt / h_d^2 */
        diag += 2 * c[d];
    }
    for (int r = 0; r < n; r++) {
        const int i = r % g[0], j = (r / g[0]) % g[1], k = r / (g[0] * g[1]);
        for (int64_t e = A.row_ptr[r]; e < A.row_ptr[r + 1]; e++) {
            const int col = A.col[e], ci = col % g[0], cj = (col / g[0]) % g[1],
                      ck = col / (g[0] * g[1]);
            const int dist = abs(ci - i) + abs(cj - j) + abs(ck - k);
            const double want = dist == 0        ? diag
                                : dist > 1       ? NAN
                                : ci != i        ? -c[0]
                                : cj != j        ? -c[1]
                                                 : -c[2];
            ck_assert_msg(fabs(A.val[e] - want) <= 1e-13 * diag, "%s row %d col %d: %g, want %g",
                          spec, r, col, A.val[e], want);
            int found = 0; /* a_col,r == a_r,col exactly */
            for (int64_t f = A.row_ptr[col]; f < A.row_ptr[col + 1]; f++)
                if (A.col[f] == r) found = A.val[f] == A.val[e];
            ck_assert_msg(found, "%s: a(%d,%d) has no equal transpose entry", spec, r, col);
        }
    }
    gs_csr_free(&A);
}
END_TEST

/* The initial condition 3 sin(pi x) sin(pi y) sin(pi z) at x_i = (i+1)/(NX+1),
 * row i + NX (j + NY k), and the exact solution's decay e^(-3 pi^2 t); and
 * u^0 is an eigenvector of A: A u^0 = (1 + theta dt lambda_h) u^0, the fact
 * the discrete oracle below rests on. */
START_TEST(initial_condition_and_eigenvector)
{
    const int g[3] = {3, 4, 5};
    gs_heat3d h = parse_ok("heat3d:3x4x5");
    double u[60], v[60], Au[60];
    gs_heat3d_exact_grid(&h, 0.0, u);
    ck_assert_double_eq_tol(u[0], 3 * sin(PI / 4) * sin(PI / 5) * sin(PI / 6), 1e-15);
    ck_assert_double_eq_tol(u[2 + 3 * (1 + 4 * 3)], 3 * sin(3 * PI / 4) * sin(2 * PI / 5) *
                                                        sin(4 * PI / 6), 1e-15);
    for (int r = 0; r < 60; r++) ck_assert_double_eq_tol(u[r], 3 * mode_at(g, r), 1e-14);
    gs_heat3d_exact_grid(&h, 0.05, v);
    for (int r = 0; r < 60; r++)
        ck_assert_double_eq_tol(v[r], u[r] * exp(-3 * PI * PI * 0.05), 1e-14);
    ck_assert_double_eq_tol(gs_heat3d_exact(0.5, 0.5, 0.5, 0.1), 0.15531, 1e-5); /* Table 2 */
    ck_assert_double_eq_tol(gs_heat3d_exact(0.5, 0.5, 0.1, 0.1), 0.04799, 1e-5);
    h.theta = 0.5;
    h.dt = 0.01;
    gs_csr A;
    gs_error err = {0};
    ck_assert_int_eq(gs_heat3d_matrix(&h, &A, &err), GS_OK);
    gs_csr_spmv(&A, u, Au);
    const double mu = 1 + 0.5 * 0.01 * discrete_eigenvalue(g);
    for (int r = 0; r < 60; r++) ck_assert_double_eq_tol(Au[r], mu * u[r], 1e-12);
    gs_csr_free(&A);
}
END_TEST

/* The paper's models, the sizes forms and what is refused (naming the spec). */
START_TEST(specs_models_and_refusals)
{
    static const struct { const char *spec; int dims[3]; } ok[] = {
        {"heat3d:M21", {100, 100, 100}}, {"heat3d:M22", {250, 250, 100}},
        {"heat3d:m23", {250, 250, 250}}, {"heat3d:M24", {100, 100, 250}},
        {"heat3d:M25", {100, 100, 1000}}, {"heat3d:6", {6, 6, 6}}, {"heat3d:2x3x4", {2, 3, 4}}};
    for (size_t t = 0; t < sizeof ok / sizeof ok[0]; t++) {
        gs_heat3d h = parse_ok(ok[t].spec);
        for (int d = 0; d < 3; d++) {
            ck_assert_int_eq(h.dims[d], ok[t].dims[d]);
            ck_assert_double_eq_tol(h.h[d], 1.0 / (ok[t].dims[d] + 1), 1e-17);
        }
        ck_assert_double_eq(h.theta, 0.5);
        ck_assert_double_eq_tol(h.dt * h.steps, 0.1, 1e-15);
    }
    char name[64];
    gs_heat3d h = parse_ok("heat3d:M25");
    gs_heat3d_name(&h, name, sizeof name);
    ck_assert_str_eq(name, "heat3d:100x100x1000 (M25)");
    static const char *bad[] = {"heat3d",         "heat3d:",      "heat3d:0",   "heat3d:4x4",
                                "heat3d:M26",     "heat3d:-3",    "heat3d:4x4x",
                                "heat3d:2000x2000x1000", "heat3d:M21x2"};
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        gs_error err = {0};
        ck_assert_msg(gs_generate_check(bad[t], &err) == GS_ERR_USAGE, "'%s' accepted", bad[t]);
        ck_assert_msg(strstr(err.msg, bad[t]) && strstr(err.msg, "M21 (100x100x100)"),
                      "%s: %s", bad[t], err.msg);
    }
    ck_assert_int_eq(gs_heat3d_is_spec("heat3dx:4"), 0);
}
END_TEST

/* Tricubic interpolation with the boundary's zeros among its nodes is exact
 * for a product of cubics that vanish on the boundary, anywhere in the cube
 * (also next to the boundary, where its nodes shift inwards), and gives
 * grid values unchanged at grid points; a one-point direction interpolates
 * quadratically (exact for x (1 - x)). */
static double cubic(double x, int d) { return x * (1 - x) * (1 + (d + 1) * 0.7 * x); }

START_TEST(interpolation_exact_for_cubics)
{
    static const int grids[][3] = {{7, 5, 9}, {2, 3, 4}, {1, 4, 6}};
    const int *g = grids[_i];
    char spec[64];
    snprintf(spec, sizeof spec, "heat3d:%dx%dx%d", g[0], g[1], g[2]);
    gs_heat3d h = parse_ok(spec);
    const int n = g[0] * g[1] * g[2];
    double *u = malloc(n * sizeof *u);
    for (int r = 0; r < n; r++) {
        const int i = r % g[0], j = (r / g[0]) % g[1], k = r / (g[0] * g[1]);
        u[r] = (g[0] == 1 ? 4 * (0.5 * 0.5) : cubic((i + 1.0) / (g[0] + 1), 0)) *
               cubic((j + 1.0) / (g[1] + 1), 1) * cubic((k + 1.0) / (g[2] + 1), 2);
    }
    tu_rng rng = tu_rng_seed(7 + _i);
    for (int t = 0; t < 200; t++) {
        const double p[3] = {g[0] == 1 ? 0.5 : tu_uniform(&rng), tu_uniform(&rng),
                             t < 5 ? gs_heat3d_point_z(t) : tu_uniform(&rng)};
        const double fx = g[0] == 1 ? 4 * p[0] * (1 - p[0]) : cubic(p[0], 0);
        const double want = fx * cubic(p[1], 1) * cubic(p[2], 2);
        ck_assert_msg(fabs(gs_heat3d_interpolate(&h, u, p) - want) <= 1e-13,
                      "%s at (%g, %g, %g): %.17g, want %.17g", spec, p[0], p[1], p[2],
                      gs_heat3d_interpolate(&h, u, p), want);
    }
    for (int r = 0; r < n; r++) {
        const int i = r % g[0], j = (r / g[0]) % g[1], k = r / (g[0] * g[1]);
        const double p[3] = {(i + 1.0) / (g[0] + 1), (j + 1.0) / (g[1] + 1),
                             (k + 1.0) / (g[2] + 1)};
        ck_assert_double_eq(gs_heat3d_interpolate(&h, u, p), u[r]);
    }
    free(u);
}
END_TEST

/* ER = max |u - u~|: zero on the exact grid values, the perturbation itself
 * at any one point, NaN when u holds one. */
START_TEST(max_error_over_the_grid)
{
    gs_heat3d h = parse_ok("heat3d:4x5x6");
    double u[120];
    gs_heat3d_exact_grid(&h, 0.1, u);
    ck_assert(gs_heat3d_max_error(&h, u, 0.1) <= 1e-16);
    u[77] += 3e-6;
    ck_assert_double_eq_tol(gs_heat3d_max_error(&h, u, 0.1), 3e-6, 1e-15);
    u[77] -= 3e-6;
    u[119] -= 1e-3;
    ck_assert_double_eq_tol(gs_heat3d_max_error(&h, u, 0.1), 1e-3, 1e-15);
    u[5] = NAN;
    ck_assert(isnan(gs_heat3d_max_error(&h, u, 0.1)));
}
END_TEST

/* ---- the program (CPU engine) ---- */

/* Field `name` of the CSV report of one run, as a number. */
static double csv_number(const tu_cmd_out *o, const char *name)
{
    char v[128];
    ck_assert_msg(tu_csv_field(o->text, 0, name, v, sizeof v), "no field %s in:\n%s", name,
                  o->text);
    return strtod(v, NULL);
}

/* Run gpusolve with args and --format csv; expects exit `code`. */
static tu_cmd_out run_csv(const char *args, int code)
{
    char line[1024];
    snprintf(line, sizeof line, "%s --format csv", args);
    tu_cmd_out o = tu_run(line);
    tu_assert_exit(o, code);
    return o;
}

/* The program's final solution (--output) on `engine` against the exact
 * discrete stepping 3 R^S sin sin sin: each step's solve leaves an error of
 * at most kappa(A) tol ||u|| (kappa(A) = 1 + theta dt lambda_max < 6 here),
 * so S = 10 steps at tol 1e-12 stay within 1e-9 of it. Both schemes,
 * preconditioners whose M is and is not a multiple of I on the mode. */
static void oracle_case(const char *engine, const char *scheme, const char *precond)
{
    const int g[3] = {6, 7, 8}, steps = 10, n = 6 * 7 * 8;
    const double dt = 0.01, theta = strcmp(scheme, "crank-nicolson") == 0 ? 0.5 : 1.0;
    char out[256], args[1024];
    tu_tmpname(out, sizeof out, ".mtx");
    snprintf(args, sizeof args, "-e %s --generate heat3d:6x7x8 -p %s --tol 1e-12 --steps %d "
             "--dt %g --time-scheme %s -o %s", engine, precond, steps, dt, scheme, out);
    tu_cmd_out o = run_csv(args, 0);
    ck_assert_double_eq(csv_number(&o, "steps_run"), steps);
    ck_assert_double_eq_tol(csv_number(&o, "end_time"), 0.1, 1e-15);
    double *x = NULL;
    int64_t len = 0;
    gs_error err = {0};
    ck_assert_msg(gs_mm_read_vector_of_length(out, n, &x, &len, &err) == GS_OK, "%s", err.msg);
    const double amp = 3 * pow(amplification(g, dt, theta), steps);
    double worst = 0, er = 0;
    for (int r = 0; r < n; r++) {
        worst = fmax(worst, fabs(x[r] - amp * mode_at(g, r)));
        er = fmax(er, fabs(x[r] - 3 * exp(-3 * PI * PI * 0.1) * mode_at(g, r)));
    }
    ck_assert_msg(worst <= 1e-9, "%s %s %s: max |u - 3 R^S mode| = %g", engine, scheme, precond,
                  worst);
    ck_assert_double_eq_tol(csv_number(&o, "er"), er, 1e-8 * er); /* the report's ER (9 digits) */
    free(x);
    free(o.text);
    remove(out);
}

static const char *oracle_pcs[] = {"jacobi", "mic", "fsai"};

START_TEST(solution_is_the_exact_discrete_stepping)
{
    oracle_case("cpu", _i < 3 ? "crank-nicolson" : "backward-euler", oracle_pcs[_i % 3]);
}
END_TEST

START_TEST(cuda_engine_solution_is_the_exact_discrete_stepping)
{
    if (!getenv("GS_HAVE_GPU")) {
        printf("check_heat3d: cuda engine case: skipped (no GPU; set GS_HAVE_GPU=1 on a GPU "
               "machine)\n");
        return;
    }
    oracle_case("cuda", _i < 3 ? "crank-nicolson" : "backward-euler", oracle_pcs[_i % 3]);
}
END_TEST

/* ER of one run (CG + Jacobi at tol 1e-11: the solves add nothing visible). */
static double er_of(const char *grid, int steps, const char *scheme)
{
    char args[512];
    snprintf(args, sizeof args, "-e cpu --generate heat3d:%s -p jacobi --tol 1e-11 --steps %d "
             "--time-scheme %s", grid, steps, scheme);
    tu_cmd_out o = run_csv(args, 0);
    const double er = csv_number(&o, "er");
    free(o.text);
    return er;
}

/* ER shrinks as h^2 (Crank-Nicolson, dt small enough that the time error is
 * 1e-3 of it: ratio 4.05 from 7^3 to 15^3 by the formula above), as h^2
 * with dt ~ h refined together (4.04), and as dt with backward Euler on a
 * grid whose spatial error is 1% of the time error (2.00). Windows of 5%. */
START_TEST(er_converges_at_the_expected_orders)
{
    const double space = er_of("7", 400, "crank-nicolson") / er_of("15", 400, "crank-nicolson");
    ck_assert_msg(space > 3.85 && space < 4.25, "ER(h) / ER(h/2) = %g, want 4", space);
    const double both = er_of("7", 40, "crank-nicolson") / er_of("15", 80, "crank-nicolson");
    ck_assert_msg(both > 3.85 && both < 4.25, "ER(h, dt) / ER(h/2, dt/2) = %g, want 4", both);
    const double be = er_of("31", 10, "backward-euler") / er_of("31", 20, "backward-euler");
    ck_assert_msg(be > 1.9 && be < 2.1, "backward Euler ER(dt) / ER(dt/2) = %g, want 2", be);
}
END_TEST

/* The time error alone, u^S against the semi-discrete solution
 * 3 e^(-lambda_h t) sin sin sin read from the program's output: second
 * order for Crank-Nicolson (ratio 4.007 from 10 to 20 steps), first for
 * backward Euler (2.006). */
START_TEST(time_error_order_of_each_scheme)
{
    const int g[3] = {7, 7, 7}, n = 343;
    static const char *schemes[] = {"crank-nicolson", "backward-euler"};
    double err_at[2];
    for (int s = 0; s < 2; s++) {
        char out[256], args[512];
        tu_tmpname(out, sizeof out, ".mtx");
        snprintf(args, sizeof args, "-e cpu --generate heat3d:7 -p jacobi --tol 1e-13 --steps "
                 "%d --time-scheme %s -o %s", 10 << s, schemes[_i], out);
        tu_cmd_out o = run_csv(args, 0);
        double *x = NULL;
        int64_t len = 0;
        gs_error err = {0};
        ck_assert_msg(gs_mm_read_vector_of_length(out, n, &x, &len, &err) == GS_OK, "%s", err.msg);
        const double amp = 3 * exp(-discrete_eigenvalue(g) * 0.1);
        err_at[s] = 0;
        for (int r = 0; r < n; r++) err_at[s] = fmax(err_at[s], fabs(x[r] - amp * mode_at(g, r)));
        free(x);
        free(o.text);
        remove(out);
    }
    const double ratio = err_at[0] / err_at[1], want = _i == 0 ? 4.0 : 2.0;
    ck_assert_msg(fabs(ratio - want) < 0.05 * want, "%s: time error ratio %g, want %g",
                  schemes[_i], ratio, want);
}
END_TEST

/* The errors at x = y = 0.5, z = 0.1 ... 0.9: on the 9^3 grid (h = 0.1) these
 * are grid points, so each is |u - u_node| with u_node from the oracle;
 * ER, the maximum over the grid, bounds them all. */
START_TEST(five_point_errors)
{
    const int g[3] = {9, 9, 9};
    tu_cmd_out o = run_csv("-e cpu --generate heat3d:9 -p mic --tol 1e-12 --steps 20", 0);
    const double amp = 3 * pow(amplification(g, 0.005, 0.5), 20), exact = 3 * exp(-0.3 * PI * PI);
    static const char *fields[] = {"er_z0.1", "er_z0.3", "er_z0.5", "er_z0.7", "er_z0.9"};
    for (int i = 0; i < 5; i++) {
        const double z = 0.1 + 0.2 * i, want = fabs(exact - amp) * sin(PI * z);
        ck_assert_msg(fabs(csv_number(&o, fields[i]) - want) <= 1e-10, "%s = %g, want %g",
                      fields[i], csv_number(&o, fields[i]), want);
        ck_assert(csv_number(&o, fields[i]) <= csv_number(&o, "er") + 1e-15);
    }
    ck_assert_double_eq_tol(csv_number(&o, "er"), fabs(exact - amp), 1e-10); /* centre on grid */
    free(o.text);
}
END_TEST

/* Each step starts from the last step's solution: with MIC (M not a multiple
 * of I on the mode, so CG needs several iterations) every step takes fewer
 * iterations than from zero, and the answers agree. At the default step the
 * warm start's initial residual is 2 theta dt lambda / (1 - theta dt lambda)
 * = 0.02 of ||b||; at 20 steps (0.16) it saves no iteration. */
START_TEST(warm_start_saves_iterations)
{
    tu_cmd_out warm = run_csv("-e cpu --generate heat3d:12 -p mic", 0);
    tu_cmd_out cold = run_csv("-e cpu --generate heat3d:12 -p mic --step-x0 zero", 0);
    ck_assert_msg(csv_number(&warm, "step_iterations_max") <
                      csv_number(&cold, "step_iterations_min"),
                  "warm max %g, cold min %g", csv_number(&warm, "step_iterations_max"),
                  csv_number(&cold, "step_iterations_min"));
    ck_assert(csv_number(&warm, "iterations") < csv_number(&cold, "iterations"));
    ck_assert_double_eq_tol(csv_number(&warm, "er"), csv_number(&cold, "er"), 1e-9);
    char v[32];
    ck_assert(tu_csv_field(warm.text, 0, "step_x0", v, sizeof v));
    ck_assert_str_eq(v, "previous");
    free(warm.text);
    free(cold.text);
}
END_TEST

/* A step that does not converge stops the run: exit 2, the step named in
 * the reason line and the verdict, steps_run = failed_step, u at that
 * step's time. --maxit 2 with MIC (4 iterations a step) fails step 1. */
START_TEST(a_failed_step_stops_the_run)
{
    tu_cmd_out o = tu_run("-e cpu --generate heat3d:12 -p mic --steps 20 --maxit 2");
    tu_assert_exit(o, 2);
    TU_ASSERT_HAS(o, "converged  no (iteration limit reached at time step 1 of 20)");
    TU_ASSERT_HAS(o, "time step 1 of 20 did not converge (iteration limit reached); the run "
                     "stopped at t = 0.005");
    TU_ASSERT_HAS(o, "time steps 1 of 20");
    free(o.text);
    o = run_csv("-e cpu --generate heat3d:12 -p mic --steps 20 --maxit 2", 2);
    ck_assert_double_eq(csv_number(&o, "failed_step"), 1);
    ck_assert_double_eq(csv_number(&o, "steps_run"), 1);
    ck_assert_double_eq_tol(csv_number(&o, "time_reached"), 0.005, 1e-15);
    char v[64];
    ck_assert(tu_csv_field(o.text, 0, "reason", v, sizeof v));
    ck_assert_str_eq(v, "iteration limit reached"); /* the fixed set batch scripts count */
    free(o.text);
    /* a failure in mid-run: CG + Jacobi needs 1 iteration a step until rounding
     * brings in other components (here after a few steps at 31^3) */
    o = run_csv("-e cpu --generate heat3d:31 -p jacobi --maxit 1", 2);
    const double k = csv_number(&o, "failed_step"), dt = 0.1 / 150;
    ck_assert_msg(k > 1 && k < 150, "failed_step %g", k);
    ck_assert_double_eq(csv_number(&o, "steps_run"), k);
    ck_assert_double_eq_tol(csv_number(&o, "time_reached"), k * dt, 1e-8 * k * dt); /* 9 digits */
    ck_assert_double_eq(csv_number(&o, "step_iterations_max"), 1);
    /* ER is measured at the time reached (at t = 0.1 this u would be 2.3 off) */
    ck_assert_msg(csv_number(&o, "er") < 1e-3, "ER %g: not measured at t = %g",
                  csv_number(&o, "er"), k * dt);
    free(o.text);
    char want[128];
    snprintf(want, sizeof want,
             "converged  no (iteration limit reached at time step %.0f of 150)", k);
    o = tu_run("-e cpu --generate heat3d:31 -p jacobi --maxit 1");
    tu_assert_exit(o, 2);
    TU_ASSERT_HAS(o, want);
    free(o.text);
    /* a tolerance no step can meet: the first step fails, never "converged"
     * (1e-20: at 1e-17 residual replacement brings the true residual of
     * these small steps within 10 x tol, 1e-16, for dozens of steps) */
    o = tu_run("-e cpu --generate heat3d:6 -p jacobi --tol 1e-20 --maxit 50");
    tu_assert_exit(o, 2);
    TU_ASSERT_HAS(o, "at time step 1 of 150)");
    TU_ASSERT_LACKS(o, "converged  yes");
    free(o.text);
}
END_TEST

/* The table a person reads: steps, iterations per step, ER and the points. */
START_TEST(table_and_json_report_the_steps)
{
    tu_cmd_out o = tu_run("-e cpu --generate heat3d:M21 --help");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "heat3d:M21..M25");
    TU_ASSERT_HAS(o, "--time-scheme");
    free(o.text);
    o = tu_run("-e cpu --generate heat3d:9 -p fsai --steps 30");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "matrix     heat3d:9x9x9 (generated)");
    TU_ASSERT_HAS(o, "time steps 30 of 30, dt = 0.00333333 to t = 0.1 (crank-nicolson), x0 = "
                     "previous step's solution");
    TU_ASSERT_HAS(o, "iterations per step: min ");
    TU_ASSERT_HAS(o, "ER = max |u - u~| over the grid = ");
    TU_ASSERT_HAS(o, "z =         0.1         0.3         0.5         0.7         0.9");
    TU_ASSERT_HAS(o, "converged  yes");
    free(o.text);
    o = tu_run("-e cpu --generate heat3d:M21 --steps 2 -p jacobi --format json");
    tu_assert_exit(o, 0);
    TU_ASSERT_HAS(o, "\"matrix\": \"heat3d:100x100x100 (M21)\"");
    TU_ASSERT_HAS(o, "\"time_steps\": 2, \"steps_run\": 2, \"failed_step\": 0, \"dt\": 0.05");
    TU_ASSERT_HAS(o, "\"time_scheme\": \"crank-nicolson\"");
    TU_ASSERT_HAS(o, "\"er_z0.9\": ");
    free(o.text);
}
END_TEST

/* --steps, --dt and --end-time: two of three make the third. */
START_TEST(time_grid_from_the_options)
{
    tu_cmd_out o = run_csv("-e cpu --generate heat3d:4 --dt 0.001", 0);
    ck_assert_double_eq(csv_number(&o, "time_steps"), 100);
    free(o.text);
    o = run_csv("-e cpu --generate heat3d:4 --dt 0.001 --steps 20", 0);
    ck_assert_double_eq_tol(csv_number(&o, "end_time"), 0.02, 1e-15);
    ck_assert_double_eq_tol(csv_number(&o, "time_reached"), 0.02, 1e-15);
    free(o.text);
    o = run_csv("-e cpu --generate heat3d:4 --end-time 0.3 --steps 30", 0);
    ck_assert_double_eq_tol(csv_number(&o, "dt"), 0.01, 1e-15);
    free(o.text);
    o = run_csv("-e cpu --generate heat3d:4", 0);
    ck_assert_double_eq(csv_number(&o, "time_steps"), GS_HEAT3D_DEFAULT_STEPS);
    ck_assert_double_eq_tol(csv_number(&o, "end_time"), GS_HEAT3D_DEFAULT_END, 1e-15);
    free(o.text);
}
END_TEST

/* Bad sizes and options: exit 1 before anything is generated (M25's 10M rows
 * would take seconds), the message naming the option. */
static const struct {
    const char *args, *message;
} refused[] = {
    {"--generate heat3d:M25 --steps 0", "--steps: '0' must be an integer in [1, 10000000]"},
    {"--generate heat3d:M25 --steps 20000000", "--steps"},
    {"--generate heat3d:M25 --steps 1.5", "--steps: '1.5'"},
    {"--generate heat3d:M25 --dt 0", "--dt: '0' must be a number in [1e-12, 100]"},
    {"--generate heat3d:M25 --dt 0.03", "--dt 0.03: --end-time 0.1 / --dt is 3.33333333 steps"},
    {"--generate heat3d:M25 --dt nan", "--dt: 'nan'"},
    {"--generate heat3d:M25 --end-time -1", "--end-time: '-1'"},
    {"--generate heat3d:M25 --end-time 1000", "--end-time: '1000'"},
    {"--generate heat3d:M25 --steps 10 --dt 0.001 --end-time 0.5",
     "--steps 10 x --dt 0.001 = 0.01 is not --end-time 0.5"},
    {"--generate heat3d:M25 --steps 10000000 --dt 50", "the end time 5e+08 is past 100"},
    {"--generate heat3d:M25 --time-scheme rk4", "--time-scheme: 'rk4' is not one of"},
    {"--generate heat3d:M25 --step-x0 ones", "--step-x0: 'ones' is not one of previous|zero"},
    {"--generate heat3d:M25 --rhs ax1", "--rhs: heat3d makes each step's right-hand side"},
    {"--generate heat3d:M25 --x0 zero", "--x0: heat3d starts from"},
    {"--generate poisson3d:8 --steps 10", "--steps: only for a time-stepped problem"},
    {"--generate poisson3d:8 --end-time 1", "--end-time: only for a time-stepped problem"},
    {"data/poisson3d_8.mtx --time-scheme backward-euler", "--time-scheme: only for"},
    {"--generate heat3d:M26", "--generate 'heat3d:M26': heat3d needs a grid"},
    {"--generate heat3d:0x4x4", "--generate 'heat3d:0x4x4'"},
    {"--generate heat3d:2000x2000x1000", "'heat3d:2000x2000x1000'"},
};

START_TEST(bad_sizes_and_options_are_refused)
{
    char args[512];
    snprintf(args, sizeof args, "-e cpu %s", refused[_i].args);
    tu_cmd_out o = tu_run(args);
    tu_assert_exit(o, 1);
    TU_ASSERT_HAS(o, refused[_i].message);
    TU_ASSERT_LACKS(o, "converged");
    free(o.text);
}
END_TEST

static Suite *heat3d_suite(void)
{
    Suite *s = suite_create("heat3d");
    TCase *lib = tu_add_tcase(s, "problem", 60);
    tcase_add_loop_test(lib, operator_entries, 0, 2 * N_OP_GRIDS);
    tcase_add_test(lib, initial_condition_and_eigenvector);
    tcase_add_test(lib, specs_models_and_refusals);
    tcase_add_loop_test(lib, interpolation_exact_for_cubics, 0, 3);
    tcase_add_test(lib, max_error_over_the_grid);
    TCase *cli = tu_add_tcase(s, "program", 240);
    tcase_add_loop_test(cli, solution_is_the_exact_discrete_stepping, 0, 6);
    tcase_add_loop_test(cli, cuda_engine_solution_is_the_exact_discrete_stepping, 0, 6);
    tcase_add_test(cli, er_converges_at_the_expected_orders);
    tcase_add_loop_test(cli, time_error_order_of_each_scheme, 0, 2);
    tcase_add_test(cli, five_point_errors);
    tcase_add_test(cli, warm_start_saves_iterations);
    tcase_add_test(cli, a_failed_step_stops_the_run);
    tcase_add_test(cli, table_and_json_report_the_steps);
    tcase_add_test(cli, time_grid_from_the_options);
    tcase_add_loop_test(cli, bad_sizes_and_options_are_refused, 0,
                        (int)(sizeof refused / sizeof refused[0]));
    return s;
}

int main(void) { return tu_run_suite(heat3d_suite()); }
