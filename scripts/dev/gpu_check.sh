#!/usr/bin/env bash
# gpu_check.sh - one call on a GPU machine: build for sm_90, run the test
# suites (GPU suites included), the sanitizer runs and the benchmark, and
# print a short table last. Logs go to $OUT (or /tmp/gpu_check).
#   scripts/dev/gpu_check.sh [all|gpu] [quick]
# Where Check is not installed, set CK_DEBS to a folder holding the check,
# libsubunit0 and libsubunit-dev .deb files: they are unpacked under
# /tmp/ck and linked statically.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
suites=${1:-all}
mk=(make -j"$(nproc)")
if [ -n "${CK_DEBS:-}" ]; then
    for f in "$CK_DEBS"/*.deb; do dpkg -x "$f" /tmp/ck; done
    lib=/tmp/ck/usr/lib/x86_64-linux-gnu
    mk+=(CHECK_CFLAGS=-I/tmp/ck/usr/include
         "CHECK_LIBS=$lib/libcheck.a $lib/libsubunit.a -lm -lrt -lpthread")
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"${mk[@]}" build/gpusolve >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
if [ "$suites" = gpu ]; then
    tests=$(ls tests/check_cuda_*.c tests/check_krylov.c tests/check_cli.c | sed 's|tests/|build/tests/|; s|\.c$||')
else
    tests=$(ls tests/check_*.c | sed 's|tests/|build/tests/|; s|\.c$||')
fi
"${mk[@]}" $tests >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
GS_HAVE_GPU=1 GPUSOLVE=build/gpusolve scripts/dev/run_tests.sh $tests >"$OUT/tests.log" 2>&1
echo "tests: $(tail -n 1 "$OUT/tests.log")"
grep -E "^[0-9]+%|failed suites|:F:|:E:" "$OUT/tests.log" | head -20
GPUSOLVE=build/gpusolve scripts/dev/sanitize.sh >"$OUT/sanitize.log" 2>&1
echo "sanitize: exit $? ($(grep -c '^ok' "$OUT/sanitize.log") ok, $(grep -c '^FAIL' "$OUT/sanitize.log") failed)"
BENCH_OUT="$OUT/bench" GPUSOLVE=build/gpusolve scripts/bench/bench.sh ${2:-} >"$OUT/bench.log" 2>&1
cat "$OUT/bench.log"
