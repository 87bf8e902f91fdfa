#!/usr/bin/python3
"""Serving the TPUv1 paper's applications with `tpu-sim serve` (docs/serving.md,
docs/validation.md "Serving").

Jouppi et al., ISCA 2017: Table 4 gives MLP0's 99th-percentile response time
and per-die throughput on TPUv1 at batch 200 (7.0 ms, 225,000 IPS) and batch
250 (10.0 ms, 280,000 IPS); Table 5 the time the host spends interacting with
the TPU as a share of the TPU's execution time per application. The stand-ins
are bench/tpuv1_apps.py's (CNN1 has none). This script prints:

1. Table 4: MLP0 at max batch 200 and 250 (batches fill: a 20 ms timeout),
   one die, Poisson arrivals at the paper's IPS: p99 and throughput; and the
   most each batch size can serve (arrivals at 4x that rate: the die never
   idles, throughput = batch / service time). Twice: with the host's CPU time
   at its default (0: only the PCIe transfers are host interaction) and with
   the host CPU time per batch set so that MLP0's host share is Table 5's 21%
   (a parameter taken from the paper, not fitted to Table 4).
2. Table 5: each stand-in's host share at its Table 1 batch (default host
   parameters: the PCIe transfers of its input and output over the 14 GB/s
   host link), and the host CPU time per request the paper's share implies.

  bench/serving.py [--tpu-sim build/sim/tpu-sim] [--requests N]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tpuv1_apps  # noqa: E402

# Table 4 (TPU rows): batch -> (p99 ms, IPS per die).
PAPER_TABLE4 = {200: (7.0, 225000), 250: (10.0, 280000)}
# Table 5: host interaction time as a share of TPU time.
PAPER_TABLE5 = {"MLP0": 0.21, "MLP1": 0.76, "LSTM0": 0.11, "LSTM1": 0.20, "CNN0": 0.51, "CNN1": 0.14}


def serve(tpu_sim, model, d, *args):
    stats = d / "serve.json"
    cmd = [tpu_sim, "serve", str(model), "--preset", "tpuv1", "--stats", str(stats), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: status {r.returncode}\n{r.stdout}{r.stderr}")
    return json.loads(stats.read_text())


def table4(tpu_sim, model, d, requests):
    print("Table 4: MLP0, one die, Poisson arrivals, batches of up to B (20 ms timeout)")
    print(f"{'host CPU':<22} {'B':>4} {'TPU ms':>7} {'rate':>8} {'p99 ms':>7} {'paper':>6} {'ratio':>6} "
          f"{'IPS':>8} {'max IPS':>8} {'paper':>8} {'ratio':>6} {'host':>6}")
    base = serve(tpu_sim, model, d, "--rate", 1000, "--requests", 1, "--max-batch", 1)
    pcie = base["host"]["pcie_bytes_per_s"]
    per_request_bytes = base["host"]["input_bytes_per_request"] + base["host"]["output_bytes_per_request"]
    for label in ("default (PCIe only)", "Table 5's 21% share"):
        for batch, (p99, ips) in PAPER_TABLE4.items():
            once = serve(tpu_sim, model, d, "--rate", 1000, "--requests", batch, "--max-batch", batch,
                         "--batch-timeout", 1000)
            tpu_s = once["batch_costs"][-1]["seconds"]
            host_us = 0.0
            if label.startswith("Table 5"):
                host_us = 1e6 * (PAPER_TABLE5["MLP0"] * tpu_s - batch * per_request_bytes / pcie)
            common = ["--max-batch", batch, "--batch-timeout", 20, "--host-per-batch-us", f"{host_us:.3f}"]
            at = serve(tpu_sim, model, d, "--rate", ips, "--requests", requests, "--seed", 1, *common)
            most = serve(tpu_sim, model, d, "--rate", 4 * ips, "--requests", requests, "--seed", 1, *common)
            got = at["latency_ms"]["p99"]
            print(f"{label:<22} {batch:>4} {tpu_s * 1e3:>7.3f} {ips:>8} {got:>7.2f} {p99:>6.1f} {got / p99:>6.2f} "
                  f"{at['throughput_ips']:>8.0f} {most['throughput_ips']:>8.0f} {ips:>8} "
                  f"{most['throughput_ips'] / ips:>6.2f} {100 * at['host_share_of_tpu_time']:>5.1f}%")


def table5(tpu_sim, root, rng):
    print()
    print("Table 5: host interaction time as a share of TPU time (default host: PCIe transfers only)")
    print(f"{'app':<6} {'batch':>5} {'TPU ms':>8} {'PCIe us':>8} {'share':>7} {'paper':>6} "
          f"{'implied host CPU us/request':>28}")
    for name, (layers, in_shape, batch) in tpuv1_apps.apps().items():
        d = root / name
        d.mkdir()
        tpuv1_apps.write_model(d, layers, in_shape, rng)
        s = serve(tpu_sim, d / "model.json", d, "--rate", 1000, "--requests", batch, "--max-batch", batch,
                  "--batch-timeout", 1000)
        tpu_s = s["batch_costs"][-1]["seconds"]
        share = s["host_share_of_tpu_time"]
        pcie_s = share * tpu_s
        implied = (PAPER_TABLE5[name] * tpu_s - pcie_s) / batch
        print(f"{name:<6} {batch:>5} {tpu_s * 1e3:>8.3f} {pcie_s * 1e6:>8.1f} {100 * share:>6.1f}% "
              f"{100 * PAPER_TABLE5[name]:>5.0f}% {implied * 1e6:>28.2f}")
        if name == "MLP0":
            mlp0 = d / "model.json"
    print(f"CNN1   no stand-in (its layer shapes are not published); paper {100 * PAPER_TABLE5['CNN1']:.0f}%")
    return mlp0


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpu-sim", default=str(root / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--requests", type=int, default=100000, help="requests per Table 4 run")
    args = ap.parse_args()
    rng = np.random.default_rng(3)  # bench/tpuv1_apps.py's seed
    with tempfile.TemporaryDirectory() as tmp:
        mlp0 = table5(args.tpu_sim, Path(tmp), rng)
        print()
        table4(args.tpu_sim, mlp0, Path(tmp), args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
