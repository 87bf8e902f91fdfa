#!/usr/bin/python3
"""Every ONNX model or input tpu-sim cannot take is one exact error line and
exit status 3 (2 for a bad command line), never a crash. The models are made
here with python3-onnx's helper, each a small valid network with one thing
changed.

  onnx_errors.py BIN_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-numpy).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inits, out_shape=(1, 10)):
    """Input x (1, 1, 8, 8) float; output y."""
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


rng = np.random.RandomState(0)
W = rng.randn(4, 1, 3, 3).astype(np.float32)
FC = rng.randn(10, 4 * 8 * 8).astype(np.float32)


def net(conv_attrs=None, head=None, middle=None):
    """x -> Conv(3x3, pad 1) -> [middle] -> Relu -> Flatten -> Gemm -> [head] -> y."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", **(conv_attrs or {"pads": [1, 1, 1, 1]}))]
    inits = [const("w", W), const("fc", FC)]
    last = "c"
    if middle:
        nodes += middle
        last = middle[-1].output[0]
    nodes += [helper.make_node("Relu", [last], ["r"], name="relu"),
              helper.make_node("Flatten", ["r"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "fc"], ["g" if head else "y"], name="fc", transB=1)]
    if head:
        nodes.append(head)
    return model(nodes, inits)


def with_initializer(m, name, dims, raw=b""):
    """`m` with initializer `name` (replaced or added): float32 of `dims` with raw_data `raw`, built by hand (the
    helper would check the sizes)."""
    t = TensorProto()
    t.name, t.data_type, t.raw_data = name, TensorProto.FLOAT, raw
    t.dims.extend(dims)
    kept = [i for i in m.graph.initializer if i.name != name]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept + [t])
    return m


def with_opset(m, version):
    m.opset_import[0].version = version
    return m


def flatten_only(in_shape):
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["y"], name="flat")], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def resize(scales=(1, 1, 2, 2), sizes=None, **attrs):
    """A Resize of the conv's output (nearest, asymmetric, floor unless `attrs` say otherwise); its scales or sizes
    are initializers named per call (all added to every Resize case in main)."""
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor", **attrs}
    k = len(RESIZE_CONSTS)
    RESIZE_CONSTS[f"rs_scales{k}"] = np.array(scales if sizes is None else [], np.float32)
    inputs = ["c", "", f"rs_scales{k}"]
    if sizes is not None:
        RESIZE_CONSTS[f"rs_sizes{k}"] = np.array(sizes, np.int64)
        inputs.append(f"rs_sizes{k}")
    return [helper.make_node("Resize", inputs, ["m"], name="rs", **attrs)]


RESIZE_CONSTS = {}


def one_d(nodes):
    """A 1-D model: input x (1, 2, 16) float; output y; weights w3d (4, 2, 3) and w4 (4, 2, 1, 3)."""
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, None])],
                          [const("w3d", np.zeros((4, 2, 3), np.float32)),
                           const("w4", np.zeros((4, 2, 1, 3), np.float32))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def pool(op, **attrs):
    return [helper.make_node(op, ["c"], ["m"], name="pool", kernel_shape=[1, 1], **attrs)]


# The element count 2^62 + 1 as two dims below 2^32 (a^4 + 4b^4 = (a^2 + 2b^2 + 2ab)(a^2 + 2b^2 - 2ab), a = 1,
# b = 2^15): 4 bytes per float wrap 2^62 + 1 elements to 4 bytes.
WRAP_DIMS = [2**31 + 2**16 + 1, 2**31 - 2**16 + 1]
assert WRAP_DIMS[0] * WRAP_DIMS[1] == 2**62 + 1

CASES = {
    # name: (model bytes or ModelProto, expected message after "PATH: ")
    "logsoftmax": (net(head=helper.make_node("LogSoftmax", ["g"], ["y"], name="sm")),
                   "node 'sm' (LogSoftmax): operator not supported (docs/onnx.md lists the supported ones)"),
    "dilation": (net(conv_attrs={"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
                 "node 'conv' (Conv): dilations [2, 2] are not supported (tpu-sim's convolutions and pools "
                 "are not dilated)"),
    "auto_pad": (net(conv_attrs={"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
                          "node 'conv' (Conv): auto_pad 'SAME_UPPER' is not supported (NOTSET with explicit pads, "
                          "or VALID)"),
    "clip": (net(middle=[helper.make_node("Clip", ["c", "lo", "hi"], ["k"], name="clip")]),
             "node 'clip' (Clip): Clip(-1, 1) is not supported (only Clip(0, max > 0): ReLU, ReLU6)"),
    # A Sigmoid, Tanh or Relu that cannot fuse is a standalone affine layer (the vector unit); a Clip is not.
    "clip_alone": (net(middle=[helper.make_node("MaxPool", ["c"], ["m"], name="pool", kernel_shape=[1, 1]),
                               helper.make_node("Clip", ["m"], ["s"], name="clip")]),
                   "node 'clip' (Clip): must follow a Conv, Gemm or MatMul or an Add without activation (the "
                   "activation is fused into it)"),
    # Found by issue 25: checked before libonnx (its shape inference divides by the strides; its checker and the
    # importer counted elements in wrapping 64-bit arithmetic).
    "conv_stride_0": (net(conv_attrs={"pads": [1, 1, 1, 1], "strides": [0, 0]}),
                      "node 'conv' (Conv): strides [0, 0] are not supported (each 1 to 65536)"),
    "maxpool_stride_0": (net(middle=pool("MaxPool", strides=[0, 1])),
                         "node 'pool' (MaxPool): strides [0, 1] are not supported (each 1 to 65536)"),
    "avgpool_stride_0": (net(middle=pool("AveragePool", strides=[1, 0])),
                         "node 'pool' (AveragePool): strides [1, 0] are not supported (each 1 to 65536)"),
    "dims_past_2_64": (with_initializer(net(), "w", [4, 1, 2**31, 2**31]),
                       "initializer 'w' has dimensions [4, 1, 2147483648, 2147483648] whose product is past 2^64"),
    "negative_dims": (with_initializer(net(), "w", [4, 1, 0, -3]), "initializer 'w' has a negative dimension -3"),
    "data_size_wraps": (with_initializer(net(), "big", WRAP_DIMS, b"\0" * 4),
                        f"initializer 'big' has 4 bytes of data for {2**62 + 1} elements"),
    "data_size": (with_initializer(net(), "w", [4, 1, 3, 3], b"\0" * 8),
                  "initializer 'w' has 8 bytes of data for 36 elements"),
    "opset_99": (with_opset(net(), 99),
                 "opset 99 is not supported (tpu-sim imports opsets 1 to 17 of the ONNX domain)"),
    # Tensors past 2^26 elements per sample (the old code ran out of memory making a flatten's permutation).
    "input_too_large": (flatten_only([1, 1, 65536, 65536]),
                        "input 'x', of shape [1, 65536, 65536] per sample, has more than 67108864 elements "
                        "(tpu-sim's limit)"),
    "output_too_large": (net(conv_attrs={"pads": [65536] * 4}),
                         "node 'conv' (Conv): its output, of shape [4, 131078, 131078] per sample, has more than "
                         "67108864 elements (tpu-sim's limit)"),
    # Found by fuzz_onnx: 1-D weights make libonnx infer a 2-D output, and the next Conv (4-D weights) read past
    # its input's shape in libonnx's shape inference (SIGSEGV); the importer now runs first.
    "conv_weights_1d": (with_initializer(net(middle=[helper.make_node("Conv", ["c", "w2"], ["c2"], name="conv2")]),
                                         "w", [4], b"\0" * 16),
                        "node 'conv' (Conv): only 2-D convolutions (4-D weights) and 1-D ones are supported"),
    # Issue 28: ceil_mode, ReduceMean and grouped Conv beyond what tpu-sim maps.
    "avgpool_ceil": (net(middle=pool("AveragePool", strides=[2, 2], ceil_mode=1)),
                     "node 'pool' (AveragePool): ceil_mode 1 is not supported where it changes the output size (ONNX "
                     "leaves the extra cells of the last window out of the average's count; tpu-sim's average divides "
                     "by the whole window)"),
    "reducemean_axes": (net(middle=[helper.make_node("ReduceMean", ["c"], ["m"], name="mean", axes=[1])]),
                        "node 'mean' (ReduceMean): only the mean over H and W (axes [2, 3]) is supported: a global "
                        "average pool"),
    "group_3_of_4": (net(middle=[helper.make_node("Conv", ["c", "w3"], ["c2"], name="conv2", group=3)]),
                     "node 'conv2' (Conv): group 3 does not divide the 4 input and 4 output channels"),
    "transpose": (net(middle=[helper.make_node("Transpose", ["c"], ["t"], name="tr", perm=[0, 1, 3, 2])]),
                  "node 'tr' (Transpose): only the channel shuffle's Transpose (perm (0, 2, 1, 3, 4) of a map reshaped "
                  "to (N, g, C/g, H, W)) is supported"),
    "slice_h": (net(middle=[helper.make_node("Slice", ["c", "s0", "s1", "s2"], ["t"], name="sl")]),
                "node 'sl' (Slice): only a slice of the channels (axis 1) is supported"),
    "mul": (net(middle=[helper.make_node("Mul", ["c", "x"], ["t"], name="mul")]),
            "node 'mul' (Mul): multiplies tensors of shapes [4, 8, 8] and [1, 8, 8] per sample (only the same shape, "
            "or a map (C, H, W) by a per-channel (C, 1, 1))"),
    "mul_const": (net(middle=[helper.make_node("Mul", ["c", "w"], ["t"], name="mul")]),
                  "node 'mul' (Mul): Mul of computed tensors is not supported (only of constants, such as shape "
                  "arithmetic)"),
    # Issue 28: Resize beyond nearest upsampling by integer factors, ranks other than 2, 3 and 4, 1-D windows.
    "resize_linear": (net(middle=resize(mode="linear")),
                      "node 'rs' (Resize): mode 'linear' is not supported (only nearest)"),
    "resize_cubic": (net(middle=resize(mode="cubic")),
                     "node 'rs' (Resize): mode 'cubic' is not supported (only nearest)"),
    "resize_fraction": (net(middle=resize(scales=[1, 1, 1.5, 1.5])),
                        "node 'rs' (Resize): scales [1, 1, 1.5, 1.5] are not supported (only integer factors 1 to "
                        "255 along H and W, and 1 for N and C)"),
    "resize_channels": (net(middle=resize(scales=[1, 2, 2, 2])),
                        "node 'rs' (Resize): scales [1, 2, 2, 2] are not supported (only integer factors 1 to 255 "
                        "along H and W, and 1 for N and C)"),
    "resize_down": (net(middle=resize(scales=[1, 1, 0.5, 0.5])),
                    "node 'rs' (Resize): scales [1, 1, 0.5, 0.5] are not supported (only integer factors 1 to 255 "
                    "along H and W, and 1 for N and C)"),
    "resize_sizes": (net(middle=resize(sizes=[1, 4, 12, 12])),
                     "node 'rs' (Resize): sizes [1, 4, 12, 12] are not whole multiples of the input's [1, 4, 8, 8]: "
                     "only integer factors are supported"),
    "resize_ceil": (net(middle=resize(coordinate_transformation_mode="asymmetric", nearest_mode="ceil")),
                    "node 'rs' (Resize): coordinate_transformation_mode 'asymmetric' with nearest_mode 'ceil' reads "
                    "input 1 for output 1 of a factor 2; only floor(output / factor) is supported (PyTorch's "
                    "asymmetric, floor)"),
    "resize_crop": (net(middle=resize(coordinate_transformation_mode="tf_crop_and_resize")),
                    "node 'rs' (Resize): coordinate_transformation_mode 'tf_crop_and_resize' is not supported"),
    "rank_5": (flatten_only([1, 1, 2, 2, 2]),
               "input 'x' must be (N, C, H, W), (N, C, L) or (N, features), not of rank 5"),
    "conv1d_weights_4d": (one_d([helper.make_node("Conv", ["x", "w4"], ["y"], name="conv", kernel_shape=[1, 3])]),
                          "node 'conv' (Conv): a 1-D convolution needs 3-D weights (O, I, K)"),
    "conv1d_strides_2d": (one_d([helper.make_node("Conv", ["x", "w3d"], ["y"], name="conv", strides=[1, 1])]),
                          "node 'conv' (Conv): a 1-D window needs one 'strides' value"),
    "maxpool1d_pads": (one_d([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[3],
                                               pads=[1, 1, 1, 1])]),
                       "node 'pool' (MaxPool): a 1-D window needs 2 pads (begin, end of L)"),
    "garbage": (b"\x08\x07\x12\xff\xff\xff\xff\x0fnot a protobuf",
                "not an ONNX model (the protobuf does not parse)"),
}


def add_w2(m):
    m.graph.initializer.extend([const("w2", np.zeros((4, 4, 3, 3), np.float32))])
    return m


def fix_clip(m):
    m.graph.initializer.extend([const("lo", np.float32(-1.0)), const("hi", np.float32(1.0))])
    return m


def main():
    bin_dir = Path(sys.argv[1])
    tpu_sim = str(bin_dir / "tpu-sim")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        x = rng.rand(2, 1, 8, 8).astype(np.float32)
        np.save(d / "x.npy", x)
        np.save(d / "x64.npy", x.astype(np.float64))
        np.save(d / "x_shape.npy", x[:, :, :7])

        def expect(args, status, line):
            r = subprocess.run([tpu_sim, "net", *args], capture_output=True, text=True)
            err = r.stderr.splitlines()
            if r.returncode != status or err != [line]:
                failures.append(f"tpu-sim net {' '.join(args)}: exit {r.returncode}, stderr {r.stderr!r}; "
                                f"wanted exit {status} and {line!r}")

        good = d / "good.onnx"
        onnx.save(net(), str(good))
        r = subprocess.run([tpu_sim, "net", str(good), "--calibrate", str(d / "x.npy"), "--input", str(d / "x.npy")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"the valid model fails: {r.stderr}")
        for name, (m, msg) in CASES.items():
            path = d / f"{name}.onnx"
            if isinstance(m, bytes):
                path.write_bytes(m)
            else:
                if name == "clip":
                    m = fix_clip(m)
                if name == "conv_weights_1d":
                    m = add_w2(m)
                if name == "slice_h":
                    m.graph.initializer.extend([const("s0", np.array([0], np.int64)), const("s1", np.array([4], np.int64)),
                                                const("s2", np.array([2], np.int64))])
                if name.startswith("resize"):
                    m.graph.initializer.extend([const(k, v) for k, v in RESIZE_CONSTS.items()])
                if name == "group_3_of_4":
                    m.graph.initializer.extend([const("w3", np.zeros((4, 1, 1, 1), np.float32))])
                path.write_bytes(m.SerializeToString())
            expect([str(path), "--calibrate", str(d / "x.npy"), "--input", str(d / "x.npy")], 3,
                   f"tpu-sim: error: {path}: {msg}")
        # A model the ONNX checker rejects: a node reading a value nothing defines.
        bad = net()
        bad.graph.node[1].input[0] = "nowhere"
        (d / "checker.onnx").write_bytes(bad.SerializeToString())
        r = subprocess.run([tpu_sim, "net", str(d / "checker.onnx"), "--calibrate", str(d / "x.npy"), "--input",
                            str(d / "x.npy")], capture_output=True, text=True)
        prefix = f"tpu-sim: error: {d / 'checker.onnx'}: the ONNX checker rejects the model: "
        if r.returncode != 3 or len(r.stderr.splitlines()) != 1 or not r.stderr.startswith(prefix):
            failures.append(f"checker: exit {r.returncode}, stderr {r.stderr!r}")
        # Inputs: float32 in the model's layout, (B, 1, 8, 8).
        for npy, got in (("x64.npy", "float64 of shape (2, 1, 8, 8)"), ("x_shape.npy", "float32 of shape (2, 1, 7, 8)")):
            for flag in ("--input", "--calibrate"):
                other = "--calibrate" if flag == "--input" else "--input"
                expect([str(good), flag, str(d / npy), other, str(d / "x.npy")], 3,
                       f"tpu-sim: error: {d / npy}: expected float32 of shape (B, 1, 8, 8) (the ONNX model's "
                       f"layout), got {got}")
        xn = x.copy()
        xn[1, 0, 3, 3] = np.nan
        np.save(d / "x_nan.npy", xn)
        expect([str(good), "--calibrate", str(d / "x_nan.npy"), "--input", str(d / "x.npy")], 3,
               f"tpu-sim: error: {good}: the calibration set gives the input values that are not finite")
        expect([str(good), "--input", str(d / "x.npy")], 2,
               "tpu-sim: error: --calibrate: an .onnx model needs a calibration set")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(CASES) + 8} error cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
