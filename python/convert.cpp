// Python values in and out: JSON <-> Python objects, paths, NumPy arrays
// checked as the tools check .npy files, and programs.
#include <fmt/format.h>

#include <new>
#include <string>
#include <vector>

#include "common/npy.h"
#include "isa/program.h"
#include "module.h"
#include "run/sweep_workload.h"

namespace tpu::python {

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& v : j) l.append(to_python(v));
      return std::move(l);
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_python(v);
      return std::move(d);
    }
    default: return py::none();
  }
}

nlohmann::json to_json(py::handle o, const std::string& what) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();
  if (py::isinstance<py::int_>(o)) {
    const py::int_ i = py::reinterpret_borrow<py::int_>(o);
    if (py::int_(0) > i) return o.cast<std::int64_t>();
    return o.cast<std::uint64_t>();
  }
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::isinstance<py::dict>(o)) {
    nlohmann::json j = nlohmann::json::object();
    for (auto item : py::reinterpret_borrow<py::dict>(o))
      j[py::str(item.first).cast<std::string>()] = to_json(item.second, what);
    return j;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    nlohmann::json j = nlohmann::json::array();
    for (auto item : o) j.push_back(to_json(item, what));
    return j;
  }
  // NumPy scalars and os.PathLike.
  if (py::hasattr(o, "item") && py::hasattr(o, "dtype")) return to_json(o.attr("item")(), what);
  if (py::hasattr(o, "__fspath__")) return o.attr("__fspath__")().cast<std::string>();
  raise_error(kExitUsage, fmt::format("{}: cannot convert {} to JSON", what,
                                      py::str(py::type::handle_of(o)).cast<std::string>()));
}

// str or os.PathLike -> a path.
std::string path_of(py::handle o, const std::string& what) {
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::hasattr(o, "__fspath__")) {
    py::object p = o.attr("__fspath__")();
    if (py::isinstance<py::str>(p)) return p.cast<std::string>();
  }
  raise_error(kExitUsage, fmt::format("{}: expected a path (str or os.PathLike)", what));
}

std::string describe(const py::array& a) {
  std::vector<std::size_t> shape(a.shape(), a.shape() + a.ndim());
  return fmt::format("a {}-D {} array of shape {}", a.ndim(), py::str(a.dtype()).cast<std::string>(),
                     format_shape(shape));
}

[[noreturn]] void raise_out_of_memory(const std::string& what) {
  raise_error(kExitBadInput, fmt::format("{}: {}", what, sweep::message_of(std::bad_alloc())));
}

compiler::MatrixI8 matrix_arg(py::handle o, const std::string& what, const std::string& desc) {
  const py::array a = typed_array<std::int8_t>(o, 2, what, desc);
  const auto v = a.unchecked<std::int8_t, 2>();
  compiler::MatrixI8 m;
  m.rows = static_cast<std::size_t>(v.shape(0));
  m.cols = static_cast<std::size_t>(v.shape(1));
  m.data.resize(m.rows * m.cols);  // std::bad_alloc: InputError "out of memory" (translate)
  std::int8_t* out = m.data.data();
  for (py::ssize_t i = 0; i < v.shape(0); ++i)
    for (py::ssize_t j = 0; j < v.shape(1); ++j) *out++ = v(i, j);
  return m;
}

isa::Program program_arg(py::handle o) {
  if (py::isinstance<isa::Program>(o)) return o.cast<isa::Program>();
  if (py::isinstance<py::bytes>(o)) {
    const std::string s = o.cast<std::string>();
    return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
  }
  return isa::load_program(path_of(o, "program"));
}

}  // namespace tpu::python
