#!/usr/bin/env bash
# mic_tables.sh - the runs behind docs/results-mic.md (issue 21 item 8): the MIC paper's
# Tables 1-3 (../shared/papers/mic-pcg-heat3d.txt) in one call on the GPU machine, within
# BUDGET seconds; parts not started by then are listed as skipped (and say so in the
# tables). Then scripts/tables/mic_tables.py writes $OUT/tables.md (the markdown for
# docs/results-mic.md, the paper's C2050 figures beside ours).
#
#   MIC_TABLES_OUT=DIR scripts/tables/mic_tables.sh                      (GPU machine, ~240 s)
#   MIC_TABLES_OUT=DIR ENGINE=cpu SET=tiny scripts/tables/mic_tables.sh  (plumbing, ~20 s)
#
# Order of the runs (the most wanted first, so that a short budget still gives them):
#   t23   Tables 2 and 3, GPU: -p mic and -p ssor-ai on heat3d:M21, M24, M22, M25, M23
#         (smallest first), the full 150 Crank-Nicolson steps to t = 0.1 (docs/heat3d.md):
#         the errors at the five points and ER, and Tp, Ts, Tt.
#   t1    Table 1, the grids up to 24M rows, smallest first: one forward + backward
#         substitution on the same MIC factors, as mic's setup times it (first run, then
#         the best of two more: docs/mic.md): --trisolve auto (fbs_blocks_ms, fbs_syncfree_ms,
#         fbs_levels_ms; ours is the one auto keeps), --trisolve exact (fbs_exact_ms,
#         cuSPARSE's SpSV) and the CPU engine (fbs_cpu_ms, serial substitutions); one
#         time step of the heat3d matrix of that grid (--steps 1 --dt 1/1500, --maxit 1:
#         only the setup matters, so the runs end "not converged", exit 2, by design).
#   t3cpu Table 3, CPU engine (all cores: OMP_NUM_THREADS unset), mic and ssor-ai on
#         M21, M24, M22, M25, M23 with fewer steps of the same dt (CPU_STEPS, by model)
#         and --time-limit CPU_LIMIT; the formatter extrapolates the CPU's Ts to 150 steps
#         (Ts x 150 / steps: every step solves the same kind of system from the previous
#         one, the iterations per step are reported to show it) and says so.
#   t1big Table 1's three largest grids (67M, 74M, 166M rows), if budget and memory allow.
#
# Environment: MIC_TABLES_OUT (output folder; default $OUT, else a temporary folder),
# GPUSOLVE (build/gpusolve), ENGINE (cuda; cpu only to test the plumbing), SET (full |
# tiny: small grids under the same names), BUDGET (240 s), TIMEOUT (150 s: the most one
# process may take; also never past the budget left plus 30 s), CPU_LIMIT (20 s:
# --time-limit of a CPU-engine heat3d run), CPU_STEPS ("M21=20 M24=8 M22=3 M25=2 M23=1"),
# PARTS (which of t23 t1 t3cpu t1big run, always in the order above; default all four;
# a second call into the same folder with other PARTS adds to the same tables.md).
#
# Every process runs under timeout and writes RAW/TAG.jsonl (its JSON line), TAG.err,
# TAG.rc (124: timed out; 3: runtime failure such as out of memory, named in TAG.err).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${MIC_TABLES_OUT:-${OUT:-$(mktemp -d /tmp/mic-tables.XXXXXX)}}
ENGINE=${ENGINE:-cuda}
SET=${SET:-full}
BUDGET=${BUDGET:-240}
TIMEOUT=${TIMEOUT:-150}
CPU_LIMIT=${CPU_LIMIT:-20}
CPU_STEPS=${CPU_STEPS:-M21=20 M24=8 M22=3 M25=2 M23=1}
PARTS=${PARTS:-t23 t1 t3cpu t1big}
DT=6.666666666666667e-4 # 1/1500: docs/heat3d.md's default step (150 steps to t = 0.1)
RAW=$OUT/raw
case "$ENGINE" in cuda | cpu) ;; *) echo "mic_tables: ENGINE=$ENGINE: cuda or cpu" >&2; exit 1 ;; esac
case "$SET" in full | tiny) ;; *) echo "mic_tables: SET=$SET: full or tiny" >&2; exit 1 ;; esac
for p in $PARTS; do
    case "$p" in t23 | t1 | t3cpu | t1big) ;; *) echo "mic_tables: PARTS: no part '$p' (t23 t1 t3cpu t1big)" >&2; exit 1 ;; esac
done
# part NAME: true when PARTS names it
part() { [[ " $PARTS " == *" $1 "* ]]; }
for v in BUDGET TIMEOUT CPU_LIMIT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "mic_tables: $v=${!v}: a whole number of seconds" >&2; exit 1; }
done
[ -x "$GPUSOLVE" ] || { echo "mic_tables: no $GPUSOLVE (make first)" >&2; exit 1; }
mkdir -p "$RAW"
: >"$OUT/skipped.txt"
SECONDS=0

# The paper's models and grids, and what runs under their names.
MODELS=(M21 M24 M22 M25 M23)
GRIDS=(128x128x480 480x480x80 800x800x30 128x128x1440)
BIG=(512x512x256 480x480x320 1440x1440x80)
declare -A SPEC
for m in "${MODELS[@]}"; do SPEC[$m]=$m; done
for g in "${GRIDS[@]}" "${BIG[@]}"; do SPEC[$g]=$g; done
if [ "$SET" = tiny ]; then # the same names, small grids of the same shapes' kind
    SPEC=([M21]=10x10x10 [M24]=10x10x25 [M22]=25x25x10 [M25]=10x10x40 [M23]=16x16x16
          [128x128x480]=8x8x30 [480x480x80]=30x30x5 [800x800x30]=40x40x2
          [128x128x1440]=8x8x90 [512x512x256]=16x16x8 [480x480x320]=15x15x10
          [1440x1440x80]=45x45x3)
    CPU_STEPS="M21=5 M24=4 M22=3 M25=2 M23=1"
fi
declare -A STEPS
for kv in $CPU_STEPS; do STEPS[${kv%%=*}]=${kv#*=}; done
for m in "${MODELS[@]}"; do
    [[ ${STEPS[$m]:-} =~ ^[1-9][0-9]*$ ]] || { echo "mic_tables: CPU_STEPS: no whole number for $m" >&2; exit 1; }
done

{
    echo "engine=$ENGINE set=$SET budget=$BUDGET timeout=$TIMEOUT cpu_limit=$CPU_LIMIT cpu_steps=$CPU_STEPS parts=$PARTS"
    echo "gpusolve=$("$GPUSOLVE" --version 2>&1 | head -1)"
    echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) date=$(date -u +%FT%TZ)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //') cores=$(nproc)"
    echo "omp_num_threads=${OMP_NUM_THREADS:-unset}"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} >"$OUT/setup.txt" 2>&1
for m in "${!SPEC[@]}"; do echo "$m=${SPEC[$m]}"; done | sort >"$OUT/specs.txt"

# run TAG ARGS...: one gpusolve process (a JSON line), unless the budget is spent; its
# limit is TIMEOUT, and never more than the budget left plus 30 s
run() {
    local tag=$1
    shift
    if [ "$SECONDS" -ge "$BUDGET" ]; then
        echo "$tag (budget of ${BUDGET}s spent at ${SECONDS}s)" >>"$OUT/skipped.txt"
        return
    fi
    local left=$((BUDGET - SECONDS + 30)) limit=$TIMEOUT
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $tag ($limit s) $*" >&2
    timeout -k 5 "$limit" "$GPUSOLVE" -m cg --format json "$@" >"$RAW/$tag.jsonl" 2>"$RAW/$tag.err"
    echo $? >"$RAW/$tag.rc"
}

# ---- Tables 2 and 3, GPU (or ENGINE): the full time stepping
part t23 && for m in "${MODELS[@]}"; do
    for p in mic ssor-ai; do
        run "t23.gpu.$p.$m" -e "$ENGINE" -p "$p" --generate "heat3d:${SPEC[$m]}"
    done
done

# ---- Table 1: substitutions on the same factors (one step's setup)
t1() {
    local g=$1 one=(--generate "heat3d:${SPEC[$1]}" --steps 1 --dt "$DT" --maxit 1)
    run "t1.gpu.auto.$g" -e "$ENGINE" -p mic --trisolve auto "${one[@]}"
    run "t1.gpu.exact.$g" -e "$ENGINE" -p mic --trisolve exact "${one[@]}"
    run "t1.cpu.$g" -e cpu -p mic --trisolve auto "${one[@]}"
}
part t1 && for g in "${GRIDS[@]}"; do t1 "$g"; done

# ---- Table 3, CPU engine: fewer steps of the same dt, capped
part t3cpu && for m in "${MODELS[@]}"; do
    for p in mic ssor-ai; do
        run "t3.cpu.$p.$m" -e cpu -p "$p" --generate "heat3d:${SPEC[$m]}" --steps "${STEPS[$m]}" \
            --dt "$DT" --time-limit "$CPU_LIMIT"
    done
done

# ---- Table 1's largest grids
part t1big && for g in "${BIG[@]}"; do t1 "$g"; done

echo "mic_tables: runs done in ${SECONDS}s" >&2
timeout 60 python3 "$here/mic_tables.py" "$OUT" >"$OUT/tables.md" ||
    echo "mic_tables: mic_tables.py failed" >&2
[ -s "$OUT/skipped.txt" ] && { echo "mic_tables: skipped (budget):" >&2; cat "$OUT/skipped.txt" >&2; }
echo "mic_tables: $OUT/tables.md" >&2
exit 0
