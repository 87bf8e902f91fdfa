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
bit for bit. Exit status 0 when all are equal.
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
