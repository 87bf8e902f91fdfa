// systolic_array: the matrix unit. An N x N weight-stationary array of int8
// MACs with int32 partial sums, the weight FIFO that feeds it, and two weight
// register sets per PE (active and shadow). Executes MMC
// (docs/microarchitecture.md, "Weight buffers" and "Systolic array").
//
// Timing, for row i of an MMC started at s: UB row read at u = s + i; x[k]
// enters PE (k, 0) at u + 1 + k; PE (k, j) works at u + 1 + k + j; column j's
// sum is written to the accumulators at u + N + j + 1.
//
// The array is one module whose PE registers are flat arrays updated in tight
// loops each cycle, not one module per PE.
//
// In the fast path (model/tpu.h, Detail::Fast) there are no PE registers: an
// MMC is computed as one int8 GEMM in its completion cycle d, straight from
// the UB into the accumulators. Nothing can tell the difference:
// - The UB rows an MMC reads and the ACC rows it writes belong to it from its
//   issue to d: another unit's instruction that writes those UB rows, or
//   reads or writes those ACC rows, is held by the controller's hazard
//   interlock until d + 1 (WAR, RAW, WAW), and only MMCs write the ACC. So
//   the UB rows still hold at d what the detailed path reads at s + i, and no
//   one looks at the ACC rows before d + 1, when the detailed path has
//   written them all too.
// - MMCs accumulating into the same ACC rows write them in issue order in
//   both paths: a later MMC starts at least `rows` cycles after an earlier
//   one, so each of its element writes comes after the earlier one's, and in
//   the fast path its completion cycle is later.
// - All rows of an MMC use the weight set active at its start (a switch
//   happens only at an MMC's start). That set is not overwritten before d:
//   the loader writes it at the earliest N - 1 cycles after it may start,
//   u + N + 1 for the last row u that used it, i.e. at u + 2N = d, and in a
//   tick completions come before the loader.
// - A fault stops the run in the middle of MMCs: flush_partial() then writes
//   exactly the elements the detailed path had written (and un-counts the
//   rows it had not yet read).
#pragma once

#include <systemc.h>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "config/arch_config.h"
#include "model/gemm_queue.h"
#include "model/int8_gemm.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"
#include "model/waveform.h"

namespace tpu::model {

SC_MODULE(SystolicArray) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_in<TilePush> tile_push;
  sc_out<std::uint32_t> tiles_popped;  // tiles taken from the FIFO so far
  sc_out<std::uint32_t> tiles_loaded;  // tiles completely shifted into the shadow so far
  sc_out<bool> row_valid;              // a UB row enters the array this cycle
  sc_out<std::uint32_t> fifo_count;
  sc_out<bool> acc_write;              // the accumulator port writes this cycle

  // `kernel` and `threading`: the fast path's GEMM (RunOptions).
  SystolicArray(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log,
                bool fast = false, GemmKernel kernel = best_gemm_kernel(),
                const GemmThreading& threading = {});
  SC_HAS_PROCESS(SystolicArray);

  // Fast path: after the tick of `now`, the next cycle in which the array
  // completes an MMC, finishes or may start a weight load, or the one after
  // `now` if its tile counters changed (the controller looks at them then).
  Cycle next_activity(Cycle now) const;

  // Fast path, after a fault in cycle `t`: the part of the MMCs in flight
  // that the detailed path had done by the end of cycle t.
  void flush_partial(Cycle t);
  // Fast path, at the end of a run without a fault: MMCs still in flight
  // (none, when the program ran to its end) had not completed, so what the
  // background computed of them is taken back.
  void drop_unfinished() { undo_background(); }

  // Adds the array's edges to a waveform: x entering each PE row at column 0
  // and the sums leaving each column at the bottom, with their valid bits.
  void trace_edges(Waveform& wave, const std::string& unit);

 private:
  enum class Shadow { Free, Loading, Loaded };

  // One UB row in the array, remembered by the cycle it was read.
  struct RowSlot {
    bool valid = false;
    bool overwrite = false;
    std::uint8_t weight_set = 0;
    std::uint64_t acc_row = 0;
    std::vector<std::int8_t> x;
  };

  // Fast path: an MMC computed on the GemmQueue's thread from its start.
  struct Background {
    std::vector<const std::int8_t*> rows;  // its input rows
    std::vector<std::int8_t> pad;          // its padding row (MMC.C)
    bool overwrite = false;
    std::vector<std::int32_t> kept;        // the ACC rows it overwrote
  };

  struct Job {
    UnitCommand cmd;
    Cycle start;
    Cycle completion;
    std::uint8_t weight_set;  // the set its rows use
    std::uint64_t ticket = 0;  // its task on queue_; 0: computed at completion
    std::unique_ptr<Background> background = nullptr;
  };

  void tick();
  void tick_fast(Cycle now);
  void accept_and_load(Cycle now);
  void count_busy_and_publish();
  void compute_mmc(const Job& job);
  const PackedWeights& packed(std::uint8_t set);
  // The input rows of an MMC where they are: the UB rows, or for MMC.C the
  // map's rows and `pad` (filled with the padding value).
  void gather_rows(const UnitCommand& command, std::vector<const std::int8_t*>& rows,
                   std::vector<std::int8_t>& pad) const;
  void maybe_start_in_background(Job& job);
  void undo_background();
  // Row i of an MMC: UB[ub_row + i]; for MMC.C the UB row or the padding row
  // (in pad_row_) that the convolution geometry names for output pixel i.
  const std::int8_t* input_row(const UnitCommand& command, std::uint64_t i);
  void write_accumulators(Cycle now);
  void handle_command(Cycle now);
  void try_start(Cycle now);
  void start_job(const UnitCommand& c, Cycle now);
  void run_loader(Cycle now);
  void read_row(Cycle now);
  void step_pes(Cycle now);
  void sample_edges(Cycle now);
  RowSlot& slot(Cycle read_cycle) { return history_[read_cycle % history_.size()]; }

  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  const std::size_t n_;

  std::deque<std::vector<std::int8_t>> fifo_;
  std::vector<std::int8_t> weights_[2];  // two register sets, W[k * N + j]
  std::uint8_t active_ = 0;
  Shadow shadow_ = Shadow::Free;
  Cycle loaded_at_ = 0;  // the first cycle at whose start the shadow was Loaded
  // The MMC that arrived and has not started (an MMC.S waiting for weights).
  std::optional<UnitCommand> pending_;
  Cycle shadow_free_from_ = 0;
  Cycle load_start_ = 0;
  std::vector<std::int8_t> loading_tile_;
  Cycle last_use_[2] = {0, 0};  // last cycle a row using each set was read
  bool used_[2] = {false, false};
  std::uint32_t popped_ = 0;
  std::uint32_t loaded_ = 0;

  std::vector<RowSlot> history_;        // rows by read cycle, 2N + 2 deep
  std::vector<std::int8_t> x_reg_;      // x[k] held in PE (k, j)
  std::vector<std::uint8_t> x_set_;     // the weight set that x uses
  std::vector<std::int32_t> psum_reg_;  // partial sum leaving PE (k, j)
  std::deque<Job> jobs_;                // MMCs whose rows are still in the array
  Cycle rows_in_flight_until_ = 0;      // last cycle any PE has work
  bool any_rows_ = false;
  bool retired_now_ = false;  // an MMC completed this cycle

  // Fast path.
  const bool fast_;
  Cycle last_tick_ = 0;
  bool counters_changed_ = false;
  const GemmKernel kernel_;
  const GemmThreading threading_;
  PackedWeights packed_[2];     // weights_[s] packed for kernel_, when packed_valid_[s]
  bool packed_valid_[2] = {false, false};
  std::vector<const std::int8_t*> row_ptrs_;  // an MMC's input rows, where they are
  std::vector<std::int8_t> pad_row_;    // every lane the padding value
  // Declared after jobs_: destroyed (its thread joined) before the jobs whose
  // rows its tasks read.
  GemmQueue queue_;

  // Edge values for waveforms, sampled each cycle only when traced.
  bool traced_ = false;
  std::vector<int> edge_x_, edge_sum_;
  std::unique_ptr<bool[]> edge_x_valid_, edge_sum_valid_;
};

}  // namespace tpu::model
