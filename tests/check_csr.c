/* check_csr.c - properties of the CSR operations (src/sparse/csr.c), each checked
 * against a plain dense reference on fresh random matrices (ragged rows,
 * empty rows, sizes above a warp), plus invariant and allocation-failure paths. */
#include "csr.h"
#include "testutil.h"

/* ---- dense reference: values plus a "stored" mask (explicit zeros count) ---- */

typedef struct dense {
    int m, n;
    double *a;
    unsigned char *nz;
} dense;

static dense dense_new(int m, int n)
{
    dense D = {m, n, calloc((size_t)m * n + 1, sizeof(double)),
               calloc((size_t)m * n + 1, 1)};
    ck_assert_ptr_nonnull(D.a);
    ck_assert_ptr_nonnull(D.nz);
    return D;
}

static void dense_free(dense *D)
{
    free(D->a);
    free(D->nz);
}

#define AT(D, i, j) ((D).a[(size_t)(i) * (D).n + (j)])
#define NZ(D, i, j) ((D).nz[(size_t)(i) * (D).n + (j)])

static int rand_int(tu_rng *r, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(tu_next(r) % (uint64_t)(hi - lo + 1));
}

static double rand_value(tu_rng *r) /* +-[0.5, 1.5): never zero */
{
    double v = 0.5 + tu_uniform(r);
    return tu_next(r) & 1 ? v : -v;
}

/* Random m x n matrix with ragged rows: ~10% empty, ~15% dense-ish, the rest
 * sparse; each row gets a different density. */
static dense random_dense(tu_rng *r, int m, int n)
{
    dense D = dense_new(m, n);
    for (int i = 0; i < m; i++) {
        double kind = tu_uniform(r), density;
        if (kind < 0.10)
            density = 0.0;
        else if (kind < 0.25)
            density = 0.4 + 0.5 * tu_uniform(r);
        else
            density = 0.15 * tu_uniform(r);
        for (int j = 0; j < n; j++)
            if (tu_uniform(r) < density) {
                NZ(D, i, j) = 1;
                AT(D, i, j) = rand_value(r);
            }
    }
    return D;
}

static dense random_square(tu_rng *r)
{
    int n = rand_int(r, 33, 110);
    return random_dense(r, n, n);
}

/* CSR built straight from the dense mask, without the code under test. */
static gs_csr dense_to_csr(const dense *D, int with_values)
{
    gs_csr A = {0};
    A.n_rows = D->m;
    A.n_cols = D->n;
    A.row_ptr = calloc((size_t)D->m + 1, sizeof *A.row_ptr);
    for (int i = 0; i < D->m; i++) {
        A.row_ptr[i + 1] = A.row_ptr[i];
        for (int j = 0; j < D->n; j++) A.row_ptr[i + 1] += NZ(*D, i, j);
    }
    A.nnz = A.row_ptr[D->m];
    A.col = malloc((size_t)A.nnz * sizeof *A.col + 1);
    A.val = with_values ? malloc((size_t)A.nnz * sizeof *A.val + 1) : NULL;
    int64_t p = 0;
    for (int i = 0; i < D->m; i++)
        for (int j = 0; j < D->n; j++)
            if (NZ(*D, i, j)) {
                A.col[p] = j;
                if (A.val) A.val[p] = AT(*D, i, j);
                p++;
            }
    return A;
}

/* Dense image of a CSR matrix; asserts the CSR conventions first. */
static dense csr_to_dense(const gs_csr *A)
{
    gs_error err = {0};
    ck_assert_msg(gs_csr_validate(A, &err) == GS_OK, "invalid CSR: %s", err.msg);
    dense D = dense_new(A->n_rows, A->n_cols);
    for (int i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            NZ(D, i, A->col[p]) = 1;
            AT(D, i, A->col[p]) = A->val ? A->val[p] : 1.0;
        }
    return D;
}

static void assert_same_pattern(const dense *X, const dense *Y)
{
    ck_assert_int_eq(X->m, Y->m);
    ck_assert_int_eq(X->n, Y->n);
    for (int i = 0; i < X->m; i++)
        for (int j = 0; j < X->n; j++)
            ck_assert_msg(NZ(*X, i, j) == NZ(*Y, i, j), "pattern differs at (%d, %d): %d vs %d",
                          i, j, NZ(*X, i, j), NZ(*Y, i, j));
}

static void assert_same_dense(const dense *X, const dense *Y, double tol)
{
    assert_same_pattern(X, Y);
    for (int i = 0; i < X->m; i++)
        for (int j = 0; j < X->n; j++)
            ck_assert_msg(fabs(AT(*X, i, j) - AT(*Y, i, j)) <= tol,
                          "value differs at (%d, %d): %.17g vs %.17g", i, j, AT(*X, i, j),
                          AT(*Y, i, j));
}

/* Boolean product of patterns: C = 1NZ(X Y). */
static dense dense_pattern_product(const dense *X, const dense *Y)
{
    dense C = dense_new(X->m, Y->n);
    for (int i = 0; i < X->m; i++)
        for (int k = 0; k < X->n; k++)
            if (NZ(*X, i, k))
                for (int j = 0; j < Y->n; j++)
                    if (NZ(*Y, k, j)) NZ(C, i, j) = 1;
    for (size_t e = 0; e < (size_t)C.m * C.n; e++) C.a[e] = C.nz[e];
    return C;
}

/* ---- gs_csr_from_coo ---- */

static void shuffle_triplets(tu_rng *r, int64_t count, int32_t *rows, int32_t *cols,
                             double *vals)
{
    for (int64_t e = count - 1; e > 0; e--) {
        int64_t f = (int64_t)(tu_next(r) % (uint64_t)(e + 1));
        int32_t ti = rows[e], tj = cols[e];
        double tv = vals[e];
        rows[e] = rows[f], cols[e] = cols[f], vals[e] = vals[f];
        rows[f] = ti, cols[f] = tj, vals[f] = tv;
    }
}

/* Triplets for the pattern of D, each entry split into 1..3 duplicates, shuffled.
 * The expected result is their dense accumulation (returned in *expect). */
static int64_t random_triplets(tu_rng *r, const dense *D, int32_t **rows, int32_t **cols,
                               double **vals, dense *expect)
{
    int64_t cap = 3 * (int64_t)D->m * D->n + 1, count = 0;
    *rows = malloc((size_t)cap * sizeof **rows);
    *cols = malloc((size_t)cap * sizeof **cols);
    *vals = malloc((size_t)cap * sizeof **vals);
    *expect = dense_new(D->m, D->n);
    for (int i = 0; i < D->m; i++)
        for (int j = 0; j < D->n; j++) {
            if (!NZ(*D, i, j)) continue;
            int copies = rand_int(r, 1, 3);
            for (int c = 0; c < copies; c++) {
                (*rows)[count] = i;
                (*cols)[count] = j;
                (*vals)[count] = rand_value(r);
                NZ(*expect, i, j) = 1;
                AT(*expect, i, j) += (*vals)[count];
                count++;
            }
        }
    shuffle_triplets(r, count, *rows, *cols, *vals);
    return count;
}

static void check_from_coo(tu_rng *r, int m, int n)
{
    dense D = random_dense(r, m, n), expect;
    int32_t *rows, *cols;
    double *vals;
    int64_t count = random_triplets(r, &D, &rows, &cols, &vals, &expect);
    gs_csr A, P;
    gs_error err = {0};

    ck_assert_int_eq(gs_csr_from_coo(m, n, count, rows, cols, vals, &A, &err), GS_OK);
    dense got = csr_to_dense(&A);
    assert_same_dense(&got, &expect, 1e-13);

    ck_assert_int_eq(gs_csr_from_coo(m, n, count, rows, cols, NULL, &P, &err), GS_OK);
    ck_assert_ptr_null(P.val);
    dense got_pattern = csr_to_dense(&P);
    assert_same_pattern(&got_pattern, &expect);

    dense_free(&got_pattern);
    dense_free(&got);
    dense_free(&expect);
    dense_free(&D);
    gs_csr_free(&A);
    gs_csr_free(&P);
    free(rows);
    free(cols);
    free(vals);
}

START_TEST(test_from_coo_matches_dense_accumulation)
{
    tu_rng r = tu_rng_seed(100 + (uint64_t)_i);
    check_from_coo(&r, rand_int(&r, 33, 120), rand_int(&r, 33, 120));
    check_from_coo(&r, rand_int(&r, 1, 5), rand_int(&r, 33, 80)); /* wide */
    check_from_coo(&r, rand_int(&r, 33, 80), rand_int(&r, 1, 5)); /* tall */
}
END_TEST

/* Long rows (heapsort path) and enough entries for the OpenMP path. */
START_TEST(test_from_coo_long_rows)
{
    tu_rng r = tu_rng_seed(7 + (uint64_t)_i);
    check_from_coo(&r, 300, rand_int(&r, 400, 700)); /* >= 20000 triplets */
}
END_TEST

START_TEST(test_from_coo_empty_and_bad_index)
{
    gs_csr A;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_from_coo(40, 50, 0, NULL, NULL, NULL, &A, &err), GS_OK);
    ck_assert_int_eq(A.n_rows, 40);
    ck_assert_int_eq(A.nnz, 0);
    ck_assert_int_eq(gs_csr_validate(&A, &err), GS_OK);
    gs_csr_free(&A);

    int32_t rows[] = {0, 3, 1}, cols[] = {1, 2, 5};
    double vals[] = {1, 2, 3};
    ck_assert_int_eq(gs_csr_from_coo(4, 5, 3, rows, cols, vals, &A, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "entry 2"));
    ck_assert_ptr_null(A.row_ptr);
    gs_error_clear(&err);
    rows[0] = -1;
    ck_assert_int_eq(gs_csr_from_coo(4, 6, 3, rows, cols, vals, &A, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "entry 0"));
}
END_TEST

/* ---- transpose, copy ---- */

START_TEST(test_transpose)
{
    tu_rng r = tu_rng_seed(200 + (uint64_t)_i);
    dense D = random_dense(&r, rand_int(&r, 33, 100), rand_int(&r, 33, 100));
    gs_csr A = dense_to_csr(&D, 1), T, TT, C;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_transpose(&A, &T, &err), GS_OK);
    dense DT = csr_to_dense(&T);
    ck_assert_int_eq(DT.m, D.n);
    for (int i = 0; i < D.m; i++)
        for (int j = 0; j < D.n; j++) {
            ck_assert_int_eq(NZ(DT, j, i), NZ(D, i, j));
            ck_assert(AT(DT, j, i) == AT(D, i, j));                 /* (A^T)_ji = A_ij */
        }
    ck_assert_int_eq(gs_csr_transpose(&T, &TT, &err), GS_OK);      /* (A^T)^T = A */
    ck_assert_int_eq(TT.nnz, A.nnz);
    ck_assert_mem_eq(TT.row_ptr, A.row_ptr, ((size_t)A.n_rows + 1) * sizeof *A.row_ptr);
    ck_assert_mem_eq(TT.col, A.col, (size_t)A.nnz * sizeof *A.col);
    ck_assert_mem_eq(TT.val, A.val, (size_t)A.nnz * sizeof *A.val);

    ck_assert_int_eq(gs_csr_copy(&A, &C, &err), GS_OK);
    dense DC = csr_to_dense(&C);
    assert_same_dense(&DC, &D, 0.0);
    gs_csr_free(&C);
    gs_csr pattern = A;                                             /* pattern transpose */
    pattern.val = NULL;
    ck_assert_int_eq(gs_csr_transpose(&pattern, &C, &err), GS_OK);
    ck_assert_ptr_null(C.val);
    ck_assert_mem_eq(C.col, T.col, (size_t)T.nnz * sizeof *T.col);

    dense_free(&DC);
    dense_free(&DT);
    dense_free(&D);
    gs_csr_free(&C);
    gs_csr_free(&A);
    gs_csr_free(&T);
    gs_csr_free(&TT);
}
END_TEST

/* ---- symmetry ---- */

START_TEST(test_symmetry)
{
    tu_rng r = tu_rng_seed(300 + (uint64_t)_i);
    dense D = random_square(&r);
    int n = D.n;
    dense S = dense_new(n, n);                                      /* S = A + A^T */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            NZ(S, i, j) = NZ(D, i, j) | NZ(D, j, i);
            AT(S, i, j) = AT(D, i, j) + AT(D, j, i);
        }
    int pi = -1, pj = -1;                                            /* an off-diagonal entry */
    for (int i = 0; i < n && pi < 0; i++)
        for (int j = i + 1; j < n; j++)
            if (NZ(S, i, j) && AT(S, i, j) != 0.0) {
                pi = i, pj = j;
                break;
            }
    ck_assert_int_ge(pi, 0);

    gs_csr A = dense_to_csr(&S, 1);
    ck_assert(gs_csr_is_structurally_symmetric(&A));
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    A.val[gs_csr_find(&A, pi, pj)] *= 1.0 + 1e-9;                   /* perturb one entry */
    ck_assert(gs_csr_is_structurally_symmetric(&A));
    ck_assert(!gs_csr_is_symmetric(&A, 1e-12));
    ck_assert(gs_csr_is_symmetric(&A, 1e-6));
    A.val[gs_csr_find(&A, pi, pj)] = NAN;
    ck_assert(!gs_csr_is_symmetric(&A, 1e-6));
    gs_csr_free(&A);

    /* Drop one mirror: (0,1) or (1,0) next to the diagonal, then random ones. */
    for (int trial = 0; trial < 12; trial++) {
        int i = trial < 2 ? trial : rand_int(&r, 0, n - 1);
        int j = trial < 2 ? 1 - trial : rand_int(&r, 0, n - 1);
        if (i == j) continue;
        unsigned char saved_ij = NZ(S, i, j), saved_ji = NZ(S, j, i);
        double saved_value = AT(S, i, j);
        NZ(S, i, j) = 1;
        AT(S, i, j) = 1.0;
        NZ(S, j, i) = 0;                                              /* (i,j) unpaired */
        A = dense_to_csr(&S, 1);
        ck_assert_msg(!gs_csr_is_structurally_symmetric(&A), "missing (%d,%d) not seen", j, i);
        ck_assert(!gs_csr_is_symmetric(&A, 0.5));
        double *v = A.val;
        A.val = NULL;                                                 /* as a pattern */
        ck_assert(!gs_csr_is_symmetric(&A, 0.0));
        A.val = v;
        gs_csr_free(&A);
        NZ(S, i, j) = saved_ij;
        NZ(S, j, i) = saved_ji;
        AT(S, i, j) = saved_value;
    }
    A = dense_to_csr(&S, 1);                                         /* restored */
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    gs_csr_free(&A);
    A = dense_to_csr(&S, 0);
    ck_assert(gs_csr_is_symmetric(&A, 0.0));
    gs_csr_free(&A);

    A = dense_to_csr(&D, 1);                                         /* rectangular: never */
    A.n_cols = n + 1;
    ck_assert(!gs_csr_is_structurally_symmetric(&A));
    ck_assert(!gs_csr_is_symmetric(&A, 1.0));
    gs_csr_free(&A);
    dense_free(&S);
    dense_free(&D);
}
END_TEST

/* ---- diagonal, find ---- */

START_TEST(test_diagonal_and_find)
{
    tu_rng r = tu_rng_seed(400 + (uint64_t)_i);
    dense D = random_dense(&r, rand_int(&r, 33, 100), rand_int(&r, 33, 100));
    int32_t expect_missing = 0;
    for (int i = 0; i < D.m; i++) {
        if (i < D.n && tu_uniform(&r) < 0.7) {
            NZ(D, i, i) = 1;
            AT(D, i, i) = rand_value(&r);
        } else if (i < D.n) {
            NZ(D, i, i) = 0;
        }
        expect_missing += i >= D.n || !NZ(D, i, i);
    }
    gs_csr A = dense_to_csr(&D, 1);
    double *d = malloc((size_t)D.m * sizeof *d);
    ck_assert_int_eq(gs_csr_diagonal(&A, d), expect_missing);
    for (int i = 0; i < D.m; i++)
        ck_assert(d[i] == (i < D.n && NZ(D, i, i) ? AT(D, i, i) : 0.0));
    for (int i = 0; i < D.m; i++)
        for (int j = 0; j < D.n; j++) {
            int64_t p = gs_csr_find(&A, i, j);
            if (!NZ(D, i, j))
                ck_assert_int_eq(p, -1);
            else
                ck_assert(p >= A.row_ptr[i] && p < A.row_ptr[i + 1] && A.col[p] == j);
        }
    free(d);
    gs_csr_free(&A);
    dense_free(&D);
}
END_TEST

/* ---- scaling ---- */

START_TEST(test_unit_diagonal_scaling)
{
    tu_rng r = tu_rng_seed(500 + (uint64_t)_i);
    dense D = random_square(&r);
    int n = D.n;
    for (int i = 0; i < n; i++) {
        NZ(D, i, i) = 1;
        AT(D, i, i) = rand_value(&r) * (1 + 100 * tu_uniform(&r));  /* either sign */
    }
    gs_csr A = dense_to_csr(&D, 1);
    gs_error err = {0};
    double *s = malloc((size_t)n * sizeof *s), *d = malloc((size_t)n * sizeof *d);
    ck_assert_int_eq(gs_csr_unit_diagonal_scaling(&A, s, &err), GS_OK);
    gs_csr_scale_symmetric(&A, s);
    ck_assert_int_eq(gs_csr_diagonal(&A, d), 0);
    for (int i = 0; i < n; i++) ck_assert_double_eq_tol(fabs(d[i]), 1.0, 1e-14);
    dense B = csr_to_dense(&A);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            ck_assert_double_eq_tol(AT(B, i, j),
                                    AT(D, i, j) / sqrt(fabs(AT(D, i, i) * AT(D, j, j))), 1e-14);
    dense_free(&B);
    gs_csr_free(&A);

    int bad = rand_int(&r, 0, n - 1);                                 /* zero diagonal */
    char row_text[64];
    snprintf(row_text, sizeof row_text, "row %d ", bad + 1);
    AT(D, bad, bad) = 0.0;
    A = dense_to_csr(&D, 1);
    ck_assert_int_eq(gs_csr_unit_diagonal_scaling(&A, s, &err), GS_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, row_text) != NULL, "message '%s' does not name %s", err.msg,
                  row_text);
    gs_csr_free(&A);
    gs_error_clear(&err);
    NZ(D, bad, bad) = 0;                                              /* missing diagonal */
    A = dense_to_csr(&D, 1);
    ck_assert_int_eq(gs_csr_unit_diagonal_scaling(&A, s, &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, row_text));
    gs_csr_free(&A);
    free(s);
    free(d);
    dense_free(&D);
}
END_TEST

/* ---- triangles ---- */

START_TEST(test_lower_upper_partition)
{
    tu_rng r = tu_rng_seed(600 + (uint64_t)_i);
    dense D = random_dense(&r, rand_int(&r, 33, 100), rand_int(&r, 33, 100));
    gs_csr A = dense_to_csr(&D, 1), L, U, Ls, Us;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_lower(&A, 1, &L, &err), GS_OK);
    ck_assert_int_eq(gs_csr_upper(&A, 1, &U, &err), GS_OK);
    ck_assert_int_eq(gs_csr_lower(&A, 0, &Ls, &err), GS_OK);
    ck_assert_int_eq(gs_csr_upper(&A, 0, &Us, &err), GS_OK);
    dense DL = csr_to_dense(&L), DU = csr_to_dense(&U), DLs = csr_to_dense(&Ls),
          DUs = csr_to_dense(&Us);
    int64_t diag = 0;
    for (int i = 0; i < D.m; i++)
        for (int j = 0; j < D.n; j++) {
            diag += i == j && NZ(D, i, j);
            ck_assert_int_eq(NZ(DL, i, j), j <= i && NZ(D, i, j));
            ck_assert_int_eq(NZ(DU, i, j), j >= i && NZ(D, i, j));
            ck_assert_int_eq(NZ(DLs, i, j), j < i && NZ(D, i, j));
            ck_assert_int_eq(NZ(DUs, i, j), j > i && NZ(D, i, j));
            /* A = Low_strict + Up (disjoint) = Low + Up_strict */
            ck_assert(AT(DLs, i, j) + AT(DU, i, j) == AT(D, i, j));
            ck_assert(AT(DL, i, j) + AT(DUs, i, j) == AT(D, i, j));
        }
    ck_assert_int_eq(Ls.nnz + U.nnz, A.nnz);
    ck_assert_int_eq(L.nnz + Us.nnz, A.nnz);
    ck_assert_int_eq(L.nnz - Ls.nnz, diag);
    dense_free(&DL), dense_free(&DU), dense_free(&DLs), dense_free(&DUs), dense_free(&D);
    gs_csr_free(&A), gs_csr_free(&L), gs_csr_free(&U), gs_csr_free(&Ls), gs_csr_free(&Us);
}
END_TEST

/* ---- SpMV ---- */

START_TEST(test_spmv)
{
    tu_rng r = tu_rng_seed(700 + (uint64_t)_i);
    int m = _i == 0 ? 3000 : rand_int(&r, 33, 150); /* one case on the OpenMP path */
    int n = _i == 0 ? 200 : rand_int(&r, 33, 150);
    dense D = random_dense(&r, m, n);
    gs_csr A = dense_to_csr(&D, 1);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)m * sizeof *y);
    for (int j = 0; j < n; j++) x[j] = rand_value(&r);
    for (int i = 0; i < m; i++) y[i] = NAN;                           /* poisoned */
    gs_csr_spmv(&A, x, y);
    for (int i = 0; i < m; i++) {
        double sum = 0, scale = 0;
        for (int j = 0; j < n; j++) {
            sum += AT(D, i, j) * x[j];
            scale += fabs(AT(D, i, j) * x[j]);
        }
        ck_assert_msg(fabs(y[i] - sum) <= 1e-14 * scale, "row %d: %.17g vs %.17g", i, y[i],
                      sum);
    }
    free(x), free(y);
    gs_csr_free(&A);
    dense_free(&D);
}
END_TEST

/* ---- symbolic patterns ---- */

START_TEST(test_pattern_product)
{
    tu_rng r = tu_rng_seed(800 + (uint64_t)_i);
    int m = rand_int(&r, 33, 90), k = rand_int(&r, 33, 90), n = rand_int(&r, 33, 90);
    if (_i == 0) m = 400;                                             /* OpenMP path */
    dense X = random_dense(&r, m, k), Y = random_dense(&r, k, n);
    gs_csr A = dense_to_csr(&X, 1), B = dense_to_csr(&Y, _i % 2), C;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_pattern_product(&A, &B, &C, &err), GS_OK);
    ck_assert_ptr_null(C.val);
    dense got = csr_to_dense(&C), expect = dense_pattern_product(&X, &Y);
    assert_same_pattern(&got, &expect);
    gs_csr_free(&C);
    ck_assert_int_eq(gs_csr_pattern_product(&B, &A, &C, &err), GS_ERR_INTERNAL); /* k x n . m x k */
    ck_assert_ptr_null(C.row_ptr);
    dense_free(&got), dense_free(&expect), dense_free(&X), dense_free(&Y);
    gs_csr_free(&A), gs_csr_free(&B);
}
END_TEST

START_TEST(test_pattern_power)
{
    tu_rng r = tu_rng_seed(900 + (uint64_t)_i);
    int n = rand_int(&r, 33, 80);
    dense D = random_dense(&r, n, n);
    for (int i = 0; i < n; i++)                                       /* keep powers sparse */
        for (int j = 0; j < n; j++)
            if (tu_uniform(&r) < 0.8) NZ(D, i, j) = 0;
    gs_csr A = dense_to_csr(&D, 1);
    gs_error err = {0};
    for (int add_identity = 0; add_identity <= 1; add_identity++) {
        dense base = dense_new(n, n), expect = dense_new(n, n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                NZ(base, i, j) = NZ(expect, i, j) = NZ(D, i, j) || (add_identity && i == j);
        for (int k = 1; k <= 3; k++) {
            gs_csr P;
            ck_assert_int_eq(gs_csr_pattern_power(&A, k, add_identity, &P, &err), GS_OK);
            ck_assert_ptr_null(P.val);
            dense got = csr_to_dense(&P);
            assert_same_pattern(&got, &expect);
            dense next = dense_pattern_product(&expect, &base);
            dense_free(&expect);
            expect = next;
            dense_free(&got);
            gs_csr_free(&P);
        }
        dense_free(&base);
        dense_free(&expect);
    }
    gs_csr P;
    ck_assert_int_eq(gs_csr_pattern_power(&A, 0, 1, &P, &err), GS_ERR_INTERNAL);
    gs_csr_free(&A);
    dense_free(&D);
}
END_TEST

START_TEST(test_pattern_union)
{
    tu_rng r = tu_rng_seed(1000 + (uint64_t)_i);
    int m = rand_int(&r, 33, 100), n = rand_int(&r, 33, 100);
    dense X = random_dense(&r, m, n), Y = random_dense(&r, m, n);
    gs_csr A = dense_to_csr(&X, 1), B = dense_to_csr(&Y, 0), C;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_pattern_union(&A, &B, &C, &err), GS_OK);
    ck_assert_ptr_null(C.val);
    dense got = csr_to_dense(&C), expect = dense_new(m, n);
    for (size_t e = 0; e < (size_t)m * n; e++) expect.nz[e] = X.nz[e] | Y.nz[e];
    assert_same_pattern(&got, &expect);
    gs_csr_free(&C);
    B.n_cols++;
    ck_assert_int_eq(gs_csr_pattern_union(&A, &B, &C, &err), GS_ERR_INTERNAL);
    dense_free(&got), dense_free(&expect), dense_free(&X), dense_free(&Y);
    gs_csr_free(&A), gs_csr_free(&B);
}
END_TEST

/* ---- validate ---- */

/* A fresh valid matrix whose row 5 has at least three entries. */
static gs_csr valid_matrix(void)
{
    tu_rng r = tu_rng_seed(42);
    dense D = random_dense(&r, 40, 40);
    for (int j = 10; j < 13; j++) NZ(D, 5, j) = 1;
    gs_csr A = dense_to_csr(&D, 1);
    dense_free(&D);
    return A;
}

static void assert_invalid(gs_csr *A, const char *what, const char *needle)
{
    gs_error err = {0};
    ck_assert_msg(gs_csr_validate(A, &err) == GS_ERR_INTERNAL, "%s not detected", what);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what,
                  err.msg, needle);
    gs_csr_free(A);
}

START_TEST(test_validate_detects_each_broken_invariant)
{
    gs_error err = {0};
    gs_csr A = valid_matrix();
    ck_assert_int_eq(gs_csr_validate(&A, &err), GS_OK);
    int64_t p = A.row_ptr[5];
    A.col[p] = A.col[p + 1] + 1;                                      /* unsorted */
    assert_invalid(&A, "unsorted row", "row 5 ");
    A = valid_matrix();
    A.col[p + 1] = A.col[p];                                          /* duplicate */
    assert_invalid(&A, "duplicate", "duplicates");
    A = valid_matrix();
    A.col[p + 2] = A.n_cols;                                          /* column too large */
    assert_invalid(&A, "column out of range", "row 5 ");
    A = valid_matrix();
    A.col[p] = -1;                                                    /* negative column */
    assert_invalid(&A, "negative column", "row 5 ");
    A = valid_matrix();
    A.row_ptr[0] = 1;
    assert_invalid(&A, "row_ptr[0] != 0", "row_ptr[0]");
    A = valid_matrix();
    A.row_ptr[6] = A.row_ptr[5] - 1;                                  /* decreasing */
    assert_invalid(&A, "decreasing row_ptr", "row 5 ");
    A = valid_matrix();
    A.nnz--;                                                          /* row_ptr[n] != nnz */
    assert_invalid(&A, "nnz mismatch", "nnz");
    A = valid_matrix();
    A.row_ptr[A.n_rows] = A.nnz + 5;                                  /* past the arrays */
    assert_invalid(&A, "row_ptr past nnz", "row 39 ");
}
END_TEST

/* ---- allocation failures ---- */

typedef int (*csr_op)(const gs_csr *A, gs_csr *out, gs_error *err);

static int op_copy(const gs_csr *A, gs_csr *out, gs_error *err) { return gs_csr_copy(A, out, err); }
static int op_transpose(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_transpose(A, out, err);
}
static int op_lower(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_lower(A, 1, out, err);
}
static int op_upper(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_upper(A, 0, out, err);
}
static int op_product(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_pattern_product(A, A, out, err);
}
static int op_power(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_pattern_power(A, 3, 1, out, err);
}
static int op_union(const gs_csr *A, gs_csr *out, gs_error *err)
{
    return gs_csr_pattern_union(A, A, out, err);
}
static int op_from_coo(const gs_csr *A, gs_csr *out, gs_error *err)
{
    int32_t *rows = malloc((size_t)A->nnz * sizeof *rows + 1);
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) rows[p] = i;
    int status = gs_csr_from_coo(A->n_rows, A->n_cols, A->nnz, rows, A->col, A->val, out, err);
    free(rows);
    return status;
}
static int op_from_coo_duplicates(const gs_csr *A, gs_csr *out, gs_error *err)
{
    int64_t nnz = 2 * A->nnz;
    int32_t *rows = malloc((size_t)nnz * sizeof *rows + 1);
    int32_t *cols = malloc((size_t)nnz * sizeof *cols + 1);
    for (int32_t i = 0; i < A->n_rows; i++)
        for (int64_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            rows[p] = rows[nnz - 1 - p] = i;
            cols[p] = cols[nnz - 1 - p] = A->col[p];
        }
    int status = gs_csr_from_coo(A->n_rows, A->n_cols, nnz, rows, cols, NULL, out, err);
    free(rows);
    free(cols);
    return status;
}

static const csr_op alloc_ops[] = {op_copy,  op_transpose, op_lower,    op_upper,
                                   op_product, op_power,   op_union,    op_from_coo,
                                   op_from_coo_duplicates};

/* For every k, failing the k-th allocation gives GS_ERR_NOMEM, an empty
 * output and a message; eventually the call succeeds (valgrind: no leaks). */
START_TEST(test_allocation_failures)
{
    gs_csr A = valid_matrix();
    const csr_op op = alloc_ops[_i];
    long k;
    for (k = 0; k < 100; k++) {
        gs_csr out;
        gs_error err = {0};
        memset(&out, 0xAB, sizeof out);
        gs_alloc_fail_after(k);
        int status = op(&A, &out, &err);
        gs_alloc_fail_after(-1);
        if (status == GS_OK) {
            ck_assert_int_eq(gs_csr_validate(&out, &err), GS_OK);
            gs_csr_free(&out);
            break;
        }
        ck_assert_int_eq(status, GS_ERR_NOMEM);
        ck_assert_int_eq(err.status, GS_ERR_NOMEM);
        ck_assert_ptr_nonnull(strstr(err.msg, "memory"));
        ck_assert_ptr_null(out.row_ptr);
        ck_assert_ptr_null(out.col);
        ck_assert_ptr_null(out.val);
    }
    ck_assert_msg(k >= 1 && k < 100, "operation %d: %ld allocations", _i, k);
    gs_csr_free(&A);
    gs_csr_free(NULL);                                                /* NULL-safe */
}
END_TEST

START_TEST(test_alloc_rejects_negative_sizes)
{
    gs_csr A;
    gs_error err = {0};
    ck_assert_int_eq(gs_csr_alloc(-1, 3, 0, 1, &A, &err), GS_ERR_INTERNAL);
    ck_assert_ptr_null(A.row_ptr);
    ck_assert_int_eq(gs_csr_alloc(3, 3, 7, 0, &A, &err), GS_OK);
    ck_assert_ptr_null(A.val);
    for (int i = 0; i <= 3; i++) ck_assert_int_eq(A.row_ptr[i], 0);
    gs_csr_free(&A);
    ck_assert_ptr_null(A.row_ptr);
}
END_TEST

/* gs_csr_require_symmetric names the first offending entry, 1-based. */
START_TEST(test_require_symmetric_names_the_entry)
{
    gs_error err = {0};
    const int32_t r[] = {0, 0, 1, 1, 2, 2}, c[] = {0, 2, 1, 2, 1, 2};
    const double v[] = {4, 1, 4, 3, 3, 4}; /* a_13 stored, a_31 not */
    gs_csr A;
    ck_assert_int_eq(gs_csr_from_coo(3, 3, 6, r, c, v, &A, &err), GS_OK);
    ck_assert_int_eq(gs_csr_require_symmetric(&A, GS_SYMMETRY_RTOL, "who", &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "who needs a symmetric matrix"));
    ck_assert_ptr_nonnull(strstr(err.msg, "row 1, column 3"));
    ck_assert_ptr_nonnull(strstr(err.msg, "not stored"));
    gs_error_clear(&err);
    A.val[gs_csr_find(&A, 0, 2)] = 0.0; /* now symmetric with an explicit zero */
    ck_assert_int_eq(gs_csr_require_symmetric(&A, GS_SYMMETRY_RTOL, "who", &err), GS_OK);
    A.val[gs_csr_find(&A, 1, 2)] = 3.0 * (1 + 1e-9); /* a relative gap of 1e-9 */
    ck_assert_int_eq(gs_csr_require_symmetric(&A, GS_SYMMETRY_RTOL, "who", &err), GS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "row 2, column 3"));
    gs_csr_free(&A);
}
END_TEST

static Suite *csr_suite(void)
{
    Suite *s = suite_create("csr");
    TCase *tc = tcase_create("dense reference");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_from_coo_matches_dense_accumulation, 0, 8);
    tcase_add_loop_test(tc, test_from_coo_long_rows, 0, 2);
    tcase_add_test(tc, test_from_coo_empty_and_bad_index);
    tcase_add_test(tc, test_require_symmetric_names_the_entry);
    tcase_add_loop_test(tc, test_transpose, 0, 6);
    tcase_add_loop_test(tc, test_symmetry, 0, 6);
    tcase_add_loop_test(tc, test_diagonal_and_find, 0, 6);
    tcase_add_loop_test(tc, test_unit_diagonal_scaling, 0, 6);
    tcase_add_loop_test(tc, test_lower_upper_partition, 0, 6);
    tcase_add_loop_test(tc, test_spmv, 0, 6);
    tcase_add_loop_test(tc, test_pattern_product, 0, 6);
    tcase_add_loop_test(tc, test_pattern_power, 0, 6);
    tcase_add_loop_test(tc, test_pattern_union, 0, 6);
    suite_add_tcase(s, tc);

    TCase *tv = tcase_create("invariants and failures");
    tcase_add_test(tv, test_validate_detects_each_broken_invariant);
    tcase_add_loop_test(tv, test_allocation_failures, 0,
                        (int)(sizeof alloc_ops / sizeof alloc_ops[0]));
    tcase_add_test(tv, test_alloc_rejects_negative_sizes);
    suite_add_tcase(s, tv);
    return s;
}

int main(void) { return tu_run_suite(csr_suite()); }
