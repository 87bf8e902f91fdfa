#include "model/waveform.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "common/file_io.h"

namespace tpu::model {
namespace {

// SystemC starts a VCD with "$date\n     <the local time>\n$end". The time is
// overwritten in place, keeping the file's length, by this text.
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

}  // namespace

Waveform::Waveform(const std::string& vcd_path) : base_(vcd_path) {
  if (base_.size() > 4 && base_.compare(base_.size() - 4, 4, ".vcd") == 0) base_.resize(base_.size() - 4);
  const std::filesystem::path target(base_);
  tmp_base_ = (target.parent_path() /
               ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp"))
                  .string();
  // SystemC opens the file only when the simulation starts, and reports a
  // failure without the user's path: check that it can be written now.
  std::FILE* f = std::fopen((tmp_base_ + ".vcd").c_str(), "wb");
  if (f == nullptr)
    throw FileError(fmt::format("{}.vcd: cannot write: {}", base_, std::strerror(errno)));
  std::fclose(f);
  // SystemC would print the time unit it is given (I703), naming the temporary file.
  sc_core::sc_report_handler::set_actions("tracing timescale unit set", sc_core::SC_DO_NOTHING);
  tf_ = sc_core::sc_create_vcd_trace_file(tmp_base_.c_str());
  // The clock falls at half cycles: with a 1 ns unit SystemC warned at every
  // falling edge and wrote it at the time of the rising one.
  tf_->set_time_unit(100, sc_core::SC_PS);
}

Waveform::~Waveform() {
  if (tf_ == nullptr) return;  // closed
  sc_core::sc_close_vcd_trace_file(tf_);
  std::error_code ec;
  std::filesystem::remove(tmp_base_ + ".vcd", ec);
}

void Waveform::close() {
  sc_core::sc_close_vcd_trace_file(tf_);
  tf_ = nullptr;
  const std::string tmp = tmp_base_ + ".vcd", target = base_ + ".vcd";
  std::error_code ec;
  try {
    fix_date(tmp, target);
    std::filesystem::rename(tmp, target, ec);
    if (ec) throw FileError(fmt::format("{}: cannot rename into place: {}", target, ec.message()));
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
  write_file_atomic(base_ + ".gtkw", save_file_);
}

void Waveform::note(const std::string& unit, const std::string& name, int width) {
  entries_.push_back({unit, name, width});
}

// GTKWave save-file syntax: "@<flags>" sets the display of the lines after it
// (0x28: binary, right-justified, for bits; 0x24: decimal, for vectors);
// "-name" lines under @800200 / @1000200 open and close a group.
void Waveform::write_save_file() {
  std::string s = "[*] tpu-sim waveform: signals grouped by unit (docs/microarchitecture.md)\n";
  s += fmt::format("[dumpfile] \"{}\"\n", std::filesystem::absolute(base_ + ".vcd").string());
  s += "[timestart] 0\n[size] 1600 900\n[signals_width] 300\n[sst_expanded] 1\n";
  s += "@28\nSystemC.clk\n";
  std::string open;
  for (const Entry& e : entries_) {
    if (e.unit != open) {
      if (!open.empty()) s += fmt::format("@1000200\n-{}\n", open);
      s += fmt::format("@800200\n-{}\n", e.unit);
      open = e.unit;
    }
    if (e.width == 1)
      s += fmt::format("@28\nSystemC.{}.{}\n", e.unit, e.name);
    else
      s += fmt::format("@24\nSystemC.{}.{}[{}:0]\n", e.unit, e.name, e.width - 1);
  }
  if (!open.empty()) s += fmt::format("@1000200\n-{}\n", open);
  save_file_ = std::move(s);
}

}  // namespace tpu::model
