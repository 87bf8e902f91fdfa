// Types carried by the sc_signals between units, with what SystemC needs to
// put them on a signal and in a waveform.
#pragma once

#include <systemc.h>

#include <cstdint>
#include <ostream>
#include <string>

#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::model {

// Every model runs on one clock of period kClockPeriod with its first rising
// edge at time 0: cycle t is the rising edge at t * kClockPeriod.
inline const sc_core::sc_time kClockPeriod(1, sc_core::SC_NS);
inline std::uint64_t current_cycle() {
  return static_cast<std::uint64_t>(sc_core::sc_time_stamp() / kClockPeriod);
}

// One instruction sent by the controller to a unit, valid for one cycle.
struct UnitCommand {
  bool valid = false;
  std::uint32_t pc = 0;
  std::uint32_t seq = 0;  // issue number, the index of its retire record
  isa::Instruction instr;
  Requant requant;          // ACT, POOL.A, VEC: the requantization registers at issue
  isa::ConvGeometry conv;   // MMC.C, POOL, VEC: the convolution, window and vector registers at issue
  // MMC: the cycle the controller computed it starts in (an MMC.S may wait
  // in the matrix unit for its weights), which the array checks.
  std::uint64_t start = 0;

  bool operator==(const UnitCommand& o) const {
    return valid == o.valid && pc == o.pc && seq == o.seq && start == o.start && instr == o.instr &&
           conv == o.conv &&
           requant.multiplier == o.requant.multiplier && requant.shift == o.requant.shift &&
           requant.zero_point == o.requant.zero_point;
  }
};

inline std::ostream& operator<<(std::ostream& os, const UnitCommand& c) {
  if (!c.valid) return os << "-";
  return os << "pc " << c.pc << ": " << isa::disassemble(c.instr);
}

inline void sc_trace(sc_core::sc_trace_file* tf, const UnitCommand& c, const std::string& name) {
  sc_core::sc_trace(tf, c.valid, name + ".valid");
  sc_core::sc_trace(tf, c.pc, name + ".pc");
}

// A weight tile leaving the weight DMA for the FIFO, valid for one cycle.
// The weight DMA's push of a tile towards the FIFO: the tile's index (for
// traces) and its bytes as weight memory delivered them, N*N row-major, which
// stay valid through the cycle after the push (when the FIFO takes them).
struct TilePush {
  bool valid = false;
  std::uint32_t tile = 0;
  const std::int8_t* data = nullptr;
  bool operator==(const TilePush& o) const {
    return valid == o.valid && tile == o.tile && data == o.data;
  }
};

inline std::ostream& operator<<(std::ostream& os, const TilePush& p) {
  return p.valid ? os << "tile " << p.tile : os << "-";
}

inline void sc_trace(sc_core::sc_trace_file* tf, const TilePush& p, const std::string& name) {
  sc_core::sc_trace(tf, p.valid, name + ".valid");
  sc_core::sc_trace(tf, p.tile, name + ".tile");
}

}  // namespace tpu::model
