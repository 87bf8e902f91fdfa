#include "model/controller.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/plural.h"
#include "model/timing.h"

namespace tpu::model {

Controller::Controller(sc_module_name name, const ArchConfig& cfg, const isa::Program& prog,
                       RunLog& log, Cycle max_cycles)
    : sc_module(name), cfg_(cfg), prog_(prog), log_(log), max_cycles_(max_cycles) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

sc_out<UnitCommand>* Controller::port_for(isa::Unit unit) {
  switch (unit) {
    case isa::Unit::HostDma: return &host_dma_cmd;
    case isa::Unit::WeightDma: return &weight_dma_cmd;
    case isa::Unit::MatrixUnit: return &array_cmd;
    case isa::Unit::ActivationUnit: return &act_cmd;
    case isa::Unit::Controller: break;
  }
  return nullptr;
}

void Controller::fault(Cycle now, std::string reason) {
  Fault f;
  f.pc = pc_;
  f.instruction = pc_ < prog_.code.size() ? isa::disassemble(prog_.code[pc_]) : "-";
  f.cycle = now;
  f.reason = std::move(reason);
  log_.fault = f;
  // An MMC.S still waiting for its weights never started (the units work in
  // the fault's cycle, so one starting in it did).
  for (RetireRecord& r : log_.retired)
    if (r.start > now) r.start = kNever;
  log_.stats.cycles = now;
  stopped_ = true;
  sc_stop();
}

bool Controller::check_bounds(const isa::Instruction& in, Cycle now) {
  for (const isa::Access& a : isa::accesses(in, geometry_)) {
    const std::uint64_t size = cfg_.size_of(a.space);
    if (a.base + a.count <= size) continue;
    const char* unit = isa::space_unit(a.space);
    fault(now, fmt::format("{} {} past the end ({})", isa::space_name(a.space),
                           plural_range(a.base, a.count, unit), plural(size, unit)));
    return false;
  }
  return true;
}

std::optional<StallCause> Controller::stall_cause(const isa::Instruction& in, Cycle now) {
  const isa::Unit unit = isa::spec_of(in.opcode).unit;
  // Hazards against in-flight instructions of other units.
  // Counted as RAW if any pair is one, else WAW, else WAR.
  const std::vector<isa::Access> mine = isa::accesses(in, geometry_);
  bool raw = false, waw = false, war = false;
  for (const InFlight& f : scoreboard_) {
    if (f.unit == unit) continue;
    for (const isa::Access& a : mine)
      for (const isa::Access& b : f.accesses) {
        if (!a.overlaps(b)) continue;
        raw |= !a.is_write && b.is_write;
        waw |= a.is_write && b.is_write;
        war |= a.is_write && !b.is_write;
      }
  }
  if (raw) return StallCause::Raw;
  if (waw) return StallCause::Waw;
  if (war) return StallCause::War;
  switch (in.opcode) {
    case isa::Opcode::SYNC:
    case isa::Opcode::HLT:
      if (!scoreboard_.empty()) return StallCause::Drain;
      return std::nullopt;
    case isa::Opcode::NOP:
    case isa::Opcode::SETQ:
    case isa::Opcode::CMAP:
    case isa::Opcode::CSTR:
    case isa::Opcode::CTAP:
    case isa::Opcode::CWIN:
    case isa::Opcode::VSRC:
    case isa::Opcode::VSCL:
    case isa::Opcode::NGEO:
    case isa::Opcode::NCON: return std::nullopt;
    default: break;
  }
  if (now < unit_free_at_[static_cast<unsigned>(unit)]) return StallCause::UnitBusy;
  // A POOL, VEC, SMAX, LNRM or GELU reads UB rows its own unit's earlier
  // instructions may still write (an ACT's last rows leave its pipeline
  // after its occupancy): it waits until every one of them has completed.
  if (in.opcode != isa::Opcode::ACT && unit == isa::Unit::ActivationUnit &&
      std::any_of(scoreboard_.begin(), scoreboard_.end(),
                  [unit](const InFlight& f) { return f.unit == unit; }))
    return StallCause::UnitBusy;
  if (pushes_tile(in) && rw_issued_ - tiles_popped.read() >= cfg_.fifo_depth)
    return StallCause::FifoFull;
  return std::nullopt;
}

void Controller::issue(const isa::Instruction& in, Cycle now, Cycle reported) {
  const isa::InstrSpec& spec = isa::spec_of(in.opcode);
  const auto seq = static_cast<std::uint32_t>(log_.retired.size());
  RetireRecord rec;
  rec.pc = pc_;
  rec.issue = now;
  ++log_.stats.instructions;
  if (spec.unit == isa::Unit::Controller) {
    rec.start = rec.completion = now;
    rec.completed = true;
    log_.retired.push_back(rec);
    geometry_.apply(in);  // CMAP, CSTR, CTAP, CWIN, VSRC, VSCL, NGEO, NCON
    if (in.opcode == isa::Opcode::SETQ) {
      requant_.multiplier = static_cast<std::int32_t>(in.operands[0]);
      requant_.shift = static_cast<std::uint32_t>(in.operands[1]);
      requant_.zero_point = static_cast<std::int8_t>(in.operands[2]);
    } else if (in.opcode == isa::Opcode::HLT) {
      log_.halted = true;
      log_.stats.cycles = now + 1;
      stopped_ = true;
      sc_stop();
    }
    return;
  }
  rec.start = in.opcode == isa::Opcode::MMC ? mmc_start(in, now) : now + 1;
  log_.retired.push_back(rec);
  UnitCommand cmd;
  cmd.valid = true;
  cmd.pc = pc_;
  cmd.seq = seq;
  cmd.instr = in;
  cmd.requant = requant_;
  cmd.conv = geometry_;
  cmd.start = rec.start;
  port_for(spec.unit)->write(cmd);
  // The DMAs' completions are the ones they reported; the other units run at
  // a fixed rate from their start (an MMC.S's may be later than now + 1).
  const bool reports = spec.unit == isa::Unit::HostDma || spec.unit == isa::Unit::WeightDma;
  const Cycle completion = reports ? reported : rec.start - 1 + duration(cfg_, in, geometry_);
  scoreboard_.push_back({spec.unit, isa::accesses(in, geometry_), completion});
  // The host DMA accepts again in its completion cycle, the weight DMA in the
  // next cycle; the others after their occupancy, counted from the start.
  unit_free_at_[static_cast<unsigned>(spec.unit)] =
      spec.unit == isa::Unit::HostDma ? completion : rec.start - 1 + occupancy(cfg_, in, geometry_);
  if (pushes_tile(in)) {
    ++rw_issued_;
    tile_arrival_.push_back(reported);
  }
  if (in.opcode == isa::Opcode::MMC && in.has(isa::kFlagMmcSwitch)) ++switches_issued_;
}

// docs/microarchitecture.md, "Weight buffers": switch k takes the tile of RW
// number k, whose load starts at L = max(d_k + 1, F_k); the switch starts at
// max(c + 1, L + N + 1) and frees the shadow from max(s, u + N + 1) for the
// next tile (u: the last row read with the set it replaces).
Cycle Controller::mmc_start(const isa::Instruction& in, Cycle now) {
  Cycle start = now + 1;
  const Cycle n = cfg_.array_n;
  if (in.has(isa::kFlagMmcSwitch)) {
    const Cycle load = std::max(tile_arrival_.at(switches_issued_) + 1, shadow_free_from_);
    start = std::max(start, load + n + 1);
    shadow_free_from_ = shadow_.on_switch(start, n);
  }
  shadow_.on_rows(start, static_cast<Cycle>(in.operands[2]));
  return start;
}

Cycle Controller::next_activity(Cycle now) const {
  if (stopped_) return kNever;
  if (!last_stall_) return now + 1;
  Cycle next = std::max(max_cycles_, now + 1);
  for (const InFlight& f : scoreboard_) next = std::min(next, f.completion + 1);
  for (Cycle free : unit_free_at_)
    if (free > now) next = std::min(next, free);
  return next;
}

void Controller::tick() {
  if (stopped_) return;
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped: each one stalled for the same cause.
  if (last_stall_ && now > last_tick_ + 1) log_.stall(pc_, *last_stall_, last_tick_ + 1, now - 1);
  last_tick_ = now;
  last_stall_.reset();
  // Commands are valid for one cycle.
  for (auto* port : {&host_dma_cmd, &weight_dma_cmd, &array_cmd, &act_cmd})
    if (port->read().valid) port->write(UnitCommand{});
  // In flight until the completion cycle: a dependent may issue at completion + 1.
  scoreboard_.erase(std::remove_if(scoreboard_.begin(), scoreboard_.end(),
                                   [now](const InFlight& f) { return f.completion < now; }),
                    scoreboard_.end());
  issue_out.write(false);
  stall_out.write(false);
  pc_out.write(pc_);

  if (now >= max_cycles_) return fault(now, fmt::format("cycle limit {} reached", max_cycles_));
  if (interrupted_ && ++ticks_since_poll_ >= kInterruptPollTicks) {
    ticks_since_poll_ = 0;
    if (interrupted_()) {
      log_.interrupted = true;
      return fault(now, "interrupted");
    }
  }
  if (pc_ >= prog_.code.size())
    return fault(now, fault_reason(FaultCode::PastEnd));
  const isa::Instruction& in = prog_.code[pc_];
  if (!check_bounds(in, now)) return;
  // An HWT or RWU of more than N rows, which a program file's loader and the
  // assembler refuse, in a program made in memory: a tile has N rows. (An
  // NGEO too wide runs as groups * N, docs/isa.md.)
  if (in.opcode == isa::Opcode::HWT || in.opcode == isa::Opcode::RWU)
    if (std::string why = isa::check_with_array_n(in, cfg_.array_n); !why.empty()) return fault(now, std::move(why));
  if (in.opcode == isa::Opcode::RWU && cfg_.ub_weight_path == 0)
    return fault(now, fault_reason(FaultCode::RwuNoPath));
  if (const auto cause = stall_cause(in, now)) {
    // The FIFO drains only into a free shadow, and the shadow frees only on a
    // switch, which would have to issue after this RW.
    if (*cause == StallCause::FifoFull && tiles_popped.read() > switches_issued_)
      return fault(now, fault_reason(FaultCode::DeadlockRw));
    log_.stall(pc_, *cause, now, now);
    last_stall_ = cause;
    stall_out.write(true);
    return;
  }
  // An MMC.S whose tile no RW issued so far provides: that RW would come
  // after it, and the matrix unit would wait for ever.
  if (in.opcode == isa::Opcode::MMC && in.has(isa::kFlagMmcSwitch) && rw_issued_ == switches_issued_)
    return fault(now, fault_reason(FaultCode::DeadlockMmc));
  // A DMA sends its transactions now and reports the completion.
  Cycle reported = 0;
  const isa::Unit unit = isa::spec_of(in.opcode).unit;
  TransferUnit* dma = unit == isa::Unit::WeightDma ? weight_dma_ : unit == isa::Unit::HostDma ? host_dma_ : nullptr;
  if (dma) {
    const Accepted a = dma->accept(in, static_cast<std::uint32_t>(log_.retired.size()), now);
    if (!a.error.empty()) return fault(now, a.error);
    reported = a.completion;
  }
  issue(in, now, reported);
  issue_out.write(true);
  ++pc_;
}

}  // namespace tpu::model
