#!/usr/bin/env python3
"""bench_read_scipy.py - times scipy.io.mmread on one Matrix Market file (best of N).

The peer figure for scripts/bench/bench_read.sh. Prints one key=value line:
mmread alone (SciPy returns COO, unsorted, duplicates kept) and mmread
followed by .tocsr() (sorted CSR with duplicates summed, what gpusolve builds).
"""
import sys
import time
import warnings


def best_of(repeats, fn):
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_read_scipy.py MATRIX [REPEATS] [THREADS]")
    path = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    warnings.simplefilter("ignore", DeprecationWarning)  # mmread's spmatrix default
    import scipy
    import scipy.io
    try:  # SciPy >= 1.12 reads through fast_matrix_market, threaded
        import scipy.io._fast_matrix_market as fmm
        fmm.PARALLELISM = threads
        engine = "fast_matrix_market"
    except ImportError:
        engine = "python"
    coo_s, coo = best_of(repeats, lambda: scipy.io.mmread(path))
    csr_s, csr = best_of(repeats, lambda: scipy.io.mmread(path).tocsr())
    print(f"scipy={scipy.__version__} engine={engine} threads={threads} "
          f"stored={coo.nnz} nnz={csr.nnz} mmread_s={coo_s:.6f} mmread_tocsr_s={csr_s:.6f}")


if __name__ == "__main__":
    main()
