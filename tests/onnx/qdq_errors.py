#!/usr/bin/python3
"""QDQ models tpu-sim cannot take are one exact error line and exit status 3,
never a crash (docs/onnx.md, "QDQ models"). The models are made here with
python3-onnx's helper: a small valid QDQ network, each case with one thing
changed. Also: the valid model runs without --calibrate, and with it prints
that it is ignored.

  qdq_errors.py BIN_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-numpy).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

rng = np.random.RandomState(0)
W = rng.randint(-127, 128, size=(4, 1, 3, 3)).astype(np.int8)
FC = rng.randint(-127, 128, size=(10, 4 * 8 * 8)).astype(np.int8)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


INITS = {
    "s_x": np.float32(1 / 255), "z_x": np.uint8(0),
    "w": W, "s_w": np.float32(0.01), "z_w": np.int8(0),
    "s_c": np.float32(0.05), "z_c": np.uint8(0),
    "fc": FC, "s_fc": np.float32(0.002), "z_fc": np.int8(0),
}


def node(op, ins, outs, name, **kw):
    return helper.make_node(op, ins, outs, name=name, **kw)


def base_nodes():
    """x -> Q -> DQ -> Conv(DQ(w)) -> Relu -> Q -> DQ -> Flatten -> Gemm(DQ(fc)) -> y."""
    return [
        node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], "qx"),
        node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], "dqx"),
        node("DequantizeLinear", ["w", "s_w", "z_w"], ["wd"], "dqw"),
        node("Conv", ["xd", "wd"], ["c"], "conv", pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["r"], "relu"),
        node("QuantizeLinear", ["r", "s_c", "z_c"], ["rq"], "qc"),
        node("DequantizeLinear", ["rq", "s_c", "z_c"], ["rd"], "dqc"),
        node("Flatten", ["rd"], ["f"], "flat"),
        node("DequantizeLinear", ["fc", "s_fc", "z_fc"], ["fcd"], "dqfc"),
        node("Gemm", ["f", "fcd"], ["y"], "fc", transB=1),
    ]


def model(nodes=None, inits=None, out_shape=(1, 10)):
    all_inits = dict(INITS)
    all_inits.update(inits or {})
    g = helper.make_graph(nodes or base_nodes(), "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
                          [const(k, v) for k, v in all_inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def replace(name, *new):
    """The base nodes with node `name` replaced by `new` (several, or none)."""
    out = []
    for n in base_nodes():
        out.extend(new if n.name == name else [n])
    return out


UNSUPPORTED = ("(tpu-sim's weights are symmetric, int8 with zero point 0 or uint8 with 128: the array has no "
               "weight zero point)")
CASES = {
    "qlinearconv": (model(replace("conv", node("QLinearConv", ["xq", "s_x", "z_x", "w", "s_w", "z_w", "s_c", "z_c"],
                                               ["c"], "qconv", pads=[1, 1, 1, 1])),
                          {"z_w": np.int8(0)}),
                    "node 'qconv' (QLinearConv): the QOperator form is not supported: tpu-sim imports quantized "
                    "models in QDQ form (QuantizeLinear and DequantizeLinear around float Conv, Gemm, MatMul)"),
    "uint8_weights_zero_point": (model(inits={"w": (W.astype(np.int32) + 128).astype(np.uint8), "z_w": np.uint8(3)}),
                                 "node 'conv' (Conv): the weights (DequantizeLinear 'dqw', UINT8) have zero point 3: "
                                 "not supported " + UNSUPPORTED),
    "int8_weights_zero_point": (model(inits={"z_w": np.int8(2)}),
                                "node 'conv' (Conv): the weights (DequantizeLinear 'dqw', INT8) have zero point 2: "
                                "not supported " + UNSUPPORTED),
    "float_weights": (model(replace("conv", node("Conv", ["xd", "wf"], ["c"], "conv", pads=[1, 1, 1, 1])),
                            {"wf": W.astype(np.float32) * 0.01}),
                      "node 'conv' (Conv): the weights are float: in a QDQ model tpu-sim takes quantized weights (a "
                      "DequantizeLinear of int8 values)"),
    "per_axis_activation": (model(replace("qc", node("QuantizeLinear", ["r", "s_c4", "z_c4"], ["rq"], "qc", axis=1)),
                                  {"s_c4": np.full(4, 0.05, np.float32), "z_c4": np.zeros(4, np.uint8)}),
                            "node 'qc' (QuantizeLinear): per-axis quantization of a computed tensor is not supported "
                            "(tpu-sim quantizes an activation with one scale and zero point)"),
    "weights_per_input_channel": (model(inits={"s_fc": np.full(256, 0.002, np.float32) *
                                               np.linspace(1, 2, 256).astype(np.float32),
                                               "z_fc": np.zeros(256, np.int8)},
                                        nodes=replace("dqfc", node("DequantizeLinear", ["fc", "s_fc", "z_fc"], ["fcd"],
                                                                   "dqfc", axis=1))),
                                  "node 'fc' (Gemm): per-channel weight scales along axis 1 (DequantizeLinear 'dqfc') "
                                  "are not supported (only along the output channels, axis 0)"),
    "not_quantized": (model(replace("flat", node("Flatten", ["r"], ["f"], "flat"))),
                      "node 'flat' (Flatten): input 'r' is not quantized: in a QDQ model every Conv, Gemm, MatMul, "
                      "pool, Add and Flatten must read a DequantizeLinear (tpu-sim computes in int8)"),
    "dq_mismatch": (model(replace("dqc", node("DequantizeLinear", ["rq", "s_c2", "z_c"], ["rd"], "dqc")),
                          {"s_c2": np.float32(0.125)}),
                    "node 'dqc' (DequantizeLinear): dequantizes with scale 0.125 and zero point 0 (UINT8) what a "
                    "QuantizeLinear quantized with 0.05000000074505806 and 0 (UINT8): not supported"),
    "maxpool_requantized": (model(replace("flat",
                                          node("MaxPool", ["rd"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
                                          node("QuantizeLinear", ["p", "s_p", "z_c"], ["pq"], "qp"),
                                          node("DequantizeLinear", ["pq", "s_p", "z_c"], ["pd"], "dqp"),
                                          node("Flatten", ["pd"], ["f"], "flat")),
                                  {"fc": FC[:, :64], "s_p": np.float32(0.25)}),
                            "node 'qp' (QuantizeLinear): quantizes the output of MaxPool 'pool' with scale 0.25 and "
                            "zero point 0, its input with 0.05000000074505806 and 0: tpu-sim's max-pool and flatten "
                            "keep their input's quantization"),
    "requantize_twice": (model(replace("flat",
                                       node("QuantizeLinear", ["rd", "s_p", "z_c"], ["r2q"], "q2"),
                                       node("DequantizeLinear", ["r2q", "s_p", "z_c"], ["r2d"], "dq2"),
                                       node("Flatten", ["r2d"], ["f"], "flat"),
                                       node("Flatten", ["rd"], ["f2"], "flat2")),
                               {"s_p": np.float32(0.25)}),
                         "node 'q2' (QuantizeLinear): requantizes a quantized tensor from scale 0.05000000074505806 and "
                         "zero point 0 to 0.25 and 0: not supported (tpu-sim requantizes only in a Conv, Gemm, MatMul, "
                         "Add or AveragePool, once)"),
    "sigmoid": (model(replace("relu", node("Sigmoid", ["c"], ["r"], "sig"))),
                "node 'sig' (Sigmoid): is not supported in a QDQ model: tpu-sim's sigmoid and tanh tables give a "
                "fixed output quantization (scale 1/127), not the model's"),
    "clip_inside": (model(replace("relu", node("Clip", ["c", "lo", "hi"], ["r"], "clip")),
                          {"lo": np.float32(0), "hi": np.float32(6)}),
                    "node 'conv' (Conv): Clip at 6 is inside its output's quantized range (up to 12.75): tpu-sim "
                    "clips only where int8 saturates"),
    "relu_output_float": (model(base_nodes()[:4] + [node("Relu", ["c"], ["y"], "relu")], out_shape=(1, 4, 8, 8)),
                          "node 'conv' (Conv): its output is not quantized (no QuantizeLinear follows it): tpu-sim "
                          "computes in int8 (only the last layer, without activation, may give its int32 "
                          "accumulators)"),
    "dynamic": (model(replace("qx", node("DynamicQuantizeLinear", ["x"], ["xq", "sx_d", "zx_d"], "dyn"))),
                "node 'dyn' (DynamicQuantizeLinear): dynamic quantization is not supported (tpu-sim takes static QDQ "
                "models: QuantizeLinear with constant scales and zero points)"),
    "multiplier_too_large": (model(inits={"s_c": np.float32(1e-30)}),
                             "node 'conv' (Conv): the requantization multiplier s_in * s_w / s_out = 3.92157e+25 is "
                             "2^31 or more, which tpu-sim cannot apply (check the scales)"),
    "int32_activation": (model(replace("qc", node("QuantizeLinear", ["r", "s_c", "z_i32"], ["rq"], "qc")),
                               {"z_i32": np.int32(0)}),
                         None),  # the ONNX checker refuses int32 for QuantizeLinear: checked below
}


def main():
    bin_dir = Path(sys.argv[1])
    tpu_sim = str(bin_dir / "tpu-sim")
    failures = []
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        np.save(d / "x.npy", rng.rand(2, 1, 8, 8).astype(np.float32))

        def run(args):
            return subprocess.run([tpu_sim, "net", *args], capture_output=True, text=True)

        good = d / "good.onnx"
        good.write_bytes(model().SerializeToString())
        r = run([str(good), "--input", str(d / "x.npy"), "--out", str(d / "y.npy")])
        if r.returncode != 0:
            failures.append(f"the valid QDQ model fails without --calibrate: {r.stderr}")
        r = run([str(good), "--input", str(d / "x.npy"), "--calibrate", str(d / "x.npy")])
        want = f"tpu-sim: warning: {good}: --calibrate is ignored: the QDQ model brings its own quantization"
        if r.returncode != 0 or want not in r.stderr.splitlines():
            failures.append(f"--calibrate on a QDQ model: exit {r.returncode}, stderr {r.stderr!r}")
        count += 2
        for name, (m, msg) in CASES.items():
            path = d / f"{name}.onnx"
            path.write_bytes(m.SerializeToString())
            r = run([str(path), "--input", str(d / "x.npy")])
            err = r.stderr.splitlines()
            count += 1
            if msg is None:  # any one error line, status 3
                ok = r.returncode == 3 and len(err) == 1 and err[0].startswith(f"tpu-sim: error: {path}: ")
                want = "one error line"
            else:
                want = f"tpu-sim: error: {path}: {msg}"
                ok = r.returncode == 3 and err == [want]
            if not ok:
                failures.append(f"{name}: exit {r.returncode}, stderr {r.stderr!r}; wanted exit 3 and {want!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{count} QDQ cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
