#!/usr/bin/env bash
# bench_multigpu.sh - gpusolve on several GPUs (issue 23, docs/multigpu.md):
# strong scaling of CG + Jacobi, cg1 (one reduction an iteration) + Jacobi,
# CG + FSAI and BiCGSTAB + SPAI (block-local) on poisson3d:256 (16.8M rows)
# and weak scaling at 4M rows per GPU (poisson3d:128x128x(256 P), P blocks
# stacked along z, so each rank's block is one 128x128x256 box) on 1, 2, 4
# and 8 GPUs (as many as are present). Prints, per run, the time per
# iteration, the efficiency against one GPU (strong: t1 / (P tP); weak:
# t1 / tP, both per iteration), and the iteration time against the bandwidth
# floor of the GPUs used (bytes the busiest rank moves / the slowest GPU's
# measured copy bandwidth), the halo bytes and the communication time.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_multigpu.sh          (a make MPI=1 build)
# Environment: GPUS (default: nvidia-smi's count), SIZE (256), WEAK (128), WEAK_Z (256),
# RUN_TIMEOUT (240 s per mpirun), MPIRUN (mpirun), MPIRUN_FLAGS (extra flags),
# BENCH_OUT=DIR (runs.csv, table.md, logs; default a temporary folder),
# ENGINE (cuda; cpu for a smoke run of the script), GS_DIST_TRANSPORT (nccl|mpi-staged: force a transport),
# GS_DIST_OVERLAP=1 (halo on a second stream, overlapped), GS_DIST_COMM_TIMING=0 (no events),
# GS_DIST_MERGE=0 (a collective a dot), CASES (strong-jacobi strong-cg1 strong-fsai
# strong-spai weak-jacobi weak-cg1: a subset), QUICK=1 (SIZE 128, WEAK 64, WEAK_Z 64: a
# smoke run). About 3-4 minutes on 4 H200s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MPIRUN=${MPIRUN:-mpirun}
SIZE=${SIZE:-256}
WEAK=${WEAK:-128}
WEAK_Z=${WEAK_Z:-256}
[ "${QUICK:-0}" = 1 ] && SIZE=128 WEAK=64 WEAK_Z=64
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
      g("comm_s"), g("transport", "-"), g("distribute_s"), g("read_s"), g("comm_setup_s"),
      g("reductions_per_iteration"), g("split_s")]))
PY
}

CASES=${CASES:-strong-jacobi strong-cg1 strong-fsai strong-spai weak-jacobi weak-cg1}
want() { case " $CASES " in *" $1 "*) return 0 ;; esac; return 1; }
weak="poisson3d:${WEAK}x${WEAK}x"
for p in "${counts[@]}"; do
    want strong-jacobi && run "strong cg+jacobi" "$p" --generate "poisson3d:$SIZE" -p jacobi -m cg
    want strong-cg1 && run "strong cg1+jacobi" "$p" --generate "poisson3d:$SIZE" -p jacobi -m cg1
    want strong-fsai && run "strong cg+fsai" "$p" --generate "poisson3d:$SIZE" -p fsai -m cg
    want strong-spai && run "strong bicgstab+spai" "$p" --generate "poisson3d:$SIZE" -p spai -m bicgstab
    want weak-jacobi && run "weak cg+jacobi" "$p" --generate "$weak$((WEAK_Z * p))" -p jacobi -m cg
    want weak-cg1 && run "weak cg1+jacobi" "$p" --generate "$weak$((WEAK_Z * p))" -p jacobi -m cg1
done

python3 - "$OUT/runs.csv" "$GPUS" >"$OUT/table.md" <<'PY'
import csv, sys
cols = ["case", "P", "n", "iterations", "converged", "tp", "ts", "t_it", "floor", "floor_ratio",
        "halo_B", "comm_s", "transport", "distribute_s", "read_s", "comm_setup_s", "sums",
        "split_s"]
rows = [dict(zip(cols, r)) for r in csv.reader(open(sys.argv[1]))]
one = {r["case"]: r for r in rows if r["P"] == "1"}
# efficiency against one GPU of the same case: strong t1 / (P tP) for the
# iteration, Ts and Tt = Tp + Ts; weak t1 / tP for the iteration
print("| case | GPUs | n | iterations | Tp (s) | Ts (s) | Tt (s) | per iteration (us) |"
      " efficiency: iteration / Ts / Tt | floor (us) | x floor | sums/it | halo (kB/it) |"
      " comm (s) | transport | split (s) | comm setup (s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    p, t = int(r["P"]), float(r["t_it"])
    tp, ts = float(r["tp"]), float(r["ts"])
    b = one.get(r["case"])
    if not b or t <= 0:
        eff = "-"
    elif r["case"].startswith("strong"):
        b_tp, b_ts = float(b["tp"]), float(b["ts"])
        eff = "%.2f / %.2f / %.2f" % (float(b["t_it"]) / (p * t), b_ts / (p * ts),
                                      (b_tp + b_ts) / (p * (tp + ts)))
    else:
        eff = "%.2f" % (float(b["t_it"]) / t)
    print("| %s | %d | %s | %s%s | %.3f | %.3f | %.3f | %.1f | %s | %.1f | %.2f | %.2f | %.1f | %.3f | %s | %.3f | %.3f |" % (
        r["case"], p, r["n"], r["iterations"], "" if r["converged"] == "yes" else " (no)",
        tp, ts, tp + ts, 1e6 * t, eff, 1e6 * float(r["floor"]), float(r["floor_ratio"]),
        float(r["sums"] or 0), float(r["halo_B"]) / 1e3, float(r["comm_s"]), r["transport"],
        float(r["split_s"] or 0), float(r.get("comm_setup_s") or 0)))
PY
cat "$OUT/table.md"
echo "bench_multigpu: runs in $OUT/runs.csv, table in $OUT/table.md" >&2
[ -s "$OUT/errors.log" ] && { echo "bench_multigpu: failures:" >&2; cat "$OUT/errors.log" >&2; exit 1; }
exit 0
