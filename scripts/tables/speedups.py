#!/usr/bin/env python3
"""speedups.py - the markdown of scripts/tables/speedups.sh's parts that have no
table script of their own: the batch over the shared set with --engine both, and
the ISAI setup of scripts/bench/bench_isai.sh; and the driver's table of parts.

    python3 scripts/tables/speedups.py join OUT.csv IN.csv [IN.csv ...]
    python3 scripts/tables/speedups.py batch BATCH.csv        (markdown on stdout)
    python3 scripts/tables/speedups.py isai RUNS.csv          (markdown on stdout)
    python3 scripts/tables/speedups.py parts PARTS.tsv        (markdown on stdout)

Speedup = CPU engine time / GPU engine time, per matrix and engine pair of the same
process (batch: both engines solved the system; isai: the label "isai" on both).
"""
import csv
import math
import os
import sys


def read_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def num(text):
    try:
        v = float(text)
        return v if math.isfinite(v) else math.nan
    except (TypeError, ValueError):
        return math.nan


def ratio(cpu, gpu):
    c, g = num(cpu), num(gpu)
    return c / g if c > 0 and g > 0 else math.nan


def fx(x, d=3):
    return "-" if x != x else f"{x:.{d}g}x"


def fms(seconds):
    v = num(seconds)
    return "-" if v != v else f"{v * 1e3:.4g}"


def fnum(text):
    v = num(text)
    return "-" if v != v else f"{v:.3g}"


def median(values):
    v = sorted(x for x in values if x == x)
    if not v:
        return math.nan
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def geomean(values):
    logs = [math.log(v) for v in values if v == v and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def join(out, inputs):
    """One CSV of several batch.py CSVs (the columns in the order first seen)."""
    columns, rows = [], []
    for path in inputs:
        if not os.path.exists(path):
            print(f"speedups.py: join: no {path}, left out", file=sys.stderr)
            continue
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            columns += [c for c in (reader.fieldnames or []) if c not in columns]
            rows += list(reader)
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, restval="", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print(f"speedups.py: {len(rows)} rows into {out}", file=sys.stderr)


def batch(path):
    rows = read_rows(path)
    by = {}
    for r in rows:
        by.setdefault((r.get("precond", ""), r.get("name") or r.get("matrix", "")), {})[r.get("engine", "")] = r
    engines = sorted({r.get("engine", "") for r in rows})
    devices = sorted({r.get("device", "") for r in rows if r.get("engine") == "cuda" and r.get("device")})
    cpus = sorted({r.get("device", "") for r in rows if r.get("engine") == "cpu" and r.get("device")})
    out = [f"GPU: {', '.join(devices) or 'none'}; CPU engine: {', '.join(cpus) or 'none'}; "
           f"engines in the CSV: {', '.join(engines) or 'none'}.", ""]
    if "cuda" not in engines or "cpu" not in engines:
        out.append("No matrix ran on both engines (a batch without --engine both, or a plumbing run "
                   "without a GPU): no speedups.")
        return "\n".join(out) + "\n"
    out += ["| precond | both solved | GPU Ts below CPU Ts | Tp speedup geomean / median | Ts speedup geomean / median "
            "| Tt speedup geomean / median | Ts speedup min / max | GPU Ts not below CPU Ts (GPU / CPU ms) |",
            "| --- | ---: | ---: | --- | --- | --- | --- | --- |"]
    detail = ["", "| precond | matrix | n | iterations GPU / CPU | CPU Tp ms | GPU Tp ms | CPU Ts ms "
              "| GPU Ts ms | Tp speedup | Ts speedup | Tt speedup |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for p in dict.fromkeys(k[0] for k in by):
        pairs = [(m, e["cpu"], e["cuda"]) for (q, m), e in by.items()
                 if q == p and "cpu" in e and "cuda" in e
                 and e["cpu"].get("status") == "solved" and e["cuda"].get("status") == "solved"]
        if not pairs:
            out.append(f"| {p} | 0 | - | - | - | - | - | - |")
            continue
        sp = {t: [ratio(c[t], g[t]) for _, c, g in pairs] for t in ("tp_min_s", "ts_min_s", "tt_min_s")}
        losses = [f"{m} ({fms(g['ts_min_s'])} / {fms(c['ts_min_s'])})" for m, c, g in pairs
                  if not num(g["ts_min_s"]) < num(c["ts_min_s"])]
        ts = [v for v in sp["ts_min_s"] if v == v]
        spread = " | ".join(f"{fx(geomean(sp[t]))} / {fx(median(sp[t]))}" for t in ("tp_min_s", "ts_min_s", "tt_min_s"))
        out.append(f"| {p} | {len(pairs)} | {len(pairs) - len(losses)} of {len(pairs)} | {spread} | "
                   f"{fx(min(ts) if ts else math.nan)} / {fx(max(ts) if ts else math.nan)} | "
                   f"{', '.join(losses) or 'none'} |")
        for m, c, g in sorted(pairs, key=lambda x: x[0].lower()):
            detail.append(f"| {p} | {m} | {c.get('n', '')} | {g.get('iterations', '')} / {c.get('iterations', '')} | "
                          f"{fms(c['tp_min_s'])} | {fms(g['tp_min_s'])} | {fms(c['ts_min_s'])} | {fms(g['ts_min_s'])} | "
                          f"{fx(ratio(c['tp_min_s'], g['tp_min_s']))} | {fx(ratio(c['ts_min_s'], g['ts_min_s']))} | "
                          f"{fx(ratio(c['tt_min_s'], g['tt_min_s']))} |")
    return "\n".join(out + detail) + "\n"


def isai(path):
    rows = [r for r in read_rows(path) if r.get("label") == "isai"]
    cpu = {r["matrix"]: r for r in rows if r.get("engine") == "cpu"}
    gpu = {r["matrix"]: r for r in rows if r.get("engine") != "cpu"}
    out = [f"GPU: {', '.join(sorted({r.get('device', '') for r in gpu.values()})) or 'none'} "
           f"(engine {', '.join(sorted({r.get('engine', '') for r in gpu.values()})) or '-'}); "
           f"CPU engine: {', '.join(sorted({r.get('device', '') for r in cpu.values()})) or 'none'}. "
           "IDR(4), tol 1e-10, b = 1, x0 = 0; Tp, Ts: GPU the minimum of its runs, CPU one run.", "",
           "| problem | GPU Tp ms | CPU Tp ms | CPU/GPU Tp | GPU Ts ms | CPU Ts ms | CPU/GPU Ts | CPU/GPU Tt "
           "| its GPU / CPU | GPU floor ratio | CPU floor ratio | CPU threads |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    for m, g in gpu.items():
        c = cpu.get(m)
        if c is None:
            out.append(f"| {m} | {fms(g['tp_min_s'])} | no CPU run | - | {fms(g['ts_min_s'])} | - | - | - | "
                       f"{g.get('iterations', '')} / - | {fnum(g.get('floor_ratio'))} | - | - |")
            continue
        out.append(f"| {m} | {fms(g['tp_min_s'])} | {fms(c['tp_min_s'])} | {fx(ratio(c['tp_min_s'], g['tp_min_s']))} | "
                   f"{fms(g['ts_min_s'])} | {fms(c['ts_min_s'])} | {fx(ratio(c['ts_min_s'], g['ts_min_s']))} | "
                   f"{fx(ratio(c['tt_min_s'], g['tt_min_s']))} | {g.get('iterations', '')} / {c.get('iterations', '')} | "
                   f"{fnum(g.get('floor_ratio'))} | {fnum(c.get('floor_ratio'))} | "
                   f"{c.get('threads', '')} {c.get('thread_policy', '')} |")
    return "\n".join(out) + "\n"


def parts(path):
    out = ["| part | status | seconds | expected s | what it remeasures |", "| --- | --- | ---: | ---: | --- |"]
    with open(path) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if len(f) >= 5:
                out.append("| " + " | ".join(f[:5]) + " |")
    return "\n".join(out) + "\n"


def main(argv):
    usage = __doc__.split("\n\n")[1]
    if len(argv) < 3 or argv[1] not in ("join", "batch", "isai", "parts") or (argv[1] == "join" and len(argv) < 4):
        print("usage:\n" + usage, file=sys.stderr)
        return 2
    for path in argv[3:] if argv[1] == "join" else argv[2:3]:
        if argv[1] != "join" and not os.path.exists(path):
            print(f"speedups.py: {argv[1]}: no file {path}", file=sys.stderr)
            return 1
    if argv[1] == "join":
        join(argv[2], argv[3:])
    else:
        sys.stdout.write({"batch": batch, "isai": isai, "parts": parts}[argv[1]](argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
