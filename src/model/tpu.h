// The TPU: the units of docs/microarchitecture.md wired together on one
// clock, and the entry point that runs a program on them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/int8_gemm.h"
#include "model/memories.h"
#include "model/memory_ports.h"
#include "model/run_log.h"

namespace tpu::model {

// The model's two levels of detail. Both give the same retire records,
// statistics, faults and memories, cycle for cycle (tests/model/
// test_fast_path.cpp); they differ in what they compute in between.
//
// - Detailed: a free-running clock; every unit runs every cycle and the
//   systolic array keeps every PE's registers, so that a waveform shows the
//   data moving through the array.
// - Fast: the clock only ticks in the cycles in which some unit has something
//   to do (an issue, a completion, a weight load, a stall that may end); the
//   cycles in between are accounted for in closed form. The array computes
//   each MMC as one blocked int8 GEMM (model/int8_gemm.h) in its completion
//   cycle.
// - Auto: Detailed when a waveform is asked for, Fast otherwise (Detailed
//   with TPU_DETAIL=detailed in the environment, to run a test suite on it).
enum class Detail : std::uint8_t { Auto, Detailed, Fast };

struct RunOptions {
  Cycle max_cycles = 100'000'000;
  std::string vcd_path;  // empty: no waveform
  Detail detail = Detail::Auto;
  // The fast path's GEMM kernel (none: best_gemm_kernel()) and its split of
  // large MMCs over threads. Every choice gives the same bits; tests set them
  // so that each kernel and the threaded split run on any machine.
  std::optional<GemmKernel> gemm_kernel;
  GemmThreading gemm_threading;
  // The targets bound to the DMAs' TLM-2.0 memory ports
  // (docs/microarchitecture.md, "Memory ports"); empty: the default ones,
  // HostMemoryTarget and WeightMemoryTarget with the configuration's latency
  // and bandwidth. Both levels of detail run with any target and give the
  // same results. (The RTL engine has the default timing built in.)
  MemoryTargetFactory host_memory;
  MemoryTargetFactory weight_memory;
  // Asked every kInterruptPollTicks controller ticks (cycles, or the fast
  // path's steps): true stops the run there with a fault "interrupted" and
  // RunLog::interrupted set (the Python module: Ctrl-C within a program).
  std::function<bool()> interrupted;
};

// The level of detail a run with `opts` uses: never Auto. Throws
// std::invalid_argument for Fast with a waveform (the fast path has no
// per-cycle state to show).
Detail resolve_detail(const RunOptions& opts);

// Runs `prog` on a machine configured by `cfg` whose memories start as
// `mem`, which holds the final state afterwards. Each call builds a fresh
// SystemC simulation.
RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
                   const RunOptions& opts = {});

}  // namespace tpu::model
