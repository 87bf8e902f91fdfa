// Shared by the model's timing, MMC.C and POOL tests: checks of a run's
// retire records and statistics against the timing contract
// (docs/microarchitecture.md; the expected cycles come from each test's
// closed forms), and random memory contents.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "asm/assembler.h"
#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/tpu.h"

namespace tpu::testing {

using Cycle = std::uint64_t;

// Assembles `src` for cfg's N; with `check_ranges` also checks every range
// against `cfg`. Any diagnostic fails the test, shown as FILE_NAME:LINE:COL.
inline isa::Program assemble_for(const ArchConfig& cfg, const std::string& src,
                                 bool check_ranges = true, const char* file_name = "test.s") {
  assembler::Options o;
  o.array_n = static_cast<unsigned>(cfg.array_n);
  if (check_ranges) o.config = &cfg;
  const assembler::Result r = assembler::assemble(src, o);
  INFO(assembler::format_diagnostics(file_name, src, r.diagnostics));
  REQUIRE(r.diagnostics.empty());
  return *r.program;
}

// Runs `prog`, which must halt without a fault and retire every instruction
// in program order.
inline model::RunLog run_to_halt(const ArchConfig& cfg, const isa::Program& prog,
                                 model::Memories& mem, const model::RunOptions& opts = {}) {
  model::RunLog log = model::run_program(cfg, prog, mem, opts);
  if (log.fault) FAIL("fault: " << log.fault->message());
  REQUIRE(log.halted);
  REQUIRE(log.retired.size() == prog.code.size());
  for (std::size_t i = 0; i < log.retired.size(); ++i) {
    CHECK(log.retired[i].pc == i);
    CHECK(log.retired[i].completed);
  }
  return log;
}

// An MMC issued at c that starts at s (an MMC.S may wait in the matrix unit
// for its weights) and completes at d.
inline void check_mmc(const model::RunLog& log, std::size_t pc, Cycle c, Cycle s, Cycle d) {
  INFO("unit instruction at pc " << pc);
  REQUIRE(pc < log.retired.size());
  const model::RetireRecord& r = log.retired[pc];
  CHECK(r.issue == c);
  CHECK(r.start == s);
  CHECK(r.completion == d);
}

// A unit instruction: issue c, start c + 1, completion d.
inline void check_unit(const model::RunLog& log, std::size_t pc, Cycle c, Cycle d) {
  check_mmc(log, pc, c, c + 1, d);
}

// A controller-only instruction (NOP, SETQ, CMAP, CSTR, CTAP, CWIN, SYNC,
// HLT): s = d = c.
inline void check_controller(const model::RunLog& log, std::size_t pc, Cycle c) {
  INFO("controller instruction at pc " << pc);
  REQUIRE(pc < log.retired.size());
  const model::RetireRecord& r = log.retired[pc];
  CHECK(r.issue == c);
  CHECK(r.start == c);
  CHECK(r.completion == c);
}

// Expected stall cycles per cause; causes not listed must be zero.
using Stalls = std::map<model::StallCause, Cycle>;

inline void check_stalls(const model::RunLog& log, const Stalls& expected) {
  for (unsigned i = 0; i < model::kNumStallCauses; ++i) {
    const auto cause = static_cast<model::StallCause>(i);
    const auto it = expected.find(cause);
    INFO("stall cause " << model::stall_cause_name(cause));
    CHECK(log.stats.stall_cycles[i] == (it == expected.end() ? 0 : it->second));
  }
}

// HLT at `pc` issued at c_HLT; total cycles c_HLT + 1.
inline void check_halt(const model::RunLog& log, std::size_t pc, Cycle c_hlt) {
  check_controller(log, pc, c_hlt);
  CHECK(log.stats.cycles == c_hlt + 1);
}

// ---- Configurations ---------------------------------------------------------

// The timing parameters varied by the timing tests (docs/microarchitecture.md,
// "Parameters"): Lh, Bh, Lw, Bw, A and F.
struct Knobs {
  const char* name;
  Cycle lh, bh, lw, bw, a, f;
};

inline const std::vector<Knobs>& knob_sets() {
  static const std::vector<Knobs> kSets = {
      {"small preset: Lh 4, Bh 8, Lw 4, Bw 16, A 2, F 4", 4, 8, 4, 16, 2, 4},
      {"no latency, odd bandwidths: Lh 0, Bh 3, Lw 0, Bw 5, A 1, F 4", 0, 3, 0, 5, 1, 4},
      {"long latency, prime bandwidths: Lh 7, Bh 13, Lw 11, Bw 7, A 5, F 3", 7, 13, 11, 7, 5, 3},
      {"one byte per cycle: Lh 2, Bh 1, Lw 1, Bw 1, A 3, F 2", 2, 1, 1, 1, 3, 2},
      {"wide buses: Lh 0, Bh 1000, Lw 0, Bw 1000, A 1, F 5", 0, 1000, 0, 1000, 1, 5},
      {"deep pipelines: Lh 31, Bh 2, Lw 23, Bw 3, A 64, F 2", 31, 2, 23, 3, 64, 2},
  };
  return kSets;
}

// small8 with N = n, the knobs' timing and room for the tests' programs.
inline ArchConfig knob_config(unsigned n, const Knobs& k) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 8192;
  c.weight_tiles = 64;
  c.ub_rows = 16384;
  c.acc_rows = 4096;
  c.host_latency = k.lh;
  c.host_bytes_per_cycle = k.bh;
  c.weight_latency = k.lw;
  c.weight_bytes_per_cycle = k.bw;
  c.act_latency = k.a;
  c.fifo_depth = k.f;
  validate(c);
  return c;
}

// Calls f(cfg) for N = 4, 8, 16 and every knob set.
template <typename F>
void for_each_config(F&& f) {
  for (unsigned n : {4u, 8u, 16u}) {
    for (const Knobs& k : knob_sets()) {
      CAPTURE(n, k.name);
      f(knob_config(n, k));
    }
  }
}

// ---- Random data ------------------------------------------------------------------

inline int pick(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Two's-complement wrap-around of an exact sum to int32.
inline std::int32_t wrap32(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
}

// Every byte of the UB, host and weight memories random; accumulators random,
// a third of them within 1000 of INT32_MAX or INT32_MIN so that accumulating
// into them wraps.
inline void fill_memories(model::Memories& mem, std::mt19937& rng) {
  for (auto* m : {&mem.host, &mem.weights, &mem.ub})
    for (std::int8_t& v : m->data()) v = static_cast<std::int8_t>(rng());
  for (std::int32_t& v : mem.acc.data()) {
    switch (pick(rng, 0, 5)) {
      case 0: v = std::numeric_limits<std::int32_t>::max() - pick(rng, 0, 999); break;
      case 1: v = std::numeric_limits<std::int32_t>::min() + pick(rng, 0, 999); break;
      default: v = static_cast<std::int32_t>(rng()); break;
    }
  }
}

// A pad value (an input zero point): the extremes, values near zero, or anything.
inline int random_pad(std::mt19937& rng) {
  static const int kPads[] = {-128, 127, -1, 0, 1};
  return pick(rng, 0, 1) ? kPads[pick(rng, 0, 4)] : pick(rng, -128, 127);
}

inline model::RunLog run_path(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                              model::Detail detail) {
  model::RunOptions o;
  o.detail = detail;
  return model::run_program(cfg, prog, mem, o);
}

// Runs `src` on the detailed path into `mem` and on the fast path into a
// copy; both must give the same records, stalls, statistics, the activation
// unit's busy cycles and memories. With `halts`, the program must halt with
// every instruction completed (and the assembler checks its ranges).
inline model::RunLog run_both_paths(const ArchConfig& cfg, const std::string& src,
                                    model::Memories& mem, bool halts, const char* file_name) {
  INFO(src);
  const isa::Program prog = assemble_for(cfg, src, halts, file_name);
  model::Memories fast_mem = mem;
  model::RunOptions detailed_options;
  detailed_options.detail = model::Detail::Detailed;
  const model::RunLog detailed = halts ? testing::run_to_halt(cfg, prog, mem, detailed_options)
                                : model::run_program(cfg, prog, mem, detailed_options);
  const model::RunLog fast = run_path(cfg, prog, fast_mem, model::Detail::Fast);
  REQUIRE(detailed.retired.size() == fast.retired.size());
  for (std::size_t i = 0; i < fast.retired.size(); ++i) {
    INFO("record " << i);
    CHECK(detailed.retired[i].pc == fast.retired[i].pc);
    CHECK(detailed.retired[i].issue == fast.retired[i].issue);
    CHECK(detailed.retired[i].start == fast.retired[i].start);
    CHECK(detailed.retired[i].completion == fast.retired[i].completion);
    CHECK(detailed.retired[i].completed == fast.retired[i].completed);
  }
  CHECK(detailed.stats.cycles == fast.stats.cycles);
  CHECK(std::equal(std::begin(detailed.stats.stall_cycles), std::end(detailed.stats.stall_cycles),
                   std::begin(fast.stats.stall_cycles)));
  CHECK(detailed.stats.units.at("activation_unit").busy_cycles ==
        fast.stats.units.at("activation_unit").busy_cycles);
  CHECK(detailed.halted == fast.halted);
  CHECK(detailed.fault.has_value() == fast.fault.has_value());
  CHECK(std::equal(mem.ub.data().begin(), mem.ub.data().end(), fast_mem.ub.data().begin()));
  CHECK(std::equal(mem.host.data().begin(), mem.host.data().end(), fast_mem.host.data().begin()));
  return detailed;
}

}  // namespace tpu::testing
