#!/usr/bin/env bash
# bench_devloop_steps.sh - GMRES(30), GMRES(5) and IDR(4) + Jacobi on small systems
# (issue 24 item 1): the host loop (one read of 5 or 3 slots after every
# step) against the loop on the device (a CUDA graph's WHILE node around one
# IF node per step: GMRES's m steps and its end of cycle, IDR's s inner steps
# and its reduction step; the host reads once at the end), in this run, on
# the same card.
#   GPUSOLVE=build/gpusolve GS_MATRICES=../shared/matrices scripts/bench/bench_devloop_steps.sh
# Environment: BENCH_REPEAT=N runs per case (default 3; the min Ts counts),
# BENCH_OUT=DIR keeps the JSON lines. About a minute on an H100.
#
# Columns per method: iterations (host, device: equal unless a rounding
# moved the crossing), Ts in ms (min of the runs: for the device loop it
# includes capturing and instantiating the graph, once per solve), us per
# iteration = Ts / iterations, and host / device.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATS=${GS_MATRICES:-$root/../shared/matrices}
REPEAT=${BENCH_REPEAT:-3}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-devsteps.XXXXXX)}
mkdir -p "$OUT"

# shellcheck source=scripts/lib/lib_bench.sh
. "$here/../lib/lib_bench.sh"
bench_need_cuda bench_devloop_steps.sh

cases=("--generate poisson3d:8" "--generate poisson3d:16" "--generate poisson3d:32"
       "--generate poisson3d:64" "--generate convdiff3d:16" "--generate convdiff3d:64")
bench_add_matrices bench_devloop_steps.sh 1138_bus sherman5

json="$OUT/steps.jsonl"
: >"$json"
t0=$(date +%s)
for c in "${cases[@]}"; do
    for method in gmres gmres5 idr; do
        case $method in gmres5) margs=(-m gmres --restart 5) ;; *) margs=(-m "$method") ;; esac
        for variant in host device; do
            case $variant in
                host) env=(GS_DEVICE_LOOP=off) ;;
                device) env=(GS_DEVICE_LOOP=on) ;;
            esac
            # shellcheck disable=SC2086
            env "${env[@]}" "$GPUSOLVE" --engine cuda $c "${margs[@]}" -p jacobi --repeat "$REPEAT" \
                --maxit 3000 --progress never --format json 2>>"$OUT/gpusolve.err" |
                sed "s/^{/{\"variant\": \"$variant\", \"method_run\": \"$method\", /" >>"$json" ||
                true
        done
    done
done

python3 - "$json" "$here/../lib" <<'PY'
import sys
sys.path.insert(0, sys.argv[-1])
from lib_bench import read_variants
rows, device = read_variants(sys.argv[1], key=lambda r: (r["matrix"], r["method_run"]))
print(f"GMRES(30), GMRES(5) and IDR(4) + Jacobi: host loop against the loop on the device, on {device}")
print(f"{'matrix':<16} {'method':<6} {'n':>8} {'its h':>6} {'its d':>6} {'Ts h ms':>8} "
      f"{'Ts d ms':>8} {'us/it h':>8} {'us/it d':>8} {'h/d':>5}")
for (name, method), v in rows.items():
    h, d = v.get("host"), v.get("device")
    if not h or not d:
        print(f"{name:<16} {method:<6} missing run")
        continue
    us = lambda r: 1e6 * r["ts_min_s"] / r["iterations"] if r["iterations"] else float("nan")
    print(f"{name:<16} {method:<6} {h['n']:>8} {h['iterations']:>6} {d['iterations']:>6} "
          f"{1e3 * h['ts_min_s']:>8.2f} {1e3 * d['ts_min_s']:>8.2f} {us(h):>8.2f} {us(d):>8.2f} "
          f"{h['ts_min_s'] / d['ts_min_s']:>5.2f}")
    for k, r in v.items():
        if r.get("loop") != k:
            print(f"  {name} {method} {k}: ran on the {r.get('loop')} path: {r.get('loop_note', '')}")
        if r["reason"] != "converged":
            print(f"  {name} {method} {k}: {r['reason']} {r.get('breakdown', '')}")
PY
echo "($(( $(date +%s) - t0 )) s; JSON lines in $OUT)"
