// Waveforms: a VCD file written by SystemC's tracing, and beside it a GTKWave
// save file (.gtkw) that opens it with the signals grouped by unit.
#pragma once

#include <systemc.h>

#include <string>
#include <vector>

namespace tpu::model {

class Waveform {
 public:
  // `vcd_path` ends in .vcd (SystemC appends it; it is stripped if given).
  explicit Waveform(const std::string& vcd_path);
  ~Waveform();
  Waveform(const Waveform&) = delete;
  Waveform& operator=(const Waveform&) = delete;

  sc_core::sc_trace_file* file() { return tf_; }

  // Traces `value` as `unit.name` and lists it under the unit's group.
  template <typename T>
  void add(const T& value, const std::string& unit, const std::string& name, int width = 1) {
    sc_core::sc_trace(tf_, value, unit + "." + name);
    note(unit, name, width);
  }
  // Lists a signal traced elsewhere (e.g. with an explicit bit width).
  void note(const std::string& unit, const std::string& name, int width);

  // Writes the .gtkw save file; call once everything is traced.
  void write_save_file() const;

 private:
  struct Entry {
    std::string unit, name;
    int width;
  };
  std::string base_;
  sc_core::sc_trace_file* tf_;
  std::vector<Entry> entries_;
};

}  // namespace tpu::model
