// tpu_systolic_row: PE row k of the systolic array, N PEs side by side, with
// this row's stage of the input skew and of the weight loader's shift wave.
// Every row is the same module (k is where it sits, not a parameter), and it
// is kept out of line (no_inline_module), so the Verilated array is N calls of
// one row's code. Its inputs are public to Verilator (public_flat_rd, which
// still lets tpu_core be inlined): otherwise Verilator reads each row's
// inputs straight from the neighbour driving them, and the rows' code differs
// by the names it reads: N copies of it.
//
// Input skew. A UB row read at u enters the array's lane register at u + 1;
// row k receives it at u + 1 + k on lanes_i, with lane k at the bottom: it
// feeds that lane to PE (k, 0) and passes the lanes of the rows below one
// cycle later, shifted down a lane (lanes_o). So lane k is delayed 1 + k
// cycles by a triangle of registers. The row's metadata (row_i: valid, its
// weight set, its ACC row, ...) moves down with it, one stage per row, and
// leaves row N - 1 at u + N + 1, when column 0's sum is written.
//
// Weight shift. The load of a tile into the shadow set starts at L with a
// one-cycle wave entering row 0 (wave_i), which moves down a row per cycle:
// row k shifts from L + k, when the wave reaches it, to the load's last cycle
// L + N - 1 (shift_done_i), so that tile row k, entering row 0 at
// L + N - 1 - k, lands in PE row k at L + N - 1. PE row k is overwritten no
// earlier than L + k (docs/microarchitecture.md, "Weight buffers").
module tpu_systolic_row
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic [ArrayN*8-1:0]   lanes_i      /*verilator public_flat_rd*/,
  input  array_row_t            row_i        /*verilator public_flat_rd*/,
  output logic [ArrayN*8-1:0]   lanes_o,
  output array_row_t            row_o,
  input  logic [ArrayN*32-1:0]  psum_i       /*verilator public_flat_rd*/,
  output logic [ArrayN*32-1:0]  psum_o,
  input  logic                  wave_i       /*verilator public_flat_rd*/,
  input  logic                  shift_done_i /*verilator public_flat_rd*/,
  input  logic                  shift_set_i  /*verilator public_flat_rd*/,
  input  logic [ArrayN*8-1:0]   w_i          /*verilator public_flat_rd*/,
  output logic [ArrayN*8-1:0]   w_o,
  output logic                  wave_o
);
  /*verilator no_inline_module*/

  localparam int unsigned N = ArrayN;

  // The input and weight set of each PE, from the left edge on: PE j takes
  // entry j and drives entry j + 1.
  logic [(N+1)*8-1:0] x_chain;
  logic [N:0]         set_chain, valid_chain;
  logic               shift, shifting_q;

  // A row that is not valid enters with zero lanes (the array's lane register
  // holds zeros then) and set 0, like the model's empty rows; the PEs keep
  // their registers while it passes (tpu_pe).
  assign x_chain[7:0] = lanes_i[7:0];
  assign set_chain[0] = row_i.valid && row_i.weight_set;
  assign valid_chain[0] = row_i.valid;
  assign shift = wave_i || shifting_q;

  for (genvar j = 0; j < N; j++) begin : g_pe
    tpu_pe pe (
      .clk_i, .rst_ni,
      .x_i(x_chain[8*j +: 8]), .set_i(set_chain[j]), .valid_i(valid_chain[j]),
      .x_o(x_chain[8*(j+1) +: 8]), .set_o(set_chain[j+1]), .valid_o(valid_chain[j+1]),
      .psum_i(psum_i[32*j +: 32]), .psum_o(psum_o[32*j +: 32]),
      .shift_i(shift), .shift_set_i,
      .w_i(w_i[8*j +: 8]), .w_o(w_o[8*j +: 8])
    );
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      lanes_o <= '0;
      row_o <= '0;
      shifting_q <= 1'b0;
      wave_o <= 1'b0;
    end else begin
      lanes_o <= {8'd0, lanes_i[N*8-1:8]};
      row_o <= row_i;
      shifting_q <= shift && !shift_done_i;
      wave_o <= wave_i;
    end
  end

  // The last PE's input and set leave the row unused.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [9:0] x_past_edge;
  assign x_past_edge = {valid_chain[N], set_chain[N], x_chain[N*8 +: 8]};
  /* verilator lint_on UNUSEDSIGNAL */

endmodule
