// Command-line pieces every tpu-sim tool shares: --preset, --config, --array,
// and the mapping of errors to exit statuses.
#pragma once


#include <optional>
#include <string>

#include "config/arch_config.h"

namespace CLI {
class App;
}  // namespace CLI

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
// Every tool calls it first, so it also ignores SIGPIPE for the process: a
// reader that goes early (`tpu-sim ... --stats /dev/stdout | head -1`) then
// cannot end a tool half-way with its temporary files left behind; writes
// into it end quietly instead (common/file_io.h) and the tool runs to its
// usual exit status.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

}  // namespace tpu::cli
