// Command-line pieces every tpu-sim tool shares: --preset, --config, --array,
// and the mapping of errors to exit statuses.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "config/arch_config.h"

namespace tpu::cli {

struct ConfigOptions {
  std::string preset{kDefaultPreset};
  std::optional<std::string> config_path;
  std::optional<unsigned> array_n;

  void add_to(CLI::App& app);
  // True when the user chose a configuration (--preset or --config).
  bool config_given(const CLI::App& app) const;
  ArchConfig resolve() const;
};

// Parses argv; on --help prints and returns 0, on a usage error prints and
// returns kExitUsage; returns nullopt when the command should run.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

}  // namespace tpu::cli
