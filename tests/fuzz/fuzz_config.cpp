// Fuzz target: the JSON configuration reader (src/config) on arbitrary text,
// as --config FILE reads it.
//
// Properties, beyond not crashing: apply_json_overrides either accepts the
// text, leaving a configuration that validates, or throws a ConfigError with
// a one-line message naming the file; it throws nothing else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/arch_config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ArchConfig cfg = preset_config(kDefaultPreset);
  try {
    apply_json_overrides(cfg, text, "fuzz.json");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    FUZZ_CHECK(msg.rfind("fuzz.json: ", 0) == 0, msg);
    FUZZ_CHECK(fuzz::one_line(msg), msg);
    return 0;
  }
  validate(cfg);  // throws (and so crashes the fuzzer) if an accepted value is out of range
  for (const ArchParam& p : arch_params())
    FUZZ_CHECK(cfg.*p.member >= p.min && cfg.*p.member <= p.max, std::string(p.name));
  return 0;
}
