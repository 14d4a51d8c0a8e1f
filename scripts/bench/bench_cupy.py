#!/usr/bin/env python3
"""bench_cupy.py - the peer every user can run: CuPy's Krylov solvers with a
Jacobi LinearOperator on the same built-in matrices as gpusolve (rebuilt here
with src/io/gen.c's stencils), timed per iteration with CUDA events after a
warm-up. Prints one JSON object per case (matrix, method, iterations,
us_per_iteration, ...) for scripts/bench/bench.sh.

    bench_cupy.py --gpusolve-json build/bench/gpusolve.jsonl
    bench_cupy.py --case poisson3d:64 cg --iterations 200

The iteration count of each case is gpusolve's (from its JSON), with the
tolerance set to 0 so that CuPy runs exactly that many iterations. CuPy's
cupyx.scipy.sparse.linalg has cg and gmres (and, depending on the version,
no bicgstab and no idr): a missing bicgstab is replaced by a plain CuPy
BiCGSTAB loop below (right preconditioned, the same recurrence as
src/krylov/bicgstab.c, one host sync per iteration for the breakdown tests as
CuPy's own cg does); IDR(s) has no CuPy counterpart and is reported as such.
GMRES: CuPy's restart cycle is counted as `restart` iterations (its maxiter
counts inner iterations), restart 30 as gpusolve's default.
"""
import argparse
import json
import re
import sys

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cla

# src/io/gen.c: w[dk+1][dj+1][di+1] couples (i,j,k) to (i+di, j+dj, k+dk); rows
# i + NX (j + NY k); off-grid neighbours dropped (Dirichlet, folded into b).
C = 0.5  # GEN_CONVDIFF_C
STENCILS = {
    'poisson3d': {(0, 0, 0): 6.0, (-1, 0, 0): -1.0, (1, 0, 0): -1.0, (0, -1, 0): -1.0,
                  (0, 1, 0): -1.0, (0, 0, -1): -1.0, (0, 0, 1): -1.0},
    'convdiff3d': {(0, 0, 0): 6.0 + 3 * C, (-1, 0, 0): -(1 + C), (1, 0, 0): -1.0,
                   (0, -1, 0): -(1 + C), (0, 1, 0): -1.0, (0, 0, -1): -(1 + C),
                   (0, 0, 1): -1.0},
}


def generate(name):
    """'poisson3d:64' or 'poisson3d:64x64x64' -> CSR on the device."""
    m = re.fullmatch(r'(\w+):(\d+)(?:x(\d+)x(\d+))?', name)
    kind = m.group(1)
    nx = int(m.group(2))
    ny = int(m.group(3) or nx)
    nz = int(m.group(4) or nx)
    n = nx * ny * nz
    idx = cp.arange(n, dtype=cp.int64)
    i, j, k = idx % nx, (idx // nx) % ny, idx // (nx * ny)
    rows, cols, vals = [], [], []
    for (di, dj, dk), w in STENCILS[kind].items():
        ok = ((i + di >= 0) & (i + di < nx) & (j + dj >= 0) & (j + dj < ny) &
              (k + dk >= 0) & (k + dk < nz))
        r = idx[ok]
        rows.append(r)
        cols.append(r + di + nx * dj + nx * ny * dk)
        vals.append(cp.full(r.size, w))
    A = csp.coo_matrix((cp.concatenate(vals), (cp.concatenate(rows), cp.concatenate(cols))),
                       shape=(n, n)).tocsr()
    A.sort_indices()
    return A


def jacobi(A):
    dinv = 1.0 / A.diagonal()
    return cla.LinearOperator(A.shape, matvec=lambda r: dinv * r, dtype=A.dtype)


def bicgstab_loop(A, b, M, maxiter):
    """Right-preconditioned BiCGSTAB (Saad, Alg. 7.7 with M), plain CuPy."""
    x = cp.zeros_like(b)
    r = b - A @ x
    rhat = r.copy()
    p = r.copy()
    rho = float(rhat @ r)
    for _ in range(maxiter):
        ph = M.matvec(p)
        v = A @ ph
        alpha = rho / float(rhat @ v)
        s = r - alpha * v
        sh = M.matvec(s)
        t = A @ sh
        omega = float(t @ s) / float(t @ t)
        x += alpha * ph + omega * sh
        r = s - omega * t
        rho_new = float(rhat @ r)
        if rho_new == 0.0 or omega == 0.0:
            break
        beta = (rho_new / rho) * (alpha / omega)
        rho = rho_new
        p = r + beta * (p - omega * v)
    return x


def tol_kwargs(fn):
    """CuPy renamed tol to rtol in newer versions: ask for 0 either way."""
    import inspect
    params = inspect.signature(fn).parameters
    kw = {'atol': 0.0} if 'atol' in params else {}
    kw['rtol' if 'rtol' in params else 'tol'] = 0.0
    return kw


def run(method, A, b, M, iterations, restart=30):
    if method == 'cg':
        return lambda: cla.cg(A, b, M=M, maxiter=iterations, **tol_kwargs(cla.cg)), 'cupy cg'
    if method == 'gmres':
        its = max(restart, (iterations + restart - 1) // restart * restart)
        return (lambda: cla.gmres(A, b, M=M, restart=restart, maxiter=its,
                                  **tol_kwargs(cla.gmres)), 'cupy gmres(%d)' % restart)
    if method == 'bicgstab':
        if hasattr(cla, 'bicgstab'):
            return (lambda: cla.bicgstab(A, b, M=M, maxiter=iterations,
                                         **tol_kwargs(cla.bicgstab)), 'cupy bicgstab')
        return lambda: bicgstab_loop(A, b, M, iterations), 'plain cupy bicgstab loop'
    return None, 'no CuPy %s' % method


def time_case(name, method, iterations):
    A = generate(name)
    b = cp.ones(A.shape[0])
    M = jacobi(A)
    its = max(int(iterations), 20)
    fn, what = run(method, A, b, M, its)
    out = {'matrix': name, 'method': method, 'n': A.shape[0], 'nnz': int(A.nnz),
           'solver': what, 'iterations': its, 'us_per_iteration': None}
    if fn is None:
        return out
    if method == 'gmres':
        out['iterations'] = max(30, (its + 29) // 30 * 30)
    warm_fn, _ = run(method, A, b, M, 5)
    warm_fn()  # kernels compiled, handles made, buffers allocated
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    best = None
    for _ in range(3):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms = cp.cuda.get_elapsed_time(start, stop)
        best = ms if best is None else min(best, ms)
    out['us_per_iteration'] = best * 1e3 / out['iterations']
    out['cupy_version'] = cp.__version__
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--gpusolve-json', help='gpusolve --format json lines (one per case)')
    ap.add_argument('--case', nargs=2, metavar=('SPEC', 'METHOD'), action='append', default=[])
    ap.add_argument('--iterations', type=int, default=200)
    args = ap.parse_args()
    cases = [(s, m, args.iterations) for s, m in args.case]
    if args.gpusolve_json:
        for line in open(args.gpusolve_json):
            if line.startswith('{'):
                r = json.loads(line)
                cases.append((r['matrix'], r['method'], r['iterations']))
    print('cupy %s, cg %s, gmres %s, bicgstab %s' % (
        cp.__version__, hasattr(cla, 'cg'), hasattr(cla, 'gmres'), hasattr(cla, 'bicgstab')),
        file=sys.stderr)
    for name, method, its in cases:
        print(json.dumps(time_case(name, method, its)), flush=True)


if __name__ == '__main__':
    main()
