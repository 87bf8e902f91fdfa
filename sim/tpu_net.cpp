// tpu-sim net (subcommand.h): its options, and its run through the run layer
// (run/network_run.h): the listing, per-program output, the per-layer table,
// totals, accuracy and the check.
#include "subcommand.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "formats/model_file.h"
#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "runtime/host_ops.h"
#include "runtime/layer_stats.h"
#include "onnx/net_fit.h"
#include "onnx/onnx_net.h"
#include "run/layer_report.h"
#include "run/network_run.h"
#include "run/outputs.h"
#include "run/progress.h"
#include "run/simulate.h"
#include "run/timeline.h"
#include "sim_args.h"

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

// The network's input: an ONNX model is imported, calibrated and quantized
// first (docs/onnx.md; its input and output are float32 in the model's
// layout), a model file read as it is.
struct NetInput {
  onnximport::OnnxRun onnx;
  compiler::Network net;
  compiler::Tensor x;
};

// --out: an ONNX model's output dequantized in its layout (float32), a model
// file's as it is (int8, or int32).
void write_output(const NetInput& in, const compiler::Tensor& y, const std::string& out_path, bool is_onnx) {
  if (out_path.empty()) return;
  if (is_onnx) {
    onnximport::write_onnx_output(in.onnx, y, out_path);
  } else if (y.int32) {
    write_npy(out_path, NpyArray::of<std::int32_t>(y.shape, y.data));
  } else {
    write_npy(out_path, NpyArray::of<std::int8_t>(y.shape, std::vector<std::int8_t>(y.data.begin(), y.data.end())));
  }
}

class Net final : public Subcommand {
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
    cmd_->add_flag("--reference-only", reference_only_,
                   "do not compile or simulate: write the independent C++ int8 reference's output on --input "
                   "to --out (a network the compiler does not take yet, such as attention's matmul layers)");
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
  NetInput prepare(const ArchConfig& cfg, bool is_onnx, run::Outputs& outputs) const;
  run::NetworkRunSpec run_spec(const ArchConfig& cfg, const compiler::Network& net, std::size_t batch,
                               run::Outputs& outputs) const;
  // --check: the output against the int8 reference; returns the exit status.
  int check(const compiler::Network& net, const compiler::Tensor& x, const compiler::Tensor& y) const;

  CLI::App* cmd_ = nullptr;
  NetArgs args_;
  bool host_steps_ = false;
  bool reference_only_ = false;
  std::string report_;
};

// The plan as a listing: each host step, and each program with its layers.
void print_plan(const compiler::Network& net, const compiler::NetworkPlan& plan) {
  for (const compiler::NetworkStep& step : plan.steps) {
    if (step.on_host) {
      std::cout << fmt::format("  host       {} ({})\n", run::layer_name(net, step.layer),
                               compiler::layer_kind_name(net.layers[step.layer].kind));
      continue;
    }
    const compiler::ProgramPlan& seg = plan.program(step.segment);
    std::string names;
    for (std::size_t id : seg.layers) names += (names.empty() ? "" : ", ") + run::layer_name(net, id);
    if (plan.on_chip_plan) {
      std::cout << fmt::format("  program {}  all layers on chip: {}, {} of {}; {}\n", step.segment,
                               plural(seg.program.code.size(), "instruction"),
                               plural((seg.units + seg.chunk_units - 1) / seg.chunk_units, "chunk"),
                               plural(seg.chunk_units, "sample"), plan.on_chip_plan->summary);
      continue;
    }
    const bool im2col = net.layers[seg.layers.front()].kind == LayerKind::Conv2d;
    std::cout << fmt::format(
        "  program {}  {}: {}, input from the host{}, {} of {}\n", step.segment, names,
        plural(seg.program.code.size(), "instruction"), im2col ? " (im2col)" : "",
        plural((seg.units + seg.chunk_units - 1) / seg.chunk_units, "chunk"),
        plural(seg.chunk_units, seg.unit_is_sample ? "sample" : "row"));
  }
}

// The programs one after the other on one timeline, each instruction with its layer.
void write_timeline(const std::string& path, const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                    const compiler::NetworkRun& result) {
  if (path.empty()) return;
  run::Timeline timeline(cfg);
  std::uint64_t offset = 0;
  for (std::size_t k = 0; k < result.logs.size(); ++k) {
    const compiler::ProgramPlan& seg = plan.program(k);
    timeline.add_run(fmt::format("program {}", k), seg.program, result.logs[k], offset,
                     [&](std::uint32_t pc) { return run::layer_name(plan.net, seg.instruction_layer.at(pc)); });
    offset += result.logs[k].stats.cycles;
  }
  write_file_atomic(path, timeline.json());
}

// The per-layer table on stdout; returns its rows for --report.
std::vector<run::LayerReportRow> print_layers(const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                                              const compiler::NetworkRun& result) {
  const compiler::Network& net = plan.net;
  const std::size_t batch = plan.batch;
  std::cout << fmt::format("{:<12} {:<10} {:<14} {:<8} {:>10} {:>12} {:>12} {:>12}\n", "layer",
                           "type", "output", "where", "cycles", "array MACs", "utilization",
                           "useful MACs");
  std::vector<run::LayerReportRow> report_rows;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const compiler::LayerStats& ls = result.layers[i];
    const std::string where = ls.segment ? fmt::format("prog {}", *ls.segment) : "host";
    const std::string out_shape = fmt::format("{}x{}", batch, shape_text(plan.infos[i + 1].shape));
    const bool gemm = ls.array_macs > 0;
    const double util = run::layer_utilization(ls.array_macs, ls.cycles, cfg.array_n);
    std::cout << fmt::format("{:<12} {:<10} {:<14} {:<8} {:>10} {:>12} {:>12} {:>12}\n",
                             run::layer_name(net, i), compiler::layer_kind_name(net.layers[i].kind), out_shape,
                             where, ls.segment ? fmt::to_string(ls.cycles) : "-",
                             gemm ? fmt::to_string(ls.array_macs) : "-",
                             gemm ? fmt::format("{:.2f}%", 100.0 * util) : "-",
                             gemm ? fmt::to_string(ls.useful_macs) : "-");
    run::LayerReportRow row;
    row.name = run::layer_name(net, i);
    row.type = compiler::layer_kind_name(net.layers[i].kind);
    row.batch = batch;
    row.shape = plan.infos[i + 1].shape;
    row.stats = ls;
    report_rows.push_back(std::move(row));
  }
  return report_rows;
}

// Each program's line and the totals.
void print_totals(const ArchConfig& cfg, const compiler::NetworkRun& result) {
  run::RunTotals totals;
  for (std::size_t k = 0; k < result.logs.size(); ++k) {
    const model::RunLog& log = result.logs[k];
    totals.add(log);
    std::cout << fmt::format("program {}: {} cycles, {} instructions, utilization {:.2f}%\n", k,
                             log.stats.cycles, log.stats.instructions,
                             100.0 * run::layer_utilization(log.stats.macs, log.stats.cycles, cfg.array_n));
  }
  for (const auto& ls : result.layers) totals.useful_macs += ls.useful_macs;
  std::cout << fmt::format(
      "total: {} cycles, {} MACs, utilization {:.2f}% of {}x{} MACs per cycle ({:.2f}% useful)\n",
      totals.cycles, totals.macs, 100.0 * run::layer_utilization(totals.macs, totals.cycles, cfg.array_n),
      cfg.array_n, cfg.array_n, 100.0 * run::layer_utilization(totals.useful_macs, totals.cycles, cfg.array_n));
  // At the configured clock, 2 operations per useful MAC (the layers' own).
  std::cout << fmt::format("time: {:.6g} s at {} MHz, {:.4g} TOPS of useful work (2 ops per useful MAC)\n",
                           totals.seconds(cfg), cfg.clock_mhz, totals.useful_tops(cfg));
  // The energy model (docs/energy.md): the batch's inferences per joule.
  const nlohmann::json e = run::totals_energy_json(cfg, totals, result.output.batch());
  std::cout << fmt::format("energy: {:.6g} J ({:.6g} J static), {:.4g} W average, {:.4g} useful TOPS/W, {:.6g} "
                           "inferences/J\n",
                           e["total_j"].get<double>(), e["static_j"].get<double>(), e["avg_power_w"].get<double>(),
                           e["useful_tops_per_w"].get<double>(), e.value("inferences_per_j", 0.0));
}

// The argmax accuracy of `y` against `labels`, printed and added to `stats`.
void report_accuracy(const compiler::Tensor& y, const std::vector<std::int64_t>& labels,
                     const std::string& labels_path, nlohmann::json& stats) {
  if (y.shape.size() != 2)
    throw FileError(fmt::format("{}: labels need a 2-D output (batch x classes), the output is {}",
                                labels_path, shape_text(y.shape)));
  const std::size_t batch = labels.size();
  const std::size_t classes = y.shape[1];
  std::size_t correct = 0;
  for (std::size_t s = 0; s < batch; ++s) {
    const auto* row = &y.data[s * classes];
    const auto best = static_cast<std::int64_t>(std::max_element(row, row + classes) - row);
    correct += best == labels[s];
  }
  std::cout << fmt::format("accuracy: {}/{} = {:.2f}% (argmax of the output against {})\n",
                           correct, batch, 100.0 * static_cast<double>(correct) / batch, labels_path);
  stats["accuracy"] = {{"correct", correct},
                       {"total", batch},
                       {"accuracy", static_cast<double>(correct) / batch}};
}

NetInput Net::prepare(const ArchConfig& cfg, bool is_onnx, run::Outputs& outputs) const {
  NetInput in;
  if (is_onnx) {
    onnximport::PrepareOptions prep;
    // The fit check compiles as below: not for --host-steps, which forces the mode.
    if (!host_steps_ && !reference_only_) prep.fit_config = &cfg;
    prep.progress = [](const std::string& s) {
      if (s.empty()) run::progress_clear();
      else run::progress_show("tpu-sim net: " + s);
    };
    in.onnx = onnximport::prepare_onnx(args_.model, args_.calibrate, args_.input,
                                       outputs.folder(args_.save_model), outputs.file(args_.float_out), prep);
  }
  in.net = is_onnx ? in.onnx.net : compiler::load_network(args_.model);
  in.x = is_onnx ? in.onnx.input : read_input(args_.input, in.net);
  return in;
}

int Net::run() {
  const ArchConfig cfg = args_.cfg.resolve();
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
  if (reference_only_ &&
      (args_.check || !report_.empty() || !args_.stats.empty() || !args_.timeline.empty() || !args_.labels.empty()))
    throw CLI::ValidationError("--reference-only", "runs no simulation: --check, --report, --stats, --timeline "
                                                   "and --labels need one");
  const NetInput in = prepare(cfg, is_onnx, outputs);
  const compiler::Network& net = in.net;
  const compiler::Tensor& x = in.x;
  const std::size_t batch = x.batch();
  std::vector<std::int64_t> labels;
  if (!args_.labels.empty()) labels = read_labels(args_.labels, batch);
  if (reference_only_) {
    run::progress_show(fmt::format("tpu-sim net: the int8 reference on {}", plural(batch, "sample")));
    const compiler::Tensor y = compiler::reference_network(net, x);
    run::progress_clear();
    write_output(in, y, out_path, is_onnx);
    std::cout << fmt::format("network {}: {}, batch {}: the int8 reference's output (not compiled)\n",
                             net.name.empty() ? args_.model : net.name, plural(net.layers.size(), "layer"), batch);
    outputs.commit();
    return kExitOk;
  }
  run::progress_show(fmt::format("tpu-sim net: compiling {} for {}", plural(net.layers.size(), "layer"),
                                 plural(batch, "sample")));
  const run::NetworkOutcome o = run::compile_and_run(cfg, net, x, run_spec(cfg, net, batch, outputs));
  const compiler::NetworkPlan& plan = o.plan;
  const compiler::NetworkRun& result = o.run;
  if (result.fault) {
    // The statistics and the timeline up to the fault, as `tpu-sim run` writes them.
    if (!stats_path.empty())
      write_file_atomic(stats_path, run::net_stats_json(cfg, plan, result, args_.model).dump(2) + "\n");
    write_timeline(timeline_path, cfg, plan, result);
    outputs.commit_fault();
    return kExitFault;
  }

  const std::vector<run::LayerReportRow> report_rows = print_layers(cfg, plan, result);
  // One row per layer; units in the header (layer_report.h).
  if (!report_path.empty()) write_file_atomic(report_path, run::layer_report_csv(report_rows, cfg));
  print_totals(cfg, result);
  write_timeline(timeline_path, cfg, plan, result);

  const compiler::Tensor& y = result.output;
  write_output(in, y, out_path, is_onnx);
  nlohmann::json stats = run::net_stats_json(cfg, plan, result, args_.model);
  if (!labels.empty()) report_accuracy(y, labels, args_.labels, stats);
  if (!stats_path.empty()) write_file_atomic(stats_path, stats.dump(2) + "\n");
  outputs.commit();
  return args_.check ? check(net, x, y) : kExitOk;
}

// How the network compiles and runs: the listing and --emit-asm once it is
// compiled, then each program as `tpu-sim run` would run it (the engine of
// --engine, its trace and statistics summary; --vcd per program; --stats and
// --timeline are the network's, written by run()).
run::NetworkRunSpec Net::run_spec(const ArchConfig& cfg, const compiler::Network& net, std::size_t batch,
                                  run::Outputs& outputs) const {
  run::NetworkRunSpec spec;
  // A refusal says which --config field would make the network fit, and how
  // large, when one does (net_fit.h).
  spec.compile = [this](const compiler::Network& n, std::size_t b, const ArchConfig& c) {
    if (host_steps_) return compiler::compile_network(n, b, c, compiler::CompileMode::Segments);
    return onnximport::compile_with_fit_advice(n, b, c);
  };
  spec.compiled = [&, batch](const compiler::NetworkPlan& plan) {
    run::progress_clear();
    const std::size_t programs = plan.program_count();
    if (!args_.emit_asm.empty())
      for (std::size_t k = 0; k < programs; ++k)
        write_file_atomic(outputs.file(run::indexed_path(args_.emit_asm, k, programs)), plan.program(k).assembly);
    std::cout << fmt::format("network {}: {}, batch {}, on a {}x{} array: {}\n",
                             net.name.empty() ? args_.model : net.name, plural(net.layers.size(), "layer"), batch,
                             cfg.array_n, cfg.array_n, plural(programs, "program"));
    print_plan(net, plan);
  };
  spec.sim = [this, &cfg, batch](std::size_t k, std::size_t programs, const compiler::ProgramPlan& seg,
                                 model::Memories& mem) {
    run::SimulateOptions per = run::program_options(args_, k, programs);
    per.timeline.clear();  // one timeline for all programs, written by run()
    run::progress_clear();
    std::cout << fmt::format("== program {} ==\n", k);
    run::progress_show(fmt::format("tpu-sim net: program {}/{}: simulating {} ({})", k + 1, programs,
                                   plural(batch, "sample"), plural(seg.layers.size(), "layer")));
    return run::simulate(per, cfg, seg.program, mem);
  };
  return spec;
}

int Net::check(const compiler::Network& net, const compiler::Tensor& x, const compiler::Tensor& y) const {
  const std::size_t batch = x.batch();
  run::progress_show(fmt::format("tpu-sim net: checking {} against the int8 reference", plural(batch, "sample")));
  std::size_t compared = 0;
  const std::optional<std::string> mismatch = run::reference_mismatch(net, x, y, &compared);
  run::progress_clear();
  if (mismatch) {
    std::cerr << "tpu-sim: check failed: " << *mismatch << '\n';
    return kExitCheckFailed;
  }
  std::cout << fmt::format("check: {}{} {} the int8 reference\n", agree(compared, "", "all "),
                           plural(compared, "output element"), agree(compared, "equals", "equal"));
  return kExitOk;
}

}  // namespace

std::unique_ptr<Subcommand> add_net_command(CLI::App& app) { return std::make_unique<Net>(app); }

}  // namespace tpu::cli
