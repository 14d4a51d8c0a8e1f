#!/usr/bin/env python3
# batch.py - run gpusolve over many matrices with every preconditioner, one process each,
# and write one tidy CSV of every (file, preconditioner, engine) run with a status.
"""Batch driver for gpusolve.

usage: scripts/batch.py [options] INPUT [INPUT ...] --out results.csv

INPUT is a folder (its *.mtx and *.mtx.gz), a Matrix Market file, or a manifest
TSV (MANIFEST.tsv style: a header line, then the matrix name in the first
column; the file is <manifest folder>/<name>.mtx).

gpusolve runs once per preconditioner (and per method when several are asked
for) over all the files with --format csv. Each row of the output is the
program's own CSV row plus three columns: name (the file's base name),
status (solved, not converged, refused, error) and message (the program's
stderr line for that file when it refused it). A file the program printed no
row for still gets a row, so every file appears for every preconditioner.
After the batch a summary is printed: each preconditioner's wins (best Tt
among those that converged), failures by reason, geometric-mean Tt ratio to jacobi.
"""
import argparse
import csv
import math
import os
import re
import shlex
import subprocess
import sys
from collections import Counter, defaultdict

EXTRA_COLUMNS = ["name", "status", "message"]
STATUSES = ("solved", "not converged", "refused", "error")
# Messages that mean the program failed at run time rather than refusing the
# input (exit status 3 in gpusolve's help): out of memory, CUDA library errors.
RUNTIME_RE = re.compile(r"out of memory|cuda(rt)? error|cusparse|cublas|runtime failure", re.I)
NO_GPU_NOTICE = "no CUDA device found, using the CPU engine"


def matrix_name(path):
    base = os.path.basename(path)
    for ext in (".gz", ".mtx"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def expand_inputs(inputs):
    """Return the list of matrix files named by folders, files and manifests."""
    files = []
    for item in inputs:
        if os.path.isdir(item):
            found = [f for f in os.listdir(item) if f.endswith((".mtx", ".mtx.gz"))]
            files += [os.path.join(item, f) for f in sorted(found)]
        elif item.endswith((".tsv", ".txt")):
            files += manifest_files(item)
        else:
            files.append(item)
    seen = set()
    return [f for f in files if not (f in seen or seen.add(f))]


def manifest_files(path):
    """Files of a manifest: first column is the name, the first line a header."""
    folder = os.path.dirname(path) or "."
    out = []
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    for row in rows[1:]:
        if not row or not row[0].strip() or row[0].startswith("#"):
            continue
        name = row[0].strip()
        plain = os.path.join(folder, name + ".mtx")
        gz = plain + ".gz"
        out.append(gz if not os.path.exists(plain) and os.path.exists(gz) else plain)
    return out


def registered_preconds(gpusolve):
    """Every preconditioner gpusolve --list knows, in its order, but none."""
    out = subprocess.run([gpusolve, "--list", "--format", "csv"], capture_output=True,
                         text=True, check=True).stdout
    names = []
    for row in csv.DictReader(out.splitlines()):
        if row["kind"] == "precond" and row["name"] not in names and row["name"] != "none":
            names.append(row["name"])
    return names


def stderr_messages(stderr, files):
    """Map each file to the stderr messages naming it; return the other lines too."""
    by_file, other = {}, []
    # Longest paths first so that a.mtx does not claim the line of a.mtx.gz.
    ordered = sorted(files, key=len, reverse=True)
    for line in stderr.splitlines():
        text = line[len("gpusolve: "):] if line.startswith("gpusolve: ") else line
        # The reader names the line too: "FILE:LINE: message".
        owner, hit = next(((f, m) for f in ordered
                           for m in [re.match(re.escape(f) + r"(?::(\d+))?: ", text)] if m), (None, None))
        if owner is None:
            if text.strip() and not text.startswith("notice:"):
                other.append(text.strip())
            continue
        msg = text[hit.end():].strip()
        if hit.group(1):
            msg = f"line {hit.group(1)}: {msg}"
        by_file[owner] = by_file[owner] + "; " + msg if owner in by_file else msg
    return by_file, other


def expected_engines(engine, stderr):
    if engine == "both":
        return ["cpu", "cuda"]
    if engine == "auto":
        return ["cpu"] if NO_GPU_NOTICE in stderr else ["cuda"]
    return [engine]


def row_status(row):
    return "solved" if row.get("converged") == "yes" else "not converged"


def run_one(gpusolve, files, precond, method, engine, time_limit, extra):
    """One gpusolve process over all files; returns (header, rows)."""
    cmd = [gpusolve, "--format", "csv", "-p", precond, "-e", engine]
    if method != "auto":
        cmd += ["-m", method]
    if time_limit:
        cmd += ["--time-limit", str(time_limit)]
    cmd += extra + list(files)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    reader = csv.DictReader(proc.stdout.splitlines())
    rows = list(reader)
    header = reader.fieldnames or []
    by_file, other = stderr_messages(proc.stderr, files)
    have = defaultdict(dict)
    for row in rows:
        have[row["matrix"]][row["engine"]] = row
    out = []
    for f in files:
        for eng in expected_engines(engine, proc.stderr):
            row = have[f].get(eng)
            if row is not None:
                row = dict(row, name=matrix_name(f), status=row_status(row), message="")
            else:
                msg = by_file.get(f)
                if msg is not None:
                    status = "error" if RUNTIME_RE.search(msg) else "refused"
                else:
                    status = "error"
                    msg = "; ".join(other) or f"no row and no message (gpusolve exit {proc.returncode})"
                row = {"matrix": f, "engine": eng, "precond": precond, "method": method,
                       "name": matrix_name(f), "status": status, "message": msg}
            out.append(row)
    return header, out


def run_batch(gpusolve, files, preconds, methods, engine, time_limit=0, extra=(), log=None):
    header, rows = [], []
    for precond in preconds:
        for method in methods:
            if log:
                print(f"batch: {precond} ({method}) on {len(files)} files", file=log, flush=True)
            h, r = run_one(gpusolve, files, precond, method, engine, time_limit, list(extra))
            header = header or h
            rows += r
    if not header:  # no process printed a row: keep the columns the refusals use
        header = ["matrix", "engine", "precond", "method"]
    columns = header + [c for c in EXTRA_COLUMNS if c not in header]
    return columns, rows


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, restval="", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def fnum(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def failure_reason(row):
    if row["status"] == "not converged":
        return row.get("reason") or "not converged"
    return row["status"]


def summarize(rows, baseline="jacobi"):
    """Wins, failures by reason and geometric-mean Tt ratios, per (engine, precond)."""
    preconds = list(dict.fromkeys(r["precond"] for r in rows))
    problems = defaultdict(dict)  # (matrix, engine) -> precond -> tt of solved runs
    failures = defaultdict(Counter)
    for r in rows:
        if r["status"] == "solved":
            problems[(r["matrix"], r["engine"])][r["precond"]] = fnum(r.get("tt_min_s"))
        else:
            failures[r["precond"]][failure_reason(r)] += 1
    wins = Counter()
    for solved in problems.values():
        if solved:
            wins[min(solved, key=lambda p: (solved[p], preconds.index(p)))] += 1
    ratios = {}
    for p in preconds:
        logs = [math.log(s[p] / s[baseline]) for s in problems.values()
                if p in s and baseline in s and s[p] > 0 and s[baseline] > 0]
        ratios[p] = (math.exp(sum(logs) / len(logs)), len(logs)) if logs else (math.nan, 0)
    solved_by_anyone = sum(1 for s in problems.values() if s)
    return {"preconds": preconds, "wins": dict(wins), "failures": {p: dict(failures[p]) for p in preconds},
            "ratio_vs_baseline": ratios, "baseline": baseline,
            "problems_solved": solved_by_anyone, "problems": len({(r["matrix"], r["engine"]) for r in rows})}


def format_summary(s):
    lines = [f"{s['problems_solved']} of {s['problems']} (matrix, engine) problems solved by some preconditioner",
             f"{'precond':<12} {'wins':>5} {'Tt/' + s['baseline'] + ' (geomean)':>22}  failures"]
    for p in s["preconds"]:
        ratio, n = s["ratio_vs_baseline"][p]
        rtext = f"{ratio:.3g} over {n}" if n else "-"
        fails = ", ".join(f"{k}: {v}" for k, v in sorted(s["failures"][p].items())) or "none"
        lines.append(f"{p:<12} {s['wins'].get(p, 0):>5} {rtext:>22}  {fails}")
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="folders, .mtx[.gz] files or manifest .tsv files")
    ap.add_argument("--precond", help="comma list [default: every registered one but none]")
    ap.add_argument("--method", default="auto", help="comma list; auto lets gpusolve choose [default: auto]")
    ap.add_argument("--engine", default="auto", choices=["cpu", "cuda", "both", "auto"])
    ap.add_argument("--time-limit", type=float, default=0, help="seconds, passed to gpusolve")
    ap.add_argument("--extra", default="", help="more gpusolve arguments, one quoted string")
    ap.add_argument("--gpusolve", default=os.environ.get("GPUSOLVE", "build/gpusolve"))
    ap.add_argument("--out", required=True, help="the CSV to write")
    ap.add_argument("--baseline", default="jacobi", help="the summary's reference preconditioner")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    files = expand_inputs(args.inputs)
    if not files:
        print("batch: no matrix files found", file=sys.stderr)
        return 1
    preconds = args.precond.split(",") if args.precond else registered_preconds(args.gpusolve)
    methods = args.method.split(",")
    columns, rows = run_batch(args.gpusolve, files, preconds, methods, args.engine,
                              args.time_limit, shlex.split(args.extra), log=sys.stderr)
    write_csv(args.out, columns, rows)
    counts = Counter(r["status"] for r in rows)
    print(f"batch: wrote {len(rows)} rows to {args.out} ("
          + ", ".join(f"{counts[s]} {s}" for s in STATUSES) + ")")
    print(format_summary(summarize(rows, args.baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
