#!/usr/bin/python3
"""LSTM0 and LSTM1 of the TPUv1 paper as LSTMs: model files for `tpu-sim net`.

Jouppi et al., ISCA 2017, Table 1 gives each LSTM's layer counts, weights,
batch and ops per weight byte, not its shapes:

  LSTM0  24 FC + 34 Vector layers, 52 M weights, batch 64, 64 ops/weight byte
  LSTM1  37 FC + 19 Vector layers, 34 M weights, batch 96, 96 ops/weight byte

Here a stack of LSTM layers is written as the layers the ONNX importer
unrolls an `nn.LSTM` into (src/onnx/import_recurrent.cpp; docs/quantization.md,
"Recurrent layers"), one time step after the other: per layer and step the
four gates are dense layers reading x_t and the previous h (sigmoid, tanh on
the activation unit), then `f * c`, `i * g`, `c = f*c + i*g`, `tanh(c)` and
`h = o * tanh(c)` on the vector unit. Counted as Table 1 counts a model (its
layers, not their steps): each LSTM layer is 4 FC layers (one per gate) and
5 vector layers. Step 0 starts from the zero state, so its gates read x_0
only (the first D rows of the same weights) and `c = i * g`: exactly what the
zero state computes, without loading R's tiles for a product with zero.

What had to be assumed (docs/validation.md, "LSTM0 and LSTM1"):

  LSTM0  6 LSTM layers, hidden 1024, input 1536 to the first, 1024 after;
         residual adds (as in GNMT's stacked LSTMs, Wu et al. 2016) around
         layers 3 to 6: 24 FC, 6 x 5 + 4 = 34 vector layers, 52.4 M weights.
  LSTM1  9 LSTM layers, hidden 672 (input 672), and a dense 672 -> 2048 head
         on the last h: 37 FC, 45 vector layers (Table 1: 19; no stack of
         these cells has 37 gate and head FC layers and 19 vector layers),
         33.9 M weights.
  Both   the sequence length L (default 8); the layers run layer after layer
         (all steps of layer 1, then layer 2: the order of an ONNX export).

The weights are random int8 and the biases random int32 (a fixed seed); the
scales are nominal (timing does not depend on them).
"""
import dataclasses
from dataclasses import dataclass
import json
from pathlib import Path

import numpy as np

GATES = ("i", "f", "g", "o")  # the order the gate layers run in (the importer's)
CELL_VECTOR_LAYERS = 5  # f*c, i*g, c, tanh(c), h


@dataclass
class LstmStack:
    """A stack of LSTM layers (hidden `hidden`, the first reading `features`,
    the others `hidden`), residual adds around layers `residual_from`.. (1-based;
    0: none), an optional dense head on the last step's h, over `steps` steps."""
    features: int
    hidden: int
    layers: int
    steps: int = 8
    residual_from: int = 0
    head: int = 0
    order: str = "layer"  # "layer": layer after layer; "step": all layers per step (a wavefront)

    def layer_inputs(self, k):
        return self.features if k == 0 else self.hidden

    def residual(self, k):
        return self.residual_from > 0 and k + 1 >= self.residual_from

    # Counted as Table 1 counts a model: its layers, not their time steps.
    def fc_layers(self):
        return 4 * self.layers + (1 if self.head else 0)

    def vector_layers(self):
        return CELL_VECTOR_LAYERS * self.layers + sum(self.residual(k) for k in range(self.layers))

    def weights(self):
        return (sum(4 * (self.layer_inputs(k) + self.hidden) * self.hidden for k in range(self.layers))
                + self.hidden * self.head)

    def input_shape(self):
        return [1, self.steps, self.features]

    def weight_bytes_per_inference(self):
        """The weight bytes one batch reads (each step reloads its gates'
        weights; step 0 only W's of gates i, g and o; the head once)."""
        per_step = sum(4 * (self.layer_inputs(k) + self.hidden) * self.hidden for k in range(self.layers))
        step0 = sum(3 * self.layer_inputs(k) * self.hidden for k in range(self.layers))
        return step0 + (self.steps - 1) * per_step + self.hidden * self.head


def apps(steps=8):
    return {
        "LSTM0": LstmStack(features=1536, hidden=1024, layers=6, steps=steps, residual_from=3),
        "LSTM1": LstmStack(features=672, hidden=672, layers=9, steps=steps, head=2048),
    }


def write_model(d, stack, rng, name="lstm"):
    """Writes `stack` as d/model.json and its .npy files (one file per gate
    and layer, shared by the steps: the compiler stores each distinct tile
    once). Returns the number of layers written."""
    d = Path(d)
    H = stack.hidden
    if min(stack.features, stack.hidden, stack.layers, stack.steps) < 1 or stack.head < 0:
        raise ValueError(f"an LSTM stack needs positive sizes, layers and steps: {stack}")
    if stack.residual(0) and stack.features != stack.hidden:
        raise ValueError(f"a residual add around the first layer needs features == hidden: {stack}")
    if stack.order not in ("layer", "step"):
        raise ValueError(f"order must be 'layer' or 'step', not {stack.order!r}")
    in_scale, h_scale, c_scale = 1 / 64, 1 / 127, 4 / 127
    layers = []

    def add(layer):
        layers.append(layer)
        return layer["name"]

    files = {}
    for k in range(stack.layers):
        D = stack.layer_inputs(k)
        for g in GATES:
            w = rng.integers(-127, 128, size=(D + H, H), dtype=np.int8)
            np.save(d / f"l{k}_{g}.npy", w)
            np.save(d / f"l{k}_{g}_x.npy", np.ascontiguousarray(w[:D]))
            np.save(d / f"l{k}_{g}_b.npy", rng.integers(-2000, 2000, size=(H,), dtype=np.int32))
            files[k, g] = (D, D + H)
    if stack.head:
        np.save(d / "head.npy", rng.integers(-127, 128, size=(H, stack.head), dtype=np.int8))
        np.save(d / "head_b.npy", rng.integers(-2000, 2000, size=(stack.head,), dtype=np.int32))

    # The tensors each layer's step t reads (x) and keeps (h, c).
    x_of = {}  # (k, t) -> name of x_t of layer k ("input" for layer 0)
    state = {}  # k -> (h, c) after the last step run

    def step(k, t):
        x = "input" if k == 0 else x_of[k, t]
        s = f"l{k}.t{t}."
        gate = {}
        for g in GATES if t else ("i", "g", "o"):  # step 0: c = i * g, no f
            D, K = files[k, g]
            layer = {"type": "dense", "name": s + f"gate_{g}",
                     "weights": f"l{k}_{g}.npy" if t else f"l{k}_{g}_x.npy", "bias": f"l{k}_{g}_b.npy",
                     "weight_scale": 1.0 / 73 / np.sqrt(K if t else D),  # pre-activations of about unit spread
                     "activation": "tanh" if g == "g" else "sigmoid",
                     "inputs": [x, state[k][0]] if t else [x]}
            if k == 0:
                layer["pixel"] = t
            gate[g] = add(layer)
        cq = {"scale": c_scale, "zero_point": 0}
        ig = add({"type": "mul", "name": s + "ig", "inputs": [gate["i"], gate["g"]], "output": cq})
        if t:
            fc = add({"type": "mul", "name": s + "fc", "inputs": [gate["f"], state[k][1]], "output": cq})
            c = add({"type": "add", "name": s + "c", "inputs": [fc, ig], "output": cq})
        else:
            c = ig
        tc = add({"type": "affine", "name": s + "tanh_c", "inputs": [c], "alpha": 1.0, "activation": "tanh"})
        h = add({"type": "mul", "name": s + "h", "inputs": [gate["o"], tc],
                 "output": {"scale": h_scale, "zero_point": 0}})
        state[k] = (h, c)
        if k + 1 < stack.layers:
            y = h
            if stack.residual(k):
                y = add({"type": "add", "name": s + "res", "inputs": [h, x],
                         "output": {"scale": 2 * h_scale, "zero_point": 0}})
            x_of[k + 1, t] = y
        elif stack.residual(k) and t == stack.steps - 1:  # the last layer's: only its output's
            add({"type": "add", "name": s + "res", "inputs": [h, x], "output": {"scale": 2 * h_scale, "zero_point": 0}})

    if stack.order == "layer":
        for k in range(stack.layers):
            for t in range(stack.steps):
                step(k, t)
    else:
        for t in range(stack.steps):
            for k in range(stack.layers):
                step(k, t)
    if stack.head:
        add({"type": "dense", "name": "head", "inputs": [layers[-1]["name"]], "weights": "head.npy",
             "bias": "head_b.npy", "weight_scale": 1.0 / 73 / np.sqrt(H), "activation": "none",
             "output": {"scale": 0.05, "zero_point": 0}})
    model = {"format": "tpu-sim-net", "version": 1, "name": name,
             "input": {"shape": stack.input_shape(), "scale": in_scale, "zero_point": 0}, "layers": layers}
    (d / "model.json").write_text(json.dumps(model))
    return len(layers)


def replace(stack, **changes):
    """A copy of `stack` with `changes` (dataclasses.replace)."""
    return dataclasses.replace(stack, **changes)


def hidden_variants(name, steps=8):
    """Other hidden sizes for the sweep, near Table 1's weight count: one that
    does not fill the 256-lane tiles (LSTM0); whole tiles with fewer layers,
    and tiles filled as Table 3's LSTM1 row suggests with more (LSTM1)."""
    if name == "LSTM0":  # 6 x 8 x 1040^2 = 51.9 M: each gate's 1040 lanes in 5 tiles
        return [("H 1040, input 1040", LstmStack(features=1040, hidden=1040, layers=6, steps=steps, residual_from=3))]
    # 7 x 8 x 768^2 + 768 x 2048 = 34.6 M: whole tiles, 29 FC. 26 x 8 x 400^2 +
    # 400 x 2048 = 34.1 M: gates 800 x 400 in 4 x 2 tiles (61% filled, Table 3's
    # useful over active MACs for LSTM1: 6.3 / 10.5), 105 FC.
    return [("H 768, 7 layers", LstmStack(features=768, hidden=768, layers=7, steps=steps, head=2048)),
            ("H 400, 26 layers", LstmStack(features=400, hidden=400, layers=26, steps=steps, head=2048))]
