// The energy model's arithmetic (energy.h; docs/energy.md, "Energy").
#include "model/energy.h"

namespace tpu::model {
namespace {

// What one event of each kind costs in joules, and the unit it is charged to,
// in the order of kEnergyEventFields.
struct EventCost {
  double joules;
  EnergyUnit unit;
};

std::array<EventCost, kEnergyEventFields.size()> event_costs(const ArchConfig& cfg) {
  const double n = static_cast<double>(cfg.array_n);
  const auto fj = [](std::uint64_t v) { return static_cast<double>(v) * 1e-15; };
  return {{
      {fj(cfg.energy_mac_fj), EnergyUnit::MatrixUnit},                     // active_pe_macs
      {fj(cfg.energy_idle_pe_fj), EnergyUnit::MatrixUnit},                 // idle_pe_macs
      {n * fj(cfg.energy_ub_read_byte_fj), EnergyUnit::UnifiedBuffer},     // ub_row_reads
      {n * fj(cfg.energy_ub_write_byte_fj), EnergyUnit::UnifiedBuffer},    // ub_row_writes
      {n * fj(cfg.energy_acc_read_word_fj), EnergyUnit::Accumulators},     // acc_row_reads
      {n * fj(cfg.energy_acc_write_word_fj), EnergyUnit::Accumulators},    // acc_row_writes
      {n * fj(cfg.energy_acc_rmw_word_fj), EnergyUnit::Accumulators},      // acc_row_rmws
      {n * n * fj(cfg.energy_fifo_write_byte_fj), EnergyUnit::WeightFifo}, // fifo_tile_writes
      {n * n * fj(cfg.energy_fifo_shift_byte_fj), EnergyUnit::WeightFifo}, // fifo_tile_shifts
      {fj(cfg.energy_act_lane_fj), EnergyUnit::ActivationUnit},            // act_lane_ops
      {fj(cfg.energy_weight_mem_byte_fj), EnergyUnit::WeightMemory},       // weight_mem_bytes
      {fj(cfg.energy_host_byte_fj), EnergyUnit::HostInterface},            // host_bytes
      {fj(cfg.energy_instruction_fj), EnergyUnit::Controller},             // instructions
  }};
}

}  // namespace

std::array<double, kNumEnergyUnits> static_power_w(const ArchConfig& cfg) {
  const double n = static_cast<double>(cfg.array_n);
  const auto uw = [](std::uint64_t v) { return static_cast<double>(v) * 1e-6; };
  const double kib = 1.0 / 1024.0;
  std::array<double, kNumEnergyUnits> p{};
  p[static_cast<unsigned>(EnergyUnit::MatrixUnit)] = n * n * uw(cfg.static_pe_uw);
  p[static_cast<unsigned>(EnergyUnit::UnifiedBuffer)] =
      static_cast<double>(cfg.ub_rows) * n * kib * uw(cfg.static_ub_uw_per_kib);
  p[static_cast<unsigned>(EnergyUnit::Accumulators)] =
      static_cast<double>(cfg.acc_rows) * n * 4 * kib * uw(cfg.static_acc_uw_per_kib);
  p[static_cast<unsigned>(EnergyUnit::WeightFifo)] =
      static_cast<double>(cfg.fifo_depth) * n * n * kib * uw(cfg.static_fifo_uw_per_kib);
  p[static_cast<unsigned>(EnergyUnit::ActivationUnit)] = n * uw(cfg.static_act_uw_per_lane);
  p[static_cast<unsigned>(EnergyUnit::Fixed)] = static_cast<double>(cfg.static_fixed_mw) * 1e-3;
  return p;
}

Energy energy_of(const ArchConfig& cfg, const EnergyEvents& events, std::uint64_t cycles) {
  Energy e;
  e.seconds = static_cast<double>(cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
  const auto costs = event_costs(cfg);
  for (std::size_t k = 0; k < kEnergyEventFields.size(); ++k) {
    const double j = static_cast<double>(events.*kEnergyEventFields[k].member) * costs[k].joules;
    e.event_j[k] = j;
    e.unit_j[static_cast<unsigned>(costs[k].unit)] += j;
    e.dynamic_j += j;
  }
  const auto power = static_power_w(cfg);
  for (unsigned u = 0; u < kNumEnergyUnits; ++u) {
    e.unit_j[u] += power[u] * e.seconds;
    e.static_j += power[u] * e.seconds;
  }
  e.total_j = e.static_j + e.dynamic_j;
  e.avg_power_w = e.seconds > 0 ? e.total_j / e.seconds : 0.0;
  return e;
}

}  // namespace tpu::model
