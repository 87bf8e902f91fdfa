// tpu_host_dma: executes RHM (host memory -> UB), WHM (UB, or ACC with .A,
// -> host memory) and HWT (host memory -> weight memory), one at a time
// (docs/microarchitecture.md, "Host DMA", "Attention's second operand").
// Mirrors src/model/host_dma.cpp with the default host memory target.
//
// An HWT is timed as a transfer of a whole tile, N rows of N bytes, after
// Lh + Hw cycles (Hw: host_layout_cycles, the host's time to lay the tile
// out): it completes in d = c + Lh + Hw + ceil(N*N / Bh). The host lays the
// tile out, not the core: in d the DMA asks the testbench (the host and its
// memories) to write weight tile op1 from host rows op0 ..+op2, transposed
// with .T (wmem_wr_*), which it does at the end of d; an RW of that tile
// issues at d + 1 (the controller's RAW), and no RW of it is in flight (its
// WAR), so no read of weight memory sees the write's cycle.
//
// A transfer of `rows` rows of b bytes (N, or 4N for WHM.A) waits Lh cycles
// from its start, then streams Bh bytes a cycle; a row moves in the cycle its
// last byte arrives, cycle ceil((r + 1) * b / Bh) - 1 of the stream for row
// r, and the transfer retires in the cycle of its last row. Lh and Bh are
// inputs held for the whole run (the testbench's configuration), not build
// parameters: a countdown passes the latency, and a byte count finds the rows
// without a division (the bytes of the next row streamed so far, plus Bh a
// cycle; every b of them complete a row). Up to HostRowsPerCycle rows move in
// a cycle, so Bh may be up to HostRowsPerCycle * N; the host memory, UB and
// accumulator ports are that many rows wide.
module tpu_host_dma
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                                          clk_i,
  input  logic                                          rst_ni,
  // The cycle number, for the assertions' messages only.
  /* verilator lint_off UNUSEDSIGNAL */
  input  logic [CycleW-1:0]                             cycle_i,
  input  unit_cmd_t                                     cmd_i,
  /* verilator lint_on UNUSEDSIGNAL */
  // The host channel's timing (Lh, Bh), constant while the core runs.
  input  logic [31:0]                                   latency_i,
  input  logic [31:0]                                   bytes_per_cycle_i,
  // The host's time to lay out an HWT's tile (Hw), constant while the core runs.
  input  logic [31:0]                                   layout_i,
  // Host memory: rows row .. row + count - 1, row + i in bits [i*N*8 +: N*8].
  output logic                                          host_rd_valid_o,
  output logic [31:0]                                   host_rd_row_o,
  output logic [$clog2(HostRowsPerCycle+1)-1:0]         host_rd_count_o,
  input  logic [HostRowsPerCycle*ArrayN*8-1:0]          host_rd_data_i,
  output logic                                          host_wr_valid_o,
  output logic [31:0]                                   host_wr_row_o,
  output logic [$clog2(HostRowsPerAccRow*HostRowsPerCycle+1)-1:0] host_wr_count_o,
  output logic [HostRowsPerCycle*4*ArrayN*8-1:0]        host_wr_data_o,
  // Unified buffer: the same layout, `count` rows written from row; reads
  // see rows row .. row + Rows - 1.
  output logic                                          ub_wr_valid_o,
  output logic [31:0]                                   ub_wr_row_o,
  output logic [$clog2(HostRowsPerCycle+1)-1:0]         ub_wr_count_o,
  output logic [HostRowsPerCycle*ArrayN*8-1:0]          ub_wr_data_o,
  output logic [31:0]                                   ub_rd_row_o,
  input  logic [HostRowsPerCycle*ArrayN*8-1:0]          ub_rd_data_i,
  // Accumulators (WHM.A): rows row .. row + Rows - 1, N int32 each.
  output logic [31:0]                                   acc_rd_row_o,
  input  logic [HostRowsPerCycle*ArrayN*32-1:0]         acc_rd_data_i,
  // HWT: in its last cycle, weight tile tile made of host rows host_row ..
  // host_row + rows - 1 (rows <= N), transposed if transpose.
  output logic                                          wmem_wr_valid_o,
  output logic [31:0]                                   wmem_wr_tile_o,
  output logic [31:0]                                   wmem_wr_host_row_o,
  output logic [31:0]                                   wmem_wr_rows_o,
  output logic                                          wmem_wr_transpose_o,
  output retire_t                                       retire_o,
  output logic                                          busy_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned Rows = HostRowsPerCycle;
  localparam int unsigned CountW = $clog2(Rows + 1);
  // Host rows one cycle's write covers: up to Rows UB rows, or Rows ACC rows
  // of four host rows each.
  localparam int unsigned HostCountW = $clog2(HostRowsPerAccRow * Rows + 1);
  // The bytes of the next row so far (< 4N) plus one cycle's (<= Rows * N).
  localparam int unsigned ByteW = $clog2((HostRowsPerAccRow + Rows) * N);

  // The transfer in progress: its command, the latency still to wait after
  // this cycle, the rows moved and the bytes of the next row streamed.
  unit_cmd_t        job_q;
  logic             active_q;
  logic [31:0]      wait_q;
  logic [31:0]      done_q;
  logic [ByteW-1:0] part_q;

  // This cycle's transfer: a command starts in the cycle it arrives.
  unit_cmd_t   job;
  logic        active;
  logic [31:0] wait_now, done_rows;
  logic [ByteW-1:0] part;
  assign job       = cmd_i.valid ? cmd_i : job_q;
  assign active    = cmd_i.valid || active_q;
  // An HWT waits the host's layout time too (Lh + Hw < 2^31: the
  // configuration's limits).
  assign wait_now  = !cmd_i.valid ? wait_q :
                     cmd_i.opcode == 8'(OpHwt) ? latency_i + layout_i : latency_i;
  assign done_rows = cmd_i.valid ? '0 : done_q;
  assign part      = cmd_i.valid ? '0 : part_q;

  logic is_rhm, is_hwt, is_acc;
  assign is_rhm = job.opcode == 8'(OpRhm);
  assign is_hwt = job.opcode == 8'(OpHwt);
  assign is_acc = job.opcode == 8'(OpWhm) && job.flags[FlagWhmA];

  // A stream cycle: Bh more bytes; each b of them complete a row, at most
  // Rows, and no more than the rows left (the last row completes the job).
  logic              stream, last;
  logic [ByteW-1:0]  bytes, rest, row_bytes;
  logic [CountW-1:0] completed, moved;
  logic [31:0]       left;
  assign stream    = active && wait_now == '0;
  assign row_bytes = is_acc ? ByteW'(HostRowsPerAccRow * N) : ByteW'(N);
  assign bytes     = part + ByteW'(bytes_per_cycle_i);
  always_comb begin
    completed = '0;
    rest = bytes;
    for (int unsigned k = 1; k <= Rows; k++) begin
      if (32'(bytes) >= k * 32'(row_bytes)) begin
        completed = CountW'(k);
        rest = ByteW'(32'(bytes) - k * 32'(row_bytes));
      end
    end
  end
  // An HWT streams a whole tile, N rows, whatever its rows.
  assign left  = (is_hwt ? 32'(N) : job.op2) - done_rows;
  assign last  = stream && 32'(completed) >= left;
  assign moved = !stream ? '0 : last ? CountW'(left) : completed;

  assign host_rd_valid_o = is_rhm && moved != '0;
  assign host_rd_row_o   = job.op0 + done_rows;
  assign host_rd_count_o = moved;
  assign ub_wr_valid_o   = is_rhm && moved != '0;
  assign ub_wr_row_o     = job.op1 + done_rows;
  assign ub_wr_count_o   = moved;
  assign ub_wr_data_o    = host_rd_data_i;
  assign ub_rd_row_o     = job.op0 + done_rows;
  assign acc_rd_row_o    = job.op0 + done_rows;
  assign host_wr_valid_o = !is_rhm && !is_hwt && moved != '0;
  assign host_wr_row_o   = job.op1 + (is_acc ? done_rows * HostRowsPerAccRow : done_rows);
  assign host_wr_count_o = is_acc ? HostCountW'(moved) * HostCountW'(HostRowsPerAccRow) : HostCountW'(moved);
  assign host_wr_data_o  = is_acc ? acc_rd_data_i : {(Rows * 3 * N * 8)'(0), ub_rd_data_i};

  assign wmem_wr_valid_o     = is_hwt && last;
  assign wmem_wr_tile_o      = job.op1;
  assign wmem_wr_host_row_o  = job.op0;
  assign wmem_wr_rows_o      = job.op2;
  assign wmem_wr_transpose_o = job.flags[FlagHwtT];

  assign retire_o.valid = last;
  assign retire_o.seq   = job.seq;
  assign busy_o         = active;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      job_q <= '0;
      active_q <= 1'b0;
      wait_q <= '0;
      done_q <= '0;
      part_q <= '0;
    end else begin
      job_q <= job;
      active_q <= active && !last;
      wait_q <= wait_now == '0 ? '0 : wait_now - 32'd1;
      done_q <= done_rows + 32'(moved);
      part_q <= stream ? rest : part;
    end
  end

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      // The testbench keeps Bh within the ports' rows (rtl::unavailable).
      assert (bytes_per_cycle_i != '0 && bytes_per_cycle_i <= Rows * N)
        else $error("tpu_host_dma: host_bytes_per_cycle %0d outside 1..%0d at cycle %0d",
                    bytes_per_cycle_i, Rows * N, cycle_i);
      // One transfer at a time (the controller's unit-busy rule).
      assert (!cmd_i.valid || !active_q)
        else $error("tpu_host_dma: a command while busy at cycle %0d", cycle_i);
    end
  end
`endif

endmodule
