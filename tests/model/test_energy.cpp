// The energy model (docs/energy.md) on programs whose events are counted by
// hand here from the instruction semantics (docs/isa.md) and the rules of
// docs/energy.md, "Events"; the energies are recomputed in the test from
// those counts and the configuration's coefficients, not by the model's code.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "model/energy.h"
#include "model/tpu.h"
#include "model_test_support.h"

namespace {

using namespace tpu;
using model::EnergyEvents;

// small4 with every coefficient a different value, so that an event charged
// at another event's price shows.
ArchConfig coefficients_config() {
  ArchConfig cfg = preset_config("small4");
  std::uint64_t v = 101;
  for (const ArchParam& p : arch_params())
    if (p.name.rfind("energy_", 0) == 0 || p.name.rfind("static_", 0) == 0) cfg.*p.member = v += 37;
  return cfg;
}

void check_events(const EnergyEvents& got, const EnergyEvents& want) {
  for (const model::EnergyEventField& f : model::kEnergyEventFields) {
    INFO(f.name);
    CHECK(got.*f.member == want.*f.member);
  }
}

// The energy of `e` over `cycles`, written out event by event (fJ and uW).
double expected_joules(const ArchConfig& c, const EnergyEvents& e, std::uint64_t cycles) {
  const double n = static_cast<double>(c.array_n);
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  const double fj = d(e.active_pe_macs) * d(c.energy_mac_fj) + d(e.idle_pe_macs) * d(c.energy_idle_pe_fj) +
                    d(e.ub_row_reads) * n * d(c.energy_ub_read_byte_fj) +
                    d(e.ub_row_writes) * n * d(c.energy_ub_write_byte_fj) +
                    d(e.acc_row_reads) * n * d(c.energy_acc_read_word_fj) +
                    d(e.acc_row_writes) * n * d(c.energy_acc_write_word_fj) +
                    d(e.acc_row_rmws) * n * d(c.energy_acc_rmw_word_fj) +
                    d(e.fifo_tile_writes) * n * n * d(c.energy_fifo_write_byte_fj) +
                    d(e.fifo_tile_shifts) * n * n * d(c.energy_fifo_shift_byte_fj) +
                    d(e.act_lane_ops) * d(c.energy_act_lane_fj) +
                    d(e.weight_mem_bytes) * d(c.energy_weight_mem_byte_fj) +
                    d(e.host_bytes) * d(c.energy_host_byte_fj) + d(e.instructions) * d(c.energy_instruction_fj);
  // Static: PEs, UB KiB (N bytes a row), ACC KiB (4N bytes a row), FIFO KiB
  // (N*N bytes a tile), lanes, and the fixed part in mW.
  const double uw = n * n * d(c.static_pe_uw) + d(c.ub_rows) * n / 1024 * d(c.static_ub_uw_per_kib) +
                    d(c.acc_rows) * 4 * n / 1024 * d(c.static_acc_uw_per_kib) +
                    d(c.fifo_depth) * n * n / 1024 * d(c.static_fifo_uw_per_kib) +
                    n * d(c.static_act_uw_per_lane) + 1000 * d(c.static_fixed_mw);
  const double seconds = d(cycles) / (d(c.clock_mhz) * 1e6);
  return fj * 1e-15 + uw * 1e-6 * seconds;
}

}  // namespace

TEST_CASE("energy: host, weight, matrix and activation events of a dense program, counted by hand",
          "[energy]") {
  const ArchConfig cfg = coefficients_config();
  const isa::Program prog = testing::assemble_for(cfg, R"(
        RHM    0, 0, 8
        RW     0
        MMC.SO 0, 0, 8
        ACT.R  0, 8, 8
        WHM    8, 8, 8
        WHM.A  0, 16, 2
        HLT
  )");
  model::Memories mem(cfg);
  // Tile 0: rows 0..2, columns 0..1 nonzero, so 3 x 2 = 6 of the 16 lanes are useful.
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j) mem.weights.row(0)[k * 4 + j] = 1;
  const model::RunLog log = testing::run_to_halt(cfg, prog, mem);

  EnergyEvents want;
  want.active_pe_macs = 8 * 6;           // 8 rows through 6 useful lanes
  want.idle_pe_macs = 8 * 16 - 8 * 6;    // the other 10 lanes of each row
  want.ub_row_reads = 8 + 8;             // MMC's inputs, WHM's rows
  want.ub_row_writes = 8 + 8;            // RHM's rows, ACT's outputs
  want.acc_row_reads = 8 + 2;            // ACT, WHM.A
  want.acc_row_writes = 8;               // MMC.O overwrites
  want.acc_row_rmws = 0;
  want.fifo_tile_writes = 1;             // RW
  want.fifo_tile_shifts = 1;             // MMC.S
  want.act_lane_ops = 8 * 4;             // ACT: 8 rows of N = 4 lanes
  want.weight_mem_bytes = 4 * 4;         // one tile
  want.host_bytes = 8 * 4 + 8 * 4 + 2 * 16;  // RHM, WHM, WHM.A (4N bytes a row)
  want.instructions = 7;
  check_events(log.stats.events, want);

  const model::Energy e = model::energy_of(cfg, log.stats.events, log.stats.cycles);
  CHECK(e.total_j == Approx(expected_joules(cfg, want, log.stats.cycles)).epsilon(1e-12));
  CHECK(e.static_j + e.dynamic_j == Approx(e.total_j).epsilon(1e-12));
  double units = 0, kinds = e.static_j;
  for (double j : e.unit_j) units += j;
  for (double j : e.event_j) kinds += j;
  CHECK(units == Approx(e.total_j).epsilon(1e-12));
  CHECK(kinds == Approx(e.total_j).epsilon(1e-12));
  // The matrix unit: the MACs at their prices and its PEs' static power.
  const double seconds = static_cast<double>(log.stats.cycles) / (cfg.clock_mhz * 1e6);
  CHECK(e.unit_j[static_cast<unsigned>(model::EnergyUnit::MatrixUnit)] ==
        Approx(48e-15 * cfg.energy_mac_fj + 80e-15 * cfg.energy_idle_pe_fj +
               16 * 1e-6 * cfg.static_pe_uw * seconds).epsilon(1e-12));
  CHECK(e.avg_power_w == Approx(e.total_j / seconds).epsilon(1e-12));

}

TEST_CASE("energy: padding rows of MMC.C and window positions outside the map read no UB row",
          "[energy]") {
  const ArchConfig cfg = coefficients_config();
  const isa::Program prog = testing::assemble_for(cfg, R"(
        RHM    0, 0, 4        # a 2 x 2 map, one row per pixel
        RW     0
        CMAP   2, 2, 2
        CSTR   1, 1, 0
        CTAP   -1, 0          # output (oy, ox) reads input (oy - 1, ox): the first output row is padding
        MMC.SC 0, 0, 4
        CTAP   0, 0
        CWIN   2, 2
        POOL   0, 8, 4
        VEC    0, 12, 4
        HLT
  )");
  model::Memories mem(cfg);
  std::fill_n(mem.weights.row(0), 16, std::int8_t{1});
  const model::RunLog log = testing::run_to_halt(cfg, prog, mem);

  EnergyEvents want;
  want.active_pe_macs = 4 * 16;  // every lane of the all-ones tile
  want.idle_pe_macs = 0;
  // MMC.C: outputs (1, 0) and (1, 1) read input rows; (0, 0) and (0, 1) are padding.
  // POOL 2x2 at stride 1 from (0, 0): output (0, 0) has 4 positions in the map,
  // (0, 1) and (1, 0) have 2, (1, 1) has 1. VEC reads A and B: 2 rows a row.
  want.ub_row_reads = 2 + (4 + 2 + 2 + 1) + 2 * 4;
  want.ub_row_writes = 4 + 4 + 4;  // RHM, POOL, VEC
  want.acc_row_rmws = 4;           // MMC without .O
  want.fifo_tile_writes = 1;
  want.fifo_tile_shifts = 1;
  want.act_lane_ops = 4 * 4 * 4 + 4 * 4;  // POOL: 4 outputs x 4 positions x N; VEC: 4 rows x N
  want.weight_mem_bytes = 16;
  want.host_bytes = 4 * 4;
  want.instructions = 11;
  check_events(log.stats.events, want);
  CHECK(model::energy_of(cfg, log.stats.events, log.stats.cycles).total_j ==
        Approx(expected_joules(cfg, want, log.stats.cycles)).epsilon(1e-12));
}

TEST_CASE("energy: an idle machine draws the static power, which scales with the sizes", "[energy]") {
  const ArchConfig tpuv1 = preset_config("tpuv1");
  // docs/energy.md: the tpuv1 preset's static power is the paper's measured idle die power, 28 W.
  double idle = 0;
  for (double w : model::static_power_w(tpuv1)) idle += w;
  CHECK(idle == Approx(28.0).epsilon(0.01));
  // No events: the energy is the static power over the cycles.
  const model::Energy e = model::energy_of(tpuv1, EnergyEvents{}, 700'000'000);  // one second
  CHECK(e.dynamic_j == 0);
  CHECK(e.total_j == Approx(idle).epsilon(1e-12));
  CHECK(e.avg_power_w == Approx(idle).epsilon(1e-12));
  // A quarter of the array: the matrix unit's static power a sixteenth.
  ArchConfig quarter = tpuv1;
  quarter.array_n = 64;
  const auto mu = static_cast<unsigned>(model::EnergyUnit::MatrixUnit);
  CHECK(model::static_power_w(quarter)[mu] == Approx(model::static_power_w(tpuv1)[mu] / 16).epsilon(1e-12));
}

TEST_CASE("energy coefficients are configuration fields, set by a JSON override", "[energy]") {
  ArchConfig cfg = preset_config("small8");
  apply_json_overrides(cfg, R"({"energy_mac_fj": 1234, "static_fixed_mw": 5})", "test.json");
  CHECK(cfg.energy_mac_fj == 1234);
  CHECK(cfg.static_fixed_mw == 5);
  CHECK_THROWS_AS(apply_json_overrides(cfg, R"({"energy_mac_fj": 10000000000})", "test.json"), ConfigError);
}
