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
    case isa::Opcode::ACT:
    case isa::Opcode::VEC:
    case isa::Opcode::GELU: return rows + c.act_latency;
    // Three passes over each token's rows, token after token; the last
    // pass's rows leave the pipeline A cycles after their read.
    case isa::Opcode::SMAX:
    case isa::Opcode::LNRM: return 3 * std::uint64_t{geometry.norm.groups} * rows + c.act_latency;
    // One window position read per cycle; each output pixel written the
    // cycle after its last read.
    case isa::Opcode::POOL: return rows * geometry.window() + 1;
    default: return 0;
  }
}

// Cycles the unit's input is occupied: the next instruction of the same unit
// may issue this many cycles after this one.
// A POOL reads UB rows that earlier instructions of its own unit may be
// writing: it issues only once the unit has completed them all (the
// controller's rule), and the next instruction follows its completion. A VEC
// waits for them in the same way, then streams a row a cycle as an ACT.
inline std::uint64_t occupancy(const ArchConfig& c, const isa::Instruction& in,
                               const isa::ConvGeometry& geometry = {}) {
  switch (in.opcode) {
    case isa::Opcode::MMC:
    case isa::Opcode::ACT:
    case isa::Opcode::VEC:
    case isa::Opcode::GELU: return static_cast<std::uint64_t>(in.operands[2]);
    // The weight memory takes a request every cycle (the FIFO's room limits
    // how many are outstanding).
    case isa::Opcode::RW: return 1;
    // The weight DMA reads an RWU's UB rows one a cycle through its one port.
    case isa::Opcode::RWU: return static_cast<std::uint64_t>(in.operands[1]);
    default: return duration(c, in, geometry);
  }
}

}  // namespace tpu::model
