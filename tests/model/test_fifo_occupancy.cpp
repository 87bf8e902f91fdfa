// The weight FIFO's occupancy derived from a run's retire records
// (model/fifo_occupancy.h, the rules of docs/microarchitecture.md) against the
// SystemC model's own FIFO: the systolic array's fifo_count signal in the
// detailed path's waveform, cycle by cycle, on random programs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "isa/isa.h"
#include "model/fifo_occupancy.h"
#include "model/tpu.h"
#include "model_test_support.h"
#include "random_program/random_program.h"

namespace {

using namespace tpu;

// The values of the 32-bit signal `name` in a VCD of the model, by cycle:
// (first cycle, value) at each change. The model's waveform has a 100 ps
// time unit and a 1 ns cycle; a value dumped at time 10 * t holds from
// cycle t on.
std::vector<std::pair<model::Cycle, std::uint64_t>> vcd_signal(const std::string& path, const std::string& name) {
  std::ifstream f(path);
  REQUIRE(f);
  std::string tok, id;
  std::vector<std::string> var;
  std::vector<std::pair<model::Cycle, std::uint64_t>> changes;
  std::uint64_t time = 0;
  bool body = false;
  while (f >> tok) {
    if (!body) {
      if (tok == "$var") {
        var.clear();
        while (f >> tok && tok != "$end") var.push_back(tok);
        if (var.size() >= 4 && var[3] == name) id = var[2];
      } else if (tok == "$enddefinitions") {
        REQUIRE_FALSE(id.empty());
        body = true;
      }
      continue;
    }
    if (tok[0] == '#') {
      time = std::stoull(tok.substr(1));
    } else if (tok[0] == 'b') {
      std::string who;
      f >> who;
      if (who == id) {
        REQUIRE(time % 10 == 0);
        changes.emplace_back(time / 10, std::stoull(tok.substr(1), nullptr, 2));
      }
    }
  }
  return changes;
}

}  // namespace

TEST_CASE("The weight FIFO's occupancy from the retire records is the model's FIFO, cycle by cycle",
          "[fifo_occupancy]") {
  testing::RandomProgramGenerator gen(20261203);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tpu_fifo_occupancy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  unsigned with_tiles = 0, waited = 0;
  for (unsigned p = 0; p < 150; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    CAPTURE(p, rp.cfg.array_n, rp.cfg.weight_latency, rp.cfg.weight_bytes_per_cycle, rp.cfg.fifo_depth);
    model::Memories mem(rp.cfg);
    gen.fill(mem);
    model::RunOptions opts;
    opts.detail = model::Detail::Detailed;
    opts.vcd_path = (dir / "run.vcd").string();
    const model::RunLog log = model::run_program(rp.cfg, rp.program, mem, opts);
    const auto model_fifo = vcd_signal(opts.vcd_path, "fifo_count");
    const std::vector<model::FifoStep> steps = model::fifo_occupancy(rp.cfg, rp.program, log);
    // Both as the value in every cycle of the run.
    std::vector<std::int64_t> derived(log.stats.cycles + 1, 0), dumped(log.stats.cycles + 1, 0);
    for (const model::FifoStep& s : steps)
      if (s.cycle <= log.stats.cycles) derived[s.cycle] += s.delta;
    for (std::size_t t = 1; t < derived.size(); ++t) derived[t] += derived[t - 1];
    std::size_t next = 0;
    std::int64_t value = 0;
    for (std::size_t t = 0; t < dumped.size(); ++t) {
      for (; next < model_fifo.size() && model_fifo[next].first <= t; ++next)
        value = static_cast<std::int64_t>(model_fifo[next].second);
      dumped[t] = value;
    }
    // Cycles 0 .. cycles - 1: the run's last cycle too (the waveform samples
    // it after the simulation stops, Waveform::close).
    derived.resize(log.stats.cycles);
    dumped.resize(derived.size());
    std::size_t first_diff = derived.size();
    for (std::size_t t = 0; t < derived.size() && first_diff == derived.size(); ++t)
      if (derived[t] != dumped[t]) first_diff = t;
    CAPTURE(first_diff);
    if (first_diff < derived.size()) {
      std::ostringstream trace;
      for (const auto& r : log.retired)
        trace << r.pc << " " << isa::disassemble(rp.program.code[r.pc]) << " issue " << r.issue << " start "
              << r.start << " completion " << r.completion << (r.completed ? "" : " (not completed)") << "\n";
      trace << (log.fault ? log.fault->message() : std::string("halted")) << " at " << log.stats.cycles << "\n";
      INFO(trace.str());
      INFO("cycle " << first_diff << ": derived " << derived[first_diff] << ", the model's FIFO "
                    << dumped[first_diff]);
      CHECK(false);
    }
    with_tiles += !steps.empty();
    waited += std::any_of(dumped.begin(), dumped.end(), [](std::int64_t v) { return v > 1; });
  }
  std::filesystem::remove_all(dir);
  // The programs fill the FIFO: most load tiles, many queue more than one.
  CHECK(with_tiles >= 100);
  CHECK(waited >= 20);
}

// Issue 25: the simulation stops inside the run's last cycle, before SystemC
// samples the values written in it, so the waveform ended one cycle early.
TEST_CASE("The waveform holds the run's last cycle", "[fifo_occupancy][waveform]") {
  // RW then HLT: the weight DMA's command and the controller's pc change in
  // HLT's cycle, the run's last (cycles - 1).
  ArchConfig cfg = preset_config("small4");
  const isa::Program prog = testing::assemble_for(cfg, "RW 0\nHLT\n", true, "last_cycle.s");
  model::Memories mem(cfg);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tpu_waveform_last_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  model::RunOptions opts;
  opts.detail = model::Detail::Detailed;
  opts.vcd_path = (dir / "run.vcd").string();
  const model::RunLog log = model::run_program(cfg, prog, mem, opts);
  REQUIRE(log.halted);
  // The controller's 1-bit `issue`, by cycle: it is high in the cycle HLT
  // issues in, the run's last, and low in the cycles RW's tile loads.
  std::ifstream f(opts.vcd_path);
  REQUIRE(f);
  std::string tok, id, scope;
  std::uint64_t time = 0;
  std::map<std::uint64_t, char> issue;  // cycle -> value from then on
  bool body = false;
  while (f >> tok) {
    if (!body) {
      if (tok == "$scope") {
        f >> tok >> scope;
      } else if (tok == "$var") {
        std::vector<std::string> var;
        while (f >> tok && tok != "$end") var.push_back(tok);
        if (scope == "controller" && var.size() >= 4 && var[3] == "issue") id = var[2];
      } else if (tok == "$enddefinitions") {
        REQUIRE_FALSE(id.empty());
        body = true;
      }
    } else if (tok[0] == '#') {
      time = std::stoull(tok.substr(1));
    } else if ((tok[0] == '0' || tok[0] == '1') && tok.substr(1) == id) {
      issue[time / 10] = tok[0];
    }
  }
  std::filesystem::remove_all(dir);
  REQUIRE_FALSE(issue.empty());
  const auto last = issue.upper_bound(log.stats.cycles - 1);
  REQUIRE(last != issue.begin());
  CHECK(std::prev(last)->first == log.stats.cycles - 1);
  CHECK(std::prev(last)->second == '1');
}
