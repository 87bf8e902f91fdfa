#!/usr/bin/python3
"""CNN0-like stack on the tpuv1 preset, as one on-chip program: its TOPS at 700 MHz.

The TPUv1 paper's CNN0 (Jouppi et al., ISCA 2017, Table 1) has 16 convolutional layers and
reaches 86.0 TOPS on TPUv1 (Table 3 and Figure 5's roofline). Its exact layers are not
published; this stack is the one issue 12 names: 16 layers of 3x3 convolutions, 256 -> 256
channels, 19x19 maps, "same" padding, ReLU, batch 8, with random int8 weights and biases
and the quantization rule of docs/quantization.md (ReLU outputs at zero point -128, so every
layer has a folded bias). The script writes the model to a temporary directory, runs
`tpu-sim net --preset tpuv1 --stats` and prints the figures:

  TOPS = 2 * useful MACs / (cycles / 700 MHz)

  bench/cnn0.py [--tpu-sim build/sim/tpu-sim] [--batch 8] [--layers 16] [--zero-point -128]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CLOCK_HZ = 700e6


def write_model(d, layers, hw, channels, zero_point, seed=1):
    rng = np.random.default_rng(seed)
    model = {"format": "tpu-sim-net", "version": 1, "name": "cnn0_like",
             "input": {"shape": [hw, hw, channels], "scale": 0.02, "zero_point": zero_point},
             "layers": []}
    for i in range(layers):
        w = rng.integers(-127, 128, size=(3, 3, channels, channels), dtype=np.int8)
        b = rng.integers(-2000, 2000, size=(channels,), dtype=np.int32)
        np.save(d / f"c{i}_w.npy", w)
        np.save(d / f"c{i}_b.npy", b)
        model["layers"].append({
            "type": "conv2d", "name": f"conv{i}", "weights": f"c{i}_w.npy", "bias": f"c{i}_b.npy",
            "weight_scale": 1.0 / 127 / 48, "padding": "same", "activation": "relu",
            "output": {"scale": 0.02, "zero_point": zero_point}})
    (d / "model.json").write_text(json.dumps(model, indent=1))
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parent.parent
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--size", type=int, default=19)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--zero-point", type=int, default=-128,
                    help="activations' zero point (0: no folded bias unless the biases are nonzero)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_model(d, args.layers, args.size, args.channels, args.zero_point)
        rng = np.random.default_rng(2)
        x = rng.integers(-128, 128, size=(args.batch, args.size, args.size, args.channels), dtype=np.int8)
        np.save(d / "x.npy", x)
        cmd = [args.tpu_sim, "net", str(d / "model.json"), "--input", str(d / "x.npy"),
               "--preset", "tpuv1", "--stats", str(d / "stats.json"), "--check"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout + run.stderr)
            return run.returncode
        stats = json.loads((d / "stats.json").read_text())
    total = stats["total"]
    prog = stats["programs"][0]
    cycles = total["cycles"]
    useful = sum(layer["useful_macs"] for layer in stats["layers"])
    seconds = cycles / CLOCK_HZ
    tops = 2 * useful / seconds / 1e12
    peak = 2 * 256 * 256 * CLOCK_HZ / 1e12
    print(f"CNN0-like: {args.layers} x conv 3x3 {args.channels}->{args.channels}, "
          f"{args.size}x{args.size}, same, ReLU, batch {args.batch}, zero point {args.zero_point}")
    print(f"programs            {len(stats['programs'])}")
    print(f"cycles              {cycles}")
    print(f"time at 700 MHz     {seconds * 1e3:.3f} ms")
    print(f"useful MACs         {useful}")
    print(f"TOPS at 700 MHz     {tops:.1f}   (peak {peak:.2f}; {100 * tops / peak:.1f}% of peak; "
          f"the paper's CNN0: 86.0)")
    for key in ("array_active_cycles", "instructions"):
        if key in prog:
            print(f"{key:<20}{prog[key]}")
    stalls = prog.get("stall_cycles") or prog.get("stalls")
    if isinstance(stalls, dict):
        for k, v in stalls.items():
            print(f"stall {k:<14}{v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
