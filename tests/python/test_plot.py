"""tpusim.plot on real runs: every plot writes a PNG of sensible size and
dimensions; what each drew (its path's ``data``) against the runs and the
trace it came from; malformed input; tools/tpu_plot.py without the module."""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tpusim

pd = pytest.importorskip("pandas")
matplotlib = pytest.importorskip("matplotlib")
import matplotlib.image  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_png(path, min_kb=10, min_w=500, min_h=300):
    assert os.path.isfile(path), path
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC, f"{path} is not a PNG"
    assert os.path.getsize(path) > min_kb * 1024, f"{path}: {os.path.getsize(path)} bytes"
    img = matplotlib.image.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, f"{path}: {w} x {h} pixels"
    assert w <= 3000 and h <= 3000, f"{path}: {w} x {h} pixels"
    # Not blank: some pixels differ from the background.
    assert (img[..., :3] < 0.9).mean() > 0.01
    return w, h


@pytest.fixture(scope="module")
def tpuv1():
    return tpusim.Config("tpuv1")


@pytest.fixture(scope="module")
def cnn(source_dir, tpuv1):
    d = source_dir / "programs" / "nets" / "digits_cnn"
    x = np.load(d / "test_x.npy")[:8]
    return tpusim.net(d / "model.json", x, config=tpuv1)


@pytest.fixture(scope="module")
def gemms(tpuv1):
    rng = np.random.default_rng(3)
    out = {}
    for m, k, n in ((512, 512, 512), (8, 512, 512)):
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (k, n), dtype=np.int8)
        out[f"gemm {m}x{k}x{n}"] = tpusim.gemm(a, b, config=tpuv1)
    return out


@pytest.fixture(scope="module")
def sweep_df(source_dir):
    d = source_dir / "programs" / "nets" / "digits_cnn"
    return tpusim.sweep(
        {"array_n": [16, 32, 64]},
        [{"name": "square", "kind": "gemm", "m": 256, "k": 256, "n": 256},
         {"name": "skinny", "kind": "gemm", "m": 8, "k": 256, "n": 256},
         {"name": "cnn", "kind": "net", "model": str(d / "model.json"),
          "input": str(d / "test_x.npy"), "batch": 4}],
        base={"preset": "tpuv1"}, n_workers=0, progress=False)


@pytest.fixture(scope="module")
def trace(tmp_path_factory, tpu_sim, source_dir):
    """A --timeline trace of programs/mlp2.s, and the same run through the API."""
    d = tmp_path_factory.mktemp("timeline")
    prog = tpusim.assemble_file(source_dir / "programs" / "mlp2.s")
    prog.save(d / "mlp2.tpu")
    data = source_dir / "programs" / "data" / "mlp2"
    subprocess.run([tpu_sim, "run", str(d / "mlp2.tpu"), "--hostmem", str(data / "host.npy"),
                    "--weights", str(data / "weights.npy"), "--timeline", str(d / "t.json")],
                   check=True, capture_output=True)
    run = tpusim.run(prog, np.load(data / "host.npy"), np.load(data / "weights.npy"))
    return d / "t.json", run


# ---------------------------------------------------------------- layers

def test_layers(cnn, tmp_path):
    out = tpusim.plot.layers(cnn, tmp_path / "layers.png")
    assert out == str(tmp_path / "layers.png")
    check_png(out)
    df = out.data
    assert df["layer"].tolist() == [lay["name"] for lay in cnn.layers]
    assert df["cycles"].tolist() == [lay["cycles"] for lay in cnn.layers]
    assert df["active"].tolist() == [lay["mmc_rows"] for lay in cnn.layers]
    assert df["utilization"].tolist() == [lay["utilization"] for lay in cnn.layers]
    parts = [c for c in ("active", "weight_stall", "weight_shift", "input_data_stall",
                         "raw_stall", "non_matrix") if c in df]
    if "weight_stall_cycles" in cnn.layers[0]:
        # The split of each layer's cycles by the TPUv1 counters adds up.
        assert "weight_stall" in df
        assert (df[parts].sum(axis=1) == df["cycles"]).all()
        assert df["weight_stall"].tolist() == [lay["weight_stall_cycles"] for lay in cnn.layers]
    else:
        assert parts == ["active", "non_matrix"]


def test_layers_without_the_stall_split(cnn, tmp_path):
    """Statistics without the per-layer stall fields: cycles unsplit, no failure."""
    stats = copy.deepcopy(cnn.stats)
    for lay in stats["layers"]:
        for k in ("weight_stall_cycles", "weight_shift_cycles", "raw_stall_cycles",
                  "input_data_stall_cycles", "non_matrix_cycles"):
            lay.pop(k, None)
    out = tpusim.plot.layers(stats, tmp_path / "plain.png")
    check_png(out)
    assert list(out.data.columns) == ["layer", "type", "cycles", "utilization", "active",
                                      "non_matrix"]
    assert (out.data["active"] + out.data["non_matrix"] == out.data["cycles"]).all()


def test_layers_from_a_stats_file(tpu_sim, source_dir, tmp_path):
    d = source_dir / "programs" / "nets" / "resnet_mini"
    np.save(tmp_path / "x.npy", np.load(d / "test_x.npy")[:2])
    subprocess.run([tpu_sim, "net", str(d / "model.json"), "--input", str(tmp_path / "x.npy"),
                    "--preset", "tpuv1", "--stats", str(tmp_path / "s.json")],
                   check=True, capture_output=True)
    out = tpusim.plot.layers(str(tmp_path / "s.json"), tmp_path / "resnet.png")
    check_png(out)
    stats = json.loads((tmp_path / "s.json").read_text())
    assert out.data["cycles"].tolist() == [lay["cycles"] for lay in stats["layers"]]
    with pytest.raises(ValueError, match="'layers' list"):
        tpusim.plot.layers({"cycles": 1}, tmp_path / "no.png")
    assert not (tmp_path / "no.png").exists()


# ---------------------------------------------------------------- roofline

def test_roofline(gemms, cnn, sweep_df, tpuv1, tmp_path):
    points = [gemms, ("digits_cnn", cnn), sweep_df]
    out = tpusim.plot.roofline(points, tmp_path / "roof.png", tpuv1)
    check_png(out)
    df = out.data.set_index("label")
    n = tpuv1.array_n
    for name, r in gemms.items():
        p = df.loc[name]
        tiles = r.stats["units"]["weight_dma"]["instructions"]
        assert p.weight_bytes == tiles * n * n
        assert p.macs == r.stats["tpuv1"]["useful_macs"]
        assert p.intensity == pytest.approx(p.macs / p.weight_bytes)
        assert p.ops_per_s == pytest.approx(2 * p.macs / r.stats["seconds"])
    p = df.loc["digits_cnn"]
    assert p.weight_bytes == sum(lay["weight_bytes"] for lay in cnn.layers)
    assert p.macs == cnn.total["useful_macs"]
    # Every point lies under its configuration's roof.
    for p in out.data.itertuples():
        peak = p.array_n ** 2 * 2 * p.clock_mhz * 1e6
        slope = 2 * p.weight_bytes_per_cycle * p.clock_mhz * 1e6
        assert p.ops_per_s <= min(peak, slope * p.intensity) * (1 + 1e-9), p.label
    # The sweep's GEMM rows at their own N; its network rows carry no weight
    # traffic, so they are left out and said to be.
    assert {"square N=16", "skinny N=64"} <= set(df.index)
    assert df.loc["square N=16"].array_n == 16
    assert sum("cnn" in s for s in out.data.attrs["skipped"]) == 3
    # Every MAC the array did: at least the useful ones.
    arr = tpusim.plot.roofline(gemms, tmp_path / "roof_array.png", tpuv1, ops="array").data
    assert (arr["macs"].to_numpy() >= df.loc[arr["label"], "macs"].to_numpy()).all()
    with pytest.raises(ValueError, match="cfg"):
        tpusim.plot.roofline(gemms, tmp_path / "x.png", None)


def test_roofline_config_forms(gemms, tmp_path):
    d = {"array_n": 256, "weight_bytes_per_cycle": 49, "clock_mhz": 700}
    a = tpusim.plot.roofline(gemms, tmp_path / "a.png", d).data
    b = tpusim.plot.roofline(gemms, tmp_path / "b.png", "tpuv1").data
    pd.testing.assert_frame_equal(a, b)


# ---------------------------------------------------------------- timeline

def test_timeline_bars_match_the_trace(trace, tmp_path):
    path, run = trace
    out = tpusim.plot.timeline(str(path), tmp_path / "t.png")
    check_png(out)
    t = json.loads(path.read_text())
    slices = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert len(out.data) == len(slices)
    for b in out.data:
        a = b["args"]
        if b["kind"] == "stall":
            assert (b["start"], b["cycles"]) == (a["first"], a["cycles"])
            assert b["track"] == "controller"
        elif b["kind"] == "issue":
            assert (b["start"], b["cycles"]) == (a["issue"], 1)
        elif b["kind"] == "wait":
            assert b["track"] == "systolic_array" and b["name"].startswith("wait for weights: MMC.S")
            assert (b["start"], b["cycles"]) == (a["issue"] + 1, a["start"] - a["issue"] - 1)
        else:
            assert (b["start"], b["cycles"]) == (a["start"], a["completion"] - a["start"] + 1)
    assert any(b["kind"] == "wait" for b in out.data)  # mlp2's first MMC.S waits for tile 0
    # ... and the run's retire records: each unit instruction is a bar.
    units = {(b["args"]["pc"], b["start"], b["start"] + b["cycles"] - 1)
             for b in out.data if b["kind"] == "instruction"}
    issues = {(b["args"]["pc"], b["start"]) for b in out.data if b["kind"] == "issue"}
    for rec in run.retired:
        pc, issue, start, completion = (int(rec[k]) for k in ("pc", "issue", "start",
                                                               "completion"))
        assert (pc, issue) in issues
        op = run.program.instructions[pc].split()[0]
        if op not in ("SETQ", "HLT", "CMAP", "CSTR", "CTAP", "CWIN", "NOP"):
            assert (pc, start, completion) in units, run.program.instructions[pc]
    # The stall slices add up to the run's stall cycles.
    stalls = sum(b["cycles"] for b in out.data if b["kind"] == "stall")
    assert stalls == sum(run.stats["stall_cycles"].values())


def test_timeline_window_and_dict(trace, tmp_path):
    path, run = trace
    t = json.loads(path.read_text())
    out = tpusim.plot.timeline(t, tmp_path / "w.png", max_cycles=120)
    check_png(out)
    assert out.data and all(b["start"] < 120 for b in out.data)
    whole = tpusim.plot.timeline_slices(t)[0]
    assert len(out.data) == sum(b["start"] < 120 and b["start"] + b["cycles"] > 0 for b in whole)


def test_timeline_of_a_network(tpu_sim, source_dir, tmp_path):
    d = source_dir / "programs" / "nets" / "digits_cnn"
    np.save(tmp_path / "x.npy", np.load(d / "test_x.npy")[:2])
    subprocess.run([tpu_sim, "net", str(d / "model.json"), "--input", str(tmp_path / "x.npy"),
                    "--preset", "small16", "--timeline", str(tmp_path / "t.json")],
                   check=True, capture_output=True)
    out = tpusim.plot.timeline(tmp_path / "t.json", tmp_path / "net.png")
    check_png(out)
    assert {"controller", "systolic_array", "weight_dma"} <= {b["track"] for b in out.data}


def test_timeline_malformed(trace, tmp_path):
    path, _ = trace
    t = json.loads(path.read_text())
    with pytest.raises(ValueError, match="not a Chrome trace"):
        tpusim.plot.timeline({"events": []}, tmp_path / "x.png")
    no_clock = dict(t, otherData={})
    with pytest.raises(ValueError, match="clock_mhz"):
        tpusim.plot.timeline(no_clock, tmp_path / "x.png")
    bad = copy.deepcopy(t)
    i = next(i for i, e in enumerate(bad["traceEvents"]) if e["ph"] == "X")
    del bad["traceEvents"][i]["dur"]
    with pytest.raises(ValueError, match=rf"traceEvents\[{i}\].*ts and dur"):
        tpusim.plot.timeline(bad, tmp_path / "x.png")
    (tmp_path / "broken.json").write_text('{"traceEvents": [')
    with pytest.raises(ValueError, match="not valid JSON"):
        tpusim.plot.timeline(str(tmp_path / "broken.json"), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


# ---------------------------------------------------------------- sweeps

def test_sweep_utilization(sweep_df, tmp_path):
    out = tpusim.plot.sweep_utilization(sweep_df, tmp_path / "s.png")
    check_png(out)
    table = out.data
    assert table.index.tolist() == [16, 32, 64]
    assert sorted(table.columns) == ["cnn", "skinny", "square"]
    for r in sweep_df.itertuples():
        assert table.loc[r.array_n, r.workload] == r.utilization
    # From the CSV, with a failed run: left out of the lines, named in the legend.
    csv = tmp_path / "s.csv"
    failed = sweep_df.copy()
    failed.loc[0, ["status", "error", "utilization"]] = ["error", "boom", float("nan")]
    failed.to_csv(csv, index=False)
    out = tpusim.plot.sweep_utilization(str(csv), tmp_path / "s2.png", by=["workload"])
    check_png(out)
    assert np.isnan(out.data.loc[16, "square"])
    with pytest.raises(ValueError, match="several rows"):
        tpusim.plot.sweep_utilization(pd.concat([sweep_df, sweep_df]), tmp_path / "d.png")
    with pytest.raises(ValueError, match="no column"):
        tpusim.plot.sweep_utilization(sweep_df, tmp_path / "d.png", x="ub_rows")


# ---------------------------------------------------------------- outputs

def test_outputs_like_the_tools(sweep_df, tmp_path):
    """A plot is written whole or not at all, through a symlink (the link
    stays a link), with a new file's usual permissions, never into a missing
    folder."""
    target = tmp_path / "real.png"
    target.write_bytes(b"old")
    link = tmp_path / "link.png"
    link.symlink_to(target.name)
    check_png(tpusim.plot.sweep_utilization(sweep_df, link))
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    umask = os.umask(0o022)
    try:
        fresh = tpusim.plot.sweep_utilization(sweep_df, tmp_path / "fresh.png")
    finally:
        os.umask(umask)
    assert (os.stat(fresh).st_mode & 0o777) == 0o644
    with pytest.raises(FileNotFoundError):
        tpusim.plot.sweep_utilization(sweep_df, tmp_path / "missing" / "x.png")
    assert not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.png", "link.png", "real.png"]


# ---------------------------------------------------------------- the CLI

def tool(source_dir, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # standalone
    p = subprocess.run([sys.executable, str(source_dir / "tools" / "tpu_plot.py"), *map(str, args)],
                       capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_cli(source_dir, tpu_sim, trace, sweep_df, gemms, tmp_path):
    path, _ = trace
    d = source_dir / "programs" / "nets" / "digits_cnn"
    np.save(tmp_path / "x.npy", np.load(d / "test_x.npy")[:4])
    subprocess.run([tpu_sim, "net", str(d / "model.json"), "--input", str(tmp_path / "x.npy"),
                    "--preset", "tpuv1", "--stats", str(tmp_path / "net.json")],
                   check=True, capture_output=True)
    (tmp_path / "gemm.json").write_text(json.dumps(gemms["gemm 512x512x512"].stats))
    sweep_df.to_csv(tmp_path / "sweep.csv", index=False)

    p = tool(source_dir, "layers", tmp_path / "net.json", "-o", tmp_path / "l.png")
    assert p.stdout.strip() == str(tmp_path / "l.png")
    check_png(tmp_path / "l.png")
    tool(source_dir, "timeline", path, "-o", tmp_path / "t.png", "--max-cycles", 200)
    check_png(tmp_path / "t.png")
    tool(source_dir, "sweep", tmp_path / "sweep.csv", "-o", tmp_path / "s.png")
    check_png(tmp_path / "s.png")
    tool(source_dir, "roofline", f"gemm={tmp_path / 'gemm.json'}", tmp_path / "net.json",
         tmp_path / "sweep.csv", "-o", tmp_path / "r.png", "--array", 256,
         "--weight-bytes-per-cycle", 49, "--clock-mhz", 700)
    check_png(tmp_path / "r.png")
    # With the module on PYTHONPATH, a preset names the configuration.
    p = subprocess.run([sys.executable, str(source_dir / "tools" / "tpu_plot.py"), "roofline",
                        str(tmp_path / "gemm.json"), "-o", str(tmp_path / "r2.png"),
                        "--preset", "tpuv1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    check_png(tmp_path / "r2.png")

    # Errors: 3 for a malformed input, 2 for a usage error; no file either way.
    (tmp_path / "bad.json").write_text("{}")
    p = tool(source_dir, "timeline", tmp_path / "bad.json", "-o", tmp_path / "x.png", check=False)
    assert p.returncode == 3 and "not a Chrome trace" in p.stderr
    p = tool(source_dir, "roofline", tmp_path / "gemm.json", "-o", tmp_path / "x.png", check=False)
    assert p.returncode == 2 and "--preset" in p.stderr
    p = tool(source_dir, "layers", tmp_path / "missing.json", "-o", tmp_path / "x.png",
             check=False)
    assert p.returncode == 3 and "missing.json" in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_plot_imports_without_the_extension(source_dir):
    """plot.py by path, in an interpreter where tpusim cannot be imported."""
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "assert 'tpusim' not in sys.modules and 'tpusim._tpusim' not in sys.modules\n"
            "print(sorted(m.__all__))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", code, str(source_dir / "python" / "tpusim" / "plot.py")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "timeline" in p.stdout


def test_energy_per_layer(cnn, tmp_path):
    # Each bar is the layer's energy by unit as the statistics give it (µJ),
    # and the units add up to the layer's energy.
    out = tpusim.plot.energy(cnn, tmp_path / "energy.png")
    check_png(out)
    df = out.data
    assert len(df) == len(cnn.layers)
    units = ["matrix_unit", "unified_buffer", "accumulators", "weight_fifo", "activation_unit",
             "weight_memory", "host_interface", "controller", "fixed"]
    for row, lay in zip(df.itertuples(), cnn.layers):
        for u in units:
            assert getattr(row, u) == pytest.approx(1e6 * lay["energy_by_unit_j"][u])
        assert sum(getattr(row, u) for u in units) == pytest.approx(1e6 * lay["energy_j"])
    # The run's energy: the batch over the total joules is inferences per joule.
    e = cnn.energy
    assert e["inferences_per_j"] == pytest.approx(8 / e["total_j"])
    assert e["total_j"] == pytest.approx(e["static_j"] + e["dynamic_j"])
    # Statistics without the energy fields are refused with the reason.
    old = copy.deepcopy(cnn.stats)
    for lay in old["layers"]:
        del lay["energy_by_unit_j"]
    with pytest.raises(ValueError, match="energy_by_unit_j"):
        tpusim.plot.energy(old, tmp_path / "bad.png")
