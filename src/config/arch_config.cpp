#include "config/arch_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "isa/program.h"

namespace tpu {
namespace {

// Largest memory an address field can reach, so every row is addressable.
constexpr std::uint64_t addressable(isa::Field f) {
  return static_cast<std::uint64_t>(isa::field_spec(f).max) + 1;
}

// Bounds of the energy model's coefficients: 1 uJ per event, 1 kW per unit of
// size; far above any real value, low enough that no product overflows.
constexpr std::uint64_t kMaxEnergyFj = 1'000'000'000;
constexpr std::uint64_t kMaxStaticUw = 1'000'000'000;

struct Preset {
  std::string_view name;
  std::string_view description;
  ArchConfig cfg;
};

// The energy model's coefficients (docs/energy.md derives each): Horowitz,
// ISSCC 2014, at 45 nm, x 28/45 for TPUv1's 28 nm, x 1.104, the calibration
// that makes the TPUv1 paper's applications draw its measured busy power (40 W
// per die); the static power is the measured idle power (28 W), per PE, KiB and
// lane, so that it scales with the sizes; its fixed part scales with N / 256.
ArchConfig with_energy(ArchConfig c) {
  c.energy_mac_fj = 206;
  c.energy_idle_pe_fj = 69;
  c.energy_ub_read_byte_fj = 1717;
  c.energy_ub_write_byte_fj = 1717;
  c.energy_acc_read_word_fj = 6869;
  c.energy_acc_write_word_fj = 6869;
  c.energy_acc_rmw_word_fj = 13807;
  c.energy_fifo_write_byte_fj = 859;
  c.energy_fifo_shift_byte_fj = 859;
  c.energy_act_lane_fj = 2198;
  c.energy_weight_mem_byte_fj = 269100;
  c.energy_host_byte_fj = 88320;
  c.energy_instruction_fj = 13739;
  c.static_pe_uw = 137;
  c.static_ub_uw_per_kib = 326;
  c.static_acc_uw_per_kib = 488;
  c.static_fifo_uw_per_kib = 1953;
  c.static_act_uw_per_lane = 5859;
  c.static_fixed_mw = 7000 * c.array_n / 256;
  return c;
}

ArchConfig small_preset(std::string_view name, std::uint64_t n) {
  return with_energy({std::string(name), n, 1u << 20, 1u << 16, 1u << 14, 4096, 4, 4, 4, 4, 16, 4, 0, 0, 700});
}

// TPUv1 (Jouppi et al., ISCA 2017): 256x256 array, 24 MiB unified buffer
// (96Ki rows of 256 B), 4096 accumulator rows, a weight FIFO four tiles deep,
// the board's 8 GiB of DDR3 weight memory (Table 2, Figure 1: 131072 tiles of
// 64 KiB, held sparsely: model/memories.h). Host memory is an address space
// sized for the workloads tpu-sim runs (64 MiB). Host DMA: PCIe Gen3 x16, about
// 14 GB/s at 700 MHz = 20 B/cycle; weight memory: the paper's Table 2 gives
// 34 GB/s, 48.6 B/cycle at 700 MHz, here 49 B/cycle (34.3 GB/s), streamed as
// a pipelined channel (the 100-cycle latency paid once per burst).
// The clock is the paper's 700 MHz.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {"tpuv1", "TPUv1: N=256, 24 MiB UB, 4096 ACC rows, 8 GiB weight memory",
       with_energy({"tpuv1", 256, 1u << 18, 1u << 17, 96u * 1024, 4096, 4, 100, 20, 100, 49, 4, 0, 0, 700})},
      {"small4", "N=4 array for tests", small_preset("small4", 4)},
      {"small8", "N=8 array for tests", small_preset("small8", 8)},
      {"small16", "N=16 array for tests", small_preset("small16", 16)},
  };
  return kPresets;
}

// A name from the user, made safe for a one-line message: JSON string
// escapes (so a newline shows as \n), without the quotes.
std::string shown(std::string_view name) {
  const std::string quoted = nlohmann::json(std::string(name))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

std::uint64_t ArchConfig::size_of(isa::Space space) const {
  switch (space) {
    case isa::Space::HostMem: return host_rows;
    case isa::Space::WeightMem: return weight_tiles;
    case isa::Space::UnifiedBuffer: return ub_rows;
    case isa::Space::Accumulators: return acc_rows;
  }
  return 0;
}

const std::vector<ArchParam>& arch_params() {
  using isa::Field;
  static const std::vector<ArchParam> kParams = {
      {"array_n", "systolic array size N (N x N MACs)", &ArchConfig::array_n, isa::kMinArrayN,
       isa::kMaxArrayN},
      {"host_rows", "host memory size in rows of N int8", &ArchConfig::host_rows, 1,
       addressable(Field::HostRow)},
      {"weight_tiles", "weight memory size in tiles of N x N int8", &ArchConfig::weight_tiles, 1,
       addressable(Field::WeightTile)},
      {"ub_rows", "unified buffer size in rows of N int8", &ArchConfig::ub_rows, 1,
       addressable(Field::UbRow)},
      {"acc_rows", "accumulator size in rows of N int32", &ArchConfig::acc_rows, 1,
       addressable(Field::AccRow)},
      {"fifo_depth", "weight FIFO depth in tiles", &ArchConfig::fifo_depth, 1, 64},
      {"host_latency", "cycles before a host DMA transfer moves its first byte",
       &ArchConfig::host_latency, 0, 1u << 20, false},
      {"host_bytes_per_cycle", "host DMA bandwidth in bytes per cycle",
       &ArchConfig::host_bytes_per_cycle, 1, 1u << 20, false},
      {"weight_latency", "cycles before a weight DMA transfer moves its first byte",
       &ArchConfig::weight_latency, 0, 1u << 20, false},
      {"weight_bytes_per_cycle", "weight DMA bandwidth in bytes per cycle",
       &ArchConfig::weight_bytes_per_cycle, 1, 1u << 20, false},
      {"act_latency", "ACT pipeline depth from read to write in cycles (the RTL takes 4 or more)", &ArchConfig::act_latency, 1,
       64},
      // Neither changes the RTL build: both are inputs of tpu_core, held for
      // the run like the channels' timing (HWT's layout time; whether RWU
      // runs or faults).
      {"host_layout_cycles", "cycles the host takes to lay out an HWT's weight tile (beside the transfer)",
       &ArchConfig::host_layout_cycles, 0, 1u << 30, false},
      {"ub_weight_path", "1: the weight DMA may take tiles from the unified buffer (RWU), beyond TPUv1; 0: not",
       &ArchConfig::ub_weight_path, 0, 1, false},
      {"clock_mhz", "clock frequency in MHz: seconds and TOPS in the statistics, no effect on cycles",
       &ArchConfig::clock_mhz, 1, 100000, false},
      // The energy model (docs/energy.md): statistics only, like the clock.
      {"energy_mac_fj", "fJ per MAC in a PE with a useful lane", &ArchConfig::energy_mac_fj, 0, kMaxEnergyFj, false},
      {"energy_idle_pe_fj", "fJ per PE passing a row on an unused lane", &ArchConfig::energy_idle_pe_fj, 0,
       kMaxEnergyFj, false},
      {"energy_ub_read_byte_fj", "fJ per byte of a unified-buffer row read", &ArchConfig::energy_ub_read_byte_fj,
       0, kMaxEnergyFj, false},
      {"energy_ub_write_byte_fj", "fJ per byte of a unified-buffer row written",
       &ArchConfig::energy_ub_write_byte_fj, 0, kMaxEnergyFj, false},
      {"energy_acc_read_word_fj", "fJ per int32 of an accumulator row read", &ArchConfig::energy_acc_read_word_fj,
       0, kMaxEnergyFj, false},
      {"energy_acc_write_word_fj", "fJ per int32 of an accumulator row overwritten (MMC.O)",
       &ArchConfig::energy_acc_write_word_fj, 0, kMaxEnergyFj, false},
      {"energy_acc_rmw_word_fj", "fJ per int32 of an accumulator row read, added to and written (MMC)",
       &ArchConfig::energy_acc_rmw_word_fj, 0, kMaxEnergyFj, false},
      {"energy_fifo_write_byte_fj", "fJ per byte of a weight tile written into the weight FIFO",
       &ArchConfig::energy_fifo_write_byte_fj, 0, kMaxEnergyFj, false},
      {"energy_fifo_shift_byte_fj", "fJ per byte of a weight tile shifted from the FIFO into the array",
       &ArchConfig::energy_fifo_shift_byte_fj, 0, kMaxEnergyFj, false},
      {"energy_act_lane_fj", "fJ per lane of an activation-unit row operation (ACT, POOL position, VEC)",
       &ArchConfig::energy_act_lane_fj, 0, kMaxEnergyFj, false},
      {"energy_weight_mem_byte_fj", "fJ per byte read from weight memory", &ArchConfig::energy_weight_mem_byte_fj,
       0, kMaxEnergyFj, false},
      {"energy_host_byte_fj", "fJ per byte over the host interface", &ArchConfig::energy_host_byte_fj, 0,
       kMaxEnergyFj, false},
      {"energy_instruction_fj", "fJ per instruction issued", &ArchConfig::energy_instruction_fj, 0, kMaxEnergyFj,
       false},
      {"static_pe_uw", "static power of the matrix unit in uW per PE", &ArchConfig::static_pe_uw, 0,
       kMaxStaticUw, false},
      {"static_ub_uw_per_kib", "static power of the unified buffer in uW per KiB",
       &ArchConfig::static_ub_uw_per_kib, 0, kMaxStaticUw, false},
      {"static_acc_uw_per_kib", "static power of the accumulators in uW per KiB",
       &ArchConfig::static_acc_uw_per_kib, 0, kMaxStaticUw, false},
      {"static_fifo_uw_per_kib", "static power of the weight FIFO in uW per KiB",
       &ArchConfig::static_fifo_uw_per_kib, 0, kMaxStaticUw, false},
      {"static_act_uw_per_lane", "static power of the activation unit in uW per lane",
       &ArchConfig::static_act_uw_per_lane, 0, kMaxStaticUw, false},
      {"static_fixed_mw", "static power of the controller, host and weight-memory interfaces and clock in mW",
       &ArchConfig::static_fixed_mw, 0, kMaxStaticUw, false},
  };
  return kParams;
}

std::vector<std::string_view> preset_names() {
  std::vector<std::string_view> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

ArchConfig preset_config(std::string_view name) {
  for (const Preset& p : presets())
    if (p.name == name) return p.cfg;
  throw ConfigError(fmt::format("unknown preset '{}' (known: {})", shown(name),
                                fmt::join(preset_names(), ", ")));
}

void validate(const ArchConfig& cfg) {
  for (const ArchParam& p : arch_params()) {
    const std::uint64_t v = cfg.*p.member;
    if (v < p.min || v > p.max)
      throw ConfigError(fmt::format("{} = {} is out of range [{}, {}]", p.name, v, p.min, p.max));
  }
}

void apply_json_overrides(ArchConfig& cfg, std::string_view json_text, std::string_view origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e999
    throw ConfigError(fmt::format("{}: invalid JSON: {}", origin, e.what()));
  }
  if (!j.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object", origin));
  // A preset named in the file replaces the base before the other fields apply.
  if (const auto it = j.find("preset"); it != j.end()) {
    if (!it->is_string()) throw ConfigError(fmt::format("{}: 'preset' must be a string", origin));
    try {
      cfg = preset_config(it->get<std::string>());
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", origin, e.what()));
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "preset") continue;
    const ArchParam* param = nullptr;
    for (const ArchParam& p : arch_params())
      if (p.name == key) param = &p;
    if (param == nullptr)
      throw ConfigError(fmt::format("{}: unknown field '{}'", origin, shown(key)));
    if (!value.is_number_unsigned())
      throw ConfigError(fmt::format("{}: '{}' must be a non-negative integer", origin, key));
    cfg.*param->member = value.get<std::uint64_t>();
  }
  try {
    validate(cfg);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", origin, e.what()));
  }
}

ArchConfig resolve_config(std::string_view preset, const std::optional<std::string>& config_path,
                          std::optional<std::uint64_t> array_n) {
  ArchConfig cfg = preset_config(preset);
  if (config_path) apply_json_overrides(cfg, read_file_text(*config_path), *config_path);
  if (array_n) cfg.array_n = *array_n;
  validate(cfg);
  return cfg;
}

}  // namespace tpu
