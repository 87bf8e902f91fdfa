#!/usr/bin/python3
"""Generates the example CNNs of programs/nets/ with residual connections,
depthwise convolutions and average pooling (docs/quantization.md, the graph
form of model files): random float weights (seeded), calibrated on random
images, quantized to int8 exactly as tools/quantize_model.py quantizes.

  resnet_mini     16x16x3: stem conv 3x3 3->8 ReLU, max-pool 3x3/2 padding 1,
                  basic block (identity shortcut; add + ReLU),
                  basic block (stride 2, 1x1 projection shortcut; add + ReLU),
                  global average pool, flatten, dense 16->10
  mobilenet_mini  16x16x3: conv 3x3/2 3->8 ReLU, depthwise 3x3 ReLU, pointwise 8->16 ReLU,
                  depthwise 3x3/2 ReLU, pointwise 16->24 ReLU, inverted residual
                  (pointwise 24->24 ReLU, depthwise 3x3 ReLU, pointwise 24->24, add),
                  average pool 3x3/1 padding 1, global average pool, flatten, dense 24->10

For each network NAME it writes programs/nets/NAME/:

  float/model.json, float/*.npy   the float model (format "tpu-sim-float-net", graph
                                  form, float32 weights and biases) with the calibration
                                  range of the input and of every conv2d, dense, add,
                                  avgpool2d and global_avgpool2d output (min and max over
                                  256 random calibration images, after the activation;
                                  with 64 the ranges clip some test outputs)
  model.json, *.npy               the int8 model (int8 weights, int32 biases), quantized
                                  from the float files by quantize() below
  test_x.npy                      16 random images, int8 (already quantized)
  expected.npy                    tools/int8_reference.py's output on test_x, int8
  report.json                     how the int8 reference tracks the float model on test_x

The float model extends tools/quantize_model.py's format with the graph form of
docs/quantization.md: "inputs" (layer names or "input"), conv2d "groups" (1, or the
input channels: depthwise, weights KH x KW x 1 x C), maxpool2d "padding", and the layers
avgpool2d, global_avgpool2d and add, each with an "output_range" (add's after its
activation; an add with ReLU, like a ReLU layer, gets zero point -128).

Quantization (docs/quantization.md section 1): weights symmetric per tensor,
s_w = max|w| / 127; activations from the range widened to include 0,
s = (hi - lo) / 255, z = clamp(round(-128 - lo / s)); biases round(b / (s_in * s_w))
int32. Max-pool and flatten keep their input's scale and zero point.

The float forward pass (calibration and the report) is written with elementwise
NumPy operations in a fixed order (no BLAS), so its results, and therefore the
files, are the same on every machine.

  make_cnn_nets.py [--only NAME]   write programs/nets/NAME/
  make_cnn_nets.py --check         regenerate into a temporary directory and exit 1
                                   unless the committed files are byte for byte equal

Run with /usr/bin/python3 (Debian's python3-numpy).
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import int8_reference  # noqa: E402
import quantize_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NETS = ROOT / "programs" / "nets"
SEED = 20261203
CALIBRATION_IMAGES = 256
TEST_IMAGES = 16
INPUT_RANGE = (-0.5, 1.0)  # images uniform in this range: input zero point -43
NAMES = ("resnet_mini", "mobilenet_mini")

# ---------------------------------------------------------------------------
# The networks (float layer descriptions; "cin"/"cout"/"k" only build the weights)


def conv(name, cin, cout, k, act, stride=1, padding="same", groups=1, inputs=None, gain=2.0):
    d = {"type": "conv2d", "name": name, "cin": cin, "cout": cout, "k": k, "gain": gain,
         "stride": [stride, stride], "padding": padding, "activation": act}
    if groups != 1:
        d["groups"] = groups
    if inputs is not None:
        d["inputs"] = inputs
    return d


def add(name, a, b, act):
    return {"type": "add", "name": name, "inputs": [a, b], "activation": act}


def architecture(name):
    if name == "resnet_mini":
        return [16, 16, 3], [
            conv("stem", 3, 8, 3, "relu"),
            {"type": "maxpool2d", "name": "pool", "pool": [3, 3], "stride": [2, 2], "padding": 1},
            conv("b1_conv1", 8, 8, 3, "relu"),
            conv("b1_conv2", 8, 8, 3, "none", gain=1.0),
            add("b1_add", "pool", "b1_conv2", "relu"),
            conv("b2_conv1", 8, 16, 3, "relu", stride=2),
            conv("b2_conv2", 16, 16, 3, "none", gain=1.0),
            conv("b2_shortcut", 8, 16, 1, "none", stride=2, padding="valid", inputs=["b1_add"], gain=1.0),
            add("b2_add", "b2_conv2", "b2_shortcut", "relu"),
            {"type": "global_avgpool2d", "name": "gap"},
            {"type": "flatten", "name": "flatten"},
            {"type": "dense", "name": "fc", "cin": 16, "cout": 10, "gain": 1.0, "activation": "none"},
        ]
    assert name == "mobilenet_mini"
    return [16, 16, 3], [
        conv("conv1", 3, 8, 3, "relu", stride=2),
        conv("dw1", 8, 8, 3, "relu", groups=8),
        conv("pw1", 8, 16, 1, "relu", padding="valid"),
        conv("dw2", 16, 16, 3, "relu", stride=2, groups=16),
        conv("pw2", 16, 24, 1, "relu", padding="valid"),
        conv("ir_expand", 24, 24, 1, "relu", padding="valid"),
        conv("ir_dw", 24, 24, 3, "relu", groups=24),
        conv("ir_project", 24, 24, 1, "none", padding="valid", gain=1.0),
        add("ir_add", "pw2", "ir_project", "none"),
        {"type": "avgpool2d", "name": "avgpool", "pool": [3, 3], "stride": [1, 1], "padding": 1},
        {"type": "global_avgpool2d", "name": "gap"},
        {"type": "flatten", "name": "flatten"},
        {"type": "dense", "name": "fc", "cin": 24, "cout": 10, "gain": 1.0, "activation": "none"},
    ]


def init_weights(layer, rng):
    """He-style normal weights (std sqrt(gain / fan_in)), small random biases; float32."""
    k = layer.get("k", 1)
    depthwise = layer.get("groups", 1) != 1
    if layer["type"] == "dense":
        shape = (layer["cin"], layer["cout"])
    else:
        shape = (k, k, 1 if depthwise else layer["cin"], layer["cout"])
    fan_in = shape[0] * shape[1] * shape[2] if len(shape) == 4 else shape[0]
    w = rng.normal(0.0, np.sqrt(layer["gain"] / fan_in), shape)
    b = rng.normal(0.0, 0.05, layer["cout"])
    return w.astype(np.float32), b.astype(np.float32)


# ---------------------------------------------------------------------------
# Float forward pass (float64, elementwise operations in a fixed order)


# The model format's stride and padding rules, as the NumPy reference reads them.
pair = int8_reference.pair
pads_of = int8_reference.conv_padding


def taps(x, kh, kw, sh, sw, pads, fill):
    """The padded input each window tap (dy, dx) meets, for every output pixel."""
    pt, pb, pl, pr = pads
    b, h, w, c = x.shape
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    for dy in range(kh):
        for dx in range(kw):
            yield dy, dx, xp[:, dy:dy + (oh - 1) * sh + 1:sh, dx:dx + (ow - 1) * sw + 1:sw, :]


def f_conv2d(x, layer, w, b):
    kh, kw, cin, cout = w.shape
    sh, sw = pair(layer.get("stride"), 1)
    pads = pads_of(layer, x.shape[1], x.shape[2], kh, kw, sh, sw)
    acc = None
    for dy, dx, t in taps(x, kh, kw, sh, sw, pads, 0.0):
        if layer.get("groups", 1) != 1:
            term = t * w[dy, dx, 0]
            acc = term if acc is None else acc + term
            continue
        for ci in range(cin):
            term = t[..., ci:ci + 1] * w[dy, dx, ci]
            acc = term if acc is None else acc + term
    return acc + b


def f_dense(x, w, b):
    acc = None
    for k in range(w.shape[0]):
        term = x[:, k:k + 1] * w[k]
        acc = term if acc is None else acc + term
    return acc + b


def f_pool(x, layer, kind):
    kh, kw = pair(layer["pool"], None)
    sh, sw = pair(layer.get("stride"), (kh, kw))
    pads = pads_of(layer, x.shape[1], x.shape[2], kh, kw, sh, sw)
    y = None
    for _, _, t in taps(x, kh, kw, sh, sw, pads, -np.inf if kind == "max" else 0.0):
        y = t if y is None else (np.maximum(y, t) if kind == "max" else y + t)
    return y if kind == "max" else y / (kh * kw)  # count_include_pad


def f_global_avgpool(x):
    s = None
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            s = x[:, i:i + 1, j:j + 1, :] if s is None else s + x[:, i:i + 1, j:j + 1, :]
    return s / (x.shape[1] * x.shape[2])


def float_forward(layers, load, x):
    """{layer name: float64 output} of the float model; load(file) gives a weight array."""
    outs = {"input": np.asarray(x, dtype=np.float64)}
    last = "input"
    for layer in layers:
        t = layer["type"]
        src = [outs[n] for n in layer.get("inputs", [last])]
        if t in ("conv2d", "dense"):
            w = load(layer["weights"]).astype(np.float64)
            b = load(layer["bias"]).astype(np.float64)
            y = f_conv2d(src[0], layer, w, b) if t == "conv2d" else f_dense(src[0], w, b)
        elif t == "maxpool2d":
            y = f_pool(src[0], layer, "max")
        elif t == "avgpool2d":
            y = f_pool(src[0], layer, "avg")
        elif t == "global_avgpool2d":
            y = f_global_avgpool(src[0])
        elif t == "flatten":
            y = src[0].reshape(src[0].shape[0], -1)
        elif t == "add":
            y = src[0] + src[1]
        else:
            raise ValueError(f"unknown layer type {t}")
        if layer.get("activation", "none") == "relu":
            y = np.maximum(y, 0.0)
        outs[layer["name"]] = y
        last = layer["name"]
    return outs, last


# ---------------------------------------------------------------------------
# Quantization of a float model in graph form


RANGED = ("conv2d", "dense", "add", "avgpool2d", "global_avgpool2d")
KEY_ORDER = ("type", "name", "inputs", "weights", "bias", "groups", "pool", "stride", "padding",
             "activation")


def quantize(float_json):
    """{file name: bytes} of the int8 model (model.json and its .npy files), as
    tools/quantize_model.py quantizes, for the graph form and the new layers."""
    float_json = Path(float_json)
    fm = json.loads(float_json.read_text())
    assert fm["format"] == "tpu-sim-float-net" and fm["version"] == 1, "not a float model"
    base = float_json.parent
    files = {}
    in_q = quantize_model.activation_quant(*fm["input"]["range"])
    model = {"format": "tpu-sim-net", "version": 1, "name": fm.get("name", ""),
             "input": {"shape": fm["input"]["shape"], "scale": in_q[0], "zero_point": in_q[1]},
             "layers": []}
    quant = {"input": in_q}  # name -> (scale, zero point)
    last = "input"
    for layer in fm["layers"]:
        t, name = layer["type"], layer["name"]
        sources = layer.get("inputs", [last])
        scale, _ = quant[sources[0]]
        out = {"type": t, "name": name}
        if "inputs" in layer:
            out["inputs"] = layer["inputs"]
        if t in ("conv2d", "dense"):
            qw, w_scale = quantize_model.quantize_weights(np.load(base / layer["weights"]))
            out["weights"] = f"{name}_w.npy"
            files[out["weights"]] = quantize_model.npy_bytes(qw)
            out["bias"] = f"{name}_b.npy"
            files[out["bias"]] = quantize_model.npy_bytes(
                quantize_model.quantize_bias(np.load(base / layer["bias"]), scale * w_scale))
            out["weight_scale"] = w_scale
        for key in ("groups", "pool", "stride", "padding", "activation"):
            if key in layer:
                out[key] = layer[key]
        if t in RANGED:
            lo, hi = layer["output_range"]
            act = layer.get("activation", "none")
            assert act in ("none", "relu"), f"{name}: activation {act}"
            if act == "relu":
                lo = 0.0
            quant[name] = quantize_model.activation_quant(lo, hi)
            out["output"] = {"scale": quant[name][0], "zero_point": quant[name][1]}
        else:  # maxpool2d, flatten: the input's quantization
            quant[name] = quant[sources[0]]
        model["layers"].append(out)
        last = name
    files["model.json"] = (json.dumps(model, indent=2) + "\n").encode()
    return files


# ---------------------------------------------------------------------------
# One network


def images(rng, n, shape):
    """n random images in INPUT_RANGE: a random 4x4 grid of colours blown up to blocks of
    the image size / 4, plus noise (std 0.1), clipped. Pure arithmetic: the same bits on
    every machine."""
    lo, hi = INPUT_RANGE
    h, w, c = shape
    coarse = rng.uniform(lo, hi, (n, 4, 4, c))
    x = np.repeat(np.repeat(coarse, h // 4, axis=1), w // 4, axis=2)
    return np.clip(x + rng.normal(0.0, 0.1, x.shape), lo, hi)


def make(name, out_dir):
    """{relative path: bytes} of network `name`, built in (and read back from) out_dir."""
    index = NAMES.index(name)
    rng = np.random.default_rng(SEED + index)
    shape, layers = architecture(name)
    weights = {}
    for layer in layers:
        if layer["type"] in ("conv2d", "dense"):
            w, b = init_weights(layer, rng)
            layer["weights"], layer["bias"] = f"{layer['name']}_w.npy", f"{layer['name']}_b.npy"
            weights[layer["weights"]], weights[layer["bias"]] = w, b
    lo, hi = INPUT_RANGE
    calib = images(rng, CALIBRATION_IMAGES, shape)
    test = images(rng, TEST_IMAGES, shape)

    # Centre the logits: the last (dense) layer's bias cancels the mean over the
    # calibration images of its input, so the class the input favours wins, not the one
    # the mean features favour (data-dependent initialization; without it every random
    # image gets the same argmax).
    outs, _ = float_forward(layers, weights.__getitem__, calib)
    fc = layers[-1]
    feature_mean = outs[layers[-2]["name"]].mean(axis=0)
    w = weights[fc["weights"]].astype(np.float64)
    weights[fc["bias"]] = (weights[fc["bias"]] - f_dense(feature_mean[np.newaxis], w, 0.0)[0]).astype(np.float32)

    # Calibration (from the float32 weights, as they are written).
    outs, _ = float_forward(layers, weights.__getitem__, calib)
    desc = {"format": "tpu-sim-float-net", "version": 1, "name": name,
            "input": {"shape": shape, "range": [lo, hi]}, "layers": []}
    for layer in layers:
        d = {k: layer[k] for k in KEY_ORDER if k in layer}
        if layer["type"] in RANGED:
            y = outs[layer["name"]]
            d["output_range"] = [float(y.min()), float(y.max())]
        desc["layers"].append(d)

    files = {}
    for fname, w in weights.items():
        files[f"float/{fname}"] = quantize_model.npy_bytes(w)
    files["float/model.json"] = (json.dumps(desc, indent=2) + "\n").encode()
    for rel, data in files.items():
        write(out_dir / rel, data)

    # Quantize from the files, then the test images and the reference output.
    for fname, data in quantize(out_dir / "float" / "model.json").items():
        files[fname] = data
        write(out_dir / fname, data)
    model = json.loads(files["model.json"])
    s_in, z_in = model["input"]["scale"], model["input"]["zero_point"]
    test_x = int8_reference.quantize_input(test, s_in, z_in)
    files["test_x.npy"] = quantize_model.npy_bytes(test_x)
    expected = int8_reference.run(out_dir / "model.json", test_x)
    files["expected.npy"] = quantize_model.npy_bytes(expected)

    # How the int8 reference tracks the float model (on the same, dequantized, images).
    float_dir = out_dir / "float"
    fouts, flast = float_forward(desc["layers"], lambda f: np.load(float_dir / f),
                                 s_in * (test_x.astype(np.float64) - z_in))
    y_float = fouts[flast]
    out_q = model["layers"][-1]["output"]
    y_int8 = out_q["scale"] * (expected.astype(np.float64) - out_q["zero_point"])
    files["report.json"] = (json.dumps(agreement(name, y_float, y_int8, out_q["scale"]), indent=2)
                            + "\n").encode()
    for rel in ("test_x.npy", "expected.npy", "report.json"):
        write(out_dir / rel, files[rel])
    return files


def agreement(name, y_float, y_int8, out_scale):
    """How the int8 outputs (dequantized) track the float model's: argmax agreement, the
    correlation of all outputs, and the correlation of their variation across the images
    (each output minus its mean over the images: what the input changes)."""
    var_f, var_q = y_float - y_float.mean(axis=0), y_int8 - y_int8.mean(axis=0)
    return {
        "network": name, "seed": SEED + NAMES.index(name), "test_images": int(len(y_float)),
        "argmax_agreement": int(np.sum(np.argmax(y_float, axis=1) == np.argmax(y_int8, axis=1))),
        "float_argmax_classes": sorted({int(k) for k in np.argmax(y_float, axis=1)}),
        "correlation": round(float(np.corrcoef(y_float.ravel(), y_int8.ravel())[0, 1]), 6),
        "variation_correlation": round(float(np.corrcoef(var_f.ravel(), var_q.ravel())[0, 1]), 6),
        "max_abs_error": round(float(np.max(np.abs(y_float - y_int8))), 6),
        "max_abs_error_in_output_steps": round(float(np.max(np.abs(y_float - y_int8)) / out_scale), 3),
        "float_output_range": [round(float(y_float.min()), 6), round(float(y_float.max()), 6)],
    }


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary directory and compare with the committed files")
    args = parser.parse_args()
    names = [n for n in NAMES if args.only in (None, n)]
    if not args.check:
        for name in names:
            files = make(name, NETS / name)
            report = json.loads(files["report.json"])
            print(f"make_cnn_nets: wrote {len(files)} files to {NETS / name}: int8 vs float argmax "
                  f"{report['argmax_agreement']}/{report['test_images']}, correlation {report['correlation']}")
        return 0
    bad = []
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            files = make(name, Path(tmp) / name)
            count += len(files)
            for rel, data in files.items():
                path = NETS / name / rel
                if not path.is_file() or path.read_bytes() != data:
                    bad.append(path)
    for path in bad:
        print(f"make_cnn_nets: {path} differs from what tools/make_cnn_nets.py generates", file=sys.stderr)
    if not bad:
        print(f"make_cnn_nets: {count} files in {len(names)} networks are up to date")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
