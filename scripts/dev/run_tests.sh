#!/usr/bin/env bash
# Run every Check suite given on the command line, then the pytest suites in
# $PYTEST_DIR when it is set, and print one closing line "N passed, N failed"
# summed over suites, naming the GPU suites that found no device (their
# GPU tests did not run). Exit non-zero if any suite failed.
set -u
total_pass=0; total_fail=0; failed_suites=(); skipped_suites=()
for t in "$@"; do
    echo "== $(basename "$t")"
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    # A GPU suite without a device runs only its refusal checks: say so in
    # the closing line, so its GPU tests are never read as passed.
    grep -q "^$(basename "$t"): skipped: no CUDA device" <<<"$out" &&
        skipped_suites+=("$(basename "$t")")
    # Check prints: "100%: Checks: 12, Failures: 0, Errors: 0"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    if [ -n "$line" ]; then
        checks=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
        fails=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
        errs=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
        bad=$((fails + errs))
        total_pass=$((total_pass + checks - bad)); total_fail=$((total_fail + bad))
    fi
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        failed_suites+=("$(basename "$t")")
        [ -z "$line" ] && total_fail=$((total_fail + 1))
    fi
done

# pytest's last line reads e.g. "== 14 passed, 1 failed, 2 skipped in 6.9s =="
# (errors are tests that could not run: they count as failed).
if [ -n "${PYTEST_DIR:-}" ]; then
    echo "== pytest $PYTEST_DIR"
    out=$(PYTHONDONTWRITEBYTECODE=1 "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider \
        "$PYTEST_DIR" 2>&1); rc=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '[0-9]+ (passed|failed|error)' | tail -n 1)
    count() { grep -oE "[0-9]+ $1" <<<"$line" | grep -oE '[0-9]+' || echo 0; }
    total_pass=$((total_pass + $(count passed)))
    total_fail=$((total_fail + $(count failed) + $(count error)))
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        failed_suites+=("pytest")
        [ -z "$line" ] && total_fail=$((total_fail + 1))
    fi
fi
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]}"
skip_note=""
[ ${#skipped_suites[@]} -gt 0 ] &&
    skip_note=" (GPU tests skipped, no CUDA device: ${skipped_suites[*]})"
echo "$total_pass passed, $total_fail failed$skip_note"
[ ${#failed_suites[@]} -eq 0 ]
