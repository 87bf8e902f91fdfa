// tpu-cosim: runs constrained-random programs on the SystemC model and the
// RTL core in lock step and reports the first divergence. A diverging
// program is shrunk (instructions removed while it still diverges) to a small
// reproducer, written as assembly next to its memory images and timing.
//
// Each program runs with the memory channels' latencies and bandwidths (and the
// host's layout time of an HWT, host_layout_cycles, and ub_weight_path, which
// lets the program draw RWU) drawn
// from its seed (testing::random_timing, within what the RTL build's ports take),
// unless --fixed-timing keeps the configuration's.
//
//   tpu-cosim --seed S [--count K] [--preset P] [--fixed-timing] [--out-dir D]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"
#include "common/npy.h"
#include "random_program/random_program.h"
#include "rtl_engine/rtl_engine.h"

namespace {

using namespace tpu;

struct Outcome {
  std::optional<rtl::Divergence> divergence;
  model::Cycle cycles = 0;
};

Outcome cosimulate(const ArchConfig& cfg, const isa::Program& prog, const model::Memories& init) {
  model::Memories a = init, b = init;
  model::RunOptions opts;
  opts.max_cycles = 1'000'000;
  const model::RunLog la = model::run_program(cfg, prog, a, opts);
  const model::RunLog lb = rtl::run_program(cfg, prog, b, opts);
  return {rtl::compare(prog, la, a, lb, b), la.stats.cycles};
}

// Removes instructions (never the final HLT) while the program still diverges.
isa::Program shrink(const ArchConfig& cfg, isa::Program prog, const model::Memories& init) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t i = 0; i + 1 < prog.code.size();) {
      isa::Program smaller = prog;
      smaller.code.erase(smaller.code.begin() + static_cast<std::ptrdiff_t>(i));
      if (cosimulate(cfg, smaller, init).divergence) {
        prog = std::move(smaller);
        progress = true;
      } else {
        ++i;
      }
    }
  }
  return prog;
}

// The memory timing of a run, as a configuration file's overrides.
std::string timing_json(const ArchConfig& cfg) {
  return fmt::format("{{\"host_latency\": {}, \"host_bytes_per_cycle\": {}, \"weight_latency\": {}, "
                     "\"weight_bytes_per_cycle\": {}, \"host_layout_cycles\": {}, \"ub_weight_path\": {}}}",
                     cfg.host_latency, cfg.host_bytes_per_cycle, cfg.weight_latency, cfg.weight_bytes_per_cycle,
                     cfg.host_layout_cycles, cfg.ub_weight_path);
}

void write_reproducer(const std::string& dir, std::uint64_t seed, const ArchConfig& cfg, const isa::Program& prog,
                      const model::Memories& init, const rtl::Divergence& d) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::string stem = fmt::format("{}/cosim_seed_{}", dir, seed);
  write_file_atomic(stem + ".json", timing_json(cfg) + "\n");
  std::string text = fmt::format("; tpu-cosim seed {}: {}\n; preset {}, memory timing {} ({}.json)\n.array {}\n",
                                 seed, d.message(), cfg.preset, timing_json(cfg), stem, prog.array_n);
  for (const isa::Instruction& in : prog.code) text += isa::disassemble(in) + "\n";
  // The windows random programs use; the rest of each memory is zero.
  const testing::Windows w;
  const std::size_t n = prog.array_n;
  const auto head = [](const auto& span, std::size_t count) {
    return std::vector<std::int8_t>(span.begin(), span.begin() + count);
  };
  write_npy(stem + ".host.npy",
            NpyArray::of<std::int8_t>({w.host_rows, n}, head(init.host.data(), w.host_rows * n)));
  write_npy(stem + ".weights.npy",
            NpyArray::of<std::int8_t>({w.weight_tiles, n, n},
                                      head(init.weights.data(), w.weight_tiles * n * n)));
  text += "; UB and ACC windows start random: reproduce with tpu-cosim --seed " +
          std::to_string(seed) + "\n";
  write_file_atomic(stem + ".s", text);
  std::cerr << fmt::format("tpu-cosim: reproducer: {}.s ({})\n", stem, plural(prog.code.size(), "instruction"));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpu-cosim: random programs on the SystemC model and the RTL, compared cycle for cycle"};
  std::uint64_t seed = 1;
  std::uint64_t count = 100;
  std::string out_dir = "cosim-failures";
  cli::ConfigOptions cfg_opts;
  app.add_option("--seed", seed, "first seed")->capture_default_str();
  app.add_option("--count", count, "number of programs (seeds seed .. seed + count - 1)")
      ->capture_default_str();
  app.add_option("--out-dir", out_dir, "where a shrunk reproducer is written")->capture_default_str();
  bool fixed_timing = false;
  app.add_flag("--fixed-timing", fixed_timing,
               "run every program with the configuration's memory latencies and bandwidths, not random ones");
  cfg_opts.add_to(app);
  app.footer("Exit status: 0 all agree, 2 usage error, 3 no RTL build for the configuration, "
             "5 the models diverge.");
  if (auto rc = cli::parse(app, argc, argv)) return *rc;
  try {
    const ArchConfig base = cfg_opts.resolve();
    rtl::require_build(base);
    const rtl::PortWidths ports = *rtl::port_widths(base);
    model::Cycle total_cycles = 0;
    for (std::uint64_t s = seed; s < seed + count; ++s) {
      const ArchConfig cfg =
          fixed_timing ? base
                       : testing::random_timing(base, ports.host_bytes_per_cycle, ports.weight_bytes_per_cycle, s);
      const isa::Program prog = testing::random_program(cfg, s);
      model::Memories init(cfg);
      testing::random_memories(init, s);
      const Outcome out = cosimulate(cfg, prog, init);
      total_cycles += out.cycles;
      if (out.divergence) {
        std::cerr << fmt::format("tpu-cosim: seed {} ({}): {}\n", s, timing_json(cfg), out.divergence->message());
        const isa::Program small = shrink(cfg, prog, init);
        const Outcome again = cosimulate(cfg, small, init);
        write_reproducer(out_dir, s, cfg, small, init, again.divergence ? *again.divergence : *out.divergence);
        return kExitDivergence;
      }
    }
    std::cout << fmt::format("tpu-cosim: {} ({}) on {} with N={}{}: the RTL and the model agree on "
                             "every retire cycle, statistic and memory ({} cycles)\n",
                             plural(count, "program"), plural_range(seed, count, "seed"), base.preset,
                             base.array_n, fixed_timing ? "" : " and random memory timing", total_cycles);
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "tpu-cosim: error: " << e.what() << '\n';
    return kExitBadInput;
  }
}
