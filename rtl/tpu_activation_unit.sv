// tpu_activation_unit: executes ACT, POOL and VEC. Row i of an ACT started at s
// reads ACC[acc_row + i] at s + i, requantizes and activates it in N lanes,
// and writes UB[ub_row + i] at s + i + act_latency (docs/microarchitecture.md,
// "Activation unit"). Rows of successive ACTs follow each other with no gap.
// A POOL reads one window position of its UB map per cycle and writes each
// output pixel the cycle after its last position ("Pooling"). In every cycle
// the unit reads before it writes: its writes are visible from the next cycle
// (the UB's registers change at the edge that ends the cycle). Mirrors
// src/model/activation_unit.cpp; the tables are generated from the model's
// (tpu_act_pkg).
//
// POOL: with K = win_h * win_w window positions in row-major order, position
// p = (dy, dx) of output pixel i is read at s + i * K + p: UB row
// map_row + iy * in_w + ix for the input pixel (iy, ix) = (y0 + oy * stride_y
// + dy, x0 + ox * stride_x + dx), (oy, ox) = (i / out_w, i % out_w), when it
// lies inside the in_h x in_w map; a position outside the map takes its cycle
// with no UB access (isa::ConvGeometry::input_row, the model's read_pool).
// Counters follow (dy, dx) and the window's corner (y0 + oy * stride_y,
// x0 + ox * stride_x), advanced as in the systolic array's MMC.C address
// generator: no divider, and no K (the controller alone needs it, for the
// POOL's duration). Per lane a running register holds the maximum
// (sign-extended) or the sum of x - pad over the window's positions inside
// the map so far (the model's pool_acc_, and pool_any_ whether there was
// one). The cycle after a pixel's last position writes, from those registers,
// q(sum) (ACT's requantization with the registers at issue, no function) or
// the maximum, `pad` if no position was inside the map, to UB[ub_row + i],
// while the next pixel's first position is read.
//
// VEC runs as an ACT whose accumulator row is the combination of two UB
// rows: row i reads UB[a_row + i] on the POOL's read port and UB[b_row + i]
// (UB[b_row] with broadcast) on a second read port, both at s + i; per lane
// xa = a - za and xb = b - zb (10-bit), two multipliers form da * xa and
// (MUL ? xa : db) * xb, and the combination (docs/isa.md, VEC: exact in
// 32 bits) goes to the lane's requantizer and function like an ACC value
// (model::vec_combine). A VEC, like a POOL, starts only after every earlier
// instruction of the unit has completed, so its reads never meet a POOL's.
//
// A POOL never shares the unit with an ACT: it starts after every earlier
// instruction of the unit has completed, and the next one starts after its
// last write (the controller's rule). So the ACT's requantizers serve POOL.A,
// and the two share the UB write port.
module tpu_activation_unit
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
  import tpu_act_pkg::*;
(
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  unit_cmd_t             cmd_i,
  output logic [31:0]           acc_rd_row_o,
  input  logic [ArrayN*32-1:0]  acc_rd_data_i,
  // POOL's read port on the unified buffer, served combinationally from the
  // buffer's registers (before this cycle's writes land).
  output logic                  ub_rd_valid_o,
  output logic [31:0]           ub_rd_row_o,
  input  logic [ArrayN*8-1:0]   ub_rd_data_i,
  // VEC's second read port (operand B), served the same way.
  output logic                  ub_rd2_valid_o,
  output logic [31:0]           ub_rd2_row_o,
  input  logic [ArrayN*8-1:0]   ub_rd2_data_i,
  output logic                  ub_wr_valid_o,
  output logic [31:0]           ub_wr_row_o,
  output logic [ArrayN*8-1:0]   ub_wr_data_o,
  output retire_t               retire_o,
  output logic                  busy_o
);

  localparam int unsigned N = ArrayN;

  typedef struct packed {
    logic           valid;
    logic           last;
    logic [31:0]    seq;
    logic [31:0]    ub_row;
    logic [N*8-1:0] data;
  } stage_t;

  unit_cmd_t   job_q;
  logic        reading_q;  // an ACT reads its rows
  logic        pooling_q;  // a POOL reads its window positions
  logic [31:0] row_q;      // ACT: the row; POOL: the output pixel
  // Yosys takes an unpacked array of structs for a single struct: the stages
  // are plain vectors of $bits(stage_t) (a WIDTH warning if this drifts).
  localparam int unsigned StageBits = 2 + 32 + 32 + N * 8;
  logic [StageBits-1:0] stages_q [ActLatency];

  unit_cmd_t   job;
  logic        pool_cmd, reading, pooling, vec;
  logic [31:0] row;
  assign pool_cmd = cmd_i.opcode == OpPool;
  assign job      = cmd_i.valid ? cmd_i : job_q;
  assign reading  = (cmd_i.valid && !pool_cmd) || reading_q;
  assign pooling  = (cmd_i.valid && pool_cmd) || pooling_q;
  assign row      = cmd_i.valid ? '0 : row_q;
  assign acc_rd_row_o = job.op0 + row;
  assign vec          = job.opcode == OpVec;

  // ---- POOL: the window's address generator ------------------------------------------
  // ox counts 0 .. out_w - 1 and wraps; the corner (cy, cx) = (y0 + oy *
  // stride_y, x0 + ox * stride_x) advances by stride_x and returns to x0 on a
  // wrap, where cy advances by stride_y; (dy, dx) counts the window's
  // positions, row-major. The corner and the pixel are signed, MapYW and
  // MapXW bits wide (tpu_core_pkg, with the inside test and the row offset
  // shared with the systolic array's MMC.C generator). A command starts them
  // at (y0, x0) and (0, 0).
  localparam int unsigned IyW = MapYW, IxW = MapXW;
  logic [15:0]    ox_q, ox;
  logic [7:0]     dy_q, dy, dx_q, dx;
  logic [IyW-1:0] cy_q, cy, iy;  // two's complement
  logic [IxW-1:0] cx_q, cx, ix;
  logic [IyW-1:0] y0, stride_y;
  logic [IxW-1:0] x0, stride_x;
  logic           line_end, win_line_end, win_end, first_pos, last_pixel, in_map, average;
  logic [31:0]    offset;
  assign y0           = {{(IyW - 16){job.conv_y0[15]}}, job.conv_y0};
  assign x0           = {{(IxW - 16){job.conv_x0[15]}}, job.conv_x0};
  assign stride_y     = {{(IyW - 8){1'b0}}, job.conv_stride_y};
  assign stride_x     = {{(IxW - 8){1'b0}}, job.conv_stride_x};
  assign ox           = cmd_i.valid ? '0 : ox_q;
  assign cy           = cmd_i.valid ? y0 : cy_q;
  assign cx           = cmd_i.valid ? x0 : cx_q;
  assign dy           = cmd_i.valid ? '0 : dy_q;
  assign dx           = cmd_i.valid ? '0 : dx_q;
  assign iy           = cy + {{(IyW - 8){1'b0}}, dy};
  assign ix           = cx + {{(IxW - 8){1'b0}}, dx};
  assign line_end     = ox + 16'd1 == job.conv_out_w;
  assign win_line_end = dx + 8'd1 == job.conv_win_w;
  assign win_end      = win_line_end && dy + 8'd1 == job.conv_win_h;
  assign first_pos    = dy == '0 && dx == '0;
  assign last_pixel   = row + 1 == job.op2;
  assign in_map       = map_inside(iy, ix, job.conv_in_h, job.conv_in_w);
  assign average      = job.flags[FlagPoolA];
  // A position outside the map reads nothing; the port address stays on the
  // map's first row, inside the UB.
  assign offset        = map_row_offset(in_map, iy[15:0], ix[15:0], job.conv_in_w);
  assign ub_rd_row_o    = job.op0 + (vec ? row : offset);
  assign ub_rd_valid_o  = (pooling && in_map) || (reading && vec);
  assign ub_rd2_row_o   = 32'(job.vec_b_row) + (job.vec_broadcast ? 32'd0 : row);
  assign ub_rd2_valid_o = reading && vec;

  // The running registers after this cycle's position: the window's first
  // position starts from nothing (pool_acc_ = 0, pool_any_ = false), one
  // inside the map adds x - pad (average) or takes the larger (maximum).
  logic [N*32-1:0] pool_acc_q, pool_acc;
  logic            pool_any_q, pool_any, any_before;
  assign any_before = !first_pos && pool_any_q;
  assign pool_any   = any_before || in_map;
  always_comb begin
    logic [31:0] prev, x, pad;
    pad = {{24{job.conv_pad[7]}}, job.conv_pad};
    for (int unsigned j = 0; j < N; j++) begin
      prev = first_pos ? 32'd0 : pool_acc_q[32*j +: 32];
      x = {{24{ub_rd_data_i[8*j+7]}}, ub_rd_data_i[8*j +: 8]};
      if (!in_map) pool_acc[32*j +: 32] = prev;
      else if (average) pool_acc[32*j +: 32] = prev + x - pad;  // padding adds pad - pad = 0
      else pool_acc[32*j +: 32] = any_before && $signed(prev) > $signed(x) ? prev : x;
    end
  end

  // The pixel whose last position was read last cycle, written this cycle.
  logic        pool_wr_valid_q, pool_wr_last_q;
  logic [31:0] pool_wr_row_q;

  // q(a) = sat8(((a * M + r) >> S) + Z), r = S ? 1 << (S - 1) : 0, 64-bit.
  function automatic logic [7:0] requantize(logic [31:0] a, logic [31:0] m, logic [5:0] s,
                                            logic [7:0] z);
    logic signed [63:0] prod, rounded, scaled;
    prod = $signed({{32{a[31]}}, a}) * $signed({{32{m[31]}}, m});
    rounded = prod + (s == 0 ? 64'sd0 : 64'sd1 <<< (s - 1));
    scaled = (rounded >>> s) + $signed({{56{z[7]}}, z});
    if (scaled < -64'sd128) requantize = 8'h80;
    else if (scaled > 64'sd127) requantize = 8'h7f;
    else requantize = scaled[7:0];
  endfunction

  function automatic logic [7:0] activate(logic [7:0] y, logic [7:0] flags, logic [7:0] z);
    if (flags[FlagActR]) activate = $signed(y) > $signed(z) ? y : z;
    else if (flags[FlagActQ]) activate = sigmoid_lut(y);
    else if (flags[FlagActT]) activate = tanh_lut(y);
    else activate = y;
  endfunction

  // VEC's value of one lane (model::vec_combine): xa = a - za, xb = b - zb;
  // ADD da*xa + db*xb, SUB da*xa - db*xb, MUL xa*xb, MAX/MIN of da*xa and
  // db*xb; |v| <= 2 * 2^15 * 255 < 2^31. Two multipliers a lane: da * xa,
  // and (MUL ? xa : db) * xb.
  logic [N*32-1:0] vec_values;
  always_comb begin
    logic signed [9:0]  xa, xb;
    logic signed [15:0] fb;
    logic signed [25:0] ya, yb;
    logic signed [31:0] va, vb;
    for (int unsigned j = 0; j < N; j++) begin
      xa = 10'($signed(ub_rd_data_i[8*j +: 8])) - 10'($signed(job.vec_za));
      xb = 10'($signed(ub_rd2_data_i[8*j +: 8])) - 10'($signed(job.vec_zb));
      fb = job.vec_op == 3'd2 ? 16'(xa) : $signed(job.vec_db);
      ya = 26'($signed(job.vec_da)) * 26'(xa);
      yb = 26'(fb) * 26'(xb);
      va = 32'(ya);
      vb = 32'(yb);
      unique case (job.vec_op)
        3'd0: vec_values[32*j +: 32] = va + vb;
        3'd1: vec_values[32*j +: 32] = va - vb;
        3'd2: vec_values[32*j +: 32] = vb;
        3'd3: vec_values[32*j +: 32] = va > vb ? va : vb;
        default: vec_values[32*j +: 32] = va < vb ? va : vb;
      endcase
    end
  end

  // The lanes go to plain vectors: Yosys drops part-select writes to a
  // struct member made in a loop. The requantizers take an ACT's ACC row, a
  // VEC's combined values, or a POOL.A's sums in the cycle it writes a pixel
  // (a POOL never meets the others).
  logic [N*8-1:0] lanes, pool_lanes;
  always_comb begin
    logic [31:0] a;
    logic [7:0]  q;
    for (int unsigned j = 0; j < N; j++) begin
      a = pool_wr_valid_q ? pool_acc_q[32*j +: 32]
          : vec ? vec_values[32*j +: 32] : acc_rd_data_i[32*j +: 32];
      q = requantize(a, job.requant_m, job.requant_s, job.requant_z);
      lanes[8*j +: 8] = activate(q, job.flags, job.requant_z);
      pool_lanes[8*j +: 8] = average ? q : pool_any_q ? pool_acc_q[32*j +: 8] : job.conv_pad;
    end
  end

  stage_t first;
  always_comb begin
    first = '0;
    first.valid = reading;
    first.last = last_pixel;
    first.seq = job.seq;
    first.ub_row = job.op1 + row;
    first.data = lanes;
  end

  // The row leaving the pipeline this cycle entered it act_latency cycles ago;
  // or a POOL's pixel.
  stage_t out;
  assign out = stages_q[ActLatency-1];
  assign ub_wr_valid_o  = out.valid || pool_wr_valid_q;
  assign ub_wr_row_o    = pool_wr_valid_q ? pool_wr_row_q : out.ub_row;
  assign ub_wr_data_o   = pool_wr_valid_q ? pool_lanes : out.data;
  assign retire_o.valid = (out.valid && out.last) || (pool_wr_valid_q && pool_wr_last_q);
  assign retire_o.seq   = pool_wr_valid_q ? job_q.seq : out.seq;

  // A module-level temporary, as Yosys reads struct members only of scalars.
  // Stages are read whole for their valid bit.
  /* verilator lint_off UNUSEDSIGNAL */
  stage_t busy_stage;
  /* verilator lint_on UNUSEDSIGNAL */
  always_comb begin
    busy_o = reading || pooling || pool_wr_valid_q;
    busy_stage = '0;
    for (int unsigned i = 0; i < ActLatency; i++) begin
      busy_stage = stages_q[i];
      if (busy_stage.valid) busy_o = 1'b1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      job_q <= '0;
      reading_q <= 1'b0;
      pooling_q <= 1'b0;
      row_q <= '0;
      for (int unsigned i = 0; i < ActLatency; i++) stages_q[i] <= '0;
      ox_q <= '0;
      cy_q <= '0;
      cx_q <= '0;
      dy_q <= '0;
      dx_q <= '0;
      pool_acc_q <= '0;
      pool_any_q <= 1'b0;
      pool_wr_valid_q <= 1'b0;
      pool_wr_last_q <= 1'b0;
      pool_wr_row_q <= '0;
    end else begin
      job_q <= job;
      reading_q <= reading && !last_pixel;
      pooling_q <= pooling && !(win_end && last_pixel);
      row_q <= reading || (pooling && win_end) ? row + 1 : row;
      stages_q[0] <= first;
      for (int unsigned i = 1; i < ActLatency; i++) stages_q[i] <= stages_q[i-1];
      if (pooling) begin
        pool_acc_q <= pool_acc;
        pool_any_q <= pool_any;
        dx_q <= win_line_end ? '0 : dx + 8'd1;
        dy_q <= win_end ? '0 : win_line_end ? dy + 8'd1 : dy;
        if (win_end) begin
          ox_q <= line_end ? '0 : ox + 16'd1;
          cy_q <= line_end ? cy + stride_y : cy;
          cx_q <= line_end ? x0 : cx + stride_x;
        end else begin
          ox_q <= ox;
          cy_q <= cy;
          cx_q <= cx;
        end
      end
      pool_wr_valid_q <= pooling && win_end;
      pool_wr_last_q <= last_pixel;
      pool_wr_row_q <= job.op1 + row;
    end
  end

`ifndef SYNTHESIS
  // A POOL's last write and the unit's next command never meet: the requantizers
  // and the write port serve one instruction at a time.
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(pool_wr_valid_q && cmd_i.valid))
        else $error("activation unit: a command arrived in a POOL's write cycle");
      assert (!(pool_wr_valid_q && out.valid))
        else $error("activation unit: an ACT row and a POOL pixel written in one cycle");
    end
  end
`endif

endmodule
