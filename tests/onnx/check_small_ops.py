#!/usr/bin/python3
"""The ONNX operators and foldings PyTorch's exports of ResNet-18, MobileNetV2
and the digits CNN do not use (MatMul + Add bias, Gemm alpha/beta/transB 0,
Sigmoid, Tanh, Pad before Conv and MaxPool, BatchNormalization, Clip,
depthwise Conv with stride, AveragePool with count_include_pad, an Add of two
tensors, GlobalAveragePool, Reshape), in two models built here with
python3-onnx's helper. Checked against independent references: tpu-sim's
float pass (--float-out) against the same computation in PyTorch's functional
ops, its int8 output bit for bit against tools/int8_reference.py on the saved
model.

  check_small_ops.py BIN_DIR SRC_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-torch, python3-numpy).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_onnx_model import output_quant  # noqa: E402

rng = np.random.RandomState(7)


def rand(*shape, scale=1.0):
    return (rng.randn(*shape) * scale).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def graph_model(nodes, inits, in_shape, out_shape):
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def dense_model():
    w1, b1, w2, c2, w3, c3 = rand(6, 5), rand(5), rand(5, 4), rand(4), rand(3, 4), rand(3)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b1"], ["a"], name="bias"),
             helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),
             helper.make_node("Gemm", ["s", "w2", "c2"], ["g"], name="gemm", alpha=0.5, beta=2.0),
             helper.make_node("Tanh", ["g"], ["t"], name="tanh"),
             helper.make_node("Gemm", ["t", "w3", "c3"], ["y"], name="out", transB=1)]
    inits = [init(n, v) for n, v in (("w1", w1), ("b1", b1), ("w2", w2), ("c2", c2), ("w3", w3), ("c3", c3))]

    def reference(x):
        x = torch.from_numpy(x)
        s = torch.sigmoid(x @ torch.from_numpy(w1) + torch.from_numpy(b1))
        t = torch.tanh(0.5 * s @ torch.from_numpy(w2) + 2.0 * torch.from_numpy(c2))
        return (t @ torch.from_numpy(w3).T + torch.from_numpy(c3)).numpy()

    return graph_model(nodes, inits, [1, 6], [1, 3]), reference, (6,)


def conv_model():
    w1, b1 = rand(4, 3, 3, 3, scale=0.5), rand(4)
    gamma, beta, mean, var = rand(4) + 1.5, rand(4), rand(4), np.abs(rand(4)) + 0.5
    wd = rand(4, 1, 3, 3)
    wf, cf = rand(3, 4), rand(3)
    nodes = [helper.make_node("Pad", ["x", "p1"], ["xp"], name="pad1"),
             helper.make_node("Conv", ["xp", "w1", "b1"], ["c1"], name="conv1", strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"], name="bn",
                              epsilon=1e-3),
             helper.make_node("Clip", ["bn", "lo", "hi"], ["r6"], name="relu6"),
             helper.make_node("Conv", ["r6", "wd"], ["dw"], name="dwconv", group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["dw"], ["dr"], name="relu"),
             helper.make_node("Pad", ["dr", "p2"], ["dp"], name="pad2"),
             helper.make_node("MaxPool", ["dp"], ["mp"], name="max", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["mp"], ["ap"], name="avg", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              count_include_pad=1),
             helper.make_node("Add", ["mp", "ap"], ["sum"], name="add"),
             helper.make_node("Relu", ["sum"], ["sr"], name="add_relu"),
             helper.make_node("GlobalAveragePool", ["sr"], ["gap"], name="gap"),
             helper.make_node("Reshape", ["gap", "shape"], ["flat"], name="reshape"),
             helper.make_node("Gemm", ["flat", "wf", "cf"], ["y"], name="fc", transB=1)]
    inits = [init("p1", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), init("w1", w1), init("b1", b1),
             init("gamma", gamma), init("beta", beta), init("mean", mean), init("var", var),
             init("lo", np.float32(0.0)), init("hi", np.float32(6.0)), init("wd", wd),
             init("p2", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)), init("shape", np.array([1, -1], np.int64)),
             init("wf", wf), init("cf", cf)]

    def reference(x):
        t = lambda a: torch.from_numpy(a)  # noqa: E731
        h = F.conv2d(F.pad(t(x), (1, 1, 1, 1)), t(w1), t(b1), stride=2)
        h = F.batch_norm(h, t(mean), t(var), t(gamma), t(beta), training=False, eps=1e-3)
        h = torch.clamp(h, 0.0, 6.0)
        h = torch.relu(F.conv2d(h, t(wd), padding=1, groups=4))
        m = F.max_pool2d(F.pad(h, (0, 1, 0, 1)), 2, 2)
        a = F.avg_pool2d(m, 3, 1, padding=1, count_include_pad=True)
        g = torch.relu(m + a).mean(dim=(2, 3))
        return (g @ t(wf).T + t(cf)).numpy()

    return graph_model(nodes, inits, [1, 3, 9, 9], [1, 3]), reference, (3, 9, 9)


def main():
    bin_dir, src_dir = Path(sys.argv[1]), Path(sys.argv[2])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, make in (("dense", dense_model), ("conv", conv_model)):
            model, reference, shape = make()
            path = d / f"{name}.onnx"
            onnx.save(model, str(path))
            calib, x = rand(32, *shape), rand(5, *shape)
            np.save(d / "calib.npy", calib)
            np.save(d / "x.npy", x)
            r = subprocess.run([str(bin_dir / "tpu-sim"), "net", str(path), "--calibrate", str(d / "calib.npy"),
                                "--input", str(d / "x.npy"), "--out", str(d / "y.npy"), "--float-out",
                                str(d / "f.npy"), "--save-model", str(d / name)], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{name}: tpu-sim exited {r.returncode}: {r.stderr.strip()}")
                continue
            want = reference(x)
            f = np.load(d / "f.npy")
            float_err = float(np.max(np.abs(f - want)))
            if f.shape != want.shape or float_err > 1e-4 * max(1.0, float(np.max(np.abs(want)))):
                failures.append(f"{name}: the float pass differs from PyTorch's by {float_err}")
            xr = x.transpose(0, 2, 3, 1).copy() if x.ndim == 4 else x
            np.save(d / "xr.npy", xr)
            subprocess.run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(d / name / "model.json"),
                            "--input", str(d / "xr.npy"), "--out", str(d / "ref.npy")], check=True)
            scale, zero = output_quant(json.loads((d / name / "model.json").read_text()))
            ref = (np.float64(scale) * (np.load(d / "ref.npy").astype(np.float64) - zero)).astype(np.float32)
            y = np.load(d / "y.npy")
            if not np.array_equal(y, ref):
                failures.append(f"{name}: the output differs from the NumPy int8 reference")
            rel = float(np.max(np.abs(y - want)) / np.max(np.abs(want)))
            print(f"{name}: float pass vs PyTorch {float_err:.2e}; int8 bit for bit: {np.array_equal(y, ref)}; "
                  f"int8 vs PyTorch {rel:.4f} of max|y|")
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
