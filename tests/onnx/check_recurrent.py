#!/usr/bin/python3
"""Recurrent layers (docs/onnx.md, "Recurrent layers"): PyTorch's nn.LSTM and
nn.GRU exported to ONNX (opset 13) here, run by `tpu-sim net` on tpuv1 and
checked against independent references:

- bit for bit against the C++ int8 reference (--check) and against
  tools/int8_reference.py (NumPy) on the model tpu-sim saves; the saved
  model run by `tpu-sim net` gives the same integers;
- tpu-sim's float pass (--float-out) against PyTorch's float output;
- the int8 output's correlation with PyTorch's float output (at least 0.95);
- the per-layer report names every step's gates (NAME.t3.gate_i);
- with --detailed: the detailed path's cycles and output equal the fast
  path's; --preset runs on another preset than tpuv1 (small8: K and the
  outputs in several tiles of the array).

  check_recurrent.py BIN_DIR SRC_DIR MODEL [--detailed] [--preset P]
  check_recurrent.py BIN_DIR SRC_DIR errors

MODEL: lstm (nn.LSTM 16 -> 32, L 8, batch 3, time first, output h_n),
lstm2_bf (2 layers, batch_first, Linear on y[:, -1]), gru (batch_first,
Linear on h_n), lstm_lm (a language-model-like net: LSTM 32 -> 64, L 16,
Linear to 100 "words" on the last h). `errors`: what tpu-sim refuses is one
error line naming it and exit status 3 (a bidirectional LSTM, peepholes, the
whole sequence as the output, a model file whose dense layer reads a pixel
its input does not have). Run with /usr/bin/python3.
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


class Net(nn.Module):
    """A recurrent layer, then what reads it: h_n itself, or a Linear on the last step."""

    def __init__(self, cell, d, h, layers=1, batch_first=False, head=0, last="y"):
        super().__init__()
        self.rnn = cell(d, h, num_layers=layers, batch_first=batch_first)
        self.fc = nn.Linear(h, head) if head else None
        self.last = last

    def forward(self, x):
        y, state = self.rnn(x)
        if self.last == "h_n":
            out = (state[0] if isinstance(state, tuple) else state)[-1]
        else:
            out = y[:, -1] if self.rnn.batch_first else y[-1]
        return self.fc(out) if self.fc is not None else out


# name: (module, (L, D), batch_first, batch)
MODELS = {
    "lstm": (lambda: Net(nn.LSTM, 16, 32, last="h_n"), (8, 16), False, 3),
    "lstm2_bf": (lambda: Net(nn.LSTM, 16, 32, layers=2, batch_first=True, head=10), (8, 16), True, 3),
    "gru": (lambda: Net(nn.GRU, 16, 32, batch_first=True, head=10, last="h_n"), (8, 16), True, 3),
    "lstm_lm": (lambda: Net(nn.LSTM, 32, 64, batch_first=True, head=100), (16, 32), True, 4),
}


def sequences(length, d, batch, batch_first, rng):
    x = rng.standard_normal((batch, length, d)).astype(np.float32)
    return x if batch_first else np.ascontiguousarray(x.transpose(1, 0, 2))


def errors(bin_dir):
    import onnx
    from onnx import numpy_helper

    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = np.zeros((8, 2, 16), np.float32)
        np.save(t / "x.npy", x)
        common = ["--calibrate", str(t / "x.npy"), "--input", str(t / "x.npy")]
        bi = Net(nn.LSTM, 16, 32).eval()
        bi.rnn = nn.LSTM(16, 32, bidirectional=True)
        bi.fc = nn.Linear(64, 10)
        torch.onnx.export(bi.eval(), torch.from_numpy(x), str(t / "bi.onnx"), opset_version=13)
        refused([tpu_sim, "net", str(t / "bi.onnx"), *common], "only direction \"forward\"", failures)

        class Whole(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(16, 32)

            def forward(self, v):
                return self.rnn(v)[0]

        torch.onnx.export(Whole().eval(), torch.from_numpy(x), str(t / "whole.onnx"), opset_version=13)
        refused([tpu_sim, "net", str(t / "whole.onnx"), *common], "is a sequence", failures)
        # Peepholes: the LSTM node of a plain export given a P input.
        m = onnx.load(str(t / "whole.onnx"))
        lstm = next(n for n in m.graph.node if n.op_type == "LSTM")
        m.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 96), np.float32), "peep"))
        while len(lstm.input) < 7:
            lstm.input.append("")
        lstm.input.append("peep")
        onnx.save(m, str(t / "peep.onnx"))
        refused([tpu_sim, "net", str(t / "peep.onnx"), *common], "peepholes", failures)
        # A model file's dense layer reading a pixel past its map.
        torch.onnx.export(make_lstm_head(), torch.from_numpy(x), str(t / "ok.onnx"), opset_version=13)
        subprocess.run([tpu_sim, "net", str(t / "ok.onnx"), *common, "--save-model", str(t / "q")], check=True,
                       capture_output=True)
        saved = json.loads((t / "q/model.json").read_text())
        gate = next(layer for layer in saved["layers"] if "pixel" in layer)
        gate["pixel"] = 8
        (t / "q/model.json").write_text(json.dumps(saved))
        np.save(t / "xq.npy", np.zeros((2, 1, 8, 16), np.int8))
        refused([tpu_sim, "net", str(t / "q/model.json"), "--input", str(t / "xq.npy")], "pixel 8 is outside",
                failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


def make_lstm_head():
    return Net(nn.LSTM, 16, 32, head=10).eval()


def main():
    bin_dir, src_dir, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if name == "errors":
        return errors(bin_dir)
    detailed = "--detailed" in sys.argv[4:]
    preset = sys.argv[sys.argv.index("--preset") + 1] if "--preset" in sys.argv else "tpuv1"
    make, (length, d), batch_first, batch = MODELS[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = make().eval()
    failures = []
    tpu_sim = str(bin_dir / "tpu-sim")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        x = sequences(length, d, batch, batch_first, rng)
        calib = sequences(length, d, 64, batch_first, rng)
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
        # The NumPy reference reads the saved model's input layout: (B, 1, L, D).
        x_nhwc = np.ascontiguousarray((x if batch_first else x.transpose(1, 0, 2))[:, None])
        np.save(t / "x_nhwc.npy", x_nhwc)
        run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(t / "q/model.json"), "--input",
             str(t / "x_nhwc.npy"), "--out", str(t / "ref.npy")])
        run([tpu_sim, "net", str(t / "q/model.json"), "--input", str(t / "x_nhwc.npy"), "--out", str(t / "yq.npy"),
             "--preset", preset])
        ref, yq = np.load(t / "ref.npy"), np.load(t / "yq.npy")
        if not np.array_equal(ref, yq):
            failures.append("tpu-sim net q/model.json differs from int8_reference.py")
        saved, y, float_err, corr, quant_err = compare_outputs(t, ref, torch_y, failures)
        layers = len(saved["layers"])
        print(f"{name}: batch {batch}, L {length}: {layers} layers, {cycles} cycles on {preset}; bit for bit against "
              f"both int8 references: {not failures}; float pass vs PyTorch {float_err:.2e} of max|y|; int8 vs "
              f"PyTorch: correlation {corr:.5f}, max error {quant_err:.4f} of max|y|")
        if float_err > 1e-4:
            failures.append(f"the float pass differs from PyTorch by {float_err:.2e} of max|y|")
        if corr < 0.95:
            failures.append(f"correlation {corr:.5f} with PyTorch is below 0.95")
        report = (t / "r.csv").read_text()
        if ".t3.gate_i" not in report and ".t3.gate_z" not in report:
            failures.append("the report does not name the steps' gates (.t3.gate_i / .t3.gate_z)")
        check_rows_and_detailed(report, saved, base, t, cycles, y, detailed, failures)
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
