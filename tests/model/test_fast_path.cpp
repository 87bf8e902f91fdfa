// The fast path (Detail::Fast: one GEMM per MMC, idle cycles skipped) against
// the detailed path (every PE every cycle): the same retire records, the same
// statistics, the same fault and the same final memories, on every example
// program, on the GEMM compiler's programs and on a few hundred random
// programs, including programs that fault in the middle of their work (a
// cycle limit, a deadlock, an address past the end).
//
// Every shortcut of the fast path runs here in each of its regimes, with its
// settings chosen by the test rather than by the machine: each GEMM kernel
// the CPU has, the split of an MMC over 1 to 8 threads (forced down to tiny
// MMCs, and at its default threshold with MMCs of thousands of rows at N = 64
// and N = 256), cycle skipping, and the partial writes after a fault.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "asm/assembler.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "model/int8_gemm.h"
#include "model/run_log.h"
#include "model/tpu.h"
#include "perf_recount.h"
#include "random_program/random_program.h"
#include "support/tier.h"

namespace {

using namespace tpu;
using model::Detail;

// From CMake, not __FILE__: ccache with CCACHE_BASEDIR makes __FILE__ relative
// to the build directory.
const std::filesystem::path kSourceDir = TPU_SOURCE_DIR;

struct Outcome {
  model::RunLog log;
  model::Memories mem;
};

Outcome run(const ArchConfig& cfg, const isa::Program& prog, const model::Memories& initial,
            model::RunOptions opts) {
  model::Memories mem = initial;
  model::RunLog log = model::run_program(cfg, prog, mem, opts);
  return {std::move(log), std::move(mem)};
}

// Whole memories, read where either run touched them (tpuv1's weight memory
// is 8 GiB; RowMemory's comparison is checked in test_memories.cpp).
template <typename T>
bool same_memory(const model::RowMemory<T>& a, const model::RowMemory<T>& b) {
  return a.same_contents(b);
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
  CHECK(f.stall_runs == d.stall_runs);
  CHECK(testing::same_counters(f.stats.tpuv1, d.stats.tpuv1));
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

model::RunOptions options(Detail detail, model::Cycle max_cycles = 100'000'000) {
  model::RunOptions opts;
  opts.detail = detail;
  opts.max_cycles = max_cycles;
  return opts;
}

// Runs both ways and compares; returns the detailed run. `fast` sets the fast
// path's GEMM kernel and threads (its detail and cycle limit are overridden).
model::RunLog check_paths(const ArchConfig& cfg, const isa::Program& prog,
                          const model::Memories& initial, model::Cycle max_cycles = 100'000'000,
                          model::RunOptions fast = {}) {
  Outcome detailed = run(cfg, prog, initial, options(Detail::Detailed, max_cycles));
  fast.detail = Detail::Fast;
  fast.max_cycles = max_cycles;
  const Outcome fast_run = run(cfg, prog, initial, fast);
  check_same(fast_run, detailed);
  // The energy model's events (docs/energy.md): the same on both paths.
  CHECK(fast_run.log.stats.events == detailed.log.stats.events);
  // The TPUv1 counters against the document's definitions applied cycle by
  // cycle, and against the array's own count of its active cycles.
  const model::RunLog& log = detailed.log;
  const model::PerfCounters expected = testing::recount_perf(cfg, prog, log, initial.weights.row(0));
  CHECK(testing::same_counters(log.stats.tpuv1, expected));
  // A fault at cycle t ends the counted cycles at t - 1; the array also
  // counts a row it read in t (the units work in the fault's cycle).
  if (log.halted) CHECK(log.stats.tpuv1.array_active_cycles == log.stats.array_active_cycles);
  else CHECK(log.stats.array_active_cycles - log.stats.tpuv1.array_active_cycles <= 1);
  std::uint64_t stalled[model::kNumStallCauses] = {};
  for (const model::StallRun& r : log.stall_runs) stalled[static_cast<unsigned>(r.cause)] += r.last - r.first + 1;
  for (unsigned c = 0; c < model::kNumStallCauses; ++c) CHECK(stalled[c] == log.stats.stall_cycles[c]);
  return std::move(detailed.log);
}

// The GEMM kernels this CPU runs (the scalar one everywhere).
std::vector<model::GemmKernel> available_kernels() {
  std::vector<model::GemmKernel> ks;
  for (auto k : {model::GemmKernel::Scalar, model::GemmKernel::Avx2, model::GemmKernel::Avx512Vnni})
    if (model::gemm_kernel_available(k)) ks.push_back(k);
  return ks;
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
    std::vector<std::array<std::size_t, 3>> shapes = {
        {1, 1, 1},      {7, 13, 5},     {n - 1, n + 1, n}, {n, n, n}, {n + 1, n - 1, n + 1},
        {100, 300, 77}, {256, 256, 256}};
    // Instrumented, the detailed path's 256x256x256 GEMMs took the sanitizer
    // build's default tier 25 of this test's 34 s (support/tier.h).
    if (test::reduced_tier()) shapes.pop_back();
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
  const std::vector<model::GemmKernel> kernels = available_kernels();
  unsigned halted = 0, faulted = 0, limited = 0, threaded = 0, background = 0, vectors = 0, norms = 0,
           operands = 0;
  for (unsigned p = 0; p < 400; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    vectors += std::any_of(rp.program.code.begin(), rp.program.code.end(),
                           [](const isa::Instruction& in) { return in.opcode == isa::Opcode::VEC; });
    norms += std::any_of(rp.program.code.begin(), rp.program.code.end(), [](const isa::Instruction& in) {
      return in.opcode == isa::Opcode::SMAX || in.opcode == isa::Opcode::LNRM || in.opcode == isa::Opcode::GELU;
    });
    operands += std::any_of(rp.program.code.begin(), rp.program.code.end(), [](const isa::Instruction& in) {
      return in.opcode == isa::Opcode::HWT || in.opcode == isa::Opcode::RWU;
    });
    // Each kernel in turn; from the second program on, every MMC of two or
    // more rows split over 2 to 8 threads (one thread per MAC at most).
    model::RunOptions fast;
    fast.gemm_kernel = kernels[p % kernels.size()];
    if (p % 4 != 0) fast.gemm_threading = {gen.pick(2, 8), 1};
    threaded += fast.gemm_threading.max_threads > 1;
    // Two programs in three with every MMC computed in the background from
    // its start (GemmQueue), on one thread or split.
    if (p % 3 != 2) fast.gemm_threading.async_macs = 1;
    background += fast.gemm_threading.async_macs == 1;
    CAPTURE(p, rp.cfg.array_n, rp.cfg.host_latency, rp.cfg.host_bytes_per_cycle,
            rp.cfg.weight_latency, rp.cfg.weight_bytes_per_cycle, rp.cfg.act_latency,
            rp.cfg.fifo_depth, model::gemm_kernel_name(*fast.gemm_kernel),
            fast.gemm_threading.max_threads, fast.gemm_threading.async_macs);
    INFO(program_text(rp.program));
    model::Memories mem(rp.cfg);
    gen.fill(mem);
    const model::RunLog log = check_paths(rp.cfg, rp.program, mem, 100'000'000, fast);
    (log.halted ? halted : faulted)++;
    // The same program stopped by a cycle limit somewhere in its run, most
    // likely in the middle of some unit's work.
    if (log.halted && log.stats.cycles > 1) {
      const model::Cycle limit = gen.pick(0, static_cast<unsigned>(log.stats.cycles - 1));
      CAPTURE(limit);
      const model::RunLog cut = check_paths(rp.cfg, rp.program, mem, limit, fast);
      CHECK(cut.fault);
      ++limited;
    }
  }
  // The generator mostly makes programs that run to HLT.
  CHECK(halted >= 300);
  CHECK(faulted >= 10);
  CHECK(limited >= 300);
  CHECK(threaded >= 250);
  CHECK(background >= 250);
  CHECK(vectors >= 200);  // programs with at least one VEC
  CHECK(norms >= 200);    // with at least one SMAX, LNRM or GELU
  CHECK(operands >= 200);  // with at least one HWT or RWU
}

TEST_CASE("Fast and detailed paths agree on random programs with MMCs of thousands of rows",
          "[fast_path]") {
  // N = 64: an MMC of 4096 rows or more is split over threads at the default
  // threshold (16 M MACs a thread); the thread limit is set here, not taken
  // from the CPU, so a 2-core machine runs the same split as a 64-core one.
  testing::RandomProgramGenerator gen(20261203, /*large=*/true);
  const std::vector<model::GemmKernel> kernels = available_kernels();
  const unsigned programs = test::reduced_tier() ? 3 : 16;
  std::uint64_t split_mmcs = 0;
  for (unsigned p = 0; p < programs; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    model::RunOptions fast;
    fast.gemm_kernel = kernels[p % kernels.size()];
    fast.gemm_threading.max_threads = gen.pick(2, 8);
    // Odd programs: every MMC in the background; even ones at the default
    // threshold (16 M MACs, as the thread split).
    if (p % 2 == 1) fast.gemm_threading.async_macs = 1;
    for (const isa::Instruction& in : rp.program.code)
      if (in.opcode == isa::Opcode::MMC &&
          model::gemm_threads(static_cast<std::size_t>(in.operands[2]), 64, fast.gemm_threading) >
              1)
        ++split_mmcs;
    CAPTURE(p, model::gemm_kernel_name(*fast.gemm_kernel), fast.gemm_threading.max_threads,
            fast.gemm_threading.async_macs);
    INFO(program_text(rp.program));
    model::Memories mem(rp.cfg);
    gen.fill(mem);
    const model::RunLog log = check_paths(rp.cfg, rp.program, mem, 100'000'000, fast);
    if (log.halted && log.stats.cycles > 1 && (p % 4 == 0 || p % 4 == 1)) {
      const model::Cycle limit = gen.pick(0, static_cast<unsigned>(log.stats.cycles - 1));
      CAPTURE(limit);
      check_paths(rp.cfg, rp.program, mem, limit, fast);
    }
  }
  CHECK(split_mmcs >= programs / 2);
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

TEST_CASE("The vector kernels multiply a tile's used extent and give the definition's bits",
          "[fast_path]") {
  // Tiles whose last rows (inputs) or columns (outputs) are zero: every
  // extent around the kernels' steps (4 rows a VPDPBUSD quad, 2 a VPMADDWD
  // pair; 32 and 16 columns a block), none used at all, and the whole tile.
  std::mt19937 rng(21);
  const std::size_t n = 64;
  const std::vector<std::size_t> extents = {0, 1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 63, 64};
  for (std::size_t ku : extents) {
    for (std::size_t nu : extents) {
      if ((ku == 0) != (nu == 0)) continue;  // a nonzero weight has a row and a column
      for (std::size_t rows : {std::size_t{1}, std::size_t{9}, std::size_t{40}}) {
        std::vector<std::int8_t> x(rows * n), w(n * n, 0);
        for (auto& v : x) v = static_cast<std::int8_t>(rng());
        for (std::size_t k = 0; k < ku; ++k)
          for (std::size_t j = 0; j < nu; ++j) w[k * n + j] = static_cast<std::int8_t>(rng() | 1);
        if (ku > 0) w[(ku - 1) * n + nu - 1] = -128;  // the extent's corner is used
        std::vector<std::int32_t> init(rows * n);
        for (auto& v : init) v = static_cast<std::int32_t>(rng());
        for (bool overwrite : {false, true}) {
          // The definition: every product of the whole tile, int32 wrap-around.
          std::vector<std::int32_t> want = init;
          for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              std::uint32_t sum = overwrite ? 0u : static_cast<std::uint32_t>(init[i * n + j]);
              for (std::size_t k = 0; k < n; ++k)
                sum += static_cast<std::uint32_t>(x[i * n + k] * w[k * n + j]);
              want[i * n + j] = static_cast<std::int32_t>(sum);
            }
          for (model::GemmKernel k : available_kernels()) {
            const model::PackedWeights packed = model::pack_weights(w.data(), n, k);
            CAPTURE(ku, nu, rows, overwrite, model::gemm_kernel_name(k));
            REQUIRE(packed.k_used == ku);
            REQUIRE(packed.n_used == nu);
            // One thread, and split over three at one MAC a thread.
            for (const model::GemmThreading threading : {model::GemmThreading{1}, model::GemmThreading{3, 1}}) {
              std::vector<std::int32_t> got = init;
              model::int8_gemm(x.data(), rows, packed, got.data(), overwrite, threading);
              REQUIRE(got == want);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("Diagonal tiles are multiplied lane by lane with the definition's bits", "[fast_path]") {
  // Depthwise convolutions' tiles: W[k][j] = 0 off the diagonal. Every used
  // extent around the 8-lane step, extreme values, accumulation with
  // wrap-around; and a tile with one weight off the diagonal, which must not
  // take the shortcut.
  std::mt19937 rng(33);
  for (const std::size_t n : {std::size_t{16}, std::size_t{256}}) {
    for (const std::size_t used : {1, 7, 8, 9, 15, 16, 17, 100, 255, 256}) {
      if (used > n) continue;
      for (const bool off_diagonal : {false, true}) {
        const std::size_t rows = 11;
        std::vector<std::int8_t> x(rows * n), w(n * n, 0);
        for (auto& v : x) v = static_cast<std::int8_t>(rng());
        x[0] = -128;
        for (std::size_t j = 0; j < used; ++j) w[j * n + j] = static_cast<std::int8_t>(rng() | 1);
        w[(used - 1) * n + used - 1] = -128;
        if (off_diagonal && used > 1) w[(rng() % used) * n + (used - 1)] = 5;  // may land on the diagonal
        bool is_diagonal = true;
        for (std::size_t k = 0; k < n; ++k)
          for (std::size_t j = 0; j < n; ++j) is_diagonal = is_diagonal && (k == j || w[k * n + j] == 0);
        std::vector<std::int32_t> init(rows * n);
        for (auto& v : init) v = static_cast<std::int32_t>(rng());
        init[1] = std::numeric_limits<std::int32_t>::max();  // wraps
        for (const bool overwrite : {false, true}) {
          std::vector<std::int32_t> want = init;
          for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              std::uint32_t sum = overwrite ? 0u : static_cast<std::uint32_t>(init[i * n + j]);
              for (std::size_t k = 0; k < n; ++k) sum += static_cast<std::uint32_t>(x[i * n + k] * w[k * n + j]);
              want[i * n + j] = static_cast<std::int32_t>(sum);
            }
          for (model::GemmKernel k : available_kernels()) {
            CAPTURE(n, used, off_diagonal, overwrite, model::gemm_kernel_name(k));
            const model::PackedWeights packed = model::pack_weights(w.data(), n, k);
            CHECK(packed.diagonal == (is_diagonal && k != model::GemmKernel::Scalar));
            if (packed.diagonal) CHECK(packed.macs_per_row() == used);
            for (const model::GemmThreading threading : {model::GemmThreading{1}, model::GemmThreading{3, 1}}) {
              std::vector<std::int32_t> got = init;
              model::int8_gemm(x.data(), rows, packed, got.data(), overwrite, threading);
              REQUIRE(got == want);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("The VNNI packing is the documented layout, zero outside the used extent", "[fast_path]") {
  // The layout the VNNI kernel reads (int8_gemm.cpp), written here apart from the packing
  // loops: byte ((b * quads + q) * 32 + jj) * 4 + kk is W[4q + kk][32b + jj]
  // inside the used extent and 0 outside, colsum[j] = 128 * sum_k W[k][j].
  // Packing needs no AVX-512, so this runs on every CPU.
  std::mt19937 rng(33);
  for (std::size_t n : {std::size_t{4}, std::size_t{33}, std::size_t{64}, std::size_t{256}}) {
    for (std::size_t ku : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{5}, n - 1, n}) {
      for (std::size_t nu : {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33}, n - 1, n}) {
        if (nu > n || ku > n || (ku == 0 && nu != 1)) continue;
        std::vector<std::int8_t> w(n * n, 0);
        for (std::size_t k = 0; k < ku; ++k)
          for (std::size_t j = 0; j < nu; ++j) w[k * n + j] = static_cast<std::int8_t>(rng());
        if (ku > 0) w[(ku - 1) * n + nu - 1] = -128;  // the extent's corner is used
        const model::PackedWeights p = model::pack_weights(w.data(), n, model::GemmKernel::Avx512Vnni);
        CAPTURE(n, ku, nu);
        REQUIRE(p.k_used == ku);
        REQUIRE(p.n_used == (ku == 0 ? 0 : nu));
        if (p.diagonal) {  // a single weight is a diagonal tile, not packed (its own test above)
          REQUIRE((ku == 1 && nu == 1));
          continue;
        }
        const std::size_t quads = (p.k_used + 3) / 4, blocks = (p.n_used + 31) / 32;
        REQUIRE(p.bytes.size() == blocks * quads * 128);
        REQUIRE(p.colsum.size() == blocks * 32);
        bool layout = true, sums = true;
        for (std::size_t b = 0; b < blocks; ++b)
          for (std::size_t q = 0; q < quads; ++q)
            for (std::size_t jj = 0; jj < 32; ++jj)
              for (std::size_t kk = 0; kk < 4; ++kk) {
                const std::size_t k = 4 * q + kk, j = 32 * b + jj;
                const std::int8_t want = k < p.k_used && j < p.n_used ? w[k * n + j] : 0;
                layout = layout && p.bytes[((b * quads + q) * 32 + jj) * 4 + kk] == want;
              }
        for (std::size_t j = 0; j < blocks * 32; ++j) {
          std::int32_t sum = 0;
          for (std::size_t k = 0; j < n && k < n; ++k) sum += w[k * n + j];
          sums = sums && p.colsum[j] == 128 * sum;
        }
        CHECK(layout);
        CHECK(sums);
      }
    }
  }
}

TEST_CASE("The AVX2 packing is the documented layout, zero outside the used extent", "[fast_path]") {
  // The layout the AVX2 kernel reads (int8_gemm.cpp), written here apart from
  // the packing loops: int16 ((b * pairs + q) * 16 + jj) * 2 + kk is
  // W[2q + kk][16b + jj] inside the used extent and 0 outside. Packing needs
  // no AVX2, so this runs on every CPU.
  std::mt19937 rng(35);
  for (std::size_t n : {std::size_t{2}, std::size_t{17}, std::size_t{64}, std::size_t{256}}) {
    for (std::size_t ku : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, n - 1, n}) {
      for (std::size_t nu : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, n - 1, n}) {
        if (nu > n || ku > n || nu == 0 || (ku == 0 && nu != 1)) continue;
        std::vector<std::int8_t> w(n * n, 0);
        for (std::size_t k = 0; k < ku; ++k)
          for (std::size_t j = 0; j < nu; ++j) w[k * n + j] = static_cast<std::int8_t>(rng());
        if (ku > 0) w[(ku - 1) * n + nu - 1] = -128;  // the extent's corner is used
        const model::PackedWeights p = model::pack_weights(w.data(), n, model::GemmKernel::Avx2);
        CAPTURE(n, ku, nu);
        REQUIRE(p.k_used == ku);
        REQUIRE(p.n_used == (ku == 0 ? 0 : nu));
        if (p.diagonal) {  // a single weight is a diagonal tile, not packed (its own test above)
          REQUIRE((ku == 1 && nu == 1));
          continue;
        }
        const std::size_t pairs = (p.k_used + 1) / 2, blocks = (p.n_used + 15) / 16;
        REQUIRE(p.bytes.size() == blocks * pairs * 64);
        bool layout = true;
        for (std::size_t b = 0; b < blocks; ++b)
          for (std::size_t q = 0; q < pairs; ++q)
            for (std::size_t jj = 0; jj < 16; ++jj)
              for (std::size_t kk = 0; kk < 2; ++kk) {
                const std::size_t k = 2 * q + kk, j = 16 * b + jj;
                const std::int16_t want = k < p.k_used && j < p.n_used ? w[k * n + j] : 0;
                const std::size_t at = (((b * pairs + q) * 16 + jj) * 2 + kk) * 2;
                std::int16_t got;
                std::memcpy(&got, p.bytes.data() + at, sizeof got);
                layout = layout && got == want;
              }
        CHECK(layout);
      }
    }
  }
}

TEST_CASE("split_rows covers every row exactly once in at most `threads` bands", "[fast_path]") {
  std::vector<std::size_t> sizes;
  for (std::size_t r = 0; r <= 3 * 8 * 64 + 9; ++r) sizes.push_back(r);
  // The largest MMCs: every accumulator row of tpuv1, and a whole unified buffer.
  for (std::size_t r : {4095, 4096, 4097, 98303, 98304, 1 << 20}) sizes.push_back(r);
  for (unsigned threads = 1; threads <= 64; ++threads) {
    // The sanitizer build's default tier: the thread counts around the powers
    // of two and the ends (each takes it ~0.25 s of assertions).
    if (test::reduced_tier() && threads > 4 && threads % 8 != 0 && threads % 8 != 7) continue;
    for (std::size_t step : {std::size_t{1}, std::size_t{8}}) {
      for (std::size_t rows : sizes) {
        CAPTURE(threads, step, rows);
        const std::vector<model::RowBand> bands = model::split_rows(rows, threads, step);
        REQUIRE(bands.size() <= threads);
        CHECK(bands.empty() == (rows == 0));
        std::size_t next = 0;
        for (std::size_t b = 0; b < bands.size(); ++b) {
          REQUIRE(bands[b].first == next);  // in order, no gap, no overlap
          REQUIRE(bands[b].count > 0);
          if (b + 1 < bands.size()) {
            REQUIRE(bands[b].count % step == 0);
            REQUIRE(bands[b].count == bands[0].count);
          }
          next += bands[b].count;
        }
        REQUIRE(next == rows);  // the last row is in a band
      }
    }
  }
}

TEST_CASE("The thread count of a GEMM follows its size and the limit set", "[fast_path]") {
  // One thread per 16 M MACs: 256 rows at N = 256.
  const model::GemmThreading eight{8};
  CHECK(model::gemm_threads(1, 256, eight) == 1);
  CHECK(model::gemm_threads(511, 256, eight) == 1);
  CHECK(model::gemm_threads(512, 256, eight) == 2);
  CHECK(model::gemm_threads(977, 256, eight) == 3);
  CHECK(model::gemm_threads(2049, 256, eight) == 8);
  CHECK(model::gemm_threads(4096, 256, eight) == 8);
  CHECK(model::gemm_threads(4096, 256, model::GemmThreading{2}) == 2);
  CHECK(model::gemm_threads(8191, 64, eight) == 1);
  CHECK(model::gemm_threads(8192, 64, eight) == 2);
  CHECK(model::gemm_threads(5, 4, model::GemmThreading{8, 1}) == 8);
  CHECK(model::gemm_threads(1, 4, model::GemmThreading{8, 1}) == 8);
  CHECK(model::gemm_threads(3, 4, model::GemmThreading{8, 0}) == 8);  // 0 is read as 1
  // No limit set: the machine's (or TPU_GEMM_THREADS), between 1 and 8.
  const unsigned t = model::gemm_threads(1 << 20, 256, {});
  CHECK(t >= 1);
  CHECK(t <= 8);
}

namespace {

// x . W into c with every kernel split as each of `splits` says, against the
// scalar kernel on one thread.
void check_split(std::size_t rows, std::size_t n,
                 const std::vector<model::GemmThreading>& splits, std::mt19937& rng) {
  std::vector<std::int8_t> x(rows * n), w(n * n);
  for (auto& v : x) v = static_cast<std::int8_t>(rng());
  for (auto& v : w) v = static_cast<std::int8_t>(rng());
  std::vector<std::int32_t> init(rows * n);
  for (auto& v : init) v = static_cast<std::int32_t>(rng());
  std::vector<std::int32_t> want = init;
  model::int8_gemm(x.data(), rows, model::pack_weights(w.data(), n, model::GemmKernel::Scalar),
                   want.data(), false, model::GemmThreading{1});
  // The scalar kernel against the definition on the last row.
  for (std::size_t j = 0; j < n; ++j) {
    std::uint32_t sum = static_cast<std::uint32_t>(init[(rows - 1) * n + j]);
    for (std::size_t k = 0; k < n; ++k)
      sum += static_cast<std::uint32_t>(x[(rows - 1) * n + k] * w[k * n + j]);
    REQUIRE(want[(rows - 1) * n + j] == static_cast<std::int32_t>(sum));
  }
  for (model::GemmKernel k : available_kernels()) {
    const model::PackedWeights packed = model::pack_weights(w.data(), n, k);
    for (const model::GemmThreading& threading : splits) {
      CAPTURE(model::gemm_kernel_name(k), threading.max_threads, threading.macs_per_thread);
      std::vector<std::int32_t> got = init;
      model::int8_gemm(x.data(), rows, packed, got.data(), false, threading);
      for (std::size_t i = 0; i < rows; ++i) {
        CAPTURE(i);
        REQUIRE(std::memcmp(&got[i * n], &want[i * n], n * sizeof(std::int32_t)) == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("A GEMM split over 1 to 8 threads gives the scalar kernel's bits for every row count",
          "[fast_path]") {
  // One thread per MAC at most: every GEMM of at least `threads` rows is split
  // into as many bands as the limit allows.
  std::mt19937 rng(11);
  for (std::size_t rows = 1; rows <= 3 * 8 * 8 + 1; ++rows) {
    std::vector<model::GemmThreading> splits;
    for (unsigned threads = 1; threads <= 8; ++threads)
      if (rows <= 3 * 8 * threads + 1) splits.push_back({threads, 1});
    CAPTURE(rows);
    check_split(rows, 20, splits, rng);
  }
}

TEST_CASE("MMCs of hundreds and thousands of rows at N = 256 split at the default threshold",
          "[fast_path]") {
  // The sizes that lost their last rows (977 rows on 2 threads), and more.
  std::mt19937 rng(12);
  for (std::size_t rows : {511, 513, 977, 1025, 2049, 4096}) {
    CAPTURE(rows);
    check_split(rows, 256, {{2}, {3}, {8}}, rng);
  }
}

TEST_CASE("Fast and detailed paths agree on tpuv1 (N = 256) with MMCs split over threads",
          "[fast_path]") {
  // MMCs of 513 to 2049 rows, above the default threshold (512 rows at N = 256),
  // into accumulator ranges that overlap and start off the kernels' 8-row
  // blocks, with both weight sets, and transfers of 0.5 to 1 MiB that the
  // fast path prefaults (RHM, ACT, WHM.A, WHM); then the same program
  // stopped by the cycle limit in the middle of the 977-row MMC.
  const ArchConfig cfg = preset_config("tpuv1");
  assembler::Options asm_opts;
  asm_opts.array_n = 256;
  asm_opts.config = &cfg;
  const assembler::Result r = assembler::assemble(R"(
        RW      0
        RW      1
        MMC.SO  3, 5, 513
        MMC.S   700, 1, 977
        RW      2
        MMC.S   100, 999, 1025
        MMC.O   40000, 2040, 2049
        RHM     50000, 45000, 2049
        ACT.R   1, 48000, 2049
        WHM.A   2040, 100000, 1024
        WHM     48000, 200000, 2049
        HLT
  )", asm_opts);
  REQUIRE(r.diagnostics.empty());
  model::Memories mem(cfg);
  std::mt19937 rng(13);
  for (std::size_t i = 0; i < 3 * 256 * 256; ++i)
    mem.weights.data()[i] = static_cast<std::int8_t>(rng());
  for (std::size_t i = 0; i < 45000 * 256; ++i) mem.ub.data()[i] = static_cast<std::int8_t>(rng());
  for (std::size_t i = 50000 * 256; i < 52049 * 256; ++i)
    mem.host.data()[i] = static_cast<std::int8_t>(rng());
  for (std::int32_t& v : mem.acc.data()) v = static_cast<std::int32_t>(rng());
  const Outcome detailed = run(cfg, r.program.value(), mem, options(Detail::Detailed));
  REQUIRE(detailed.log.halted);
  const std::vector<model::GemmKernel> kernels = available_kernels();
  // Background MMCs: at the default threshold (every MMC here has 33 M MACs
  // or more), never, and every MMC.
  const std::size_t never = ~std::size_t{0}, every = 1, standard = model::GemmThreading{}.async_macs;
  const std::pair<unsigned, std::size_t> settings[] = {{1, standard}, {2, never}, {3, every}, {8, standard}};
  for (const auto& [threads, async_macs] : settings) {
    model::RunOptions fast = options(Detail::Fast);
    fast.gemm_kernel = kernels[threads % kernels.size()];
    fast.gemm_threading.max_threads = threads;
    fast.gemm_threading.async_macs = async_macs;
    CAPTURE(threads, async_macs, model::gemm_kernel_name(*fast.gemm_kernel));
    check_same(run(cfg, r.program.value(), mem, fast), detailed);
  }
  // The cycle the 977-row MMC (pc 3) started, plus 100 or 600: a fault with
  // that many of its rows in the array or written, while the overwriting
  // 513-row MMC before it (pc 2, completing 511 cycles after pc 3's start at
  // the earliest) is in flight too or has completed: the background MMCs are
  // taken back (undo_background) before the partial writes.
  for (const model::Cycle after : {100u, 600u}) {
    const model::Cycle cut = detailed.log.retired[3].start + after;
    const Outcome want = run(cfg, r.program.value(), mem, options(Detail::Detailed, cut));
    for (const auto& [threads, async_macs] : settings) {
      model::RunOptions fast = options(Detail::Fast, cut);
      fast.gemm_threading.max_threads = threads;
      fast.gemm_threading.async_macs = async_macs;
      CAPTURE(after, threads, async_macs);
      check_same(run(cfg, r.program.value(), mem, fast), want);
    }
  }
}

TEST_CASE("The GEMM profile counts calls and the used extent's MACs and busy time while on",
          "[fast_path]") {
  const std::size_t n = 64, rows = 40;
  std::vector<std::int8_t> w(n * n, 0), x(rows * n, 1);
  for (std::size_t k = 0; k < 24; ++k)
    for (std::size_t j = 0; j < 40; ++j) w[k * n + j] = static_cast<std::int8_t>(k + j);
  std::vector<std::int32_t> c(rows * n);
  for (const model::GemmKernel kernel : {model::GemmKernel::Scalar, model::best_gemm_kernel()}) {
    CAPTURE(model::gemm_kernel_name(kernel));
    const model::PackedWeights packed = model::pack_weights(w.data(), n, kernel);
    // The scalar kernel multiplies the whole tile, the others the extent 24 x 40.
    const double per_call = kernel == model::GemmKernel::Scalar ? double(rows * n * n) : double(rows * 24 * 40);
    model::set_gemm_profiling(false);
    model::int8_gemm(x.data(), rows, packed, c.data(), true);
    CHECK(model::gemm_profile().calls == 0);
    model::set_gemm_profiling(true);
    model::GemmThreading threading;
    threading.macs_per_thread = 1;  // the split over threads counts as one call
    threading.max_threads = 3;
    for (int i = 0; i < 3; ++i) model::int8_gemm(x.data(), rows, packed, c.data(), true, threading);
    const model::GemmProfile p = model::gemm_profile();
    CHECK(p.calls == 3);
    CHECK(p.macs == 3 * per_call);
    CHECK(p.busy_s > 0);
    // Two threads calling at once: busy time is the union, not the sum, so it
    // is at most the wall time around both.
    model::set_gemm_profiling(true);
    const auto t0 = std::chrono::steady_clock::now();
    std::thread other([&] {
      std::vector<std::int32_t> c2(rows * n);
      for (int i = 0; i < 200; ++i) model::int8_gemm(x.data(), rows, packed, c2.data(), true);
    });
    for (int i = 0; i < 200; ++i) model::int8_gemm(x.data(), rows, packed, c.data(), true);
    other.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const model::GemmProfile q = model::gemm_profile();
    CHECK(q.calls == 400);
    CHECK(q.busy_s <= wall);
    model::set_gemm_profiling(false);
  }
}

TEST_CASE("Prefaulting rows, with huge pages or without, keeps a memory's contents",
          "[fast_path]") {
  // 12 MiB of accumulators (an anonymous mapping outside the sanitizer build):
  // ranges below the prefault threshold (32 KiB), above it, spanning two and
  // more 2 MiB pages, and running past the end.
  const std::uint64_t rows = 12288, width = 256;
  model::RowMemory<std::int32_t> acc(rows, width);
  std::mt19937 rng(14);
  std::vector<std::int32_t> want(rows * width, 0);
  const auto write_rows = [&](std::uint64_t first, std::uint64_t count) {
    for (std::uint64_t i = first * width; i < (first + count) * width; ++i)
      acc.data()[i] = want[i] = static_cast<std::int32_t>(rng());
  };
  write_rows(0, 3);
  write_rows(100, 200);
  write_rows(5000, 7000);
  const std::pair<std::uint64_t, std::uint64_t> ranges[] = {
      {0, 1}, {1, 31}, {0, 64}, {90, 300}, {2000, 2048}, {0, 6000}, {4000, 8288}, {12000, 999}};
  for (const auto& [first, count] : ranges) {
    CAPTURE(first, count);
    acc.prefault(first, count);
    REQUIRE(std::memcmp(acc.data().data(), want.data(), want.size() * sizeof(std::int32_t)) == 0);
    // And the prefaulted rows take writes like any others.
    write_rows(first, std::min(count, rows - first));
    REQUIRE(std::memcmp(acc.data().data(), want.data(), want.size() * sizeof(std::int32_t)) == 0);
  }
}


TEST_CASE("Prefault asks the kernel for each page once", "[fast_path]") {
#if !defined(MADV_POPULATE_WRITE)
  SUCCEED("no MADV_POPULATE_WRITE on this system: prefault is a no-op");
#else
  // 4 MiB of int8 rows of 4 KiB: one row a page, so the expected calls are
  // counted in pages (the threshold is 32 KiB, 8 pages).
  const std::uint64_t rows = 1024, width = 4096;
  model::RowMemory<std::int8_t> m(rows, width);
  m.prefault(0, 7);  // under the threshold: no call
  CHECK(m.prefault_calls() == 0);
  m.prefault(100, 20);  // one call
  CHECK(m.prefault_calls() == 1);
  m.prefault(100, 20);  // hinted before: none
  m.prefault(105, 10);
  CHECK(m.prefault_calls() == 1);
  m.prefault(90, 60);  // pages 90..99 and 120..149: two ranges, both over the threshold
  CHECK(m.prefault_calls() == 3);
  m.prefault(85, 70);  // 85..89 and 150..154: each under the threshold, so none
  CHECK(m.prefault_calls() == 3);
  m.prefault(0, rows + 5);  // the rest: 0..84 and 155..1023 (the first call returned before marking)
  CHECK(m.prefault_calls() == 5);
  m.prefault(0, rows);
  CHECK(m.prefault_calls() == 5);
#endif
}
// The permissions /proc/self/maps gives the mapping that holds address p
// ("" if none holds it).
static std::string mapping_permissions(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= at && at < hi) return perms;
  }
  return "";
}

TEST_CASE("A large memory starts on a 2 MiB boundary between its guard pages", "[fast_path]") {
  // So that prefault's huge pages start at its first row (issue 31: a
  // 4096 x 1024 x 1024 GEMM spent as long faulting 4 KiB pages of C as in
  // its kernels). 3 MiB + 3 bytes: rounded up to pages, one huge page whole.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t width = 3, rows = (std::uint64_t{3} << 20) / 3 + 1;
  model::RowMemory<std::int8_t> m(rows, width);
  const auto* first = reinterpret_cast<const char*>(m.data().data());
  CHECK(reinterpret_cast<std::uintptr_t>(first) % (std::uintptr_t{1} << 21) == 0);
  const std::size_t body = (rows * width + page - 1) / page * page;
  CHECK(mapping_permissions(first - page).rfind("---", 0) == 0);  // the guards
  CHECK(mapping_permissions(first + body).rfind("---", 0) == 0);
  CHECK(mapping_permissions(first).rfind("rw", 0) == 0);
  CHECK(mapping_permissions(first + body - 1).rfind("rw", 0) == 0);
  m.prefault(0, rows);
  for (std::uint64_t r = 0; r < rows; r += 4099) CHECK(m.row(r)[0] == 0);  // zeroed
  m.row(rows - 1)[2] = 7;
  m.row(0)[0] = -3;
  const model::RowMemory<std::int8_t> copy = m;
  CHECK(copy.row(rows - 1)[2] == 7);
  CHECK(copy.row(0)[0] == -3);
  CHECK(copy.same_contents(m));
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
