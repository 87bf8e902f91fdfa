#!/usr/bin/python3
"""Independent NumPy reference for programs/one_tile.s.

  one_tile_check.py make DIR N   writes DIR/host.npy and DIR/weights.npy
  one_tile_check.py check DIR N  checks DIR/out.npy against the reference
"""
import sys

import numpy as np

mode, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(1234 + n)
host = np.zeros((24, n), dtype=np.int8)
host[0:8] = rng.integers(-128, 128, size=(8, n), dtype=np.int8)
weights = rng.integers(-128, 128, size=(1, n, n), dtype=np.int8)
if mode == "make":
    np.save(f"{folder}/host.npy", host)
    np.save(f"{folder}/weights.npy", weights)
    sys.exit(0)
# SETQ 1, 0, 0 then ACT.R: y = max(clip(acc, -128, 127), 0).
acc = host[0:8].astype(np.int64) @ weights[0].astype(np.int64)
expect = host.copy()
expect[16:24] = np.maximum(np.clip(acc, -128, 127), 0).astype(np.int8)
out = np.load(f"{folder}/out.npy")
if out.dtype != np.int8 or out.shape != expect.shape or not np.array_equal(out, expect):
    print("mismatch:\n", out, "\nexpected:\n", expect)
    sys.exit(1)
print("one_tile: tpu-sim output equals the NumPy reference")
