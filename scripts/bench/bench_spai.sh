#!/usr/bin/env bash
# bench_spai.sh - spai (CW-SPAI) and gspai-opt set up on the GPU
# (cuda/precond/spai*.cu, gspai.cu) against the CPU engine's setup (all cores),
# on the large built-in problems of issue 19's targets: Tp (and its stages),
# Ts, iterations and the apply's floor ratio, GPU Tp against CPU Tp, and the
# fp32 M (iterations, us per iteration) against fp64.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_spai.sh [quick]
# Environment: BENCH_OUT=DIR (JSON lines, errors; default a temporary folder),
# REPEAT_GPU (3: min over full runs), SIZE (128: the grid's side; quick: 64).
# BiCGSTAB (the papers' method), b = A*1, x0 = 0, tol 1e-8; the CPU runs stop
# after one iteration (only their Tp is used). About a minute on an H100.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-spai.XXXXXX)}
REPEAT_GPU=${REPEAT_GPU:-3}
SIZE=${SIZE:-128}
[ "${1:-}" = quick ] && SIZE=64
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
: >"$OUT/errors.log"

# run LABEL ENGINE REPEAT ARGS...: one JSON line tagged with the label
run() {
    local label=$1 engine=$2 repeat=$3
    shift 3
    "$GPUSOLVE" -e "$engine" -m bicgstab --rhs ax1 --repeat "$repeat" --format json "$@" \
        2>>"$OUT/errors.log" | sed "s/^{/{\"case\": \"$label\", /" >>"$OUT/runs.jsonl"
    [ "${PIPESTATUS[0]}" -le 2 ] || echo "failed: $label $engine $*" >>"$OUT/errors.log"
}

for problem in poisson3d convdiff3d; do
    spec="$problem:$SIZE"
    echo "== $spec" >&2
    run "$spec spai" cuda "$REPEAT_GPU" --generate "$spec" -p spai
    run "$spec spai warp" cuda "$REPEAT_GPU" --generate "$spec" -p spai --group-size warp  # CW-SPAI's q = 32
    run "$spec spai fp32" cuda "$REPEAT_GPU" --generate "$spec" -p spai --precond-precision single
    # the CPU runs are for Tp only: one iteration (exit status 2, the report is still printed)
    run "$spec spai" cpu 1 --generate "$spec" -p spai --maxit 1
    run "$spec gspai-opt" cuda "$REPEAT_GPU" --generate "$spec" -p gspai-opt
    run "$spec gspai-opt S2" cuda "$REPEAT_GPU" --generate "$spec" -p gspai-opt --strategy s2
    run "$spec gspai-opt" cpu 1 --generate "$spec" -p gspai-opt --maxit 1
    run "$spec jacobi" cuda "$REPEAT_GPU" --generate "$spec" -p jacobi
done

python3 - "$OUT/runs.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu_tp = {r["case"]: r["tp_min_s"] for r in runs if r["engine"] == "cpu"}
print(f"device: {next((r['device'] for r in runs if r['engine'] == 'cuda'), '?')}")
print("| case | engine | Tp ms | CPU/GPU Tp | stages (ms) | Ts ms | it | us/it | floor x | extra |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in runs:
    stages = ", ".join(f"{kv.split('=')[0]} {1e3 * float(kv.split('=')[1]):.2f}"
                       for kv in r.get("tp_stages", "").split(";") if "=" in kv)
    speed = ""
    if r["engine"] == "cuda" and r["case"] in cpu_tp and r["tp_min_s"] > 0:
        speed = f"{cpu_tp[r['case']] / r['tp_min_s']:.1f}"
    print(f"| {r['case']} | {r['engine']} | {1e3 * r['tp_min_s']:.2f} | {speed} | {stages} | "
          f"{1e3 * r['ts_min_s']:.2f} | {r['iterations']} | {1e6 * r['s_per_iteration']:.1f} | "
          f"{r.get('floor_ratio', 0):.2f} | {r.get('precond_extra', '')} |")
PY
echo "raw runs: $OUT/runs.jsonl; errors: $OUT/errors.log" >&2
[ -s "$OUT/errors.log" ] && { echo "--- errors.log:" >&2; tail -20 "$OUT/errors.log" >&2; }
exit 0
