#!/usr/bin/env bash
# sanitize.sh - make sanitize: a small solve of every Krylov method (with and
# without Jacobi) on the CUDA engine under compute-sanitizer's memcheck (CG
# and BiCGSTAB with their loop on the device and on the host); CG
# and GMRES under initcheck (no read of device memory nothing wrote); one CG
# solve under racecheck and synccheck (the reductions' shared memory and
# barriers); FSAI setups that reach every setup kernel under memcheck,
# racecheck, synccheck and initcheck; the long-row SpMV (split and merge) under memcheck,
# initcheck and racecheck; and, when built, the CUDA engine's test suites under memcheck
# (every kernel, layouts, trisolve, graphs) and the device toolkit's suite; every
# preconditioner's setup on each of its paths under memcheck, initcheck and racecheck
# (SETUPS=0 skips them). Passes only if every run exits 0
# and reports "ERROR SUMMARY: 0 errors".
#   GPUSOLVE=build/gpusolve scripts/dev/sanitize.sh        (ONLY_SETUPS=1: the setups' runs alone)
set -u
here=$(cd "$(dirname "$0")" && pwd)
GPUSOLVE=${GPUSOLVE:-$here/../../build/gpusolve}
SANITIZER=${SANITIZER:-compute-sanitizer}
command -v "$SANITIZER" >/dev/null 2>&1 || { echo "sanitize.sh: $SANITIZER not found" >&2; exit 1; }
log=$(mktemp /tmp/gpusolve-sanitize.XXXXXX)
fail=0; runs=0

check() { # tool, then gpusolve arguments (or --program PATH)
    local tool=$1; shift
    local cmd=("$GPUSOLVE" --engine cuda "$@") opts=()
    # the suite provokes API failures on purpose (an impossible allocation,
    # sync calls while capturing): those are tested results, not findings
    [ "${1:-}" = --program ] && cmd=("$2") && opts=(--report-api-errors no)
    runs=$((runs + 1))
    "$SANITIZER" --tool "$tool" "${opts[@]}" --error-exitcode 99 "${cmd[@]}" >"$log" 2>&1
    local rc=$?
    local summary
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1)
    # OK_EXIT=2: a run that need not converge (an indefinite matrix) may end with 2
    if { [ $rc -ne 0 ] && [ "$rc" != "${OK_EXIT:-0}" ]; } ||
        ! grep -qE "(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)" "$log"; then
        fail=$((fail + 1))
        echo "FAIL  $tool $* (exit $rc): ${summary:-no summary}"
        sed -n '1,40p' "$log"
    else
        echo "ok    $tool $*: $summary"
    fi
}

if [ "${ONLY_SETUPS:-0}" = 0 ]; then  # ONLY_SETUPS=1: the setups' runs below alone
for m in cg bicgstab gmres idr; do
    spec=poisson3d:12x11x10
    [ "$m" != cg ] && spec=convdiff3d:12x11x10
    for p in none jacobi; do check memcheck --generate "$spec" -m "$m" -p "$p"; done
done
check memcheck --generate poisson3d:12 -m cg -p jacobi --no-graph --check-every 3
# the loop on the device (forced: the host loop is the default until it is
# measured faster) with its history and deadline, a handoff of the last
# iterations (maxit 23, bodies of 3), the host loop, and the fused kernel
GS_DEVICE_LOOP=on GS_FUSED=off check memcheck --generate poisson3d:12 -m bicgstab -p jacobi \
    --check-every 3 --time-limit 600 --history "$log.history.csv"
GS_DEVICE_LOOP=on GS_FUSED=off check memcheck --generate poisson3d:12 -m cg -p jacobi \
    --check-every 3 --maxit 23
GS_DEVICE_LOOP=off GS_FUSED=off check memcheck --generate poisson3d:12 -m cg -p jacobi
GS_FUSED=on check memcheck --generate poisson3d:12 -m cg -p jacobi --history "$log.fused.csv"
GS_FUSED=on check racecheck --generate poisson3d:12 -m cg -p jacobi
check initcheck --generate poisson3d:12 -m cg -p jacobi
check initcheck --generate convdiff3d:12 -m gmres -p jacobi
check racecheck --generate poisson3d:12 -m cg -p jacobi
check synccheck --generate poisson3d:12 -m cg -p jacobi
# the FSAI setup: every size class of the batched Cholesky and the panel
# paths (27-point, tau 0, k = 4: m up to 365), fp32, the diagonal direct path
# (default tau on the 27-point stencil), the transpose
check memcheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 4
# chunk-mapped uploads on small problems (every matrix from 0 bytes):
# jacobi's A is laid out in steps at once; fsai's after its setup, whole
# from the chunk-mapped CSR (the setup's peak is higher)
GS_CUDA_STEPPED_MIN_BYTES=0 check memcheck --generate poisson3d:12 -m cg -p jacobi
GS_CUDA_STEPPED_MIN_BYTES=0 check memcheck --generate poisson3d:12 -m cg -p fsai
GS_CUDA_STEPPED_MIN_BYTES=0 check initcheck --generate poisson3d:12 -m cg -p fsai
check memcheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 3 --precond-precision single
check memcheck --generate poisson3d27:8 -m cg -p fsai
check racecheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 4
check synccheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 3
check initcheck --generate poisson3d:12 -m cg -p fsai
GS_FSAI_TRANSPOSE_CHUNK=999 check memcheck --generate poisson3d27:8 -m cg -p fsai --tau 0.01 --k 2
# the large systems' DGEMM path (fsai_factor_gemm.cu): by the rule above
# (k = 4: m > 225), forced on every system (one-panel buckets) and from 40
# rows (several panels, beside the other classes), the diagonal-block
# kernel's shared memory under racecheck, the dense buffers the DGEMMs read
# under initcheck; off: the block kernel in fp64 as before
GS_FSAI_GEMM_MIN=1 check memcheck --generate poisson3d27:8 -m cg -p fsai --tau 0 --k 3
GS_FSAI_GEMM_MIN=40 check initcheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 3
GS_FSAI_GEMM_MIN=40 check racecheck --generate poisson3d27:8 -m cg -p fsai --tau 0 --k 3
GS_FSAI_GEMM_MIN=off check memcheck --generate poisson3d27:9 -m cg -p fsai --tau 0 --k 4
# rows of very different lengths (cuda/sparse/long_rows.cu): the 27-point
# stencil on 512 rows is laid out as CSR (few slices), and its rows of 20
# entries or more are split over warps, or the merge path takes it
GS_SPMV_LONG_MIN=20 check memcheck --generate poisson3d27:8 -m cg -p jacobi
GS_SPMV_LONG_MIN=20 check initcheck --generate poisson3d27:8 -m bicgstab -p jacobi
GS_SPMV_LONG_MIN=20 check racecheck --generate poisson3d27:8 -m cg -p jacobi
GS_SPMV_LONG=merge GS_SPMV_LONG_MIN=20 check memcheck --generate poisson3d27:8 -m cg -p jacobi
GS_SPMV_LONG=merge GS_SPMV_LONG_MIN=20 check initcheck --generate poisson3d27:8 -m gmres -p jacobi
GS_SPMV_LONG=merge GS_SPMV_LONG_MIN=20 check racecheck --generate poisson3d27:8 -m cg -p jacobi
fi
# every preconditioner's setup (issue 32), inputs small enough for racecheck:
# spai and gspai-opt on each route (the batched QR kernels, S1 and S2, the
# global kernel, cuSOLVER, the normal equations with heavy columns and the
# QR fallback, CGLS), isai (levels, sync-free and sweeps ILU(0), the excess
# system of long columns, exact solves), mic (sync-free and level
# factorisations, each substitution) and ssor-ai; SETUPS=0 skips them
if [ "${SETUPS:-1}" != 0 ]; then
    for tool in memcheck initcheck racecheck; do
        check $tool --generate convdiff3d:6 -m bicgstab -p spai
        check $tool --generate convdiff3d:6 -m bicgstab -p gspai-opt --strategy s2 --pattern-power 2
        GS_SPAI_SHARED_CAP=1 check $tool --generate convdiff3d:5 -m bicgstab -p gspai-opt --qr-max 2147483647
        GS_SPAI_CUSOLVER_WORK=20000 check $tool --generate poisson3d27:4 -m bicgstab -p gspai-opt --pattern-power 2 --qr-max 2147483647
        check $tool --generate bordered:23x23x1 -m bicgstab -p gspai-opt
        check $tool --generate bordered:33x33x1 -m bicgstab -p spai --qr-max 0
        # racecheck ends the process with signal 11 on IDR's loop on the device (a graph with
        # conditional nodes; H200, IDR(4) + isai, no hazard reported before it; BiCGSTAB +
        # isai on the host loop ran clean): IDR runs the host loop under racecheck, the other
        # tools keep the device loop
        if [ $tool = racecheck ]; then
            GS_DEVICE_LOOP=off check $tool --generate convdiff3d:6 -m idr -p isai
        else
            check $tool --generate convdiff3d:6 -m idr -p isai
        fi
        check $tool --generate convdiff3d:6 -m bicgstab -p isai --ilu sweeps:2 --isai-power 2
        GS_ISAI_EXCESS_ABOVE=8 check $tool --generate bordered:12x12x1 -m bicgstab -p isai
        check $tool --generate convdiff3d:6 -m bicgstab -p isai --trisolve exact
        GS_FACTOR_SCHEME=syncfree check $tool --generate hub:20 -m cg -p mic --trisolve syncfree
        GS_FACTOR_SCHEME=levels check $tool --generate chain:400 -m cg -p mic --trisolve levels
        # the level analyses on the device (small matrices take the host's by the rule)
        GS_TRI_ANALYSIS=device check $tool --generate chain:400 -m cg -p mic
        GS_TRI_ANALYSIS=device check $tool --generate chain:400 -m idr -p isai
        # the heavy columns' Gram matrix, a warp a pair (8 dense columns of 1601 entries)
        OK_EXIT=2 check $tool --generate bordered:40x40x1 -m bicgstab -p gspai-opt --maxit 5
        check $tool --generate poisson3d:6 -m cg -p mic --trisolve exact
        check $tool --generate poisson3d:6 -m cg -p ssor-ai
    done
    if [ -n "${GS_MATRICES:-}" ] && [ -f "$GS_MATRICES/sherman5.mtx" ]; then
        check initcheck -m idr -p isai "$GS_MATRICES/sherman5.mtx"
        OK_EXIT=2 check memcheck -m bicgstab -p gspai-opt "$GS_MATRICES/bloweybq.mtx"
    fi
fi
# the suites of the engine, of its long-row SpMV and of the device toolkit
# (every toolkit function on both sides of its thresholds), where built
[ "${ONLY_SETUPS:-0}" = 0 ] && for suite in check_cuda_toolkit check_cuda_engine check_cuda_spmv; do
    suite=$(dirname "$GPUSOLVE")/tests/$suite
    [ -x "$suite" ] && check memcheck --program "$suite"
done
rm -f "$log" "$log.history.csv"
echo "sanitize: $((runs - fail)) of $runs runs clean"
[ $fail -eq 0 ]
