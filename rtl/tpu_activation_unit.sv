// tpu_activation_unit: executes ACT. Row i of an ACT started at s reads
// ACC[acc_row + i] at s + i, requantizes and activates it in N lanes, and
// writes UB[ub_row + i] at s + i + act_latency (docs/microarchitecture.md,
// "Activation unit"). Mirrors src/model/activation_unit.cpp; the tables are
// generated from the model's (tpu_act_pkg).
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
  logic        reading_q;
  logic [31:0] row_q;
  // Yosys takes an unpacked array of structs for a single struct: the stages
  // are plain vectors of $bits(stage_t) (a WIDTH warning if this drifts).
  localparam int unsigned StageBits = 2 + 32 + 32 + N * 8;
  logic [StageBits-1:0] stages_q [ActLatency];

  unit_cmd_t   job;
  logic        reading;
  logic [31:0] row;
  assign job     = cmd_i.valid ? cmd_i : job_q;
  assign reading = cmd_i.valid || reading_q;
  assign row     = cmd_i.valid ? '0 : row_q;
  assign acc_rd_row_o = job.op0 + row;

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

  // The lanes go to a plain vector: Yosys drops part-select writes to a
  // struct member made in a loop.
  logic [N*8-1:0] lanes;
  always_comb begin
    for (int unsigned j = 0; j < N; j++)
      lanes[8*j +: 8] = activate(requantize(acc_rd_data_i[32*j +: 32], job.requant_m,
                                            job.requant_s, job.requant_z),
                                 job.flags, job.requant_z);
  end

  stage_t first;
  always_comb begin
    first = '0;
    first.valid = reading;
    first.last = row + 1 == job.op2;
    first.seq = job.seq;
    first.ub_row = job.op1 + row;
    first.data = lanes;
  end

  // The row leaving the pipeline this cycle entered it act_latency cycles ago.
  stage_t out;
  assign out = stages_q[ActLatency-1];
  assign ub_wr_valid_o  = out.valid;
  assign ub_wr_row_o    = out.ub_row;
  assign ub_wr_data_o   = out.data;
  assign retire_o.valid = out.valid && out.last;
  assign retire_o.seq   = out.seq;

  // A module-level temporary, as Yosys reads struct members only of scalars.
  // Stages are read whole for their valid bit.
  /* verilator lint_off UNUSEDSIGNAL */
  stage_t busy_stage;
  /* verilator lint_on UNUSEDSIGNAL */
  always_comb begin
    busy_o = reading;
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
      row_q <= '0;
      for (int unsigned i = 0; i < ActLatency; i++) stages_q[i] <= '0;
    end else begin
      job_q <= job;
      reading_q <= reading && row + 1 != job.op2;
      row_q <= reading ? row + 1 : row;
      stages_q[0] <= first;
      for (int unsigned i = 1; i < ActLatency; i++) stages_q[i] <= stages_q[i-1];
    end
  end

endmodule
