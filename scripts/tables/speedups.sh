#!/usr/bin/env bash
# speedups.sh - every GPU-versus-CPU speedup that docs/ and README quote, remeasured in one
# device call (issue 34 item 5: the CPU engine they divide by has changed): the runs behind
# each figure, the GPU and the CPU engine in the same call, through the scripts that made
# them, the most wanted first, within BUDGET seconds of wall time. A part the budget does not
# reach is skipped and says so; a part cut by the budget keeps what it ran.
#
#   GPUSOLVE=build/gpusolve GS_MATRICES=../shared/matrices OUT=DIR scripts/tables/speedups.sh
#   ENGINE=cpu SET=tiny BUDGET=150 OUT=/tmp/s scripts/tables/speedups.sh    (plumbing, no GPU)
#
# Parts, in this order (expected seconds on one H100/H200 with 16 host cores; what it feeds):
#   batch-jacobi  scripts/batch.py --engine both --precond jacobi --time-limit 5 over
#                 MANIFEST.tsv (30): results-batch.md and perf-notes.md "GPU Ts below the CPU
#                 engine's on N of M", the speedup picture (scripts/plots.py speedup)
#   fsai          scripts/bench/bench_fsai.sh (110): results-fsai.md Tables 6, 7, Figure 3,
#                 the summary's ratios; perf-notes.md FSAI
#   mic-t3        scripts/tables/mic_tables.sh PARTS="t23 t3cpu" (150): results-mic.md Table 3
#                 (and Table 2, the same GPU runs)
#   spai-t1       scripts/tables/spai_tables.sh PARTS=t1g (40): results-spai.md Table I
#   isai          scripts/bench/bench_isai.sh VARIANTS=isai (30): results-isai.md "Setup
#                 against the CPU", perf-notes.md ISAI
#   batch-fsai, batch-spai  as batch-jacobi, fsai and spai (30, 60): the speedup picture's
#                 other two preconditioners
#   mic-t1        mic_tables.sh PARTS=t1 (60): results-mic.md Table 1's CPU columns (into the
#                 same folder as mic-t3: one tables.md)
#   spai-bench    scripts/bench/bench_spai.sh (60): results-spai.md "Reading the results" and
#                 perf-notes.md SPAI (Tp with the run's full report); needs the GPU engine
#   mic-t1big     mic_tables.sh PARTS=t1big (150+): Table 1's three largest grids
# Environment: GPUSOLVE (build/gpusolve), GS_MATRICES (../shared/matrices: the .mtx files and
# MANIFEST.tsv), OUT (the output folder; SPEEDUPS_OUT wins; default a temporary folder),
# BUDGET (500 s: a part is started only while its least useful time is left, and never runs
# past the budget), ENGINE (cuda; cpu runs every GPU column on the CPU engine, to test the
# plumbing), SET (full | tiny: small problems and a few matrices), PARTS (the parts to run,
# default all, always in the order above). OMP_NUM_THREADS is left as it is (the program's
# own default: all cores, threads by work).
#
# Out: $OUT/speedups.md (the machine, the parts' table, each part's markdown), speedup.png
# (batch: CPU / GPU time of Tp, Ts, Tt per matrix), fsai-fig3.png, speedups-raw.tar.xz (every
# part's raw output, logs and tables; the work folder is removed once it is packed, unless
# KEEP_WORK=1), speedups.log (the parts' stderr). Summary table on stdout at the end.
# shellcheck disable=SC2317  # the parts' functions run through timeout bash -c, which shellcheck cannot follow
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATRICES=${GS_MATRICES:-$root/../shared/matrices}
OUT=${SPEEDUPS_OUT:-${OUT:-$(mktemp -d /tmp/speedups.XXXXXX)}}
BUDGET=${BUDGET:-500}
ENGINE=${ENGINE:-cuda}
SET=${SET:-full}
ALL_PARTS="batch-jacobi fsai mic-t3 spai-t1 isai batch-fsai batch-spai mic-t1 spai-bench mic-t1big"
PARTS=${PARTS:-$ALL_PARTS}

die() { echo "speedups: $*" >&2; exit 1; }
[[ $BUDGET =~ ^[0-9]+$ ]] || die "BUDGET=$BUDGET: a whole number of seconds"
case "$ENGINE" in cuda | cpu) ;; *) die "ENGINE=$ENGINE: cuda or cpu" ;; esac
case "$SET" in full | tiny) ;; *) die "SET=$SET: full or tiny" ;; esac
for p in $PARTS; do
    [[ " $ALL_PARTS " == *" $p "* ]] || die "PARTS: no part '$p' (the parts: $ALL_PARTS)"
done
[ -x "$GPUSOLVE" ] || die "no executable $GPUSOLVE (make first, or set GPUSOLVE)"
[ -f "$MATRICES/MANIFEST.tsv" ] || die "no $MATRICES/MANIFEST.tsv (set GS_MATRICES to the shared matrices' folder)"
MATRICES=$(cd "$MATRICES" && pwd)
GPUSOLVE=$(cd "$(dirname "$GPUSOLVE")" && pwd)/$(basename "$GPUSOLVE")
mkdir -p "$OUT" || die "cannot make $OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
LOG=$OUT/speedups.log
mkdir -p "$WORK"
: >"$LOG"
: >"$WORK/parts.tsv"
export GPUSOLVE GS_MATRICES=$MATRICES
SECONDS=0

if [ "$ENGINE" = cuda ]; then # a missing GPU should cost seconds, not the budget
    msg=$("$GPUSOLVE" -e cuda -q --generate poisson3d:8 2>&1) ||
        die "the CUDA engine does not run here (ENGINE=cpu tests the plumbing): ${msg:0:300}"
fi
{
    echo "date=$(date -u +%FT%TZ) commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
    echo "gpusolve=$("$GPUSOLVE" --version 2>&1 | head -1) engine=$ENGINE set=$SET budget=$BUDGET"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //') cores=$(nproc)"
    echo "omp_num_threads=${OMP_NUM_THREADS:-unset} omp_wait_policy=${OMP_WAIT_POLICY:-unset}"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} >"$WORK/machine.txt" 2>&1

# The small set of SET=tiny (files of the shared folder that exist)
tiny_files() {
    local m
    for m in 1138_bus bcsstk01 nos4 mesh1e1 bcsstm25 sherman5 orsirr_1 fs_541_1; do
        [ -f "$MATRICES/$m.mtx" ] && printf '%s\n' "$MATRICES/$m.mtx"
    done
}

# batch PRECOND: one batch.py pass, both engines, over the set
batch() {
    local pc=$1 engine=both inputs=("$MATRICES/MANIFEST.tsv")
    [ "$ENGINE" = cpu ] && engine=cpu
    [ "$SET" = tiny ] && mapfile -t inputs < <(tiny_files)
    mkdir -p "$WORK/batch"
    python3 "$root/scripts/batch.py" --gpusolve "$GPUSOLVE" --engine "$engine" --precond "$pc" \
        --time-limit 5 --out "$WORK/batch/batch_$pc.csv" "${inputs[@]}" >"$WORK/batch/summary_$pc.txt"
}

mic() { # mic PARTS: mic_tables.sh into one folder; the skipped lists of its calls kept
    local left=$1 parts=$2 d=$WORK/mic
    mkdir -p "$d"
    [ -f "$d/skipped.txt" ] && cat "$d/skipped.txt" >>"$d/skipped.before"
    [ -f "$d/setup.txt" ] && cat "$d/setup.txt" >>"$d/setup.before"
    local inner=$((left - 40)) timeout=150
    [ "$inner" -lt 1 ] && inner=1
    [ $((left - 10)) -lt "$timeout" ] && timeout=$((left - 10))
    MIC_TABLES_OUT=$d ENGINE=$ENGINE SET=$SET BUDGET=$inner TIMEOUT=$timeout PARTS=$parts \
        bash "$here/mic_tables.sh"
    local rc=$?
    local f
    for f in skipped setup; do # this call's lines after the earlier calls'
        [ -f "$d/$f.before" ] || continue
        cat "$d/$f.before" "$d/$f.txt" >"$d/$f.all" 2>/dev/null
        mv "$d/$f.all" "$d/$f.txt" && rm -f "$d/$f.before"
    done
    return "$rc"
}

# run_part NAME LEFT: the commands of one part, given LEFT seconds (its hard limit)
run_part() {
    local name=$1 left=$2 inner=$(($2 - 40))
    [ "$inner" -lt 1 ] && inner=1
    case "$name" in
        batch-jacobi) batch jacobi ;;
        batch-fsai) batch fsai ;;
        batch-spai) batch spai ;;
        fsai)
            local arg=()
            [ "$SET" = tiny ] && arg=(tiny)
            BENCH_OUT=$WORK/fsai ENGINE=$ENGINE BUDGET=$inner bash "$root/scripts/bench/bench_fsai.sh" "${arg[@]}" \
                >"$WORK/fsai.stdout" ;;
        mic-t3) mic "$left" "t23 t3cpu" ;;
        mic-t1) mic "$left" t1 ;;
        mic-t1big) mic "$left" t1big ;;
        spai-t1)
            local size=128
            [ "$SET" = tiny ] && size=16
            SPAI_TABLES_OUT=$WORK/spai ENGINE=$ENGINE SET=$SET SIZE=$size BUDGET=$((left - 30)) PARTS=t1g \
                bash "$here/spai_tables.sh" >"$WORK/spai.stdout" ;;
        isai)
            local size=128
            [ "$SET" = tiny ] && size=16
            BENCH_OUT=$WORK/isai ENGINE=$ENGINE VARIANTS=isai SIZE=$size bash "$root/scripts/bench/bench_isai.sh" \
                >"$WORK/isai.stdout" ;;
        spai-bench)
            local arg=()
            [ "$SET" = tiny ] && arg=(quick)
            BENCH_OUT=$WORK/spai-bench bash "$root/scripts/bench/bench_spai.sh" "${arg[@]}" >"$WORK/spai-bench.md" ;;
    esac
}

# Per part: expected seconds, the least time worth starting it with, what it remeasures
declare -A EXPECT=([batch-jacobi]=30 [fsai]=110 [mic-t3]=150 [spai-t1]=40 [isai]=30 [batch-fsai]=30
                   [batch-spai]=60 [mic-t1]=60 [spai-bench]=60 [mic-t1big]=150)
declare -A LEAST=([batch-jacobi]=30 [fsai]=60 [mic-t3]=60 [spai-t1]=30 [isai]=30 [batch-fsai]=30
                  [batch-spai]=45 [mic-t1]=50 [spai-bench]=60 [mic-t1big]=80)
declare -A WHAT=([batch-jacobi]="results-batch, perf-notes: GPU Ts below CPU's on N of M; speedup.png"
                 [fsai]="results-fsai Tables 6, 7, Fig. 3, summary; perf-notes FSAI"
                 [mic-t3]="results-mic Table 3 (and 2)" [spai-t1]="results-spai Table I"
                 [isai]="results-isai setup against the CPU; perf-notes ISAI"
                 [batch-fsai]="speedup.png (fsai)" [batch-spai]="speedup.png (spai)"
                 [mic-t1]="results-mic Table 1 CPU columns"
                 [spai-bench]="results-spai reading, perf-notes SPAI (bench_spai.sh)"
                 [mic-t1big]="results-mic Table 1, 67M-166M rows")

for name in $ALL_PARTS; do
    [[ " $PARTS " == *" $name "* ]] || continue
    left=$((BUDGET - SECONDS))
    status=""
    if [ "$name" = spai-bench ] && [ "$ENGINE" = cpu ]; then
        status="skipped (bench_spai.sh needs the GPU engine)"
    elif [ "$left" -lt "${LEAST[$name]}" ]; then
        status="skipped (budget: ${left}s left, needs ${LEAST[$name]}s)"
    fi
    if [ -n "$status" ]; then
        echo "speedups: $name $status" >&2
        printf '%s\t%s\t0\t%s\t%s\n' "$name" "$status" "${EXPECT[$name]}" "${WHAT[$name]}" >>"$WORK/parts.tsv"
        continue
    fi
    echo "speedups: $name (expected ${EXPECT[$name]}s, ${left}s of budget left)" >&2
    start=$SECONDS
    # the part and everything it starts in their own group, killed whole at the budget's end
    { echo "=== $name"; } >>"$LOG"
    timeout -k 10 "$left" bash -c "$(declare -f die tiny_files batch mic run_part); $(declare -p here root WORK MATRICES ENGINE SET GPUSOLVE); run_part \"\$@\"" \
        run_part "$name" "$left" >>"$LOG" 2>&1
    rc=$?
    case $rc in
        0) status="done" ;;
        124 | 137) status="cut at the budget's end (partial)" ;;
        *) status="failed (exit $rc, see speedups.log)" ;;
    esac
    echo "speedups: $name $status in $((SECONDS - start))s" >&2
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" "${EXPECT[$name]}" "${WHAT[$name]}" >>"$WORK/parts.tsv"
done
runs_s=$SECONDS

# Formatters (again where a cut part did not reach its own), then one markdown file
fmt() { timeout 120 "$@" 2>>"$LOG"; }
[ -s "$WORK/fsai/gpu.jsonl" ] && [ ! -s "$WORK/fsai/results.md" ] && fmt python3 "$here/fsai_tables.py" "$WORK/fsai" >/dev/null
[ -d "$WORK/mic/raw" ] && fmt python3 "$here/mic_tables.py" "$WORK/mic" >"$WORK/mic/tables.md"
[ -d "$WORK/spai/raw" ] && [ ! -s "$WORK/spai/tables.md" ] && fmt python3 "$here/spai_tables.py" "$WORK/spai" >/dev/null
csvs=()
for pc in jacobi fsai spai; do [ -s "$WORK/batch/batch_$pc.csv" ] && csvs+=("$WORK/batch/batch_$pc.csv"); done
if [ ${#csvs[@]} -gt 0 ]; then
    fmt python3 "$here/speedups.py" join "$WORK/batch/batch_both.csv" "${csvs[@]}"
    fmt python3 "$here/speedups.py" batch "$WORK/batch/batch_both.csv" >"$WORK/batch/speedups.md"
    fmt python3 "$root/scripts/plots.py" speedup "$WORK/batch/batch_both.csv" --out "$WORK/batch/plots" >>"$LOG"
fi
[ -s "$WORK/isai/runs.csv" ] && fmt python3 "$here/speedups.py" isai "$WORK/isai/runs.csv" >"$WORK/isai/speedups.md"

# section TITLE FILE [NOTE]: a part's markdown, or a line saying it is absent
section() {
    echo
    echo "## $1"
    echo
    [ -n "${3:-}" ] && { echo "$3"; echo; }
    if [ -s "$2" ]; then cat "$2"; else echo "(no output: the part did not run or made no rows)"; fi
}
{
    echo "# GPU against CPU engine: the speedups remeasured (scripts/tables/speedups.sh)"
    echo
    echo '```'
    cat "$WORK/machine.txt"
    echo '```'
    echo
    python3 "$here/speedups.py" parts "$WORK/parts.tsv"
    echo
    echo "Runs: ${runs_s}s of a ${BUDGET}s budget."
    section "Batch over the shared set, --engine both (batch.py)" "$WORK/batch/speedups.md"
    section "FSAI (bench_fsai.sh, fsai_tables.py)" "$WORK/fsai/results.md" "$(sed 's/^/skipped: /' "$WORK/fsai/skipped.txt" 2>/dev/null)"
    section "MIC (mic_tables.sh, mic_tables.py)" "$WORK/mic/tables.md"
    section "SPAI Table I (spai_tables.sh, spai_tables.py)" "$WORK/spai/tables.md"
    section "ISAI setup against the CPU (bench_isai.sh)" "$WORK/isai/speedups.md"
    section "SPAI with the full report (bench_spai.sh)" "$WORK/spai-bench.md"
} >"$OUT/speedups.md"

[ -f "$WORK/batch/plots/speedup.png" ] && cp "$WORK/batch/plots/speedup.png" "$OUT/speedup.png"
[ -f "$WORK/fsai/fsai-fig3.png" ] && cp "$WORK/fsai/fsai-fig3.png" "$OUT/fsai-fig3.png"
parts_tsv=$(cat "$WORK/parts.tsv")
if tar -C "$OUT" -cJf "$OUT/speedups-raw.tar.xz" work; then
    [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
else
    echo "speedups: packing $WORK failed; left in place" >&2
fi

echo
printf '%-13s %-48s %7s %9s\n' part status seconds expected
while IFS=$'\t' read -r name status secs expect _; do
    printf '%-13s %-48s %7s %9s\n' "$name" "${status:0:48}" "$secs" "$expect"
done <<<"$parts_tsv"
echo "runs ${runs_s}s, all ${SECONDS}s (budget ${BUDGET}s); out: $OUT/speedups.md, speedups-raw.tar.xz"
exit 0
