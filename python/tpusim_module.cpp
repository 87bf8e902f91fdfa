// _tpusim: the Python binding of tpu-sim (pybind11), re-exported by the
// package tpusim (python/tpusim/__init__.py). docs/python.md describes the
// API; python/tpusim/__init__.pyi gives every signature.
//
// - Arrays: inputs are checked (dtype, rank, shape) like the tools check
//   .npy files and copied once into the simulated memories; results are
//   NumPy arrays over memory the result object owns (no copy).
// - Errors: every error the tools report with an exit status is raised as a
//   subclass of tpusim.Error carrying the tools' message and that status
//   (`code`): AssemblerError 1, UsageError 2, InputError 3, FaultError 4,
//   DivergenceError 5, CheckError 6.
// - The GIL is released while compiling and simulating; SystemC's kernel is
//   process-global, so simulations within one process run one at a time
//   (sweeps use processes: tpusim.sweep).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "asm/assembler.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "compiler/model_file.h"
#include "compiler/network.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "rtl_engine/rtl_engine.h"
#include "sim_common.h"
#include "sweep_file.h"
#include "sweep_workload.h"

namespace py = pybind11;
using namespace tpu;

namespace {

// ---- Exceptions -------------------------------------------------------------

struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* by_code[7] = {};  // index: exit status 1..6
};
ErrorClasses g_errors;

// An error to raise as the tpusim exception of `code`, with extra attributes.
struct PyTpuError {
  int code;
  std::string message;
  py::dict attrs;
};

[[noreturn]] void raise_error(int code, const std::string& message, py::dict attrs = {}) {
  throw PyTpuError{code, message, std::move(attrs)};
}

void set_python_error(int code, const std::string& message, const py::dict& attrs) {
  py::handle cls(g_errors.by_code[code >= 1 && code <= 6 ? code : kExitBadInput]);
  py::object exc = cls(message);
  exc.attr("message") = message;
  for (auto item : attrs) exc.attr(item.first) = item.second;
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

py::dict fault_dict(const model::Fault& f) {
  py::dict d;
  d["pc"] = f.pc;
  d["instruction"] = f.instruction;
  d["cycle"] = f.cycle;
  d["reason"] = f.reason;
  d["message"] = f.message();
  return d;
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const PyTpuError& e) {
    set_python_error(e.code, e.message, e.attrs);
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own (TypeError, ValueError, ...)
  } catch (const py::error_already_set&) {
    throw;
  } catch (const sweep::AsmError& e) {
    py::list diags;
    for (const auto& d : e.diagnostics) diags.append(py::make_tuple(d.loc.line, d.loc.col, d.message));
    py::dict attrs;
    attrs["diagnostics"] = diags;
    set_python_error(kExitAsmError, e.what(), attrs);
  } catch (const sweep::Interrupted&) {
    // Stopped by Ctrl-C (EngineOptions::interrupted): the signal handler's
    // exception (KeyboardInterrupt) is set already.
    if (PyErr_Occurred() == nullptr) PyErr_SetNone(PyExc_KeyboardInterrupt);
  } catch (const sweep::FaultError& e) {
    py::dict attrs;
    attrs["fault"] = fault_dict(*e.log.fault);
    set_python_error(kExitFault, e.what(), attrs);
  } catch (const std::exception& e) {
    set_python_error(sweep::exit_status_of(e), sweep::message_of(e), {});
  }
}

// ---- JSON <-> Python -------------------------------------------------------

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

// ---- Configurations ----------------------------------------------------------

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

// ---- Arrays -------------------------------------------------------------------

std::string describe(const py::array& a) {
  std::vector<std::size_t> shape(a.shape(), a.shape() + a.ndim());
  return fmt::format("a {}-D {} array of shape {}", a.ndim(), py::str(a.dtype()).cast<std::string>(),
                     format_shape(shape));
}

[[noreturn]] void raise_out_of_memory(const std::string& what) {
  raise_error(kExitBadInput, fmt::format("{}: {}", what, sweep::message_of(std::bad_alloc())));
}

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

// ---- Programs -----------------------------------------------------------------

isa::Program program_arg(py::handle o) {
  if (py::isinstance<isa::Program>(o)) return o.cast<isa::Program>();
  if (py::isinstance<py::bytes>(o)) {
    const std::string s = o.cast<std::string>();
    return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
  }
  return isa::load_program(path_of(o, "program"));
}

std::string disassembly(const isa::Program& prog, bool encoding) {
  std::string text = fmt::format(".array {}\n", prog.array_n);
  for (std::size_t pc = 0; pc < prog.code.size(); ++pc) {
    const std::string line = isa::disassemble(prog.code[pc]);
    if (encoding)
      text += fmt::format("{:<24} ; {:4}: {:02x}\n", line, pc, fmt::join(isa::encode(prog.code[pc]), " "));
    else
      text += line + '\n';
  }
  return text;
}

// ---- Engine options -------------------------------------------------------------

// max_cycles as the tools take it (sweep::check_max_cycles): an integer
// (int, NumPy's) >= 0; anything else is the tools' usage error, not a TypeError.
model::Cycle max_cycles_arg(py::handle o) {
  nlohmann::json v = py::repr(o).cast<std::string>();
  if (PyIndex_Check(o.ptr()) && !py::isinstance<py::bool_>(o)) {
    const auto i = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()));
    if (!i) throw py::error_already_set();
    const long long small = PyLong_AsLongLong(i.ptr());
    if (small == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      const unsigned long long big = PyLong_AsUnsignedLongLong(i.ptr());
      if (big == static_cast<unsigned long long>(-1) && PyErr_Occurred()) PyErr_Clear();
      else v = static_cast<std::uint64_t>(big);
    } else {
      v = static_cast<std::int64_t>(small);
    }
  }
  return sweep::check_max_cycles(v);
}

sweep::EngineOptions engine_options(const std::string& engine, const std::string& detail,
                                    py::handle max_cycles, const py::object& vcd) {
  sweep::EngineOptions o;
  sweep::check_engine(engine);
  o.engine = engine;
  o.detail = sweep::parse_detail(detail);
  o.max_cycles = max_cycles_arg(max_cycles);
  if (!vcd.is_none()) o.vcd = path_of(vcd, "vcd");
  // Ctrl-C within a program: Python runs its signal handlers in the main
  // thread only, so only a run there asks, and at most every 50 ms of wall
  // time (taking the GIL costs a run as much as another thread holds it).
  py::module_ threading = py::module_::import("threading");
  if (threading.attr("current_thread")().is(threading.attr("main_thread")())) {
    o.interrupted = [last = std::chrono::steady_clock::now()]() mutable {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(50)) return false;
      last = now;
      py::gil_scoped_acquire gil;
      return PyErr_CheckSignals() != 0;  // the handler's exception stays set: translate() raises it
    };
  }
  return o;
}

// ---- Results ----------------------------------------------------------------------

// What a run leaves: the configuration, the program, the final memories and the log.
struct RunState {
  ArchConfig cfg;
  isa::Program program;
  std::unique_ptr<model::Memories> mem;
  model::RunLog log;
  std::uint64_t output_rows = 0;
};

struct RunResult {
  std::shared_ptr<RunState> s;
};

py::array retired_array(const std::shared_ptr<RunState>& s) {
  return view(s, s->log.retired.data(), {static_cast<py::ssize_t>(s->log.retired.size())});
}

struct GemmResult {
  py::array c;
  py::dict stats;
  py::array retired;
  isa::Program program;
  std::string assembly;
};

struct NetResult {
  py::array output;
  py::dict stats;
  py::object accuracy = py::none();
};

// ---- The API functions ----------------------------------------------------------

RunResult run(py::handle program, py::handle hostmem, py::handle weights, py::handle config,
              const std::string& engine, const std::string& detail, py::handle max_cycles,
              const py::object& vcd, bool raise_on_fault) {
  auto s = std::make_shared<RunState>();
  s->program = program_arg(program);
  s->cfg = config_arg(config);
  s->cfg.array_n = s->program.array_n;  // as tpu-sim run: the program's N
  validate(s->cfg);
  const sweep::EngineOptions opts = engine_options(engine, detail, max_cycles, vcd);
  const std::uint64_t n = s->cfg.array_n;
  // Shapes are checked on the arrays as given (a view is not copied), the
  // copies made only for inputs that fit.
  std::optional<py::array_t<std::int8_t, py::array::c_style>> h, w;
  if (!hostmem.is_none()) {
    const py::array a = typed_array<std::int8_t>(hostmem, 2, "hostmem", "host memory, rows x N");
    if (static_cast<std::uint64_t>(a.shape(1)) != n)
      raise_error(kExitBadInput, fmt::format("hostmem: rows have {} bytes but the array is N={}",
                                             a.shape(1), n));
    if (static_cast<std::uint64_t>(a.shape(0)) > s->cfg.host_rows)
      raise_error(kExitBadInput, fmt::format("hostmem: {} rows do not fit in host memory ({} rows)",
                                             a.shape(0), s->cfg.host_rows));
    h = contiguous<std::int8_t>(a, "hostmem");
  }
  if (!weights.is_none()) {
    const py::array a = typed_array<std::int8_t>(weights, 3, "weights", "weight memory, tiles x N x N");
    if (static_cast<std::uint64_t>(a.shape(1)) != n || static_cast<std::uint64_t>(a.shape(2)) != n)
      raise_error(kExitBadInput, fmt::format("weights: tiles are {}x{} but the array is N={}",
                                             a.shape(1), a.shape(2), n));
    if (static_cast<std::uint64_t>(a.shape(0)) > s->cfg.weight_tiles)
      raise_error(kExitBadInput, fmt::format("weights: {} tiles do not fit in weight memory ({} tiles)",
                                             a.shape(0), s->cfg.weight_tiles));
    w = contiguous<std::int8_t>(a, "weights");
  }
  const std::int8_t* hp = h ? h->data() : nullptr;
  const std::size_t hbytes = h ? static_cast<std::size_t>(h->size()) : 0;
  const std::int8_t* wp = w ? w->data() : nullptr;
  const std::size_t wbytes = w ? static_cast<std::size_t>(w->size()) : 0;
  const std::uint64_t input_rows = h ? static_cast<std::uint64_t>(h->shape(0)) : 0;
  {
    py::gil_scoped_release release;
    s->mem = std::make_unique<model::Memories>(s->cfg);
    if (hbytes) std::memcpy(s->mem->host.data().data(), hp, hbytes);
    if (wbytes) std::memcpy(s->mem->weights.data().data(), wp, wbytes);
    s->log = sweep::run_engine(s->cfg, s->program, *s->mem, opts);
    s->output_rows = std::min(cli::output_rows(s->program, input_rows), s->cfg.host_rows);
  }
  RunResult r{s};
  if (s->log.fault && raise_on_fault) {
    py::dict attrs;
    attrs["fault"] = fault_dict(*s->log.fault);
    attrs["result"] = py::cast(r);
    raise_error(kExitFault, s->log.fault->message(), attrs);
  }
  return r;
}

GemmResult gemm(py::handle a_obj, py::handle b_obj, py::handle requant, const std::string& act,
                bool check, py::handle config, const std::string& engine, const std::string& detail,
                py::handle max_cycles, const py::object& vcd) {
  const ArchConfig cfg = config_arg(config);
  const sweep::EngineOptions opts = engine_options(engine, detail, max_cycles, vcd);
  std::string requant_text;
  if (py::isinstance<py::str>(requant)) {
    requant_text = requant.cast<std::string>();
  } else if (!requant.is_none()) {
    std::vector<long long> v;
    try {
      v = requant.cast<std::vector<long long>>();
    } catch (const py::cast_error&) {
      raise_error(kExitUsage, "requant: expected (M, S, Z) or \"M,S,Z\"");
    }
    if (v.size() != 3) raise_error(kExitUsage, "requant: expected (M, S, Z) or \"M,S,Z\"");
    requant_text = fmt::format("{},{},{}", v[0], v[1], v[2]);
  }
  const compiler::MatrixI8 a = matrix_arg(a_obj, "A", "M x K");
  const compiler::MatrixI8 b = matrix_arg(b_obj, "B", "K x Nout");
  sweep::GemmOutcome g;
  {
    py::gil_scoped_release release;
    g = sweep::run_gemm(cfg, a, b, requant_text, act, check, opts);
  }
  GemmResult r;
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(g.m), static_cast<py::ssize_t>(g.n_out)};
  if (g.int8_output)
    r.c = owned(std::vector<std::int8_t>(g.c.begin(), g.c.end()), shape);
  else
    r.c = owned(std::move(g.c), shape);
  r.stats = to_python(cli::stats_json(cfg, g.log));
  auto log = std::make_shared<model::RunLog>(std::move(g.log));
  r.retired = view(log, log->retired.data(), {static_cast<py::ssize_t>(log->retired.size())});
  r.program = std::move(g.program);
  r.assembly = std::move(g.assembly);
  return r;
}

compiler::Network model_arg(py::handle o) {
  if (py::isinstance<compiler::Network>(o)) return o.cast<compiler::Network>();
  const std::string path = path_of(o, "model");
  py::gil_scoped_release release;
  return compiler::load_network(path);
}

compiler::Tensor input_arg(py::handle x_obj, const compiler::Network& net) {
  py::module_ np = py::module_::import("numpy");
  py::array x = np.attr("asarray")(x_obj);
  std::vector<std::size_t> shape(x.shape(), x.shape() + x.ndim());
  const std::vector<std::size_t>& want = net.input_shape;
  if (shape.size() != want.size() + 1 || !std::equal(want.begin(), want.end(), shape.begin() + 1))
    raise_error(kExitBadInput, fmt::format("x: expected a batch of inputs of shape (B, {}), got shape {}",
                                           fmt::join(want, ", "), format_shape(shape)));
  if (shape[0] == 0) raise_error(kExitBadInput, "x: the batch is empty");
  if (x.dtype().is(py::dtype::of<std::int8_t>())) {
    const auto a = np.attr("ascontiguousarray")(x).cast<py::array_t<std::int8_t, py::array::c_style>>();
    compiler::Tensor t;
    t.shape = shape;
    t.data.assign(a.data(), a.data() + a.size());
    return t;
  }
  if (x.dtype().is(py::dtype::of<float>()) || x.dtype().is(py::dtype::of<double>())) {
    const auto a = np.attr("ascontiguousarray")(x, "float64").cast<py::array_t<double, py::array::c_style>>();
    const std::vector<double> values(a.data(), a.data() + a.size());
    try {
      return compiler::quantize_input(net, shape, values);
    } catch (const compiler::CompileError& e) {
      raise_error(kExitBadInput, fmt::format("x: {}", e.what()));
    }
  }
  raise_error(kExitBadInput, fmt::format("x: the input must be int8 (quantized) or float32/float64, got {}",
                                         describe(x)));
}

NetResult net(py::handle model, py::handle x_obj, py::handle labels, py::handle config, bool host_steps,
              bool check, const std::string& engine, const std::string& detail, py::handle max_cycles,
              const py::object& vcd) {
  const ArchConfig cfg = config_arg(config);
  sweep::EngineOptions opts = engine_options(engine, detail, max_cycles, vcd);
  const compiler::Network network = model_arg(model);
  const std::string model_path = py::isinstance<compiler::Network>(model) ? "" : path_of(model, "model");
  const compiler::Tensor x = input_arg(x_obj, network);
  std::optional<py::array_t<std::int64_t>> label_arr;
  if (!labels.is_none()) {
    py::module_ np = py::module_::import("numpy");
    py::array l = np.attr("asarray")(labels);
    if (l.ndim() != 1 || static_cast<std::size_t>(l.shape(0)) != x.batch() ||
        py::str(l.dtype().attr("kind")).cast<std::string>().find_first_of("iu") == std::string::npos)
      raise_error(kExitBadInput, fmt::format("labels: expected {} integer labels (a 1-D array), got {}",
                                             x.batch(), describe(l)));
    label_arr = np.attr("ascontiguousarray")(l, "int64").cast<py::array_t<std::int64_t>>();
  }
  // Ctrl-C is noticed between the network's programs (KeyboardInterrupt);
  // within one program the model has no point to stop at.
  opts.between_programs = [] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  sweep::NetOutcome o;
  {
    py::gil_scoped_release release;
    o = sweep::run_net(cfg, network, x, host_steps, check, opts, model_path);
  }
  NetResult r;
  compiler::Tensor& y = o.run.output;
  const std::vector<py::ssize_t> shape(y.shape.begin(), y.shape.end());
  if (y.int32)
    r.output = owned(std::move(y.data), shape);
  else
    r.output = owned(std::vector<std::int8_t>(y.data.begin(), y.data.end()), shape);
  if (label_arr) {
    if (y.shape.size() != 2)
      raise_error(kExitBadInput, "labels: need a 2-D output (batch x classes)");
    const std::size_t classes = y.shape[1], batch = y.shape[0];
    std::size_t correct = 0;
    const std::int64_t* lab = label_arr->data();
    for (std::size_t s = 0; s < batch; ++s) {
      const auto* row = &y.data[s * classes];
      correct += (std::max_element(row, row + classes) - row) == lab[s];
    }
    const double acc = static_cast<double>(correct) / static_cast<double>(batch);
    o.stats["accuracy"] = {{"correct", correct}, {"total", batch}, {"accuracy", acc}};
    r.accuracy = py::float_(acc);
  }
  r.stats = to_python(o.stats);
  return r;
}

py::dict run_workload(py::handle config, py::handle workload, const std::string& base_dir,
                      const std::string& engine, const std::string& detail, py::handle max_cycles,
                      const std::string& name) {
  const ArchConfig cfg = config_arg(config);
  const nlohmann::json w = to_json(workload, "workload");
  const sweep::EngineOptions opts = engine_options(engine, detail, max_cycles, py::none());
  nlohmann::json row;
  {
    py::gil_scoped_release release;
    row = sweep::run_workload(cfg, w, base_dir, opts, name);
  }
  return to_python(row);
}

py::dict sweep_file_dict(py::handle path) {
  const sweep::SweepFile f = sweep::load_sweep_file(path_of(path, "path"));
  py::dict d, grid;
  d["base"] = to_python(f.base);
  for (const auto& [k, v] : f.grid) grid[py::str(k)] = to_python(v);
  d["grid"] = grid;
  d["workloads"] = to_python(nlohmann::json(f.workloads));
  d["names"] = py::cast(f.names);
  d["engine"] = f.opts.engine;
  d["detail"] = f.detail;
  d["max_cycles"] = f.opts.max_cycles;
  d["timeout_s"] = f.timeout_s ? py::object(py::float_(*f.timeout_s)) : py::none();
  d["base_dir"] = f.base_dir;
  return d;
}

}  // namespace

PYBIND11_MODULE(_tpusim, m) {
  PYBIND11_NUMPY_DTYPE(tpu::model::RetireRecord, pc, issue, start, completion, completed);
  m.doc() = "tpu-sim's simulator, assembler and compilers (the extension of the package tpusim).";

  // Exceptions: tpusim.Error and one subclass per exit status.
  g_errors.base = PyErr_NewExceptionWithDoc(
      "tpusim.Error",
      "Base of every tpu-sim error. `code` is the exit status the command-line tools give for it "
      "(common/exit_codes.h), `message` the tools' message.",
      PyExc_Exception, nullptr);
  m.attr("Error") = py::handle(g_errors.base);
  py::handle(g_errors.base).attr("code") = py::none();
  struct Sub {
    int code;
    const char* name;
    PyObject* extra_base;
    const char* doc;
  };
  const Sub subs[] = {
      {kExitAsmError, "AssemblerError", nullptr,
       "The assembler found errors: the message is every diagnostic as tpu-as prints it "
       "(FILE:LINE:COL: error: ..., the line and a caret); `diagnostics` lists (line, col, message)."},
      {kExitUsage, "UsageError", PyExc_ValueError,
       "An invalid argument (an unknown engine, an activation without requantization...): the "
       "command line's usage error (status 2)."},
      {kExitBadInput, "InputError", nullptr,
       "A missing or malformed input (file, array, model, configuration), an input that does not "
       "fit the configured machine, or an unknown RTL build (status 3)."},
      {kExitFault, "FaultError", nullptr,
       "The simulated program faulted (status 4): `fault` is a dict (pc, instruction, cycle, reason, "
       "message); from tpusim.run, `result` is the RunResult up to the fault."},
      {kExitDivergence, "DivergenceError", nullptr,
       "engine='both': the RTL and the SystemC model disagree (status 5)."},
      {kExitCheckFailed, "CheckError", nullptr,
       "check=True: a result differs from the independent reference (status 6)."},
  };
  for (const Sub& s : subs) {
    PyObject* bases = s.extra_base ? PyTuple_Pack(2, g_errors.base, s.extra_base)
                                   : PyTuple_Pack(1, g_errors.base);
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string("tpusim.") + s.name).c_str(), s.doc, bases,
                                              nullptr);
    Py_DECREF(bases);
    g_errors.by_code[s.code] = cls;
    py::handle(cls).attr("code") = s.code;
    m.attr(s.name) = py::handle(cls);
  }
  py::register_exception_translator(&translate);

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

  // Programs.
  py::class_<isa::Program>(m, "Program", "An assembled program: its array size N and instructions.")
      .def_readonly("array_n", &isa::Program::array_n, "The array size N it was assembled for.")
      .def("__len__", [](const isa::Program& p) { return p.code.size(); })
      .def("to_bytes",
           [](const isa::Program& p) {
             const std::vector<std::uint8_t> b = isa::serialize(p);
             return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           },
           "The program file image (.tpu, docs/isa.md).")
      .def_static("from_bytes",
                  [](const py::bytes& b) {
                    const std::string s = b;
                    return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
                  },
                  py::arg("data"), "Parses a program file image; InputError if malformed.")
      .def_static("load", [](py::handle path) { return isa::load_program(path_of(path, "path")); },
                  py::arg("path"), "Reads a program file (.tpu).")
      .def("save",
           [](const isa::Program& p, py::handle path) {
             write_file_atomic(path_of(path, "path"), isa::serialize(p));
           },
           py::arg("path"), "Writes the program file, whole or not at all.")
      .def_property_readonly("instructions",
                             [](const isa::Program& p) {
                               std::vector<std::string> v;
                               for (const auto& in : p.code) v.push_back(isa::disassemble(in));
                               return v;
                             },
                             "Each instruction's canonical assembly text.")
      .def("__eq__", [](const isa::Program& a, const isa::Program& b) {
        return a.array_n == b.array_n && a.code == b.code;
      })
      .def("__repr__", [](const isa::Program& p) {
        return fmt::format("<tpusim.Program N={}, {} instructions>", p.array_n, p.code.size());
      })
      .def(py::pickle(
          [](const isa::Program& p) {
            const std::vector<std::uint8_t> b = isa::serialize(p);
            return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
          },
          [](const py::bytes& b) {
            const std::string s = b;
            return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
          }));
  m.attr("Program").attr("__hash__") = py::none();

  m.def(
      "write_file",
      [](py::handle path, py::bytes data) { write_file_atomic(path_of(path, "path"), std::string(data)); },
      py::arg("path"), py::arg("data"),
      "Writes bytes as the tools write every output: whole or not at all, through symlinks, "
      "into devices and FIFOs.");
  m.def("assemble",
        [](const std::string& source, py::handle config, std::optional<unsigned> array_n,
           const std::string& filename) {
          std::optional<ArchConfig> cfg;
          if (!config.is_none()) cfg = config_arg(config);
          return sweep::assemble_source(source, filename, cfg ? &*cfg : nullptr, array_n);
        },
        py::arg("source"), py::kw_only(), py::arg("config") = py::none(),
        py::arg("array_n") = py::none(), py::arg("filename") = "<source>",
        R"doc(Assembles source text as tpu-as does. With `config`, every address range is
checked against its memory sizes; `array_n` wins over the source's .array.
Raises AssemblerError with every diagnostic (FILENAME:LINE:COL: error: ...).)doc");
  m.def("assemble_file",
        [](py::handle path, py::handle config, std::optional<unsigned> array_n) {
          const std::string p = path_of(path, "path");
          std::optional<ArchConfig> cfg;
          if (!config.is_none()) cfg = config_arg(config);
          return sweep::assemble_source(read_file_text(p), p, cfg ? &*cfg : nullptr, array_n);
        },
        py::arg("path"), py::kw_only(), py::arg("config") = py::none(), py::arg("array_n") = py::none(),
        "Assembles a source file (.s); diagnostics name the file.");
  m.def("disassemble",
        [](py::handle program, bool encoding) { return disassembly(program_arg(program), encoding); },
        py::arg("program"), py::kw_only(), py::arg("encoding") = false,
        R"doc(Assembly text that assembles back to the same program (as tpu-dis prints it,
without the comment line). `program`: a Program, program file bytes or a path.
With encoding=True each line carries its pc and bytes as a comment.)doc");

  // Results.
  py::class_<RunResult>(m, "RunResult", "The outcome of tpusim.run: final memories, statistics, retire records.")
      .def_property_readonly("host",
                             [](const RunResult& r) {
                               auto& mem = r.s->mem->host;
                               return view(r.s, mem.data().data(), {static_cast<py::ssize_t>(mem.rows()),
                                                                    static_cast<py::ssize_t>(mem.width())});
                             },
                             "The whole final host memory, int8 rows x N (a view, no copy).")
      .def_property_readonly("out",
                             [](const RunResult& r) {
                               auto& mem = r.s->mem->host;
                               return view(r.s, mem.data().data(),
                                           {static_cast<py::ssize_t>(r.s->output_rows),
                                            static_cast<py::ssize_t>(mem.width())});
                             },
                             "The host rows `tpu-sim run --out` writes: the input's rows, extended to "
                             "the last row any WHM names (a view).")
      .def_property_readonly("weights",
                             [](const RunResult& r) {
                               auto& mem = r.s->mem->weights;
                               const auto n = static_cast<py::ssize_t>(r.s->cfg.array_n);
                               return view(r.s, mem.data().data(),
                                           {static_cast<py::ssize_t>(mem.rows()), n, n});
                             },
                             "Weight memory, int8 tiles x N x N (a view of all of it: 8 GiB at tpuv1, held sparsely; "
                             "index the tiles you need, since reading all of it costs that much host memory).")
      .def_property_readonly("ub",
                             [](const RunResult& r) {
                               auto& mem = r.s->mem->ub;
                               return view(r.s, mem.data().data(), {static_cast<py::ssize_t>(mem.rows()),
                                                                    static_cast<py::ssize_t>(mem.width())});
                             },
                             "The final unified buffer, int8 rows x N (a view).")
      .def_property_readonly("acc",
                             [](const RunResult& r) {
                               auto& mem = r.s->mem->acc;
                               return view(r.s, mem.data().data(), {static_cast<py::ssize_t>(mem.rows()),
                                                                    static_cast<py::ssize_t>(mem.width())});
                             },
                             "The final accumulators, int32 rows x N (a view).")
      .def_property_readonly("stats", [](const RunResult& r) { return to_python(cli::stats_json(r.s->cfg, r.s->log)); },
                             "The statistics as `tpu-sim run --stats` writes them (a dict).")
      .def_property_readonly("retired", [](const RunResult& r) { return retired_array(r.s); },
                             "One retire record per issued instruction, in issue order: a NumPy "
                             "structured array (pc, issue, start, completion, completed).")
      .def_property_readonly("fault",
                             [](const RunResult& r) -> py::object {
                               if (!r.s->log.fault) return py::none();
                               return fault_dict(*r.s->log.fault);
                             },
                             "None, or the fault (pc, instruction, cycle, reason, message).")
      .def_property_readonly("halted", [](const RunResult& r) { return r.s->log.halted; },
                             "True when the program ended with HLT.")
      .def_property_readonly("cycles", [](const RunResult& r) { return r.s->log.stats.cycles; },
                             "The run's total cycles (stats['cycles']).")
      .def_property_readonly("config", [](const RunResult& r) { return r.s->cfg; },
                             "The configuration it ran on (array_n is the program's).")
      .def_property_readonly("program", [](const RunResult& r) { return r.s->program; },
                             "The program that ran.")
      .def("trace",
           [](const RunResult& r) {
             std::string text;
             for (const model::RetireRecord& rec : r.s->log.retired) text += cli::trace_line(r.s->program, rec);
             return text;
           },
           "The per-instruction trace as `tpu-sim run --trace` prints it.")
      .def("__repr__", [](const RunResult& r) {
        return fmt::format("<tpusim.RunResult {} cycles, {} instructions{}>", r.s->log.stats.cycles,
                           r.s->log.stats.instructions, r.s->log.fault ? ", faulted" : "");
      });

  py::class_<GemmResult>(m, "GemmResult", "The outcome of tpusim.gemm.")
      .def_readonly("c", &GemmResult::c, "C = A . B: int32 M x Nout, or int8 with requant.")
      .def_readonly("stats", &GemmResult::stats, "The statistics as `tpu-sim gemm --stats` writes them.")
      .def_readonly("retired", &GemmResult::retired, "The retire records (see RunResult.retired).")
      .def_readonly("program", &GemmResult::program, "The generated program.")
      .def_readonly("assembly", &GemmResult::assembly, "The generated program as commented assembly.")
      .def("__repr__", [](const GemmResult& r) {
        return fmt::format("<tpusim.GemmResult C {}, {} cycles>",
                           py::str(py::object(r.c.attr("shape"))).cast<std::string>(),
                           py::str(r.stats["cycles"]).cast<std::string>());
      });

  py::class_<NetResult>(m, "NetResult", "The outcome of tpusim.net.")
      .def_readonly("output", &NetResult::output, "The network's output: int8, or int32 for an int32 last layer.")
      .def_readonly("stats", &NetResult::stats,
                    "The statistics as `tpu-sim net --stats` writes them: network, batch, array_n, "
                    "programs, layers, total (and accuracy with labels).")
      .def_property_readonly("layers", [](const NetResult& r) { return r.stats["layers"]; },
                             "Per-layer statistics: a list of dicts (name, type, output_shape, program, "
                             "cycles, instructions, mmc_rows, array_macs, useful_macs, utilization, "
                             "host_read_bytes, host_write_bytes, weight_bytes).")
      .def_property_readonly("total", [](const NetResult& r) { return r.stats["total"]; },
                             "Totals over the programs: cycles, macs, useful_macs, utilization, "
                             "clock_mhz, seconds, useful_tops.")
      .def_readonly("accuracy", &NetResult::accuracy, "Argmax accuracy against `labels`, or None.")
      .def("__repr__", [](const NetResult& r) {
        return fmt::format("<tpusim.NetResult output {}, {} cycles>",
                           py::str(py::object(r.output.attr("shape"))).cast<std::string>(),
                           py::str(r.stats["total"]["cycles"]).cast<std::string>());
      });

  py::class_<compiler::Network>(m, "Model", "A quantized network loaded from a model file (docs/quantization.md).")
      .def_readonly("name", &compiler::Network::name, "The network's name in the model file.")
      .def_readonly("input_shape", &compiler::Network::input_shape, "One sample's shape.")
      .def_property_readonly("layers",
                             [](const compiler::Network& n) {
                               py::list l;
                               for (std::size_t i = 0; i < n.layers.size(); ++i) {
                                 py::dict d;
                                 d["name"] = n.layers[i].name.empty() ? fmt::format("#{}", i) : n.layers[i].name;
                                 d["type"] = compiler::layer_kind_name(n.layers[i].kind);
                                 l.append(d);
                               }
                               return l;
                             },
                             "Each layer's name and type.")
      .def("__repr__", [](const compiler::Network& n) {
        return fmt::format("<tpusim.Model {} ({} layers)>", n.name, n.layers.size());
      });
  m.def("load_model", [](py::handle path) { return model_arg(path); }, py::arg("path"),
        "Reads a model file (MODEL.json and its .npy files); InputError naming the file at fault.");

  // Simulation.
  const std::uint64_t kMaxCycles = 100'000'000;
  m.def("run", &run, py::arg("program"), py::arg("hostmem") = py::none(), py::arg("weights") = py::none(),
        py::kw_only(), py::arg("config") = py::none(), py::arg("engine") = "systemc",
        py::arg("detail") = "auto", py::arg("max_cycles") = kMaxCycles, py::arg("vcd") = py::none(),
        py::arg("raise_on_fault") = true,
        R"doc(Runs a program as `tpu-sim run` does and returns a RunResult.

program: a Program, program file bytes, or a path to a .tpu file.
hostmem: int8 array rows x N (host memory from row 0); weights: int8 array
tiles x N x N. config: Config, preset name, dict of fields or None; its
array_n becomes the program's. engine: 'systemc', 'rtl' or 'both' (compared;
DivergenceError). detail: 'auto', 'detailed' or 'fast' (identical results).
vcd: write a waveform there. A fault raises FaultError (its `result` holds the
run) unless raise_on_fault=False.)doc");
  m.def("gemm", &gemm, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("requant") = py::none(),
        py::arg("act") = "none", py::arg("check") = false, py::arg("config") = py::none(),
        py::arg("engine") = "systemc", py::arg("detail") = "auto", py::arg("max_cycles") = kMaxCycles,
        py::arg("vcd") = py::none(),
        R"doc(Compiles and runs C = A . B as `tpu-sim gemm` does; returns a GemmResult.

a: int8 M x K, b: int8 K x Nout. requant: (M, S, Z) or "M,S,Z" for int8
output; act: 'none', 'relu', 'sigmoid' or 'tanh' (needs requant).
check=True compares C with the reference GEMM (CheckError).)doc");
  m.def("net", &net, py::arg("model"), py::arg("x"), py::kw_only(), py::arg("labels") = py::none(),
        py::arg("config") = py::none(), py::arg("host_steps") = false, py::arg("check") = false,
        py::arg("engine") = "systemc", py::arg("detail") = "auto", py::arg("max_cycles") = kMaxCycles,
        py::arg("vcd") = py::none(),
        R"doc(Compiles and runs a quantized network as `tpu-sim net` does; returns a NetResult.

model: a path to MODEL.json or a Model (tpusim.load_model). x: a batch of
shape (B, input shape), int8 (quantized) or float (quantized with the model's
input quantization). labels: integer labels for the accuracy. host_steps:
compile with host steps between programs. check=True compares the output
with the int8 reference (CheckError).)doc");
  m.def("run_workload", &run_workload, py::arg("config"), py::arg("workload"), py::kw_only(),
        py::arg("base_dir") = "", py::arg("engine") = "systemc", py::arg("detail") = "auto",
        py::arg("max_cycles") = kMaxCycles, py::arg("name") = "",
        R"doc(Runs one sweep workload (a dict, docs/python.md "Workloads") on a configuration
and returns its statistics as one flat dict, as `tpu-sim sweep` does. name: the
workload's name in error messages (default: its "name", else KIND0).)doc");
  m.def("load_sweep_file", &sweep_file_dict, py::arg("path"),
        R"doc(Reads and checks a sweep file as `tpu-sim sweep` does (the same checks and
messages; InputError "PATH: reason"); returns a dict: base, grid (in the file's
order), workloads, names, engine, detail, max_cycles, timeout_s (None if not
given), base_dir.)doc");
  m.def("check_run_options",
        [](const std::string& engine, const std::string& detail, py::handle max_cycles) {
          engine_options(engine, detail, max_cycles, py::none());
        },
        py::arg("engine"), py::arg("detail"), py::arg("max_cycles"),
        "Checks engine, detail and max_cycles as the tools do (UsageError).");
  m.def("expand_grid",
        [](py::handle grid) {
          py::list l;
          if (!py::isinstance<py::dict>(grid)) raise_error(kExitUsage, "grid: expected a dict {field: [values]}");
          sweep::Grid g;
          for (auto item : py::reinterpret_borrow<py::dict>(grid))
            g.emplace_back(py::str(item.first).cast<std::string>(), to_json(item.second, "grid"));
          for (const auto& p : sweep::expand_grid(g)) l.append(to_python(p));
          return l;
        },
        py::arg("grid"), "The points of a grid {field: [values]}: the cartesian product, the last field fastest.");
}
