// The SystemC model against independent references: Eigen's int32 matrix
// product for MMC, the closed-form requantization of isa.md for ACT, and the
// closed-form cycle counts of docs/microarchitecture.md.
#include <Eigen/Core>
#include <catch2/catch.hpp>

#include <random>

#include "asm/assembler.h"
#include "model/timing.h"
#include "model/tpu.h"

namespace {

using namespace tpu;
using MatI32 = Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

ArchConfig config(unsigned n) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 4096;
  c.weight_tiles = 64;
  c.ub_rows = 1024;
  c.acc_rows = 512;
  return c;
}

isa::Program assemble(const std::string& src, unsigned n) {
  assembler::Options o;
  o.array_n = n;
  const assembler::Result r = assembler::assemble(src, o);
  REQUIRE(r.diagnostics.empty());
  return *r.program;
}

// Fills host rows [row, row + rows) and returns them as a matrix.
MatI32 random_rows(model::RowMemory<std::int8_t>& mem, std::uint64_t row, std::uint64_t rows,
                   std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-128, 127);
  MatI32 m(rows, mem.width());
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t j = 0; j < mem.width(); ++j)
      m(r, j) = mem.row(row + r)[j] = static_cast<std::int8_t>(d(rng));
  return m;
}

MatI32 tile_matrix(const model::Memories& mem, std::uint64_t tile, unsigned n) {
  MatI32 w(n, n);
  for (unsigned k = 0; k < n; ++k)
    for (unsigned j = 0; j < n; ++j) w(k, j) = mem.weights.row(tile)[k * n + j];
  return w;
}

// Host rows written by WHM.A, decoded as int32 little-endian.
MatI32 read_acc_rows(const model::Memories& mem, std::uint64_t host_row, std::uint64_t rows,
                     unsigned n) {
  MatI32 m(rows, n);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(mem.host.row(host_row + 4 * r));
    for (unsigned j = 0; j < n; ++j) {
      std::uint32_t v = 0;
      for (unsigned b = 0; b < 4; ++b) v |= std::uint32_t{bytes[4 * j + b]} << (8 * b);
      m(r, j) = static_cast<std::int32_t>(v);
    }
  }
  return m;
}

}  // namespace

TEST_CASE("MMC over several tiles accumulates X_t . W_t like Eigen", "[model]") {
  for (unsigned n : {4u, 8u, 16u}) {
    CAPTURE(n);
    const ArchConfig cfg = config(n);
    model::Memories mem(cfg);
    std::mt19937 rng(n);
    const unsigned rows = 5;
    MatI32 expect = MatI32::Zero(rows, n);
    for (unsigned t = 0; t < 3; ++t) {
      const MatI32 x = random_rows(mem.host, t * rows, rows, rng);
      random_rows(mem.weights, t, 1, rng);  // fills tile t
      expect += x * tile_matrix(mem, t, n);
    }
    const isa::Program prog = assemble(
        "RHM 0, 0, 15\nRW 0\nRW 1\nRW 2\nMMC.SO 0, 0, 5\nMMC.S 5, 0, 5\nMMC.S 10, 0, 5\n"
        "WHM.A 0, 100, 5\nHLT\n",
        n);
    const model::RunLog log = model::run_program(cfg, prog, mem);
    REQUIRE_FALSE(log.fault);
    REQUIRE(log.halted);
    CHECK(read_acc_rows(mem, 100, rows, n) == expect);
    for (const auto& r : log.retired) CHECK(r.completed);
  }
}

TEST_CASE("RW, MMC.S, HLT takes D_w + B + 3N + 3 cycles on an idle machine", "[model][timing]") {
  for (unsigned n : {4u, 8u}) {
    for (unsigned b : {1u, 7u, 20u}) {
      CAPTURE(n, b);
      const ArchConfig cfg = config(n);
      model::Memories mem(cfg);
      const isa::Program prog = assemble("RW 0\nMMC.S 0, 0, " + std::to_string(b) + "\nHLT\n", n);
      const model::RunLog log = model::run_program(cfg, prog, mem);
      REQUIRE(log.halted);
      const std::uint64_t dw = cfg.weight_latency + (n * n + cfg.weight_bytes_per_cycle - 1) /
                                                        cfg.weight_bytes_per_cycle;
      CHECK(log.stats.cycles == dw + b + 3 * n + 3);
      REQUIRE(log.retired.size() == 3);
      CHECK(log.retired[0].completion == dw);
      // The MMC.S issues at once and waits in the matrix unit until the
      // tile, loaded at the start of D_w + 1 + N, has been loaded a cycle.
      CHECK(log.retired[1].issue == 1);
      CHECK(log.retired[1].start == dw + 2 + n);
      CHECK(log.retired[1].completion == dw + 1 + n + b + 2 * n);
    }
  }
}
