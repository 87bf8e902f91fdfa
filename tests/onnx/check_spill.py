#!/usr/bin/python3
"""Maps spilled to host memory (docs/quantization.md, "Maps spilled to host
memory"): a small CNN exported by PyTorch, run on small8 with the unified
buffer reduced by --config so that its maps must spill, against independent
references:

- bit for bit against the C++ int8 reference (--check) and the NumPy one
  (tools/int8_reference.py on the quantized model tpu-sim saves), and the
  correlation of the int8 output with PyTorch's float output (at least 0.99);
- at 1200 unified buffer rows and 256 accumulator rows, the input, the
  three 32 x 32 maps after it and the depthwise convolution's 16 x 16 map
  spill (convolutions reading a spilled map of two planes with the halo,
  the host's im2col in bands, a max pool reading and writing spilled maps,
  a stride-2 depthwise convolution reading and writing them, an average
  pool reading one), on the fast and the detailed path with the same
  cycles and statistics;
- at exactly the rows one sample's maps need (measured with the preset's
  unified buffer), nothing spills and the program is the preset's; one row
  less, the input spills;
- with host memory one row short of the input, output and spilled maps
  (counted here from the shapes), the refusal names host_rows and that
  count, which then runs.

  check_spill.py BIN_DIR SRC_DIR

Run with /usr/bin/python3 (Debian's python3-torch, python3-onnx, python3-numpy).
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_onnx_model import dequantized_reference, nhwc  # noqa: E402

N = 8  # small8


class SpillNet(nn.Module):
    """(B, 3, 32, 32): conv 3->16, conv 16->16 (two planes of N = 8), max pool 3x3 stride 1 (same size),
    depthwise 3x3 stride 2, average pool 2, pointwise conv 16->8, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.mp = nn.MaxPool2d(3, stride=1, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.ap = nn.AvgPool2d(2)
        self.c3 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = self.mp(x)
        x = torch.relu(self.dw(x))
        x = torch.relu(self.c3(self.ap(x)))
        return self.fc(torch.flatten(x, 1))


def make(d, batch):
    torch.manual_seed(0)
    model = SpillNet().eval()
    g = torch.Generator().manual_seed(1)
    calib = torch.rand(4, 3, 32, 32, generator=g)
    x = torch.rand(batch, 3, 32, 32, generator=g)
    torch.onnx.export(model, x[:1], str(d / "spill.onnx"), opset_version=13, input_names=["x"], output_names=["y"])
    with torch.no_grad():
        np.save(d / "torch.npy", model(x).numpy().astype(np.float32))
    np.save(d / "calib.npy", calib.numpy())
    np.save(d / "x.npy", x.numpy())
    np.save(d / "x1.npy", x[:1].numpy())


def tpu_sim(bin_dir, d, tag, cfg, x="x.npy", extra=()):
    cfg_file = d / f"{tag}.json"
    cfg_file.write_text(json.dumps(dict({"preset": "small8", "acc_rows": 256}, **cfg)))
    cmd = [str(bin_dir / "tpu-sim"), "net", str(d / "spill.onnx"), "--calibrate", str(d / "calib.npy"),
           "--input", str(d / x), "--config", str(cfg_file), "--out", str(d / f"{tag}.y.npy"),
           "--save-model", str(d / f"{tag}.q"), "--emit-asm", str(d / f"{tag}.s"), "--stats", str(d / f"{tag}.stats.json"),
           *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def plan_line(run):
    return next((ln for ln in run.stdout.splitlines() if "program 0" in ln), "")


def check_bits(src_dir, d, tag, x, failures):
    """The run's output against the NumPy int8 reference on its saved model; the correlation with PyTorch."""
    xs = np.load(d / x)
    np.save(d / f"{tag}.x_nhwc.npy", nhwc(xs))
    subprocess.run([sys.executable, str(src_dir / "tools/int8_reference.py"), str(d / f"{tag}.q/model.json"),
                    "--input", str(d / f"{tag}.x_nhwc.npy"), "--out", str(d / f"{tag}.ref.npy")], check=True)
    want = dequantized_reference(np.load(d / f"{tag}.ref.npy"), json.loads((d / f"{tag}.q/model.json").read_text()),
                                 xs.ndim)
    y = np.load(d / f"{tag}.y.npy")
    if not np.array_equal(y, want):
        failures.append(f"{tag}: {int(np.sum(y != want))} of {y.size} outputs differ from int8_reference.py")
    torch_y = np.load(d / "torch.npy")[: len(y)]
    corr = float(np.corrcoef(y.ravel(), torch_y.ravel())[0, 1])
    print(f"{tag}: bit for bit against int8_reference.py: {np.array_equal(y, want)}; "
          f"correlation with PyTorch's float output {corr:.6f}")
    if corr < 0.99:
        failures.append(f"{tag}: correlation {corr:.6f} with PyTorch below 0.99")


def main():
    bin_dir, src_dir = Path(sys.argv[1]), Path(sys.argv[2])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        batch = 2
        make(d, batch)

        # The maps at 1200 rows: the input (the host's im2col of c1: 27 lanes in 4 planes of 32 x 32), the
        # outputs of c1, c2 and the max pool (2 planes of 32 x 32 each) and of dw (2 planes of 16 x 16) spill.
        spilled = {}
        for detail in ("fast", "detailed"):
            tag = f"ub1200_{detail}"
            r = tpu_sim(bin_dir, d, tag, {"ub_rows": 1200}, extra=("--check", "--detail", detail))
            print(plan_line(r))
            if r.returncode != 0 or "check: all" not in r.stdout:
                failures.append(f"{tag}: status {r.returncode}: {r.stderr.strip()!r}")
                continue
            spilled[detail] = json.loads((d / f"{tag}.stats.json").read_text())
            line = plan_line(r)
            if "spilled to host memory" not in line or "the input" not in line or line.count("the output of") != 4:
                failures.append(f"{tag}: expected the input and four maps spilled: {line!r}")
            check_bits(src_dir, d, tag, "x.npy", failures)
        if len(spilled) == 2:
            if spilled["fast"] != spilled["detailed"]:
                failures.append("ub1200: the fast and detailed paths' statistics differ")
            else:
                print(f"ub1200: fast and detailed paths agree: {spilled['fast']['total']['cycles']} cycles")
            if (d / "ub1200_fast.s").read_text() != (d / "ub1200_detailed.s").read_text():
                failures.append("ub1200: the two runs compiled different programs")

        # At the limit: one sample with the preset's unified buffer needs `need` rows; exactly that many
        # give the same program without spilling, one less spills the input.
        r = tpu_sim(bin_dir, d, "preset", {}, x="x1.npy")
        m = re.search(r"unified buffer (\d+) of \d+ rows", plan_line(r))
        if r.returncode != 0 or not m or "spilled" in plan_line(r):
            failures.append(f"preset: status {r.returncode}, plan {plan_line(r)!r}: {r.stderr.strip()!r}")
        else:
            need = int(m.group(1))
            at = tpu_sim(bin_dir, d, "at_limit", {"ub_rows": need}, x="x1.npy", extra=("--check",))
            print(plan_line(at))
            if at.returncode != 0 or "spilled" in plan_line(at) or "check: all" not in at.stdout:
                failures.append(f"ub_rows {need}: expected no spill, got status {at.returncode}: {plan_line(at)!r}")
            elif (d / "at_limit.s").read_text() != (d / "preset.s").read_text():
                failures.append(f"ub_rows {need}: the program differs from the preset's")
            below = tpu_sim(bin_dir, d, "below_limit", {"ub_rows": need - 1}, x="x1.npy", extra=("--check",))
            print(plan_line(below))
            if below.returncode != 0 or "spilled to host memory" not in plan_line(below) or \
                    "check: all" not in below.stdout:
                failures.append(f"ub_rows {need - 1}: expected a spill, got status {below.returncode}: "
                                f"{plan_line(below)!r} {below.stderr.strip()!r}")
            else:
                check_bits(src_dir, d, "below_limit", "x1.npy", failures)

        # Host memory: the input (2 samples of 4 planes of 32 x 32), the int32 output (2 samples, 2 planes of
        # 1 pixel, 4 host rows each) and the four spilled maps of one sample (2 planes of 32 x 32, or 16 x 16).
        host_need = batch * 4 * 1024 + batch * 2 * 4 + 3 * 2 * 1024 + 2 * 256
        r = tpu_sim(bin_dir, d, "host_short", {"ub_rows": 1200, "host_rows": host_need - 1})
        want = f'--config FILE with {{"host_rows": {host_need}}}'
        print(r.stderr.strip())
        if r.returncode != 3 or want not in r.stderr or "spilled maps" not in r.stderr:
            failures.append(f"host_rows {host_need - 1}: expected a refusal naming {want!r}, "
                            f"got status {r.returncode}: {r.stderr.strip()!r}")
        r = tpu_sim(bin_dir, d, "host_exact", {"ub_rows": 1200, "host_rows": host_need}, extra=("--check",))
        if r.returncode != 0 or "check: all" not in r.stdout:
            failures.append(f"host_rows {host_need}: status {r.returncode}: {r.stderr.strip()!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
