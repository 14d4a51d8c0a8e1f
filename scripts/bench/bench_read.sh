#!/usr/bin/env bash
# bench_read.sh - Matrix Market reading speed: gpusolve's reader against SciPy's mmread.
#   scripts/bench/bench_read.sh [MATRIX.mtx[.gz]] [REPEATS]
# Without MATRIX, takes the largest real matrix (by nnz_stored) of
# ${GS_MATRICES:-../shared/matrices}/MANIFEST.tsv. Each side: best of REPEATS
# reads from the page cache (the file is read once first), with THREADS
# (default: all cores) and with one thread, for both readers (OpenMP for ours,
# fast_matrix_market's PARALLELISM for SciPy's). gpusolve's time is file ->
# sorted CSR with duplicates summed; SciPy's is shown for mmread alone (COO)
# and for mmread().tocsr(). The driver is scripts/bench/bench_read.c.
set -euo pipefail
cd "$(dirname "$0")/../.."

MATRICES=${GS_MATRICES:-../shared/matrices}
BUILD=${BUILD:-build}
REPEATS=${2:-20}
THREADS=${THREADS:-$(nproc)}
CC=${CC:-cc}
PYTHON=${PYTHON:-python3}

MATRIX=${1:-}
if [ -z "$MATRIX" ]; then
    [ -r "$MATRICES/MANIFEST.tsv" ] || { echo "bench_read: no MATRIX given and no $MATRICES/MANIFEST.tsv" >&2; exit 1; }
    name=$(awk -F'\t' 'NR > 1 && $6 != "complex" && $5 != "hermitian" { print $4 "\t" $1 }' \
               "$MATRICES/MANIFEST.tsv" | sort -n | tail -n 1 | cut -f2)
    MATRIX="$MATRICES/$name.mtx"
fi
[ -r "$MATRIX" ] || { echo "bench_read: cannot read $MATRIX" >&2; exit 1; }

# The driver, built from the sources it needs (no dependency on the CUDA build).
mkdir -p "$BUILD"
DRIVER="$BUILD/bench_read"
SOURCES="scripts/bench/bench_read.c src/io/mmio.c src/sparse/csr.c src/base/error.c src/base/timer.c"
src_inc=(); for d in src/*/; do src_inc+=(-I"$d"); done
if [ ! -x "$DRIVER" ] || [ -n "$(find $SOURCES src/*/*.h -newer "$DRIVER" 2>/dev/null)" ]; then
    $CC -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -fopenmp "${src_inc[@]}" \
        -o "$DRIVER" $SOURCES -lz -lm
fi

cat "$MATRIX" > /dev/null # into the page cache
field() { sed -E "s/.*(^| )$1=([^ ]*).*/\\2/" <<<"$2"; }

echo "matrix   $MATRIX ($(du -h "$MATRIX" | cut -f1))"
echo "machine  $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-8s %-28s %12s %16s %12s %12s\n' threads reader "best (ms)" "vs mmread" "vs +tocsr" "nnz"
for t in "$THREADS" 1; do
    ours=$(OMP_NUM_THREADS=$t "$DRIVER" "$MATRIX" "$REPEATS")
    peer=$("$PYTHON" scripts/bench/bench_read_scipy.py "$MATRIX" "$REPEATS" "$t")
    o=$(field best_s "$ours"); c=$(field mmread_s "$peer"); r=$(field mmread_tocsr_s "$peer")
    awk -v t="$t" -v o="$o" -v c="$c" -v r="$r" -v n="$(field nnz "$ours")" \
        -v sn="$(field nnz "$peer")" -v sv="$(field scipy "$peer")" 'BEGIN {
        printf "%-8s %-28s %12.2f %15.2fx %11.2fx %12s\n", t, "gpusolve gs_mm_read_csr", o*1e3, c/o, r/o, n
        printf "%-8s %-28s %12.2f %16s %12s %12s\n", t, "scipy " sv " mmread", c*1e3, "", "", ""
        printf "%-8s %-28s %12.2f %16s %12s %12s\n", t, "scipy " sv " mmread.tocsr", r*1e3, "", "", sn
    }'
    [ "$t" = 1 ] && break
done
echo "(ratios: SciPy time / gpusolve time, >1 means gpusolve is faster)"
