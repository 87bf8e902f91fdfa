"""tools/int8_reference.py's CNN layers against PyTorch (Debian's python3-torch).

The integer quantities of the layers of docs/quantization.md's graph form
(depthwise conv2d, max-pool with padding, average pooling, global average
pooling, add, concat) are computed here independently: the window sums and
accumulators by torch (conv2d with groups, max_pool2d, avg_pool2d) in float64
on the zero-point-shifted integers, which is exact (every sum is far below
2^53), the requantization q(a) = sat8(((a*M + r) >> S) + Z) and the derivation
of (M, S) from the spec's rule written out again below, and add's formula in
plain Python ints (concat's too). Every case goes through a model.json written to tmp_path
and int8_reference.run, so the model-format path (graph inputs, defaults) is
covered too. The last tests check the example networks programs/nets/resnet_mini
and mobilenet_mini: the committed files are what tools/make_cnn_nets.py
generates, and their int8 outputs track the float model (run by torch).

  /usr/bin/python3 -m pytest -q tests/net/test_cnn_reference_torch.py
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import int8_reference as ref  # noqa: E402
import make_cnn_nets  # noqa: E402

torch.set_num_threads(1)

# ---------------------------------------------------------------------------
# The spec, written out independently of tools/int8_reference.py


def spec_mult(real):
    """(M, S) of docs/quantization.md section 1 for a real multiplier."""
    f, e = math.frexp(real)
    m = math.floor(f * 2 ** 31 + 0.5)
    s = 31 - e
    if m == 2 ** 31:
        m, s = 2 ** 30, s - 1
    if s > 62:
        s, m = 62, math.floor(real * 2 ** 62 + 0.5)
    assert 0 <= s <= 62
    return m, s


def spec_q(acc, real, z):
    """q(acc) for a real multiplier: int64 torch arithmetic, exact (|acc * M| < 2^63)."""
    m, s = spec_mult(real)
    a = torch.as_tensor(np.asarray(acc, dtype=np.int64))
    r = (1 << (s - 1)) if s > 0 else 0
    y = ((a * m + r) >> s) + z
    return torch.clamp(y, -128, 127).numpy().astype(np.int64)


def spec_q_int(acc, m, s, z):
    """q(acc) with plain Python ints."""
    r = (1 << (s - 1)) if s > 0 else 0
    return min(127, max(-128, ((acc * m + r) >> s) + z))


def wrap32(a):
    a = np.asarray(a, dtype=np.int64)
    return ((a + 2 ** 31) % 2 ** 32) - 2 ** 31


def spec_pads(padding, h, w, kh, kw, sh, sw):
    """(top, bottom, left, right): "same" is TensorFlow's (output ceil(in / stride), the odd
    row/column at the bottom/right)."""
    if padding is None or padding == "valid":
        return 0, 0, 0, 0
    if padding == "same":
        def one(n, k, s):
            total = max((math.ceil(n / s) - 1) * s + k - n, 0)
            return total // 2, total - total // 2
        return (*one(h, kh, sh), *one(w, kw, sw))
    if isinstance(padding, int):
        return (padding,) * 4
    if len(padding) == 2:
        return padding[0], padding[0], padding[1], padding[1]
    return tuple(padding)


def nchw(x):
    """(B, H, W, C) numpy -> float64 NCHW torch."""
    return torch.from_numpy(np.ascontiguousarray(np.asarray(x, dtype=np.float64).transpose(0, 3, 1, 2)))


def nhwc(t):
    return t.permute(0, 2, 3, 1).numpy()


def padded(t, pads, value=0.0):
    top, bottom, left, right = pads
    return F.pad(t, (left, right, top, bottom), value=value)


def exact_int(t):
    """A float64 torch result that is an integer (sums of integers far below 2^53; an
    average times its count within a few ulps of one), as int64 numpy."""
    a = nhwc(t) if t.dim() == 4 else t.numpy()
    r = np.round(a)
    assert np.all(np.abs(r - a) < 1e-6), "torch float64 sums are not integers"
    return r.astype(np.int64)


def pair(v, default):
    v = default if v is None else v
    return (v, v) if isinstance(v, int) else tuple(v)


# ---------------------------------------------------------------------------
# Model files


def write_model(tmp_path, shape, scale, zero_point, layers, arrays=None):
    for name, a in (arrays or {}).items():
        np.save(tmp_path / name, a)
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"format": "tpu-sim-net", "version": 1, "name": "t",
                                "input": {"shape": list(shape), "scale": scale, "zero_point": zero_point},
                                "layers": layers}))
    return path


def rand_int8(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


# ---------------------------------------------------------------------------
# Depthwise conv2d

DEPTHWISE = [
    # (H, W, C, (KH, KW), stride, padding, activation, z_in)
    (6, 6, 3, (3, 3), None, "same", "relu", -128),
    (7, 5, 4, (3, 3), [2, 2], "same", "none", 17),
    (8, 8, 2, (3, 3), 2, 1, "relu", 0),
    (9, 7, 5, (2, 3), [2, 1], "same", "none", -5),
    (5, 6, 3, (5, 5), [1, 1], [2, 1], "none", 100),
    (6, 5, 2, (3, 2), [3, 2], [1, 2, 0, 1], "relu", -77),
    (4, 4, 6, (1, 1), None, None, "none", 3),
    (3, 3, 4, (3, 3), None, "valid", "relu", -128),
    (1, 1, 8, (3, 3), None, "same", "none", 9),
    (10, 3, 3, (4, 1), [3, 1], "same", "relu", 127),
    (5, 5, 1, (3, 3), [2, 2], [3, 3, 3, 3], "none", -1),
]


@pytest.mark.parametrize("case", range(len(DEPTHWISE)))
def test_depthwise_conv2d(tmp_path, case):
    h, w, c, (kh, kw), stride, padding, act, zin = DEPTHWISE[case]
    rng = np.random.default_rng(1000 + case)
    batch = 3
    x = rand_int8(rng, (batch, h, w, c))
    wq = rng.integers(-127, 128, size=(kh, kw, 1, c)).astype(np.int8)
    bias = rng.integers(-3000, 3000, size=c).astype(np.int32)
    sh, sw = pair(stride, 1)
    pads = spec_pads(padding, h, w, kh, kw, sh, sw)

    # torch: a grouped convolution of the shifted integers, padding 0 (= the zero point)
    weight = torch.from_numpy(wq.astype(np.float64).transpose(3, 2, 0, 1).copy())  # (C, 1, KH, KW)
    acc = exact_int(F.conv2d(padded(nchw(x.astype(np.int64) - zin), pads), weight, stride=(sh, sw), groups=c))
    acc = wrap32(acc + bias)

    s_in, s_w = float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.001, 0.02))
    s_out = s_in * s_w * max(1, int(np.abs(acc).max())) / float(rng.uniform(60, 200))
    z_out = -128 if act == "relu" else int(rng.integers(-20, 20))
    layer = {"type": "conv2d", "name": "dw", "weights": "w.npy", "bias": "b.npy", "weight_scale": s_w,
             "groups": c, "activation": act, "output": {"scale": s_out, "zero_point": z_out}}
    if stride is not None:
        layer["stride"] = stride
    if padding is not None:
        layer["padding"] = padding
    model = write_model(tmp_path, (h, w, c), s_in, zin, [layer], {"w.npy": wq, "b.npy": bias})
    y = ref.run(model, x)

    expect = spec_q(acc, s_in * s_w / s_out, z_out)
    if act == "relu":
        expect = np.maximum(expect, z_out)
    assert y.dtype == np.int8 and y.shape == acc.shape
    np.testing.assert_array_equal(y, expect)
    assert len(np.unique(y)) > 5, "a degenerate case: the output is (nearly) constant"

    # int32 output: the accumulators themselves
    layer["output"] = "int32"
    layer["activation"] = "none"
    model = write_model(tmp_path, (h, w, c), s_in, zin, [layer])
    np.testing.assert_array_equal(ref.run(model, x), acc)


def test_depthwise_is_a_diagonal_convolution(tmp_path):
    """groups = C equals the full convolution with diagonal weights W[dy][dx][k][k] = K[dy][dx][k]."""
    rng = np.random.default_rng(7)
    x = rand_int8(rng, (2, 7, 6, 5))
    k = rng.integers(-127, 128, size=(3, 3, 1, 5)).astype(np.int8)
    full = np.zeros((3, 3, 5, 5), dtype=np.int8)
    for i in range(5):
        full[:, :, i, i] = k[:, :, 0, i]
    base = {"type": "conv2d", "name": "c", "weight_scale": 0.01, "stride": 2, "padding": "same",
            "output": "int32"}
    m1 = write_model(tmp_path, (7, 6, 5), 0.02, -9, [{**base, "weights": "k.npy", "groups": 5}],
                     {"k.npy": k, "full.npy": full})
    y1 = ref.run(m1, x)
    m2 = write_model(tmp_path, (7, 6, 5), 0.02, -9, [{**base, "weights": "full.npy"}])
    np.testing.assert_array_equal(y1, ref.run(m2, x))


# ---------------------------------------------------------------------------
# Max-pool with padding

MAXPOOL = [
    # (H, W, C, pool, stride, padding)
    (16, 16, 3, [3, 3], [2, 2], 1),
    (7, 7, 2, 3, 2, "same"),
    (6, 5, 4, [2, 3], [1, 2], [1, 0]),
    (5, 6, 2, 2, 1, [0, 1, 1, 0]),
    (9, 8, 3, [3, 2], None, "same"),
    (5, 5, 1, 2, None, None),
    (4, 7, 3, [4, 4], [3, 3], [1, 2, 2, 1]),
    (3, 3, 2, 3, 1, "valid"),
]
# windows wholly in the padding: the spec's rule gives z_in
MAXPOOL_EMPTY = [
    (4, 4, 2, 2, 2, [2, 0, 0, 0]),
    (3, 5, 3, [1, 2], [1, 2], [0, 0, 3, 3]),
    (2, 2, 1, 1, 1, 1),
]


@pytest.mark.parametrize("case", range(len(MAXPOOL) + len(MAXPOOL_EMPTY)))
def test_maxpool2d_padding(tmp_path, case):
    h, w, c, pool, stride, padding = (MAXPOOL + MAXPOOL_EMPTY)[case]
    rng = np.random.default_rng(2000 + case)
    zin = int(rng.integers(-128, 128))
    x = rand_int8(rng, (3, h, w, c))
    kh, kw = pair(pool, None)
    sh, sw = pair(stride, (kh, kw))
    pads = spec_pads(padding, h, w, kh, kw, sh, sw)
    t = F.max_pool2d(padded(nchw(x), pads, -math.inf), (kh, kw), (sh, sw))
    a = nhwc(t)
    empty = np.isneginf(a)
    assert np.any(empty) == (case >= len(MAXPOOL))
    expect = np.where(empty, zin, a).astype(np.int64)
    if isinstance(padding, int) and 2 * padding <= min(kh, kw):  # torch's own padding: -inf too
        np.testing.assert_array_equal(nhwc(F.max_pool2d(nchw(x), (kh, kw), (sh, sw), padding)), a)

    layer = {"type": "maxpool2d", "name": "p", "pool": pool}
    if stride is not None:
        layer["stride"] = stride
    if padding is not None:
        layer["padding"] = padding
    model = write_model(tmp_path, (h, w, c), 0.05, zin, [layer])
    if case >= len(MAXPOOL):
        try:
            y = ref.run(model, x)
        except ValueError as e:  # the reference may forbid padding >= the window
            pytest.skip(f"tools/int8_reference.py rejects a window wholly in the padding: {e}")
    else:
        y = ref.run(model, x)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, expect)


# ---------------------------------------------------------------------------
# Average pooling

AVGPOOL = [
    # (H, W, C, pool, stride, padding, output given)
    (8, 8, 4, [3, 3], [1, 1], 1, True),
    (7, 7, 3, 2, None, None, True),
    (9, 6, 2, [3, 2], [2, 1], "same", True),
    (5, 5, 5, 3, 2, [1, 0, 2, 1], False),
    (6, 7, 3, [2, 3], [2, 3], [1, 1], True),
    (4, 4, 16, 4, None, "valid", False),
    (5, 3, 2, [5, 3], 1, "same", True),
    (6, 6, 2, 3, 3, [2, 2, 2, 2], True),
]


@pytest.mark.parametrize("case", range(len(AVGPOOL)))
def test_avgpool2d(tmp_path, case):
    h, w, c, pool, stride, padding, has_output = AVGPOOL[case]
    rng = np.random.default_rng(3000 + case)
    zin = int(rng.integers(-128, 128))
    s_in = float(rng.uniform(0.005, 0.1))
    x = rand_int8(rng, (3, h, w, c))
    kh, kw = pair(pool, None)
    sh, sw = pair(stride, (kh, kw))
    pads = spec_pads(padding, h, w, kh, kw, sh, sw)
    k = kh * kw
    xs = padded(nchw(x.astype(np.int64) - zin), pads)  # padded positions add 0 and count in K
    sums = exact_int(F.avg_pool2d(xs, (kh, kw), (sh, sw), count_include_pad=True) * k)
    ones = torch.ones((c, 1, kh, kw), dtype=torch.float64)
    np.testing.assert_array_equal(exact_int(F.conv2d(xs, ones, stride=(sh, sw), groups=c)), sums)

    layer = {"type": "avgpool2d", "name": "a", "pool": pool}
    if stride is not None:
        layer["stride"] = stride
    if padding is not None:
        layer["padding"] = padding
    if has_output:
        s_out, z_out = s_in * float(rng.uniform(0.3, 1.5)), int(rng.integers(-30, 30))
        layer["output"] = {"scale": s_out, "zero_point": z_out}
    else:
        s_out, z_out = s_in, zin  # default: the input's
    y = ref.run(write_model(tmp_path, (h, w, c), s_in, zin, [layer]), x)
    expect = spec_q(sums, s_in / (k * s_out), z_out)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, expect)

    # the float view: s_out * (y - z_out) is the window mean of the real values within half
    # an output step (and the multiplier's rounding), where not saturated
    mean = s_in * sums / k
    inside = (expect > -128) & (expect < 127)
    err = np.abs(s_out * (y.astype(np.float64) - z_out) - mean)[inside]
    assert np.all(err <= s_out * (0.5 + 1e-6))


@pytest.mark.parametrize("shape", [(1, 1, 3), (7, 5, 3), (16, 16, 8), (4, 4, 16), (3, 9, 2)])
@pytest.mark.parametrize("has_output", [True, False])
def test_global_avgpool2d(tmp_path, shape, has_output):
    h, w, c = shape
    rng = np.random.default_rng(4000 + h * 100 + w * 10 + c + has_output)
    zin = int(rng.integers(-128, 128))
    s_in = float(rng.uniform(0.005, 0.1))
    x = rand_int8(rng, (4, h, w, c))
    xs = nchw(x.astype(np.int64) - zin)
    sums = exact_int(torch.sum(xs, dim=(2, 3), keepdim=True))
    np.testing.assert_array_equal(exact_int(F.avg_pool2d(xs, (h, w)) * (h * w)), sums)
    layer = {"type": "global_avgpool2d", "name": "g"}
    if has_output:
        s_out, z_out = s_in * float(rng.uniform(0.05, 0.5)), int(rng.integers(-30, 30))
        layer["output"] = {"scale": s_out, "zero_point": z_out}
    else:
        s_out, z_out = s_in, zin
    expect = spec_q(sums, s_in / (h * w * s_out), z_out)
    y = ref.run(write_model(tmp_path, shape, s_in, zin, [layer]), x)
    assert y.shape == (4, 1, 1, c) and y.dtype == np.int8
    np.testing.assert_array_equal(y, expect)
    # followed by flatten: (B, C)
    y2 = ref.run(write_model(tmp_path, shape, s_in, zin, [layer, {"type": "flatten"}]), x)
    np.testing.assert_array_equal(y2, expect.reshape(4, c))


def test_pool_chain_graph_defaults(tmp_path):
    """avgpool2d (no output: the input's) -> maxpool2d -> global_avgpool2d, with the default
    inputs and an explicit "input" name; the quantization flows through as the spec says."""
    rng = np.random.default_rng(5)
    zin, s_in = -100, 0.03
    x = rand_int8(rng, (2, 9, 9, 3))
    layers = [{"type": "avgpool2d", "name": "a", "inputs": ["input"], "pool": 3, "stride": 1, "padding": "same"},
              {"type": "maxpool2d", "name": "m", "pool": 2, "padding": "same"},
              {"type": "global_avgpool2d", "name": "g", "output": {"scale": 0.01, "zero_point": 5}}]
    y = ref.run(write_model(tmp_path, (9, 9, 3), s_in, zin, layers), x)

    xs = padded(nchw(x.astype(np.int64) - zin), (1, 1, 1, 1))
    a = spec_q(exact_int(F.avg_pool2d(xs, 3, 1) * 9), s_in / (9 * s_in), zin)
    mp = nhwc(F.max_pool2d(padded(nchw(a), (0, 1, 0, 1), -math.inf), 2, 2)).astype(np.int64)
    sums = (mp - zin).sum(axis=(1, 2), keepdims=True)  # maxpool keeps (s_in, z_in)
    np.testing.assert_array_equal(y, spec_q(sums, s_in / (25 * 0.01), 5))


# ---------------------------------------------------------------------------
# Add


def spec_add_weights(s_a, s_b):
    s_hi, s_lo = max(s_a, s_b), min(s_a, s_b)
    d_lo = min(127, max(1, math.floor(127 * s_lo / s_hi + 0.5)))
    return (127, d_lo) if s_a >= s_b else (d_lo, 127)


def add_model(tmp_path, shape, s_in, s_a, z_a, s_b, z_b, s_o, z_o, act, swap=False):
    """input (H, W, 2C), z_in 0 -> A = 1x1 conv taking channels [0, C), B = channels [C, 2C)
    (weight 1, no bias), each with its own quantization -> add(A, B) (or add(B, A))."""
    h, w, c = shape
    sel_a = np.zeros((1, 1, 2 * c, c), dtype=np.int8)
    sel_b = np.zeros((1, 1, 2 * c, c), dtype=np.int8)
    for i in range(c):
        sel_a[0, 0, i, i] = 1
        sel_b[0, 0, c + i, i] = 1
    layers = [
        {"type": "conv2d", "name": "A", "weights": "a.npy", "weight_scale": s_a / s_in,
         "output": {"scale": s_a, "zero_point": z_a}},
        {"type": "conv2d", "name": "B", "inputs": ["input"], "weights": "b.npy", "weight_scale": s_b / s_in,
         "output": {"scale": s_b, "zero_point": z_b}},
        {"type": "add", "name": "sum", "inputs": ["B", "A"] if swap else ["A", "B"],
         "output": {"scale": s_o, "zero_point": z_o}},
    ]
    if act is not None:
        layers[-1]["activation"] = act
    return write_model(tmp_path, (h, w, 2 * c), s_in, 0, layers, {"a.npy": sel_a, "b.npy": sel_b})


def branch(x, s_in, s_w, s_out, z_out):
    """A 1x1 selection conv's output by the spec (acc = x - 0, m = s_in * s_w / s_out)."""
    return spec_q(x.astype(np.int64), s_in * s_w / s_out, z_out)


ADD = [
    # (s_a, z_a, s_b, z_b, activation, swap)
    (0.02, 0, 0.02, 0, None, False),          # equal scales: both weigh 127
    (0.05, -10, 0.013, 7, "none", False),
    (0.011, 30, 0.047, -128, "relu", False),
    (0.02, -128, 0.0199, -128, "relu", True),
    (0.3, 3, 0.0007, -5, "none", False),      # ratio > 254: the smaller weighs max(1, 0) = 1
    (0.004, 12, 0.9, 0, "relu", True),        # ratio 225: d_lo = floor(0.564 + 0.5) = 1
    (0.1, -50, 0.05, 50, "none", True),       # ratio exactly 2: d_lo = floor(63.5 + 0.5) = 64
]


@pytest.mark.parametrize("case", range(len(ADD)))
def test_add(tmp_path, case):
    s_a, z_a, s_b, z_b, act, swap = ADD[case]
    rng = np.random.default_rng(6000 + case)
    h, w, c = 3, 4, 5
    s_in = 0.01
    x = rand_int8(rng, (2, h, w, 2 * c))
    a = branch(x[..., :c], s_in, s_a / s_in, s_a, z_a)
    b = branch(x[..., c:], s_in, s_b / s_in, s_b, z_b)
    real = s_a * (a - z_a) + s_b * (b - z_b)
    if act == "relu":
        real = np.maximum(real, 0.0)
    lo, hi = min(real.min(), 0.0), max(real.max(), 0.0)
    s_o = (hi - lo) / 255 * float(rng.uniform(0.7, 1.1))  # some saturation
    z_o = -128 if act == "relu" else int(np.clip(round(-128 - lo / s_o), -128, 127))
    y = ref.run(add_model(tmp_path, (h, w, c), s_in, s_a, z_a, s_b, z_b, s_o, z_o, act, swap), x)
    assert y.dtype == np.int8 and y.shape == a.shape

    # the spec's formula, element by element in plain Python ints
    d_a, d_b = spec_add_weights(s_a, s_b)
    if s_a == s_b:
        assert (d_a, d_b) == (127, 127)
    m, s = spec_mult((max(s_a, s_b) / 127) / s_o)
    for idx in np.ndindex(*a.shape):
        acc = d_a * (int(a[idx]) - z_a) + d_b * (int(b[idx]) - z_b)
        q = spec_q_int(acc, m, s, z_o)
        if act == "relu":
            q = max(q, z_o)
        assert int(y[idx]) == q, (idx, int(a[idx]), int(b[idx]), acc)

    # float closeness: the smaller scale's input is weighed d_lo * s_hi / 127 instead of s_lo,
    # and q rounds to half an output step (the multiplier's own rounding is < 2^-30 relative)
    s_hi, s_lo = max(s_a, s_b), min(s_a, s_b)
    d_lo = min(d_a, d_b) if s_a != s_b else 127
    v_lo = b - z_b if s_a >= s_b else a - z_a
    bound = 0.5 * s_o + np.abs(v_lo) * abs(d_lo * s_hi / 127 - s_lo) + 1e-9
    got = s_o * (y.astype(np.float64) - z_o)
    inside = (y > -128) & (y < 127)
    assert np.all(np.abs(got - real)[inside] <= bound[inside])
    assert np.all(real[y == 127] >= s_o * (126.5 - z_o) - bound[y == 127])
    assert np.all(real[y == -128] <= s_o * (-127.5 - z_o) + bound[y == -128])
    assert inside.sum() > a.size // 2


def find_d_lo_order_case():
    """Scales where the spec's floor(127 * s_lo / s_hi + 0.5) differs from the same rounding
    of 127 * (s_lo / s_hi): the evaluation order is part of the spec."""
    rng = np.random.default_rng(11)
    for _ in range(200000):
        s_hi = float(rng.uniform(0.01, 1.0))
        k = int(rng.integers(1, 126))
        s_lo = (k + 0.5) * s_hi / 127
        for ulps in range(-3, 4):
            t = s_lo
            for _ in range(abs(ulps)):
                t = math.nextafter(t, math.inf if ulps > 0 else -math.inf)
            if math.floor(127 * t / s_hi + 0.5) != math.floor(127 * (t / s_hi) + 0.5):
                return s_hi, t
    raise AssertionError("no case found")


CONCAT = [
    # (s_a, z_a, s_b, z_b): the output quantization is set from the concatenated range
    (0.02, 0, 0.02, 0),            # equal scales: both weigh 127
    (0.05, -10, 0.013, 7),          # A has the largest scale: also the exact copy
    (0.004, 12, 0.9, -128),        # ratio 225: the smaller weighs 1
]


@pytest.mark.parametrize("case", range(len(CONCAT)))
def test_concat(tmp_path, case):
    """concat(A, B, input) along channels against the spec's formula and against torch.cat of the
    dequantized parts; with the output quantization equal to A's (the largest scale), A's channels
    are copied exactly."""
    s_a, z_a, s_b, z_b = CONCAT[case]
    rng = np.random.default_rng(7000 + case)
    h, w, c = 3, 4, 5
    s_in = 0.01
    x = rand_int8(rng, (2, h, w, 2 * c))
    a = branch(x[..., :c], s_in, s_a / s_in, s_a, z_a)
    b = branch(x[..., c:], s_in, s_b / s_in, s_b, z_b)
    real = torch.cat([torch.from_numpy(s_a * (a - z_a)), torch.from_numpy(s_b * (b - z_b)),
                      torch.from_numpy(s_in * x.astype(np.float64))], dim=-1).numpy()
    # A's channels are copied exactly when A has the output's quantization and the largest scale.
    for exact in (False, True) if s_a >= max(s_b, s_in) else (False,):
        if exact:
            s_o, z_o = s_a, z_a
        else:
            lo, hi = min(real.min(), 0.0), max(real.max(), 0.0)
            s_o = (hi - lo) / 255
            z_o = int(np.clip(round(-128 - lo / s_o), -128, 127))
        path = add_model(tmp_path, (h, w, c), s_in, s_a, z_a, s_b, z_b, s_o, z_o, None)
        model = json.loads(path.read_text())
        model["layers"][-1] = {"type": "concat", "name": "cat", "inputs": ["A", "B", "input"],
                               "output": {"scale": s_o, "zero_point": z_o}}
        path.write_text(json.dumps(model))
        y = ref.run(path, x)
        assert y.dtype == np.int8 and y.shape == (2, h, w, 4 * c)
        s_hi = max(s_a, s_b, s_in)
        m, s = spec_mult((s_hi / 127) / s_o)
        parts = [(a, s_a, z_a), (b, s_b, z_b), (x, s_in, 0)]
        at = 0
        for v, sv, zv in parts:
            d = min(127, max(1, math.floor(127 * sv / s_hi + 0.5)))
            for idx in np.ndindex(*v.shape):
                q = spec_q_int(d * (int(v[idx]) - zv), m, s, z_o)
                assert int(y[idx[:-1] + (at + idx[-1],)]) == q, (idx, int(v[idx]))
            at += v.shape[-1]
        if exact:
            assert np.array_equal(y[..., :c], a)
        else:
            # float closeness: half an output step, plus the factor's error for the smaller scales
            got = s_o * (y.astype(np.float64) - z_o)
            bound = np.concatenate([0.5 * s_o + np.abs(v.astype(np.int64) - zv) * abs(
                min(127, max(1, math.floor(127 * sv / s_hi + 0.5))) * s_hi / 127 - sv) + 1e-9
                for v, sv, zv in parts], axis=-1)
            inside = (y > -128) & (y < 127)
            bad = np.argwhere(inside & (np.abs(got - real) > bound))
            assert len(bad) == 0, [(tuple(i), got[tuple(i)], real[tuple(i)], bound[tuple(i)]) for i in bad[:3]]
            assert inside.sum() > y.size // 2


def test_add_weight_rounding_order(tmp_path):
    s_hi, s_lo = find_d_lo_order_case()
    d_lo = min(127, max(1, math.floor(127 * s_lo / s_hi + 0.5)))
    d_other = math.floor(127 * (s_lo / s_hi) + 0.5)
    rng = np.random.default_rng(12)
    c, s_in = 4, 0.01
    x = np.zeros((2, 2, 2, 2 * c), dtype=np.int8)  # a = 0: the output is d_lo * b, requantized
    x[..., c:] = rng.integers(-100, 101, size=(2, 2, 2, c))
    s_o = (s_hi / 127) / 0.02  # m = 0.02: d_lo * b fits int8 and moves by about 2 * b / 100 with d_lo
    y = ref.run(add_model(tmp_path, (2, 2, c), s_in, s_hi, 0, s_lo, 0, s_o, 0, "none"), x)
    a = branch(x[..., :c], s_in, s_hi / s_in, s_hi, 0)
    b = branch(x[..., c:], s_in, s_lo / s_in, s_lo, 0)
    m, s = spec_mult((s_hi / 127) / s_o)

    def expect(d):
        return np.array([spec_q_int(127 * int(p) + d * int(r), m, s, 0)
                         for p, r in zip(a.ravel(), b.ravel())]).reshape(a.shape)
    assert not np.array_equal(expect(d_lo), expect(d_other))  # the case tells the orders apart
    assert np.all(np.abs(expect(d_lo)) < 127)
    np.testing.assert_array_equal(y, expect(d_lo))


def test_add_and_avgpool_multiplier_order(tmp_path, monkeypatch):
    """The real multipliers handed to requant_params are the spec's expressions, bit for bit:
    add (s_hi / 127) / s_o, avgpool2d s_in / (K * s_out) (K * s_out first)."""
    rng = np.random.default_rng(13)
    # scales where the other orders of the same operations round differently
    while True:
        s_hi, s_o = float(rng.uniform(0.01, 1)), float(rng.uniform(0.001, 0.1))
        spec = (s_hi / 127) / s_o
        others = [s_hi / (127 * s_o), (s_hi / s_o) / 127, s_hi / 127 * (1 / s_o), s_hi * (1 / 127) / s_o,
                  s_hi * (1 / (127 * s_o))]
        if spec not in others:
            break
    while True:
        s_in, s_out = float(rng.uniform(0.01, 1)), float(rng.uniform(0.01, 1))
        spec_avg = s_in / (9 * s_out)
        if spec_avg not in [s_in / 9 / s_out, s_in / s_out / 9, s_in * (1 / (9 * s_out)), (s_in / 9) * (1 / s_out)]:
            break
    seen = []
    original = ref.requant_params
    monkeypatch.setattr(ref, "requant_params", lambda real: seen.append(real) or original(real))
    x = rand_int8(rng, (1, 2, 2, 4))
    ref.run(add_model(tmp_path, (2, 2, 2), 0.01, s_hi, 0, s_hi / 3, 0, s_o, 0, "none"), x)
    assert spec in seen, "add's multiplier is not (s_hi / 127) / s_o"
    seen.clear()
    layer = {"type": "avgpool2d", "pool": 3, "output": {"scale": s_out, "zero_point": 0}}
    ref.run(write_model(tmp_path, (3, 3, 4), s_in, 0, [layer]), rand_int8(rng, (1, 3, 3, 4)))
    assert seen == [spec_avg], "avgpool2d's multiplier is not s_in / (K * s_out)"


def test_graph_errors(tmp_path):
    """The graph form's rules: add takes two inputs, inputs name earlier layers or "input",
    and every output but the last is read."""
    sel = np.ones((1, 1, 2, 2), dtype=np.int8)
    conv = {"type": "conv2d", "name": "c", "weights": "w.npy", "weight_scale": 0.1,
            "output": {"scale": 0.1, "zero_point": 0}}
    out = {"scale": 0.1, "zero_point": 0}
    bad = [
        [conv, {"type": "add", "name": "s", "inputs": ["c"], "output": out}],
        [conv, {"type": "add", "name": "s", "inputs": ["c", "nope"], "output": out}],
        [{"type": "add", "name": "s", "inputs": ["input", "c"], "output": out}, conv],
        [conv, {**conv, "name": "d", "inputs": ["input"]}],  # c is never read
    ]
    x = rand_int8(np.random.default_rng(1), (1, 2, 2, 2))
    for layers in bad:
        with pytest.raises((ValueError, KeyError, AssertionError)):
            ref.run(write_model(tmp_path, (2, 2, 2), 0.1, 0, layers, {"w.npy": sel}), x)
    ok = [conv, {"type": "add", "name": "s", "inputs": ["c", "input"], "output": out}]
    assert ref.run(write_model(tmp_path, (2, 2, 2), 0.1, 0, ok, {"w.npy": sel}), x).shape == (1, 2, 2, 2)


# ---------------------------------------------------------------------------
# The example networks


def torch_float_forward(float_json, x):
    """The float model (tpu-sim-float-net, graph form) in torch float64, from its files."""
    float_json = Path(float_json)
    fm = json.loads(float_json.read_text())
    outs = {"input": nchw(x)}
    last = "input"
    for layer in fm["layers"]:
        t = layer["type"]
        src = [outs[n] for n in layer.get("inputs", [last])]
        v = src[0]
        if t == "conv2d":
            wt = torch.from_numpy(np.load(float_json.parent / layer["weights"]).astype(np.float64))
            bt = torch.from_numpy(np.load(float_json.parent / layer["bias"]).astype(np.float64))
            kh, kw = wt.shape[0], wt.shape[1]
            sh, sw = pair(layer.get("stride"), 1)
            pads = spec_pads(layer.get("padding"), v.shape[2], v.shape[3], kh, kw, sh, sw)
            y = F.conv2d(padded(v, pads), wt.permute(3, 2, 0, 1), bt, stride=(sh, sw),
                         groups=layer.get("groups", 1))
        elif t in ("maxpool2d", "avgpool2d"):
            kh, kw = pair(layer["pool"], None)
            sh, sw = pair(layer.get("stride"), (kh, kw))
            pads = spec_pads(layer.get("padding"), v.shape[2], v.shape[3], kh, kw, sh, sw)
            if t == "maxpool2d":
                y = F.max_pool2d(padded(v, pads, -math.inf), (kh, kw), (sh, sw))
            else:
                y = F.avg_pool2d(padded(v, pads), (kh, kw), (sh, sw))
        elif t == "global_avgpool2d":
            y = torch.mean(v, dim=(2, 3), keepdim=True)
        elif t == "flatten":
            y = v.permute(0, 2, 3, 1).reshape(v.shape[0], -1)  # NHWC order
        elif t == "dense":
            wt = torch.from_numpy(np.load(float_json.parent / layer["weights"]).astype(np.float64))
            bt = torch.from_numpy(np.load(float_json.parent / layer["bias"]).astype(np.float64))
            y = v @ wt + bt
        elif t == "add":
            y = src[0] + src[1]
        else:
            raise ValueError(t)
        if layer.get("activation", "none") == "relu":
            y = torch.relu(y)
        outs[layer["name"]] = y
        last = layer["name"]
    y = outs[last]
    return y.permute(0, 2, 3, 1).numpy() if y.dim() == 4 else y.numpy()


@pytest.mark.parametrize("name", ["resnet_mini", "mobilenet_mini"])
def test_example_network_tracks_float(name):
    d = ROOT / "programs" / "nets" / name
    model = json.loads((d / "model.json").read_text())
    x = np.load(d / "test_x.npy")
    assert x.dtype == np.int8 and x.shape[1:] == tuple(model["input"]["shape"])
    y = ref.run(d / "model.json", x)
    np.testing.assert_array_equal(y, np.load(d / "expected.npy"))

    s_in, z_in = model["input"]["scale"], model["input"]["zero_point"]
    xf = s_in * (x.astype(np.float64) - z_in)
    y_float = torch_float_forward(d / "float" / "model.json", xf)
    # the generator's own NumPy float pass agrees with torch
    fm = json.loads((d / "float" / "model.json").read_text())
    outs, last = make_cnn_nets.float_forward(fm["layers"], lambda f: np.load(d / "float" / f), xf)
    np.testing.assert_allclose(outs[last], y_float, rtol=1e-9, atol=1e-12)

    out = model["layers"][-1]["output"]
    y_int8 = out["scale"] * (y.astype(np.float64) - out["zero_point"])
    corr = np.corrcoef(y_float.ravel(), y_int8.ravel())[0, 1]
    var_corr = np.corrcoef((y_float - y_float.mean(0)).ravel(), (y_int8 - y_int8.mean(0)).ravel())[0, 1]
    agree = int(np.sum(np.argmax(y_float, axis=1) == np.argmax(y_int8, axis=1)))
    assert len(set(np.argmax(y_float, axis=1))) >= 3, "the float model gives (nearly) one class"
    assert corr > 0.98 and var_corr > 0.95, (corr, var_corr)
    assert agree >= 14, agree
    report = json.loads((d / "report.json").read_text())
    assert report["argmax_agreement"] == agree


def test_example_networks_are_fresh():
    """The committed files are what tools/make_cnn_nets.py generates, byte for byte."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "make_cnn_nets.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
