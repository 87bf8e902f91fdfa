#!/usr/bin/python3
"""tpu-sim serve from the command line (docs/serving.md): its percentiles
against NumPy's on the latencies it writes, its throughput and latencies
against the trace it was given, its batch cycles against `tpu-sim net` on the
same batch, determinism for a seed, --sweep-batch, and its errors.

  serve_cli_test.py TPU_SIM SOURCE_DIR
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FIELDS = ["latency_ms", "throughput_ips", "tpu_busy_fraction", "host_share_of_tpu_time", "avg_power_w",
          "energy_per_inference_j"]


def run(tpu_sim, *args):
    return subprocess.run([tpu_sim, "serve", *map(str, args)], capture_output=True, text=True)


def ok(tpu_sim, *args):
    r = run(tpu_sim, *args)
    assert r.returncode == 0, f"{args}: status {r.returncode}\n{r.stdout}{r.stderr}"
    return r


def fails(tpu_sim, status, words, *args):
    r = run(tpu_sim, *args)
    assert r.returncode == status, f"{args}: status {r.returncode}, wanted {status}\n{r.stdout}{r.stderr}"
    assert words in r.stderr, f"{args}: '{words}' not in {r.stderr!r}"


def main():
    tpu_sim, source = sys.argv[1], Path(sys.argv[2])
    model = source / "programs" / "nets" / "digits_mlp" / "model.json"
    common = [model, "--preset", "small8"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # A trace of 3000 Poisson arrivals at 40 000 per second, in ms.
        rng = np.random.default_rng(11)
        t_ms = np.cumsum(rng.exponential(1e3 / 40000, size=3000))
        (d / "trace.txt").write_text("# arrival times, ms\n" + "\n".join(f"{t:.6f}" for t in t_ms) + "\n")
        ok(tpu_sim, *common, "--arrivals", "trace", d / "trace.txt", "--max-batch", 8, "--batch-timeout", 0.05,
           "--dies", 2, "--stats", d / "s.json", "--latencies", d / "l.npy")
        s = json.loads((d / "s.json").read_text())
        lat = np.load(d / "l.npy")
        assert lat.shape == (3000,), lat.shape
        for f in FIELDS:
            assert f in s, f"missing {f}"
        # Energy: the batches' own (each batch size's energy_j) plus the dies'
        # idle power over the rest of the span; power is energy over the span.
        assert s["avg_power_w"] > 0 and s["energy_per_inference_j"] > 0, s
        assert all(c["energy_j"] > 0 for c in s["batch_costs"]), s["batch_costs"]
        for q, key in [(50, "p50"), (90, "p90"), (99, "p99")]:
            assert np.isclose(s["latency_ms"][key], np.percentile(lat, q), rtol=1e-12), (key, s["latency_ms"])
        assert np.isclose(s["latency_ms"]["max"], lat.max(), rtol=1e-12)
        # Throughput: requests over first arrival to last answer, from the trace.
        span_s = (np.max(t_ms + lat) - t_ms[0]) * 1e-3
        assert np.isclose(s["avg_power_w"] * span_s, s["energy_per_inference_j"] * 3000, rtol=1e-6), s
        assert np.isclose(s["throughput_ips"], 3000 / span_s, rtol=1e-6), (s["throughput_ips"], 3000 / span_s)
        # Every batch size run has its cycles; a latency is at least the
        # smallest batch's TPU time.
        costs = {c["size"]: c for c in s["batch_costs"]}
        assert set(costs) <= set(range(1, 9)) and costs, costs
        assert lat.min() >= min(c["seconds"] for c in costs.values()) * 1e3 * (1 - 1e-9)
        # A batch's cycles are tpu-sim net's on a batch of that size.
        size = max(costs)
        x = rng.integers(-128, 128, size=(size, 64), dtype=np.int8)
        np.save(d / "x.npy", x)
        subprocess.run([tpu_sim, "net", model, "--input", d / "x.npy", "--preset", "small8", "--stats",
                        d / "net.json"], check=True, capture_output=True)
        net = json.loads((d / "net.json").read_text())
        assert costs[size]["cycles"] == net["total"]["cycles"], (costs[size], net["total"])
        # PCIe bytes: 64 int8 in, 10 int32 scores out per request.
        assert s["host"]["input_bytes_per_request"] == 64 and s["host"]["output_bytes_per_request"] in (10, 40)

        # Poisson arrivals: the same seed gives the same statistics, another seed others.
        poisson = [*common, "--rate", 30000, "--requests", 1500, "--max-batch", 4, "--batch-timeout", 0.02]
        ok(tpu_sim, *poisson, "--seed", 3, "--stats", d / "a.json")
        ok(tpu_sim, *poisson, "--seed", 3, "--stats", d / "b.json")
        ok(tpu_sim, *poisson, "--seed", 4, "--stats", d / "c.json")
        a, b, c = (json.loads((d / f"{n}.json").read_text()) for n in "abc")
        assert a == b, "not deterministic for a seed"
        assert a["latency_ms"] != c["latency_ms"]
        assert np.isclose(a["throughput_ips"], 30000, rtol=0.1), a["throughput_ips"]

        # --sweep-batch: one row per maximum batch.
        r = ok(tpu_sim, *common, "--rate", 30000, "--requests", 1000, "--sweep-batch", "1,4,16", "--stats",
               d / "sweep.json")
        rows = json.loads((d / "sweep.json").read_text())["sweep"]
        assert [row["max_batch"] for row in rows] == [1, 4, 16]
        assert all(row["mean_batch"] <= row["max_batch"] for row in rows)
        assert "max_batch" in r.stdout and "p99_ms" in r.stdout

        # Errors: usage (2) for bad options, bad input (3) for bad traces; no --stats left behind.
        stats = d / "bad.json"
        fails(tpu_sim, 2, "--rate", *common, "--rate", 0, "--requests", 10, "--max-batch", 4, "--stats", stats)
        fails(tpu_sim, 2, "--rate", *common, "--rate", -5, "--requests", 10, "--max-batch", 4)
        fails(tpu_sim, 2, "--max-batch", *common, "--rate", 100, "--requests", 10, "--max-batch", 0)
        fails(tpu_sim, 2, "--max-batch", *common, "--rate", 100, "--requests", 10)
        fails(tpu_sim, 2, "--requests", *common, "--rate", 100, "--max-batch", 4)
        fails(tpu_sim, 2, "--dies", *common, "--rate", 100, "--requests", 10, "--max-batch", 4, "--dies", 0)
        fails(tpu_sim, 2, "--arrivals", *common, "--arrivals", "uniform", "--requests", 10, "--max-batch", 4)
        fails(tpu_sim, 2, "--rate", *common, "--arrivals", "trace", d / "trace.txt", "--rate", 5, "--max-batch", 4)
        (d / "empty.txt").write_text("# nothing\n\n")
        fails(tpu_sim, 3, "no arrival times", *common, "--arrivals", "trace", d / "empty.txt", "--max-batch", 4,
              "--stats", stats)
        (d / "unsorted.txt").write_text("1.0\n3.0\n2.0\n")
        fails(tpu_sim, 3, "unsorted.txt:3: arrival time 2 ms is before", *common, "--arrivals", "trace",
              d / "unsorted.txt", "--max-batch", 4)
        (d / "text.txt").write_text("1.0\nsoon\n")
        fails(tpu_sim, 3, "text.txt:2: expected one arrival time", *common, "--arrivals", "trace",
              d / "text.txt", "--max-batch", 4)
        np.save(d / "wrong.npy", np.zeros((4, 10), dtype=np.int8))
        fails(tpu_sim, 3, "expected samples of shape (S, 64)", *common, "--input", d / "wrong.npy", "--rate", 100,
              "--requests", 10, "--max-batch", 4)
        assert not stats.exists(), "a failed run left --stats behind"
    print("serve cli: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
