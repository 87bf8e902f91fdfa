// tpu_host_dma: executes RHM (host memory -> UB) and WHM (UB, or ACC with .A,
// -> host memory), one at a time (docs/microarchitecture.md, "Host DMA").
// Mirrors src/model/host_dma.cpp. After host_latency cycles it moves
// host_bytes_per_cycle bytes per cycle; a row moves in the cycle its last byte
// arrives. Host memory sits behind the testbench's ports; with
// host_bytes_per_cycle <= N at most one row moves per cycle.
module tpu_host_dma
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                   clk_i,
  input  logic                   rst_ni,
  input  logic [CycleW-1:0]      cycle_i,
  input  unit_cmd_t              cmd_i,
  // Host memory ports (testbench).
  output logic                   host_rd_valid_o,
  output logic [31:0]            host_rd_row_o,
  input  logic [ArrayN*8-1:0]    host_rd_data_i,
  output logic                   host_wr_valid_o,
  output logic [31:0]            host_wr_row_o,
  output logic                   host_wr_acc_o,   // 4 rows of int32 LE, else 1 row
  output logic [4*ArrayN*8-1:0]  host_wr_data_o,
  // Unified buffer ports.
  output logic                   ub_wr_valid_o,
  output logic [31:0]            ub_wr_row_o,
  output logic [ArrayN*8-1:0]    ub_wr_data_o,
  output logic [31:0]            ub_rd_row_o,
  input  logic [ArrayN*8-1:0]    ub_rd_data_i,
  // Accumulator read port (WHM.A).
  output logic [31:0]            acc_rd_row_o,
  input  logic [ArrayN*32-1:0]   acc_rd_data_i,
  output retire_t                retire_o,
  output logic                   busy_o
);

  unit_cmd_t         job_q;
  logic              active_q;
  logic [CycleW-1:0] start_q;
  logic [31:0]       rows_done_q;

  // The job of this cycle: a command starts in the cycle it arrives.
  unit_cmd_t         job;
  logic              active;
  logic [CycleW-1:0] start;
  logic [31:0]       rows_done;
  assign job       = cmd_i.valid ? cmd_i : job_q;
  assign active    = cmd_i.valid || active_q;
  assign start     = cmd_i.valid ? cycle_i : start_q;
  assign rows_done = cmd_i.valid ? '0 : rows_done_q;

  logic is_rhm, is_acc;
  logic [63:0] row_bytes, bytes_moved;
  logic        row_due, last_row;
  assign is_rhm    = job.opcode == 8'(OpRhm);
  assign is_acc    = !is_rhm && job.flags[FlagWhmA];
  assign row_bytes = is_acc ? 64'(HostRowsPerAccRow * ArrayN) : 64'(ArrayN);
  // Bytes moved by the end of this cycle: (cycle - start - Lh + 1) * Bh.
  logic [CycleW-1:0] elapsed;
  assign elapsed     = cycle_i - start - CycleW'(HostLatency) + CycleW'(1);
  assign bytes_moved = 64'(elapsed) * 64'(HostBytesPerCycle);
  assign row_due = active && cycle_i >= start + CycleW'(HostLatency) &&
                   bytes_moved >= (64'(rows_done) + 1) * row_bytes;
  assign last_row = rows_done + 1 == job.op2;

  assign host_rd_valid_o = row_due && is_rhm;
  assign host_rd_row_o   = job.op0 + rows_done;
  assign ub_wr_valid_o   = row_due && is_rhm;
  assign ub_wr_row_o     = job.op1 + rows_done;
  assign ub_wr_data_o    = host_rd_data_i;
  assign ub_rd_row_o     = job.op0 + rows_done;
  assign acc_rd_row_o    = job.op0 + rows_done;
  assign host_wr_valid_o = row_due && !is_rhm;
  assign host_wr_acc_o   = is_acc;
  assign host_wr_row_o   = job.op1 + (is_acc ? rows_done * HostRowsPerAccRow : rows_done);
  assign host_wr_data_o  = is_acc ? acc_rd_data_i : {(3 * ArrayN * 8)'(0), ub_rd_data_i};

  assign retire_o.valid = row_due && last_row;
  assign retire_o.seq   = job.seq;
  assign busy_o         = active;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      job_q <= '0;
      active_q <= 1'b0;
      start_q <= '0;
      rows_done_q <= '0;
    end else begin
      job_q <= job;
      start_q <= start;
      rows_done_q <= row_due ? rows_done + 1 : rows_done;
      active_q <= active && !(row_due && last_row);
    end
  end

endmodule
