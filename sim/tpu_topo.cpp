// tpu-sim topo (subcommand.h): its options, and each selected row of the
// topology run through the run layer (run/network_run.h), in bands when its
// maps do not fit; a line per row, the report, totals and the check.
#include "subcommand.h"

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
#include "formats/topology.h"
#include "run/layer_report.h"
#include "run/network_run.h"
#include "run/outputs.h"
#include "run/progress.h"
#include "run/simulate.h"
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
  using S = compiler::LayerStats;
  static constexpr std::uint64_t S::*kCounts[] = {
      &S::cycles, &S::instructions, &S::array_macs, &S::useful_macs, &S::mmc_rows, &S::host_read_bytes,
      &S::host_write_bytes, &S::weight_bytes, &S::weight_stall_cycles, &S::weight_shift_cycles,
      &S::raw_stall_cycles, &S::input_data_stall_cycles};
  for (const auto count : kCounts) to.*count += from.*count;
  to.events += from.events;
}

// A row's network compiled: as one network, or, when a convolution's maps do
// not fit (the on-chip compiler holds a sample's input and output maps in the
// unified buffer; the host-step compiler has no depthwise convolution), in
// horizontal bands (`pieces`), each its own network, halving the band height
// until they compile; the note says so.
struct RowPlans {
  std::vector<compiler::RowNetwork> pieces;  // empty: the row as one network
  std::vector<compiler::NetworkPlan> plans;
};

RowPlans compile_row(const ArchConfig& cfg, const compiler::Topology& topo, const compiler::TopologyRow& row,
                     compiler::RowNetwork& rn) {
  RowPlans rp;
  try {
    rp.plans.push_back(compiler::compile_network(rn.net, rn.batch, cfg));
    return rp;
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
         rp.plans.empty(); band /= 2) {
      rp.pieces = compiler::split_into_bands(rn, band);
      try {
        for (const compiler::RowNetwork& piece : rp.pieces)
          rp.plans.push_back(compiler::compile_network(piece.net, piece.batch, cfg));
      } catch (const compiler::CompileError&) {
        rp.plans.clear();
        if (band == 1) throw compiler::TopologyError(topo.path, row.line, why);
      }
    }
    // Why, without the host-step compiler's reason (it never runs depthwise layers).
    std::string reason = e.what();
    reason = reason.substr(0, reason.find(" (and with host steps"));
    rn.note += fmt::format("{}in {} of at most {} output rows, each its own program (as one: {})",
                           rn.note.empty() ? "" : "; ", plural(rp.pieces.size(), "band"),
                           rp.pieces.front().out_h, reason);
  }
  return rp;
}

// Band `piece`'s output rows into the row's output, sample by sample.
void merge_band(const RowPlans& rp, std::size_t piece, const compiler::RowNetwork& rn,
                const compiler::Tensor& band, compiler::Tensor& output) {
  const std::size_t band_elems = elements(band.shape) / rn.batch;
  if (piece == 0) {
    output.shape = band.shape;
    output.shape[1] = rn.out_h;
    output.data.assign(elements(output.shape), 0);
  }
  const std::size_t sample_elems = output.data.size() / rn.batch;
  const std::size_t offset = piece * rp.pieces.front().out_h * (band_elems / rp.pieces[piece].out_h);
  for (std::uint64_t n = 0; n < rn.batch; ++n)
    std::copy(band.data.begin() + static_cast<std::ptrdiff_t>(n * band_elems),
              band.data.begin() + static_cast<std::ptrdiff_t>((n + 1) * band_elems),
              output.data.begin() + static_cast<std::ptrdiff_t>(n * sample_elems + offset));
}

// A row's run: its programs' figures and its output (the bands' merged).
struct RowRun {
  compiler::LayerStats ls;
  nlohmann::json programs_json = nlohmann::json::array();
  run::RunTotals totals;  // cycles and MACs of the row's programs
  compiler::Tensor output;
};

// The rows run so far, and what the report and statistics add up: --report
// at the end; --stats at the end or at a fault (outputs.h).
struct RowsRun {
  std::vector<run::LayerReportRow> report_rows;
  nlohmann::json layers_json = nlohmann::json::array();
  run::RunTotals totals;
  std::uint64_t scalesim_macs = 0, checked = 0;
  run::Outputs outputs;
  std::string report_path, stats_path;
};

class Topo final : public Subcommand {
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
  // The rows to run (--rows, else all), checked against the options.
  std::vector<std::size_t> select_rows(const compiler::Topology& topo, bool gemm) const;
  // Runs selected[k]: its line, its report row; returns the exit status (0: go on).
  int run_row(const ArchConfig& cfg, const compiler::Topology& topo, const compiler::TopologyOptions& opts,
              bool gemm, const std::vector<std::size_t>& selected, std::size_t k, RowsRun& rows);
  // A row's figures into the totals, the report and the statistics, and its line on stdout.
  void report_row(const ArchConfig& cfg, const compiler::TopologyRow& row, const compiler::RowNetwork& rn,
                  const RowRun& rr, RowsRun& rows) const;
  // The statistics of the rows run so far (all of them at the end).
  nlohmann::json stats_so_far(const ArchConfig& cfg, bool gemm, const RowsRun& rows) const;

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

std::vector<std::size_t> Topo::select_rows(const compiler::Topology& topo, bool gemm) const {
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
  return selected;
}

nlohmann::json Topo::stats_so_far(const ArchConfig& cfg, bool gemm, const RowsRun& rows) const {
  nlohmann::json stats;
  stats["topology"] = path_;
  stats["format"] = gemm ? "gemm" : "conv";
  stats["seed"] = seed_;
  stats["array_n"] = cfg.array_n;
  stats["layers"] = rows.layers_json;
  stats["total"] = {{"cycles", rows.totals.cycles},
                    {"macs", rows.totals.macs},
                    {"useful_macs", rows.totals.useful_macs},
                    {"scalesim_macs", rows.scalesim_macs},
                    {"utilization", run::layer_utilization(rows.totals.macs, rows.totals.cycles, cfg.array_n)},
                    {"clock_mhz", cfg.clock_mhz},
                    {"seconds", rows.totals.seconds(cfg)},
                    {"useful_tops", rows.totals.useful_tops(cfg)}};
  stats["total"]["energy"] = run::totals_energy_json(cfg, rows.totals, 0);
  return stats;
}

int Topo::run_rows(const ArchConfig& cfg, const compiler::Topology& topo) {
  const bool gemm = topo.format == TopologyFormat::Gemm;
  const std::vector<std::size_t> selected = select_rows(topo, gemm);
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
  RowsRun rows;
  rows.report_path = rows.outputs.file(report_);
  rows.stats_path = rows.outputs.file(args_.stats, run::Outputs::When::SuccessOrFault);
  for (std::size_t k = 0; k < selected.size(); ++k)
    if (const int rc = run_row(cfg, topo, opts, gemm, selected, k, rows); rc != kExitOk) return rc;
  run::progress_clear();

  if (!rows.report_path.empty())
    write_file_atomic(rows.report_path, run::layer_report_csv(rows.report_rows, cfg,
                                                              {"line", "scalesim_ofmap_hxw", "scalesim_macs",
                                                               "useful_utilization_percent", "note"}));
  const run::RunTotals& t = rows.totals;
  std::cout << fmt::format(
      "total: {} cycles, {} MACs, utilization {:.2f}% of {}x{} MACs per cycle; {} useful MACs "
      "(SCALE-Sim's count: {})\n",
      t.cycles, t.macs, 100.0 * run::layer_utilization(t.macs, t.cycles, cfg.array_n), cfg.array_n,
      cfg.array_n, t.useful_macs, rows.scalesim_macs);
  std::cout << fmt::format("time: {:.6g} s at {} MHz, {:.4g} TOPS of useful work (2 ops per useful MAC)\n",
                           t.seconds(cfg), cfg.clock_mhz, t.useful_tops(cfg));
  const nlohmann::json e = run::totals_energy_json(cfg, t, 0);  // docs/energy.md
  std::cout << fmt::format("energy: {:.6g} J ({:.6g} J static), {:.4g} W average, {:.4g} useful TOPS/W\n",
                           e["total_j"].get<double>(), e["static_j"].get<double>(), e["avg_power_w"].get<double>(),
                           e["useful_tops_per_w"].get<double>());
  if (!rows.stats_path.empty()) write_file_atomic(rows.stats_path, stats_so_far(cfg, gemm, rows).dump(2) + "\n");
  rows.outputs.commit();
  if (check_)
    std::cout << fmt::format("check: {} {} the int8 reference ({})\n",
                             plural(selected.size(), "row"), agree(selected.size(), "equals", "equal"),
                             plural(rows.checked, "output element"));
  return kExitOk;
}

int Topo::run_row(const ArchConfig& cfg, const compiler::Topology& topo, const compiler::TopologyOptions& opts,
                  bool gemm, const std::vector<std::size_t>& selected, std::size_t k, RowsRun& rows) {
  const std::size_t index = selected[k];
  const compiler::TopologyRow& row = topo.rows[index];
  const auto status = [&](const std::string& step) {
    run::progress_show(fmt::format("tpu-sim topo: row {}/{} '{}': {}", k + 1, selected.size(), row.name, step));
  };
  status("building");
  compiler::RowNetwork rn = compiler::build_row_network(topo, index, opts);
  status("compiling");
  const RowPlans rp = compile_row(cfg, topo, row, rn);

  RowRun rr;
  rr.ls.segment = 0;
  std::size_t program_count = 0;
  for (const compiler::NetworkPlan& plan : rp.plans) program_count += plan.program_count();
  std::size_t program_index = 0;
  // Each program as `tpu-sim run` runs it, without the summary (the row's
  // line instead); the waveforms and the timeline numbered across the bands.
  const run::ProgramSim sim = [&](std::size_t, std::size_t, const compiler::ProgramPlan& seg,
                                  model::Memories& mem) {
    status(program_count == 1 ? std::string("simulating")
                              : fmt::format("simulating program {}/{}", program_index + 1, program_count));
    run::SimulateOptions per = run::program_options(args_, program_index, program_count);
    per.summary = false;
    ++program_index;
    return run::simulate(per, cfg, seg.program, mem);
  };
  for (std::size_t piece = 0; piece < rp.plans.size(); ++piece) {
    const compiler::Tensor& input = rp.pieces.empty() ? rn.input : rp.pieces[piece].input;
    const compiler::NetworkRun result = run::run_plan(cfg, rp.plans[piece], input, sim);
    for (const model::RunLog& log : result.logs) rr.programs_json.push_back(run::stats_json(cfg, log));
    if (result.fault) {
      // The rows before, and this row's programs up to the fault (the last has its "fault").
      if (!rows.stats_path.empty()) {
        nlohmann::json stats = stats_so_far(cfg, gemm, rows);
        const model::RunLog& last = result.logs.back();
        stats["fault"] = {{"line", row.line},
                          {"name", row.name},
                          {"message", last.fault ? last.fault->message() : "the program did not halt"},
                          {"programs", rr.programs_json}};
        write_file_atomic(rows.stats_path, stats.dump(2) + "\n");
      }
      rows.outputs.commit_fault();
      return kExitFault;
    }
    add_layer_stats(rr.ls, result.layers.at(0));
    for (const model::RunLog& log : result.logs) rr.totals.add(log);
    if (rp.pieces.empty()) rr.output = result.output;
    else merge_band(rp, piece, rn, result.output, rr.output);
  }
  if (check_) {
    status("checking against the int8 reference");
    std::size_t compared = 0;
    if (const auto mismatch = run::reference_mismatch(rn.net, rn.input, rr.output, &compared)) {
      run::progress_clear();
      std::cerr << fmt::format("tpu-sim: check failed: {}:{}: row '{}': {}\n", topo.path, row.line, row.name,
                               *mismatch);
      return kExitCheckFailed;
    }
    rows.checked += compared;
  }
  report_row(cfg, row, rn, rr, rows);
  return kExitOk;
}

void Topo::report_row(const ArchConfig& cfg, const compiler::TopologyRow& row, const compiler::RowNetwork& rn,
                      const RowRun& rr, RowsRun& rows) const {
  const compiler::LayerStats& ls = rr.ls;
  const std::uint64_t scalesim = compiler::scalesim_macs(row) * (row.gemm ? 1 : rn.batch);
  rows.totals.cycles += rr.totals.cycles;
  rows.totals.macs += rr.totals.macs;
  rows.totals.events += rr.totals.events;
  rows.totals.useful_macs += ls.useful_macs;
  rows.scalesim_macs += scalesim;

  const compiler::Layer& layer = rn.net.layers[0];
  const std::vector<std::size_t> out_shape(rr.output.shape.begin() + 1, rr.output.shape.end());
  const std::string scalesim_ofmap = fmt::format("{}x{}", rn.scalesim_h, rn.scalesim_w);
  run::LayerReportRow report;
  report.name = row.name;
  report.type = rn.depthwise ? "depthwise_conv2d" : compiler::layer_kind_name(layer.kind);
  report.batch = rn.batch;
  report.shape = out_shape;
  report.stats = ls;
  // Useful MACs over cycles x N^2: SCALE-Sim's "Overall Util %".
  const double useful_utilization = run::layer_utilization(ls.useful_macs, ls.cycles, cfg.array_n);
  report.extra = {std::to_string(row.line), scalesim_ofmap, std::to_string(scalesim),
                  fmt::format("{:.3f}", 100.0 * useful_utilization), rn.note};
  nlohmann::json lj = run::layer_report_json(report, cfg);
  lj["line"] = row.line;
  lj["batch"] = rn.batch;
  lj["scalesim_ofmap"] = {rn.scalesim_h, rn.scalesim_w};
  lj["scalesim_macs"] = scalesim;
  lj["useful_utilization"] = useful_utilization;
  lj["note"] = rn.note;
  lj["programs"] = rr.programs_json;
  rows.layers_json.push_back(lj);
  rows.report_rows.push_back(std::move(report));

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
      row.name, rn.depthwise ? "dwconv" : row.gemm ? "dense" : "conv", a, b, c, rr.totals.cycles, ls.useful_macs,
      100.0 * run::layer_utilization(ls.array_macs, rr.totals.cycles, cfg.array_n),
      ls.array_macs ? 100.0 * static_cast<double>(ls.useful_macs) / static_cast<double>(ls.array_macs) : 0.0,
      rn.note);
}

}  // namespace

std::unique_ptr<Subcommand> add_topo_command(CLI::App& app) { return std::make_unique<Topo>(app); }

}  // namespace tpu::cli
