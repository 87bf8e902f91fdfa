"""tpusim.sweep on a real local Dask cluster of two worker processes, failing
runs as rows, and `tpu-sim sweep` on the same sweep file."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tpusim

pd = pytest.importorskip("pandas")
distributed = pytest.importorskip("distributed")

HERE = os.path.dirname(os.path.abspath(__file__))


def worker_pid(config):
    """A workload that reports where it ran."""
    return {"pid": os.getpid(), "cycles": config.array_n}


def raises_in_python(config):
    raise RuntimeError(f"no workload for N={config.array_n}")


def kills_its_worker(config):
    """N=8 with FIFO depth 1 ends the worker process that runs it; the others take a while."""
    if config.array_n == 8 and config.fifo_depth == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return {"cycles": config.array_n}


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    # The workers receive this module's functions by value (they cannot import it).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    d = tmp_path_factory.mktemp("mats")
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (40, 24), dtype=np.int8)
    b = rng.integers(-128, 128, (24, 30), dtype=np.int8)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    return d, a, b


def test_sweep_on_local_cluster(client, matrices, source_dir, tmp_path):
    d, a, b = matrices
    mlp = source_dir / "programs" / "nets" / "digits_mlp"
    workloads = [
        {"name": "gemm", "kind": "gemm", "a": str(d / "a.npy"), "b": str(d / "b.npy")},
        {"name": "mlp", "kind": "net", "model": str(mlp / "model.json"),
         "input": str(mlp / "test_x.npy"), "batch": 8},
        worker_pid,
    ]
    grid = {"array_n": [4, 8, 16], "fifo_depth": [1, 4]}
    df = tpusim.sweep(grid, workloads, client=client, out=tmp_path / "r.csv",
                      rows_dir=tmp_path / "rows", progress=False)
    assert len(df) == 6 * 3 and (df["status"] == "ok").all(), df[df.status != "ok"].error.tolist()
    assert list(df.columns[:7]) == ["run", "array_n", "fifo_depth", "workload", "status",
                                    "error_code", "error"]
    assert df["run"].tolist() == list(range(18))
    # Each run against the same run through the API, in this process.
    x = np.load(mlp / "test_x.npy")[:8]
    for _, row in df.iterrows():
        cfg = tpusim.Config(array_n=int(row.array_n), fifo_depth=int(row.fifo_depth))
        if row.workload == "gemm":
            r = tpusim.gemm(a, b, config=cfg)
            assert row.cycles == r.stats["cycles"] and row.macs == r.stats["macs"]
            assert row["stall_cycles.raw_hazard"] == r.stats["stall_cycles"]["raw_hazard"]
        elif row.workload == "mlp":
            assert row.cycles == tpusim.net(mlp / "model.json", x, config=cfg).total["cycles"]
    # On the two worker processes, not here.
    pids = set(df[df.workload == "worker_pid"]["pid"])
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    # The CSV has the same table; one row file per run.
    csv = pd.read_csv(tmp_path / "r.csv", keep_default_na=False)
    assert csv["cycles"].tolist() == df["cycles"].tolist()
    assert sorted(os.listdir(tmp_path / "rows")) == [f"run-{i:05d}.json" for i in range(18)]
    assert json.loads((tmp_path / "rows" / "run-00000.json").read_text())["workload"] == "gemm"


def test_failing_runs_are_rows(client, matrices):
    d, _, _ = matrices
    workloads = {
        "gemm": {"kind": "gemm", "a": str(d / "a.npy"), "b": str(d / "b.npy")},
        "missing": {"kind": "gemm", "a": str(d / "nope.npy"), "b": str(d / "b.npy")},
        "python": raises_in_python,
    }
    # fifo_depth 0 is not a valid configuration: every run on it fails.
    df = tpusim.sweep({"fifo_depth": [4, 0]}, workloads, client=client, progress=False)
    assert len(df) == 6
    ok = df[(df.fifo_depth == 4) & (df.workload == "gemm")]
    assert ok.status.tolist() == ["ok"] and ok.cycles.iloc[0] > 0
    bad_cfg = df[df.fifo_depth == 0]
    assert (bad_cfg.status == "error").all() and (bad_cfg.error_code == 3).all()
    assert bad_cfg.error.str.contains("fifo_depth").all()
    missing = df[(df.fifo_depth == 4) & (df.workload == "missing")].iloc[0]
    assert missing.status == "error" and missing.error_code == 3 and "nope.npy" in missing.error
    py = df[(df.fifo_depth == 4) & (df.workload == "python")].iloc[0]
    assert py.status == "error" and py.error == "RuntimeError: no workload for N=8"


def test_a_run_that_kills_its_worker_loses_only_its_row(client):
    # The run at N=8, depth 1 kills every worker that runs it. The runs queued on the same
    # worker are lost with it; they are run again, alone, and only its row says it was lost.
    # On one worker of the sweep's own cluster (`client` only sends this module's functions
    # by value), so that the healthy runs are always beside it, and the shared cluster
    # keeps its workers.
    grid = {"array_n": [8, 4, 16], "fifo_depth": [1, 2, 3]}
    df = tpusim.sweep(grid, [kills_its_worker], progress=False, n_workers=1)
    assert len(df) == 9
    killer = (df.array_n == 8) & (df.fifo_depth == 1)
    assert df[killer].status.tolist() == ["error"] and df[killer].error.iloc[0].startswith("the run was lost")
    ok = df[~killer]
    assert (ok.status == "ok").all(), ok[ok.status != "ok"][["array_n", "fifo_depth", "error"]].values.tolist()
    assert ok.cycles.tolist() == ok.array_n.tolist()


def test_sweep_file_matches_cli(client, tpu_sim, source_dir, tmp_path):
    spec = {
        "base": {"preset": "small8"},
        "grid": {"array_n": [8, 16], "ub_rows": [16384, 64]},
        "workloads": [
            {"name": "g", "kind": "gemm", "m": 100, "k": 40, "n": 20, "seed": 5},
            {"name": "g8", "kind": "gemm", "m": 30, "k": 30, "n": 30, "seed": 2, "requant": "93,13,-3",
             "act": "relu", "check": True},
            {"name": "tile", "kind": "run", "program": "programs/one_tile.s",
             "hostmem": "programs/data/one_tile/host.npy",
             "weights": "programs/data/one_tile/weights.npy"},
        ],
    }
    # Paths relative to the sweep file's folder.
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(spec))
    os.symlink(source_dir / "programs", tmp_path / "programs")
    p = subprocess.run([tpu_sim, "sweep", str(path), "--jobs", "2", "--out", str(tmp_path / "cli.csv")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "12 runs (4 configurations x 3 workloads)" in p.stderr
    cli = pd.read_csv(tmp_path / "cli.csv", keep_default_na=False)
    df = tpusim.sweep_file(path, client=client, progress=False)
    assert cli["status"].tolist() == df["status"].tolist()
    assert cli["error"].tolist() == df["error"].tolist()
    ok = df.status == "ok"
    assert cli[ok]["cycles"].astype(int).tolist() == df[ok]["cycles"].astype(int).tolist()
    # one_tile is assembled for N=8; a small unified buffer does not hold the GEMMs' chunks.
    assert df[(df.workload == "tile") & (df.array_n == 16)].error.str.contains("N=").all()
    assert ok.sum() >= 5


def test_sweep_in_process_without_dask(matrices):
    d, a, b = matrices
    df = tpusim.sweep({"array_n": [8]}, [{"kind": "gemm", "a": str(d / "a.npy"), "b": str(d / "b.npy")}],
                      n_workers=0, progress=False)
    assert df.workload.tolist() == ["gemm0"] and df.cycles[0] == tpusim.gemm(a, b).stats["cycles"]
    with pytest.raises(tpusim.UsageError, match="unique"):
        tpusim.sweep({}, [{"name": "x", "kind": "gemm"}, {"name": "x", "kind": "gemm"}], n_workers=0)


def test_sweep_script_with_its_own_cluster(tmp_path):
    """A script as the docs show it: its own LocalCluster, an __main__ guard."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "sweep_script.py"), str(tmp_path / "s.csv")],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(tmp_path / "s.csv")
    assert len(df) == 4 and (df.status == "ok").all()
    assert df.groupby("array_n").cycles.first().is_monotonic_decreasing
