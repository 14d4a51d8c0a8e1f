#!/usr/bin/env bash
# bench_devloop.sh - CG + Jacobi microseconds per iteration on small systems
# (issue 24): the iteration loop on the device (the default) against the host
# loop over replayed iteration graphs (GS_DEVICE_LOOP=off), both in this run,
# on the same card.
#   GPUSOLVE=build/gpusolve GS_MATRICES=../shared/matrices scripts/bench_devloop.sh
# Environment: BENCH_REPEAT=N runs per case (default 3; the min Ts counts),
# BENCH_OUT=DIR keeps the JSON lines. About 30-45 s on an H100 (half of it
# bloweybq's 10,000 iterations of about 0.16 ms).
#
# Columns: n, iterations, us/it = min Ts / iterations for each path (host
# loop with its default adaptive checks, then with a check every iteration,
# the device loop), and host / device. The device loop checks every
# iteration, so its iteration count is the exact crossing of tol; the
# adaptive host loop may run a few more.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATS=${GS_MATRICES:-$root/../shared/matrices}
REPEAT=${BENCH_REPEAT:-3}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-devloop.XXXXXX)}
mkdir -p "$OUT"

if [ ! -x "$GPUSOLVE" ]; then echo "bench_devloop.sh: $GPUSOLVE not built (make)" >&2; exit 1; fi
if ! "$GPUSOLVE" --engine cuda --generate poisson3d:4 --format json >/dev/null 2>"$OUT/probe.err"; then
    echo "bench_devloop.sh: the CUDA engine is not usable here: $(head -c 300 "$OUT/probe.err")" >&2
    exit 1
fi

cases=("--generate poisson3d:8" "--generate poisson3d:16" "--generate poisson3d:32"
       "--generate poisson3d:64")
for m in 1138_bus bloweybq; do
    if [ -r "$MATS/$m.mtx" ]; then cases+=("$MATS/$m.mtx")
    else echo "bench_devloop.sh: $MATS/$m.mtx missing (set GS_MATRICES): skipped" >&2; fi
done

json="$OUT/devloop.jsonl"
: >"$json"
t0=$(date +%s)
for c in "${cases[@]}"; do
    for variant in host host1 device; do
        case $variant in
            host) env=(GS_DEVICE_LOOP=off); extra=() ;;
            host1) env=(GS_DEVICE_LOOP=off); extra=(--check-every 1) ;;
            device) env=(); extra=() ;;
        esac
        # shellcheck disable=SC2086
        env "${env[@]}" "$GPUSOLVE" --engine cuda $c -m cg -p jacobi --repeat "$REPEAT" \
            --progress never --format json "${extra[@]}" 2>>"$OUT/gpusolve.err" |
            sed "s/^{/{\"variant\": \"$variant\", /" >>"$json" ||
            echo "bench_devloop.sh: $c ($variant) failed (see $OUT/gpusolve.err)" >&2
    done
done

python3 - "$json" <<'EOF'
import json, sys
rows = {}
device = ""
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    device = r.get("device", device)
    rows.setdefault(r["matrix"], {})[r["variant"]] = r
print(f"CG + Jacobi, us per iteration (min Ts of the runs / iterations) on {device}")
print(f"{'matrix':<16} {'n':>8} {'its host':>8} {'its dev':>8} {'host':>8} {'host/1':>8} "
      f"{'device':>8} {'host/dev':>8}")
for name, v in rows.items():
    def us(k):
        r = v.get(k)
        return 1e6 * r["ts_min_s"] / r["iterations"] if r and r["iterations"] else float("nan")
    h, h1, d = us("host"), us("host1"), us("device")
    any_r = next(iter(v.values()))
    its = lambda k: v[k]["iterations"] if k in v else -1
    print(f"{name:<16} {any_r['n']:>8} {its('host'):>8} {its('device'):>8} {h:>8.2f} {h1:>8.2f} "
          f"{d:>8.2f} {h / d if d > 0 else float('nan'):>8.2f}")
    if "device" in v and v["device"].get("loop") != "device":
        print(f"  {name}: the device variant ran its loop on the {v['device'].get('loop')}: "
              f"{v['device'].get('loop_note', '')}")
    for k, r in v.items():
        if r["reason"] != "converged":
            print(f"  {name} {k}: {r['reason']} {r.get('breakdown', '')}")
EOF
echo "($(( $(date +%s) - t0 )) s; JSON lines in $OUT)"
