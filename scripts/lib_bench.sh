# shellcheck shell=bash
# lib_bench.sh - what the GPU benchmark scripts share (bench.sh,
# bench_devloop.sh, bench_devloop_steps.sh, bench_fused_mic.sh), sourced by
# each: the check that the program is built and its CUDA engine runs, and
# the shared matrices a script adds to its cases. Sourcing it only defines
# functions.

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
