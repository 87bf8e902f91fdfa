// The serving simulation (src/serve/serving_sim.h) against closed forms and
// a pattern worked by hand, without a network: the service times are given
// directly.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "serve/serving_sim.h"

namespace {

using tpu::serve::BatchCost;
using tpu::serve::BatchPolicy;
using tpu::serve::HostCost;

tpu::serve::BatchCostFn fixed(double seconds) {
  return [seconds](std::size_t) { return BatchCost{0, seconds, std::nullopt}; };
}

// The waiting time in the queue (latency minus service) of an M/D/1 queue
// against Pollaczek-Khinchine's mean, Wq = rho * D / (2 (1 - rho)). The
// tolerance comes from the run itself: the waits of consecutive requests are
// correlated, so the standard error of their mean is estimated from the
// means of 20 consecutive blocks (batch means), and the simulated mean must
// lie within 4 of those standard errors (a false alarm about once in 15 000
// seeds), which shrinks as 1/sqrt(requests).
void check_md1(double rho, std::size_t requests, std::uint64_t seed) {
  const double service = 1e-3;
  const double rate = rho / service;
  const std::vector<double> arrivals = tpu::serve::poisson_arrivals(rate, requests, seed);
  const tpu::serve::ServeRun run = tpu::serve::simulate_serving(arrivals, BatchPolicy{1, 0.0, 1}, HostCost{},
                                                                fixed(service));
  REQUIRE(run.batches.size() == requests);
  constexpr std::size_t kBlocks = 20;
  const std::size_t per = requests / kBlocks;
  std::vector<double> block_means(kBlocks, 0.0);
  for (std::size_t i = 0; i < per * kBlocks; ++i) block_means[i / per] += (run.latency_s[i] - service) / per;
  const double mean = std::accumulate(block_means.begin(), block_means.end(), 0.0) / kBlocks;
  double var = 0;
  for (double m : block_means) var += (m - mean) * (m - mean) / (kBlocks - 1);
  const double standard_error = std::sqrt(var / kBlocks);
  const double pk = rho * service / (2 * (1 - rho));
  INFO("rho " << rho << ": simulated mean wait " << mean * 1e3 << " ms, P-K " << pk * 1e3 << " ms, standard error "
              << standard_error * 1e3 << " ms");
  CHECK(std::abs(mean - pk) < 4 * standard_error);
  // The estimate itself is sane: a few percent of the mean at these sizes.
  CHECK(standard_error < 0.05 * pk);
  // The server is busy rho of the time (up to the run's ends).
  const tpu::serve::ServeSummary s = tpu::serve::summarize(run, 1);
  CHECK(s.tpu_busy_fraction == Approx(rho).epsilon(0.03));
  CHECK(s.throughput_ips == Approx(rate).epsilon(0.03));
}

}  // namespace

TEST_CASE("M/D/1: the mean wait is Pollaczek-Khinchine's", "[serve]") {
  check_md1(0.5, 200'000, 1);
  check_md1(0.5, 200'000, 2);
  check_md1(0.8, 400'000, 3);
}

// Batches of up to 3, a 2 ms timeout, 2 dies, a batch of s requests takes
// (1 + s) ms on the TPU after 0.5 ms of host time. Worked by hand (times in ms):
//  batch 1: requests 0,1,2 full at 2 (die 0 free at 0): start 2, TPU 2.5..6.5
//  batch 2: requests 3,4 (10, 11): timeout 10 + 2 = 12, die 1: 12.5..15.5
//  batch 3: requests 5,6,7 (30, 30.5, 31) full at 31, die 0: 31.5..35.5
//  batch 4: requests 8,9 (31.5, 32): timeout 33.5, die 1 (free at 15.5): 34..37
//  batch 5: requests 10,11,12 (34, 34.1, 34.2) full at 34.2, but both dies
//           busy: die 0 frees at 35.5: 36..40
TEST_CASE("Batching by size and by timeout on two dies, worked by hand", "[serve]") {
  const std::vector<double> ms = {0, 1, 2, 10, 11, 30, 30.5, 31, 31.5, 32, 34, 34.1, 34.2};
  std::vector<double> arrivals;
  for (double t : ms) arrivals.push_back(t * 1e-3);
  HostCost host;
  host.per_batch_s = 0.5e-3;
  const auto cost = [](std::size_t s) { return BatchCost{0, (1.0 + static_cast<double>(s)) * 1e-3, std::nullopt}; };
  const tpu::serve::ServeRun run = tpu::serve::simulate_serving(arrivals, BatchPolicy{3, 2e-3, 2}, host, cost);
  const std::vector<double> want_ms = {6.5, 5.5, 4.5, 5.5, 4.5, 5.5, 5.0, 4.5, 5.5, 5.0, 6.0, 5.9, 5.8};
  REQUIRE(run.latency_s.size() == want_ms.size());
  for (std::size_t i = 0; i < want_ms.size(); ++i) {
    INFO("request " << i);
    CHECK(run.latency_s[i] * 1e3 == Approx(want_ms[i]).margin(1e-9));
  }
  REQUIRE(run.batches.size() == 5);
  const std::size_t sizes[] = {3, 2, 3, 2, 3}, dies[] = {0, 1, 0, 1, 0};
  const double starts[] = {2, 12, 31, 33.5, 35.5};
  for (std::size_t b = 0; b < 5; ++b) {
    INFO("batch " << b);
    CHECK(run.batches[b].size == sizes[b]);
    CHECK(run.batches[b].die == dies[b]);
    CHECK(run.batches[b].start_s * 1e3 == Approx(starts[b]).margin(1e-9));
  }
  const tpu::serve::ServeSummary s = tpu::serve::summarize(run, 2);
  // TPU time 4 + 3 + 4 + 3 + 4 = 18 ms over 2 dies x 40 ms; host 5 x 0.5 ms.
  CHECK(s.tpu_busy_fraction == Approx(18.0 / 80.0));
  CHECK(s.host_share_of_tpu_time == Approx(2.5 / 18.0));
  CHECK(s.throughput_ips == Approx(13 / 0.040));
  CHECK(s.max_ms == Approx(6.5));
  CHECK_FALSE(s.avg_power_w.has_value());
}

TEST_CASE("The host's PCIe share and the batches' energy", "[serve]") {
  // Two requests of 1000 bytes in and 250 out each at 1e6 bytes/s: 2.5 ms of
  // transfers for 1 batch of 10 ms; energy 3 J per batch.
  HostCost host;
  host.pcie_bytes_per_s = 1e6;
  host.input_bytes_per_request = 1000;
  host.output_bytes_per_request = 250;
  const auto cost = [](std::size_t) { return BatchCost{7'000'000, 10e-3, 3.0}; };
  const tpu::serve::ServeRun run = tpu::serve::simulate_serving({0.0, 0.0}, BatchPolicy{2, 0.0, 1}, host, cost);
  REQUIRE(run.batches.size() == 1);
  // The transfers are the program's own RHM and WHM: not added to the latency.
  CHECK(run.latency_s[0] == Approx(10e-3));
  const tpu::serve::ServeSummary s = tpu::serve::summarize(run, 1);
  CHECK(s.host_share_of_tpu_time == Approx(0.25));
  REQUIRE(s.energy_per_inference_j.has_value());
  CHECK(*s.energy_per_inference_j == Approx(1.5));
  CHECK(*s.avg_power_w == Approx(300.0));
  // Two dies at 100 W idle: the second idles the whole 10 ms span, 1 J more.
  const tpu::serve::ServeSummary s2 = tpu::serve::summarize(run, 2, 100.0);
  CHECK(*s2.energy_per_inference_j == Approx(2.0));
  CHECK(*s2.avg_power_w == Approx(400.0));
}

TEST_CASE("Percentiles interpolate between order statistics", "[serve]") {
  // Rank q/100 * (n - 1): for 1..5, p50 is 3, p90 is 4.6, p99 4.96.
  const std::vector<double> v = {5, 1, 4, 2, 3};
  CHECK(tpu::serve::percentile(v, 50) == Approx(3.0));
  CHECK(tpu::serve::percentile(v, 90) == Approx(4.6));
  CHECK(tpu::serve::percentile(v, 99) == Approx(4.96));
  CHECK(tpu::serve::percentile(v, 100) == 5.0);
  CHECK(tpu::serve::percentile({7.0}, 99) == 7.0);
}

TEST_CASE("Bad serving inputs are refused with a reason", "[serve]") {
  const auto cost = fixed(1e-3);
  using tpu::serve::simulate_serving;
  CHECK_THROWS_AS(simulate_serving({}, BatchPolicy{1, 0, 1}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({0.002, 0.001}, BatchPolicy{1, 0, 1}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({-1.0}, BatchPolicy{1, 0, 1}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({0.0}, BatchPolicy{0, 0, 1}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({0.0}, BatchPolicy{1, 0, 0}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({0.0}, BatchPolicy{1, -1, 1}, HostCost{}, cost), std::invalid_argument);
  CHECK_THROWS_AS(simulate_serving({0.0}, BatchPolicy{1, 0, 1}, HostCost{}, fixed(-1)), std::invalid_argument);
  CHECK_THROWS_AS(tpu::serve::poisson_arrivals(0, 10, 1), std::invalid_argument);
  CHECK_THROWS_AS(tpu::serve::percentile({}, 50), std::invalid_argument);
}

TEST_CASE("Poisson arrivals are deterministic for a seed and have the rate's mean gap", "[serve]") {
  const std::vector<double> a = tpu::serve::poisson_arrivals(1000, 100'000, 7);
  CHECK(a == tpu::serve::poisson_arrivals(1000, 100'000, 7));
  CHECK(a != tpu::serve::poisson_arrivals(1000, 100'000, 8));
  // Mean gap 1 ms; its standard error is 1 ms / sqrt(100 000) = 0.0032 ms.
  CHECK(a.back() / static_cast<double>(a.size()) == Approx(1e-3).margin(4 * 1e-3 / std::sqrt(1e5)));
}
