#include "model/tpu.h"

#include <systemc.h>

#include <cstdlib>

#include "model/activation_unit.h"
#include "model/controller.h"
#include "model/host_dma.h"
#include "model/systolic_array.h"
#include "model/waveform.h"
#include "model/weight_dma.h"

namespace tpu::model {
namespace {

SC_MODULE(Tpu) {
  sc_clock clk;
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

  Tpu(sc_module_name name, const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
      RunLog& log, Cycle max_cycles)
      : sc_module(name),
        clk("clk", kClockPeriod),
        controller("controller", cfg, prog, log, max_cycles),
        host_dma("host_dma", cfg, mem, log),
        weight_dma("weight_dma", cfg, log),
        systolic_array("systolic_array", cfg, mem, log),
        activation_unit("activation_unit", cfg, mem, log) {
    controller.clk(clk);
    controller.host_dma_cmd(host_dma_cmd);
    controller.weight_dma_cmd(weight_dma_cmd);
    controller.array_cmd(array_cmd);
    controller.act_cmd(act_cmd);
    controller.tiles_popped(tiles_popped);
    controller.tiles_loaded(tiles_loaded);
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
  }

  void trace(Waveform& w) {
    sc_trace(w.file(), clk, "clk");
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

RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
                   const RunOptions& opts) {
  RunLog log;
  log.retired.reserve(prog.code.size());
  sc_core::sc_simcontext* previous = sc_core::sc_curr_simcontext;
  fresh_simcontext();
  {
    Tpu top("tpu", cfg, prog, mem, log, opts.max_cycles);
    std::unique_ptr<Waveform> wave;
    if (!opts.vcd_path.empty()) {
      wave = std::make_unique<Waveform>(opts.vcd_path);
      top.trace(*wave);
      wave->write_save_file();
    }
    sc_start();
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
