#!/usr/bin/env bash
# bench_read_mpi.sh - reading a large Matrix Market file under mpirun (issue 36,
# docs/multigpu.md "Distribution"): --read root (rank 0 reads the whole file
# and sends each rank its rows) against --read parallel (each rank parses its
# own byte range, the entries go to their rows' owners). Writes a file of at
# least MIN_GB (default 1) GB once (poisson3d:N, symmetric storage, written by
# one process on the cpu engine), then runs each mode REPEAT times on RANKS
# ranks and prints, per run, read_s (the report's read), distribute_s (its
# "distributed in"), their sum (everything until the setup starts) and the
# mpirun's wall seconds (launch, read, distribution, a one-iteration solve,
# exit). The solve is CG + Jacobi with --maxit 1 (exit 2 is expected).
#   GPUSOLVE=build/gpusolve scripts/bench/bench_read_mpi.sh          (a make MPI=1 build)
# Environment: RANKS (4), ENGINE (cuda; cpu here without a GPU), N (240: 13.8M rows,
# 1.1 GB), MIN_GB (1: refuse a smaller file), REPEAT (2), FILE (an existing .mtx to
# read instead of writing one), DIR (where the file goes; default a temporary folder,
# removed at the end unless KEEP=1), MPIRUN (mpirun), MPIRUN_FLAGS, RUN_TIMEOUT (900 s).
# Needs no network. Each rank gets OMP_NUM_THREADS = cores / RANKS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MPIRUN=${MPIRUN:-mpirun}
RANKS=${RANKS:-4}
ENGINE=${ENGINE:-cuda}
N=${N:-240}
MIN_GB=${MIN_GB:-1}
REPEAT=${REPEAT:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
command -v "$MPIRUN" >/dev/null || { echo "bench_read_mpi: no $MPIRUN on PATH" >&2; exit 1; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_flags=""
"$MPIRUN" --version 2>&1 | grep -q 'Open MPI\|OpenRTE' && ompi_flags="--oversubscribe --bind-to none"
cores=$(nproc)
threads=$((cores / RANKS)); [ "$threads" -ge 1 ] || threads=1
DIR=${DIR:-$(mktemp -d /tmp/bench-read-mpi.XXXXXX)}
mkdir -p "$DIR"
if [ -z "${FILE:-}" ]; then
    FILE="$DIR/poisson3d_$N.mtx"
    echo "== writing $FILE (poisson3d:$N, one process)" >&2
    t0=$(date +%s.%N)
    "$GPUSOLVE" -e cpu --generate "poisson3d:$N" -p none --maxit 1 -q --write-matrix "$FILE"
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 2 ] || { echo "bench_read_mpi: writing failed ($rc)" >&2; exit 1; }
    echo "   written in $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s" >&2
fi
bytes=$(stat -c %s "$FILE")
python3 -c "import sys; sys.exit(0 if $bytes >= $MIN_GB * 1e9 else 1)" ||
    { echo "bench_read_mpi: $FILE has $bytes bytes, less than $MIN_GB GB (raise N)" >&2; exit 1; }
echo "file $FILE: $bytes bytes; $RANKS ranks, engine $ENGINE, $threads OpenMP threads a rank"
echo "| mode | run | read_s | distribute_s | until setup (s) | wall (s) | rows per rank | nnz per rank |"
echo "|---|---|---|---|---|---|---|---|"
status=0
for mode in root parallel; do
    for r in $(seq 1 "$REPEAT"); do
        log="$DIR/$mode-$r.log"
        t0=$(date +%s.%N)
        OMP_NUM_THREADS=$threads timeout -k 10 "$RUN_TIMEOUT" "$MPIRUN" $ompi_flags ${MPIRUN_FLAGS:-} \
            -np "$RANKS" "$GPUSOLVE" -e "$ENGINE" --read "$mode" -p jacobi -m cg --maxit 1 \
            --format csv "$FILE" >"$log" 2>&1
        rc=$?
        wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
        if { [ $rc -ne 0 ] && [ $rc -ne 2 ]; } || ! grep -q '^matrix,' "$log"; then
            echo "bench_read_mpi: $mode run $r: exit $rc (see $log)" >&2
            status=1
            continue
        fi
        python3 - "$mode" "$r" "$wall" "$log" <<'PY'
import csv, sys
mode, r, wall, log = sys.argv[1:5]
row = list(csv.DictReader(l for l in open(log) if l.startswith("matrix,") or l.startswith('"')))[0]
rd, ds = float(row["read_s"]), float(row["distribute_s"])
print("| %s | %s | %.2f | %.2f | %.2f | %.1f | %s .. %s | %s .. %s |" % (
    mode, r, rd, ds, rd + ds, float(wall), row["rows_min"], row["rows_max"], row["nnz_min"],
    row["nnz_max"]))
PY
    done
done
[ "${KEEP:-0}" = 1 ] || { [ "$FILE" = "$DIR/poisson3d_$N.mtx" ] && rm -f "$FILE"; }
echo "bench_read_mpi: logs in $DIR" >&2
exit $status
