/* comm_mpi.c - starting MPI, choosing each rank's GPU, and the few
 * collectives the program's layers share (agreeing on an error, maxima,
 * gathering a vector on rank 0). MPI builds only (make MPI=1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

static int g_started, g_device = -1;
static char g_device_id[32]; /* the device chosen, as text (compared across ranks) */

MPI_Comm gs_dist_comm(void) { return MPI_COMM_WORLD; }

int gs_dist_mpi_fail(int mpi_code, const char *what, gs_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    return gs_error_set(err, GS_ERR_INTERNAL, "%s: MPI error %d (%s)", what, mpi_code, text);
}

static int env_int(const char *const *names, int fallback)
{
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return fallback;
}

/* Rank r uses device (local rank) mod (device count), chosen by index with
 * every device visible: NCCL moves data between GPUs by CUDA IPC, which a
 * per-rank CUDA_VISIBLE_DEVICES would prevent. */
static void choose_device(void)
{
    static const char *local_names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                        "SLURM_LOCALID", "PMIX_LOCAL_RANK", NULL};
    int local = env_int(local_names, -1);
    if (local < 0) { /* no launcher variable: the rank among those sharing this host */
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    const int count = gs_cuda_device_count();
    if (count <= 0) return;
    g_device = local % count;
    snprintf(g_device_id, sizeof g_device_id, "%d", g_device);
}

int gs_dist_init(int *argc, char ***argv, int *rank, int *size)
{
    static const char *launched[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                     "MPI_LOCALNRANKS", NULL};
    *rank = 0, *size = 1;
    if (env_int(launched, -1) < 0) return GS_OK; /* not under a launcher: one process */
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return GS_ERR_INTERNAL;
    g_started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return GS_OK;
}

void gs_dist_finalize(void)
{
    if (g_started) MPI_Finalize();
    g_started = 0;
}

/* Chosen at the first call (collective where no launcher variable gives the
 * local rank), so that runs that use no GPU never start CUDA for it. */
int gs_dist_device(void)
{
    static int chosen;
    if (!chosen && g_started && GS_HAVE_CUDA) choose_device();
    chosen = 1;
    return g_device;
}

const char *gs_dist_device_id(void)
{
    gs_dist_device();
    return g_device_id;
}

int gs_dist_agree(int status, gs_error *err)
{
    if (!g_started) return status;
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int mine = status != GS_OK ? rank : size, first = size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size) return GS_OK;
    gs_error copy = *err;
    copy.status = (gs_status)status;
    MPI_Bcast(&copy, (int)sizeof copy, MPI_BYTE, first, MPI_COMM_WORLD);
    *err = copy;
    if (!err->msg[0])
        snprintf(err->msg, sizeof err->msg, "rank %d failed: %s", first,
                 gs_status_name(copy.status));
    return copy.status;
}

void gs_dist_abort(int exit_code)
{
    fflush(stdout);
    fflush(stderr);
    if (g_started) MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

double gs_dist_max(double v)
{
    double out = v;
    if (g_started) MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

double gs_dist_sum(double v)
{
    double out = v;
    if (g_started) MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
}

/* Rank 0 receives every rank's rows in rank order (counts fit int: a rank's
 * rows are at most 2^31 - 1). */
int gs_dist_gather(const double *v, int64_t n_local, double *all, gs_error *err)
{
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int count = (int)n_local, *counts = NULL, *displs = NULL, status = GS_OK;
    if (rank == 0) {
        counts = gs_malloc((size_t)size * sizeof *counts, "gather counts", err);
        displs = gs_malloc((size_t)size * sizeof *displs, "gather offsets", err);
        if (!counts || !displs) status = GS_ERR_NOMEM;
    }
    status = gs_dist_agree(status, err);
    if (status == GS_OK) {
        MPI_Gather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0)
            for (int r = 0, off = 0; r < size; off += counts[r], r++) displs[r] = off;
        int rc = MPI_Gatherv(v, count, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0,
                             MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) status = gs_dist_mpi_fail(rc, "gathering the solution", err);
    }
    free(counts);
    free(displs);
    return status;
}
