"""lib_bench.py - what the benchmark and table scripts' Python shares: the JSON lines
of the GPU benchmarks read back (bench_devloop.sh, bench_devloop_steps.sh,
bench_fused_mic.sh import it, putting this folder on sys.path) and the runs the
CPU tables stored (cpu_table_*.sh: lib_bench.sh's table_python puts this file in
front of each table's program)."""
import csv
import json
import os


def read_variants(path, key=lambda r: r["matrix"]):
    """The runs of the JSON lines in path (lines not starting with '{' skipped) as
    {key(run): {run["variant"]: run}}, the last run of a pair winning, and the
    device the last run named ("" if none)."""
    rows, device = {}, ""
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        device = r.get("device", device)
        rows.setdefault(key(r), {})[r["variant"]] = r
    return rows, device


def stored_runs(raw):
    """result(tag) for the runs table_run (lib_bench.sh) stored in the folder raw"""
    def result(tag):
        """(first CSV row as a dict or None, exit status or None if not run,
        last stderr line)"""
        base = os.path.join(raw, tag)
        if not os.path.exists(base + ".rc"):
            return None, None, ""
        rc = int(open(base + ".rc").read().strip() or -1)
        rows = list(csv.DictReader(open(base + ".csv"))) if os.path.getsize(base + ".csv") else []
        err = open(base + ".err").read().strip().splitlines()
        return (rows[0] if rows else None), rc, (err[-1] if err else "")
    return result


def real_manifest(path):
    """the MANIFEST rows (dicts) of the real, i.e. non-complex, matrices"""
    return [r for r in csv.DictReader(open(path), delimiter="\t") if r["field"] != "complex"]


def program_message(msg):
    """a gpusolve error line without its 'gpusolve: INPUT: ' start"""
    return msg.split(": ", 2)[-1] if msg.startswith("gpusolve:") else msg
