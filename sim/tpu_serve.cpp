// tpu-sim serve (subcommand.h): its options, and a serving simulation
// (src/serve) of a network whose batch costs come from the cycle-accurate
// model: the summary, or with --sweep-batch one row per maximum batch, on
// stdout and in --stats (docs/serving.md).
#include "subcommand.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "formats/model_file.h"
#include "model/energy.h"
#include "onnx/onnx_net.h"
#include "run/outputs.h"
#include "run/progress.h"
#include "serve/network_cost.h"
#include "serve/serve_report.h"

namespace tpu::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string input;
  std::string calibrate;
  double rate = 0;
  std::size_t max_batch = 0;
  std::vector<std::size_t> sweep_batch;
  double timeout_ms = 0;
  std::size_t requests = 0;
  std::vector<std::string> arrivals{"poisson"};
  std::size_t dies = 1;
  std::uint64_t seed = 1;
  double host_per_batch_us = 0;
  double host_per_request_us = 0;
  std::string stats;
  std::string latencies;
  std::string engine = "systemc";
  ConfigOptions cfg;
};

// The network and, when --input gives them, the requests' samples.
struct ServedNetwork {
  compiler::Network net;
  std::optional<compiler::Tensor> samples;
};

class Serve final : public Subcommand {
 public:
  explicit Serve(CLI::App& app);
  bool parsed() const override { return cmd_->parsed(); }
  int run() override;

 private:
  void check_options() const;
  ServedNetwork load() const;
  std::vector<double> arrivals() const;
  serve::HostCost host_cost(const serve::NetworkBatchCost& costs) const;
  nlohmann::json header_json(const ArchConfig& cfg, const serve::HostCost& host,
                             const serve::NetworkBatchCost& costs) const;

  CLI::App* cmd_ = nullptr;
  ServeArgs a_;
};

Serve::Serve(CLI::App& app) {
  cmd_ = app.add_subcommand("serve", "simulate serving a network under load: p50/p90/p99 latency and throughput");
  cmd_->add_option("model", a_.model, "model description (.json, docs/quantization.md) or .onnx")->required();
  cmd_->add_option("--input", a_.input,
                   "the requests' samples: int8 .npy of shape (S, input shape), used in turn (default: random "
                   "int8 from --seed); for .onnx the float input as `tpu-sim net` takes it");
  cmd_->add_option("--calibrate", a_.calibrate, "MODEL.onnx: calibration batch (docs/onnx.md)");
  cmd_->add_option("--rate", a_.rate, "Poisson arrivals: requests per second");
  cmd_->add_option("--max-batch", a_.max_batch, "largest batch a die runs");
  cmd_->add_option("--sweep-batch", a_.sweep_batch,
                   "run once per maximum batch B1,B2,...: the latency/throughput curve")
      ->delimiter(',');
  cmd_->add_option("--batch-timeout", a_.timeout_ms,
                   "ms the oldest waiting request may wait for a fuller batch once a die is free")
      ->capture_default_str();
  cmd_->add_option("--requests", a_.requests, "number of requests (default with a trace: all of it)");
  cmd_->add_option("--arrivals", a_.arrivals, "poisson, or trace FILE (arrival times in ms, one a line)")
      ->expected(1, 2);
  cmd_->add_option("--dies", a_.dies, "TPU dies serving the queue")->capture_default_str();
  cmd_->add_option("--seed", a_.seed, "seed of the arrivals and the random samples")->capture_default_str();
  cmd_->add_option("--host-per-batch-us", a_.host_per_batch_us,
                   "host CPU time per batch before its program runs, us (docs/serving.md)")
      ->capture_default_str();
  cmd_->add_option("--host-per-request-us", a_.host_per_request_us,
                   "host CPU time per request of a batch before its program runs, us")
      ->capture_default_str();
  cmd_->add_option("--stats", a_.stats, "write the statistics here (.json, docs/serving.md)");
  cmd_->add_option("--latencies", a_.latencies, "write every request's latency here (.npy, float64, ms)");
  cmd_->add_option("--engine", a_.engine, "engine of the batch runs")
      ->check(CLI::IsMember({"systemc", "rtl", "both"}))
      ->capture_default_str();
  a_.cfg.add_to(*cmd_);
}

void Serve::check_options() const {
  const bool trace = a_.arrivals.front() == "trace";
  if (!(a_.arrivals.size() == 1 && a_.arrivals[0] == "poisson") && !(a_.arrivals.size() == 2 && trace))
    throw CLI::ValidationError("--arrivals", "expected 'poisson' or 'trace FILE'");
  if (trace && cmd_->count("--rate"))
    throw CLI::ValidationError("--rate", "the trace gives the arrival times: no --rate with --arrivals trace");
  if (!trace && !(std::isfinite(a_.rate) && a_.rate > 0))
    throw CLI::ValidationError("--rate", "Poisson arrivals need a rate > 0 requests per second");
  if (!trace && a_.requests == 0)
    throw CLI::ValidationError("--requests", "Poisson arrivals need a number of requests > 0");
  if (cmd_->count("--requests") && a_.requests == 0)
    throw CLI::ValidationError("--requests", "must be > 0");
  if (a_.sweep_batch.empty() == (cmd_->count("--max-batch") == 0))
    throw CLI::ValidationError("--max-batch", "give either --max-batch B or --sweep-batch B1,B2,...");
  if (!a_.sweep_batch.empty() && !a_.latencies.empty())
    throw CLI::ValidationError("--latencies", "one run's latencies: not with --sweep-batch");
  for (std::size_t b : a_.sweep_batch.empty() ? std::vector<std::size_t>{a_.max_batch} : a_.sweep_batch)
    if (b == 0) throw CLI::ValidationError("--max-batch", "a batch holds at least 1 request");
  if (a_.dies == 0) throw CLI::ValidationError("--dies", "at least 1 die");
  if (!(std::isfinite(a_.timeout_ms) && a_.timeout_ms >= 0))
    throw CLI::ValidationError("--batch-timeout", "a time >= 0 ms");
  for (double us : {a_.host_per_batch_us, a_.host_per_request_us})
    if (!(std::isfinite(us) && us >= 0))
      throw CLI::ValidationError("--host-per-batch-us, --host-per-request-us", "a time >= 0 us");
  const bool onnx = std::filesystem::path(a_.model).extension() == ".onnx";
  if (!onnx && !a_.calibrate.empty()) throw CLI::ValidationError("--calibrate", "only for an .onnx model");
  if (onnx && a_.input.empty())
    throw CLI::ValidationError("--input", "an .onnx model needs --input (the float samples, docs/onnx.md)");
}

ServedNetwork Serve::load() const {
  ServedNetwork s;
  if (std::filesystem::path(a_.model).extension() == ".onnx") {
    if (a_.calibrate.empty() && onnximport::onnx_needs_calibration(a_.model))
      throw CLI::ValidationError("--calibrate", "an .onnx model needs a calibration set");
    onnximport::OnnxRun o = onnximport::prepare_onnx(a_.model, a_.calibrate, a_.input, "", "");
    s.net = std::move(o.net);
    s.samples = std::move(o.input);
    return s;
  }
  s.net = compiler::load_network(a_.model);
  if (a_.input.empty()) return s;
  const NpyArray x = read_npy(a_.input);
  if (x.dtype != Dtype::int8)
    throw FileError(fmt::format("{}: serve takes int8 (quantized) samples, got {}; quantize them first "
                                "(docs/quantization.md)", a_.input, dtype_name(x.dtype)));
  compiler::Tensor t;
  t.shape = x.shape;
  const std::vector<std::int8_t> v = x.values<std::int8_t>();
  t.data.assign(v.begin(), v.end());
  if (t.shape.size() != s.net.input_shape.size() + 1 ||
      !std::equal(s.net.input_shape.begin(), s.net.input_shape.end(), t.shape.begin() + 1) || t.batch() == 0)
    throw FileError(fmt::format("{}: expected samples of shape (S, {}) with S >= 1, got shape {}", a_.input,
                                fmt::join(s.net.input_shape, ", "), format_shape(x.shape)));
  s.samples = std::move(t);
  return s;
}

std::vector<double> Serve::arrivals() const {
  if (a_.arrivals.front() == "poisson") return serve::poisson_arrivals(a_.rate, a_.requests, a_.seed);
  std::vector<double> t = serve::read_trace(a_.arrivals[1]);
  if (a_.requests > 0 && a_.requests < t.size()) t.resize(a_.requests);
  return t;
}

serve::HostCost Serve::host_cost(const serve::NetworkBatchCost& costs) const {
  serve::HostCost h;
  h.per_batch_s = a_.host_per_batch_us * 1e-6;
  h.per_request_s = a_.host_per_request_us * 1e-6;
  h.pcie_bytes_per_s = costs.pcie_bytes_per_s();
  h.input_bytes_per_request = costs.input_bytes_per_request();
  h.output_bytes_per_request = costs.output_bytes_per_request();
  return h;
}

nlohmann::json Serve::header_json(const ArchConfig& cfg, const serve::HostCost& host,
                                  const serve::NetworkBatchCost& costs) const {
  const bool poisson = a_.arrivals.front() == "poisson";
  nlohmann::json j = {{"model", a_.model},
                      {"array_n", cfg.array_n},
                      {"clock_mhz", cfg.clock_mhz},
                      {"dies", a_.dies},
                      {"batch_timeout_ms", a_.timeout_ms},
                      {"arrivals", a_.arrivals.front()},
                      {"rate", poisson ? nlohmann::json(a_.rate) : nlohmann::json(nullptr)},
                      {"seed", a_.seed}};
  j["host"] = {{"per_batch_us", a_.host_per_batch_us},
               {"per_request_us", a_.host_per_request_us},
               {"pcie_bytes_per_s", host.pcie_bytes_per_s},
               {"input_bytes_per_request", host.input_bytes_per_request},
               {"output_bytes_per_request", host.output_bytes_per_request}};
  j["batch_costs"] = serve::batch_costs_json(costs.costs());
  return j;
}

// Each batch size run, or with more than four the smallest and the largest
// (--stats has them all).
void print_costs(const std::map<std::size_t, serve::BatchCost>& costs) {
  const auto line = [](std::size_t size, const serve::BatchCost& c) {
    return fmt::format("batch {}: {} cycles, {:.4g} ms on the TPU", size, c.cycles, c.seconds * 1e3);
  };
  if (costs.size() <= 4) {
    for (const auto& [size, c] : costs) std::cout << line(size, c) << '\n';
    return;
  }
  const auto& [first, first_cost] = *costs.begin();
  const auto& [last, last_cost] = *costs.rbegin();
  std::cout << fmt::format("{} batch sizes run; the smallest and the largest: {} ... {}\n", costs.size(),
                           line(first, first_cost), line(last, last_cost));
}

int Serve::run() {
  check_options();
  const ArchConfig cfg = a_.cfg.resolve();
  run::Outputs outputs;  // whole or absent (outputs.h)
  const std::string stats_path = outputs.file(a_.stats);
  const std::string latencies_path = outputs.file(a_.latencies);
  const run::ProgressScope progress(run::ProgressScope::stderr_is_terminal());
  ServedNetwork s = load();
  const std::vector<double> times = arrivals();
  sweep::EngineOptions engine;
  engine.engine = a_.engine;
  serve::NetworkBatchCost costs(cfg, s.net, std::move(s.samples), a_.seed, engine);
  costs.on_new_size = [](std::size_t size) {
    run::progress_show(fmt::format("tpu-sim serve: compiling and running a batch of {}", size));
  };
  const serve::HostCost host = host_cost(costs);
  std::cout << fmt::format("serving {} on {} of {}x{} at {} MHz: {}, batch timeout {} ms\n",
                           s.net.name.empty() ? a_.model : s.net.name, plural(a_.dies, "die"), cfg.array_n,
                           cfg.array_n, cfg.clock_mhz, plural(times.size(), "request"), a_.timeout_ms);
  const std::vector<std::size_t> batches = a_.sweep_batch.empty() ? std::vector<std::size_t>{a_.max_batch}
                                                                   : a_.sweep_batch;
  std::vector<serve::ServeSummary> summaries;
  const std::array<double, model::kNumEnergyUnits> idle = model::static_power_w(cfg);
  const double idle_power_w = std::accumulate(idle.begin(), idle.end(), 0.0);
  serve::ServeRun last;
  for (std::size_t b : batches) {
    const serve::BatchPolicy policy{b, a_.timeout_ms * 1e-3, a_.dies};
    try {
      last = serve::simulate_serving(times, policy, host, [&](std::size_t n) { return costs(n); });
    } catch (const serve::BatchFault& e) {
      run::progress_clear();
      std::cerr << "tpu-sim: " << e.what() << '\n';
      return kExitFault;
    }
    summaries.push_back(serve::summarize(last, a_.dies, idle_power_w));
  }
  run::progress_clear();
  nlohmann::json stats = header_json(cfg, host, costs);
  print_costs(costs.costs());
  if (a_.sweep_batch.empty()) {
    std::cout << serve::summary_text(summaries.front());
    stats["max_batch"] = a_.max_batch;
    stats.update(serve::summary_json(summaries.front()));
  } else {
    std::cout << serve::sweep_header();
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < batches.size(); ++i) {
      std::cout << serve::sweep_row(batches[i], summaries[i]);
      nlohmann::json row = serve::summary_json(summaries[i]);
      row["max_batch"] = batches[i];
      rows.push_back(row);
    }
    stats["sweep"] = rows;
  }
  if (!stats_path.empty()) write_file_atomic(stats_path, stats.dump(2) + "\n");
  if (!latencies_path.empty()) {
    std::vector<double> ms(last.latency_s.size());
    for (std::size_t i = 0; i < ms.size(); ++i) ms[i] = last.latency_s[i] * 1e3;
    write_npy(latencies_path, NpyArray::of<double>({ms.size()}, ms));
  }
  outputs.commit();
  return kExitOk;
}

}  // namespace

std::unique_ptr<Subcommand> add_serve_command(CLI::App& app) { return std::make_unique<Serve>(app); }

}  // namespace tpu::cli
