#include "run/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "isa/isa.h"
#include "model/fifo_occupancy.h"
#include "model/timing.h"

namespace tpu::run {
namespace {

// Track order in a process: the controller, then the units in data-flow order.
constexpr std::array<isa::Unit, 4> kUnits = {isa::Unit::HostDma, isa::Unit::WeightDma,
                                             isa::Unit::MatrixUnit, isa::Unit::ActivationUnit};
constexpr unsigned kLanesPerUnit = 64;  // tids unit * 64 + lane; lane 0 is the first track

std::string track_name(isa::Unit u) { return std::string(isa::unit_name(u)); }

}  // namespace

void Timeline::add_run(const std::string& name, const isa::Program& prog, const model::RunLog& log,
                       std::uint64_t offset, const std::function<std::string(std::uint32_t)>& layer_of) {
  const unsigned pid = ++processes_;
  const double us_per_cycle = 1.0 / static_cast<double>(cfg_.clock_mhz);
  const auto ts = [&](model::Cycle c) { return static_cast<double>(offset + c) * us_per_cycle; };
  const auto meta = [&](const char* what, unsigned tid, const std::string& value, bool sort = false) {
    nlohmann::json e = {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", what}, {"args", {{"name", value}}}};
    if (sort) e["args"] = {{"sort_index", tid}};
    events_.push_back(std::move(e));
  };
  meta("process_name", 0, name);
  events_.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}});
  meta("thread_name", 0, "controller");
  const auto slice = [&](unsigned tid, const std::string& title, model::Cycle first, model::Cycle last,
                         nlohmann::json args) {
    events_.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", title}, {"ts", ts(first)},
                       {"dur", static_cast<double>(last - first + 1) * us_per_cycle}, {"args", std::move(args)}});
  };

  // Units' instructions on the first free track of their unit; the end of
  // each track's last slice.
  std::map<unsigned, model::Cycle> lane_free;  // tid -> first free cycle
  std::vector<std::pair<model::Cycle, int>> rows_in_flight;  // (cycle, +-rows)
  std::vector<std::pair<model::Cycle, int>> tiles;           // (cycle, +-1)
  for (std::size_t seq = 0; seq < log.retired.size(); ++seq) {
    const model::RetireRecord& r = log.retired[seq];
    const isa::Instruction& in = prog.code[r.pc];
    const std::string text = isa::disassemble(in);
    nlohmann::json args = {{"pc", r.pc}, {"issue", r.issue}};
    args["start"] = r.start == model::kNever ? nlohmann::json("-") : nlohmann::json(r.start);
    args["completion"] = r.completed ? nlohmann::json(r.completion) : nlohmann::json("-");
    // The row count of the transfers, MMCs, ACTs and POOLs (their third operand).
    if (isa::spec_of(in.opcode).unit != isa::Unit::Controller && in.opcode != isa::Opcode::RW)
      args["rows"] = in.operands[in.opcode == isa::Opcode::RWU ? 1 : 2];
    if (layer_of) {
      const std::string layer = layer_of(r.pc);
      if (!layer.empty()) args["layer"] = layer;
    }
    slice(0, "issue " + text, r.issue, r.issue, args);
    const isa::Unit unit = isa::spec_of(in.opcode).unit;
    if (model::pushes_tile(in)) tiles.emplace_back(r.issue, 1);
    if (in.opcode == isa::Opcode::MMC && in.has(isa::kFlagMmcSwitch)) tiles.emplace_back(r.issue, -1);
    if (unit == isa::Unit::Controller) continue;
    // An MMC.S waiting in the matrix unit for its weights: a slice of its own
    // from issue + 1 on, on the track of the MMC.
    const bool waits = in.opcode == isa::Opcode::MMC && r.start > r.issue + 1;
    const model::Cycle from = waits ? r.issue + 1 : r.start;
    // An instruction cut by a fault ends in the run's last cycle.
    if (!r.completed && from >= log.stats.cycles) continue;  // never started
    const model::Cycle last = r.completed ? r.completion : log.stats.cycles - 1;
    const auto u = static_cast<unsigned>(std::find(kUnits.begin(), kUnits.end(), unit) - kUnits.begin());
    unsigned tid = (u + 1) * kLanesPerUnit;
    while (lane_free.count(tid) && lane_free[tid] > from) ++tid;
    if (!lane_free.count(tid)) {
      const unsigned lane = tid - (u + 1) * kLanesPerUnit;
      meta("thread_name", tid, lane == 0 ? track_name(unit) : fmt::format("{} #{}", track_name(unit), lane + 1));
      meta("thread_sort_index", tid, "", true);
    }
    lane_free[tid] = last + 1;
    if (waits) slice(tid, "wait for weights: " + text, from, std::min(r.start, log.stats.cycles) - 1, args);
    if (r.start >= log.stats.cycles) continue;  // still waiting when the run stopped
    slice(tid, text, r.start, last, args);
    if (in.opcode == isa::Opcode::MMC) {
      // Row i: read at s + i, written to the accumulators at s + i + 2N.
      const auto rows = static_cast<model::Cycle>(in.operands[2]);
      const model::Cycle n2 = 2 * cfg_.array_n;
      for (model::Cycle i = 0; i < rows; ++i) {
        rows_in_flight.emplace_back(r.start + i, 1);
        rows_in_flight.emplace_back(r.start + i + n2 + 1, -1);
      }
    }
  }
  for (const model::StallRun& s : log.stall_runs)
    slice(0, std::string("stall: ") + model::stall_cause_name(s.cause), s.first, s.last,
          {{"pc", s.pc}, {"first", s.first}, {"last", s.last}, {"cycles", s.last - s.first + 1}});

  // Counters: one sample per cycle the value changes.
  const auto counter = [&](const char* title, const char* series, std::vector<std::pair<model::Cycle, int>>& steps) {
    std::sort(steps.begin(), steps.end());
    long value = 0;
    for (std::size_t i = 0; i < steps.size();) {
      const model::Cycle c = steps[i].first;
      for (; i < steps.size() && steps[i].first == c; ++i) value += steps[i].second;
      events_.push_back({{"ph", "C"}, {"pid", pid}, {"name", title}, {"ts", ts(c)}, {"args", {{series, value}}}});
    }
  };
  std::vector<std::pair<model::Cycle, int>> fifo;
  for (const model::FifoStep& s : model::fifo_occupancy(cfg_, prog, log))
    if (s.cycle < log.stats.cycles) fifo.emplace_back(s.cycle, s.delta);
  counter("array rows in flight", "rows", rows_in_flight);
  counter("weight FIFO occupancy", "tiles", fifo);
  counter("weight tiles requested", "tiles", tiles);
}

std::string Timeline::json() const {
  nlohmann::json j;
  j["traceEvents"] = events_;
  j["displayTimeUnit"] = "ns";
  j["otherData"] = {{"generator", "tpu-sim"}, {"clock_mhz", cfg_.clock_mhz}, {"array_n", cfg_.array_n}};
  return j.dump() + "\n";
}

}  // namespace tpu::run
