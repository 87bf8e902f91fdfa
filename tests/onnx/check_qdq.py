#!/usr/bin/python3
"""QDQ models through tpu-sim (docs/onnx.md, "QDQ models").

  check_qdq.py BIN_DIR {digits|digits_per_channel|mobile_mini|mobile_mini_per_channel|helper}

digits: a CNN (conv + BN + ReLU, max-pool, a residual block with an add and
ReLU, average pool, dense + ReLU, dense) trained on scikit-learn's digits,
quantized by PyTorch's own flow (torch.ao.quantization FX graph mode, the
qnnpack configuration: uint8 activations, int8 symmetric per-tensor weights,
calibrated on 200 training images) and exported with torch.onnx.export at
opset 13. digits_per_channel: the same network with per-channel weight scales
(tpu-sim re-quantizes them per tensor, with a warning). mobile_mini(_per_channel):
a depthwise-separable block with a global average pool, random weights and
batch-norm statistics, random images. helper: a QDQ graph
built with python3-onnx's helper (int8 activations, uint8 weights with zero
point 128, float weights quantized in the graph, a MatMul with a separate
bias Add, a float output).

tpu-sim's output is compared with
  (a) qdq_reference.py, "fixed" mode (tpu-sim's documented integer
      requantization on the model's own scales): bit for bit;
  (b) qdq_reference.py, "float" mode (the model's own float requantization):
      the int8 output codes, and where the roundings differ;
  (c) PyTorch's quantized model (qnnpack kernels) and its float model.

Prints the figures docs/onnx.md quotes. Run with /usr/bin/python3 (Debian's
python3-torch, python3-onnx, python3-sklearn); nothing is downloaded.
"""
import copy
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qdq_reference import evaluate  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class DigitsQCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.r1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.b2 = nn.BatchNorm2d(16)
        self.r2 = nn.ReLU()
        self.c3 = nn.Conv2d(16, 16, 3, padding=1)
        self.b3 = nn.BatchNorm2d(16)
        self.avg = nn.AvgPool2d(2)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.pool(self.r1(self.b1(self.c1(x))))
        y = self.b3(self.c3(self.r2(self.b2(self.c2(x)))))
        x = torch.relu(x + y)
        x = torch.flatten(self.avg(x), 1)
        # A functional ReLU: PyTorch 1.13 cannot export a fused quantized
        # linear_relu, so the FX flow keeps it apart (its own QuantizeLinear).
        x = self.fc2(torch.relu(self.fc1(x)))
        return self.dequant(x)


class MobileMini(nn.Module):
    """Random weights: conv 3x3 stride 2 + BN + ReLU, depthwise 3x3 + BN + ReLU,
    pointwise 1x1 + BN, global average pool, flatten, dense."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1, self.r1 = nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU()
        self.dw, self.b2, self.r2 = nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU()
        self.pw, self.b3 = nn.Conv2d(16, 24, 1), nn.BatchNorm2d(24)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        x = self.r2(self.b2(self.dw(self.r1(self.b1(self.c1(x))))))
        return self.fc(torch.flatten(self.gap(self.b3(self.pw(x))), 1))


def mobile_mini():
    """The network with batch-norm statistics measured on random images and
    random scales and shifts, so that folding gives the channels different
    ranges (as training would); calibration and test images."""
    torch.manual_seed(0)
    m = MobileMini()
    for b in (m.b1, m.b2, m.b3):
        nn.init.uniform_(b.weight, 0.2, 2.0)
        nn.init.normal_(b.bias, 0.0, 0.5)
    x = torch.randn(80, 3, 16, 16)
    m.train()
    with torch.no_grad():
        m(x[:16])
    return m.eval(), x[16:32].numpy(), x[32:].numpy()


def digits_data():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    return x, y, order[:1297], order[1297:]


def train_digits():
    torch.manual_seed(0)
    x, y, train, test = digits_data()
    model = DigitsQCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for _ in range(15):
        perm = torch.randperm(len(xt))
        model.train()
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval(), x, y, train, test


def quantize_torch(model, calib, per_channel):
    from torch.ao.quantization import QConfig, QConfigMapping
    from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = "qnnpack"
    weight = (PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
              if per_channel else MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric))
    qc = QConfig(activation=MinMaxObserver.with_args(dtype=torch.quint8), weight=weight)
    # The stubs are FX's own quantize/dequantize; skip them in the mapping.
    mapping = QConfigMapping().set_global(qc)
    m = copy.deepcopy(model)
    m.quant, m.dequant = nn.Identity(), nn.Identity()
    prepared = prepare_fx(m, mapping, (torch.from_numpy(calib[:1]),))
    with torch.no_grad():
        prepared(torch.from_numpy(calib))
    return convert_fx(prepared)


def run_tpu_sim(bin_dir, model_path, x, d, extra=()):
    np.save(d / "x.npy", x)
    r = subprocess.run([str(bin_dir / "tpu-sim"), "net", str(model_path), "--input", str(d / "x.npy"),
                        "--out", str(d / "y.npy"), "--save-model", str(d / "saved"), *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr)
        raise SystemExit(f"tpu-sim fails on {model_path}: exit {r.returncode}")
    return np.load(d / "y.npy"), r.stderr


def output_quant(model):
    """(scale, zero point) of the DequantizeLinear that makes the graph's output."""
    out = model.graph.output[0].name
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    for n in model.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(consts[n.input[1]]), int(consts[n.input[2]])
    return None


def codes(y, q):
    s, z = q
    return np.rint(np.asarray(y, np.float64) / s).astype(np.int64) + z


def summarize_rounding(stats, kinds=None):
    stats = [s for s in stats if kinds is None or s[1] in kinds]
    vals = sum(s[2] for s in stats)
    diff = sum(s[3] for s in stats)
    worst = max((s[4] for s in stats), default=0)
    return vals, diff, worst


def print_rounding(stats):
    for kinds in (("Conv", "Gemm", "MatMul"), ("add",), ("average",), ("requantized again",)):
        vals, diff, worst = summarize_rounding(stats, kinds)
        if vals:
            print(f"     after {'/'.join(kinds)}: {diff} of {vals} ({diff / vals:.3%}) round differently, "
                  f"by up to {worst}")


def digits_case(bin_dir, per_channel):
    model, x, y, train, test = train_digits()
    with torch.no_grad():
        float_out = model(torch.from_numpy(x[test])).numpy()
    qmodel = quantize_torch(model, x[train[:200]], per_channel)
    with torch.no_grad():
        torch_q = qmodel(torch.from_numpy(x[test])).numpy()
    name = "digits_per_channel" if per_channel else "digits"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = d / f"{name}.onnx"
        torch.onnx.export(qmodel, torch.from_numpy(x[test[:1]]), str(path), opset_version=13,
                          input_names=["x"], output_names=["y"])
        m = onnx.load(str(path))
        ops = sorted({n.op_type for n in m.graph.node})
        print(f"{name}: exported ops {', '.join(ops)}")
        xs = x[test]
        y_tpu, err = run_tpu_sim(bin_dir, path, xs, d)
    warnings = [line for line in err.splitlines() if line.startswith("tpu-sim: warning:")]
    for w in warnings:
        print("  ", w)
    check(all(line.startswith("tpu-sim: warning:") for line in err.splitlines()), f"{name}: stderr {err!r}")
    pc_warnings = [w for w in warnings if "per-channel weight scales" in w]
    if per_channel:
        check(len(pc_warnings) == 5, f"{name}: {len(pc_warnings)} per-channel warnings, wanted 5 (one per layer)")
    else:
        check(not pc_warnings, f"{name}: per-channel warnings on a per-tensor model")
    check(any("requantization: tpu-sim multiplies" in w for w in warnings), f"{name}: no rounding warning")

    q = output_quant(m)
    check(q is not None, f"{name}: the output is not a DequantizeLinear")
    c_tpu = codes(y_tpu, q)
    y_fixed, _ = evaluate(m, xs, "fixed")
    y_float, stats = evaluate(m, xs, "float")
    c_fixed, c_float, c_torch = codes(y_fixed, q), codes(y_float, q), codes(torch_q, q)
    labels = y[test]
    acc = {k: float(np.mean(v.argmax(1) == labels)) for k, v in
           (("float", float_out), ("torch_q", torch_q), ("reference", y_float), ("tpu-sim", y_tpu))}
    vals, diff, worst = summarize_rounding(stats)
    eq_float = float(np.mean(c_tpu == c_float))
    eq_torch = float(np.mean(c_tpu == c_torch))
    rel_float = float(np.abs(y_tpu - float_out).max() / np.abs(float_out).max())
    rel_model = float(np.abs(y_float - float_out).max() / np.abs(float_out).max())
    print(f"{name}: {len(xs)} test images; output scale {q[0]:.6g}, zero point {q[1]}")
    print(f"  (a) tpu-sim vs fixed-point reference: {int(np.count_nonzero(c_tpu != c_fixed))} codes differ")
    print(f"  (b) tpu-sim vs the model's float requantization: {eq_float:.2%} of output codes equal, "
          f"max |diff| {int(np.abs(c_tpu - c_float).max())}; "
          f"locally {diff} of {vals} requantized values round differently (max {worst}):")
    print_rounding(stats)
    print(f"  (c) vs PyTorch quantized (qnnpack): {eq_torch:.2%} of codes equal, max |diff| "
          f"{int(np.abs(c_tpu - c_torch).max())}; vs float model: max |error| / max |y| {rel_float:.4f} "
          f"(the QDQ model itself: {rel_model:.4f})")
    print("  accuracy: " + ", ".join(f"{k} {v:.2%}" for k, v in acc.items()))
    check(np.array_equal(c_tpu, c_fixed), f"{name}: tpu-sim differs from the fixed-point reference")
    check(np.allclose(y_tpu, y_fixed, rtol=0, atol=q[0] * 1e-3), f"{name}: dequantized output differs")
    # Tolerances (docs/onnx.md): the model's float requantization.
    # Conv and Gemm requantize as the model does but for ties and 2^-31 edges.
    vals, diff, _ = summarize_rounding(stats, ("Conv", "Gemm", "MatMul"))
    check(diff <= 1e-4 * vals, f"{name}: {diff} of {vals} Conv/Gemm requantizations round differently")
    # Per-channel weights re-quantized per tensor move more (docs/onnx.md).
    tol_eq, tol_max = (0.3, 6) if per_channel else (0.6, 4)
    check(eq_float >= tol_eq, f"{name}: only {eq_float:.2%} of codes equal the model's float requantization")
    check(int(np.abs(c_tpu - c_float).max()) <= tol_max, f"{name}: output codes differ by more than {tol_max}")
    check(abs(acc["tpu-sim"] - acc["reference"]) <= 0.01, f"{name}: accuracy {acc}")
    check(abs(acc["tpu-sim"] - acc["torch_q"]) <= 0.01, f"{name}: accuracy {acc}")
    check(abs(acc["tpu-sim"] - acc["float"]) <= 0.02, f"{name}: accuracy {acc}")
    check(rel_float <= 0.10, f"{name}: error against the float model {rel_float}")


def mobile_case(bin_dir, per_channel):
    model, calib, xs = mobile_mini()
    with torch.no_grad():
        float_out = model(torch.from_numpy(xs)).numpy()
    qmodel = quantize_torch(model, calib, per_channel)
    with torch.no_grad():
        torch_q = qmodel(torch.from_numpy(xs)).numpy()
    name = "mobile_mini_per_channel" if per_channel else "mobile_mini"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = d / f"{name}.onnx"
        torch.onnx.export(qmodel, torch.from_numpy(xs[:1]), str(path), opset_version=13,
                          input_names=["x"], output_names=["y"])
        m = onnx.load(str(path))
        y_tpu, err = run_tpu_sim(bin_dir, path, xs, d)
    warnings = [line for line in err.splitlines() if line.startswith("tpu-sim: warning:")]
    for w in warnings:
        print("  ", w)
    pc_warnings = [w for w in warnings if "per-channel weight scales" in w]
    # c1, dw, pw and fc have channels of different scales.
    check(len(pc_warnings) == (4 if per_channel else 0), f"{name}: {len(pc_warnings)} per-channel warnings")
    q = output_quant(m)
    y_fixed, _ = evaluate(m, xs, "fixed")
    y_float, stats = evaluate(m, xs, "float")
    c_tpu, c_fixed, c_float, c_torch = (codes(v, q) for v in (y_tpu, y_fixed, y_float, torch_q))
    eq_float = float(np.mean(c_tpu == c_float))
    top = float(np.abs(float_out).max())
    rel_float = float(np.abs(y_tpu - float_out).max() / top)
    rel_model = float(np.abs(y_float - float_out).max() / top)
    rel_to_model = float(np.abs(y_tpu - y_float).max() / np.abs(y_float).max())
    argmax = float(np.mean(y_tpu.argmax(1) == y_float.argmax(1)))
    vals, diff, worst = summarize_rounding(stats)
    print(f"{name}: {len(xs)} random images; output scale {q[0]:.6g}, zero point {q[1]}")
    print(f"  (a) tpu-sim vs fixed-point reference: {int(np.count_nonzero(c_tpu != c_fixed))} codes differ")
    print(f"  (b) tpu-sim vs the model's float requantization: {eq_float:.2%} of output codes equal, max |diff| "
          f"{int(np.abs(c_tpu - c_float).max())}, max |error| / max |y| {rel_to_model:.4f}, argmax {argmax:.2%}; "
          f"locally {diff} of {vals} requantized values round differently (max {worst}):")
    print_rounding(stats)
    print(f"  (c) vs PyTorch quantized: {np.mean(c_tpu == c_torch):.2%} of codes equal, max |diff| "
          f"{int(np.abs(c_tpu - c_torch).max())}; vs float model: max |error| / max |y| {rel_float:.4f} "
          f"(the QDQ model itself: {rel_model:.4f})")
    check(np.array_equal(c_tpu, c_fixed), f"{name}: tpu-sim differs from the fixed-point reference")
    vals, diff, _ = summarize_rounding(stats, ("Conv", "Gemm", "MatMul"))
    check(diff <= 1e-4 * vals, f"{name}: {diff} of {vals} Conv/Gemm requantizations round differently")
    # Per-channel weights re-quantized per tensor move the output more (docs/onnx.md).
    tol = 0.05 if per_channel else 0.02
    check(rel_to_model <= tol, f"{name}: {rel_to_model} of max |y| from the model's output")
    check(argmax >= 0.9, f"{name}: argmax agrees on {argmax:.2%}")


def helper_model():
    rng = np.random.RandomState(3)
    w1 = rng.randint(0, 256, size=(64, 24)).astype(np.uint8)  # uint8 weights, zero point 128
    b1 = rng.randn(24).astype(np.float32) * 0.5
    w2 = rng.randn(24, 10).astype(np.float32) * 0.2          # float, quantized in the graph
    sw2 = np.float32(np.abs(w2).max() / 127)
    b2 = rng.randint(-3000, 3000, size=10).astype(np.int32)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    s_x, s_h = np.float32(0.02), np.float32(0.05)
    inits = [c("s_x", s_x), c("z_x", np.int8(-5)), c("w1", w1), c("s_w1", np.float32(0.004)),
             c("z_w1", np.uint8(128)), c("b1", b1), c("s_h", s_h), c("z_h", np.uint8(0)),
             c("w2f", w2), c("s_w2", sw2), c("z_w2", np.int8(0)), c("b2", b2),
             c("s_b2", np.float32(s_h * sw2)), c("z_b2", np.int32(0))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], name="qx"),
        helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], name="dqx"),
        helper.make_node("DequantizeLinear", ["w1", "s_w1", "z_w1"], ["w1d"], name="dqw1"),
        helper.make_node("MatMul", ["xd", "w1d"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b1"], ["mmb"], name="bias"),
        helper.make_node("Relu", ["mmb"], ["h"], name="relu"),
        helper.make_node("QuantizeLinear", ["h", "s_h", "z_h"], ["hq"], name="qh"),
        helper.make_node("DequantizeLinear", ["hq", "s_h", "z_h"], ["hd"], name="dqh"),
        helper.make_node("QuantizeLinear", ["w2f", "s_w2", "z_w2"], ["w2q"], name="qw2"),
        helper.make_node("DequantizeLinear", ["w2q", "s_w2", "z_w2"], ["w2d"], name="dqw2"),
        helper.make_node("DequantizeLinear", ["b2", "s_b2", "z_b2"], ["b2d"], name="dqb2"),
        helper.make_node("Gemm", ["hd", "w2d", "b2d"], ["y"], name="fc2"),
    ]
    g = helper.make_graph(nodes, "helper_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def helper_case(bin_dir):
    m = helper_model()
    onnx.checker.check_model(m)
    x = np.random.RandomState(4).randn(32, 64).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = d / "helper.onnx"
        onnx.save(m, str(path))
        y_tpu, err = run_tpu_sim(bin_dir, path, x, d)
        saved = (d / "saved" / "model.json").read_text()
    y_fixed, _ = evaluate(m, x, "fixed")
    y_float, stats = evaluate(m, x, "float")
    scale = float(np.abs(y_float).max())
    vals, diff, worst = summarize_rounding(stats)
    print(f"helper: max |tpu-sim - fixed-point reference| / max |y| {np.abs(y_tpu - y_fixed).max() / scale:.2e}; "
          f"vs the model's float requantization {np.abs(y_tpu - y_float).max() / scale:.2e}; "
          f"locally {diff} of {vals} requantized values round differently")
    check('"int32"' in saved, "helper: the float output is not the int32 accumulators")
    check(np.allclose(y_tpu, y_fixed, rtol=1e-6, atol=1e-6 * scale), "helper: tpu-sim differs from the fixed reference")
    check(np.abs(y_tpu - y_float).max() <= 0.02 * scale, "helper: tpu-sim far from the model's float semantics")
    check(err.count("tpu-sim: warning:") == 1, f"helper: stderr {err!r}")


def main():
    bin_dir, case = Path(sys.argv[1]), sys.argv[2]
    if case == "digits":
        digits_case(bin_dir, False)
    elif case == "digits_per_channel":
        digits_case(bin_dir, True)
    elif case == "mobile_mini":
        mobile_case(bin_dir, False)
    elif case == "mobile_mini_per_channel":
        mobile_case(bin_dir, True)
    elif case == "helper":
        helper_case(bin_dir)
    else:
        raise SystemExit(f"unknown case {case}")
    print(f"{case}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
