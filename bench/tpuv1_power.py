#!/usr/bin/python3
"""Die power of the TPUv1 paper's applications on the tpuv1 preset, against
the paper's measured power (Jouppi et al., ISCA 2017, Table 2: idle 28 W and
busy 40 W per die; Figure 10: power against load).

Runs bench/tpuv1_apps.py's stand-ins (the same layers, batches and random
data) with `tpu-sim net --preset tpuv1` and prints, for each, its average
power while it runs (the energy model of docs/energy.md over the run's
cycles), the static and dynamic parts, useful TOPS/W and joules per
inference; then the mean over the applications against the paper's busy
power, the factor by which the dynamic coefficients would have to change for
the mean to equal it (the calibration of docs/energy.md: 1.00 once
calibrated), and each application's power at 10% .. 100% load, load being
the fraction of time the die runs batches, idle (static power only) between
them.

  bench/tpuv1_power.py [--tpu-sim build/sim/tpu-sim] [--json OUT.json]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tpuv1_apps  # noqa: E402

PAPER_IDLE_W, PAPER_BUSY_W = 28.0, 40.0  # Table 2, TPU die
LOADS = [0.1, 0.3, 0.5, 0.7, 1.0]


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    rng = np.random.default_rng(3)  # tpuv1_apps.py's seed: the same data
    results = {}
    print(f"{'app':<6} {'power W':>8} {'static':>7} {'dynamic':>8} {'TOPS':>6} {'TOPS/W':>7} {'mJ/inf':>8} "
          f"{'vs busy':>8}")
    for name, (layers, in_shape, batch) in tpuv1_apps.apps().items():
        s = tpuv1_apps.run_app(args.tpu_sim, name, layers, in_shape, batch, rng)
        t = s["total"]
        e = t["energy"]
        seconds = t["seconds"]
        res = {"power_w": e["avg_power_w"], "static_w": e["static_j"] / seconds,
               "dynamic_w": e["dynamic_j"] / seconds, "useful_tops": t["useful_tops"],
               "useful_tops_per_w": e["useful_tops_per_w"], "j_per_inference": e["total_j"] / batch,
               "by_unit_w": {u: j / seconds for u, j in e["by_unit_j"].items()}}
        results[name] = res
        print(f"{name:<6} {res['power_w']:>8.2f} {res['static_w']:>7.2f} {res['dynamic_w']:>8.2f} "
              f"{res['useful_tops']:>6.1f} {res['useful_tops_per_w']:>7.3f} {1e3 * res['j_per_inference']:>8.4f} "
              f"{100 * (res['power_w'] / PAPER_BUSY_W - 1):>+7.1f}%")
    static = np.mean([r["static_w"] for r in results.values()])
    dynamic = np.mean([r["dynamic_w"] for r in results.values()])
    mean = static + dynamic
    factor = (PAPER_BUSY_W - static) / dynamic
    print(f"mean   {mean:>8.2f} {static:>7.2f} {dynamic:>8.2f}   paper: idle {PAPER_IDLE_W} W, busy {PAPER_BUSY_W} W "
          f"({100 * (mean / PAPER_BUSY_W - 1):+.1f}%)")
    print(f"calibration: the dynamic coefficients x {factor:.3f} make the mean {PAPER_BUSY_W} W")
    print()
    print("power at load (fraction of time running batches; idle between them), % of the power at 100%:")
    print(f"{'app':<6}" + "".join(f"{int(100 * x):>7}%" for x in LOADS))
    for name, r in results.items():
        row = [(r["static_w"] + x * r["dynamic_w"]) / r["power_w"] for x in LOADS]
        r["load_fraction_of_busy"] = dict(zip(map(str, LOADS), row))
        print(f"{name:<6}" + "".join(f"{100 * v:>7.1f}%" for v in row))
    if args.json:
        Path(args.json).write_text(json.dumps({"apps": results, "mean_power_w": mean, "calibration_factor": factor},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
