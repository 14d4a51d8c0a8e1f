#!/usr/bin/env bash
# bench_spmv.sh - rows of very different lengths (issue 24, item 3): SpMV in us and as a
# multiple of its bandwidth floor for the layouts before the long-row rule ("old",
# GS_SPMV_LONG=off), split long rows (the rule's default) and the merge path, in one run
# (scripts/bench/bench_spmv.c), on bloweybq and the shared set's other long-row matrices
# (rajat01, adder_dcop_05, hangGlider_2: longest row 140-1430x the mean), a 270k-row
# power-law matrix and poisson3d:128 (no long rows: must not change); then CG + Jacobi
# us per iteration on bloweybq with each (gpusolve's own report, --maxit 2000).
#   GPUSOLVE=build/gpusolve scripts/bench/bench_spmv.sh        (about 30 s on an H100)
# Environment: GS_MATRICES=DIR the shared matrices (default ../shared/matrices);
# BENCH_OUT=DIR keeps the raw output there.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
BUILD_DIR=$(dirname "$GPUSOLVE")
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-bench-spmv.XXXXXX)}
MATS=${GS_MATRICES:-$root/../shared/matrices}
mkdir -p "$OUT"

if [ ! -x "$GPUSOLVE" ]; then
    echo "bench_spmv.sh: $GPUSOLVE not built (make)" >&2; exit 1
fi
if [ ! -d "$MATS" ]; then echo "bench_spmv.sh: no matrices in $MATS (set GS_MATRICES)" >&2; exit 1; fi

# bench_spmv.c links the library; where only binaries were copied (no
# libgpusolve.a beside them), a bench_spmv built with them is used as it is.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
src_inc=(); for d in "$root"/src/*/; do src_inc+=(-I"$d"); done
if [ -f "$BUILD_DIR/libgpusolve.a" ]; then
    if ! cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp "${src_inc[@]}" -DGS_HAVE_CUDA=1 \
        -o "$BUILD_DIR/bench_spmv" "$here/bench_spmv.c" "$BUILD_DIR/libgpusolve.a" -lz -lm \
        -fopenmp -L"$cuda_home/lib64" -Wl,-rpath,"$cuda_home/lib64" -lcusolver -lcusparse -lcublas \
        -lcudart -lstdc++ 2>"$OUT/bench_spmv.build"; then
        echo "bench_spmv.sh: bench_spmv did not build (see $OUT/bench_spmv.build)" >&2; exit 1
    fi
elif [ ! -x "$BUILD_DIR/bench_spmv" ]; then
    echo "bench_spmv.sh: no $BUILD_DIR/libgpusolve.a to build bench_spmv with (make)" >&2; exit 1
fi

echo "== SpMV: old (before the long-row rule), split, merge (rule), merge* (forced)"
echo "   spmv_us: y = A x; dot_us: y = A x and y.x fused; ratio: spmv_us / floor_us; vs_old: old / this"
"$BUILD_DIR/bench_spmv" "$MATS/bloweybq.mtx" "$MATS/rajat01.mtx" "$MATS/adder_dcop_05.mtx" \
    "$MATS/hangGlider_2.mtx" powerlaw:270000 poisson3d:128 | tee "$OUT/bench_spmv.txt"

echo
echo "== CG + Jacobi on bloweybq (maxit 2000: it does not converge; us per iteration)"
printf '%-8s %-10s %6s %10s %9s %9s\n' variant layout its Ts_s us_per_it floor_x
for v in off split merge; do
    GS_SPMV_LONG=$v "$GPUSOLVE" --engine cuda "$MATS/bloweybq.mtx" -p jacobi -m cg --maxit 2000 \
        --repeat 3 --format json >"$OUT/cg_$v.json" 2>"$OUT/cg_$v.err"
    python3 - "$OUT/cg_$v.json" "$v" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith('{')]
if not rows:
    print('%-8s (no result: see the .err file)' % sys.argv[2]); sys.exit(0)
r = rows[0]
extra = dict(kv.split('=', 1) for kv in r.get('precond_extra', '').split(';') if '=' in kv)
print('%-8s %-10s %6d %10.4f %9.2f %9.2f' % (sys.argv[2], extra.get('layout_A', '?'),
      r['iterations'], r['ts_min_s'], r['s_per_iteration'] * 1e6, r['floor_ratio']))
EOF
done
echo "(raw output in $OUT)"
