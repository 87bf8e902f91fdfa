#!/usr/bin/python3
"""Attention's layers (docs/quantization.md, "Softmax and attention"): a
PyTorch Softmax after a Linear, exported to ONNX (opset 13) here, run by
`tpu-sim net` and checked against independent references:

- bit for bit against the C++ int8 reference (--check) and against
  tools/int8_reference.py (NumPy) on the model tpu-sim saves; the saved
  model run by `tpu-sim net` gives the same integers;
- tpu-sim's float pass (--float-out) against PyTorch's float output;
- the int8 output's correlation with PyTorch's float output (at least 0.95)
  and its largest error (within 2/256: the output step and the polynomial);
- the per-layer report has the softmax's row;
- the detailed path's cycles and output equal the fast path's.

  check_attention.py BIN_DIR SRC_DIR MODEL [--preset P]
  check_attention.py BIN_DIR SRC_DIR errors
  check_attention.py BIN_DIR SRC_DIR matmul_numpy

MODEL: softmax256 (Linear(32, 256), Softmax over the 256 features, batch 6:
one token of one plane at N = 256), softmax_small8 (Linear(16, 32), Softmax,
on small8: tokens of 4 planes), softmax32 (Linear(16, 32), Softmax on tpuv1:
a token of 32 of the 256 lanes, NGEO's width), softmax300 (Linear(16, 300):
a token of 2 planes, 300 of 512 lanes). `errors`: a Softmax over a map's
channels with more than one pixel is one error line, status 3. `matmul_numpy`: the NumPy
reference's matmul layer (tools/int8_reference.py) against a plain-integer
loop over the formula of docs/quantization.md, with B transposed and not; a
B whose zero point is not 0 is refused. The MultiheadAttention pattern (whose
matmuls run on chip) is check_mha.py's.
Run with /usr/bin/python3.
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_onnx_model import check_rows_and_detailed, output_quant, refused, run  # noqa: E402


class LinearSoftmax(nn.Module):
    """A Linear whose weights are scaled by `scale` (logits spread over a few units), then a Softmax."""

    def __init__(self, d, c, scale=1.0):
        super().__init__()
        self.fc = nn.Linear(d, c)
        with torch.no_grad():
            self.fc.weight.mul_(scale)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


# name: (module, input features, batch, preset)
MODELS = {
    "softmax256": (lambda: LinearSoftmax(32, 256, 3.0), 32, 6, "tpuv1"),
    "softmax_small8": (lambda: LinearSoftmax(16, 32, 3.0), 16, 5, "small8"),
    "softmax32": (lambda: LinearSoftmax(16, 32, 3.0), 16, 5, "tpuv1"),
    "softmax300": (lambda: LinearSoftmax(16, 300, 3.0), 16, 3, "tpuv1"),
}


def errors(bin_dir):
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)

        class MapSoftmax(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)

            def forward(self, v):
                return torch.softmax(self.conv(v), 1)

        xm = np.zeros((2, 3, 4, 4), np.float32)
        np.save(t / "xm.npy", xm)
        torch.onnx.export(MapSoftmax().eval(), torch.from_numpy(xm), str(t / "map.onnx"), opset_version=13)
        refused([tpu_sim, "net", str(t / "map.onnx"), "--calibrate", str(t / "xm.npy"), "--input", str(t / "xm.npy")],
                "(Softmax): softmax over axis 1 of a rank-4 tensor", failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


def matmul_numpy(src_dir):
    """int8_reference.py's matmul against Python ints: acc = sum_f (a - z_a) B[f][j], the int32 wrap,
    then sat8(((acc * M + 2^(S-1)) >> S) + z_o) with (M, S) from alpha s_a s_b / s_o."""
    sys.path.insert(0, str(src_dir / "tools"))
    import int8_reference as ref

    failures = []
    rng = np.random.default_rng(3)
    for transpose in (True, False):
        k, cb = (6, 6) if transpose else (5, 7)
        a = ref.Tensor(rng.integers(-128, 128, (3, 1, 5, k)).astype(np.int8), 0.03, -9)
        b_tokens = 4 if transpose else k
        b = ref.Tensor(rng.integers(-127, 128, (3, 1, b_tokens, cb)).astype(np.int8), 0.05, 0)
        layer = {"type": "matmul", "transpose_b": transpose, "alpha": 0.25, "output": {"scale": 0.1,
                                                                                       "zero_point": 4}}
        y = ref.matmul(a, b, layer)
        m, s = ref.requant_params(0.25 * 0.03 * 0.05 / 0.1)
        cols = b_tokens if transpose else cb
        want = np.zeros((3, 1, 5, cols), np.int64)
        for n in range(3):
            for i in range(5):
                for j in range(cols):
                    acc = sum((int(a.values[n, 0, i, f]) + 9) *
                              int(b.values[n, 0, j, f] if transpose else b.values[n, 0, f, j]) for f in range(k))
                    want[n, 0, i, j] = min(127, max(-128, ((acc * m + (1 << (s - 1))) >> s) + 4))
        if y.shape != want.shape or not np.array_equal(y, want):
            failures.append(f"transpose_b {transpose}: the NumPy matmul differs from the integer loop")
        else:
            print(f"matmul transpose_b {transpose}: {y.size} outputs equal the integer loop")
    try:
        ref.matmul(a, b._replace(zero_point=1), {"output": {"scale": 1.0, "zero_point": 0}})
        failures.append("a B of zero point 1 was not refused")
    except ValueError as e:
        print("refused as expected:", e)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


def main():
    bin_dir, src_dir, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if name == "errors":
        return errors(bin_dir)
    if name == "matmul_numpy":
        return matmul_numpy(src_dir)
    make, d, batch, preset = MODELS[name]
    if "--preset" in sys.argv:
        preset = sys.argv[sys.argv.index("--preset") + 1]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = make().eval()
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = rng.standard_normal((batch, d)).astype(np.float32)
        calib = rng.standard_normal((64, d)).astype(np.float32)
        torch.onnx.export(model, torch.from_numpy(x), str(t / "m.onnx"), opset_version=13)
        np.save(t / "x.npy", x)
        np.save(t / "calib.npy", calib)
        with torch.no_grad():
            torch_y = model(torch.from_numpy(x)).numpy()
        base = [tpu_sim, "net", str(t / "m.onnx"), "--calibrate", str(t / "calib.npy"), "--input", str(t / "x.npy"),
                "--preset", preset]
        run(base + ["--out", str(t / "y.npy"), "--float-out", str(t / "f.npy"), "--save-model", str(t / "q"),
                    "--report", str(t / "r.csv"), "--stats", str(t / "s.json"), "--check"])
        cycles = json.loads((t / "s.json").read_text())["total"]["cycles"]
        run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(t / "q/model.json"), "--input",
             str(t / "x.npy"), "--out", str(t / "ref.npy")])
        run([tpu_sim, "net", str(t / "q/model.json"), "--input", str(t / "x.npy"), "--out", str(t / "yq.npy"),
             "--preset", preset])
        ref, yq = np.load(t / "ref.npy"), np.load(t / "yq.npy")
        if not np.array_equal(ref, yq):
            failures.append("tpu-sim net q/model.json differs from int8_reference.py")
        saved = json.loads((t / "q/model.json").read_text())
        if saved["layers"][-1]["type"] != "softmax":
            failures.append(f"the last layer is {saved['layers'][-1]['type']}, not softmax")
        scale, zero = output_quant(saved)
        if (scale, zero) != (1.0 / 256, -128):
            failures.append(f"the softmax's output is ({scale}, {zero}), not (1/256, -128)")
        want = (np.float64(scale) * (ref.astype(np.float64) - zero)).astype(np.float32)
        y, f = np.load(t / "y.npy"), np.load(t / "f.npy")
        if y.shape != torch_y.shape or not np.array_equal(y, want):
            failures.append(f"tpu-sim's output {y.shape} differs from the NumPy int8 reference's {want.shape}")
        float_err = float(np.max(np.abs(f - torch_y)))
        corr = float(np.corrcoef(y.ravel(), torch_y.ravel())[0, 1])
        quant_err = float(np.max(np.abs(y - torch_y)))
        print(f"{name}: batch {batch}, {torch_y.shape[1]} classes: {cycles} cycles on {preset}; bit for bit against "
              f"both int8 references: {not failures}; float pass vs PyTorch {float_err:.2e}; int8 vs PyTorch: "
              f"correlation {corr:.5f}, max error {quant_err:.4f}")
        if float_err > 1e-5:
            failures.append(f"the float pass differs from PyTorch by {float_err:.2e}")
        if corr < 0.95:
            failures.append(f"correlation {corr:.5f} with PyTorch is below 0.95")
        # The probabilities' error: the logits' int8 rounding (scale s: up to s/2 in each logit moves a
        # probability p by at most about p * s), the polynomial and the output's step of 1/256.
        if quant_err > 0.05:
            failures.append(f"the int8 softmax is {quant_err:.4f} from PyTorch's")
        check_rows_and_detailed((t / "r.csv").read_text(), saved, base, t, cycles, y, True, failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
