#include "model/waveform.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "common/file_io.h"

namespace tpu::model {
namespace {

// SystemC starts a VCD with "$date\n     <the local time>\n$end". That is
// the only part of the file that differs between equal runs, and runs must
// be byte for byte reproducible (README, "Runs are deterministic"; checked by
// tests/cli/robustness_test.sh), so that waveforms can be compared with cmp
// or diff. The time is overwritten in place by this text, cut or padded with
// spaces to the line's length, so that a waveform of any size needs no copy.
// (SystemC formats the time in the C locale, "%b %d, %Y       %H:%M:%S", a
// fixed width, so the result does not depend on the date either.)
constexpr std::string_view kFixedDate = "     (none: reproducible output)";

void fix_date(const std::string& path, const std::string& shown_path) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr)
    throw FileError(fmt::format("{}: cannot write: {}", shown_path, std::strerror(errno)));
  char head[256];
  const std::string_view h(head, std::fread(head, 1, sizeof head, f));
  constexpr std::string_view kTag = "$date\n";
  bool ok = true;
  if (h.substr(0, kTag.size()) == kTag) {
    const std::size_t end = h.find('\n', kTag.size());
    if (end != std::string_view::npos) {
      std::string text(kFixedDate.substr(0, end - kTag.size()));
      text.resize(end - kTag.size(), ' ');
      ok = std::fseek(f, static_cast<long>(kTag.size()), SEEK_SET) == 0 &&
           std::fwrite(text.data(), 1, text.size(), f) == text.size();
    }
  }
  if (std::fclose(f) != 0 || !ok) throw FileError(fmt::format("{}: write failed", shown_path));
}

// close() samples the traced values once more at the time the run stopped
// (SampleAccess, below). When SystemC had written part of that time step
// already, the VCD ends with two blocks of the same time, "#T ... #T ...",
// which not every reader accepts (tests/cli/waveform_check.py refuses it):
// the second "#T" line is removed, so that its values join the first block
// (the later value of a signal wins, as within one block). Looks only at the
// file's last 8 MiB, which hold both blocks (a block holds each signal once).
void merge_repeated_last_time(const std::string& path, const std::string& shown_path) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr)
    throw FileError(fmt::format("{}: cannot write: {}", shown_path, std::strerror(errno)));
  bool ok = std::fseek(f, 0, SEEK_END) == 0;
  const long size = ok ? std::ftell(f) : -1;
  ok = ok && size >= 0;
  const long start = ok ? std::max(0L, size - (8L << 20)) : 0;
  std::string tail(ok ? static_cast<std::size_t>(size - start) : 0, '\0');
  ok = ok && std::fseek(f, start, SEEK_SET) == 0 && std::fread(tail.data(), 1, tail.size(), f) == tail.size();
  const std::size_t second = ok ? tail.rfind("\n#") : std::string::npos;
  const std::size_t first = second != std::string::npos && second > 0 ? tail.rfind("\n#", second - 1) : std::string::npos;
  if (first != std::string::npos) {
    const auto line_at = [&](std::size_t at) { return tail.substr(at + 1, tail.find('\n', at + 1) - (at + 1)); };
    const std::size_t second_end = tail.find('\n', second + 1);
    if (second_end != std::string::npos && line_at(first) == line_at(second)) {
      const std::string rest = tail.substr(second_end + 1);
      const long at = start + static_cast<long>(second) + 1;
      ok = std::fseek(f, at, SEEK_SET) == 0 && std::fwrite(rest.data(), 1, rest.size(), f) == rest.size() &&
           std::fflush(f) == 0 && ::ftruncate(fileno(f), at + static_cast<long>(rest.size())) == 0;
    }
  }
  if (std::fclose(f) != 0 || !ok) throw FileError(fmt::format("{}: write failed", shown_path));
}

}  // namespace

namespace {

std::string without_vcd(std::string path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".vcd") == 0) path.resize(path.size() - 4);
  return path;
}

}  // namespace

// SystemC opens the file only when the simulation starts, and reports a
// failure without the user's path: PendingFile checks that it can be written
// now. SystemC appends ".vcd" to the name it is given; a special file
// (/dev/stdout, a FIFO) is written as named.
Waveform::Waveform(const std::string& vcd_path)
    : base_(without_vcd(vcd_path)),
      vcd_(is_special_file(vcd_path) ? vcd_path : base_ + ".vcd", ".vcd") {
  // SystemC would print the time unit it is given (I703), naming the temporary file.
  sc_core::sc_report_handler::set_actions("tracing timescale unit set", sc_core::SC_DO_NOTHING);
  tf_ = sc_core::sc_create_vcd_trace_file(without_vcd(vcd_.path()).c_str());
  // The clock falls at half cycles: with a 1 ns unit SystemC warned at every
  // falling edge and wrote it at the time of the rising one.
  tf_->set_time_unit(100, sc_core::SC_PS);
}

Waveform::~Waveform() {
  // Not closed: SystemC finishes the temporary VCD, which vcd_ then discards.
  if (tf_ != nullptr) sc_core::sc_close_vcd_trace_file(tf_);
}

namespace {

// SystemC samples the traced values when time advances past a time step
// (sc_simcontext::do_timestep); a run ends by sc_stop() inside its last
// cycle, so that cycle's values would never be written. sc_trace_file::cycle
// is protected (the kernel is its friend): naming it through a derived class
// gives a pointer to it that may be called on any trace file.
struct SampleAccess : sc_core::sc_trace_file {
  static void sample(sc_core::sc_trace_file* tf) {
    void (sc_core::sc_trace_file::*cycle)(bool) = &SampleAccess::cycle;
    (tf->*cycle)(false);
  }
};

}  // namespace

void Waveform::close() {
  // The run's last cycle: the values its units wrote, at its time stamp.
  SampleAccess::sample(tf_);
  sc_core::sc_close_vcd_trace_file(tf_);
  tf_ = nullptr;
  merge_repeated_last_time(vcd_.path(), vcd_.target());
  fix_date(vcd_.path(), vcd_.target());
  vcd_.commit();
  // Beside a special file (/dev/stdout, a FIFO) there is no place for a save file.
  if (!vcd_.special()) write_file_atomic(base_ + ".gtkw", save_file_);
}

void Waveform::note(const std::string& unit, const std::string& name, int width) {
  entries_.push_back({unit, name, width});
}

void Waveform::write_save_file() {
  std::vector<GtkwSignal> signals;
  for (const Entry& e : entries_)
    signals.push_back({e.unit,
                       e.width == 1 ? fmt::format("SystemC.{}.{}", e.unit, e.name)
                                    : fmt::format("SystemC.{}.{}[{}:0]", e.unit, e.name, e.width - 1),
                       static_cast<unsigned>(e.width)});
  save_file_ = gtkw_save_file(base_ + ".vcd", "SystemC.clk", signals);
}

// GTKWave save-file syntax: "@<flags>" sets the display of the lines after it
// (0x28: binary, right-justified, for bits; 0x24: decimal; 0x22: hexadecimal);
// "-name" lines under @800200 / @1000200 open and close a group.
std::string gtkw_save_file(const std::string& dumpfile, const std::string& clock,
                           const std::vector<GtkwSignal>& signals) {
  std::string s = "[*] tpu-sim waveform: signals grouped by unit (docs/microarchitecture.md)\n";
  s += fmt::format("[dumpfile] \"{}\"\n", std::filesystem::absolute(dumpfile).string());
  s += "[timestart] 0\n[size] 1600 900\n[signals_width] 300\n[sst_expanded] 1\n";
  if (!clock.empty()) s += fmt::format("@28\n{}\n", clock);
  std::string open;
  for (const GtkwSignal& e : signals) {
    if (e.group != open) {
      if (!open.empty()) s += fmt::format("@1000200\n-{}\n", open);
      s += fmt::format("@800200\n-{}\n", e.group);
      open = e.group;
    }
    s += fmt::format("@{}\n{}\n", e.width == 1 ? "28" : e.width <= 64 ? "24" : "22", e.name);
  }
  if (!open.empty()) s += fmt::format("@1000200\n-{}\n", open);
  return s;
}

}  // namespace tpu::model
