// controller: fetches and issues one instruction per cycle, in order, with
// hardware interlocks (docs/microarchitecture.md, "Controller").
//
// It keeps a scoreboard of in-flight instructions with the completion cycle
// each will have: for MMC, ACT and POOL from the closed forms of
// model/timing.h; for RHM, WHM and RW as the DMA reports it when it is handed
// the instruction, from its memory target's answer (model/memory_ports.h).
// It stalls issue on RAW/WAR/WAW hazards
// between units, a busy unit, a full weight FIFO and SYNC/HLT drains. An
// MMC.S waits for its weights in the matrix unit, not here: the controller
// computes the cycle it will start in (mmc_start), which the array checks.
// Faults (bad address, deadlock, running past the program, the cycle limit)
// stop the simulation.
#pragma once

#include <systemc.h>

#include <array>
#include <functional>
#include <vector>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/fifo_occupancy.h"
#include "model/memory_ports.h"
#include "model/run_log.h"
#include "model/signals.h"

namespace tpu::model {

SC_MODULE(Controller) {
  sc_in<bool> clk;
  sc_out<UnitCommand> host_dma_cmd;
  sc_out<UnitCommand> weight_dma_cmd;
  sc_out<UnitCommand> array_cmd;
  sc_out<UnitCommand> act_cmd;
  sc_in<std::uint32_t> tiles_popped;  // from systolic_array: tiles taken out of the FIFO
  sc_out<std::uint32_t> pc_out;       // for waveforms
  sc_out<bool> issue_out;
  sc_out<bool> stall_out;

  Controller(sc_module_name name, const ArchConfig& cfg, const isa::Program& prog, RunLog& log,
             Cycle max_cycles);
  // Asked every kInterruptPollTicks ticks; true stops the run with a fault
  // "interrupted" (RunOptions::interrupted).
  void set_interrupt(std::function<bool()> interrupted) { interrupted_ = std::move(interrupted); }
  SC_HAS_PROCESS(Controller);

  // The DMAs, which report their instructions' completions (before the run).
  void connect(TransferUnit& host_dma, TransferUnit& weight_dma) {
    host_dma_ = &host_dma;
    weight_dma_ = &weight_dma;
  }

  // The fast path's clock (model/tpu.cpp): after the tick of cycle `now`, the
  // first later cycle in which the controller may do something else than
  // stall again for the same cause. Until then nothing it looks at changes:
  // the scoreboard, the units' accept cycles and the cycle limit are known,
  // and the array's tile counters change only in cycles the array itself
  // asks to be followed by a tick.
  Cycle next_activity(Cycle now) const;

 private:
  struct InFlight {
    isa::Unit unit;
    std::vector<isa::Access> accesses;
    Cycle completion;
  };

  void tick();
  bool check_bounds(const isa::Instruction& in, Cycle now);
  std::optional<StallCause> stall_cause(const isa::Instruction& in, Cycle now);
  void issue(const isa::Instruction& in, Cycle now, Cycle reported);
  // The cycle an MMC issued now starts reading rows (updates the shadow's
  // timeline below).
  Cycle mmc_start(const isa::Instruction& in, Cycle now);
  void fault(Cycle now, std::string reason);
  sc_out<UnitCommand>* port_for(isa::Unit unit);

  const ArchConfig& cfg_;
  const isa::Program& prog_;
  RunLog& log_;
  Cycle max_cycles_;
  std::function<bool()> interrupted_;
  std::uint64_t ticks_since_poll_ = 0;
  std::uint32_t pc_ = 0;
  Requant requant_;
  isa::ConvGeometry geometry_;  // CMAP, CSTR, CTAP, CWIN: sent with every command
  std::vector<InFlight> scoreboard_;
  std::array<Cycle, 5> unit_free_at_{};  // by isa::Unit: first cycle it accepts again
  std::uint32_t rw_issued_ = 0;
  TransferUnit* host_dma_ = nullptr;
  TransferUnit* weight_dma_ = nullptr;
  std::uint32_t switches_issued_ = 0;
  // The weights' timeline, for MMC starts: each RW's tile arrival (its
  // reported completion), the cycle the shadow is free for the next tile,
  // and the rows read with the active set (model/fifo_occupancy.h).
  std::vector<Cycle> tile_arrival_;
  Cycle shadow_free_from_ = 0;
  ShadowFree shadow_;
  bool stopped_ = false;
  // The last cycle ticked and, if it stalled, the cause: a cycle the fast
  // path's clock skips stalls for the same cause (it skips none otherwise).
  Cycle last_tick_ = 0;
  std::optional<StallCause> last_stall_;
};

}  // namespace tpu::model
