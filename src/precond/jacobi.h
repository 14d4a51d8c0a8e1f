/* jacobi.h - what the Jacobi preconditioner's two setups share
 * (src/precond/pc_jacobi.c on the host, cuda/precond/jacobi.cu on the device): the data,
 * and the apply, save and destroy written once over the engine table. */
#ifndef GS_JACOBI_H
#define GS_JACOBI_H

#include "precond.h"

typedef struct gs_jacobi_data {
    gs_vec *dinv; /* 1 / a_ii */
    int64_t n;
} gs_jacobi_data;

/* pc->data is a gs_jacobi_data (dinv filled or not): sets destroy now, so a
 * failed setup is cleaned up. */
void gs_jacobi_attach(gs_pc *pc, gs_jacobi_data *d);
/* dinv is ready: install apply, apply_dot, save and the report fields. */
void gs_jacobi_finish(gs_pc *pc);

#endif
