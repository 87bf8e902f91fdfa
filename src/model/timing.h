// The closed-form latencies of docs/microarchitecture.md, in one place. The
// controller's scoreboard predicts the array's and the activation unit's
// completion cycles with them. The DMAs' completions come from their memory
// targets (model/memory_ports.h); with the default targets they are the
// closed forms here (host DMA: duration; weight DMA: duration on an idle
// channel, and the pipelined channel of docs/microarchitecture.md in
// weight_memory_target.cpp), which the compiler's scheduler and the tests
// use as predictions.
#pragma once

#include <cstdint>
#include <limits>

#include "common/math.h"
#include "config/arch_config.h"
#include "isa/instruction.h"

namespace tpu::model {

using Cycle = std::uint64_t;

// A unit with nothing scheduled (the fast path's clock, model/tpu.cpp).
inline constexpr Cycle kNever = std::numeric_limits<Cycle>::max();

// Whether an instruction pushes a tile into the weight FIFO: RW, and RWU
// (from the unified buffer). The FIFO's rules and the MMC.S that pops the
// tile count both alike.
inline bool pushes_tile(const isa::Instruction& in) {
  return in.opcode == isa::Opcode::RW || in.opcode == isa::Opcode::RWU;
}

// Bytes one host DMA row moves: N, or 4N for WHM.A.
inline std::uint64_t host_row_bytes(const ArchConfig& c, const isa::Instruction& in) {
  const bool acc = in.opcode == isa::Opcode::WHM && in.has(isa::kFlagWhmAcc);
  return acc ? isa::kHostRowsPerAccRow * c.array_n : c.array_n;
}

// Cycles the weight memory channel streams one N x N tile: ceil(N*N / Bw).
inline std::uint64_t weight_tile_cycles(const ArchConfig& c) {
  return ceil_div(c.array_n * c.array_n, c.weight_bytes_per_cycle);
}

// The activation unit's latency from an instruction's first read to its
// first write (docs/microarchitecture.md, "Activation unit"): A for an ACT
// (RD, MUL, ADD, SAT, then WR), three more for a VEC (operand B read a cycle
// before A, then V1 and V2), six more for a GELU and eight more for an
// SMAX's or LNRM's third pass (the model's budgets); a POOL's pixel is
// written A + 1 cycles after its last read (AC, then the shared stages).
inline std::uint64_t act_write_latency(const ArchConfig& c, isa::Opcode op) {
  switch (op) {
    case isa::Opcode::VEC: return c.act_latency + 3;
    case isa::Opcode::GELU: return c.act_latency + 6;
    case isa::Opcode::SMAX:
    case isa::Opcode::LNRM: return c.act_latency + 8;
    case isa::Opcode::POOL: return c.act_latency + 1;
    default: return c.act_latency;
  }
}

inline bool in_activation_unit(isa::Opcode op) {
  return op == isa::Opcode::ACT || op == isa::Opcode::VEC || op == isa::Opcode::POOL ||
         op == isa::Opcode::GELU || op == isa::Opcode::SMAX || op == isa::Opcode::LNRM;
}

// Cycles from start to completion, inclusive (completion = start + duration - 1).
// A POOL's depends on the window of the registers at its issue (`geometry`),
// an SMAX's or LNRM's on the token's rows (NGEO's groups).
inline std::uint64_t duration(const ArchConfig& c, const isa::Instruction& in,
                              const isa::ConvGeometry& geometry = {}) {
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  switch (in.opcode) {
    case isa::Opcode::RHM:
    case isa::Opcode::WHM:
      return c.host_latency + ceil_div(rows * host_row_bytes(c, in), c.host_bytes_per_cycle);
    case isa::Opcode::RW:  // on an idle channel
      return c.weight_latency + weight_tile_cycles(c);
    // The host's transfer of a whole tile plus its layout time; an RWU's
    // rows read one a cycle, the tile written the cycle after the last
    // (docs/microarchitecture.md, "Attention's second operand").
    case isa::Opcode::HWT:
      return c.host_latency + c.host_layout_cycles + ceil_div(c.array_n * c.array_n, c.host_bytes_per_cycle);
    case isa::Opcode::RWU: return static_cast<std::uint64_t>(in.operands[1]) + 1;  // weight DMA idle
    case isa::Opcode::MMC: return rows + 2 * c.array_n;
    // A row read a cycle; the last row's write follows its read by the
    // instruction's latency.
    case isa::Opcode::ACT:
    case isa::Opcode::VEC:
    case isa::Opcode::GELU: return rows + act_write_latency(c, in.opcode);
    // Three passes over each token's rows, token after token; the last
    // pass's rows are written A + 8 cycles after their read.
    case isa::Opcode::SMAX:
    case isa::Opcode::LNRM:
      return 3 * std::uint64_t{geometry.norm.groups} * rows + act_write_latency(c, in.opcode);
    // One window position read per cycle; each output pixel written A + 1
    // cycles after its last read.
    case isa::Opcode::POOL: return rows * geometry.window() + act_write_latency(c, in.opcode);
    default: return 0;
  }
}

// Cycles the unit's input is occupied: the next instruction of the same unit
// may issue this many cycles after this one.
// The activation unit writes in order through one shared pipeline: an ACT
// (the only instruction of the unit that does not wait for the earlier ones
// to complete) issues when its first write, A cycles after its start, comes
// after this instruction's last (docs/microarchitecture.md, "One pipeline,
// writes in order"): duration - A cycles after this one's issue (rows after
// an ACT, the cycle after its last read). A POOL, VEC, GELU, SMAX or LNRM
// reads UB rows that earlier instructions of its own unit may be writing: it
// issues only once the unit has completed them all (the controller's rule).
inline std::uint64_t occupancy(const ArchConfig& c, const isa::Instruction& in,
                               const isa::ConvGeometry& geometry = {}) {
  if (in_activation_unit(in.opcode)) return duration(c, in, geometry) - c.act_latency;
  switch (in.opcode) {
    case isa::Opcode::MMC: return static_cast<std::uint64_t>(in.operands[2]);
    // The weight memory takes a request every cycle (the FIFO's room limits
    // how many are outstanding).
    case isa::Opcode::RW: return 1;
    // The weight DMA reads an RWU's UB rows one a cycle through its one port.
    case isa::Opcode::RWU: return static_cast<std::uint64_t>(in.operands[1]);
    default: return duration(c, in, geometry);
  }
}

}  // namespace tpu::model
