// tpu_weight_dma: executes RW over the weight memory, a pipelined channel: a
// request's latency (Lw) overlaps the transfers ahead of it, and the channel
// streams one N x N tile at a time, Bw bytes per cycle, so a tile started at s
// arrives at a = max(s + Lw, previous arrival + 1) + T - 1 with
// T = ceil(N*N / Bw) (docs/microarchitecture.md, "Weight DMA"), and is pushed
// at d = max(a, previous push + 1). Lw and Bw are inputs held for the whole
// run (the testbench's configuration), not build parameters. Mirrors
// src/model/weight_dma.cpp with the default weight memory target.
//
// The tile streams in rows of N bytes. Row r is complete in the cycle its last
// byte streams, cycle ceil((r + 1) * N / Bw) - 1 of the stream, and the last
// row in a itself. In each cycle of the stream the DMA reads the rows
// completed in it from weight memory (the testbench's port, up to
// WeightRowsPerCycle rows, so Bw may be up to WeightRowsPerCycle * N) and
// passes them to the weight FIFO's memory in the array, which writes them at
// the end of the cycle into the request's slot (fifo_wr_pos_o: the request's
// place among those in flight, oldest 0). In d the tile is complete
// (tile_done_o: the FIFO holds it from d + 1) and the RW retires. A byte count
// finds the rows without a division: the bytes of the next row streamed so
// far, plus Bw per cycle; every N of them complete a row.
//
// RWU (ub_weight_path; docs/microarchitecture.md, "Attention's second
// operand") takes its tile from `rows` UB rows instead, through the DMA's
// own UB read port: row r at s + r, written at the end of the cycle into
// the request's slot (rwu_wr_*: row r of the tile, or with .T lane r of
// every row; the first write also zeroes the rest of the slot). It is
// complete after its last read and pushed at d = max(s + rows, previous
// push + 1), in order with the RWs; the controller gives the DMA its next
// instruction only after the last read (occupancy rows), so one RWU reads at
// a time. An RW behind an RWU streams as soon as the channel lets it, and
// its tile waits in its slot for its turn.
//
// Up to FifoDepth requests are outstanding (the controller's FIFO rule), each
// with a FIFO memory slot of its own (tpu_systolic_array). Each counts its
// latency down from its start; the oldest RW not yet streamed streams once its
// latency has passed and the channel is free, which is max(s + Lw, previous
// arrival + 1).
//
// An RW is in flight from its issue to its completion d: the controller asks
// whether an RW of a tile is (query_tile_i, query_hit_o: a command arriving
// now or a queued request), for an HWT into that tile (a WAR: the HWT waits).
module tpu_weight_dma
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                                   clk_i,
  input  logic                                   rst_ni,
  // The cycle number, for the assertions' messages only.
  /* verilator lint_off UNUSEDSIGNAL */
  input  logic [CycleW-1:0]                      cycle_i,
  // An RW uses the command's valid, seq, opcode and op0 (the tile); an RWU
  // its op0 (UB row), op1 (rows) and flags (.T).
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
  // The same rows to the weight FIFO's memory (tpu_systolic_array), into
  // the slot of the request at place fifo_wr_pos_o, and the completion of
  // the oldest request's tile.
  output logic                                   fifo_wr_valid_o,
  output logic [$clog2(FifoDepth+1)-1:0]         fifo_wr_pos_o,
  output logic [$clog2(ArrayN)-1:0]              fifo_wr_row_o,
  output logic [$clog2(WeightRowsPerCycle+1)-1:0] fifo_wr_count_o,
  output logic [WeightRowsPerCycle*ArrayN*8-1:0] fifo_wr_data_o,
  output logic                                   tile_done_o,
  // An RWU's UB read port, and its row to the FIFO memory: UB row r of the
  // tile (rwu_wr_index_o) into the slot of the request at place
  // rwu_wr_pos_o, as tile row r or, transposed, as lane r of every row;
  // rwu_wr_first_o zeroes the rest of the slot.
  output logic [31:0]                            ub_rd_row_o,
  input  logic [ArrayN*8-1:0]                    ub_rd_data_i,
  output logic                                   rwu_wr_valid_o,
  output logic [$clog2(FifoDepth+1)-1:0]         rwu_wr_pos_o,
  output logic [$clog2(ArrayN)-1:0]              rwu_wr_index_o,
  output logic                                   rwu_wr_first_o,
  output logic                                   rwu_wr_transpose_o,
  output logic [ArrayN*8-1:0]                    rwu_wr_data_o,
  // Whether an RW of tile query_tile_i is in flight here (arriving or queued).
  input  logic [31:0]                            query_tile_i,
  output logic                                   query_hit_o,
  output retire_t                                retire_o,
  // The instruction retiring is an RWU (the controller frees its entry).
  output logic                                   rwu_retire_o,
  output logic                                   busy_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned Rows = WeightRowsPerCycle;
  localparam int unsigned Depth = FifoDepth;
  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1;
  localparam int unsigned PosW = $clog2(Depth + 1);
  localparam int unsigned RowW = $clog2(N);
  localparam int unsigned CountW = $clog2(Rows + 1);
  // The bytes of the next row so far (< N) plus one cycle's (Bw <= Rows * N).
  localparam int unsigned ByteW = $clog2((Rows + 1) * N);

  // Outstanding requests, oldest first: their sequence numbers, tiles, the
  // cycles of latency each has still to wait, whether it is an RWU, and
  // whether its tile is complete in its slot (an RW's streamed, an RWU's
  // rows read) and waits for its turn to be pushed.
  logic [31:0]      seq_q  [Depth];
  logic [31:0]      tile_q [Depth];
  logic [31:0]      wait_q [Depth];
  logic [Depth-1:0] rwu_q, ready_q;
  logic [PtrW-1:0]  head_q, tail_q;
  logic [PtrW:0]    count_q;
  // The channel: a tile part-way through its stream, the rows of it complete
  // and the bytes of its next row streamed so far.
  logic             streaming_q;
  logic [RowW-1:0]  row_q;
  logic [ByteW-1:0] part_q;
  // The RWU reading its rows: its place in the ring, UB row, rows, .T and
  // the next row.
  logic             rwu_active_q;
  logic [PtrW-1:0]  rwu_e_q;
  logic [31:0]      rwu_ub_q;
  logic [RowW:0]    rwu_rows_q, rwu_row_q;
  logic             rwu_t_q;

  // The ring index of the k-th oldest request.
  function automatic logic [PtrW-1:0] ring(logic [PtrW-1:0] base, int unsigned k);
    logic [31:0] e;
    e = 32'(base) + k;
    if (e >= Depth) e = e - Depth;
    ring = e[PtrW-1:0];
  endfunction

  logic cmd_rw, cmd_rwu;
  assign cmd_rw  = cmd_i.valid && cmd_i.opcode == OpRw;
  assign cmd_rwu = cmd_i.valid && cmd_i.opcode == OpRwu;

  // The channel's request: the oldest queued RW not streamed yet, else an
  // RW arriving now (with Lw = 0 it streams in its first cycle, and with
  // T = 1 completes in it). A tile streaming is that queued RW.
  logic             chan_queued, chan_has;
  logic [PtrW-1:0]  chan_e;
  logic [PosW-1:0]  chan_pos;
  logic [31:0]      cur_tile;
  logic [31:0]      cur_wait;
  always_comb begin
    chan_queued = 1'b0;
    chan_e = '0;
    chan_pos = PosW'(count_q);
    for (int unsigned k = 0; k < Depth; k++) begin
      logic [PtrW-1:0] e;
      e = ring(head_q, k);
      if (!chan_queued && k < 32'(count_q) && !rwu_q[e] && !ready_q[e]) begin
        chan_queued = 1'b1;
        chan_e = e;
        chan_pos = PosW'(k);
      end
    end
  end
  assign chan_has = chan_queued || cmd_rw;
  assign cur_tile = chan_queued ? tile_q[chan_e] : cmd_i.op0;
  assign cur_wait = chan_queued ? wait_q[chan_e] : latency_i;

  // This cycle of the stream: Bw more bytes after fewer than N carried over;
  // each N of them complete a row, at most ceil(Bw / N) (or the N - first left
  // of the tile: Rows is the smaller). The last row completes when the rows
  // reach N, in cycle T - 1 of the stream, as N * N bytes have streamed.
  logic              stream, streamed;
  logic [RowW-1:0]   first;
  logic [ByteW-1:0]  bytes, rest;
  logic [CountW-1:0] completed, rows;
  assign stream = streaming_q || (chan_has && cur_wait == '0);
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
  assign streamed = stream && 32'(first) + 32'(completed) >= N;
  assign rows = !stream ? '0 : streamed ? CountW'(N - 32'(first)) : completed;

  // The RWU's read: the command's first row, then one a cycle.
  logic             rwu_reading, rwu_last, rwu_t;
  logic [PtrW-1:0]  rwu_e;
  logic [RowW:0]    rwu_row, rwu_rows;
  logic [31:0]      rwu_ub;
  logic [PosW-1:0]  rwu_pos;
  assign rwu_reading = cmd_rwu || rwu_active_q;
  assign rwu_e    = cmd_rwu ? tail_q : rwu_e_q;
  assign rwu_row  = cmd_rwu ? '0 : rwu_row_q;
  assign rwu_rows = cmd_rwu ? (RowW + 1)'(cmd_i.op1) : rwu_rows_q;
  assign rwu_ub   = cmd_rwu ? cmd_i.op0 : rwu_ub_q;
  assign rwu_t    = cmd_rwu ? cmd_i.flags[FlagRwuT] : rwu_t_q;
  assign rwu_last = rwu_reading && rwu_row + 1'b1 == rwu_rows;
  always_comb begin
    logic [31:0] p;
    p = 32'(rwu_e) + Depth - 32'(head_q);
    if (p >= Depth) p = p - Depth;
    rwu_pos = cmd_rwu ? PosW'(count_q) : PosW'(p);
  end

  // The oldest request is pushed when its tile is complete: one complete
  // earlier, or an RW whose stream ends now (one arriving now into an empty
  // queue never enters it). Enqueue every other command; dequeue the head
  // when it completes.
  logic head_done, cmd_done, done, push, pop;
  assign head_done = count_q != '0 &&
                     (ready_q[head_q] || (chan_queued && chan_e == head_q && streamed));
  assign cmd_done  = count_q == '0 && cmd_rw && streamed;
  assign done      = head_done || cmd_done;
  assign push      = cmd_i.valid && !cmd_done;
  assign pop       = head_done;

  assign wmem_rd_valid_o = rows != '0;
  assign wmem_rd_tile_o  = cur_tile;
  assign wmem_rd_row_o   = first;
  assign wmem_rd_count_o = rows;
  assign fifo_wr_valid_o = rows != '0;
  assign fifo_wr_pos_o   = chan_pos;
  assign fifo_wr_row_o   = first;
  assign fifo_wr_count_o = rows;
  assign fifo_wr_data_o  = wmem_rd_data_i;
  assign tile_done_o     = done;
  assign retire_o.valid  = done;
  assign retire_o.seq    = head_done ? seq_q[head_q] : cmd_i.seq;
  assign rwu_retire_o    = head_done && rwu_q[head_q];
  assign busy_o          = cmd_i.valid || count_q != '0;

  assign ub_rd_row_o        = rwu_ub + 32'(rwu_row);
  assign rwu_wr_valid_o     = rwu_reading;
  assign rwu_wr_pos_o       = rwu_pos;
  assign rwu_wr_index_o     = rwu_row[RowW-1:0];
  assign rwu_wr_first_o     = rwu_row == '0;
  assign rwu_wr_transpose_o = rwu_t;
  assign rwu_wr_data_o      = ub_rd_data_i;

  // The queued RWs are the count_q entries from head_q on, in the ring.
  always_comb begin
    query_hit_o = cmd_rw && cmd_i.op0 == query_tile_i;
    for (int unsigned k = 0; k < Depth; k++) begin
      logic [PtrW-1:0] e;
      e = ring(head_q, k);
      if (k < 32'(count_q) && !rwu_q[e] && tile_q[e] == query_tile_i) query_hit_o = 1'b1;
    end
  end

  logic [PtrW-1:0] head_next, tail_next;  // the ring's next positions
  assign head_next = ring(head_q, 1);
  assign tail_next = ring(tail_q, 1);

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
      rwu_q <= '0;
      ready_q <= '0;
      streaming_q <= 1'b0;
      row_q <= '0;
      part_q <= '0;
      rwu_active_q <= 1'b0;
      rwu_e_q <= '0;
      rwu_ub_q <= '0;
      rwu_rows_q <= '0;
      rwu_row_q <= '0;
      rwu_t_q <= 1'b0;
    end else begin
      // Every request's latency passes at once (the channel is pipelined).
      for (int e = 0; e < Depth; e++) begin
        if (push && tail_q == PtrW'(e)) begin
          seq_q[e] <= cmd_i.seq;
          tile_q[e] <= cmd_i.op0;
          wait_q[e] <= cmd_rwu || latency_i == '0 ? '0 : latency_i - 32'd1;
          rwu_q[e] <= cmd_rwu;
          // Complete already: an RWU of one row, an RW streamed whole now.
          ready_q[e] <= cmd_rwu ? rwu_last : (!chan_queued && streamed);
        end else begin
          if (wait_q[e] != '0) wait_q[e] <= wait_q[e] - 32'd1;
          if (chan_queued && streamed && chan_e == PtrW'(e)) ready_q[e] <= 1'b1;
          if (rwu_active_q && rwu_last && rwu_e_q == PtrW'(e)) ready_q[e] <= 1'b1;
        end
      end
      if (push) tail_q <= tail_next;
      if (pop) head_q <= head_next;
      count_q <= count_q + (PtrW + 1)'(push) - (PtrW + 1)'(pop);
      streaming_q <= stream && !streamed;
      if (stream) begin
        row_q <= first + RowW'(completed);
        part_q <= rest;
      end
      rwu_active_q <= rwu_reading && !rwu_last;
      if (rwu_reading) begin
        rwu_e_q <= rwu_e;
        rwu_ub_q <= rwu_ub;
        rwu_rows_q <= rwu_rows;
        rwu_row_q <= rwu_row + 1'b1;
        rwu_t_q <= rwu_t;
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
      assert (!streaming_q || chan_queued)
        else $error("tpu_weight_dma: streaming with no request at cycle %0d", cycle_i);
      // The controller's occupancy keeps an RWU's reads apart from the next
      // instruction; an RWU has 1 to N rows (the RTL engine refuses more).
      assert (!(cmd_i.valid && rwu_active_q))
        else $error("tpu_weight_dma: an instruction arrived while an RWU reads at cycle %0d",
                    cycle_i);
      assert (!cmd_rwu || (cmd_i.op1 != '0 && cmd_i.op1 <= N))
        else $error("tpu_weight_dma: RWU of %0d rows at cycle %0d", cmd_i.op1, cycle_i);
    end
  end
`endif

endmodule
