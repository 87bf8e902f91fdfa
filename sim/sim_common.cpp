#include "sim_common.h"

#include <fmt/format.h>

#include <iostream>

#include "common/file_io.h"
#include "model/tpu.h"
#include "rtl/rtl_engine.h"

namespace tpu::cli {

void SimArgs::add_to(CLI::App& app) {
  app.add_option("--stats", stats, "write statistics as JSON here");
  app.add_option("--vcd", vcd, "write a waveform of the units here (.vcd)");
  app.add_flag("--trace", trace, "print one line per instruction: issue, start, completion");
  app.add_option("--max-cycles", max_cycles, "stop with a fault after this many cycles")
      ->capture_default_str();
  // Advanced, for tests and benchmarks: both levels give identical results.
  app.add_option("--detail", detail,
                 "model detail: auto (detailed iff --vcd), detailed (every PE, every cycle) or "
                 "fast (one GEMM per MMC, idle cycles skipped); results are identical")
      ->check(CLI::IsMember({"auto", "detailed", "fast"}))
      ->group("");
  app.add_option("--engine", engine,
                 "systemc (the SystemC model), rtl (the Verilated RTL core) or both (in lock "
                 "step, reporting the first divergence)")
      ->check(CLI::IsMember({"systemc", "rtl", "both"}))
      ->capture_default_str();
  cfg.add_to(app);
}

model::Detail detail_of(const SimArgs& args) {
  if (args.detail == "fast") {
    if (!args.vcd.empty())
      throw CLI::ValidationError("--detail", "fast has no per-cycle state for --vcd to show");
    return model::Detail::Fast;
  }
  return args.detail == "detailed" ? model::Detail::Detailed : model::Detail::Auto;
}

nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log) {
  const model::Stats& s = log.stats;
  nlohmann::json j;
  j["array_n"] = cfg.array_n;
  j["cycles"] = s.cycles;
  j["instructions"] = s.instructions;
  j["macs"] = s.macs;
  j["array_active_cycles"] = s.array_active_cycles;
  const double peak = static_cast<double>(s.cycles) * static_cast<double>(cfg.array_n * cfg.array_n);
  j["utilization"] = peak > 0 ? static_cast<double>(s.macs) / peak : 0.0;
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    j["stall_cycles"][model::stall_cause_name(static_cast<model::StallCause>(c))] = s.stall_cycles[c];
  for (const auto& [name, u] : s.units) {
    j["units"][name]["instructions"] = u.instructions;
    j["units"][name]["busy_cycles"] = u.busy_cycles;
  }
  // The categories of the TPUv1 paper's Table 3 (docs/microarchitecture.md).
  const auto stalls = [&](std::initializer_list<model::StallCause> causes) {
    std::uint64_t sum = 0;
    for (model::StallCause c : causes) sum += s.stall_cycles[static_cast<unsigned>(c)];
    return sum;
  };
  using model::StallCause;
  j["tpuv1"]["array_active_cycles"] = s.array_active_cycles;
  j["tpuv1"]["weight_stall_cycles"] = stalls({StallCause::WeightsNotReady, StallCause::FifoFull});
  j["tpuv1"]["raw_stall_cycles"] = stalls({StallCause::Raw, StallCause::War, StallCause::Waw});
  j["tpuv1"]["non_matrix_cycles"] = s.cycles - s.array_active_cycles;
  j["halted"] = log.halted;
  if (log.fault) j["fault"] = log.fault->message();
  return j;
}

void print_summary(const ArchConfig& cfg, const model::RunLog& log) {
  const nlohmann::json j = stats_json(cfg, log);
  std::cout << fmt::format("cycles        {}\ninstructions  {}\nMACs          {}\n", log.stats.cycles,
                           log.stats.instructions, log.stats.macs);
  std::cout << fmt::format("utilization   {:.2f}% of {}x{} MACs per cycle\n",
                           100.0 * j["utilization"].get<double>(), cfg.array_n, cfg.array_n);
  std::cout << fmt::format("array active  {} cycles\n", log.stats.array_active_cycles);
  std::cout << "unit busy cycles:\n";
  for (const auto& [name, u] : log.stats.units)
    std::cout << fmt::format("  {:<16} {:>10}  ({} instructions)\n", name, u.busy_cycles,
                             u.instructions);
  std::cout << "controller stall cycles:\n";
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    std::cout << fmt::format("  {:<18} {:>8}\n",
                             model::stall_cause_name(static_cast<model::StallCause>(c)),
                             log.stats.stall_cycles[c]);
}

// Simulates, prints the trace and summary, writes --stats; returns the log.
model::RunLog simulate(const SimArgs& args, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem) {
  model::RunOptions ropts;
  ropts.max_cycles = args.max_cycles;
  ropts.vcd_path = args.vcd;
  ropts.detail = detail_of(args);
  if (args.engine != "systemc" && !args.vcd.empty())
    throw CLI::ValidationError("--vcd", "waveforms come from the SystemC engine only, for now");
  model::RunLog log;
  if (args.engine == "systemc") {
    log = model::run_program(cfg, prog, mem, ropts);
  } else if (args.engine == "rtl") {
    log = rtl::run_program(cfg, prog, mem, ropts);
  } else {
    model::Memories systemc_mem = mem;
    const model::RunLog systemc_log = model::run_program(cfg, prog, systemc_mem, ropts);
    log = rtl::run_program(cfg, prog, mem, ropts);
    if (const auto d = rtl::compare(prog, systemc_log, systemc_mem, log, mem))
      throw DivergenceError(d->message());
    std::cout << fmt::format("engines: the RTL and the SystemC model agree on all {} retire "
                             "records, the statistics and every memory\n",
                             log.retired.size());
  }
  if (args.trace)
    for (const model::RetireRecord& r : log.retired)
      std::cout << fmt::format("pc {:>4}  {:<28} issue {:>8}  start {:>8}  complete {:>8}\n", r.pc,
                               isa::disassemble(prog.code[r.pc]), r.issue, r.start,
                               r.completed ? fmt::to_string(r.completion) : std::string("-"));
  print_summary(cfg, log);
  if (!args.stats.empty()) write_file_atomic(args.stats, stats_json(cfg, log).dump(2) + "\n");
  if (log.fault) std::cerr << "tpu-sim: " << log.fault->message() << '\n';
  return log;
}

}  // namespace tpu::cli
