// tpusim.run, tpusim.gemm and tpusim.net (as `tpu-sim run`, `gemm` and `net`
// run them, through the run layer), their results (RunResult, GemmResult,
// NetResult), tpusim.Model and the engine options they share.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/npy.h"
#include "compiler/gemm.h"
#include "formats/model_file.h"
#include "compiler/network.h"
#include "runtime/host_ops.h"
#include "model/memories.h"
#include "module.h"
#include "run/simulate.h"
#include "run/stats.h"
#include "run/sweep_file.h"
#include "run/sweep_workload.h"

namespace tpu::python {

namespace {

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

}  // namespace

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

namespace {

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

// A whole memory of the run, rows x width (a view).
template <typename Memory>
py::array rows_view(const std::shared_ptr<RunState>& s, Memory& mem) {
  return view(s, mem.data().data(),
              {static_cast<py::ssize_t>(mem.rows()), static_cast<py::ssize_t>(mem.width())});
}

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

RunResult run_program(py::handle program, py::handle hostmem, py::handle weights, py::handle config,
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
    s->output_rows = std::min(run::output_rows(s->program, input_rows), s->cfg.host_rows);
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
  r.stats = to_python(run::stats_json(cfg, g.log));
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

// tpusim.RunResult: views of the final memories, the statistics, the records.
void bind_run_result(py::module_& m) {
  py::class_<RunResult>(m, "RunResult", "The outcome of tpusim.run: final memories, statistics, retire records.")
      .def_property_readonly("host",
                             [](const RunResult& r) { return rows_view(r.s, r.s->mem->host); },
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
                             [](const RunResult& r) { return rows_view(r.s, r.s->mem->ub); },
                             "The final unified buffer, int8 rows x N (a view).")
      .def_property_readonly("acc",
                             [](const RunResult& r) { return rows_view(r.s, r.s->mem->acc); },
                             "The final accumulators, int32 rows x N (a view).")
      .def_property_readonly("stats", [](const RunResult& r) { return to_python(run::stats_json(r.s->cfg, r.s->log)); },
                             "The statistics as `tpu-sim run --stats` writes them (a dict).")
      .def_property_readonly("energy",
                             [](const RunResult& r) { return to_python(run::stats_json(r.s->cfg, r.s->log)["energy"]); },
                             "The energy model's figures (docs/energy.md): events, by_event_j, by_unit_j, "
                             "static_j, dynamic_j, total_j, avg_power_w, tops_per_w (stats['energy']).")
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
             for (const model::RetireRecord& rec : r.s->log.retired) text += run::trace_line(r.s->program, rec);
             return text;
           },
           "The per-instruction trace as `tpu-sim run --trace` prints it.")
      .def("__repr__", [](const RunResult& r) {
        return fmt::format("<tpusim.RunResult {} cycles, {} instructions{}>", r.s->log.stats.cycles,
                           r.s->log.stats.instructions, r.s->log.fault ? ", faulted" : "");
      });
}

// tpusim.GemmResult, tpusim.NetResult and tpusim.Model (with load_model).
void bind_gemm_net_results(py::module_& m) {
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
                             "host_read_bytes, host_write_bytes, weight_bytes, the TPUv1 counters' cycles, energy_j, "
                             "static_energy_j, avg_power_w, energy_by_unit_j).")
      .def_property_readonly("total", [](const NetResult& r) { return r.stats["total"]; },
                             "Totals over the programs: cycles, macs, useful_macs, utilization, "
                             "clock_mhz, seconds, useful_tops, energy.")
      .def_property_readonly("energy", [](const NetResult& r) { return r.stats["total"]["energy"]; },
                             "The run's energy (docs/energy.md): total['energy'], with useful_tops_per_w "
                             "and inferences_per_j (the batch over total_j).")
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
}

void bind_simulation(py::module_& m) {
  m.def("run", &run_program, py::arg("program"), py::arg("hostmem") = py::none(), py::arg("weights") = py::none(),
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
}

}  // namespace

void bind_run(py::module_& m) {
  bind_run_result(m);
  bind_gemm_net_results(m);
  bind_simulation(m);
}

}  // namespace tpu::python
