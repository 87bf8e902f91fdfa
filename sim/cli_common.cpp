#include "cli_common.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <csignal>

#include "common/exit_codes.h"
#include "isa/program.h"

namespace tpu::cli {

void ConfigOptions::add_to(CLI::App& app) {
  const std::vector<std::string_view> names = preset_names();
  app.add_option("--preset", preset,
                 fmt::format("named configuration ({})", fmt::join(names, ", ")))
      ->capture_default_str()
      ->check(CLI::IsMember(std::vector<std::string>(names.begin(), names.end())));
  app.add_option("--config", config_path, "JSON file overriding configuration fields")
      ->check(CLI::ExistingFile);
  app.add_option("--array", array_n, "systolic array size N")
      ->check(CLI::Range(isa::kMinArrayN, isa::kMaxArrayN));
}

bool ConfigOptions::config_given(const CLI::App& app) const {
  return app.count("--preset") > 0 || app.count("--config") > 0;
}

ArchConfig ConfigOptions::resolve() const {
  return resolve_config(preset, config_path,
                        array_n ? std::optional<std::uint64_t>(*array_n) : std::nullopt);
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace tpu::cli
