#include "model/waveform.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/file_io.h"

namespace tpu::model {

Waveform::Waveform(const std::string& vcd_path) : base_(vcd_path) {
  if (base_.size() > 4 && base_.compare(base_.size() - 4, 4, ".vcd") == 0) base_.resize(base_.size() - 4);
  tf_ = sc_core::sc_create_vcd_trace_file(base_.c_str());
  tf_->set_time_unit(1, sc_core::SC_NS);
}

Waveform::~Waveform() { sc_core::sc_close_vcd_trace_file(tf_); }

void Waveform::note(const std::string& unit, const std::string& name, int width) {
  entries_.push_back({unit, name, width});
}

// GTKWave save-file syntax: "@<flags>" sets the display of the lines after it
// (0x28: binary, right-justified, for bits; 0x24: decimal, for vectors);
// "-name" lines under @800200 / @1000200 open and close a group.
void Waveform::write_save_file() const {
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
  write_file_atomic(base_ + ".gtkw", s);
}

}  // namespace tpu::model
