#include "tpu_topo.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"
#include "compiler/layer_reference.h"
#include "compiler/topology.h"
#include "run/layer_report.h"
#include "run/outputs.h"
#include "run/progress.h"
#include "run/stats.h"
#include "sim_args.h"

namespace tpu::cli {
namespace {

using compiler::TopologyFormat;

// "1,3-5" -> 0-based row indices (in the order given, each once), checked
// against the file's row count. Throws CLI::ValidationError.
std::vector<std::size_t> parse_rows(const std::string& text, std::size_t count) {
  std::vector<std::size_t> rows;
  std::vector<bool> seen(count, false);
  const auto bad = [&](const std::string& why) { throw CLI::ValidationError("--rows", why); };
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    unsigned long long lo = 0, hi = 0;
    char dash = 0, tail = 0;
    const int got = std::sscanf(item.c_str(), "%llu%c%llu%c", &lo, &dash, &hi, &tail);
    if (item.empty() || item.find_first_not_of("0123456789-") != std::string::npos ||
        !(got == 1 || (got == 3 && dash == '-')))
      bad(fmt::format("'{}' is not a row number or a range A-B (rows count from 1)", item));
    if (got == 1) hi = lo;
    if (lo < 1 || hi < lo || hi > count)
      bad(fmt::format("'{}' is outside the file's rows 1..{}", item, count));
    for (unsigned long long r = lo; r <= hi; ++r)
      if (!seen[r - 1]) {
        seen[r - 1] = true;
        rows.push_back(static_cast<std::size_t>(r - 1));
      }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rows;
}

std::size_t elements(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

// A band's figures added to its row's (every count of compiler::LayerStats).
void add_layer_stats(compiler::LayerStats& to, const compiler::LayerStats& from) {
  to.cycles += from.cycles;
  to.instructions += from.instructions;
  to.array_macs += from.array_macs;
  to.useful_macs += from.useful_macs;
  to.mmc_rows += from.mmc_rows;
  to.host_read_bytes += from.host_read_bytes;
  to.host_write_bytes += from.host_write_bytes;
  to.weight_bytes += from.weight_bytes;
  to.weight_stall_cycles += from.weight_stall_cycles;
  to.weight_shift_cycles += from.weight_shift_cycles;
  to.raw_stall_cycles += from.raw_stall_cycles;
  to.input_data_stall_cycles += from.input_data_stall_cycles;
}

// PATH for the first of one, else PATH with ".K" before its extension.
std::string indexed_path(const std::string& path, std::size_t k, std::size_t count) {
  if (count == 1) return path;
  const std::filesystem::path p(path);
  std::filesystem::path out = p.parent_path() / p.stem();
  out += fmt::format(".{}{}", k, p.extension().string());
  return out.string();
}

class Topo final : public TopoCommand {
 public:
  explicit Topo(CLI::App& app) {
    cmd_ = app.add_subcommand(
        "topo", "run a SCALE-Sim topology file (convolution or GEMM CSV), each row as its own "
                "layer with random int8 data");
    cmd_->add_option("topology", path_, "SCALE-Sim topology (.csv, docs/topologies.md)")->required();
    cmd_->add_option("--format", format_,
                     "auto (a header Layer, M, N, K is a GEMM file), conv or gemm")
        ->check(CLI::IsMember({"auto", "conv", "gemm"}))
        ->capture_default_str();
    batch_opt_ = cmd_->add_option("--batch", batch_, "samples per convolution row (a GEMM row has M)")
                     ->check(CLI::Range(1, 1 << 20))
                     ->capture_default_str();
    cmd_->add_option("--seed", seed_, "seed of the random weights and inputs")->capture_default_str();
    cmd_->add_option("--rows", rows_, "run only these rows, e.g. 1,3-5 (counted from 1, header excluded)");
    cmd_->add_flag("--valid", valid_,
                   "valid convolutions (no padding) instead of padding to SCALE-Sim's output size "
                   "ceil((H - R + S) / S)");
    cmd_->add_flag("--single-filter-depthwise", single_filter_dw_,
                   "run rows of one filter over several channels (how SCALE-Sim's mobilenet.csv "
                   "writes depthwise layers) as depthwise convolutions");
    cmd_->add_flag("--check",
                   check_, "compare every row's output with the independent int8 reference (exit 6 if it differs)");
    cmd_->add_option("--report", report_,
                     "write a per-row report here (.csv: cycles, MACs, utilization, bytes moved, "
                     "SCALE-Sim's output size and MACs; units in the header)");
    args_.add_to(*cmd_);
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override;

 private:
  int run_rows(const ArchConfig& cfg, const compiler::Topology& topo);

  CLI::App* cmd_ = nullptr;
  CLI::Option* batch_opt_ = nullptr;
  SimArgs args_;
  std::string path_;
  std::string format_ = "auto";
  std::uint64_t batch_ = 1;
  std::uint64_t seed_ = 1;
  std::string rows_;
  bool valid_ = false;
  bool single_filter_dw_ = false;
  bool check_ = false;
  std::string report_;
};

int Topo::run() {
  const ArchConfig cfg = args_.cfg.resolve();
  const TopologyFormat format = format_ == "conv"   ? TopologyFormat::Conv
                                : format_ == "gemm" ? TopologyFormat::Gemm
                                                    : TopologyFormat::Auto;
  try {
    const compiler::Topology topo = compiler::load_topology(path_, format);
    return run_rows(cfg, topo);
  } catch (const compiler::TopologyError& e) {
    run::progress_clear();
    std::cerr << e.what() << '\n';
    return kExitBadInput;
  }
}

int Topo::run_rows(const ArchConfig& cfg, const compiler::Topology& topo) {
  const bool gemm = topo.format == TopologyFormat::Gemm;
  if (gemm && batch_opt_->count() > 0)
    throw CLI::ValidationError("--batch", "a GEMM file's rows are M samples each; --batch is for convolution rows");
  std::vector<std::size_t> selected;
  if (rows_.empty())
    for (std::size_t i = 0; i < topo.rows.size(); ++i) selected.push_back(i);
  else
    selected = parse_rows(rows_, topo.rows.size());
  const bool wave = !args_.vcd.empty() || !args_.fst.empty();
  if ((wave || !args_.timeline.empty()) && selected.size() != 1)
    throw CLI::ValidationError(!args_.vcd.empty() ? "--vcd" : !args_.fst.empty() ? "--fst" : "--timeline",
                               "it shows one row's programs: choose the row with --rows");
  compiler::TopologyOptions opts;
  opts.seed = seed_;
  opts.batch = batch_;
  opts.valid = valid_;
  opts.single_filter_depthwise = single_filter_dw_;
  for (std::size_t index : selected) compiler::check_row(topo, index, opts);  // before any output

  const run::ProgressScope progress(run::ProgressScope::stderr_is_terminal());
  std::cout << fmt::format(
      "topology {}: {} {}, {} on a {}x{} array, each row its own network with random int8 data "
      "(seed {})\n",
      path_, plural(selected.size(), gemm ? "GEMM row" : "convolution row"),
      selected.size() == topo.rows.size() ? "(all)" : fmt::format("of {}", topo.rows.size()),
      gemm ? std::string("each row's M samples") : plural(batch_, "sample") + " per row", cfg.array_n,
      cfg.array_n, seed_);
  std::cout << fmt::format("{:>4} {:<14} {:<7} {:<14} {:<12} {:<14} {:>11} {:>14} {:>8} {:>8}  {}\n", "line",
                           "layer", "type", gemm ? "A (MxK)" : "ifmap", gemm ? "B (KxN)" : "filter",
                           gemm ? "C (MxN)" : "ofmap", "cycles", "useful MACs", "util", "map.eff",
                           "note");

  std::vector<run::LayerReportRow> report_rows;
  nlohmann::json layers_json = nlohmann::json::array();
  std::uint64_t total_cycles = 0, total_macs = 0, total_useful = 0, total_scalesim = 0, checked = 0;
  // --report at the end; --stats at the end or at a fault (outputs.h).
  run::Outputs outputs;
  const std::string report_path = outputs.file(report_);
  const std::string stats_path = outputs.file(args_.stats, run::Outputs::When::SuccessOrFault);
  // The rows run so far (all of them at the end).
  const auto stats_json_so_far = [&] {
    const double seconds = static_cast<double>(total_cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
    nlohmann::json stats;
    stats["topology"] = path_;
    stats["format"] = gemm ? "gemm" : "conv";
    stats["seed"] = seed_;
    stats["array_n"] = cfg.array_n;
    stats["layers"] = layers_json;
    stats["total"] = {{"cycles", total_cycles},
                      {"macs", total_macs},
                      {"useful_macs", total_useful},
                      {"scalesim_macs", total_scalesim},
                      {"utilization", run::layer_utilization(total_macs, total_cycles, cfg.array_n)},
                      {"clock_mhz", cfg.clock_mhz},
                      {"seconds", seconds},
                      {"useful_tops", seconds > 0 ? 2.0 * static_cast<double>(total_useful) / seconds / 1e12 : 0.0}};
    return stats;
  };
  for (std::size_t k = 0; k < selected.size(); ++k) {
    const std::size_t index = selected[k];
    const compiler::TopologyRow& row = topo.rows[index];
    const auto status = [&](const std::string& step) {
      run::progress_show(fmt::format("tpu-sim topo: row {}/{} '{}': {}", k + 1, selected.size(), row.name, step));
    };
    status("building");
    compiler::RowNetwork rn = compiler::build_row_network(topo, index, opts);
    status("compiling");
    // The row as one network, or, when a convolution's maps do not fit (the
    // on-chip compiler holds a sample's input and output maps in the unified
    // buffer; the host-step compiler has no depthwise convolution), in
    // horizontal bands, each its own network, halving the band height until
    // they compile.
    std::vector<compiler::RowNetwork> pieces;
    std::vector<compiler::NetworkPlan> plans;
    try {
      plans.push_back(compiler::compile_network(rn.net, rn.batch, cfg));
    } catch (const compiler::CompileError& e) {
      const std::string why = fmt::format("layer '{}' does not compile: {}", row.name, e.what());
      // Bands help with maps, not with weights: at least ceil(K / N) x
      // ceil(Cout / N) tiles (depthwise: R x S x ceil(C / N) diagonal ones).
      const std::uint64_t n = cfg.array_n;
      const std::uint64_t min_tiles =
          rn.depthwise ? row.filter_h * row.filter_w * ((row.channels + n - 1) / n)
                       : ((row.filter_h * row.filter_w * row.channels + n - 1) / n) * ((row.num_filters + n - 1) / n);
      if (row.gemm || min_tiles > cfg.weight_tiles) throw compiler::TopologyError(topo.path, row.line, why);
      for (std::uint64_t band = std::min(rn.out_h, std::max<std::uint64_t>(1, cfg.acc_rows / rn.out_w));
           plans.empty(); band /= 2) {
        pieces = compiler::split_into_bands(rn, band);
        try {
          for (const compiler::RowNetwork& piece : pieces)
            plans.push_back(compiler::compile_network(piece.net, piece.batch, cfg));
        } catch (const compiler::CompileError&) {
          plans.clear();
          if (band == 1) throw compiler::TopologyError(topo.path, row.line, why);
        }
      }
      // Why, without the host-step compiler's reason (it never runs depthwise layers).
      std::string reason = e.what();
      reason = reason.substr(0, reason.find(" (and with host steps"));
      rn.note += fmt::format("{}in {} of at most {} output rows, each its own program (as one: {})",
                             rn.note.empty() ? "" : "; ", plural(pieces.size(), "band"),
                             pieces.front().out_h, reason);
    }

    compiler::LayerStats ls;
    ls.segment = 0;
    nlohmann::json programs_json = nlohmann::json::array();
    std::uint64_t cycles = 0, macs = 0;
    compiler::Tensor output;
    std::size_t program_count = 0;
    for (const compiler::NetworkPlan& plan : plans) program_count += plan.segments.size();
    std::size_t program_index = 0;
    for (std::size_t piece = 0; piece < plans.size(); ++piece) {
      const compiler::NetworkPlan& plan = plans[piece];
      const compiler::ProgramRunner runner = [&](std::size_t, const compiler::SegmentPlan& seg,
                                                 model::Memories& mem) {
        status(program_count == 1 ? std::string("simulating")
                                  : fmt::format("simulating program {}/{}", program_index + 1, program_count));
        SimArgs per = args_;
        per.out.clear();
        per.stats.clear();
        per.summary = false;
        if (!args_.vcd.empty()) per.vcd = indexed_path(args_.vcd, program_index, program_count);
        if (!args_.fst.empty()) per.fst = indexed_path(args_.fst, program_index, program_count);
        if (!args_.timeline.empty()) per.timeline = indexed_path(args_.timeline, program_index, program_count);
        ++program_index;
        return run::simulate(per, cfg, seg.program, mem);
      };
      const compiler::Tensor& input = pieces.empty() ? rn.input : pieces[piece].input;
      const compiler::NetworkRun result = compiler::run_network(plan, input, cfg, runner);
      if (result.fault) {
        // The rows before, and this row's programs up to the fault (the last has its "fault").
        if (!stats_path.empty()) {
          for (const model::RunLog& log : result.logs) programs_json.push_back(run::stats_json(cfg, log));
          nlohmann::json stats = stats_json_so_far();
          const model::RunLog& last = result.logs.back();
          stats["fault"] = {{"line", row.line},
                            {"name", row.name},
                            {"message", last.fault ? last.fault->message() : "the program did not halt"},
                            {"programs", programs_json}};
          write_file_atomic(stats_path, stats.dump(2) + "\n");
        }
        outputs.commit_fault();
        return kExitFault;
      }
      add_layer_stats(ls, result.layers.at(0));
      for (const model::RunLog& log : result.logs) {
        cycles += log.stats.cycles;
        macs += log.stats.macs;
        programs_json.push_back(run::stats_json(cfg, log));
      }
      if (pieces.empty()) {
        output = result.output;
        continue;
      }
      // A band's output rows into the row's output, sample by sample.
      const std::size_t band_elems = elements(result.output.shape) / rn.batch;
      if (piece == 0) {
        output.shape = result.output.shape;
        output.shape[1] = rn.out_h;
        output.data.assign(elements(output.shape), 0);
      }
      const std::size_t sample_elems = output.data.size() / rn.batch;
      const std::size_t offset = piece * pieces.front().out_h * (band_elems / pieces[piece].out_h);
      for (std::uint64_t n = 0; n < rn.batch; ++n)
        std::copy(result.output.data.begin() + static_cast<std::ptrdiff_t>(n * band_elems),
                  result.output.data.begin() + static_cast<std::ptrdiff_t>((n + 1) * band_elems),
                  output.data.begin() + static_cast<std::ptrdiff_t>(n * sample_elems + offset));
    }
    if (check_) {
      status("checking against the int8 reference");
      const compiler::Tensor want = compiler::reference_network(rn.net, rn.input);
      for (std::size_t i = 0; i < want.data.size(); ++i)
        if (output.data[i] != want.data[i]) {
          run::progress_clear();
          std::cerr << fmt::format(
              "tpu-sim: check failed: {}:{}: row '{}': output element {} = {} but the int8 reference "
              "gives {}\n",
              topo.path, row.line, row.name, i, output.data[i], want.data[i]);
          return kExitCheckFailed;
        }
      checked += want.data.size();
    }
    const std::uint64_t scalesim = compiler::scalesim_macs(row) * (row.gemm ? 1 : rn.batch);
    total_cycles += cycles;
    total_macs += macs;
    total_useful += ls.useful_macs;
    total_scalesim += scalesim;

    const compiler::Layer& layer = rn.net.layers[0];
    const std::vector<std::size_t> out_shape(output.shape.begin() + 1, output.shape.end());
    const std::string scalesim_ofmap = fmt::format("{}x{}", rn.scalesim_h, rn.scalesim_w);
    run::LayerReportRow rr;
    rr.name = row.name;
    rr.type = rn.depthwise ? "depthwise_conv2d" : compiler::layer_kind_name(layer.kind);
    rr.batch = rn.batch;
    rr.shape = out_shape;
    rr.stats = ls;
    // Useful MACs over cycles x N^2: SCALE-Sim's "Overall Util %".
    rr.extra = {std::to_string(row.line), scalesim_ofmap, std::to_string(scalesim),
                fmt::format("{:.3f}", 100.0 * run::layer_utilization(ls.useful_macs, ls.cycles, cfg.array_n)),
                rn.note};
    nlohmann::json lj = run::layer_report_json(rr, cfg.array_n);
    lj["line"] = row.line;
    lj["batch"] = rn.batch;
    lj["scalesim_ofmap"] = {rn.scalesim_h, rn.scalesim_w};
    lj["scalesim_macs"] = scalesim;
    lj["useful_utilization"] = run::layer_utilization(ls.useful_macs, ls.cycles, cfg.array_n);
    lj["note"] = rn.note;
    lj["programs"] = programs_json;
    layers_json.push_back(lj);
    report_rows.push_back(std::move(rr));

    run::progress_clear();
    const std::string a = row.gemm ? fmt::format("{}x{}", row.m, row.k)
                                   : fmt::format("{}x{}x{}", row.ifmap_h, row.ifmap_w, row.channels);
    const std::string b =
        row.gemm ? fmt::format("{}x{}", row.k, row.n)
                 : fmt::format("{}x{}/{}{} x{}", row.filter_h, row.filter_w, row.stride_h,
                               row.stride_w == row.stride_h ? "" : fmt::format(",{}", row.stride_w),
                               rn.depthwise ? 1 : row.num_filters);
    std::string c = row.gemm ? fmt::format("{}x{}", row.m, row.n) : std::string();
    if (!row.gemm)
      for (std::size_t d : out_shape) c += (c.empty() ? "" : "x") + std::to_string(d);
    std::cout << fmt::format(
        "{:>4} {:<14} {:<7} {:<14} {:<12} {:<14} {:>11} {:>14} {:>7.2f}% {:>7.2f}%  {}\n", row.line,
        row.name, rn.depthwise ? "dwconv" : row.gemm ? "dense" : "conv", a, b, c, cycles, ls.useful_macs,
        100.0 * run::layer_utilization(ls.array_macs, cycles, cfg.array_n),
        ls.array_macs ? 100.0 * static_cast<double>(ls.useful_macs) / static_cast<double>(ls.array_macs) : 0.0,
        rn.note);
  }
  run::progress_clear();

  if (!report_path.empty())
    write_file_atomic(report_path, run::layer_report_csv(report_rows, cfg.array_n,
                                                {"line", "scalesim_ofmap_hxw", "scalesim_macs",
                                                 "useful_utilization_percent", "note"}));
  const double seconds = static_cast<double>(total_cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
  const double useful_tops = seconds > 0 ? 2.0 * static_cast<double>(total_useful) / seconds / 1e12 : 0.0;
  std::cout << fmt::format(
      "total: {} cycles, {} MACs, utilization {:.2f}% of {}x{} MACs per cycle; {} useful MACs "
      "(SCALE-Sim's count: {})\n",
      total_cycles, total_macs, 100.0 * run::layer_utilization(total_macs, total_cycles, cfg.array_n), cfg.array_n,
      cfg.array_n, total_useful, total_scalesim);
  std::cout << fmt::format("time: {:.6g} s at {} MHz, {:.4g} TOPS of useful work (2 ops per useful MAC)\n",
                           seconds, cfg.clock_mhz, useful_tops);
  if (!stats_path.empty()) write_file_atomic(stats_path, stats_json_so_far().dump(2) + "\n");
  outputs.commit();
  if (check_)
    std::cout << fmt::format("check: {} {} the int8 reference ({})\n",
                             plural(selected.size(), "row"), agree(selected.size(), "equals", "equal"),
                             plural(checked, "output element"));
  return kExitOk;
}

}  // namespace

std::unique_ptr<TopoCommand> add_topo_command(CLI::App& app) { return std::make_unique<Topo>(app); }

}  // namespace tpu::cli
