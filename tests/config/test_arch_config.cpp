// The machine configuration: presets, JSON overrides, validation and the
// command-line resolution (preset, then config file, then --array).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "config/arch_config.h"

namespace {

using Catch::Matchers::Contains;
using tpu::apply_json_overrides;
using tpu::ArchConfig;
using tpu::ConfigError;
using tpu::preset_config;
using tpu::resolve_config;

const std::string kOrigin = "configs/override.json";

// The ConfigError message for applying `json` to the small8 preset, or a
// marker when it is accepted.
std::string override_error(const std::string& json) {
  ArchConfig cfg = preset_config("small8");
  try {
    apply_json_overrides(cfg, json, kOrigin);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

ArchConfig with_overrides(const std::string& base, const std::string& json) {
  ArchConfig cfg = preset_config(base);
  apply_json_overrides(cfg, json, kOrigin);
  return cfg;
}

void check_rejected(const std::vector<std::string>& jsons, const std::string& reason) {
  for (const std::string& json : jsons) {
    INFO("json: " << json);
    const std::string msg = override_error(json);
    CHECK_THAT(msg, Contains(kOrigin) && Contains(reason));
  }
}

// The fields of a configuration, for whole-config comparisons.
std::vector<std::uint64_t> fields(const ArchConfig& c) {
  return {c.array_n, c.host_rows, c.weight_tiles, c.ub_rows, c.acc_rows, c.fifo_depth};
}

// A file in the system temporary folder, removed at the end of the test.
struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& contents)
      : path((std::filesystem::temp_directory_path() /
              ("tpu_test_" + std::to_string(::getpid()) + "_" + name))
                 .string()) {
    std::ofstream(path) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

// ---- Presets ---------------------------------------------------------------

TEST_CASE("every preset validates and carries its own name", "[config]") {
  const auto names = tpu::preset_names();
  REQUIRE_FALSE(names.empty());
  for (std::string_view name : names) {
    INFO(name);
    const ArchConfig cfg = preset_config(name);
    CHECK(cfg.preset == name);
    CHECK_NOTHROW(tpu::validate(cfg));
  }
}

TEST_CASE("the presets are tpuv1, small4, small8 and small16 with small8 the default", "[config]") {
  const auto names = tpu::preset_names();
  CHECK(std::vector<std::string>(names.begin(), names.end()) ==
        std::vector<std::string>{"tpuv1", "small4", "small8", "small16"});
  CHECK(tpu::kDefaultPreset == "small8");
  CHECK(preset_config("small4").array_n == 4);
  CHECK(preset_config("small8").array_n == 8);
  CHECK(preset_config("small16").array_n == 16);
}

TEST_CASE("tpuv1 has the sizes of the TPUv1 paper", "[config]") {
  // Jouppi et al., ISCA 2017: 256x256 MACs, a 24 MiB unified buffer of
  // 256-byte rows, 4096 accumulator rows and a weight FIFO four tiles deep.
  const ArchConfig cfg = preset_config("tpuv1");
  CHECK(cfg.array_n == 256);
  CHECK(cfg.ub_rows == 24u * 1024 * 1024 / 256);
  CHECK(cfg.ub_rows == 98304);
  CHECK(cfg.acc_rows == 4096);
  CHECK(cfg.fifo_depth == 4);
  // Table 2 and Figure 1: 8 GiB of DDR3 weight memory, tiles of 256 x 256 int8.
  CHECK(cfg.weight_tiles * cfg.array_n * cfg.array_n == 8ull << 30);
}

TEST_CASE("an unknown preset name is a ConfigError listing the known ones", "[config]") {
  CHECK_THROWS_AS(preset_config("tpuv2"), ConfigError);
  CHECK_THROWS_WITH(preset_config("tpuv2"), Contains("tpuv2") && Contains("tpuv1") &&
                                                Contains("small8"));
  CHECK_THROWS_AS(preset_config("TPUV1"), ConfigError);
}

TEST_CASE("the presets have the documented sizes", "[config]") {
  // docs/isa.md section 9.
  CHECK(fields(preset_config("tpuv1")) ==
        std::vector<std::uint64_t>{256, 262144, 131072, 98304, 4096, 4});
  for (const auto& [name, n] : {std::pair{"small4", 4}, {"small8", 8}, {"small16", 16}}) {
    INFO(name);
    CHECK(fields(preset_config(name)) ==
          std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), 1048576, 65536, 16384, 4096, 4});
  }
}

TEST_CASE("the documented fields are configurable with their documented limits", "[config]") {
  // docs/isa.md section 9; other fields may follow these.
  struct Doc {
    const char* name;
    std::uint64_t min, max;
  };
  const std::vector<Doc> doc = {
      {"array_n", 4, 256},          {"host_rows", 1, std::uint64_t{1} << 32},
      {"weight_tiles", 1, 1u << 24}, {"ub_rows", 1, 1u << 24},
      {"acc_rows", 1, 1u << 24},     {"fifo_depth", 1, 64},
  };
  const auto& params = tpu::arch_params();
  REQUIRE(params.size() >= doc.size());
  for (std::size_t i = 0; i < doc.size(); ++i) {
    INFO(doc[i].name);
    CHECK(params[i].name == doc[i].name);
    CHECK(params[i].min == doc[i].min);
    CHECK(params[i].max == doc[i].max);
  }
}

TEST_CASE("size_of gives each memory's size in its own units", "[config]") {
  ArchConfig cfg;
  cfg.host_rows = 11;
  cfg.weight_tiles = 22;
  cfg.ub_rows = 33;
  cfg.acc_rows = 44;
  CHECK(cfg.size_of(tpu::isa::Space::HostMem) == 11);
  CHECK(cfg.size_of(tpu::isa::Space::WeightMem) == 22);
  CHECK(cfg.size_of(tpu::isa::Space::UnifiedBuffer) == 33);
  CHECK(cfg.size_of(tpu::isa::Space::Accumulators) == 44);
}

// ---- Validation --------------------------------------------------------------

TEST_CASE("validate rejects every field just outside its range", "[config]") {
  struct Limit {
    std::uint64_t ArchConfig::*member;
    const char* name;
    std::uint64_t min, max;
  };
  const std::vector<Limit> limits = {
      {&ArchConfig::array_n, "array_n", 4, 256},
      {&ArchConfig::host_rows, "host_rows", 1, std::uint64_t{1} << 32},
      {&ArchConfig::weight_tiles, "weight_tiles", 1, 1u << 24},
      {&ArchConfig::ub_rows, "ub_rows", 1, 1u << 24},
      {&ArchConfig::acc_rows, "acc_rows", 1, 1u << 24},
      {&ArchConfig::fifo_depth, "fifo_depth", 1, 64},
  };
  for (const Limit& l : limits) {
    INFO(l.name);
    ArchConfig cfg = preset_config("small8");
    cfg.*l.member = l.min;
    CHECK_NOTHROW(tpu::validate(cfg));
    cfg.*l.member = l.max;
    CHECK_NOTHROW(tpu::validate(cfg));
    for (std::uint64_t bad : {l.min - 1, l.max + 1}) {
      cfg.*l.member = bad;
      CHECK_THROWS_WITH(tpu::validate(cfg), Contains(l.name) && Contains("out of range"));
    }
  }
}

// ---- JSON overrides ----------------------------------------------------------

TEST_CASE("JSON overrides change only the fields they name", "[config][json]") {
  const ArchConfig base = preset_config("small8");
  const ArchConfig cfg = with_overrides("small8", R"({"ub_rows": 1000, "fifo_depth": 8})");
  CHECK(cfg.ub_rows == 1000);
  CHECK(cfg.fifo_depth == 8);
  CHECK(cfg.preset == base.preset);
  CHECK(cfg.array_n == base.array_n);
  CHECK(cfg.host_rows == base.host_rows);
  CHECK(cfg.weight_tiles == base.weight_tiles);
  CHECK(cfg.acc_rows == base.acc_rows);
  CHECK(fields(with_overrides("small8", "{}")) == fields(base));
}

TEST_CASE("every field can be overridden from JSON", "[config][json]") {
  const ArchConfig cfg = with_overrides(
      "small8",
      R"({"array_n": 16, "host_rows": 12345, "weight_tiles": 77, "ub_rows": 999,
          "acc_rows": 512, "fifo_depth": 9})");
  CHECK(fields(cfg) == std::vector<std::uint64_t>{16, 12345, 77, 999, 512, 9});
}

TEST_CASE("a preset named in JSON applies before the other fields in any key order",
          "[config][json]") {
  // nlohmann::json keeps keys sorted, so "array_n" comes before "preset".
  for (const char* json : {R"({"array_n": 16, "preset": "tpuv1", "ub_rows": 500})",
                           R"({"preset": "tpuv1", "ub_rows": 500, "array_n": 16})",
                           R"({"ub_rows": 500, "array_n": 16, "preset": "tpuv1"})"}) {
    INFO(json);
    const ArchConfig cfg = with_overrides("small8", json);
    CHECK(cfg.preset == "tpuv1");
    CHECK(cfg.array_n == 16);
    CHECK(cfg.ub_rows == 500);
    CHECK(cfg.acc_rows == 4096);
  }
}

TEST_CASE("a preset named in JSON replaces the base configuration", "[config][json]") {
  CHECK(fields(with_overrides("small8", R"({"preset": "tpuv1"})")) ==
        fields(preset_config("tpuv1")));
}

TEST_CASE("JSON values at the limits of each field are accepted", "[config][json]") {
  CHECK(with_overrides("small8", R"({"array_n": 4})").array_n == 4);
  CHECK(with_overrides("small8", R"({"array_n": 256})").array_n == 256);
  CHECK(with_overrides("small8", R"({"fifo_depth": 1})").fifo_depth == 1);
  CHECK(with_overrides("small8", R"({"fifo_depth": 64})").fifo_depth == 64);
  CHECK(with_overrides("small8", R"({"ub_rows": 16777216})").ub_rows == 16777216);
  CHECK(with_overrides("small8", R"({"host_rows": 4294967296})").host_rows == 4294967296);
}

TEST_CASE("an unknown JSON field is rejected naming the origin", "[config][json]") {
  check_rejected({R"({"ub_row": 5})", R"({"UB_ROWS": 5})", R"({"ub_rows": 5, "extra": 1})"},
                 "unknown field");
}

TEST_CASE("negative and non-integer JSON values are rejected naming the origin", "[config][json]") {
  check_rejected({R"({"ub_rows": -1})", R"({"fifo_depth": -4})", R"({"ub_rows": 1.5})",
                  R"({"ub_rows": 2.0})", R"({"ub_rows": 1e3})"},
                 "must be a non-negative integer");
}

TEST_CASE("JSON values of the wrong type are rejected naming the origin", "[config][json]") {
  check_rejected({R"({"ub_rows": "8"})", R"({"ub_rows": true})", R"({"ub_rows": null})",
                  R"({"ub_rows": [8]})", R"({"ub_rows": {"v": 8}})"},
                 "must be a non-negative integer");
  check_rejected({R"({"preset": 1})", R"({"preset": null})"}, "'preset' must be a string");
  check_rejected({"[1]", "5", R"("small8")", "null"}, "expected a JSON object");
}

TEST_CASE("invalid JSON is rejected naming the origin", "[config][json]") {
  check_rejected({"", "{", R"({"ub_rows": })", R"({"ub_rows": 5,})", "{ub_rows: 5}"},
                 "invalid JSON");
}

TEST_CASE("a number too large for JSON is invalid JSON naming the origin", "[config][json]") {
  // Found by tests/fuzz/fuzz_config: nlohmann throws out_of_range, not parse_error, for these.
  check_rejected({R"({"ub_rows": 1e999})", R"({"ub_rows": -1e999})", R"({"x": [8E88888]})"},
                 "invalid JSON");
}

TEST_CASE("names from a JSON file are shown escaped on one line", "[config][json]") {
  // Found by tests/fuzz/fuzz_config: a key with a newline gave a two-line message.
  CHECK(override_error(R"({"ub\nrows": 1})") == kOrigin + ": unknown field 'ub\\nrows'");
  CHECK_THAT(override_error(R"({"preset": "small\n8"})"),
             Contains(kOrigin + ": unknown preset 'small\\n8' (known: "));
  CHECK_THAT(override_error(R"({"\u0001\"": 1})"), Contains("unknown field '\\u0001\\\"'"));
}

TEST_CASE("out-of-range JSON values are rejected naming the origin", "[config][json]") {
  check_rejected({R"({"array_n": 3})", R"({"array_n": 257})", R"({"array_n": 0})",
                  R"({"fifo_depth": 0})", R"({"fifo_depth": 65})", R"({"ub_rows": 0})",
                  R"({"ub_rows": 16777217})", R"({"acc_rows": 16777217})",
                  R"({"weight_tiles": 16777217})", R"({"host_rows": 4294967297})",
                  R"({"host_rows": 18446744073709551615})"},
                 "out of range");
}

TEST_CASE("an unknown preset named in JSON is rejected naming the origin",
          "[config][json]") {
  // apply_json_overrides promises that `origin` names every error it throws.
  check_rejected({R"({"preset": "tpuv9"})"}, "unknown preset 'tpuv9'");
}

// ---- resolve_config ----------------------------------------------------------

TEST_CASE("resolve_config without a file or --array gives the preset", "[config][resolve]") {
  CHECK(fields(resolve_config("tpuv1", std::nullopt, std::nullopt)) ==
        fields(preset_config("tpuv1")));
  CHECK_THROWS_AS(resolve_config("nope", std::nullopt, std::nullopt), ConfigError);
}

TEST_CASE("resolve_config applies the config file over the preset", "[config][resolve]") {
  const TempFile file("resolve_file.json", R"({"acc_rows": 100, "array_n": 32})");
  const ArchConfig cfg = resolve_config("small8", file.path, std::nullopt);
  CHECK(cfg.acc_rows == 100);
  CHECK(cfg.array_n == 32);
  CHECK(cfg.ub_rows == preset_config("small8").ub_rows);
}

TEST_CASE("resolve_config's --array wins over the preset and the config file",
          "[config][resolve]") {
  const TempFile file("resolve_array.json", R"({"array_n": 32, "preset": "tpuv1"})");
  CHECK(resolve_config("small8", file.path, 64).array_n == 64);
  CHECK(resolve_config("tpuv1", std::nullopt, 4).array_n == 4);
}

TEST_CASE("resolve_config rejects an --array outside 4..256", "[config][resolve]") {
  CHECK_THROWS_AS(resolve_config("small8", std::nullopt, 3), ConfigError);
  CHECK_THROWS_AS(resolve_config("small8", std::nullopt, 257), ConfigError);
}

TEST_CASE("resolve_config's errors in a config file name its path", "[config][resolve]") {
  const TempFile file("resolve_bad.json", R"({"fifo_depth": 0})");
  CHECK_THROWS_WITH(resolve_config("small8", file.path, std::nullopt),
                    Contains(file.path) && Contains("fifo_depth"));
  CHECK_THROWS_AS(resolve_config("small8", file.path + ".missing", std::nullopt), tpu::FileError);
}

// ---- The inputs tests/fuzz/fuzz_config found ------------------------------------

// Each file of tests/fuzz/regressions/fuzz_config, read as --config FILE reads
// it, gives exactly one line naming the file and the reason; run_fuzzers.sh
// replays the same files on every run.
TEST_CASE("the fuzz_config regression files give one-line errors naming the file",
          "[config][resolve][fuzz]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TPU_SOURCE_DIR) / "tests/fuzz/regressions/fuzz_config";
  const auto error_of = [&](const std::string& file) -> std::string {
    try {
      resolve_config("small8", (dir / file).string(), std::nullopt);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "<accepted>";
  };
  const auto path = [&](const std::string& file) { return (dir / file).string(); };

  // {"ub_rows": 1e999}: the number is beyond a double; nlohmann reports it as
  // out_of_range 406 ("number overflow"), which must still be "invalid JSON".
  const std::string overflow = error_of("number_overflow.json");
  CHECK_THAT(overflow,
             Catch::Matchers::StartsWith(path("number_overflow.json") + ": invalid JSON: ") &&
                 Contains("number overflow") && Contains("1e999"));
  CHECK(overflow.find('\n') == std::string::npos);

  // Keys "array\n", "lesws" and "y" (a JSON object's keys are visited in
  // sorted order): the first unknown one is "array" and a newline, shown as
  // the JSON escape \n so that the message stays on one line.
  CHECK(error_of("unknown_field_newline.json") ==
        path("unknown_field_newline.json") + ": unknown field 'array\\n'");

  // {"preset": "small\n8"}: the name is escaped the same way, then the known presets.
  CHECK(error_of("unknown_preset_newline.json") ==
        path("unknown_preset_newline.json") +
            ": unknown preset 'small\\n8' (known: tpuv1, small4, small8, small16)");

  std::vector<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(dir)) on_disk.push_back(entry.path().filename());
  std::sort(on_disk.begin(), on_disk.end());
  // A new regression input needs its expected message here.
  CHECK(on_disk == std::vector<std::string>{"number_overflow.json", "unknown_field_newline.json",
                                            "unknown_preset_newline.json"});
}
