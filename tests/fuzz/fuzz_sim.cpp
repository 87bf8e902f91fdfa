// Fuzz target: the SystemC model (src/model) running arbitrary program files.
//
// The input is a whole program file (the bytes tpu-sim run reads), so a saved
// crash is a .tpu file. Files parse_program rejects, and files for N > 8
// (slow to simulate), are skipped. The machine has preset small8's timing
// with small memories, filled with a fixed pattern: 256 host rows, 8 weight
// tiles, 128 unified-buffer rows, 64 accumulator rows, a 4-tile FIFO, the
// unified buffer's weight path (RWU) on; every
// run stops after at most 20000 cycles. Each program runs on both levels of
// detail of the model (model/tpu.h). The fast run uses a GEMM kernel and a
// split of MMCs over 1 to 4 threads picked by the input's length, with one
// thread allowed per MAC, so that MMCs of a few rows already take the
// threaded path that the real threshold keeps for MMCs of millions of MACs.
//
// Properties, beyond not crashing (the model's memory accesses are checked by
// ASan): the detailed and the fast model agree exactly (retire records,
// statistics, fault, final memories); every run ends in exactly one of HLT and
// a fault; a fault names a pc, the instruction and a reason at a cycle within
// the limit; a halted run has completed every instruction it issued, each with
// issue < start <= completion < total cycles (controller instructions:
// issue = start = completion); issue plus stall cycles are the total cycles.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/arch_config.h"
#include "fuzz_check.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/tpu.h"

namespace {

using namespace tpu;

constexpr model::Cycle kMaxCycles = 20000;

ArchConfig fuzz_config(unsigned n) {
  ArchConfig cfg = preset_config("small8");
  cfg.array_n = n;
  cfg.host_rows = 256;
  cfg.weight_tiles = 8;
  cfg.ub_rows = 128;
  cfg.acc_rows = 64;
  cfg.ub_weight_path = 1;  // RWU runs too (beyond TPUv1)
  validate(cfg);
  return cfg;
}

template <typename Span>
void fill(Span mem, unsigned seed) {
  for (std::size_t i = 0; i < mem.size(); ++i)
    mem[i] = static_cast<std::int8_t>((i * 37 + seed * 101 + (i >> 7)) & 0xff);
}

template <typename T>
bool same_memory(const model::RowMemory<T>& a, const model::RowMemory<T>& b) {
  return std::equal(a.data().begin(), a.data().end(), b.data().begin(), b.data().end());
}

// The first difference between two runs of one program, or "".
std::string difference(const model::RunLog& a, const model::Memories& ma, const model::RunLog& b,
                       const model::Memories& mb) {
  if (a.halted != b.halted) return "halted";
  if (a.fault.has_value() != b.fault.has_value()) return "fault";
  if (a.fault && a.fault->message() != b.fault->message())
    return a.fault->message() + " vs " + b.fault->message();
  if (a.retired.size() != b.retired.size()) return "number of retire records";
  for (std::size_t i = 0; i < a.retired.size(); ++i) {
    const model::RetireRecord &x = a.retired[i], &y = b.retired[i];
    if (x.pc != y.pc || x.issue != y.issue || x.start != y.start || x.completed != y.completed ||
        (x.completed && x.completion != y.completion))
      return "retire record " + std::to_string(i) + " (pc " + std::to_string(x.pc) + ")";
  }
  const model::Stats &s = a.stats, &t = b.stats;
  if (s.cycles != t.cycles || s.instructions != t.instructions || s.macs != t.macs ||
      s.array_active_cycles != t.array_active_cycles)
    return "statistics: cycles " + std::to_string(s.cycles) + " vs " + std::to_string(t.cycles) +
           ", array active " + std::to_string(s.array_active_cycles) + " vs " +
           std::to_string(t.array_active_cycles);
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    if (s.stall_cycles[c] != t.stall_cycles[c])
      return "stall cycles " + std::string(stall_cause_name(static_cast<model::StallCause>(c)));
  if (s.units.size() != t.units.size()) return "units";
  for (const auto& [name, u] : s.units) {
    const auto it = t.units.find(name);
    if (it == t.units.end() || it->second.instructions != u.instructions ||
        it->second.busy_cycles != u.busy_cycles)
      return "unit statistics of " + name;
  }
  if (!same_memory(ma.host, mb.host)) return "host memory";
  if (!same_memory(ma.ub, mb.ub)) return "unified buffer";
  if (!same_memory(ma.acc, mb.acc)) return "accumulators";
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  isa::Program prog;
  try {
    prog = isa::parse_program(std::vector<std::uint8_t>(data, data + size));
  } catch (const isa::DecodeError&) {
    return 0;
  }
  if (prog.array_n > 8) return 0;
  const ArchConfig cfg = fuzz_config(prog.array_n);
  model::Memories mem(cfg);
  fill(mem.host.data(), 1);
  fill(mem.weights.data(), 2);
  model::Memories fast_mem = mem;
  model::RunOptions opts;
  opts.max_cycles = kMaxCycles;
  opts.detail = model::Detail::Detailed;
  const model::RunLog log = model::run_program(cfg, prog, mem, opts);
  opts.detail = model::Detail::Fast;
  std::vector<model::GemmKernel> kernels;
  for (auto k : {model::GemmKernel::Scalar, model::GemmKernel::Avx2, model::GemmKernel::Avx512Vnni})
    if (model::gemm_kernel_available(k)) kernels.push_back(k);
  opts.gemm_kernel = kernels[size % kernels.size()];
  opts.gemm_threading = {1 + static_cast<unsigned>(size / 3 % 4), 1};
  // Half the inputs with every MMC computed in the background from its start.
  if (size / 12 % 2) opts.gemm_threading.async_macs = 1;
  const model::RunLog fast_log = model::run_program(cfg, prog, fast_mem, opts);
  const std::string diff = difference(log, mem, fast_log, fast_mem);
  FUZZ_CHECK(diff.empty(), "the detailed and the fast model differ: " + diff);

  const model::Stats& s = log.stats;
  FUZZ_CHECK(log.halted != log.fault.has_value(), "not exactly one of HLT and a fault");
  FUZZ_CHECK(s.cycles <= kMaxCycles + 1, std::to_string(s.cycles));
  FUZZ_CHECK(log.retired.size() == s.instructions, "retire records");
  // Cycles 0 .. cycles - 1 of a halted run; a fault's cycle itself is simulated too.
  const model::Cycle simulated = s.cycles + (log.halted ? 0 : 1);
  FUZZ_CHECK(s.array_active_cycles <= simulated, "array active cycles");
  std::uint64_t rows_read = 0;
  for (const model::RetireRecord& r : log.retired) {
    FUZZ_CHECK(r.pc < prog.code.size(), "retired pc");
    const isa::Instruction& in = prog.code[r.pc];
    const bool controller = isa::spec_of(in.opcode).unit == isa::Unit::Controller;
    if (in.opcode == isa::Opcode::MMC) rows_read += static_cast<std::uint64_t>(in.operands[2]);
    FUZZ_CHECK(r.issue < s.cycles, "issued after the end");
    // An MMC.S may wait in the matrix unit for its weights (kNever: it was
    // still waiting when the run faulted); everything else starts at once.
    if (in.opcode == isa::Opcode::MMC && in.has(isa::kFlagMmcSwitch))
      FUZZ_CHECK(r.start > r.issue && (r.start != model::kNever || log.fault), isa::disassemble(in));
    else
      FUZZ_CHECK(r.start == r.issue + (controller ? 0 : 1), isa::disassemble(in));
    if (r.completed)
      FUZZ_CHECK(r.completion >= r.start && r.completion < simulated, isa::disassemble(in));
    if (log.halted) FUZZ_CHECK(r.completed, "a halted run left " + isa::disassemble(in));
  }
  if (log.halted) {
    FUZZ_CHECK(prog.code[log.retired.back().pc].opcode == isa::Opcode::HLT, "last retired");
    FUZZ_CHECK(s.cycles == log.retired.back().issue + 1, "total cycles");
    FUZZ_CHECK(s.array_active_cycles == rows_read, "array active cycles of a halted run");
  } else {
    const model::Fault& f = *log.fault;
    FUZZ_CHECK(f.pc <= prog.code.size() && f.cycle <= kMaxCycles && !f.reason.empty(),
               f.message());
    FUZZ_CHECK(fuzz::one_line(f.message()), f.message());
  }
  // Before HLT or the fault, the controller issues or stalls in every cycle.
  std::uint64_t stalls = 0;
  for (std::uint64_t c : s.stall_cycles) stalls += c;
  FUZZ_CHECK(s.instructions + stalls == s.cycles, "issue and stall cycles");
  for (const auto& [unit, u] : s.units) FUZZ_CHECK(u.busy_cycles <= simulated, unit);
  return 0;
}
