// tpu_activation_unit: executes ACT, POOL, VEC and GELU as a pipeline of
// registered stages (docs/microarchitecture.md, "Activation unit"): a front
// end per instruction (ACT: RD; VEC: RD B, RD A, V1, V2; POOL: RD, AC; GELU:
// RD, G1 .. G6) feeding one shared requantizer of a 64-bit value (GELU's v is
// that wide; the others' fit 32 bits), MUL (two 64 x 16-bit products), ADD
// (their sum, the rounding constant and the shift right) and SAT (the
// saturation to int8 and the function), and the write WR ActLatency cycles
// after an ACT's read
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
//
// GELU (docs/quantization.md, "Integer softmax, LayerNorm and GELU";
// model::gelu_value): row i is read on the POOL's read port at s + i and
// written at s + i + ActLatency + 6. Per lane, G1: qx = sat32((x - k2) << sh);
// G2: n = K - min(|qx|, K) with K = max(k0, 0) (n = -u) and qx's sign; G3:
// n * n as n * n[15:0] and n * n[30:16]; G4: their sum u*u and w = sat32(k1 +
// sgn(qx) * (k1 - u*u)), which is sat32(2 k1 - u*u) for qx > 0, sat32(u*u)
// for qx < 0 and k1 for qx = 0; G5: qx * w as qx * w[15:0] and qx * w[31:16];
// G6: their sum v, |v| < 2^63, which enters MUL. Like a VEC it starts only
// after every earlier instruction of the unit has completed.
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
  logic        pool_cmd, reading, pooling, vec, gelu, act_rd, vec_rd_b, vec_rd_a, gelu_rd, reading_end;
  logic [31:0] row;
  assign pool_cmd = cmd_i.opcode == OpPool;
  assign job      = cmd_i.valid ? cmd_i : job_q;
  assign reading  = (cmd_i.valid && !pool_cmd) || reading_q;
  assign pooling  = (cmd_i.valid && pool_cmd) || pooling_q;
  assign row      = cmd_i.valid ? '0 : row_q;
  assign vec      = job.opcode == OpVec;
  assign gelu     = job.opcode == OpGelu;
  assign act_rd   = reading && !vec && !gelu;
  assign vec_rd_b = reading && vec && row != job.op2;
  assign vec_rd_a = reading && vec && row != '0;
  assign gelu_rd  = reading && gelu;
  // An ACT or GELU reads rows 0 .. rows - 1; a VEC reads for rows + 1 cycles.
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
  assign ub_rd_row_o    = job.op0 + (vec ? row - 32'd1 : gelu ? row : offset);
  assign ub_rd_valid_o  = (pooling && in_map) || vec_rd_a || gelu_rd;
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

  // ---- GELU: RD (prd_q, the row read on the POOL's port) and G1 .. G6; job_q
  // is the GELU's until its last row has entered MUL ------------------------------
  // The stages' control, entry k for stage G(k + 1): valid, last row, UB row
  // written.
  logic [5:0]    g_valid_q, g_last_q;
  logic [6*32-1:0] g_row_q;

  // sat32 of a 48- or 64-bit value: bits above 31 not all equal saturate by the sign.
  function automatic logic [31:0] sat32_of48(logic [47:0] v);
    if (&v[47:31] || ~|v[47:31]) sat32_of48 = v[31:0];
    else sat32_of48 = v[47] ? 32'h80000000 : 32'h7fffffff;
  endfunction
  function automatic logic [31:0] sat32_of64(logic [63:0] v);
    if (&v[63:31] || ~|v[63:31]) sat32_of64 = v[31:0];
    else sat32_of64 = v[63] ? 32'h80000000 : 32'h7fffffff;
  endfunction
  // Each stage a function of the registers before it, evaluated into the next
  // registers only for a valid row (the registers' enable: a simulator need
  // not compute the wide products in the cycles no GELU uses them).
  // G1: qx = sat32((x - k2) << sh); (x - k2) is 33 bits, shifted 48.
  function automatic logic [N*32-1:0] gelu_g1(logic [N*8-1:0] x, logic [31:0] k2, logic [3:0] sh);
    logic signed [47:0] shifted;
    logic [N*32-1:0]    qx;
    for (int unsigned j = 0; j < N; j++) begin
      shifted = (48'($signed(x[8*j +: 8])) - 48'($signed(k2))) <<< sh;
      qx[32*j +: 32] = sat32_of48(shifted);
    end
    gelu_g1 = qx;
  endfunction
  // G2: the magnitude of qx (32 bits unsigned: |-2^31| = 2^31), clipped at
  // K = max(k0, 0): n = K - min(|qx|, K) = -u, 31 bits; and qx's sign: {n,
  // qx > 0, qx < 0} a lane.
  function automatic logic [N*33-1:0] gelu_g2(logic [N*32-1:0] qxs, logic [31:0] k0);
    logic [31:0]     qx, mag;
    logic [30:0]     k, clip;
    logic [N*33-1:0] out;
    k = k0[31] ? 31'd0 : k0[30:0];
    for (int unsigned j = 0; j < N; j++) begin
      qx = qxs[32*j +: 32];
      mag = qx[31] ? 32'd0 - qx : qx;
      clip = mag < 32'(k) ? mag[30:0] : k;
      out[33*j +: 33] = {k - clip, !qx[31] && qx != '0, qx[31]};
    end
    gelu_g2 = out;
  endfunction
  // G3: n * n as n * n[15:0] (47 bits) and n * n[30:16] (46 bits), unsigned:
  // {hi, lo} a lane.
  function automatic logic [N*93-1:0] gelu_g3(logic [N*33-1:0] g2);
    logic [30:0]     n;
    logic [N*93-1:0] out;
    for (int unsigned j = 0; j < N; j++) begin
      n = g2[33*j+2 +: 31];
      out[93*j +: 93] = {46'(n) * 46'(n[30:16]), 47'(n) * 47'(n[15:0])};
    end
    gelu_g3 = out;
  endfunction
  // G4: w = sat32(2 k1 - u*u) for qx > 0, sat32(u*u) for qx < 0, k1 for qx
  // = 0, with u*u = (hi << 16) + lo < 2^62: two sums side by side, one of
  // three terms.
  function automatic logic [N*32-1:0] gelu_g4(logic [N*93-1:0] g3, logic [N*33-1:0] g2, logic [31:0] k1);
    logic [61:0]        uu;
    logic signed [63:0] twice_minus;
    logic [N*32-1:0]    w;
    for (int unsigned j = 0; j < N; j++) begin
      uu = (62'(g3[93*j+47 +: 46]) << 16) + 62'(g3[93*j +: 47]);
      twice_minus = (64'($signed(k1)) <<< 1) - (64'(g3[93*j+47 +: 46]) << 16) - 64'(g3[93*j +: 47]);
      if (g2[33*j+1]) w[32*j +: 32] = sat32_of64(twice_minus);
      else if (g2[33*j]) w[32*j +: 32] = |uu[61:31] ? 32'h7fffffff : uu[31:0];
      else w[32*j +: 32] = k1;
    end
    gelu_g4 = w;
  endfunction
  // G5: qx * w as qx * w[15:0] (w's low half unsigned) and qx * w[31:16], 48
  // bits each: {hi, lo} a lane.
  function automatic logic [N*96-1:0] gelu_g5(logic [N*32-1:0] qxs, logic [N*32-1:0] ws);
    logic signed [47:0] qx;
    logic [31:0]        w;
    logic [N*96-1:0]    out;
    for (int unsigned j = 0; j < N; j++) begin
      qx = 48'($signed(qxs[32*j +: 32]));
      w = ws[32*j +: 32];
      out[96*j +: 96] = {qx * 48'($signed(w[31:16])), qx * $signed({32'd0, w[15:0]})};
    end
    gelu_g5 = out;
  endfunction
  // The stages' registers: G1's qx, carried to G5; G2's {n, sign}, carried to
  // G4; G3's products; G4's w; G5's products.
  logic [N*32-1:0] g1_qx_q, g2_qx_q, g3_qx_q, g4_qx_q, g4_w_q;
  logic [N*33-1:0] g2_q, g3_sgn_q;
  logic [N*93-1:0] g3_q;
  logic [N*96-1:0] g5_q;
  // G6: v = (hi << 16) + lo, into MUL.
  logic [N*64-1:0] g6_v;
  always_comb begin
    for (int unsigned j = 0; j < N; j++)
      g6_v[64*j +: 64] = ($signed({{16{g5_q[96*j+95]}}, g5_q[96*j+48 +: 48]}) <<< 16)
                         + $signed({{16{g5_q[96*j+47]}}, g5_q[96*j +: 48]});
  end

  // ---- into MUL: an ACT's ACC row (RD), a VEC's combination (V2), a POOL's
  // finished pixel (AC) or a GELU's v (G6); the controller's write order lets
  // one a cycle. Values are 64 bits (the others' sign-extended from 32) --------
  logic [N*64-1:0] x_in, x_q;
  logic [N*8-1:0]  byp_in, x_byp_q;
  ctl_t            x_in_ctl, x_ctl_q;
  logic            pool_done;
  assign pool_done = p0_valid_q && p0_win_end_q;
  // A row of N 32-bit values, sign-extended to 64 bits a lane.
  function automatic logic [N*64-1:0] widen(logic [N*32-1:0] v);
    logic [N*64-1:0] w;
    for (int unsigned j = 0; j < N; j++) w[64*j +: 64] = 64'($signed(v[32*j +: 32]));
    widen = w;
  endfunction

  always_comb begin
    x_in = widen(acc_rd_data_i);
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
      x_in = widen(v2);
      x_in_ctl = v1_ctl_q;
    end else if (g_valid_q[5]) begin
      x_in = g6_v;
      x_in_ctl.valid  = 1'b1;
      x_in_ctl.last   = g_last_q[5];
      x_in_ctl.seq    = job_q.seq;
      x_in_ctl.ub_row = g_row_q[5*32 +: 32];
      x_in_ctl.m      = job_q.requant_m;
      x_in_ctl.s      = job_q.requant_s;
      x_in_ctl.z      = job_q.requant_z;
    end else if (pool_done) begin
      x_in = widen(pool_acc);
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
  // each 80 bits: a * M = hi * 2^16 + lo ------------------------------------------------
  // {hi, lo} a lane, registered only for a valid row (as GELU's stages).
  logic [N*160-1:0] mul_q;
  logic [N*8-1:0]   mul_byp_q;
  ctl_t             mul_ctl_q;
  function automatic logic [N*160-1:0] mul_of(logic [N*64-1:0] x, logic [31:0] m);
    logic signed [79:0] a;
    logic [N*160-1:0]   out;
    for (int unsigned j = 0; j < N; j++) begin
      a = 80'($signed(x[64*j +: 64]));
      out[160*j +: 160] = {a * 80'($signed(m[31:16])), a * $signed({64'd0, m[15:0]})};
    end
    mul_of = out;
  endfunction

  // ---- ADD: ((hi << 16) + lo + r) >>> S, r = S ? 1 << (S - 1) : 0 (96-bit: |a * M| < 2^94) --
  logic [N*96-1:0] add_q;
  logic [N*8-1:0]  add_byp_q;
  // SAT reads the requantization's z and the function, not m and s.
  /* verilator lint_off UNUSEDSIGNAL */
  ctl_t            add_ctl_q;
  /* verilator lint_on UNUSEDSIGNAL */
  function automatic logic [N*96-1:0] add_of(logic [N*160-1:0] p, logic [5:0] s);
    logic signed [95:0] r, sum;
    logic [N*96-1:0]    out;
    r = s == 6'd0 ? 96'sd0 : 96'sd1 <<< (s - 6'd1);
    for (int unsigned j = 0; j < N; j++) begin
      sum = ($signed({{16{p[160*j+159]}}, p[160*j+80 +: 80]}) <<< 16)
            + $signed({{16{p[160*j+79]}}, p[160*j +: 80]}) + r;
      out[96*j +: 96] = sum >>> s;
    end
    add_of = out;
  endfunction

  // ---- SAT: sat8(x + Z), then the function ------------------------------------------------
  // x outside [-512, 511] (bits 95..9 not all equal) saturates by its sign
  // whatever Z; inside, x + Z is an 11-bit add.
  function automatic logic [7:0] saturate(logic [95:0] x, logic [7:0] z);
    logic               narrow;
    logic signed [10:0] t;
    narrow = &x[95:9] || ~|x[95:9];
    t = $signed(x[10:0]) + 11'($signed(z));
    if (!narrow) saturate = x[95] ? 8'h80 : 8'h7f;
    else if (t < -11'sd128) saturate = 8'h80;
    else if (t > 11'sd127) saturate = 8'h7f;
    else saturate = t[7:0];
  endfunction

  logic [N*8-1:0] sat_v;
  always_comb begin
    logic [7:0] y;
    for (int unsigned j = 0; j < N; j++) begin
      y = saturate(add_q[96*j +: 96], add_ctl_q.z);
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
  assign busy_o = reading || pooling || v0_valid_q || v1_ctl_q.valid || p0_valid_q || |g_valid_q
                  || x_ctl_q.valid || mul_ctl_q.valid || add_ctl_q.valid || wr_busy;

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
      g_valid_q <= '0;
      g_last_q <= '0;
      g_row_q <= '0;
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
      // GELU: RD's control, then one stage a cycle (g_*_q[k] is stage G(k + 1)'s input)
      g_valid_q <= {g_valid_q[4:0], gelu_rd};
      g_last_q <= {g_last_q[4:0], row + 1 == job.op2};
      g_row_q <= {g_row_q[0 +: 5*32], job.op1 + row};
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
  // their stage's valid bit, in the control beside them, says when they count,
  // and enables them.
  always_ff @(posedge clk_i) begin
    if (x_ctl_q.valid) mul_q <= mul_of(x_q, x_ctl_q.m);
    if (mul_ctl_q.valid) add_q <= add_of(mul_q, mul_ctl_q.s);
    if (g_valid_q[0]) g1_qx_q <= gelu_g1(prd_q, job_q.norm_k2, job_q.norm_sh);
    if (g_valid_q[1]) begin
      g2_q <= gelu_g2(g1_qx_q, job_q.norm_k0);
      g2_qx_q <= g1_qx_q;
    end
    if (g_valid_q[2]) begin
      g3_q <= gelu_g3(g2_q);
      g3_sgn_q <= g2_q;
      g3_qx_q <= g2_qx_q;
    end
    if (g_valid_q[3]) begin
      g4_w_q <= gelu_g4(g3_q, g3_sgn_q, job_q.norm_k1);
      g4_qx_q <= g3_qx_q;
    end
    if (g_valid_q[4]) g5_q <= gelu_g5(g4_qx_q, g4_w_q);
  end

`ifndef SYNTHESIS
  // The controller's write order: one front end hands a value to MUL a cycle.
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (32'(act_rd) + 32'(v1_ctl_q.valid) + 32'(pool_done) + 32'(g_valid_q[5]) <= 1)
        else $error("activation unit: two instructions enter the requantizer in one cycle");
    end
  end
`endif

endmodule
