/* heat3d.c - the MIC paper's heat-equation problem (heat3d.h): its grids, the
 * theta-scheme matrix, the exact solution and the paper's error ER.
 * Finite differences and the theta scheme as in LeVeque, "Finite Difference
 * Methods for ODEs and PDEs" (2007), ch. 9; docs/heat3d.md. */
#include "heat3d.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gen.h"

static const double PI = 3.14159265358979323846;

/* The paper's grid models of Table 2 (rows x columns x layers = NX x NY x NZ). */
static const struct {
    const char *name;
    int64_t dims[3];
} heat3d_models[] = {
    {"M21", {100, 100, 100}}, {"M22", {250, 250, 100}}, {"M23", {250, 250, 250}},
    {"M24", {100, 100, 250}}, {"M25", {100, 100, 1000}},
};
#define HEAT3D_N_MODELS ((int)(sizeof heat3d_models / sizeof heat3d_models[0]))

int gs_heat3d_is_spec(const char *spec)
{
    return spec && strncmp(spec, "heat3d", 6) == 0 && (spec[6] == ':' || spec[6] == '\0');
}

int gs_heat3d_parse(const char *spec, gs_heat3d *h, gs_error *err)
{
    memset(h, 0, sizeof *h);
    if (!gs_heat3d_is_spec(spec))
        return gs_error_set(err, GS_ERR_USAGE, "--generate '%s': not a heat3d problem",
                            spec ? spec : "");
    const char *sizes = spec[6] == ':' ? spec + 7 : "";
    int found = 0;
    for (int m = 0; m < HEAT3D_N_MODELS && !found; m++)
        if (strcasecmp(sizes, heat3d_models[m].name) == 0) {
            memcpy(h->dims, heat3d_models[m].dims, sizeof h->dims);
            snprintf(h->model, sizeof h->model, "%s", heat3d_models[m].name);
            found = 1;
        }
    if (!found && gs_generate_dims(spec, "heat3d", sizes, h->dims, NULL) != GS_OK)
        return gs_error_set(err, GS_ERR_USAGE,
                            "--generate '%s': heat3d needs a grid N or NXxNYxNZ (positive "
                            "integers, at most 2^31 - 1 unknowns) or one of the paper's models "
                            "M21 (100x100x100), M22 (250x250x100), M23 (250x250x250), "
                            "M24 (100x100x250), M25 (100x100x1000)", spec);
    for (int d = 0; d < 3; d++) h->h[d] = 1.0 / (double)(h->dims[d] + 1);
    h->theta = 0.5;
    h->steps = GS_HEAT3D_DEFAULT_STEPS;
    h->end_time = GS_HEAT3D_DEFAULT_END;
    h->dt = h->end_time / (double)h->steps;
    return GS_OK;
}

void gs_heat3d_name(const gs_heat3d *h, char *name, size_t len)
{
    if (!name || len == 0) return;
    snprintf(name, len, "heat3d:%lldx%lldx%lld%s%s%s", (long long)h->dims[0],
             (long long)h->dims[1], (long long)h->dims[2], h->model[0] ? " (" : "", h->model,
             h->model[0] ? ")" : "");
}

int gs_heat3d_matrix(const gs_heat3d *h, gs_csr *A, gs_error *err)
{
    double w[3][3][3] = {{{0}}};
    double diagonal = 1.0;
    for (int d = 0; d < 3; d++) {
        const double c = h->theta * h->dt / (h->h[d] * h->h[d]); /* theta dt / h_d^2 */
        int at[3] = {1, 1, 1};                                   /* (dk, dj, di) + 1 */
        at[2 - d] = 0;
        w[at[0]][at[1]][at[2]] = -c;
        at[2 - d] = 2;
        w[at[0]][at[1]][at[2]] = -c;
        diagonal += 2.0 * c;
    }
    w[1][1][1] = diagonal;
    return gs_generate_stencil(w, h->dims, A, err);
}

double gs_heat3d_exact(double x, double y, double z, double t)
{
    return 3.0 * exp(-3.0 * PI * PI * t) * sin(PI * x) * sin(PI * y) * sin(PI * z);
}

/* u_ijk = 3 e^(-3 pi^2 t) sin(pi x_i) sin(pi y_j) sin(pi z_k), x_i = (i + 1) h. */
void gs_heat3d_exact_grid(const gs_heat3d *h, double t, double *u)
{
    const int64_t nx = h->dims[0], ny = h->dims[1], nz = h->dims[2];
    const double amplitude = 3.0 * exp(-3.0 * PI * PI * t);
#pragma omp parallel for schedule(static) if (nx * ny * nz > 4096)
    for (int64_t k = 0; k < nz; k++) {
        const double sz = amplitude * sin(PI * (double)(k + 1) * h->h[2]);
        for (int64_t j = 0; j < ny; j++) {
            const double syz = sz * sin(PI * (double)(j + 1) * h->h[1]);
            for (int64_t i = 0; i < nx; i++)
                u[i + nx * (j + ny * k)] = syz * sin(PI * (double)(i + 1) * h->h[0]);
        }
    }
}

void gs_heat3d_rhs_coefs(double theta, double coef[2])
{
    coef[0] = 1.0 / theta;            /* (I - (1-theta) dt L) u = u/theta - ((1-theta)/theta) A u */
    coef[1] = -(1.0 - theta) / theta; /* since dt L = (A - I) / theta */
}

double gs_heat3d_max_error(const gs_heat3d *h, const double *u, double t)
{
    const int64_t nx = h->dims[0], ny = h->dims[1], nz = h->dims[2];
    const double amplitude = 3.0 * exp(-3.0 * PI * PI * t);
    double worst = 0.0;
    int nan_seen = 0;
#pragma omp parallel for schedule(static) reduction(max : worst) reduction(| : nan_seen) \
    if (nx * ny * nz > 4096)
    for (int64_t k = 0; k < nz; k++) {
        const double sz = amplitude * sin(PI * (double)(k + 1) * h->h[2]);
        for (int64_t j = 0; j < ny; j++) {
            const double syz = sz * sin(PI * (double)(j + 1) * h->h[1]);
            for (int64_t i = 0; i < nx; i++) {
                const double e = fabs(syz * sin(PI * (double)(i + 1) * h->h[0]) -
                                      u[i + nx * (j + ny * k)]);
                nan_seen |= isnan(e);
                worst = e > worst ? e : worst;
            }
        }
    }
    return nan_seen ? NAN : worst;
}

/* Lagrange weights at s (in units of h: node m lies at m h, m = 0 .. n + 1,
 * nodes 0 and n + 1 on the boundary) over count = min(4, n + 2) consecutive
 * nodes from *first, centred on s where the boundary allows. */
static int lagrange_weights(int64_t n, double s, int64_t *first, double w[4])
{
    const int64_t nodes = n + 2;
    const int count = nodes < 4 ? (int)nodes : 4;
    const double nearest = nearbyint(s);
    if (fabs(s - nearest) <= 1e-12 * (1.0 + fabs(s))) s = nearest; /* a grid point: exact */
    int64_t m0 = (int64_t)floor(s) - (count / 2 - 1);
    if (m0 > nodes - count) m0 = nodes - count;
    if (m0 < 0) m0 = 0;
    for (int j = 0; j < count; j++) {
        double wj = 1.0;
        for (int i = 0; i < count; i++)
            if (i != j) wj *= (s - (double)(m0 + i)) / (double)(j - i);
        w[j] = wj;
    }
    *first = m0;
    return count;
}

double gs_heat3d_interpolate(const gs_heat3d *h, const double *u, const double p[3])
{
    int64_t first[3];
    double w[3][4];
    int count[3];
    for (int d = 0; d < 3; d++)
        count[d] = lagrange_weights(h->dims[d], p[d] / h->h[d], &first[d], w[d]);
    double sum = 0.0;
    for (int c = 0; c < count[2]; c++) {
        const int64_t k = first[2] + c - 1; /* grid index; -1 and NZ are the boundary */
        if (k < 0 || k >= h->dims[2]) continue;
        for (int b = 0; b < count[1]; b++) {
            const int64_t j = first[1] + b - 1;
            if (j < 0 || j >= h->dims[1]) continue;
            for (int a = 0; a < count[0]; a++) {
                const int64_t i = first[0] + a - 1;
                if (i < 0 || i >= h->dims[0]) continue;
                sum += w[2][c] * w[1][b] * w[0][a] * u[i + h->dims[0] * (j + h->dims[1] * k)];
            }
        }
    }
    return sum;
}

double gs_heat3d_point_z(int i) { return 0.1 + 0.2 * (double)i; }

const char *gs_heat3d_help(void)
{
    return "  heat3d:N[xNYxNZ] | heat3d:M21..M25\n"
           "                         the MIC paper's heat equation u_t = u_xx + u_yy + u_zz,\n"
           "                         u(0) = 3 sin(pi x) sin(pi y) sin(pi z), time-stepped with\n"
           "                         one preconditioner (--steps, --dt, --end-time, "
           "--time-scheme,\n"
           "                         --step-x0); M21 100x100x100, M22 250x250x100, M23 "
           "250x250x250,\n"
           "                         M24 100x100x250, M25 100x100x1000 (docs/heat3d.md)\n";
}
