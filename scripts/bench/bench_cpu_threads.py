#!/usr/bin/env python3
# bench_cpu_threads.py - the CPU engine's threads by work (issue 34): CG or BiCGSTAB +
# Jacobi on every shared matrix, at 1 and 2 (or N) fixed threads and by work, with the
# program before a change beside it, one process a run; per matrix us an iteration and
# the by-work choice against the best fixed count (target: at most 1.2x).
"""usage: scripts/bench/bench_cpu_threads.py [--gpusolve BIN] [--base BIN] [--shared DIR]
                          [--threads 1,2] [--repeat R] [--only NAME,...] [--out FILE.jsonl]
                          [--thread-bytes B]

Each run is `BIN -e cpu -p jacobi -m M --repeat R --format json MATRIX` with
OMP_NUM_THREADS set to the largest count asked for; M is cg for the manifest's SPD
matrices, else bicgstab (cg that does not converge is retried with bicgstab). BIN runs
with --threads T for each T and with --threads 0 (by work); --base BIN (the program
before the change, which has no --threads) runs with OMP_NUM_THREADS=T and its own
default wait policy; --thread-bytes B is passed to the by-work runs (the rule's bytes a
thread, to try another constant without rebuilding). us an iteration is Ts's minimum over the repeats / iterations.
Matrices where neither method converges (by work) are listed apart and left out of the
target. Prints a markdown table; --out keeps every run's JSON.
"""
import argparse
import json
import os
import subprocess
import sys


def run(binary, matrix, method, threads_env, threads_opt, repeat, thread_bytes=None):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads_env))
    cmd = [binary, "-e", "cpu", "-p", "jacobi", "-m", method, "--repeat", str(repeat),
           "--format", "json", "--progress", "never", "--rhs", "ones", "--tol", "1e-8",
           "--maxit", "10000", matrix]
    if threads_opt is not None:
        cmd[1:1] = ["--threads", str(threads_opt)]
    if thread_bytes:
        cmd[1:1] = ["--thread-bytes", str(thread_bytes)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not rows:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:160]}
    return rows[-1]


def manifest(folder):
    with open(os.path.join(folder, "MANIFEST.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        return [dict(zip(head, l.rstrip("\n").split("\t"))) for l in f if l.strip()]


def us(r):
    return 1e6 * r["s_per_iteration"] if r.get("iterations") else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gpusolve", default="build/gpusolve")
    ap.add_argument("--base", help="the program before the change (no --threads)")
    ap.add_argument("--shared", default="../shared/matrices")
    ap.add_argument("--threads", default="1,2", help="fixed counts to compare (comma list)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", help="matrix names (comma list)")
    ap.add_argument("--out", help="JSON lines of every run")
    ap.add_argument("--thread-bytes", type=float, help="--thread-bytes for the by-work runs")
    a = ap.parse_args()
    counts = [int(t) for t in a.threads.split(",")]
    if any(t < 1 for t in counts):
        sys.exit("bench_cpu_threads.py: --threads takes counts >= 1")
    top = max(counts)
    only = set(a.only.split(",")) if a.only else None
    out = open(a.out, "w") if a.out else None
    rows, left_out = [], []
    for m in manifest(a.shared):
        if only and m["name"] not in only:
            continue
        if m["field"] == "complex":
            left_out.append((m["name"], "complex"))
            continue
        path = os.path.join(a.shared, m["name"] + ".mtx")
        tried = ["cg", "bicgstab"] if m["kind"] == "SPD" else ["bicgstab"]
        auto = None
        for method in tried:
            auto = run(a.gpusolve, path, method, top, 0, a.repeat, a.thread_bytes)
            if auto.get("converged") == "yes":
                break
        if auto.get("converged") != "yes":
            left_out.append((m["name"], auto.get("reason") or auto.get("error", "?")))
            continue
        rec = {"matrix": m["name"], "n": auto["n"], "nnz": auto["nnz"], "method": method,
               "iterations": auto["iterations"], "bytes": auto["bytes_per_iteration"],
               "auto_us": us(auto), "auto_threads": auto.get("threads"),
               "floor_ratio": auto.get("floor_ratio")}
        for t in counts:
            rec["t%d_us" % t] = us(run(a.gpusolve, path, method, top, t, a.repeat))
            if a.base:
                rec["base%d_us" % t] = us(run(a.base, path, method, t, None, a.repeat))
        best = min(rec["t%d_us" % t] for t in counts)
        rec["auto_vs_best"] = rec["auto_us"] / best if best > 0 else float("nan")
        rows.append(rec)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
        print("%-24s %s" % (m["name"], " ".join("%s=%.3g" % (k, v) for k, v in rec.items()
                                                 if isinstance(v, float))), file=sys.stderr)
    cols = ["matrix", "n", "nnz", "method", "it", "MB/it"] + ["%d thr" % t for t in counts] + \
        ["by work", "thr", "x best", "floor x"]
    if a.base:
        cols += ["before %d thr" % t for t in counts]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r["matrix"], str(r["n"]), str(r["nnz"]), r["method"], str(r["iterations"]),
                 "%.3f" % (r["bytes"] * 1e-6)] + ["%.1f" % r["t%d_us" % t] for t in counts] + \
            ["%.1f" % r["auto_us"], str(r["auto_threads"]), "%.2f" % r["auto_vs_best"],
             "%.2f" % (r["floor_ratio"] or 0)]
        if a.base:
            cells += ["%.1f" % r["base%d_us" % t] for t in counts]
        print("| " + " | ".join(cells) + " |")
    over = [r for r in rows if r["auto_vs_best"] > 1.2]
    print("\n%d matrices; by work above 1.2x the best fixed count on %d%s" %
          (len(rows), len(over), ": " + ", ".join("%s %.2fx" % (r["matrix"], r["auto_vs_best"])
                                                  for r in over) if over else ""))
    if a.base:
        import math
        for t in counts:
            g = math.exp(sum(math.log(r["base%d_us" % t] / r["auto_us"]) for r in rows) / len(rows))
            print("before at %d threads / by work: geometric mean %.2fx" % (t, g))
    if left_out:
        print("left out (no convergence with jacobi, or complex): " +
              ", ".join("%s (%s)" % x for x in left_out))


if __name__ == "__main__":
    main()
