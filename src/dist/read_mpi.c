/* read_mpi.c - parallel reading of a Matrix Market file (docs/multigpu.md):
 * rank 0 reads the banner and size line, every rank parses the lines of its
 * byte range (mmio.c's parts), the per-row counts give the nonzero-balanced
 * row blocks, and the entries travel to the ranks that own their rows
 * (MPI_Alltoallv), where each rank builds its rows with gs_csr_from_coo from
 * its entries in file order: the one-process reader's rows, bit for bit. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"
#include "read_mpi.h"
#include "timer.h"

typedef struct read_ctx {
    const char *path;
    int rank, size;
    MPI_Comm comm;
    gs_mm_head head;
    gs_mm_entries e; /* this rank's stored entries, in file order */
} read_ctx;

/* The owner of a row: the block r with begin[r] <= row < begin[r + 1]. */
static int owner_of(const int64_t *begin, int size, int64_t row)
{
    int lo = 0, hi = size - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (begin[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static int mirrored(const read_ctx *x) { return x->head.info.symmetry != GS_MM_GENERAL; }

static int nomem(const read_ctx *x, const char *what, gs_error *err)
{
    return gs_error_set(err, GS_ERR_NOMEM, "%s: out of memory for %s", x->path, what);
}

static int too_many(int64_t count, const char *what, gs_error *err)
{
    return gs_error_set(err, GS_ERR_UNSUPPORTED, "%lld %s on one rank, more than one MPI "
                        "message carries (2^31 - 1): use more ranks", (long long)count, what);
}

/* Rank 0 reads the banner and size line; every rank gets them. */
static int read_head(read_ctx *x, gs_error *err)
{
    int status = x->rank == 0 ? gs_mm_read_head(x->path, &x->head, err) : GS_OK;
    status = gs_dist_agree(status, err);
    if (status == GS_OK) MPI_Bcast(&x->head, (int)sizeof x->head, MPI_BYTE, 0, x->comm);
    return status;
}

/* Each rank reads and counts its part; the counts of the parts before it
 * give its first line and entry numbers; then it parses. The lowest failing
 * rank holds the file's first bad line. */
static int read_parts(read_ctx *x, gs_error *err)
{
    gs_mm_part part;
    int64_t mine[2] = {0, 0}, *all = NULL, before[2] = {0, 0}, total[2] = {0, 0};
    int status = gs_mm_part_read(x->path, &x->head, x->rank, x->size, &part, err);
    status = gs_dist_agree(status, err);
    if (status != GS_OK) return status;
    all = malloc(2 * (size_t)x->size * sizeof *all);
    status = gs_dist_agree(all ? GS_OK : nomem(x, "the line counts", err), err);
    if (status == GS_OK) {
        mine[0] = part.lines, mine[1] = part.entries;
        MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, x->comm);
        for (int q = 0; q < x->size; q++)
            for (int k = 0; k < 2; k++) {
                if (q < x->rank) before[k] += all[2 * q + k];
                total[k] += all[2 * q + k];
            }
        status = gs_mm_part_parse(x->path, &x->head, &part, x->head.body_line + before[0],
                                  before[1], &x->e, err);
        status = gs_dist_agree(status, err);
    }
    gs_mm_part_free(&part);
    free(all);
    if (status == GS_OK && total[1] < x->head.expected) /* the same on every rank */
        status = gs_mm_fail_premature_end(
            x->path, x->head.head_newlines + total[0] + !x->head.ends_in_newline,
            x->head.expected, total[1], err);
    return status;
}

/* Entries with their mirrors (symmetric storage) on this rank. */
static int64_t entries_with_mirrors(const read_ctx *x)
{
    int64_t n = x->e.count;
    if (mirrored(x))
        for (int64_t k = 0; k < x->e.count; k++) n += x->e.row[k] != x->e.col[k];
    return n;
}

/* gs_mm_read_csr refuses a matrix with more rows than its entries (mirrors
 * included) can fill, naming the first empty row, which is among the first
 * count + 1 rows: marks of those rows, OR-ed over the ranks. */
static int check_rows_reached(const read_ctx *x, int64_t count, gs_error *err)
{
    if (x->head.info.rows <= count) return GS_OK;
    unsigned char *seen = calloc((size_t)count + 1, 1), *any = calloc((size_t)count + 1, 1);
    int status = gs_dist_agree(seen && any ? GS_OK : nomem(x, "the row marks", err), err);
    if (status == GS_OK) {
        for (int64_t k = 0; k < x->e.count; k++) {
            if (x->e.row[k] <= count) seen[x->e.row[k]] = 1;
            if (mirrored(x) && x->e.row[k] != x->e.col[k] && x->e.col[k] <= count)
                seen[x->e.col[k]] = 1;
        }
        MPI_Allreduce(seen, any, (int)(count + 1), MPI_UNSIGNED_CHAR, MPI_MAX, x->comm);
        int64_t empty = 0;
        while (any[empty]) empty++;
        status = gs_mm_fail_empty_row(x->path, &x->head, empty, count, err);
    }
    free(seen);
    free(any);
    return status;
}

/* What gs_problem_load and the rank-0 path check once the file is read;
 * every rank knows the same sizes, so every rank gives the same answer. */
static int check_matrix(const read_ctx *x, int64_t count, gs_error *err)
{
    const gs_mm_info *in = &x->head.info;
    int status = check_rows_reached(x, count, err);
    if (status != GS_OK) return status;
    if (in->rows != in->cols)
        return gs_error_set(err, GS_ERR_INPUT, "%s: matrix is %d x %d, not square", x->path,
                            (int)in->rows, (int)in->cols);
    if (in->rows == 0)
        return gs_error_set(err, GS_ERR_INPUT, "%s: the matrix has no rows", x->path);
    return gs_dist_partition_check(in->rows, x->size, err);
}

/* Every row's entry count (mirrors included), summed over the ranks into
 * equal slabs of rows (MPI_Reduce_scatter: n int64 a rank, once), then the
 * row blocks. With duplicates these are not yet the blocks of the summed
 * matrix: see fix_blocks. */
static int partition_by_counts(const read_ctx *x, int64_t *begin, gs_error *err)
{
    const int64_t n = x->head.info.rows;
    int64_t *count = calloc((size_t)n, sizeof *count);
    int *slab = malloc((size_t)x->size * sizeof *slab);
    int status = gs_dist_agree(count && slab ? GS_OK : nomem(x, "the row counts", err), err);
    if (status == GS_OK) {
        for (int64_t k = 0; k < x->e.count; k++) {
            count[x->e.row[k]]++;
            if (mirrored(x) && x->e.row[k] != x->e.col[k]) count[x->e.col[k]]++;
        }
        for (int q = 0; q < x->size; q++)
            slab[q] = (int)(n * (q + 1) / x->size - n * q / x->size);
        const int64_t row0 = n * x->rank / x->size;
        MPI_Reduce_scatter(MPI_IN_PLACE, count, slab, MPI_INT64_T, MPI_SUM, x->comm);
        status = gs_dist_partition_slabs(count, row0, slab[x->rank], n, x->size, begin, err);
    }
    free(count);
    free(slab);
    return status;
}

/* ---- the entries to their rows' owners ---- */

typedef struct triples {
    int32_t *row, *col;
    double *val;
} triples;

static void triples_free(triples *t)
{
    free(t->row);
    free(t->col);
    free(t->val);
    memset(t, 0, sizeof *t);
}

static int triples_alloc(triples *t, int64_t n, int with_values)
{
    const size_t k = n > 0 ? (size_t)n : 1;
    t->row = malloc(k * sizeof *t->row);
    t->col = malloc(k * sizeof *t->col);
    t->val = with_values ? malloc(k * sizeof *t->val) : NULL;
    return t->row && t->col && (!with_values || t->val) ? GS_OK : GS_ERR_NOMEM;
}

/* Room for n triples in t (its first ones kept). */
static int triples_grow(triples *t, int64_t n, int with_values)
{
    const size_t k = n > 0 ? (size_t)n : 1;
    int32_t *row = realloc(t->row, k * sizeof *row);
    if (row) t->row = row;
    int32_t *col = realloc(t->col, k * sizeof *col);
    if (col) t->col = col;
    double *val = with_values ? realloc(t->val, k * sizeof *val) : NULL;
    if (val) t->val = val;
    return row && col && (!with_values || val) ? GS_OK : GS_ERR_NOMEM;
}

/* Offsets of counts (each < 2^31), and the total; GS_ERR_UNSUPPORTED where
 * the total does not fit an MPI count either. */
static int displacements(const int64_t *count, int size, int *n, int *displ, int64_t *total,
                         const char *what, gs_error *err)
{
    *total = 0;
    for (int q = 0; q < size; q++) {
        if (count[q] > INT_MAX || *total > INT_MAX) return too_many(count[q], what, err);
        n[q] = (int)count[q];
        displ[q] = (int)*total;
        *total += count[q];
    }
    return *total > INT_MAX ? too_many(*total, what, err) : GS_OK;
}

/* One MPI_Alltoallv per array of the triples. */
static int alltoallv_triples(const triples *s, const int *sn, const int *sd, triples *r,
                             const int *rn, const int *rd, MPI_Comm c, gs_error *err)
{
    int rc = MPI_Alltoallv(s->row, sn, sd, MPI_INT32_T, r->row, rn, rd, MPI_INT32_T, c);
    if (rc == MPI_SUCCESS)
        rc = MPI_Alltoallv(s->col, sn, sd, MPI_INT32_T, r->col, rn, rd, MPI_INT32_T, c);
    if (rc == MPI_SUCCESS && s->val && r->val)
        rc = MPI_Alltoallv(s->val, sn, sd, MPI_DOUBLE, r->val, rn, rd, MPI_DOUBLE, c);
    return rc == MPI_SUCCESS ? GS_OK : gs_dist_mpi_fail(rc, "sending the entries", err);
}

/* Round 0: the stored entries (i, j, v) to the owner of row i; round 1
 * (symmetric storage): the mirrors (j, i, +-v) of the off-diagonal ones to
 * the owner of row j. Each destination's entries in file order. */
static void pack_round(const read_ctx *x, const int64_t *begin, int round, int64_t *cursor,
                       triples *out, int64_t *count)
{
    const gs_mm_entries *e = &x->e;
    const double sign = x->head.info.symmetry == GS_MM_SKEW_SYMMETRIC ? -1.0 : 1.0;
    for (int64_t k = 0; k < e->count; k++) {
        if (round == 1 && e->row[k] == e->col[k]) continue;
        const int32_t i = round ? e->col[k] : e->row[k], j = round ? e->row[k] : e->col[k];
        const int q = owner_of(begin, x->size, i);
        if (!out) {
            count[q]++;
            continue;
        }
        const int64_t at = cursor[q]++;
        out->row[at] = i;
        out->col[at] = j;
        if (out->val) out->val[at] = round ? sign * e->val[k] : e->val[k];
    }
}

/* One round of the exchange into r from entry r_off on. */
static int exchange_round(const read_ctx *x, const int64_t *begin, int round, triples *r,
                          int64_t *r_off, gs_error *err)
{
    /* from the banner, not from e: a rank without entries has no e.val */
    const int size = x->size, with_values = x->head.info.field != GS_MM_PATTERN;
    int64_t *c64 = calloc(4 * (size_t)size, sizeof *c64), total = 0, rtotal = 0;
    int *n = malloc(4 * (size_t)size * sizeof *n);
    triples s = {0};
    int status = gs_dist_agree(c64 && n ? GS_OK : nomem(x, "the entry counts", err), err);
    if (status != GS_OK) goto cleanup;
    int *sn = n, *sd = n + size, *rn = n + 2 * size, *rd = n + 3 * size;
    pack_round(x, begin, round, NULL, NULL, c64);
    status = displacements(c64, size, sn, sd, &total, "entries to send", err);
    MPI_Alltoall(sn, 1, MPI_INT, rn, 1, MPI_INT, x->comm);
    for (int q = 0; q < size; q++) c64[size + q] = rn[q], c64[2 * size + q] = sd[q];
    if (status == GS_OK)
        status = displacements(c64 + size, size, rn, rd, &rtotal, "entries to receive", err);
    if (status == GS_OK && (triples_alloc(&s, total, with_values) != GS_OK ||
                            triples_grow(r, *r_off + rtotal, with_values) != GS_OK))
        status = nomem(x, "the entries", err);
    status = gs_dist_agree(status, err);
    if (status != GS_OK) goto cleanup;
    pack_round(x, begin, round, c64 + 2 * size, &s, NULL);
    triples at = {r->row + *r_off, r->col + *r_off, r->val ? r->val + *r_off : NULL};
    status = gs_dist_agree(alltoallv_triples(&s, sn, sd, &at, rn, rd, x->comm, err), err);
    *r_off += rtotal;
cleanup:
    triples_free(&s);
    free(c64);
    free(n);
    return status;
}

/* This rank's rows from the entries it receives: the stored ones of every
 * rank in file order, then the mirrors in file order, which is the order
 * gs_mm_read_csr hands gs_csr_from_coo the whole file's entries in. Its
 * stable scatter keeps that order within each row, so each row is sorted
 * and its duplicates summed (pattern: merged) exactly as there. */
static int build_rows(read_ctx *x, const int64_t *begin, gs_csr *A, int64_t *received,
                      gs_error *err)
{
    triples r = {0};
    int64_t count = 0;
    int status = GS_OK;
    for (int round = 0; round < 1 + mirrored(x) && status == GS_OK; round++)
        status = exchange_round(x, begin, round, &r, &count, err);
    gs_mm_entries_free(&x->e);
    if (status != GS_OK) goto cleanup;
    const int64_t row0 = begin[x->rank], m = begin[x->rank + 1] - row0;
    for (int64_t k = 0; k < count; k++) r.row[k] = (int32_t)(r.row[k] - row0);
    status = gs_csr_from_coo((int32_t)m, (int32_t)x->head.info.cols, count, r.row, r.col, r.val,
                             A, err);
    if (status == GS_OK && !A->val) { /* pattern: every entry is 1 */
        A->val = malloc((A->nnz > 0 ? (size_t)A->nnz : 1) * sizeof *A->val);
        if (!A->val) status = nomem(x, "the pattern values", err);
        for (int64_t k = 0; A->val && k < A->nnz; k++) A->val[k] = 1.0;
    }
    if (status == GS_OK && A->nnz > INT_MAX) /* as the rank-0 path, which sends a block whole */
        status = too_many(A->nnz, "nonzeros", err);
    *received = count;
    status = gs_dist_agree(status, err);
cleanup:
    triples_free(&r);
    return status;
}

/* Rows [lo, hi) of the intersection of blocks a and b (empty: lo >= hi). */
static void overlap(const int64_t *a, int qa, const int64_t *b, int qb, int64_t *lo, int64_t *hi)
{
    *lo = a[qa] > b[qb] ? a[qa] : b[qb];
    *hi = a[qa + 1] < b[qb + 1] ? a[qa + 1] : b[qb + 1];
    if (*hi < *lo) *hi = *lo;
}

/* Rows move from the blocks old to the blocks now (contiguous, so each
 * rank's rows for a destination are one run of A's arrays). */
static int move_rows(const read_ctx *x, const int64_t *old, const int64_t *now, gs_csr *A,
                     gs_error *err)
{
    const int size = x->size, me = x->rank;
    const int64_t row0 = old[me], m = now[me + 1] - now[me];
    int *n = malloc(8 * (size_t)size * sizeof *n), *len = malloc((size_t)A->n_rows * sizeof *len);
    int *got = malloc((size_t)m * sizeof *got);
    gs_csr B = {0};
    int status = gs_dist_agree(n && len && got ? GS_OK : nomem(x, "moving rows", err), err);
    if (status != GS_OK) goto cleanup;
    int *sr = n, *srd = n + size, *rr = n + 2 * size, *rrd = n + 3 * size;
    int *sk = n + 4 * size, *skd = n + 5 * size, *rk = n + 6 * size, *rkd = n + 7 * size;
    for (int32_t i = 0; i < A->n_rows; i++) len[i] = (int)(A->row_ptr[i + 1] - A->row_ptr[i]);
    for (int q = 0; q < size; q++) {
        int64_t lo, hi, rlo, rhi;
        overlap(old, me, now, q, &lo, &hi);
        overlap(old, q, now, me, &rlo, &rhi);
        sr[q] = (int)(hi - lo), srd[q] = (int)(lo - row0);
        rr[q] = (int)(rhi - rlo), rrd[q] = (int)(rlo - now[me]);
        sk[q] = (int)(A->row_ptr[hi - row0] - A->row_ptr[lo - row0]);
        skd[q] = (int)A->row_ptr[lo - row0];
    }
    MPI_Alltoallv(len, sr, srd, MPI_INT, got, rr, rrd, MPI_INT, x->comm);
    int64_t nnz = 0;
    for (int q = 0; q < size; q++) {
        int64_t s = 0;
        for (int i = 0; i < rr[q]; i++) s += got[rrd[q] + i];
        rk[q] = (int)s, rkd[q] = (int)nnz;
        nnz += s;
    }
    status = gs_dist_agree(gs_csr_alloc((int32_t)m, A->n_cols, nnz, 1, &B, err), err);
    if (status != GS_OK) goto cleanup;
    for (int64_t i = 0; i < m; i++) B.row_ptr[i + 1] = B.row_ptr[i] + got[i];
    MPI_Alltoallv(A->col, sk, skd, MPI_INT32_T, B.col, rk, rkd, MPI_INT32_T, x->comm);
    MPI_Alltoallv(A->val, sk, skd, MPI_DOUBLE, B.val, rk, rkd, MPI_DOUBLE, x->comm);
    gs_csr_free(A);
    *A = B;
    memset(&B, 0, sizeof B);
cleanup:
    gs_csr_free(&B);
    free(n), free(len), free(got);
    return status;
}

/* Duplicates summed make rows shorter than their entry counts: the blocks
 * of the summed rows (those of the rank-0 path) are computed again from
 * them, and rows move where they differ. */
static int fix_blocks(const read_ctx *x, int64_t *begin, gs_csr *A, gs_error *err)
{
    const int size = x->size;
    int64_t *now = malloc(((size_t)size + 1) * sizeof *now);
    int64_t *count = malloc(((size_t)A->n_rows + 1) * sizeof *count);
    int status = gs_dist_agree(now && count ? GS_OK : nomem(x, "the row counts", err), err);
    if (status == GS_OK) {
        for (int32_t i = 0; i < A->n_rows; i++) count[i] = A->row_ptr[i + 1] - A->row_ptr[i];
        status = gs_dist_partition_slabs(count, begin[x->rank], A->n_rows, x->head.info.rows,
                                         size, now, err);
    }
    if (status == GS_OK && memcmp(now, begin, ((size_t)size + 1) * sizeof *now) != 0) {
        status = move_rows(x, begin, now, A, err);
        if (status == GS_OK) memcpy(begin, now, ((size_t)size + 1) * sizeof *now);
    }
    free(now);
    free(count);
    return status;
}

/* ---- the facts of the whole matrix ---- */

/* gs_csr_is_symmetric over the ranks: each off-diagonal a_ij travels to
 * the owner of row j as (j, i, a_ij), which tests it against a_ji (0 where
 * not stored) with the same rule; any failure makes A nonsymmetric. */
static int check_symmetric(const read_ctx *x, const int64_t *begin, const gs_csr *A,
                           int *symmetric, gs_error *err)
{
    const int64_t row0 = begin[x->rank];
    read_ctx t = *x; /* A's off-diagonal entries transposed, as round 0 sends them */
    t.head.info.symmetry = GS_MM_GENERAL;
    t.head.info.field = GS_MM_REAL; /* a pattern's A holds its 1s */
    int64_t off = 0;
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) off += A->col[k] != row0 + i;
    triples send = {0};
    int status = triples_alloc(&send, off, 1);
    t.e = (gs_mm_entries){send.row, send.col, send.val, 0};
    status = gs_dist_agree(status == GS_OK ? GS_OK : nomem(x, "the symmetry test", err), err);
    triples r = {0};
    int64_t count = 0;
    if (status == GS_OK) {
        for (int32_t i = 0; i < A->n_rows; i++)
            for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
                if (A->col[k] == row0 + i) continue;
                t.e.row[t.e.count] = A->col[k];
                t.e.col[t.e.count] = (int32_t)(row0 + i);
                t.e.val[t.e.count++] = A->val[k];
            }
        status = exchange_round(&t, begin, 0, &r, &count, err);
    }
    int asymmetric = 0;
    for (int64_t k = 0; status == GS_OK && k < count && !asymmetric; k++) {
        const int64_t q = gs_csr_find(A, (int32_t)(r.row[k] - row0), r.col[k]);
        const double aij = r.val[k], aji = q >= 0 ? A->val[q] : 0.0;
        /* |a_ij - a_ji| <= rtol max(|a_ij|, |a_ji|); NaN fails */
        if (!(fabs(aij - aji) <= GS_SYMMETRY_RTOL * fmax(fabs(aij), fabs(aji)))) asymmetric = 1;
    }
    *symmetric = gs_dist_max(asymmetric) == 0;
    gs_mm_entries_free(&t.e);
    triples_free(&r);
    return status;
}

/* gs_mm_read_csr's duplicates: stored entries summed into another. */
static int64_t count_duplicates(const read_ctx *x, const int64_t *begin, const gs_csr *A)
{
    int64_t mine[2] = {A->nnz, 0}, all[2] = {0, 0};
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            mine[1] += A->col[k] == begin[x->rank] + i;
    MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, x->comm);
    if (!mirrored(x)) return x->head.expected - all[0];
    return x->head.expected - (all[1] + (all[0] - all[1]) / 2);
}

/* Counts, blocks, exchange, rows, and the facts. */
static int spread(read_ctx *x, int64_t *begin, gs_dist_read *out, gs_error *err)
{
    int64_t mine = entries_with_mirrors(x), count = 0, received = 0, dups = 0;
    MPI_Allreduce(&mine, &count, 1, MPI_INT64_T, MPI_SUM, x->comm);
    int status = check_matrix(x, count, err);
    if (status == GS_OK) status = partition_by_counts(x, begin, err);
    if (status == GS_OK) status = build_rows(x, begin, &out->A, &received, err);
    if (status != GS_OK) return status;
    const int64_t mine_dups = received - out->A.nnz;
    MPI_Allreduce(&mine_dups, &dups, 1, MPI_INT64_T, MPI_SUM, x->comm);
    if (dups > 0) status = fix_blocks(x, begin, &out->A, err);
    if (status != GS_OK) return status;
    out->info = x->head.info;
    out->info.duplicates = count_duplicates(x, begin, &out->A);
    /* symmetric storage without duplicates: a_ji is a_ij itself */
    out->symmetric = 1;
    if (x->head.info.symmetry != GS_MM_SYMMETRIC || dups > 0)
        status = check_symmetric(x, begin, &out->A, &out->symmetric, err);
    return status;
}

int gs_dist_read_matrix(const char *path, int64_t *begin, gs_dist_read *out, gs_error *err)
{
    read_ctx x = {.path = path, .comm = gs_dist_comm()};
    memset(out, 0, sizeof *out);
    MPI_Comm_rank(x.comm, &x.rank);
    MPI_Comm_size(x.comm, &x.size);
    const double t0 = gs_now();
    int status = read_head(&x, err);
    if (status != GS_OK) goto cleanup;
    if (x.head.whole) {
        out->whole = 1;
        goto cleanup;
    }
    status = read_parts(&x, err);
    out->read_seconds = gs_dist_max(gs_now() - t0);
    if (status != GS_OK) goto cleanup;
    const double t1 = gs_now();
    status = spread(&x, begin, out, err);
    out->spread_seconds = gs_now() - t1;
cleanup:
    gs_mm_entries_free(&x.e);
    if (status != GS_OK) gs_csr_free(&out->A);
    return status;
}
