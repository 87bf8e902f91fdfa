#include "tpu_net.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"
#include "common/npy.h"
#include "compiler/layer_reference.h"
#include "compiler/model_file.h"
#include "compiler/network.h"
#include "run/layer_report.h"
#include "run/timeline.h"
#include "onnx/net_fit.h"
#include "onnx/onnx_net.h"
#include "run/outputs.h"
#include "run/progress.h"
#include "sim_args.h"
#include "run/sweep_workload.h"

namespace tpu::cli {
namespace {

using compiler::LayerKind;

struct NetArgs : SimArgs {
  std::string model;
  std::string input;
  std::string labels;
  std::string emit_asm;
  bool check = false;
  // MODEL.onnx only (docs/onnx.md).
  std::string calibrate;
  std::string save_model;
  std::string float_out;
  bool progress = false;
};

// PATH for a one-program network, else PATH with ".K" before its extension.
std::string indexed_path(const std::string& path, std::size_t k, std::size_t count) {
  if (count == 1) return path;
  const std::filesystem::path p(path);
  std::filesystem::path out = p.parent_path() / p.stem();
  out += fmt::format(".{}{}", k, p.extension().string());
  return out.string();
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

template <typename T>
std::vector<std::int64_t> widen(const NpyArray& a) {
  const std::vector<T> v = a.values<T>();
  return std::vector<std::int64_t>(v.begin(), v.end());
}

// Integer labels, one per sample.
std::vector<std::int64_t> read_labels(const std::string& path, std::size_t batch) {
  const NpyArray a = read_npy(path);
  std::vector<std::int64_t> labels;
  switch (a.dtype) {
    case Dtype::int8: labels = widen<std::int8_t>(a); break;
    case Dtype::uint8: labels = widen<std::uint8_t>(a); break;
    case Dtype::int16: labels = widen<std::int16_t>(a); break;
    case Dtype::uint16: labels = widen<std::uint16_t>(a); break;
    case Dtype::int32: labels = widen<std::int32_t>(a); break;
    case Dtype::int64: labels = widen<std::int64_t>(a); break;
    default:
      throw FileError(fmt::format("{}: labels must be integers, got {}", path, dtype_name(a.dtype)));
  }
  if (a.rank() != 1 || a.shape[0] != batch)
    throw FileError(fmt::format("{}: expected {} (a 1-D array), got shape {}", path,
                                plural(batch, "label"), format_shape(a.shape)));
  return labels;
}

// The network input: int8 as it is, or float quantized with the model's
// input quantization.
compiler::Tensor read_input(const std::string& path, const compiler::Network& net) {
  const NpyArray a = read_npy(path);
  std::vector<std::size_t> want = net.input_shape;
  if (a.rank() != want.size() + 1 || !std::equal(want.begin(), want.end(), a.shape.begin() + 1))
    throw FileError(fmt::format("{}: expected a batch of inputs of shape (B, {}), got shape {}", path,
                                fmt::join(want, ", "), format_shape(a.shape)));
  if (a.shape[0] == 0) throw FileError(fmt::format("{}: the batch is empty", path));
  if (a.dtype == Dtype::int8) {
    compiler::Tensor x;
    x.shape = a.shape;
    const std::vector<std::int8_t> v = a.values<std::int8_t>();
    x.data.assign(v.begin(), v.end());
    return x;
  }
  std::vector<double> values;
  if (a.dtype == Dtype::float32) {
    const std::vector<float> v = a.values<float>();
    values.assign(v.begin(), v.end());
  } else if (a.dtype == Dtype::float64) {
    values = a.values<double>();
  } else {
    throw FileError(fmt::format("{}: the input must be int8 (quantized) or float32/float64, got {}",
                                path, dtype_name(a.dtype)));
  }
  try {
    return compiler::quantize_input(net, a.shape, values);
  } catch (const compiler::CompileError& e) {
    throw FileError(fmt::format("{}: {}", path, e.what()));
  }
}

class Net final : public NetCommand {
 public:
  explicit Net(CLI::App& app) {
    cmd_ = app.add_subcommand("net", "compile and run a quantized network (model file) on the model");
    cmd_->add_option("model", args_.model, "model description (.json, docs/quantization.md)")
        ->required();
    cmd_->add_option("--input", args_.input,
                     "input batch: int8 (quantized) or float .npy of shape (B, input shape)")
        ->required();
    cmd_->add_option("--out", args_.out, "write the network's output here (.npy, int8 or int32)");
    cmd_->add_option("--labels", args_.labels,
                     "integer labels (.npy, one per sample): report the argmax accuracy");
    cmd_->add_option("--emit-asm", args_.emit_asm,
                     "write the generated program(s) here (.s; F.K.s for program K of several)");
    cmd_->add_flag("--check", args_.check,
                   "compare the output with the independent int8 reference (exit 6 if it differs)");
    cmd_->add_option("--report", report_,
                     "write a per-layer report here (.csv: cycles, MACs, utilization, bytes moved; "
                     "units in the header)");
    cmd_->add_flag("--host-steps", host_steps_,
                   "compile with host steps between programs (im2col, max-pool, flatten on the host) "
                   "instead of the whole network on chip");
    cmd_->add_option("--calibrate", args_.calibrate,
                     "MODEL.onnx: calibration batch (.npy, float32 in the model's layout, e.g. NCHW) "
                     "whose ranges quantize the float model (a QDQ model needs none)");
    cmd_->add_option("--save-model", args_.save_model,
                     "MODEL.onnx: write the quantized network to this folder as a model file "
                     "(model.json and .npy files)");
    cmd_->add_option("--float-out", args_.float_out,
                     "MODEL.onnx: write the float network's output on --input here (.npy, float32, "
                     "the model's layout)");
    cmd_->add_flag("--progress", args_.progress,
                   "show the progress line (import, calibration, compile, simulation) on stderr even "
                   "when it is not a terminal");
    args_.add_to(*cmd_);
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override;

 private:
  compiler::NetworkPlan compile(const compiler::Network& net, std::size_t batch, const ArchConfig& cfg) const;

  CLI::App* cmd_ = nullptr;
  NetArgs args_;
  bool host_steps_ = false;
  std::string report_;
};

// A refusal says which --config field would make the network fit, and how
// large, when one does (net_fit.h).
compiler::NetworkPlan Net::compile(const compiler::Network& net, std::size_t batch, const ArchConfig& cfg) const {
  if (host_steps_) return compiler::compile_network(net, batch, cfg, compiler::CompileMode::Segments);
  return onnximport::compile_with_fit_advice(net, batch, cfg);
}

int Net::run() {
  const ArchConfig cfg = args_.cfg.resolve();
  // An ONNX model is imported, calibrated and quantized (docs/onnx.md); its
  // input and output are float32 in the model's layout.
  const bool is_onnx = std::filesystem::path(args_.model).extension() == ".onnx";
  if (!is_onnx && !(args_.calibrate.empty() && args_.save_model.empty() && args_.float_out.empty()))
    throw CLI::ValidationError("--calibrate, --save-model and --float-out", "only for an .onnx model");
  if (is_onnx && args_.calibrate.empty() && onnximport::onnx_needs_calibration(args_.model))  // not QDQ
    throw CLI::ValidationError("--calibrate", "an .onnx model needs a calibration set");
  // Every output goes to a temporary name first and is put in place at the
  // end: a run that fails leaves none behind, a fault only --stats (outputs.h).
  run::Outputs outputs;
  const std::string out_path = outputs.file(args_.out);
  const std::string stats_path = outputs.file(args_.stats, run::Outputs::When::SuccessOrFault);
  const std::string report_path = outputs.file(report_);
  const std::string timeline_path = outputs.file(args_.timeline, run::Outputs::When::SuccessOrFault);
  // stderr only (progress.h); with --progress also when it is not a terminal.
  const run::ProgressScope progress(args_.progress || run::ProgressScope::stderr_is_terminal());
  onnximport::OnnxRun onnx_run;
  if (is_onnx) {
    onnximport::PrepareOptions prep;
    // The fit check compiles as below: not for --host-steps, which forces the mode.
    if (!host_steps_) prep.fit_config = &cfg;
    prep.progress = [](const std::string& s) {
      if (s.empty()) run::progress_clear();
      else run::progress_show("tpu-sim net: " + s);
    };
    onnx_run = onnximport::prepare_onnx(args_.model, args_.calibrate, args_.input,
                                        outputs.folder(args_.save_model), outputs.file(args_.float_out), prep);
  }
  const compiler::Network net = is_onnx ? onnx_run.net : compiler::load_network(args_.model);
  const compiler::Tensor x = is_onnx ? onnx_run.input : read_input(args_.input, net);
  const std::size_t batch = x.batch();
  std::vector<std::int64_t> labels;
  if (!args_.labels.empty()) labels = read_labels(args_.labels, batch);
  run::progress_show(fmt::format("tpu-sim net: compiling {} for {}", plural(net.layers.size(), "layer"),
                            plural(batch, "sample")));
  const compiler::NetworkPlan plan = compile(net, batch, cfg);
  run::progress_clear();
  const std::size_t programs = plan.segments.size();
  if (!args_.emit_asm.empty())
    for (std::size_t k = 0; k < programs; ++k)
      write_file_atomic(outputs.file(indexed_path(args_.emit_asm, k, programs)), plan.segments[k].assembly);

  const std::string name = net.name.empty() ? args_.model : net.name;
  std::cout << fmt::format("network {}: {}, batch {}, on a {}x{} array: {}\n", name,
                           plural(net.layers.size(), "layer"), batch, cfg.array_n, cfg.array_n,
                           plural(programs, "program"));
  const auto layer_name = [&](std::size_t i) {
    return net.layers[i].name.empty() ? fmt::format("#{}", i) : net.layers[i].name;
  };
  for (const compiler::NetworkStep& step : plan.steps) {
    if (step.on_host) {
      std::cout << fmt::format("  host       {} ({})\n", layer_name(step.layer),
                               compiler::layer_kind_name(net.layers[step.layer].kind));
      continue;
    }
    const compiler::SegmentPlan& seg = plan.segments[step.segment];
    std::string names;
    for (std::size_t id : seg.layers) names += (names.empty() ? "" : ", ") + layer_name(id);
    if (seg.on_chip) {
      std::cout << fmt::format("  program {}  all layers on chip: {}, {} of {}; {}\n", step.segment,
                               plural(seg.program.code.size(), "instruction"),
                               plural((seg.units + seg.chunk_units - 1) / seg.chunk_units, "chunk"),
                               plural(seg.chunk_units, "sample"), seg.summary);
      continue;
    }
    const bool im2col = net.layers[seg.layers.front()].kind == LayerKind::Conv2d;
    std::cout << fmt::format(
        "  program {}  {}: {}, input from the host{}, {} of {}\n", step.segment, names,
        plural(seg.program.code.size(), "instruction"), im2col ? " (im2col)" : "",
        plural((seg.units + seg.chunk_units - 1) / seg.chunk_units, "chunk"),
        plural(seg.chunk_units, seg.unit_is_sample ? "sample" : "row"));
  }

  // Each program runs as `tpu-sim run` would: the engine of --engine, its
  // trace and statistics summary; --vcd per program; --stats written below.
  const compiler::ProgramRunner runner = [&](std::size_t k, const compiler::SegmentPlan& seg,
                                             model::Memories& mem) {
    SimArgs per = args_;
    per.out.clear();
    per.stats.clear();
    per.timeline.clear();  // one timeline for all programs, written below
    if (!args_.vcd.empty()) per.vcd = indexed_path(args_.vcd, k, programs);
    if (!args_.fst.empty()) per.fst = indexed_path(args_.fst, k, programs);
    run::progress_clear();
    std::cout << fmt::format("== program {} ==\n", k);
    run::progress_show(fmt::format("tpu-sim net: program {}/{}: simulating {} ({})", k + 1, programs,
                              plural(batch, "sample"), plural(seg.layers.size(), "layer")));
    return run::simulate(per, cfg, seg.program, mem);
  };
  // The programs one after the other on one timeline, each instruction with its layer.
  const auto write_timeline = [&](const compiler::NetworkRun& run) {
    if (timeline_path.empty()) return;
    run::Timeline timeline(cfg);
    std::uint64_t offset = 0;
    for (std::size_t k = 0; k < run.logs.size(); ++k) {
      const compiler::SegmentPlan& seg = plan.segments[k];
      timeline.add_run(fmt::format("program {}", k), seg.program, run.logs[k], offset,
                       [&](std::uint32_t pc) { return layer_name(seg.instruction_layer.at(pc)); });
      offset += run.logs[k].stats.cycles;
    }
    write_file_atomic(timeline_path, timeline.json());
  };
  const compiler::NetworkRun result = compiler::run_network(plan, x, cfg, runner);
  if (result.fault) {
    // The statistics and the timeline up to the fault, as `tpu-sim run` writes them.
    if (!stats_path.empty())
      write_file_atomic(stats_path, sweep::net_stats_json(cfg, plan, result, args_.model).dump(2) + "\n");
    write_timeline(result);
    outputs.commit_fault();
    return kExitFault;
  }

  // Per-layer report.
  const double nn = static_cast<double>(cfg.array_n * cfg.array_n);
  const auto util = [&](std::uint64_t macs, std::uint64_t cycles) {
    return cycles ? static_cast<double>(macs) / (static_cast<double>(cycles) * nn) : 0.0;
  };
  std::cout << fmt::format("{:<12} {:<10} {:<14} {:<8} {:>10} {:>12} {:>12} {:>12}\n", "layer",
                           "type", "output", "where", "cycles", "array MACs", "utilization",
                           "useful MACs");
  std::vector<run::LayerReportRow> report_rows;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const compiler::LayerStats& ls = result.layers[i];
    const std::string where = ls.segment ? fmt::format("prog {}", *ls.segment) : "host";
    const std::string out_shape = fmt::format("{}x{}", batch, shape_text(plan.infos[i + 1].shape));
    const bool gemm = ls.array_macs > 0;
    std::cout << fmt::format("{:<12} {:<10} {:<14} {:<8} {:>10} {:>12} {:>12} {:>12}\n",
                             layer_name(i), compiler::layer_kind_name(net.layers[i].kind), out_shape,
                             where, ls.segment ? fmt::to_string(ls.cycles) : "-",
                             gemm ? fmt::to_string(ls.array_macs) : "-",
                             gemm ? fmt::format("{:.2f}%", 100.0 * util(ls.array_macs, ls.cycles)) : "-",
                             gemm ? fmt::to_string(ls.useful_macs) : "-");
    run::LayerReportRow row;
    row.name = layer_name(i);
    row.type = compiler::layer_kind_name(net.layers[i].kind);
    row.batch = batch;
    row.shape = plan.infos[i + 1].shape;
    row.stats = ls;
    report_rows.push_back(std::move(row));
  }
  // One row per layer; units in the header (layer_report.h).
  if (!report_path.empty()) write_file_atomic(report_path, run::layer_report_csv(report_rows, cfg.array_n));
  std::uint64_t total_cycles = 0, total_macs = 0, useful = 0;
  for (std::size_t k = 0; k < result.logs.size(); ++k) {
    const model::RunLog& log = result.logs[k];
    total_cycles += log.stats.cycles;
    total_macs += log.stats.macs;
    std::cout << fmt::format("program {}: {} cycles, {} instructions, utilization {:.2f}%\n", k,
                             log.stats.cycles, log.stats.instructions,
                             100.0 * util(log.stats.macs, log.stats.cycles));
  }
  write_timeline(result);
  for (const auto& ls : result.layers) useful += ls.useful_macs;
  std::cout << fmt::format(
      "total: {} cycles, {} MACs, utilization {:.2f}% of {}x{} MACs per cycle ({:.2f}% useful)\n",
      total_cycles, total_macs, 100.0 * util(total_macs, total_cycles), cfg.array_n, cfg.array_n,
      100.0 * util(useful, total_cycles));
  // At the configured clock, 2 operations per useful MAC (the layers' own).
  const double seconds = static_cast<double>(total_cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
  const double useful_tops = seconds > 0 ? 2.0 * static_cast<double>(useful) / seconds / 1e12 : 0.0;
  std::cout << fmt::format("time: {:.6g} s at {} MHz, {:.4g} TOPS of useful work (2 ops per useful MAC)\n",
                           seconds, cfg.clock_mhz, useful_tops);

  const compiler::Tensor& y = result.output;
  if (!out_path.empty() && is_onnx) {
    onnximport::write_onnx_output(onnx_run, y, out_path);
  } else if (!out_path.empty()) {
    if (y.int32)
      write_npy(out_path, NpyArray::of<std::int32_t>(y.shape, y.data));
    else
      write_npy(out_path, NpyArray::of<std::int8_t>(
                              y.shape, std::vector<std::int8_t>(y.data.begin(), y.data.end())));
  }
  nlohmann::json stats = sweep::net_stats_json(cfg, plan, result, args_.model);
  if (!labels.empty()) {
    if (y.shape.size() != 2)
      throw FileError(fmt::format("{}: labels need a 2-D output (batch x classes), the output is {}",
                                  args_.labels, shape_text(y.shape)));
    const std::size_t classes = y.shape[1];
    std::size_t correct = 0;
    for (std::size_t s = 0; s < batch; ++s) {
      const auto* row = &y.data[s * classes];
      const auto best = static_cast<std::int64_t>(std::max_element(row, row + classes) - row);
      correct += best == labels[s];
    }
    std::cout << fmt::format("accuracy: {}/{} = {:.2f}% (argmax of the output against {})\n",
                             correct, batch, 100.0 * static_cast<double>(correct) / batch,
                             args_.labels);
    stats["accuracy"] = {{"correct", correct},
                         {"total", batch},
                         {"accuracy", static_cast<double>(correct) / batch}};
  }
  if (!stats_path.empty()) write_file_atomic(stats_path, stats.dump(2) + "\n");
  outputs.commit();
  if (args_.check) {
    run::progress_show(fmt::format("tpu-sim net: checking {} against the int8 reference", plural(batch, "sample")));
    const compiler::Tensor want = compiler::reference_network(net, x);
    run::progress_clear();
    for (std::size_t i = 0; i < want.data.size(); ++i)
      if (y.data[i] != want.data[i]) {
        std::cerr << fmt::format(
            "tpu-sim: check failed: output element {} = {} but the int8 reference gives {}\n", i,
            y.data[i], want.data[i]);
        return kExitCheckFailed;
      }
    std::cout << fmt::format("check: {}{} {} the int8 reference\n", agree(want.data.size(), "", "all "),
                             plural(want.data.size(), "output element"),
                             agree(want.data.size(), "equals", "equal"));
  }
  return kExitOk;
}

}  // namespace

std::unique_ptr<NetCommand> add_net_command(CLI::App& app) { return std::make_unique<Net>(app); }

}  // namespace tpu::cli
