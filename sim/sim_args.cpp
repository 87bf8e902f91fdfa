#include "sim_args.h"

#include <CLI/CLI.hpp>

namespace tpu::cli {

void SimArgs::add_to(CLI::App& app) {
  app.add_option("--stats", stats, "write statistics as JSON here");
  auto* vcd_opt = app.add_option(
      "--vcd", vcd,
      "write a waveform here (.vcd) and a GTKWave save file beside it (.gtkw): the SystemC "
      "model's units, or with --engine rtl every signal of the RTL core; --engine both writes "
      "both, the RTL's as NAME.rtl.vcd and NAME.rtl.gtkw");
  app.add_option("--fst", fst,
                 "like --vcd, in GTKWave's compressed FST format (converted from the VCD): "
                 "NAME.fst and NAME.gtkw, and NAME.rtl.fst with --engine both")
      ->excludes(vcd_opt);
  app.add_flag("--trace", trace,
               "print one line per instruction (issue, start, completion) and the stall runs before it");
  app.add_option("--timeline", timeline,
                 "write the run as a Chrome trace (.json; open in Perfetto or chrome://tracing)");
  app.add_option("--max-cycles", max_cycles, "stop with a fault after this many cycles")
      ->capture_default_str();
  // Advanced, for tests and benchmarks: both levels give identical results.
  app.add_option("--detail", detail,
                 "model detail: auto (detailed iff --vcd), detailed (every PE, every cycle) or "
                 "fast (one GEMM per MMC, idle cycles skipped); results are identical")
      ->check(CLI::IsMember({"auto", "detailed", "fast"}))
      ->group("");
  app.add_option("--engine", engine,
                 "systemc (the SystemC model), rtl (the Verilated RTL core) or both (in lock "
                 "step, reporting the first divergence)")
      ->check(CLI::IsMember({"systemc", "rtl", "both"}))
      ->capture_default_str();
  cfg.add_to(app);
}

}  // namespace tpu::cli
