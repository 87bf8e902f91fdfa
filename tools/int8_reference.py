#!/usr/bin/python3
"""The independent NumPy int8 reference for quantized networks (model files of
docs/quantization.md), bit for bit what `tpu-sim net` must produce.

Every layer is computed from its definition, not from the TPU lowering: a
dense layer as (x - z_in) @ W + b in int64, a convolution (depthwise too) as a
sum over its kernel taps of shifted windows of the input padded with its zero
point (no im2col, no bias folding), then the int32 wrap of the accumulators,
the requantization q(a) and the activation tables of the ISA (docs/isa.md,
taken from tools/make_program_data.py, the reference of the example
programs), with the multiplier and shift derived from the scales as
docs/quantization.md says; a dense layer of several inputs (a recurrent
layer's gate) takes them side by side as its K features. Max-pool and flatten act on the int8 values;
average pooling requantizes the window sums of x - z_in; add requantizes a
weighted sum of its two inputs; concat requantizes each input's weighted
x - z; mul and affine (the vector unit) requantize (a - z_a)(b - z_b) and
D (x - z) + db k; upsample repeats each pixel (nearest, integer factors).
softmax_int, layernorm_int and gelu_int are the integer semantics of the
SMAX, LNRM and GELU instructions (I-BERT-style; docs/quantization.md,
"Integer softmax, LayerNorm and GELU"), with the constants a compiler
chooses in softmax_constants, layernorm_constants and gelu_constants; a
softmax layer is softmax_int over each pixel's channels with those constants; a
matmul multiplies two activations, (A - z_a) B^T or (A - z_a) B with B symmetric;
token_bias puts constant tokens in front of a map's pixels and adds an int32
bias per token and channel to x - z.
Layers may name their inputs (the graph
form), so residual networks run too.

  int8_reference.py MODEL.json --input X.npy --out Y.npy [--labels L.npy]

X is int8 (already quantized) or float (quantized here with the model's input
scale and zero point, rounding half to even). Y is int8, or int32 for a last
layer with int32 output. Run with /usr/bin/python3 (Debian's python3-numpy).
"""
import argparse
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_program_data as isa  # noqa: E402  the ISA's requantization and tables

SIGMOID_TANH_INPUT_SCALE = 1.0 / 16.0
SIGMOID_TANH_OUTPUT_SCALE = 1.0 / 127.0


def requant_params(real):
    """(M, S) for a real multiplier: real = f * 2^e, f in [0.5, 1); M = round(f * 2^31),
    S = 31 - e; M = 2^31 becomes 2^30 with S - 1; S > 62 clamps to 62 with M = round(real * 2^62)."""
    if not (real > 0.0 and math.isfinite(real)):
        raise ValueError(f"requantization multiplier {real} is not positive and finite")
    f, e = math.frexp(real)
    m = math.floor(math.ldexp(f, 31) + 0.5)  # exact: f * 2^31 < 2^52; halves away from zero
    if m == 1 << 31:
        m, e = 1 << 30, e + 1
    s = 31 - e
    if s < 0:
        raise ValueError(f"requantization multiplier {real} is too large")
    if s > 62:
        s, m = 62, math.floor(math.ldexp(real, 62) + 0.5)
    return m, s


def layer_requant(in_scale, layer):
    """(M, S, Z) of a dense or conv2d layer with int8 output."""
    act = layer.get("activation", "none")
    if act in ("sigmoid", "tanh"):
        return (*requant_params(in_scale * layer["weight_scale"] / SIGMOID_TANH_INPUT_SCALE), 0)
    out = layer["output"]
    return (*requant_params(in_scale * layer["weight_scale"] / out["scale"]), out["zero_point"])


ACT_FLAG = {"none": "", "relu": "R", "sigmoid": "Q", "tanh": "T"}


def finish(acc, in_scale, layer):
    """int64 accumulators -> the layer's output (int8 values, or int32)."""
    acc = isa.wrap32(acc)
    if layer.get("output") == "int32":
        return acc.astype(np.int32)
    m, s, z = layer_requant(in_scale, layer)
    return isa.activate(acc, ACT_FLAG[layer.get("activation", "none")], m, s, z)


def load_npy(base, name, dtype, ndim):
    a = np.load(base / name)
    assert a.dtype == dtype and a.ndim == ndim, f"{name}: {a.dtype} {a.shape}"
    return a


def conv_same_padding(size, k, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def conv_padding(layer, h, w, kh, kw, sh, sw):
    """(top, bottom, left, right)."""
    p = layer.get("padding", "valid")
    if p == "valid":
        return 0, 0, 0, 0
    if p == "same":
        return (*conv_same_padding(h, kh, sh), *conv_same_padding(w, kw, sw))
    if isinstance(p, int):
        return p, p, p, p
    if len(p) == 2:
        return p[0], p[0], p[1], p[1]
    return tuple(p)


def pair(v, default=None):
    if v is None:
        v = default
    return (v, v) if isinstance(v, int) else tuple(v)


def dense(inputs, layer, base):
    """Every input's (x - z) side by side as the K features (the first input's pixel
    `pixel` only when the layer has one: a map's pixels are row-major), times W: the
    accumulators of all inputs at the first input's scale (docs/quantization.md,
    "Recurrent layers")."""
    w = load_npy(base, layer["weights"], np.int8, 2).astype(np.int64)
    parts = []
    for j, x in enumerate(inputs):
        v = x.values.astype(np.int64) - x.zero_point
        if j == 0 and "pixel" in layer:
            v = v.reshape(v.shape[0], -1, v.shape[-1])[:, layer["pixel"], :]
        parts.append(v.reshape(v.shape[0], -1))
    acc = np.concatenate(parts, axis=1) @ w
    if "bias" in layer:
        acc = acc + load_npy(base, layer["bias"], np.int32, 1).astype(np.int64)
    return finish(acc, inputs[0].scale, layer)


def window(xp, dy, dx, oh, ow, sh, sw):
    """The (padded) input pixels that kernel or pool tap (dy, dx) meets, for every output pixel."""
    return xp[:, dy:dy + (oh - 1) * sh + 1:sh, dx:dx + (ow - 1) * sw + 1:sw, :]


def output_size(h, w, kh, kw, sh, sw, pads, layer):
    pt, pb, pl, pr = pads
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{layer.get('name', layer['type'])}: a {kh}x{kw} window does not fit "
                         f"the {h}x{w} input padded by {list(pads)}")
    return oh, ow


def conv2d(x, layer, base, zin, in_scale):
    """A convolution; with groups = C a depthwise one (weights (KH, KW, 1, C): output
    channel k sees input channel k only)."""
    w = load_npy(base, layer["weights"], np.int8, 4).astype(np.int64)  # KH, KW, Cin (1 if depthwise), Cout
    kh, kw, wcin, cout = w.shape
    b, h, wd, c = x.shape
    groups = layer.get("groups", 1)
    depthwise = groups != 1
    if depthwise and (groups != c or wcin != 1 or cout != c):
        raise ValueError(f"{layer.get('name', 'conv2d')}: groups {groups} with weights {w.shape} "
                         f"on {c} input channels (groups is 1 or the input channels)")
    if not depthwise and wcin != c:
        raise ValueError(f"{layer.get('name', 'conv2d')}: weights {w.shape} on {c} input channels")
    sh, sw = pair(layer.get("stride"), 1)
    pads = conv_padding(layer, h, wd, kh, kw, sh, sw)
    pt, pb, pl, pr = pads
    oh, ow = output_size(h, wd, kh, kw, sh, sw, pads, layer)
    xp = np.pad(x.astype(np.int64) - zin, ((0, 0), (pt, pb), (pl, pr), (0, 0)))  # zero = the zero point
    acc = np.zeros((b, oh, ow, cout), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            taps = window(xp, dy, dx, oh, ow, sh, sw)
            if depthwise:
                acc += taps * w[dy, dx, 0]
            else:
                acc += np.einsum("bhwc,co->bhwo", taps, w[dy, dx])
    if "bias" in layer:
        acc = acc + load_npy(base, layer["bias"], np.int32, 1).astype(np.int64)
    return finish(acc, in_scale, layer)


def pool_geometry(layer, h, w):
    """(kh, kw, sh, sw, (top, bottom, left, right), oh, ow) of a pooling layer. The padding
    is smaller than the window on every side, so every window holds a pixel of the map."""
    kh, kw = pair(layer["pool"])
    sh, sw = pair(layer.get("stride"), (kh, kw))
    pads = conv_padding(layer, h, w, kh, kw, sh, sw)
    pt, pb, pl, pr = pads
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise ValueError(f"{layer.get('name', layer['type'])}: padding {list(pads)} must be smaller "
                         f"than the {kh}x{kw} window on every side")
    return (kh, kw, sh, sw, pads, *output_size(h, w, kh, kw, sh, sw, pads, layer))


BELOW_INT8 = -129


def maxpool2d(x, layer):
    """The maximum over each window's pixels inside the map: a padded position never wins."""
    b, h, w, c = x.shape
    kh, kw, sh, sw, (pt, pb, pl, pr), oh, ow = pool_geometry(layer, h, w)
    xp = np.pad(x.astype(np.int16), ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=BELOW_INT8)
    y = np.full((b, oh, ow, c), BELOW_INT8, dtype=np.int16)
    for dy in range(kh):
        for dx in range(kw):
            y = np.maximum(y, window(xp, dy, dx, oh, ow, sh, sw))
    assert np.all(y > BELOW_INT8)  # pool_geometry: no window lies wholly in the padding
    return y.astype(np.int8)


def average(sums, count, in_scale, zin, layer):
    """q(sum of x - z_in over `count` positions) with M / 2^S = s_in / (count * s_out), Z = z_out."""
    out = layer.get("output", {"scale": in_scale, "zero_point": zin})
    m, s = requant_params(in_scale / (count * out["scale"]))
    return isa.requantize(sums, m, s, out["zero_point"]).astype(np.int8)


def avgpool2d(x, layer, zin, in_scale):
    """Average pooling, padded positions counted with x = z_in (PyTorch's count_include_pad)."""
    b, h, w, c = x.shape
    kh, kw, sh, sw, (pt, pb, pl, pr), oh, ow = pool_geometry(layer, h, w)
    xp = np.pad(x.astype(np.int64) - zin, ((0, 0), (pt, pb), (pl, pr), (0, 0)))  # zero = the zero point
    sums = np.zeros((b, oh, ow, c), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            sums += window(xp, dy, dx, oh, ow, sh, sw)
    return average(sums, kh * kw, in_scale, zin, layer)


def global_avgpool2d(x, layer, zin, in_scale):
    """The average over the whole map: output (B, 1, 1, C)."""
    b, h, w, c = x.shape
    sums = (x.astype(np.int64) - zin).sum(axis=(1, 2), keepdims=True)
    return average(sums, h * w, in_scale, zin, layer)


def add_weights(scale_a, scale_b):
    """(c_a, c_b, accumulator scale) of an add: the input of the larger scale s_hi (a when
    the scales are equal) weighs 127, the other round(127 * s_lo / s_hi) (halves up, in
    double in that order) clamped to 1..127; the weighted sum is then at scale s_hi / 127."""
    hi, lo = max(scale_a, scale_b), min(scale_a, scale_b)
    d = min(max(math.floor(127.0 * lo / hi + 0.5), 1), 127)
    ca, cb = (127, d) if scale_a >= scale_b else (d, 127)
    return ca, cb, hi / 127.0


def add(a, b, layer):
    """f(q(c_a * (a - z_a) + c_b * (b - z_b))), f none or ReLU, with (c_a, c_b) from
    add_weights and M / 2^S = (s_hi / 127) / s_out, Z = z_out."""
    if a.values.shape != b.values.shape:
        raise ValueError(f"{layer.get('name', 'add')}: inputs of shapes {a.values.shape[1:]} "
                         f"and {b.values.shape[1:]}")
    ca, cb, acc_scale = add_weights(a.scale, b.scale)
    acc = ca * (a.values.astype(np.int64) - a.zero_point) + cb * (b.values.astype(np.int64) - b.zero_point)
    out = layer["output"]
    m, s = requant_params(acc_scale / out["scale"])
    act = layer.get("activation", "none")
    if act not in ("none", "relu"):
        raise ValueError(f"{layer.get('name', 'add')}: activation {act!r} (none or relu)")
    return isa.activate(acc, ACT_FLAG[act], m, s, out["zero_point"])


def concat(inputs, layer):
    """The inputs side by side along the channels (the last axis, equal other dims), each
    requantized to the output: with s_hi the largest input scale, input i weighs
    d_i = round(127 * s_i / s_hi) (halves up, clamped to 1..127) and the result is
    q(d_i * (x_i - z_i)) with M / 2^S = (s_hi / 127) / s_out, Z = z_out, no activation."""
    name = layer.get("name", "concat")
    for x in inputs[1:]:
        if x.values.shape[:-1] != inputs[0].values.shape[:-1]:
            raise ValueError(f"{name}: inputs of shapes {inputs[0].values.shape[1:]} and {x.values.shape[1:]}")
    if layer.get("activation", "none") != "none":
        raise ValueError(f"{name}: a concat has no activation")
    hi = max(x.scale for x in inputs)
    out = layer["output"]
    m, s = requant_params(hi / 127.0 / out["scale"])
    parts = []
    for x in inputs:
        d = min(max(math.floor(127.0 * x.scale / hi + 0.5), 1), 127)
        parts.append(d * (x.values.astype(np.int64) - x.zero_point))
    return isa.activate(np.concatenate(parts, axis=-1), "", m, s, out["zero_point"])


def vec_target(layer):
    """(scale, zero point) the requantization of a mul or affine targets: the tables'
    input for sigmoid and tanh, else the layer's output."""
    if layer.get("activation", "none") in ("sigmoid", "tanh"):
        return SIGMOID_TANH_INPUT_SCALE, 0
    return layer["output"]["scale"], layer["output"]["zero_point"]


def vec_output(layer):
    if layer.get("activation", "none") in ("sigmoid", "tanh"):
        return SIGMOID_TANH_OUTPUT_SCALE, 0
    return layer["output"]["scale"], layer["output"]["zero_point"]


def mul(a, b, layer):
    """f(q((a - z_a) * (b - z_b))) with M / 2^S = s_a * s_b / s_out: b the same shape as a,
    or (1, 1, C) broadcast over a's pixels (NumPy's broadcasting)."""
    sa, sb = a.values.shape[1:], b.values.shape[1:]
    if sa != sb and not (len(sa) == 3 and sb == (1, 1, sa[2])):
        raise ValueError(f"{layer.get('name', 'mul')}: inputs of shapes {sa} and {sb}")
    v = (a.values.astype(np.int64) - a.zero_point) * (b.values.astype(np.int64) - b.zero_point)
    so, zo = vec_target(layer)
    m, s = requant_params(a.scale * b.scale / so)
    return isa.activate(v, ACT_FLAG[layer.get("activation", "none")], m, s, zo)


def affine(x, layer):
    """f(q(D (x - z) + db k)) for the real alpha x + beta (docs/quantization.md): k = z + 128
    (z >= 0) or z - 127, s = max(|alpha s_x|, |beta / k|) / 8192 (s_x if 0), D and db the
    rounded (halves away from zero) alpha s_x / s and beta / (s k), M / 2^S = s / s_out."""
    alpha, beta = float(layer["alpha"]), float(layer.get("beta", 0.0))
    z = x.zero_point
    k = z + 128 if z >= 0 else z - 127
    s = max(abs(alpha * x.scale), abs(beta / k)) / 8192.0
    if s == 0.0:
        s = x.scale
    d = int(isa.round_half_away(alpha * x.scale / s))
    db = int(isa.round_half_away(beta / (s * k)))
    v = d * (x.values.astype(np.int64) - z) + db * k
    so, zo = vec_target(layer)
    m, sh = requant_params(s / so)
    return isa.activate(v, ACT_FLAG[layer.get("activation", "none")], m, sh, zo)


def matmul(a, b, layer):
    """A matmul of two activations (docs/quantization.md, "MatMul of two activations"): per
    sample, (A - z_a) @ B^T (transpose_b: B's tokens are the columns) or (A - z_a) @ B (B's
    tokens are A's features) in int64 over the (B, H, W, C) maps' tokens, B symmetric; the
    int32 wrap, then q with M / 2^S = alpha * s_a * s_b / s_out."""
    if b.zero_point != 0:
        raise ValueError(f"{layer.get('name', 'matmul')}: B's zero point {b.zero_point} is not 0")
    batch, h, w, k = a.values.shape
    xa = a.values.astype(np.int64).reshape(batch, h * w, k) - a.zero_point
    xb = b.values.astype(np.int64).reshape(batch, -1, b.values.shape[-1])
    acc = xa @ (xb.transpose(0, 2, 1) if layer.get("transpose_b", False) else xb)
    acc = ((acc + (1 << 31)) % (1 << 32)) - (1 << 31)
    out = layer["output"]
    m, s = requant_params(float(layer.get("alpha", 1.0)) * a.scale * b.scale / out["scale"])
    y = isa.activate(acc, "", m, s, out["zero_point"])
    return y.reshape(batch, h, w, -1)


def token_bias(x, layer, base):
    """Constant tokens and positions (docs/quantization.md, "Constant tokens and positions"): the
    (B, H, W, C) map's H*W pixels as tokens after `prefix_tokens` tokens of zeros, minus z_x, plus the
    int32 bias (tokens, C) at the input's scale; then q with M / 2^S = s_x / s_out."""
    bias = load_npy(base, layer["bias"], np.int32, 2).astype(np.int64)
    k = int(layer.get("prefix_tokens", 0))
    batch, h, w, c = x.values.shape
    if bias.shape != (k + h * w, c):
        raise ValueError(f"{layer.get('name', 'token_bias')}: bias {bias.shape} for {k + h * w} tokens of {c}")
    if np.any(np.abs(bias) > (1 << 30)):
        raise ValueError(f"{layer.get('name', 'token_bias')}: a bias is past 2^30")
    acc = np.zeros((batch, k + h * w, c), np.int64)
    acc[:, k:] = x.values.astype(np.int64).reshape(batch, h * w, c) - x.zero_point
    acc += bias[None]
    out = layer["output"]
    m, s = requant_params(x.scale / out["scale"])
    return isa.activate(acc, "", m, s, out["zero_point"]).reshape(batch, 1, k + h * w, c)


class Tensor(NamedTuple):
    """A layer's output (or the network input): its values, int8 (or the int32
    accumulators of an int32 output), and the scale and zero point of their real values."""
    values: np.ndarray
    scale: float
    zero_point: int
    is_int32: bool = False


def weighted(y, layer, x):
    """The output tensor of a dense or conv2d layer on input tensor x."""
    if layer.get("output") == "int32":
        return Tensor(y, x.scale * layer["weight_scale"], 0, True)
    if layer.get("activation", "none") in ("sigmoid", "tanh"):
        return Tensor(y, SIGMOID_TANH_OUTPUT_SCALE, 0)
    return Tensor(y, layer["output"]["scale"], layer["output"]["zero_point"])


def pooled(y, layer, x):
    """The output tensor of an average pooling: the layer's output, else the input's."""
    out = layer.get("output", {"scale": x.scale, "zero_point": x.zero_point})
    return Tensor(y, out["scale"], out["zero_point"])


def upsample(x, layer):
    """Nearest upsampling by integer factors: every pixel repeated sh x sw times (np.repeat), values unchanged."""
    sh, sw = pair(layer["scale"])
    return np.repeat(np.repeat(x, sh, axis=1), sw, axis=2)


def apply(layer, inputs, base):
    """One layer on its input tensors."""
    t = layer["type"]
    x = inputs[0]
    if t == "dense":
        return weighted(dense(inputs, layer, base), layer, x)
    if t == "conv2d":
        return weighted(conv2d(x.values, layer, base, x.zero_point, x.scale), layer, x)
    if t == "maxpool2d":
        return x._replace(values=maxpool2d(x.values, layer))
    if t == "avgpool2d":
        return pooled(avgpool2d(x.values, layer, x.zero_point, x.scale), layer, x)
    if t == "global_avgpool2d":
        return pooled(global_avgpool2d(x.values, layer, x.zero_point, x.scale), layer, x)
    if t == "flatten":
        return x._replace(values=x.values.reshape(x.values.shape[0], -1))
    if t == "upsample":
        return x._replace(values=upsample(x.values, layer))
    if t == "add":
        out = layer["output"]
        return Tensor(add(x, inputs[1], layer), out["scale"], out["zero_point"])
    if t == "concat":
        out = layer["output"]
        return Tensor(concat(inputs, layer), out["scale"], out["zero_point"])
    if t == "mul":
        return Tensor(mul(x, inputs[1], layer), *vec_output(layer))
    if t == "affine":
        return Tensor(affine(x, layer), *vec_output(layer))
    # --- attention (docs/quantization.md, "Softmax and attention") ---
    if t == "softmax":
        regs = softmax_constants(x.scale)  # the fixed output, scale 1/256, zero point -128
        return Tensor(softmax_int(x.values, regs).astype(np.int8), 1.0 / 256, -128)
    if t == "matmul":
        out = layer["output"]
        return Tensor(matmul(x, inputs[1], layer), out["scale"], out["zero_point"])
    if t == "token_bias":
        out = layer["output"]
        return Tensor(token_bias(x, layer, base), out["scale"], out["zero_point"])
    # Transformer layers on the activation unit (docs/quantization.md, "Transformer layers").
    if t in ("layernorm", "gelu"):
        out = layer["output"]
        if t == "layernorm":
            regs = layernorm_constants(x.scale, x.values.shape[-1], out["scale"], layer.get("eps", 1e-5),
                                       out["zero_point"])
            y = layernorm_int(x.values, regs)
        else:
            y = gelu_int(x.values, gelu_constants(x.scale, x.zero_point, out["scale"], out["zero_point"]))
        return Tensor(np.asarray(y).astype(np.int8), out["scale"], out["zero_point"])
    raise ValueError(f"unknown layer type {t}")


def quantize_input(x, scale, zero_point):
    """Float -> int8: clamp(round_half_even(x / scale) + z), in float64."""
    q = np.round(np.asarray(x, dtype=np.float64) / scale) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)


def run(model_path, x):
    """The network's output for input batch x (int8, or float to quantize).

    A layer reads the tensors its `inputs` name (earlier layers' names or "input"),
    by default the previous layer's output; the network's output is the last layer's."""
    model_path = Path(model_path)
    model = json.loads(model_path.read_text())
    assert model["format"] == "tpu-sim-net" and model["version"] == 1
    base = model_path.parent
    scale, zin = model["input"]["scale"], model["input"]["zero_point"]
    if x.dtype != np.int8:
        x = quantize_input(x, scale, zin)
    assert x.shape[1:] == tuple(model["input"]["shape"]), x.shape
    tensors = {"input": Tensor(x, scale, zin)}
    last = "input"
    unread = set()  # layers whose output no later layer has read yet
    layers = model["layers"]
    for i, layer in enumerate(layers):
        t = layer["type"]
        where = f"layer {i} ({layer.get('name', t)})"
        sources = layer.get("inputs", [last])
        arity = 2 if t in ("add", "mul", "matmul") else 1
        if t == "concat" and len(sources) < 2:
            raise ValueError(f"{where}: concat takes 2 inputs or more, not {len(sources)}")
        if t not in ("concat", "dense") and len(sources) != arity:
            takes = "2 inputs" if arity == 2 else "1 input"
            raise ValueError(f"{where}: {t} takes {takes}, not {len(sources)}")
        for name in sources:
            if name not in tensors:
                raise ValueError(f"{where}: input {name!r} is neither \"input\" nor an earlier layer")
            if tensors[name].is_int32:
                raise ValueError(f"{where}: no layer can follow an int32 output")
        if layer.get("output") == "int32" and i != len(layers) - 1:
            raise ValueError(f"{where}: only the last layer can have int32 output")
        key = layer.get("name", ("unnamed", i))  # an unnamed layer is read by the next one only
        if key in tensors:
            raise ValueError(f"{where}: the name {key!r} is taken")
        tensors[key] = apply(layer, [tensors[name] for name in sources], base)
        unread.difference_update(sources)
        unread.add(key)
        last = key
    unread.discard(last)
    if unread:
        raise ValueError(f"the output of {sorted(map(str, unread))} is never read "
                         "(only the last layer's output leaves the network)")
    y = tensors[last].values
    return y.astype(np.int32) if y.dtype == np.int32 else y.astype(np.int8)


def accuracy(y, labels):
    """Argmax (first maximum) accuracy."""
    return float(np.mean(np.argmax(y, axis=1) == labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels")
    args = parser.parse_args()
    y = run(args.model, np.load(args.input))
    np.save(args.out, y)
    if args.labels:
        labels = np.load(args.labels)
        print(f"accuracy: {int(np.sum(np.argmax(y, axis=1) == labels))}/{len(labels)}")
    return 0


# ---- Integer softmax, LayerNorm and GELU (docs/quantization.md, "Integer softmax, LayerNorm and
# GELU"; docs/isa.md SMAX, LNRM, GELU). I-BERT's integer-only approximations (Kim et al., ICML
# 2021): i-exp (second-order polynomial after the ln 2 range reduction), i-sqrt by Newton
# iterations, i-erf (second-order polynomial with clipping). Every step here is the instruction's
# integer arithmetic on one token (SMAX, LNRM: the last axis of x) or one element (GELU); the
# *_constants functions are the choice of the compiler (the NGEO/NCON/SETQ registers).

IEXP_A, IEXP_B, IEXP_C = 0.3585, 1.353, 0.344  # exp(r) ~ a (r + b)^2 + c on (-ln 2, 0]
IERF_A, IERF_B = -0.2888, -1.769                # erf(x) ~ sgn(x) (a (min(|x|, -b) + b)^2 + 1)
NORM_E_MAX = (1 << 39) - 1                     # an SMAX lane's exponential saturates here
SOFTMAX_V_BITS = 30                            # SMAX's v = e / sum in units of 2^-30
LNRM_Y_BITS = 4                                # LNRM's x - mean keeps 4 fractional bits
LNRM_V_BITS = 16                               # LNRM's v = y / sqrt(V) in units of 2^-16


class NormRegs(NamedTuple):
    """The registers SMAX, LNRM and GELU read: NGEO's shift and NCON's constants, SETQ's (M, S, Z)."""
    sh: int
    k0: int
    k1: int
    k2: int
    m: int
    s: int
    z: int


def sat(v, bits):
    """Saturate int64 values to a signed `bits`-bit range."""
    return np.clip(v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def requantize_wide(v, m, s, z):
    """q(v) = sat8(((v*M + r) >> S) + Z) for int64 v, the product exact (Python ints)."""
    r = (1 << (s - 1)) if s > 0 else 0
    flat = [min(127, max(-128, ((int(a) * m + r) >> s) + z)) for a in np.asarray(v).ravel()]
    return np.array(flat, dtype=np.int64).reshape(np.shape(v))


def isqrt_newton(n):
    """floor(sqrt(n)) for an int n >= 0 by I-BERT's integer Newton iteration (Algorithm 4): from
    x0 = 2^ceil(bits(n) / 2) >= sqrt(n), x_{i+1} = (x_i + n // x_i) // 2 until it stops falling."""
    if n == 0:
        return 0
    x = 1 << ((n.bit_length() + 1) // 2)
    while True:
        y = (x + n // x) >> 1
        if y >= x:
            return x
        x = y


def i_exp(p, k0, k1, k2):
    """SMAX's exponential of p <= 0 (int64 array): z = -p // k0 halvings, r = p + z k0 in (-k0, 0],
    L = sat32(r + k1)^2 + k2, e = min(max(L, 0) >> z, 2^39 - 1) (0 for z >= 63)."""
    p = np.minimum(p, 0)  # p > 0 only if the instruction changed its own input between passes
    k = max(k0, 1)
    z = (-p) // k
    r = p + z * k
    t = sat(r + k1, 32)
    big = np.maximum(t * t + k2, 0)
    e = np.where(z >= 63, 0, big >> np.minimum(z, 62))
    return np.minimum(e, NORM_E_MAX)


def _token_width(f):
    """f(x, regs) on the first `width` values of each token of x (..., G*N) (NGEO's width; 0 or
    more than G*N for all of them); the values past them are q(0), SETQ's requantization of 0."""
    def on_width(x, regs, width=0):
        x = np.asarray(x, dtype=np.int64)
        if width == 0 or width >= x.shape[-1]:
            return f(x, regs)
        rest = isa.requantize(np.zeros(x.shape[:-1] + (x.shape[-1] - width,), dtype=np.int64),
                              regs.m, regs.s, regs.z)
        return np.concatenate([f(x[..., :width], regs), rest.astype(np.int64)], axis=-1)
    on_width.__doc__ = f.__doc__
    return on_width


@_token_width
def softmax_int(x, regs):
    """SMAX on int8 x (..., D): the tokens' softmax, int8 (docs/quantization.md). With width
    (NGEO's D), over the first width values of each token, q(0) past them."""
    x = np.asarray(x, dtype=np.int64)
    p = (x - x.max(axis=-1, keepdims=True)) << regs.sh
    e = i_exp(p, regs.k0, regs.k1, regs.k2)
    total = e.sum(axis=-1, keepdims=True)  # < 2^24 lanes x 2^39: no int64 overflow
    recip = np.where(total == 0, 0, (1 << 62) // np.maximum(total, 1))
    v = np.minimum((e * recip) >> 32, (1 << 31) - 1)  # e <= total, so e * recip <= 2^62
    return isa.requantize(v, regs.m, regs.s, regs.z)


@_token_width
def layernorm_int(x, regs):
    """LNRM on int8 x (..., D): (x - mean) / sqrt(var + eps), int8, without LayerNorm's affine.
    With width (NGEO's D), over the first width values of each token, q(0) past them."""
    x = np.asarray(x, dtype=np.int64)
    d = x.shape[-1]
    total = x.sum(axis=-1, keepdims=True)
    mean = ((total << (LNRM_Y_BITS + 1)) + d) // (2 * d)  # round(16 * sum / D), ties up
    y = (x << LNRM_Y_BITS) - mean
    var = (y * y).sum(axis=-1, keepdims=True)  # < 2^24 lanes x 2^24
    w = np.maximum(var + regs.k0, 0)
    sq = np.vectorize(lambda n: isqrt_newton(int(n)), otypes=[np.int64])(w)
    recip = (1 << 32) // np.maximum(sq, 1)
    v = (y * recip) >> LNRM_V_BITS
    return isa.requantize(v, regs.m, regs.s, regs.z)


def gelu_int(x, regs):
    """GELU on int8 x, element by element: q = sat32((x - k2) << sh), u = min(|q|, k0) - k0,
    E = sgn(q) (k1 - u^2), w = sat32(k1 + E), v = q w, requantized with the exact product."""
    x = np.asarray(x, dtype=np.int64)
    q = sat((x - regs.k2) << regs.sh, 32)
    k = max(regs.k0, 0)
    u = np.minimum(np.abs(q), k) - k
    e = np.sign(q) * (regs.k1 - u * u)
    w = sat(regs.k1 + e, 32)
    return requantize_wide(q * w, regs.m, regs.s, regs.z)


def _shift_for(scale, fits):
    """The largest pre-shift sh (0..15) for which fits(scale / 2^sh) holds."""
    for sh in range(15, -1, -1):
        if fits(scale / (1 << sh)):
            return sh
    raise ValueError(f"input scale {scale} is too large for the integer approximation")


def softmax_constants(in_scale, out_scale=1.0 / 256, out_zero=-128):
    """The registers of an SMAX for int8 logits at in_scale: sh as fine as k2 < 2^31 allows."""
    sh = _shift_for(in_scale, lambda s: IEXP_C / (IEXP_A * s * s) < (1 << 31) - 1)
    s = in_scale / (1 << sh)
    k0 = math.floor(math.log(2) / s)
    k1 = math.floor(IEXP_B / s)
    k2 = math.floor(IEXP_C / (IEXP_A * s * s))
    m, shift = requant_params(2.0 ** -SOFTMAX_V_BITS / out_scale)
    return NormRegs(sh, k0, k1, k2, m, shift, out_zero)


def layernorm_constants(in_scale, d, out_scale, eps=1e-5, out_zero=0):
    """The registers of an LNRM over d lanes: k0 = eps in units of the variance sum (V's units)."""
    k0 = round(d * eps * (1 << (2 * LNRM_Y_BITS)) / (in_scale * in_scale))
    if k0 > (1 << 31) - 1:
        raise ValueError(f"eps {eps} at input scale {in_scale} does not fit NCON's k0")
    m, shift = requant_params(math.sqrt(d) * 2.0 ** -LNRM_V_BITS / out_scale)
    return NormRegs(0, k0, 0, 0, m, shift, out_zero)


def gelu_constants(in_scale, in_zero, out_scale, out_zero):
    """The registers of a GELU: sh as fine as k1 = 1/(|a| S'^2) < 2^30 allows, S' = S / sqrt 2."""
    sh = _shift_for(in_scale, lambda s: 2.0 / (-IERF_A * s * s) < (1 << 30))
    s = in_scale / (1 << sh)
    s_erf = s / math.sqrt(2.0)
    k0 = math.floor(-IERF_B / s_erf)
    k1 = math.floor(1.0 / (-IERF_A * s_erf * s_erf))
    m, shift = requant_params(s * (-IERF_A * s_erf * s_erf) / 2.0 / out_scale)
    return NormRegs(sh, k0, k1, in_zero, m, shift, out_zero)


if __name__ == "__main__":
    sys.exit(main())
