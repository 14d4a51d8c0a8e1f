#!/usr/bin/env python3
# bench_cpu_peers.py - the CPU engine beside PETSc (petsc4py) on the shared matrices
# (issue 34): KSPCG / KSPBCGS with PCJACOBI, and PCICC / PCILU(0) as the exact
# counterparts of our mic --omega 0 (IC(0)) and isai --trisolve exact (ILU(0)), same b,
# x0, tolerance and residual norm, one thread / one rank.
"""usage: /usr/bin/python3 scripts/bench/bench_cpu_peers.py [--gpusolve BIN] [--shared DIR]
             [--only NAME,...] [--pairs LABEL,...] [--repeat R] [--threads T] [--fsai]
             [--out FILE.jsonl]
             [--from FILE.jsonl]

Needs Debian's python3-petsc4py (apt-get install python3-petsc4py) and the Debian
python3 it was built for; the PETSc directory is found under /usr/lib/petscdir when
PETSC_DIR is not set. The problem, on both sides: b = ones (gpusolve's default --rhs),
x0 = 0, stop when ||r||_2 <= 1e-8 ||b||_2 (unpreconditioned residual: KSP norm type
UNPRECONDITIONED; BiCGSTAB right-preconditioned as ours), at most 10000 iterations.
Pairs: SPD matrices CG + Jacobi and CG + IC(0) (PCICC, levels 0; ours mic --omega 0);
the others BiCGSTAB + Jacobi and BiCGSTAB + ILU(0) (PCILU, levels 0; ours isai
--trisolve exact, which scales A to a unit diagonal first). PETSc's Tp is KSPSetUp
(the PC's setup), Ts is KSPSolve; ours are the report's Tp and Ts (min of --repeat
runs; PETSc's min of as many). gpusolve runs with --threads T (default 1) and
OMP_NUM_THREADS=T; PETSc is serial in one rank. Prints a markdown table and the
geometric mean of our Ts / PETSc's Ts over the pairs where both converge.

--fsai: instead, on the SPD matrices, hypre's FSAI (Debian's libHYPRE, 2.26 has
HYPRE_FSAI*, PETSc 3.18's PCHYPRE does not offer it, so it is called through ctypes)
as the preconditioner of hypre's PCG (two-norm, tol 1e-8, b = ones, x0 = 0), next to
our CPU FSAI setup with CG: Tp (hypre: HYPRE_ParCSRPCGSetup, which is the FSAI setup;
ours: the report's Tp), iterations and Ts. hypre's FSAI is the adaptive one (Janna et
al.'s aFSAI: the pattern grown by steps, defaults max steps 5, step size 3,
kap tolerance 1e-3); ours is the static-pattern FSAI of the Bernaschi et al. paper
(tau, k, delta at their defaults), so iterations differ as well as setups.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time


def import_petsc():
    if not os.environ.get("PETSC_DIR"):
        found = sorted(glob.glob("/usr/lib/petscdir/petsc*/x86_64-linux-gnu-real"))
        if found:
            os.environ["PETSC_DIR"] = found[-1]
            sys.path.append(os.path.join(found[-1], "lib/python3/dist-packages"))
    try:
        import petsc4py
        petsc4py.init([])
        from petsc4py import PETSc
        return PETSc
    except ImportError as e:
        sys.exit("bench_cpu_peers.py: petsc4py not found (%s): apt-get install python3-petsc4py "
                 "and run with /usr/bin/python3" % e)


def read_mtx(path):
    """Matrix Market coordinate real/integer/pattern, general/symmetric/skew-symmetric,
    as (n, rows, cols, vals) with symmetric storage expanded; None for what it skips."""
    import numpy as np
    with open(path) as f:
        header = f.readline().lower().split()
        if len(header) < 5 or header[2] != "coordinate" or header[3] == "complex":
            return None
        field, sym = header[3], header[4]
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        nr, nc, nnz = (int(x) for x in line.split())
        data = np.loadtxt(f, ndmin=2, max_rows=nnz)
    if nr != nc:
        return None
    i = data[:, 0].astype(np.int64) - 1
    j = data[:, 1].astype(np.int64) - 1
    v = np.ones(len(i)) if field == "pattern" else data[:, 2].astype(float)
    if sym in ("symmetric", "skew-symmetric"):
        off = i != j
        sign = -1.0 if sym == "skew-symmetric" else 1.0
        i, j, v = (np.concatenate([i, j[off]]), np.concatenate([j, i[off]]),
                   np.concatenate([v, sign * v[off]]))
    return nr, i, j, v


def petsc_matrix(PETSc, n, i, j, v):
    import numpy as np
    order = np.lexsort((j, i))
    i, j, v = i[order], j[order], v[order]
    keep = np.ones(len(i), bool)  # sum duplicates
    keep[1:] = (i[1:] != i[:-1]) | (j[1:] != j[:-1])
    start = np.flatnonzero(keep)
    v = np.add.reduceat(v, start) if len(v) else v
    i, j = i[keep], j[keep]
    indptr = np.zeros(n + 1, dtype=PETSc.IntType)
    np.add.at(indptr, i + 1, 1)
    indptr = np.cumsum(indptr).astype(PETSc.IntType)
    A = PETSc.Mat().createAIJ([n, n], csr=(indptr, j.astype(PETSc.IntType), v),
                              comm=PETSc.COMM_SELF)
    A.assemble()
    return A


def petsc_solve(PETSc, A, ksp_type, pc_type, repeat):
    n = A.getSize()[0]
    best = None
    for _ in range(repeat):
        b = A.createVecLeft()
        b.set(1.0)
        x = A.createVecRight()
        x.set(0.0)
        ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
        ksp.setOperators(A)
        ksp.setType(ksp_type)
        pc = ksp.getPC()
        pc.setType(pc_type)
        if pc_type in ("icc", "ilu"):
            pc.setFactorLevels(0)
        if ksp_type == "bcgs":
            ksp.setPCSide(PETSc.PC.Side.RIGHT)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setTolerances(rtol=1e-8, atol=0.0, divtol=1e30, max_it=10000)
        ksp.setInitialGuessNonzero(False)
        try:
            t0 = time.perf_counter()
            ksp.setUp()
            t1 = time.perf_counter()
            ksp.solve(b, x)
            t2 = time.perf_counter()
        except PETSc.Error as e:
            return {"error": "PETSc error %s" % e.ierr}
        r = b.duplicate()
        A.mult(x, r)
        r.aypx(-1.0, b)
        rec = {"tp": t1 - t0, "ts": t2 - t1, "iterations": ksp.getIterationNumber(),
               "converged": ksp.getConvergedReason() > 0,
               "true_rel": r.norm() / math.sqrt(n), "reason": int(ksp.getConvergedReason())}
        if best is None or rec["ts"] < best["ts"]:
            best = rec
        ksp.destroy()
    return best


class Hypre:
    """The few hypre calls the FSAI comparison needs, through ctypes (HYPRE_Int is a C int
    in Debian's libHYPRE; MPI is already initialised by petsc4py)."""

    def __init__(self):
        import ctypes
        self.c = ctypes
        mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
        self.comm = ctypes.c_void_p(ctypes.addressof(ctypes.c_byte.in_dll(mpi, "ompi_mpi_comm_self")))
        self.h = ctypes.CDLL(sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libHYPRE-*.so"))[-1])
        self.h.HYPRE_Init()

    def parcsr(self, n, i, j, v):
        import numpy as np
        c, h = self.c, self.h
        ij, obj = c.c_void_p(), c.c_void_p()
        h.HYPRE_IJMatrixCreate(self.comm, 0, n - 1, 0, n - 1, c.byref(ij))
        h.HYPRE_IJMatrixSetObjectType(ij, 5555)  # HYPRE_PARCSR
        h.HYPRE_IJMatrixInitialize(ij)
        order = np.lexsort((j, i))
        i, j, v = i[order].astype(np.int32), j[order].astype(np.int32), v[order].astype(float)
        rows, counts = np.unique(i, return_counts=True)
        rows, counts = rows.astype(np.int32), counts.astype(np.int32)
        P = lambda a, t: a.ctypes.data_as(c.POINTER(t))
        h.HYPRE_IJMatrixAddToValues(ij, len(rows), P(counts, c.c_int), P(rows, c.c_int),
                                    P(j, c.c_int), P(v, c.c_double))
        h.HYPRE_IJMatrixAssemble(ij)
        h.HYPRE_IJMatrixGetObject(ij, c.byref(obj))
        return ij, obj

    def vector(self, n, value):
        import numpy as np
        c, h = self.c, self.h
        ij, obj = c.c_void_p(), c.c_void_p()
        h.HYPRE_IJVectorCreate(self.comm, 0, n - 1, c.byref(ij))
        h.HYPRE_IJVectorSetObjectType(ij, 5555)
        h.HYPRE_IJVectorInitialize(ij)
        idx, val = np.arange(n, dtype=np.int32), np.full(n, value)
        h.HYPRE_IJVectorSetValues(ij, n, idx.ctypes.data_as(c.POINTER(c.c_int)),
                                  val.ctypes.data_as(c.POINTER(c.c_double)))
        h.HYPRE_IJVectorAssemble(ij)
        h.HYPRE_IJVectorGetObject(ij, c.byref(obj))
        return ij, obj

    def fsai_pcg(self, coo, repeat):
        c, h = self.c, self.h
        n = coo[0]
        ijA, A = self.parcsr(*coo)
        best = None
        for _ in range(repeat):
            ijb, b = self.vector(n, 1.0)
            ijx, x = self.vector(n, 0.0)
            pcg, fsai = c.c_void_p(), c.c_void_p()
            h.HYPRE_ParCSRPCGCreate(self.comm, c.byref(pcg))
            h.HYPRE_PCGSetTol(pcg, c.c_double(1e-8))
            h.HYPRE_PCGSetMaxIter(pcg, 10000)
            h.HYPRE_PCGSetTwoNorm(pcg, 1)
            h.HYPRE_FSAICreate(c.byref(fsai))
            h.HYPRE_FSAISetZeroGuess(fsai, 1)
            h.HYPRE_FSAISetMaxIterations(fsai, 1)
            h.HYPRE_ParCSRPCGSetPrecond(pcg, h.HYPRE_FSAISolve, h.HYPRE_FSAISetup, fsai)
            t0 = time.perf_counter()
            h.HYPRE_ParCSRPCGSetup(pcg, A, b, x)
            t1 = time.perf_counter()
            h.HYPRE_ParCSRPCGSolve(pcg, A, b, x)
            t2 = time.perf_counter()
            its, rel = c.c_int(), c.c_double()
            h.HYPRE_ParCSRPCGGetNumIterations(pcg, c.byref(its))
            h.HYPRE_ParCSRPCGGetFinalRelativeResidualNorm(pcg, c.byref(rel))
            rec = {"tp": t1 - t0, "ts": t2 - t1, "iterations": its.value,
                   "converged": rel.value <= 1e-8 and its.value < 10000, "rel": rel.value}
            if best is None or rec["tp"] + rec["ts"] < best["tp"] + best["ts"]:
                best = rec
            h.HYPRE_FSAIDestroy(fsai)
            h.HYPRE_ParCSRPCGDestroy(pcg)
            h.HYPRE_IJVectorDestroy(ijb)
            h.HYPRE_IJVectorDestroy(ijx)
        h.HYPRE_IJMatrixDestroy(ijA)
        return best


def hypre_in_child(path, repeat):
    """hypre's FSAI + PCG on one matrix in a process of its own (hypre 2.26's FSAI
    setup crashes on some of the matrices: the table records it and goes on)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--hypre-one", path, "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not rows:
        sig = " (signal %d)" % -p.returncode if p.returncode < 0 else ""
        what = "SEGV" if "SEGV" in p.stderr else "exit %d%s" % (p.returncode, sig)
        return {"error": "hypre crashed: " + what}
    return json.loads(rows[-1])


def fsai_table(a, mats, only, out):
    print("\n| matrix | n | hypre FSAI Tp ms | ours FSAI Tp ms | hypre it | ours it | "
          "hypre Ts ms | ours Ts ms | ours/hypre Tp |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for m in mats:
        if (only and m["name"] not in only) or m["kind"] != "SPD":
            continue
        path = os.path.join(a.shared, m["name"] + ".mtx")
        coo = read_mtx(path)
        if coo is None:
            continue
        p = hypre_in_child(path, a.repeat)
        o = ours(a.gpusolve, path, "cg", "fsai", [], a.threads, a.repeat)
        if out:
            out.write(json.dumps({"matrix": m["name"], "hypre_fsai": p, "ours_fsai": o}) + "\n")
        r = o["tp"] / p["tp"] if "error" not in o and "error" not in p and p["tp"] > 0 else None
        if r:
            ratios.append(r)
        f = lambda r, k, s=1.0: r["error"] if "error" in r else (
            "%.3g" % (r[k] * s) + ("" if r["converged"] else " (no)"))
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            m["name"], coo[0], f(p, "tp", 1e3), f(o, "tp", 1e3), f(p, "iterations"),
            f(o, "iterations"), f(p, "ts", 1e3), f(o, "ts", 1e3), "%.2f" % r if r else "-"),
            flush=True)
    if ratios:
        print("\nours / hypre FSAI Tp, geometric mean over %d SPD matrices: %.2f" %
              (len(ratios), math.exp(sum(math.log(r) for r in ratios) / len(ratios))))


def ours(binary, path, method, precond, extra, threads, repeat):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [binary, "-e", "cpu", "--threads", str(threads), "-p", precond, "-m", method,
           "--repeat", str(repeat), "--format", "json", "--progress", "never",
           "--rhs", "ones", "--x0", "zero", "--tol", "1e-8", "--maxit", "10000"] + extra + [path]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not rows:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:120]}
    r = rows[-1]
    return {"tp": r["tp_min_s"], "ts": r["ts_min_s"], "iterations": r["iterations"],
            "converged": r["converged"] == "yes", "true_rel": r["true_rel_residual"],
            "threads": r.get("threads")}


PAIRS = {  # kind -> [(label, ksp, pc, our method, our precond, our extra options)]
    "SPD": [("CG+Jacobi", "cg", "jacobi", "cg", "jacobi", []),
            ("CG+IC(0)", "cg", "icc", "cg", "mic", ["--omega", "0"])],
    "other": [("BiCGSTAB+Jacobi", "bcgs", "jacobi", "bicgstab", "jacobi", []),
              ("BiCGSTAB+ILU(0)", "bcgs", "ilu", "bicgstab", "isai", ["--trisolve", "exact"])],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gpusolve", default="build/gpusolve")
    ap.add_argument("--shared", default="../shared/matrices")
    ap.add_argument("--only", help="matrix names (comma list)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fsai", action="store_true", help="hypre FSAI against our CPU FSAI")
    ap.add_argument("--pairs", help="only these pairs (comma list of labels, e.g. "
                    "'CG+IC(0),BiCGSTAB+ILU(0)')")
    ap.add_argument("--out")
    ap.add_argument("--hypre-one", help=argparse.SUPPRESS)  # the child of --fsai
    ap.add_argument("--from", dest="from_file", metavar="FILE.jsonl",
                    help="print the table and summary of a saved --out, run nothing")
    a = ap.parse_args()
    if a.from_file:
        return from_file(a.from_file)
    if a.threads < 1 or a.repeat < 1:
        sys.exit("bench_cpu_peers.py: --threads and --repeat take counts >= 1")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)  # hypre's OpenMP, read when it loads
    PETSc = import_petsc()
    if a.hypre_one:
        print(json.dumps(Hypre().fsai_pcg(read_mtx(a.hypre_one), a.repeat)))
        return
    only = set(a.only.split(",")) if a.only else None
    pairs = set(a.pairs.split(",")) if a.pairs else None
    out = open(a.out, "w") if a.out else None
    with open(os.path.join(a.shared, "MANIFEST.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        mats = [dict(zip(head, l.rstrip("\n").split("\t"))) for l in f if l.strip()]
    print("PETSc %d.%d.%d, %d rank; gpusolve %s with %d thread(s)" %
          (PETSc.Sys.getVersion() + (1, a.gpusolve, a.threads)))
    if a.fsai:
        fsai_table(a, mats, only, out)
        return
    print(TABLE_HEAD)
    recs = []
    for m in mats:
        if only and m["name"] not in only:
            continue
        path = os.path.join(a.shared, m["name"] + ".mtx")
        coo = read_mtx(path)
        if coo is None:
            continue
        A = petsc_matrix(PETSc, *coo)
        for label, ksp, pc, method, prec, extra in PAIRS["SPD" if m["kind"] == "SPD" else "other"]:
            if pairs and label not in pairs:
                continue
            p = petsc_solve(PETSc, A, ksp, pc, a.repeat)
            o = ours(a.gpusolve, path, method, prec, extra, a.threads, a.repeat)
            rec = {"matrix": m["name"], "n": coo[0], "pair": label, "petsc": p, "ours": o}
            recs.append(rec)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            print(table_row(rec), flush=True)
        A.destroy()
    summary(recs)


TABLE_HEAD = ("\n| matrix | n | pair | PETSc it | ours it | PETSc Tp ms | ours Tp ms | PETSc Ts ms | "
              "ours Ts ms | ours/PETSc Ts | ours/PETSc per it |\n|---|---|---|---|---|---|---|---|---|---|---|")


def both_converged(rec):
    return rec["petsc"].get("converged") and rec["ours"].get("converged")


def table_row(rec):
    p, o = rec["petsc"], rec["ours"]

    def cell(r, k, scale=1.0):
        if "error" in r:
            return "error"
        v = r[k] * scale
        return ("%.3g" % v if isinstance(v, float) else str(v)) + ("" if r["converged"] else " (no)")
    ok = both_converged(rec) and p["ts"] > 0 and p["iterations"] > 0 and o["iterations"] > 0
    ratio = "%.2f" % (o["ts"] / p["ts"]) if ok else "-"
    per_it = "%.2f" % (o["ts"] / o["iterations"] / (p["ts"] / p["iterations"])) if ok else "-"
    return "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        rec["matrix"], rec["n"], rec["pair"], cell(p, "iterations"), cell(o, "iterations"),
        cell(p, "tp", 1e3), cell(o, "tp", 1e3), cell(p, "ts", 1e3), cell(o, "ts", 1e3), ratio, per_it)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(recs):
    """Geometric means of our Ts / PETSc's, per pair and over all, where both converge;
    also where the iterations agree within 10% (the same preconditioner in effect:
    PETSc's ICC shifts differently from our mic on some stiff matrices) and per iteration."""
    print()
    labels = []
    for r in recs:
        if r["pair"] not in labels:
            labels.append(r["pair"])
    groups = [(l, [r for r in recs if r["pair"] == l]) for l in labels] + [("all", recs)]
    for label, rs in groups:
        ok = [r for r in rs if both_converged(r) and r["petsc"]["ts"] > 0 and
              r["petsc"]["iterations"] > 0 and r["ours"]["iterations"] > 0]
        same = [r for r in ok if abs(r["ours"]["iterations"] - r["petsc"]["iterations"]) <=
                0.1 * r["petsc"]["iterations"]]
        ts = geomean([r["ours"]["ts"] / r["petsc"]["ts"] for r in ok])
        ts_same = geomean([r["ours"]["ts"] / r["petsc"]["ts"] for r in same])
        per_it = geomean([r["ours"]["ts"] / r["ours"]["iterations"] /
                          (r["petsc"]["ts"] / r["petsc"]["iterations"]) for r in ok])
        print("%-16s ours / PETSc Ts, geometric mean: %.2f over %d where both converge; %.2f over "
              "the %d with iterations within 10%%; per iteration %.2f" %
              (label, ts, len(ok), ts_same, len(same), per_it))


def from_file(path):
    with open(path) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    recs = [r for r in recs if "pair" in r]
    print(TABLE_HEAD)
    for r in recs:
        print(table_row(r))
    summary(recs)


if __name__ == "__main__":
    main()
