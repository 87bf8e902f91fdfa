// The energy model (docs/energy.md): a run's energy in joules from its event
// counts (EnergyEvents, model/perf_counters.h: count_events), its cycles and
// the configuration's coefficients (config/arch_config.h, energy_* and
// static_*), by unit and by event kind, and the average power. Plain values,
// so that every run kind (run, gemm, net, onnx, topo, sweeps, serving) reports
// the same figures from the same arithmetic.
#pragma once

#include <array>
#include <cstdint>

#include "config/arch_config.h"
#include "model/run_log.h"

namespace tpu::model {

// The units energy is charged to (statistics names: kEnergyUnitNames).
enum class EnergyUnit : std::uint8_t {
  MatrixUnit, UnifiedBuffer, Accumulators, WeightFifo, ActivationUnit, WeightMemory, HostInterface,
  Controller, Fixed
};
inline constexpr unsigned kNumEnergyUnits = 9;
static_assert(static_cast<unsigned>(EnergyUnit::Fixed) + 1 == kNumEnergyUnits);
inline constexpr std::array<const char*, kNumEnergyUnits> kEnergyUnitNames = {
    "matrix_unit", "unified_buffer", "accumulators", "weight_fifo", "activation_unit",
    "weight_memory", "host_interface", "controller", "fixed"};

struct Energy {
  // Dynamic energy of each event kind, indexed as kEnergyEventFields.
  std::array<double, kEnergyEventFields.size()> event_j{};
  std::array<double, kNumEnergyUnits> unit_j{};  // dynamic + static, by unit
  double static_j = 0;
  double dynamic_j = 0;
  double total_j = 0;
  double seconds = 0;
  double avg_power_w = 0;  // total_j / seconds (0 for no cycles)
};

// The static power of each unit in watts at the configuration's sizes; the
// idle die's power is their sum.
std::array<double, kNumEnergyUnits> static_power_w(const ArchConfig& cfg);

// The energy of `events` over `cycles` at the configured clock.
Energy energy_of(const ArchConfig& cfg, const EnergyEvents& events, std::uint64_t cycles);

}  // namespace tpu::model
