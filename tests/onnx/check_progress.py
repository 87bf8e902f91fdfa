#!/usr/bin/python3
"""`tpu-sim net MODEL.onnx --progress` shows its steps on stderr even when
stderr is not a terminal (docs/onnx.md, "Calibration"): the import, the fit
check, the calibration pass sample by sample and layer by layer, the compile
and the simulation, each line rewritten in place (\\r, erase to the end of
the line) and erased at the end; without --progress (stderr a pipe here)
nothing is shown. The model: x (1, 64) -> Gemm -> Relu -> Gemm (2 layers,
the Relu fused), calibrated on 3 samples in one chunk.

  check_progress.py BIN_DIR

Run with /usr/bin/python3 (Debian's python3-onnx, python3-numpy).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    bin_dir = Path(sys.argv[1])
    rng = np.random.RandomState(0)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        g = helper.make_graph(
            [helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2"], ["y"], name="fc2", transB=1)],
            "progress", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
            [numpy_helper.from_array(rng.randn(48, 64).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.randn(10, 48).astype(np.float32), "w2")])
        model = d / "m.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(model))
        np.save(d / "calib.npy", rng.randn(3, 64).astype(np.float32))
        np.save(d / "x.npy", rng.randn(2, 64).astype(np.float32))
        cmd = [str(bin_dir / "tpu-sim"), "net", str(model), "--calibrate", str(d / "calib.npy"),
               "--input", str(d / "x.npy"), "--preset", "small4"]
        # Bytes: text mode would turn the \r into newlines.
        quiet = subprocess.run(cmd, capture_output=True)
        shown = subprocess.run(cmd + ["--progress"], capture_output=True)
        quiet.stderr, shown.stderr = quiet.stderr.decode(), shown.stderr.decode()
        if quiet.returncode != 0 or shown.returncode != 0:
            failures.append(f"status {quiet.returncode} / {shown.returncode}: {shown.stderr!r}")
        if quiet.stderr:
            failures.append(f"without --progress stderr is not empty: {quiet.stderr!r}")
        if quiet.stdout != shown.stdout:
            failures.append("--progress changed the output on stdout")
        lines = [s.replace("\x1b[K", "") for s in shown.stderr.split("\r")]
        want = [f"tpu-sim net: importing {model}", f"tpu-sim net: checking that {model} fits"] + \
               [f"tpu-sim net: calibrating: samples 1-3 of 3, layer {i}/2" for i in (1, 2)] + \
               ["tpu-sim net: compiling 2 layers for 2 samples",
                "tpu-sim net: program 1/1: simulating 2 samples (2 layers)"]
        # A step that lasts a second or more is redrawn with its seconds.
        steps = []
        for s in lines:
            s = re.sub(r" \(\d+ s\)$", "", s)
            if s and (not steps or steps[-1] != s):
                steps.append(s)
        if steps != want:
            failures.append(f"progress lines {steps}, expected {want}")
        if not shown.stderr.endswith("\r\x1b[K"):
            failures.append(f"the progress line is not erased at the end: {shown.stderr[-40:]!r}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("progress: the 6 steps shown with --progress, nothing without")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
