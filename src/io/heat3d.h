/* heat3d.h - the MIC paper's problem (--generate heat3d): u_t = u_xx + u_yy
 * + u_zz on the unit cube, u = 0 on the boundary, u(x,y,z,0) = 3 sin(pi x)
 * sin(pi y) sin(pi z), exact solution 3 e^(-3 pi^2 t) sin(pi x) sin(pi y)
 * sin(pi z); the 7-point Laplacian L_h on the interior grid and the theta
 * scheme (I + theta dt L_h) u^(n+1) = (I - (1 - theta) dt L_h) u^n, theta =
 * 1/2 Crank-Nicolson (the default), theta = 1 backward Euler. Host only: the
 * time loop is the run's (src/cli/timestep.c). docs/heat3d.md says why. */
#ifndef GS_HEAT3D_H
#define GS_HEAT3D_H

#include <stddef.h>
#include <stdint.h>

#include "csr.h"
#include "error.h"

/* The paper's five points: x = y = 0.5, z = 0.1, 0.3, 0.5, 0.7, 0.9. */
#define GS_HEAT3D_POINTS 5

typedef struct gs_heat3d {
    int64_t dims[3];   /* interior points NX, NY, NZ */
    double h[3];       /* 1 / (N + 1) per direction */
    double theta;      /* 0.5 Crank-Nicolson, 1 backward Euler */
    long steps;
    double dt;         /* end_time / steps */
    double end_time;
    char model[8];     /* "M21" ... "M25" when the spec named one, else "" */
} gs_heat3d;

/* 1 if spec names heat3d ("heat3d" or "heat3d:..."). */
int gs_heat3d_is_spec(const char *spec);

/* "heat3d:N", "heat3d:NXxNYxNZ" or "heat3d:M21" ... "heat3d:M25" (the
 * paper's grids); the time grid is set to the defaults (Crank-Nicolson,
 * GS_HEAT3D_DEFAULT_STEPS steps to GS_HEAT3D_DEFAULT_END). GS_ERR_USAGE
 * naming the spec for anything else. */
int gs_heat3d_parse(const char *spec, gs_heat3d *h, gs_error *err);
#define GS_HEAT3D_DEFAULT_STEPS 150
#define GS_HEAT3D_DEFAULT_END 0.1

/* "heat3d:100x100x100" (+ " (M21)"), into name[len]. */
void gs_heat3d_name(const gs_heat3d *h, char *name, size_t len);

/* A = I + theta dt L_h: diagonal 1 + theta dt sum_d 2 / h_d^2, the two
 * neighbours along direction d -theta dt / h_d^2 (SPD, an M-matrix). */
int gs_heat3d_matrix(const gs_heat3d *h, gs_csr *A, gs_error *err);

/* u(x, y, z, t) exactly, and on the grid (u of length NX NY NZ). */
double gs_heat3d_exact(double x, double y, double z, double t);
void gs_heat3d_exact_grid(const gs_heat3d *h, double t, double *u);

/* The step's right-hand side b = (I - (1 - theta) dt L_h) u written with A
 * only: b = u / theta - ((1 - theta) / theta) A u; coef[0] = 1 / theta
 * (on u), coef[1] = -(1 - theta) / theta (on A u). */
void gs_heat3d_rhs_coefs(double theta, double coef[2]);

/* The paper's ER = max over the grid |u(x_i, y_j, z_k, t) - u_ijk|. */
double gs_heat3d_max_error(const gs_heat3d *h, const double *u, double t);

/* u at point p of the cube by tricubic Lagrange interpolation (4 nodes per
 * direction, the boundary's zeros among them; fewer on a grid of one
 * point): exact at grid points, error O(h^4) elsewhere. */
double gs_heat3d_interpolate(const gs_heat3d *h, const double *u, const double p[3]);

/* The z of the paper's five points (x = y = 0.5). */
double gs_heat3d_point_z(int i);

/* One line for --help's list of built-in problems. */
const char *gs_heat3d_help(void);

#endif
