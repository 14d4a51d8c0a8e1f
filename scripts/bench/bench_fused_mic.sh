#!/usr/bin/env bash
# bench_fused_mic.sh - CG + MIC inside the fused one-kernel path against the
# host loop (issue 24, "MIC's triangular solves where they exist"), on the
# small SPD matrices of the shared set and generated Poisson problems, all
# in this run, on the same card; CG + Jacobi's default path beside it, for
# the question a user asks: which preconditioner solves faster.
#   GPUSOLVE=build/gpusolve GS_MATRICES=../shared/matrices scripts/bench/bench_fused_mic.sh
# Environment: BENCH_REPEAT=N runs per case (default 3; the min Ts counts),
# BENCH_MAXIT=N (default 3000), BENCH_METHOD=cg|bicgstab (default cg),
# BENCH_OUT=DIR keeps the JSON lines.
#
# Columns: n; the levels of L (MIC's forward substitution; L^T has as many);
# iterations of the host loop and of the fused kernel; us/it = min Ts /
# iterations on the host loop (GS_DEVICE_LOOP=off GS_FUSED=off), on the
# fused cluster (GS_FUSED=cluster: the factors in shared memory where they
# fit, "st" marks those) and on the cluster with the factors read from
# global memory (GS_FUSED_STAGE=off); host/fused; default (no switch: the
# engine's rule) Ts in ms with MIC and with Jacobi, and their iterations.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATS=${GS_MATRICES:-$root/../shared/matrices}
REPEAT=${BENCH_REPEAT:-3}
MAXIT=${BENCH_MAXIT:-3000}
METHOD=${BENCH_METHOD:-cg}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-fused-mic.XXXXXX)}
mkdir -p "$OUT"

# shellcheck source=scripts/lib/lib_bench.sh
. "$here/../lib/lib_bench.sh"
bench_need_cuda bench_fused_mic.sh

cases=("--generate poisson3d:8" "--generate poisson3d:16" "--generate poisson3d:2x2x400")
# the shared set's SPD matrices of at most GS_FUSED_FACTOR_MAX_ROWS rows
if [ -r "$MATS/MANIFEST.tsv" ]; then
    # shellcheck disable=SC2207
    spd=($(awk -F'\t' '$7 == "SPD" && $2 <= 28672 {print $1}' "$MATS/MANIFEST.tsv"))
    bench_add_matrices bench_fused_mic.sh "${spd[@]}"
else
    echo "bench_fused_mic.sh: $MATS/MANIFEST.tsv missing (set GS_MATRICES): generated cases only" >&2
fi

json="$OUT/fused_mic.jsonl"
: >"$json"
t0=$(date +%s)
for c in "${cases[@]}"; do
    for variant in host fused global default jacobi; do
        pc=mic
        case $variant in
            host) env=(GS_DEVICE_LOOP=off GS_FUSED=off) ;;
            fused) env=(GS_FUSED=cluster) ;;
            global) env=(GS_FUSED=cluster GS_FUSED_STAGE=off) ;;
            default) env=() ;;
            jacobi) env=(); pc=jacobi ;;
        esac
        # shellcheck disable=SC2086
        env "${env[@]}" "$GPUSOLVE" --engine cuda $c -m "$METHOD" -p "$pc" --maxit "$MAXIT" \
            --repeat "$REPEAT" --progress never --format json 2>>"$OUT/gpusolve.err" |
            sed "s/^{/{\"variant\": \"$variant\", /" >>"$json" ||
            echo "bench_fused_mic.sh: $c ($variant) failed (see $OUT/gpusolve.err)" >&2
    done
done

python3 - "$json" "$METHOD" "$here/../lib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[-1])
from lib_bench import read_variants
rows, device = read_variants(sys.argv[1])
method = sys.argv[2].upper() if sys.argv[2] == "cg" else "BiCGSTAB"
print(f"{method} + MIC, us per iteration (min Ts / iterations), fused against the host loop, on {device}")
print(f"{'matrix':<16} {'n':>6} {'levels':>6} {'its h':>6} {'its f':>6} {'host':>8} {'fused':>8} "
      f"{'st':>2} {'global':>8} {'h/f':>5} | {'mic ms':>8} {'its':>5} {'path':>6} | "
      f"{'jacobi ms':>9} {'its':>5}")
want = {"host": "host", "fused": "fused", "global": "fused"}
ratios = []
for name, v in rows.items():
    def us(k):
        r = v.get(k)
        if not r or not r["iterations"] or r.get("loop") != want.get(k, r.get("loop")):
            return float("nan")
        return 1e6 * r["ts_min_s"] / r["iterations"]
    h, f, g = us("host"), us("fused"), us("global")
    st = "st" if "shared memory" in (v.get("fused") or {}).get("loop_note", "") else ""
    name = name.rsplit("/", 1)[-1].removesuffix(".mtx")
    if h == h and f == f:
        ratios.append(h / f)
    any_r = next(iter(v.values()))
    extra = (v.get("host") or any_r).get("precond_extra", "") or ""
    lev = dict(kv.split("=", 1) for kv in extra.split(";") if "=" in kv).get("levels_L", "-")
    its = lambda k: v[k]["iterations"] if k in v else -1
    ms = lambda k: f"{1e3 * v[k]['ts_min_s']:>.3f}" if k in v else "-"
    cell = lambda x: f"{x:>8.2f}" if x == x else f"{'-':>8}"
    path = v["default"].get("loop", "?") if "default" in v else "-"
    print(f"{name:<16} {any_r['n']:>6} {str(lev):>6} {its('host'):>6} {its('fused'):>6} "
          f"{cell(h)} {cell(f)} {st:>2} {cell(g)} {h / f if h == h and f == f else float('nan'):>5.2f} | "
          f"{ms('default'):>8} {its('default'):>5} {path:>6} | {ms('jacobi'):>9} {its('jacobi'):>5}")
    for k, path in want.items():
        if k in v and v[k].get("loop") != path:
            print(f"  {name} {k}: ran on the {v[k].get('loop')} path: {v[k].get('loop_note', '')}")
    for k, r in v.items():
        if r["reason"] != "converged":
            print(f"  {name} {k}: {r['reason']} {r.get('breakdown', '')}")
if ratios:
    ratios.sort()
    print(f"host/fused over {len(ratios)} problems: min {ratios[0]:.2f}, median "
          f"{ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}")
EOF
echo "($(( $(date +%s) - t0 )) s; JSON lines in $OUT)"
