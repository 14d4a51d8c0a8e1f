#!/usr/bin/env bash
# cpu_table_fsai.sh - fsai against jacobi on every real (non-complex)
# symmetric matrix of ../shared/matrices, CPU engine, CG (the paper's method),
# b = A*1, x0 = 0, tol 1e-8, maxit 10000 (the paper's section 5 settings);
# writes the markdown table docs/results-cpu-fsai.md and keeps the raw CSV.
# Matrices of MANIFEST kind SPD make the main table; the other symmetric ones
# (indefinite, semi-definite, negative definite, pattern) a second table that
# shows how fsai refuses them. Nonsymmetric and complex matrices are skipped
# (fsai needs a symmetric matrix).
#
#   scripts/tables/cpu_table_fsai.sh [OUTPUT.md]
#   env: GPUSOLVE (build/gpusolve), GS_MATRICES (../shared/matrices),
#        OMP_NUM_THREADS (2), RAW (build/cpu_table_fsai: one CSV/log per run),
#        TIMEOUT (seconds per run, 600), REPEAT (--repeat: Tp, Ts are the minimum
#        over this many full runs, 3), OMP_WAIT_POLICY (passive: on a shared
#        machine spinning OpenMP threads make the timings meaningless),
#        FSAI_PARAMS (extra fsai options, e.g. "--k 3 --delta 0"; default: none,
#        i.e. the declared defaults), ONLY (space-separated matrix names to run)
set -u
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/../lib/lib_bench.sh"
cd "$(dirname "$0")/../.."
FSAI_PARAMS=${FSAI_PARAMS:-}
ONLY=${ONLY:-}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
table_settings fsai "$@"

# run TAG MATRIX ARGS...: one solve, stored by table_run (lib_bench.sh)
run() {
    local tag=$1 mtx=$2; shift 2
    table_run "$tag" "$TIMEOUT" \
        "$GPUSOLVE" -e cpu -m cg --rhs ax1 --repeat "$REPEAT" --format csv "$@" "$mtx"
}

# A matrix is a candidate when its header says symmetric, or MANIFEST says SPD
# (mesh1e1 and Trefethen_500 are SPD stored as general), or the notes say
# "numerically symmetric" (e05r0000, e20r0000).
table_real_matrices "$MATRICES/MANIFEST.tsv" |
while IFS=$'\t' read -r name rows cols nnz sym field kind rest; do
    case "$sym:$kind:$rest" in
        symmetric:*|*:SPD:*|*"numerically symmetric"*) ;;
        *) continue ;;
    esac
    if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $name "* ]]; then continue; fi
    echo "== $name" >&2
    mtx="$MATRICES/$name.mtx"
    run "$name.jacobi" "$mtx" -p jacobi
    # shellcheck disable=SC2086
    run "$name.fsai" "$mtx" -p fsai $FSAI_PARAMS
done

table_python "$MATRICES/MANIFEST.tsv" "$RAW" "$OUT_MD" "$OMP_NUM_THREADS" "$FSAI_PARAMS" \
    "$REPEAT" "$OMP_WAIT_POLICY" <<'EOF'
import csv, os, sys, datetime, platform
manifest, raw, out_md, threads, fsai_params, repeat, wait_policy = sys.argv[1:8]
result = stored_runs(raw)

def short_error(msg):
    """the message without 'gpusolve: PATH: fsai: '"""
    for prefix in ("gpusolve: ", "fsai: ", "jacobi: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
        if ".mtx: " in msg:
            msg = msg.split(".mtx: ", 1)[1]
    for prefix in ("fsai: ", "jacobi: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg

def status(tag):
    """(iterations or '', converged text) for one run"""
    row, rc, err = result(tag)
    if rc is None:
        return "", "not run"
    if row is None:
        if rc in (124, 137):
            return "", "timeout"
        return "", "setup failed: " + short_error(err)
    conv = "yes" if row["converged"] == "yes" else "no (%s)" % row["reason"]
    return row["iterations"], conv

def extra(row, key):
    for item in row["precond_extra"].split(";"):
        k, _, v = item.partition("=")
        if k == key:
            return v
    return ""

mans = real_manifest(manifest)
now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
lines = []
w = lines.append
w("# fsai on the CPU engine: every real symmetric test matrix")
w("")
w("Made by `scripts/tables/cpu_table_fsai.sh` (%s, `OMP_NUM_THREADS=%s OMP_WAIT_POLICY=%s`, %s). Each run:"
  % (now, threads, wait_policy, platform.node()))
w("`build/gpusolve -e cpu -m cg --rhs ax1 --repeat %s --format csv -p PC [params] MATRIX.mtx`:" % repeat)
w("CG (the paper's method), b = A*1, x0 = 0, stop at ||r|| <= 1e-8 ||b|| or 10000")
w("iterations (the paper's section 5 settings). fsai parameters: %s." %
  ("the defaults" if not fsai_params.strip() else "`%s`" % fsai_params.strip()))
w("Tp = setup (transfer of A + every preconditioner stage), Ts = solve, seconds, each the")
w("minimum over the %s runs (a shared 2-core machine: indicative only). mu(Ĝ), mu(G) = nnz of the" % repeat)
w("factor before/after the postfilter over nnz(A) (the paper's Table 5 columns);")
w("m_max = the largest local system A[P_i,P_i].")
w("")

def table(title, rows, note):
    w("## " + title)
    w("")
    if note:
        w(note)
        w("")
    w("| matrix | n | nnz | fsai params | jacobi its | jacobi Tp s | jacobi Ts s | jacobi conv. "
      "| fsai its | fsai Tp s | fsai Ts s | fsai conv. | mu(Ĝ) | mu(G) | m_max |")
    w("|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|")
    better = worse = 0
    for m in rows:
        name = m["name"]
        jrow = result(name + ".jacobi")[0]
        frow = result(name + ".fsai")[0]
        jits, jconv = status(name + ".jacobi")
        fits, fconv = status(name + ".fsai")
        t = lambda row, key: "%.3g" % float(row[key]) if row else ""
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, m["rows"], m["nnz_stored"], frow["precond_params"] if frow else "",
            jits, t(jrow, "tp_min_s"), t(jrow, "ts_min_s"), jconv,
            fits, t(frow, "tp_min_s"), t(frow, "ts_min_s"), fconv,
            "%.3g" % float(extra(frow, "mu_G_hat")) if frow else "",
            "%.3g" % float(extra(frow, "mu_G")) if frow else "",
            extra(frow, "local_m_max").split(".")[0] if frow else ""))
        jc = jconv == "yes"
        fc = fconv == "yes"
        if fc and (not jc or int(fits) < int(jits)):
            better += 1
        elif jc and (not fc or int(fits) > int(jits)):
            worse += 1
    w("")
    w("fsai needs fewer iterations than jacobi (or converged where jacobi did not): %d "
      "matrices; more (or failed where jacobi converged): %d." % (better, worse))
    w("")

ran = [m for m in mans if result(m["name"] + ".fsai")[1] is not None]
table("SPD matrices (MANIFEST kind SPD)", [m for m in ran if m["kind"] == "SPD"], "")
table("Other symmetric matrices (not SPD: fsai must refuse them with a clear message)",
      [m for m in ran if m["kind"] != "SPD"],
      "Indefinite, semi-definite (bcsstm13), negative definite (sherman1) and pattern "
      "matrices (read with every value 1). CG with jacobi is shown for comparison; "
      "its breakdowns are reported by CG itself.")
open(out_md, "w").write("\n".join(lines) + "\n")
print("wrote", out_md)
EOF
