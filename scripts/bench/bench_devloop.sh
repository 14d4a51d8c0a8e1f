#!/usr/bin/env bash
# bench_devloop.sh - CG + Jacobi microseconds per iteration on small systems
# (issue 24): the host loop over replayed iteration graphs, the iteration loop
# on the device (a CUDA graph's conditional WHILE node) and the fused
# one-kernel path, all in this run, on the same card.
#   GPUSOLVE=build/gpusolve GS_MATRICES=../shared/matrices scripts/bench/bench_devloop.sh
# Environment: BENCH_REPEAT=N runs per case (default 3; the min Ts counts),
# BENCH_OUT=DIR keeps the JSON lines. About 1.5-2 min on an H100 (most of it
# bloweybq's 10,000 iterations of about 0.16 ms).
#
# Columns: n, iterations (host adaptive, device, fused cluster), us/it = min Ts /
# iterations for each path: host (GS_DEVICE_LOOP=off GS_FUSED=off, adaptive
# checks), host/1 (the same, a check every iteration), dev/1 (the device loop,
# a check kernel after every iteration: what the H100 measured at 0.83-0.93x
# host), dev/8 (the device loop, adaptive: bodies of 8 iterations, a check
# after each), grid and cluster (GS_FUSED=grid / cluster: the fused
# one-kernel path, its blocks meeting at cooperative-grid or cluster
# barriers, a check every iteration; "-" where it cannot run), default (no switch: the engine's
# rule, its path named under the table), and host / best. Iteration counts
# differ by the check grid: dev/8 stops at a multiple of 8, fused at the
# exact crossing of tol.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATS=${GS_MATRICES:-$root/../shared/matrices}
REPEAT=${BENCH_REPEAT:-3}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-devloop.XXXXXX)}
mkdir -p "$OUT"

# shellcheck source=scripts/lib/lib_bench.sh
. "$here/../lib/lib_bench.sh"
bench_need_cuda bench_devloop.sh

cases=("--generate poisson3d:8" "--generate poisson3d:16" "--generate poisson3d:32"
       "--generate poisson3d:64")
bench_add_matrices bench_devloop.sh 1138_bus bloweybq

json="$OUT/devloop.jsonl"
: >"$json"
t0=$(date +%s)
for c in "${cases[@]}"; do
    for variant in host host1 device1 device grid cluster default; do
        case $variant in
            host) env=(GS_DEVICE_LOOP=off GS_FUSED=off); extra=() ;;
            host1) env=(GS_DEVICE_LOOP=off GS_FUSED=off); extra=(--check-every 1) ;;
            device1) env=(GS_DEVICE_LOOP=on GS_FUSED=off); extra=(--check-every 1) ;;
            device) env=(GS_DEVICE_LOOP=on GS_FUSED=off); extra=() ;;
            grid) env=(GS_FUSED=grid); extra=() ;;
            cluster) env=(GS_FUSED=cluster); extra=() ;;
            default) env=(); extra=() ;;
        esac
        # shellcheck disable=SC2086
        env "${env[@]}" "$GPUSOLVE" --engine cuda $c -m cg -p jacobi --repeat "$REPEAT" \
            --progress never --format json "${extra[@]}" 2>>"$OUT/gpusolve.err" |
            sed "s/^{/{\"variant\": \"$variant\", /" >>"$json" ||
            echo "bench_devloop.sh: $c ($variant) failed (see $OUT/gpusolve.err)" >&2
    done
done

python3 - "$json" "$here/../lib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[-1])
from lib_bench import read_variants
rows, device = read_variants(sys.argv[1])
print(f"CG + Jacobi, us per iteration (min Ts of the runs / iterations) on {device}")
print(f"{'matrix':<16} {'n':>8} {'its h':>6} {'its d':>6} {'its f':>6} {'host':>7} "
      f"{'host/1':>7} {'dev/1':>7} {'dev/8':>7} {'grid':>7} {'cluster':>7} {'default':>7} "
      f"{'host/best':>9}")
want = {"host": "host", "host1": "host", "device1": "device", "device": "device",
        "grid": "fused", "cluster": "fused"}
cols = ("host", "host1", "device1", "device", "grid", "cluster", "default")
for name, v in rows.items():
    def us(k):
        r = v.get(k)
        if not r or not r["iterations"] or r.get("loop") != want.get(k, r.get("loop")):
            return float("nan")
        return 1e6 * r["ts_min_s"] / r["iterations"]
    t = {k: us(k) for k in cols}
    best = min([x for k, x in t.items() if k != "default" and x == x] or [float("nan")])
    any_r = next(iter(v.values()))
    its = lambda k: v[k]["iterations"] if k in v else -1
    cell = lambda x: f"{x:>7.2f}" if x == x else f"{'-':>7}"
    print(f"{name:<16} {any_r['n']:>8} {its('host'):>6} {its('device'):>6} {its('cluster'):>6} "
          + " ".join(cell(t[k]) for k in cols)
          + f" {t['host'] / best if best > 0 else float('nan'):>9.2f}")
    for k, path in want.items():
        if k in v and v[k].get("loop") != path:
            print(f"  {name} {k}: ran on the {v[k].get('loop')} path: {v[k].get('loop_note', '')}")
    if "default" in v:
        print(f"  {name} default: {v['default'].get('loop')} {v['default'].get('loop_note', '')}")
    for k, r in v.items():
        if r["reason"] != "converged":
            print(f"  {name} {k}: {r['reason']} {r.get('breakdown', '')}")
EOF
echo "($(( $(date +%s) - t0 )) s; JSON lines in $OUT)"
