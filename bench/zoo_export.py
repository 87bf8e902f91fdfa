#!/usr/bin/python3
"""Exports one model of the model zoo (bench/model_zoo.py) to ONNX with its
data, with PyTorch (Debian's python3-torch 1.13 and python3-torchvision 0.14;
`weights=None`, nothing is downloaded):

  zoo_export.py NAME SIZE OUT_DIR [--batch B] [--calib C]

writes into OUT_DIR:

  model.onnx   torch.onnx.export at opset 13 (an example batch of 1; tpu-sim
               runs any batch)
  calib.npy    C random normal inputs (the calibration set)
  x.npy        B other random normal inputs (the evaluation batch)
  torch.npy    PyTorch's float output on x.npy (eval mode)
  meta.json    the recipe (name, size, input shape, seeds, batch sizes,
               versions), parameter count, export time and the weight-rounding
               diagnostics below

NAME is a torchvision classification model (resnet50, inception_v3, ...) or
one of the ONNX tests' nets, whose one definition lives in
tests/onnx/make_r1d_models.py: `unet` (a UNet-style net, input 3 x SIZE x
SIZE) and `conv1d_net` (a Conv1d net, input (4, 64): its Linear head fixes the
length). `softmax_probe` is a conv and a Softmax over its 8 x 8 map's channels, which
tpu-sim refuses (the self-test's refused model: a Softmax is imported only over
features or a one-pixel map's channels).

**Batch-norm statistics.** A network with random weights and torchvision's
fresh batch norms (running mean 0, variance 1, scale 1, shift 0) lets
activations grow or die layer after layer, so that the int8 and the float
output agree trivially (both near constant) or not at all. As
tests/onnx/make_models.py does, every BatchNorm gets a random scale in
[0.5, 1.5] and shift from N(0, 0.2), its running statistics are reset and
measured by PASSES forward passes in train mode on random normal inputs (a
plain average: momentum None), then the model is put in eval mode. Fixed
seeds: torch.manual_seed(0) for the weights, a generator seeded 1 for the
batch norms and the data.

**Diagnostics** (meta.json's `diagnostics`, each compared with the float
output on x.npy as bench/zoo_metrics.py does: correlation, input-dependent
correlation, top-1 agreement):

  weights_int8_per_channel   PyTorch with only its Conv and Linear weights
                             rounded to int8 (symmetric) per output channel,
                             before batch-norm folding (docs/onnx.md's
                             measure); no activation quantized
  weights_int8_folded_per_tensor
                             the same per tensor after folding each
                             BatchNorm into the Conv before it (torch.fx),
                             a standalone BatchNorm's multiplier per tensor:
                             tpu-sim's weights, nothing else quantized
  input_noise_1pct           PyTorch on x.npy plus Gaussian noise of 1% of the
                             inputs' standard deviation (the network's own
                             sensitivity to a small perturbation)
  other_inputs               PyTorch on other random inputs: what agreement an
                             output that ignores the input would reach

They say how much of a low agreement of tpu-sim's int8 output is the random
network's own sensitivity, and how much a correlation means for it.
"""
import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "onnx"))
import make_r1d_models  # noqa: E402  the UNet-style and Conv1d nets of the ONNX tests
from batchnorm_stats import set_batchnorm_statistics  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from zoo_metrics import compare  # noqa: E402

EXPORT_VERSION = 3  # part of the cache key: change it when the recipe below changes
OPSET = 13
BN_PASSES = 3
BN_BATCH = 8
WEIGHT_SEED = 0
DATA_SEED = 1


class SoftmaxProbe(nn.Module):
    """A conv and a Softmax over a map's channels, which tpu-sim refuses (the self-test's refused row)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.softmax(self.conv(x), 1)


def input_shape(name, size):
    """The input's shape without the batch dimension."""
    if name == "conv1d_net":
        return make_r1d_models.MODELS[name][1]  # (4, 64): Linear(32 * 2, 10) fixes the length
    return (3, size, size)


def build(name):
    torch.manual_seed(WEIGHT_SEED)
    if name in make_r1d_models.MODELS:
        return make_r1d_models.MODELS[name][0]()
    if name == "softmax_probe":
        return SoftmaxProbe()
    import torchvision
    extra = {}
    if name in ("googlenet", "inception_v3"):
        # Auxiliary classifiers run in train mode only (and need 299 x 299 for Inception); stated
        # init_weights keeps torchvision from warning that its default will change.
        extra = {"aux_logits": False, "init_weights": True}
    return getattr(torchvision.models, name)(weights=None, **extra)



def round_int8(w, per_channel):
    """w rounded to int8 levels (symmetric, 127 steps), per output channel (dim 0) or per tensor."""
    peak = w.abs().amax(dim=tuple(range(1, w.dim())), keepdim=True) if per_channel and w.dim() > 1 else w.abs().max()
    scale = torch.clamp(peak, min=1e-30) / 127.0
    return torch.clamp(torch.round(w / scale), -127, 127) * scale


def folded(model):
    """A copy of the model (eval mode) with each BatchNorm folded into the Conv before it, as tpu-sim's import
    folds them: torch.fx's fuse, or, where fx cannot trace the model (ShuffleNetV2's x.size()), each Conv
    followed by a BatchNorm within an nn.Sequential. BatchNorms after no Conv (DenseNet's) stay."""
    from torch.fx.experimental.optimization import fuse
    try:
        return fuse(model)
    except Exception:  # noqa: BLE001  a TraceError, or what tracing a model's Python raises
        m = copy.deepcopy(model)
        for seq in m.modules():
            if isinstance(seq, nn.Sequential):
                names = list(seq._modules)
                for a, b in zip(names, names[1:]):
                    conv, bn = seq._modules[a], seq._modules[b]
                    if isinstance(conv, (nn.Conv1d, nn.Conv2d)) and isinstance(bn, nn.modules.batchnorm._BatchNorm):
                        seq._modules[a] = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
                        seq._modules[b] = nn.Identity()
        return m


def rounded_weights_output(model, x, tpu_sim_like):
    """PyTorch's output with only the weights rounded to int8, nothing else quantized: the Conv and Linear
    weights per output channel (the model as exported), or, as tpu-sim quantizes them, per tensor after
    folding the batch norms (a standalone BatchNorm's multiplier per tensor too)."""
    m = folded(model) if tpu_sim_like else copy.deepcopy(model)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Linear)):
                mod.weight.copy_(round_int8(mod.weight, not tpu_sim_like))
            elif tpu_sim_like and isinstance(mod, nn.modules.batchnorm._BatchNorm):
                std = torch.sqrt(mod.running_var + mod.eps)
                mod.weight.copy_(round_int8(mod.weight / std, False) * std)
        return m(x).numpy()


def export(name, size, out, batch, calib_batch):
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    model = build(name)
    shape = input_shape(name, size)
    g = torch.Generator().manual_seed(DATA_SEED)
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    set_batchnorm_statistics(model, shape, g, BN_PASSES, BN_BATCH)
    calib = torch.randn(calib_batch, *shape, generator=g)
    x = torch.randn(batch, *shape, generator=g)
    noise = 0.01 * x.std() * torch.randn(x.shape, generator=g)
    other = torch.randn(batch, *shape, generator=g)
    with torch.no_grad():
        y = model(x).numpy().astype(np.float32)
        diagnostics = {"weights_int8_per_channel": compare(rounded_weights_output(model, x, False), y),
                       "weights_int8_folded_per_tensor": compare(rounded_weights_output(model, x, True), y),
                       "input_noise_1pct": compare(model(x + noise).numpy(), y),
                       "other_inputs": compare(model(other).numpy(), y)}
    onnx_tmp = out / "model.onnx.tmp"
    torch.onnx.export(model, x[:1], str(onnx_tmp), opset_version=OPSET, input_names=["x"], output_names=["y"])
    np.save(out / "calib.npy", np.ascontiguousarray(calib.numpy()))
    np.save(out / "x.npy", np.ascontiguousarray(x.numpy()))
    np.save(out / "torch.npy", np.ascontiguousarray(y))
    onnx_tmp.replace(out / "model.onnx")
    import torchvision
    meta = {
        "name": name, "size": size, "input_shape": list(shape), "batch": batch, "calib_batch": calib_batch,
        "export_version": EXPORT_VERSION, "opset": OPSET, "weight_seed": WEIGHT_SEED, "data_seed": DATA_SEED,
        "batchnorm": {"layers": has_bn, "passes": BN_PASSES, "batch": BN_BATCH},
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "output_shape": list(y.shape),
        "export_seconds": round(time.time() - t0, 2),
        "diagnostics": diagnostics,
    }
    # Written last: its presence marks a complete export (model_zoo.py's cache).
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("size", type=int)
    ap.add_argument("out", type=Path)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--calib", type=int, default=4)
    args = ap.parse_args()
    meta = export(args.name, args.size, args.out, args.batch, args.calib)
    print(f"{args.name} at {args.size}: exported in {meta['export_seconds']} s, {meta['parameters']} parameters")
    for what, c in meta["diagnostics"].items():
        print(f"  {what:<26} correlation {c['correlation']:.4f}, input-dependent {c['input_dependent_correlation']:.4f}, "
              f"top-1 {c['top1_agreement']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
