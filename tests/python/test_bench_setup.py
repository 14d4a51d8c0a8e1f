# test_bench_setup.py - pytest suite of scripts/bench/bench_setup.py --table (the worst-case
# table of issue 32 from an earlier run's JSON lines), on lines written here: no program runs.
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "bench_setup.py")


def line(engine, pc, matrix, tp, status="ok", binary="new"):
    return json.dumps({"binary": binary, "engine": engine, "precond": pc, "matrix": matrix,
                       "tp": tp, "status": status, "wall": 0.1, "stages": "", "extra": "",
                       "device": ""}) + "\n"


def table(tmp_path, lines, *extra):
    f = tmp_path / "runs.jsonl"
    f.write_text("".join(lines))
    return subprocess.run([sys.executable, SCRIPT, "--table", str(f)] + list(extra),
                          capture_output=True, text=True)


def row_of(out, pc):
    rows = [l.split() for l in out.splitlines() if l.split()[:1] == [pc]]
    assert len(rows) == 1, out
    return rows[0]


def test_worst_tp_ratio_and_counts(tmp_path):
    lines = [line("cuda", "fsai", "a", 0.5), line("cpu", "fsai", "a", 1.0),
             line("cuda", "fsai", "b", 1.5), line("cpu", "fsai", "b", 3.0),
             line("cuda", "fsai", "c", 0.02), line("cpu", "fsai", "c", 0.005),
             line("cuda", "fsai", "d", None, "error: refused"), line("cpu", "fsai", "d", None, "error: refused")]
    p = table(tmp_path, lines, "--precond", "fsai")
    assert p.returncode == 0, p.stderr
    assert "8 runs, 4 matrices" in p.stdout
    r = row_of(p.stdout, "fsai")
    # worst GPU Tp 1.5 s on b; worst GPU/CPU 4x on c; 1 matrix where the GPU is slower,
    # 1 above 1 s, 1 error
    assert r[2] == "1.5000s" and r[3] == "b", r
    assert r[4] == "4.00x" and r[5] == "c", r
    assert r[6:9] == ["1", "1", "1"], r


def test_a_cpu_run_that_failed_gives_no_ratio(tmp_path):
    lines = [line("cuda", "mic", "a", 0.3), line("cpu", "mic", "a", 0.1, "limit"),
             line("cuda", "mic", "b", 0.2), line("cpu", "mic", "b", 0.4)]
    r = row_of(table(tmp_path, lines, "--precond", "mic").stdout, "mic")
    assert r[4] == "0.50x" and r[5] == "b", r


def test_base_rows_when_the_file_has_them(tmp_path):
    lines = [line("cuda", "isai", "a", 0.9, binary="base"), line("cuda", "isai", "a", 0.1),
             line("cpu", "isai", "a", 0.2)]
    out = table(tmp_path, lines, "--precond", "isai").stdout
    rows = [l.split() for l in out.splitlines() if l.startswith("isai")]
    assert [r[1] for r in rows] == ["base", "new"], out
    assert rows[0][2] == "0.9000s" and rows[1][2] == "0.1000s", out


def test_a_line_that_is_not_a_run_names_the_file_and_line(tmp_path):
    p = table(tmp_path, [line("cuda", "fsai", "a", 0.5), "not json\n"])
    assert p.returncode != 0
    assert "runs.jsonl:2" in p.stderr and "not a run's JSON line" in p.stderr
