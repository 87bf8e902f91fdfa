// Waveforms: a VCD file written by SystemC's tracing, and beside it a GTKWave
// save file (.gtkw) that opens it with the signals grouped by unit.
//
// Both files appear whole or not at all: SystemC writes the VCD under a
// temporary name in the same folder (.NAME.PID.tmp.vcd), which close()
// renames into place before it writes the .gtkw. A run that throws before
// close() removes the temporary file; one killed (Ctrl-C) leaves only it.
// Either way no partial VCD or .gtkw appears, and existing ones stay as they
// were. The VCD header's $date line is replaced by a fixed text, so equal
// runs give byte-identical files.
#pragma once

#include <systemc.h>

#include <string>
#include <vector>

namespace tpu::model {

class Waveform {
 public:
  // `vcd_path` ends in .vcd (SystemC appends it; it is stripped if given).
  // Throws FileError if its folder is not writable.
  explicit Waveform(const std::string& vcd_path);
  ~Waveform();  // without close(): discards the temporary VCD
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

  // Prepares the .gtkw save file, which close() writes; call once everything is traced.
  void write_save_file();

  // After the simulation: completes the VCD, moves it into place and writes
  // the .gtkw. Throws FileError on failure.
  void close();

 private:
  struct Entry {
    std::string unit, name;
    int width;
  };
  std::string base_;      // the target without .vcd
  std::string tmp_base_;  // where SystemC writes, without .vcd
  std::string save_file_;
  sc_core::sc_trace_file* tf_;
  std::vector<Entry> entries_;
};

}  // namespace tpu::model
