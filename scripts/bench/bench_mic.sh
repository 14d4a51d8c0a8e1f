#!/usr/bin/env bash
# bench_mic.sh - MIC-PCG with the setup and the substitutions on the GPU (cuda/precond/mic*.cu,
# cuda/sparse/trisolve_*.cu) against cuSPARSE's substitutions (--trisolve exact) on the
# same device factors, and against the CPU engine's setup (src/precond/pc_mic.c) for Tp:
# issue 21 items 2-4 (the MICPCGA paper's GPUFBS, for any pattern).
#   GPUSOLVE=build/gpusolve scripts/bench/bench_mic.sh
# Environment: BENCH_OUT=DIR (raw JSON lines and the table; default a temporary folder),
# GS_MATRICES (../shared/matrices), REPEAT_GPU (2: Tp, Ts the minimum of this many runs).
# Settings: CG, gpusolve's default right-hand side (b = 1: not A*1, which MIC with omega = 1
# and no shift solves in one iteration, M e = A e), x0 = 0, tol 1e-8, mic's defaults (omega 1,
# automatic shift).
# Rows: poisson3d:128 (2.1M rows), then a few SPD shared matrices (those needing a shift
# included). Per row: the GPU with the default --trisolve (auto: the faster of the
# sync-free and level-scheduled solves, timed at setup), the GPU with --trisolve exact
# (cuSPARSE SpSV), the CPU engine on all cores (Tp only, and its speedup).
# The substitutions alone, scheme by scheme on the same factors: scripts/bench/bench_trisolve.sh.
# About 60 s on an H100 (the CPU engine's poisson3d:128 setup and solve dominate; set
# CPU=0 to skip the CPU runs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATRICES=${GS_MATRICES:-$root/../shared/matrices}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-mic.XXXXXX)}
REPEAT_GPU=${REPEAT_GPU:-2}
CPU=${CPU:-1}
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
: >"$OUT/errors.log"

# run TAG ARGS...: one JSON line per problem, tagged
run() {
    local tag=$1
    shift
    timeout 120 "$GPUSOLVE" -m cg --format json -p mic "$@" 2>>"$OUT/errors.log" |
        sed "s/^{/{\"tag\": \"$tag\", /" >>"$OUT/runs.jsonl"
}

problems=(--generate poisson3d:128)
files=()
for m in gr_30_30 nos3 1138_bus bcsstk16 s3rmt3m3 Trefethen_500; do
    [ -f "$MATRICES/$m.mtx" ] && files+=("$MATRICES/$m.mtx")
done

echo "== gpu, --trisolve auto" >&2
run gpu-auto -e cuda --repeat "$REPEAT_GPU" "${problems[@]}"
[ ${#files[@]} -gt 0 ] && run gpu-auto -e cuda --repeat "$REPEAT_GPU" "${files[@]}"
echo "== gpu, --trisolve exact (cuSPARSE)" >&2
run gpu-exact -e cuda --repeat "$REPEAT_GPU" --trisolve exact "${problems[@]}"
[ ${#files[@]} -gt 0 ] && run gpu-exact -e cuda --repeat "$REPEAT_GPU" --trisolve exact "${files[@]}"
if [ "$CPU" = 1 ]; then
    echo "== cpu, all cores" >&2
    run cpu -e cpu "${problems[@]}"
    [ ${#files[@]} -gt 0 ] && run cpu -e cpu "${files[@]}"
fi

python3 - "$OUT/runs.jsonl" <<'EOF' | tee "$OUT/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu_tp = {r["matrix"]: r["tp_min_s"] for r in rows if r["tag"] == "cpu"}
dev = next((r["device"] for r in rows if r["tag"].startswith("gpu")), "?")
print(f"device: {dev}\n")
print("| matrix | run | trisolve | shift (tries) | Tp s | Tp stages | CPU Tp / Tp | Ts s | its | s/it | floor x |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    extra = dict(kv.split("=", 1) for kv in r.get("precond_extra", "").split(";") if "=" in kv)
    fbs = ""
    if "fbs_syncfree_ms" in extra:
        fbs = f" (sf {float(extra['fbs_syncfree_ms']):.3g} ms, lv {float(extra['fbs_levels_ms']):.3g} ms)"
    cpu = cpu_tp.get(r["matrix"])
    speed = f"{cpu / r['tp_min_s']:.1f}" if cpu and r["tag"] != "cpu" and r["tp_min_s"] > 0 else ""
    stages = ", ".join(f"{k} {float(v):.3g}" for k, v in
                       (kv.split("=", 1) for kv in r.get("tp_stages", "").split(";") if "=" in kv))
    print(f"| {r['matrix'].split('/')[-1]} | {r['tag']} | {extra.get('trisolve', 'serial')}{fbs} | "
          f"{extra.get('shift', '?')} ({extra.get('shift_tries', '?')}) | {r['tp_min_s']:.4g} | {stages} | "
          f"{speed} | {r['ts_min_s']:.4g} | {r['iterations']} | {r['s_per_iteration']:.3g} | "
          f"{r.get('floor_ratio', 0):.3g} |")
EOF
[ -s "$OUT/errors.log" ] && { echo "bench_mic.sh: errors (see $OUT/errors.log):" >&2; head -5 "$OUT/errors.log" >&2; }
echo "raw: $OUT/runs.jsonl" >&2
