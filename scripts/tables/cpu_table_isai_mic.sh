#!/usr/bin/env bash
# cpu_table_isai_mic.sh - the CPU-engine tables of docs/results-cpu-isai-mic.md:
# isai (IDR(4), b = 1, x0 = 0, tol 1e-10: the ScalA 2016 paper's Table II
# settings) against jacobi and against ILU(0) with exact triangular solves
# (--trisolve exact, the paper's "trisol"), on every real square matrix of
# the MANIFEST; mic (CG, default b = 1, tol 1e-8) with omega = 1 (MIC) and
# omega = 0 (IC(0)) against jacobi on every SPD one, plus the symmetric
# non-SPD ones to show how they are refused.
#
# Usage: scripts/tables/cpu_table_isai_mic.sh [OUTPUT.md]   (from the repository root)
# Env:   GPUSOLVE (default build/gpusolve), GS_MATRICES (default
#        ../shared/matrices), OMP_NUM_THREADS (default 2), REPEAT (default 3:
#        the table shows the minimum Tp and Ts of that many runs),
#        OMP_WAIT_POLICY (default PASSIVE: on a loaded 2-core machine spinning
#        OpenMP threads wait for descheduled ones, and times jump 100x).
set -u
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/../lib/lib_bench.sh"
out=${1:-docs/results-cpu-isai-mic.md}
bin=${GPUSOLVE:-build/gpusolve}
dir=${GS_MATRICES:-../shared/matrices}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
repeat=${REPEAT:-3}
[ -x "$bin" ] || { echo "no $bin: make CUDA=0 build/gpusolve" >&2; exit 1; }
[ -r "$dir/MANIFEST.tsv" ] || { echo "no $dir/MANIFEST.tsv" >&2; exit 1; }

# One run -> "iterations|Tp|Ts|converged" or "-|-|-|failed: <message>".
run() {
    local csv err rc
    err=$(mktemp)
    csv=$(timeout 600 "$bin" -e cpu --format csv --repeat "$repeat" "$@" 2>"$err"); rc=$?
    CSV="$csv" table_python "$rc" "$err" <<'EOF'
import csv, io, os, re, sys
rc, errfile = int(sys.argv[1]), sys.argv[2]
rows = list(csv.DictReader(io.StringIO(os.environ["CSV"])))
msg = open(errfile).read().strip().splitlines()
if rows:
    r = rows[-1]
    conv = "yes" if r["converged"] == "yes" else r["reason"]
    print(f'{r["iterations"]}|{float(r["tp_min_s"]):.4f}|{float(r["ts_min_s"]):.4f}|{conv}')
else:
    text = msg[-1] if msg else f"exit {rc}"
    text = program_message(text)
    text = re.sub(r" \((A is not|--scale no|the incomplete|the pivot).*$", "", text)
    print("-|-|-|failed: " + text.replace("|", "/"))
EOF
    rm -f "$err"
}

field() { cut -d'|' -f"$1" <<<"$2"; }

# Iterations, with the reason when the run did not converge.
its() {
    local c; c=$(field 4 "$1")
    case "$c" in yes) field 1 "$1" ;; failed*) echo "-" ;; *) echo "$(field 1 "$1") ($c)" ;; esac
}

# Tally for the summary: set up / converged / fewer iterations than jacobi
# (or converged where jacobi did not).
declare -A setup_ok conv_ok fewer
tally() { # key jacobi-result result
    local key=$1 j=$2 r=$3
    case "$(field 4 "$r")" in failed*) return ;; esac
    setup_ok[$key]=$(( ${setup_ok[$key]:-0} + 1 ))
    [ "$(field 4 "$r")" = yes ] || return
    conv_ok[$key]=$(( ${conv_ok[$key]:-0} + 1 ))
    if [ "$(field 4 "$j")" != yes ] || [ "$(field 1 "$r")" -lt "$(field 1 "$j")" ]; then
        fewer[$key]=$(( ${fewer[$key]:-0} + 1 ))
    fi
}
summary() { # key label count
    echo "- $2: set up on ${setup_ok[$1]:-0} of $3, converged on ${conv_ok[$1]:-0},"
    echo "  fewer iterations than jacobi (or converged where jacobi did not) on ${fewer[$1]:-0}."
}

{
echo "# CPU results: isai and mic on the shared SuiteSparse matrices"
echo
echo "Made by \`scripts/tables/cpu_table_isai_mic.sh\` on $(date -u +%Y-%m-%d) with"
echo "\`OMP_NUM_THREADS=$OMP_NUM_THREADS OMP_WAIT_POLICY=$OMP_WAIT_POLICY $bin -e cpu --format csv"
echo "--repeat $repeat\` ($(nproc) cores, shared with other jobs: timings are indicative)."
echo "Tp = setup (transfer of A included), Ts = solve, both the minimum over the runs, in"
echo "seconds; \"it\" = iterations (10000 = the cap). A failed setup shows the program's"
echo "message."
echo
echo "## isai: ILU(0) + ISAI(1), IDR(4), b = 1, x0 = 0, tol 1e-10"
echo
echo "Parameters: \`-p isai -m idr --tol 1e-10\` (defaults: \`--isai-power 1 --isai-sweeps 0"
echo "--scale yes --trisolve isai\`); trisol = the same with \`--trisolve exact\`; jacobi ="
echo "\`-p jacobi -m idr --tol 1e-10\`. Every real (non-complex) matrix of the MANIFEST."
echo
echo "| matrix | kind | n | nnz | jacobi it | jacobi Ts | isai it | isai Tp | isai Ts | isai converged | trisol it | trisol Tp | trisol Ts | trisol converged |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"
while IFS=$'\t' read -r name rows cols nnz sym fieldname kind rest; do
    m="$dir/$name.mtx"
    j=$(run -p jacobi -m idr --tol 1e-10 "$m")
    i=$(run -p isai -m idr --tol 1e-10 "$m")
    t=$(run -p isai --trisolve exact -m idr --tol 1e-10 "$m")
    tally isai "$j" "$i"; tally trisol "$j" "$t"; n_isai=$(( ${n_isai:-0} + 1 ))
    echo "| $name | $kind | $rows | $nnz | $(its "$j") | $(field 3 "$j") | $(field 1 "$i") | $(field 2 "$i") | $(field 3 "$i") | $(field 4 "$i") | $(field 1 "$t") | $(field 2 "$t") | $(field 3 "$t") | $(field 4 "$t") |"
done < <(table_real_matrices "$dir/MANIFEST.tsv")
echo
summary isai "isai (ISAI(1))" "$n_isai"
summary trisol "trisol (exact solves)" "$n_isai"

echo
echo "## mic: M = L D L^T, CG, b = 1, x0 = 0, tol 1e-8"
echo
echo "Parameters: \`-p mic -m cg\` (defaults \`--omega 1 --mic-shift 0\`: MIC(0), error on a"
echo "non-positive pivot); IC(0) = \`-p mic --omega 0 -m cg\`; jacobi = \`-p jacobi -m cg\`."
echo "Every matrix of kind SPD, then the symmetric matrices of other kinds (not SPD or"
echo "unknown: mic refuses or breaks down, with the row named)."
echo
echo "| matrix | kind | n | nnz | jacobi it | jacobi Ts | MIC it | MIC Tp | MIC Ts | MIC converged | IC(0) it | IC(0) Tp | IC(0) Ts | IC(0) converged |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"
for pass in SPD other; do
    while IFS=$'\t' read -r name rows cols nnz sym fieldname kind rest; do
        if [ $pass = SPD ]; then [ "$kind" = SPD ] || continue
        else [ "$kind" != SPD ] && [ "$sym" = symmetric ] || continue; fi
        m="$dir/$name.mtx"
        j=$(run -p jacobi -m cg "$m")
        i=$(run -p mic -m cg "$m")
        t=$(run -p mic --omega 0 -m cg "$m")
        if [ $pass = SPD ]; then
            tally mic "$j" "$i"; tally ic0 "$j" "$t"; n_spd=$(( ${n_spd:-0} + 1 ))
        fi
        echo "| $name | $kind | $rows | $nnz | $(its "$j") | $(field 3 "$j") | $(field 1 "$i") | $(field 2 "$i") | $(field 3 "$i") | $(field 4 "$i") | $(field 1 "$t") | $(field 2 "$t") | $(field 3 "$t") | $(field 4 "$t") |"
    done < <(table_real_matrices "$dir/MANIFEST.tsv")
done
echo
echo "On the SPD matrices:"
echo
summary mic "MIC(0) (omega = 1)" "$n_spd"
summary ic0 "IC(0) (omega = 0)" "$n_spd"
} >"$out"
echo "wrote $out"
