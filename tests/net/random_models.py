#!/usr/bin/python3
"""`tpu-sim net` against the NumPy int8 reference on random models.

  random_models.py BIN_DIR SOURCE_DIR

Builds small random quantized models (model files of docs/quantization.md)
that cover every layer type and every way of giving a conv2d's stride and
padding ("valid", "same" with strides, an integer, [ph, pw], [t, b, l, r]),
max-pool windows with their own strides, sigmoid/tanh/ReLU/none, input zero
points, int32 output, and chains that stay in the unified buffer; runs each
with `tpu-sim net --check` on arrays of 4, 8 and 16, and on 8 with 16
accumulator rows (every map larger than 16 pixels computed in bands of
output rows, on chip), and compares the output with tools/int8_reference.py
bit for bit. Attention blocks (token_bias with small and multi-pass biases,
matmul of two activations as Q K^T and P V, transposed or not, with and
without a softmax between) run the same way, and on N = 4 and 8 also on the
detailed and fast paths (`--detail`) with equal output and cycles, on the
host route and with ub_weight_path. Exit status 0 when all are equal.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def conv(cout, k, act="relu", stride=None, padding=None, zp=-128, int32=False):
    d = {"type": "conv2d", "cout": cout, "k": k, "activation": act, "zp": zp, "int32": int32}
    if stride is not None:
        d["stride"] = stride
    if padding is not None:
        d["padding"] = padding
    return d


def dense(nout, act="none", zp=5, int32=False):
    return {"type": "dense", "nout": nout, "activation": act, "zp": zp, "int32": int32}


def pool(p, stride=None):
    d = {"type": "maxpool2d", "pool": p}
    if stride is not None:
        d["stride"] = stride
    return d


FLAT = {"type": "flatten"}

CASES = {
    "conv_same_stride2": ([9, 7, 3], 17, [conv(6, [3, 3], stride=[2, 2], padding="same"),
                                          conv(5, [2, 2], act="none", zp=3), FLAT, dense(7, "tanh")]),
    "conv_explicit_pad": ([8, 9, 2], -3, [conv(9, [5, 4], stride=[1, 2], padding=[2, 1, 0, 3], act="tanh"),
                                          pool([3, 3], [2, 1]), FLAT, dense(4, "none", int32=True)]),
    "conv_int_pad": ([6, 6, 1], -128, [conv(4, [3, 3], padding=1), pool([2, 2]), conv(3, [2, 3], padding=[1, 0], act="sigmoid"),
                                       FLAT, dense(10, "relu", zp=-128), dense(3)]),
    "pointwise_chain": ([5, 4, 3], 0, [conv(8, [3, 3], padding="same"), conv(5, [1, 1], act="sigmoid"),
                                       conv(4, [1, 1], act="none", int32=True)]),
    "conv_flatten_mlp": ([5, 5, 2], -128, [conv(3, [2, 2], stride=[1, 1], padding="valid"), FLAT,
                                           dense(17, "relu", zp=-128), dense(9, "sigmoid"), dense(6)]),
    "mlp_odd": ([13], 40, [dense(9, "tanh"), dense(11, "relu", zp=-128), dense(5, int32=True)]),
    "one_pixel": ([1, 1, 1], 0, [conv(3, [1, 1], act="none", zp=0), FLAT, dense(2)]),
    "same_stride3": ([10, 11, 4], -20, [conv(7, [4, 3], stride=[3, 2], padding="same", act="none", zp=-1),
                                        pool([2, 2], [1, 2])]),
}


def build(tmp, name, input_shape, zin, layers, rng):
    """Writes tmp/name/model.json and its .npy files; returns the model path."""
    d = tmp / name
    d.mkdir()
    scale = 0.03
    model = {"format": "tpu-sim-net", "version": 1, "name": name,
             "input": {"shape": input_shape, "scale": scale, "zero_point": zin}, "layers": []}
    shape = list(input_shape)
    for i, spec in enumerate(layers):
        t = spec["type"]
        layer = {"type": t, "name": f"{t}{i}"}
        if t in ("dense", "conv2d"):
            if t == "dense":
                wshape = (shape[0], spec["nout"])
            else:
                wshape = (*spec["k"], shape[2], spec["cout"])
                for key in ("stride", "padding"):
                    if key in spec:
                        layer[key] = spec[key]
            w = rng.integers(-127, 128, wshape, dtype=np.int8)
            k = int(np.prod(wshape[:-1]))
            spread = 128.0 * 73.0 * np.sqrt(k)
            b = rng.integers(-int(spread), int(spread) + 1, wshape[-1]).astype(np.int32)
            np.save(d / f"w{i}.npy", w)
            np.save(d / f"b{i}.npy", b)
            # Sigmoid and tanh read y / 16 of the requantized y: put the spread
            # at about +-64 (+-4 on the table).
            w_scale = 4.0 / (spread * scale) if spec["activation"] in ("sigmoid", "tanh") else 0.0137
            layer.update({"weights": f"w{i}.npy", "bias": f"b{i}.npy", "weight_scale": w_scale,
                          "activation": spec["activation"]})
            if spec["int32"]:
                layer["output"] = "int32"
                scale = scale * w_scale
            elif spec["activation"] in ("sigmoid", "tanh"):
                scale = 1.0 / 127.0
            else:
                out_scale = scale * w_scale * spread / 50.0
                layer["output"] = {"scale": out_scale, "zero_point": spec["zp"]}
                scale = out_scale
        elif t == "maxpool2d":
            layer["pool"] = spec["pool"]
            if "stride" in spec:
                layer["stride"] = spec["stride"]
        model["layers"].append(layer)
        # The shape after this layer, for the next layer's weights.
        if t == "dense":
            shape = [spec["nout"]]
        elif t == "flatten":
            shape = [int(np.prod(shape))]
        elif t in ("conv2d", "maxpool2d"):
            import int8_reference as ref
            x = np.zeros([1] + shape, dtype=np.int8)
            if t == "maxpool2d":
                shape = list(ref.maxpool2d(x, layer).shape[1:])
            else:
                kh, kw = spec["k"]
                sh, sw = ref.pair(layer.get("stride"), 1)
                pt, pb, pl, pr = ref.conv_padding(layer, shape[0], shape[1], kh, kw, sh, sw)
                shape = [(shape[0] + pt + pb - kh) // sh + 1, (shape[1] + pl + pr - kw) // sw + 1,
                         spec["cout"]]
    (d / "model.json").write_text(json.dumps(model, indent=1))
    return d / "model.json"


# Attention blocks: (input shape, input zero point, prefix tokens, the token_bias's
# largest |bias| in input steps, the layers after it). A layer is (name, type,
# inputs, fields): conv1x1 (d output channels, output zero point zp; zp 0 for a
# matmul's second operand, which must be symmetric), matmul (transpose_b), softmax.
ATTENTION = {
    # ViT-like: class token, Q K^T / sqrt(d), softmax, P V, a projection.
    "vit_block": ([2, 3, 6], -7, 1, 3000, [
        ("q", "conv1x1", ["tb"], {"d": 5, "zp": 9}), ("k", "conv1x1", ["tb"], {"d": 5, "zp": 0}),
        ("v", "conv1x1", ["tb"], {"d": 6, "zp": 0}),
        ("s", "matmul", ["q", "k"], {"transpose_b": True, "alpha": 5 ** -0.5}),
        ("p", "softmax", ["s"], {}), ("o", "matmul", ["p", "v"], {"transpose_b": False}),
        ("proj", "conv1x1", ["o"], {"d": 7, "zp": -3})]),
    # Multi-pass token_bias (|b| up to 2^20 input steps), no prefix; A of zero
    # point -128 (two padding passes) in P V; more tokens than N.
    "big_bias_tokens": ([3, 4, 5], -128, 0, 1 << 20, [
        ("k", "conv1x1", ["tb"], {"d": 5, "zp": 0}),
        ("s", "matmul", ["tb", "k"], {"transpose_b": True, "alpha": 1.0, "zp": -128}),
        ("v", "conv1x1", ["tb"], {"d": 9, "zp": 0}),
        ("o", "matmul", ["s", "v"], {"transpose_b": False, "alpha": 0.5})]),
    # Two prefix tokens, B = A's own projection: S = X X_k^T then S V with S's
    # tokens as V's (a 17-token square), wider than 16.
    "prefix2_square": ([5, 3, 3], 20, 2, 100, [
        ("k", "conv1x1", ["tb"], {"d": 3, "zp": 0}),
        ("s", "matmul", ["tb", "k"], {"transpose_b": True, "alpha": 2.0, "zp": 11}),
        ("v", "conv1x1", ["s"], {"d": 17, "zp": 0}),
        ("o", "matmul", ["s", "v"], {"transpose_b": False, "alpha": 1.0, "zp": -50})]),
}


def build_attention(tmp, name, input_shape, zin, prefix, bias_max, layers, rng):
    """Writes tmp/name/model.json: a token_bias "tb" on the input, then `layers`; returns its path.
    Output scales put each layer's int8 spread at about +-50 (softmax's is fixed)."""
    d = tmp / name
    d.mkdir()
    scale = 0.05
    h, w, c = input_shape
    tokens = prefix + h * w
    bias = rng.integers(-bias_max, bias_max + 1, (tokens, c)).astype(np.int32)
    np.save(d / "tb_b.npy", bias)
    tb_scale = scale * (128 + bias_max) / 50.0
    model = {"format": "tpu-sim-net", "version": 1, "name": name,
             "input": {"shape": input_shape, "scale": scale, "zero_point": zin},
             "layers": [{"type": "token_bias", "name": "tb", "prefix_tokens": prefix, "bias": "tb_b.npy",
                         "output": {"scale": tb_scale, "zero_point": int(rng.integers(-20, 21))}}]}
    shapes, scales = {"tb": (1, tokens, c)}, {"tb": tb_scale}
    for lname, t, inputs, f in layers:
        layer = {"type": t, "name": lname, "inputs": inputs}
        x = shapes[inputs[0]]
        if t == "conv1x1":
            wts = rng.integers(-127, 128, (1, 1, x[2], f["d"]), dtype=np.int8)
            np.save(d / f"{lname}_w.npy", wts)
            spread = 50.0 * 73.0 * np.sqrt(x[2])
            w_scale = 0.0137
            out = scales[inputs[0]] * w_scale * spread / 50.0
            layer.update({"type": "conv2d", "weights": f"{lname}_w.npy", "weight_scale": w_scale,
                          "output": {"scale": out, "zero_point": f["zp"]}})
            shapes[lname], scales[lname] = (x[0], x[1], f["d"]), out
        elif t == "softmax":
            shapes[lname], scales[lname] = x, 1.0 / 256
        else:
            b = shapes[inputs[1]]
            k = x[2]
            spread = 50.0 * 50.0 * np.sqrt(k)
            out = f.get("alpha", 1.0) * scales[inputs[0]] * scales[inputs[1]] * spread / 50.0
            layer.update({"transpose_b": f["transpose_b"], "alpha": f.get("alpha", 1.0),
                          "output": {"scale": out, "zero_point": f.get("zp", 0)}})
            shapes[lname] = (x[0], x[1], b[0] * b[1] if f["transpose_b"] else b[2])
            scales[lname] = out
        model["layers"].append(layer)
    (d / "model.json").write_text(json.dumps(model, indent=1))
    return d / "model.json"


def attention_cases(tmp, tpu_sim, int8_reference, rng):
    """Runs the ATTENTION models; returns the number of failures."""
    failures = 0
    rwu = tmp / "rwu8.json"
    rwu.write_text(json.dumps({"preset": "small8", "ub_weight_path": 1}))
    for name, (input_shape, zin, prefix, bias_max, layers) in ATTENTION.items():
        model = build_attention(tmp, name, input_shape, zin, prefix, bias_max, layers, rng)
        x = rng.integers(-128, 128, [3] + input_shape, dtype=np.int8)
        np.save(tmp / "x.npy", x)
        want = int8_reference.run(model, x)
        if len(np.unique(want)) < min(want.size, 8):
            print(f"FAIL: {name}: the reference output has only {len(np.unique(want))} distinct values")
            failures += 1
        runs = [("N=4", ["--array", "4"]), ("N=8", ["--array", "8"]), ("N=16", ["--array", "16"]),
                ("N=8 ub_weight_path", ["--config", str(rwu)])]
        for label, machine in runs:
            cycles = {}
            for detail in ("detailed", "fast") if label != "N=16" else ("fast",):
                out, stats = tmp / "y.npy", tmp / "stats.json"
                r = subprocess.run([tpu_sim, "net", str(model), "--input", str(tmp / "x.npy"), "--out", str(out),
                                    "--check", "--stats", str(stats), "--detail", detail, *machine],
                                   capture_output=True, text=True)
                what = f"{name} on {label}, {detail}"
                if r.returncode != 0:
                    print(f"FAIL: {what}: tpu-sim net exited {r.returncode}\n{r.stdout}{r.stderr}")
                    failures += 1
                    continue
                st = json.loads(stats.read_text())
                cycles[detail] = st["total"]["cycles"]
                y = np.load(out)
                if len(st["programs"]) != 1:
                    print(f"FAIL: {what}: {len(st['programs'])} programs, expected the network on chip")
                    failures += 1
                elif y.dtype != want.dtype or y.shape != want.shape or not np.array_equal(y, want):
                    print(f"FAIL: {what}: output {y.dtype} {y.shape} differs from the NumPy reference "
                          f"{want.dtype} {want.shape} ({int(np.sum(y != want)) if y.shape == want.shape else '-'} "
                          "elements)")
                    failures += 1
                else:
                    print(f"ok: {what}: {tuple(y.shape)}, {len(np.unique(y))} distinct values, equal, "
                          f"{cycles[detail]} cycles")
            if len(set(cycles.values())) > 1:
                print(f"FAIL: {name} on {label}: cycles differ between the paths: {cycles}")
                failures += 1
    return failures


def main(bin_dir, source_dir):
    sys.path.insert(0, str(Path(source_dir) / "tools"))
    import int8_reference
    tpu_sim = str(Path(bin_dir) / "tpu-sim")
    rng = np.random.default_rng(4242)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, (input_shape, zin, layers) in CASES.items():
            model = build(tmp, name, input_shape, zin, layers, rng)
            x = rng.integers(-128, 128, [5] + input_shape, dtype=np.int8)
            np.save(tmp / "x.npy", x)
            want = int8_reference.run(model, x)
            banded = tmp / "banded.json"
            banded.write_text(json.dumps({"preset": "small8", "acc_rows": 16}))
            for n in (4, 8, 16, "8 banded"):
                out, stats = tmp / "y.npy", tmp / "stats.json"
                machine = ["--config", str(banded)] if n == "8 banded" else ["--array", str(n)]
                r = subprocess.run([tpu_sim, "net", str(model), "--input", str(tmp / "x.npy"), "--out", str(out),
                                    "--check", "--stats", str(stats), *machine], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"FAIL: {name} on N={n}: tpu-sim net exited {r.returncode}\n{r.stdout}{r.stderr}")
                    failures += 1
                    continue
                programs = len(json.loads(stats.read_text())["programs"])
                if n == "8 banded" and programs != 1:
                    print(f"FAIL: {name} on N={n}: {programs} programs, expected the network on chip")
                    failures += 1
                y = np.load(out)
                if y.dtype != want.dtype or y.shape != want.shape or not np.array_equal(y, want):
                    print(f"FAIL: {name} on N={n}: output {y.dtype} {y.shape} differs from the NumPy "
                          f"reference {want.dtype} {want.shape}")
                    failures += 1
                elif len(np.unique(want)) < min(want.size, 8):
                    print(f"FAIL: {name}: the output has only {len(np.unique(want))} distinct values")
                    failures += 1
                else:
                    print(f"ok: {name} on N={n}: {y.dtype} {tuple(y.shape)}, "
                          f"{len(np.unique(y))} distinct values, equal")
        failures += attention_cases(tmp, tpu_sim, int8_reference, rng)
        # Float input: quantized identically (half to even) by tpu-sim and NumPy.
        model = tmp / "mlp_odd" / "model.json"
        xf = rng.uniform(-5.0, 5.0, (7, 13)).astype(np.float32)
        xf[0, :4] = [0.015, 0.045, -0.015, 7.5]  # halves: x / 0.03 = 0.5, 1.5, -0.5, 250
        np.save(tmp / "xf.npy", xf)
        r = subprocess.run([tpu_sim, "net", str(model), "--input", str(tmp / "xf.npy"), "--out", str(tmp / "yf.npy")],
                           capture_output=True, text=True)
        if r.returncode != 0 or not np.array_equal(np.load(tmp / "yf.npy"), int8_reference.run(model, xf)):
            print(f"FAIL: float input\n{r.stdout}{r.stderr}")
            failures += 1
        else:
            print("ok: float input quantized like NumPy")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
