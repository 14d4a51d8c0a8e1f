#!/usr/bin/env bash
# isai_tables.sh - the paper's Table II with our runs: for every problem where
# ILU(0) exists, the setup (ILU(0), ISAI, overhead), the preconditioner
# application (exact triangular solves against the ISAI products) and IDR(4)
# iterations and solver time, ISAI against exact solves (trisol) on the same
# factors. Anzt, Chow, Huckle, Dongarra, "Batched generation of incomplete
# sparse approximate inverses on GPUs", ScalA 2016, Table II: b = 1, x0 = 0,
# relative residual 1e-10, unit-diagonal scaling.
#   ISAI_TABLES_OUT=DIR scripts/tables/isai_tables.sh [quick]
# Environment: ISAI_TABLES_OUT (required: the folder the tables, raw CSV and
# logs go to), GPUSOLVE (build/gpusolve), ENGINE (cuda; cpu tests the
# plumbing), SIZE (128, the generated problems; quick: 16 and only the first
# MATRICES_MAX matrices), MATRICES_MAX (all), TIME_LIMIT (3 s a run: a
# run past it reports 'time limit'),
# MATRICES (../shared/matrices), POWERS (unset: "2 3" adds Table III, the
# ISAI(1..3) statistics over the matrices, about 50 s more), GENERATED (yes;
# no skips the generated problems). Matrices: those of MANIFEST.tsv with every
# diagonal entry stored and nonzero (ILU(0) may still break down: the table
# says so). One gpusolve process a variant takes all matrices (one device
# start each); every command runs under timeout. About 60-90 s on an H100.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${ISAI_TABLES_OUT:?set ISAI_TABLES_OUT to the output folder}
ENGINE=${ENGINE:-cuda}
SIZE=${SIZE:-128}
TIME_LIMIT=${TIME_LIMIT:-3}
MATRICES=${MATRICES:-$root/../shared/matrices}
MATRICES_MAX=${MATRICES_MAX:-100000}
if [ "${1:-}" = quick ]; then
    SIZE=16
    MATRICES_MAX=${MATRICES_MAX_QUICK:-4}
fi
mkdir -p "$OUT"
common=(-e "$ENGINE" -p isai -m idr --idr-s 4 --tol 1e-10 --rhs ones --x0 zero --scale yes
        --maxit 10000 --time-limit "$TIME_LIMIT" --format csv)

# Matrices with a full, nonzero stored diagonal (MANIFEST columns 2, 11, 12).
list=()
while IFS=$'\t' read -r name rows _ _ _ _ _ _ _ _ diag mindiag _; do
    [ "$name" = name ] && continue
    [ "$diag" = "$rows" ] || continue
    awk -v d="$mindiag" 'BEGIN { exit !(d + 0 > 0) }' || continue
    for f in "$MATRICES/$name.mtx" "$MATRICES/$name.mtx.gz"; do
        if [ -f "$f" ]; then list+=("$f"); break; fi
    done
    [ ${#list[@]} -ge "$MATRICES_MAX" ] && break
done <"$MATRICES/MANIFEST.tsv"
echo "isai_tables: ${#list[@]} matrices, generated size $SIZE, engine $ENGINE" >&2
printf '%s\n' "${list[@]}" >"$OUT/matrices.txt"

# variant LABEL MATRICES(yes|no) ARGS...: the generated problems (10 s a
# process), then every matrix in one process (25 s), under timeout: at most
# 110 s for the three variants below.
variant() {
    local label=$1 with_matrices=$2 limit=10
    shift 2
    local tag=${label//[^a-zA-Z0-9]/_}
    local problems=("poisson3d:$SIZE" "convdiff3d:$SIZE")
    [ "${GENERATED:-yes}" = no ] && problems=()
    for problem in "${problems[@]}"; do
        timeout "$limit" "$GPUSOLVE" "${common[@]}" "$@" --generate "$problem" \
            >"$OUT/${tag}_${problem//[^a-zA-Z0-9]/_}.csv" 2>>"$OUT/$tag.err"
        echo "$label $problem: exit $?" >>"$OUT/exits.txt"
    done
    if [ "$with_matrices" = yes ] && [ ${#list[@]} -gt 0 ]; then
        timeout 25 "$GPUSOLVE" "${common[@]}" "$@" "${list[@]}" \
            >"$OUT/${tag}_matrices.csv" 2>>"$OUT/$tag.err"
        echo "$label matrices: exit $?" >>"$OUT/exits.txt"
    fi
}

: >"$OUT/exits.txt"
variant "isai" yes
variant "trisol" yes --trisolve exact
[ "${GENERATED:-yes}" = no ] || variant "isai ilu=cusparse" no --ilu cusparse

# Table III: ISAI(k), k = 2, 3 (POWERS, e.g. "2 3"), on the matrices only (the
# statistics are over the shared set); ISAI(1) is the "isai" variant above.
for k in ${POWERS:-}; do
    timeout 25 "$GPUSOLVE" "${common[@]}" --isai-power "$k" "${list[@]}" \
        >"$OUT/power${k}_matrices.csv" 2>>"$OUT/power$k.err"
    echo "power$k matrices: exit $?" >>"$OUT/exits.txt"
done

python3 "$here/isai_tables.py" "$OUT" >"$OUT/table2.md"
cat "$OUT/table2.md"
echo "isai_tables: tables and raw rows in $OUT" >&2
