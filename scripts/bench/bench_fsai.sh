#!/usr/bin/env bash
# bench_fsai.sh - FSAI set up on the GPU (cuda/precond/fsai*.cu) against the CPU
# engine's setup (src/precond/pc_fsai.c, all cores), and FSAI-PCG against CG+Jacobi:
# the paper's Tables 6 and 7 and Figure 3 (Bernaschi, Bisson, Fantozzi,
# Janna, SIAM J. Sci. Comput. 38(1) 2016), on the large built-in problems
# (2M rows; the anisotropic one at 262k rows, where Jacobi needs thousands of
# iterations) and on every SPD matrix of ../shared/matrices.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_fsai.sh [quick|tiny]
# Environment: BENCH_OUT=DIR (raw JSON lines, logs, tables, the plot; default
# a temporary folder), GS_MATRICES (../shared/matrices), REPEAT_GPU (3: the
# GPU runs' Tp, Ts are the minimum over this many full runs), REPEAT_CPU (1),
# ENGINE (cuda: the engine of the "GPU" column; cpu only tests the plumbing
# without a GPU), BUDGET (seconds; 0, the default, is no limit: a case not
# started by then is skipped and listed in $BENCH_OUT/skipped.txt), REAL_MAX
# (how many SPD matrices of the manifest, all by default).
# tiny: poisson3d:16 and aniso3d:16 and the first 3 SPD matrices (plumbing).
#
# Settings: CG, b = A*1, x0 = 0, tol 1e-8 (the paper's section 5); fsai with
# the CPU reference's defaults (tau 0.05, k 3, delta 0.0035; the paper's
# Table 5 rows are for its own matrices, which are not available here), plus
# a stronger setting on the 27-point problem, whose couplings (1/26) the
# default tau filters away entirely (G = diag(A)^-1/2 there).
# Output: $BENCH_OUT/{gpu,cpu}.jsonl, results.md (the tables of
# docs/results-fsai.md), fsai-fig3.png, and a short table on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATRICES=${GS_MATRICES:-$root/../shared/matrices}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-fsai.XXXXXX)}
REPEAT_GPU=${REPEAT_GPU:-3}
REPEAT_CPU=${REPEAT_CPU:-1}
ENGINE=${ENGINE:-cuda}
BUDGET=${BUDGET:-0}
REAL_MAX=${REAL_MAX:-100000}
case "$ENGINE" in cuda | cpu) ;; *) echo "bench_fsai: ENGINE=$ENGINE: cuda or cpu" >&2; exit 1 ;; esac
for v in BUDGET REAL_MAX REPEAT_GPU REPEAT_CPU; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench_fsai: $v=${!v}: a whole number" >&2; exit 1; }
done
[ -x "$GPUSOLVE" ] || { echo "bench_fsai: no $GPUSOLVE (make first)" >&2; exit 1; }
mkdir -p "$OUT"
: >"$OUT/gpu.jsonl"
: >"$OUT/cpu.jsonl"
: >"$OUT/errors.log"
: >"$OUT/skipped.txt"
SECONDS=0

# case label, generator spec, fsai options
cases=(
    "poisson3d:128|poisson3d:128|"
    "poisson3d27:128|poisson3d27:128|"
    "poisson3d27:128 tau=0.01 k=2|poisson3d27:128|--tau 0.01 --k 2"
    "aniso3d:64|aniso3d:64|"
)
case "${1:-}" in
    quick) cases=("poisson3d:64|poisson3d:64|" "poisson3d:128|poisson3d:128|") ;;
    tiny) cases=("poisson3d:16|poisson3d:16|" "aniso3d:16|aniso3d:16|")
          [ "$REAL_MAX" -gt 3 ] && REAL_MAX=3 ;;
    "") ;;
    *) echo "bench_fsai: '$1': quick, tiny or nothing" >&2; exit 1 ;;
esac

# run SIDE REPEAT LABEL ARGS...: JSON lines tagged with the case label, into
# SIDE.jsonl (gpu: the ENGINE column, cpu: the CPU engine's)
run() {
    local side=$1 repeat=$2 label=$3 engine=cpu
    shift 3
    [ "$side" = gpu ] && engine=$ENGINE
    "$GPUSOLVE" -e "$engine" -m cg --rhs ax1 --repeat "$repeat" --format json "$@" \
        2>>"$OUT/errors.log" | sed "s/^{/{\"case\": \"$label\", /" >>"$OUT/$side.jsonl"
}

# spent LABEL: true (and the case listed as skipped) once the budget is spent
spent() {
    [ "$BUDGET" -gt 0 ] && [ "$SECONDS" -ge "$BUDGET" ] || return 1
    echo "$1 (budget of ${BUDGET}s spent at ${SECONDS}s)" >>"$OUT/skipped.txt"
}

run_case() {
    local label spec opts
    IFS='|' read -r label spec opts <<<"$1"
    spent "$label" && return
    echo "== $label" >&2
    # shellcheck disable=SC2086
    run gpu "$REPEAT_GPU" "$label" --generate "$spec" -p fsai $opts
    run gpu "$REPEAT_GPU" "$label" --generate "$spec" -p jacobi
    # shellcheck disable=SC2086
    run cpu "$REPEAT_CPU" "$label" --generate "$spec" -p fsai $opts
    run cpu "$REPEAT_CPU" "$label" --generate "$spec" -p jacobi
}

run_real() {
    [ -f "$MATRICES/MANIFEST.tsv" ] || return 0
    spent "real matrices" && return
    local spd files=() m
    mapfile -t spd < <(awk -F'\t' 'NR > 1 && $7 == "SPD" && $6 != "complex" {print $1}' "$MATRICES/MANIFEST.tsv")
    for m in "${spd[@]:0:REAL_MAX}"; do files+=("$MATRICES/$m.mtx"); done
    echo "== ${#files[@]} SPD matrices of $MATRICES" >&2
    run gpu "$REPEAT_GPU" real -p fsai "${files[@]}"
    run gpu "$REPEAT_GPU" real -p jacobi "${files[@]}"
    run cpu 3 real -p fsai "${files[@]}"
    run cpu 3 real -p jacobi "${files[@]}"
}

# the largest problem first, then the real matrices, then the rest
run_case "${cases[0]}"
[ "${1:-}" != quick ] && run_real
for c in "${cases[@]:1}"; do run_case "$c"; done

python3 "$here/../tables/fsai_tables.py" "$OUT" >"$OUT/summary.txt" || echo "bench_fsai.sh: fsai_tables.py failed" >&2
cat "$OUT/summary.txt"
[ -s "$OUT/skipped.txt" ] && { echo "bench_fsai.sh: skipped (budget):" >&2; cat "$OUT/skipped.txt" >&2; }
exit 0
