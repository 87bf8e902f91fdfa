#!/usr/bin/python3
"""The forms of nearest upsampling tpu-sim imports, in models built here with
python3-onnx's helper (a Conv, then the upsampling): Upsample-7 (scales as an
attribute), Upsample-9 and Resize-10 (scales as an input), Resize-13 with
ONNX's default modes (half_pixel, round_prefer_floor: the same pixels as
floor(o / s) for integer factors) on a 2-D and on a 1-D (N, C, L) map, with
factors that differ between H and W, and a 1-D Concat along axis -2. Each runs with --check (bit for bit
against the C++ int8 reference); tpu-sim's float pass (--float-out) is checked
against PyTorch's F.interpolate(mode="nearest") of the same convolution.

  check_resize_forms.py BIN_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-torch, python3-numpy).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

rng = np.random.RandomState(3)


def case(d, name, op, opset, in_shape, factors, attrs, scales_input, concat_axis=None):
    w = rng.randn(4, in_shape[1], *([3] * (len(in_shape) - 2))).astype(np.float32)
    out_shape = [in_shape[0], 4] + [n * f for n, f in zip(in_shape[2:], factors)]
    scales = np.array([1, 1, *factors], np.float32)
    inputs = {"attr": ["c"], "second": ["c", "sc"], "third": ["c", "", "sc"]}[scales_input]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * (2 * (len(in_shape) - 2))),
             helper.make_node(op, inputs, ["u" if concat_axis else "y"], **attrs)]
    if concat_axis:  # the upsampled map and the conv's output side by side along the channels
        nodes.append(helper.make_node("Concat", ["u", "c"], ["y"], axis=concat_axis))
        out_shape[1] = 8
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scales, "sc")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.save(m, str(d / f"{name}.onnx"))
    x = rng.randn(2, *in_shape[1:]).astype(np.float32)
    np.save(d / "x.npy", x)
    r = subprocess.run([str(BIN / "tpu-sim"), "net", str(d / f"{name}.onnx"), "--calibrate", str(d / "x.npy"),
                        "--input", str(d / "x.npy"), "--float-out", str(d / "f.npy"), "--check", "--preset", "small8"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"{name}: tpu-sim exited {r.returncode}: {r.stderr.strip()}"
    conv = F.conv2d if len(in_shape) == 4 else F.conv1d
    want = F.interpolate(conv(torch.from_numpy(x), torch.from_numpy(w), padding=1), scale_factor=tuple(factors),
                         mode="nearest")
    if concat_axis:
        want = torch.cat([want, conv(torch.from_numpy(x), torch.from_numpy(w), padding=1)], 1)
    want = want.numpy()
    f = np.load(d / "f.npy")
    err = float(np.max(np.abs(f - want))) if f.shape == want.shape else float("inf")
    print(f"{name}: bit for bit against the C++ int8 reference; float pass vs PyTorch: max error {err:.2e}")
    return None if err < 1e-5 else f"{name}: float pass {f.shape} differs from PyTorch {want.shape} by {err}"


def main():
    global BIN
    BIN = Path(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for args in [("upsample7", "Upsample", 7, [1, 2, 8, 8], [2, 3], {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 3.0]}, "attr"),
                     ("upsample9", "Upsample", 9, [1, 2, 8, 8], [3, 2], {"mode": "nearest"}, "second"),
                     ("resize10", "Resize", 10, [1, 2, 6, 8], [2, 2], {"mode": "nearest"}, "second"),
                     ("resize13", "Resize", 13, [1, 2, 6, 5], [4, 1], {"mode": "nearest"}, "third"),
                     ("resize13_1d", "Resize", 13, [1, 3, 10], [3], {"mode": "nearest"}, "third"),
                     # A 1-D model's channels counted from the end: axis -2.
                     ("resize13_1d_concat", "Resize", 13, [1, 3, 10], [1], {"mode": "nearest"}, "third", -2)]:
            msg = case(d, *args)
            if msg:
                failures.append(msg)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
