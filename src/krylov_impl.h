/* krylov_impl.h - what the Krylov methods share (krylov.c): slot names, the
 * stopping test, breakdown records and captured iteration blocks. Private
 * to src/krylov.c, cg.c, bicgstab.c, gmres.c, idr.c. */
#ifndef GS_KRYLOV_IMPL_H
#define GS_KRYLOV_IMPL_H

#include "krylov.h"

/* Scalar slots common to all methods; each method numbers its own from
 * KR_FREE on. KR_RR must stay right after KR_BB (read together). */
enum { KR_BB = 0, KR_RR = 1, KR_FREE = 2 };

typedef struct kr_ctx {
    gs_engine *e;
    const gs_engine_ops *ops;
    const gs_mat *A;
    gs_pc *pc;
    const gs_krylov_opts *opts;
    gs_krylov_result *res;
    double bnorm;
    long history_cap;
    void *seq[2]; /* captured iteration blocks, by key (see kr_run_block) */
} kr_ctx;

typedef int (*kr_body_fn)(kr_ctx *k, void *state);

int kr_init(kr_ctx *k, gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_vec *b,
            const gs_krylov_opts *opts, gs_krylov_result *res);
int kr_initial_residual(kr_ctx *k, const gs_vec *b, gs_vec *x, gs_vec *r, int *done);
int kr_check(kr_ctx *k, long it, double rr);
void kr_breakdown(kr_ctx *k, long it, const char *what);
/* Run body nb times. Where the engine records sequences, a full block is
 * captured once per key and replayed after: a method whose body alternates
 * between two forms passes the form the block starts in as key (0 or 1). */
int kr_run_block(kr_ctx *k, kr_body_fn body, void *state, long nb, long block, int key);
void kr_finish(kr_ctx *k);

double gs_gmres_vector_accesses(int restart);
double gs_idr_vector_accesses(int s);

#endif
