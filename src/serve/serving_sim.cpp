// The serving simulation's loop and its statistics (serving_sim.h).
#include "serve/serving_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace tpu::serve {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

void check_inputs(const std::vector<double>& arrivals_s, const BatchPolicy& policy, const HostCost& host) {
  require(!arrivals_s.empty(), "no requests to serve");
  require(policy.max_batch >= 1, "the maximum batch must be at least 1");
  require(policy.dies >= 1, "there must be at least one die");
  require(std::isfinite(policy.timeout_s) && policy.timeout_s >= 0,
          "the batch timeout must be a finite time >= 0");
  require(std::isfinite(host.per_batch_s) && host.per_batch_s >= 0 && std::isfinite(host.per_request_s) &&
              host.per_request_s >= 0 && std::isfinite(host.pcie_bytes_per_s) && host.pcie_bytes_per_s >= 0,
          "the host's costs must be finite and >= 0");
  for (std::size_t i = 0; i < arrivals_s.size(); ++i) {
    require(std::isfinite(arrivals_s[i]) && arrivals_s[i] >= 0,
            "arrival time " + std::to_string(i) + " is negative or not finite");
    require(i == 0 || arrivals_s[i] >= arrivals_s[i - 1],
            "arrival times are not sorted: request " + std::to_string(i) + " arrives before request " +
                std::to_string(i - 1));
  }
}

}  // namespace

double HostCost::cpu_seconds(std::size_t size) const {
  return per_batch_s + per_request_s * static_cast<double>(size);
}

double HostCost::pcie_seconds(std::size_t size) const {
  if (pcie_bytes_per_s <= 0) return 0;
  return static_cast<double>((input_bytes_per_request + output_bytes_per_request) * size) / pcie_bytes_per_s;
}

// Batches leave in arrival order, each at the first time t when a die is
// free and the batch's condition holds: t = max(earliest free die, the
// arrival of the max_batch-th waiting request, the oldest's arrival + the
// timeout). Both bounds only grow from one batch to the next, so the batches'
// closing times are nondecreasing and one pass over the requests is the
// whole simulation.
ServeRun simulate_serving(const std::vector<double>& arrivals_s, const BatchPolicy& policy, const HostCost& host,
                          const BatchCostFn& cost) {
  check_inputs(arrivals_s, policy, host);
  const std::size_t n = arrivals_s.size();
  std::vector<double> free_at(policy.dies, 0.0);
  ServeRun run;
  run.latency_s.assign(n, 0.0);
  bool energy_known = true;
  double energy = 0;
  double last_end = 0;
  for (std::size_t head = 0; head < n;) {
    const auto die_it = std::min_element(free_at.begin(), free_at.end());
    const std::size_t full_index = head + policy.max_batch - 1;
    const double full_at = full_index < n ? arrivals_s[full_index] : std::numeric_limits<double>::infinity();
    const double ready_at = std::min(full_at, arrivals_s[head] + policy.timeout_s);
    const double start = std::max(*die_it, ready_at);
    std::size_t size = 0;
    while (size < policy.max_batch && head + size < n && arrivals_s[head + size] <= start) ++size;
    const BatchCost c = cost(size);
    require(std::isfinite(c.seconds) && c.seconds >= 0,
            "the TPU time of a batch of " + std::to_string(size) + " is negative or not finite");
    BatchRecord b;
    b.first = head;
    b.size = size;
    b.die = static_cast<std::size_t>(die_it - free_at.begin());
    b.start_s = start;
    b.tpu_start_s = start + host.cpu_seconds(size);
    b.end_s = b.tpu_start_s + c.seconds;
    *die_it = b.end_s;
    for (std::size_t i = head; i < head + size; ++i) run.latency_s[i] = b.end_s - arrivals_s[i];
    run.tpu_s += c.seconds;
    run.host_cpu_s += host.cpu_seconds(size);
    run.host_pcie_s += host.pcie_seconds(size);
    if (c.energy_j) energy += *c.energy_j;
    else energy_known = false;
    last_end = std::max(last_end, b.end_s);
    run.batches.push_back(b);
    head += size;
  }
  run.span_s = last_end - arrivals_s.front();
  if (energy_known) run.energy_j = energy;
  return run;
}

double percentile(std::vector<double> values, double q) {
  require(!values.empty(), "percentile of no values");
  require(q >= 0 && q <= 100, "a percentile must be within 0..100");
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

ServeSummary summarize(const ServeRun& run, std::size_t dies, double idle_power_w) {
  ServeSummary s;
  s.requests = run.latency_s.size();
  s.batches = run.batches.size();
  if (s.requests == 0) return s;
  s.mean_batch = static_cast<double>(s.requests) / static_cast<double>(s.batches);
  std::vector<double> ms(run.latency_s.size());
  std::transform(run.latency_s.begin(), run.latency_s.end(), ms.begin(), [](double x) { return x * 1e3; });
  s.p50_ms = percentile(ms, 50);
  s.p90_ms = percentile(ms, 90);
  s.p99_ms = percentile(ms, 99);
  s.max_ms = *std::max_element(ms.begin(), ms.end());
  double sum = 0;
  for (double x : ms) sum += x;
  s.mean_ms = sum / static_cast<double>(ms.size());
  if (run.span_s > 0) {
    s.throughput_ips = static_cast<double>(s.requests) / run.span_s;
    s.tpu_busy_fraction = run.tpu_s / (static_cast<double>(dies) * run.span_s);
  }
  if (run.tpu_s > 0) s.host_share_of_tpu_time = (run.host_cpu_s + run.host_pcie_s) / run.tpu_s;
  if (run.energy_j) {
    // The dies idle for the rest of the span: dies x span minus the batches'
    // TPU time (host time included: the die waits for the host then).
    const double idle_s = std::max(0.0, static_cast<double>(dies) * run.span_s - run.tpu_s);
    const double total_j = *run.energy_j + idle_power_w * idle_s;
    s.energy_per_inference_j = total_j / static_cast<double>(s.requests);
    if (run.span_s > 0) s.avg_power_w = total_j / run.span_s;
  }
  return s;
}

std::vector<double> poisson_arrivals(double rate, std::size_t count, std::uint64_t seed) {
  require(std::isfinite(rate) && rate > 0, "the arrival rate must be > 0");
  std::mt19937_64 gen(seed);
  std::vector<double> t(count);
  double now = 0;
  for (std::size_t i = 0; i < count; ++i) {
    // u in [0, 1) from the top 53 bits; -log(1 - u) is an exponential gap of mean 1.
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
    now += -std::log1p(-u) / rate;
    t[i] = now;
  }
  return t;
}

}  // namespace tpu::serve
