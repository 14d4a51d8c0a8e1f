/* halo_mpi.c - the host transport of the distributed engine (CPU engine):
 * halos by MPI point-to-point (receives posted first, sends after packing),
 * slot sums by MPI_Allreduce on the engine's scalar array in place. Time
 * spent inside MPI (waiting included) is the communication time. */
#include <stdlib.h>

#include "dist_impl.h"

typedef struct host_mat {
    double *send, *halo;
    MPI_Request *req; /* n_recv + n_send */
} host_mat;

static double coef_value(const double *S, gs_coef k) /* as the engines evaluate it */
{
    double v = k.c;
    if (k.num0 >= 0) v *= S[k.num0];
    if (k.num1 >= 0) v *= S[k.num1];
    double dd = 1.0;
    if (k.den0 >= 0) dd *= S[k.den0];
    if (k.den1 >= 0) dd *= S[k.den1];
    return dd == 0.0 ? 0.0 : v / dd;
}

static int host_mat_init(dist_engine *d, dist_mat *M)
{
    host_mat *h = calloc(1, sizeof *h);
    const int32_t n_send = M->send_start[M->n_send];
    if (h) {
        h->send = malloc((size_t)(n_send ? n_send : 1) * sizeof(double));
        h->halo = malloc((size_t)(M->split.n_halo ? M->split.n_halo : 1) * sizeof(double));
        h->req = malloc((size_t)(M->n_recv + M->n_send + 1) * sizeof(MPI_Request));
    }
    M->transport = h;
    if (!h || !h->send || !h->halo || !h->req)
        return gs_error_set(&d->inner->err, GS_ERR_NOMEM, "out of host memory for halo buffers");
    return GS_OK;
}

static void host_mat_free(dist_engine *d, dist_mat *M)
{
    (void)d;
    host_mat *h = M->transport;
    if (!h) return;
    free(h->send);
    free(h->halo);
    free(h->req);
    free(h);
    M->transport = NULL;
}

static int host_halo_start(dist_engine *d, dist_mat *M, const gs_vec *x)
{
    host_mat *h = M->transport;
    const double *xx = d->inner->ops->vec_data(d->inner, x);
    const double t0 = MPI_Wtime();
    for (int k = 0; k < M->n_recv; k++)
        MPI_Irecv(h->halo + M->recv_start[k], M->recv_start[k + 1] - M->recv_start[k],
                  MPI_DOUBLE, M->recv_rank[k], 23, d->comm, &h->req[k]);
    const int32_t n_send = M->send_start[M->n_send];
    for (int32_t i = 0; i < n_send; i++) h->send[i] = xx[M->send_idx[i]];
    for (int k = 0; k < M->n_send; k++)
        MPI_Isend(h->send + M->send_start[k], M->send_start[k + 1] - M->send_start[k],
                  MPI_DOUBLE, M->send_rank[k], 23, d->comm, &h->req[M->n_recv + k]);
    d->comm_seconds += MPI_Wtime() - t0;
    d->halo_bytes += 8.0 * M->split.n_halo;
    return GS_OK;
}

static int host_halo_finish(dist_engine *d, dist_mat *M, gs_coef ka, gs_vec *y,
                            const gs_vec *w, int slot)
{
    host_mat *h = M->transport;
    const double t0 = MPI_Wtime();
    int rc = MPI_Waitall(M->n_recv + M->n_send, h->req, MPI_STATUSES_IGNORE);
    d->comm_seconds += MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) return gs_dist_mpi_fail(rc, "halo exchange", &d->inner->err);
    double *S = d->inner->ops->scalar_data(d->inner);
    double *yy = d->inner->ops->vec_data(d->inner, y);
    const double *ww = w ? d->inner->ops->vec_data(d->inner, w) : NULL;
    const double a = coef_value(S, ka);
    const gs_csr *O = &M->split.off;
    double part = 0.0;
    for (int32_t r = 0; r < M->split.n_off_rows; r++) { /* y_i += a (A_off halo)_i */
        double s = 0.0;
        for (int64_t k = O->row_ptr[r]; k < O->row_ptr[r + 1]; k++) s += O->val[k] * h->halo[O->col[k]];
        const int32_t i = M->split.off_rows[r];
        yy[i] += a * s;
        if (ww) part += a * s * ww[i];
    }
    if (slot != GS_SLOT_NONE) S[slot] += part;
    return GS_OK;
}

static int host_allreduce(dist_engine *d, const int *slot0, const int *count, int runs)
{
    double *S = d->inner->ops->scalar_data(d->inner);
    const double t0 = MPI_Wtime();
    int rc = MPI_SUCCESS;
    for (int i = 0; i < runs && rc == MPI_SUCCESS; i++)
        rc = MPI_Allreduce(MPI_IN_PLACE, S + slot0[i], count[i], MPI_DOUBLE, MPI_SUM, d->comm);
    d->comm_seconds += MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) return gs_dist_mpi_fail(rc, "sum over ranks", &d->inner->err);
    return GS_OK;
}

static int host_collect(dist_engine *d)
{
    (void)d;
    return GS_OK;
}

static void host_destroy(dist_engine *d) { (void)d; }

static const dist_transport host_transport = {
    "mpi", host_mat_init, host_mat_free, host_halo_start, host_halo_finish,
    host_allreduce, host_collect, host_destroy, NULL, 0,
};

int gs_dist_transport_host(dist_engine *d, gs_error *err)
{
    if (!d->inner->ops->vec_data || !d->inner->ops->scalar_data)
        return gs_error_set(err, GS_ERR_INTERNAL, "the %s engine gives no raw access to vectors",
                            d->inner->ops->name);
    d->tr = &host_transport;
    d->halo_overlap = 1; /* always: the local product between Isend/Irecv and Waitall */
    return GS_OK;
}
