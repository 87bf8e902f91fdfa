#!/usr/bin/python3
"""A float ONNX model that does not fit the configuration is refused before
its calibration pass, with one line naming the --config field and the
smallest value that makes it fit (docs/onnx.md, "Calibration"):

- a dense model whose weights need more tiles than weight_tiles allows on
  small4: the line names weight_tiles; the value is at least the closed form
  sum ceil(K/4) * ceil(Nout/4) of its layers (the tiles of its weights alone);
- a conv model whose maps need more unified buffer rows than ub_rows, or
  more accumulator rows than acc_rows;
- in both, the refusal comes before the calibration set is read (a missing
  --calibrate file is not reported), the named value runs (exit 0, --check
  against the int8 reference) and one less is refused again.

  check_fit.py BIN_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-numpy).
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.RandomState(0)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def save(path, nodes, inits, in_shape, out_shape):
    g = helper.make_graph(nodes, "fit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def dense_model(path):
    """x (1, 64) -> Gemm 64x48 -> Relu -> Gemm 48x10; weight tiles of N = 4: 16*12 + 12*3 = 228."""
    save(path, [helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1", transB=1),
                helper.make_node("Relu", ["h"], ["r"], name="relu"),
                helper.make_node("Gemm", ["r", "w2"], ["y"], name="fc2", transB=1)],
         [const("w1", rng.randn(48, 64)), const("w2", rng.randn(10, 48))], (1, 64), (1, 10))
    return 16 * 12 + 12 * 3


def conv_model(path):
    """x (1, 4, 16, 16) -> Conv 3x3 pad 1 (8 channels) -> Relu -> Conv 3x3 pad 1 (4 channels)."""
    save(path, [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["r"], name="relu"),
                helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])],
         [const("w1", rng.randn(8, 4, 3, 3)), const("w2", rng.randn(4, 8, 3, 3))], (1, 4, 16, 16), (1, 4, 16, 16))


def run(bin_dir, d, model, field, value, calib, check=False):
    cfg = d / f"{field}-{value}.json"
    cfg.write_text(json.dumps({"preset": "small4", field: value}))
    cmd = [str(bin_dir / "tpu-sim"), "net", str(model), "--calibrate", str(calib), "--input", str(d / "x.npy"),
           "--config", str(cfg)] + (["--check"] if check else [])
    return subprocess.run(cmd, capture_output=True, text=True)


def check_case(bin_dir, d, name, model, in_shape, field, small, at_least, failures):
    # Inputs in [0, 1) and no biases: every zero point is -128 after
    # calibration as before it, so the advice is exact (docs/onnx.md).
    np.save(d / "x.npy", rng.rand(*in_shape).astype(np.float32))
    np.save(d / "calib.npy", rng.rand(*in_shape).astype(np.float32))
    r = run(bin_dir, d, model, field, small, d / "no-such-calib.npy")
    lines = r.stderr.strip().splitlines()
    m = re.search(rf"{field} = {small} \([^)]*\) is too small: the network needs {field} >= (\d+) \([^)]*\): "
                  rf'--config FILE with {{"{field}": (\d+)}}$', r.stderr.strip())
    if r.returncode != 3 or len(lines) != 1 or not lines[0].startswith(f"tpu-sim: error: {model}: ") or not m:
        failures.append(f"{name}: expected one refusal line naming {field}, got status {r.returncode}: {r.stderr!r}")
        return
    need = int(m.group(1))
    print(f"{name}: refused with {field} = {small}: needs {field} >= {need}")
    if need != int(m.group(2)) or need < at_least:
        failures.append(f"{name}: {field} >= {need} is below the closed-form lower bound {at_least}")
    ok = run(bin_dir, d, model, field, need, d / "calib.npy", check=True)
    if ok.returncode != 0 or "check: all" not in ok.stdout:
        failures.append(f"{name}: {field} = {need} does not run: status {ok.returncode}: {ok.stderr!r}")
    less = run(bin_dir, d, model, field, need - 1, d / "calib.npy")
    if less.returncode != 3 or f"needs {field} >= {need}" not in less.stderr:
        failures.append(f"{name}: {field} = {need - 1} is not refused the same way: {less.stderr!r}")


def main():
    bin_dir = Path(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        tiles = dense_model(d / "dense.onnx")
        check_case(bin_dir, d, "dense", d / "dense.onnx", (2, 64), "weight_tiles", 100, tiles, failures)
        conv_model(d / "conv.onnx")
        # The unified buffer and accumulators needed depend on the mapping the
        # compiler chooses (here host steps): no closed form, the runs decide.
        check_case(bin_dir, d, "conv", d / "conv.onnx", (1, 4, 16, 16), "ub_rows", 16, 17, failures)
        check_case(bin_dir, d, "conv", d / "conv.onnx", (1, 4, 16, 16), "acc_rows", 1, 2, failures)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
