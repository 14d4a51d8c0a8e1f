#!/usr/bin/env python3
"""spai_tables.py - the tables of docs/results-spai.md from the runs of
scripts/tables/spai_tables.sh (DIR/raw/TAG.jsonl, .err, .rc).

Writes DIR/tables.md (markdown, to paste into docs/results-spai.md) and
DIR/table2.csv, table1.csv, table4.csv; prints the markdown.
    python3 scripts/tables/spai_tables.py DIR
"""
import csv
import json
import os
import re
import sys


def load(raw, tag):
    """(rows by matrix base name, stderr messages by base name, exit status or None)"""
    base = os.path.join(raw, tag)
    if not os.path.exists(base + ".rc"):
        return {}, {}, None
    rows, msgs = {}, {}
    for line in open(base + ".jsonl", errors="replace"):
        if line.startswith("{"):
            r = json.loads(line)
            rows[name_of(r["matrix"])] = r
    for line in open(base + ".err", errors="replace"):
        text = line.strip()
        if text.startswith("gpusolve: "):
            text = text[len("gpusolve: "):]
        m = re.match(r"(\S+?\.mtx)(?::\d+)?: (.*)", text)
        if m:
            msgs[name_of(m.group(1))] = m.group(2)
    rc = int(open(base + ".rc").read().strip() or -1)
    return rows, msgs, rc


def name_of(path):
    return os.path.basename(path).replace(".mtx", "")


def short(msg):
    for key, text in (("would be zero", "M singular (zero column)"),
                      ("rank deficient", "A singular (rank-deficient local problem)"),
                      ("zero or missing diagonal", "zero diagonal"),
                      ("zero diagonal", "zero diagonal")):
        if key in msg:
            return text
    return msg[:50]


def outcome(run, name):
    """a run's cell: iterations (with 'no' when not converged) or why not"""
    rows, msgs, rc = run
    if rc is None:
        return "not run"
    r = rows.get(name)
    if r is None:
        if name in msgs:
            return "refused: " + short(msgs[name])
        return "timeout" if rc in (124, 137) else "no result (exit %d)" % rc
    its = str(r["iterations"])
    if r["converged"] == "yes":
        return its
    return "%s, no (%s)" % (its, r["reason"])


def extra(r, key):
    for kv in (r.get("precond_extra") or "").split(";"):
        if kv.startswith(key + "="):
            return kv.split("=", 1)[1]
    return ""


def stage(r, name):
    for kv in (r.get("tp_stages") or "").split(";"):
        if kv.startswith(name + "="):
            return float(kv.split("=", 1)[1])
    return float("nan")


def ms(x):
    return "-" if x is None or x != x else "%.3g" % (1e3 * x)


def ratio(a, b):
    return "-" if not a or not b else "%.1f" % (a / b)


def main():
    d = sys.argv[1]
    raw = os.path.join(d, "raw")
    setup = open(os.path.join(d, "setup.txt")).read() if os.path.exists(os.path.join(d, "setup.txt")) else ""
    t2 = [l.strip() for l in open(os.path.join(d, "set_table2.txt")) if l.strip()]
    t4 = [l.strip() for l in open(os.path.join(d, "set_table4.txt")) if l.strip()]
    gens = sorted({f.split(".")[1] for f in os.listdir(raw) if f.startswith("t2g.") and f.endswith(".rc")})
    t1gens = sorted({f.split(".")[1] for f in os.listdir(raw) if f.startswith("t1g.") and f.endswith(".rc")})
    out = []
    w = out.append
    device = ""
    for f in sorted(os.listdir(raw)):
        if f.endswith(".jsonl"):
            for line in open(os.path.join(raw, f)):
                if line.startswith("{"):
                    r = json.loads(line)
                    if r.get("engine") == "cuda":
                        device = r.get("device", "")
                        break
        if device:
            break
    w("Runs: `scripts/tables/spai_tables.sh` (%s); device: %s." % (setup.strip().replace("\n", "; "), device or "none (CPU engine)"))
    w("")

    # ---- Table II
    w("### Table II style: BiCGSTAB iterations, SPAI-ME against the diagonal preconditioner")
    w("")
    w("| matrix | n | nnz | jacobi 1e-7 | spai 0.7 1e-7 | spai 0.9 1e-7 | jacobi 1e-8 | spai 0.7 1e-8 | spai 0.9 1e-8 | SU (0.9, 1e-7) | SU (0.9, 1e-8) |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    csv_rows = []
    cases = [(m, "t2.%s.%s", m) for m in t2] + [(g, "t2g." + g + ".%s.%s", g.replace("-", ":")) for g in gens]
    for key, pattern, label in cases:
        cells, n, nnz, its = [], "", "", {}
        for tol in ("1e-7", "1e-8"):
            for pc in ("jacobi", "spai0.7", "spai0.9"):
                run = load(raw, pattern % (pc, tol))
                name = key if key not in gens else next(iter(run[0]), key)
                cell = outcome(run, name)
                cells.append(cell)
                r = run[0].get(name)
                if r:
                    n, nnz = r["n"], r["nnz"]
                    if r["converged"] == "yes":
                        its[(pc, tol)] = int(r["iterations"])
        su = []
        for tol in ("1e-7", "1e-8"):
            a, b = its.get(("jacobi", tol)), its.get(("spai0.9", tol))
            if a and b:
                su.append("%.1f" % (a / b))
            elif b and not a:
                su.append("jacobi fails")
            else:
                su.append("-")
        w("| %s | %s | %s | %s | %s | %s |" % (label, n, nnz, " | ".join(cells[:3]), " | ".join(cells[3:]), " | ".join(su)))
        csv_rows.append([label, n, nnz] + cells + su)
    with open(os.path.join(d, "table2.csv"), "w", newline="") as f:
        c = csv.writer(f)
        c.writerow(["matrix", "n", "nnz", "jacobi_1e-7", "spai0.7_1e-7", "spai0.9_1e-7",
                    "jacobi_1e-8", "spai0.7_1e-8", "spai0.9_1e-8", "su_0.9_1e-7", "su_0.9_1e-8"])
        c.writerows(csv_rows)
    w("")

    # ---- Table I
    w("### Table I style: setup time Tp, GPU against the CPU engine (all cores)")
    w("")
    w("| matrix | n | nnz | nnz/col | preconditioner | GPU Tp ms | CPU Tp ms | SU | GPU least squares ms | kernels |")
    w("|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    csv_rows = []

    def t1_row(label, gpu, cpu, pc):
        if not gpu and not cpu:
            return
        r = gpu or cpu
        n, nnz = int(r["n"]), int(r["nnz"])
        gt = gpu["tp_min_s"] if gpu else None
        ct = cpu["tp_min_s"] if cpu else None
        ls = stage(gpu, "least squares") if gpu else None
        kern = extra(gpu, "kernels") if gpu else ""
        w("| %s | %d | %d | %.1f | %s | %s | %s | %s | %s | %s |" % (
            label, n, nnz, nnz / max(n, 1), pc, ms(gt), ms(ct), ratio(ct, gt), ms(ls), kern))
        csv_rows.append([label, n, nnz, pc, gt, ct, ct / gt if gt and ct else "", ls, kern])

    for g in t1gens:
        for pc, tag in (("spai tau 0.7", "spai0.7"), ("spai tau 0.9", "spai0.9"), ("gspai-opt k 1", "gspai")):
            gr, cr = load(raw, "t1g.%s.%s.gpu" % (g, tag))[0], load(raw, "t1g.%s.%s.cpu" % (g, tag))[0]
            t1_row(g.replace("-", ":"), next(iter(gr.values()), None), next(iter(cr.values()), None), pc)
    for tau in ("0.7", "0.9"):
        gr, cr = load(raw, "t1.spai%s.gpu" % tau)[0], load(raw, "t1.spai%s.cpu" % tau)[0]
        for m in t2:
            t1_row(m, gr.get(m), cr.get(m), "spai tau " + tau)
    with open(os.path.join(d, "table1.csv"), "w", newline="") as f:
        c = csv.writer(f)
        c.writerow(["matrix", "n", "nnz", "precond", "gpu_tp_s", "cpu_tp_s", "speedup", "gpu_least_squares_s", "kernels"])
        c.writerows(csv_rows)
    w("")

    # ---- Table 4 (and 5-7 data)
    def merged(kind):
        rows, msgs, rcs = {}, {}, []
        for f in sorted(os.listdir(raw)):
            if f.startswith(kind + ".b") and f.endswith(".rc"):
                r, m, rc = load(raw, f[:-3])
                rows.update(r), msgs.update(m), rcs.append(rc)
        return rows, msgs, (max(rcs) if rcs else None)

    w("### Table 4 style: predicted and measured strategy (and Tables 5-7 data)")
    w("")
    w("Measured: the strategy with the smaller Tp (min over the repeats) of the forced runs;")
    w("`S1/S2` where |t1 - t2| / max(t1, t2) <= 0.05 (the paper's rule). `ls` is the same")
    w("comparison on the least-squares stage alone (the only stage the strategy changes).")
    w("")
    w("| matrix | k | n2max | n2avg | alpha-beta | predicted | S1 Tp ms | S2 Tp ms | measured (Tp) | measured (ls) | auto Tp ms | its | Ts ms | Tt ms |")
    w("|---|---:|---:|---:|---:|---|---:|---:|---|---|---:|---:|---:|---:|")
    csv_rows = []
    agree = {1: [0, 0], 2: [0, 0]}
    for k in (1, 2):
        auto, s1, s2 = merged("t4.k%d.auto.tp" % k), merged("t4.k%d.s1.tp" % k), merged("t4.k%d.s2.tp" % k)
        solve = merged("t4.k%d.auto.solve" % k)
        for m in t4:
            a = auto[0].get(m)
            if a is None:
                if auto[2] is None:
                    continue
                why = ("refused: " + short(auto[1][m])) if m in auto[1] else "timeout or no result"
                w("| %s | %d | | | | %s | | | | | | | | |" % (m, k, why))
                csv_rows.append([m, k, "", "", "", why])
                continue
            pred = extra(a, "strategy")
            al, be = extra(a, "alpha"), extra(a, "beta")
            r1, r2 = s1[0].get(m), s2[0].get(m)

            def measured(t1, t2):
                if t1 is None or t2 is None or t1 != t1 or t2 != t2:
                    return "-"
                if abs(t1 - t2) / max(t1, t2) <= 0.05:
                    return "S1/S2"
                return "S1" if t1 < t2 else "S2"
            t1, t2 = (r1["tp_min_s"] if r1 else None), (r2["tp_min_s"] if r2 else None)
            meas = measured(t1, t2)
            meas_ls = measured(stage(r1, "least squares") if r1 else None, stage(r2, "least squares") if r2 else None)
            if meas != "-":
                agree[k][1] += 1
                agree[k][0] += pred in meas.split("/")
            sv = solve[0].get(m)
            its = outcome(solve, m)
            ts = sv["ts_min_s"] if sv else None
            w("| %s | %d | %s | %.3g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, k, extra(a, "n2max"), float(extra(a, "n2avg") or "nan"),
                int(al) - int(be) if al and be else "", pred, ms(t1), ms(t2), meas, meas_ls,
                ms(a["tp_min_s"]), its, ms(ts), ms(a["tp_min_s"] + ts if ts is not None else None)))
            csv_rows.append([m, k, extra(a, "n2max"), extra(a, "n2avg"), al, be, pred, t1, t2, meas,
                             meas_ls, a["tp_min_s"], its, ts, extra(a, "kernels")])
    w("")
    for k in (1, 2):
        if agree[k][1]:
            w("k = %d: predicted strategy among the measured on %d of %d matrices." % (k, agree[k][0], agree[k][1]))
    with open(os.path.join(d, "table4.csv"), "w", newline="") as f:
        c = csv.writer(f)
        c.writerow(["matrix", "k", "n2max", "n2avg", "alpha", "beta", "predicted", "s1_tp_s", "s2_tp_s",
                    "measured_tp", "measured_ls", "auto_tp_s", "iterations", "ts_s", "kernels"])
        c.writerows(csv_rows)
    skipped = os.path.join(d, "skipped.txt")
    if os.path.exists(skipped) and os.path.getsize(skipped):
        w("")
        w("Skipped (time budget): " + ", ".join(l.split()[0] for l in open(skipped)))
    text = "\n".join(out) + "\n"
    open(os.path.join(d, "tables.md"), "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
