#!/usr/bin/env bash
# bench_trisolve.sh - MIC's device substitutions, scheme by scheme, on the same factors
# (issue 21 items 3 and 8): the setup's own timing of one apply (forward + backward
# substitution, CUDA events, best of two after a warm-up: fbs_syncfree_ms, fbs_levels_ms,
# fbs_exact_ms) and the CG + MIC iteration it gives, per scheme; CG + Jacobi on the same
# grid first, as a check that the device runs at its usual speed (floor x near 1.3 at
# 2M rows). docs/perf-notebook.md has the predictions to compare with.
#   GPUSOLVE=build/gpusolve scripts/bench/bench_trisolve.sh
# Environment: SIZES ("64 128": poisson3d:N grids), GENS (stress generators and heat3d
# models), MATS (shared matrices by name, under GS_MATRICES), BENCH_OUT=DIR (raw JSON
# lines and the table; default a temporary folder), LIMIT (60: seconds a run may take,
# under timeout). About 90 s on an H200.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPUSOLVE=${GPUSOLVE:-$root/build/gpusolve}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-trisolve.XXXXXX)}
SIZES=${SIZES:-64 128}
GENS=${GENS:-hub:450 chain:20000 elast3d:30 powerlaw:270000 heat3d:M21}
MATS=${MATS:-s3rmt3m3 bcsstk16 nos3}
LIMIT=${LIMIT:-60}
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
: >"$OUT/errors.log"

# run TAG ARGS...: one JSON line, tagged; a run past LIMIT or failing is named in errors.log
run() {
    local tag=$1
    shift
    echo "== $tag $*" >&2
    timeout "$LIMIT" "$GPUSOLVE" -e cuda -m cg --format json "$@" 2>>"$OUT/errors.log" |
        sed "s/^{/{\"tag\": \"$tag\", /" >>"$OUT/runs.jsonl"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && echo "$tag $*: exit $rc (124: timed out after $LIMIT s)" >>"$OUT/errors.log"
}

for k in $SIZES; do
    run jacobi -p jacobi --generate "poisson3d:$k"
    for s in blocks syncfree levels exact auto; do
        run "mic-$s" -p mic --trisolve "$s" --generate "poisson3d:$k"
    done
done
# thin levels and irregular patterns (issue 33): the stress generators, the MIC paper's
# M21 (its 150 steps), shared SPD matrices (GS_MATRICES, MATS)
for g in $GENS; do
    for s in blocks syncfree exact auto; do run "mic-$s" -p mic --trisolve "$s" --generate "$g"; done
done
mats=${GS_MATRICES:-$root/../shared/matrices}
for m in $MATS; do
    [ -f "$mats/$m.mtx" ] || continue
    for s in blocks syncfree exact auto; do run "mic-$s" -p mic --trisolve "$s" --maxit 300 "$mats/$m.mtx"; done
done

python3 - "$OUT/runs.jsonl" <<'EOF' | tee "$OUT/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
dev = next((r.get("device", "?") for r in rows), "?")
stages = lambda r: ", ".join(f"{k} {float(v):.3g}" for k, v in
                             (kv.split("=", 1) for kv in r.get("tp_stages", "").split(";") if "=" in kv))
print(f"device: {dev}\n")
print("| matrix | run | trisolve | fbs blocks ms | fbs sync-free ms | fbs levels ms | fbs exact ms | its | us/it | floor x | Tp s | Tp stages s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    extra = dict(kv.split("=", 1) for kv in r.get("precond_extra", "").split(";") if "=" in kv)
    ms = lambda k: f"{float(extra[k]):.3f}" if k in extra else ""
    print(f"| {r['matrix'].split('/')[-1]} | {r['tag']} | {extra.get('trisolve', '')} | "
          f"{ms('fbs_blocks_ms')} | {ms('fbs_syncfree_ms')} | {ms('fbs_levels_ms')} | {ms('fbs_exact_ms')} | "
          f"{r['iterations']} | {1e6 * r['s_per_iteration']:.1f} | {r.get('floor_ratio', 0):.3g} | "
          f"{r['tp_min_s']:.3g} | {stages(r)} |")
EOF
[ -s "$OUT/errors.log" ] && { echo "bench_trisolve.sh: errors (see $OUT/errors.log):" >&2; head -5 "$OUT/errors.log" >&2; }
echo "raw: $OUT/runs.jsonl" >&2
