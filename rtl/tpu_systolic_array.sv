// tpu_systolic_array: the matrix unit. An N x N weight-stationary array of
// int8 MACs with int32 partial sums (tpu_pe, N rows of tpu_systolic_row), the
// weight FIFO that feeds it, and two weight register sets per PE (active and
// shadow). Executes MMC (docs/microarchitecture.md, "Weight buffers" and
// "Systolic array"). Mirrors src/model/systolic_array.cpp.
//
// Row i of an MMC started at s: UB row read at u = s + i and registered in
// the lane register; x[k] enters PE (k, 0) at u + 1 + k (the input skew,
// stage by stage down the rows); PE (k, j) works at u + 1 + k + j; column j's
// sum leaves PE (N - 1, j) at u + N + j and is written to the accumulators at
// u + N + j + 1. The row's metadata (ACC row, .O, sequence number) moves down
// the rows with it and then along the output de-skew register, one column per
// cycle, so each column's write port finds its row beside its sum.
//
// Weights. The weight FIFO is a memory of tile rows (N bytes each) in
// FifoDepth + 1 tile slots used as a ring. The weight DMA writes a tile's
// rows into the slot after the FIFO's last tile as they stream in (up to
// WeightRowsPerCycle a cycle) and reports the tile complete in its arrival
// cycle; the FIFO counts it from the next. A tile leaves the FIFO at L, and
// its slot feeds tile rows N - 1, N - 2, ..., 0 to PE row 0 in cycles
// L .. L + N - 1, one row read per cycle; they shift down the columns through
// the shadow registers, PE row k shifting from L + k (a wave down the rows)
// to L + N - 1 (tpu_systolic_row). The extra slot is the tile being loaded:
// it has left the FIFO, so by the controller's FIFO rule (tiles in the FIFO
// plus RWs in flight at most FifoDepth) an RW may issue from L + 1 and stream
// rows into the room it left before L + N - 1. With FifoDepth + 1 slots they
// land in a slot that holds no tile and is not being read (the assertions
// check it); the next load starts only after this one. The
// shadow set is free for a load once N + 1 cycles have passed since the last
// row using it was read: a down-counter per set, restarted by every row read
// with that set, stands for that bound.
//
// An MMC starts in the cycle its command arrives (issue + 1); an MMC.S
// only once the shadow has held its tile for a cycle (the loaded state is
// registered): until then it waits in a one-command register while the
// controller goes on with other units' instructions. ready_o tells the
// controller the unit can take the next MMC: nothing waits, and the job
// reads its last row this cycle or earlier. start_o reports the cycle a job
// starts in (the lock-step records' start), retire_o its completion, from
// which the controller frees the MMC's scoreboard entry.
//
// MMC.C (convolution) changes only which row enters the array at u: row i is
// output pixel (oy, ox) = (i / out_w, i % out_w), which reads UB row
// ub_row + iy * in_w + ix for its input pixel (iy, ix) = (y0 + oy * stride_y,
// x0 + ox * stride_x) inside the in_h x in_w map, and a padding row (every
// lane `pad`, no UB access) outside it: the model's input_row and
// isa::ConvGeometry::input_row. The geometry comes with the command (the
// controller's registers at issue); counters follow (oy, ox) row by row.
module tpu_systolic_array
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                        clk_i,
  input  logic                        rst_ni,
  // The cycle number, for the assertions' messages only.
  /* verilator lint_off UNUSEDSIGNAL */
  input  logic [CycleW-1:0]           cycle_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  unit_cmd_t                   cmd_i,
  output logic                        ready_o,
  // The weight DMA's rows (first .. first + count - 1 of the tile streaming
  // in, row first + i in bits [i*N*8 +: N*8]) into the slot of its request
  // at place fifo_wr_pos_i among those in flight (0: the oldest, whose slot
  // is the one after the FIFO's last tile), and its oldest tile's
  // completion.
  input  logic                        fifo_wr_valid_i,
  input  logic [$clog2(FifoDepth+1)-1:0] fifo_wr_pos_i,
  input  logic [$clog2(ArrayN)-1:0]   fifo_wr_row_i,
  input  logic [$clog2(WeightRowsPerCycle+1)-1:0] fifo_wr_count_i,
  input  logic [WeightRowsPerCycle*ArrayN*8-1:0]  fifo_wr_data_i,
  input  logic                        tile_done_i,
  // An RWU's UB row r (rwu_wr_index_i) into the slot of its request at
  // place rwu_wr_pos_i: tile row r, or with rwu_wr_transpose_i lane r of
  // every tile row; rwu_wr_first_i zeroes the rest of the slot.
  input  logic                        rwu_wr_valid_i,
  input  logic [$clog2(FifoDepth+1)-1:0] rwu_wr_pos_i,
  input  logic [$clog2(ArrayN)-1:0]   rwu_wr_index_i,
  input  logic                        rwu_wr_first_i,
  input  logic                        rwu_wr_transpose_i,
  input  logic [ArrayN*8-1:0]         rwu_wr_data_i,
  output logic [31:0]                 tiles_popped_o,
  output logic [31:0]                 tiles_loaded_o,
  // Unified buffer read port.
  output logic [31:0]                 ub_rd_row_o,
  input  logic [ArrayN*8-1:0]         ub_rd_data_i,
  // Accumulator write ports, one per column: ACC[row][j] (+)= data.
  output logic [ArrayN-1:0]           acc_wr_valid_o,
  output logic [ArrayN-1:0]           acc_wr_overwrite_o,
  output logic [ArrayN*32-1:0]        acc_wr_row_o,
  output logic [ArrayN*32-1:0]        acc_wr_data_o,
  output logic                        row_valid_o,
  output retire_t                     start_o,
  output retire_t                     retire_o,
  output logic                        busy_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned RowBits = N * 8;       // a UB row, a tile row
  localparam int unsigned WrRows = WeightRowsPerCycle;
  localparam int unsigned WrCountW = $clog2(WrRows + 1);
  // The FIFO memory: FifoDepth slots for the FIFO's tiles and the RWs in
  // flight, one for the tile being loaded into the shadow.
  localparam int unsigned FifoRows = (FifoDepth + 1) * N;
  localparam int unsigned FifoAddrW = $clog2(FifoRows);
  localparam int unsigned MetaW = ArrayRowBits;  // array_row_t
  localparam int unsigned DrainW = $clog2(N + 1);
  localparam int unsigned LoadW = $clog2(N);
  localparam int unsigned InFlightW = $clog2(2 * N + 2);
  localparam logic [1:0] ShadowFree = 2'd0, ShadowLoading = 2'd1, ShadowLoaded = 2'd2;

  // ---- Weight FIFO memory, shadow state ---------------------------------------------
  // Slots are addressed by their first row (0, N, 2N, ...): the FIFO's oldest
  // tile (head) and the slot of the tile streaming in (tail).
  logic [RowBits-1:0]  fifo_mem [FifoRows];
  logic [$clog2(FifoDepth+1)-1:0] fifo_count_q;
  logic [FifoAddrW-1:0] fifo_head_q, fifo_tail_q;
  logic [FifoAddrW-1:0] load_addr_q;   // the next tile row a load reads
  logic                active_q;
  logic [1:0]          shadow_q;
  logic [LoadW-1:0]    load_row_q;     // the tile rows shifted so far in a load
  // Per weight set: cycles until no row in the array uses it any more.
  logic [DrainW-1:0]   drain_q [2];
  logic [31:0]         popped_q, loaded_q;

  // ---- The MMC waiting for its weights, the one whose rows are being read ---------
  unit_cmd_t           pending_q;      // valid: an MMC.S waits
  logic                loaded_seen_q;  // the shadow was loaded at the start of the last cycle
  unit_cmd_t           job_q;
  logic                reading_q;
  logic [31:0]         row_q;
  logic [InFlightW-1:0] in_flight_q;  // rows read and not yet written out

  // ---- Command, FIFO, loader ---------------------------------------------------------
  logic              switch_now, pop_now, load_done;
  logic              active_d;
  logic [1:0]        shadow_after_switch;

  // The command that may start now: one arriving, or the one waiting (never
  // both: the controller sends the next MMC only when ready_o).
  unit_cmd_t cand;
  logic      start_now;
  assign cand       = cmd_i.valid ? cmd_i : pending_q;
  assign start_now  = cand.valid && (!cand.flags[FlagMmcS] || loaded_seen_q);
  assign switch_now = start_now && cand.flags[FlagMmcS];
  assign active_d   = switch_now ? !active_q : active_q;
  // A switch frees the shadow; the set it frees is the one that was active.
  assign shadow_after_switch = switch_now ? ShadowFree : shadow_q;
  assign load_done  = shadow_after_switch == ShadowLoading && load_row_q == LoadW'(N - 1);
  // The shadow set (!active_d) takes a tile once its last row has left (its
  // drain count is 0). A tile the DMA completed in the previous cycle is
  // counted already.
  assign pop_now    = shadow_after_switch == ShadowFree && drain_q[!active_d] == '0 &&
                      fifo_count_q != 0;

  // The tile row entering PE row 0's shadow registers this cycle, read
  // combinationally (the pop is decided in the cycle it happens): the head
  // tile's row N - 1 at L, then one row lower per cycle.
  logic [FifoAddrW-1:0] load_addr;
  logic [RowBits-1:0]   shift_row;
  assign load_addr = pop_now ? fifo_head_q + FifoAddrW'(N - 1) : load_addr_q;
  assign shift_row = fifo_mem[load_addr];

  // The slot after a slot (their first rows) in the ring.
  function automatic logic [FifoAddrW-1:0] next_slot(logic [FifoAddrW-1:0] slot);
    next_slot = (32'(slot) + N == FifoRows) ? '0 : slot + FifoAddrW'(N);
  endfunction
  // The slot `pos` slots after a slot (pos < FifoDepth), by steps: no
  // multiplier.
  function automatic logic [FifoAddrW-1:0] slot_after(logic [FifoAddrW-1:0] slot, logic [31:0] pos);
    logic [FifoAddrW-1:0] a;
    a = slot;
    for (int unsigned k = 0; k + 1 < FifoDepth; k++)
      if (k < pos) a = next_slot(a);
    slot_after = a;
  endfunction
  // The slots the weight DMA's request streaming in and an RWU write.
  logic [FifoAddrW-1:0] wr_slot, rwu_slot;
  assign wr_slot  = slot_after(fifo_tail_q, 32'(fifo_wr_pos_i));
  assign rwu_slot = slot_after(fifo_tail_q, 32'(rwu_wr_pos_i));

  // ---- Row read ----------------------------------------------------------------------
  unit_cmd_t   job;
  logic        reading;
  logic [31:0] row;
  assign job     = start_now ? cand : job_q;
  assign reading = start_now || reading_q;
  assign row     = start_now ? '0 : row_q;
  // The next MMC may arrive next cycle: none waits, and no row after this
  // cycle's is left to read.
  assign ready_o = !(cand.valid && !start_now) && (!reading || row + 1 >= job.op2);
  always_comb begin
    start_o = '0;
    start_o.valid = start_now;
    start_o.seq = cand.seq;
  end

  // ---- Convolution address generator (MMC.C) ---------------------------------------
  // No divider: ox counts 0 .. out_w - 1 and wraps; ix = x0 + ox * stride_x
  // advances by stride_x and returns to x0 on a wrap, where iy = y0 +
  // oy * stride_y advances by stride_y (signed, MapYW and MapXW bits wide:
  // tpu_core_pkg). A command starts them at (y0, x0). The UB row offset of an
  // inside pixel is iy * in_w + ix (map_row_offset).
  localparam int unsigned IyW = MapYW, IxW = MapXW;
  logic [15:0]    ox_q, ox;
  logic [IyW-1:0] iy_q, iy;  // two's complement
  logic [IxW-1:0] ix_q, ix;
  logic [IyW-1:0] y0, stride_y;
  logic [IxW-1:0] x0, stride_x;
  logic           conv, line_end, in_map;
  logic [31:0]    offset;
  logic [N*8-1:0] x_row;
  assign y0       = {{(IyW - 16){job.conv_y0[15]}}, job.conv_y0};
  assign x0       = {{(IxW - 16){job.conv_x0[15]}}, job.conv_x0};
  assign stride_y = {{(IyW - 8){1'b0}}, job.conv_stride_y};
  assign stride_x = {{(IxW - 8){1'b0}}, job.conv_stride_x};
  assign ox       = start_now ? '0 : ox_q;
  assign iy       = start_now ? y0 : iy_q;
  assign ix       = start_now ? x0 : ix_q;
  assign conv     = job.flags[FlagMmcC];
  assign line_end = ox + 16'd1 == job.conv_out_w;
  assign in_map   = map_inside(iy, ix, job.conv_in_h, job.conv_in_w);
  assign offset   = !conv ? row : map_row_offset(in_map, iy[15:0], ix[15:0], job.conv_in_w);
  // A padding row reads nothing; its port address stays on the map's first
  // row, inside the UB.
  assign x_row    = conv && !in_map ? {N{job.conv_pad}} : ub_rd_data_i;
  assign ub_rd_row_o = job.op0 + offset;
  assign row_valid_o = reading;

  // The row read this cycle, beside its data (all zero when none is read).
  array_row_t read_row;
  always_comb begin
    read_row = '0;
    if (reading) begin
      read_row.valid = 1'b1;
      read_row.overwrite = job.flags[FlagMmcO];
      read_row.weight_set = active_d;
      read_row.last = row + 1 == job.op2;
      read_row.seq = job.seq;
      read_row.acc_row = job.op1 + row;
    end
  end

  // ---- The grid: lane register, N PE rows, output de-skew --------------------------
  // Between rows: entry k of each chain is row k's input, entry k + 1 its
  // output (entry 0 from the lane register and the loader, entry N the
  // bottom edge).
  logic [RowBits-1:0]        lanes_q;
  array_row_t                lane_row_q;
  logic [(N+1)*RowBits-1:0]  lanes_chain;
  logic [(N+1)*MetaW-1:0]    row_chain;
  logic [(N+1)*N*32-1:0]     psum_chain;
  logic [(N+1)*RowBits-1:0]  w_chain;
  logic [N:0]                wave_chain;

  assign lanes_chain[RowBits-1:0] = lanes_q;
  assign row_chain[MetaW-1:0] = lane_row_q;
  assign psum_chain[N*32-1:0] = '0;
  assign w_chain[RowBits-1:0] = shift_row;
  assign wave_chain[0] = pop_now;

  for (genvar k = 0; k < N; k++) begin : g_row
    tpu_systolic_row pe_row (
      .clk_i, .rst_ni,
      .lanes_i(lanes_chain[k*RowBits +: RowBits]), .row_i(row_chain[k*MetaW +: MetaW]),
      .lanes_o(lanes_chain[(k+1)*RowBits +: RowBits]), .row_o(row_chain[(k+1)*MetaW +: MetaW]),
      .psum_i(psum_chain[k*N*32 +: N*32]), .psum_o(psum_chain[(k+1)*N*32 +: N*32]),
      .wave_i(wave_chain[k]), .shift_done_i(load_done), .shift_set_i(!active_d),
      .w_i(w_chain[k*RowBits +: RowBits]), .w_o(w_chain[(k+1)*RowBits +: RowBits]),
      .wave_o(wave_chain[k+1])
    );
  end

  // Output de-skew: column j's row is the bottom row's output delayed j
  // cycles, col_rows[j * MetaW +: MetaW].
  logic [N*MetaW-1:0]      col_rows;
  logic [(N-1)*MetaW-1:0]  deskew_q;
  assign col_rows = {deskew_q, row_chain[N*MetaW +: MetaW]};

  // Yosys reads struct members only of module-level scalars: the loop copies
  // each column's row to this temporary (whose weight set is spent).
  /* verilator lint_off UNUSEDSIGNAL */
  array_row_t col_row;
  /* verilator lint_on UNUSEDSIGNAL */
  always_comb begin
    acc_wr_valid_o = '0;
    acc_wr_overwrite_o = '0;
    acc_wr_row_o = '0;
    retire_o = '0;
    col_row = '0;
    for (int unsigned j = 0; j < N; j++) begin
      col_row = col_rows[j*MetaW +: MetaW];
      acc_wr_valid_o[j] = col_row.valid;
      acc_wr_overwrite_o[j] = col_row.overwrite;
      acc_wr_row_o[32*j +: 32] = col_row.acc_row;
      if (j == N - 1 && col_row.valid && col_row.last) begin
        retire_o.valid = 1'b1;
        retire_o.seq = col_row.seq;
      end
    end
  end
  assign acc_wr_data_o = psum_chain[N*N*32 +: N*32];

  // Busy while a row is read or still in the array (read in the last 2N cycles).
  logic row_out;
  assign row_out = col_rows[(N-1)*MetaW + MetaW - 1];  // the last column's valid
  assign busy_o = reading || in_flight_q != '0;

  // ---- State --------------------------------------------------------------------------------
  // The FIFO memory has no reset, like a RAM: a load reads only rows of a
  // complete tile.
  always_ff @(posedge clk_i) begin
    for (int unsigned i = 0; i < WrRows; i++) begin
      if (fifo_wr_valid_i && WrCountW'(i) < fifo_wr_count_i)
        fifo_mem[wr_slot + FifoAddrW'(fifo_wr_row_i) + FifoAddrW'(i)] <=
            fifo_wr_data_i[i*RowBits +: RowBits];
    end
    if (rwu_wr_valid_i) begin
      for (int unsigned k = 0; k < N; k++) begin
        if (!rwu_wr_transpose_i) begin
          if (k == 32'(rwu_wr_index_i)) fifo_mem[rwu_slot + FifoAddrW'(k)] <= rwu_wr_data_i;
          else if (rwu_wr_first_i) fifo_mem[rwu_slot + FifoAddrW'(k)] <= '0;
        end else if (rwu_wr_first_i) begin
          fifo_mem[rwu_slot + FifoAddrW'(k)] <= RowBits'(rwu_wr_data_i[k*8 +: 8]);
        end else begin
          fifo_mem[rwu_slot + FifoAddrW'(k)][{rwu_wr_index_i, 3'b000} +: 8] <= rwu_wr_data_i[k*8 +: 8];
        end
      end
    end
  end

  // The output de-skew register is (N - 1) * ArrayRowBits wide by design:
  // from N = 128 its '0 reset exceeds the 8k-bit replication that
  // WIDTHCONCAT takes for a likely mistake.
  /* verilator lint_off WIDTHCONCAT */
  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      fifo_count_q <= '0;
      fifo_head_q <= '0;
      fifo_tail_q <= '0;
      load_addr_q <= '0;
      active_q <= 1'b0;
      shadow_q <= ShadowFree;
      load_row_q <= '0;
      drain_q[0] <= '0;
      drain_q[1] <= '0;
      popped_q <= '0;
      loaded_q <= '0;
      pending_q <= '0;
      loaded_seen_q <= 1'b0;
      job_q <= '0;
      reading_q <= 1'b0;
      row_q <= '0;
      in_flight_q <= '0;
      ox_q <= '0;
      iy_q <= '0;
      ix_q <= '0;
      lanes_q <= '0;
      lane_row_q <= '0;
      deskew_q <= '0;
    end else begin
      // FIFO: a completed tile joins at the tail, a load takes the head and
      // reads its slot's rows downwards.
      if (tile_done_i) fifo_tail_q <= next_slot(fifo_tail_q);
      if (pop_now) begin
        fifo_head_q <= next_slot(fifo_head_q);
        popped_q <= popped_q + 1;
      end
      fifo_count_q <= fifo_count_q + (tile_done_i ? 1 : 0) - (pop_now ? 1 : 0);
      if (pop_now) load_addr_q <= load_addr - FifoAddrW'(1);
      else if (shadow_q == ShadowLoading && !load_done) load_addr_q <= load_addr_q - FifoAddrW'(1);

      // Shadow state: free -> loading (N cycles) -> loaded -> (switch) free.
      active_q <= active_d;
      if (load_done) begin
        loaded_q <= loaded_q + 1;
        shadow_q <= ShadowLoaded;
      end else if (pop_now) begin
        shadow_q <= ShadowLoading;
      end else begin
        shadow_q <= shadow_after_switch;
      end
      load_row_q <= pop_now ? LoadW'(1) : load_row_q + LoadW'(1);

      // A row read with a set keeps it busy for N + 1 more cycles.
      for (int s = 0; s < 2; s++) begin
        if (reading && active_d == s[0]) drain_q[s] <= DrainW'(N);
        else if (drain_q[s] != '0) drain_q[s] <= drain_q[s] - DrainW'(1);
      end

      // A command that cannot start waits; a waiting one leaves when it starts.
      if (start_now) pending_q.valid <= 1'b0;
      else if (cmd_i.valid) pending_q <= cmd_i;
      loaded_seen_q <= shadow_q == ShadowLoaded && !switch_now;

      // Row read.
      job_q <= job;
      reading_q <= reading && row + 1 != job.op2;
      row_q <= reading ? row + 1 : row;
      if (reading) begin
        ox_q <= line_end ? '0 : ox + 16'd1;
        iy_q <= line_end ? iy + stride_y : iy;
        ix_q <= line_end ? x0 : ix + stride_x;
      end
      lanes_q <= reading ? x_row : '0;
      lane_row_q <= read_row;
      in_flight_q <= in_flight_q + InFlightW'(reading) - InFlightW'(row_out);

      deskew_q <= col_rows[(N-1)*MetaW-1:0];
    end
  end
  /* verilator lint_on WIDTHCONCAT */

  assign tiles_popped_o = popped_q;
  assign tiles_loaded_o = loaded_q;

  // The bottom edge's lanes, weights and wave leave the grid unused (all zero
  // or the shadow's last row).
  /* verilator lint_off UNUSEDSIGNAL */
  logic [2*RowBits:0] past_bottom;
  assign past_bottom = {lanes_chain[N*RowBits +: RowBits], w_chain[N*RowBits +: RowBits],
                        wave_chain[N]};
  /* verilator lint_on UNUSEDSIGNAL */

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(tile_done_i && fifo_count_q == FifoDepth[$bits(fifo_count_q)-1:0] && !pop_now))
        else $error("weight FIFO overflow at cycle %0d", cycle_i);
      // The rows streaming in land in a free slot: the FIFO has room for
      // their tile (it is an RW or RWU in flight, the pos-th), so its slot
      // holds no tile of it, and the slot being loaded is the one before
      // the head.
      assert (!(fifo_wr_valid_i &&
                32'(fifo_count_q) + 32'(fifo_wr_pos_i) >= FifoDepth))
        else $error("weight FIFO: rows stream into a full FIFO at cycle %0d", cycle_i);
      assert (!(fifo_wr_valid_i && shadow_q == ShadowLoading &&
                next_slot(wr_slot) == fifo_head_q))
        else $error("weight FIFO: rows stream into the slot being loaded at cycle %0d", cycle_i);
      assert (!(rwu_wr_valid_i &&
                32'(fifo_count_q) + 32'(rwu_wr_pos_i) >= FifoDepth))
        else $error("weight FIFO: an RWU writes into a full FIFO at cycle %0d", cycle_i);
      assert (!(rwu_wr_valid_i && shadow_q == ShadowLoading &&
                next_slot(rwu_slot) == fifo_head_q))
        else $error("weight FIFO: an RWU writes into the slot being loaded at cycle %0d", cycle_i);
      assert (!(fifo_wr_valid_i && 32'(fifo_wr_row_i) + 32'(fifo_wr_count_i) > N))
        else $error("weight FIFO: rows past the tile's last at cycle %0d", cycle_i);
      assert (!(switch_now && shadow_q != ShadowLoaded))
        else $error("MMC.S without loaded weights at cycle %0d", cycle_i);
      assert (!(cmd_i.valid && pending_q.valid))
        else $error("matrix unit: an MMC arrived while another waits at cycle %0d", cycle_i);
    end
  end
`endif

endmodule
