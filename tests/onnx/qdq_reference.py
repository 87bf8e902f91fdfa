#!/usr/bin/python3
"""An independent NumPy evaluation of a QDQ ONNX model (QuantizeLinear and
DequantizeLinear around float operators), for the QDQ tests of tpu-sim's ONNX
importer (docs/onnx.md, "QDQ models"). It reads the graph with python3-onnx
and computes it node by node; it shares no code with tpu-sim.

Two modes:

- "float": the ONNX semantics, in float64: DequantizeLinear gives
  (q - z) * s, the float operators compute on those values, QuantizeLinear
  rounds x / s to nearest, ties to even, adds z and saturates. This is the
  model's own (float) requantization.
- "fixed": the same graph, but every QuantizeLinear that follows a Conv,
  Gemm or MatMul (with its bias and Relu/Clip), an Add of two quantized
  tensors or an average pool requantizes the exact integer accumulator the
  way docs/quantization.md specifies for tpu-sim: a multiplier m (s_in * s_w
  / s_out; (s_hi / 127) / s_out for an add with integer factors 127 and
  d_lo; s_in / (K * s_out) for an average of K) as M / 2^S, y = ((acc * M +
  2^(S-1)) >> S) + Z, saturated. Per-channel weight scales are re-quantized
  per tensor as docs/onnx.md says tpu-sim does (s = max|w| / 127).

Both modes also count, at every such QuantizeLinear, how many values the
other rounding would give differently from the same accumulator
(`stats`): the local effect of tpu-sim's fixed-point requantization.
"""
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

INT_RANGE = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127), TensorProto.INT32: (-2**31, 2**31 - 1)}


def requant_params(real):
    """(M, S) of a real multiplier, by docs/quantization.md, section 1."""
    f, e = math.frexp(real)
    m = math.floor(f * 2.0**31 + 0.5)
    s = 31 - e
    if m == 2**31:
        m, s = 2**30, s - 1
    if s > 62:
        s, m = 62, math.floor(real * 2.0**62 + 0.5)
    assert s >= 0, real
    return m, s


def fixed_requant(acc, real, z8):
    """tpu-sim's ACT requantization of int64 accumulators to int8 (zero point z8)."""
    m, s = requant_params(real)
    acc = np.asarray(acc, dtype=np.int64)
    r = (1 << (s - 1)) if s > 0 else 0
    # acc * M needs up to 63 bits: Python integers, exactly.
    y = np.array([((int(a) * m + r) >> s) for a in acc.ravel()], dtype=np.int64).reshape(acc.shape)
    return np.clip(y + z8, -128, 127)


class Tensor:
    """A value: `v` (float64 real values, or integers for a QuantizeLinear's
    output), and what the fixed mode needs: `ints`/`scale` for a dequantized
    tensor (v = ints * scale, ints = q - z), `acc` for an accumulator."""

    def __init__(self, v, ints=None, scale=None, acc=None, qtype=None, const=False, via_q=False):
        self.v, self.ints, self.scale, self.acc, self.qtype = v, ints, scale, acc, qtype
        self.const = const
        self.via_q = via_q  # the accumulator has been through a QuantizeLinear already


def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def pad4(x, pads, value):
    t, l, b, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def conv(x, w, stride, pads, group):
    """x (N, C, H, W), w (O, I, KH, KW), float64 or int64; groups 1 or depthwise."""
    x = pad4(x, pads, 0)
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    sh, sw = stride
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    y = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w))
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw]
            if group == 1:
                y += np.einsum("nchw,oc->nohw", patch, w[:, :, dy, dx])
            else:
                y += patch * w[None, :, 0, dy, dx, None, None]
    return y


def pool(x, k, stride, pads, kind, pad_value):
    x = pad4(x, pads, pad_value)
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // stride[0] + 1, (w - k[1]) // stride[1] + 1
    win = np.stack([x[:, :, dy:dy + stride[0] * (oh - 1) + 1:stride[0], dx:dx + stride[1] * (ow - 1) + 1:stride[1]]
                    for dy in range(k[0]) for dx in range(k[1])])
    return win.max(axis=0) if kind == "max" else win.sum(axis=0)


class Evaluator:
    def __init__(self, model, mode):
        assert mode in ("float", "fixed")
        self.model, self.mode = model, mode
        self.stats = []  # (QuantizeLinear name, values, values the other rounding changes)

    def weights_ints(self, w):
        """A dequantized constant's integers and per-tensor scale, per-channel
        scales re-quantized per tensor in the fixed mode."""
        ints, scale = w.ints, w.scale
        if np.ndim(scale) == 0 or np.all(scale == scale.ravel()[0]):
            return ints, float(np.ravel(scale)[0])
        if self.mode == "float":
            return None, None  # no integer accumulator for per-channel weights
        real = w.v
        s = float(np.abs(real).max()) / 127.0
        return np.clip(np.rint(real / s), -127, 127).astype(np.int64), s

    def run(self, x):
        g = self.model.graph
        env = {t.name: Tensor(numpy_helper.to_array(t).astype(np.float64), const=True) for t in g.initializer}
        for t in g.initializer:
            a = numpy_helper.to_array(t)
            if a.dtype.kind in "iu":
                env[t.name] = Tensor(a.astype(np.int64), qtype=t.data_type, const=True)
        inputs = [i.name for i in g.input if i.name not in env]
        env[inputs[0]] = Tensor(x.astype(np.float64))
        for node in g.node:
            self.node(node, env)
        return env[g.output[0].name].v

    def quantize(self, node, t, scale, zero, qtype, axis):
        lo, hi = INT_RANGE[qtype]
        shape = [1] * t.v.ndim
        if np.ndim(scale) == 1 and scale.size > 1:
            shape[axis] = scale.size
        s, z = np.reshape(scale, shape), np.reshape(zero, shape)
        float_q = np.clip(np.rint(t.v / s) + z, lo, hi).astype(np.int64)
        if t.acc is None:
            return float_q
        acc, real, relu, kind = t.acc
        z8 = int(z.ravel()[0]) - (128 if qtype == TensorProto.UINT8 else 0)
        fixed = fixed_requant(acc, real(float(s.ravel()[0])), z8)
        if relu:
            fixed = np.maximum(fixed, z8)
        fixed_q = fixed + (128 if qtype == TensorProto.UINT8 else 0)
        self.stats.append((node.name, "requantized again" if t.via_q else kind, fixed_q.size, int(np.count_nonzero(fixed_q != float_q)),
                           int(np.abs(fixed_q - float_q).max())))
        return fixed_q if self.mode == "fixed" else float_q

    def node(self, node, env):
        op, a = node.op_type, attrs(node)
        ins = [env[i] if i else None for i in node.input]
        out = node.output[0]
        if op == "Constant":
            arr = numpy_helper.to_array(a["value"])
            env[out] = Tensor(arr.astype(np.int64) if arr.dtype.kind in "iu" else arr.astype(np.float64),
                              qtype=a["value"].data_type if arr.dtype.kind in "iu" else None, const=True)
        elif op in ("Identity", "Dropout"):
            env[out] = ins[0]
        elif op == "Cast":
            to = a["to"]
            v = ins[0].v
            if to in INT_RANGE:
                env[out] = Tensor(np.trunc(v).astype(np.int64), qtype=to, const=ins[0].const, acc=ins[0].acc,
                                  via_q=ins[0].via_q)
            else:
                env[out] = Tensor(v.astype(np.float64), const=ins[0].const)
        elif op == "ConstantOfShape":
            val = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
            arr = np.full(tuple(int(d) for d in ins[0].v), val.ravel()[0])
            env[out] = Tensor(arr.astype(np.int64) if val.dtype.kind in "iu" else arr.astype(np.float64),
                              qtype=a["value"].data_type if val.dtype.kind in "iu" else None, const=True)
        elif op == "QuantizeLinear":
            zero = ins[2].v if len(ins) > 2 and ins[2] is not None else np.zeros(1, np.int64)
            qtype = ins[2].qtype if len(ins) > 2 and ins[2] is not None else TensorProto.UINT8
            q = self.quantize(node, ins[0], ins[1].v, zero, qtype, a.get("axis", 1))
            # The accumulator goes along: a layer's output requantized again
            # after a Relu (Q1 -> DQ -> Relu -> Q2) is requantized once from it
            # in the fixed mode, as tpu-sim does.
            env[out] = Tensor(q, qtype=qtype, const=ins[0].const, acc=ins[0].acc, via_q=True)
        elif op == "DequantizeLinear":
            q = ins[0]
            scale = ins[1].v
            zero = ins[2].v if len(ins) > 2 and ins[2] is not None else np.zeros_like(scale, dtype=np.int64)
            shape = [1] * q.v.ndim
            if np.ndim(scale) == 1 and scale.size > 1:
                shape[a.get("axis", 1) % q.v.ndim] = scale.size
            ints = q.v.astype(np.int64) - np.reshape(zero, shape).astype(np.int64)
            # Constants as the operator computes them (float32); activations exactly.
            if q.const:
                real = (ints.astype(np.float32) * np.reshape(scale, shape).astype(np.float32)).astype(np.float64)
            else:
                real = ints * np.reshape(scale, shape)
            env[out] = Tensor(real, ints=ints, scale=np.asarray(scale, np.float64), const=q.const, acc=q.acc, via_q=q.via_q)
        elif op in ("Conv", "Gemm", "MatMul"):
            self.linear(node, op, a, ins, env, out)
        elif op == "Add":
            x, y = ins
            if x.const and not y.const:
                x, y = y, x
            if y.const and x.acc is not None:  # a bias after a MatMul
                acc, real, relu, kind = x.acc
                acc = acc + np.rint(y.v / x.scale).astype(np.int64)
                v = acc * x.scale if self.mode == "fixed" else x.v + y.v
                env[out] = Tensor(v, acc=(acc, real, relu, kind), scale=x.scale)
            else:
                acc = None
                if x.ints is not None and y.ints is not None:
                    sa, sb = float(np.ravel(x.scale)[0]), float(np.ravel(y.scale)[0])
                    hi, lo = max(sa, sb), min(sa, sb)
                    d_lo = min(127, max(1, math.floor(127 * lo / hi + 0.5)))
                    da, db = (127, d_lo) if sa >= sb else (d_lo, 127)
                    acc = (da * x.ints + db * y.ints, lambda so, hi=hi: (hi / 127) / so, False, "add")
                env[out] = Tensor(x.v + y.v, acc=acc)
        elif op in ("Relu", "Clip"):
            x = ins[0]
            lo = 0.0 if op == "Relu" else float(ins[1].v)
            hi = math.inf if op == "Relu" or len(ins) < 3 else float(ins[2].v)
            assert lo == 0.0
            acc = None if x.acc is None else (x.acc[0], x.acc[1], True, x.acc[3])
            ints = None if x.ints is None or hi != math.inf else np.maximum(x.ints, 0)
            env[out] = Tensor(np.clip(x.v, lo, hi), acc=acc, scale=x.scale, ints=ints, via_q=x.via_q)
        elif op == "MaxPool":
            x = ins[0]
            k, st = a["kernel_shape"], a.get("strides", [1, 1])
            p = a.get("pads", [0, 0, 0, 0])
            pads = (p[0], p[1], p[2], p[3])
            v = pool(x.v, k, st, pads, "max", -np.inf)
            ints = None if x.ints is None else pool(x.ints, k, st, pads, "max", np.iinfo(np.int64).min)
            env[out] = Tensor(v, ints=ints, scale=x.scale)
        elif op in ("AveragePool", "GlobalAveragePool"):
            x = ins[0]
            if op == "GlobalAveragePool":
                k, st, pads = list(x.v.shape[2:]), [1, 1], (0, 0, 0, 0)
            else:
                k, st = a["kernel_shape"], a.get("strides", [1, 1])
                p = a.get("pads", [0, 0, 0, 0])
                pads = (p[0], p[1], p[2], p[3])
                assert a.get("count_include_pad", 0) == 1 or not any(pads)
            kk = k[0] * k[1]
            v = pool(x.v, k, st, pads, "sum", 0.0) / kk
            acc = None
            if x.ints is not None:
                s_in = float(np.ravel(x.scale)[0])
                acc = (pool(x.ints, k, st, pads, "sum", 0), lambda so, s_in=s_in, kk=kk: s_in / (kk * so), False,
                       "average")
            env[out] = Tensor(v, acc=acc)
        elif op == "Pad":
            x = ins[0]
            p = [int(v) for v in ins[1].v] if len(ins) > 1 else list(a["pads"])
            value = float(ins[2].v) if len(ins) > 2 and ins[2] is not None else 0.0
            assert a.get("mode", b"constant") in (b"constant", "constant") and value == 0.0
            width = [(p[i], p[i + 4]) for i in range(4)]
            env[out] = Tensor(np.pad(x.v, width), ints=None if x.ints is None else np.pad(x.ints, width),
                              scale=x.scale)
        elif op in ("Flatten", "Reshape"):
            x = ins[0]
            shape = (x.v.shape[0], -1)
            env[out] = Tensor(x.v.reshape(shape), ints=None if x.ints is None else x.ints.reshape(shape),
                              scale=x.scale)
        else:
            raise NotImplementedError(f"qdq_reference: {op}")

    def linear(self, node, op, a, ins, env, out):
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        if op == "Conv":
            p = a.get("pads", [0, 0, 0, 0])
            pads, st, group = (p[0], p[1], p[2], p[3]), a.get("strides", [1, 1]), a.get("group", 1)
            f = lambda xx, ww: conv(xx, ww, st, pads, group)  # noqa: E731
            bshape = (1, -1, 1, 1)
        else:
            trans = a.get("transB", 0)
            f = lambda xx, ww: xx @ (ww.T if trans else ww)  # noqa: E731
            bshape = (1, -1)
            assert a.get("alpha", 1.0) == 1.0 and a.get("transA", 0) == 0
        y = f(x.v, w.v)
        if b is not None:
            y = y + np.reshape(b.v, bshape) * a.get("beta", 1.0)
        acc = None
        wi, sw = self.weights_ints(w) if w.ints is not None else (None, None)
        if x.ints is not None and wi is not None:
            s_in = float(np.ravel(x.scale)[0])
            acc_v = f(x.ints, wi)
            if b is not None:
                acc_v = acc_v + np.reshape(np.rint(b.v * a.get("beta", 1.0) / (s_in * sw)).astype(np.int64), bshape)
            acc = (acc_v, lambda so, s_in=s_in, sw=sw: s_in * sw / so, False, op)
            if self.mode == "fixed":  # with the weights tpu-sim uses
                y = acc_v * (s_in * sw)
        env[out] = Tensor(y, acc=acc, scale=None if acc is None else s_in * sw)


def evaluate(model, x, mode):
    """The model's output (float64) on x, and per QuantizeLinear after an accumulator: (name,
    what it requantizes: Conv/Gemm/MatMul/add/average/requantized again, values, values the
    other rounding changes, the largest change)."""
    e = Evaluator(model, mode)
    y = e.run(x)
    return y, e.stats
