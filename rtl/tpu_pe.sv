// tpu_pe: one processing element of the systolic array (PE (k, j) of
// docs/microarchitecture.md, "Systolic array"): an int8 x int8 multiplier, an
// int32 adder and two weight registers, one per weight set. In every cycle it
// adds x * W[set] to the partial sum from the PE above and registers it for
// the PE below, and registers x and its row's set for the PE on the right:
// the input moves one column right per cycle, the sum one row down.
//
// Which set a row uses travels with the row (set_i), so rows of the old and
// the new tile can be in the array together after a switch. So does whether
// a row is there at all (valid_i): x, the set and the partial sum are
// registered only for a valid row (an enable, which a clock gate can take)
// and hold otherwise; they have no reset, since no one reads them before a
// valid row has written them (the array writes a column's sum only for a
// valid row, and a valid row's sum in PE row k comes from the same row's in
// row k - 1). The valid bit and the weight registers are reset: the weights
// of a set never loaded are zero, as in the model. The set being
// loaded (the shadow, shift_set_i) is the weight shift chain down the column:
// in a shift cycle its register takes the register of the PE above, and
// w_o passes it on to the PE below. The array shifts a set only while no row
// in flight uses it (docs/microarchitecture.md, "Weight buffers").
module tpu_pe (
  input  logic        clk_i,
  input  logic        rst_ni,
  // From the PE on the left (the array's skewed input at column 0), and on.
  input  logic [7:0]  x_i,
  input  logic        set_i,
  input  logic        valid_i,
  output logic [7:0]  x_o,
  output logic        set_o,
  output logic        valid_o,
  // From the PE above (0 in PE row 0), and on down.
  input  logic [31:0] psum_i,
  output logic [31:0] psum_o,
  // The weight shift chain through set shift_set_i.
  input  logic        shift_i,
  input  logic        shift_set_i,
  input  logic [7:0]  w_i,
  output logic [7:0]  w_o
);

  logic [7:0]         w0_q, w1_q;
  logic [7:0]         x_q;
  logic               set_q, valid_q;
  logic [31:0]        psum_q;
  logic signed [15:0] product;

  // int8 x int8 in 16 bits, added in 32 bits wrapping like the model's uint32.
  assign product = $signed(x_i) * $signed(set_i ? w1_q : w0_q);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      w0_q <= '0;
      w1_q <= '0;
      valid_q <= 1'b0;
    end else begin
      valid_q <= valid_i;
      if (shift_i && !shift_set_i) w0_q <= w_i;
      if (shift_i && shift_set_i) w1_q <= w_i;
    end
  end

  // The datapath: enabled by the row's valid bit, not reset.
  always_ff @(posedge clk_i) begin
    if (valid_i) begin
      x_q <= x_i;
      set_q <= set_i;
      psum_q <= psum_i + {{16{product[15]}}, product};
    end
  end

  assign x_o = x_q;
  assign set_o = set_q;
  assign valid_o = valid_q;
  assign psum_o = psum_q;
  assign w_o = shift_set_i ? w1_q : w0_q;

endmodule
