#!/usr/bin/python3
"""GEMM cycles in tpu-sim against SCALE-Sim's analytical weight-stationary model.

SCALE-Sim (Samajdar et al., ISPASS 2020) counts a weight-stationary GEMM of
M x K times K x Nout on an R x C array as ceil(K/R) * ceil(Nout/C) folds run one
after the other, each taking 2R + C + M - 2 cycles (filling the weights,
streaming M rows through, draining). tpu-sim's array is double-buffered: the
next fold's weights shift into the shadow registers while the current fold
computes, so folds follow each other without the fill and drain in between.
The script runs `tpu-sim gemm --check` on the tpuv1 array (N = 256) with every
memory transfer made nearly free (zero latencies, 2^20 bytes per cycle), so
only the array's timing remains, and prints both counts.

  bench/scalesim_compare.py [--tpu-sim build/sim/tpu-sim]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SHAPES = [(256, 256, 256), (64, 256, 256), (1024, 256, 256), (256, 1024, 1024),
          (64, 2048, 2048), (1000, 1024, 512), (8, 4096, 256)]


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    args = ap.parse_args()
    n = 256
    print(f"{'M':>5} {'K':>5} {'Nout':>5} {'folds':>6} {'SCALE-Sim':>10} {'tpu-sim':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "fast.json").write_text(json.dumps({"host_latency": 0, "host_bytes_per_cycle": 1 << 20,
                                                 "weight_latency": 0, "weight_bytes_per_cycle": 1 << 20}))
        rng = np.random.default_rng(5)
        for m, k, nout in SHAPES:
            np.save(d / "a.npy", rng.integers(-128, 128, size=(m, k), dtype=np.int8))
            np.save(d / "b.npy", rng.integers(-128, 128, size=(k, nout), dtype=np.int8))
            r = subprocess.run([args.tpu_sim, "gemm", "--a", str(d / "a.npy"), "--b", str(d / "b.npy"),
                                "--preset", "tpuv1", "--config", str(d / "fast.json"), "--check",
                                "--stats", str(d / "s.json")], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stdout + r.stderr)
            cycles = json.loads((d / "s.json").read_text())["cycles"]
            folds = -(-k // n) * -(-nout // n)
            scalesim = folds * (2 * n + n + m - 2)
            print(f"{m:>5} {k:>5} {nout:>5} {folds:>6} {scalesim:>10} {cycles:>9} {cycles / scalesim:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
