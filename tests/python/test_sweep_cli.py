"""`tpu-sim sweep SWEEP.json --jobs N`: the sweep without Python's packages,
its CSV, failed runs as rows, and its usage and file errors."""
import csv
import io
import json
import subprocess

import pytest

import tpusim


def sweep(tpu_sim, path, *args, expect=0):
    p = subprocess.run([tpu_sim, "sweep", str(path), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == expect, p.stderr
    return p


def rows_of(text):
    return list(csv.DictReader(io.StringIO(text)))


SPEC = {
    "grid": {"preset": ["small4", "small8"], "fifo_depth": [2, 0]},
    "workloads": [
        {"name": "g", "kind": "gemm", "m": 33, "k": 20, "n": 9, "seed": 9},
        {"name": "quoted, \"name\"", "kind": "gemm", "m": 8, "k": 8, "n": 8, "act": "relu"},
    ],
}


def test_sweep_csv(tpu_sim, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SPEC))
    one = sweep(tpu_sim, path, "--jobs", "1")  # CSV on stdout
    assert "8 runs (4 configurations x 2 workloads), 6 failed" in one.stderr
    rows = rows_of(one.stdout)
    assert [r["run"] for r in rows] == [str(i) for i in range(8)]
    assert list(rows[0])[:7] == ["run", "preset", "fifo_depth", "workload", "status", "error_code", "error"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert [(r["preset"], r["fifo_depth"], r["workload"]) for r in ok] == [("small4", "2", "g"),
                                                                            ("small8", "2", "g")]
    # Each ok row is the run tpusim.gemm makes of the same matrices (the same code).
    for r in ok:
        stats = tpusim.run_workload(tpusim.Config(r["preset"], fifo_depth=2), SPEC["workloads"][0])
        assert int(r["cycles"]) == stats["cycles"] and int(r["macs"]) == stats["macs"]
    # Failed runs: the tools' message and status in their row.
    bad_cfg = [r for r in rows if r["fifo_depth"] == "0"]
    assert len(bad_cfg) == 4 and all(r["error_code"] == "3" and "fifo_depth" in r["error"] for r in bad_cfg)
    usage = [r for r in rows if r["fifo_depth"] == "2" and r["workload"] == "quoted, \"name\""]
    assert [r["error"] for r in usage] == ["act needs requant"] * 2
    assert all(r["error_code"] == "2" for r in usage)
    # Deterministic: the same table with 3 processes, but for the wall time.
    sweep(tpu_sim, path, "-j", "3", "--out", tmp_path / "r.csv")
    three = rows_of((tmp_path / "r.csv").read_text())
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rs]  # noqa: E731
    assert strip(three) == strip(rows)


@pytest.mark.parametrize("content,expect,message", [
    (None, 3, "s.json"),
    ("{", 3, "not valid JSON"),
    ('{"workloads": []}', 3, "non-empty list"),
    ('{"workloads": [{"kind": "gemm"}], "grids": {}}', 3, 'unknown field "grids"'),
    ('{"workloads": [{"kind": "gemm"}], "engine": "verilog"}', 3, "engine"),
    ('{"workloads": [{"name": "a", "kind": "gemm"}, {"name": "a", "kind": "gemm"}]}', 3, 'named "a"'),
])
def test_sweep_file_errors(tpu_sim, tmp_path, content, expect, message):
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    p = sweep(tpu_sim, path, expect=expect)
    assert message in p.stderr and p.stdout == ""


def test_sweep_usage(tpu_sim, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SPEC))
    sweep(tpu_sim, path, "--jobs", "0", expect=2)
    sweep(tpu_sim, path, "--bogus", expect=2)


def test_sweep_bad_workloads_are_rows(tpu_sim, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"workloads": [
        {"name": "nokind"}, {"name": "conv", "kind": "conv"}, {"name": "nofile", "kind": "net",
                                                               "model": "m.json", "input": "x.npy"},
        {"name": "prog", "kind": "run", "program": "p.s"}]}))
    (tmp_path / "p.s").write_text("RHM 0, 0, 1\nMMC.SX 0, 0, 1\n")
    rows = rows_of(sweep(tpu_sim, path).stdout)
    assert [r["status"] for r in rows] == ["error"] * 4
    assert 'no "kind"' in rows[0]["error"] and 'unknown kind "conv"' in rows[1]["error"]
    assert "m.json" in rows[2]["error"]
    assert rows[3]["error_code"] == "1" and f"{tmp_path}/p.s:2:6: error: unknown flag 'X'" in rows[3]["error"]


# One check of a sweep file for both front ends: the same status and message.
BAD_FILES = [
    ("{", "not valid JSON"),
    ("[]", "expected a JSON object"),
    ('{"workloads": []}', '"workloads" must be a non-empty list'),
    ('{"workloads": [{"kind": "gemm"}], "grids": {}}', 'unknown field "grids"'),
    ('{"workloads": [{"kind": "gemm"}], "engine": "verilog"}', "engine: 'verilog' is not one of"),
    ('{"workloads": [{"kind": "gemm"}], "detail": 3}', "detail: expected a name, got 3"),
    ('{"workloads": [{"kind": "gemm"}], "max_cycles": -5}',
     "max_cycles: expected a number of cycles (an integer >= 0), got -5"),
    ('{"workloads": [{"kind": "gemm"}], "base": [1]}', '"base" must be an object'),
    ('{"workloads": [{"kind": "gemm"}], "grid": {"array_n": []}}', 'grid: "array_n" has no values'),
    ('{"workloads": [{"name": "a", "kind": "gemm"}, {"name": "a", "kind": "gemm"}]}',
     'two workloads are named "a"'),
]


@pytest.mark.parametrize("content,reason", BAD_FILES)
def test_sweep_file_errors_match_cli(tpu_sim, tmp_path, content, reason):
    path = tmp_path / "s.json"
    path.write_text(content)
    p = sweep(tpu_sim, path, expect=3)
    line = p.stderr.strip()
    assert line.startswith(f"tpu-sim: error: {path}: ") and reason in line, line
    with pytest.raises(tpusim.InputError) as e:
        tpusim.sweep_file(path, n_workers=0)
    assert e.value.code == 3 and f"tpu-sim: error: {e.value}" == line


def test_sweep_file_timeout_is_for_the_cli(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"workloads": [{"kind": "gemm", "m": 4, "k": 4, "n": 4}], "timeout_s": 5}')
    with pytest.raises(tpusim.UsageError, match="timeout_s: tpusim.sweep cannot stop a run"):
        tpusim.sweep_file(path, n_workers=0)


def test_row_errors_name_their_workload(tmp_path):
    # Each row's error names its own workload (not the first's), and a negative size is
    # said as such (not the C++ library's text).
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"workloads": [{"kind": "gemm", "m": 4, "k": 4, "n": 4}] * 2 +
                                             [{"kind": "gemm", "m": -5, "k": 4, "n": 4}]}))
    df = tpusim.sweep_file(path, n_workers=0)
    assert df.workload.tolist() == ["gemm0", "gemm1", "gemm2"]
    assert df.error.iloc[2] == 'workload gemm2: "m" must be an integer >= 0, not -5'
    with pytest.raises(tpusim.UsageError, match="max_cycles"):
        tpusim.sweep({}, [{"kind": "gemm", "m": 4, "k": 4, "n": 4}], n_workers=0, max_cycles=-1)
