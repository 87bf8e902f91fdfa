// tpu-sim: runs programs on the cycle-accurate model.
//
//   tpu-sim run PROGRAM --hostmem H.npy --weights W.npy [--out O.npy]
//               [--stats S.json] [--vcd T.vcd] [--trace] [--max-cycles C]
//               [--preset P] [--config F] [--array N]
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "isa/program.h"
#include "model/tpu.h"

namespace {

using namespace tpu;

struct RunArgs {
  std::string program;
  std::string hostmem;
  std::string weights;
  std::string out;
  std::string stats;
  std::string vcd;
  bool trace = false;
  model::Cycle max_cycles = 100'000'000;
  cli::ConfigOptions cfg;
};

// Host rows a program can write: the input's rows, extended to the last row
// any WHM names.
std::uint64_t output_rows(const isa::Program& prog, std::uint64_t input_rows) {
  std::uint64_t rows = input_rows;
  for (const isa::Instruction& in : prog.code)
    for (const isa::Access& a : isa::accesses(in))
      if (a.space == isa::Space::HostMem && a.is_write) rows = std::max(rows, a.base + a.count);
  return rows;
}

void load_memories(const RunArgs& args, const ArchConfig& cfg, model::Memories& mem,
                   std::uint64_t& host_input_rows) {
  const std::size_t n = cfg.array_n;
  if (!args.hostmem.empty()) {
    const NpyArray h = read_npy(args.hostmem);
    expect(h, Dtype::int8, 2, "host memory, rows x N");
    if (h.shape[1] != n)
      throw FileError(fmt::format("{}: rows have {} bytes but the array is N={}", args.hostmem,
                                  h.shape[1], n));
    if (h.shape[0] > cfg.host_rows)
      throw FileError(fmt::format("{}: {} rows do not fit in host memory ({} rows)", args.hostmem,
                                  h.shape[0], cfg.host_rows));
    std::memcpy(mem.host.data().data(), h.data.data(), h.data.size());
    host_input_rows = h.shape[0];
  }
  if (!args.weights.empty()) {
    const NpyArray w = read_npy(args.weights);
    expect(w, Dtype::int8, 3, "weight memory, tiles x N x N");
    if (w.shape[1] != n || w.shape[2] != n)
      throw FileError(fmt::format("{}: tiles are {}x{} but the array is N={}", args.weights,
                                  w.shape[1], w.shape[2], n));
    if (w.shape[0] > cfg.weight_tiles)
      throw FileError(fmt::format("{}: {} tiles do not fit in weight memory ({} tiles)",
                                  args.weights, w.shape[0], cfg.weight_tiles));
    std::memcpy(mem.weights.data().data(), w.data.data(), w.data.size());
  }
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

int run(const RunArgs& args) {
  const isa::Program prog = isa::load_program(args.program);
  cli::ConfigOptions opts = args.cfg;
  if (opts.array_n && *opts.array_n != prog.array_n)
    throw FileError(fmt::format("{}: assembled for N={}, but --array is {}", args.program,
                                prog.array_n, *opts.array_n));
  opts.array_n = prog.array_n;
  const ArchConfig cfg = opts.resolve();
  model::Memories mem(cfg);
  std::uint64_t host_input_rows = 0;
  load_memories(args, cfg, mem, host_input_rows);

  model::RunOptions ropts;
  ropts.max_cycles = args.max_cycles;
  ropts.vcd_path = args.vcd;
  const model::RunLog log = model::run_program(cfg, prog, mem, ropts);

  if (args.trace)
    for (const model::RetireRecord& r : log.retired)
      std::cout << fmt::format("pc {:>4}  {:<28} issue {:>8}  start {:>8}  complete {:>8}\n", r.pc,
                               isa::disassemble(prog.code[r.pc]), r.issue, r.start,
                               r.completed ? fmt::to_string(r.completion) : std::string("-"));
  print_summary(cfg, log);
  if (!args.stats.empty()) write_file_atomic(args.stats, stats_json(cfg, log).dump(2) + "\n");
  if (log.fault) {
    std::cerr << "tpu-sim: " << log.fault->message() << '\n';
    return kExitFault;
  }
  if (!args.out.empty()) {
    const std::uint64_t rows = output_rows(prog, host_input_rows);
    std::vector<std::int8_t> host(mem.host.data().begin(),
                                  mem.host.data().begin() + static_cast<std::ptrdiff_t>(rows * cfg.array_n));
    write_npy(args.out, NpyArray::of<std::int8_t>({rows, cfg.array_n}, host));
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpu-sim: cycle-accurate TPUv1-style accelerator simulator"};
  app.require_subcommand(1);
  RunArgs args;
  CLI::App* run_cmd = app.add_subcommand("run", "run a program on the SystemC model");
  run_cmd->add_option("program", args.program, "program file (.tpu) from tpu-as")->required();
  run_cmd->add_option("--hostmem", args.hostmem, "host memory image: int8 .npy, rows x N");
  run_cmd->add_option("--weights", args.weights, "weight memory image: int8 .npy, tiles x N x N");
  run_cmd->add_option("--out", args.out, "write the final host memory here (.npy)");
  run_cmd->add_option("--stats", args.stats, "write statistics as JSON here");
  run_cmd->add_option("--vcd", args.vcd, "write a waveform of the units here (.vcd)");
  run_cmd->add_flag("--trace", args.trace, "print one line per instruction: issue, start, completion");
  run_cmd->add_option("--max-cycles", args.max_cycles, "stop with a fault after this many cycles")
      ->capture_default_str();
  args.cfg.add_to(*run_cmd);
  app.footer("Exit status: 0 ok, 2 usage error, 3 bad input file, 4 program fault.");
  if (auto rc = cli::parse(app, argc, argv)) return *rc;
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << "tpu-sim: error: " << e.what() << '\n';
    return kExitBadInput;
  }
}
