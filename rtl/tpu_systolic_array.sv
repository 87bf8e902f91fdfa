// tpu_systolic_array: the matrix unit. An N x N weight-stationary array of
// int8 MACs with int32 partial sums, the weight FIFO that feeds it, and two
// weight register sets per PE (active and shadow). Executes MMC
// (docs/microarchitecture.md, "Weight buffers" and "Systolic array").
// Mirrors src/model/systolic_array.cpp.
//
// Row i of an MMC started at s: UB row read at u = s + i; x[k] enters PE
// (k, 0) at u + 1 + k; PE (k, j) works at u + 1 + k + j; column j's sum is
// written to the accumulators at u + N + j + 1. Rows are remembered by the
// cycle they were read in a ring of 2N + 2 slots; the PE registers are flat
// vectors updated in loops, not one instance per PE.
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
  input  logic [CycleW-1:0]           cycle_i,
  input  unit_cmd_t                   cmd_i,
  input  logic                        tile_push_valid_i,
  input  logic [ArrayN*ArrayN*8-1:0]  tile_push_data_i,
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
  output retire_t                     retire_o,
  output logic                        busy_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned TileBits = N * N * 8;
  localparam int unsigned Slots = 2 * N + 2;
  localparam int unsigned SlotW = $clog2(Slots);
  localparam logic [1:0] ShadowFree = 2'd0, ShadowLoading = 2'd1, ShadowLoaded = 2'd2;

  // ---- Weight FIFO, shadow and active sets --------------------------------------
  logic [TileBits-1:0] fifo_q [FifoDepth];
  logic [$clog2(FifoDepth+1)-1:0] fifo_count_q;
  logic [$clog2(FifoDepth)-1:0]   fifo_head_q;
  logic [TileBits-1:0] weights_q [2];
  logic                active_q;
  logic [1:0]          shadow_q;
  logic [CycleW-1:0]   shadow_free_from_q, load_start_q;
  logic [TileBits-1:0] loading_q;
  logic [CycleW-1:0]   last_use_q [2];
  logic                used_q [2];
  logic [31:0]         popped_q, loaded_q;

  // ---- Rows in the array ----------------------------------------------------------
  typedef struct packed {
    logic        valid;
    logic        overwrite;
    logic        weight_set;
    logic        last;       // the last row of its MMC
    logic [31:0] seq;
    logic [31:0] acc_row;
    logic [N*8-1:0] x;
  } slot_t;
  // Yosys takes an unpacked array of structs for a single struct: the slots
  // are plain vectors of $bits(slot_t) (a WIDTH warning if this drifts).
  localparam int unsigned SlotEntryBits = 4 + 32 + 32 + N * 8;
  logic [SlotEntryBits-1:0] slots_q [Slots];

  // The MMC whose rows are being read.
  unit_cmd_t         job_q;
  logic              reading_q;
  logic [31:0]       row_q;

  // PE registers, PE (k, j) at index k * N + j.
  logic [N*N*8-1:0]  x_q;
  logic [N*N-1:0]    set_q;
  logic [N*N*32-1:0] psum_q;

  // Ring slot of the row read `back` cycles before this one (back < Slots);
  // ptr_q is the current cycle modulo Slots. Slots start invalid, so rows
  // "before cycle 0" read as empty.
  // The pointer is an argument, not read from ptr_q inside, so that Yosys
  // does not take the function for a constant one.
  logic [SlotW-1:0] ptr_q;
  function automatic logic [SlotW-1:0] slot_at(logic [SlotW-1:0] ptr, int unsigned back);
    slot_at = ptr >= SlotW'(back) ? ptr - SlotW'(back) : ptr + SlotW'(Slots - back);
  endfunction

  // Slots are read whole; each reader uses the fields it needs.
  /* verilator lint_off UNUSEDSIGNAL */
  // Yosys reads struct members only of module-level scalars: each loop below
  // copies the slots it reads to its own temporary.
  slot_t wr_slot, pe_slot, busy_slot;

  // ---- Accumulator writes: column j's sum for the row read at now - 1 - N - j ----
  always_comb begin
    acc_wr_valid_o = '0;
    acc_wr_overwrite_o = '0;
    acc_wr_row_o = '0;
    acc_wr_data_o = '0;
    retire_o = '0;
    wr_slot = '0;
    for (int unsigned j = 0; j < N; j++) begin
      wr_slot = slots_q[slot_at(ptr_q, 1 + N + j)];
      acc_wr_valid_o[j] = wr_slot.valid;
      acc_wr_overwrite_o[j] = wr_slot.overwrite;
      acc_wr_row_o[32*j +: 32] = wr_slot.acc_row;
      acc_wr_data_o[32*j +: 32] = psum_q[32*((N-1)*N + j) +: 32];
      if (j == N - 1 && wr_slot.valid && wr_slot.last) begin
        retire_o.valid = 1'b1;
        retire_o.seq = wr_slot.seq;
      end
    end
  end

  // ---- Command, FIFO, loader ---------------------------------------------------------
  logic              switch_now, push_now, pop_now, load_done;
  logic              active_d;
  logic [1:0]        shadow_after_switch;
  logic [CycleW-1:0] free_from_after_switch;
  logic [$clog2(FifoDepth+1)-1:0] count_after_push;

  assign switch_now = cmd_i.valid && cmd_i.flags[FlagMmcS];
  assign push_now   = tile_push_valid_i;
  assign count_after_push = fifo_count_q + (push_now ? 1 : 0);
  assign active_d   = switch_now ? !active_q : active_q;

  always_comb begin
    shadow_after_switch = shadow_q;
    free_from_after_switch = shadow_free_from_q;
    if (switch_now) begin
      shadow_after_switch = ShadowFree;
      free_from_after_switch =
          used_q[active_q] && last_use_q[active_q] + CycleW'(N) + 1 > cycle_i
              ? last_use_q[active_q] + CycleW'(N) + 1 : cycle_i;
    end
  end

  assign load_done = shadow_after_switch == ShadowLoading && cycle_i == load_start_q + CycleW'(N) - 1;
  assign pop_now   = shadow_after_switch == ShadowFree && cycle_i >= free_from_after_switch &&
                     count_after_push != 0;

  // ---- Row read ----------------------------------------------------------------------
  unit_cmd_t   job;
  logic        reading;
  logic [31:0] row;
  assign job     = cmd_i.valid ? cmd_i : job_q;
  assign reading = cmd_i.valid || reading_q;
  assign row     = cmd_i.valid ? '0 : row_q;

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
  assign ox       = cmd_i.valid ? '0 : ox_q;
  assign iy       = cmd_i.valid ? y0 : iy_q;
  assign ix       = cmd_i.valid ? x0 : ix_q;
  assign conv     = job.flags[FlagMmcC];
  assign line_end = ox + 16'd1 == job.conv_out_w;
  assign in_map   = map_inside(iy, ix, job.conv_in_h, job.conv_in_w);
  assign offset   = !conv ? row : map_row_offset(in_map, iy[15:0], ix[15:0], job.conv_in_w);
  // A padding row reads nothing; its port address stays on the map's first
  // row, inside the UB.
  assign x_row    = conv && !in_map ? {N{job.conv_pad}} : ub_rd_data_i;
  assign ub_rd_row_o = job.op0 + offset;
  assign row_valid_o = reading;

  // ---- One clock of every PE -----------------------------------------------------------
  logic [N*N*8-1:0]  x_d;
  logic [N*N-1:0]    set_d;
  logic [N*N*32-1:0] psum_d;
  always_comb begin
    pe_slot = '0;
    for (int unsigned k = 0; k < N; k++) begin
      logic [7:0] x_in;
      logic       set_in;
      pe_slot = slots_q[slot_at(ptr_q, 1 + k)];
      x_in = pe_slot.valid ? pe_slot.x[8*k +: 8] : 8'd0;
      set_in = pe_slot.valid && pe_slot.weight_set;
      for (int unsigned j = 0; j < N; j++) begin
        logic [7:0]  x;
        logic        set;
        logic [7:0]  w;
        logic [31:0] above;
        x = j == 0 ? x_in : x_q[8*(k*N + j - 1) +: 8];
        set = j == 0 ? set_in : set_q[k*N + j - 1];
        w = weights_q[set][8*(k*N + j) +: 8];
        above = k == 0 ? 32'd0 : psum_q[32*((k-1)*N + j) +: 32];
        x_d[8*(k*N + j) +: 8] = x;
        set_d[k*N + j] = set;
        // int8 x int8 in 32 bits, wrapping like the model's uint32 arithmetic.
        psum_d[32*(k*N + j) +: 32] = above + 32'($signed({{24{x[7]}}, x}) * $signed({{24{w[7]}}, w}));
      end
    end
  end

  // Busy while a row is read or still in the array (read in the last 2N cycles).
  always_comb begin
    busy_o = reading;
    busy_slot = '0;
    for (int unsigned back = 1; back <= 2 * N; back++) begin
      busy_slot = slots_q[slot_at(ptr_q, back)];
      if (busy_slot.valid) busy_o = 1'b1;
    end
  end

  /* verilator lint_on UNUSEDSIGNAL */

  // ---- State --------------------------------------------------------------------------------
  // The weight tiles and the PE state are N*N*8 to N*N*32-bit vectors by
  // design; from N = 32 their '0 resets exceed the 8k-bit replication that
  // WIDTHCONCAT takes for a likely mistake.
  /* verilator lint_off WIDTHCONCAT */
  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      for (int unsigned d = 0; d < FifoDepth; d++) fifo_q[d] <= '0;
      fifo_count_q <= '0;
      fifo_head_q <= '0;
      weights_q[0] <= '0;
      weights_q[1] <= '0;
      active_q <= 1'b0;
      shadow_q <= ShadowFree;
      shadow_free_from_q <= '0;
      load_start_q <= '0;
      loading_q <= '0;
      last_use_q[0] <= '0;
      last_use_q[1] <= '0;
      used_q[0] <= 1'b0;
      used_q[1] <= 1'b0;
      popped_q <= '0;
      loaded_q <= '0;
      for (int unsigned i = 0; i < Slots; i++) slots_q[i] <= '0;
      ptr_q <= '0;
      job_q <= '0;
      reading_q <= 1'b0;
      row_q <= '0;
      ox_q <= '0;
      iy_q <= '0;
      ix_q <= '0;
      x_q <= '0;
      set_q <= '0;
      psum_q <= '0;
    end else begin
      // FIFO: push at the tail, pop the head into the shadow.
      if (push_now) begin
        fifo_q[(32'(fifo_head_q) + 32'(fifo_count_q)) % FifoDepth] <= tile_push_data_i;
      end
      if (pop_now) begin
        // The head is the pushed tile itself when the FIFO was empty.
        loading_q <= fifo_count_q == 0 ? tile_push_data_i : fifo_q[fifo_head_q];
        fifo_head_q <= $clog2(FifoDepth)'((32'(fifo_head_q) + 1) % FifoDepth);
        popped_q <= popped_q + 1;
        load_start_q <= cycle_i;
      end
      fifo_count_q <= count_after_push - (pop_now ? 1 : 0);

      // Shadow state.
      active_q <= active_d;
      shadow_free_from_q <= free_from_after_switch;
      if (load_done) begin
        weights_q[!active_d] <= loading_q;
        used_q[!active_d] <= 1'b0;
        loaded_q <= loaded_q + 1;
        shadow_q <= ShadowLoaded;
      end else if (pop_now) begin
        shadow_q <= ShadowLoading;
      end else begin
        shadow_q <= shadow_after_switch;
      end

      // Row read: the slot of this cycle.
      // A concatenation in field order, not an assignment pattern '{...}, which
      // Yosys cannot parse.
      if (reading) begin
        slots_q[ptr_q] <= {1'b1, job.flags[FlagMmcO], active_d, row + 1 == job.op2,
                           job.seq, job.op1 + row, x_row};
        last_use_q[active_d] <= cycle_i;
        used_q[active_d] <= 1'b1;
      end else begin
        slots_q[ptr_q] <= '0;
      end
      ptr_q <= ptr_q == SlotW'(Slots - 1) ? '0 : ptr_q + 1;
      job_q <= job;
      reading_q <= reading && row + 1 != job.op2;
      row_q <= reading ? row + 1 : row;
      if (reading) begin
        ox_q <= line_end ? '0 : ox + 16'd1;
        iy_q <= line_end ? iy + stride_y : iy;
        ix_q <= line_end ? x0 : ix + stride_x;
      end

      x_q <= x_d;
      set_q <= set_d;
      psum_q <= psum_d;
    end
  end
  /* verilator lint_on WIDTHCONCAT */

  assign tiles_popped_o = popped_q;
  assign tiles_loaded_o = loaded_q;

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(push_now && fifo_count_q == FifoDepth[$bits(fifo_count_q)-1:0] && !pop_now))
        else $error("weight FIFO overflow at cycle %0d", cycle_i);
      assert (!(pop_now && count_after_push == 0))
        else $error("weight FIFO underflow at cycle %0d", cycle_i);
      assert (!(switch_now && shadow_q != ShadowLoaded))
        else $error("MMC.S without loaded weights at cycle %0d", cycle_i);
    end
  end
`endif

endmodule
