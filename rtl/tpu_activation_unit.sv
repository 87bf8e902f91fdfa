// tpu_activation_unit: executes ACT, POOL and VEC as a pipeline of registered
// stages (docs/microarchitecture.md, "Activation unit"): a front end per
// instruction (ACT: RD; VEC: RD B, RD A, V1, V2; POOL: RD, AC) feeding one
// shared requantizer, MUL (two 32 x 16-bit products), ADD (their sum, the
// rounding constant and the shift right) and SAT (the saturation to int8 and
// the function), and the write WR ActLatency cycles after an ACT's read
// (ActLatency - 4 registers between SAT and WR; the configuration package
// refuses ActLatency < 4). Row i of an ACT started at s reads ACC[acc_row + i]
// at s + i and writes UB[ub_row + i] at s + i + ActLatency. A VEC reads
// operand B's row i at s + i and operand A's at s + i + 1 and writes at
// s + i + ActLatency + 3. A POOL reads one window position of its UB map per
// cycle and writes each output pixel ActLatency + 1 cycles after its last
// position ("Pooling"). The controller keeps the writes in order (each
// instruction's first write after the previous one's last), so at most one
// front end hands a value to MUL in a cycle. In every cycle the unit reads
// before it writes: its writes are visible from the next cycle (the UB's
// registers change at the edge that ends the cycle). Mirrors
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
// POOL's duration). The position's row is registered (RD); in AC, per lane a
// running register holds the maximum (sign-extended) or the sum of x - pad
// over the window's positions inside the map so far (the model's pool_acc_,
// and pool_any_ whether there was one). After a pixel's last position the
// value enters MUL: q(sum) (ACT's requantization with the registers at issue,
// no function), or the maximum, `pad` if no position was inside the map,
// carried unchanged beside the requantizer to WR.
//
// VEC: row i's operand B (UB[b_row + i], UB[b_row] with broadcast) is read on
// the second read port and held a cycle; operand A (UB[a_row + i]) on the
// POOL's read port a cycle later. V1: per lane xa = a - za and xb = b - zb
// (10-bit) and the two multipliers da * xa and (MUL ? xa : db) * xb; V2: the
// combination (docs/isa.md, VEC: exact in 32 bits; model::vec_combine), which
// enters MUL like an ACC value. A VEC, like a POOL, starts only after every
// earlier instruction of the unit has completed, so its reads never meet a
// POOL's.
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
  // POOL's and VEC's operand A read port on the unified buffer, served
  // combinationally from the buffer's registers (before this cycle's writes
  // land).
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
  // Registers between SAT and the write: WR is ActLatency cycles after an
  // ACT's read (RD, MUL, ADD, SAT take the first four).
  localparam int unsigned WrDepth = ActLatency - 3;

  // What travels with a row through MUL, ADD and SAT: where it goes, its
  // instruction's requantization and function, and whether the value passes
  // the requantizer unchanged (a POOL's maximum or pad, in `byp`).
  typedef struct packed {
    logic        valid;
    logic        last;
    logic [31:0] seq;
    logic [31:0] ub_row;
    logic [31:0] m;
    logic [5:0]  s;
    logic [7:0]  z;
    logic        relu;
    logic        sigmoid;
    logic        tanh_f;
    logic        bypass;
  } ctl_t;

  // ---- front end: commands and reads ------------------------------------------------
  unit_cmd_t   job_q;
  logic        reading_q;  // an ACT or VEC reads its rows
  logic        pooling_q;  // a POOL reads its window positions
  logic [31:0] row_q;      // ACT: the row; VEC: the cycle k (B's row k, A's k - 1); POOL: the pixel
  unit_cmd_t   job;
  logic        pool_cmd, reading, pooling, vec, act_rd, vec_rd_b, vec_rd_a, reading_end;
  logic [31:0] row;
  assign pool_cmd = cmd_i.opcode == OpPool;
  assign job      = cmd_i.valid ? cmd_i : job_q;
  assign reading  = (cmd_i.valid && !pool_cmd) || reading_q;
  assign pooling  = (cmd_i.valid && pool_cmd) || pooling_q;
  assign row      = cmd_i.valid ? '0 : row_q;
  assign vec      = job.opcode == OpVec;
  assign act_rd   = reading && !vec;
  assign vec_rd_b = reading && vec && row != job.op2;
  assign vec_rd_a = reading && vec && row != '0;
  // An ACT reads rows 0 .. rows - 1; a VEC reads for rows + 1 cycles.
  assign reading_end  = vec ? row == job.op2 : row + 1 == job.op2;
  assign acc_rd_row_o = job.op0 + row;

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
  logic           line_end, win_line_end, win_end, first_pos, last_pixel, in_map;
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
  // A position outside the map reads nothing; the port address stays on the
  // map's first row, inside the UB.
  assign offset         = map_row_offset(in_map, iy[15:0], ix[15:0], job.conv_in_w);
  assign ub_rd_row_o    = job.op0 + (vec ? row - 32'd1 : offset);
  assign ub_rd_valid_o  = (pooling && in_map) || vec_rd_a;
  assign ub_rd2_row_o   = 32'(job.vec_b_row) + (job.vec_broadcast ? 32'd0 : row);
  assign ub_rd2_valid_o = vec_rd_b;

  // ---- RD registers ---------------------------------------------------------------------
  // VEC: operand B's row, held a cycle for A's; then both, at A's read.
  logic [N*8-1:0] vb_q, va_q, vbh_q, prd_q;
  logic           v0_valid_q, v0_last_q;
  logic [31:0]    v0_row_q;
  // POOL: the position's row and where it lies in the window.
  logic           p0_valid_q, p0_in_map_q, p0_first_q, p0_win_end_q, p0_last_q;
  logic [31:0]    p0_row_q;

  // ---- V1: the factors' products (job_q is the VEC's: its A read was last cycle) --------
  logic [N*32-1:0] v1a_q, v1b_q, v1a, v1b;
  ctl_t            v1_ctl_q, v1_ctl;
  logic [2:0]      v1_op_q;
  always_comb begin
    logic signed [9:0]  xa, xb;
    logic signed [15:0] fb;
    logic signed [25:0] ya, yb;
    for (int unsigned j = 0; j < N; j++) begin
      xa = 10'($signed(va_q[8*j +: 8])) - 10'($signed(job_q.vec_za));
      xb = 10'($signed(vbh_q[8*j +: 8])) - 10'($signed(job_q.vec_zb));
      fb = job_q.vec_op == 3'd2 ? 16'(xa) : $signed(job_q.vec_db);
      ya = 26'($signed(job_q.vec_da)) * 26'(xa);
      yb = 26'(fb) * 26'(xb);
      v1a[32*j +: 32] = 32'(ya);
      v1b[32*j +: 32] = 32'(yb);
    end
    v1_ctl = '0;
    v1_ctl.valid   = v0_valid_q;
    v1_ctl.last    = v0_last_q;
    v1_ctl.seq     = job_q.seq;
    v1_ctl.ub_row  = v0_row_q;
    v1_ctl.m       = job_q.requant_m;
    v1_ctl.s       = job_q.requant_s;
    v1_ctl.z       = job_q.requant_z;
    v1_ctl.relu    = job_q.flags[FlagActR];
    v1_ctl.sigmoid = job_q.flags[FlagActQ];
    v1_ctl.tanh_f  = job_q.flags[FlagActT];
  end

  // ---- V2: the combination; ADD da*xa + db*xb, SUB da*xa - db*xb, MUL xa*xb,
  // MAX/MIN of da*xa and db*xb; |v| <= 2 * 2^15 * 255 < 2^31 ----------------------------
  logic [N*32-1:0] v2;
  always_comb begin
    logic signed [31:0] va, vb;
    for (int unsigned j = 0; j < N; j++) begin
      va = v1a_q[32*j +: 32];
      vb = v1b_q[32*j +: 32];
      unique case (v1_op_q)
        3'd0: v2[32*j +: 32] = va + vb;
        3'd1: v2[32*j +: 32] = va - vb;
        3'd2: v2[32*j +: 32] = vb;
        3'd3: v2[32*j +: 32] = va > vb ? va : vb;
        default: v2[32*j +: 32] = va < vb ? va : vb;
      endcase
    end
  end

  // ---- AC: the running registers after the position registered in RD (job_q
  // is the POOL's). The window's first position starts from nothing
  // (pool_acc_ = 0, pool_any_ = false), one inside the map adds x - pad
  // (average) or takes the larger (maximum).
  logic [N*32-1:0] pool_acc_q, pool_acc;
  logic [N*8-1:0]  pool_byp;
  logic            pool_any_q, pool_any, any_before, average;
  assign average    = job_q.flags[FlagPoolA];
  assign any_before = !p0_first_q && pool_any_q;
  assign pool_any   = any_before || p0_in_map_q;
  always_comb begin
    logic [31:0] prev, x, pad;
    pad = {{24{job_q.conv_pad[7]}}, job_q.conv_pad};
    for (int unsigned j = 0; j < N; j++) begin
      prev = p0_first_q ? 32'd0 : pool_acc_q[32*j +: 32];
      x = {{24{prd_q[8*j+7]}}, prd_q[8*j +: 8]};
      if (!p0_in_map_q) pool_acc[32*j +: 32] = prev;
      else if (average) pool_acc[32*j +: 32] = prev + x - pad;  // padding adds pad - pad = 0
      else pool_acc[32*j +: 32] = any_before && $signed(prev) > $signed(x) ? prev : x;
      pool_byp[8*j +: 8] = pool_any ? pool_acc[32*j +: 8] : job_q.conv_pad;
    end
  end

  // ---- into MUL: an ACT's ACC row (RD), a VEC's combination (V2) or a POOL's
  // finished pixel (AC); the controller's write order lets one a cycle ---------
  logic [N*32-1:0] x_in, x_q;
  logic [N*8-1:0]  byp_in, x_byp_q;
  ctl_t            x_in_ctl, x_ctl_q;
  logic            pool_done;
  assign pool_done = p0_valid_q && p0_win_end_q;
  always_comb begin
    x_in = acc_rd_data_i;
    byp_in = '0;
    x_in_ctl = '0;
    if (act_rd) begin
      x_in_ctl.valid   = 1'b1;
      x_in_ctl.last    = last_pixel;
      x_in_ctl.seq     = job.seq;
      x_in_ctl.ub_row  = job.op1 + row;
      x_in_ctl.m       = job.requant_m;
      x_in_ctl.s       = job.requant_s;
      x_in_ctl.z       = job.requant_z;
      x_in_ctl.relu    = job.flags[FlagActR];
      x_in_ctl.sigmoid = job.flags[FlagActQ];
      x_in_ctl.tanh_f  = job.flags[FlagActT];
    end else if (v1_ctl_q.valid) begin
      x_in = v2;
      x_in_ctl = v1_ctl_q;
    end else if (pool_done) begin
      x_in = pool_acc;
      byp_in = pool_byp;
      x_in_ctl.valid  = 1'b1;
      x_in_ctl.last   = p0_last_q;
      x_in_ctl.seq    = job_q.seq;
      x_in_ctl.ub_row = p0_row_q;
      x_in_ctl.m      = job_q.requant_m;
      x_in_ctl.s      = job_q.requant_s;
      x_in_ctl.z      = job_q.requant_z;
      x_in_ctl.bypass = !average;
    end
  end

  // ---- MUL: a * M as a * M[15:0] (M's low half unsigned) and a * M[31:16] (signed),
  // each 48 bits: a * M = hi * 2^16 + lo ------------------------------------------------
  logic [N*48-1:0] mul_lo, mul_hi, mul_lo_q, mul_hi_q;
  logic [N*8-1:0]  mul_byp_q;
  ctl_t            mul_ctl_q;
  always_comb begin
    logic signed [47:0] a;
    for (int unsigned j = 0; j < N; j++) begin
      a = 48'($signed(x_q[32*j +: 32]));
      mul_lo[48*j +: 48] = a * $signed({32'd0, x_ctl_q.m[15:0]});
      mul_hi[48*j +: 48] = a * 48'($signed(x_ctl_q.m[31:16]));
    end
  end

  // ---- ADD: ((hi << 16) + lo + r) >>> S, r = S ? 1 << (S - 1) : 0 (64-bit) ----------------
  logic [N*64-1:0] add_v, add_q;
  logic [N*8-1:0]  add_byp_q;
  // SAT reads the requantization's z and the function, not m and s.
  /* verilator lint_off UNUSEDSIGNAL */
  ctl_t            add_ctl_q;
  /* verilator lint_on UNUSEDSIGNAL */
  always_comb begin
    logic signed [63:0] r, sum;
    r = mul_ctl_q.s == 6'd0 ? 64'sd0 : 64'sd1 <<< (mul_ctl_q.s - 6'd1);
    for (int unsigned j = 0; j < N; j++) begin
      sum = ($signed({{16{mul_hi_q[48*j+47]}}, mul_hi_q[48*j +: 48]}) <<< 16)
            + $signed({{16{mul_lo_q[48*j+47]}}, mul_lo_q[48*j +: 48]}) + r;
      add_v[64*j +: 64] = sum >>> mul_ctl_q.s;
    end
  end

  // ---- SAT: sat8(x + Z), then the function ------------------------------------------------
  // x outside [-512, 511] (bits 63..9 not all equal) saturates by its sign
  // whatever Z; inside, x + Z is an 11-bit add.
  function automatic logic [7:0] saturate(logic [63:0] x, logic [7:0] z);
    logic               narrow;
    logic signed [10:0] t;
    narrow = &x[63:9] || ~|x[63:9];
    t = $signed(x[10:0]) + 11'($signed(z));
    if (!narrow) saturate = x[63] ? 8'h80 : 8'h7f;
    else if (t < -11'sd128) saturate = 8'h80;
    else if (t > 11'sd127) saturate = 8'h7f;
    else saturate = t[7:0];
  endfunction

  logic [N*8-1:0] sat_v;
  always_comb begin
    logic [7:0] y;
    for (int unsigned j = 0; j < N; j++) begin
      y = saturate(add_q[64*j +: 64], add_ctl_q.z);
      if (add_ctl_q.bypass) sat_v[8*j +: 8] = add_byp_q[8*j +: 8];
      else if (add_ctl_q.relu) sat_v[8*j +: 8] = $signed(y) > $signed(add_ctl_q.z) ? y : add_ctl_q.z;
      else if (add_ctl_q.sigmoid) sat_v[8*j +: 8] = sigmoid_lut(y);
      else if (add_ctl_q.tanh_f) sat_v[8*j +: 8] = tanh_lut(y);
      else sat_v[8*j +: 8] = y;
    end
  end

  // ---- SAT's result, then WrDepth - 1 more registers to WR -----------------------------
  // One packed vector of WrDepth entries (valid, last, seq, ub_row and the
  // lanes), entry 0 SAT's result, shifted up a cycle at a time.
  localparam int unsigned WrBits = 2 + 32 + 32 + N * 8;
  logic [WrDepth*WrBits-1:0] wr_q;
  logic                      out_valid, out_last;
  logic [31:0]               out_seq, out_row;
  logic [N*8-1:0]            out_data;
  assign {out_valid, out_last, out_seq, out_row, out_data} = wr_q[(WrDepth-1)*WrBits +: WrBits];
  assign ub_wr_valid_o  = out_valid;
  assign ub_wr_row_o    = out_row;
  assign ub_wr_data_o   = out_data;
  assign retire_o.valid = out_valid && out_last;
  assign retire_o.seq   = out_seq;

  logic wr_busy;
  always_comb begin
    wr_busy = 1'b0;
    for (int unsigned i = 0; i < WrDepth; i++)
      if (wr_q[i*WrBits + WrBits - 1]) wr_busy = 1'b1;
  end
  // Busy from an instruction's start to its last write.
  assign busy_o = reading || pooling || v0_valid_q || v1_ctl_q.valid || p0_valid_q || x_ctl_q.valid
                  || mul_ctl_q.valid || add_ctl_q.valid || wr_busy;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      job_q <= '0;
      reading_q <= 1'b0;
      pooling_q <= 1'b0;
      row_q <= '0;
      ox_q <= '0;
      cy_q <= '0;
      cx_q <= '0;
      dy_q <= '0;
      dx_q <= '0;
      vb_q <= '0;
      va_q <= '0;
      vbh_q <= '0;
      v0_valid_q <= 1'b0;
      v0_last_q <= 1'b0;
      v0_row_q <= '0;
      prd_q <= '0;
      p0_valid_q <= 1'b0;
      p0_in_map_q <= 1'b0;
      p0_first_q <= 1'b0;
      p0_win_end_q <= 1'b0;
      p0_last_q <= 1'b0;
      p0_row_q <= '0;
      v1a_q <= '0;
      v1b_q <= '0;
      v1_ctl_q <= '0;
      v1_op_q <= '0;
      pool_acc_q <= '0;
      pool_any_q <= 1'b0;
      x_q <= '0;
      x_byp_q <= '0;
      x_ctl_q <= '0;
      mul_byp_q <= '0;
      mul_ctl_q <= '0;
      add_byp_q <= '0;
      add_ctl_q <= '0;
      wr_q <= '0;
    end else begin
      job_q <= job;
      reading_q <= reading && !reading_end;
      pooling_q <= pooling && !(win_end && last_pixel);
      row_q <= reading || (pooling && win_end) ? row + 1 : row;
      if (pooling) begin
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
      // RD
      if (vec_rd_b) vb_q <= ub_rd2_data_i;
      va_q <= ub_rd_data_i;
      vbh_q <= vb_q;
      v0_valid_q <= vec_rd_a;
      v0_last_q <= row == job.op2;
      v0_row_q <= job.op1 + row - 32'd1;
      prd_q <= ub_rd_data_i;
      p0_valid_q <= pooling;
      p0_in_map_q <= in_map;
      p0_first_q <= first_pos;
      p0_win_end_q <= win_end;
      p0_last_q <= win_end && last_pixel;
      p0_row_q <= job.op1 + row;
      // V1, AC
      v1a_q <= v1a;
      v1b_q <= v1b;
      v1_ctl_q <= v1_ctl;
      v1_op_q <= job_q.vec_op;
      if (p0_valid_q) begin
        pool_acc_q <= pool_acc;
        pool_any_q <= pool_any;
      end
      // into MUL, MUL, ADD, SAT, WR
      x_q <= x_in;
      x_byp_q <= byp_in;
      x_ctl_q <= x_in_ctl;
      mul_byp_q <= x_byp_q;
      mul_ctl_q <= x_ctl_q;
      add_byp_q <= mul_byp_q;
      add_ctl_q <= mul_ctl_q;
      wr_q <= (WrDepth*WrBits)'({wr_q, add_ctl_q.valid, add_ctl_q.last, add_ctl_q.seq,
                                add_ctl_q.ub_row, sat_v});
    end
  end

  // The wide products and sums take no reset (more than 8k bits at N = 256):
  // their stage's valid bit, in the control beside them, says when they count.
  always_ff @(posedge clk_i) begin
    mul_lo_q <= mul_lo;
    mul_hi_q <= mul_hi;
    add_q <= add_v;
  end

`ifndef SYNTHESIS
  // The controller's write order: one front end hands a value to MUL a cycle.
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (32'(act_rd) + 32'(v1_ctl_q.valid) + 32'(pool_done) <= 1)
        else $error("activation unit: two instructions enter the requantizer in one cycle");
    end
  end
`endif

endmodule
