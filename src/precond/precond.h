/* precond.h - preconditioners as types in one registry (like PETSc's
 * PCRegister). A type names its parameters and its two setups: the CPU
 * reference (src/pc_<name>.c) and the CUDA setup (cuda/<name>.cu). A setup
 * builds what the apply needs as engine objects and installs the apply; the
 * apply is usually written once over the engine table (z = G^T (G r) is two
 * spmv calls), so both engines share it. Adding a preconditioner is one line
 * in precond.c plus its files: no switch on names anywhere else. */
#ifndef GS_PRECOND_H
#define GS_PRECOND_H

#include <stdint.h>

#include "csr.h"
#include "engine.h"
#include "error.h"
#include "kvlist.h"
#include "params.h"
#include "timer.h"

typedef struct gs_pc gs_pc;

/* Told the name of each setup stage as it ends (gs_pc_stage_end), e.g. for
 * a progress line; the caller's code, never the library's, prints.
 * stage_begin (may be NULL) is told the name of a stage that may be long
 * as it starts (gs_pc_stage_start), and again while it runs
 * (gs_pc_stage_progress, e.g. "least squares: cuSOLVER column 3 of 8"):
 * no synchronisation is added for it. */
typedef struct gs_pc_hook {
    void (*stage_done)(void *ctx, const char *name);
    void *ctx;
    void (*stage_begin)(void *ctx, const char *name);
    /* gs_now() past which the setup stops with GS_ERR_TIME_LIMIT (the run's
     * --time-limit): at the end of a stage (gs_pc_stage_end) and between
     * chunks of a long one (gs_pc_deadline); 0: no limit. */
    double deadline;
} gs_pc_hook;

/* Builds pc->data and sets pc->apply (and optionally the other hooks) for A
 * on pc->eng. A is the host matrix, pc->A the same matrix on the engine; the
 * setup times its stages with gs_pc_stage_begin/end. */
typedef int (*gs_pc_setup_fn)(gs_pc *pc, const gs_csr *A, gs_error *err);

/* Rules between a type's parameters that no single declaration can say
 * (isai: --trisolve exact builds no ISAI, so --isai-power 2 would be
 * ignored). Runs after every value passed its declaration; GS_ERR_USAGE
 * naming the options. */
typedef int (*gs_pc_check_fn)(const gs_params *params, gs_error *err);

typedef struct gs_pc_type {
    const char *name;            /* command-line name */
    const char *summary;         /* one line for --help */
    const gs_param_decl *params; /* NULL-terminated, may be NULL */
    gs_pc_check_fn check_params; /* NULL: no rules beyond the declarations */
    gs_pc_setup_fn setup[GS_ENGINE_KINDS]; /* per engine; NULL: not available there */
    /* The Krylov method the type's paper pairs it with, which -m auto takes
     * for a nonsymmetric A or M ("bicgstab" for spai and gspai-opt, "idr"
     * for isai). NULL: no paper method, -m auto's default rule (cg when A
     * and M are both symmetric, else bicgstab). */
    const char *paper_method;
    /* Under mpirun (src/dist/, docs/multigpu.md): GS_PC_DIST_EXACT where
     * the setup on each rank's diagonal block of A gives M itself (jacobi),
     * GS_PC_DIST_BLOCK_LOCAL where it gives a block-local M (block Jacobi
     * over the ranks' blocks, each block the type's own M), GS_PC_DIST_NONE
     * (0): refused with several ranks. */
    int distributed;
} gs_pc_type;

enum { GS_PC_DIST_NONE = 0, GS_PC_DIST_EXACT = 1, GS_PC_DIST_BLOCK_LOCAL = 2 };

struct gs_pc {
    const gs_pc_type *type;
    gs_engine *eng;
    const gs_params *params;
    const gs_mat *A; /* A as already stored on eng (GPU setups gather from it) */
    void *data;      /* the type's private state */

    /* z = M r; r and z distinct. Set by the setup. */
    int (*apply)(gs_pc *pc, const gs_vec *r, gs_vec *z);
    /* Optional fused form: z = M r and S[slot] = r.z. NULL: apply then dot. */
    int (*apply_dot)(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot);
    /* Frees data's engine objects and data itself. NULL: free(data). */
    void (*destroy)(gs_pc *pc);
    /* --save-precond PREFIX: writes PREFIX_<X>.mtx files. NULL: unsupported. */
    int (*save)(gs_pc *pc, const char *prefix, gs_error *err);

    /* What the report shows, filled by the setup. */
    char description[256]; /* parameters as used: "tau=0.01 k=2 delta=0.05" */
    int64_t nnz;           /* nnz(M) as stored (FSAI: nnz(G)) */
    double apply_bytes;    /* bytes one apply must move (for the floor), vectors included */
    gs_stages stages;      /* setup stages, in order */
    gs_kvlist extra;       /* type-specific report items */
    int symmetric;         /* 1 if M is symmetric (CG may use it) */
    /* Where M r is the pointwise product d .* r (jacobi: d = diag(A)^-1),
     * d; where M = I (none), pointwise_identity = 1. A fused kernel that
     * runs whole iterations (engine op fused_run) applies M from these
     * instead of calling apply; NULL and 0: M is neither. */
    const gs_vec *pointwise;
    int pointwise_identity;
    /* Where M r = product[0] (product[1] r) (n_product 2: fsai's G^T G,
     * ssor-ai's F^T F, isai's M_U M_L without sweeps) or product[0] r
     * (n_product 1: spai's and gspai-opt's M), the matrices as stored on
     * eng: the fused kernel applies M from these too; 0: M is not. */
    const gs_mat *product[2];
    int n_product;
    /* Where M r = factor[1]^-1 (factor_dinv .* (factor[0]^-1 r)), factor[0]
     * unit lower and factor[1] unit upper (their diagonals, stored or not,
     * are not read; mic: L D L^T, factor[1] = L^T, factor_dinv = D^-1),
     * the matrices and D^-1 as stored on eng: the fused kernel applies M
     * from these too (its substitutions by levels); NULL: M is not. */
    const gs_mat *factor[2];
    const gs_vec *factor_dinv;
    gs_pc_hook hook;       /* set by gs_pc_create_hooked; zero: none */
};

/* pc->product = {p0, p1} (p1 NULL: M r = p0 r), n_product to match. */
void gs_pc_set_products(gs_pc *pc, const gs_mat *p0, const gs_mat *p1);
/* pc->factor = {lower, upper}, pc->factor_dinv = dinv (all three or none). */
void gs_pc_set_factors(gs_pc *pc, const gs_mat *lower, const gs_mat *upper, const gs_vec *dinv);

/* The registry. */
const gs_pc_type *gs_pc_find(const char *name);
int gs_pc_type_count(void);
const gs_pc_type *gs_pc_type_at(int i);
/* 1 if name is a parameter of any registered preconditioner. */
int gs_pc_is_param(const char *name);
/* GS_ERR_USAGE naming the option if params name a parameter that type does
 * not declare, a value outside its declaration, or break the type's
 * check_params rules. The command line calls it before any matrix is read;
 * gs_pc_create calls it again for callers that skip the parser (tests). */
int gs_pc_check_params(const gs_pc_type *type, const gs_params *params, gs_error *err);

/* Create and set up a preconditioner of the given type on eng for A; the
 * setup time (every stage, synchronised) lands in (*out)->stages. A type
 * with no setup for eng's kind runs its CPU setup, whose matrices go to eng
 * (report item setup=host). A_eng is A on eng: the setup reads the views it
 * needs of it through the engine (rows, the diagonal); once the setup is
 * over the engine is told so (ops->setup_done) and gives A the layout its
 * products want, timed as the stage "layout of A" where it had work to do. */
int gs_pc_create(const gs_pc_type *type, gs_engine *eng, const gs_params *params,
                 const gs_csr *A, gs_mat *A_eng, gs_pc **out, gs_error *err);
/* gs_pc_create with a hook called as each setup stage ends (hook may be NULL). */
int gs_pc_create_hooked(const gs_pc_type *type, gs_engine *eng, const gs_params *params,
                        const gs_csr *A, gs_mat *A_eng, const gs_pc_hook *hook, gs_pc **out,
                        gs_error *err);
void gs_pc_destroy(gs_pc *pc); /* NULL-safe */

/* z = M r, and S[slot] = r.z when slot != GS_SLOT_NONE. */
int gs_pc_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot);

/* A setup's exit (its cleanup label): returns status; on failure first takes
 * the engine's own error where it has one, then names the type before the
 * message ("mic: non-positive pivot ..."). */
int gs_pc_setup_exit(gs_pc *pc, int status, gs_error *err);

/* Stage timing for setups: begin returns a timestamp; end synchronises the
 * engine (so GPU work is inside the stage) and adds the elapsed time. */
double gs_pc_stage_begin(gs_pc *pc);
int gs_pc_stage_end(gs_pc *pc, const char *name, double t0);
/* gs_pc_stage_begin that also tells the hook's stage_begin the stage's name
 * (no device synchronisation: the host only queues work until the stage ends). */
double gs_pc_stage_start(gs_pc *pc, const char *name);
/* What a long stage is doing now, for the hook's stage_begin (no-op without). */
void gs_pc_stage_progress(gs_pc *pc, const char *what);

/* The run's --time-limit inside a setup. gs_pc_stage_end returns
 * GS_ERR_TIME_LIMIT once the deadline has passed; a long stage also asks
 * between its chunks of rows or columns: gs_pc_deadline returns
 * GS_ERR_TIME_LIMIT (err names the stage) when it has passed, else GS_OK.
 * Neither synchronises the device: a GPU setup asks where the host has
 * waited for the chunk anyway. gs_pc_past_deadline is the bare test, for
 * OpenMP loops (a thread that sees it makes the others skip their remaining
 * iterations; the loop then returns gs_pc_deadline's status). NULL pc: no
 * deadline. gs_pc_create then fails with GS_ERR_TIME_LIMIT, everything the
 * setup allocated freed; the run reports reason "time limit". */
int gs_pc_past_deadline(const gs_pc *pc);
int gs_pc_deadline(gs_pc *pc, const char *stage, gs_error *err);

/* Setups of the built-in types, referenced by the registry. */
int gs_none_setup(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_jacobi_setup(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_jacobi_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err); /* cuda/precond/jacobi.cu */
int gs_fsai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err);   /* cuda/precond/fsai.cu */
int gs_spai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err);   /* cuda/precond/spai.cu */
int gs_gspai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err);  /* cuda/precond/gspai.cu */
int gs_isai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err);   /* cuda/precond/isai.cu */

/* The papers' preconditioners: parameters and CPU reference setups
 * (src/pc_<name>.c); CUDA setups (cuda/<name>.cu) are declared there. */
extern const gs_param_decl gs_fsai_params[];
extern const gs_param_decl gs_spai_params[];
extern const gs_param_decl gs_gspai_params[];
extern const gs_param_decl gs_isai_params[];
extern const gs_param_decl gs_mic_params[];
int gs_isai_check_params(const gs_params *params, gs_error *err);
int gs_fsai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_spai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_gspai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_isai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_mic_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_mic_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err); /* cuda/precond/mic.cu */
/* mic's shift sequence (pc_mic.c), shared by both setups: the shift to try
 * after a breakdown at alpha (0: the first), or 0 past the bound. */
double gs_mic_next_shift(double alpha);
/* mic's input checks with the CPU setup's messages (square, values,
 * symmetric, a positive finite diagonal). */
int gs_mic_check_input(const gs_csr *A, gs_error *err);
/* mic's factorisation on the host (pc_mic.c), shared by both setups (the CUDA
 * setup takes it where its device factorisation would be latency-bound:
 * cuda/precond/mic.cu): LT = L^T (unit diagonal stored, triu(A)'s pattern)
 * and d = D of A + shift diag(A), *shift in: the first tried, out: the one
 * used (the reference's sequence unless fixed), *tries; st: what the report
 * says of it. The reference's messages and its deadline checks. */
typedef struct gs_mic_stats {
    int64_t dropped;  /* dropped fill updates */
    double min_ratio; /* min d_k / a_kk */
} gs_mic_stats;
int gs_mic_factor_host(gs_pc *pc, const gs_csr *A, double omega, int fixed, double *shift,
                       gs_csr *LT, double *d, int *tries, gs_mic_stats *st, gs_error *err);
extern const gs_param_decl gs_ssorai_params[];
int gs_ssorai_setup_cpu(gs_pc *pc, const gs_csr *A, gs_error *err);
int gs_ssorai_setup_cuda(gs_pc *pc, const gs_csr *A, gs_error *err); /* cuda/precond/ssorai.cu */

#endif
