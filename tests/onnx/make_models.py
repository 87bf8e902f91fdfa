#!/usr/bin/python3
"""Makes the ONNX models and data of the ONNX tests with PyTorch (nothing is
downloaded: torchvision architectures with random weights, a CNN trained here
on scikit-learn's digits).

  make_models.py digits OUT_DIR      digits.onnx, calib.npy, x.npy, labels.npy, torch.npy
                                     (PyTorch's float output) and torch_accuracy.txt
  make_models.py resnet18 OUT_DIR B  resnet18.onnx, calib.npy (4 images), x.npy (B images), torch.npy;
                                     random weights, batch-norm statistics measured on random images
  make_models.py mobilenet_v2 OUT_DIR B   likewise
  make_models.py NAME OUT_DIR B SIZE      torchvision model NAME at SIZE x SIZE input
  make_models.py group_net OUT_DIR B      GroupNet below (16 x 16), likewise
  make_models.py concat_net OUT_DIR B     ConcatNet below (12 x 12), likewise
  make_models.py shuffle_net OUT_DIR B    ShuffleNet below (12 x 12), likewise
  make_models.py conv1d_net OUT_DIR B     a Conv1d net (make_r1d_models.py), likewise
  make_models.py unet OUT_DIR B           a UNet-style net (make_r1d_models.py), likewise

Fixed seeds throughout. Run with /usr/bin/python3 (Debian's python3-torch,
python3-torchvision, python3-sklearn).
"""
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from batchnorm_stats import set_batchnorm_statistics


def export(model, example, path, opset=13):
    model.eval()
    torch.onnx.export(model, example, str(path), opset_version=opset, input_names=["x"], output_names=["y"])


def save(path, array):
    np.save(path, np.ascontiguousarray(array))


class DigitsCNN(nn.Module):
    """8x8 digits: conv 3x3 (BN, ReLU), max-pool, conv 3x3 (BN, ReLU6), flatten, dense (ReLU), dense."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU6())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.features(x))


def digits(out):
    from sklearn.datasets import load_digits
    torch.manual_seed(0)
    np.random.seed(0)
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8) in [0, 1]
    y = d.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    train, test = order[:1297], order[1297:]
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for epoch in range(15):
        model.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 32):
            idx = perm[i:i + 32]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x[test])).numpy()
    acc = float(np.mean(np.argmax(logits, 1) == y[test]))
    export(model, torch.from_numpy(x[:1]), out / "digits.onnx")
    save(out / "calib.npy", x[train[:256]])
    save(out / "x.npy", x[test])
    save(out / "labels.npy", y[test])
    save(out / "torch.npy", logits.astype(np.float32))
    (out / "torch_accuracy.txt").write_text(f"{acc}\n")
    print(f"digits: PyTorch float accuracy {acc:.4f} on {len(test)} test images")


class GroupNet(nn.Module):
    """16x16: conv 3x3 (BN, ReLU), max-pool 3x3/2 with ceil_mode (16 -> 8, floor would give 7), grouped conv 3x3
    (3 groups), depthwise conv 3x3, grouped conv 1x1 (4 groups), mean over H, W with keepdims (ReduceMean), conv 1x1
    (ReLU), mean without keepdims, dense."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(12, 24, 3, padding=1, groups=3), nn.BatchNorm2d(24), nn.ReLU(),
            nn.Conv2d(24, 24, 3, padding=1, groups=24), nn.BatchNorm2d(24), nn.ReLU(),
            nn.Conv2d(24, 48, 1, groups=4), nn.BatchNorm2d(48), nn.ReLU())
        self.squeeze = nn.Sequential(nn.Conv2d(48, 32, 1), nn.ReLU())
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        h = self.squeeze(self.features(x).mean([2, 3], keepdim=True))
        return self.fc(h.mean([2, 3]))


class ConcatNet(nn.Module):
    """12x12: a stem conv 3x3 (BN, ReLU); a fire module (conv 1x1 and conv 3x3, each ReLU, concatenated: both read
    only by the concat); a dense block (conv 3x3 + BN without ReLU on the fire's output, concatenated with it: the
    fire's output has two readers, the parts different scales); a concat of three (stem, block, fire); BN + ReLU
    on a concat (DenseNet's pre-activation); conv 1x1 (ReLU), global average pool, dense."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.BatchNorm2d(5), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(5, 6, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(5, 11, 3, padding=1), nn.ReLU())
        self.grow = nn.Sequential(nn.Conv2d(17, 7, 3, padding=1), nn.BatchNorm2d(7))
        self.norm = nn.Sequential(nn.BatchNorm2d(24), nn.ReLU())
        self.mix = nn.Sequential(nn.Conv2d(24, 10, 1), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(56, 16, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(16, 10))

    def forward(self, x):
        s = self.stem(x)
        f = torch.cat([self.e1(s), self.e3(s)], 1)
        g = torch.cat([f, self.grow(f)], 1)
        m = self.mix(self.norm(g))
        return self.head(torch.cat([s, g, m, f], 1))


def channel_shuffle(x, groups):
    """torchvision's ShuffleNetV2 channel shuffle (its export computes the shapes with Shape, Gather, Div)."""
    batchsize, num_channels, height, width = x.size()
    x = x.view(batchsize, groups, num_channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, -1, height, width)


class ShuffleNet(nn.Module):
    """12x12: a stem conv 3x3 (BN, ReLU); a ShuffleNetV2 unit (chunk into halves: Slice with shape arithmetic;
    conv 1x1, depthwise 3x3, conv 1x1 on one half; concat; shuffle of 2 groups); a Split into 4 and 8 channels,
    concatenated the other way round, shuffled in 3 groups; conv 1x1 (ReLU), mean over H, W, dense."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU())
        self.branch = nn.Sequential(nn.Conv2d(6, 6, 1), nn.BatchNorm2d(6), nn.ReLU(),
                                    nn.Conv2d(6, 6, 3, padding=1, groups=6), nn.BatchNorm2d(6),
                                    nn.Conv2d(6, 6, 1), nn.BatchNorm2d(6), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(12, 16, 1), nn.ReLU())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x1, x2 = x.chunk(2, dim=1)
        x = channel_shuffle(torch.cat([x1, self.branch(x2)], 1), 2)
        a, c = torch.split(x, [4, 8], dim=1)
        x = channel_shuffle(torch.cat([c, a], 1), 3)
        return self.fc(self.head(x).mean([2, 3]))


class VecNet(nn.Module):
    """12x12, exported at opset 14 (HardSwish is one ONNX operator there): a stem conv 3x3 (BN) and
    hard-swish; a squeeze-and-excitation block (global pool, conv 1x1 ReLU, conv 1x1 hardsigmoid,
    the map times the gate broadcast per channel); a SiLU (x * Sigmoid(x): the Sigmoid's input has
    two readers); the product of two maps of the same shape; a Sigmoid on a pool (not after a
    conv); global pool, dense, hard-swish and dense (MobileNetV3's head)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 10, 3, padding=1), nn.BatchNorm2d(10), nn.Hardswish())
        self.fc1 = nn.Conv2d(10, 4, 1)
        self.fc2 = nn.Conv2d(4, 10, 1)
        self.conv = nn.Sequential(nn.Conv2d(10, 10, 3, padding=1), nn.BatchNorm2d(10))
        self.other = nn.Conv2d(10, 10, 1)
        self.head = nn.Sequential(nn.Linear(10, 16), nn.Hardswish(), nn.Linear(16, 10))

    def forward(self, x):
        x = self.stem(x)
        gate = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(x.mean([2, 3], keepdim=True)))))
        x = x * gate
        y = self.conv(x)
        y = y * torch.sigmoid(y)
        z = y * self.other(y)
        z = torch.sigmoid(nn.functional.max_pool2d(z, 2))
        return self.head(z.mean([2, 3]))


MODELS = {"group_net": (GroupNet, 16), "concat_net": (ConcatNet, 12), "shuffle_net": (ShuffleNet, 12),
          "vec_net": (VecNet, 12)}


def torchvision_model(name, out, batch, size=224):
    import torchvision
    torch.manual_seed(0)
    if name in MODELS:
        model, size = MODELS[name][0](), MODELS[name][1]
    else:
        # Inception v3's auxiliary classifier (train mode only) needs inputs of about 299 x 299.
        extra = {"aux_logits": False} if name == "inception_v3" else {}
        model = getattr(torchvision.models, name)(weights=None, **extra)
    g = torch.Generator().manual_seed(1)
    set_batchnorm_statistics(model, (3, size, size), g, passes=1, batch=16)
    calib = torch.randn(4, 3, size, size, generator=g)
    x = torch.randn(batch, 3, size, size, generator=g)
    export(model, x[:1], out / f"{name}.onnx", 14 if name == "vec_net" else 13)
    with torch.no_grad():
        y = model(x).numpy()
    save(out / "calib.npy", calib.numpy())
    save(out / "x.npy", x.numpy())
    save(out / "torch.npy", y.astype(np.float32))
    print(f"{name}: exported, batch {batch}")


def main():
    what, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if what == "digits":
        digits(out)
    elif what in ("conv1d_net", "unet"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import make_r1d_models
        make_r1d_models.make(what, out, int(sys.argv[3]) if len(sys.argv) > 3 else 1, export, save)
    else:
        torchvision_model(what, out, int(sys.argv[3]) if len(sys.argv) > 3 else 1,
                          int(sys.argv[4]) if len(sys.argv) > 4 else 224)
    return 0


if __name__ == "__main__":
    sys.exit(main())
