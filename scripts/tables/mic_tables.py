#!/usr/bin/env python3
"""mic_tables.py - the MIC paper's Tables 1-3 (../shared/papers/mic-pcg-heat3d.txt) from
the JSON lines scripts/tables/mic_tables.sh writes into DIR/raw, with the paper's Tesla C2050
figures beside ours; markdown on stdout (docs/results-mic.md's tables).
Usage: mic_tables.py DIR"""
import json
import math
import os
import sys

# The paper's figures, as printed.
PAPER_T1 = {  # grid: (CPU ms, GPU ms, speedup) of forward + backward substitution
    "800x800x30": (1020, 125, 8.16), "480x480x80": (1058, 101, 10.47),
    "480x480x320": (4784, 278, 17.20), "128x128x480": (458, 39, 11.74),
    "512x512x256": (3958, 256, 15.38), "128x128x1440": (1463, 67, 21.83),
    "1440x1440x80": (9560, 893, 10.70)}
T1_ORDER = ["128x128x480", "480x480x80", "800x800x30", "128x128x1440", "512x512x256",
            "480x480x320", "1440x1440x80"]
PAPER_T2 = {  # (method, model): errors at z = 0.1 .. 0.9 (x = y = 0.5), units 1e-5
    ("mic", "M21"): (1.1236, 1.2342, 1.4347, 1.2358, 1.2362),
    ("mic", "M22"): (1.1192, 1.1331, 1.3019, 1.1376, 1.1164),
    ("mic", "M23"): (0.5786, 0.8941, 1.1893, 0.8937, 0.5734),
    ("mic", "M24"): (1.0304, 1.1343, 1.2184, 1.1342, 1.0328),
    ("mic", "M25"): (1.0122, 1.1121, 1.1834, 1.0101, 1.0152),
    ("ssor-ai", "M21"): (5.5632, 5.9822, 6.2876, 5.9896, 5.5617),
    ("ssor-ai", "M22"): (4.9127, 5.3939, 5.9918, 5.3908, 4.9103),
    ("ssor-ai", "M23"): (2.3243, 2.4232, 3.1967, 2.4234, 2.3253),
    ("ssor-ai", "M24"): (5.1342, 5.1458, 5.7633, 5.1442, 5.1354),
    ("ssor-ai", "M25"): (4.7482, 4.8294, 5.2304, 4.8261, 4.7476)}
PAPER_EXACT = (0.4799, 1.2565, 1.5531, 1.2565, 0.4799)  # units 1e-1
PAPER_T3 = {  # (method, model): CPU s, GPU s, speedup
    ("mic", "M21"): (3.71, 0.40, 9.27), ("mic", "M22"): (23.91, 2.43, 9.83),
    ("mic", "M23"): (63.58, 5.21, 12.20), ("mic", "M24"): (9.62, 0.93, 10.34),
    ("mic", "M25"): (39.36, 3.51, 11.21),
    ("ssor-ai", "M21"): (3.92, 0.42, 9.33), ("ssor-ai", "M22"): (25.40, 2.60, 9.76),
    ("ssor-ai", "M23"): (65.19, 7.02, 9.28), ("ssor-ai", "M24"): (10.13, 1.03, 9.83),
    ("ssor-ai", "M25"): (41.80, 4.24, 9.85)}
MODELS = ["M21", "M22", "M23", "M24", "M25"]
METHOD = {"mic": "MICPCGA (mic)", "ssor-ai": "SSORPCGA (ssor-ai)"}
ZS = ("0.1", "0.3", "0.5", "0.7", "0.9")


class Runs:
    def __init__(self, folder):
        self.raw = os.path.join(folder, "raw")
        self.skipped = {}
        path = os.path.join(folder, "skipped.txt")
        if os.path.exists(path):
            for line in open(path):
                if line.strip():
                    self.skipped[line.split()[0]] = line.strip()
        self.specs = {}
        path = os.path.join(folder, "specs.txt")
        if os.path.exists(path):
            for line in open(path):
                if "=" in line:
                    k, v = line.strip().split("=", 1)
                    self.specs[k] = v
        self.setup = open(os.path.join(folder, "setup.txt")).read() \
            if os.path.exists(os.path.join(folder, "setup.txt")) else ""

    def get(self, tag):
        """The run's JSON object, or None."""
        try:
            for line in open(os.path.join(self.raw, tag + ".jsonl")):
                if line.startswith("{"):
                    return json.loads(line)
        except (OSError, ValueError):
            pass
        return None

    def why(self, tag):
        """Why a run has no result: skipped, timed out, or its last message."""
        if tag in self.skipped:
            return "skipped (budget)"
        try:
            rc = int(open(os.path.join(self.raw, tag + ".rc")).read().strip())
        except (OSError, ValueError):
            return "not run"
        if rc in (124, 137):
            return "timed out"
        try:
            lines = [l.strip() for l in open(os.path.join(self.raw, tag + ".err")) if l.strip()]
        except OSError:
            lines = []
        msg = lines[-1] if lines else "exit %d" % rc
        return ("failed: " + msg[:120]).replace("|", "/")


def extra(r):
    d = {}
    for kv in (r.get("precond_extra") or "").split(";"):
        if "=" in kv:
            k, v = kv.split("=", 1)
            d[k] = v
    return d


def fnum(d, key):
    try:
        v = float(d[key])
        return v if math.isfinite(v) else None
    except (KeyError, TypeError, ValueError):
        return None


def f3(x):
    return "-" if x is None else ("%.3g" % x if x < 1000 else "%.0f" % x)


def ratio(a, b):
    return "-" if a is None or b is None or b <= 0 else "%.2f" % (a / b)


def device_of(runs):
    for tag in ["t23.gpu.mic." + m for m in MODELS] + ["t1.gpu.auto." + g for g in T1_ORDER]:
        r = runs.get(tag)
        if r:
            return "%s (engine %s)" % (r.get("device", "?"), r.get("engine", "?"))
    return "none (no run)"


def spec_note(runs, name):
    s = runs.specs.get(name, name)
    return "" if s == name else " (run as heat3d:%s)" % s


def table1(runs):
    print("## Table 1: forward + backward substitution (ms)\n")
    print("One substitution with L and one with L^T (D^-1 fused), on the same MIC factors "
          "of the heat3d matrix of each grid, timed by mic's setup (first run, then the best "
          "of two more; CUDA events on the GPU, the host clock after a synchronisation on "
          "the CPU). Ours = the scheme `--trisolve auto` keeps. The paper's columns are its "
          "Intel Xeon (CPU) and Tesla C2050 (GPU, its GPUFBS) figures as printed (its text "
          "says microseconds; at these sizes they can only be milliseconds).\n")
    print("| grid | rows | levels | ours | ours ms | blocks ms | sync-free ms | levels ms | cuSPARSE ms | "
          "cuSPARSE / ours | CPU ms | CPU / ours | paper CPU ms | paper GPU ms | paper speedup |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for g in T1_ORDER:
        auto, exact, cpu = (runs.get("t1.%s.%s" % (k, g)) for k in ("gpu.auto", "gpu.exact", "cpu"))
        pc, pg, ps = PAPER_T1[g]
        ea = extra(auto) if auto else {}
        bl, sf, lv = fnum(ea, "fbs_blocks_ms"), fnum(ea, "fbs_syncfree_ms"), fnum(ea, "fbs_levels_ms")
        chosen = ea.get("trisolve")
        ours = {"blocks": bl, "syncfree": sf, "levels": lv}.get(chosen)
        ex = fnum(extra(exact), "fbs_exact_ms") if exact else None
        cp = fnum(extra(cpu), "fbs_cpu_ms") if cpu else None
        rows = next((r["n"] for r in (auto, exact, cpu) if r), None)
        levels = ea.get("levels_L") or (extra(cpu).get("levels_L") if cpu else None)
        cell = lambda r, tag, v: f3(v) if r else runs.why(tag)
        print("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %.2f |" % (
            g, spec_note(runs, g), rows if rows is not None else "-", levels or "-",
            chosen or (runs.why("t1.gpu.auto." + g) if not auto else "-"),
            f3(ours), f3(bl), f3(sf), f3(lv), cell(exact, "t1.gpu.exact." + g, ex), ratio(ex, ours),
            cell(cpu, "t1.cpu." + g, cp), ratio(cp, ours), pc, pg, ps))
    print()


def table2(runs):
    print("## Table 2: errors at t = 0.1, x = y = 0.5 (units 1e-5)\n")
    exact = [3 * math.exp(-0.3 * math.pi ** 2) * math.sin(math.pi * float(z)) for z in ZS]
    print("150 Crank-Nicolson steps (dt = 1/1500), CG to 1e-8 from the previous step's "
          "solution, errors interpolated at the five points (docs/heat3d.md); ER = the "
          "maximum over all grid points. Exact solution there (1e-1): ours %s; paper %s.\n"
          % (" ".join("%.4f" % (10 * u) for u in exact), " ".join("%.4f" % u for u in PAPER_EXACT)))
    print("| model | method | source | z = 0.1 | 0.3 | 0.5 | 0.7 | 0.9 | ER (grid) | its/step min/mean/max |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for p in ("mic", "ssor-ai"):
        for m in MODELS:
            tag = "t23.gpu.%s.%s" % (p, m)
            r = runs.get(tag)
            if r:
                errs = [fnum(r, "er_z" + z) for z in ZS]
                cells = " | ".join("-" if e is None else "%.4f" % (e * 1e5) for e in errs)
                er = fnum(r, "er")
                its = "%s / %.2f / %s" % (r.get("step_iterations_min"),
                                          float(r.get("step_iterations_mean") or 0),
                                          r.get("step_iterations_max"))
                if r.get("converged") != "yes":
                    its += " (%s)" % (r.get("verdict") or r.get("reason"))
                print("| %s%s | %s | ours | %s | %s | %s |" % (
                    m, spec_note(runs, m), METHOD[p], cells,
                    "-" if er is None else "%.4f" % (er * 1e5), its))
            else:
                print("| %s%s | %s | ours | %s | | | | | | |" % (m, spec_note(runs, m), METHOD[p],
                                                            runs.why(tag)))
            print("| %s | %s | paper | %s | | |" % (m, METHOD[p],
                                                    " | ".join("%.4f" % e for e in PAPER_T2[(p, m)])))
    print()


def cpu_total(r):
    """(seconds, note): Tp + Ts x 150 / steps run, and what was extrapolated."""
    tp, ts = fnum(r, "tp_min_s"), fnum(r, "ts_min_s")
    steps, run = int(r.get("time_steps") or 0), int(r.get("steps_run") or 0)
    dt = fnum(r, "dt")
    full = int(round(0.1 / dt)) if dt else 150  # the steps to the paper's t = 0.1
    if tp is None or ts is None or steps <= 0:
        return None, "no times"
    if r.get("converged") == "yes" and run == steps:
        if steps == full:
            return tp + ts, "all %d steps" % steps
        return tp + ts * full / steps, "%d of %d steps, Ts x %d/%d" % (steps, full, full, steps)
    if r.get("reason") == "time limit":
        return tp + ts * full / (run + 1), \
            "lower bound: time limit in step %d, Ts x %d/%d" % (run + 1, full, run + 1)
    return None, (r.get("verdict") or r.get("reason") or "failed").replace("|", "/")


def table3(runs):
    print("## Table 3: total time Tt = Tp + Ts (s) and speedup, 150 steps to t = 0.1\n")
    print("GPU: the full runs of Table 2. CPU: the CPU engine on all the machine's cores "
          "(OpenMP), fewer steps of the same dt, its Ts scaled to 150 steps where the note "
          "says so (each step solves the same kind of system, warm-started; the iterations "
          "per step are in the column). The paper: Intel Xeon quad-core 2.66 GHz against "
          "Tesla C2050.\n")
    print("| model | method | CPU Tt s | CPU note | CPU its/step | GPU Tp s | GPU Ts s | GPU Tt s | "
          "speedup | paper CPU s | paper GPU s | paper speedup |")
    print("| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in ("mic", "ssor-ai"):
        for m in MODELS:
            g, c = runs.get("t23.gpu.%s.%s" % (p, m)), runs.get("t3.cpu.%s.%s" % (p, m))
            gt = fnum(g, "tt_min_s") if g else None
            if c:
                ct, note = cpu_total(c)
                cits = "%s / %.2f / %s" % (c.get("step_iterations_min"),
                                           float(c.get("step_iterations_mean") or 0),
                                           c.get("step_iterations_max"))
            else:
                ct, note, cits = None, runs.why("t3.cpu.%s.%s" % (p, m)), "-"
            pcpu, pgpu, psp = PAPER_T3[(p, m)]
            print("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |" % (
                m, spec_note(runs, m), METHOD[p], f3(ct), note, cits,
                f3(fnum(g, "tp_min_s")) if g else runs.why("t23.gpu.%s.%s" % (p, m)),
                f3(fnum(g, "ts_min_s")) if g else "-", f3(gt),
                ("%s%s" % ("≥ " if note.startswith("lower") else "", ratio(ct, gt))),
                pcpu, pgpu, psp))
    print()


def main(folder):
    runs = Runs(folder)
    print("# MIC paper Tables 1-3: our runs beside the paper's\n")
    print("Device: %s.\n" % device_of(runs))
    print("```\n%s```\n" % runs.setup)
    table1(runs)
    table2(runs)
    table3(runs)
    if runs.skipped:
        print("Not run (budget spent): %s.\n" % ", ".join(sorted(runs.skipped)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
