#!/usr/bin/python3
"""Writes the whole networks tpu-bench times (`--net`) into a directory and prints their options.

Issue 31 names four: ResNet-18 and MobileNetV2 at batch 8 (torchvision's, random weights,
`weights=None`; exported by bench/zoo_export.py, calibrated and quantized by `tpu-sim net
--calibrate --save-model`), the CNN0-like stack of bench/cnn0.py (16 x conv 3x3 256 -> 256,
19 x 19, batch 8) and MLP0 as bench/tpuv1_apps.py builds it (5 x dense 2048 -> 2048, batch
200). Each lands in OUT/NAME/ as model.json and x.npy; the last line printed is the tpu-bench
arguments, so that

  bench/run.sh $(bench/bench_nets.py build-bench/nets --tpu-sim build-bench/sim/tpu-sim | tail -1)

runs the benchmark with them. A network already written is kept (delete OUT/NAME to redo it).

  bench/bench_nets.py OUT [--tpu-sim build/sim/tpu-sim] [--only resnet18_b8,mlp0]
"""
import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cnn0  # noqa: E402
import tpuv1_apps  # noqa: E402

NAMES = ["resnet18_b8", "mobilenet_v2_b8", "cnn0_b8", "mlp0_b200"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_nets: {' '.join(map(str, cmd))} failed:\n{r.stdout}{r.stderr}")


def zoo_model(d, zoo_name, tpu_sim):
    """A torchvision model at 224 x 224, batch 8, saved as an int8 model file."""
    run([sys.executable, str(HERE / "zoo_export.py"), zoo_name, "224", "--batch", "8", "--calib", "4", str(d)])
    run([tpu_sim, "net", str(d / "model.onnx"), "--calibrate", str(d / "calib.npy"), "--input", str(d / "x.npy"),
         "--save-model", str(d / "q"), "--preset", "tpuv1", "--out", str(d / "y.npy")])
    # The saved model takes the input in its own layout (N, H, W, C), float, quantized on reading.
    x = np.load(d / "x.npy")
    np.save(d / "q" / "x.npy", np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    return d / "q"


def write(name, out, tpu_sim):
    d = out / name
    if (d / "ready").exists():
        return (d / "ready").read_text().strip()
    d.mkdir(parents=True, exist_ok=True)
    if name == "resnet18_b8":
        m = zoo_model(d, "resnet18", tpu_sim)
    elif name == "mobilenet_v2_b8":
        m = zoo_model(d, "mobilenet_v2", tpu_sim)
    elif name == "cnn0_b8":
        cnn0.write_model(d, 16, 19, 256, -128)
        x = np.random.default_rng(2).integers(-128, 128, size=(8, 19, 19, 256), dtype=np.int8)
        np.save(d / "x.npy", x)
        m = d
    else:
        layers, in_shape, batch = tpuv1_apps.apps()["MLP0"]
        rng = np.random.default_rng(1)
        tpuv1_apps.write_model(d, layers, in_shape, rng)
        np.save(d / "x.npy", rng.integers(-128, 128, size=[batch] + in_shape, dtype=np.int8))
        m = d
    arg = f"{name}={m / 'model.json'}:{m / 'x.npy'}"
    (d / "ready").write_text(arg + "\n")
    return arg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--tpu-sim", default=str(HERE.parent / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--only", default=",".join(NAMES), help="comma-separated, of " + ", ".join(NAMES))
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        sys.exit(f"bench_nets: unknown network(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    if not Path(args.tpu_sim).is_file():
        sys.exit(f"bench_nets: no tpu-sim at {args.tpu_sim} (--tpu-sim)")
    net_args = []
    for n in names:
        net_args.append(write(n, args.out.resolve(), args.tpu_sim))
        print(f"{n}: {net_args[-1]}", file=sys.stderr)
    print(" ".join(f"--net {a}" for a in net_args))


if __name__ == "__main__":
    main()
