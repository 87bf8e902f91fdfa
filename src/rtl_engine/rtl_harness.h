// The testbench of one Verilated tpu_core build: serves the program, host
// memory and weight memory ports combinationally, clocks the core, and turns
// its observation ports into the model's RunLog. Included by variant.cpp once
// per build, with VTop the Verilated class.
//
// With RunOptions::vcd_path set, the build's tracing (VM_TRACE, TPU_RTL_TRACE
// in CMake) writes every signal of tpu_core to a VCD, on the SystemC
// waveform's time base: a 100 ps unit, cycle t's rising edge at 10t (t ns),
// its falling edge at 10t+5, and the values of cycle t (registers and the
// combinational outputs of the inputs served in it) from 10t on.
#pragma once

#include <fmt/format.h>
#include <verilated.h>
#if VM_TRACE
#include <verilated_vcd_c.h>

#include "waves/wave_files.h"
#endif

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "isa/instruction.h"
#include "model/memories.h"
#include "model/perf_counters.h"
#include "model/run_log.h"
#include "model/timing.h"
#include "model/tpu.h"
#include "rtl_engine/port_widths.h"

namespace tpu::rtl::detail {

// Little-endian bytes <-> Verilator ports of any width.
template <typename T>
void put_bytes(T& port, const std::uint8_t* b, std::size_t n) {
  if constexpr (std::is_integral_v<T>) {
    T v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<T>(static_cast<T>(b[i]) << (8 * i));
    port = v;
  } else {
    for (std::size_t w = 0; w * 4 < n; ++w) {
      std::uint32_t v = 0;
      for (std::size_t i = 0; i < 4 && w * 4 + i < n; ++i) v |= std::uint32_t{b[w * 4 + i]} << (8 * i);
      port[w] = v;
    }
  }
}

template <typename T>
void get_bytes(const T& port, std::uint8_t* b, std::size_t n) {
  if constexpr (std::is_integral_v<T>) {
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(port >> (8 * i));
  } else {
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(port[i / 4] >> (8 * (i % 4)));
  }
}

// A retire_t port: {valid, seq[31:0]}.
inline bool retire_valid(std::uint64_t port) { return (port >> 32) & 1u; }
inline std::uint32_t retire_seq(std::uint64_t port) { return static_cast<std::uint32_t>(port); }

const char* fault_reason(unsigned code);
void finish_stats(const ArchConfig& cfg, const isa::Program& prog, model::RunLog& log);

template <typename VTop>
model::RunLog run_on_rtl(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                         const model::RunOptions& opts) {
  const std::size_t n = cfg.array_n;
  auto ctx = std::make_unique<VerilatedContext>();
  ctx->fatalOnError(false);
#if VM_TRACE
  std::unique_ptr<wave::RtlWaveFiles> wave;
  if (!opts.vcd_path.empty()) {
    wave = std::make_unique<wave::RtlWaveFiles>(opts.vcd_path);
    ctx->traceEverOn(true);
  }
#else
  if (!opts.vcd_path.empty())
    throw std::logic_error("this RTL build has no tracing (CMake: -DTPU_RTL_TRACE=ON)");
#endif
  // Registers without a reset start at zero (Verilator's default), or with
  // TPU_RTL_RANDOM_INIT=SEED at random values (the builds use --x-initial
  // unique): a test that the results do not depend on them
  // (cosim.*.random_init).
  if (const char* seed = std::getenv("TPU_RTL_RANDOM_INIT"); seed && *seed) {
    ctx->randReset(2);
    ctx->randSeed(static_cast<int>(std::strtol(seed, nullptr, 10)));
  }
  auto top = std::make_unique<VTop>(ctx.get(), "tpu_core");
#if VM_TRACE
  std::unique_ptr<VerilatedVcdC> vcd;  // closed before `top` goes
  if (wave) {
    vcd = std::make_unique<VerilatedVcdC>();
    top->trace(vcd.get(), 99);
    vcd->set_time_unit("100ps");
    vcd->set_time_resolution("100ps");
    vcd->open(wave->vcd_tmp().c_str());
    if (!vcd->isOpen()) throw FileError(fmt::format("{}: cannot write", opts.vcd_path));
  }
  // While tracing, the clock stays high through the combinational phase of
  // a cycle and falls (an edge nothing in tpu_core is sensitive to) after it
  // is dumped; untraced, the combinational phase runs with it low.
  const bool traced = vcd != nullptr;
  const auto dump = [&](std::uint64_t tenths_of_ns) {
    if (vcd) vcd->dump(tenths_of_ns);
  };
#else
  constexpr bool traced = false;
  const auto dump = [](std::uint64_t) {};
#endif
  model::RunLog log;
  log.retired.reserve(prog.code.size());
  for (const isa::Unit unit :
       {isa::Unit::HostDma, isa::Unit::WeightDma, isa::Unit::MatrixUnit, isa::Unit::ActivationUnit})
    log.stats.units[std::string(isa::unit_name(unit))];

  std::vector<isa::EncodedInstr> encoded;
  encoded.reserve(prog.code.size());
  for (const isa::Instruction& in : prog.code) encoded.push_back(isa::encode(in));

  auto* root = top->rootp;

  top->prog_len_i = static_cast<std::uint32_t>(prog.code.size());
  // The memory channels' timing, held for the run (rtl::unavailable has
  // checked the bandwidths against the ports; the latencies fit 32 bits).
  top->host_latency_i = static_cast<std::uint32_t>(cfg.host_latency);
  top->host_bytes_per_cycle_i = static_cast<std::uint32_t>(cfg.host_bytes_per_cycle);
  top->host_layout_i = static_cast<std::uint32_t>(cfg.host_layout_cycles);
  top->ub_weight_path_i = cfg.ub_weight_path != 0;
  top->weight_latency_i = static_cast<std::uint32_t>(cfg.weight_latency);
  top->weight_bytes_per_cycle_i = static_cast<std::uint32_t>(core_weight_bytes_per_cycle(cfg));
  top->rst_ni = 0;
  top->clk_i = 0;
  top->eval();
  top->clk_i = 1;
  top->eval();
  // The unified buffer and accumulators start as `mem` holds them, written
  // after the reset edge (with random initial values, Verilator's pending
  // memory writes start random too, and the edge commits them).
  for (std::uint64_t r = 0; r < cfg.ub_rows; ++r)
    put_bytes(root->tpu_core__DOT__ub_q[r], reinterpret_cast<const std::uint8_t*>(mem.ub.row(r)), n);
  for (std::uint64_t r = 0; r < cfg.acc_rows; ++r)
    for (std::size_t j = 0; j < n; ++j)
      root->tpu_core__DOT__acc_q[r][j] = static_cast<std::uint32_t>(mem.acc.row(r)[j]);
  if (!traced) top->clk_i = 0;
  top->rst_ni = 1;
  top->eval();

  for (model::Cycle t = 0;; ++t) {
    // The combinational phase of cycle t: serve the ports, then observe.
    const std::uint32_t pc = top->fetch_pc_o;
    static const isa::EncodedInstr kZero{};
    const isa::EncodedInstr& word = pc < encoded.size() ? encoded[pc] : kZero;
    put_bytes(top->fetch_instr_i, word.data(), word.size());
    top->eval();
    // Host rows host_rd_row_o .. + host_rd_count_o - 1, contiguous in memory.
    if (top->host_rd_valid_o)
      put_bytes(top->host_rd_data_i, reinterpret_cast<const std::uint8_t*>(mem.host.row(top->host_rd_row_o)),
                std::size_t{top->host_rd_count_o} * n);
    // Rows wmem_rd_row_o .. + wmem_rd_count_o - 1 of a tile, row-major in
    // the weight memory.
    if (top->wmem_rd_valid_o)
      put_bytes(top->wmem_rd_data_i,
                reinterpret_cast<const std::uint8_t*>(mem.weights.row(top->wmem_rd_tile_o)) +
                    std::size_t{top->wmem_rd_row_o} * n,
                std::size_t{top->wmem_rd_count_o} * n);
    top->eval();

    // The units' work of cycle t happens even in a cycle the controller faults in.
    for (std::uint64_t port : {static_cast<std::uint64_t>(top->host_dma_retire_o),
                               static_cast<std::uint64_t>(top->weight_dma_retire_o),
                               static_cast<std::uint64_t>(top->array_retire_o),
                               static_cast<std::uint64_t>(top->act_retire_o)})
      if (retire_valid(port)) log.complete(retire_seq(port), t);
    // An MMC.S may wait in the array for its weights: its start is the array's.
    if (const auto start = static_cast<std::uint64_t>(top->array_start_o); retire_valid(start))
      log.retired.at(retire_seq(start)).start = t;
    if (top->host_wr_valid_o)
      get_bytes(top->host_wr_data_o, reinterpret_cast<std::uint8_t*>(mem.host.row(top->host_wr_row_o)),
                std::size_t{top->host_wr_count_o} * n);
    // An HWT's last cycle: the host lays its rows out as the tile and writes
    // it (docs/isa.md): tile row r is host row r, or with .T lane r of tile
    // row k is lane k of host row r; zeros past the rows. The controller
    // checked the ranges, and run_program the rows (at most N).
    if (top->wmem_wr_valid_o) {
      const std::size_t rows = top->wmem_wr_rows_o;
      const auto* src = reinterpret_cast<const std::uint8_t*>(mem.host.row(top->wmem_wr_host_row_o));
      auto* tile = reinterpret_cast<std::uint8_t*>(mem.weights.row(top->wmem_wr_tile_o));
      std::fill(tile, tile + n * n, std::uint8_t{0});
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t k = 0; k < n; ++k) {
          if (top->wmem_wr_transpose_o)
            tile[k * n + r] = src[r * n + k];
          else
            tile[r * n + k] = src[r * n + k];
        }
    }
    dump(10 * t);
    if (t >= opts.max_cycles) {
      model::Fault f{pc, pc < prog.code.size() ? isa::disassemble(prog.code[pc]) : "-", t,
                     fmt::format("cycle limit {} reached", opts.max_cycles)};
      log.fault = f;
      log.stats.cycles = t;
      break;
    }
    if (opts.interrupted && t % model::kInterruptPollTicks == 0 && t > 0 && opts.interrupted()) {
      log.fault = model::Fault{pc, pc < prog.code.size() ? isa::disassemble(prog.code[pc]) : "-", t, "interrupted"};
      log.interrupted = true;
      log.stats.cycles = t;
      break;
    }
    if (top->issue_o) {
      const isa::Instruction& in = prog.code[pc];
      const bool controller_only = isa::spec_of(in.opcode).unit == isa::Unit::Controller;
      model::RetireRecord r;
      r.pc = pc;
      r.issue = t;
      // An MMC's start is the array's (start_o), which may wait for weights:
      // kNever, as in the model, if it has not started when the run stops.
      r.start = controller_only ? t : in.opcode == isa::Opcode::MMC ? model::kNever : t + 1;
      // A unit's instruction gets its completion cycle when the unit retires
      // it (0 until then, as in the model's records).
      r.completion = controller_only ? t : 0;
      r.completed = controller_only;
      log.retired.push_back(r);
      ++log.stats.instructions;
    }
    if (top->stall_o) log.stall(pc, static_cast<model::StallCause>(top->stall_cause_o), t, t);

    if (traced) {
      top->clk_i = 0;
      top->eval();
      dump(10 * t + 5);
    }
    top->clk_i = 1;
    top->eval();
    if (!traced) top->clk_i = 0;
    if (top->halted_o || top->fault_o) dump(10 * (t + 1));  // the state the run ends in
    if (top->halted_o) {
      log.halted = true;
      log.stats.cycles = t + 1;
      break;
    }
    if (top->fault_o) {
      model::Fault f{pc, pc < prog.code.size() ? isa::disassemble(prog.code[pc]) : "-",
                     static_cast<model::Cycle>(top->fault_cycle_o), fault_reason(top->fault_code_o)};
      log.fault = f;
      log.stats.cycles = f.cycle;
      break;
    }
  }

  // The unified buffer and accumulators, for outputs and comparison.
  for (std::uint64_t r = 0; r < cfg.ub_rows; ++r)
    get_bytes(root->tpu_core__DOT__ub_q[r], reinterpret_cast<std::uint8_t*>(mem.ub.row(r)), n);
  for (std::uint64_t r = 0; r < cfg.acc_rows; ++r)
    for (std::size_t j = 0; j < n; ++j)
      mem.acc.row(r)[j] = static_cast<std::int32_t>(root->tpu_core__DOT__acc_q[r][j]);
  top->final();
#if VM_TRACE
  // Also after a failed assertion, whose cycle the waveform shows.
  if (vcd) {
    vcd->close();
    wave->finish();
  }
#endif
  if (ctx->gotError())
    throw std::runtime_error("an RTL assertion failed (its message is above)");
  finish_stats(cfg, prog, log);
  log.stats.tpuv1 = model::count_perf(cfg, prog, log, mem.weights.row(0));
  // The RTL counts no energy events of its own: the same closed forms from
  // its retire records (model/perf_counters.h), as for the TPUv1 counters.
  log.stats.events = model::count_events(cfg, prog, log);
  return log;
}

}  // namespace tpu::rtl::detail
