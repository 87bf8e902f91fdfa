#!/usr/bin/python3
"""The tpuv1 roofline, measured: TOPS of a stack of 2048 x 2048 layers against the batch.

A dense layer's weight tile is used once per row of the batch, so a batch of B
does B MACs per weight byte (the x axis of the TPUv1 paper's Figure 5). For each
B the script runs `tpu-sim net` on a stack of 12 dense 2048 -> 2048 ReLU layers
(random int8 weights, zero points 0 and no biases, so the layers are pure
GEMMs; one program, activations kept on chip, checked against the int8
reference for B <= 100: the reference is slow) on the tpuv1 preset and prints the TOPS at 700 MHz (2 ops per
useful MAC; the input and output transfers included) beside the paper's
roofline min(peak, B * 2 * 34 GB/s). The measured ridge point is the array's
N*N MACs per cycle over the weight bandwidth the most weight-bound run achieves
(weight bytes moved / cycles). The paper: 34 GB/s, ridge 1350.

  bench/roofline.py [--tpu-sim build/sim/tpu-sim] [--batches 50,100,...]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CLOCK_HZ = 700e6
N = 256


def run(tpu_sim, d, batch, size, layers):
    rng = np.random.default_rng(7)
    model = {"format": "tpu-sim-net", "version": 1, "name": "roofline",
             "input": {"shape": [size], "scale": 0.05, "zero_point": 0}, "layers": []}
    for i in range(layers):
        np.save(d / f"w{i}.npy", rng.integers(-127, 128, size=(size, size), dtype=np.int8))
        model["layers"].append({"type": "dense", "name": f"fc{i}", "weights": f"w{i}.npy",
                                "weight_scale": 1.0 / 127 / 45, "activation": "relu",
                                "output": {"scale": 0.05, "zero_point": 0}})
    (d / "model.json").write_text(json.dumps(model))
    np.save(d / "x.npy", rng.integers(-128, 128, size=(batch, size), dtype=np.int8))
    cmd = [tpu_sim, "net", str(d / "model.json"), "--input", str(d / "x.npy"), "--preset", "tpuv1",
           "--stats", str(d / "s.json")] + (["--check"] if batch <= 100 else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stdout + r.stderr)
    s = json.loads((d / "s.json").read_text())
    prog = s["programs"][0]
    return s["total"]["cycles"], prog["units"]["weight_dma"]["instructions"], s["total"]["useful_macs"]


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--batches", default="25,100,400,800,1200,1350,1600,2400")
    ap.add_argument("--layers", type=int, default=12)
    args = ap.parse_args()
    size = 2048
    batches = [int(b) for b in args.batches.split(",")]
    peak = 2 * N * N * CLOCK_HZ / 1e12
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for b in batches:
            cycles, tiles, useful = run(args.tpu_sim, Path(tmp), b, size, args.layers)
            rows.append((b, cycles, tiles, 2 * useful / (cycles / CLOCK_HZ) / 1e12))
    print(f"tpuv1 roofline: {args.layers} dense {size} -> {size} layers on chip, "
          f"batch B = MACs per weight byte")
    print(f"{'B':>6} {'cycles':>10} {'tiles':>6} {'TOPS':>7} {'paper roofline':>15}")
    for b, cycles, tiles, tops in rows:
        print(f"{b:>6} {cycles:>10} {tiles:>6} {tops:>7.1f} {min(peak, 2 * b * 34e9 / 1e12):>15.1f}")
    b, cycles, tiles, _ = rows[0]
    bytes_per_cycle = tiles * N * N / cycles
    ridge = N * N / bytes_per_cycle
    print(f"weight bandwidth at B = {b}: {bytes_per_cycle:.2f} B/cycle = "
          f"{bytes_per_cycle * CLOCK_HZ / 1e9:.1f} GB/s (paper: 34)")
    print(f"ridge point: {ridge:.0f} MACs per weight byte (paper: 1350; {100 * (ridge / 1350 - 1):+.1f}%)")
    print(f"peak: {peak:.2f} TOPS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
