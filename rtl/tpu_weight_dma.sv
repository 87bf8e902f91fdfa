// tpu_weight_dma: executes RW. A tile of N x N bytes takes weight_latency +
// ceil(N*N / weight_bytes_per_cycle) cycles; in its completion cycle it is
// read from weight memory (the testbench's port) and pushed towards the weight
// FIFO, which takes it the next cycle (docs/microarchitecture.md, "Weight
// DMA"). Mirrors src/model/weight_dma.cpp.
module tpu_weight_dma
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  logic [CycleW-1:0]           cycle_i,
  input  unit_cmd_t                   cmd_i,
  output logic                        wmem_rd_valid_o,
  output logic [31:0]                 wmem_rd_tile_o,
  input  logic [ArrayN*ArrayN*8-1:0]  wmem_rd_data_i,
  output logic                        tile_push_valid_o,
  output logic [ArrayN*ArrayN*8-1:0]  tile_push_data_o,
  output retire_t                     retire_o,
  output logic                        busy_o
);

  unit_cmd_t         job_q;
  logic              active_q;
  logic [CycleW-1:0] done_at_q;

  unit_cmd_t         job;
  logic              active, done;
  logic [CycleW-1:0] done_at;
  assign job     = cmd_i.valid ? cmd_i : job_q;
  assign active  = cmd_i.valid || active_q;
  assign done_at = cmd_i.valid ? cycle_i + CycleW'(WeightDmaCycles) - 1 : done_at_q;
  assign done    = active && cycle_i == done_at;

  assign wmem_rd_valid_o = done;
  assign wmem_rd_tile_o  = job.op0;
  assign retire_o.valid  = done;
  assign retire_o.seq    = job.seq;
  assign busy_o          = active;

  // A tile is an N*N*8-bit vector: from N = 32 its '0 reset exceeds the
  // 8k-bit replication that WIDTHCONCAT takes for a likely mistake.
  /* verilator lint_off WIDTHCONCAT */
  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      job_q <= '0;
      active_q <= 1'b0;
      done_at_q <= '0;
      tile_push_valid_o <= 1'b0;
      tile_push_data_o <= '0;
    end else begin
      job_q <= job;
      done_at_q <= done_at;
      active_q <= active && !done;
      tile_push_valid_o <= done;
      if (done) tile_push_data_o <= wmem_rd_data_i;
    end
  end
  /* verilator lint_on WIDTHCONCAT */

endmodule
