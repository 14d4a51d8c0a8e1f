#!/usr/bin/env bash
# bench.sh - make bench: Krylov + Jacobi solves on the built-in problems with
# the CUDA engine, each iteration against its bandwidth floor (DESIGN.md,
# "Performance"), and CuPy's solvers on the same matrices as the peer.
#   GPUSOLVE=build/gpusolve scripts/bench/bench.sh [quick]
# Environment: BENCH_OUT=DIR keeps the raw JSON lines and logs there;
# BENCH_CUPY=0 skips CuPy; BENCH_ENGINE=0 skips the per-operation
# microbenchmarks (scripts/bench/bench_engine.c).
#
# Columns: iterations and Ts (solve seconds, gpusolve's own report), us/it =
# Ts / iterations, floor = bytes per iteration / copy bandwidth measured by the
# same run (bytes: A's CSR values + indices once per SpMV, the Jacobi apply,
# and 8 n per vector access of the method's fused operations), ratio = us/it
# over floor; CuPy us/it from scripts/bench/bench_cupy.py, and CuPy / gpusolve.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/gpusolve-bench.XXXXXX)}
mkdir -p "$OUT"
BUILD_DIR=$(dirname "$GPUSOLVE")

# shellcheck source=scripts/lib/lib_bench.sh
. "$here/../lib/lib_bench.sh"
bench_need_cuda bench.sh

cases=(
    "poisson3d:64 cg"
    "poisson3d:128 cg"
    "poisson3d:160 cg"
    "convdiff3d:64 bicgstab"
    "convdiff3d:64 gmres"
    "convdiff3d:64 idr"
    "convdiff3d:128 bicgstab"
    "convdiff3d:128 gmres"
    "convdiff3d:128 idr"
)
[ "${1:-}" = quick ] && cases=("poisson3d:64 cg" "convdiff3d:64 bicgstab")

json="$OUT/gpusolve.jsonl"
: >"$json"
for c in "${cases[@]}"; do
    set -- $c
    # --repeat 3: the min Ts of three full runs (first-touch effects out)
    "$GPUSOLVE" --engine cuda --generate "$1" -m "$2" -p jacobi --repeat 3 --format json \
        >>"$json" 2>>"$OUT/gpusolve.err" || echo "bench.sh: $1 $2 failed (see $OUT/gpusolve.err)" >&2
done
# What limits the small case: residual checks (a host sync each) and graphs.
for extra in "--check-every 1" "--check-every 10" "--no-graph"; do
    "$GPUSOLVE" --engine cuda --generate poisson3d:64 -m cg -p jacobi --repeat 3 --format json \
        $extra | sed "s/^{/{\"variant\": \"$extra\", /" >>"$OUT/variants.jsonl" 2>>"$OUT/gpusolve.err"
done

cupy_json="$OUT/cupy.jsonl"
: >"$cupy_json"
if [ "${BENCH_CUPY:-1}" != 0 ] && python3 -c "import cupy, cupyx.scipy.sparse.linalg" 2>/dev/null; then
    PYTHONUNBUFFERED=1 python3 "$here/bench_cupy.py" --gpusolve-json "$json" >"$cupy_json" \
        2>"$OUT/cupy.err" || echo "bench.sh: bench_cupy.py failed (see $OUT/cupy.err)" >&2
else
    echo "bench.sh: CuPy not available, CuPy columns empty" >&2
fi

if [ "${BENCH_ENGINE:-1}" != 0 ] && [ -f "$BUILD_DIR/libgpusolve.a" ]; then
    cuda_home=${CUDA_HOME:-/usr/local/cuda}
    src_inc=(); for d in "$root"/src/*/; do src_inc+=(-I"$d"); done
    if cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp "${src_inc[@]}" -DGS_HAVE_CUDA=1 \
        -o "$BUILD_DIR/bench_engine" "$here/bench_engine.c" "$BUILD_DIR/libgpusolve.a" -lz -lm \
        -fopenmp -L"$cuda_home/lib64" -Wl,-rpath,"$cuda_home/lib64" -lcusparse -lcublas -lcudart \
        -lstdc++ 2>"$OUT/bench_engine.build"; then
        "$BUILD_DIR/bench_engine" | tee "$OUT/bench_engine.txt"
        "$BUILD_DIR/bench_engine" --device-fill | tee -a "$OUT/bench_engine.txt"
    else
        echo "bench.sh: bench_engine did not build (see $OUT/bench_engine.build)" >&2
    fi
fi

python3 - "$json" "$cupy_json" "$OUT/variants.jsonl" <<'EOF'
import json, sys
def load(path):
    rows = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith('{'):
                rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows
runs, cupy, variants = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
cp = {(r['matrix'], r['method']): r for r in cupy}
if runs:
    print('\ndevice: %s, copy bandwidth %.0f GB/s' % (runs[0]['device'], runs[0]['bandwidth_Bps'] * 1e-9))
hdr = '%-20s %9s %10s %-9s %6s %9s %9s %9s %9s %6s %9s %6s' % (
    'problem', 'n', 'nnz', 'method', 'its', 'Ts[s]', 'us/it', 'MB/it', 'floor_us', 'ratio',
    'cupy_us', 'cupy/x')
print(hdr)
for r in runs + variants:
    us = r['s_per_iteration'] * 1e6
    floor = r['bytes_per_iteration'] / r['bandwidth_Bps'] * 1e6 if r['bandwidth_Bps'] else float('nan')
    c = cp.get((r['matrix'], r['method'])) if 'variant' not in r else None
    if c and not c.get('us_per_iteration'):
        c = None
    cus = '%9.1f' % c['us_per_iteration'] if c else '%9s' % '-'
    cratio = '%6.2f' % (c['us_per_iteration'] / us) if c else '%6s' % '-'
    name = r['matrix'] + (' ' + r['variant'] if 'variant' in r else '')
    print('%-20s %9d %10d %-9s %6d %9.4f %9.1f %9.1f %9.1f %6.2f %s %s%s' % (
        name[:20], r['n'], r['nnz'], r['method'], r['iterations'], r['ts_min_s'], us,
        r['bytes_per_iteration'] * 1e-6, floor, r['floor_ratio'], cus, cratio,
        '' if r['converged'] == 'yes' else '  (' + r['reason'] + ')'))
    if 'variant' in r:
        print('%20s   (variant: %s)' % ('', r['variant']))
EOF
echo "raw results: $OUT"
