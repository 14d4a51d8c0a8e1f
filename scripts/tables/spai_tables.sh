#!/usr/bin/env bash
# spai_tables.sh - the runs behind docs/results-spai.md (issue 19, item 7), in
# one device call of at most ~2 minutes on an H100:
#   II  CW-SPAI Table II style: BiCGSTAB iterations, spai (tau 0.7, 0.9)
#       against jacobi (the paper's diagonal preconditioner), tol 1e-7, 1e-8
#   I   CW-SPAI Table I style: GPU setup against the CPU engine's (all cores),
#       spai tau 0.7, 0.9 (and gspai-opt k = 1), on the large generated
#       problems and the Table II matrices
#   4   GSPAI-Opt Table 4 style: predicted strategy (auto) against the faster
#       of forced S1 and S2 (--strategy s1|s2), k = 1, 2 (--pattern-power), on
#       every real shared matrix; with the auto runs' iterations and Ts (the
#       M of S1 and S2 is the same to the bit, so are their solves): the data
#       of Tables 5-7 style too
# Then scripts/tables/spai_tables.py turns the JSON lines into $OUT/tables.md and
# CSV files.
#
#   SPAI_TABLES_OUT=DIR scripts/tables/spai_tables.sh            (on the GPU machine)
#   SPAI_TABLES_OUT=DIR ENGINE=cpu SET=tiny scripts/tables/spai_tables.sh   (plumbing)
# Environment: SPAI_TABLES_OUT (output folder; default $OUT, else a temporary
# folder), GPUSOLVE (build/gpusolve), GS_MATRICES (../shared/matrices),
# ENGINE (cuda; cpu only to test the plumbing), SET (full | tiny: three small
# matrices, 16^3 problems), SIZE (side of the Table I problems, 128),
# BUDGET (seconds, 95: parts not started by then are skipped and say so),
# TIMEOUT (seconds per gpusolve process, 20), PARTS (which runs, in their
# order: t2 (Table II), t1g (Table I on the generated problems), t4 (Table 4,
# k = 1, 2), t1 (Table I on the Table II matrices), t4heavy (Table 4, k = 2 on
# the heavy matrices); default all five; PARTS="t1g t1" runs only the GPU
# against CPU setups).
#
# Every gpusolve process runs under timeout; each writes RAW/TAG.jsonl (one
# JSON line per input), TAG.err, TAG.rc; a refused matrix has no line but a
# stderr line naming its file. Settings: BiCGSTAB (both papers' method),
# b = 1, x0 = 0, maxit 10000; timing runs (Table I, the S1/S2 runs of Table 4)
# stop after one iteration and report Tp, the minimum over REPEAT (3) setups.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
MATRICES=${GS_MATRICES:-$root/../shared/matrices}
OUT=${SPAI_TABLES_OUT:-${OUT:-$(mktemp -d /tmp/spai-tables.XXXXXX)}}
ENGINE=${ENGINE:-cuda}
SET=${SET:-full}
SIZE=${SIZE:-128}
BUDGET=${BUDGET:-95}
TIMEOUT=${TIMEOUT:-20}
REPEAT=${REPEAT:-3}
PARTS=${PARTS:-t2 t1g t4 t1 t4heavy}
for p in $PARTS; do
    case "$p" in t2 | t1g | t4 | t1 | t4heavy) ;; *) echo "spai_tables: PARTS: no part '$p' (t2 t1g t4 t1 t4heavy)" >&2; exit 1 ;; esac
done
# part NAME: true when PARTS names it
part() { [[ " $PARTS " == *" $1 "* ]]; }
RAW=$OUT/raw
mkdir -p "$RAW"
: >"$OUT/skipped.txt"
[ -x "$GPUSOLVE" ] || { echo "spai_tables: no $GPUSOLVE (make first)" >&2; exit 1; }
SECONDS=0

# run TAG SECONDS ARGS...: one gpusolve process (JSON lines), unless the budget is spent
run() {
    local tag=$1 limit=$2
    shift 2
    if [ "$SECONDS" -ge "$BUDGET" ]; then
        echo "$tag (budget of ${BUDGET}s spent at ${SECONDS}s)" >>"$OUT/skipped.txt"
        return
    fi
    timeout -k 5 "$limit" "$GPUSOLVE" -m bicgstab --rhs ones --format json "$@" \
        >"$RAW/$tag.jsonl" 2>"$RAW/$tag.err"
    echo $? >"$RAW/$tag.rc"
}

# The manifest's rows of the real matrices (the field is column 6, the kind 7).
manifest() { tail -n +2 "$MATRICES/MANIFEST.tsv" | awk -F'\t' '$6 != "complex"'; }

if [ "$SET" = tiny ]; then
    T2=(orsirr_1 sherman5 fs_541_1)
    ALL=(orsirr_1 sherman5 fs_541_1 pores_1)
    GEN_SMALL=16
    SIZE=16
    HEAVY=(pores_1)
else
    # Table II: the paper's matrices are shell FEM stiffness matrices
    # (s3dkt3m2, s3dkq4m2) solved by BiCGSTAB; here s3rmt3m3 (the same
    # cylindrical-shell family), the largest structural FEM matrices
    # (bcsstk13-16), and every real nonsymmetric matrix with n >= 500 (SPAI-ME's
    # own target: BiCGSTAB with a right preconditioner)
    mapfile -t T2 < <({ printf 's3rmt3m3\nbcsstk13\nbcsstk14\nbcsstk15\nbcsstk16\n'
                        manifest | awk -F'\t' '$7 == "nonsymmetric" && $2 >= 500 {print $1}'; })
    mapfile -t ALL < <(manifest | cut -f1)
    HEAVY=(adder_dcop_05 bloweybq hangGlider_2 rajat01 reorientation_1 add20 bcsstk08 bcsstk13 rajat19)
    GEN_SMALL=64
fi
files() { local m; for m in "$@"; do printf '%s\n' "$MATRICES/$m.mtx"; done; }
mapfile -t T2_FILES < <(files "${T2[@]}")
printf '%s\n' "${T2[@]}" >"$OUT/set_table2.txt"
printf '%s\n' "${ALL[@]}" >"$OUT/set_table4.txt"
{
    echo "engine=$ENGINE set=$SET size=$SIZE repeat=$REPEAT budget=$BUDGET timeout=$TIMEOUT parts=$PARTS"
    echo "gpusolve=$("$GPUSOLVE" --version 2>&1 | head -1)"
    echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) date=$(date -u +%FT%TZ)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} >"$OUT/setup.txt" 2>&1

# ---- Table II: iterations, spai against jacobi, two tolerances
part t2 && for tol in 1e-7 1e-8; do
    run "t2.jacobi.$tol" "$TIMEOUT" -e "$ENGINE" --tol "$tol" -p jacobi "${T2_FILES[@]}"
    for tau in 0.7 0.9; do
        run "t2.spai$tau.$tol" "$TIMEOUT" -e "$ENGINE" --tol "$tol" -p spai --tau "$tau" "${T2_FILES[@]}"
    done
    for spec in "convdiff3d:$GEN_SMALL" "poisson3d:$GEN_SMALL"; do
        g=${spec/:/-}
        run "t2g.$g.jacobi.$tol" "$TIMEOUT" -e "$ENGINE" --tol "$tol" -p jacobi --generate "$spec"
        for tau in 0.7 0.9; do
            run "t2g.$g.spai$tau.$tol" "$TIMEOUT" -e "$ENGINE" --tol "$tol" -p spai --tau "$tau" --generate "$spec"
        done
    done
done

# ---- Table I: setup on the GPU against the CPU engine (all cores)
part t1g && for spec in "poisson3d:$SIZE" "convdiff3d:$SIZE"; do
    g=${spec/:/-}
    for tau in 0.7 0.9; do
        run "t1g.$g.spai$tau.gpu" "$TIMEOUT" -e "$ENGINE" --maxit 1 --repeat "$REPEAT" -p spai --tau "$tau" --generate "$spec"
        run "t1g.$g.spai$tau.cpu" "$TIMEOUT" -e cpu --maxit 1 -p spai --tau "$tau" --generate "$spec"
    done
    run "t1g.$g.gspai.gpu" "$TIMEOUT" -e "$ENGINE" --maxit 1 --repeat "$REPEAT" -p gspai-opt --generate "$spec"
    run "t1g.$g.gspai.cpu" "$TIMEOUT" -e cpu --maxit 1 -p gspai-opt --generate "$spec"
done
# ---- Table 4 (and 5-7): predicted strategy, forced S1 and S2, k = 1, 2;
# the matrices in batches, so that a stuck setup costs one batch only
# t4 K NAME REPEAT FILES...: the four runs of one batch
t4() {
    local k=$1 b=$2 rep=$3
    shift 3
    run "t4.k$k.auto.solve.b$b" "$TIMEOUT" -e "$ENGINE" -p gspai-opt --pattern-power "$k" "$@"
    for s in auto s1 s2; do
        run "t4.k$k.$s.tp.b$b" "$TIMEOUT" -e "$ENGINE" --maxit 1 --repeat "$rep" \
            -p gspai-opt --pattern-power "$k" --strategy "$s" "$@"
    done
}
batch=20
part t4 && for k in 1 2; do
    list=("${ALL[@]}")
    # k = 2 on these makes local problems of thousands of rows (a dense row
    # or column; the CPU reference took 8-40 s or more than 120 s on each,
    # docs/results-cpu-spai.md): batches of 3 at the end, one setup per run
    [ "$k" = 2 ] && mapfile -t list < <(printf '%s\n' "${ALL[@]}" | grep -vxF -f <(printf '%s\n' "${HEAVY[@]}"))
    mapfile -t part_files < <(files "${list[@]}")
    for ((b = 0; b < ${#part_files[@]}; b += batch)); do
        t4 "$k" "$b" "$REPEAT" "${part_files[@]:b:batch}"
    done
done

part t1 && for tau in 0.7 0.9; do
    run "t1.spai$tau.gpu" "$TIMEOUT" -e "$ENGINE" --maxit 1 --repeat "$REPEAT" -p spai --tau "$tau" "${T2_FILES[@]}"
    run "t1.spai$tau.cpu" "$TIMEOUT" -e cpu --maxit 1 --repeat "$REPEAT" -p spai --tau "$tau" "${T2_FILES[@]}"
done

mapfile -t heavy_files < <(files "${HEAVY[@]}")
part t4heavy && for ((b = 0; b < ${#heavy_files[@]}; b += 3)); do
    t4 2 "h$b" 1 "${heavy_files[@]:b:3}"
done

echo "spai_tables: runs done in ${SECONDS}s" >&2
timeout 60 python3 "$here/spai_tables.py" "$OUT" || echo "spai_tables: spai_tables.py failed" >&2
[ -s "$OUT/skipped.txt" ] && { echo "spai_tables: skipped (budget):" >&2; cat "$OUT/skipped.txt" >&2; }
exit 0
