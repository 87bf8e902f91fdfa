#!/usr/bin/python3
"""`tpu-sim net MODEL.onnx` on a model exported by PyTorch at test time
(make_models.py), checked against independent references:

- bit for bit against tools/int8_reference.py (NumPy) run on the quantized
  model tpu-sim saves (--save-model): tpu-sim's float output must equal the
  reference's int8/int32 output dequantized here and put in NCHW order;
- tpu-sim's float pass (--float-out) against PyTorch's float output;
- the quantized output against PyTorch's within the tolerance of
  docs/onnx.md (digits: accuracy within one point of PyTorch's).

  check_onnx_model.py BIN_DIR SRC_DIR MODEL BATCH [tpu-sim options...]

Run with /usr/bin/python3 (Debian's python3-torch, python3-torchvision,
python3-numpy, python3-sklearn).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# (max |tpu-sim - PyTorch| / max |PyTorch|, minimum correlation), measured and
# documented in docs/onnx.md with some room.
TOLERANCE = {"resnet18": (0.10, 0.995), "mobilenet_v2": (0.40, 0.95), "digits": (0.05, 0.999),
             "group_net": (0.10, 0.99), "concat_net": (0.10, 0.99), "shuffle_net": (0.10, 0.99), "vec_net": (0.10, 0.99), "squeezenet1_1": (0.10, 0.999),
             "conv1d_net": (0.10, 0.99), "unet": (0.10, 0.99),
             # not in CTest (measured by hand, see docs/onnx.md): the families of issue 28
             "googlenet": (1, 0.95), "densenet121": (1, 0.95), "regnet_y_400mf": (1, 0.95),
             "resnext50_32x4d": (1, 0.95), "mnasnet0_5": (1, 0.95), "inception_v3": (1, 0.95),
             "shufflenet_v2_x0_5": (1, 0.95), "regnet_x_400mf": (1, 0.95),
             # the vector unit's layers (mul, affine: SE gates, hard-swish, SiLU), at 64 x 64
             "mobilenet_v3_small": (1, 0.90), "efficientnet_b0": (1, 0.90)}


# The input size of torchvision models tested smaller than 224 x 224 (CTest stays fast).
SIZE = {"squeezenet1_1": 66, "googlenet": 64, "densenet121": 64, "regnet_y_400mf": 64, "resnext50_32x4d": 64,
        "mnasnet0_5": 64, "inception_v3": 96, "shufflenet_v2_x0_5": 64, "regnet_x_400mf": 64,
        "mobilenet_v3_small": 64, "efficientnet_b0": 64}


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n")
        raise SystemExit(f"FAIL: {cmd[0]} {cmd[1]} exited {r.returncode}")
    return r


def refused(cmd, want, failures):
    """`cmd` must exit 3 with one error line holding `want`."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 3 or len(lines) != 1 or want not in lines[0]:
        failures.append(f"expected status 3 and one line with {want!r}, got {r.returncode}: {r.stderr.strip()[:300]}")
    else:
        print("refused as expected:", lines[0])


def compare_outputs(t, ref, torch_y, failures):
    """tpu-sim net's output t/y.npy against the int8 reference's codes `ref`,
    dequantized with the saved model's (t/q/model.json) output quantization:
    bit for bit; the float pass t/f.npy and y against PyTorch's float output
    torch_y. Returns (the saved model, y, the float pass's and y's largest
    error as shares of max|torch_y|, y's correlation with torch_y)."""
    saved = json.loads((t / "q/model.json").read_text())
    scale, zero = output_quant(saved)
    want = (np.float64(scale) * (ref.astype(np.float64) - zero)).astype(np.float32)
    if want.ndim == 4:  # (B, 1, L, D): the model's (B, L, D)
        want = want[:, 0]
    y, f = np.load(t / "y.npy"), np.load(t / "f.npy")
    if y.shape != torch_y.shape or not np.array_equal(y, want):
        failures.append(f"tpu-sim's output {y.shape} differs from the NumPy int8 reference's {want.shape}")
    peak = float(np.max(np.abs(torch_y)))
    float_err = float(np.max(np.abs(f - torch_y))) / peak
    corr = float(np.corrcoef(y.ravel(), torch_y.ravel())[0, 1])
    quant_err = float(np.max(np.abs(y - torch_y))) / peak
    return saved, y, float_err, corr, quant_err


def check_rows_and_detailed(report, saved, base, t, cycles, y, detailed, failures):
    """The --report CSV `report` has a row for every layer of the saved model; with `detailed`, the
    same command `base` on the detailed path (TPU_DETAIL) gives `cycles` and the output `y`."""
    missing = [layer["name"] for layer in saved["layers"] if layer["name"] not in report]
    if missing:
        failures.append(f"the report has no rows for layers {missing[:5]}")
    if detailed:
        env = dict(os.environ, TPU_DETAIL="detailed")
        run(base + ["--out", str(t / "yd.npy"), "--stats", str(t / "sd.json")], env=env)
        dcycles = json.loads((t / "sd.json").read_text())["total"]["cycles"]
        print(f"detailed path: {dcycles} cycles")
        if dcycles != cycles or not np.array_equal(np.load(t / "yd.npy"), y):
            failures.append(f"the detailed path gives {dcycles} cycles (fast {cycles}) or another output")


def output_quant(model):
    """(scale, zero point) of the network's output, walking model.json's layers."""
    quant = {"input": (model["input"]["scale"], model["input"]["zero_point"])}
    last = "input"
    for layer in model["layers"]:
        src = quant[layer.get("inputs", [last])[0]]
        t = layer["type"]
        if t in ("dense", "conv2d"):
            if layer.get("output") == "int32":
                q = (src[0] * layer["weight_scale"], 0)
            elif layer.get("activation") in ("sigmoid", "tanh"):
                q = (1.0 / 127.0, 0)
            else:
                q = (layer["output"]["scale"], layer["output"]["zero_point"])
        elif t in ("mul", "affine") and layer.get("activation") in ("sigmoid", "tanh"):
            q = (1.0 / 127.0, 0)
        elif t in ("avgpool2d", "global_avgpool2d", "add", "concat", "mul", "affine", "softmax", "layernorm",
                   "gelu") and "output" in layer:
            q = (layer["output"]["scale"], layer["output"]["zero_point"])
        else:
            q = src
        last = layer["name"]
        quant[last] = q
    return quant[last]


def nhwc(x):
    """The NumPy reference's input layout: NHWC; a 1-D model's (B, C, L) as (B, 1, L, C)."""
    return np.ascontiguousarray(x.transpose(0, 2, 1)[:, None] if x.ndim == 3 else x.transpose(0, 2, 3, 1))


def dequantized_reference(ref, model, input_ndim):
    """The NumPy reference's int8/int32 output `ref` (NHWC) dequantized with the saved model's output
    quantization and put in the ONNX model's layout (NCHW; a 1-D model's (B, C, L)): what tpu-sim's
    float --out must equal bit for bit."""
    scale, zero = output_quant(model)
    want = (np.float64(scale) * (ref.astype(np.float64) - zero)).astype(np.float32)
    if want.ndim == 4:
        want = want.transpose(0, 3, 1, 2)
        if input_ndim == 3:  # a 1-D model's map: (B, 1, L, C) -> (B, C, L)
            want = want[:, :, 0, :]
    return want


def main():
    bin_dir, src_dir, name, batch = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    extra = sys.argv[5:]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t0 = time.time()
        size = [] if name in ("digits", "resnet18", "mobilenet_v2", "group_net", "concat_net", "shuffle_net", "vec_net",
                              "conv1d_net", "unet") else [str(SIZE[name])]
        subprocess.run([sys.executable, str(src_dir / "tests/onnx/make_models.py"), name, str(d), batch, *size],
                       check=True)
        t1 = time.time()
        onnx_file = d / ("digits.onnx" if name == "digits" else f"{name}.onnx")
        cmd = [str(bin_dir / "tpu-sim"), "net", str(onnx_file), "--calibrate", str(d / "calib.npy"),
               "--input", str(d / "x.npy"), "--out", str(d / "y.npy"), "--float-out", str(d / "f.npy"),
               "--save-model", str(d / "q"), "--report", str(d / "r.csv"), *extra]
        run = subprocess.run(cmd, capture_output=True, text=True)
        t2 = time.time()
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr, sep="\n")
            print(f"FAIL: tpu-sim exited {run.returncode}")
            return 1
        x = np.load(d / "x.npy")
        np.save(d / "x_nhwc.npy", nhwc(x))
        subprocess.run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(d / "q/model.json"),
                        "--input", str(d / "x_nhwc.npy"), "--out", str(d / "ref.npy")], check=True)
        t3 = time.time()
        if name in ("conv1d_net", "unet"):
            # The saved model file runs too (its upsample layers and a 1-D model's [1, L, C] input), bit for bit.
            subprocess.run([str(bin_dir / "tpu-sim"), "net", str(d / "q/model.json"), "--input", str(d / "x_nhwc.npy"),
                            "--out", str(d / "yq.npy"), *extra], check=True, capture_output=True)
            if not np.array_equal(np.load(d / "yq.npy"), np.load(d / "ref.npy")):
                failures.append("tpu-sim net q/model.json differs from int8_reference.py")
        model = json.loads((d / "q/model.json").read_text())
        want = dequantized_reference(np.load(d / "ref.npy"), model, x.ndim)
        y, f, torch_y = np.load(d / "y.npy"), np.load(d / "f.npy"), np.load(d / "torch.npy")
        if y.dtype != np.float32 or y.shape != torch_y.shape:
            failures.append(f"output is {y.dtype} {y.shape}, PyTorch's {torch_y.shape}")
        elif not np.array_equal(y, want):
            failures.append(f"{int(np.sum(y != want))} of {y.size} outputs differ from the NumPy int8 reference")
        peak = float(np.max(np.abs(torch_y)))
        float_err = float(np.max(np.abs(f - torch_y))) / peak
        quant_err = float(np.max(np.abs(y - torch_y))) / peak
        corr = float(np.corrcoef(y.ravel(), torch_y.ravel())[0, 1])
        print(f"{name}: batch {len(x)}: bit for bit against int8_reference.py: {not failures}; "
              f"float pass vs PyTorch: max error {float_err:.2e} of max|y| = {peak:.4g}; "
              f"int8 vs PyTorch: max error {quant_err:.4f} of max|y|, correlation {corr:.6f}; "
              f"argmax agree {int(np.sum(y.argmax(1) == torch_y.argmax(1)))}/{len(y)}")
        print(f"times: export {t1 - t0:.1f} s, tpu-sim {t2 - t1:.1f} s, NumPy reference {t3 - t2:.1f} s")
        if float_err > 1e-4:
            failures.append(f"tpu-sim's float pass differs from PyTorch by {float_err:.2e} of max|y|")
        tol, min_corr = TOLERANCE[name]
        if quant_err > tol or corr < min_corr:
            failures.append(f"int8 output off PyTorch's by {quant_err:.4f} of max|y| (tolerance {tol}), "
                            f"correlation {corr:.6f} (at least {min_corr})")
        if name == "digits":
            labels = np.load(d / "labels.npy")
            acc = float(np.mean(y.argmax(1) == labels))
            torch_acc = float((d / "torch_accuracy.txt").read_text())
            print(f"digits accuracy: tpu-sim {acc:.4f}, PyTorch float {torch_acc:.4f}")
            if abs(acc - torch_acc) > 0.01:
                failures.append(f"accuracy {acc:.4f} is more than one point from PyTorch's {torch_acc:.4f}")
        report = (d / "r.csv").read_text()
        missing = [layer["name"] for layer in model["layers"] if layer["name"] not in report]
        if missing:
            failures.append(f"the report has no rows for layers {missing}")
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
