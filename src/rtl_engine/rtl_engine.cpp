#include "rtl_engine/rtl_engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include "rtl_engine/port_widths.h"
#include "rtl_engine/rtl_harness.h"

namespace tpu::rtl {

// One entry per build: run_<variant>, from variant.cpp.
#define TPU_RTL_VARIANT(variant, preset, array_n, traced)                                     \
  model::RunLog run_##variant(const ArchConfig&, const isa::Program&, model::Memories&,       \
                              const model::RunOptions&);
#include "rtl_variants.inc"
#undef TPU_RTL_VARIANT

namespace {

using RunFn = model::RunLog (*)(const ArchConfig&, const isa::Program&, model::Memories&,
                                const model::RunOptions&);

// A build: a preset, with array_n replaced when array_n != 0.
struct Build {
  const char* entry;  // as in TPU_RTL_PRESETS: PRESET or PRESET/N
  const char* preset;
  std::uint64_t array_n;
  bool traced;  // waveform tracing compiled in
  RunFn run;
  ArchConfig config() const {
    ArchConfig cfg = preset_config(preset);
    if (array_n != 0) cfg.array_n = array_n;
    return cfg;
  }
  std::string name() const {
    return array_n == 0 ? std::string(preset) : fmt::format("{} with N={}", preset, array_n);
  }
};

const std::vector<Build>& builds() {
  static const std::vector<Build> kBuilds = {
#define TPU_RTL_VARIANT(variant, preset, array_n, traced) \
  {array_n == 0 ? #preset : #preset "/" #array_n, #preset, array_n, traced != 0, &run_##variant},
#include "rtl_variants.inc"
#undef TPU_RTL_VARIANT
  };
  return kBuilds;
}

// A build serves every configuration with its fixed parameters: the memory
// channels' timing is an input of the core, within the ports' widths.
bool same_build(const ArchConfig& a, const ArchConfig& b) {
  for (const ArchParam& p : arch_params())
    if (p.fixed_in_rtl && a.*p.member != b.*p.member) return false;
  return true;
}

const Build* find_build(const ArchConfig& cfg) {
  for (const Build& b : builds())
    if (same_build(b.config(), cfg)) return &b;
  return nullptr;
}


}  // namespace

namespace detail {

const char* fault_reason(unsigned code) {
  return code < model::kNumFaultCodes ? model::fault_reason(static_cast<model::FaultCode>(code))
                                      : "unknown fault";
}

// The array's rows and MACs (model::count_array_work, the model's rule), and
// each unit's instructions and busy cycles (the union of its
// instructions' [start, completion] intervals, docs/microarchitecture.md).
// After a fault, an instruction still in flight was busy from its start to
// the fault cycle, inclusive, as the model counts it: every unit works in the
// cycle the controller faults in (rtl_harness.h), and the run stops after it.
void finish_stats(const ArchConfig& cfg, const isa::Program& prog, model::RunLog& log) {
  model::count_array_work(cfg, prog, log);
  std::map<std::string, model::Cycle> covered_until;
  for (const model::RetireRecord& r : log.retired) {
    const isa::Instruction& in = prog.code[r.pc];
    const isa::Unit unit = isa::spec_of(in.opcode).unit;
    if (unit == isa::Unit::Controller) continue;
    model::UnitStats& u = log.stats.units[std::string(isa::unit_name(unit))];
    ++u.instructions;
    if (!r.completed && !log.fault) continue;
    const model::Cycle last = r.completed ? r.completion : log.fault->cycle;
    // Intervals of one unit start in order; count each cycle once.
    model::Cycle& until = covered_until[std::string(isa::unit_name(unit))];
    const model::Cycle from = std::max(r.start, until);
    if (last + 1 > from) u.busy_cycles += last + 1 - from;
    until = std::max(until, last + 1);
  }
}

}  // namespace detail

std::vector<std::string> built_configs() {
  std::vector<std::string> names;
  for (const Build& b : builds()) names.push_back(b.name());
  return names;
}

bool has_waveforms(const ArchConfig& cfg) {
  const Build* build = find_build(cfg);
  return build != nullptr && build->traced;
}

std::string no_waveforms_reason(const ArchConfig& cfg) {
  if (has_waveforms(cfg)) return "";
  std::vector<std::string> traced;
  for (const Build& b : builds())
    if (b.traced) traced.push_back(b.name());
  return fmt::format(
      "this build's RTL for N={0} has no tracing (traced: {1}); a build that has it: "
      "cmake -B build -DTPU_RTL_TRACE=ON -DTPU_RTL_TRACE_MAX_N={0} && cmake --build build -j 2",
      cfg.array_n, traced.empty() ? std::string("none") : fmt::format("{}", fmt::join(traced, ", ")));
}

std::string built_configs_text() {
  const std::vector<std::string> names = built_configs();
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

std::optional<PortWidths> port_widths(const ArchConfig& cfg) {
  const Build* build = find_build(cfg);
  if (build == nullptr) return std::nullopt;
  const ArchConfig built = build->config();
  return PortWidths{host_rows_per_cycle(built) * cfg.array_n,
                    weight_rows_per_cycle(built) * cfg.array_n};
}

namespace {

// The preset that, with the configuration's array size, is the same build
// (nullopt when none is), and whether that size is the preset's own.
struct PresetMatch {
  std::string preset;
  bool own_array_n;
};
std::optional<PresetMatch> preset_of(const ArchConfig& cfg) {
  for (std::string_view name : preset_names()) {
    ArchConfig p = preset_config(name);
    const bool own = p.array_n == cfg.array_n;
    p.array_n = cfg.array_n;
    if (same_build(p, cfg)) return PresetMatch{std::string(name), own};
  }
  return std::nullopt;
}

// The one command that builds the RTL engine for `cfg` beside those built:
// its TPU_RTL_PRESETS entry is PRESET, or PRESET/N after tpu-gen has made
// the package rtl/config/PRESET_nN.
std::string build_command(const ArchConfig& cfg) {
  const std::optional<PresetMatch> match = preset_of(cfg);
  if (!match)
    return "the RTL is built for presets (or a preset with another array size) only: see TPU_RTL_PRESETS in "
           "README.md";
  std::vector<std::string> entries;
  for (const Build& b : builds()) entries.push_back(b.entry);
  entries.push_back(match->own_array_n ? match->preset : fmt::format("{}/{}", match->preset, cfg.array_n));
  const std::string cmd = fmt::format("cmake -S . -B build -DTPU_RTL_PRESETS='{}' && cmake --build build",
                                      fmt::join(entries, ";"));
  if (match->own_array_n) return "build it with: " + cmd;
  return fmt::format("build it with: build/sim/tpu-gen config-pkg --preset {0} --array {1} "
                     "-o rtl/config/{0}_n{1}/tpu_config_pkg.sv && {2}",
                     match->preset, cfg.array_n, cmd);
}

}  // namespace

std::string unavailable(const ArchConfig& cfg) {
  const std::optional<PortWidths> ports = port_widths(cfg);
  if (!ports)
    return fmt::format("no RTL build for this configuration (N={}); the RTL is built for: {}; {}", cfg.array_n,
                       built_configs_text(), build_command(cfg));
  std::vector<std::string> why;
  if (cfg.host_bytes_per_cycle > ports->host_bytes_per_cycle)
    why.push_back(fmt::format("host_bytes_per_cycle {} > {}", cfg.host_bytes_per_cycle,
                              ports->host_bytes_per_cycle));
  if (core_weight_bytes_per_cycle(cfg) > ports->weight_bytes_per_cycle)
    why.push_back(fmt::format("weight_bytes_per_cycle {} > {}", cfg.weight_bytes_per_cycle,
                              ports->weight_bytes_per_cycle));
  if (why.empty()) return {};
  return fmt::format("the RTL build for {} has memory ports for at most {} host and {} weight bytes a cycle: {}",
                     find_build(cfg)->name(), ports->host_bytes_per_cycle, ports->weight_bytes_per_cycle,
                     fmt::join(why, ", "));
}

bool available(const ArchConfig& cfg) { return unavailable(cfg).empty(); }

void require_build(const ArchConfig& cfg) {
  if (const std::string why = unavailable(cfg); !why.empty()) throw std::runtime_error(why);
}

std::string unimplemented(const isa::Program& prog) {
  for (std::size_t pc = 0; pc < prog.code.size(); ++pc) {
    switch (prog.code[pc].opcode) {
      case isa::Opcode::SMAX:
      case isa::Opcode::LNRM:
        return fmt::format("the RTL core does not implement {} (pc {}) yet: run this program with "
                           "--engine systemc (the SystemC model)",
                           isa::spec_of(prog.code[pc].opcode).mnemonic, pc);
      default: break;
    }
  }
  return {};
}

model::RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                          const model::RunOptions& opts) {
  require_build(cfg);
  if (const std::string why = unimplemented(prog); !why.empty()) throw std::runtime_error(why);
  // An HWT or RWU of more than N rows, which the assembler and the
  // program-file loader refuse, in a program made in memory: the model
  // faults at it, the RTL core does not check it (its testbench lays out at
  // most N rows; its weight DMA writes at most a tile's N).
  for (std::size_t pc = 0; pc < prog.code.size(); ++pc)
    if (prog.code[pc].opcode == isa::Opcode::HWT || prog.code[pc].opcode == isa::Opcode::RWU)
      if (const std::string why = isa::check_with_array_n(prog.code[pc], cfg.array_n); !why.empty())
        throw std::runtime_error(fmt::format("the RTL core does not run this program: pc {}: {}", pc, why));
  return find_build(cfg)->run(cfg, prog, mem, opts);
}

std::string Divergence::message() const {
  return fmt::format("models diverge at pc {} ({}), cycle {}, unit {}: {}: SystemC {}, RTL {}", pc,
                     instruction, cycle, unit, what, systemc, rtl);
}

std::optional<Divergence> compare(const isa::Program& prog, const model::RunLog& a,
                                  const model::Memories& ma, const model::RunLog& b,
                                  const model::Memories& mb) {
  std::optional<Divergence> first;
  const auto note = [&](std::uint32_t pc, model::Cycle cycle, std::string unit, std::string what,
                        std::string va, std::string vb) {
    if (first && first->cycle <= cycle) return;
    first = Divergence{pc, pc < prog.code.size() ? isa::disassemble(prog.code[pc]) : "-", cycle,
                       std::move(unit), std::move(what), std::move(va), std::move(vb)};
  };
  const std::size_t common = std::min(a.retired.size(), b.retired.size());
  for (std::size_t i = 0; i < common; ++i) {
    const model::RetireRecord& x = a.retired[i];
    const model::RetireRecord& y = b.retired[i];
    const std::string unit(isa::unit_name(isa::spec_of(prog.code[x.pc].opcode).unit));
    if (x.pc != y.pc || x.issue != y.issue)
      note(x.pc, std::min(x.issue, y.issue), "controller", fmt::format("issue of instruction #{}", i),
           fmt::format("pc {} at cycle {}", x.pc, x.issue), fmt::format("pc {} at cycle {}", y.pc, y.issue));
    else if (x.start != y.start)
      note(x.pc, std::min(x.start, y.start), unit, "start cycle", fmt::to_string(x.start),
           fmt::to_string(y.start));
    // A record that never completed (the run faulted first) has no completion
    // cycle to compare; the other engine's must not have one either.
    else if (x.completed != y.completed || (x.completed && x.completion != y.completion))
      note(x.pc,
           x.completed && y.completed ? std::min(x.completion, y.completion)
                                      : (x.completed ? x.completion : y.completion),
           unit, "completion cycle", x.completed ? fmt::to_string(x.completion) : "-",
           y.completed ? fmt::to_string(y.completion) : "-");
  }
  if (first) return first;
  if (a.retired.size() != b.retired.size()) {
    const auto& longer = a.retired.size() > b.retired.size() ? a.retired : b.retired;
    note(longer[common].pc, longer[common].issue, "controller", "instructions issued",
         fmt::to_string(a.retired.size()), fmt::to_string(b.retired.size()));
    return first;
  }
  const model::Cycle end = std::max(a.stats.cycles, b.stats.cycles);
  const std::uint32_t last_pc = a.retired.empty() ? 0 : a.retired.back().pc;
  const std::string last_instr =
      last_pc < prog.code.size() ? isa::disassemble(prog.code[last_pc]) : std::string("-");
  if (a.halted != b.halted || a.fault.has_value() != b.fault.has_value() ||
      (a.fault && (a.fault->pc != b.fault->pc || a.fault->cycle != b.fault->cycle)))
    return Divergence{last_pc, last_instr, end, "controller", "end of run",
                      a.fault ? a.fault->message() : "halted", b.fault ? b.fault->message() : "halted"};
  const auto stat = [&](const char* what, std::uint64_t x, std::uint64_t y) -> std::optional<Divergence> {
    if (x == y) return std::nullopt;
    return Divergence{last_pc, last_instr, end, "stats", what, fmt::to_string(x), fmt::to_string(y)};
  };
  if (auto d = stat("cycles", a.stats.cycles, b.stats.cycles)) return d;
  if (auto d = stat("macs", a.stats.macs, b.stats.macs)) return d;
  if (auto d = stat("array_active_cycles", a.stats.array_active_cycles, b.stats.array_active_cycles))
    return d;
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    if (auto d = stat(model::stall_cause_name(static_cast<model::StallCause>(c)), a.stats.stall_cycles[c],
                      b.stats.stall_cycles[c]))
      return d;
  // The stall runs (cause and cycles per instruction), then the counters made from them.
  for (std::size_t i = 0; i < std::max(a.stall_runs.size(), b.stall_runs.size()); ++i) {
    const auto text = [](const std::vector<model::StallRun>& runs, std::size_t k) {
      if (k >= runs.size()) return std::string("none");
      const model::StallRun& r = runs[k];
      return fmt::format("{} at pc {} in cycles {}..{}", model::stall_cause_name(r.cause), r.pc, r.first,
                         r.last);
    };
    if (i < a.stall_runs.size() && i < b.stall_runs.size() && a.stall_runs[i] == b.stall_runs[i]) continue;
    const model::StallRun& r = i < a.stall_runs.size() ? a.stall_runs[i] : b.stall_runs[i];
    return Divergence{r.pc, isa::disassemble(prog.code[r.pc]), r.first, "controller",
                      fmt::format("stall run #{}", i), text(a.stall_runs, i), text(b.stall_runs, i)};
  }
  const model::PerfCounters& pa = a.stats.tpuv1;
  const model::PerfCounters& pb = b.stats.tpuv1;
  for (const auto& [what, x, y] :
       {std::tuple{"tpuv1.weight_stall_cycles", pa.weight_stall_cycles, pb.weight_stall_cycles},
        std::tuple{"tpuv1.weight_shift_cycles", pa.weight_shift_cycles, pb.weight_shift_cycles},
        std::tuple{"tpuv1.raw_stall_cycles", pa.raw_stall_cycles, pb.raw_stall_cycles},
        std::tuple{"tpuv1.input_data_stall_cycles", pa.input_data_stall_cycles, pb.input_data_stall_cycles},
        std::tuple{"tpuv1.useful_macs", pa.useful_macs, pb.useful_macs}})
    if (auto d = stat(what, x, y)) return d;
  for (const auto& [name, u] : a.stats.units) {
    const auto it = b.stats.units.find(name);
    const model::UnitStats v = it == b.stats.units.end() ? model::UnitStats{} : it->second;
    if (auto d = stat((name + " busy cycles").c_str(), u.busy_cycles, v.busy_cycles)) return d;
    if (auto d = stat((name + " instructions").c_str(), u.instructions, v.instructions)) return d;
  }
  // Final memory contents: rows row0 .. row0 + rows - 1 of x and y (the
  // same configuration's), by memcmp, element by element only where they differ.
  const auto rows_diff = [&](const char* what, const auto& x, const auto& y, std::uint64_t row0,
                             std::uint64_t rows) -> std::optional<Divergence> {
    if (x.rows() != y.rows() || x.width() != y.width())
      return Divergence{last_pc, last_instr, end, what, "shape", fmt::format("{} x {}", x.rows(), x.width()),
                        fmt::format("{} x {}", y.rows(), y.width())};
    const std::size_t w = x.width();
    const auto* px = x.data().data() + row0 * w;
    const auto* py = y.data().data() + row0 * w;
    if (std::memcmp(px, py, rows * w * sizeof(*px)) == 0) return std::nullopt;
    for (std::size_t i = 0; i < rows * w; ++i)
      if (px[i] != py[i])
        return Divergence{last_pc, last_instr, end, what, fmt::format("row {} element {}", row0 + i / w, i % w),
                          fmt::to_string(px[i]), fmt::to_string(py[i])};
    return std::nullopt;
  };
  const auto mem_diff = [&](const char* what, const auto& x, const auto& y) {
    return rows_diff(what, x, y, 0, x.rows());
  };
  if (auto d = mem_diff("unified_buffer", ma.ub, mb.ub)) return d;
  if (auto d = mem_diff("accumulators", ma.acc, mb.acc)) return d;
  if (auto d = mem_diff("host_memory", ma.host, mb.host)) return d;
  // Weight memory: only an HWT writes it (docs/isa.md), one tile each. Up to
  // 16 MiB (the small presets) it is compared whole; above, the tiles the
  // program's HWTs name: at tpuv1 a whole comparison read two memories of
  // mostly untouched pages per program (71% of a tpu-cosim run at N = 128).
  if (ma.weights.rows() * ma.weights.width() <= (std::uint64_t{16} << 20)) {
    if (auto d = mem_diff("weight_memory", ma.weights, mb.weights)) return d;
  } else {
    // Each tile once: a compiled attention layer writes a few reserved tiles
    // again and again.
    std::vector<std::uint64_t> tiles;
    for (const isa::Instruction& in : prog.code)
      if (in.opcode == isa::Opcode::HWT && in.operands[1] >= 0 &&
          static_cast<std::uint64_t>(in.operands[1]) < ma.weights.rows())
        tiles.push_back(static_cast<std::uint64_t>(in.operands[1]));
    std::sort(tiles.begin(), tiles.end());
    tiles.erase(std::unique(tiles.begin(), tiles.end()), tiles.end());
    for (const std::uint64_t tile : tiles)
      if (auto d = rows_diff("weight_memory", ma.weights, mb.weights, tile, 1)) return d;
  }
  return std::nullopt;
}

}  // namespace tpu::rtl
