#!/usr/bin/env bash
# bench_fsai.sh - FSAI set up on the GPU (cuda/precond/fsai*.cu) against the CPU
# engine's setup (src/precond/pc_fsai.c, all cores), and FSAI-PCG against CG+Jacobi:
# the paper's Tables 6 and 7 and Figure 3 (Bernaschi, Bisson, Fantozzi,
# Janna, SIAM J. Sci. Comput. 38(1) 2016), on the large built-in problems
# (2M rows; the anisotropic one at 262k rows, where Jacobi needs thousands of
# iterations) and on every SPD matrix of ../shared/matrices.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_fsai.sh [quick]
# Environment: BENCH_OUT=DIR (raw JSON lines, logs, tables, the plot; default
# a temporary folder), GS_MATRICES (../shared/matrices), REPEAT_GPU (3: the
# GPU runs' Tp, Ts are the minimum over this many full runs), REPEAT_CPU (1).
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
mkdir -p "$OUT"
: >"$OUT/gpu.jsonl"
: >"$OUT/cpu.jsonl"
: >"$OUT/errors.log"

# case label, generator spec, fsai options
cases=(
    "poisson3d:128|poisson3d:128|"
    "poisson3d27:128|poisson3d27:128|"
    "poisson3d27:128 tau=0.01 k=2|poisson3d27:128|--tau 0.01 --k 2"
    "aniso3d:64|aniso3d:64|"
)
[ "${1:-}" = quick ] && cases=("poisson3d:64|poisson3d:64|" "poisson3d:128|poisson3d:128|")

# run ENGINE REPEAT LABEL ARGS...: JSON lines tagged with the case label
run() {
    local engine=$1 repeat=$2 label=$3
    shift 3
    "$GPUSOLVE" -e "$engine" -m cg --rhs ax1 --repeat "$repeat" --format json "$@" \
        2>>"$OUT/errors.log" | sed "s/^{/{\"case\": \"$label\", /" >>"$OUT/$([ "$engine" = cuda ] && echo gpu || echo cpu).jsonl"
}

run_case() {
    local label spec opts
    IFS='|' read -r label spec opts <<<"$1"
    echo "== $label" >&2
    # shellcheck disable=SC2086
    run cuda "$REPEAT_GPU" "$label" --generate "$spec" -p fsai $opts
    run cuda "$REPEAT_GPU" "$label" --generate "$spec" -p jacobi
    # shellcheck disable=SC2086
    run cpu "$REPEAT_CPU" "$label" --generate "$spec" -p fsai $opts
    run cpu "$REPEAT_CPU" "$label" --generate "$spec" -p jacobi
}

run_real() {
    [ -f "$MATRICES/MANIFEST.tsv" ] || return 0
    local spd files=() m
    mapfile -t spd < <(awk -F'\t' 'NR > 1 && $7 == "SPD" && $6 != "complex" {print $1}' "$MATRICES/MANIFEST.tsv")
    for m in "${spd[@]}"; do files+=("$MATRICES/$m.mtx"); done
    echo "== ${#files[@]} SPD matrices of $MATRICES" >&2
    run cuda "$REPEAT_GPU" real -p fsai "${files[@]}"
    run cuda "$REPEAT_GPU" real -p jacobi "${files[@]}"
    run cpu 3 real -p fsai "${files[@]}"
    run cpu 3 real -p jacobi "${files[@]}"
}

# the largest problem first, then the real matrices, then the rest
run_case "${cases[0]}"
[ "${1:-}" != quick ] && run_real
for c in "${cases[@]:1}"; do run_case "$c"; done

python3 "$here/../tables/fsai_tables.py" "$OUT" >"$OUT/summary.txt" || echo "bench_fsai.sh: fsai_tables.py failed" >&2
cat "$OUT/summary.txt"
