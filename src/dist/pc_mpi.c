/* pc_mpi.c - preconditioners of a distributed run (docs/multigpu.md): each
 * rank sets up the type on its diagonal block of A with the type's own setup
 * on the inner engine (its GPU setup on the CUDA engine); the apply is that
 * block's, so M = blockdiag(M_1, ..., M_P): exactly M for jacobi, a
 * block-local M for the types marked so (block Jacobi over the ranks, as
 * PETSc's PCBJACOBI with one block per process). Also the true residual. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

static int dpc_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    int status = gs_pc_apply_dot((gs_pc *)pc->data, r, z, GS_SLOT_NONE);
    if (status != GS_OK) {
        gs_engine *inner = gs_engine_dist_inner(pc->eng);
        fprintf(stderr, "gpusolve: rank %d: %s: %s\n", gs_dist_of(pc->eng)->rank, pc->type->name,
                inner->err.msg[0] ? inner->err.msg : gs_status_name((gs_status)status));
        gs_dist_abort(gs_status_exit_code((gs_status)status));
    }
    return status;
}

/* z = M r and S[slot] = r.z: the block's fused form where it has one, then
 * the sum over the ranks. */
static int dpc_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    gs_pc *inner = pc->data;
    dist_engine *d = gs_dist_of(pc->eng);
    int status = gs_pc_apply_dot(inner, r, z, slot);
    if (status == GS_OK && slot != GS_SLOT_NONE) status = gs_dist_reduce_later(pc->eng, slot, 1);
    if (status != GS_OK) {
        fprintf(stderr, "gpusolve: rank %d: %s: %s\n", d->rank, pc->type->name,
                d->inner->err.msg[0] ? d->inner->err.msg : gs_status_name((gs_status)status));
        gs_dist_abort(gs_status_exit_code((gs_status)status));
    }
    return status;
}

static void dpc_destroy(gs_pc *pc) { gs_pc_destroy((gs_pc *)pc->data); }

/* Stage times: the slowest rank's, stage by stage where every rank has the
 * same stages (else this rank's). */
static void stages_max(gs_stages *st)
{
    const double count = st->count, lo = -gs_dist_max(-count), hi = gs_dist_max(count);
    if (lo != hi) return;
    for (int i = 0; i < st->count; i++) st->stage[i].seconds = gs_dist_max(st->stage[i].seconds);
}

static int refuse(const gs_pc_type *type, gs_error *err)
{
    int size;
    MPI_Comm_size(gs_dist_comm(), &size);
    return gs_error_set(err, GS_ERR_UNSUPPORTED,
                        "-p %s: no distributed version for %d ranks (jacobi runs exactly; fsai, "
                        "spai, gspai-opt and isai block-local on each rank's diagonal block); "
                        "run %s with one process", type->name, size, type->name);
}

int gs_dist_pc_create(const gs_pc_type *type, gs_engine *eng, const gs_params *params,
                      const gs_csr *A, gs_mat *A_eng, const gs_pc_hook *hook, gs_pc **out,
                      gs_error *err)
{
    (void)A;
    dist_engine *d = gs_dist_of(eng);
    dist_mat *M = (dist_mat *)A_eng;
    gs_pc *inner = NULL, *pc = NULL;
    *out = NULL;
    int status = type->distributed == GS_PC_DIST_NONE ? refuse(type, err) : GS_OK;
    if (status == GS_OK && !M->split.diag.row_ptr)
        status = gs_error_set(err, GS_ERR_INTERNAL, "the diagonal block of A is not on the host");
    if (status == GS_OK)
        status = gs_pc_create_hooked(type, d->inner, params, &M->split.diag, M->diag, hook,
                                     &inner, err);
    if (!M->split_borrowed) gs_csr_free(&M->split.diag); /* the setup was its last reader */
    if (status == GS_OK) {
        pc = calloc(1, sizeof *pc);
        if (!pc) status = gs_error_set(err, GS_ERR_NOMEM, "out of host memory (preconditioner)");
    }
    status = gs_dist_agree(status, err);
    if (status != GS_OK) {
        gs_pc_destroy(inner);
        free(pc);
        return status;
    }
    pc->type = type;
    pc->eng = eng;
    pc->params = params;
    pc->A = A_eng;
    pc->data = inner;
    pc->apply = dpc_apply;
    pc->apply_dot = dpc_apply_dot;
    pc->destroy = dpc_destroy;
    if (hook) pc->hook = *hook;
    const int local = type->distributed == GS_PC_DIST_BLOCK_LOCAL;
    snprintf(pc->description, sizeof pc->description, "%.190s%s%s", inner->description,
             inner->description[0] && local ? "; " : "", local ? "block-local on each rank's "
             "diagonal block" : "");
    pc->nnz = (int64_t)gs_dist_sum((double)inner->nnz);
    pc->apply_bytes = gs_dist_max(inner->apply_bytes);
    pc->stages = inner->stages;
    stages_max(&pc->stages);
    pc->extra = inner->extra;
    gs_kv_str(&pc->extra, "scope", local ? "block-local" : "exact");
    pc->symmetric = -gs_dist_max(-(double)inner->symmetric) > 0.5;
    *out = pc;
    return GS_OK;
}

int gs_dist_true_residual(gs_engine *e, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                          double *out)
{
    const gs_engine_ops *o = e->ops;
    const int s_rr = GS_MAX_SCALARS - 2, s_bb = GS_MAX_SCALARS - 1;
    gs_vec *r = NULL;
    double v[2];
    int status = o->vec_create(e, gs_vec_length(b), &r);
    if (status != GS_OK) return status;
    GS_TRY(o->copy(e, b, r));
    GS_TRY(o->spmv_axpby(e, gs_coef_const(-1.0), A, x, gs_coef_const(1.0), r)); /* r = b - A x */
    GS_TRY(o->dot(e, r, r, s_rr));
    GS_TRY(o->dot(e, b, b, s_bb));
    GS_TRY(o->scalar_read(e, s_rr, 2, v));
    *out = v[1] > 0 ? sqrt(v[0]) / sqrt(v[1]) : sqrt(v[0]);
cleanup:
    o->vec_destroy(e, r);
    return status;
}
