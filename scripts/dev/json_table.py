#!/usr/bin/env python3
"""Turn gpusolve --format json lines (stdin) into a Markdown table.

usage: gpusolve --format json ... | scripts/dev/json_table.py matrix method iterations tt_min_s
Columns are JSON keys; a key of the form key/1e6 divides the value."""
import json
import sys


def cell(run, key):
    scale = 1.0
    if "/" in key:
        key, div = key.split("/", 1)
        scale = 1.0 / float(div)
    if "*" in key:
        key, mul = key.split("*", 1)
        scale = float(mul)
    v = run.get(key, "")
    if isinstance(v, float):
        return f"{v * scale:.4g}"
    if isinstance(v, str) and "/" in v and key == "matrix":
        return v.rsplit("/", 1)[-1]
    return str(v)


def main():
    cols = sys.argv[1:] or ["matrix", "n", "nnz", "method", "precond", "iterations",
                            "tp_min_s", "ts_min_s", "tt_min_s", "converged"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        print("| " + " | ".join(cell(run, c) for c in cols) + " |")


if __name__ == "__main__":
    main()
