/* dist_stub.c - the distributed entry points of a build without MPI (the
 * default; make MPI=1 builds the src/dist/ files named _mpi.c instead): one process, and a
 * clear refusal for anything that needs several. */
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "run.h"

static int no_mpi(gs_error *err)
{
    return gs_error_set(err, GS_ERR_UNSUPPORTED,
                        "this gpusolve was built without MPI (rebuild with make MPI=1)");
}

int gs_dist_init(int *argc, char ***argv, int *rank, int *size)
{
    (void)argc, (void)argv;
    *rank = 0, *size = 1;
    return GS_OK;
}

void gs_dist_finalize(void) {}
int gs_dist_agree(int status, gs_error *err) { (void)err; return status; }
void gs_dist_abort(int exit_code) { exit(exit_code); }
double gs_dist_max(double v) { return v; }
double gs_dist_sum(double v) { return v; }
int gs_dist_device(void) { return -1; }

int gs_dist_gather(const double *v, int64_t n_local, double *all, gs_error *err)
{
    (void)err;
    memcpy(all, v, (size_t)n_local * sizeof *v);
    return GS_OK;
}

int gs_engine_dist_create(gs_engine *inner, gs_engine **out, gs_error *err)
{
    gs_engine_destroy(inner);
    *out = NULL;
    return no_mpi(err);
}

int gs_engine_is_dist(const gs_engine *e) { (void)e; return 0; }
gs_engine *gs_engine_dist_inner(gs_engine *e) { return e; }
const gs_mat *gs_engine_dist_local_mat(gs_engine *e, const gs_mat *A) { (void)e; return A; }
void gs_engine_dist_describe(gs_engine *e, gs_dist_summary *s) { (void)e, (void)s; }
int gs_engine_dist_mat_create_split(gs_engine *e, const gs_dist_split *s, int system,
                                    gs_mat **out)
{
    (void)s, (void)system, (void)out;
    return gs_error_set(&e->err, GS_ERR_UNSUPPORTED, "not built with MPI");
}
void gs_engine_dist_mat_seconds(gs_engine *e, double out[GS_DIST_MAT_STAGES])
{
    (void)e;
    for (int k = 0; k < GS_DIST_MAT_STAGES; k++) out[k] = 0.0;
}
void gs_engine_dist_counters_reset(gs_engine *e) { (void)e; }

void gs_engine_dist_counters(gs_engine *e, double *comm_seconds, double *halo_bytes,
                             long *spmv_count, long *reductions)
{
    (void)e;
    *comm_seconds = *halo_bytes = 0;
    *spmv_count = *reductions = 0;
}

int gs_dist_pc_create(const gs_pc_type *type, gs_engine *dist, const gs_params *params,
                      const gs_csr *A, gs_mat *A_eng, const gs_pc_hook *hook, gs_pc **out,
                      gs_error *err)
{
    (void)type, (void)dist, (void)params, (void)A, (void)A_eng, (void)hook;
    *out = NULL;
    return no_mpi(err);
}

int gs_dist_true_residual(gs_engine *dist, const gs_mat *A, const gs_vec *b, const gs_vec *x,
                          double *out)
{
    (void)dist, (void)A, (void)b, (void)x;
    *out = 0;
    return GS_ERR_UNSUPPORTED;
}

int gs_dist_problem_load(const gs_cli *cli, const char *input, gs_problem *p, gs_error *err)
{
    (void)cli, (void)input;
    memset(p, 0, sizeof *p);
    return no_mpi(err);
}
