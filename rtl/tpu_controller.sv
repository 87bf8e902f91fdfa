// tpu_controller: fetches and issues one instruction per cycle, in order, with
// the hardware interlocks of docs/microarchitecture.md ("Controller"). It
// mirrors src/model/controller.cpp.
//
// A scoreboard holds each in-flight instruction's unit and memory ranges
// until its completion, with no cycle numbers: the activation unit's
// instructions run at a fixed rate, so at issue an entry gets the cycles it
// has left (the closed forms of model::duration) and counts them down; a
// host DMA instruction's entry is held until the host DMA retires it (its
// timing depends on the memory channel's, an input of the core), and the
// unit takes its next instruction from that cycle on; an MMC's entry is held
// until the array retires it (an MMC.S waits in the array for its weights,
// so its start is the array's to decide), the array retiring MMCs in order,
// and the array says when it takes the next MMC (array_ready_i). The weight
// DMA takes a request every cycle and its RWs have no entry: a SYNC or HLT
// waits for it to be idle. The one other unit that touches weight memory,
// the host DMA with an HWT (which writes a tile), has an entry, so an RW of
// that tile meets it as a RAW; for the WAR the other way, an HWT into a tile
// an RW in flight reads, the weight DMA says whether one is
// (rw_tile_query_o, rw_tile_hit_i). An RWU (ub_weight_path_i; without it a
// fault) has an entry for the UB rows it reads, held until the weight DMA
// retires it (in issue order among the RWUs: a ring of their slots, as for
// the MMCs); it counts against the FIFO's room like an RW, and the weight
// DMA takes its next instruction `rows` cycles after it. The
// activation unit's wait for its next instruction is a countdown too. Issue
// stalls, in this order, on a RAW/WAW/WAR hazard with another unit, a busy
// unit, a full weight FIFO, or a SYNC/HLT drain. Commands to the units are
// registered: a unit starts the cycle after issue (an MMC.S maybe later).
//
// SETQ, CMAP, CSTR, CTAP and CWIN set registers at issue that go out with
// every command (model::UnitCommand's requant and conv, the model's requant_
// and geometry_): an ACT, MMC.C or POOL uses the values of its issue cycle.
// An MMC.C reads the whole input map, UB rows ub_row .. ub_row + in_h * in_w
// - 1, and a POOL the map at map_row .. map_row + in_h * in_w - 1 (isa::accesses
// with the geometry): that range is its hazard and bounds range. in_h * in_w
// is kept in a register set with CMAP, and the window's size, win_h * win_w,
// in one set with CWIN: a POOL of `rows` output pixels takes rows * win_h *
// win_w + A + 1 cycles (model::duration, A = ActLatency), and the activation
// unit accepts its next ACT A cycles before the POOL's completion
// (model::occupancy: every instruction of the unit keeps the unit for its
// duration - A, so the next ACT's first write follows its last).
// A POOL issues only when no instruction of the activation unit is in flight
// (model::Controller::stall_cause): it reads UB rows an earlier ACT may still
// be writing, which the hazard check between units does not see.
//
// VSRC and VSCL set the vector registers (isa::VecRegs), sent with every
// command like the others. A VEC has three ranges, A's rows, B's rows (the
// one row b_row with broadcast) and its output, so an entry holds three; it
// runs as an ACT with two more front-end stages and operand B read a cycle
// ahead (duration rows + A + 3, occupancy rows + 3) and issues, like a POOL,
// only when no instruction of the activation unit is in flight.
//
// NGEO and NCON set the normalization registers (isa::NormRegs), sent with
// every command like the others. A GELU streams UB rows like a VEC's operand A
// (duration rows + A + 6, occupancy rows + 6); an SMAX or LNRM makes three
// passes over each token's G rows (duration 3 * G * rows + A + 8, occupancy
// 3 * G * rows + 8) and reads and writes the hull of its tokens' rows, UB
// rows x_row .. x_row + (G - 1) * stride + rows - 1 (isa::NormRegs::span):
// (G - 1) * stride is kept in a register set with NGEO, and so are 3 * G and
// the token's values D (NormRegs::token_values). Like a POOL or VEC, each of
// the three issues only when no instruction of the activation unit is in
// flight.
module tpu_controller
  import tpu_isa_pkg::*;
  import tpu_config_pkg::*;
  import tpu_codes_pkg::*;
  import tpu_core_pkg::*;
(
  input  logic                 clk_i,
  input  logic                 rst_ni,
  // The cycle number, for the fault report and the assertions' messages only.
  input  logic [CycleW-1:0]    cycle_i,
  // Instruction fetch, served combinationally by the testbench.
  output logic [31:0]          fetch_pc_o,
  // The reserved bits are checked zero by the program loader (isa::decode).
  /* verilator lint_off UNUSEDSIGNAL */
  input  logic [InstrBits-1:0] fetch_instr_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  logic [31:0]          prog_len_i,
  // From the systolic array: tiles taken from the FIFO (registered there),
  // whether it takes an MMC now, and its MMCs' retirements, in issue order.
  input  logic [31:0]          tiles_popped_i,
  input  logic                 array_ready_i,
  /* verilator lint_off UNUSEDSIGNAL */
  input  retire_t              array_retire_i,
  /* verilator lint_on UNUSEDSIGNAL */
  // From the DMAs: the host DMA's retirement (its seq is the one in flight),
  // and whether each has an instruction in flight.
  /* verilator lint_off UNUSEDSIGNAL */
  input  retire_t              host_dma_retire_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  logic                 host_dma_busy_i,
  input  logic                 weight_dma_busy_i,
  // The weight DMA's retirement, and whether it is an RWU's (RWUs retire in
  // issue order among themselves; their entries are held until then).
  /* verilator lint_off UNUSEDSIGNAL */
  input  retire_t              weight_dma_retire_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  logic                 rwu_retire_i,
  // ub_weight_path: an RWU without it faults (FaultRwuNoPath).
  input  logic                 ub_weight_path_i,
  // Whether an RW of tile rw_tile_query_o (an HWT's) is in flight.
  output logic [31:0]          rw_tile_query_o,
  input  logic                 rw_tile_hit_i,
  // Commands, valid for one cycle.
  output unit_cmd_t            host_dma_cmd_o,
  output unit_cmd_t            weight_dma_cmd_o,
  output unit_cmd_t            array_cmd_o,
  output unit_cmd_t            act_cmd_o,
  // Observation: issue and stall this cycle, halt and fault state.
  output logic                 issue_o,
  output logic                 stall_o,
  output logic [StallCauseW-1:0] stall_cause_o,
  output logic                 halted_o,
  output logic                 fault_o,
  output logic [FaultCodeW-1:0] fault_code_o,
  output logic [CycleW-1:0]    fault_cycle_o
);

  // The MMCs, the activation unit's and the host DMA's instructions in
  // flight (2N + A + 8), and the RWUs' (FifoDepth at most).
  localparam int unsigned SbSize = 2 * ArrayN + ActLatency + 8 + FifoDepth;

  // An in-flight instruction: its unit and ranges, and the cycles it has
  // left after this one (it completes when they reach 0), or `held`: in
  // flight until its unit retires it (the host DMA's and the array's).
  typedef struct packed {
    logic                valid;
    logic                held;
    logic [2:0]          unit;
    access_t             a0;
    access_t             a1;
    access_t             a2;
    logic [CycleW-1:0]   left;
  } sb_entry_t;

  logic [31:0]       pc_q;
  logic [31:0]       seq_q;
  logic [31:0]       requant_m_q;
  logic [5:0]        requant_s_q;
  logic [7:0]        requant_z_q;
  // Convolution registers (isa::ConvGeometry), as encoded: in_h, in_w, out_w
  // unsigned; stride_y, stride_x unsigned; pad, y0, x0 two's complement.
  logic [15:0]       conv_in_h_q, conv_in_w_q, conv_out_w_q;
  logic [7:0]        conv_stride_y_q, conv_stride_x_q, conv_pad_q;
  logic [15:0]       conv_y0_q, conv_x0_q;
  logic [31:0]       conv_map_rows_q;  // in_h * in_w (ConvGeometry::map_rows)
  logic [7:0]        conv_win_h_q, conv_win_w_q;
  logic [15:0]       conv_window_q;    // win_h * win_w (ConvGeometry::window)
  // Vector registers (isa::VecRegs), as encoded.
  logic [23:0]       vec_b_row_q;
  logic              vec_broadcast_q;
  logic [7:0]        vec_za_q, vec_zb_q;
  logic [15:0]       vec_da_q, vec_db_q;
  logic [2:0]        vec_op_q;
  // Normalization registers (isa::NormRegs), as encoded, and what NGEO's
  // operands give: (groups - 1) * stride (a hull's rows beyond its tokens),
  // 3 * groups (an SMAX's or LNRM's cycles per token) and D.
  logic [15:0]       norm_groups_q;
  logic [23:0]       norm_stride_q;
  logic [3:0]        norm_sh_q;
  logic [31:0]       norm_k0_q, norm_k1_q, norm_k2_q;
  logic [39:0]       norm_span0_q;
  logic [17:0]       norm_passes_q;
  logic [23:0]       norm_d_q;
  // By unit id: the cycles after this one the unit cannot take an
  // instruction (the array and activation unit: until their previous one
  // has read its rows, or a POOL completed; the weight DMA: none).
  logic [CycleW-1:0] unit_wait_q [5];
  logic [31:0]       rw_issued_q, switches_q;
  logic              halted_q, fault_q;
  logic [FaultCodeW-1:0] fault_code_q;
  logic [CycleW-1:0] fault_cycle_q;
  // Yosys takes an unpacked array of structs for a single struct: entries are
  // plain vectors of $bits(sb_entry_t) (a WIDTH warning if this drifts).
  localparam int unsigned SbEntryBits = 1 + 1 + 3 + 3 * (1 + 2 + 34 + 34 + 1) + CycleW;
  localparam int unsigned SbValid = SbEntryBits - 1, SbHeld = SbEntryBits - 2;
  logic [SbEntryBits-1:0] sb_q [SbSize];
  // The entry of the host DMA's instruction, and the array's MMCs' entries
  // in issue order (a ring: the array retires them in that order).
  localparam int unsigned SlotW = $clog2(SbSize);
  logic [SlotW-1:0] host_slot_q;
  logic [SlotW-1:0] mmc_slot_q [SbSize];
  logic [SlotW-1:0] mmc_head_q, mmc_tail_q;
  // The RWUs' entries in issue order (the weight DMA retires them in it).
  logic [SlotW-1:0] rwu_slot_q [SbSize];
  logic [SlotW-1:0] rwu_head_q, rwu_tail_q;

  // ---- Decode ----------------------------------------------------------------
  logic [7:0]  opcode, flags;
  logic [31:0] op0, op1, op2;
  logic [15:0] op3;  // NGEO's width, in the last slot
  assign opcode = fetch_instr_i[OpcodeLsb +: OpcodeBits];
  assign flags  = fetch_instr_i[FlagsLsb +: FlagsBits];
  assign op0    = fetch_instr_i[Slot0Lsb +: SlotBits];
  assign op1    = fetch_instr_i[Slot1Lsb +: SlotBits];
  assign op2    = fetch_instr_i[Slot2Lsb +: SlotBits];
  assign op3    = fetch_instr_i[Slot3Lsb +: LastSlotBits];

  // An SMAX's or LNRM's hull, (groups - 1) * stride + rows, is at most
  // 2^40 + 2^24 rows: a count past 34 bits saturates (the instruction then
  // faults, past any memory's end, as the model does).
  logic [40:0] norm_span;
  logic [33:0] norm_count;
  assign norm_span  = {1'b0, norm_span0_q} + 41'(op2[23:0]);
  assign norm_count = |norm_span[40:34] ? '1 : norm_span[33:0];

  logic [2:0] unit;
  access_t    acc0, acc1, acc2;
  logic [CycleW-1:0] duration, occupancy;
  logic is_switch, is_rw, is_rwu;

  // Accesses are packed-struct concatenations in field order, not assignment
  // patterns '{...}, which Yosys cannot parse.
  always_comb begin
    unit = UnitController;
    acc0 = '0;
    acc1 = '0;
    acc2 = '0;
    duration = '0;
    occupancy = '0;
    is_switch = 1'b0;
    is_rw = 1'b0;
    is_rwu = 1'b0;
    unique case (opcode)
      OpRhm: begin
        unit = UnitHostDma;
        acc0 = {1'b1, SpaceHost, 34'(op0), 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), 34'(op2), 1'b1};
      end
      OpWhm: begin
        unit = UnitHostDma;
        if (flags[FlagWhmA]) begin
          acc0 = {1'b1, SpaceAcc, 34'(op0), 34'(op2), 1'b0};
          acc1 = {1'b1, SpaceHost, 34'(op1), 34'(op2) * 34'(HostRowsPerAccRow), 1'b1};
        end else begin
          acc0 = {1'b1, SpaceUb, 34'(op0), 34'(op2), 1'b0};
          acc1 = {1'b1, SpaceHost, 34'(op1), 34'(op2), 1'b1};
        end
      end
      OpHwt: begin
        unit = UnitHostDma;
        acc0 = {1'b1, SpaceHost, 34'(op0), 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceWeight, 34'(op1), 34'd1, 1'b1};
      end
      OpRw: begin
        unit = UnitWeightDma;
        acc0 = {1'b1, SpaceWeight, 34'(op0), 34'd1, 1'b0};
        is_rw = 1'b1;
      end
      // An RWU reads its UB rows (held until the weight DMA retires it)
      // and pushes a tile like an RW (the FIFO rule).
      OpRwu: begin
        unit = UnitWeightDma;
        acc0 = {1'b1, SpaceUb, 34'(op0), 34'(op1), 1'b0};
        is_rwu = 1'b1;
      end
      OpMmc: begin
        unit = UnitMatrix;
        // MMC.C reads from anywhere in the input map.
        acc0 = {1'b1, SpaceUb, 34'(op0), flags[FlagMmcC] ? 34'(conv_map_rows_q) : 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceAcc, 34'(op1), 34'(op2), 1'b1};
        duration = CycleW'(op2) + CycleW'(2 * ArrayN);
        is_switch = flags[FlagMmcS];
      end
      OpAct: begin
        unit = UnitActivation;
        acc0 = {1'b1, SpaceAcc, 34'(op0), 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), 34'(op2), 1'b1};
        duration = CycleW'(op2) + CycleW'(ActLatency);
      end
      OpPool: begin
        unit = UnitActivation;
        // A POOL reads from anywhere in its map.
        acc0 = {1'b1, SpaceUb, 34'(op0), 34'(conv_map_rows_q), 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), 34'(op2), 1'b1};
        // One window position read per cycle; each output pixel written
        // A + 1 cycles after its last read. rows < 2^24 and the window < 2^16.
        duration = CycleW'(40'(op2[23:0]) * 40'(conv_window_q)) + CycleW'(ActLatency) + CycleW'(1);
      end
      OpVec: begin
        unit = UnitActivation;
        acc0 = {1'b1, SpaceUb, 34'(op0), 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), 34'(op2), 1'b1};
        acc2 = {1'b1, SpaceUb, 34'(vec_b_row_q), vec_broadcast_q ? 34'd1 : 34'(op2), 1'b0};
        duration = CycleW'(op2) + CycleW'(ActLatency) + CycleW'(3);
      end
      OpGelu: begin
        unit = UnitActivation;
        acc0 = {1'b1, SpaceUb, 34'(op0), 34'(op2), 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), 34'(op2), 1'b1};
        duration = CycleW'(op2) + CycleW'(ActLatency) + CycleW'(6);
      end
      // Three passes over each token's rows; the third pass's rows written
      // A + 8 cycles after their read. 3 * groups < 2^18, rows < 2^24.
      OpSmax, OpLnrm: begin
        unit = UnitActivation;
        acc0 = {1'b1, SpaceUb, 34'(op0), norm_count, 1'b0};
        acc1 = {1'b1, SpaceUb, 34'(op1), norm_count, 1'b1};
        duration = CycleW'(42'(op2[23:0]) * 42'(norm_passes_q)) + CycleW'(ActLatency) + CycleW'(8);
      end
      default: ;
    endcase
    // The activation unit writes in order: its next instruction (an ACT; the
    // others wait for every earlier one to complete) may issue when its first
    // write, A cycles after its start, follows this one's last: duration - A.
    // The weight memory takes a request every cycle (the
    // FIFO's room limits how many are outstanding). The host DMA's busy rule
    // comes from the unit (host_dma_busy_i) instead.
    // An RWU's rows are read one a cycle through the weight DMA's one UB
    // port.
    occupancy = opcode == OpMmc ? CycleW'(op2)
                : unit == UnitActivation ? duration - CycleW'(ActLatency)
                : is_rw ? CycleW'(1) : is_rwu ? CycleW'(op1) : duration;
  end

  // Yosys reads struct members only of module-level scalars: functions take
  // fields, and loops copy array entries to the module-level temporaries below.

  // ---- Faults: addresses past a memory's end ---------------------------------
  function automatic logic out_of_range(logic valid, logic [1:0] space, logic [33:0] base,
                                        logic [33:0] count);
    logic [34:0] last_excl;
    last_excl = {1'b0, base} + {1'b0, count};
    unique case (space)
      SpaceHost:   out_of_range = valid && last_excl > 35'(HostRows);
      SpaceWeight: out_of_range = valid && last_excl > 35'(WeightTiles);
      SpaceUb:     out_of_range = valid && last_excl > 35'(UbRows);
      SpaceAcc:    out_of_range = valid && last_excl > 35'(AccRows);
      default:     out_of_range = 1'b0;
    endcase
  endfunction

  // ---- Stall conditions ---------------------------------------------------------
  // An entry is live until its completion cycle. A hazard is a pair of a new
  // access `ha` and a live access `hb` of another unit that overlap, one of
  // them a write: {RAW, WAW, WAR}.
  logic [SbSize-1:0] sb_live;
  // The hazard check reads an entry's unit and ranges, not its countdown.
  /* verilator lint_off UNUSEDSIGNAL */
  sb_entry_t         sb_e;
  /* verilator lint_on UNUSEDSIGNAL */
  access_t           ha, hb;
  logic              raw, waw, war, sb_busy, act_in_flight;
  always_comb begin
    logic [2:0] kinds;
    kinds = '0;
    sb_e = '0;
    ha = '0;
    hb = '0;
    act_in_flight = 1'b0;
    for (int unsigned e = 0; e < SbSize; e++) begin
      sb_e = sb_q[e];
      sb_live[e] = sb_e.valid;
      if (sb_live[e] && sb_e.unit == UnitActivation) act_in_flight = 1'b1;
      if (sb_live[e] && sb_e.unit != unit) begin
        for (int unsigned pa = 0; pa < 3; pa++) begin
          for (int unsigned pb = 0; pb < 3; pb++) begin
            ha = pa == 0 ? acc0 : pa == 1 ? acc1 : acc2;
            hb = pb == 0 ? sb_e.a0 : pb == 1 ? sb_e.a1 : sb_e.a2;
            if (ha.valid && hb.valid && ha.space == hb.space &&
                {1'b0, ha.base} < {1'b0, hb.base} + {1'b0, hb.count} &&
                {1'b0, hb.base} < {1'b0, ha.base} + {1'b0, ha.count})
              kinds |= {!ha.write && hb.write, ha.write && hb.write, ha.write && !hb.write};
          end
        end
      end
    end
    // An HWT into a tile an RW in flight reads (RWs have no entry).
    if (opcode == OpHwt && rw_tile_hit_i) kinds[0] = 1'b1;
    {raw, waw, war} = kinds;
  end
  assign rw_tile_query_o = op1;
  assign sb_busy = |sb_live;

  logic running, past_end, bad_address, no_ub_path, can_issue, deadlock_mmc, deadlock_rw;
  logic [StallCauseW-1:0] cause;
  logic stalled;
  assign running     = !halted_q && !fault_q;
  assign past_end    = pc_q >= prog_len_i;
  assign bad_address = out_of_range(acc0.valid, acc0.space, acc0.base, acc0.count) ||
                       out_of_range(acc1.valid, acc1.space, acc1.base, acc1.count) ||
                       out_of_range(acc2.valid, acc2.space, acc2.base, acc2.count);
  // Checked after the addresses, before any stall (model::Controller).
  assign no_ub_path  = is_rwu && !ub_weight_path_i;

  always_comb begin
    stalled = 1'b1;
    cause = StallDrain;
    if (raw) cause = StallRawHazard;
    else if (waw) cause = StallWawHazard;
    else if (war) cause = StallWarHazard;
    else if (opcode == OpSync || opcode == OpHlt) begin
      stalled = sb_busy || weight_dma_busy_i;
      cause = StallDrain;
    end else if (opcode == OpNop || opcode == OpSetq || opcode == OpCmap || opcode == OpCstr ||
                 opcode == OpCtap || opcode == OpCwin || opcode == OpVsrc || opcode == OpVscl ||
                 opcode == OpNgeo || opcode == OpNcon)
      stalled = 1'b0;
    else if (unit_wait_q[32'(unit)] != '0) cause = StallUnitBusy;
    else if (unit == UnitMatrix && !array_ready_i) cause = StallUnitBusy;
    // The host DMA takes its next transfer from its current one's last cycle on.
    else if (unit == UnitHostDma && host_dma_busy_i && !host_dma_retire_i.valid) cause = StallUnitBusy;
    // A POOL reads UB rows its own unit's earlier instructions may still
    // write (an ACT's last rows leave its pipeline after its occupancy): it
    // waits until every one of them has completed. So do a VEC, a GELU, an
    // SMAX and an LNRM.
    else if ((opcode == OpPool || opcode == OpVec || opcode == OpGelu || opcode == OpSmax ||
              opcode == OpLnrm) && act_in_flight) cause = StallUnitBusy;
    else if ((is_rw || is_rwu) && (rw_issued_q - tiles_popped_i) >= FifoDepth) cause = StallFifoFull;
    else stalled = 1'b0;
  end

  // An MMC.S that would issue with no RW left to provide its tile: that RW
  // would come after it in program order.
  assign deadlock_mmc = !stalled && is_switch && rw_issued_q == switches_q;
  assign deadlock_rw  = stalled && cause == StallFifoFull && tiles_popped_i > switches_q;
  assign can_issue    = running && !past_end && !bad_address && !no_ub_path && !stalled &&
                        !deadlock_mmc;

  // ---- Free scoreboard slot ---------------------------------------------------------
  logic [$clog2(SbSize)-1:0] free_slot;
  logic                      has_free;
  always_comb begin
    free_slot = '0;
    has_free = 1'b0;
    for (int unsigned e = 0; e < SbSize; e++) begin
      if (!has_free && !sb_live[e]) begin
        free_slot = e[$clog2(SbSize)-1:0];
        has_free = 1'b1;
      end
    end
  end

  // ---- Scoreboard entries ---------------------------------------------------------
  // An issue writes its instruction's entry into the free slot (a host DMA
  // instruction's and an MMC's held, the others' with the cycles left after
  // the next one: every duration is at least 1); otherwise a live entry
  // counts down and leaves after its completion cycle, and a held one after
  // the cycle its unit retires it in.
  logic                   sb_write, held, mmc_retire, rwu_retire;
  logic [SbEntryBits-1:0] sb_new;
  logic [SlotW-1:0]       mmc_head_slot;
  assign sb_write = can_issue && unit != UnitController && !is_rw;
  assign held     = unit == UnitHostDma || unit == UnitMatrix || is_rwu;
  assign sb_new   = held ? {1'b1, 1'b1, unit, acc0, acc1, acc2, CycleW'(0)}
                         : {1'b1, 1'b0, unit, acc0, acc1, acc2, duration - CycleW'(1)};
  assign mmc_retire    = array_retire_i.valid;
  assign mmc_head_slot = mmc_slot_q[mmc_head_q];
  assign rwu_retire    = weight_dma_retire_i.valid && rwu_retire_i;
  logic [SlotW-1:0] rwu_head_slot;
  assign rwu_head_slot = rwu_slot_q[rwu_head_q];

  function automatic logic [SlotW-1:0] next_ring(logic [SlotW-1:0] i);
    next_ring = 32'(i) + 1 == SbSize ? '0 : i + SlotW'(1);
  endfunction

  // The ring of the MMCs' slots, like a RAM: no reset.
  always_ff @(posedge clk_i) begin
    if (sb_write && unit == UnitMatrix) mmc_slot_q[mmc_tail_q] <= free_slot;
    if (sb_write && is_rwu) rwu_slot_q[rwu_tail_q] <= free_slot;
  end
  for (genvar e = 0; e < SbSize; e++) begin : g_sb
    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        sb_q[e] <= '0;
      end else if (sb_write && 32'(free_slot) == e) begin
        sb_q[e] <= sb_new;
      end else if (sb_q[e][SbValid]) begin
        if (sb_q[e][SbHeld]) begin
          if ((host_dma_retire_i.valid && 32'(host_slot_q) == e) ||
              (mmc_retire && 32'(mmc_head_slot) == e) ||
              (rwu_retire && 32'(rwu_head_slot) == e))
            sb_q[e][SbValid] <= 1'b0;
        end else if (sb_q[e][CycleW-1:0] == '0) begin
          sb_q[e][SbValid] <= 1'b0;
        end else begin
          sb_q[e][CycleW-1:0] <= sb_q[e][CycleW-1:0] - CycleW'(1);
        end
      end
    end
  end

  // ---- State ----------------------------------------------------------------------
  unit_cmd_t cmd;
  always_comb begin
    cmd.valid     = 1'b1;
    cmd.seq       = seq_q;
    cmd.opcode    = opcode;
    cmd.flags     = flags;
    cmd.op0       = op0;
    cmd.op1       = op1;
    cmd.op2       = op2;
    cmd.requant_m = requant_m_q;
    cmd.requant_s = requant_s_q;
    cmd.requant_z = requant_z_q;
    cmd.conv_in_h     = conv_in_h_q;
    cmd.conv_in_w     = conv_in_w_q;
    cmd.conv_out_w    = conv_out_w_q;
    cmd.conv_stride_y = conv_stride_y_q;
    cmd.conv_stride_x = conv_stride_x_q;
    cmd.conv_pad      = conv_pad_q;
    cmd.conv_y0       = conv_y0_q;
    cmd.conv_x0       = conv_x0_q;
    cmd.conv_win_h    = conv_win_h_q;
    cmd.conv_win_w    = conv_win_w_q;
    cmd.vec_b_row     = vec_b_row_q;
    cmd.vec_broadcast = vec_broadcast_q;
    cmd.vec_za        = vec_za_q;
    cmd.vec_zb        = vec_zb_q;
    cmd.vec_da        = vec_da_q;
    cmd.vec_db        = vec_db_q;
    cmd.vec_op        = vec_op_q;
    cmd.norm_sh       = norm_sh_q;
    cmd.norm_k0       = norm_k0_q;
    cmd.norm_k1       = norm_k1_q;
    cmd.norm_k2       = norm_k2_q;
    cmd.norm_groups   = norm_groups_q;
    cmd.norm_stride   = norm_stride_q;
    cmd.norm_d        = norm_d_q;
  end

  // NGEO's D: width, or groups * N when width is 0 or more than that
  // (isa::NormRegs::token_values); groups * N < 2^24.
  logic [15:0] ngeo_g1;  // groups - 1
  logic [23:0] ngeo_all, ngeo_d;
  assign ngeo_g1  = op0[15:0] - 16'd1;
  assign ngeo_all = 24'(op0[15:0]) * 24'(ArrayN);
  assign ngeo_d   = op3 == '0 || 24'(op3) > ngeo_all ? ngeo_all : 24'(op3);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      pc_q <= '0;
      seq_q <= '0;
      requant_m_q <= 32'd1;
      requant_s_q <= '0;
      requant_z_q <= '0;
      // ConvGeometry's reset values: a 1 x 1 map, unit strides, no offset,
      // a 1 x 1 window.
      conv_in_h_q <= 16'd1;
      conv_in_w_q <= 16'd1;
      conv_out_w_q <= 16'd1;
      conv_stride_y_q <= 8'd1;
      conv_stride_x_q <= 8'd1;
      conv_pad_q <= '0;
      conv_y0_q <= '0;
      conv_x0_q <= '0;
      conv_map_rows_q <= 32'd1;
      conv_win_h_q <= 8'd1;
      conv_win_w_q <= 8'd1;
      conv_window_q <= 16'd1;
      // VecRegs' reset values: B at row 0, not broadcast, zero points 0,
      // factors 1, ADD.
      vec_b_row_q <= '0;
      vec_broadcast_q <= 1'b0;
      vec_za_q <= '0;
      vec_zb_q <= '0;
      vec_da_q <= 16'd1;
      vec_db_q <= 16'd1;
      vec_op_q <= '0;
      // NormRegs' reset values: tokens of one row, all N values.
      norm_groups_q <= 16'd1;
      norm_stride_q <= '0;
      norm_sh_q <= '0;
      norm_k0_q <= '0;
      norm_k1_q <= '0;
      norm_k2_q <= '0;
      norm_span0_q <= '0;
      norm_passes_q <= 18'd3;
      norm_d_q <= 24'(ArrayN);
      for (int u = 0; u < 5; u++) unit_wait_q[u] <= '0;
      rw_issued_q <= '0;
      host_slot_q <= '0;
      mmc_head_q <= '0;
      mmc_tail_q <= '0;
      rwu_head_q <= '0;
      rwu_tail_q <= '0;
      switches_q <= '0;
      halted_q <= 1'b0;
      fault_q <= 1'b0;
      fault_code_q <= FaultNone;
      fault_cycle_q <= '0;
      host_dma_cmd_o <= '0;
      weight_dma_cmd_o <= '0;
      array_cmd_o <= '0;
      act_cmd_o <= '0;
    end else begin
      // The units' waits count down; an issue below overwrites its unit's.
      for (int u = 0; u < 5; u++)
        if (unit_wait_q[u] != '0) unit_wait_q[u] <= unit_wait_q[u] - CycleW'(1);
      host_dma_cmd_o.valid <= 1'b0;
      weight_dma_cmd_o.valid <= 1'b0;
      array_cmd_o.valid <= 1'b0;
      act_cmd_o.valid <= 1'b0;
      if (running) begin
        if (past_end || bad_address || no_ub_path || deadlock_mmc || deadlock_rw) begin
          fault_q <= 1'b1;
          fault_cycle_q <= cycle_i;
          fault_code_q <= past_end ? FaultPastEnd : bad_address ? FaultBadAddress :
                          no_ub_path ? FaultRwuNoPath :
                          deadlock_mmc ? FaultDeadlockMmc : FaultDeadlockRw;
        end else if (can_issue) begin
          pc_q <= pc_q + 1;
          seq_q <= seq_q + 1;
          unique case (opcode)
            OpSetq: begin
              requant_m_q <= op0;
              requant_s_q <= op1[5:0];
              requant_z_q <= op2[7:0];
            end
            OpCmap: begin
              conv_in_h_q <= op0[15:0];
              conv_in_w_q <= op1[15:0];
              conv_out_w_q <= op2[15:0];
              conv_map_rows_q <= 32'(op0[15:0]) * 32'(op1[15:0]);
            end
            OpCstr: begin
              conv_stride_y_q <= op0[7:0];
              conv_stride_x_q <= op1[7:0];
              conv_pad_q <= op2[7:0];
            end
            OpCtap: begin
              conv_y0_q <= op0[15:0];
              conv_x0_q <= op1[15:0];
            end
            OpCwin: begin
              conv_win_h_q <= op0[7:0];
              conv_win_w_q <= op1[7:0];
              conv_window_q <= 16'(op0[7:0]) * 16'(op1[7:0]);
            end
            OpVsrc: begin
              vec_b_row_q <= op0[23:0];
              vec_broadcast_q <= flags[FlagVsrcB];
              vec_za_q <= op1[7:0];
              vec_zb_q <= op2[7:0];
            end
            OpVscl: begin
              vec_da_q <= op0[15:0];
              vec_db_q <= op1[15:0];
              vec_op_q <= op2[2:0];
            end
            OpNgeo: begin
              norm_groups_q <= op0[15:0];
              norm_stride_q <= op1[23:0];
              norm_sh_q <= op2[3:0];
              norm_span0_q <= 40'(ngeo_g1) * 40'(op1[23:0]);
              norm_passes_q <= 18'(op0[15:0]) * 18'd3;
              norm_d_q <= ngeo_d;
            end
            OpNcon: begin
              norm_k0_q <= op0;
              norm_k1_q <= op1;
              norm_k2_q <= op2;
            end
            OpHlt: halted_q <= 1'b1;
            OpRhm, OpWhm, OpHwt: host_dma_cmd_o <= cmd;
            OpRw, OpRwu: weight_dma_cmd_o <= cmd;
            OpMmc: array_cmd_o <= cmd;
            OpAct, OpPool, OpVec, OpGelu, OpSmax, OpLnrm: act_cmd_o <= cmd;
            default: ;
          endcase
          // A host transfer is in flight until the host DMA retires it;
          // the weight DMA's RWs need no entry (see above).
          if (unit == UnitHostDma) host_slot_q <= free_slot;
          if (unit == UnitMatrix) mmc_tail_q <= next_ring(mmc_tail_q);
          if (is_rwu) rwu_tail_q <= next_ring(rwu_tail_q);
          // Every occupancy here is at least 1 (rows >= 1). The array says
          // itself when it takes the next MMC.
          if (unit != UnitController && unit != UnitHostDma && unit != UnitMatrix)
            unit_wait_q[32'(unit)] <= occupancy - CycleW'(1);
          if (is_rw || is_rwu) rw_issued_q <= rw_issued_q + 1;
          if (is_switch) switches_q <= switches_q + 1;
        end
      end
      if (mmc_retire) mmc_head_q <= next_ring(mmc_head_q);
      if (rwu_retire) rwu_head_q <= next_ring(rwu_head_q);
    end
  end

  assign fetch_pc_o    = pc_q;
  assign issue_o       = can_issue;
  assign stall_o       = running && !past_end && !bad_address && !no_ub_path && stalled &&
                         !deadlock_rw;
  assign stall_cause_o = cause;
  assign halted_o      = halted_q;
  assign fault_o       = fault_q;
  assign fault_code_o  = fault_code_q;
  assign fault_cycle_o = fault_cycle_q;

`ifndef SYNTHESIS
  // The scoreboard is sized for the most instructions that can be in flight.
  always_ff @(posedge clk_i) begin
    if (rst_ni && can_issue && unit != UnitController) begin
      assert (has_free) else $error("scoreboard overflow at cycle %0d", cycle_i);
    end
  end
`endif

endmodule
