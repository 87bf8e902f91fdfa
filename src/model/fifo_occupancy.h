// The weight FIFO's occupancy over a run, derived from the run's retire
// records by the rules of docs/microarchitecture.md ("Weight DMA and weight
// FIFO", "Weight buffers: shadow and active"), so that both engines' runs
// (which record the same retire records) give the same curve:
// - RW number k's tile enters the FIFO at the end of its completion cycle d:
//   it is in the FIFO from cycle d + 1;
// - it leaves the FIFO in the cycle L its shift into the shadow starts: the
//   first cycle at whose start it is in the FIFO and the shadow is free. The
//   shadow is free at reset; after MMC.S number k - 1 (started at s) took
//   tile k - 1, it is free from max(s, u + N + 1), u the cycle the last row
//   that used the set active before that switch was read (s when no row
//   used it).
// Tiles move through the FIFO in order, and tile k waits for switch k - 1;
// a tile that has not left by the end of the run stays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/run_log.h"

namespace tpu::model {

// A change of the FIFO's occupancy: from `cycle` on, `delta` more tiles
// (+1 an arrival, -1 a load start). In cycle order; an arrival and a load in
// the same cycle (a tile that goes straight on) are both listed.
struct FifoStep {
  Cycle cycle = 0;
  int delta = 0;
};

// The shadow's side of the rule above, as MMCs start one after the other:
// the controller predicts each MMC.S's start with it, fifo_occupancy
// derives the FIFO's curve from the records with it.
class ShadowFree {
 public:
  // A switch starting at `start`: the cycle from which the shadow is free
  // for the next tile (max(start, u + N + 1), or start when no row used the
  // set it replaces).
  Cycle on_switch(Cycle start, Cycle n) {
    const Cycle free = used_ ? std::max(start, last_read_ + n + 1) : start;
    used_ = false;
    return free;
  }
  // Any MMC's rows, read with the active set in start .. start + rows - 1.
  void on_rows(Cycle start, Cycle rows) {
    if (rows == 0) return;
    last_read_ = start + rows - 1;
    used_ = true;
  }

 private:
  Cycle last_read_ = 0;
  bool used_ = false;
};

std::vector<FifoStep> fifo_occupancy(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log);

}  // namespace tpu::model
