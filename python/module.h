// What the files of the extension _tpusim share (python/*.cpp; the module's
// entry point is tpusim_module.cpp): raising the tpusim exceptions, Python
// <-> JSON, paths, configurations, NumPy arrays in and out, and programs, plus
// each file's bind_* function that adds its part of the API to the module.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "compiler/gemm.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/run_log.h"
#include "run/sweep_workload.h"

namespace py = pybind11;

namespace tpu::python {

// ---- Exceptions (errors.cpp) ---------------------------------------------------

// An error to raise as the tpusim exception of `code`, with extra attributes.
struct PyTpuError {
  int code;
  std::string message;
  py::dict attrs;
};

[[noreturn]] inline void raise_error(int code, const std::string& message, py::dict attrs = {}) {
  throw PyTpuError{code, message, std::move(attrs)};
}

// A fault as the dict of FaultError.fault and RunResult.fault.
py::dict fault_dict(const model::Fault& f);

// ---- JSON <-> Python, paths, arrays, programs (convert.cpp) ----------------------

py::object to_python(const nlohmann::json& j);
nlohmann::json to_json(py::handle o, const std::string& what);
// str or os.PathLike -> a path.
std::string path_of(py::handle o, const std::string& what);

// "a 2-D int8 array of shape (3, 4)": an array as messages describe it.
std::string describe(const py::array& a);
// InputError "WHAT: out of memory ..." (the tools' words).
[[noreturn]] void raise_out_of_memory(const std::string& what);

// `o` as a NumPy array of dtype T and rank `rank`, not copied (a view of a
// broadcast or strided array stays one: its shape is checked before any
// copy is made), else InputError like the tools' .npy checks.
template <typename T>
py::array typed_array(py::handle o, std::size_t rank, const std::string& what, const std::string& desc) {
  py::module_ np = py::module_::import("numpy");
  py::array a;
  try {
    a = np.attr("asarray")(o);
  } catch (const py::error_already_set& e) {
    if (e.matches(PyExc_MemoryError)) raise_out_of_memory(what);
    throw;
  }
  if (!a.dtype().is(py::dtype::of<T>()) || static_cast<std::size_t>(a.ndim()) != rank)
    raise_error(kExitBadInput, fmt::format("{}: expected a {}-D {} array ({}), got {}", what, rank,
                                           py::str(py::dtype::of<T>()).cast<std::string>(), desc,
                                           describe(a)));
  return a;
}

// `a` (of dtype T) C-contiguous: itself when it is, else a copy; NumPy's
// MemoryError for a copy too large becomes InputError, as the tools say it.
template <typename T>
py::array_t<T, py::array::c_style> contiguous(const py::array& a, const std::string& what) {
  try {
    return py::module_::import("numpy").attr("ascontiguousarray")(a).cast<py::array_t<T, py::array::c_style>>();
  } catch (const py::error_already_set& e) {
    if (e.matches(PyExc_MemoryError)) raise_out_of_memory(what);
    throw;
  }
}

// `o` as a C-contiguous NumPy array of dtype T and rank `rank` (typed_array, then contiguous).
template <typename T>
py::array_t<T, py::array::c_style> array_arg(py::handle o, std::size_t rank, const std::string& what,
                                             const std::string& desc) {
  return contiguous<T>(typed_array<T>(o, rank, what, desc), what);
}

// A 2-D int8 array as a matrix, copied once, straight from a strided or
// broadcast view (no contiguous copy first).
compiler::MatrixI8 matrix_arg(py::handle o, const std::string& what, const std::string& desc);

// A NumPy array over memory owned by `owner` (a shared_ptr kept in a capsule).
template <typename T, typename Owner>
py::array view(const std::shared_ptr<Owner>& owner, T* data, std::vector<py::ssize_t> shape) {
  auto* keep = new std::shared_ptr<Owner>(owner);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Owner>*>(p); });
  return py::array_t<T>(shape, data, base);
}

// A NumPy array taking over `values`.
template <typename T>
py::array owned(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto holder = std::make_shared<std::vector<T>>(std::move(values));
  return view(holder, holder->data(), std::move(shape));
}

// A Program, program file bytes or a path to a .tpu file.
isa::Program program_arg(py::handle o);

// ---- Configurations (bind_config.cpp) -------------------------------------------

void set_field(ArchConfig& cfg, const std::string& name, py::handle value);
ArchConfig make_config(const std::string& preset, const std::optional<std::string>& file,
                       std::optional<std::uint64_t> array_n, const py::kwargs& fields);
// The `config` argument: a Config, a preset name, a dict of fields (with an
// optional "preset"), or None (the default preset).
ArchConfig config_arg(py::handle o);

// ---- Engine options (bind_run.cpp) ----------------------------------------------

// engine, detail, max_cycles and vcd checked as the tools check them
// (UsageError); a run in the main thread stops at Ctrl-C.
sweep::EngineOptions engine_options(const std::string& engine, const std::string& detail,
                                    py::handle max_cycles, const py::object& vcd);
// max_cycles' default, the tools' --max-cycles.
inline constexpr std::uint64_t kMaxCycles = 100'000'000;

// ---- The module's parts, in the order tpusim_module.cpp adds them ----------------

void bind_errors(py::module_& m);   // errors.cpp: tpusim.Error and its subclasses
void bind_config(py::module_& m);   // bind_config.cpp: Config, presets
void bind_program(py::module_& m);  // bind_program.cpp: Program, assemble, disassemble
void bind_run(py::module_& m);      // bind_run.cpp: run, gemm, net, their results, Model
void bind_sweep(py::module_& m);    // bind_sweep.cpp: workloads, sweep files, grids

}  // namespace tpu::python
