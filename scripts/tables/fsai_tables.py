#!/usr/bin/env python3
"""fsai_tables.py - the tables and the plot of docs/results-fsai.md from the
JSON lines of scripts/bench/bench_fsai.sh (gpu.jsonl, cpu.jsonl in DIR).

Writes DIR/results.md (Table 6 and 7 style tables, the per-stage split of Tp,
the bandwidth floor and peak memory of FSAI-PCG on the GPU) and
DIR/fsai-fig3.png (setup and solve time per matrix, both engines: the
paper's Figure 3); prints a short summary.
    python3 scripts/tables/fsai_tables.py DIR
"""
import json
import os
import sys


def load(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def key(r):
    """Case name: the label for generated problems, the file's base name otherwise."""
    if r.get("case") != "real":
        return r["case"]
    return os.path.basename(r["matrix"]).replace(".mtx", "")


def extra(r, name):
    for kv in (r.get("precond_extra") or "").split(";"):
        if kv.startswith(name + "="):
            return float(kv.split("=", 1)[1])
    return float("nan")


def index(rows):
    out = {}
    for r in rows:
        out[(key(r), r["precond"])] = r
    return out


def its(r):
    if r is None:
        return "-"
    return str(r["iterations"]) + ("" if r["converged"] == "yes" else " (no)")


def f(x, d=4):
    return "-" if x is None or x != x else f"{x:.{d}g}"


def main():
    d = sys.argv[1]
    gpu, cpu = load(os.path.join(d, "gpu.jsonl")), load(os.path.join(d, "cpu.jsonl"))
    G, C = index(gpu), index(cpu)
    names = []
    for r in gpu + cpu:
        k = key(r)
        if k not in names:
            names.append(k)
    device = gpu[0]["device"] if gpu else "?"
    cpu_dev = cpu[0]["device"] if cpu else "?"
    md = []
    md.append(f"GPU: {device}; CPU engine: {cpu_dev}. CG, b = A*1, x0 = 0, tol 1e-8; "
              "Tp, Ts: minimum over the runs (GPU 3, CPU 1 for the 2M-row problems, 3 for the "
              "small matrices).\n")
    # Table 6: iterations
    md.append("### Table 6 style: CG iterations, FSAI vs Jacobi (GPU engine; CPU engine in brackets)\n")
    md.append("| matrix | n | nnz | fsai params | mu(G^) | mu(G) | m_max | FSAI | Jacobi |")
    md.append("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for k in names:
        g, c = G.get((k, "fsai")), C.get((k, "fsai"))
        gj, cj = G.get((k, "jacobi")), C.get((k, "jacobi"))
        r = g or c
        if r is None:
            continue
        md.append(f"| {k} | {r['n']} | {r['nnz']} | {r['precond_params'].replace(' precision=double', '')} | "
                  f"{f(extra(r, 'mu_G_hat'), 3)} | {f(extra(r, 'mu_G'), 3)} | {int(extra(r, 'local_m_max'))} | "
                  f"{its(g)} [{its(c)}] | {its(gj)} [{its(cj)}] |")
    # Table 7: GPU vs CPU
    md.append("\n### Table 7 style: FSAI-PCG, GPU vs CPU engine (seconds; speedup = CPU / GPU)\n")
    md.append("| matrix | GPU Tp | GPU Ts | GPU Tt | CPU Tp | CPU Ts | CPU Tt | Tp speedup | Ts speedup | Tt speedup | GPU Jacobi Tt |")
    md.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    fig = []
    for k in names:
        g, c, gj = G.get((k, "fsai")), C.get((k, "fsai")), G.get((k, "jacobi"))
        if g is None or c is None:
            continue
        sp = [c[t] / g[t] if g[t] > 0 else float("nan") for t in ("tp_min_s", "ts_min_s", "tt_min_s")]
        md.append(f"| {k} | {f(g['tp_min_s'])} | {f(g['ts_min_s'])} | {f(g['tt_min_s'])} | "
                  f"{f(c['tp_min_s'])} | {f(c['ts_min_s'])} | {f(c['tt_min_s'])} | "
                  f"{f(sp[0], 3)}x | {f(sp[1], 3)}x | {f(sp[2], 3)}x | {f(gj['tt_min_s']) if gj else '-'} |")
        fig.append((k, g["tp_min_s"], g["ts_min_s"], c["tp_min_s"], c["ts_min_s"]))
    # Per-stage split, floor, memory (GPU, generated problems)
    md.append("\n### GPU setup: per-stage split of Tp (seconds), the iteration against its floor, peak memory\n")
    stages = ["transfer A", "transfer", "csr of A", "prefilter", "pattern", "gather",
              "factorisation", "postfilter", "transpose", "layout", "layout of A"]
    md.append("| matrix | Tp | " + " | ".join(stages) + " |")
    md.append("| --- | ---: | " + " | ".join(["---:"] * len(stages)) + " |")
    for k in names:
        g = G.get((k, "fsai"))
        if g is None or g.get("case") == "real":
            continue
        st = dict(kv.split("=", 1) for kv in g["tp_stages"].split(";") if "=" in kv)
        md.append(f"| {k} | {f(g['tp_min_s'])} | " +
                  " | ".join(f(float(st[s])) if s in st else "-" for s in stages) + " |")
    md.append("\n| matrix | precond | us/it | floor us/it | ratio | device peak MB | A + G + G^T + CG vectors MB | peak ratio |")
    md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k in names:
        for pc in ("fsai", "jacobi"):
            g = G.get((k, pc))
            if g is None or g.get("case") == "real":
                continue
            us = g["s_per_iteration"] * 1e6
            floor = g["bytes_per_iteration"] / g["bandwidth_Bps"] * 1e6 if g["bandwidth_Bps"] else float("nan")
            n, nnz, nm = g["n"], g["nnz"], g["nnz_M"]
            a_bytes = nnz * 12 + (n + 1) * 8
            m_bytes = 2 * (nm * 12 + (n + 1) * 8) if pc == "fsai" else 8 * n
            vec = 8 * n * (7 if pc == "fsai" else 6)  # b x r p Ap z (+ t for fsai)
            base = a_bytes + m_bytes + vec
            peak = g["device_peak_bytes"]
            md.append(f"| {k} | {pc} | {f(us)} | {f(floor)} | {f(us / floor, 3)} | {peak / 1e6:.0f} | "
                      f"{base / 1e6:.0f} | {peak / base:.2f} |")
    open(os.path.join(d, "results.md"), "w").write("\n".join(md) + "\n")
    # Figure 3
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig_rows = fig
        if fig_rows:
            h = max(4, 0.28 * len(fig_rows) + 1.5)
            fg, ax = plt.subplots(figsize=(9, h))
            y = list(range(len(fig_rows)))
            lab = [r[0] for r in fig_rows]
            gtp = [r[1] for r in fig_rows]
            gts = [r[2] for r in fig_rows]
            ctp = [r[3] for r in fig_rows]
            cts = [r[4] for r in fig_rows]
            w = 0.38
            ax.barh([v - w / 2 for v in y], gtp, w, color="tab:blue", label="GPU setup Tp")
            ax.barh([v - w / 2 for v in y], gts, w, left=gtp, color="tab:cyan", label="GPU solve Ts")
            ax.barh([v + w / 2 for v in y], ctp, w, color="tab:red", label="CPU setup Tp")
            ax.barh([v + w / 2 for v in y], cts, w, left=ctp, color="tab:orange", label="CPU solve Ts")
            ax.set_yticks(y)
            ax.set_yticklabels(lab, fontsize=7)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlim(left=0.5 * min(v for v in gtp + ctp if v > 0))  # no bar starts off-scale
            ax.set_xlabel("seconds (log scale; bars: Tp then Ts stacked)")
            ax.set_title(f"FSAI-PCG setup and solve time, GPU ({device}) vs CPU ({cpu_dev})", fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
            fg.tight_layout()
            fg.savefig(os.path.join(d, "fsai-fig3.png"), dpi=110)
    except Exception as ex:  # the tables matter more than the plot
        print(f"fsai_tables.py: no plot: {ex}", file=sys.stderr)
    # short summary for the terminal
    print(f"device: {device}")
    print(f"{'case':32s} {'its f/j':>11s} {'GPU Tp':>9s} {'CPU Tp':>9s} {'Tp x':>7s} {'GPU Ts':>9s} {'Tt x':>6s} {'floor':>6s} {'peak':>6s}")
    for k in names:
        g, c, gj = G.get((k, "fsai")), C.get((k, "fsai")), G.get((k, "jacobi"))
        if g is None:
            continue
        floor = g["bytes_per_iteration"] / g["bandwidth_Bps"] if g["bandwidth_Bps"] else float("nan")
        n, nnz, nm = g["n"], g["nnz"], g["nnz_M"]
        base = nnz * 12 + (n + 1) * 8 + 2 * (nm * 12 + (n + 1) * 8) + 56 * n
        print(f"{k[:32]:32s} {g['iterations']:5d}/{(gj or {}).get('iterations', -1):<5d} {g['tp_min_s']:9.4f} "
              f"{(c or {}).get('tp_min_s', float('nan')):9.4f} "
              f"{(c or {}).get('tp_min_s', float('nan')) / g['tp_min_s']:7.1f} {g['ts_min_s']:9.4f} "
              f"{(c or {}).get('tt_min_s', float('nan')) / g['tt_min_s']:6.1f} "
              f"{g['s_per_iteration'] / floor:6.2f} {g['device_peak_bytes'] / base:6.2f}")
    big = [k for k in names if G.get((k, "fsai")) and G[(k, "fsai")].get("case") != "real"]
    if big:
        g = max((G[(k, "fsai")] for k in big), key=lambda r: r["nnz_M"] + r["nnz"])
        print(f"stages of {key(g)}: {g['tp_stages']}")


if __name__ == "__main__":
    main()
