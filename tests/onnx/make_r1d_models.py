"""The 1-D and UNet-style models of the ONNX tests (issue 28: rank-3 inputs,
Conv1d, Resize nearest), made by make_models.py:

  make_models.py conv1d_net OUT_DIR B   Conv1dNet below, input (B, 4, 64)
  make_models.py unet OUT_DIR B         UNet below, input (B, 3, 16, 16)

Each writes NAME.onnx, calib.npy (4 samples), x.npy (B samples) and
torch.npy (PyTorch's float output). Random weights; the batch-norm statistics
are set by a few forward passes in train mode on random inputs (scales and
shifts drawn first), as a trained network has them, so that activations
neither die nor stay the identity's. Fixed seeds.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from batchnorm_stats import set_batchnorm_statistics


class Conv1dNet(nn.Module):
    """(N, 4, 64): three blocks of Conv1d (BN, ReLU) and MaxPool1d (the third with a 3-window, stride 2,
    padding 1, and a stride-2 conv before it), an AvgPool1d, Flatten, Linear."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(4, 16, 5, padding=2), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),      # 64 -> 32
            nn.Conv1d(16, 24, 3, padding=1), nn.BatchNorm1d(24), nn.ReLU(), nn.MaxPool1d(2),     # 32 -> 16
            nn.Conv1d(24, 32, 3, stride=2, padding=1), nn.BatchNorm1d(32), nn.ReLU(),           # 16 -> 8
            nn.MaxPool1d(3, stride=2, padding=1),                                                # 8 -> 4
            nn.AvgPool1d(2))                                                                     # 4 -> 2
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 2, 10))

    def forward(self, x):
        return self.head(self.features(x))


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """(N, 3, 16, 16), two levels: down with MaxPool2d, up with nearest upsampling x2 (nn.Upsample, and
    F.interpolate to the skip's size: Resize with scales, and with sizes from Shape/Slice/Concat) concatenated with
    the skip connection along channels; a 1x1 conv to 2 output maps."""

    def __init__(self):
        super().__init__()
        self.enc1, self.enc2, self.mid = block(3, 8), block(8, 16), block(16, 24)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec2, self.dec1 = block(24 + 16, 16), block(16 + 8, 8)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)                      # 16 x 16
        e2 = self.enc2(F.max_pool2d(e1, 2))    # 8 x 8
        m = self.mid(F.max_pool2d(e2, 2))      # 4 x 4
        d2 = self.dec2(torch.cat([self.up(m), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, size=e1.shape[2:], mode="nearest"), e1], 1))
        return self.out(d1)


MODELS = {"conv1d_net": (Conv1dNet, (4, 64)), "unet": (UNet, (3, 16, 16))}


def make(name, out, batch, export, save):
    torch.manual_seed(0)
    model, shape = MODELS[name][0](), MODELS[name][1]
    g = torch.Generator().manual_seed(1)
    set_batchnorm_statistics(model, shape, g, passes=3, batch=16)
    calib = torch.randn(4, *shape, generator=g)
    x = torch.randn(batch, *shape, generator=g)
    export(model, x[:1], out / f"{name}.onnx")
    with torch.no_grad():
        y = model(x).numpy()
    save(out / "calib.npy", calib.numpy())
    save(out / "x.npy", x.numpy())
    save(out / "torch.npy", y.astype(np.float32))
    print(f"{name}: exported, batch {batch}")
