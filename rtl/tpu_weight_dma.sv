// tpu_weight_dma: executes RW over the weight memory, a pipelined channel: a
// request's latency (Lw) overlaps the transfers ahead of it, and the channel
// streams one N x N tile at a time, Bw bytes per cycle, so a tile started at s
// arrives at d = max(s + Lw, previous arrival + 1) + T - 1 with
// T = ceil(N*N / Bw) (docs/microarchitecture.md, "Weight DMA"). Lw and Bw are
// inputs held for the whole run (the testbench's configuration), not build
// parameters. Mirrors src/model/weight_dma.cpp with the default weight memory
// target.
//
// The tile streams in rows of N bytes. Row r is complete in the cycle its last
// byte streams, cycle ceil((r + 1) * N / Bw) - 1 of the stream, and the last
// row in d itself. In each cycle of the stream the DMA reads the rows
// completed in it from weight memory (the testbench's port, up to
// WeightRowsPerCycle rows, so Bw may be up to WeightRowsPerCycle * N) and
// passes them to the weight FIFO's memory in the array, which writes them at
// the end of the cycle; in d the tile is complete (tile_done_o: the FIFO holds
// it from d + 1) and the RW retires. A byte count finds the rows without a
// division: the bytes of the next row streamed so far, plus Bw per cycle;
// every N of them complete a row.
//
// Up to FifoDepth requests are outstanding (the controller's FIFO rule). Each
// counts its latency down from its start; the oldest streams once its latency
// has passed and the channel is free, which is max(s + Lw, previous d + 1).
//
// An RW is in flight from its issue to its completion d: the controller asks
// whether an RW of a tile is (query_tile_i, query_hit_o: a command arriving
// now or a queued request), for an HWT into that tile (a WAR: the HWT waits).
module tpu_weight_dma
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                                   clk_i,
  input  logic                                   rst_ni,
  // The cycle number, for the assertions' messages only.
  /* verilator lint_off UNUSEDSIGNAL */
  input  logic [CycleW-1:0]                      cycle_i,
  // An RW uses the command's valid, seq and op0 (the tile) only.
  input  unit_cmd_t                              cmd_i,
  /* verilator lint_on UNUSEDSIGNAL */
  // The weight channel's timing (Lw, Bw), constant while the core runs.
  input  logic [31:0]                            latency_i,
  input  logic [31:0]                            bytes_per_cycle_i,
  // Weight memory: rows first .. first + count - 1 of a tile, row first + i
  // in bits [i*N*8 +: N*8] of the data.
  output logic                                   wmem_rd_valid_o,
  output logic [31:0]                            wmem_rd_tile_o,
  output logic [$clog2(ArrayN)-1:0]              wmem_rd_row_o,
  output logic [$clog2(WeightRowsPerCycle+1)-1:0] wmem_rd_count_o,
  input  logic [WeightRowsPerCycle*ArrayN*8-1:0] wmem_rd_data_i,
  // The same rows to the weight FIFO's memory (tpu_systolic_array), and the
  // tile's completion.
  output logic                                   fifo_wr_valid_o,
  output logic [$clog2(ArrayN)-1:0]              fifo_wr_row_o,
  output logic [$clog2(WeightRowsPerCycle+1)-1:0] fifo_wr_count_o,
  output logic [WeightRowsPerCycle*ArrayN*8-1:0] fifo_wr_data_o,
  output logic                                   tile_done_o,
  // Whether an RW of tile query_tile_i is in flight here (arriving or queued).
  input  logic [31:0]                            query_tile_i,
  output logic                                   query_hit_o,
  output retire_t                                retire_o,
  output logic                                   busy_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned Rows = WeightRowsPerCycle;
  localparam int unsigned Depth = FifoDepth;
  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1;
  localparam int unsigned RowW = $clog2(N);
  localparam int unsigned CountW = $clog2(Rows + 1);
  // The bytes of the next row so far (< N) plus one cycle's (Bw <= Rows * N).
  localparam int unsigned ByteW = $clog2((Rows + 1) * N);

  // Outstanding requests, oldest first: their sequence numbers, tiles and the
  // cycles of latency each has still to wait.
  logic [31:0]      seq_q  [Depth];
  logic [31:0]      tile_q [Depth];
  logic [31:0]      wait_q [Depth];
  logic [PtrW-1:0]  head_q, tail_q;
  logic [PtrW:0]    count_q;
  // The channel: a tile part-way through its stream, the rows of it complete
  // and the bytes of its next row streamed so far.
  logic             streaming_q;
  logic [RowW-1:0]  row_q;
  logic [ByteW-1:0] part_q;

  // The oldest request: queued, or starting now into an empty queue (with
  // Lw = 0 it streams in its first cycle, and with T = 1 completes in it).
  logic             from_cmd, has_head;
  logic [31:0]      cur_seq, cur_tile;
  logic [31:0]      cur_wait;
  assign from_cmd = count_q == '0;
  assign has_head = from_cmd ? cmd_i.valid : 1'b1;
  assign cur_seq  = from_cmd ? cmd_i.seq : seq_q[head_q];
  assign cur_tile = from_cmd ? cmd_i.op0 : tile_q[head_q];
  assign cur_wait = from_cmd ? latency_i : wait_q[head_q];

  // This cycle of the stream: Bw more bytes after fewer than N carried over;
  // each N of them complete a row, at most ceil(Bw / N) (or the N - first left
  // of the tile: Rows is the smaller). The last row completes when the rows
  // reach N, in cycle T - 1 of the stream, as N * N bytes have streamed.
  logic              stream, done;
  logic [RowW-1:0]   first;
  logic [ByteW-1:0]  bytes, rest;
  logic [CountW-1:0] completed, rows;
  assign stream = streaming_q || (has_head && cur_wait == '0);
  assign first  = streaming_q ? row_q : '0;
  assign bytes  = (streaming_q ? part_q : '0) + ByteW'(bytes_per_cycle_i);
  always_comb begin
    completed = '0;
    rest = bytes;
    for (int unsigned k = 1; k <= Rows; k++) begin
      if (bytes >= ByteW'(k * N)) begin
        completed = CountW'(k);
        rest = bytes - ByteW'(k * N);
      end
    end
  end
  assign done = stream && 32'(first) + 32'(completed) >= N;
  assign rows = !stream ? '0 : done ? CountW'(N - 32'(first)) : completed;

  // Enqueue a new request unless it completes now from an empty queue;
  // dequeue the head when it completes.
  logic push, pop;
  assign push = cmd_i.valid && !(from_cmd && done);
  assign pop  = done && !from_cmd;

  assign wmem_rd_valid_o = rows != '0;
  assign wmem_rd_tile_o  = cur_tile;
  assign wmem_rd_row_o   = first;
  assign wmem_rd_count_o = rows;
  assign fifo_wr_valid_o = rows != '0;
  assign fifo_wr_row_o   = first;
  assign fifo_wr_count_o = rows;
  assign fifo_wr_data_o  = wmem_rd_data_i;
  assign tile_done_o     = done;
  assign retire_o.valid  = done;
  assign retire_o.seq    = cur_seq;
  assign busy_o          = cmd_i.valid || count_q != '0;

  // The queued requests are the count_q entries from head_q on, in the ring.
  always_comb begin
    query_hit_o = cmd_i.valid && cmd_i.op0 == query_tile_i;
    for (int unsigned k = 0; k < Depth; k++) begin
      logic [31:0] e;
      e = 32'(head_q) + k;
      if (e >= Depth) e = e - Depth;
      if (k < 32'(count_q) && tile_q[e[PtrW-1:0]] == query_tile_i) query_hit_o = 1'b1;
    end
  end

  logic [PtrW-1:0] head_next, tail_next;  // the ring's next positions
  assign head_next = (32'(head_q) + 1 == Depth) ? '0 : head_q + PtrW'(1);
  assign tail_next = (32'(tail_q) + 1 == Depth) ? '0 : tail_q + PtrW'(1);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      head_q <= '0;
      tail_q <= '0;
      count_q <= '0;
      for (int e = 0; e < Depth; e++) begin
        seq_q[e] <= '0;
        tile_q[e] <= '0;
        wait_q[e] <= '0;
      end
      streaming_q <= 1'b0;
      row_q <= '0;
      part_q <= '0;
    end else begin
      // Every request's latency passes at once (the channel is pipelined).
      for (int e = 0; e < Depth; e++) begin
        if (push && tail_q == PtrW'(e)) begin
          seq_q[e] <= cmd_i.seq;
          tile_q[e] <= cmd_i.op0;
          wait_q[e] <= latency_i == '0 ? '0 : latency_i - 32'd1;
        end else if (wait_q[e] != '0) begin
          wait_q[e] <= wait_q[e] - 32'd1;
        end
      end
      if (push) tail_q <= tail_next;
      if (pop) head_q <= head_next;
      count_q <= count_q + (PtrW + 1)'(push) - (PtrW + 1)'(pop);
      streaming_q <= stream && !done;
      if (stream) begin
        row_q <= first + RowW'(completed);
        part_q <= rest;
      end
    end
  end

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      // The testbench keeps Bw within the port's rows (rtl::unavailable).
      assert (bytes_per_cycle_i != '0 && bytes_per_cycle_i <= Rows * N)
        else $error("tpu_weight_dma: weight_bytes_per_cycle %0d outside 1..%0d at cycle %0d",
                    bytes_per_cycle_i, Rows * N, cycle_i);
      // The controller's FIFO rule keeps at most FifoDepth requests outstanding.
      assert (!push || 32'(count_q) - 32'(pop) < Depth)
        else $error("tpu_weight_dma: more than %0d outstanding requests at cycle %0d", Depth,
                    cycle_i);
      // A tile part-way through its stream is a queued request.
      assert (!streaming_q || count_q != '0)
        else $error("tpu_weight_dma: streaming with no request at cycle %0d", cycle_i);
    end
  end
`endif

endmodule
