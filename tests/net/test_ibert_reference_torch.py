"""tools/int8_reference.py's integer softmax, LayerNorm and GELU (docs/quantization.md, "Integer
softmax, LayerNorm and GELU") against the spec's formulas written out here again in plain Python
ints, one value at a time, and their float meaning against PyTorch (torch.softmax,
F.layer_norm, F.gelu) on the dequantized inputs, with the error bounds the doc's table reports.

Run with /usr/bin/python3 -m pytest (Debian's python3-torch and python3-pytest).
"""
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


def clamp(v, lo, hi):
    return min(hi, max(lo, v))


def sat32(v):
    return clamp(v, -2 ** 31, 2 ** 31 - 1)


def q(v, regs):
    r = (1 << (regs.s - 1)) if regs.s > 0 else 0
    return clamp(((v * regs.m + r) >> regs.s) + regs.z, -128, 127)


def spec_softmax(token, regs):
    mx = max(token)
    es = []
    for x in token:
        p = min((x - mx) * 2 ** regs.sh, 0)
        k = max(regs.k0, 1)
        z = (-p) // k
        t = sat32(p + z * k + regs.k1)
        big = max(t * t + regs.k2, 0)
        es.append(0 if z >= 63 else min(big >> z, 2 ** 39 - 1))
    total = sum(es)
    recip = 0 if total == 0 else 2 ** 62 // total
    return [q(min((e * recip) >> 32, 2 ** 31 - 1), regs) for e in es]


def spec_isqrt(n):
    return math.isqrt(n)  # Python's exact integer square root, not the Newton loop under test


def spec_layernorm(token, regs):
    d = len(token)
    mean = (sum(token) * 32 + d) // (2 * d)
    ys = [x * 16 - mean for x in token]
    sq = spec_isqrt(max(sum(y * y for y in ys) + regs.k0, 0))
    recip = 2 ** 32 // max(sq, 1)
    return [q((y * recip) >> 16, regs) for y in ys]


def spec_gelu(x, regs):
    qx = sat32((x - regs.k2) * 2 ** regs.sh)
    k = max(regs.k0, 0)
    u = min(abs(qx), k) - k
    sign = (qx > 0) - (qx < 0)
    w = sat32(regs.k1 + sign * (regs.k1 - u * u))
    return q(qx * w, regs)


def quantized(rng, shape, mu, sigma):
    x = rng.normal(mu, sigma, shape)
    s = float(np.abs(x).max()) / 127
    return np.clip(np.round(x / s), -128, 127).astype(np.int64), s


@pytest.mark.parametrize("sigma,d", [(1.0, 32), (4.0, 96)])
def test_softmax_bits_and_accuracy(sigma, d):
    rng = np.random.default_rng(int(sigma * 10) + d)
    xq, s = quantized(rng, (64, d), 0.0, sigma)
    xq[0] = 5  # one value: the uniform softmax
    regs = ref.softmax_constants(s)
    got = ref.softmax_int(xq, regs)
    assert got.tolist() == [spec_softmax(t, regs) for t in xq.tolist()]
    want = torch.softmax(torch.tensor(xq * s), -1).numpy()
    err = np.abs((got + 128) / 256 - want)
    assert err.max() <= 1.0 / 256  # within one output step (the doc's table: 0.0023)
    assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.999


@pytest.mark.parametrize("mu,sigma,d", [(0.5, 1.0, 128), (0.0, 0.2, 32), (-2.0, 3.0, 48)])
def test_layernorm_bits_and_accuracy(mu, sigma, d):
    rng = np.random.default_rng(d)
    xq, s = quantized(rng, (64, d), mu, sigma)
    xq[0] = -7  # zero variance: eps alone
    so = 5.0 / 127
    regs = ref.layernorm_constants(s, d, so)
    got = ref.layernorm_int(xq, regs)
    assert got.tolist() == [spec_layernorm(t, regs) for t in xq.tolist()]
    want = F.layer_norm(torch.tensor(xq * s), (d,)).numpy()
    inside = np.abs(want) < 5.0  # beyond, the int8 output saturates
    err = np.abs(got * so - want)[inside]
    assert err.max() < 0.03  # the doc's table: 0.021-0.022
    assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.9998


def test_isqrt_newton_is_the_floor_square_root():
    values = list(range(0, 5000)) + [2 ** 48 - 1, 2 ** 48, 10 ** 14 + 7, 2 ** 62 - 1]
    assert [ref.isqrt_newton(v) for v in values] == [math.isqrt(v) for v in values]


@pytest.mark.parametrize("sigma,zero", [(1.0, 0), (3.0, -3)])
def test_gelu_bits_and_accuracy(sigma, zero):
    rng = np.random.default_rng(int(sigma))
    xq, s = quantized(rng, (64, 128), 0.0, sigma)
    xq = np.clip(xq + zero, -128, 127)
    want = F.gelu(torch.tensor((xq - zero) * s)).numpy()
    so = float(want.max()) / 127
    regs = ref.gelu_constants(s, zero, so, 0)
    got = ref.gelu_int(xq, regs)
    assert got.tolist() == [[spec_gelu(x, regs) for x in row] for row in xq.tolist()]
    err = np.abs(got * so - want)
    assert err.max() < 0.06  # the doc's table: 0.030 and 0.053
    assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.9997


def test_gelu_every_int8_value():
    """All 256 inputs at a realistic scale, with the register extremes sh = 15 and 0."""
    for s, zero in ((0.05, 0), (0.5, 10)):
        regs = ref.gelu_constants(s, zero, 0.04, -5)
        xs = np.arange(-128, 128)
        assert ref.gelu_int(xs, regs).tolist() == [spec_gelu(x, regs) for x in xs.tolist()]
    odd = ref.NormRegs(15, -5, 2 ** 31 - 1, -(2 ** 31), 2 ** 31 - 1, 62, 0)
    xs = np.arange(-128, 128)
    assert ref.gelu_int(xs, odd).tolist() == [spec_gelu(x, odd) for x in xs.tolist()]
