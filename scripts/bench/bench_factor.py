#!/usr/bin/env python3
# bench_factor.py - the device factorisations' schemes side by side (the rule's
# measurements): mic's MIC(0) and isai's ILU(0) with each scheme forced
# (GS_FACTOR_SCHEME=levels|syncfree) on the CUDA engine, and the CPU engine's
# factorisation, on matrices of few wide levels and of many thin ones; one table
# of the factorisation stage's seconds, levels and rows a level. The rule's run
# (auto) also gives its whole Tp, where its level analyses ran (analysis: host or
# device, gs_dtri_analyse_rows) and the Tp of the same run with the analyses
# forced onto the device (GS_TRI_ANALYSIS=device: the analysis before issue 32).
"""usage: scripts/bench/bench_factor.py [--gpusolve BIN] [--matrices SPEC,...] [--repeat N]"""
import argparse
import json
import os
import subprocess

MATRICES = ("poisson3d:64,poisson3d:128,elast3d:30,hub:450,powerlaw:270000,chain:20000,"
            "bordered:360x360x1,MATS/bloweybq.mtx,MATS/s3rmt3m3.mtx")
STAGE = {"mic": "factorisation", "isai": "ilu0"}


def stage_seconds(row, name):
    for part in row.get("tp_stages", "").split(";"):
        k, _, v = part.partition("=")
        if k == name:
            return float(v)
    return None


def run(binary, pc, matrix, engine, scheme, repeat, analysis=""):
    env = dict(os.environ)
    if scheme:
        env["GS_FACTOR_SCHEME"] = scheme
    if analysis:
        env["GS_TRI_ANALYSIS"] = analysis
    src = [matrix] if os.path.exists(matrix) else ["--generate", matrix]
    cmd = [binary, "--format", "json", "--maxit", "1", "-p", pc, "--engine", engine,
           "--repeat", str(repeat), "--progress", "never"] + src
    if pc == "isai":
        cmd += ["-m", "idr"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return None, {}
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not rows:
        return None, {}
    extra = dict(kv.split("=", 1) for kv in rows[-1].get("precond_extra", "").split(";") if "=" in kv)
    extra["rows"] = rows[-1].get("n", 0)
    extra["tp"] = rows[-1].get("tp_min_s")
    return stage_seconds(rows[-1], STAGE[pc]), extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusolve", default=os.environ.get("GPUSOLVE", "build/gpusolve"))
    ap.add_argument("--matrices", default=MATRICES)
    ap.add_argument("--mats", default=os.environ.get("GS_MATRICES", "../shared/matrices"))
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"{'pc':5s} {'matrix':22s} {'levels':>7s} {'rows/lvl':>9s} {'levels s':>9s} "
          f"{'syncfree s':>10s} {'auto s':>9s} {'scheme':>9s} {'cpu s':>9s} {'analysis':>8s} "
          f"{'auto Tp':>9s} {'Tp dev.an':>9s}")
    for m in args.matrices.split(","):
        m = m.replace("MATS", args.mats)
        for pc in ("mic", "isai"):
            t = {}
            extra = {}
            for scheme in ("levels", "syncfree", ""):
                t[scheme], ex = run(args.gpusolve, pc, m, "cuda", scheme, args.repeat)
                if scheme == "":
                    extra = ex
            tc, _ = run(args.gpusolve, pc, m, "cpu", "", args.repeat)
            _, dev = run(args.gpusolve, pc, m, "cuda", "", args.repeat, "device")
            levels = extra.get("levels_L", extra.get("ilu_levels", "?"))
            try:
                rpl = f"{float(extra.get('rows', 'nan')) / float(levels):.0f}"
            except (ValueError, ZeroDivisionError):
                rpl = "?"
            scheme = extra.get("factor_scheme", extra.get("ilu_scheme", "?"))
            f = lambda x: f"{x:9.4f}" if x is not None else "     fail"
            name = os.path.basename(m)
            where = extra.get("levels_L_analysis", extra.get("ilu_levels_analysis", "?"))
            print(f"{pc:5s} {name[:22]:22s} {levels:>7s} {rpl:>9s} {f(t['levels'])} "
                  f"{f(t['syncfree']):>10s} {f(t[''])} {scheme:>9s} {f(tc)} {where:>8s} "
                  f"{f(extra.get('tp'))} {f(dev.get('tp'))}", flush=True)


if __name__ == "__main__":
    main()
