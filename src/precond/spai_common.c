/* spai_common.c - static SPAI once the pattern is known: min ||A M - I||_F
 * column by column (Grote & Huckle, SIAM J. Sci. Comput. 18(3) 1997, §2, as
 * used by both spai and gspai-opt), the assembly of M and its apply. */
#include "spai_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lsq.h"
#include "mmio.h"

/* Per-thread scratch for one column's local problem. */
typedef struct column_work {
    int32_t *local; /* n: position of row r in I_k, -1 when r is not in I_k */
    int32_t *rows;  /* n: I_k in the order found */
    double *rhs;    /* n: e_k(I_k), then Q^T e_k(I_k) */
    double *Ahat;   /* n1 x n2, column-major */
    size_t ahat_capacity;
} column_work;

static int work_init(column_work *w, int32_t n)
{
    memset(w, 0, sizeof *w);
    w->local = malloc((size_t)n * sizeof *w->local + 1);
    w->rows = malloc((size_t)n * sizeof *w->rows + 1);
    w->rhs = malloc((size_t)n * sizeof *w->rhs + 1);
    if (!w->local || !w->rows || !w->rhs) return -1;
    for (int32_t r = 0; r < n; r++) w->local[r] = -1;
    return 0;
}

static void work_free(column_work *w)
{
    free(w->local);
    free(w->rows);
    free(w->rhs);
    free(w->Ahat);
}

/* I_k = union of the row patterns of A(:,J) (rows of AT): returns n1 = |I_k|
 * and leaves w->local[r] = position of r in I_k. */
static int32_t row_set_build(const gs_csr *AT, const int32_t *J, int32_t n2, column_work *w)
{
    int32_t n1 = 0;
    for (int32_t jj = 0; jj < n2; jj++)
        for (int64_t p = AT->row_ptr[J[jj]]; p < AT->row_ptr[J[jj] + 1]; p++) {
            int32_t r = AT->col[p];
            if (w->local[r] < 0) {
                w->local[r] = n1;
                w->rows[n1++] = r;
            }
        }
    return n1;
}

static void row_set_clear(column_work *w, int32_t n1)
{
    for (int32_t i = 0; i < n1; i++) w->local[w->rows[i]] = -1;
}

void gs_spai_n2_sizes(const gs_csr *MT, gs_spai_sizes *sizes)
{
    int32_t n2max = 0;
    for (int32_t k = 0; k < MT->n_rows; k++) {
        int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - MT->row_ptr[k]);
        if (n2 > n2max) n2max = n2;
    }
    sizes->n2max = n2max;
    sizes->n2avg = MT->n_rows ? (double)MT->nnz / MT->n_rows : 0.0;
}

int gs_spai_n1_sizes(const gs_csr *AT, const gs_csr *MT, gs_spai_sizes *sizes, gs_error *err)
{
    const int32_t n = MT->n_rows;
    int32_t n1max = 0;
    int nomem = 0;
#pragma omp parallel reduction(max : n1max) reduction(| : nomem)
    {
        column_work w;
        int ok = work_init(&w, n) == 0;
#pragma omp for schedule(dynamic, 64)
        for (int32_t k = 0; k < n; k++) {
            if (!ok) {
                nomem = 1;
                continue;
            }
            const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - MT->row_ptr[k]);
            int32_t n1 = row_set_build(AT, MT->col + MT->row_ptr[k], n2, &w);
            if (n1 > n1max) n1max = n1;
            row_set_clear(&w, n1);
        }
        work_free(&w);
    }
    if (nomem)
        return gs_error_set(err, GS_ERR_NOMEM, "out of host memory for the row sets I_k (n = %d)",
                            (int)n);
    sizes->n1max = n1max;
    return GS_OK;
}


typedef struct column_failure {
    int32_t k;      /* column of M, INT32_MAX when none failed */
    int kind;
    int32_t a_col;  /* GS_SPAI_COLUMN_RANK: the dependent column of A */
    int32_t n1, n2;
} column_failure;

/* m_k = argmin ||A(I,J) m - e_k(I)||_2 into mk (n2 entries). */
static int column_solve(const gs_csr *AT, int32_t k, const int32_t *J, int32_t n2, double *mk,
                        column_work *w, column_failure *f)
{
    const int32_t n1 = row_set_build(AT, J, n2, w);
    size_t need = (size_t)n1 * (size_t)n2;
    int kind = GS_SPAI_COLUMN_OK;
    f->n1 = n1, f->n2 = n2;
    if (need > w->ahat_capacity) {
        free(w->Ahat);
        w->Ahat = malloc(need * sizeof(double));
        w->ahat_capacity = w->Ahat ? need : 0;
        if (!w->Ahat) kind = GS_SPAI_COLUMN_NOMEM;
    }
    if (kind == GS_SPAI_COLUMN_OK) {
        if (need) memset(w->Ahat, 0, need * sizeof(double));
        for (int32_t jj = 0; jj < n2; jj++)                     /* Ahat = A(I,J) */
            for (int64_t p = AT->row_ptr[J[jj]]; p < AT->row_ptr[J[jj] + 1]; p++)
                w->Ahat[(size_t)jj * n1 + w->local[AT->col[p]]] = AT->val[p];
        if (n1) memset(w->rhs, 0, (size_t)n1 * sizeof(double));
        if (w->local[k] >= 0) w->rhs[w->local[k]] = 1.0;        /* e_k(I) */
        int rc = gs_lsq_solve(n1, n2, w->Ahat, w->rhs, mk);
        if (rc > 0)
            kind = GS_SPAI_COLUMN_RANK, f->a_col = J[rc - 1];
        else if (w->local[k] < 0)                               /* e_k(I) = 0: m_k = 0 */
            kind = GS_SPAI_COLUMN_ZERO;
    }
    row_set_clear(w, n1);
    return kind;
}

int gs_spai_column_failure(int kind, int32_t k, int32_t n1, int32_t n2, int32_t a_col,
                           const char *who, const char *hint, gs_error *err)
{
    if (kind == GS_SPAI_COLUMN_NOMEM)
        return gs_error_set(err, GS_ERR_NOMEM,
                            "%s: column %d of M: out of host memory for its %d x %d local "
                            "least-squares matrix A(I,J)",
                            who, (int)k + 1, (int)n1, (int)n2);
    if (kind == GS_SPAI_COLUMN_RANK)
        return gs_error_set(err, GS_ERR_NUMERIC,
                            "%s: column %d of M: the %d x %d local least-squares matrix A(I,J) "
                            "is rank deficient: column %d of A is zero or linearly dependent "
                            "on the other columns in J, so A is (numerically) singular",
                            who, (int)k + 1, (int)n1, (int)n2, (int)a_col + 1);
    return gs_error_set(err, GS_ERR_NUMERIC,
                        "%s: column %d of M would be zero, leaving M singular: row %d of A has "
                        "no entry in the columns J chosen for it (a_%d,%d is zero and no "
                        "off-diagonal entry matches); %s",
                        who, (int)k + 1, (int)k + 1, (int)k + 1, (int)k + 1, hint);
}

static int failure_report(const column_failure *f, const char *who, const char *hint,
                          gs_error *err)
{
    return gs_spai_column_failure(f->kind, f->k, f->n1, f->n2, f->a_col, who, hint, err);
}

int gs_spai_solve_columns(const gs_csr *AT, gs_csr *MT, const char *who, const char *hint,
                          gs_error *err)
{
    const int32_t n = MT->n_rows;
    column_failure first = {INT32_MAX, GS_SPAI_COLUMN_OK, -1, 0, 0};
#pragma omp parallel
    {
        column_work w;
        int ok = work_init(&w, n) == 0;
#pragma omp for schedule(dynamic, 16)
        for (int32_t k = 0; k < n; k++) {
            column_failure f = {k, GS_SPAI_COLUMN_NOMEM, -1, 0, 0};
            const int64_t start = MT->row_ptr[k];
            const int32_t n2 = (int32_t)(MT->row_ptr[k + 1] - start);
            if (ok) f.kind = column_solve(AT, k, MT->col + start, n2, MT->val + start, &w, &f);
            if (f.kind != GS_SPAI_COLUMN_OK) {
#pragma omp critical(gs_spai_first_failure)
                if (k < first.k) first = f; /* the lowest column, whatever the schedule */
            }
        }
        work_free(&w);
    }
    if (first.k == INT32_MAX) return GS_OK;
    return failure_report(&first, who, hint, err);
}

int gs_spai_assemble(gs_csr *MT, gs_precision prec, gs_csr *M, gs_error *err)
{
    int status = gs_csr_transpose(MT, M, err); /* column k of M = row k of MT */
    gs_csr_free(MT);
    if (status != GS_OK) return status;
    if (prec == GS_FP32)
        for (int64_t p = 0; p < M->nnz; p++) M->val[p] = (double)(float)M->val[p];
    return GS_OK;
}

/* Private state of both types (the same object: M by rows): the host copy
 * kept for --save-precond (values as stored) and the engine's. */
typedef struct gs_spai_data {
    gs_csr M;
    gs_mat *M_eng;
    const char *save_comment; /* static text for the .mtx header */
} gs_spai_data;

static int spai_apply_dot(gs_pc *pc, const gs_vec *r, gs_vec *z, int slot)
{
    gs_spai_data *d = pc->data;
    return pc->eng->ops->spmv_dot(pc->eng, d->M_eng, r, z, NULL, slot); /* z = M r */
}

static int spai_apply(gs_pc *pc, const gs_vec *r, gs_vec *z)
{
    return spai_apply_dot(pc, r, z, GS_SLOT_NONE);
}

static void spai_destroy(gs_pc *pc)
{
    gs_spai_data *d = pc->data;
    if (!d) return;
    pc->eng->ops->mat_destroy(pc->eng, d->M_eng);
    gs_csr_free(&d->M);
    free(d);
}

static int spai_save(gs_pc *pc, const char *prefix, gs_error *err)
{
    gs_spai_data *d = pc->data;
    char path[4096];
    snprintf(path, sizeof path, "%s_M.mtx", prefix);
    return gs_mm_write_csr(path, &d->M, 0, d->save_comment, err);
}

int gs_spai_install(gs_pc *pc, gs_csr *M, gs_precision prec, const char *save_comment,
                    gs_error *err)
{
    gs_spai_data *d = gs_calloc(1, sizeof *d, "spai preconditioner", err);
    if (!d) return GS_ERR_NOMEM;
    d->M = *M;
    memset(M, 0, sizeof *M);
    d->save_comment = save_comment;
    pc->data = d;
    pc->destroy = spai_destroy;
    int status = pc->eng->ops->mat_create(pc->eng, &d->M, prec, &d->M_eng);
    if (status != GS_OK) return gs_engine_fail(pc->eng, err);
    pc->apply = spai_apply;
    pc->apply_dot = spai_apply_dot;
    gs_pc_set_products(pc, d->M_eng, NULL);
    pc->save = spai_save;
    pc->nnz = d->M.nnz;
    pc->apply_bytes = gs_csr_stream_bytes(&d->M, prec) + 16.0 * d->M.n_rows; /* M, r, z */
    pc->symmetric = 0;
    return GS_OK;
}

void gs_spai_report_sizes(gs_pc *pc, const gs_spai_sizes *sizes)
{
    gs_kv_num(&pc->extra, "n1max", sizes->n1max);
    gs_kv_num(&pc->extra, "n2max", sizes->n2max);
    gs_kv_num(&pc->extra, "n2avg", sizes->n2avg);
}

int gs_spai_finish(gs_pc *pc, const gs_csr *AT, gs_csr *MT, gs_precision prec, const char *who,
                   const char *hint, const char *save_comment, gs_error *err)
{
    gs_csr M = {0};
    int status;
    double t0 = gs_pc_stage_start(pc, "least squares"); /* may be long: tell the hook */
    GS_TRY(gs_spai_solve_columns(AT, MT, who, hint, err));
    GS_TRY(gs_pc_stage_end(pc, "least squares", t0));

    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_spai_assemble(MT, prec, &M, err));
    GS_TRY(gs_pc_stage_end(pc, "assemble", t0));

    t0 = gs_pc_stage_begin(pc);
    GS_TRY(gs_spai_install(pc, &M, prec, save_comment, err));
    GS_TRY(gs_pc_stage_end(pc, "upload", t0));
cleanup:
    gs_csr_free(&M);
    return status;
}
