#!/usr/bin/python3
"""Times the float calibration of `tpu-sim net MODEL.onnx --calibrate`
(docs/performance.md, "Calibration"): exports torchvision models with random
weights and batch-norm statistics from train-mode passes
(tests/onnx/make_models.py: opset 13, 4 calibration images of 224 x 224),
then runs tpu-calib-bench on each at each thread count (TPU_GEMM_THREADS).

  calibration.py BUILD_DIR [--models resnet50,...] [--threads 1,2] [--repeat R]

Prints one line per run and the machine's load (uptime) before and after,
since wall times on a shared machine mean little without it. Run with
/usr/bin/python3 (Debian's python3-torch and python3-torchvision).
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir", type=Path)
    p.add_argument("--models", default="resnet50")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    bench = a.build_dir / "bench" / "tpu-calib-bench"
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            d = Path(tmp) / name
            subprocess.run([sys.executable, str(SRC / "tests/onnx/make_models.py"), name, str(d), "1"],
                           check=True, stdout=subprocess.DEVNULL)
            for threads in a.threads.split(","):
                env = dict(os.environ, TPU_GEMM_THREADS=threads)
                run = subprocess.run([str(bench), str(d / f"{name}.onnx"), str(d / "calib.npy"),
                                      "--repeat", str(a.repeat)], env=env, capture_output=True, text=True)
                if run.returncode != 0:
                    print(run.stderr, end="")
                    return 1
                print(f"threads {threads}: {run.stdout.strip()}")
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
