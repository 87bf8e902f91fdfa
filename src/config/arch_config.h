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
  std::uint64_t act_latency = 0;           // activation unit pipeline depth
  // Clock frequency: converts cycles to seconds and MACs to TOPS in the
  // statistics; no effect on any cycle count (the RTL ignores it).
  std::uint64_t clock_mhz = 700;

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
