#!/usr/bin/python3
"""The energy model's statistics (docs/energy.md, "Statistics") in the --stats
JSON of every run kind: run, gemm, net (a model file), net (an ONNX model
exported by PyTorch here), topo and sweep, and the --report CSV's columns.
Each energy object must be whole and add up: static + dynamic = total, the
units' and the event kinds' energies sum to the total, the average power is
the total over the run's seconds, and a network's layers' static energy adds
up to its programs' (the layers' cycles partition the programs' cycles).

  energy_fields_check.py BIN_DIR SOURCE_DIR
"""
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FIELDS = ["events", "by_event_j", "by_unit_j", "static_j", "dynamic_j", "total_j", "avg_power_w", "tops_per_w"]
UNITS = ["matrix_unit", "unified_buffer", "accumulators", "weight_fifo", "activation_unit", "weight_memory",
         "host_interface", "controller", "fixed"]


def close(a, b, what):
    assert abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30), f"{what}: {a} != {b}"


def check_energy(e, seconds, what):
    for f in FIELDS:
        assert f in e, f"{what}: no energy.{f}"
    assert sorted(e["by_unit_j"]) == sorted(UNITS), f"{what}: units {sorted(e['by_unit_j'])}"
    close(e["static_j"] + e["dynamic_j"], e["total_j"], f"{what}: static + dynamic")
    close(sum(e["by_unit_j"].values()), e["total_j"], f"{what}: units")
    close(sum(e["by_event_j"].values()), e["total_j"], f"{what}: event kinds + static")
    assert e["total_j"] > 0 and e["static_j"] > 0 and e["dynamic_j"] > 0, what
    close(e["avg_power_w"], e["total_j"] / seconds, f"{what}: power")


def run(cmd, cwd):
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr}"
    return p


def check_net_stats(s, what):
    t = s["total"]
    check_energy(t["energy"], t["seconds"], what)
    close(t["energy"]["inferences_per_j"], s["batch"] / t["energy"]["total_j"], f"{what}: inferences/J")
    for k, p in enumerate(s["programs"]):
        check_energy(p["energy"], p["seconds"], f"{what}: program {k}")
    close(sum(p["energy"]["total_j"] for p in s["programs"]), t["energy"]["total_j"], f"{what}: programs")
    close(sum(lay["static_energy_j"] for lay in s["layers"]), t["energy"]["static_j"], f"{what}: layers' static")
    for lay in s["layers"]:
        assert sorted(lay["energy_by_unit_j"]) == sorted(UNITS), what
        close(sum(lay["energy_by_unit_j"].values()), lay["energy_j"], f"{what}: layer {lay['name']}")


def check_report(path, what):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for col in ["energy_uj", "static_energy_uj", "avg_power_w"] + [f"{u}_energy_uj" for u in UNITS]:
        assert col in rows[0], f"{what}: no column {col}"
    assert sum(float(r["energy_uj"]) for r in rows) > 0, what


def main():
    bin_dir, src = Path(sys.argv[1]), Path(sys.argv[2])
    sim = bin_dir / "tpu-sim"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # run: programs/one_tile.s at N = 8.
        run(["/usr/bin/python3", src / "tests/cli/one_tile_check.py", "make", d, "8"], d)
        run([bin_dir / "tpu-as", src / "programs/one_tile.s", "-o", d / "p.tpu", "--array", "8"], d)
        out = run([sim, "run", d / "p.tpu", "--hostmem", d / "host.npy", "--weights", d / "weights.npy",
                   "--out", d / "o.npy", "--stats", d / "run.json"], d).stdout
        s = json.loads((d / "run.json").read_text())
        check_energy(s["energy"], s["seconds"], "run")
        assert "energy " in out and "TOPS/W" in out, "run: no energy line in the summary"
        # gemm
        rng = np.random.default_rng(7)
        np.save(d / "a.npy", rng.integers(-128, 128, (19, 23), dtype=np.int8))
        np.save(d / "b.npy", rng.integers(-128, 128, (23, 11), dtype=np.int8))
        run([sim, "gemm", "--a", d / "a.npy", "--b", d / "b.npy", "--out", d / "c.npy", "--array", "4",
             "--stats", d / "gemm.json"], d)
        s = json.loads((d / "gemm.json").read_text())
        check_energy(s["energy"], s["seconds"], "gemm")
        # net: a model file
        net = src / "programs/nets/digits_mlp"
        run([sim, "net", net / "model.json", "--input", net / "test_x.npy", "--stats", d / "net.json",
             "--report", d / "net.csv"], d)
        check_net_stats(json.loads((d / "net.json").read_text()), "net")
        check_report(d / "net.csv", "net report")
        # net: an ONNX model (a small MLP exported here)
        import torch
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(12, 10), torch.nn.ReLU(), torch.nn.Linear(10, 6)).eval()
        torch.onnx.export(model, torch.zeros(1, 12), str(d / "m.onnx"), opset_version=13,
                          input_names=["x"], output_names=["y"])
        np.save(d / "calib.npy", rng.normal(size=(8, 12)).astype(np.float32))
        np.save(d / "x.npy", rng.normal(size=(3, 12)).astype(np.float32))
        run([sim, "net", d / "m.onnx", "--calibrate", d / "calib.npy", "--input", d / "x.npy",
             "--stats", d / "onnx.json"], d)
        check_net_stats(json.loads((d / "onnx.json").read_text()), "onnx")
        # topo: a SCALE-Sim convolution row
        (d / "t.csv").write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                                 "Channels, Num Filter, Strides,\nc1, 8, 8, 3, 3, 4, 8, 1,\n")
        run([sim, "topo", d / "t.csv", "--stats", d / "topo.json", "--report", d / "topo.csv"], d)
        s = json.loads((d / "topo.json").read_text())
        check_energy(s["total"]["energy"], s["total"]["seconds"], "topo")
        check_report(d / "topo.csv", "topo report")
        # sweep: a GEMM over two array sizes; the energy columns of its CSV
        (d / "sweep.json").write_text(json.dumps({"grid": {"array_n": [4, 8]},
                                                   "workloads": [{"kind": "gemm", "m": 16, "k": 8, "n": 8}]}))
        rows = list(csv.DictReader(run([sim, "sweep", d / "sweep.json"], d).stdout.splitlines()))
        assert len(rows) == 2 and all(r["status"] == "ok" for r in rows), rows
        for r in rows:
            for f in ["energy.total_j", "energy.avg_power_w", "energy.tops_per_w"]:
                assert float(r[f]) > 0, f"sweep: {f}"
    print("energy fields: run, gemm, net, onnx, topo, sweep OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
