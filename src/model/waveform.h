// Waveforms: a VCD file written by SystemC's tracing, and beside it a GTKWave
// save file (.gtkw) that opens it with the signals grouped by unit.
//
// Both files appear whole or not at all: SystemC writes the VCD under a
// temporary name in the same folder (.NAME.PID.tmp.vcd), which close()
// renames into place before it writes the .gtkw. A run that throws before
// close() removes the temporary file, and so does one ended by Ctrl-C
// (SIGINT), SIGTERM or SIGHUP (PendingFile); only SIGKILL or a crash can
// leave it. Either way no partial VCD or .gtkw appears, and existing ones stay
// as they were. The VCD header's $date line is replaced by a fixed text, so
// equal runs give byte-identical files. A special file (/dev/stdout, a FIFO;
// file_io.h) gets the VCD, copied into it by close(), and no .gtkw.
#pragma once

#include <systemc.h>

#include <string>
#include <vector>

#include "common/file_io.h"

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
  std::string base_;  // the target without .vcd
  PendingFile vcd_;   // SystemC writes its path: the temporary base name + ".vcd"
  std::string save_file_;
  sc_core::sc_trace_file* tf_;
  std::vector<Entry> entries_;
};

// A signal of a GTKWave save file: its group, its name as GTKWave shows it
// (scopes joined by '.', a vector's range appended: "SystemC.controller.pc[31:0]")
// and its width in bits.
struct GtkwSignal {
  std::string group, name;
  unsigned width;
};

// The text of a .gtkw that opens `dumpfile` (made absolute) with `clock` on
// top and each signal under its group, groups in order of first appearance;
// bits shown in binary, vectors up to 64 bits in decimal, wider ones in hex.
// Shared by the SystemC waveform and the RTL's (waves/wave_files.h).
std::string gtkw_save_file(const std::string& dumpfile, const std::string& clock,
                           const std::vector<GtkwSignal>& signals);

}  // namespace tpu::model
