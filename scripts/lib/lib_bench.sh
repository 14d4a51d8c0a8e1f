# shellcheck shell=bash
# lib_bench.sh - what the benchmark scripts (scripts/bench/) and the table
# scripts (scripts/tables/) share, sourced by each. For the GPU benchmarks
# (bench.sh, bench_devloop.sh, bench_devloop_steps.sh, bench_fused_mic.sh):
# the check that the program is built and its CUDA engine runs, and the shared
# matrices a script adds to its cases. For the CPU tables (cpu_table_*.sh): the
# real matrices of the MANIFEST, one stored run per solve (RAW/TAG.csv, .err,
# .rc) and the Python that reads those runs back (lib_bench.py, beside this
# file). Sourcing it sets lib_bench_dir (this folder) and defines functions.

lib_bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# bench_need_cuda NAME: exit (NAME: why) unless $GPUSOLVE is built and its
# CUDA engine solves a small problem; the probe's stderr in $OUT/probe.err.
bench_need_cuda() {
    if [ ! -x "$GPUSOLVE" ]; then echo "$1: $GPUSOLVE not built (make)" >&2; exit 1; fi
    if ! "$GPUSOLVE" --engine cuda --generate poisson3d:4 --format json >/dev/null \
        2>"$OUT/probe.err"; then
        echo "$1: the CUDA engine is not usable here: $(head -c 300 "$OUT/probe.err")" >&2
        exit 1
    fi
}

# bench_add_matrices NAME M...: $MATS/M.mtx appended to the array cases for
# each M that is there, a note (NAME: ...) for each that is not.
bench_add_matrices() {
    local name=$1 m
    shift
    for m in "$@"; do
        if [ -r "$MATS/$m.mtx" ]; then cases+=("$MATS/$m.mtx")
        else echo "$name: $MATS/$m.mtx missing (set GS_MATRICES): skipped" >&2; fi
    done
}

# table_settings NAME [OUTPUT.md]: the settings cpu_table_NAME.sh takes from
# the environment (its header lists them) with their defaults: GPUSOLVE,
# MATRICES, OUT_MD, RAW, TIMEOUT, REPEAT, OMP_NUM_THREADS (exported); then RAW
# made and the program checked (the script exits without it).
# shellcheck disable=SC2034 # the variables are the sourcing script's
table_settings() {
    GPUSOLVE=${GPUSOLVE:-build/gpusolve}
    MATRICES=${GS_MATRICES:-../shared/matrices}
    OUT_MD=${2:-docs/results-cpu-$1.md}
    RAW=${RAW:-build/cpu_table_$1}
    TIMEOUT=${TIMEOUT:-600}
    REPEAT=${REPEAT:-3}
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
    mkdir -p "$RAW"
    [ -x "$GPUSOLVE" ] || { echo "no $GPUSOLVE: run make CUDA=0 first" >&2; exit 1; }
}

# table_real_matrices MANIFEST.tsv: its rows without the header and without
# the complex matrices (the field column is the sixth).
table_real_matrices() {
    tail -n +2 "$1" | awk -F'\t' '$6 != "complex"'
}

# table_run TAG SECONDS COMMAND...: COMMAND under a time limit, its CSV in
# $RAW/TAG.csv, its stderr in $RAW/TAG.err and its exit status in $RAW/TAG.rc.
table_run() {
    local tag=$1 seconds=$2; shift 2
    timeout "$seconds" "$@" >"$RAW/$tag.csv" 2>"$RAW/$tag.err"
    echo $? >"$RAW/$tag.rc"
}

# table_python ARGS...: python3 on lib_bench.py (beside this file) followed by
# the program on stdin (a heredoc), with ARGS as sys.argv[1:].
table_python() {
    { cat "$lib_bench_dir/lib_bench.py"; cat; } | python3 - "$@"
}
