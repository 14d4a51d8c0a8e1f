#!/usr/bin/env bash
# bench_ssorai.sh - the MIC paper's comparison, SSORPCGA (-p ssor-ai, cuda/precond/ssorai.cu)
# against MICPCGA (-p mic) on the GPU, and the CPU engine's ssor-ai setup for Tp: issue 21
# item 5 (the paper's Tables 2 and 3 side by side).
#   GPUSOLVE=build/gpusolve scripts/bench/bench_ssorai.sh
# Environment: BENCH_OUT=DIR (raw JSON lines and the table; default a temporary folder),
# REPEAT_GPU (2: Tp, Ts the minimum of this many runs), CPU=0 skips the CPU runs.
# Problems: poisson3d:128 (2.1M rows; CG to 1e-8, b = 1, x0 = 0) and heat3d:M21 (the
# paper's 100^3 model, its default Crank-Nicolson steps to t = 0.1, one setup for all
# steps; ER = max |u - u~| is the paper's Table 2 error). Per problem: ssor-ai and mic on
# the GPU with their defaults (ssor-ai: omega 1, one term; mic: omega 1, automatic shift,
# --trisolve auto), then ssor-ai's setup on the CPU engine on all cores (--maxit 1, and
# one time step for heat3d: only its Tp is read) and the Tp speedup.
# Every command runs under timeout; about 30 s on an H100.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-ssorai.XXXXXX)}
REPEAT_GPU=${REPEAT_GPU:-2}
CPU=${CPU:-1}
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
: >"$OUT/errors.log"

# run TAG LIMIT_S ARGS...: one JSON line per run, tagged
run() {
    local tag=$1 limit=$2
    shift 2
    timeout "$limit" "$GPUSOLVE" -m cg --format json "$@" 2>>"$OUT/errors.log" |
        sed "s/^{/{\"tag\": \"$tag\", /" >>"$OUT/runs.jsonl"
}

for problem in poisson3d:128 heat3d:M21; do
    for pc in ssor-ai mic; do
        echo "== $problem, $pc, gpu" >&2
        run "gpu-$pc" 60 -e cuda -p "$pc" --repeat "$REPEAT_GPU" --generate "$problem"
    done
    if [ "$CPU" = 1 ]; then
        echo "== $problem, ssor-ai, cpu setup" >&2
        steps=()
        [ "${problem%%:*}" = heat3d ] && steps=(--steps 1)
        run cpu-ssor-ai 60 -e cpu -p ssor-ai --maxit 1 "${steps[@]}" --generate "$problem"
    fi
done

python3 - "$OUT/runs.jsonl" <<'PY' | tee "$OUT/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu_tp = {r["matrix"]: r["tp_min_s"] for r in rows if r["tag"] == "cpu-ssor-ai"}
dev = next((r["device"] for r in rows if r["tag"].startswith("gpu")), "?")
print(f"device: {dev}\n")
print("| problem | run | Tp s | CPU Tp / Tp | Ts s | its (per step) | s/it | floor x | ER |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    cpu = cpu_tp.get(r["matrix"])
    gpu_run = r["tag"].startswith("gpu")
    speed = f"{cpu / r['tp_min_s']:.1f}" if cpu and r["tag"] == "gpu-ssor-ai" and r["tp_min_s"] > 0 else ""
    its = str(r["iterations"])
    if r.get("step_iterations_mean") is not None:
        its += f" ({r['step_iterations_min']}/{r['step_iterations_mean']:.2f}/{r['step_iterations_max']})"
    er = f"{r['er']:.4e}" if gpu_run and r.get("er") is not None else ""
    ts = f"{r['ts_min_s']:.4g}" if gpu_run else "(maxit 1)"
    print(f"| {r['matrix']} | {r['tag']} | {r['tp_min_s']:.4g} | {speed} | {ts} | "
          f"{its if gpu_run else ''} | {r['s_per_iteration'] if gpu_run else 0:.3g} | "
          f"{r.get('floor_ratio') or 0:.3g} | {er} |")
PY
[ -s "$OUT/errors.log" ] && { echo "bench_ssorai.sh: messages (see $OUT/errors.log):" >&2; head -5 "$OUT/errors.log" >&2; }
echo "raw: $OUT/runs.jsonl" >&2
