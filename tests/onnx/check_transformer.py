#!/usr/bin/python3
"""Transformer layers (docs/onnx.md, "Transformer layers"): PyTorch models
exported to ONNX (opset 13) here, run by `tpu-sim net` and checked against
independent references:

- bit for bit against the C++ int8 reference (--check) and against
  tools/int8_reference.py (NumPy) on the model tpu-sim saves; the saved
  model run by `tpu-sim net` gives the same integers;
- tpu-sim's float pass (--float-out) against PyTorch's float output;
- the int8 output's correlation with PyTorch's float output (at least 0.95);
- the per-layer report names the layers after the ONNX nodes
  (/norm/LayerNorm, /Gelu, /l1/MatMul);
- with --detailed: the detailed path's cycles and output equal the fast path's.

  check_transformer.py BIN_DIR SRC_DIR MODEL [--detailed] [--preset P] [--array N]
  check_transformer.py BIN_DIR SRC_DIR errors

MODEL: ffn (a transformer encoder's feed-forward block x + Linear(GELU(
Linear(LayerNorm(x)))), d_model 128, ff 512, L 32, batch 2), cls (that
block at d_model 64, ff 128, L 16, scaled per feature, a final LayerNorm and
a Linear head on the first token x[:, 0], batch 3), patch (ViT's patch
embedding, a Conv2d 3 -> 64 of 4 x 4 patches of 32 x 32 images, flatten(2)
.transpose(1, 2), that block, a final LayerNorm, the mean over the 64 tokens,
a Linear head; batch 2), kws (a Conv1d
keyword-spotting-like net: (N, 40, 98) MFCC-like input, three Conv1d + ReLU,
a max pool over time, a global average over time, a Linear to 12 classes).
`errors`: what tpu-sim refuses is one error line naming the node and exit
status 3; and an ONNX LayerNormalization (opset 17, built with onnx.helper)
against NumPy and the C++ reference. Run with /usr/bin/python3.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_onnx_model import check_rows_and_detailed, compare_outputs, refused, run  # noqa: E402


class FeedForward(nn.Module):
    """The feed-forward half of a pre-norm transformer encoder layer."""

    def __init__(self, d=128, ff=512):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.l1 = nn.Linear(d, ff)
        self.l2 = nn.Linear(ff, d)

    def forward(self, x):
        return x + self.l2(nn.functional.gelu(self.l1(self.norm(x))))


class TokenClassifier(nn.Module):
    """A pre-norm feed-forward block on a token sequence (N, L, D) with a per-feature scale
    (LayerScale), then the first token x[:, 0] through a final LayerNorm and a Linear head, as
    ViT's classifier reads its class token (without attention)."""

    def __init__(self, d=64, ff=128, classes=10):
        super().__init__()
        self.ffn = FeedForward(d, ff)
        self.scale = nn.Parameter(0.5 + torch.rand(d))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        y = self.norm(self.ffn(x) * self.scale)
        return self.head(y[:, 0])


class PatchEncoder(nn.Module):
    """ViT's plumbing without attention and without the class token and positional embedding:
    a patch embedding (Conv2d 3 -> 64, 4 x 4 patches of a 32 x 32 image), flatten(2).transpose(1, 2)
    to 64 tokens, the feed-forward block, a final LayerNorm, the mean over the tokens and a
    Linear head."""

    def __init__(self, d=64, ff=128, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, stride=4)
        self.ffn = FeedForward(d, ff)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.ffn(t)).mean(dim=1))


def keyword_net():
    return nn.Sequential(
        nn.Conv1d(40, 64, 3, padding=1), nn.ReLU(),
        nn.Conv1d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(64, 96, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(96, 12))


def randomize_norm(model, gen):
    """LayerNorm's affine away from the identity, so that the test exercises it."""
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(1.0 + 0.3 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))


# name: (module, one sample's shape, batch, a layer name the report must hold)
MODELS = {
    "ffn": (FeedForward, (32, 128), 2, "/norm/LayerNorm"),
    "kws": (keyword_net, (40, 98), 2, "/0/Conv"),
    "cls": (TokenClassifier, (16, 64), 3, "/ffn/norm/LayerNorm"),
    "patch": (PatchEncoder, (3, 32, 32), 2, "/ffn/Gelu"),
}


class TanhGelu(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x, approximate="tanh")


class Softmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(16, 16)

    def forward(self, x):
        return torch.softmax(self.l1(x), dim=-1)


class Transposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(x).transpose(1, 2)


def layer_normalization(t, tpu_sim, x, failures):
    """ONNX LayerNormalization (opset 17, which torch 1.13 does not export): built here, its float
    pass against NumPy's LayerNorm and its int8 output against the C++ reference (--check)."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    gamma, beta = (1 + 0.3 * rng.standard_normal(16)).astype(np.float32), (0.2 * rng.standard_normal(16)).astype(
        np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], name="/norm/LayerNormalization",
                          epsilon=1e-3),
         helper.make_node("MatMul", ["n", "w"], ["y"], name="/fc/MatMul")],
        "ln", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 8, 8])],
        [numpy_helper.from_array(gamma, "g"), numpy_helper.from_array(beta, "b"), numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(t / "ln.onnx"))
    r = subprocess.run([tpu_sim, "net", str(t / "ln.onnx"), "--calibrate", str(t / "x.npy"), "--input",
                        str(t / "x.npy"), "--preset", "small8", "--check", "--float-out", str(t / "lnf.npy"),
                        "--out", str(t / "lny.npy")], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"LayerNormalization: tpu-sim net exited {r.returncode}: {r.stderr.strip()[:300]}")
        return
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = ((x - mean) / np.sqrt(var + 1e-3) * gamma + beta) @ w
    err = float(np.max(np.abs(np.load(t / "lnf.npy") - want)) / np.max(np.abs(want)))
    corr = float(np.corrcoef(np.load(t / "lny.npy").ravel(), want.ravel())[0, 1])
    print(f"LayerNormalization: float pass {err:.2e} of max|y| from NumPy, int8 correlation {corr:.5f}, "
          "bit for bit against the C++ reference (--check)")
    if err > 1e-4 or corr < 0.95:
        failures.append(f"LayerNormalization: float pass {err:.2e} of max|y|, correlation {corr:.5f}")


def errors(bin_dir):
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
        np.save(t / "x.npy", x)
        common = ["--calibrate", str(t / "x.npy"), "--input", str(t / "x.npy")]
        cases = [
            (nn.Sequential(nn.Linear(16, 16), TanhGelu()), "node '/1/Tanh'"),
            (Softmax(), "node '/Softmax' (Softmax)"),
            (Transposed(), "node '/Transpose' (Transpose): reads a token sequence"),
        ]
        for k, (model, want) in enumerate(cases):
            path = t / f"e{k}.onnx"
            torch.onnx.export(model.eval(), torch.from_numpy(x), str(path), opset_version=13)
            refused([tpu_sim, "net", str(path), *common], want, failures)
        layer_normalization(t, tpu_sim, x, failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


def main():
    bin_dir, src_dir, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if name == "errors":
        return errors(bin_dir)
    detailed = "--detailed" in sys.argv[4:]
    preset = sys.argv[sys.argv.index("--preset") + 1] if "--preset" in sys.argv else "tpuv1"
    arch = ["--preset", preset] + (["--array", sys.argv[sys.argv.index("--array") + 1]] if "--array" in sys.argv else [])
    make, shape, batch, must_name = MODELS[name]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(0)
    model = make().eval()
    randomize_norm(model, gen)
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = rng.standard_normal((batch, *shape)).astype(np.float32)
        calib = rng.standard_normal((32, *shape)).astype(np.float32)
        torch.onnx.export(model, torch.from_numpy(x), str(t / "m.onnx"), opset_version=13)
        np.save(t / "x.npy", x)
        np.save(t / "calib.npy", calib)
        with torch.no_grad():
            torch_y = model(torch.from_numpy(x)).numpy()
        base = [tpu_sim, "net", str(t / "m.onnx"), "--calibrate", str(t / "calib.npy"), "--input", str(t / "x.npy"),
                *arch]
        run(base + ["--out", str(t / "y.npy"), "--float-out", str(t / "f.npy"), "--save-model", str(t / "q"),
                    "--report", str(t / "r.csv"), "--stats", str(t / "s.json"), "--check"])
        cycles = json.loads((t / "s.json").read_text())["total"]["cycles"]
        # The NumPy reference reads the saved model's input layout: (B, 1, L, D) for a token
        # sequence (the model's (B, L, D)), (B, 1, L, C) for a Conv1d net's (B, C, L).
        x_nhwc = np.ascontiguousarray(x[:, None] if name in ("ffn", "cls")
                                      else x.transpose(0, 2, 1)[:, None] if name == "kws" else x.transpose(0, 2, 3, 1))
        np.save(t / "x_nhwc.npy", x_nhwc)
        run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(t / "q/model.json"), "--input",
             str(t / "x_nhwc.npy"), "--out", str(t / "ref.npy")])
        run([tpu_sim, "net", str(t / "q/model.json"), "--input", str(t / "x_nhwc.npy"), "--out", str(t / "yq.npy"),
             *arch])
        ref, yq = np.load(t / "ref.npy"), np.load(t / "yq.npy")
        if not np.array_equal(ref, yq):
            failures.append("tpu-sim net q/model.json differs from int8_reference.py")
        saved, y, float_err, corr, quant_err = compare_outputs(t, ref, torch_y, failures)
        layers = len(saved["layers"])
        kinds = sorted({layer["type"] for layer in saved["layers"]})
        print(f"{name}: batch {batch}, {layers} layers ({', '.join(kinds)}), {cycles} cycles on {' '.join(arch[1:])}; bit for "
              f"bit against both int8 references: {not failures}; float pass vs PyTorch {float_err:.2e} of max|y|; "
              f"int8 vs PyTorch: correlation {corr:.5f}, max error {quant_err:.4f} of max|y|")
        if float_err > 1e-4:
            failures.append(f"the float pass differs from PyTorch by {float_err:.2e} of max|y|")
        if corr < 0.95:
            failures.append(f"correlation {corr:.5f} with PyTorch is below 0.95")
        report = (t / "r.csv").read_text()
        if must_name not in report:
            failures.append(f"the report does not name {must_name}")
        check_rows_and_detailed(report, saved, base, t, cycles, y, detailed, failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
