#!/usr/bin/python3
"""Measures what per-tensor weight scales (tpu-sim's: one SETQ per layer) cost
against per-channel ones, on models exported by make_models.py: every Conv
and Gemm weight of the ONNX file is replaced by its fake-quantized value
(symmetric int8, per tensor or per output channel), and tpu-sim's float pass
(--float-out) runs the result, so only the weight rounding differs.

  per_channel_effect.py BIN_DIR MODEL_DIR ONNX_FILE [tpu-sim options...]

Prints the output error against the float model (max |dy| / max |y|, and the
argmax agreement, or the accuracy when MODEL_DIR has labels.npy). Not a test:
the numbers are in docs/onnx.md.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def fake_quant(w, per_channel):
    axes = tuple(range(1, w.ndim))
    m = np.max(np.abs(w), axis=axes, keepdims=True) if per_channel else np.max(np.abs(w))
    s = np.where(m > 0, m / 127.0, 1.0)
    return (np.clip(np.round(w / s), -127, 127) * s).astype(np.float32)


def main():
    bin_dir, d, onnx_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    model = onnx.load(str(onnx_file))
    weights = {n.input[1] for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul")}
    labels = np.load(d / "labels.npy") if (d / "labels.npy").exists() else None
    outs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("float", "per_tensor", "per_channel"):
            m = onnx.load(str(onnx_file))
            for t in m.graph.initializer:
                if mode != "float" and t.name in weights:
                    t.CopyFrom(numpy_helper.from_array(fake_quant(numpy_helper.to_array(t), mode == "per_channel"),
                                                       t.name))
            path = Path(tmp) / f"{mode}.onnx"
            onnx.save(m, str(path))
            subprocess.run([str(bin_dir / "tpu-sim"), "net", str(path), "--calibrate", str(d / "calib.npy"),
                            "--input", str(d / "x.npy"), "--float-out", str(Path(tmp) / f"{mode}.npy"), *sys.argv[4:]],
                           check=True, capture_output=True)
            outs[mode] = np.load(Path(tmp) / f"{mode}.npy")
    ref = outs["float"]
    for mode in ("per_tensor", "per_channel"):
        y = outs[mode]
        err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
        line = f"{onnx_file.name}: weights {mode}: max error {err:.4f} of max|y|"
        if labels is not None:
            line += f", accuracy {np.mean(y.argmax(1) == labels):.4f} (float {np.mean(ref.argmax(1) == labels):.4f})"
        else:
            line += f", argmax agrees {int(np.sum(y.argmax(1) == ref.argmax(1)))}/{len(y)}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
