// The RTL core against the SystemC model, cycle for cycle: every retire
// record, the statistics and the final memories must be equal
// (rtl::compare). Random programs run through tpu-cosim (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "asm/assembler.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "model/timing.h"
#include "rtl_engine/rtl_engine.h"
#include "support/tier.h"

namespace {

using namespace tpu;

// Runs on both engines from the same memories; fails on the first divergence.
void check_both(const ArchConfig& cfg, const isa::Program& prog, const model::Memories& init) {
  model::Memories a = init, b = init;
  const model::RunLog la = model::run_program(cfg, prog, a);
  const model::RunLog lb = rtl::run_program(cfg, prog, b);
  REQUIRE(la.halted);
  const auto d = rtl::compare(prog, la, a, lb, b);
  if (d) FAIL(d->message());
  CHECK(lb.halted);
  CHECK(la.stats.cycles == lb.stats.cycles);
  // The energy model's events (docs/energy.md, "Events"): the same on both engines.
  CHECK(la.stats.events == lb.stats.events);
}

// An instruction from its fields.
isa::Instruction make(isa::Opcode op, std::uint8_t flags = 0, std::int64_t a = 0, std::int64_t b = 0,
                      std::int64_t c = 0, std::int64_t d = 0) {
  isa::Instruction in;
  in.opcode = op;
  in.flags = flags;
  in.operands = {a, b, c, d};
  return in;
}

// The GELU constants and requantization of one test program.
struct GeluRegs {
  std::int32_t k0, k1, k2;
  std::uint32_t sh;
  std::int32_t m;
  std::uint32_t s;
  std::int8_t z;
};

// GELU of one int8 value as docs/quantization.md ("Integer softmax,
// LayerNorm and GELU") writes it, in 128-bit integers, and the requantization
// q of its section 1: the reference the two engines are checked against.
std::int8_t gelu_reference(std::int8_t x, const GeluRegs& g) {
  using I = __int128;
  const auto sat = [](I v, int bits) {
    const I hi = (I{1} << (bits - 1)) - 1;
    return v > hi ? hi : v < -hi - 1 ? -hi - 1 : v;
  };
  const I qx = sat((I{x} - g.k2) * (I{1} << g.sh), 32);
  const I k = g.k0 > 0 ? I{g.k0} : I{0};
  const I u = (qx < 0 ? -qx : qx) < k ? (qx < 0 ? -qx : qx) - k : I{0};
  const I e = (qx > 0 ? 1 : qx < 0 ? -1 : 0) * (g.k1 - u * u);
  const I v = qx * sat(g.k1 + e, 32);
  const I r = g.s > 0 ? I{1} << (g.s - 1) : I{0};
  const I p = v * g.m + r;
  // Floor division by 2^S (p may be negative).
  const I d = I{1} << g.s;
  const I scaled = p >= 0 ? p / d : -((-p + d - 1) / d);
  return static_cast<std::int8_t>(sat(scaled + g.z, 8));
}

// The N x N tile that HWT (or RWU) makes of `rows` rows of N bytes: row r is
// tile row r, or with .T lane r of every tile row; zeros past the rows.
std::vector<std::int8_t> tile_of(const std::int8_t* rows_at, model::Cycle rows, model::Cycle n, bool transpose) {
  std::vector<std::int8_t> w(n * n, 0);
  for (model::Cycle r = 0; r < rows; ++r)
    for (model::Cycle j = 0; j < n; ++j) (transpose ? w[j * n + r] : w[r * n + j]) = rows_at[r * n + j];
  return w;
}

}  // namespace

TEST_CASE("every example program runs identically on the RTL", "[rtl]") {
  namespace fs = std::filesystem;
  const fs::path programs = fs::path(TPU_SOURCE_DIR) / "programs";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(programs / "data")) {
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    const std::string src = read_file_text((programs / (name + ".s")).string());
    assembler::Options o;
    o.default_array_n = 8;
    const assembler::Result r = assembler::assemble(src, o);
    REQUIRE(r.diagnostics.empty());
    const ArchConfig cfg = preset_config("small" + std::to_string(r.program->array_n));
    model::Memories mem(cfg);
    const NpyArray host = read_npy((entry.path() / "host.npy").string());
    const NpyArray weights = read_npy((entry.path() / "weights.npy").string());
    std::copy(host.data.begin(), host.data.end(), reinterpret_cast<std::uint8_t*>(mem.host.row(0)));
    std::copy(weights.data.begin(), weights.data.end(),
              reinterpret_cast<std::uint8_t*>(mem.weights.row(0)));
    check_both(cfg, *r.program, mem);
    ++count;
  }
  CHECK(count >= 4);
}

TEST_CASE("GEMMs run identically on the RTL", "[rtl][gemm]") {
  struct Shape {
    std::size_t m, k, n;
  };
  for (unsigned n : {4u, 8u, 16u}) {
    const ArchConfig cfg = preset_config("small" + std::to_string(n));
    std::mt19937 rng(n);
    std::size_t shape_index = 0;
    for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 5}, Shape{n - 1, n + 1, n},
                          Shape{n + 1, n - 1, n + 1}, Shape{40, 3 * n + 1, 2 * n}}) {
      CAPTURE(n, s.m, s.k, s.n);
      std::uniform_int_distribution<int> d(-128, 127);
      compiler::MatrixI8 a{s.m, s.k, std::vector<std::int8_t>(s.m * s.k)};
      compiler::MatrixI8 b{s.k, s.n, std::vector<std::int8_t>(s.k * s.n)};
      for (auto& v : a.data) v = static_cast<std::int8_t>(d(rng));
      for (auto& v : b.data) v = static_cast<std::int8_t>(d(rng));
      const compiler::GemmSpec specs[] = {
          compiler::GemmSpec{}, compiler::GemmSpec{model::Requant{77, 14, -5}, model::ActFunction::Relu},
          compiler::GemmSpec{model::Requant{-93, 12, 3}, model::ActFunction::Tanh}};
      for (std::size_t i = 0; i < std::size(specs); ++i) {
        // The sanitizer build's default tier takes one output kind per
        // shape, in turn (each shape and each kind still runs).
        if (test::reduced_tier() && i != (shape_index + n) % std::size(specs)) continue;
        const compiler::GemmPlan plan = compiler::compile_gemm(a, b, specs[i], cfg);
        model::Memories mem(cfg);
        std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
        std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
        check_both(cfg, plan.program, mem);
      }
      ++shape_index;
    }
  }
}

// At N = 64 and 128 with the tpuv1 latencies and sizes (the "tpuv1/128"
// build, in every tier, and "tpuv1/64", in the full tier's build: a build
// without it runs N = 128 only): the array's loops run past Verilator's
// unrolling there, the DMA latencies are long, unlike in the small presets,
// and from N = 128 the builds are made without Verilator's DFG pass. The
// shapes: one tile, ragged edges in every dimension, several tiles of M and
// N (bench/rtl_lockstep.sh runs the same at N = 256).
TEST_CASE("GEMMs run identically on the RTL at N = 64 and 128", "[rtl][gemm]") {
  const std::size_t n = GENERATE(64, 128);
  ArchConfig cfg = preset_config("tpuv1");
  cfg.array_n = n;
  CAPTURE(n);
  if (n == 64 && !rtl::available(cfg)) {
    WARN("no tpuv1/64 RTL build (the full tier's): N = 64 not run");
    return;
  }
  REQUIRE(rtl::available(cfg));
  std::mt19937 rng(static_cast<unsigned>(n));
  std::uniform_int_distribution<int> d(-128, 127);
  struct Shape {
    std::size_t m, k, n;
  };
  std::vector<Shape> shapes{{n, n, n}, {3, 2 * n + 1, n + 1}, {2 * n + 22, n + 6, 2 * n}};
  // Instrumented, each takes the sanitizer build a good while.
  if (test::reduced_tier()) shapes.resize(1);
  for (const Shape s : shapes) {
    CAPTURE(s.m, s.k, s.n);
    compiler::MatrixI8 a{s.m, s.k, std::vector<std::int8_t>(s.m * s.k)};
    compiler::MatrixI8 b{s.k, s.n, std::vector<std::int8_t>(s.k * s.n)};
    for (auto& v : a.data) v = static_cast<std::int8_t>(d(rng));
    for (auto& v : b.data) v = static_cast<std::int8_t>(d(rng));
    for (const compiler::GemmSpec& spec :
         {compiler::GemmSpec{}, compiler::GemmSpec{model::Requant{101, 15, 2}, model::ActFunction::Sigmoid}}) {
      const compiler::GemmPlan plan = compiler::compile_gemm(a, b, spec, cfg);
      model::Memories mem(cfg);
      std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
      std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
      check_both(cfg, plan.program, mem);
    }
  }
}

// VEC on the RTL: every operation and function, with and without broadcast,
// in place and after an ACT it waits for (docs/isa.md, VEC).
TEST_CASE("VEC runs identically on the RTL", "[rtl][vec]") {
  using isa::Opcode;
  const ArchConfig cfg = preset_config("small4");
  std::mt19937 rng(20261205);
  std::uniform_int_distribution<int> byte(-128, 127), factor(-32768, 32767);
  static constexpr std::uint8_t kFunctions[] = {0, isa::kFlagActRelu, isa::kFlagActSigmoid,
                                                isa::kFlagActTanh};
  // The sanitizer build's default tier: 12 rounds, every combination of the
  // rounds' patterns below (round % 4, round % 3, round % 2) once.
  const int rounds = test::reduced_tier() ? 12 : 40;
  for (int round = 0; round < rounds; ++round) {
    CAPTURE(round);
    isa::Program prog;
    prog.array_n = 4;
    prog.code.push_back(make(Opcode::ACT, 0, 0, 32, 5));
    for (std::int64_t op = 0; op < 5; ++op) {
      const bool broadcast = (round + op) % 3 == 0;
      prog.code.push_back(make(Opcode::VSRC, broadcast ? isa::kFlagVsrcBroadcast : 0,
                               32 + op, byte(rng), byte(rng)));
      prog.code.push_back(make(Opcode::VSCL, 0, round % 4 == 0 ? 16384 : factor(rng),
                               round % 4 == 0 ? 9830 : factor(rng), op));
      prog.code.push_back(make(Opcode::SETQ, 0, byte(rng) * 1000, 8 + round % 16, byte(rng)));
      // In place over A every other time.
      prog.code.push_back(make(Opcode::VEC, kFunctions[(round + op) % 4], 4 * op,
                               round % 2 ? 4 * op : 50 + 6 * op, 6));
    }
    prog.code.push_back(make(Opcode::HLT));
    model::Memories init(cfg);
    for (std::size_t i = 0; i < 64 * init.ub.width(); ++i)
      init.ub.data()[i] = static_cast<std::int8_t>(byte(rng));
    for (std::size_t i = 0; i < 16 * init.acc.width(); ++i)
      init.acc.data()[i] = byte(rng) * 300;
    check_both(cfg, prog, init);
  }
}

// A fault while instructions are still in flight (a bounds fault at issue, or
// the cycle limit): their retire records have no completion cycle in either
// engine, and each unit was busy from their start to the fault cycle.
TEST_CASE("a fault with instructions in flight runs identically on the RTL", "[rtl]") {
  using isa::Opcode;
  const ArchConfig cfg = preset_config("small4");
  struct Case {
    const char* name;
    std::vector<isa::Instruction> code;
    model::Cycle max_cycles;
  };
  const std::vector<Case> cases = {
      // The MMC of pc 1 is in flight when the second one faults (UB rows
      // 16382..16385 of 16384).
      {"MMC in flight",
       {make(Opcode::NOP), make(Opcode::MMC, isa::kFlagMmcOverwrite, 0, 0, 4),
        make(Opcode::MMC, isa::kFlagMmcOverwrite, 16382, 0, 4), make(Opcode::HLT)},
       100'000},
      // A POOL.A (37 cycles), an RW and an RHM in flight at the fault.
      {"POOL, RW and RHM in flight",
       {make(Opcode::CWIN, 0, 3, 3), make(Opcode::CMAP, 0, 4, 4, 2),
        make(Opcode::POOL, isa::kFlagPoolAverage, 0, 20, 4), make(Opcode::RW, 0, 0),
        make(Opcode::RHM, 0, 0, 100, 8), make(Opcode::RHM, 0, 0, 16383, 2), make(Opcode::HLT)},
       100'000},
      // An MMC.S waiting in the array for its weights (tile 0 is usable
      // from D_w + N + 2 = 11) when the cycle limit stops the run: it never
      // started, in both engines.
      {"MMC.S waiting for weights",
       {make(Opcode::RW, 0, 0), make(Opcode::MMC, isa::kFlagMmcSwitch, 0, 0, 4), make(Opcode::HLT)},
       9},
      // A VEC in flight when a second one faults at issue (operand B at
      // UB rows 16382..16385 of 16384), an RHM beside it.
      {"VEC in flight",
       {make(Opcode::VSRC, 0, 40, 3, -2), make(Opcode::VSCL, 0, 300, -7, 0),
        make(Opcode::VEC, isa::kFlagActRelu, 0, 20, 6), make(Opcode::RHM, 0, 0, 100, 8),
        make(Opcode::VSRC, 0, 16382, 0, 0), make(Opcode::VEC, 0, 0, 60, 4), make(Opcode::HLT)},
       100'000},
      // A GELU in flight (rows + A + 6 cycles) when a second one faults at
      // issue (UB rows 16382..16385 of 16384), an RHM beside it.
      {"GELU in flight",
       {make(Opcode::NGEO, 0, 1, 0, 7), make(Opcode::NCON, 0, 3000, 200000000, -2),
        make(Opcode::SETQ, 0, 1 << 20, 50, 3), make(Opcode::GELU, 0, 0, 20, 6),
        make(Opcode::RHM, 0, 0, 100, 8), make(Opcode::GELU, 0, 16382, 60, 4), make(Opcode::HLT)},
       100'000},
      // An ACT and a POOL waiting for it; the cycle limit stops the run.
      {"cycle limit",
       {make(Opcode::ACT, 0, 0, 0, 6), make(Opcode::CWIN, 0, 2, 2),
        make(Opcode::POOL, 0, 0, 30, 5), make(Opcode::HLT)},
       12},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    isa::Program prog;
    prog.array_n = 4;
    prog.code = c.code;
    model::Memories init(cfg);
    for (std::size_t i = 0; i < 64 * init.ub.width(); ++i)
      init.ub.data()[i] = static_cast<std::int8_t>(i * 37 + 11);
    model::RunOptions opts;
    opts.max_cycles = c.max_cycles;
    model::Memories a = init, b = init;
    const model::RunLog la = model::run_program(cfg, prog, a, opts);
    const model::RunLog lb = rtl::run_program(cfg, prog, b, opts);
    REQUIRE(la.fault);
    REQUIRE(lb.fault);
    CHECK(std::any_of(la.retired.begin(), la.retired.end(),
                      [](const model::RetireRecord& r) { return !r.completed; }));
    if (std::string(c.name) == "MMC.S waiting for weights") CHECK(lb.retired.at(1).start == model::kNever);
    const auto d = rtl::compare(prog, la, a, lb, b);
    if (d) FAIL(d->message());
    for (const auto& [unit, stats] : la.stats.units) {
      CAPTURE(unit);
      CHECK(stats.busy_cycles == lb.stats.units.at(unit).busy_cycles);
    }
  }
}

// An MMC.S waits in the array for its weights while the controller issues
// other units' instructions (docs/microarchitecture.md, "Weight buffers"):
// an RHM and an ACT issue and complete during the wait, the next MMC waits
// for the array (unit busy), and a second switch waits for a tile streaming
// behind the first.
TEST_CASE("an MMC.S waiting for its weights lets other units' instructions issue on both engines",
          "[rtl]") {
  const ArchConfig cfg = preset_config("small4");
  assembler::Options o;
  o.array_n = 4;
  const assembler::Result asm_result = assembler::assemble(
      "RW 0\nMMC.S 0, 0, 4\nRHM 0, 20, 3\nACT 100, 40, 2\nMMC 4, 8, 4\nWHM 20, 50, 3\n"
      "RW 1\nMMC.S 8, 16, 2\nHLT\n",
      o);
  REQUIRE(asm_result.diagnostics.empty());
  const isa::Program& prog = *asm_result.program;
  model::Memories init(cfg);
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> d(-128, 127);
  for (std::size_t i = 0; i < 2 * init.weights.width(); ++i)
    init.weights.data()[i] = static_cast<std::int8_t>(d(rng));
  for (std::size_t i = 0; i < 16 * init.ub.width(); ++i) init.ub.data()[i] = static_cast<std::int8_t>(d(rng));
  for (std::size_t i = 0; i < 4 * init.host.width(); ++i) init.host.data()[i] = static_cast<std::int8_t>(d(rng));
  check_both(cfg, prog, init);
  model::Memories mem = init;
  const model::RunLog log = model::run_program(cfg, prog, mem);
  const auto& r = log.retired;
  REQUIRE(r.size() == 9);
  CHECK(r[1].issue == 1);
  CHECK(r[1].start > r[1].issue + 1);  // it waited
  // The RHM and the ACT issued and completed while it waited.
  CHECK(r[2].issue < r[1].start);
  CHECK(r[3].issue < r[1].start);
  CHECK(r[3].completion < r[1].start);
  // The MMC after it issued when it read its last row.
  CHECK(r[4].issue == r[1].start + 3);
  // The second switch waited for tile 1 too.
  CHECK(r[7].start > r[7].issue + 1);
}

// Tracing is compiled into the builds of N <= TPU_RTL_TRACE_MAX_N only (the
// traced C++ grows with N^2); tpu-sim refuses --vcd with the RTL above.
TEST_CASE("the RTL builds up to TPU_RTL_TRACE_MAX_N have waveforms", "[rtl]") {
  for (const auto& [preset, n] : {std::pair{"small4", 4}, std::pair{"small16", 16}, std::pair{"tpuv1", 128}}) {
    ArchConfig cfg = preset_config(preset);
    cfg.array_n = static_cast<std::uint64_t>(n);
    CAPTURE(preset, n);
    REQUIRE(rtl::available(cfg));
    CHECK(rtl::has_waveforms(cfg) == (n <= TPU_RTL_TRACED_MAX_N));
  }
}

TEST_CASE("a configuration without an RTL build is refused clearly", "[rtl]") {
  ArchConfig cfg = preset_config("small8");
  cfg.act_latency = 7;
  CHECK_FALSE(rtl::available(cfg));
  model::Memories mem(cfg);
  isa::Program prog;
  prog.array_n = 8;
  CHECK_THROWS_WITH(rtl::run_program(cfg, prog, mem), Catch::Contains("no RTL build"));
}

// The memory channels' timing is an input of the RTL core, not part of a
// build: one build runs any latency and any bandwidth its memory ports take
// (two host rows a cycle and up to a tile's N weight rows at small4, whose
// own Bh = N and Bw = 4N), each transfer landing as the closed forms of
// docs/microarchitecture.md say; a wider bandwidth is refused.
TEST_CASE("the RTL takes the memory timing at run time, up to its ports' widths", "[rtl]") {
  using isa::Opcode;
  ArchConfig cfg = preset_config("small4");
  const auto ports = rtl::port_widths(cfg);
  REQUIRE(ports);
  CHECK(ports->host_bytes_per_cycle == 8);
  CHECK(ports->weight_bytes_per_cycle == 16);

  cfg.host_latency = 3;
  cfg.host_bytes_per_cycle = 7;  // a row and three quarters a cycle
  cfg.weight_latency = 0;
  cfg.weight_bytes_per_cycle = 1000;  // more than a tile: one cycle a tile
  REQUIRE(rtl::available(cfg));
  isa::Program prog;
  prog.array_n = 4;
  prog.code = {make(Opcode::RHM, 0, 0, 0, 5),   // 20 bytes: d = s + 3 + ceil(20 / 7) - 1
               make(Opcode::RW, 0, 0, 0, 0),    // d = s + 0 + 1 - 1
               make(Opcode::RW, 0, 1, 0, 0),    // the next cycle
               make(Opcode::MMC, isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite, 0, 0, 5),
               make(Opcode::WHM, isa::kFlagWhmAcc, 0, 16, 3),  // 48 bytes: 3 + ceil(48 / 7)
               make(Opcode::WHM, 0, 0, 40, 6),  // 24 bytes: 3 + ceil(24 / 7)
               make(Opcode::HLT, 0, 0, 0, 0)};
  model::Memories init(cfg);
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> d(-128, 127);
  for (std::size_t i = 0; i < 64 * init.host.width(); ++i) init.host.data()[i] = static_cast<std::int8_t>(d(rng));
  for (std::size_t i = 0; i < 2 * init.weights.width(); ++i)
    init.weights.data()[i] = static_cast<std::int8_t>(d(rng));
  check_both(cfg, prog, init);
  model::Memories mem = init;
  const model::RunLog log = rtl::run_program(cfg, prog, mem);
  const auto& r = log.retired;
  CHECK(r.at(0).completion == r.at(0).start + 3 + 3 - 1);
  CHECK(r.at(1).completion == r.at(1).start);
  CHECK(r.at(2).completion == r.at(2).start);
  CHECK(r.at(4).completion == r.at(4).start + 3 + 7 - 1);
  CHECK(r.at(5).completion == r.at(5).start + 3 + 4 - 1);

  cfg.host_bytes_per_cycle = 9;
  CHECK_THAT(rtl::unavailable(cfg), Catch::Contains("host_bytes_per_cycle 9 > 8"));
  CHECK_THROWS_WITH(rtl::run_program(cfg, prog, mem), Catch::Contains("memory ports"));
  cfg.host_bytes_per_cycle = 4;
  cfg.array_n = 4;
  cfg.act_latency = 7;  // fixed in a build: none has it
  CHECK_THAT(rtl::unavailable(cfg), Catch::Contains("no RTL build"));
}

// The weight FIFO's memory (docs/microarchitecture.md, "RTL"): an RW that
// issues in the room a load's pop left streams its tile's rows while that
// load still reads the slot of the tile it took, so the FIFO has a slot more
// than the FIFO rule's F. small16 (Lw = 4, one row a cycle): the array is
// kept busy until the FIFO holds F complete tiles, then the pop of tile 2
// lets RW 6 issue; its row 0 is written 9 cycles before the load reads tile
// 2's row 0. The MMCs on tiles 2 and 3 show they arrived intact.
TEST_CASE("the RTL weight FIFO takes a tile streaming in while the previous one loads", "[rtl]") {
  using isa::Opcode;
  const ArchConfig cfg = preset_config("small16");
  const std::uint8_t switch_o = isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite;
  isa::Program prog;
  prog.array_n = 16;
  prog.code = {make(Opcode::RW, 0, 0), make(Opcode::RW, 0, 1), make(Opcode::RW, 0, 2),
               make(Opcode::RW, 0, 3), make(Opcode::RW, 0, 4),
               make(Opcode::MMC, switch_o, 0, 0, 1),                       // tile 0
               make(Opcode::MMC, isa::kFlagMmcOverwrite, 0, 16, 200),      // busy on tile 0
               make(Opcode::RW, 0, 5),
               make(Opcode::MMC, switch_o, 0, 256, 16),                    // tile 1; pops tile 2
               make(Opcode::RW, 0, 6),                                     // waits for that pop
               make(Opcode::MMC, switch_o, 16, 512, 16),                   // tile 2
               make(Opcode::MMC, switch_o, 32, 768, 16),                   // tile 3
               make(Opcode::HLT)};
  model::Memories init(cfg);
  std::mt19937 rng(16);
  std::uniform_int_distribution<int> d(-128, 127);
  for (std::size_t i = 0; i < 7 * init.weights.width(); ++i)
    init.weights.data()[i] = static_cast<std::int8_t>(d(rng));
  for (std::size_t i = 0; i < 256 * init.ub.width(); ++i)
    init.ub.data()[i] = static_cast<std::int8_t>(d(rng));
  check_both(cfg, prog, init);

  // RW 6's first row (the first cycle of its stream: Bw = N) lands before
  // the load of tile 2 reads that slot's row 0, at L + N - 1, two cycles
  // before tile 2's MMC.S starts (the shadow is loaded at L + N, and the
  // array sees it a cycle later).
  model::Memories mem = init;
  const model::RunLog log = model::run_program(cfg, prog, mem);
  const model::RetireRecord& rw6 = log.retired.at(9);
  const model::RetireRecord& mmc2 = log.retired.at(10);
  const model::Cycle first_row = rw6.completion - model::weight_tile_cycles(cfg) + 1;
  CHECK(first_row + 9 == mmc2.start - 2);
}

TEST_CASE("the activation unit's pipeline runs identically on the RTL, at the closed forms",
          "[rtl][vec]") {
  // Each ACT as soon as the write order allows it (docs/microarchitecture.md,
  // "Activation unit", "Closed forms", A = act_latency = 4 at small4): after
  // an ACT of R rows at c at c + R, with another SETQ (the registers travel
  // with the rows); after a POOL of B pixels of K positions at c + B*K + 1,
  // A cycles before its completion c + B*K + A + 1; after a VEC of R rows at
  // c + R + 3, its completion c + R + A + 3. A POOL or VEC after every
  // earlier instruction of the unit has completed (d + 1).
  using isa::Opcode;
  using model::Cycle;
  const ArchConfig cfg = preset_config("small4");
  REQUIRE(rtl::available(cfg));
  const Cycle a = cfg.act_latency;
  REQUIRE(a == 4);
  isa::Program prog;
  prog.array_n = 4;
  prog.code = {make(Opcode::SETQ, 0, 3, 1, 2),                      // 0
               make(Opcode::ACT, isa::kFlagActRelu, 0, 10, 3),      // 1
               make(Opcode::SETQ, 0, -5, 2, -3),                    // 2
               make(Opcode::ACT, 0, 4, 20, 2),                      // 3
               make(Opcode::CMAP, 0, 3, 3, 2),                      // 4
               make(Opcode::CWIN, 0, 2, 2),                         // 5
               make(Opcode::POOL, isa::kFlagPoolAverage, 10, 40, 2),  // 6: K = 4
               make(Opcode::ACT, 0, 8, 50, 1),                      // 7
               make(Opcode::VSRC, 0, 20, 1, 2),                     // 8
               make(Opcode::VSCL, 0, 3, 4, 1),                      // 9
               make(Opcode::VEC, 0, 10, 60, 3),                     // 10
               make(Opcode::ACT, isa::kFlagActRelu, 9, 70, 2),      // 11
               make(Opcode::POOL, 0, 60, 80, 1),                    // 12
               make(Opcode::ACT, 0, 1, 90, 1),                      // 13
               make(Opcode::HLT)};                                  // 14
  model::Memories init(cfg);
  std::mt19937 rng(32);
  for (std::size_t i = 0; i < 128 * init.ub.width(); ++i) init.ub.data()[i] = static_cast<std::int8_t>(rng());
  for (std::size_t i = 0; i < 16 * init.acc.width(); ++i)
    init.acc.data()[i] = static_cast<std::int32_t>(rng() % 20001) - 10000;
  check_both(cfg, prog, init);
  model::Memories mem = init;
  const model::RunLog log = rtl::run_program(cfg, prog, mem);
  struct Expect {
    std::size_t pc;
    Cycle c, d;
  };
  const Cycle c1 = 1, d1 = c1 + 3 + a;            // ACT, 3 rows
  const Cycle c3 = c1 + 3, d3 = c3 + 2 + a;       // ACT at c + R
  const Cycle c6 = d3 + 1, d6 = c6 + 2 * 4 + a + 1;  // POOL.A after completion
  const Cycle c7 = c6 + 2 * 4 + 1, d7 = c7 + 1 + a;  // ACT at c + B*K + 1
  const Cycle c10 = d7 + 1, d10 = c10 + 3 + a + 3;   // VEC after completion
  const Cycle c11 = c10 + 3 + 3, d11 = c11 + 2 + a;  // ACT at c + R + 3
  const Cycle c12 = d11 + 1, d12 = c12 + 4 + a + 1;  // POOL, one pixel
  const Cycle c13 = c12 + 4 + 1, d13 = c13 + 1 + a;  // ACT at c + K + 1
  for (const Expect& e : {Expect{1, c1, d1}, Expect{3, c3, d3}, Expect{6, c6, d6}, Expect{7, c7, d7},
                          Expect{10, c10, d10}, Expect{11, c11, d11}, Expect{12, c12, d12},
                          Expect{13, c13, d13}}) {
    CAPTURE(e.pc);
    CHECK(log.retired.at(e.pc).issue == e.c);
    CHECK(log.retired.at(e.pc).completion == e.d);
  }
  CHECK(log.stats.cycles == d13 + 2);
}

// HWT (docs/isa.md; docs/microarchitecture.md, "Attention's second operand")
// on the RTL against the model, and against the documents' closed forms and
// layout worked out here: d = c + Lh + Hw + ceil(N*N/Bh); tile row r is host
// row r, with .T lane r of tile row k is lane k of host row r, zeros past the
// rows; an RW of the tile issues at d + 1 (RAW), an HWT into a tile an RW in
// flight reads at that RW's completion + 1 (WAR).
TEST_CASE("HWT runs identically on the RTL, at the closed forms", "[rtl][attention]") {
  using isa::Opcode;
  using model::Cycle;
  ArchConfig base = preset_config("small4");
  const Cycle n = base.array_n;
  struct Timing {
    Cycle lh, bh, hw, lw, bw;
  };
  for (const Timing t : {Timing{0, 1, 0, 0, 16}, Timing{3, 7, 5, 2, 3}, Timing{9, 8, 0, 5, 16}}) {
    ArchConfig cfg = base;
    cfg.host_latency = t.lh;
    cfg.host_bytes_per_cycle = t.bh;
    cfg.host_layout_cycles = t.hw;
    cfg.weight_latency = t.lw;
    cfg.weight_bytes_per_cycle = t.bw;
    CAPTURE(t.lh, t.bh, t.hw, t.lw, t.bw);
    REQUIRE(rtl::available(cfg));
    const Cycle d_hwt = t.lh + t.hw + ceil_div(n * n, t.bh);
    const Cycle d_w = t.lw + ceil_div(n * n, t.bw);
    model::Memories init(cfg);
    std::mt19937 rng(11);
    for (auto* m : {&init.host, &init.weights, &init.ub})
      for (std::size_t i = 0; i < 128 * m->width(); ++i) m->data()[i] = static_cast<std::int8_t>(rng());

    // On an idle machine, after two NOPs: every row count, both layouts (the
    // sanitizer tier: one row and a whole tile).
    for (const bool transpose : {false, true})
      for (Cycle rows = 1; rows <= n; ++rows) {
        if (test::reduced_tier() && rows != 1 && rows != n) continue;
        CAPTURE(transpose, rows);
        isa::Program prog;
        prog.array_n = static_cast<std::uint32_t>(n);
        prog.code = {make(Opcode::NOP), make(Opcode::NOP),
                     make(Opcode::HWT, transpose ? isa::kFlagHwtTranspose : 0, 9, 3, static_cast<std::int64_t>(rows)),
                     make(Opcode::HLT)};
        check_both(cfg, prog, init);
        model::Memories mem = init;
        const model::RunLog log = rtl::run_program(cfg, prog, mem);
        CHECK(log.retired.at(2).issue == 2);
        CHECK(log.retired.at(2).completion == 2 + d_hwt);
        CHECK(log.stats.cycles == 2 + d_hwt + 2);
        CHECK(std::vector<std::int8_t>(mem.weights.row(3), mem.weights.row(3) + n * n) ==
              tile_of(init.host.row(9), rows, n, transpose));
        CHECK(std::vector<std::int8_t>(mem.weights.row(4), mem.weights.row(4) + n * n) ==
              std::vector<std::int8_t>(init.weights.row(4), init.weights.row(4) + n * n));
      }

    // The host route: WHM, HWT.T (when the host DMA is free), RW (RAW on
    // the tile: at the HWT's d + 1), MMC.S.
    {
      const Cycle rows = 3;
      isa::Program prog;
      prog.array_n = static_cast<std::uint32_t>(n);
      prog.code = {make(Opcode::WHM, 0, 30, 100, 3), make(Opcode::HWT, isa::kFlagHwtTranspose, 100, 5, 3),
                   make(Opcode::RW, 0, 5), make(Opcode::MMC, isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite, 60, 0, 1),
                   make(Opcode::HLT)};
      check_both(cfg, prog, init);
      model::Memories mem = init;
      const model::RunLog log = rtl::run_program(cfg, prog, mem);
      const Cycle d1 = t.lh + ceil_div(rows * n, t.bh), d2 = d1 + d_hwt;
      CHECK(log.retired.at(1).issue == d1);
      CHECK(log.retired.at(1).completion == d2);
      CHECK(log.retired.at(2).issue == d2 + 1);
      CHECK(log.retired.at(2).completion == d2 + 1 + d_w);
      const std::vector<std::int8_t> w = tile_of(init.ub.row(30), rows, n, true);
      for (Cycle j = 0; j < n; ++j) {
        std::int32_t want = 0;
        for (Cycle k = 0; k < n; ++k) want += std::int32_t{init.ub.row(60)[k]} * std::int32_t{w[k * n + j]};
        CHECK(mem.acc.row(0)[j] == want);
      }
    }

    // WAR: the HWT into tile 2 waits for the RW of tile 2 in flight.
    {
      isa::Program prog;
      prog.array_n = static_cast<std::uint32_t>(n);
      prog.code = {make(Opcode::RW, 0, 2), make(Opcode::HWT, 0, 50, 2, static_cast<std::int64_t>(n)),
                   make(Opcode::MMC, isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite, 8, 0, 1), make(Opcode::RW, 0, 2),
                   make(Opcode::MMC, isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite, 8, 1, 1), make(Opcode::HLT)};
      check_both(cfg, prog, init);
      model::Memories mem = init;
      const model::RunLog log = rtl::run_program(cfg, prog, mem);
      CHECK(log.retired.at(1).issue == d_w + 1);
      CHECK(log.retired.at(1).completion == d_w + 1 + d_hwt);
      CHECK(log.retired.at(3).issue == d_w + 1 + d_hwt + 1);
      CHECK(log.stats.stall_cycles[static_cast<unsigned>(model::StallCause::War)] == d_w);
    }
  }

  // An HWT of more than N rows, which the assembler refuses, in a program
  // made in memory: the model faults at it; the RTL engine refuses the program.
  isa::Program prog;
  prog.array_n = static_cast<std::uint32_t>(n);
  prog.code = {make(Opcode::HWT, 0, 0, 0, static_cast<std::int64_t>(n + 1)), make(Opcode::HLT)};
  model::Memories mem(base);
  CHECK_THROWS_WITH(rtl::run_program(base, prog, mem), Catch::Contains("HWT of 5 rows is more than a weight tile's N = 4 rows"));
}

// RWU (ub_weight_path; docs/isa.md; docs/microarchitecture.md, "Attention's
// second operand") on the RTL against the model, and against the documents'
// closed forms and layout worked out here: rows read one a cycle from
// s = c + 1, d = max(s + R, d' + 1) with d' the previous push, the next
// weight-DMA instruction at c + R; tile row r is UB row r, with .T lane r of
// tile row k is lane k of UB row r, zeros past the rows; an MMC.S waiting for
// the tile starts at d + N + 2. For hazards an RWU reads its UB rows from c
// to d (a write of them issues at d + 1, an RWU of rows an RHM writes at the
// RHM's d + 1). Without ub_weight_path both engines fault at it.
TEST_CASE("RWU runs identically on the RTL, at the closed forms", "[rtl][attention]") {
  using isa::Opcode;
  using model::Cycle;
  // x (an N-lane int8 row) times the tile w (row k, lane j): lane j of the result.
  const auto times = [](const std::int8_t* x, const std::vector<std::int8_t>& w, Cycle n) {
    std::vector<std::int32_t> y(n, 0);
    for (Cycle j = 0; j < n; ++j)
      for (Cycle k = 0; k < n; ++k) y[j] += std::int32_t{x[k]} * std::int32_t{w[k * n + j]};
    return y;
  };
  const auto acc_row = [](const model::Memories& m, Cycle r, Cycle n) {
    return std::vector<std::int32_t>(m.acc.row(r), m.acc.row(r) + n);
  };
  const auto mmcs = [](std::int64_t x_row, std::int64_t acc) {
    return make(Opcode::MMC, isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite, x_row, acc, 1);
  };
  ArchConfig base = preset_config("small4");
  base.ub_weight_path = 1;
  const Cycle n = base.array_n;
  struct Timing {
    Cycle lh, bh, lw, bw;
  };
  for (const Timing t : {Timing{0, 1, 0, 16}, Timing{3, 7, 2, 3}, Timing{9, 8, 5, 16}}) {
    ArchConfig cfg = base;
    cfg.host_latency = t.lh;
    cfg.host_bytes_per_cycle = t.bh;
    cfg.weight_latency = t.lw;
    cfg.weight_bytes_per_cycle = t.bw;
    CAPTURE(t.lh, t.bh, t.lw, t.bw);
    REQUIRE(rtl::available(cfg));
    const Cycle d_w = t.lw + ceil_div(n * n, t.bw);
    const Cycle tw = ceil_div(n * n, t.bw);
    model::Memories init(cfg);
    std::mt19937 rng(12);
    for (auto* m : {&init.host, &init.weights, &init.ub})
      for (std::size_t i = 0; i < 128 * m->width(); ++i) m->data()[i] = static_cast<std::int8_t>(rng());

    // On an idle machine, after two NOPs: every row count, both layouts;
    // the MMC.S takes the tile.
    for (const bool transpose : {false, true})
      for (Cycle rows = 1; rows <= n; ++rows) {
        CAPTURE(transpose, rows);
        isa::Program prog;
        prog.array_n = static_cast<std::uint32_t>(n);
        prog.code = {make(Opcode::NOP), make(Opcode::NOP),
                     make(Opcode::RWU, transpose ? isa::kFlagRwuTranspose : 0, 9, static_cast<std::int64_t>(rows)),
                     mmcs(60, 0), make(Opcode::HLT)};
        check_both(cfg, prog, init);
        model::Memories mem = init;
        const model::RunLog log = rtl::run_program(cfg, prog, mem);
        const Cycle d = 2 + 1 + rows;
        CHECK(log.retired.at(2).issue == 2);
        CHECK(log.retired.at(2).completion == d);
        CHECK(log.retired.at(3).start == d + n + 2);
        CHECK(acc_row(mem, 0, n) == times(init.ub.row(60), tile_of(init.ub.row(9), rows, n, transpose), n));
      }

    // In order with the RWs: RW of tile 1 (d_w), RWU of 3 rows at 1 (pushed
    // after it), RW of tile 2 at 1 + 3 (its stream is the channel's, after
    // the first RW's; pushed after the RWU's), their MMC.S in turn.
    {
      const Cycle rows = 3;
      isa::Program prog;
      prog.array_n = static_cast<std::uint32_t>(n);
      prog.code = {make(Opcode::RW, 0, 1), make(Opcode::RWU, isa::kFlagRwuTranspose, 20, 3), make(Opcode::RW, 0, 2),
                   mmcs(60, 0), mmcs(61, 1), mmcs(62, 2), make(Opcode::HLT)};
      check_both(cfg, prog, init);
      model::Memories mem = init;
      const model::RunLog log = rtl::run_program(cfg, prog, mem);
      const Cycle d_rwu = std::max<Cycle>(1 + 1 + rows, d_w + 1);
      const Cycle arrival = std::max<Cycle>(1 + rows + 1 + t.lw, d_w + 1) + tw - 1;
      CHECK(log.retired.at(1).completion == d_rwu);
      CHECK(log.retired.at(2).issue == 1 + rows);
      CHECK(log.retired.at(2).completion == std::max(arrival, d_rwu + 1));
      const auto tile = [&](Cycle k) { return std::vector<std::int8_t>(init.weights.row(k), init.weights.row(k) + n * n); };
      CHECK(acc_row(mem, 0, n) == times(init.ub.row(60), tile(1), n));
      CHECK(acc_row(mem, 1, n) == times(init.ub.row(61), tile_of(init.ub.row(20), rows, n, true), n));
      CHECK(acc_row(mem, 2, n) == times(init.ub.row(62), tile(2), n));
    }

    // RAW: an RWU of rows an RHM writes issues at the RHM's d + 1; WAR: an
    // RHM into rows an RWU reads issues at the RWU's d + 1.
    {
      isa::Program prog;
      prog.array_n = static_cast<std::uint32_t>(n);
      prog.code = {make(Opcode::RHM, 0, 40, 30, 2), make(Opcode::RWU, 0, 31, 2), make(Opcode::RHM, 0, 50, 32, 1),
                   mmcs(60, 0), make(Opcode::HLT)};
      check_both(cfg, prog, init);
      model::Memories mem = init;
      const model::RunLog log = rtl::run_program(cfg, prog, mem);
      const Cycle d_rhm = t.lh + ceil_div(2 * n, t.bh);
      CHECK(log.retired.at(1).issue == d_rhm + 1);
      CHECK(log.retired.at(1).completion == d_rhm + 1 + 1 + 2);
      CHECK(log.retired.at(2).issue == d_rhm + 1 + 1 + 2 + 1);
      std::vector<std::int8_t> rows(init.host.row(41), init.host.row(41) + n);  // UB 31 = host row 41
      rows.insert(rows.end(), init.ub.row(32), init.ub.row(32) + n);             // UB 32 as it was
      CHECK(acc_row(mem, 0, n) == times(init.ub.row(60), tile_of(rows.data(), 2, n, false), n));
    }
  }

  // Without ub_weight_path both engines fault at the RWU, in its cycle.
  {
    isa::Program prog;
    prog.array_n = static_cast<std::uint32_t>(n);
    prog.code = {make(Opcode::NOP), make(Opcode::RWU, 0, 0, 2), make(Opcode::HLT)};
    ArchConfig off = base;
    off.ub_weight_path = 0;
    model::Memories a(off), b(off);
    const model::RunLog la = model::run_program(off, prog, a);
    const model::RunLog lb = rtl::run_program(off, prog, b);
    REQUIRE(la.fault);
    REQUIRE(lb.fault);
    CHECK(la.fault->pc == 1);
    CHECK(lb.fault->pc == 1);
    CHECK(la.fault->cycle == lb.fault->cycle);
    CHECK_THAT(lb.fault->message(), Catch::Contains("RWU needs the configuration's ub_weight_path"));
    CHECK(la.fault->message() == lb.fault->message());
    CHECK_FALSE(rtl::compare(prog, la, a, lb, b));
  }

  // An RWU of more than N rows, which the assembler refuses, in a program
  // made in memory: the model faults at it; the RTL engine refuses the program.
  isa::Program prog;
  prog.array_n = static_cast<std::uint32_t>(n);
  prog.code = {make(Opcode::RWU, 0, 0, static_cast<std::int64_t>(n + 1)), make(Opcode::HLT)};
  model::Memories mem(base);
  CHECK_THROWS_WITH(rtl::run_program(base, prog, mem), Catch::Contains("RWU of 5 rows is more than a weight tile's N = 4 rows"));
}

// GELU (docs/isa.md; docs/microarchitecture.md, "Softmax, LayerNorm, GELU")
// on the RTL against the model, and against the documents' closed forms and
// formula worked out here (gelu_reference): d = c + B + A + 6; an ACT after it
// at c + B + 6 (the write order), any other instruction of the unit after it
// or after an ACT of R rows at c' at its completion + 1 (c' + R + A + 1); a
// GELU of rows an RHM writes at the RHM's d + 1 (RAW), a WHM of its output
// rows at its d + 1. The constants: a compiler's choice for an input scale
// of about 0.05 (sh 8), then the corners: no clip (k0 < 0), k1 at the int32
// extremes, the largest shift, a large multiplier and S = 0 and 62.
TEST_CASE("GELU runs identically on the RTL, at the closed forms", "[rtl][norm]") {
  using isa::Opcode;
  using model::Cycle;
  const std::string preset = GENERATE(as<std::string>{}, "small4", "small16");
  const ArchConfig cfg = preset_config(preset);
  CAPTURE(preset);
  REQUIRE(rtl::available(cfg));
  const Cycle a = cfg.act_latency, n = cfg.array_n;
  REQUIRE(a == 4);
  for (const GeluRegs g : {GeluRegs{12810, 180'000'000, -3, 8, 1 << 20, 57, -20},
                           GeluRegs{-5, 2'000'000'000, 7, 15, -77777, 47, 5},
                           GeluRegs{INT32_MAX, INT32_MIN, -128, 3, INT32_MAX, 62, 0},
                           GeluRegs{1, INT32_MAX, 127, 0, 3, 0, -1},
                           GeluRegs{65536, 1 << 30, 0, 12, INT32_MIN, 58, 127}}) {
    CAPTURE(g.k0, g.k1, g.k2, g.sh, g.m, g.s, g.z);
    isa::Program prog;
    prog.array_n = static_cast<std::uint32_t>(n);
    prog.code = {make(Opcode::NGEO, 0, 1, 0, g.sh),               // 0
                 make(Opcode::NCON, 0, g.k0, g.k1, g.k2),          // 1
                 make(Opcode::SETQ, 0, g.m, g.s, g.z),             // 2
                 make(Opcode::ACT, isa::kFlagActRelu, 0, 40, 3),   // 3
                 make(Opcode::GELU, 0, 0, 10, 5),                  // 4: after the ACT's completion
                 make(Opcode::SETQ, 0, 3, 1, 2),                   // 5
                 make(Opcode::ACT, 0, 4, 50, 2),                   // 6: c4 + 5 + 6
                 make(Opcode::SETQ, 0, g.m, g.s, g.z),             // 7
                 make(Opcode::GELU, 0, 10, 10, 4),                 // 8: in place, after the ACT
                 make(Opcode::RHM, 0, 0, 60, 12),                  // 9
                 make(Opcode::GELU, 0, 60, 70, 2),                 // 10: RAW on the RHM's rows
                 make(Opcode::WHM, 0, 70, 100, 2),                 // 11: RAW on the GELU's
                 make(Opcode::HLT)};                               // 12
    model::Memories init(cfg);
    std::mt19937 rng(static_cast<unsigned>(g.k0));
    for (std::size_t i = 0; i < 8 * init.ub.width(); ++i) init.ub.data()[i] = static_cast<std::int8_t>(rng());
    for (std::size_t i = 0; i < 2 * init.host.width(); ++i) init.host.data()[i] = static_cast<std::int8_t>(rng());
    init.ub.data()[0] = -128;  // the int8 extremes, and x = k2
    init.ub.data()[1] = 127;
    init.ub.data()[2] = static_cast<std::int8_t>(std::clamp(g.k2, -128, 127));
    init.host.data()[0] = -128;
    init.host.data()[1] = 127;
    for (std::size_t i = 0; i < 8 * init.acc.width(); ++i)
      init.acc.data()[i] = static_cast<std::int32_t>(rng() % 20001) - 10000;
    check_both(cfg, prog, init);

    model::Memories mem = init;
    const model::RunLog log = rtl::run_program(cfg, prog, mem);
    const auto& r = log.retired;
    const Cycle c3 = 3, d3 = c3 + 3 + a;
    const Cycle c4 = d3 + 1, d4 = c4 + 5 + a + 6;
    const Cycle c6 = c4 + 5 + 6, d6 = c6 + 2 + a;
    const Cycle c8 = d6 + 1, d8 = c8 + 4 + a + 6;
    const Cycle c9 = c8 + 1, d9 = c9 + cfg.host_latency + ceil_div(12 * n, cfg.host_bytes_per_cycle);
    const Cycle c10 = std::max(d8, d9) + 1, d10 = c10 + 2 + a + 6;
    const Cycle c11 = d10 + 1, d11 = c11 + cfg.host_latency + ceil_div(2 * n, cfg.host_bytes_per_cycle);
    for (const auto& [pc, c, d] : {std::tuple{3, c3, d3}, std::tuple{4, c4, d4}, std::tuple{6, c6, d6},
                                   std::tuple{8, c8, d8}, std::tuple{10, c10, d10}, std::tuple{11, c11, d11}}) {
      CAPTURE(pc);
      CHECK(r.at(pc).issue == c);
      CHECK(r.at(pc).completion == d);
    }
    CHECK(log.stats.cycles == d11 + 2);
    // The RHM's completion comes after the GELU's at pc 8: a RAW stall.
    REQUIRE(d9 > d8);
    CHECK(log.stats.stall_cycles[static_cast<unsigned>(model::StallCause::Raw)] >= d9 - d8);

    // The values: pc 4 on UB rows 0..4, pc 8 on its output again, pc 10 on host rows 0..1.
    for (Cycle row = 0; row < 5; ++row)
      for (Cycle j = 0; j < n; ++j) {
        CAPTURE(row, j);
        const std::int8_t once = gelu_reference(init.ub.row(row)[j], g);
        if (row < 4) CHECK(mem.ub.row(10 + row)[j] == gelu_reference(once, g));
        else CHECK(mem.ub.row(10 + row)[j] == once);
        if (row < 2) CHECK(mem.host.row(100 + row)[j] == gelu_reference(init.host.row(row)[j], g));
      }
  }
}
