// Trace files and the serving summary as text and JSON (serve_report.h).
#include "serve/serve_report.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "common/file_io.h"

namespace tpu::serve {

namespace {

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<double> read_trace(const std::string& path) {
  std::istringstream in(read_file_text(path));
  std::vector<double> times;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    double ms = 0;
    std::string rest;
    if (!(fields >> ms) || (fields >> rest) || !std::isfinite(ms) || ms < 0)
      throw FileError(fmt::format("{}:{}: expected one arrival time in milliseconds (a number >= 0), got '{}'",
                                  path, number, line));
    if (!times.empty() && ms * 1e-3 < times.back())
      throw FileError(fmt::format("{}:{}: arrival time {} ms is before the previous line's {} ms: the trace "
                                  "must be sorted by time", path, number, ms, times.back() * 1e3));
    times.push_back(ms * 1e-3);
  }
  if (times.empty()) throw FileError(fmt::format("{}: the trace has no arrival times", path));
  return times;
}

nlohmann::json summary_json(const ServeSummary& s) {
  return {{"requests", s.requests},
          {"batches", s.batches},
          {"mean_batch", s.mean_batch},
          {"latency_ms", {{"p50", s.p50_ms}, {"p90", s.p90_ms}, {"p99", s.p99_ms}, {"max", s.max_ms},
                          {"mean", s.mean_ms}}},
          {"throughput_ips", s.throughput_ips},
          {"tpu_busy_fraction", s.tpu_busy_fraction},
          {"host_share_of_tpu_time", s.host_share_of_tpu_time},
          {"avg_power_w", optional_number(s.avg_power_w)},
          {"energy_per_inference_j", optional_number(s.energy_per_inference_j)}};
}

nlohmann::json batch_costs_json(const std::map<std::size_t, BatchCost>& costs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [size, c] : costs)
    out.push_back(
        {{"size", size}, {"cycles", c.cycles}, {"seconds", c.seconds}, {"energy_j", optional_number(c.energy_j)}});
  return out;
}

std::string summary_text(const ServeSummary& s) {
  std::string out = fmt::format("requests: {} in {} batches (mean batch {:.1f})\n", s.requests, s.batches,
                                s.mean_batch);
  out += fmt::format("latency: p50 {:.4g} ms, p90 {:.4g} ms, p99 {:.4g} ms, max {:.4g} ms (mean {:.4g} ms)\n",
                     s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms, s.mean_ms);
  out += fmt::format("throughput: {:.0f} inferences per second\n", s.throughput_ips);
  out += fmt::format("TPU busy: {:.1f}% of the dies' time; host interaction: {:.1f}% of TPU time\n",
                     100 * s.tpu_busy_fraction, 100 * s.host_share_of_tpu_time);
  if (s.avg_power_w && s.energy_per_inference_j)
    out += fmt::format("power: {:.2f} W on average, {:.4g} J per inference\n", *s.avg_power_w,
                       *s.energy_per_inference_j);
  else
    out += "power: not reported (this build has no energy model for the batches)\n";
  return out;
}

std::string sweep_header() {
  return fmt::format("{:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12} {:>8} {:>8}\n", "max_batch", "mean_batch",
                     "p50_ms", "p90_ms", "p99_ms", "max_ms", "IPS", "busy", "host");
}

std::string sweep_row(std::size_t max_batch, const ServeSummary& s) {
  return fmt::format("{:>9} {:>10.1f} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>12.0f} {:>7.1f}% {:>7.1f}%\n",
                     max_batch, s.mean_batch, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms, s.throughput_ips,
                     100 * s.tpu_busy_fraction, 100 * s.host_share_of_tpu_time);
}

}  // namespace tpu::serve
