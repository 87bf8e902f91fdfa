#include "run/network_run.h"

#include <fmt/format.h>

#include <filesystem>

#include "compiler/layer_reference.h"
#include "run/layer_report.h"
#include "run/stats.h"

namespace tpu::run {

std::string indexed_path(const std::string& path, std::size_t k, std::size_t count) {
  if (count == 1) return path;
  const std::filesystem::path p(path);
  std::filesystem::path out = p.parent_path() / p.stem();
  out += fmt::format(".{}{}", k, p.extension().string());
  return out.string();
}

SimulateOptions program_options(const SimulateOptions& opts, std::size_t k, std::size_t count) {
  SimulateOptions per = opts;
  per.stats.clear();
  if (!opts.vcd.empty()) per.vcd = indexed_path(opts.vcd, k, count);
  if (!opts.fst.empty()) per.fst = indexed_path(opts.fst, k, count);
  if (!opts.timeline.empty()) per.timeline = indexed_path(opts.timeline, k, count);
  return per;
}

std::string layer_name(const compiler::Network& net, std::size_t i) {
  return net.layers[i].name.empty() ? fmt::format("#{}", i) : net.layers[i].name;
}

double RunTotals::seconds(const ArchConfig& cfg) const {
  return static_cast<double>(cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
}

double RunTotals::useful_tops(const ArchConfig& cfg) const {
  const double s = seconds(cfg);
  return s > 0 ? 2.0 * static_cast<double>(useful_macs) / s / 1e12 : 0.0;
}

nlohmann::json totals_energy_json(const ArchConfig& cfg, const RunTotals& totals, std::uint64_t inferences) {
  const model::Energy e = model::energy_of(cfg, totals.events, totals.cycles);
  nlohmann::json j = energy_json(e, totals.events, totals.macs);
  j["useful_tops_per_w"] = e.total_j > 0 ? 2.0 * static_cast<double>(totals.useful_macs) / e.total_j / 1e12 : 0.0;
  if (inferences > 0) j["inferences_per_j"] = e.total_j > 0 ? static_cast<double>(inferences) / e.total_j : 0.0;
  return j;
}

compiler::NetworkRun run_plan(const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                              const compiler::Tensor& x, const ProgramSim& sim) {
  const std::size_t count = plan.program_count();
  return compiler::run_network(plan, x, cfg, [&](std::size_t k, const compiler::ProgramPlan& seg, model::Memories& mem) {
    return sim(k, count, seg, mem);
  });
}

NetworkOutcome compile_and_run(const ArchConfig& cfg, const compiler::Network& net, const compiler::Tensor& x,
                               const NetworkRunSpec& spec) {
  NetworkOutcome out;
  const std::size_t batch = x.batch();
  out.plan = spec.compile ? spec.compile(net, batch, cfg) : compiler::compile_network(net, batch, cfg, spec.mode);
  if (spec.compiled) spec.compiled(out.plan);
  out.run = run_plan(cfg, out.plan, x, spec.sim);
  return out;
}

nlohmann::json net_stats_json(const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                              const compiler::NetworkRun& run, const std::string& model_path) {
  const compiler::Network& net = plan.net;
  const std::size_t batch = plan.batch;
  nlohmann::json stats;
  // Each layer's object as the per-layer report has it (layer_report.h).
  nlohmann::json layers = nlohmann::json::array();
  RunTotals totals;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    LayerReportRow row;
    row.name = layer_name(net, i);
    row.type = compiler::layer_kind_name(net.layers[i].kind);
    row.batch = batch;
    row.shape = plan.infos[i + 1].shape;
    row.stats = run.layers[i];
    layers.push_back(layer_report_json(row, cfg));
    totals.useful_macs += row.stats.useful_macs;
  }
  nlohmann::json programs_json = nlohmann::json::array();
  for (std::size_t k = 0; k < run.logs.size(); ++k) {
    const model::RunLog& log = run.logs[k];
    totals.add(log);
    nlohmann::json pj = stats_json(cfg, log);
    pj["layers"] = nlohmann::json::array();
    for (std::size_t id : plan.program(k).layers) pj["layers"].push_back(layer_name(net, id));
    programs_json.push_back(pj);
  }
  stats["network"] = net.name.empty() ? model_path : net.name;
  stats["batch"] = batch;
  stats["array_n"] = cfg.array_n;
  stats["programs"] = programs_json;
  stats["layers"] = layers;
  stats["total"] = {{"cycles", totals.cycles},
                    {"macs", totals.macs},
                    {"useful_macs", totals.useful_macs},
                    {"utilization", layer_utilization(totals.macs, totals.cycles, cfg.array_n)},
                    {"clock_mhz", cfg.clock_mhz},
                    {"seconds", totals.seconds(cfg)},
                    {"useful_tops", totals.useful_tops(cfg)}};
  stats["total"]["energy"] = totals_energy_json(cfg, totals, batch);
  if (run.fault && !run.logs.empty()) {
    const model::RunLog& last = run.logs.back();
    stats["fault"] = last.fault ? last.fault->message() : std::string("the program did not halt");
  }
  return stats;
}

std::optional<std::string> reference_mismatch(const compiler::Network& net, const compiler::Tensor& x,
                                              const compiler::Tensor& y, std::size_t* compared) {
  const compiler::Tensor want = compiler::reference_network(net, x);
  if (compared) *compared = want.data.size();
  for (std::size_t i = 0; i < want.data.size(); ++i)
    if (y.data[i] != want.data[i])
      return fmt::format("output element {} = {} but the int8 reference gives {}", i, y.data[i], want.data[i]);
  return std::nullopt;
}

}  // namespace tpu::run
