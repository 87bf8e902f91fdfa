#!/usr/bin/python3
"""bench/tpuv1_lstm.py, the TPUv1 paper's LSTM0 and LSTM1 as LSTMs
(docs/validation.md, "LSTM0 and LSTM1"):

- their layer and weight counts against Table 1 of Jouppi et al., ISCA 2017
  (closed forms here: 4 gate FC layers and 5 vector layers per LSTM layer);
- a small stack written by the same builder (2 LSTM layers, residual add
  around the second, a dense head, 3 steps) run by `tpu-sim net`: its output
  equal to tools/int8_reference.py's on the same model file, its layer count
  the closed form's, and its output correlated (>= 0.95) with a float LSTM
  computed here in NumPy from the model file's dequantized weights.

  check_tpuv1_lstm.py BIN_DIR SRC_DIR [PRESET]
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SRC = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "bench"))
sys.path.insert(0, str(SRC / "tools"))
import int8_reference  # noqa: E402
import tpuv1_apps  # noqa: E402
import tpuv1_lstm  # noqa: E402

# Table 1: FC layers, vector layers, weights (millions, as printed), batch.
TABLE1 = {"LSTM0": (24, 34, 52, 64), "LSTM1": (37, 19, 34, 96)}


def counts(failures):
    apps = tpuv1_lstm.apps()
    # LSTM0: 6 layers (1536 -> 1024, then 1024 -> 1024), 4 residual adds.
    want0 = (4 * 6, 5 * 6 + 4, 4 * (1536 + 1024) * 1024 + 5 * 4 * (1024 + 1024) * 1024)
    # LSTM1: 9 layers 672 -> 672 and a 672 x 2048 head.
    want1 = (4 * 9 + 1, 5 * 9, 9 * 4 * (672 + 672) * 672 + 672 * 2048)
    for name, want in (("LSTM0", want0), ("LSTM1", want1)):
        s = apps[name]
        got = (s.fc_layers(), s.vector_layers(), s.weights())
        if got != want:
            failures.append(f"{name}: (FC, vector, weights) {got}, closed form {want}")
        fc, vec, millions, batch = TABLE1[name]
        if tpuv1_apps.apps()[name][2] != batch:
            failures.append(f"{name}: bench/tpuv1_apps.py runs batch {tpuv1_apps.apps()[name][2]}, Table 1 {batch}")
        if s.fc_layers() != fc:
            failures.append(f"{name}: {s.fc_layers()} FC layers, Table 1 {fc}")
        if round(s.weights() / 1e6) != millions:
            failures.append(f"{name}: {s.weights() / 1e6:.2f} M weights, Table 1 {millions} M")
        # LSTM1's vector layers are not Table 1's (19): documented, checked as the closed form.
        if name == "LSTM0" and s.vector_layers() != vec:
            failures.append(f"{name}: {s.vector_layers()} vector layers, Table 1 {vec}")
    # Every step reloads its gates' weights: weight bytes per batch, closed form (L = 8).
    s = apps["LSTM0"]
    per_step = 4 * (1536 + 1024) * 1024 + 5 * 4 * 2048 * 1024
    want = 3 * 1536 * 1024 + 5 * 3 * 1024 * 1024 + 7 * per_step
    if s.weight_bytes_per_inference() != want:
        failures.append(f"LSTM0 weight bytes per batch {s.weight_bytes_per_inference()}, closed form {want}")
    print(f"Table 1 counts: LSTM0 {want0[0]} FC + {want0[1]} vector, {want0[2] / 1e6:.1f} M weights; "
          f"LSTM1 {want1[0]} FC + {want1[1]} vector, {want1[2] / 1e6:.1f} M weights")


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def float_lstm(model, d, x_real):
    """The model file's network in float: each dense layer's weights and bias
    dequantized (docs/quantization.md: acc = b + sum_j (x_j - z_j) . W_j at
    scale s_1 * weight_scale), every other layer exact."""
    scale = {"input": model["input"]["scale"]}
    val = {"input": x_real}
    for layer in model["layers"]:
        name, ins = layer["name"], layer["inputs"]
        out_scale = layer.get("output", {}).get("scale", 1 / 127)
        if layer["type"] == "dense":
            w = np.load(d / layer["weights"]).astype(np.float64)
            s = scale[ins[0]] * layer["weight_scale"]
            parts = [val[ins[0]][:, 0, layer["pixel"]] if "pixel" in layer else val[ins[0]]] + [val[n] for n in ins[1:]]
            acc, row = 0.0, 0
            for n, p in zip(ins, parts):
                acc = acc + p @ w[row:row + p.shape[1]] * (s / scale[n])
                row += p.shape[1]
            b = np.load(d / layer["bias"]).astype(np.float64) * s if "bias" in layer else 0.0
            a = acc + b
            act = layer.get("activation", "none")
            y = sigmoid(a) if act == "sigmoid" else np.tanh(a) if act == "tanh" else a
        elif layer["type"] == "mul":
            y = val[ins[0]] * val[ins[1]]
        elif layer["type"] == "add":
            y = val[ins[0]] + val[ins[1]]
        elif layer["type"] == "affine":
            y = np.tanh(layer["alpha"] * val[ins[0]])
        else:
            raise SystemExit(f"unexpected layer type {layer['type']}")
        val[name], scale[name] = y, out_scale
    return val[model["layers"][-1]["name"]], scale[model["layers"][-1]["name"]]


def run_small(bin_dir, preset, failures):
    stack = tpuv1_lstm.LstmStack(features=16, hidden=24, layers=2, steps=3, residual_from=2, head=5)
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        n_layers = tpuv1_lstm.write_model(d, stack, rng)
        # Per layer: step 0 3 gates + 3 vector layers, later steps 4 + 5; the
        # residual add at every step but the last layer's (its last step only); the head.
        want = 2 * ((3 + 3) + 2 * (4 + 5)) + 1 + 1
        if n_layers != want:
            failures.append(f"the small stack has {n_layers} layers, closed form {want}")
        x = rng.integers(-128, 128, size=(6, 1, 3, 16), dtype=np.int8)
        np.save(d / "x.npy", x)
        r = subprocess.run([str(bin_dir / "tpu-sim"), "net", str(d / "model.json"), "--input", str(d / "x.npy"),
                            "--out", str(d / "y.npy"), "--preset", preset, "--check"], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"tpu-sim net exited {r.returncode}: {r.stderr.strip()[-500:]}")
            return
        y = np.load(d / "y.npy")
        ref = int8_reference.run(d / "model.json", x)
        if not np.array_equal(y, ref):
            failures.append("tpu-sim's output differs from tools/int8_reference.py's")
        model = json.loads((d / "model.json").read_text())
        f, s = float_lstm(model, d, x.astype(np.float64) * model["input"]["scale"])
        corr = float(np.corrcoef(f.ravel(), (y.astype(np.float64) * s).ravel())[0, 1])
        print(f"small stack on {preset}: {n_layers} layers, bit for bit against int8_reference.py: "
              f"{np.array_equal(y, ref)}; correlation with the float LSTM {corr:.4f}")
        if corr < 0.95:
            failures.append(f"correlation {corr:.4f} with the float LSTM is below 0.95")


def main():
    bin_dir = Path(sys.argv[1])
    preset = sys.argv[3] if len(sys.argv) > 3 else "small8"
    failures = []
    counts(failures)
    run_small(bin_dir, preset, failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
