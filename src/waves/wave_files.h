// Waveform files of tpu-sim: the RTL engine's VCD (Verilator's tracing) and
// its GTKWave save file, and FST files converted from either engine's VCD.
//
// One Verilated model has one trace format compiled in (--trace or
// --trace-fst, not both), so the RTL builds write VCD and FST is made from
// it here, with the FST writer Verilator ships (GTKWave's fstapi); the same
// conversion serves the SystemC engine's VCD. Every file is written under a
// hidden temporary name beside its target (file_io.h) and renamed into place
// when complete; none carries a date, so equal runs give identical files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/file_io.h"

namespace tpu::wave {

// The path without `ext` (".vcd", ".fst") if it ends in it: the waveform is
// written to BASE + ext and its save file to BASE + ".gtkw", as the SystemC
// waveform (model/waveform.h) does.
std::string strip_extension(const std::string& path, const std::string& ext);

// A $var of a VCD header.
struct VcdVar {
  std::vector<std::string> scopes;  // enclosing scopes, outermost first
  std::string type;                 // wire, reg, parameter, integer, real, ...
  unsigned width = 1;
  std::string id;     // identifier code; aliases share one
  std::string name;   // reference, e.g. "fetch_pc_o" or "w_q[3]"
  std::string range;  // e.g. "[31:0]", or empty

  // The name GTKWave shows and a .gtkw lists: scopes and name joined by '.',
  // then the range, e.g. "TOP.tpu_core.fetch_pc_o[31:0]".
  std::string full_name() const;
};

// Reads the declarations of a VCD, in file order. Throws FileError.
std::vector<VcdVar> read_vcd_header(const std::string& path);

// Writes the FST equivalent of the VCD at `vcd_path` to `fst_path` (not
// atomically: give it a PendingFile's path): the same scopes, variables,
// aliases, timescale and value changes, a fixed date and version. Reports
// errors as FileError naming `shown_path`.
void convert_vcd_to_fst(const std::string& vcd_path, const std::string& fst_path,
                        const std::string& shown_path);

// The .gtkw of an RTL waveform whose declarations are `vars`: the clock, a
// group of tpu_core's own signals (its ports among them), then one group per
// unit (controller, host_dma, weight_dma, systolic_array, activation_unit)
// with the signals of that instance. Parameters, array elements and signals
// of nested scopes are left to GTKWave's hierarchy browser. `dumpfile` is
// what the save file opens.
std::string rtl_save_file(const std::string& dumpfile, const std::vector<VcdVar>& vars);

// The files of one RTL waveform: Verilator writes the VCD to vcd_tmp();
// finish(), once it is closed, moves it to BASE.vcd and writes BASE.gtkw.
// A special file (/dev/stdout, a FIFO; file_io.h) named as the VCD gets the
// VCD, copied into it, and no .gtkw; so does one named as an FST.
class RtlWaveFiles {
 public:
  explicit RtlWaveFiles(const std::string& vcd_path);  // throws FileError
  const std::string& vcd_tmp() const { return vcd_.path(); }
  void finish();  // throws FileError

 private:
  std::string base_;
  PendingFile vcd_;
};

// An FST waveform made from an engine's VCD: run the engine with the VCD
// path scratch_vcd() (a hidden name beside the target), then finish()
// converts it to BASE.fst, writes BASE.gtkw (the engine's save file, opening
// the FST) and removes the scratch VCD and its .gtkw, which destruction
// removes too.
class FstFromVcd {
 public:
  explicit FstFromVcd(const std::string& fst_path);
  ~FstFromVcd();
  FstFromVcd(const FstFromVcd&) = delete;
  FstFromVcd& operator=(const FstFromVcd&) = delete;

  const std::string& scratch_vcd() const { return scratch_vcd_; }
  void finish();  // throws FileError

 private:
  void remove_scratch();
  std::string base_, target_, scratch_base_, scratch_vcd_;
  RemoveOnSignal guard_vcd_, guard_gtkw_;
};

}  // namespace tpu::wave
