// tpu_weight_dma: executes RW over the weight memory, a pipelined channel: a
// request's latency (WeightLatency) overlaps the transfers ahead of it, and the
// channel streams one N x N tile in WeightTileCycles = ceil(N*N / Bw) cycles,
// so a tile arrives at max(start + Lw, previous arrival + 1) + T - 1. In that
// cycle it is read from weight memory (the testbench's port) and pushed
// towards the weight FIFO, which takes it the next cycle
// (docs/microarchitecture.md, "Weight DMA"). Up to FifoDepth requests are
// outstanding (the controller's FIFO rule). Mirrors src/model/weight_dma.cpp.
module tpu_weight_dma
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  logic [CycleW-1:0]           cycle_i,
  // An RW uses the command's valid, seq and op0 (the tile) only.
  /* verilator lint_off UNUSEDSIGNAL */
  input  unit_cmd_t                   cmd_i,
  /* verilator lint_on UNUSEDSIGNAL */
  output logic                        wmem_rd_valid_o,
  output logic [31:0]                 wmem_rd_tile_o,
  input  logic [ArrayN*ArrayN*8-1:0]  wmem_rd_data_i,
  output logic                        tile_push_valid_o,
  output logic [ArrayN*ArrayN*8-1:0]  tile_push_data_o,
  output retire_t                     retire_o,
  output logic                        busy_o
);

  localparam int unsigned Depth = FifoDepth;
  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1;

  // Outstanding requests, oldest first: their sequence numbers, tiles and
  // arrival cycles (strictly increasing).
  logic [31:0]       seq_q  [Depth];
  logic [31:0]       tile_q [Depth];
  logic [CycleW-1:0] at_q   [Depth];
  logic [PtrW-1:0]   head_q, tail_q;
  logic [PtrW:0]     count_q;
  logic [CycleW-1:0] last_q;  // the last arrival (0: none)

  // A new request's arrival.
  logic [CycleW-1:0] arrive;
  assign arrive = ((cycle_i + CycleW'(WeightLatency) > last_q + CycleW'(1))
                       ? cycle_i + CycleW'(WeightLatency)
                       : last_q + CycleW'(1)) + CycleW'(WeightTileCycles) - CycleW'(1);

  // The oldest request: queued, or arriving now into an empty queue (it may
  // complete in its first cycle when Lw = 0 and T = 1).
  logic              from_cmd;
  logic [31:0]       cur_seq, cur_tile;
  logic [CycleW-1:0] cur_at;
  logic              done;
  assign from_cmd = count_q == '0;
  assign cur_seq  = from_cmd ? cmd_i.seq : seq_q[head_q];
  assign cur_tile = from_cmd ? cmd_i.op0 : tile_q[head_q];
  assign cur_at   = from_cmd ? arrive : at_q[head_q];
  assign done     = (from_cmd ? cmd_i.valid : 1'b1) && cycle_i == cur_at;

  // Enqueue a new request unless it completes now from an empty queue;
  // dequeue the head when it completes.
  logic push, pop;
  assign push = cmd_i.valid && !(from_cmd && done);
  assign pop  = done && !from_cmd;

  assign wmem_rd_valid_o = done;
  assign wmem_rd_tile_o  = cur_tile;
  assign retire_o.valid  = done;
  assign retire_o.seq    = cur_seq;
  assign busy_o          = cmd_i.valid || count_q != '0;

  logic [PtrW-1:0] head_next, tail_next;  // the ring's next positions
  assign head_next = (32'(head_q) + 1 == Depth) ? '0 : head_q + PtrW'(1);
  assign tail_next = (32'(tail_q) + 1 == Depth) ? '0 : tail_q + PtrW'(1);

  // A tile is an N*N*8-bit vector: from N = 32 its '0 reset exceeds the
  // 8k-bit replication that WIDTHCONCAT takes for a likely mistake.
  /* verilator lint_off WIDTHCONCAT */
  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      head_q <= '0;
      tail_q <= '0;
      count_q <= '0;
      last_q <= '0;
      for (int e = 0; e < Depth; e++) begin
        seq_q[e] <= '0;
        tile_q[e] <= '0;
        at_q[e] <= '0;
      end
      tile_push_valid_o <= 1'b0;
      tile_push_data_o <= '0;
    end else begin
      tile_push_valid_o <= done;
      if (done) tile_push_data_o <= wmem_rd_data_i;
      if (cmd_i.valid) last_q <= arrive;
      if (push) begin
        seq_q[tail_q] <= cmd_i.seq;
        tile_q[tail_q] <= cmd_i.op0;
        at_q[tail_q] <= arrive;
        tail_q <= tail_next;
      end
      if (pop) head_q <= head_next;
      count_q <= count_q + (PtrW + 1)'(push) - (PtrW + 1)'(pop);
    end
  end
  /* verilator lint_on WIDTHCONCAT */

`ifndef SYNTHESIS
  // The controller's FIFO rule keeps at most FifoDepth requests outstanding.
  always_ff @(posedge clk_i)
    if (rst_ni && push)
      assert (32'(count_q) - 32'(pop) < Depth)
        else $error("tpu_weight_dma: more than %0d outstanding requests", Depth);
`endif

endmodule
