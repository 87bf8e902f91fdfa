// The fast path (Detail::Fast: one GEMM per MMC, idle cycles skipped) against
// the detailed path (every PE every cycle): the same retire records, the same
// statistics, the same fault and the same final memories, on every example
// program, on the GEMM compiler's programs and on a few hundred random
// programs, including programs that fault in the middle of their work (a
// cycle limit, a deadlock, an address past the end).
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "asm/assembler.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "model/int8_gemm.h"
#include "model/run_log.h"
#include "model/tpu.h"
#include "random_program.h"

namespace {

using namespace tpu;
using model::Detail;

const std::filesystem::path kSourceDir =
    std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();

struct Outcome {
  model::RunLog log;
  model::Memories mem;
};

Outcome run(const ArchConfig& cfg, const isa::Program& prog, const model::Memories& initial,
            Detail detail, model::Cycle max_cycles = 100'000'000) {
  model::Memories mem = initial;
  model::RunOptions opts;
  opts.detail = detail;
  opts.max_cycles = max_cycles;
  model::RunLog log = model::run_program(cfg, prog, mem, opts);
  return {std::move(log), std::move(mem)};
}

template <typename T>
bool same_memory(const model::RowMemory<T>& a, const model::RowMemory<T>& b) {
  return a.data().size() == b.data().size() &&
         std::memcmp(a.data().data(), b.data().data(), a.data().size() * sizeof(T)) == 0;
}

// Every observable of the two runs, exactly.
void check_same(const Outcome& fast, const Outcome& detailed) {
  const model::RunLog& f = fast.log;
  const model::RunLog& d = detailed.log;
  REQUIRE(f.retired.size() == d.retired.size());
  for (std::size_t i = 0; i < f.retired.size(); ++i) {
    CAPTURE(i, d.retired[i].pc);
    CHECK(f.retired[i].pc == d.retired[i].pc);
    CHECK(f.retired[i].issue == d.retired[i].issue);
    CHECK(f.retired[i].start == d.retired[i].start);
    CHECK(f.retired[i].completed == d.retired[i].completed);
    CHECK(f.retired[i].completion == d.retired[i].completion);
  }
  CHECK(f.halted == d.halted);
  REQUIRE(f.fault.has_value() == d.fault.has_value());
  if (f.fault) CHECK(f.fault->message() == d.fault->message());
  CHECK(f.stats.cycles == d.stats.cycles);
  CHECK(f.stats.instructions == d.stats.instructions);
  CHECK(f.stats.macs == d.stats.macs);
  CHECK(f.stats.array_active_cycles == d.stats.array_active_cycles);
  for (unsigned c = 0; c < model::kNumStallCauses; ++c) {
    CAPTURE(model::stall_cause_name(static_cast<model::StallCause>(c)));
    CHECK(f.stats.stall_cycles[c] == d.stats.stall_cycles[c]);
  }
  REQUIRE(f.stats.units.size() == d.stats.units.size());
  for (const auto& [name, u] : d.stats.units) {
    CAPTURE(name);
    REQUIRE(f.stats.units.count(name) == 1);
    CHECK(f.stats.units.at(name).instructions == u.instructions);
    CHECK(f.stats.units.at(name).busy_cycles == u.busy_cycles);
  }
  CHECK(same_memory(fast.mem.host, detailed.mem.host));
  CHECK(same_memory(fast.mem.weights, detailed.mem.weights));
  CHECK(same_memory(fast.mem.ub, detailed.mem.ub));
  CHECK(same_memory(fast.mem.acc, detailed.mem.acc));
}

// Runs both ways and compares; returns the detailed run.
model::RunLog check_paths(const ArchConfig& cfg, const isa::Program& prog,
                          const model::Memories& initial, model::Cycle max_cycles = 100'000'000) {
  Outcome detailed = run(cfg, prog, initial, Detail::Detailed, max_cycles);
  const Outcome fast = run(cfg, prog, initial, Detail::Fast, max_cycles);
  check_same(fast, detailed);
  return std::move(detailed.log);
}

std::string program_text(const isa::Program& prog) {
  std::string s;
  for (const isa::Instruction& in : prog.code) s += isa::disassemble(in) + "\n";
  return s;
}

}  // namespace

TEST_CASE("Fast and detailed paths agree on every example program", "[fast_path]") {
  unsigned count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir / "programs")) {
    if (entry.path().extension() != ".s") continue;
    const std::string name = entry.path().stem().string();
    const std::filesystem::path data = kSourceDir / "programs" / "data" / name;
    if (!std::filesystem::exists(data / "host.npy")) continue;
    CAPTURE(name);
    std::ifstream in(entry.path());
    std::stringstream src;
    src << in.rdbuf();
    const assembler::Result r = assembler::assemble(src.str(), {});
    REQUIRE(r.diagnostics.empty());
    const isa::Program& prog = *r.program;
    ArchConfig cfg = preset_config("small8");
    cfg.array_n = prog.array_n;
    validate(cfg);
    model::Memories mem(cfg);
    const NpyArray host = read_npy((data / "host.npy").string());
    const NpyArray weights = read_npy((data / "weights.npy").string());
    std::memcpy(mem.host.data().data(), host.data.data(), host.data.size());
    std::memcpy(mem.weights.data().data(), weights.data.data(), weights.data.size());
    const model::RunLog log = check_paths(cfg, prog, mem);
    CHECK(log.halted);
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("Fast and detailed paths agree on compiled GEMMs on 4x4, 8x8 and 16x16 arrays",
          "[fast_path]") {
  std::mt19937 rng(42);
  const auto random_matrix = [&rng](std::size_t rows, std::size_t cols) {
    compiler::MatrixI8 m{rows, cols, std::vector<std::int8_t>(rows * cols)};
    for (auto& v : m.data) v = static_cast<std::int8_t>(rng());
    return m;
  };
  for (unsigned n : {4u, 8u, 16u}) {
    ArchConfig cfg = preset_config("small" + std::to_string(n));
    const std::vector<std::array<std::size_t, 3>> shapes = {
        {1, 1, 1},      {7, 13, 5},     {n - 1, n + 1, n}, {n, n, n}, {n + 1, n - 1, n + 1},
        {100, 300, 77}, {256, 256, 256}};
    for (const auto& [m, k, nout] : shapes) {
      for (bool int8_out : {false, true}) {
        CAPTURE(n, m, k, nout, int8_out);
        compiler::GemmSpec spec;
        if (int8_out) spec = {model::Requant{77, 14, -5}, model::ActFunction::Relu};
        const compiler::GemmPlan plan =
            compiler::compile_gemm(random_matrix(m, k), random_matrix(k, nout), spec, cfg);
        model::Memories mem(cfg);
        std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
        std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
        const model::RunLog log = check_paths(cfg, plan.program, mem);
        CHECK(log.halted);
      }
    }
  }
}

TEST_CASE("Fast and detailed paths agree on random programs", "[fast_path]") {
  testing::RandomProgramGenerator gen(20261202);
  unsigned halted = 0, faulted = 0, limited = 0;
  for (unsigned p = 0; p < 400; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    CAPTURE(p, rp.cfg.array_n, rp.cfg.host_latency, rp.cfg.host_bytes_per_cycle,
            rp.cfg.weight_latency, rp.cfg.weight_bytes_per_cycle, rp.cfg.act_latency,
            rp.cfg.fifo_depth);
    INFO(program_text(rp.program));
    model::Memories mem(rp.cfg);
    gen.fill(mem);
    const model::RunLog log = check_paths(rp.cfg, rp.program, mem);
    (log.halted ? halted : faulted)++;
    // The same program stopped by a cycle limit somewhere in its run, most
    // likely in the middle of some unit's work.
    if (log.halted && log.stats.cycles > 1) {
      const model::Cycle limit = gen.pick(0, static_cast<unsigned>(log.stats.cycles - 1));
      CAPTURE(limit);
      const model::RunLog cut = check_paths(rp.cfg, rp.program, mem, limit);
      CHECK(cut.fault);
      ++limited;
    }
  }
  // The generator mostly makes programs that run to HLT.
  CHECK(halted >= 300);
  CHECK(faulted >= 10);
  CHECK(limited >= 300);
}

TEST_CASE("Every int8 GEMM kernel this CPU runs gives the scalar kernel's bits", "[fast_path]") {
  std::mt19937 rng(7);
  for (unsigned n : {4u, 5u, 8u, 16u, 17u, 31u, 32u, 33u, 64u, 100u, 256u}) {
    for (std::size_t rows : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{13}}) {
      std::vector<std::int8_t> x(rows * n), w(n * n);
      for (auto& v : x) v = static_cast<std::int8_t>(rng());
      for (auto& v : w) v = static_cast<std::int8_t>(rng());
      // Extremes too: -128 * -128 everywhere in one row and one column.
      for (unsigned k = 0; k < n; ++k) x[k] = w[k * n] = -128;
      std::vector<std::int32_t> init(rows * n);
      for (auto& v : init) v = static_cast<std::int32_t>(rng());
      init[0] = INT32_MAX;  // the addition wraps
      for (bool overwrite : {false, true}) {
        std::vector<std::int32_t> want = init;
        model::int8_gemm(x.data(), rows,
                         model::pack_weights(w.data(), n, model::GemmKernel::Scalar), want.data(),
                         overwrite);
        // The scalar kernel against the definition, on one element.
        std::uint32_t sum = 0;
        for (unsigned k = 0; k < n; ++k) sum += static_cast<std::uint32_t>(x[k] * w[k * n + 1]);
        CHECK(want[1] == static_cast<std::int32_t>(
                             overwrite ? sum : static_cast<std::uint32_t>(init[1]) + sum));
        for (model::GemmKernel k : {model::GemmKernel::Avx2, model::GemmKernel::Avx512Vnni}) {
          if (!model::gemm_kernel_available(k)) continue;
          CAPTURE(n, rows, overwrite, model::gemm_kernel_name(k));
          std::vector<std::int32_t> got = init;
          model::int8_gemm(x.data(), rows, model::pack_weights(w.data(), n, k), got.data(),
                           overwrite);
          CHECK(got == want);
        }
      }
    }
  }
}

TEST_CASE("A GEMM split over threads gives the one-thread bits", "[fast_path]") {
  // 1000 rows at N = 256: three bands of 336, 336 and 328 rows.
  const std::size_t n = 256, rows = 1000;
  std::mt19937 rng(11);
  std::vector<std::int8_t> x(rows * n), w(n * n);
  for (auto& v : x) v = static_cast<std::int8_t>(rng());
  for (auto& v : w) v = static_cast<std::int8_t>(rng());
  std::vector<std::int32_t> init(rows * n);
  for (auto& v : init) v = static_cast<std::int32_t>(rng());
  const model::PackedWeights packed = model::pack_weights(w.data(), n, model::best_gemm_kernel());
  std::vector<std::int32_t> one = init, three = init;
  model::int8_gemm(x.data(), rows, packed, one.data(), false, 1);
  model::int8_gemm(x.data(), rows, packed, three.data(), false, 3);
  CHECK(one == three);
  // And the last row against the definition.
  for (std::size_t j : {std::size_t{0}, n - 1}) {
    std::uint32_t sum = static_cast<std::uint32_t>(init[(rows - 1) * n + j]);
    for (std::size_t k = 0; k < n; ++k)
      sum += static_cast<std::uint32_t>(x[(rows - 1) * n + k] * w[k * n + j]);
    CHECK(three[(rows - 1) * n + j] == static_cast<std::int32_t>(sum));
  }
}

TEST_CASE("Auto is the detailed path with a waveform and the fast path without", "[fast_path]") {
  model::RunOptions o;
  o.detail = Detail::Detailed;
  CHECK(model::resolve_detail(o) == Detail::Detailed);
  o.detail = Detail::Auto;
  o.vcd_path = "x.vcd";
  CHECK(model::resolve_detail(o) == Detail::Detailed);
  o.detail = Detail::Fast;
  CHECK_THROWS_AS(model::resolve_detail(o), std::invalid_argument);
  o.vcd_path.clear();
  CHECK(model::resolve_detail(o) == Detail::Fast);
}
