#!/usr/bin/python3
"""The independent NumPy int8 reference for quantized networks (model files of
docs/quantization.md), bit for bit what `tpu-sim net` must produce.

Every layer is computed from its definition, not from the TPU lowering: a
dense layer as (x - z_in) @ W + b in int64, a convolution as a sum over its
kernel taps of shifted windows of the input padded with its zero point (no
im2col, no bias folding), then the int32 wrap of the accumulators, the
requantization q(a) and the activation tables of the ISA (docs/isa.md, taken
from tools/make_program_data.py, the reference of the example programs), with
the multiplier and shift derived from the scales as docs/quantization.md
says. Max-pool and flatten act on the int8 values.

  int8_reference.py MODEL.json --input X.npy --out Y.npy [--labels L.npy]

X is int8 (already quantized) or float (quantized here with the model's input
scale and zero point, rounding half to even). Y is int8, or int32 for a last
layer with int32 output. Run with /usr/bin/python3 (Debian's python3-numpy).
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_program_data as isa  # noqa: E402  the ISA's requantization and tables

SIGMOID_TANH_INPUT_SCALE = 1.0 / 16.0
SIGMOID_TANH_OUTPUT_SCALE = 1.0 / 127.0


def requant_params(real):
    """(M, S) for a real multiplier: real = f * 2^e, f in [0.5, 1); M = round(f * 2^31),
    S = 31 - e; M = 2^31 becomes 2^30 with S - 1; S > 62 clamps to 62 with M = round(real * 2^62)."""
    if not (real > 0.0 and math.isfinite(real)):
        raise ValueError(f"requantization multiplier {real} is not positive and finite")
    f, e = math.frexp(real)
    m = math.floor(math.ldexp(f, 31) + 0.5)  # exact: f * 2^31 < 2^52; halves away from zero
    if m == 1 << 31:
        m, e = 1 << 30, e + 1
    s = 31 - e
    if s < 0:
        raise ValueError(f"requantization multiplier {real} is too large")
    if s > 62:
        s, m = 62, math.floor(math.ldexp(real, 62) + 0.5)
    return m, s


def layer_requant(in_scale, layer):
    """(M, S, Z) of a dense or conv2d layer with int8 output."""
    act = layer.get("activation", "none")
    if act in ("sigmoid", "tanh"):
        return (*requant_params(in_scale * layer["weight_scale"] / SIGMOID_TANH_INPUT_SCALE), 0)
    out = layer["output"]
    return (*requant_params(in_scale * layer["weight_scale"] / out["scale"]), out["zero_point"])


ACT_FLAG = {"none": "", "relu": "R", "sigmoid": "Q", "tanh": "T"}


def finish(acc, in_scale, layer):
    """int64 accumulators -> the layer's output (int8 values, or int32)."""
    acc = isa.wrap32(acc)
    if layer.get("output") == "int32":
        return acc.astype(np.int32)
    m, s, z = layer_requant(in_scale, layer)
    return isa.activate(acc, ACT_FLAG[layer.get("activation", "none")], m, s, z)


def load_npy(base, name, dtype, ndim):
    a = np.load(base / name)
    assert a.dtype == dtype and a.ndim == ndim, f"{name}: {a.dtype} {a.shape}"
    return a


def conv_same_padding(size, k, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def conv_padding(layer, h, w, kh, kw, sh, sw):
    """(top, bottom, left, right)."""
    p = layer.get("padding", "valid")
    if p == "valid":
        return 0, 0, 0, 0
    if p == "same":
        return (*conv_same_padding(h, kh, sh), *conv_same_padding(w, kw, sw))
    if isinstance(p, int):
        return p, p, p, p
    if len(p) == 2:
        return p[0], p[0], p[1], p[1]
    return tuple(p)


def pair(v, default=None):
    if v is None:
        v = default
    return (v, v) if isinstance(v, int) else tuple(v)


def dense(x, layer, base, zin, in_scale):
    w = load_npy(base, layer["weights"], np.int8, 2).astype(np.int64)
    acc = (x.astype(np.int64) - zin) @ w
    if "bias" in layer:
        acc = acc + load_npy(base, layer["bias"], np.int32, 1).astype(np.int64)
    return finish(acc, in_scale, layer)


def conv2d(x, layer, base, zin, in_scale):
    w = load_npy(base, layer["weights"], np.int8, 4).astype(np.int64)  # KH, KW, Cin, Cout
    kh, kw, cin, cout = w.shape
    b, h, wd, c = x.shape
    assert c == cin
    sh, sw = pair(layer.get("stride"), 1)
    pt, pb, pl, pr = conv_padding(layer, h, wd, kh, kw, sh, sw)
    xp = np.pad(x.astype(np.int64) - zin, ((0, 0), (pt, pb), (pl, pr), (0, 0)))  # zero = the zero point
    oh = (h + pt + pb - kh) // sh + 1
    ow = (wd + pl + pr - kw) // sw + 1
    acc = np.zeros((b, oh, ow, cout), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            window = xp[:, dy:dy + (oh - 1) * sh + 1:sh, dx:dx + (ow - 1) * sw + 1:sw, :]
            acc += np.einsum("bhwc,co->bhwo", window, w[dy, dx])
    if "bias" in layer:
        acc = acc + load_npy(base, layer["bias"], np.int32, 1).astype(np.int64)
    return finish(acc, in_scale, layer)


def maxpool2d(x, layer):
    kh, kw = pair(layer["pool"])
    sh, sw = pair(layer.get("stride"), (kh, kw))
    b, h, w, c = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    y = None
    for dy in range(kh):
        for dx in range(kw):
            window = x[:, dy:dy + (oh - 1) * sh + 1:sh, dx:dx + (ow - 1) * sw + 1:sw, :]
            y = window.copy() if y is None else np.maximum(y, window)
    return y


def quantize_input(x, scale, zero_point):
    """Float -> int8: clamp(round_half_even(x / scale) + z), in float64."""
    q = np.round(np.asarray(x, dtype=np.float64) / scale) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)


def run(model_path, x):
    """The network's output for input batch x (int8, or float to quantize)."""
    model_path = Path(model_path)
    model = json.loads(model_path.read_text())
    assert model["format"] == "tpu-sim-net" and model["version"] == 1
    base = model_path.parent
    scale, zin = model["input"]["scale"], model["input"]["zero_point"]
    if x.dtype != np.int8:
        x = quantize_input(x, scale, zin)
    assert x.shape[1:] == tuple(model["input"]["shape"]), x.shape
    y = x
    for layer in model["layers"]:
        t = layer["type"]
        if t == "dense":
            y = dense(y, layer, base, zin, scale)
        elif t == "conv2d":
            y = conv2d(y, layer, base, zin, scale)
        elif t == "maxpool2d":
            y = maxpool2d(y, layer)
        elif t == "flatten":
            y = y.reshape(y.shape[0], -1)
        else:
            raise ValueError(f"unknown layer type {t}")
        if t in ("dense", "conv2d"):
            if layer.get("output") == "int32":
                scale, zin = scale * layer["weight_scale"], 0
            elif layer.get("activation", "none") in ("sigmoid", "tanh"):
                scale, zin = SIGMOID_TANH_OUTPUT_SCALE, 0
            else:
                scale, zin = layer["output"]["scale"], layer["output"]["zero_point"]
    return y.astype(np.int32) if y.dtype == np.int32 else y.astype(np.int8)


def accuracy(y, labels):
    """Argmax (first maximum) accuracy."""
    return float(np.mean(np.argmax(y, axis=1) == labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels")
    args = parser.parse_args()
    y = run(args.model, np.load(args.input))
    np.save(args.out, y)
    if args.labels:
        labels = np.load(args.labels)
        print(f"accuracy: {int(np.sum(np.argmax(y, axis=1) == labels))}/{len(labels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
