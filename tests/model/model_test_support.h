// Shared by the model's timing, MMC.C and POOL tests: checks of a run's
// retire records and statistics against the timing contract
// (docs/microarchitecture.md; the expected cycles come from each test's
// closed forms), and random memory contents.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>

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

// A unit instruction: issue c, start c + 1, completion d.
inline void check_unit(const model::RunLog& log, std::size_t pc, Cycle c, Cycle d) {
  INFO("unit instruction at pc " << pc);
  REQUIRE(pc < log.retired.size());
  const model::RetireRecord& r = log.retired[pc];
  CHECK(r.issue == c);
  CHECK(r.start == c + 1);
  CHECK(r.completion == d);
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

}  // namespace tpu::testing
