#!/usr/bin/python3
"""Writes the seed corpus of fuzz_onnx: the ONNX tests' models, small enough
for libFuzzer (which cuts its inputs at 1 MB).

  make_onnx_seeds.py OUT_DIR

- exported by PyTorch (opset 13, random weights): the digits CNN of
  tests/onnx/make_models.py; torchvision's MobileNetV2 at width 0.25 with 10
  classes (ResNet-18 itself is 45 MB, MobileNetV2 at full width 14 MB); a
  small residual network with ResNet-18's operators (Conv + BatchNormalization
  + ReLU, MaxPool, Add, GlobalAveragePool, Flatten, Gemm); the QDQ form of
  tests/onnx/check_qdq.py's MobileMini, quantized by PyTorch's FX flow;
  tests/onnx/check_recurrent.py's LSTM, 2-layer batch-first LSTM and GRU, small;
- built with python3-onnx's helper: the models of tests/onnx/check_small_ops.py,
  check_qdq.py's helper model, and every model of onnx_errors.py and
  qdq_errors.py (hand-made edge cases: each a valid network with one thing
  changed, the crashes of issue 25 among them).

Run with /usr/bin/python3 (Debian's python3-torch, python3-torchvision,
python3-onnx); without PyTorch only the helper-built models are written.
"""
import io
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "tests/onnx"))


def torch_seeds(out):
    import torch
    import torchvision
    from torch import nn

    import check_qdq
    import make_models

    def export(model, example, name, opset=13):
        buf = io.BytesIO()
        torch.onnx.export(model.eval(), example, buf, opset_version=opset, input_names=["x"], output_names=["y"])
        (out / f"{name}.onnx").write_bytes(buf.getvalue())

    class Residual(nn.Module):
        """ResNet-18's operators at 8 channels: stem, max-pool, one basic block with a projection, head."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            self.body = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8))
            self.down = nn.Sequential(nn.Conv2d(8, 8, 1, 2, bias=False), nn.BatchNorm2d(8))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x):
            x = self.stem(x)
            return self.head(torch.relu(self.body(x) + self.down(x)))

    torch.manual_seed(0)
    export(make_models.DigitsCNN(), torch.randn(1, 1, 8, 8), "digits")
    export(torchvision.models.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10), torch.randn(1, 3, 32, 32),
           "mobilenet_v2_w025")
    export(Residual(), torch.randn(1, 3, 32, 32), "residual")
    # The vector unit's operators: Mul, HardSigmoid, HardSwish (opset 14), SiLU, standalone Sigmoid.
    export(make_models.VecNet(), torch.randn(1, 3, 12, 12), "vec_net", opset=14)
    model, calib, _ = check_qdq.mobile_mini()
    q = check_qdq.quantize_torch(model, calib, per_channel=False)
    export(q, torch.from_numpy(calib[:1]), "mobile_mini_qdq")
    # Recurrent layers (check_recurrent.py's nets, shorter): LSTM time first with h_n, a 2-layer batch-first
    # LSTM with Squeeze, Transpose, Gather of the last step and Linear, a GRU; Shape, Expand, Unsqueeze of constants.
    import check_recurrent
    export(check_recurrent.Net(nn.LSTM, 4, 8, last="h_n"), torch.randn(3, 1, 4), "lstm")
    export(check_recurrent.Net(nn.LSTM, 4, 8, layers=2, batch_first=True, head=3), torch.randn(1, 3, 4), "lstm2_bf")
    export(check_recurrent.Net(nn.GRU, 4, 8, batch_first=True, head=3, last="h_n"), torch.randn(1, 3, 4), "gru")


def helper_seeds(out):
    import check_qdq
    import check_small_ops
    import onnx_errors
    import qdq_errors

    models = {"dense": check_small_ops.dense_model(), "conv": check_small_ops.conv_model(),
              "qdq_helper": check_qdq.helper_model()}
    for prefix, cases in (("error", onnx_errors.CASES), ("qdq_error", qdq_errors.CASES)):
        for name, case in cases.items():
            models[f"{prefix}_{name}"] = case[0]
    for name, m in models.items():
        if isinstance(m, tuple):  # check_small_ops returns (model, extra)
            m = m[0]
        data = m if isinstance(m, bytes) else m.SerializeToString()
        (out / f"{name}.onnx").write_bytes(data)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    helper_seeds(out)
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        print("make_onnx_seeds.py: no PyTorch; only the helper-built models", file=sys.stderr)
        return 0
    torch_seeds(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
