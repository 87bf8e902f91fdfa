"""tools/int8_reference.py's vector-unit layers (mul, affine: docs/quantization.md, "Layers on
the vector unit") against the spec's formulas written out here in plain Python ints, and their
float meaning against PyTorch (torch.mul with broadcasting, F.hardsigmoid, torch.sigmoid,
F.hardswish, F.silu) on the dequantized inputs, within the rounding the spec allows.

Run with /usr/bin/python3 -m pytest (Debian's python3-torch and python3-pytest).
"""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import int8_reference as ref  # noqa: E402

torch.set_num_threads(1)


def spec_mult(real):
    """(M, S) of docs/quantization.md section 1."""
    f, e = math.frexp(real)
    m, s = math.floor(f * 2 ** 31 + 0.5), 31 - e
    if m == 2 ** 31:
        m, s = 2 ** 30, s - 1
    if s > 62:
        s, m = 62, math.floor(real * 2 ** 62 + 0.5)
    return m, s


def spec_q(acc, m, s, z):
    r = (1 << (s - 1)) if s > 0 else 0
    return min(127, max(-128, ((acc * m + r) >> s) + z))


def away(v):
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def sigmoid_table(q):
    v = 127.0 / (1.0 + math.exp(-q / 16.0))
    return int(math.floor(v + 0.5))


def write_model(tmp_path, shape, scale, zero_point, layers):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"format": "tpu-sim-net", "version": 1, "name": "t",
                                "input": {"shape": list(shape), "scale": scale, "zero_point": zero_point},
                                "layers": layers}))
    return path


def all_int8(shape_rest):
    """Every int8 value, in a batch of maps of `shape_rest` (last axis 256 / prod(rest))."""
    return np.arange(-128, 128, dtype=np.int64).astype(np.int8).reshape((1, *shape_rest))


MUL = [  # (s_x, z_x, s_o, z_o, broadcast, activation)
    (0.02, -5, 0.05, 3, False, "none"),
    (0.1, 40, 0.3, -128, True, "relu"),
    (0.004, -128, 0.002, 0, True, "none"),
    (0.05, 127, 0.2, -20, False, "none"),
]


@pytest.mark.parametrize("case", range(len(MUL)))
def test_mul(tmp_path, case):
    s_x, z_x, s_o, z_o, broadcast, act = MUL[case]
    rng = np.random.default_rng(9000 + case)
    h, w, c = 4, 3, 5
    x = rng.integers(-128, 128, size=(3, h, w, c)).astype(np.int8)
    layers = [{"type": "global_avgpool2d", "name": "g", "inputs": ["input"]}] if broadcast else []
    layers.append({"type": "mul", "name": "m", "inputs": ["input", "g" if broadcast else "input"],
                   "activation": act, "output": {"scale": s_o, "zero_point": z_o}})
    y = ref.run(write_model(tmp_path, (h, w, c), s_x, z_x, layers), x)
    assert y.dtype == np.int8 and y.shape == x.shape
    if broadcast:  # the gate: the global average keeping (s_x, z_x), m = 1 / (h w)
        gm, gs = spec_mult(s_x / (h * w * s_x))
        g = np.array([[spec_q(int(np.sum(x[n, :, :, ch].astype(np.int64) - z_x)), gm, gs, z_x) for ch in range(c)]
                      for n in range(len(x))], dtype=np.int64).reshape(len(x), 1, 1, c)
    else:
        g = x.astype(np.int64)
    m, s = spec_mult(s_x * s_x / s_o)
    for idx in np.ndindex(*x.shape):
        b = int(g[idx[0], 0, 0, idx[3]]) if broadcast else int(g[idx])
        q = spec_q((int(x[idx]) - z_x) * (b - z_x), m, s, z_o)
        if act == "relu":
            q = max(q, z_o)
        assert int(y[idx]) == q, idx
    # PyTorch's product of the dequantized operands (broadcast over H, W), to half an output step
    real = torch.mul(torch.from_numpy(s_x * (x.astype(np.float64) - z_x)),
                     torch.from_numpy(s_x * (g.astype(np.float64) - z_x)))
    if act == "relu":
        real = torch.relu(real)
    real = real.numpy()
    got = s_o * (y.astype(np.float64) - z_o)
    inside = (y > -128) & (y < 127)
    assert np.all(np.abs(got - real)[inside] <= 0.5 * s_o * (1 + 1e-6) + 1e-12)
    assert np.all(real[y == 127] >= s_o * (126.5 - z_o) - 1e-9)
    assert inside.sum() > y.size // 3


def spec_affine(xq, s_x, z_x, alpha, beta, s_t, z_t):
    """The integer v and (M, S) of the affine, from the spec."""
    k = z_x + 128 if z_x >= 0 else z_x - 127
    s = max(abs(alpha * s_x), abs(beta / k)) / 8192.0
    if s == 0.0:
        s = s_x
    d, db = away(alpha * s_x / s), away(beta / (s * k))
    assert abs(d) <= 8192 and abs(db) <= 8192
    m, sh = spec_mult(s / s_t)
    return [d * (int(v) - z_x) + db * k for v in xq], m, sh, s, k


AFFINE = [  # (s_x, z_x)
    (0.05, 0), (0.08, -128), (0.03, 127), (0.11, -1), (0.02, 60)]


@pytest.mark.parametrize("case", range(len(AFFINE)))
def test_hardsigmoid_hardswish_sigmoid_silu(tmp_path, case):
    s_x, z_x = AFFINE[case]
    x = all_int8((1, 1, 256))
    flat = [int(v) for v in x.ravel()]
    xr = torch.from_numpy(s_x * (x.astype(np.float64) - z_x))
    hs_o = (1 / 255, -128)
    lo, hi = min(-0.4, s_x * (-128 - z_x)), max(0.0, s_x * (127 - z_x))  # x * gate in [-0.375, max x]
    sw_o = ((hi - lo) / 255, int(np.clip(round(-128 - lo / ((hi - lo) / 255)), -128, 127)))
    layers = [{"type": "affine", "name": "hs", "inputs": ["input"], "alpha": 1 / 6, "beta": 0.5,
               "activation": "none", "output": {"scale": hs_o[0], "zero_point": hs_o[1]}},
              {"type": "mul", "name": "hswish", "inputs": ["input", "hs"], "output": {"scale": sw_o[0], "zero_point": sw_o[1]}},
              {"type": "affine", "name": "sig", "inputs": ["input"], "alpha": 1.0, "activation": "sigmoid"},
              {"type": "mul", "name": "silu", "inputs": ["input", "sig"], "output": {"scale": sw_o[0], "zero_point": sw_o[1]}},
              {"type": "concat", "name": "out", "inputs": ["hswish", "silu"], "output": {"scale": sw_o[0], "zero_point": sw_o[1]}}]
    path = write_model(tmp_path, (1, 1, 256), s_x, z_x, layers)
    model = json.loads(path.read_text())
    outs = {}
    for last in ("hs", "hswish", "sig", "silu"):  # each layer's output: the model cut after it
        keep = [l for l in model["layers"] if l["name"] in {"hs": ["hs"], "hswish": ["hs", "hswish"], "sig": ["sig"],
                                                             "silu": ["sig", "silu"]}[last]]
        p = tmp_path / f"{last}.json"
        p.write_text(json.dumps({**model, "layers": keep}))
        outs[last] = ref.run(p, x).ravel().astype(np.int64)

    # HardSigmoid: the spec's integers, and PyTorch's F.hardsigmoid within half a step plus the factors' rounding
    v, m, sh, s, k = spec_affine(flat, s_x, z_x, 1 / 6, 0.5, *hs_o)
    assert [spec_q(a, m, sh, hs_o[1]) for a in v] == list(outs["hs"])
    want = F.hardsigmoid(xr).numpy().ravel()
    got = hs_o[0] * (outs["hs"] - hs_o[1])
    bound = 0.5 * hs_o[0] + 0.5 * s * (abs(k) + np.abs(np.array(flat) - z_x)) + 1e-9
    assert np.all(np.abs(got - want) <= bound)
    # hard-swish: x * hs(x) requantized, against F.hardswish (hs's error times |x|, half a step)
    got = sw_o[0] * (outs["hswish"] - sw_o[1])
    want = F.hardswish(xr).numpy().ravel()
    inside = (outs["hswish"] > -128) & (outs["hswish"] < 127)
    assert np.all((np.abs(got - want) <= 0.5 * sw_o[0] + np.abs(xr.numpy().ravel()) * bound + 1e-9)[inside])
    # Sigmoid: v = 8192 (x - z), requantized to 1/16, then the table; against torch.sigmoid
    v, m, sh, s, k = spec_affine(flat, s_x, z_x, 1.0, 0.0, 1 / 16, 0)
    assert [sigmoid_table(spec_q(a, m, sh, 0)) for a in v] == list(outs["sig"])
    want = torch.sigmoid(xr).numpy().ravel()
    assert np.all(np.abs(outs["sig"] / 127 - want) <= 1 / 128 + 1 / 254 + 1e-9)
    # SiLU: x * sigmoid(x), against F.silu
    got = sw_o[0] * (outs["silu"] - sw_o[1])
    want = F.silu(xr).numpy().ravel()
    inside = (outs["silu"] > -128) & (outs["silu"] < 127)
    assert np.all((np.abs(got - want) <= 0.5 * sw_o[0] + np.abs(xr.numpy().ravel()) * (1 / 128 + 1 / 254) + 1e-9)[inside])
    assert inside.sum() > 64


def test_mul_shape_errors(tmp_path):
    layers = [{"type": "flatten", "name": "f"},
              {"type": "mul", "name": "m", "inputs": ["input", "f"], "output": {"scale": 1.0, "zero_point": 0}}]
    with pytest.raises(ValueError, match="inputs of shapes"):
        ref.run(write_model(tmp_path, (2, 2, 2), 0.5, 0, layers), np.zeros((1, 2, 2, 2), dtype=np.int8))
