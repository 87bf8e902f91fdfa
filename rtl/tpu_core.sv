// tpu_core: the units of docs/microarchitecture.md wired together, with the
// unified buffer and the accumulators. Host memory, weight memory and the
// program sit behind ports that the C++ testbench (sim/rtl) serves
// combinationally; all timing lives in the units. The memory channels'
// latencies and bandwidths are inputs, held for the whole run (a strap or a
// configuration register in a chip; the testbench passes the configuration's
// values), so one build runs every timing its ports are wide enough for.
// Mirrors src/model/tpu.cpp.
module tpu_core
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_codes_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                        clk_i,
  input  logic                        rst_ni,
  // Program.
  output logic [31:0]                 fetch_pc_o,
  input  logic [InstrBits-1:0]        fetch_instr_i,
  input  logic [31:0]                 prog_len_i,
  // The memory channels' timing (docs/microarchitecture.md, "Parameters"):
  // Lh and Bh <= HostRowsPerCycle * N, Lw and Bw <= WeightRowsPerCycle * N.
  input  logic [31:0]                 host_latency_i,
  input  logic [31:0]                 host_bytes_per_cycle_i,
  input  logic [31:0]                 host_layout_i,  // Hw, host_layout_cycles (HWT)
  // ub_weight_path: RWU allowed (1) or a fault (0), a strap like the timing.
  input  logic                        ub_weight_path_i,
  input  logic [31:0]                 weight_latency_i,
  input  logic [31:0]                 weight_bytes_per_cycle_i,
  // Host memory: rows row .. row + count - 1, row + i in bits
  // [i*N*8 +: N*8] (tpu_host_dma).
  output logic                        host_rd_valid_o,
  output logic [31:0]                 host_rd_row_o,
  output logic [$clog2(HostRowsPerCycle+1)-1:0] host_rd_count_o,
  input  logic [HostRowsPerCycle*ArrayN*8-1:0]  host_rd_data_i,
  output logic                        host_wr_valid_o,
  output logic [31:0]                 host_wr_row_o,
  output logic [$clog2(HostRowsPerAccRow*HostRowsPerCycle+1)-1:0] host_wr_count_o,
  output logic [HostRowsPerCycle*4*ArrayN*8-1:0] host_wr_data_o,
  // Weight memory: rows row .. row + count - 1 of a tile, row + i in bits
  // [i*N*8 +: N*8] (tpu_weight_dma).
  output logic                        wmem_rd_valid_o,
  output logic [31:0]                 wmem_rd_tile_o,
  output logic [$clog2(ArrayN)-1:0]   wmem_rd_row_o,
  output logic [$clog2(WeightRowsPerCycle+1)-1:0] wmem_rd_count_o,
  input  logic [WeightRowsPerCycle*ArrayN*8-1:0]  wmem_rd_data_i,
  // An HWT's write of weight memory, in its last cycle: tile wmem_wr_tile_o
  // made by the host of host rows wmem_wr_host_row_o ..+wmem_wr_rows_o,
  // transposed if wmem_wr_transpose_o (tpu_host_dma); written at the end
  // of the cycle.
  output logic                        wmem_wr_valid_o,
  output logic [31:0]                 wmem_wr_tile_o,
  output logic [31:0]                 wmem_wr_host_row_o,
  output logic [31:0]                 wmem_wr_rows_o,
  output logic                        wmem_wr_transpose_o,
  // Observation.
  output logic [CycleW-1:0]           cycle_o,
  output logic                        issue_o,
  output logic                        stall_o,
  output logic [StallCauseW-1:0]      stall_cause_o,
  output logic                        halted_o,
  output logic                        fault_o,
  output logic [FaultCodeW-1:0]       fault_code_o,
  output logic [CycleW-1:0]           fault_cycle_o,
  output retire_t                     host_dma_retire_o,
  output retire_t                     weight_dma_retire_o,
  output retire_t                     array_retire_o,
  output retire_t                     array_start_o,
  output retire_t                     act_retire_o,
  output logic [3:0]                  busy_o,        // host, weight, array, activation
  output logic                        row_valid_o,
  output logic [ArrayN-1:0]           acc_write_o
);

  localparam int unsigned N = ArrayN;
  localparam int unsigned HostPortRows = HostRowsPerCycle;
  localparam int unsigned UbAddrW = $clog2(UbRows), AccAddrW = $clog2(AccRows);

  logic [CycleW-1:0] cycle_q;
  always_ff @(posedge clk_i) cycle_q <= !rst_ni ? '0 : cycle_q + 1;
  assign cycle_o = cycle_q;

  unit_cmd_t host_dma_cmd, weight_dma_cmd, array_cmd, act_cmd;
  logic [31:0] tiles_popped;
  // The tiles loaded into the shadow: for waveforms (the array waits for
  // them itself).
  /* verilator lint_off UNUSEDSIGNAL */
  logic [31:0] tiles_loaded;
  /* verilator lint_on UNUSEDSIGNAL */
  logic        array_ready;
  logic [31:0] rw_tile_query;
  logic        rw_tile_hit;
  logic        rwu_retire;
  retire_t     host_dma_retire;
  assign host_dma_retire_o = host_dma_retire;

  tpu_controller controller (
    .clk_i, .rst_ni, .cycle_i(cycle_q),
    .fetch_pc_o, .fetch_instr_i, .prog_len_i,
    .tiles_popped_i(tiles_popped), .array_ready_i(array_ready), .array_retire_i(array_retire_o),
    .host_dma_retire_i(host_dma_retire), .host_dma_busy_i(busy_o[0]),
    .weight_dma_busy_i(busy_o[1]), .weight_dma_retire_i(weight_dma_retire_o),
    .rwu_retire_i(rwu_retire), .ub_weight_path_i,
    .rw_tile_query_o(rw_tile_query), .rw_tile_hit_i(rw_tile_hit),
    .host_dma_cmd_o(host_dma_cmd), .weight_dma_cmd_o(weight_dma_cmd),
    .array_cmd_o(array_cmd), .act_cmd_o(act_cmd),
    .issue_o, .stall_o, .stall_cause_o, .halted_o, .fault_o, .fault_code_o, .fault_cycle_o
  );

  // ---- Unified buffer: two write ports (host DMA, HostRowsPerCycle rows
  // wide, and activation unit), five read ports (host DMA, HostRowsPerCycle
  // rows wide; array; activation unit's POOL and VEC operand A; its VEC
  // operand B; weight DMA's RWU). The interlocks keep the units
  // on different rows. A read port sees the buffer's registers, so
  // a write lands at the end of its cycle: visible from the next cycle, to its
  // own unit too (a POOL reading the rows it writes).
  logic [N*8-1:0] ub_q [UbRows] /* verilator public_flat_rw */;
  logic           ub_wr_host_valid, ub_wr_act_valid, ub_rd_act_valid, ub_rd_act2_valid;
  // Row addresses are 32-bit fields and the memories index with their low
  // bits: the controller faults on any address past a memory's end before
  // issue, so the high bits are zero whenever a port is used.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [31:0]    ub_wr_host_row, ub_wr_act_row, ub_rd_host_row, ub_rd_array_row, ub_rd_act_row;
  logic [31:0]    ub_rd_act2_row, ub_rd_wdma_row;
  logic [31:0]    acc_rd_act_row, acc_rd_host_row;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [N*8-1:0] ub_wr_act_data;
  logic [HostPortRows*N*8-1:0] ub_wr_host_data, ub_rd_host_data;
  logic [$clog2(HostPortRows+1)-1:0] ub_wr_host_count;
  always_ff @(posedge clk_i) begin
    for (int unsigned i = 0; i < HostPortRows; i++)
      if (ub_wr_host_valid && i < 32'(ub_wr_host_count))
        ub_q[UbAddrW'(ub_wr_host_row + i)] <= ub_wr_host_data[i*N*8 +: N*8];
    if (ub_wr_act_valid) ub_q[ub_wr_act_row[$clog2(UbRows)-1:0]] <= ub_wr_act_data;
  end
  always_comb begin
    for (int unsigned i = 0; i < HostPortRows; i++)
      ub_rd_host_data[i*N*8 +: N*8] = ub_q[UbAddrW'(ub_rd_host_row + i)];
  end

  // ---- Accumulators: one bank per column, each with the array's
  // read-modify-write port; whole rows are read by the activation unit and
  // the host DMA.
  logic [31:0]       acc_q [AccRows][N] /* verilator public_flat_rw */;
  logic [N-1:0]      acc_wr_valid, acc_wr_overwrite;
  logic [N*32-1:0]   acc_wr_row, acc_wr_data;
  logic [N*32-1:0]   acc_rd_act_data;
  logic [HostPortRows*N*32-1:0] acc_rd_host_data;
  always_ff @(posedge clk_i) begin
    for (int unsigned j = 0; j < N; j++) begin
      if (acc_wr_valid[j]) begin
        logic [$clog2(AccRows)-1:0] r;
        r = acc_wr_row[32*j +: $clog2(AccRows)];
        acc_q[r][j] <= acc_wr_overwrite[j] ? acc_wr_data[32*j +: 32]
                                           : acc_q[r][j] + acc_wr_data[32*j +: 32];
      end
    end
  end
  always_comb begin
    for (int unsigned j = 0; j < N; j++) begin
      acc_rd_act_data[32*j +: 32] = acc_q[acc_rd_act_row[$clog2(AccRows)-1:0]][j];
      for (int unsigned i = 0; i < HostPortRows; i++)
        acc_rd_host_data[(i*N + j)*32 +: 32] = acc_q[AccAddrW'(acc_rd_host_row + i)][j];
    end
  end

  tpu_host_dma host_dma (
    .clk_i, .rst_ni, .cycle_i(cycle_q), .cmd_i(host_dma_cmd),
    .latency_i(host_latency_i), .bytes_per_cycle_i(host_bytes_per_cycle_i),
    .layout_i(host_layout_i),
    .host_rd_valid_o, .host_rd_row_o, .host_rd_count_o, .host_rd_data_i,
    .host_wr_valid_o, .host_wr_row_o, .host_wr_count_o, .host_wr_data_o,
    .ub_wr_valid_o(ub_wr_host_valid), .ub_wr_row_o(ub_wr_host_row),
    .ub_wr_count_o(ub_wr_host_count), .ub_wr_data_o(ub_wr_host_data),
    .ub_rd_row_o(ub_rd_host_row), .ub_rd_data_i(ub_rd_host_data),
    .acc_rd_row_o(acc_rd_host_row), .acc_rd_data_i(acc_rd_host_data),
    .wmem_wr_valid_o, .wmem_wr_tile_o, .wmem_wr_host_row_o, .wmem_wr_rows_o, .wmem_wr_transpose_o,
    .retire_o(host_dma_retire), .busy_o(busy_o[0])
  );

  // The weight DMA writes the tile rows streaming in into the array's weight
  // FIFO memory, WeightRowsPerCycle rows of N bytes wide.
  logic                                 fifo_wr_valid, tile_done;
  logic [$clog2(N)-1:0]                 fifo_wr_row;
  logic [$clog2(WeightRowsPerCycle+1)-1:0] fifo_wr_count;
  logic [WeightRowsPerCycle*N*8-1:0]    fifo_wr_data;
  logic [$clog2(FifoDepth+1)-1:0]       fifo_wr_pos, rwu_wr_pos;
  logic                                 rwu_wr_valid, rwu_wr_first, rwu_wr_transpose;
  logic [$clog2(N)-1:0]                 rwu_wr_index;
  logic [N*8-1:0]                       rwu_wr_data;
  tpu_weight_dma weight_dma (
    .clk_i, .rst_ni, .cycle_i(cycle_q), .cmd_i(weight_dma_cmd),
    .latency_i(weight_latency_i), .bytes_per_cycle_i(weight_bytes_per_cycle_i),
    .wmem_rd_valid_o, .wmem_rd_tile_o, .wmem_rd_row_o, .wmem_rd_count_o, .wmem_rd_data_i,
    .fifo_wr_valid_o(fifo_wr_valid), .fifo_wr_pos_o(fifo_wr_pos), .fifo_wr_row_o(fifo_wr_row),
    .fifo_wr_count_o(fifo_wr_count), .fifo_wr_data_o(fifo_wr_data), .tile_done_o(tile_done),
    .ub_rd_row_o(ub_rd_wdma_row), .ub_rd_data_i(ub_q[ub_rd_wdma_row[$clog2(UbRows)-1:0]]),
    .rwu_wr_valid_o(rwu_wr_valid), .rwu_wr_pos_o(rwu_wr_pos), .rwu_wr_index_o(rwu_wr_index),
    .rwu_wr_first_o(rwu_wr_first), .rwu_wr_transpose_o(rwu_wr_transpose),
    .rwu_wr_data_o(rwu_wr_data),
    .query_tile_i(rw_tile_query), .query_hit_o(rw_tile_hit),
    .retire_o(weight_dma_retire_o), .rwu_retire_o(rwu_retire), .busy_o(busy_o[1])
  );

  tpu_systolic_array systolic_array (
    .clk_i, .rst_ni, .cycle_i(cycle_q), .cmd_i(array_cmd), .ready_o(array_ready),
    .fifo_wr_valid_i(fifo_wr_valid), .fifo_wr_pos_i(fifo_wr_pos), .fifo_wr_row_i(fifo_wr_row),
    .fifo_wr_count_i(fifo_wr_count), .fifo_wr_data_i(fifo_wr_data), .tile_done_i(tile_done),
    .rwu_wr_valid_i(rwu_wr_valid), .rwu_wr_pos_i(rwu_wr_pos), .rwu_wr_index_i(rwu_wr_index),
    .rwu_wr_first_i(rwu_wr_first), .rwu_wr_transpose_i(rwu_wr_transpose),
    .rwu_wr_data_i(rwu_wr_data),
    .tiles_popped_o(tiles_popped), .tiles_loaded_o(tiles_loaded),
    .ub_rd_row_o(ub_rd_array_row), .ub_rd_data_i(ub_q[ub_rd_array_row[$clog2(UbRows)-1:0]]),
    .acc_wr_valid_o(acc_wr_valid), .acc_wr_overwrite_o(acc_wr_overwrite),
    .acc_wr_row_o(acc_wr_row), .acc_wr_data_o(acc_wr_data),
    .row_valid_o, .start_o(array_start_o), .retire_o(array_retire_o), .busy_o(busy_o[2])
  );
  assign acc_write_o = acc_wr_valid;

`ifndef SYNTHESIS
  // Every port address lies inside its memory: the controller faults on any
  // instruction whose ranges do not, before issuing it.
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!ub_wr_host_valid || ub_wr_host_row + 32'(ub_wr_host_count) <= UbRows)
        else $error("UB write row %0d out of range at cycle %0d", ub_wr_host_row, cycle_q);
      assert (!ub_wr_act_valid || ub_wr_act_row < UbRows)
        else $error("UB write row %0d out of range at cycle %0d", ub_wr_act_row, cycle_q);
      assert (!row_valid_o || ub_rd_array_row < UbRows)
        else $error("UB read row %0d out of range at cycle %0d", ub_rd_array_row, cycle_q);
      assert (!ub_rd_act_valid || ub_rd_act_row < UbRows)
        else $error("UB read row %0d out of range at cycle %0d", ub_rd_act_row, cycle_q);
      assert (!ub_rd_act2_valid || ub_rd_act2_row < UbRows)
        else $error("UB read row %0d out of range at cycle %0d", ub_rd_act2_row, cycle_q);
      assert (!rwu_wr_valid || ub_rd_wdma_row < UbRows)
        else $error("UB read row %0d out of range at cycle %0d", ub_rd_wdma_row, cycle_q);
      for (int unsigned j = 0; j < N; j++)
        assert (!acc_wr_valid[j] || acc_wr_row[32*j +: 32] < AccRows)
          else $error("ACC write row %0d out of range at cycle %0d", acc_wr_row[32*j +: 32], cycle_q);
    end
  end
`endif

  tpu_activation_unit activation_unit (
    .clk_i, .rst_ni, .cmd_i(act_cmd),
    .acc_rd_row_o(acc_rd_act_row), .acc_rd_data_i(acc_rd_act_data),
    .ub_rd_valid_o(ub_rd_act_valid), .ub_rd_row_o(ub_rd_act_row),
    .ub_rd_data_i(ub_q[ub_rd_act_row[$clog2(UbRows)-1:0]]),
    .ub_rd2_valid_o(ub_rd_act2_valid), .ub_rd2_row_o(ub_rd_act2_row),
    .ub_rd2_data_i(ub_q[ub_rd_act2_row[$clog2(UbRows)-1:0]]),
    .ub_wr_valid_o(ub_wr_act_valid), .ub_wr_row_o(ub_wr_act_row), .ub_wr_data_o(ub_wr_act_data),
    .retire_o(act_retire_o), .busy_o(busy_o[3])
  );

endmodule
