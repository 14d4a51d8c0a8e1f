# test_batch.py - pytest suite of scripts/batch.py (the batch driver and its summary) and
# scripts/plots.py (performance profiles and pictures), run on the CPU engine.
import csv
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import batch  # noqa: E402
import plots  # noqa: E402

GPUSOLVE = os.path.abspath(os.environ.get("GPUSOLVE", os.path.join(ROOT, "build", "gpusolve")))
MATRICES = os.environ.get("GS_MATRICES", os.path.join(ROOT, "..", "shared", "matrices"))
# Small shared matrices that between them make each preconditioner refuse
# something: pores_1 and west0067 are nonsymmetric (fsai, mic refuse), west0067
# has no diagonal in row 1 (jacobi refuses), bcsstk01 breaks MIC's pivots.
SHARED = ["pores_1", "west0067", "bcsstk01", "nos4"]
PRECONDS = ["jacobi", "fsai", "mic"]
MISSING = "/nonexistent/no_such_matrix.mtx"


def data_files():
    d = os.path.join(ROOT, "data")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".mtx", ".mtx.gz")))


def shared_files():
    return [os.path.join(MATRICES, n + ".mtx") for n in SHARED
            if os.path.exists(os.path.join(MATRICES, n + ".mtx"))]


def run_batch_cli(args, tmp_path, name="out.csv"):
    out = tmp_path / name
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "batch.py"), "--gpusolve", GPUSOLVE,
                           "--engine", "cpu", "--out", str(out)] + args,
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as fh:
        return list(csv.DictReader(fh)), proc


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    assert os.access(GPUSOLVE, os.X_OK), f"build gpusolve first ({GPUSOLVE})"
    files = data_files() + shared_files() + [MISSING]
    rows, proc = run_batch_cli(["--precond", ",".join(PRECONDS)] + files, tmp_path_factory.mktemp("batch"))
    return files, rows, proc


def test_every_file_and_precond_exactly_once(batch_run):
    files, rows, _ = batch_run
    keys = Counter((r["matrix"], r["precond"], r["engine"]) for r in rows)
    assert set(keys) == {(f, p, "cpu") for f in files for p in PRECONDS}
    assert all(n == 1 for n in keys.values())


def test_status_matches_the_row(batch_run):
    _, rows, _ = batch_run
    for r in rows:
        assert r["status"] in batch.STATUSES
        if r["status"] == "solved":
            assert r["converged"] == "yes"
        elif r["status"] == "not converged":
            assert r["converged"] == "no" and r["reason"]
        assert r["name"] == os.path.basename(r["matrix"]).split(".mtx")[0]


def test_refused_rows_carry_the_programs_message(batch_run):
    _, rows, _ = batch_run
    refused = [r for r in rows if r["status"] == "refused"]
    assert refused and all(r["message"] and r["message"] == r["message"].strip() for r in refused)
    assert all(not r["message"] for r in rows if r["status"] == "solved")
    missing = [r for r in rows if r["matrix"] == MISSING]
    assert [r["status"] for r in missing] == ["refused"] * len(PRECONDS)
    assert all("cannot open" in r["message"] for r in missing)
    conv = [r for r in rows if r["name"] == "convdiff3d_8" and r["precond"] in ("fsai", "mic")]
    assert len(conv) == 2 and all(r["status"] == "refused" and "symmetric" in r["message"] for r in conv)


@pytest.mark.skipif(not os.path.exists(os.path.join(MATRICES, "west0067.mtx")),
                    reason="shared matrices absent (set GS_MATRICES)")
def test_shared_refusals(batch_run):
    _, rows, _ = batch_run
    west = {r["precond"]: r for r in rows if r["name"] == "west0067"}
    assert west["jacobi"]["status"] == "refused" and "diagonal" in west["jacobi"]["message"]
    bcs = {r["precond"]: r for r in rows if r["name"] == "bcsstk01"}
    # MIC breaks down on bcsstk01 unshifted; the automatic shift (alpha = 2.048) sets it up
    assert bcs["mic"]["status"] == "solved"
    assert bcs["jacobi"]["status"] == "solved"


def test_numbers_parse_and_tt_is_tp_plus_ts(batch_run):
    _, rows, _ = batch_run
    solved = [r for r in rows if r["status"] == "solved"]
    assert len(solved) >= len(data_files())
    for r in solved:
        for col in ("n", "nnz", "tp_min_s", "ts_min_s", "tt_min_s", "iterations", "true_rel_residual"):
            assert math.isfinite(float(r[col])), (col, r[col])
        tp, ts, tt = (float(r[c]) for c in ("tp_min_s", "ts_min_s", "tt_min_s"))
        assert tt == pytest.approx(tp + ts, rel=1e-6, abs=1e-9)
        assert float(r["true_rel_residual"]) < 1e-6


def test_default_preconds_are_the_registry_but_none():
    names = batch.registered_preconds(GPUSOLVE)
    out = subprocess.run([GPUSOLVE, "--list", "--format", "csv"], capture_output=True, text=True).stdout
    listed = {r["name"] for r in csv.DictReader(out.splitlines()) if r["kind"] == "precond"}
    assert "none" in listed and "none" not in names and "jacobi" in names
    assert len(names) == len(set(names)) and set(names) == listed - {"none"}


def test_options_pass_through(tmp_path):
    rows, _ = run_batch_cli(["--precond", "jacobi", "--method", "bicgstab", "--extra", "--maxit 2"]
                            + data_files(), tmp_path)
    assert len(rows) == len(data_files())
    assert all(r["method"] == "bicgstab" and r["maxit"] == "2" for r in rows)
    assert all(r["status"] == "not converged" and "iteration limit" in r["reason"] for r in rows)
    rows, _ = run_batch_cli(["--precond", "jacobi", "--time-limit", "1e-9"] + data_files(), tmp_path, "t.csv")
    assert all(r["status"] == "not converged" and "time limit" in r["reason"] for r in rows)


def test_inputs_folder_and_manifest():
    assert batch.expand_inputs([os.path.join(ROOT, "data")]) == data_files()
    manifest = os.path.join(MATRICES, "MANIFEST.tsv")
    if not os.path.exists(manifest):
        pytest.skip("shared matrices absent (set GS_MATRICES)")
    with open(manifest) as fh:
        names = [line.split("\t")[0] for line in fh.read().splitlines()[1:] if line.strip()]
    files = batch.expand_inputs([manifest])
    assert [batch.matrix_name(f) for f in files] == names
    assert all(os.path.exists(f) for f in files)


def test_stderr_lines_go_to_the_file_they_name():
    err = ("gpusolve: notice: no CUDA device found, using the CPU engine\n"
           "gpusolve: m/a.mtx.gz: fsai needs a symmetric matrix: x\n"
           "gpusolve: m/a.mtx: cannot open: No such file\n"
           "gpusolve: m/b.mtx:7: complex matrices are not supported\n"
           "gpusolve: --engine cuda: this build has no CUDA engine\n")
    by_file, other = batch.stderr_messages(err, ["m/a.mtx", "m/a.mtx.gz", "m/b.mtx"])
    assert by_file == {"m/a.mtx.gz": "fsai needs a symmetric matrix: x", "m/a.mtx": "cannot open: No such file",
                       "m/b.mtx": "line 7: complex matrices are not supported"}
    assert other == ["--engine cuda: this build has no CUDA engine"]
    assert batch.expected_engines("auto", err) == ["cpu"]
    assert batch.expected_engines("both", "") == ["cpu", "cuda"]


def test_profile_by_hand():
    # a: ratios 1, 2, 1 (solves all); b: ratios 2, 1, inf; c: fails all.
    prof = plots.performance_profile({"a": {1: 1.0, 2: 2.0, 3: 3.0}, "b": {1: 2.0, 2: 1.0, 3: None},
                                      "c": {1: None, 2: math.nan, 3: math.inf}})
    taus, rho = prof["a"]
    assert taus[-1] == 2.0 and rho[-1] == 1.0
    at_one = max(i for i, t in enumerate(taus) if t <= 1.0)
    assert rho[at_one] == pytest.approx(2 / 3)
    assert prof["b"][1][-1] == pytest.approx(2 / 3) and prof["b"][0][-1] == 2.0
    assert prof["c"][1] == [0.0]


def check_profile_shape(prof, values):
    for solver, (taus, rho) in prof.items():
        assert all(0.0 <= v <= 1.0 for v in rho)
        assert all(a <= b for a, b in zip(rho, rho[1:])) and all(a <= b for a, b in zip(taus, taus[1:]))
        assert min(taus) >= 1.0
        if all(v is not None for v in values[solver].values()):
            assert rho[-1] == 1.0 and taus[-1] == max(taus)


def test_profile_of_the_batch(batch_run):
    _, rows, _ = batch_run
    for col in ("tt_min_s", "iterations", "tp_min_s"):
        values = plots.profile_input(rows, col)
        assert set(values) == set(PRECONDS)
        check_profile_shape(plots.performance_profile(values), values)
    # Over the data/ problems alone jacobi solves every one: it must reach 1.0.
    data = [r for r in rows if r["matrix"] in data_files()]
    values = plots.profile_input(data, "tt_min_s")
    assert all(v is not None for v in values["jacobi"].values())
    assert plots.performance_profile(values)["jacobi"][1][-1] == 1.0


def test_summary_wins_add_up(batch_run):
    _, rows, proc = batch_run
    s = batch.summarize(rows)
    solved_by_anyone = {(r["matrix"], r["engine"]) for r in rows if r["status"] == "solved"}
    assert sum(s["wins"].values()) == len(solved_by_anyone) == s["problems_solved"]
    for key in solved_by_anyone:  # the winner's Tt is the least among the solved
        tts = {r["precond"]: float(r["tt_min_s"]) for r in rows
               if (r["matrix"], r["engine"]) == key and r["status"] == "solved"}
        assert min(tts.values()) == tts[min(tts, key=tts.get)]
    fails = Counter(r["precond"] for r in rows if r["status"] != "solved")
    assert {p: sum(s["failures"][p].values()) for p in PRECONDS} == {p: fails[p] for p in PRECONDS}
    assert s["ratio_vs_baseline"]["jacobi"][0] == pytest.approx(1.0)
    for p in PRECONDS:  # the summary is printed, one line a preconditioner
        assert any(line.startswith(p + " ") for line in proc.stdout.splitlines())


def test_summary_winner_by_hand():
    rows = [{"matrix": m, "engine": "cpu", "precond": p, "status": st, "tt_min_s": tt, "reason": rs}
            for m, p, st, tt, rs in [("A", "jacobi", "solved", "2", "converged"), ("A", "x", "solved", "1", "converged"),
                                     ("B", "jacobi", "solved", "1", "converged"), ("B", "x", "refused", "", ""),
                                     ("C", "jacobi", "not converged", "5", "time limit"), ("C", "x", "error", "", "")]]
    s = batch.summarize(rows)
    assert s["wins"] == {"x": 1, "jacobi": 1} and s["problems_solved"] == 2 and s["problems"] == 3
    assert s["failures"]["jacobi"] == {"time limit": 1} and s["failures"]["x"] == {"refused": 1, "error": 1}
    assert s["ratio_vs_baseline"]["x"] == (pytest.approx(0.5), 1)


def write_history(path):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["matrix", "engine", "precond", "method", "iteration", "rel_residual", "seconds"])
        for p, rate in (("jacobi", 0.6), ("fsai", 0.3)):
            for i in range(12):
                w.writerow(["data/poisson3d_8.mtx", "cpu", p, "cg", i, rate ** i, 1e-4 * i])


def assert_pictures(folder, names):
    for name in names:
        png, svg = folder / f"{name}.png", folder / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert b"<svg" in svg.read_bytes()[:2000], name


def test_plot_all(batch_run, tmp_path):
    _, rows, _ = batch_run
    both = []  # a cuda copy three times faster, so that the speedup picture has data
    for r in rows:
        g = dict(r, engine="cuda")
        for c in ("tp_min_s", "ts_min_s", "tt_min_s"):
            if r.get(c):
                g[c] = str(float(r[c]) / 3)
        both += [r, g]
    csv_path = tmp_path / "both.csv"
    batch.write_csv(csv_path, list(rows[0].keys()), both)
    write_history(tmp_path / "hist.csv")
    out = tmp_path / "pics"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "plots.py"), "all", str(csv_path),
                           "--out", str(out), "--history", str(tmp_path / "hist.csv")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names = ["profile_tt", "profile_iterations", "profile_tp", "setup_solve_cpu", "setup_solve_cuda",
             "speedup", "tp_stages_cpu", "tp_stages_cuda", "history"]
    assert_pictures(out, names)
    assert sorted(os.listdir(out)) == sorted(f"{n}.{e}" for n in names for e in ("png", "svg"))


def test_plot_skips_absent_data(batch_run, tmp_path, capsys):
    _, rows, _ = batch_run
    written = plots.plot_all(rows, str(tmp_path))
    said = capsys.readouterr().out
    assert "speedup: no matrix solved on both" in said and "history: no --history CSV, skipped" in said
    assert not (tmp_path / "speedup.png").exists() and not (tmp_path / "history.png").exists()
    assert_pictures(tmp_path, ["profile_tt", "setup_solve_cpu", "tp_stages_cpu"])
    assert len(written) == len(os.listdir(tmp_path))


FAKE = r'''#!/usr/bin/env python3
# A stand-in for a CUDA build of gpusolve: --engine both prints a cpu then a
# cuda row a file; the cuda run of files named *gpufail* fails after the cpu row.
import sys
args = sys.argv[1:]
files = [a for a in args if a.endswith(".mtx")]
print("matrix,engine,precond,method,tp_min_s,ts_min_s,tt_min_s,converged,reason")
for f in files:
    if "refuse" in f:
        print(f"gpusolve: {f}: jacobi: zero or missing diagonal entry in row 1", file=sys.stderr)
        continue
    print(f'"{f}","cpu","jacobi","cg",1,2,3,"yes","converged"')
    if "gpufail" in f:
        print(f"gpusolve: {f}: CUDA error: out of memory", file=sys.stderr)
        continue
    print(f'"{f}","cuda","jacobi","cg",0.5,0.5,1,"no","time limit"')
sys.exit(3)
'''


def test_engine_both_rows_per_engine(tmp_path):
    fake = tmp_path / "gpusolve"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    files = [str(tmp_path / n) for n in ("a.mtx", "gpufail.mtx", "refuse.mtx")]
    columns, rows = batch.run_batch(str(fake), files, ["jacobi"], ["auto"], "both")
    got = {(os.path.basename(r["matrix"]), r["engine"]): (r["status"], r["message"]) for r in rows}
    assert len(rows) == 6 and columns[-3:] == batch.EXTRA_COLUMNS
    assert got[("a.mtx", "cpu")] == ("solved", "") and got[("a.mtx", "cuda")] == ("not converged", "")
    assert got[("gpufail.mtx", "cpu")][0] == "solved"
    assert got[("gpufail.mtx", "cuda")] == ("error", "CUDA error: out of memory")
    assert got[("refuse.mtx", "cpu")] == got[("refuse.mtx", "cuda")] == \
        ("refused", "jacobi: zero or missing diagonal entry in row 1")
