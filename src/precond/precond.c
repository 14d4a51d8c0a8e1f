/* precond.c - the registry: the one list of preconditioners (precond.h), and
 * the generic layer that creates, times, applies and destroys them. */
#include "precond.h"

#include <stdlib.h>
#include <string.h>

#if GS_HAVE_CUDA
#define CUDA_SETUP(fn) fn
#else
#define CUDA_SETUP(fn) NULL
#endif

/* Parameters are named as in the papers; each type lists only its own. */
static const gs_pc_type registry[] = {
    {.name = "none", .summary = "no preconditioner (M = I)",
     .setup = {gs_none_setup, gs_none_setup}, .distributed = GS_PC_DIST_EXACT},
    {.name = "jacobi", .summary = "M = diag(A)^-1 (all papers' baseline)",
     .setup = {gs_jacobi_setup, CUDA_SETUP(gs_jacobi_setup_cuda)},
     .distributed = GS_PC_DIST_EXACT},
    {.name = "fsai",
     .summary = "factored sparse approximate inverse M = G^T G of an SPD matrix "
                "(Bernaschi et al. 2016)",
     .params = gs_fsai_params, .setup = {gs_fsai_setup_cpu, CUDA_SETUP(gs_fsai_setup_cuda)},
     .distributed = GS_PC_DIST_BLOCK_LOCAL},
    {.name = "spai",
     .summary = "SPAI-ME: min ||AM - I||_F by columns, pattern from thresholded entries of A "
                "(Mehri Dehnavi et al.)",
     .params = gs_spai_params,
     .setup = {gs_spai_setup_cpu, CUDA_SETUP(gs_spai_setup_cuda)}, .paper_method = "bicgstab",
     .distributed = GS_PC_DIST_BLOCK_LOCAL},
    {.name = "gspai-opt",
     .summary = "static SPAI with pattern (E+|A|)^k, S1/S2 strategy per matrix (Chu et al. 2023)",
     .params = gs_gspai_params,
     .setup = {gs_gspai_setup_cpu, CUDA_SETUP(gs_gspai_setup_cuda)}, .paper_method = "bicgstab",
     .distributed = GS_PC_DIST_BLOCK_LOCAL},
    {.name = "isai",
     .summary = "ILU(0) with incomplete sparse approximate inverses of L and U (Anzt et al. 2016)",
     .params = gs_isai_params, .check_params = gs_isai_check_params,
     .setup = {gs_isai_setup_cpu, CUDA_SETUP(gs_isai_setup_cuda)}, .paper_method = "idr",
     .distributed = GS_PC_DIST_BLOCK_LOCAL},
    {.name = "mic",
     .summary = "modified incomplete Cholesky L D L^T, dropped fill to the diagonal (MICPCGA)",
     .params = gs_mic_params, .setup = {gs_mic_setup_cpu, CUDA_SETUP(gs_mic_setup_cuda)}},
    {.name = "ssor-ai",
     .summary = "SSOR approximate inverse M^-1 = F^T F, truncated Neumann series of the SSOR "
                "factors, no triangular solves (MIC paper's SSORPCGA, Helfenstein and Koko 2012)",
     .params = gs_ssorai_params,
     .setup = {gs_ssorai_setup_cpu, CUDA_SETUP(gs_ssorai_setup_cuda)}, .paper_method = "cg"},
    /* registry end: add new types above this line */
};

const gs_pc_type *gs_pc_find(const char *name)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i].name, name) == 0) return &registry[i];
    return NULL;
}

int gs_pc_type_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

void gs_pc_set_products(gs_pc *pc, const gs_mat *p0, const gs_mat *p1)
{
    pc->product[0] = p0;
    pc->product[1] = p1;
    pc->n_product = p0 ? (p1 ? 2 : 1) : 0;
}

void gs_pc_set_factors(gs_pc *pc, const gs_mat *lower, const gs_mat *upper, const gs_vec *dinv)
{
    const int all = lower && upper && dinv;
    pc->factor[0] = all ? lower : NULL;
    pc->factor[1] = all ? upper : NULL;
    pc->factor_dinv = all ? dinv : NULL;
}

const gs_pc_type *gs_pc_type_at(int i) { return &registry[i]; }

int gs_pc_is_param(const char *name)
{
    for (int i = 0; i < gs_pc_type_count(); i++)
        if (gs_param_find(registry[i].params, name)) return 1;
    return 0;
}

int gs_pc_check_params(const gs_pc_type *type, const gs_params *params, gs_error *err)
{
    int status = gs_params_check(params, type->params, type->name, err);
    if (status == GS_OK && type->check_params) status = type->check_params(params, err);
    return status;
}

/* The engine lays A out for the iterations once no setup reads it any more
 * (the CUDA engine keeps the system matrix as the CSR it uploaded until
 * then, so that a setup reading rows finds them without a second copy). */
static int pc_layout_of_A(gs_pc *pc, gs_mat *A_eng)
{
    if (!A_eng || !pc->eng->ops->setup_done) return GS_OK;
    const double t0 = gs_pc_stage_begin(pc);
    int laid_out = 0;
    int status = pc->eng->ops->setup_done(pc->eng, A_eng, &laid_out);
    if (status == GS_OK && laid_out) status = gs_pc_stage_end(pc, "layout of A", t0);
    return status;
}

int gs_pc_create(const gs_pc_type *type, gs_engine *eng, const gs_params *params,
                 const gs_csr *A, gs_mat *A_eng, gs_pc **out, gs_error *err)
{
    return gs_pc_create_hooked(type, eng, params, A, A_eng, NULL, out, err);
}

int gs_pc_create_hooked(const gs_pc_type *type, gs_engine *eng, const gs_params *params,
                        const gs_csr *A, gs_mat *A_eng, const gs_pc_hook *hook, gs_pc **out,
                        gs_error *err)
{
    *out = NULL;
    /* A type without a setup for this engine builds on the host (its CPU
     * reference) and hands its matrices to the engine: the apply still runs
     * there, and the report says where the setup ran. */
    gs_pc_setup_fn setup = type->setup[eng->ops->kind];
    const int host_fallback = !setup;
    if (host_fallback) setup = type->setup[GS_ENGINE_CPU];
    gs_pc *pc = gs_calloc(1, sizeof *pc, "preconditioner", err);
    if (!pc) return GS_ERR_NOMEM;
    pc->type = type;
    pc->eng = eng;
    pc->params = params;
    pc->A = A_eng;
    if (hook) pc->hook = *hook;
    int status = gs_pc_check_params(type, params, err);
    if (status == GS_OK) status = setup(pc, A, err);
    if (status == GS_OK) status = pc_layout_of_A(pc, A_eng);
    if (status == GS_ERR_TIME_LIMIT) /* a stage end saw it: no message was set there */
        gs_pc_deadline(pc, pc->stages.count ? pc->stages.stage[pc->stages.count - 1].name
                                            : "setup", err);
    if (status == GS_OK) status = gs_engine_fail(eng, err);
    if (status == GS_OK && host_fallback) gs_kv_str(&pc->extra, "setup", "host");
    if (status == GS_OK && !pc->apply)
        status = gs_error_set(err, GS_ERR_INTERNAL, "preconditioner '%s' set no apply",
                              type->name);
    if (status != GS_OK) {
        gs_pc_destroy(pc);
        return status;
    }
    *out = pc;
    return GS_OK;
}

void gs_pc_destroy(gs_pc *pc)
{
    if (!pc) return;
    if (pc->destroy)
        pc->destroy(pc);
    else
        free(pc->data);
    free(pc);
}

int gs_pc_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    if (pc->apply_dot) return pc->apply_dot(pc, r, z, slot);
    int status = pc->apply(pc, r, z);
    if (status != GS_OK || slot == GS_SLOT_NONE) return status;
    return pc->eng->ops->dot(pc->eng, r, z, slot);
}

int gs_pc_setup_exit(gs_pc *pc, int status, gs_error *err)
{
    if (status != GS_OK) {
        gs_engine_fail(pc->eng, err);
        gs_error_prefix(err, "%s: ", pc->type->name);
    }
    return status;
}

double gs_pc_stage_begin(gs_pc *pc)
{
    (void)pc;
    return gs_now();
}

double gs_pc_stage_start(gs_pc *pc, const char *name)
{
    if (pc->hook.stage_begin) pc->hook.stage_begin(pc->hook.ctx, name);
    return gs_now();
}

void gs_pc_stage_progress(gs_pc *pc, const char *what)
{
    if (pc && pc->hook.stage_begin) pc->hook.stage_begin(pc->hook.ctx, what);
}

int gs_pc_stage_end(gs_pc *pc, const char *name, double t0)
{
    int status = pc->eng->ops->sync(pc->eng);
    gs_stages_add(&pc->stages, name, gs_now() - t0);
    if (pc->hook.stage_done) pc->hook.stage_done(pc->hook.ctx, name);
    if (status == GS_OK && gs_pc_past_deadline(pc)) status = GS_ERR_TIME_LIMIT;
    return status;
}

int gs_pc_past_deadline(const gs_pc *pc)
{
    return pc && pc->hook.deadline > 0.0 && gs_now() >= pc->hook.deadline;
}

int gs_pc_deadline(gs_pc *pc, const char *stage, gs_error *err)
{
    if (!gs_pc_past_deadline(pc)) return GS_OK;
    return gs_error_set(err, GS_ERR_TIME_LIMIT, "the time limit passed during the setup stage '%s'",
                        stage);
}
