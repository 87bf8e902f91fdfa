#!/usr/bin/python3
"""Quantizes a float model into tpu-sim's int8 model format (docs/quantization.md).

The float model is a JSON file of format "tpu-sim-float-net" beside float32
.npy weights and biases, with the calibration ranges of the input and of every
dense/conv2d layer's output (min and max over a calibration set, after the
activation), for example:

  {"format": "tpu-sim-float-net", "version": 1, "name": "digits_mlp",
   "input": {"shape": [64], "range": [0.0, 1.0]},
   "layers": [
     {"type": "dense", "name": "fc1", "weights": "fc1_w.npy", "bias": "fc1_b.npy",
      "activation": "relu", "output_range": [0.0, 7.5]},
     {"type": "conv2d", ..., "stride": [1, 1], "padding": "same"},
     {"type": "maxpool2d", "name": "pool1", "pool": [2, 2]},
     {"type": "flatten", "name": "flat"},
     {"type": "dense", ..., "activation": "none", "output_range": [-9.1, 12.0]}]}

Dense weights are K x Nout, conv2d weights KH x KW x Cin x Cout (HWIO);
activations are none, relu, sigmoid or tanh; a layer may say "output": "int32"
instead of an output range (the last layer only: raw accumulators).

The scheme (docs/quantization.md):
  activations  affine per tensor: from the range [lo, hi] widened to include 0,
               scale = (hi - lo) / 255 and zero_point = clamp(round(-128 - lo / scale));
               sigmoid and tanh outputs are fixed at scale 1/127, zero point 0
  weights      symmetric per tensor: scale = max|w| / 127, q = clip(round(w / scale), -127, 127)
  biases       int32 at the accumulator scale: round(b / (input_scale * weight_scale))
Rounding is half to even (NumPy's), in float64.

  quantize_model.py FLOAT.json OUT_DIR           write OUT_DIR/model.json and its .npy files
  quantize_model.py FLOAT.json OUT_DIR --check   exit 1 unless those files are exactly what
                                                 this script writes

Run with /usr/bin/python3 (Debian's python3-numpy).
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

QMIN, QMAX = -128, 127


def npy_bytes(array):
    """An int8/int32/float32 array as .npy format 1.0 bytes, independent of the NumPy version."""
    descr = {np.dtype(np.int8): "|i1", np.dtype(np.int32): "<i4", np.dtype(np.float32): "<f4",
             np.dtype(np.int64): "<i8"}[array.dtype]
    array = np.ascontiguousarray(array)
    shape = tuple(int(d) for d in array.shape)
    shape_text = "(%d,)" % shape[0] if len(shape) == 1 else repr(shape)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1")
            + array.astype(array.dtype.newbyteorder("<")).tobytes())


def activation_quant(lo, hi):
    """(scale, zero_point) of an affine int8 tensor covering [lo, hi] and 0."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero_point = int(np.clip(np.round(QMIN - lo / scale), QMIN, QMAX))
    return scale, zero_point


def quantize_weights(w):
    w = np.asarray(w, dtype=np.float64)
    m = float(np.max(np.abs(w))) if w.size else 0.0
    scale = m / 127.0 if m > 0 else 1.0
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale


def quantize_bias(b, scale):
    q = np.round(np.asarray(b, dtype=np.float64) / scale)
    return np.clip(q, -(1 << 31), (1 << 31) - 1).astype(np.int32)


def quantize(float_json):
    """{file name: bytes} of the quantized model (model.json and its .npy files)."""
    float_json = Path(float_json)
    fm = json.loads(float_json.read_text())
    assert fm["format"] == "tpu-sim-float-net" and fm["version"] == 1, "not a float model"
    base = float_json.parent
    files = {}
    in_scale, in_zero = activation_quant(*fm["input"]["range"])
    model = {"format": "tpu-sim-net", "version": 1, "name": fm.get("name", ""),
             "input": {"shape": fm["input"]["shape"], "scale": in_scale, "zero_point": in_zero},
             "layers": []}
    scale, zero = in_scale, in_zero
    for i, layer in enumerate(fm["layers"]):
        t = layer["type"]
        name = layer.get("name", f"layer{i}")
        out = {"type": t, "name": name}
        if t in ("dense", "conv2d"):
            w = np.load(base / layer["weights"])
            qw, w_scale = quantize_weights(w)
            out["weights"] = f"{name}_w.npy"
            files[out["weights"]] = npy_bytes(qw)
            if "bias" in layer:
                out["bias"] = f"{name}_b.npy"
                files[out["bias"]] = npy_bytes(quantize_bias(np.load(base / layer["bias"]), scale * w_scale))
            out["weight_scale"] = w_scale
            for key in ("stride", "padding"):
                if key in layer:
                    out[key] = layer[key]
            act = layer.get("activation", "none")
            out["activation"] = act
            if layer.get("output") == "int32":
                assert act == "none", f"{name}: int32 output takes no activation"
                out["output"] = "int32"
                scale, zero = scale * w_scale, 0
            elif act in ("sigmoid", "tanh"):
                scale, zero = 1.0 / 127.0, 0
            else:
                lo, hi = layer["output_range"]
                if act == "relu":
                    lo = 0.0
                scale, zero = activation_quant(lo, hi)
                out["output"] = {"scale": scale, "zero_point": zero}
        elif t == "maxpool2d":
            out["pool"] = layer["pool"]
            if "stride" in layer:
                out["stride"] = layer["stride"]
        elif t != "flatten":
            raise ValueError(f"{name}: unknown layer type {t}")
        model["layers"].append(out)
    files["model.json"] = (json.dumps(model, indent=2) + "\n").encode()
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("float_model")
    parser.add_argument("out_dir")
    parser.add_argument("--check", action="store_true",
                        help="verify the files in OUT_DIR instead of writing them")
    args = parser.parse_args()
    files = quantize(args.float_model)
    out = Path(args.out_dir)
    if args.check:
        bad = [n for n, data in files.items()
               if not (out / n).is_file() or (out / n).read_bytes() != data]
        for n in bad:
            print(f"quantize_model: {out / n} differs from what {args.float_model} quantizes to",
                  file=sys.stderr)
        if not bad:
            print(f"quantize_model: {len(files)} files in {out} are up to date")
        return 1 if bad else 0
    out.mkdir(parents=True, exist_ok=True)
    for n, data in files.items():
        (out / n).write_bytes(data)
    print(f"quantize_model: wrote {len(files)} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
