// tpu-as: assembles a tpu-sim program (docs/isa.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "asm/assembler.h"
#include "cli_common.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"

int main(int argc, char** argv) {
  using namespace tpu;
  CLI::App app{"tpu-as: assemble a tpu-sim program"};
  std::string source_path;
  std::string out_path;
  cli::ConfigOptions cfg_opts;
  app.add_option("source", source_path, "assembly source (.s)")->required();
  app.add_option("-o,--output", out_path, "program file to write (default: SOURCE with .tpu)");
  cfg_opts.add_to(app);
  app.footer(
      "Operands are checked against memory sizes when --preset or --config is given.\n"
      "Exit status: 0 ok, 1 assembly errors, 2 usage error, 3 unreadable input.");
  if (auto rc = cli::parse(app, argc, argv)) return *rc;

  try {
    const std::string text = read_file_text(source_path);
    std::optional<ArchConfig> cfg;
    if (cfg_opts.config_given(app)) cfg = cfg_opts.resolve();
    assembler::Options opts;
    opts.array_n = cfg_opts.array_n;
    opts.config = cfg ? &*cfg : nullptr;
    opts.default_array_n = static_cast<unsigned>(preset_config(kDefaultPreset).array_n);
    const assembler::Result res = assembler::assemble(text, opts);
    if (!res.diagnostics.empty()) {
      std::cerr << assembler::format_diagnostics(source_path, text, res.diagnostics);
      std::cerr << fmt::format("{} generated.\n", plural(res.diagnostics.size(), "error"));
      return kExitAsmError;
    }
    if (out_path.empty())
      out_path = std::filesystem::path(source_path).replace_extension(".tpu").string();
    write_file_atomic(out_path, isa::serialize(*res.program));
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "tpu-as: error: " << e.what() << '\n';
    return kExitBadInput;
  }
}
