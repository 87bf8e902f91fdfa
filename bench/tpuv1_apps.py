#!/usr/bin/python3
"""Synthetic versions of the TPUv1 paper's six applications on the tpuv1 preset.

Jouppi et al., ISCA 2017, Table 1 gives each application's layers and batch
and Table 3 its measured TOPS on TPUv1. The layers' exact shapes and data are
not published; these stand-ins follow Table 1's layer counts, weight counts and
batch sizes (as issue 13 lists them), with random int8 weights and biases,
ReLU activations at zero point -128 (so every layer has a folded bias pass),
and run as one program each with `tpu-sim net --preset tpuv1` (activations on
chip, the input read once and the output written once). It prints each
application's TOPS at 700 MHz (2 ops per useful MAC) beside the paper's, and
the tpuv1 counters (docs/microarchitecture.md) beside the paper's Table 3
rows.

  MLP0   5 FC 2048 x 2048, batch 200
  MLP1   4 FC alternating 1280 -> 1024 -> 1280, batch 168
  LSTM0  24 FC alternating 1024 -> 2048 -> 1024, batch 64 (the recurrences'
         matrix multiplies; the gates' elementwise work is not modelled)
  LSTM1  37 FC alternating 600 -> 1536 -> 600, batch 96
  CNN0   16 conv 3x3 256 -> 256 on 19x19, same, batch 8 (bench/cnn0.py)
  CNN1   not built: its layer shapes are not given (4 FC and 72 conv layers)

  bench/tpuv1_apps.py [--tpu-sim build/sim/tpu-sim]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CLOCK_HZ = 700e6
# The paper's Table 3, TOPS on TPUv1.
PAPER_TOPS = {"MLP0": 12.3, "MLP1": 9.7, "LSTM0": 3.7, "LSTM1": 2.8, "CNN0": 86.0, "CNN1": 14.1}
# The paper's Table 3 rows, % of cycles (MACs: % of peak), in the order of ROWS.
ROWS = [("active", "array_active_cycles"), ("useful", "useful_macs"), ("unused", "unused_macs"),
        ("w.stall", "weight_stall_cycles"), ("w.shift", "weight_shift_cycles"),
        ("non-mx", "non_matrix_cycles"), ("RAW", "raw_stall_cycles"),
        ("input", "input_data_stall_cycles")]
PAPER_ROWS = {
    "MLP0": [12.7, 12.5, 0.3, 53.9, 15.9, 17.5, 3.3, 6.1],
    "MLP1": [10.6, 9.4, 1.2, 44.2, 13.4, 31.9, 8.4, 8.8],
    "LSTM0": [8.2, 8.2, 0.0, 58.1, 15.8, 17.9, 14.6, 5.1],
    "LSTM1": [10.5, 6.3, 4.2, 62.1, 17.1, 10.3, 10.6, 2.4],
    "CNN0": [78.2, 78.2, 0.0, 0.0, 0.0, 21.8, 3.5, 3.4],
    "CNN1": [46.2, 22.5, 23.7, 28.1, 7.0, 18.7, 22.8, 0.6],
}


def dense_stack(sizes):
    return [("dense", sizes[i], sizes[i + 1]) for i in range(len(sizes) - 1)]


def apps():
    alt = lambda a, b, n: [a if i % 2 == 0 else b for i in range(n + 1)]  # noqa: E731
    return {
        "MLP0": (dense_stack([2048] * 6), [2048], 200),
        "MLP1": (dense_stack(alt(1280, 1024, 4)), [1280], 168),
        "LSTM0": (dense_stack(alt(1024, 2048, 24)), [1024], 64),
        "LSTM1": (dense_stack(alt(600, 1536, 37)), [600], 96),
        "CNN0": ([("conv", 256, 256)] * 16, [19, 19, 256], 8),
    }


def write_model(d, layers, in_shape, rng):
    model = {"format": "tpu-sim-net", "version": 1, "name": d.name,
             "input": {"shape": in_shape, "scale": 0.02, "zero_point": -128}, "layers": []}
    for i, (kind, k, n) in enumerate(layers):
        shape = (k, n) if kind == "dense" else (3, 3, k, n)
        fan_in = k if kind == "dense" else 9 * k
        np.save(d / f"w{i}.npy", rng.integers(-127, 128, size=shape, dtype=np.int8))
        np.save(d / f"b{i}.npy", rng.integers(-2000, 2000, size=(n,), dtype=np.int32))
        layer = {"type": "dense" if kind == "dense" else "conv2d", "name": f"l{i}",
                 "weights": f"w{i}.npy", "bias": f"b{i}.npy",
                 "weight_scale": 1.0 / 127 / np.sqrt(fan_in), "activation": "relu",
                 "output": {"scale": 0.02, "zero_point": -128}}
        if kind == "conv":
            layer["padding"] = "same"
        model["layers"].append(layer)
    (d / "model.json").write_text(json.dumps(model))


def run_app(tpu_sim, name, layers, in_shape, batch, rng):
    """Writes the stand-in `name` (its weights, then its input, from `rng`),
    runs it with `tpu-sim net --preset tpuv1` and returns its --stats JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / name
        d.mkdir()
        write_model(d, layers, in_shape, rng)
        np.save(d / "x.npy", rng.integers(-128, 128, size=[batch] + in_shape, dtype=np.int8))
        cmd = [tpu_sim, "net", str(d / "model.json"), "--input", str(d / "x.npy"),
               "--preset", "tpuv1", "--stats", str(d / "s.json")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{name}: {r.stdout}{r.stderr}")
        return json.loads((d / "s.json").read_text())


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    print(f"{'app':<6} {'layers':>6} {'weights':>9} {'batch':>5} {'MAC/B':>6} {'cycles':>9} "
          f"{'TOPS':>6} {'paper':>6} {'ratio':>6}")
    counters = []
    for name, (layers, in_shape, batch) in apps().items():
        s = run_app(args.tpu_sim, name, layers, in_shape, batch, rng)
        weights = sum(k * n * (1 if kind == "dense" else 9) for kind, k, n in layers)
        useful = s["total"]["useful_macs"]
        cycles = s["total"]["cycles"]
        tops = 2 * useful / (cycles / CLOCK_HZ) / 1e12
        prog = s["programs"][0]
        t = prog["tpuv1"]
        peak = prog["cycles"] * 256 * 256
        counters.append((name, [100 * t[key] / (peak if key.endswith("macs") else prog["cycles"])
                                for _, key in ROWS]))
        print(f"{name:<6} {len(layers):>6} {weights / 1e6:>8.1f}M {batch:>5} {useful / weights:>6.0f} "
              f"{cycles:>9} {tops:>6.1f} {PAPER_TOPS[name]:>6.1f} {tops / PAPER_TOPS[name]:>6.2f}")
    print(f"CNN1   not built (its layer shapes are not published); paper {PAPER_TOPS['CNN1']} TOPS")
    # The tpuv1 counters beside the paper's Table 3 (% of cycles; MACs % of peak).
    print()
    print(f"{'app':<6} {'':<10}" + "".join(f"{label:>8}" for label, _ in ROWS))
    for name, values in counters:
        print(f"{name:<6} {'tpu-sim':<10}" + "".join(f"{v:>7.1f}%" for v in values))
        print(f"{'':<6} {'paper':<10}" + "".join(f"{v:>7.1f}%" for v in PAPER_ROWS[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
