#!/usr/bin/env python3
# plots.py - pictures from a scripts/batch.py CSV (and a gpusolve --history CSV): performance
# profiles, setup/solve bars, GPU/CPU speedups, Tp stage split, residual against time.
"""Plots from a batch CSV.

usage: scripts/plots.py all RESULTS.csv --out DIR [--history HISTORY.csv] [--matrix NAME]
       scripts/plots.py profile|bars|speedup|stages RESULTS.csv --out DIR
       scripts/plots.py history HISTORY.csv --out DIR [--matrix NAME]

Every picture is written as DIR/<name>.png and DIR/<name>.svg:
  profile_tt, profile_iterations, profile_tp   Dolan-More performance profiles
  setup_solve_<engine>                         Tp + Ts stacked bars per matrix
  speedup                                      CPU time / CUDA time of Tp, Ts, Tt
  tp_stages_<engine>                           share of each Tp stage per preconditioner
  history                                      relative residual against time, one matrix
A picture whose data is absent (no cuda rows, no history file) is skipped
with a message.
"""
import argparse
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from batch import fnum, read_csv  # noqa: E402  (the batch CSV's own reader, beside this file)

FORMATS = ("png", "svg")
PROFILE_METRICS = {"tt": ("tt_min_s", "total time Tt"), "iterations": ("iterations", "iterations"),
                   "tp": ("tp_min_s", "setup time Tp")}


def performance_profile(values):
    """Dolan-More profile. values: {solver: {problem: cost or None}}, None (or
    nan, inf) for a failure. Returns {solver: (taus, rho)}: rho[i] is the
    share of all problems the solver solved within taus[i] times the best
    solver's cost; taus are the solver's sorted finite ratios (a failure's
    ratio is infinite, so it never counts), rho is nondecreasing in [0, 1].
    Costs of 0 (e.g. 0 iterations) are raised to the smallest positive cost so
    that ratios stay finite."""
    problems = sorted({p for per in values.values() for p in per})
    def ok(v):
        return v is not None and math.isfinite(v) and v >= 0
    positive = [v for per in values.values() for v in per.values() if ok(v) and v > 0]
    floor = min(positive) if positive else 1.0
    best = {}
    for p in problems:
        costs = [max(per[p], floor) for per in values.values() if ok(per.get(p))]
        best[p] = min(costs) if costs else None
    out = {}
    for solver, per in values.items():
        ratios = sorted(max(per[p], floor) / best[p] for p in problems if ok(per.get(p)))
        n = len(problems) or 1
        out[solver] = ([1.0] + ratios, [0.0] + [(i + 1) / n for i in range(len(ratios))])
    return out


def profile_input(rows, column):
    """{precond: {(matrix, engine): cost}} with None for runs that did not solve."""
    values = defaultdict(dict)
    for r in rows:
        v = fnum(r.get(column)) if r.get("status") == "solved" else None
        values[r["precond"]][(r["matrix"], r["engine"])] = v if v is None or math.isfinite(v) else None
    return values


def save(fig, out_dir, name):
    paths = []
    for ext in FORMATS:
        path = os.path.join(out_dir, f"{name}.{ext}")
        fig.savefig(path, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


def plot_profiles(rows, out_dir):
    written = []
    for key, (column, label) in PROFILE_METRICS.items():
        prof = performance_profile(profile_input(rows, column))
        if not any(len(t) > 1 for t, _ in prof.values()):
            print(f"plots: profile_{key}: no solved runs, skipped")
            continue
        top = max(max(t) for t, _ in prof.values())
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for solver, (taus, rho) in prof.items():
            ax.step(taus + [max(top, 1.0) * 1.5], rho + [rho[-1]], where="post", label=solver)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"ratio to the best {label} (tau)")
        ax.set_ylabel("share of problems within tau")
        ax.set_title(f"Performance profile, {label}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        written += save(fig, out_dir, f"profile_{key}")
    return written


def engines_of(rows):
    return list(dict.fromkeys(r["engine"] for r in rows if r.get("engine")))


def plot_bars(rows, out_dir):
    """Small multiples: one panel per matrix, Tp under Ts for every preconditioner."""
    written = []
    for eng in engines_of(rows):
        runs = [r for r in rows if r["engine"] == eng and math.isfinite(fnum(r.get("tp_min_s")))]
        if not runs:
            print(f"plots: setup_solve_{eng}: no timed runs, skipped")
            continue
        preconds = list(dict.fromkeys(r["precond"] for r in rows))
        matrices = list(dict.fromkeys(r["name"] for r in runs))
        cols = min(4, len(matrices))
        nrows = math.ceil(len(matrices) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows), squeeze=False)
        for ax, m in zip(axes.flat, matrices):
            got = {r["precond"]: r for r in runs if r["name"] == m}
            tp = [fnum(got[p]["tp_min_s"]) if p in got else 0.0 for p in preconds]
            ts = [fnum(got[p]["ts_min_s"]) if p in got else 0.0 for p in preconds]
            x = range(len(preconds))
            ax.bar(x, tp, color="tab:orange", label="Tp (setup)")
            ax.bar(x, ts, bottom=tp, color="tab:blue", label="Ts (solve)")
            for i, p in enumerate(preconds):
                if p in got and got[p]["status"] != "solved":
                    ax.text(i, tp[i] + ts[i], "x", ha="center", va="bottom", color="red")
                elif p not in got:
                    ax.text(i, 0, "-", ha="center", va="bottom", color="gray")
            ax.set_xticks(list(x))
            ax.set_xticklabels(preconds, rotation=45, ha="right", fontsize=7)
            ax.set_title(m, fontsize=9)
            ax.set_ylabel("seconds", fontsize=7)
        for ax in list(axes.flat)[len(matrices):]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"Setup and solve time per matrix ({eng}; x: not converged, -: refused)")
        fig.tight_layout()
        written += save(fig, out_dir, f"setup_solve_{eng}")
    return written


def plot_speedup(rows, out_dir):
    by = defaultdict(dict)
    for r in rows:
        if r["status"] == "solved":
            by[(r["matrix"], r["precond"])][r["engine"]] = r
    pairs = [(k, v["cpu"], v["cuda"]) for k, v in by.items() if "cpu" in v and "cuda" in v]
    if not pairs:
        print("plots: speedup: no matrix solved on both the cpu and cuda engines, skipped")
        return []
    preconds = list(dict.fromkeys(k[1] for k, _, _ in pairs))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, (col, label) in zip(axes, [("tp_min_s", "Tp"), ("ts_min_s", "Ts"), ("tt_min_s", "Tt")]):
        for p in preconds:
            pts = [(fnum(c["nnz"]), fnum(c[col]) / fnum(g[col])) for (m, q), c, g in pairs
                   if q == p and fnum(g[col]) > 0]
            if pts:
                ax.scatter(*zip(*pts), label=p, s=14)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nnz(A)")
        ax.set_title(f"{label}: CPU time / GPU time")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("speedup")
    axes[0].legend(fontsize=8)
    return save(fig, out_dir, "speedup")


def parse_stages(text):
    """'name=seconds;name=seconds' -> [(name, seconds)]."""
    out = []
    for part in (text or "").split(";"):
        name, sep, val = part.rpartition("=")
        if sep and math.isfinite(fnum(val)):
            out.append((name.strip(), fnum(val)))
    return out


def plot_stages(rows, out_dir):
    """Per preconditioner, each stage's share of Tp summed over the matrices."""
    written = []
    for eng in engines_of(rows):
        totals = defaultdict(lambda: defaultdict(float))
        for r in rows:
            if r["engine"] == eng:
                for name, sec in parse_stages(r.get("tp_stages")):
                    totals[r["precond"]][name] += sec
        preconds = [p for p in dict.fromkeys(r["precond"] for r in rows) if sum(totals[p].values()) > 0]
        if not preconds:
            print(f"plots: tp_stages_{eng}: no Tp stages, skipped")
            continue
        stages = list(dict.fromkeys(s for p in preconds for s in totals[p]))
        colors = plt.get_cmap("tab20")
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(preconds) + 2))
        for j, s in enumerate(stages):
            left = [sum(totals[p][t] for t in stages[:j]) / sum(totals[p].values()) for p in preconds]
            width = [totals[p][s] / sum(totals[p].values()) for p in preconds]
            ax.barh(preconds, width, left=left, color=colors(j % 20), label=s)
        for i, p in enumerate(preconds):
            ax.text(1.01, i, f"{sum(totals[p].values()):.3g} s", va="center", fontsize=8)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.set_xlabel("share of Tp, summed over the matrices (right: total)")
        ax.set_title(f"Setup stages per preconditioner ({eng})")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4)
        written += save(fig, out_dir, f"tp_stages_{eng}")
    return written


def plot_history(path, out_dir, matrix=None):
    if not path or not os.path.exists(path):
        print("plots: history: no --history CSV, skipped")
        return []
    rows = read_csv(path)
    if not rows:
        print(f"plots: history: {path} has no rows, skipped")
        return []
    def name(r):
        return os.path.basename(r["matrix"]).removesuffix(".gz").removesuffix(".mtx")
    if matrix is None:  # the matrix that most preconditioners have a history for
        count = defaultdict(set)
        for r in rows:
            count[name(r)].add(r["precond"])
        matrix = max(count, key=lambda m: len(count[m]))
    lines = defaultdict(list)
    for r in rows:
        if name(r) == matrix or r["matrix"] == matrix:
            lines[(r["precond"], r["method"], r["engine"])].append((fnum(r["seconds"]), fnum(r["rel_residual"])))
    if not lines:
        print(f"plots: history: no rows for matrix {matrix}, skipped")
        return []
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for (p, m, e), pts in lines.items():
        pts.sort()
        ax.plot([t for t, _ in pts], [v for _, v in pts], marker=".", ms=3, label=f"{p} ({m}, {e})")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the start of the solve")
    ax.set_ylabel("relative residual")
    ax.set_title(f"Convergence on {matrix}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out_dir, "history")


def plot_all(rows, out_dir, history=None, matrix=None):
    os.makedirs(out_dir, exist_ok=True)
    return (plot_profiles(rows, out_dir) + plot_bars(rows, out_dir) + plot_speedup(rows, out_dir)
            + plot_stages(rows, out_dir) + plot_history(history, out_dir, matrix))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["all", "profile", "bars", "speedup", "stages", "history"])
    ap.add_argument("csv", help="batch.py results (history: the --history CSV)")
    ap.add_argument("--out", required=True, help="folder for the pictures")
    ap.add_argument("--history", help="gpusolve --history CSV for the residual picture")
    ap.add_argument("--matrix", help="history: the matrix to show [default: the one most preconditioners ran]")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.what == "history":
        written = plot_history(args.csv, args.out, args.matrix)
    else:
        rows = read_csv(args.csv)
        one = {"profile": plot_profiles, "bars": plot_bars, "speedup": plot_speedup, "stages": plot_stages}
        written = (plot_all(rows, args.out, args.history, args.matrix) if args.what == "all"
                   else one[args.what](rows, args.out))
    for path in written:
        print(f"plots: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
