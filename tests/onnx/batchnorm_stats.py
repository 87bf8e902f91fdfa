"""Batch-norm statistics for random-weight models (make_models.py,
make_r1d_models.py, bench/zoo_export.py).

torchvision's fresh batch norms are the identity (running mean 0, variance 1,
scale 1, shift 0): the activations of a random-weight network then grow or
die layer after layer, and comparing outputs says little. As training leaves
them instead: each batch norm's scale drawn from U(0.5, 1.5) and shift from
N(0, 0.2), then its running statistics measured over `passes` forward passes
in train mode on `batch` random inputs of `shape` each (a plain average), so
that folding them gives the channels different ranges. The model is left in
eval mode.
"""
import torch
from torch import nn


def set_batchnorm_statistics(model, shape, g, passes, batch):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # a plain average over the passes below
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.normal_(0.0, 0.2, generator=g)
    model.train()
    with torch.no_grad():
        for _ in range(passes):
            model(torch.randn(batch, *shape, generator=g))
    model.eval()
