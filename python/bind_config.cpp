// tpusim.Config: a machine configuration (a preset, a file of overrides,
// fields), its fields as attributes, and the presets.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "config/arch_config.h"
#include "module.h"
#include "rtl_engine/rtl_engine.h"

namespace tpu::python {

void set_field(ArchConfig& cfg, const std::string& name, py::handle value) {
  if (name == "preset") {
    raise_error(kExitUsage, "preset: choose the preset when creating the configuration "
                            "(tpusim.Config(preset, ...))");
  }
  nlohmann::json j = nlohmann::json::object();
  j[name] = to_json(value, name);
  apply_json_overrides(cfg, j.dump(), "overrides");
}

ArchConfig make_config(const std::string& preset, const std::optional<std::string>& file,
                       std::optional<std::uint64_t> array_n, const py::kwargs& fields) {
  ArchConfig cfg = resolve_config(preset, file, std::nullopt);
  for (auto item : fields) set_field(cfg, py::str(item.first).cast<std::string>(), item.second);
  if (array_n) {
    if (*array_n < isa::kMinArrayN || *array_n > isa::kMaxArrayN)
      raise_error(kExitUsage, fmt::format("array_n: {} is outside {}..{}", *array_n, isa::kMinArrayN,
                                          isa::kMaxArrayN));
    cfg.array_n = *array_n;
  }
  validate(cfg);
  return cfg;
}

py::dict config_dict(const ArchConfig& cfg) {
  py::dict d;
  d["preset"] = cfg.preset;
  for (const ArchParam& p : arch_params()) d[py::str(std::string(p.name))] = cfg.*p.member;
  return d;
}

// The `config` argument: a Config, a preset name, a dict of fields (with an
// optional "preset"), or None (the default preset).
ArchConfig config_arg(py::handle o) {
  if (o.is_none()) return make_config(std::string(kDefaultPreset), std::nullopt, std::nullopt, {});
  if (py::isinstance<ArchConfig>(o)) return o.cast<ArchConfig>();
  if (py::isinstance<py::str>(o))
    return make_config(o.cast<std::string>(), std::nullopt, std::nullopt, {});
  if (py::isinstance<py::dict>(o)) {
    py::dict fields = py::reinterpret_borrow<py::dict>(o);
    std::string preset(kDefaultPreset);
    py::kwargs rest;
    for (auto item : fields) {
      const std::string key = py::str(item.first).cast<std::string>();
      if (key == "preset") preset = item.second.cast<std::string>();
      else rest[item.first] = item.second;
    }
    return make_config(preset, std::nullopt, std::nullopt, rest);
  }
  raise_error(kExitUsage, "config: expected a tpusim.Config, a preset name, a dict of fields or None");
}

void bind_config(py::module_& m) {
  // Configurations.
  py::class_<ArchConfig> config_cls(m, "Config", R"doc(
A machine configuration: a preset, then a JSON file of overrides (`file`, the
tools' --config), then field overrides, then `array_n` (the tools' --array).
Every field is an attribute; tpusim.Config.fields() describes them. Invalid
values raise tpusim.InputError with the tools' message.)doc");
  config_cls.def(py::init([](const std::string& preset, const py::object& file,
                         std::optional<std::uint64_t> array_n, const py::kwargs& fields) {
               std::optional<std::string> path;
               if (!file.is_none()) path = path_of(file, "file");
               return make_config(preset, path, array_n, fields);
             }),
             py::arg("preset") = std::string(kDefaultPreset), py::kw_only(), py::arg("file") = py::none(),
             py::arg("array_n") = py::none(),
             "Config(preset='small8', *, file=None, array_n=None, **fields)")
      .def_property_readonly("preset", [](const ArchConfig& c) { return c.preset; },
                             "The preset this configuration started from.")
      .def("replace",
           [](const ArchConfig& c, const py::kwargs& fields) {
             ArchConfig copy = c;
             for (auto item : fields) {
               const std::string key = py::str(item.first).cast<std::string>();
               if (key == "array_n") {
                 const auto n = item.second.cast<std::uint64_t>();
                 if (n < isa::kMinArrayN || n > isa::kMaxArrayN)
                   raise_error(kExitUsage, fmt::format("array_n: {} is outside {}..{}", n,
                                                       isa::kMinArrayN, isa::kMaxArrayN));
                 copy.array_n = n;
               } else {
                 set_field(copy, key, item.second);
               }
             }
             validate(copy);
             return copy;
           },
           "A copy with some fields changed (array_n keeps the other sizes, like --array).")
      .def("to_dict", &config_dict, "Every field, and 'preset', as a dict.")
      .def("__eq__", [](const ArchConfig& a, const ArchConfig& b) {
        if (a.preset != b.preset) return false;
        for (const ArchParam& p : arch_params())
          if (a.*p.member != b.*p.member) return false;
        return true;
      })
      .def("__repr__", [](const ArchConfig& c) {
        std::string s = fmt::format("tpusim.Config('{}'", c.preset);
        const ArchConfig base = preset_config(c.preset);
        for (const ArchParam& p : arch_params())
          if (c.*p.member != base.*p.member) s += fmt::format(", {}={}", p.name, c.*p.member);
        return s + ")";
      })
      .def_static("fields",
                  []() {
                    py::list l;
                    for (const ArchParam& p : arch_params()) {
                      py::dict d;
                      d["name"] = std::string(p.name);
                      d["description"] = std::string(p.description);
                      d["min"] = p.min;
                      d["max"] = p.max;
                      l.append(d);
                    }
                    return l;
                  },
                  "Every configurable field: name, description, min and max.")
      .def(py::pickle([](const ArchConfig& c) { return config_dict(c); },
                      [](const py::dict& d) { return config_arg(d); }));
  config_cls.attr("__hash__") = py::none();
  for (const ArchParam& p : arch_params()) {
    const std::string name(p.name);
    auto member = p.member;
    config_cls.def_property(
        name.c_str(), [member](const ArchConfig& c) { return c.*member; },
        [name](ArchConfig& c, py::handle v) {
          ArchConfig copy = c;
          set_field(copy, name, v);
          c = copy;
        },
        std::string(p.description).c_str());
  }
  m.def("presets", []() {
        std::vector<std::string> names;
        for (auto n : preset_names()) names.emplace_back(n);
        return names;
      },
      "The names of the configuration presets.");
  m.attr("DEFAULT_PRESET") = std::string(kDefaultPreset);
  m.def("rtl_builds", &rtl::built_configs,
        "The configurations the RTL core was Verilated for in this build (engine='rtl' or 'both' "
        "needs one of them).");
}

}  // namespace tpu::python
