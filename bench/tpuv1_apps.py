#!/usr/bin/python3
"""Synthetic versions of the TPUv1 paper's six applications on the tpuv1 preset.

Jouppi et al., ISCA 2017, Table 1 gives each application's layers and batch
and Table 3 its measured TOPS on TPUv1. The layers' exact shapes and data are
not published; these stand-ins follow Table 1's layer counts, weight counts and
batch sizes (as issue 13 lists them), with random int8 weights and biases
(the MLPs and CNN0: ReLU activations at zero point -128, so every layer has
a folded bias pass), and run as one program each with `tpu-sim net --preset tpuv1` (activations on
chip, the input read once and the output written once). It prints each
application's TOPS at 700 MHz (2 ops per useful MAC) beside the paper's, and
the tpuv1 counters (docs/microarchitecture.md) beside the paper's Table 3
rows.

  MLP0   5 FC 2048 x 2048, batch 200
  MLP1   4 FC alternating 1280 -> 1024 -> 1280, batch 168
  LSTM0  6 LSTM layers, hidden 1024 (input 1536), residual adds around
         layers 3-6, over 8 time steps, batch 64 (bench/tpuv1_lstm.py)
  LSTM1  9 LSTM layers, hidden 672, a dense 672 -> 2048 head, over 8 time
         steps, batch 96 (bench/tpuv1_lstm.py)
  CNN0   16 conv 3x3 256 -> 256 on 19x19, same, batch 8 (bench/cnn0.py)
  CNN1   not built: its layer shapes are not given (4 FC and 72 conv layers)

The LSTMs run as the ONNX importer unrolls an nn.LSTM: per layer and time
step four gate layers on the array (sigmoid, tanh in the activation unit) and
the cell's element-wise layers on the vector unit, each step's gates waiting
for the previous step's h. `--lstm-sweep` prints what each assumption
(sequence length, hidden size, batch, layer order) does to their counters.

  bench/tpuv1_apps.py [--tpu-sim build/sim/tpu-sim] [--only LSTM0,LSTM1] [--steps L] [--lstm-sweep]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tpuv1_lstm  # noqa: E402

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


def apps(steps=8):
    """name -> (layers, one sample's input shape, batch): layers a list of
    (kind, K, Nout) or a tpuv1_lstm.LstmStack."""
    alt = lambda a, b, n: [a if i % 2 == 0 else b for i in range(n + 1)]  # noqa: E731
    lstm = tpuv1_lstm.apps(steps)
    return {
        "MLP0": (dense_stack([2048] * 6), [2048], 200),
        "MLP1": (dense_stack(alt(1280, 1024, 4)), [1280], 168),
        "LSTM0": (lstm["LSTM0"], lstm["LSTM0"].input_shape(), 64),
        "LSTM1": (lstm["LSTM1"], lstm["LSTM1"].input_shape(), 96),
        "CNN0": ([("conv", 256, 256)] * 16, [19, 19, 256], 8),
    }


def describe(layers):
    """(layer counts as Table 1 gives them, weights, weight bytes one batch reads)."""
    if isinstance(layers, tpuv1_lstm.LstmStack):
        return (f"{layers.fc_layers()}+{layers.vector_layers()}v", layers.weights(),
                layers.weight_bytes_per_inference())
    weights = sum(k * n * (1 if kind == "dense" else 9) for kind, k, n in layers)
    return str(len(layers)), weights, weights


def write_model(d, layers, in_shape, rng):
    if isinstance(layers, tpuv1_lstm.LstmStack):
        tpuv1_lstm.write_model(d, layers, rng, name=d.name)
        return
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


def counters(s):
    """The tpuv1 counters of a one-program run's stats, in the order of ROWS:
    % of cycles (MACs: % of the peak cycles x N^2)."""
    prog = s["programs"][0]
    t = prog["tpuv1"]
    peak = prog["cycles"] * 256 * 256
    return [100 * t[key] / (peak if key.endswith("macs") else prog["cycles"]) for _, key in ROWS]


def tops_of(s):
    return 2 * s["total"]["useful_macs"] / (s["total"]["cycles"] / CLOCK_HZ) / 1e12


HEADER = f"{'app':<6} {'layers':>7} {'weights':>9} {'batch':>5} {'MAC/B':>6} {'cycles':>10} {'TOPS':>6} {'paper':>6} {'ratio':>6}"


def row(name, layers, batch, s):
    count, weights, read = describe(layers)
    tops = tops_of(s)
    return (f"{name:<6} {count:>7} {weights / 1e6:>8.1f}M {batch:>5} {s['total']['useful_macs'] / read:>6.0f} "
            f"{s['total']['cycles']:>10} {tops:>6.2f} {PAPER_TOPS[name]:>6.1f} {tops / PAPER_TOPS[name]:>6.2f}")


def counter_header():
    return f"{'':<34}" + "".join(f"{label:>8}" for label, _ in ROWS)


def lstm_sweep(tpu_sim, names, rng, steps=8):
    """What each assumption does: the sequence length, the hidden size, the
    batch and the layers' order, one at a time from each LSTM's default."""
    print("LSTM assumptions, one at a time (TOPS at 700 MHz; counters in % as in Table 3):")
    print(f"{'app':<6} {'variant':<27} {'TOPS':>6}" + "".join(f"{label:>8}" for label, _ in ROWS))
    for name in names:
        base_layers, _, base_batch = apps(steps)[name]
        variants = [("default", base_layers, base_batch)]
        for length in (2, 4, 16):
            variants.append((f"L = {length}", tpuv1_lstm.replace(base_layers, steps=length), base_batch))
        for batch in (base_batch // 2, 2 * base_batch):
            variants.append((f"batch {batch}", base_layers, batch))
        variants.append(("wavefront order", tpuv1_lstm.replace(base_layers, order="step"), base_batch))
        for label, stack in tpuv1_lstm.hidden_variants(name, steps):
            variants.append((label, stack, base_batch))
        for label, stack, batch in variants:
            s = run_app(tpu_sim, name, stack, stack.input_shape(), batch, rng)
            print(f"{name:<6} {label:<27} {tops_of(s):>6.2f}" + "".join(f"{v:>7.1f}%" for v in counters(s)))
        print(f"{name:<6} {'paper (Table 3)':<27} {PAPER_TOPS[name]:>6.2f}"
              + "".join(f"{v:>7.1f}%" for v in PAPER_ROWS[name]))


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--only", help="comma-separated applications (default: all)")
    ap.add_argument("--steps", type=int, default=8, help="the LSTMs' sequence length (default 8)")
    ap.add_argument("--lstm-sweep", action="store_true", help="the LSTMs' assumptions, one at a time")
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    chosen = apps(args.steps)
    if args.only:
        unknown = set(args.only.split(",")) - set(chosen)
        if unknown:
            sys.exit(f"unknown applications: {', '.join(sorted(unknown))} (known: {', '.join(chosen)})")
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    if args.lstm_sweep:
        lstm_sweep(args.tpu_sim, [n for n in chosen if n.startswith("LSTM")], rng, args.steps)
        return 0
    print(HEADER)
    measured = []
    for name, (layers, in_shape, batch) in chosen.items():
        s = run_app(args.tpu_sim, name, layers, in_shape, batch, rng)
        measured.append((name, counters(s)))
        print(row(name, layers, batch, s), flush=True)
    if not args.only:
        print(f"CNN1   not built (its layer shapes are not published); paper {PAPER_TOPS['CNN1']} TOPS")
    # The tpuv1 counters beside the paper's Table 3 (% of cycles; MACs % of peak).
    print()
    print(f"{'app':<6} {'':<10}" + "".join(f"{label:>8}" for label, _ in ROWS))
    for name, values in measured:
        print(f"{name:<6} {'tpu-sim':<10}" + "".join(f"{v:>7.1f}%" for v in values))
        print(f"{'':<6} {'paper':<10}" + "".join(f"{v:>7.1f}%" for v in PAPER_ROWS[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
