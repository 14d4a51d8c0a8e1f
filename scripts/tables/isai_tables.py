#!/usr/bin/env python3
"""isai_tables.py - Table II of Anzt, Chow, Huckle, Dongarra (ScalA 2016) from the
CSV rows scripts/tables/isai_tables.sh writes into DIR: per problem the setup (ILU(0),
ISAI of L and U, overhead = ISAI / ILU(0)), the time per IDR(4) iteration with
exact triangular solves (trisol) and with ISAI, iterations and solver time, and
the speedups. Markdown on stdout.  Usage: isai_tables.py DIR"""
import csv
import glob
import os
import sys


def rows_of(pattern, skip=None):
    out = {}
    for path in sorted(glob.glob(pattern)):
        if skip and os.path.basename(path).startswith(skip):
            continue
        with open(path) as f:
            for r in csv.DictReader(f):
                out[os.path.basename(r["matrix"]).replace(".mtx.gz", "").replace(".mtx", "")] = r
    return out


def stages(r):
    d = {}
    for kv in (r.get("tp_stages") or "").split(";"):
        if "=" in kv:
            k, v = kv.split("=", 1)
            try:
                d[k] = d.get(k, 0.0) + float(v)
            except ValueError:
                pass
    return d


def ms(x):
    return "-" if x is None else "%.3g" % (x * 1e3)


def num(r, key):
    try:
        return float(r[key])
    except (KeyError, TypeError, ValueError):
        return None


def outcome(r):
    if r is None:
        return "no run"
    if r.get("converged") == "yes":
        return r["iterations"]
    return r.get("reason") or r.get("verdict") or "failed"


def main(folder):
    isai = rows_of(os.path.join(folder, "isai_*.csv"), skip="isai_ilu_")
    trisol = rows_of(os.path.join(folder, "trisol_*.csv"))
    cus = rows_of(os.path.join(folder, "isai_ilu_cusparse_*.csv"))
    device = next((r["device"] for r in list(isai.values()) + list(trisol.values())), "none")
    print("# ISAI against exact triangular solves (the paper's Table II)\n")
    print("Device: %s. IDR(4), b = 1, x0 = 0, relative residual 1e-10, S A S with unit "
          "diagonal. Times in ms; `it` = iterations (or why none); `t/it` = solve time "
          "per iteration (one preconditioner application, one or two SpMVs, the vector "
          "work); overhead = ISAI generation (L and U) / ILU(0).\n" % device)
    print("| problem | n | nnz | ILU(0) | ILU(0) cuSPARSE | ISAI | overhead | trisol it | "
          "trisol t/it | trisol Ts | ISAI it | ISAI t/it | ISAI Ts | t/it speedup | "
          "Tt speedup |")
    print("|" + " --- |" * 15)
    for name in sorted(set(isai) | set(trisol), key=lambda s: (not s.startswith(("poisson", "convdiff")), s.lower())):
        a, t = isai.get(name), trisol.get(name)
        base = a or t
        sa = stages(a) if a else {}
        ilu = sa.get("ilu0") if a else (stages(t).get("ilu0") if t else None)
        gen = (sa.get("isai L", 0.0) + sa.get("isai U", 0.0)) if a else None
        cu = stages(cus[name]).get("ilu0") if name in cus else None
        over = "%.0f%%" % (100.0 * gen / ilu) if gen is not None and ilu else "-"
        ta, tt = (num(a, "s_per_iteration") if a else None), (num(t, "s_per_iteration") if t else None)
        conv = a and t and a.get("converged") == "yes" and t.get("converged") == "yes"
        sp_it = "%.2fx" % (tt / ta) if conv and ta and tt else "-"
        tta, ttt = (num(a, "tt_min_s") if a else None), (num(t, "tt_min_s") if t else None)
        sp_tt = "%.2fx" % (ttt / tta) if conv and tta and ttt else "-"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, base["n"], base["nnz"], ms(ilu), ms(cu), ms(gen), over, outcome(t), ms(tt),
            ms(num(t, "ts_min_s") if t else None), outcome(a), ms(ta),
            ms(num(a, "ts_min_s") if a else None), sp_it, sp_tt))

    table3(folder, isai, trisol)


def table3(folder, isai, trisol):
    """The paper's Table III over the shared matrices: for ISAI(k), how many set up
    (a row; a refused matrix has none), converge, the median overhead (ISAI
    generation / ILU(0)), and how many are faster or slower (Tt) than exact
    solves with the same ILU(0) where both converge."""
    powers = {1: {k: v for k, v in isai.items() if not k.startswith(("poisson", "convdiff"))}}
    for k in (2, 3):
        rows = rows_of(os.path.join(folder, "power%d_matrices.csv" % k))
        if rows:
            powers[k] = rows
    if len(powers) == 1:
        return
    listed = os.path.join(folder, "matrices.txt")
    tried = (sum(1 for line in open(listed) if line.strip()) if os.path.exists(listed) else
             len({k for k in trisol if not k.startswith(("poisson", "convdiff"))} | set(powers[1])))
    print("\n# ISAI(k) over the shared matrices (the paper's Table III)\n")
    print("Matrices tried: %d (every shared matrix with a full nonzero diagonal; ILU(0) "
          "breakdowns and refusals have no row, so set up < tried). faster/slower: Tt against "
          "ILU(0) with exact solves (trisol), where both converged.\n" % tried)
    print("| ISAI(k) | set up | converged | median overhead | max overhead | faster than trisol | slower |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k, rows in sorted(powers.items()):
        conv = [n for n, r in rows.items() if r.get("converged") == "yes"]
        over = []
        for r in rows.values():
            st = stages(r)
            gen = st.get("isai L", 0.0) + st.get("isai U", 0.0)
            if st.get("ilu0"):
                over.append(gen / st["ilu0"])
        over.sort()
        faster = slower = 0
        for n in conv:
            t = trisol.get(n)
            if t is None or t.get("converged") != "yes":
                continue
            a, b = num(rows[n], "tt_min_s"), num(t, "tt_min_s")
            if a is None or b is None:
                continue
            if a < b:
                faster += 1
            else:
                slower += 1
        med = "%.0f%%" % (100 * over[len(over) // 2]) if over else "-"
        mx = "%.0f%%" % (100 * over[-1]) if over else "-"
        print("| %d | %d | %d | %s | %s | %d | %d |" % (k, len(rows), len(conv), med, mx,
                                                      faster, slower))


if __name__ == "__main__":
    main(sys.argv[1])
