"""lib_bench.py - what the GPU benchmark scripts' tables share (bench_devloop.sh,
bench_devloop_steps.sh, bench_fused_mic.sh): their JSON lines read back. Imported
by each script's table code, which puts this folder on sys.path."""
import json


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
