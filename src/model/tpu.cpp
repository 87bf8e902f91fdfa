#include "model/tpu.h"

#include <systemc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "model/activation_unit.h"
#include "model/controller.h"
#include "model/host_dma.h"
#include "model/host_memory_target.h"
#include "model/perf_counters.h"
#include "model/systolic_array.h"
#include "model/waveform.h"
#include "model/weight_dma.h"
#include "model/weight_memory_target.h"

namespace tpu::model {
namespace {

// The clock. Detailed: an sc_clock, a rising edge every cycle. Fast: a signal
// that a method raises only in the cycles some unit asks for: after the
// units' processes of cycle t have run (at t + half a period), it asks each
// for its next_activity(t) and raises the next edge at the earliest. Every
// unit runs at every edge, so each one catches up, from its last tick, on
// the cycles skipped in between; a unit asks for a cycle whenever something
// it does there could matter to another unit or to its own counts.
SC_MODULE(Tpu) {
  std::unique_ptr<sc_clock> free_clock;  // detailed
  sc_signal<bool> fast_clock{"fast_clock"};
  const bool fast;
  bool clock_high = false;
  sc_signal<UnitCommand> host_dma_cmd{"host_dma_cmd"}, weight_dma_cmd{"weight_dma_cmd"},
      array_cmd{"array_cmd"}, act_cmd{"act_cmd"};
  sc_signal<TilePush> tile_push{"tile_push"};
  sc_signal<std::uint32_t> tiles_popped{"tiles_popped"}, tiles_loaded{"tiles_loaded"},
      pc{"pc"}, fifo_count{"fifo_count"};
  sc_signal<bool> issue{"issue"}, stall{"stall"}, host_dma_busy{"host_dma_busy"},
      weight_dma_busy{"weight_dma_busy"}, act_busy{"act_busy"}, row_valid{"row_valid"},
      acc_write{"acc_write"};

  Controller controller;
  HostDma host_dma;
  WeightDma weight_dma;
  SystolicArray systolic_array;
  ActivationUnit activation_unit;
  // The memory targets bound to the DMAs' sockets.
  std::shared_ptr<void> host_memory, weight_memory;

  SC_HAS_PROCESS(Tpu);
  Tpu(sc_module_name name, const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
      RunLog& log, Cycle max_cycles, bool fast_path, GemmKernel kernel,
      const GemmThreading& threading, const MemoryTargetFactory& host_target,
      const MemoryTargetFactory& weight_target)
      : sc_module(name),
        fast(fast_path),
        controller("controller", cfg, prog, log, max_cycles),
        host_dma("host_dma", cfg, mem, log),
        weight_dma("weight_dma", cfg, mem, log),
        systolic_array("systolic_array", cfg, mem, log, fast_path, kernel, threading),
        activation_unit("activation_unit", cfg, mem, log) {
    if (!fast) free_clock = std::make_unique<sc_clock>("clk", kClockPeriod);
    sc_signal_in_if<bool>& clk =
        fast ? static_cast<sc_signal_in_if<bool>&>(fast_clock) : *free_clock;
    if (fast) {
      SC_METHOD(drive_clock);  // runs at time 0: the first edge is cycle 0
    }
    controller.clk(clk);
    controller.host_dma_cmd(host_dma_cmd);
    controller.weight_dma_cmd(weight_dma_cmd);
    controller.array_cmd(array_cmd);
    controller.act_cmd(act_cmd);
    controller.tiles_popped(tiles_popped);
    controller.pc_out(pc);
    controller.issue_out(issue);
    controller.stall_out(stall);
    host_dma.clk(clk);
    host_dma.cmd(host_dma_cmd);
    host_dma.busy(host_dma_busy);
    weight_dma.clk(clk);
    weight_dma.cmd(weight_dma_cmd);
    weight_dma.tile_push(tile_push);
    weight_dma.busy(weight_dma_busy);
    systolic_array.clk(clk);
    systolic_array.cmd(array_cmd);
    systolic_array.tile_push(tile_push);
    systolic_array.tiles_popped(tiles_popped);
    systolic_array.tiles_loaded(tiles_loaded);
    systolic_array.row_valid(row_valid);
    systolic_array.fifo_count(fifo_count);
    systolic_array.acc_write(acc_write);
    activation_unit.clk(clk);
    activation_unit.cmd(act_cmd);
    activation_unit.busy(act_busy);
    controller.connect(host_dma, weight_dma);
    host_memory = (host_target ? host_target : HostMemoryTarget::factory())(cfg, mem, host_dma.memory);
    weight_memory = (weight_target ? weight_target : WeightMemoryTarget::factory())(cfg, mem,
                                                                                  weight_dma.memory);
  }

  void drive_clock() {
    const sc_core::sc_time kHalf = kClockPeriod / 2;
    if (!clock_high) {
      fast_clock.write(true);
      clock_high = true;
      next_trigger(kHalf);
      return;
    }
    fast_clock.write(false);
    clock_high = false;
    const Cycle now = current_cycle();
    const Cycle next = std::min({controller.next_activity(now), host_dma.next_activity(now),
                                 weight_dma.next_activity(now), systolic_array.next_activity(now),
                                 activation_unit.next_activity(now)});
    // Nothing scheduled (the controller has stopped): the kernel runs out of
    // events and sc_start returns.
    if (next == kNever || next - now > (Cycle{1} << 40)) return;
    next_trigger(kClockPeriod * static_cast<double>(next - now) - kHalf);
  }

  void trace_signals(Waveform& w) {
    sc_trace(w.file(), *free_clock, "clk");
    w.add(pc, "controller", "pc", 32);
    w.add(issue, "controller", "issue");
    w.add(stall, "controller", "stall");
    trace_command(w, host_dma_cmd, "host_dma");
    w.add(host_dma_busy, "host_dma", "busy");
    trace_command(w, weight_dma_cmd, "weight_dma");
    w.add(weight_dma_busy, "weight_dma", "busy");
    sc_trace(w.file(), tile_push, "weight_dma.tile_push");
    w.note("weight_dma", "tile_push.valid", 1);
    w.note("weight_dma", "tile_push.tile", 32);
    trace_command(w, array_cmd, "systolic_array");
    w.add(row_valid, "systolic_array", "row_valid");
    w.add(fifo_count, "systolic_array", "fifo_count", 32);
    w.add(tiles_loaded, "systolic_array", "tiles_loaded", 32);
    w.add(acc_write, "systolic_array", "acc_write");
    systolic_array.trace_edges(w, "systolic_array");
    trace_command(w, act_cmd, "activation_unit");
    w.add(act_busy, "activation_unit", "busy");
  }

  static void trace_command(Waveform& w, const sc_signal<UnitCommand>& cmd, const std::string& unit) {
    sc_trace(w.file(), cmd, unit + ".cmd");
    w.note(unit, "cmd.valid", 1);
    w.note(unit, "cmd.pc", 32);
  }
};

// SystemC allows one elaboration per simulation context; every run gets a
// new context so that one process can run many programs.
void fresh_simcontext() {
  static bool configured = false;
  if (!configured) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    configured = true;
  }
  sc_core::sc_curr_simcontext = new sc_core::sc_simcontext();
  sc_core::sc_default_global_context = sc_core::sc_curr_simcontext;
  // sc_stop() reports "Simulation stopped by user" as an info message.
  sc_report_handler::set_actions("/OSCI/SystemC", SC_INFO, SC_DO_NOTHING);
}

}  // namespace

Detail resolve_detail(const RunOptions& opts) {
  const bool wave = !opts.vcd_path.empty();
  switch (opts.detail) {
    case Detail::Auto: {
      if (wave) return Detail::Detailed;
      // For running a whole test suite on one path: TPU_DETAIL=detailed|fast.
      const char* env = std::getenv("TPU_DETAIL");
      return env && std::string_view(env) == "detailed" ? Detail::Detailed : Detail::Fast;
    }
    case Detail::Detailed: return Detail::Detailed;
    case Detail::Fast:
      if (wave)
        throw std::invalid_argument(
            "a waveform needs the detailed model: the fast path keeps no per-cycle state");
      return Detail::Fast;
  }
  return Detail::Detailed;
}

RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
                   const RunOptions& opts) {
  const bool fast = resolve_detail(opts) == Detail::Fast;
  RunLog log;
  log.retired.reserve(prog.code.size());
  sc_core::sc_simcontext* previous = sc_core::sc_curr_simcontext;
  fresh_simcontext();
  {
    Tpu top("tpu", cfg, prog, mem, log, opts.max_cycles, fast,
            opts.gemm_kernel.value_or(best_gemm_kernel()), opts.gemm_threading, opts.host_memory,
            opts.weight_memory);
    top.controller.set_interrupt(opts.interrupted);
    std::unique_ptr<Waveform> wave;
    if (!opts.vcd_path.empty()) {
      wave = std::make_unique<Waveform>(opts.vcd_path);
      top.trace_signals(*wave);
      wave->write_save_file();
    }
    sc_start();
    if (fast && log.fault)
      top.systolic_array.flush_partial(log.fault->cycle);
    else if (fast)
      top.systolic_array.drop_unfinished();
    count_array_work(cfg, prog, log);
    log.stats.tpuv1 = count_perf(cfg, prog, log, mem.weights.row(0));
    log.stats.events = count_events(cfg, prog, log);
    if (wave) wave->close();  // the VCD and .gtkw appear only now, whole
  }
  delete sc_core::sc_curr_simcontext;
  sc_core::sc_curr_simcontext = previous;
  sc_core::sc_default_global_context = previous;
  return log;
}

}  // namespace tpu::model

// libsystemc's own main() calls sc_main. tpu-sim's programs have their own
// main and drive the kernel through run_program, so this is never called; it
// only satisfies the library's reference.
int sc_main(int, char**) { return 0; }
