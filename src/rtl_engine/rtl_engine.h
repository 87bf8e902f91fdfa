// The Verilator engine: runs a program on the RTL core (rtl/) with the same
// inputs, outputs and statistics as the SystemC model, and compares the two.
//
// The core is Verilated once per configuration listed in TPU_RTL_PRESETS
// (CMake); a configuration matches a build when every parameter fixed in the
// RTL (ArchParam::fixed_in_rtl) is equal. The memory channels' latencies and
// bandwidths are inputs of the core, so a build runs any of them its memory
// ports are wide enough for (host_rows_per_cycle and weight_rows_per_cycle
// of the build's configuration, port_widths.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/tpu.h"

namespace tpu::rtl {

// The configurations the RTL was built for, by name ("small8", "tpuv1 with N=64").
std::vector<std::string> built_configs();
// The same as one line for messages: "small4, small8" or "none".
std::string built_configs_text();

// Why the RTL cannot run `cfg`, as one line: no build has its fixed
// parameters, or a bandwidth is wider than the build's memory ports. Empty
// when it can.
std::string unavailable(const ArchConfig& cfg);

// The widest bandwidths, in bytes a cycle, the build for cfg's fixed
// parameters takes (its memory ports' rows times N); nullopt without a build.
struct PortWidths {
  std::uint64_t host_bytes_per_cycle = 0;
  std::uint64_t weight_bytes_per_cycle = 0;
};
std::optional<PortWidths> port_widths(const ArchConfig& cfg);

// True when unavailable(cfg) is empty.
bool available(const ArchConfig& cfg);

// Throws the std::runtime_error of run_program when unavailable(cfg) is not empty.
void require_build(const ArchConfig& cfg);

// True when the build for `cfg` has tracing compiled in (CMake TPU_RTL_TRACE,
// for N up to TPU_RTL_TRACE_MAX_N), so that run_program can write a waveform.
bool has_waveforms(const ArchConfig& cfg);

// Why a waveform of the RTL at `cfg` cannot be written with this build, and
// the commands that make a build that can (for the usage errors of tpu-sim
// and the sweeps); "" when has_waveforms(cfg).
std::string no_waveforms_reason(const ArchConfig& cfg);

// Why the RTL core cannot run `prog`: the first instruction it does not
// implement (SMAX and LNRM exist in the SystemC model only), as one line;
// empty when it can.
std::string unimplemented(const isa::Program& prog);

// Runs on the RTL; throws std::runtime_error when no build matches `cfg` or
// the core does not implement one of the program's instructions.
// With opts.vcd_path set, writes the waveform of every signal of tpu_core
// there (.vcd appended if missing) and a GTKWave save file (.gtkw) beside
// it, whole or not at all (waves/wave_files.h); needs has_waveforms(cfg).
model::RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                          const model::RunOptions& opts = {});

// The first difference between two runs of the same program, or nullopt.
struct Divergence {
  std::uint32_t pc = 0;
  std::string instruction;
  model::Cycle cycle = 0;
  std::string unit;
  std::string what;  // e.g. "completion cycle", "UB row 12 byte 3"
  std::string systemc, rtl;
  std::string message() const;
};

std::optional<Divergence> compare(const isa::Program& prog, const model::RunLog& systemc,
                                  const model::Memories& systemc_mem, const model::RunLog& rtl,
                                  const model::Memories& rtl_mem);

}  // namespace tpu::rtl
