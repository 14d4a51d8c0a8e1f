#!/usr/bin/env bash
# bench_isai.sh - ISAI set up on the GPU (cuda/precond/isai*.cu) against the CPU
# engine's setup (src/precond/pc_isai.c, all cores), on the 2M-row built-in
# problems of issue 20: Tp and its stages, Ts, iterations, the floor ratio, for
# -p isai (default: --ilu exact, our level-scheduled IKJ ILU(0)), --ilu cusparse
# (cuSPARSE's csrilu02, the paper's routine), --ilu sweeps:3 (Chow-Patel) and
# --trisolve exact (the paper's "trisol" column).
# Anzt, Chow, Huckle, Dongarra, ScalA 2016: IDR(4), b = 1, x0 = 0, tol 1e-10.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_isai.sh [quick]
# Environment: BENCH_OUT=DIR (raw CSV rows and logs; default a temporary
# folder), REPEAT_GPU (3: Tp, Ts are the minimum over this many full runs),
# SIZE (128; quick: 64), VARIANTS (all: the four GPU variants above; isai: only
# -p isai, the one the CPU/GPU Tp column needs), ENGINE (cuda: the engine of the
# GPU rows; cpu only tests the plumbing without a GPU). About a minute on an
# H100 (the CPU runs dominate).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-isai.XXXXXX)}
REPEAT_GPU=${REPEAT_GPU:-3}
SIZE=${SIZE:-128}
VARIANTS=${VARIANTS:-all}
ENGINE=${ENGINE:-cuda}
[ "${1:-}" = quick ] && SIZE=64
case "$VARIANTS" in all | isai) ;; *) echo "bench_isai: VARIANTS=$VARIANTS: all or isai" >&2; exit 1 ;; esac
case "$ENGINE" in cuda | cpu) ;; *) echo "bench_isai: ENGINE=$ENGINE: cuda or cpu" >&2; exit 1 ;; esac
[[ $SIZE =~ ^[1-9][0-9]*$ ]] || { echo "bench_isai: SIZE=$SIZE: a grid side" >&2; exit 1; }
mkdir -p "$OUT"
: >"$OUT/runs.csv"
common=(-p isai -m idr --tol 1e-10 --rhs ones --x0 zero --format csv)

# run LABEL ENGINE REPEAT PROBLEM [ARGS...]: one CSV row, prefixed by the label
run() {
    local label=$1 engine=$2 repeat=$3 problem=$4
    shift 4
    # engine gpu is ENGINE; in a plumbing run (ENGINE=cpu) its rows are labelled
    # cpu-as-gpu, apart from the CPU engine's own
    local tag=$engine relabel=""
    if [ "$engine" = gpu ]; then
        engine=$ENGINE tag=$ENGINE
        [ "$ENGINE" = cpu ] && tag=cpu-as-gpu relabel='s/,"cpu",/,"cpu-as-gpu",/'
    fi
    local log="$OUT/${label//[^a-zA-Z0-9]/_}_${tag}_${problem//[^a-zA-Z0-9]/_}.csv"
    "$GPUSOLVE" -e "$engine" --repeat "$repeat" "${common[@]}" "$@" --generate "$problem" \
        >"$log" 2>"$log.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then
        echo "bench_isai: $label $engine $problem failed (exit $rc): $(head -c 300 "$log.err")" >&2
        return
    fi
    [ -s "$OUT/runs.csv" ] || sed -n 1p "$log" | sed 's/^/label,/' >"$OUT/runs.csv"
    sed -n 2p "$log" | sed "s/^/\"$label\",/; $relabel" >>"$OUT/runs.csv"
}

for problem in "poisson3d:$SIZE" "convdiff3d:$SIZE"; do
    run "isai" gpu "$REPEAT_GPU" "$problem"
    if [ "$VARIANTS" = all ]; then
        run "isai ilu=cusparse" gpu "$REPEAT_GPU" "$problem" --ilu cusparse
        run "isai ilu=sweeps:3" gpu "$REPEAT_GPU" "$problem" --ilu sweeps:3
        run "trisolve exact" gpu "$REPEAT_GPU" "$problem" --trisolve exact
    fi
    run "isai" cpu 1 "$problem"
done

python3 - "$OUT/runs.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def f(x, scale=1e3):
    try: return "%.2f" % (float(x) * scale)
    except (TypeError, ValueError): return "-"
cpu_tp = {r["matrix"]: float(r["tp_min_s"]) for r in rows if r["engine"] == "cpu"}
print("%-22s %-18s %-5s %9s %9s %6s %6s %7s  %s" % ("problem", "variant", "eng", "Tp ms",
      "Ts ms", "iters", "floor", "Tp cpu/", "stages (ms)"))
for r in rows:
    stages = ", ".join("%s %s" % (kv.split("=")[0], f(kv.split("=")[1]))
                       for kv in r["tp_stages"].split(";") if "=" in kv)
    speed = ""
    if r["engine"] != "cpu" and r["matrix"] in cpu_tp and r["label"] == "isai":
        speed = "%.0fx" % (cpu_tp[r["matrix"]] / float(r["tp_min_s"]))
    print("%-22s %-18s %-5s %9s %9s %6s %6s %7s  %s" % (r["matrix"], r["label"], r["engine"],
          f(r["tp_min_s"]), f(r["ts_min_s"]), r["iterations"],
          f(r["floor_ratio"], 1) if r.get("floor_ratio") not in ("", "0", None) else "-",
          speed, stages))
print("device: %s" % next((r["device"] for r in rows if r["engine"] == "cuda"), "none"))
PY
echo "raw rows: $OUT/runs.csv"
