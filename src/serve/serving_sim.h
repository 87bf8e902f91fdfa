// The serving simulation (docs/serving.md): requests arrive at a server with
// one or more identical TPU dies, wait in one first-come-first-served queue,
// and leave in batches. It reads the arrival times, the batching policy, the
// host's costs and each batch size's TPU cost (a function, so that it runs
// without a network: the tests give service times directly), and produces
// every request's latency and every batch's timing. Time is in seconds, as
// doubles: the events are a few per request, so an ordered loop over the
// requests is the whole event simulation (docs/serving.md says why it is not
// SystemC's kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace tpu::serve {

// What one batch costs on a die: its cycles on the cycle-accurate model, the
// seconds they take at the configured clock, and the energy of the run when
// an energy model gives one (absent until then: nothing reports power
// without it).
struct BatchCost {
  std::uint64_t cycles = 0;
  double seconds = 0;
  std::optional<double> energy_j;
};

// The TPU cost of a batch of `size` requests (1 <= size <= max_batch).
using BatchCostFn = std::function<BatchCost(std::size_t size)>;

// The host's share of a batch (docs/serving.md, "The host"): its CPU time,
// per batch and per request, spent before the batch's program starts (the
// die waits for it), and the PCIe transfers of the batch's input and output,
// which the program itself makes (its RHM and WHM at the host DMA's
// bandwidth), so they are inside the TPU time and count only in the host's
// share, not a second time in the latency.
struct HostCost {
  double per_batch_s = 0;
  double per_request_s = 0;
  double pcie_bytes_per_s = 0;  // 0: no transfers counted
  std::uint64_t input_bytes_per_request = 0;
  std::uint64_t output_bytes_per_request = 0;

  double cpu_seconds(std::size_t size) const;
  double pcie_seconds(std::size_t size) const;
};

// A batch closes when a die is free and either `max_batch` requests wait or
// the oldest has waited `timeout_s`; it takes up to `max_batch` of the
// requests waiting then, oldest first, to the free die of lowest index.
struct BatchPolicy {
  std::size_t max_batch = 1;
  double timeout_s = 0;
  std::size_t dies = 1;
};

struct BatchRecord {
  std::size_t first = 0;  // index of its first request (arrival order)
  std::size_t size = 0;
  std::size_t die = 0;
  double start_s = 0;      // the batch closes and the host starts on it
  double tpu_start_s = 0;  // the program starts
  double end_s = 0;        // the program ends: its requests' answers are back
};

struct ServeRun {
  std::vector<double> latency_s;  // per request, in arrival order
  std::vector<BatchRecord> batches;
  double span_s = 0;         // first arrival to last completion
  double tpu_s = 0;          // sum of the batches' TPU time
  double host_cpu_s = 0;     // sum of the host's CPU time
  double host_pcie_s = 0;    // sum of the PCIe transfer time
  std::optional<double> energy_j;  // sum over batches, when each has one
};

// Simulates the requests of `arrivals_s` (sorted, not empty) under `policy`.
// Throws std::invalid_argument for unsorted or negative arrival times, an
// empty arrival list, a policy with max_batch or dies 0 or a negative
// timeout, negative host costs, or a batch cost that is negative or not
// finite.
ServeRun simulate_serving(const std::vector<double>& arrivals_s, const BatchPolicy& policy, const HostCost& host,
                          const BatchCostFn& cost);

// The statistics every report gives (docs/serving.md, "Statistics").
struct ServeSummary {
  std::size_t requests = 0;
  std::size_t batches = 0;
  double mean_batch = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
  double throughput_ips = 0;          // requests / span
  double tpu_busy_fraction = 0;       // TPU time / (dies x span)
  double host_share_of_tpu_time = 0;  // (host CPU + PCIe time) / TPU time
  std::optional<double> avg_power_w;             // energy / span, when energy is known
  std::optional<double> energy_per_inference_j;  // energy / requests
};

// idle_power_w: each die's static power while it runs no batch (docs/energy.md);
// with it, energy and power include the dies' idle time over the span, without it
// only the batches' own energy.
ServeSummary summarize(const ServeRun& run, std::size_t dies, double idle_power_w = 0);

// The q-th percentile (0 <= q <= 100) of `values` (not empty), interpolated
// linearly between the order statistics as NumPy's percentile does by
// default: rank q/100 * (n - 1).
double percentile(std::vector<double> values, double q);

// Arrival times of `count` requests of a Poisson process at `rate` per
// second from time 0 (exponential gaps; the first request at the first gap),
// deterministic for `seed` (std::mt19937_64 and inverse-transform sampling,
// so that every standard library gives the same times).
std::vector<double> poisson_arrivals(double rate, std::size_t count, std::uint64_t seed);

}  // namespace tpu::serve
