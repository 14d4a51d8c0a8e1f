#!/usr/bin/env bash
# bench_multigpu.sh - gpusolve on several GPUs (issue 23, docs/multigpu.md):
# strong scaling of CG + Jacobi and CG + FSAI (block-local) on poisson3d:256
# (16.8M rows) and weak scaling at 2M rows per GPU (poisson3d:128x128x(128 P),
# P cubes stacked along z, so each rank's block is one 128^3 cube) on 1, 2,
# 4 and 8 GPUs (as many as are present). Prints, per run, the time per
# iteration, the efficiency against one GPU (strong: t1 / (P tP); weak:
# t1 / tP, both per iteration), and the iteration time against the bandwidth
# floor of the GPUs used (bytes the busiest rank moves / the slowest GPU's
# measured copy bandwidth), the halo bytes and the communication time.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_multigpu.sh          (a make MPI=1 build)
# Environment: GPUS (default: nvidia-smi's count), SIZE (256), WEAK (128),
# RUN_TIMEOUT (240 s per mpirun), MPIRUN (mpirun), MPIRUN_FLAGS (extra flags),
# BENCH_OUT=DIR (runs.csv, table.md, logs; default a temporary folder),
# ENGINE (cuda; cpu for a smoke run of the script), GS_DIST_TRANSPORT (nccl|mpi-staged: force a transport),
# GS_DIST_OVERLAP=1 (halo on a second stream, overlapped), GS_DIST_COMM_TIMING=0 (no events), CASES
# (strong-jacobi strong-fsai weak-jacobi: a subset), QUICK=1 (SIZE 128,
# WEAK 64: a smoke run). About 2-3 minutes on 2 H100s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MPIRUN=${MPIRUN:-mpirun}
SIZE=${SIZE:-256}
WEAK=${WEAK:-128}
[ "${QUICK:-0}" = 1 ] && SIZE=128 WEAK=64
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-multigpu.XXXXXX)}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
mkdir -p "$OUT"
: >"$OUT/runs.csv"
: >"$OUT/errors.log"
command -v "$MPIRUN" >/dev/null || { echo "bench_multigpu: no $MPIRUN on PATH" >&2; exit 1; }
[ "${GPUS:-0}" -ge 1 ] || { echo "bench_multigpu: no GPU found (set GPUS)" >&2; exit 1; }
cores=$(nproc)
counts=()
for p in 1 2 4 8; do [ "$p" -le "$GPUS" ] && counts+=("$p"); done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI binds each rank to one core by default, which starves its OpenMP
# threads (generation, setups): unbind; other launchers get no extra flags.
ompi_flags=""
"$MPIRUN" --version 2>&1 | grep -q 'Open MPI\|OpenRTE' && ompi_flags="--oversubscribe --bind-to none"

# label, ranks, gpusolve arguments: one CSV row appended to runs.csv
run() {
    local label=$1 p=$2; shift 2
    local threads=$((cores / p)); [ "$threads" -ge 1 ] || threads=1
    local log="$OUT/$(echo "$label-$p" | tr ' :/' '___').log"
    echo "== $label on $p GPU(s): gpusolve $*" >&2
    OMP_NUM_THREADS=$threads timeout -k 10 "$RUN_TIMEOUT" "$MPIRUN" $ompi_flags \
        ${MPIRUN_FLAGS:-} -np "$p" "$GPUSOLVE" -e "${ENGINE:-cuda}" --format csv "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] || ! grep -q '^matrix,' "$log"; then
        echo "$label P=$p: exit $rc (see $log)" | tee -a "$OUT/errors.log" >&2
        return
    fi
    python3 - "$label" "$p" "$log" >>"$OUT/runs.csv" <<'PY'
import csv, sys
label, p, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = [l for l in open(log) if l.startswith("matrix,") or l.startswith('"')]
row = list(csv.DictReader(lines))[0]
g = lambda k, d="0": row.get(k) or d
bw = float(g("bandwidth_Bps"))
floor = float(g("bytes_per_iteration")) / bw if bw > 0 else 0.0  # the CPU engine measures none
print(",".join(str(v) for v in [label, p, g("n"), g("iterations"), g("converged"), g("tp_min_s"),
      g("ts_min_s"), g("s_per_iteration"), floor, g("floor_ratio"), g("halo_bytes_per_iteration"),
      g("comm_s"), g("transport", "-"), g("distribute_s"), g("read_s"), g("comm_setup_s")]))
PY
}

CASES=${CASES:-strong-jacobi strong-fsai weak-jacobi}
want() { case " $CASES " in *" $1 "*) return 0 ;; esac; return 1; }
for p in "${counts[@]}"; do
    want strong-jacobi && run "strong cg+jacobi" "$p" --generate "poisson3d:$SIZE" -p jacobi -m cg
    want strong-fsai && run "strong cg+fsai" "$p" --generate "poisson3d:$SIZE" -p fsai -m cg
    want weak-jacobi && run "weak cg+jacobi" "$p" --generate "poisson3d:${WEAK}x${WEAK}x$((WEAK * p))" -p jacobi -m cg
done

python3 - "$OUT/runs.csv" "$GPUS" >"$OUT/table.md" <<'PY'
import csv, sys
cols = ["case", "P", "n", "iterations", "converged", "tp", "ts", "t_it", "floor", "floor_ratio",
        "halo_B", "comm_s", "transport", "distribute_s", "read_s", "comm_setup_s"]
rows = [dict(zip(cols, r)) for r in csv.reader(open(sys.argv[1]))]
base = {r["case"]: float(r["t_it"]) for r in rows if r["P"] == "1"}
print("| case | GPUs | n | iterations | Tp (s) | Ts (s) | per iteration (us) | efficiency |"
      " floor (us) | x floor | halo (kB/it) | comm (s) | transport | distribute (s) |"
      " comm setup (s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    p, t = int(r["P"]), float(r["t_it"])
    b = base.get(r["case"])
    eff = "-" if not b or t <= 0 else "%.2f" % ((b / (p * t)) if r["case"].startswith("strong") else b / t)
    print("| %s | %d | %s | %s%s | %.3f | %.3f | %.1f | %s | %.1f | %.2f | %.1f | %.3f | %s | %.3f | %.3f |" % (
        r["case"], p, r["n"], r["iterations"], "" if r["converged"] == "yes" else " (no)",
        float(r["tp"]), float(r["ts"]), 1e6 * t, eff, 1e6 * float(r["floor"]),
        float(r["floor_ratio"]), float(r["halo_B"]) / 1e3, float(r["comm_s"]), r["transport"],
        float(r["distribute_s"]), float(r.get("comm_setup_s") or 0)))
PY
cat "$OUT/table.md"
echo "bench_multigpu: runs in $OUT/runs.csv, table in $OUT/table.md" >&2
[ -s "$OUT/errors.log" ] && { echo "bench_multigpu: failures:" >&2; cat "$OUT/errors.log" >&2; exit 1; }
exit 0
