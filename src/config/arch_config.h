// Microarchitecture configuration: the one place every size and latency of
// the machine is declared, with its default and meaning.
//
// A configuration starts from a named preset, is overridden field by field by
// a JSON object, and finally by --array N. Every model, the assembler's range
// checks and the generated Verilog parameters read it from here.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "isa/instruction.h"

namespace tpu {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ArchConfig {
  std::string preset;             // name of the preset it started from
  std::uint64_t array_n = 0;      // systolic array is array_n x array_n
  std::uint64_t host_rows = 0;    // host memory, rows of array_n int8
  std::uint64_t weight_tiles = 0; // weight memory, tiles of array_n x array_n int8
  std::uint64_t ub_rows = 0;      // unified buffer, rows of array_n int8
  std::uint64_t acc_rows = 0;     // accumulators, rows of array_n int32
  std::uint64_t fifo_depth = 0;   // weight FIFO depth in tiles
  std::uint64_t host_latency = 0;          // cycles before a host DMA moves its first byte
  std::uint64_t host_bytes_per_cycle = 0;  // host DMA bandwidth
  std::uint64_t weight_latency = 0;        // cycles before a weight DMA moves its first byte
  std::uint64_t weight_bytes_per_cycle = 0;
  std::uint64_t act_latency = 0;           // ACT pipeline depth, read to write (4; the RTL takes >= 4)
  // Attention's second operand (docs/microarchitecture.md, "Attention's
  // second operand"): the host's software time to lay out an HWT's tile, and
  // whether the weight DMA may take a tile from the unified buffer (RWU),
  // which TPUv1 cannot (0 in every preset).
  std::uint64_t host_layout_cycles = 0;
  std::uint64_t ub_weight_path = 0;
  // Clock frequency: converts cycles to seconds and MACs to TOPS in the
  // statistics; no effect on any cycle count (the RTL ignores it).
  std::uint64_t clock_mhz = 700;

  // The energy model (docs/energy.md): the energy of one event in femtojoules
  // and the static power of each unit in microwatts (per PE, per KiB, per
  // lane: the units scale with the configuration's sizes) or milliwatts.
  // Statistics only: no effect on any cycle (the RTL ignores them).
  std::uint64_t energy_mac_fj = 0;             // a MAC in a PE with a useful lane
  std::uint64_t energy_idle_pe_fj = 0;         // a PE passing a row on an unused lane
  std::uint64_t energy_ub_read_byte_fj = 0;    // a byte of a unified-buffer row read
  std::uint64_t energy_ub_write_byte_fj = 0;   // a byte of a unified-buffer row written
  std::uint64_t energy_acc_read_word_fj = 0;   // an int32 of an accumulator row read
  std::uint64_t energy_acc_write_word_fj = 0;  // an int32 written (MMC.O)
  std::uint64_t energy_acc_rmw_word_fj = 0;    // an int32 read, added to and written (MMC)
  std::uint64_t energy_fifo_write_byte_fj = 0; // a byte of a tile written into the weight FIFO
  std::uint64_t energy_fifo_shift_byte_fj = 0; // a byte of a tile shifted out of it into the array
  std::uint64_t energy_act_lane_fj = 0;        // one lane of an activation-unit row operation
  std::uint64_t energy_weight_mem_byte_fj = 0; // a byte read from weight memory (DDR3)
  std::uint64_t energy_host_byte_fj = 0;       // a byte over the host interface (PCIe)
  std::uint64_t energy_instruction_fj = 0;     // an instruction fetched, decoded and issued
  std::uint64_t static_pe_uw = 0;              // matrix unit, per PE
  std::uint64_t static_ub_uw_per_kib = 0;      // unified buffer, per KiB
  std::uint64_t static_acc_uw_per_kib = 0;     // accumulators, per KiB
  std::uint64_t static_fifo_uw_per_kib = 0;    // weight FIFO, per KiB
  std::uint64_t static_act_uw_per_lane = 0;    // activation unit, per lane (N lanes)
  std::uint64_t static_fixed_mw = 0;           // controller, host and DDR3 interfaces, clock

  // Size of a memory in its own units (rows or tiles).
  std::uint64_t size_of(isa::Space space) const;
};

// One configurable field: its JSON name, meaning and storage.
struct ArchParam {
  std::string_view name;
  std::string_view description;
  std::uint64_t ArchConfig::*member;
  std::uint64_t min;
  std::uint64_t max;
  // Whether an RTL build is made for one value (a parameter of the generated
  // tpu_config_pkg). The memory channels' latencies and bandwidths are inputs
  // of the RTL core instead, set at run time, and the clock changes no cycle.
  bool fixed_in_rtl = true;
};
const std::vector<ArchParam>& arch_params();

std::vector<std::string_view> preset_names();
ArchConfig preset_config(std::string_view name);  // throws ConfigError for unknown names

// Applies a JSON object of overrides (text of a config file); `origin` names
// it in errors. Unknown fields, wrong types and out-of-range values throw.
void apply_json_overrides(ArchConfig& cfg, std::string_view json_text, std::string_view origin);

// Throws ConfigError if a field is out of range.
void validate(const ArchConfig& cfg);

// The common resolution used by every command line: preset, then the JSON
// file, then the array size.
ArchConfig resolve_config(std::string_view preset, const std::optional<std::string>& config_path,
                          std::optional<std::uint64_t> array_n);

inline constexpr std::string_view kDefaultPreset = "small8";

}  // namespace tpu
