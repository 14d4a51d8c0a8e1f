/* bench_read.c - times gs_mm_read_csr on one Matrix Market file: best of N reads.
 * Driver for scripts/bench/bench_read.sh (compare with SciPy's scipy.io.mmread). */
#include <stdio.h>
#include <stdlib.h>

#include "mmio.h"
#include "timer.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MATRIX.mtx[.gz] [REPEATS]\n", argv[0]);
        return 1;
    }
    int repeats = argc > 2 ? atoi(argv[2]) : 10;
    double best = 1e300, total = 0;
    gs_mm_info info;
    int64_t nnz = 0;
    for (int r = 0; r < (repeats > 0 ? repeats : 1); r++) {
        gs_csr A;
        gs_error err = {GS_OK, ""};
        double t0 = gs_now();
        int status = gs_mm_read_csr(argv[1], &A, &info, &err);
        double t = gs_now() - t0;
        if (status != GS_OK) {
            fprintf(stderr, "bench_read: %s\n", err.msg);
            return gs_status_exit_code((gs_status)status);
        }
        nnz = A.nnz;
        gs_csr_free(&A);
        best = t < best ? t : best;
        total += t;
    }
    /* one line, key=value, parsed by bench_read.sh */
    printf("rows=%lld cols=%lld stored=%lld nnz=%lld best_s=%.6f mean_s=%.6f repeats=%d\n",
           (long long)info.rows, (long long)info.cols, (long long)info.entries_stored,
           (long long)nnz, best, total / (repeats > 0 ? repeats : 1), repeats);
    return 0;
}
