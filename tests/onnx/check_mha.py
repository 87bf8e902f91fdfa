#!/usr/bin/python3
"""MultiheadAttention from ONNX (docs/onnx.md, "MultiheadAttention"):
PyTorch transformer encoders exported to ONNX (opset 13) here, imported by
`tpu-sim net` and checked against independent references:

- the C++ int8 reference's output (`--reference-only`) bit for bit against
  tools/int8_reference.py (NumPy) on the model tpu-sim saves: the saved model
  run by `tpu-sim net --reference-only` gives the NumPy reference's integers,
  and the ONNX run's float output is those integers dequantized;
- tpu-sim's float pass (--float-out) against PyTorch's float output;
- the int8 output's correlation with PyTorch's float output (at least 0.95);
- the saved model names the attention's layers (NODE.h0.q, .k, .v, .qk,
  .softmax, .pv, NODE.concat, NODE.out);
- on chip on tpuv1 (`--preset tpuv1 --check`): the simulated program's output
  bit for bit against the C++ int8 reference, the per-layer report naming the
  attention's parts (head 0's QK^T, softmax and PV cycles printed; mha also
  on the detailed path: the same cycles and output); and again
  with ub_weight_path (the K and V tiles by RWU instead of the host route's
  WHM, HWT, RW): the same output in fewer cycles.

  check_mha.py BIN_DIR SRC_DIR MODEL
  check_mha.py BIN_DIR SRC_DIR errors

MODEL: post_relu (nn.TransformerEncoderLayer d_model 128, nhead 4, ff 256,
ReLU, post-norm, batch_first, L 32, batch 2), pre_gelu (ff 512, GELU,
norm_first, batch 1), stack2 (nn.TransformerEncoder of 2 post-norm GELU layers
of ff 256, batch 2), encoder2 (nn.TransformerEncoder of 2 layers with
PyTorch's defaults: ff 2048, ReLU, post-norm; batch_first, batch 2), mha
(nn.MultiheadAttention called directly as torchvision's encoder block does,
need_weights=False, d 64, 4 heads, L 17, batch 2), vit_small (torchvision's
VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
hidden_dim=64, mlp_dim=128): its class token and positional embedding, batch
2), vit_b_16 (torchvision's vit_b_16(weights=None) at 224 x 224, batch 1: the
full tier). `errors`: a mask, batch_first=False, cross-attention, bias=False
and wrong head splits (keys unlike queries, a -1) are one error line each
naming the node, status 3; --reference-only with --check is a usage error.
Run with /usr/bin/python3.
"""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_onnx_model import check_rows_and_detailed, compare_outputs, refused, run  # noqa: E402


class SelfAttention(nn.Module):
    """torchvision's EncoderBlock's attention: nn.MultiheadAttention(x, x, x, need_weights=False), batch first,
    after a LayerNorm, with the residual."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        y = self.ln(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        return x + y


def encoder_layer(ff, act, norm_first, batch_first=True):
    return nn.TransformerEncoderLayer(128, 4, ff, dropout=0.0, activation=act, batch_first=batch_first,
                                      norm_first=norm_first)


def vit(**kw):
    """torchvision's VisionTransformer with random weights: its class token (zeros at init) and its head
    (zeros at init) drawn at random too, so that the test exercises them."""
    from torchvision.models.vision_transformer import VisionTransformer, vit_b_16
    model = vit_b_16(weights=None) if not kw else VisionTransformer(**kw)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        model.class_token.copy_(0.5 * torch.randn(model.class_token.shape, generator=gen))
        model.heads.head.weight.copy_(torch.randn(model.heads.head.weight.shape, generator=gen) /
                                      model.heads.head.weight.shape[1] ** 0.5)
        model.heads.head.bias.copy_(0.1 * torch.randn(model.heads.head.bias.shape, generator=gen))
    return model


SMALL_VIT = dict(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128)
VIT_ATTN = "/encoder/layers/encoder_layer_{}/self_attention"

# name: (module, one sample's shape, batch, the attention module's path in the ONNX graph, heads)
MODELS = {
    "post_relu": (lambda: encoder_layer(256, "relu", False), (32, 128), 2, "/self_attn", 4),
    "pre_gelu": (lambda: encoder_layer(512, "gelu", True), (32, 128), 1, "/self_attn", 4),
    "stack2": (lambda: nn.TransformerEncoder(encoder_layer(256, "gelu", False), 2, enable_nested_tensor=False),
               (32, 128), 2, "/layers.1/self_attn", 4),
    "encoder2": (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(128, 4, batch_first=True, dropout=0.0), 2,
                                               enable_nested_tensor=False), (32, 128), 2, "/layers.1/self_attn", 4),
    "mha": (SelfAttention, (17, 64), 2, "/attn", 4),
    "vit_small": (lambda: vit(**SMALL_VIT), (3, 32, 32), 2, VIT_ATTN.format(1), 4),
    "vit_b_16": (vit, (3, 224, 224), 1, VIT_ATTN.format(11), 12),
}


def randomize_norm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(1.0 + 0.3 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))


def attention_names(base, heads):
    names = [f"{base}.h{h}.{part}" for h in range(heads) for part in ("q", "k", "v", "qk", "softmax", "pv")]
    return names + [f"{base}.concat", f"{base}.out"]


def check_model(bin_dir, src_dir, name):
    make, shape, batch, base, heads = MODELS[name]
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
        # ViT-B/16's float pass takes seconds a sample: 4 calibration samples (32 for the others).
        calib = rng.standard_normal((4 if name == "vit_b_16" else 32, *shape)).astype(np.float32)
        # Exported with autograd on: under no_grad, eval-mode encoder layers take PyTorch's fused fast
        # path (aten::_transformer_encoder_layer_fwd), which does not export.
        torch.onnx.export(model, torch.from_numpy(x), str(t / "m.onnx"), opset_version=13)
        with torch.no_grad():
            torch_y = model(torch.from_numpy(x)).numpy()
        np.save(t / "x.npy", x)
        np.save(t / "calib.npy", calib)
        base_cmd = [tpu_sim, "net", str(t / "m.onnx"), "--calibrate", str(t / "calib.npy"), "--input",
                    str(t / "x.npy")]
        t0 = time.time()
        run(base_cmd + ["--reference-only", "--out", str(t / "y.npy"), "--float-out", str(t / "f.npy"),
                        "--save-model", str(t / "q")])
        t1 = time.time()
        # The saved model's layout: (B, 1, L, D) for a token sequence, NHWC for an image.
        np.save(t / "x_nhwc.npy", np.ascontiguousarray(x[:, None] if x.ndim == 3 else x.transpose(0, 2, 3, 1)))
        run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(t / "q/model.json"), "--input",
             str(t / "x_nhwc.npy"), "--out", str(t / "ref.npy")])
        t2 = time.time()
        run([tpu_sim, "net", str(t / "q/model.json"), "--input", str(t / "x_nhwc.npy"), "--reference-only", "--out",
             str(t / "yq.npy")])
        ref, yq = np.load(t / "ref.npy"), np.load(t / "yq.npy")
        if ref.shape != yq.shape or not np.array_equal(ref, yq):
            failures.append(f"the C++ int8 reference differs from int8_reference.py in "
                            f"{int(np.sum(ref != yq)) if ref.shape == yq.shape else 'shape'} elements")
        saved, y, float_err, corr, quant_err = compare_outputs(t, ref, torch_y, failures)
        layers = [layer["name"] for layer in saved["layers"]]
        kinds = sorted({layer["type"] for layer in saved["layers"]})
        print(f"{name}: batch {batch}, {len(layers)} layers ({', '.join(kinds)}); C++ and NumPy int8 references bit "
              f"for bit: {not failures}; float pass vs PyTorch {float_err:.2e} of max|y|; int8 vs PyTorch: correlation "
              f"{corr:.5f}, max error {quant_err:.4f} of max|y|; import + calibration + C++ reference {t1 - t0:.1f} s, "
              f"NumPy reference {t2 - t1:.1f} s")
        if float_err > 1e-4:
            failures.append(f"the float pass differs from PyTorch by {float_err:.2e} of max|y|")
        if corr < 0.95:
            failures.append(f"correlation {corr:.5f} with PyTorch is below 0.95")
        missing = [n for n in attention_names(base, heads) if n not in layers]
        if missing:
            failures.append(f"the saved model has no layers {missing[:4]} (it has {layers[:12]}...)")
        kinds_of = {layer["name"]: layer["type"] for layer in saved["layers"]}
        if kinds_of.get(f"{base}.h0.qk") != "matmul" or kinds_of.get(f"{base}.h0.softmax") != "softmax":
            failures.append("the scores are not a matmul followed by a softmax")
        # On chip on tpuv1.
        t3 = time.time()
        run(base_cmd + ["--preset", "tpuv1", "--out", str(t / "yc.npy"), "--report", str(t / "r.csv"), "--stats",
                        str(t / "s.json"), "--check"])
        cycles = json.loads((t / "s.json").read_text())["total"]["cycles"]
        print(f"on chip (tpuv1): {cycles} cycles, bit for bit with the C++ reference (--check), "
              f"{time.time() - t3:.1f} s")
        # The attention's parts: cycles of head 0's QK^T, softmax and PV in the per-layer report.
        lines = (t / "r.csv").read_text().splitlines()
        col = lines[0].split(",").index("cycles")
        rows = {r.split(",")[0]: r.split(",") for r in lines[1:]}
        print("  head 0: " + ", ".join(f"{n.rsplit('.', 1)[1]} {rows[n][col] if n in rows else '?'} cycles"
                                       for n in (f"{base}.h0.qk", f"{base}.h0.softmax", f"{base}.h0.pv")))
        # The same on tpuv1 with ub_weight_path: the K and V tiles by RWU instead of the host route.
        (t / "uwp.json").write_text(json.dumps({"preset": "tpuv1", "ub_weight_path": 1}))
        run(base_cmd + ["--config", str(t / "uwp.json"), "--out", str(t / "yu.npy"), "--stats",
                        str(t / "su.json"), "--check"])
        ucycles = json.loads((t / "su.json").read_text())["total"]["cycles"]
        print(f"on chip (tpuv1 with ub_weight_path): {ucycles} cycles, bit for bit with the C++ reference")
        if not np.array_equal(np.load(t / "yu.npy"), y):
            failures.append("the ub_weight_path route's output differs from the C++ reference's")
        if ucycles >= cycles:
            failures.append(f"the ub_weight_path route takes {ucycles} cycles, the host route {cycles}")
        if not np.array_equal(np.load(t / "yc.npy"), y):
            failures.append("the simulator's output differs from the C++ reference's")
        report = (t / "r.csv").read_text()
        missing = [n for n in attention_names(base, heads) if n not in report]
        if missing:
            failures.append(f"the report does not name {missing[:4]}")
        # The detailed path on the smallest model (tpuv1's 256 x 256 array cycle by cycle).
        check_rows_and_detailed(report, saved, base_cmd + ["--preset", "tpuv1"], t, cycles, np.load(t / "yc.npy"),
                                name == "mha", failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = encoder_layer(64, "relu", False)
        self.mask = torch.triu(torch.full((8, 8), float("-inf")), diagonal=1)

    def forward(self, x):
        return self.layer(x, src_mask=self.mask)


class Cross(nn.Module):
    """Attention of x over another projection of itself: key and value differ from the query."""

    def __init__(self):
        super().__init__()
        self.kv = nn.Linear(128, 128)
        self.attn = nn.MultiheadAttention(128, 4, batch_first=True)

    def forward(self, x):
        m = self.kv(x)
        return self.attn(x, m, m, need_weights=False)[0]


class NoBias(nn.Module):
    """nn.MultiheadAttention(bias=False): no Add after the in-projection."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(128, 4, bias=False, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def errors(bin_dir):
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = np.random.default_rng(0).standard_normal((2, 8, 128)).astype(np.float32)
        np.save(t / "x.npy", x)
        common = ["--calibrate", str(t / "x.npy"), "--input", str(t / "x.npy"), "--reference-only"]
        cases = [
            (Masked(), "attention masks are not supported"),
            (encoder_layer(64, "relu", False, batch_first=False), "batch_first=False"),
            (Cross(), "node '/attn/MatMul' (MatMul): is not the MultiheadAttention pattern (docs/onnx.md, "
                      "\"MultiheadAttention\"): the in-projection's weights are [128, 128], not the packed (128, 384)"),
            (NoBias(), "node '/attn/MatMul' (MatMul): is not the MultiheadAttention pattern (docs/onnx.md, "
                       "\"MultiheadAttention\"): its output must be read by one Add (the in-projection's bias) only; "
                       "MultiheadAttention(bias=False) is not supported"),
        ]
        for k, (model, want) in enumerate(cases):
            path = t / f"e{k}.onnx"
            torch.onnx.export(model.eval(), torch.from_numpy(x), str(path), opset_version=13)
            refused([tpu_sim, "net", str(path), *common], want, failures)
        # Head splits edited in the exported graph (the query's Reshape is /self_attn/Reshape, the keys'
        # /self_attn/Reshape_1): the keys reshaped to 8 heads of 16 features, the queries to 4 of 32; the
        # queries' N * heads given as -1.
        import onnx
        from onnx import numpy_helper
        torch.onnx.export(encoder_layer(64, "relu", False).eval(), torch.from_numpy(x), str(t / "layer.onnx"),
                          opset_version=13)
        split_cases = [
            ("/self_attn/Reshape_1", [8, 16, 16], "the heads' shape [8, 16, 16] differs from the query's [8, 8, 32]"),
            ("/self_attn/Reshape", [8, -1, 32], "the heads' shape [8, -1, 32]: -1 is not N times the 4 heads"),
        ]
        for k, (node, new_shape, want) in enumerate(split_cases):
            m = onnx.load(str(t / "layer.onnx"))
            shape_of = {n.input[1] for n in m.graph.node if n.name == node}
            for n in m.graph.node:
                if n.op_type == "Constant" and n.output[0] in shape_of:
                    n.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(new_shape, np.int64)))
            path = t / f"split{k}.onnx"
            onnx.save(m, str(path))
            refused([tpu_sim, "net", str(path), *common], f"node '{node}' (Reshape): is not the MultiheadAttention "
                    f"pattern (docs/onnx.md, \"MultiheadAttention\"): {want}", failures)
        # --reference-only runs no simulation: the simulation's outputs are refused.
        r = subprocess.run([tpu_sim, "net", str(path), *common, "--check"], capture_output=True, text=True)
        if r.returncode == 0 or "--reference-only" not in r.stderr:
            failures.append(f"--reference-only with --check: status {r.returncode}, {r.stderr.strip()[:200]}")
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


def main():
    bin_dir, src_dir, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if name == "errors":
        return errors(bin_dir)
    return check_model(bin_dir, src_dir, name)


if __name__ == "__main__":
    sys.exit(main())
