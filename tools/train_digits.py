#!/usr/bin/python3
"""Trains the demo networks of programs/nets/ in float with NumPy on the 8x8
digits of scikit-learn (sklearn.datasets.load_digits: shipped with Debian's
python3-sklearn, no download), quantizes them to int8 and writes everything
the demo and its test need.

For each network NAME (digits_mlp: 64-32-10; digits_cnn: conv 3x3x8, max-pool,
conv 3x3x16, flatten, dense 32, dense 10) it writes programs/nets/NAME/:

  float/model.json, float/*.npy   the float model (float32 weights) with the
                                  calibration ranges (min and max of the input
                                  and of every layer's output over the training
                                  split): the input of tools/quantize_model.py
  model.json, *.npy               the quantized model (tools/quantize_model.py)
  test_x.npy                      the test split: float32 pixels / 16
  test_y.npy                      its labels, int32
  expected.npy                    the int8 reference output on it
                                  (tools/int8_reference.py), int8
  report.json                     float, int8-reference (and, with --tpu-sim,
                                  tpu-sim) accuracy on the test split

Training is deterministic (fixed seeds, float64, full-batch ordering from a
seeded generator) but runs only here, not in CI; the tests use the committed
files. With --tpu-sim PATH it also runs `tpu-sim net` on the test split and
records its accuracy and cycles in the report.

  train_digits.py [--tpu-sim build/sim/tpu-sim] [--only NAME]

Run with /usr/bin/python3 (Debian's python3-numpy and python3-sklearn).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import int8_reference  # noqa: E402
import quantize_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NETS = ROOT / "programs" / "nets"
SEED = 20261202
TEST_SIZE = 360

# ---------------------------------------------------------------------------
# Data


def load_split():
    """(x_train, y_train, x_test, y_test): images as (n, 8, 8, 1) float64 in [0, 1]."""
    digits = load_digits()
    x = digits.images.astype(np.float64)[..., np.newaxis] / 16.0
    y = digits.target.astype(np.int64)
    perm = np.random.default_rng(SEED).permutation(len(y))
    test, train = perm[:TEST_SIZE], perm[TEST_SIZE:]
    return x[train], y[train], x[test], y[test]


# ---------------------------------------------------------------------------
# Layers with forward and backward passes (float64)


class Dense:
    def __init__(self, name, k, n, rng, activation):
        self.name, self.activation = name, activation
        self.w = rng.normal(0.0, np.sqrt(2.0 / k), (k, n))
        self.b = np.zeros(n)

    def params(self):
        return [self.w, self.b]

    def forward(self, x):
        self.x = x
        return x @ self.w + self.b

    def backward(self, g):
        self.grads = [self.x.T @ g, g.sum(axis=0)]
        return g @ self.w.T


def im2col(x, kh, kw, pad):
    """(B, H, W, C) -> (B, H, W, kh*kw*C) for a stride-1 'same' convolution, tap-major."""
    b, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    return np.concatenate([xp[:, dy:dy + h, dx:dx + w, :] for dy in range(kh) for dx in range(kw)],
                          axis=3)


class Conv:
    """3x3, stride 1, 'same' padding."""

    def __init__(self, name, cin, cout, rng, activation, k=3):
        self.name, self.activation, self.k = name, activation, k
        self.w = rng.normal(0.0, np.sqrt(2.0 / (k * k * cin)), (k, k, cin, cout))
        self.b = np.zeros(cout)

    def params(self):
        return [self.w, self.b]

    def forward(self, x):
        self.shape = x.shape
        self.cols = im2col(x, self.k, self.k, self.k // 2)
        return self.cols @ self.w.reshape(-1, self.w.shape[3]) + self.b

    def backward(self, g):
        b, h, w, c = self.shape
        k, pad = self.k, self.k // 2
        cout = self.w.shape[3]
        self.grads = [(self.cols.reshape(-1, self.cols.shape[3]).T @ g.reshape(-1, cout)).reshape(self.w.shape),
                      g.sum(axis=(0, 1, 2))]
        gcols = g @ self.w.reshape(-1, cout).T
        gx = np.zeros((b, h + 2 * pad, w + 2 * pad, c))
        for t, (dy, dx) in enumerate((dy, dx) for dy in range(k) for dx in range(k)):
            gx[:, dy:dy + h, dx:dx + w, :] += gcols[..., t * c:(t + 1) * c]
        return gx[:, pad:pad + h, pad:pad + w, :]


class Relu:
    def forward(self, x):
        self.mask = x > 0
        return x * self.mask

    def backward(self, g):
        return g * self.mask


class MaxPool2:
    def forward(self, x):
        b, h, w, c = x.shape
        r = x.reshape(b, h // 2, 2, w // 2, 2, c)
        y = r.max(axis=(2, 4))
        self.mask = r == y[:, :, np.newaxis, :, np.newaxis, :]
        self.shape = x.shape
        return y

    def backward(self, g):
        return (self.mask * g[:, :, np.newaxis, :, np.newaxis, :]).reshape(self.shape)


class Flatten:
    def forward(self, x):
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, g):
        return g.reshape(self.shape)


def build(name, rng):
    """(modules, float-model layer descriptions) of network `name`."""
    if name == "digits_mlp":
        fc1, fc2 = Dense("fc1", 64, 32, rng, "relu"), Dense("fc2", 32, 10, rng, "none")
        return [Flatten(), fc1, Relu(), fc2], [
            {"type": "dense", "module": fc1}, {"type": "dense", "module": fc2}]
    conv1, conv2 = Conv("conv1", 1, 8, rng, "relu"), Conv("conv2", 8, 16, rng, "relu")
    fc1, fc2 = Dense("fc1", 256, 32, rng, "relu"), Dense("fc2", 32, 10, rng, "none")
    return [conv1, Relu(), MaxPool2(), conv2, Relu(), Flatten(), fc1, Relu(), fc2], [
        {"type": "conv2d", "module": conv1, "stride": [1, 1], "padding": "same"},
        {"type": "maxpool2d", "name": "pool1", "pool": [2, 2]},
        {"type": "conv2d", "module": conv2, "stride": [1, 1], "padding": "same"},
        {"type": "flatten", "name": "flatten"},
        {"type": "dense", "module": fc1}, {"type": "dense", "module": fc2}]


def forward(modules, x, record=None):
    for m in modules:
        x = m.forward(x)
        if record is not None and isinstance(m, Relu):
            record.append(x)
        elif record is not None and isinstance(m, (Dense, Conv)) and m.activation == "none":
            record.append(x)
    return x


def train(modules, x, y, rng, epochs, lr=0.01, batch=32, l2=1e-4):
    """Adam on softmax cross-entropy."""
    params = [p for m in modules if hasattr(m, "params") for p in m.params()]
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(y))
        for i in range(0, len(y), batch):
            idx = order[i:i + batch]
            logits = forward(modules, x[idx])
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            g = p
            g[np.arange(len(idx)), y[idx]] -= 1.0
            g /= len(idx)
            for m in reversed(modules):
                g = m.backward(g)
            grads = [gr for m in modules if hasattr(m, "params") for gr in m.grads]
            step += 1
            for j, (pj, gj) in enumerate(zip(params, grads)):
                gj = gj + l2 * pj
                m1[j] = 0.9 * m1[j] + 0.1 * gj
                m2[j] = 0.999 * m2[j] + 0.001 * gj * gj
                pj -= lr * (m1[j] / (1 - 0.9 ** step)) / (np.sqrt(m2[j] / (1 - 0.999 ** step)) + 1e-8)
        if (epoch + 1) % 10 == 0:
            acc = np.mean(np.argmax(forward(modules, x), axis=1) == y)
            print(f"  epoch {epoch + 1}: training accuracy {acc:.4f}")


# ---------------------------------------------------------------------------
# Files


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def make(name, tpu_sim):
    print(f"{name}:")
    x_train, y_train, x_test, y_test = load_split()
    if name == "digits_mlp":
        x_train, x_test = x_train.reshape(-1, 64), x_test.reshape(-1, 64)
    rng = np.random.default_rng(SEED + (1 if name == "digits_mlp" else 2))
    modules, layers = build(name, rng)
    train(modules, x_train, y_train, rng, epochs=60 if name == "digits_mlp" else 30)
    float_acc = np.mean(np.argmax(forward(modules, x_test), axis=1) == y_test)

    # Calibration: the range of every dense/conv2d output (after its activation)
    # over the training split.
    outputs = []
    forward(modules, x_train, outputs)
    out_dir = NETS / name
    float_dir = out_dir / "float"
    desc = {"format": "tpu-sim-float-net", "version": 1, "name": name,
            "input": {"shape": list(x_train.shape[1:]), "range": [0.0, 1.0]}, "layers": []}
    k = 0
    for layer in layers:
        layer = dict(layer)
        m = layer.pop("module", None)
        if m is not None:
            layer = {"type": layer["type"], "name": m.name, "weights": f"{m.name}_w.npy",
                     "bias": f"{m.name}_b.npy", **{k2: v for k2, v in layer.items() if k2 != "type"},
                     "activation": m.activation,
                     "output_range": [float(outputs[k].min()), float(outputs[k].max())]}
            k += 1
            write(float_dir / f"{m.name}_w.npy", quantize_model.npy_bytes(m.w.astype(np.float32)))
            write(float_dir / f"{m.name}_b.npy", quantize_model.npy_bytes(m.b.astype(np.float32)))
        desc["layers"].append(layer)
    write(float_dir / "model.json", (json.dumps(desc, indent=2) + "\n").encode())

    # Quantize (from the float32 files, as quantize_model.py --check does).
    for fname, data in quantize_model.quantize(float_dir / "model.json").items():
        write(out_dir / fname, data)
    test_x = x_test.astype(np.float32)
    write(out_dir / "test_x.npy", quantize_model.npy_bytes(test_x))
    write(out_dir / "test_y.npy", quantize_model.npy_bytes(y_test.astype(np.int32)))
    expected = int8_reference.run(out_dir / "model.json", test_x)
    write(out_dir / "expected.npy", quantize_model.npy_bytes(expected))
    int8_correct = int(np.sum(np.argmax(expected, axis=1) == y_test))

    report = {"network": name, "dataset": "sklearn.datasets.load_digits (8x8)",
              "split_seed": SEED, "train_samples": int(len(y_train)), "test_samples": int(len(y_test)),
              "float_correct": int(np.sum(np.argmax(forward(modules, x_test), axis=1) == y_test)),
              "int8_reference_correct": int8_correct}
    report["float_accuracy"] = report["float_correct"] / len(y_test)
    report["int8_reference_accuracy"] = int8_correct / len(y_test)
    print(f"  float accuracy {float_acc:.4f}, int8 reference accuracy {report['int8_reference_accuracy']:.4f}")
    if tpu_sim:
        with tempfile.TemporaryDirectory() as tmp:
            out, stats = Path(tmp) / "y.npy", Path(tmp) / "s.json"
            subprocess.run([tpu_sim, "net", str(out_dir / "model.json"), "--input", str(out_dir / "test_x.npy"),
                            "--labels", str(out_dir / "test_y.npy"), "--out", str(out), "--stats", str(stats)],
                           check=True)
            y_sim = np.load(out)
            s = json.loads(stats.read_text())
        assert np.array_equal(y_sim, expected), "tpu-sim differs from the int8 reference"
        report["tpu_sim_correct"] = int(np.sum(np.argmax(y_sim, axis=1) == y_test))
        report["tpu_sim_accuracy"] = report["tpu_sim_correct"] / len(y_test)
        report["tpu_sim_cycles"] = s["total"]["cycles"]
        report["tpu_sim_array_n"] = s["array_n"]
        print(f"  tpu-sim accuracy {report['tpu_sim_accuracy']:.4f}, {report['tpu_sim_cycles']} cycles")
    write(out_dir / "report.json", (json.dumps(report, indent=2) + "\n").encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tpu-sim", help="also run this tpu-sim on the test split")
    parser.add_argument("--only", choices=["digits_mlp", "digits_cnn"])
    args = parser.parse_args()
    for name in ("digits_mlp", "digits_cnn"):
        if args.only in (None, name):
            make(name, args.tpu_sim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
