// Scheduling of an on-chip program (onchip_ops.h).
//
// The controller issues in order and stalls on the first instruction that
// cannot go, so an ACT placed right after the MMC that produces its rows
// would hold every later instruction for 2N cycles while the array idles, and
// back-to-back host transfers would hold them for a whole transfer each. The
// scheduler therefore keeps the array's MMCs in program order and defers the
// rest: ACT and POOL (the activation unit) and RHM/WHM (the host DMA) wait in
// two queues until the array has been given enough rows to cover their wait
// (2N + 1 rows after an ACT's producer; a host transfer's duration after the
// previous one), measured on a clock of MMC rows emitted. An op is emitted
// early whenever a later op conflicts with it (shares UB, ACC or host rows,
// one of them writing), so the program order always respects the data flow;
// the hardware interlocks keep the timing exact.
#include <algorithm>
#include <deque>
#include <map>

#include "compiler/onchip_ops.h"
#include "model/timing.h"

namespace tpu::compiler::onchip {
namespace {

using isa::Opcode;

isa::Instruction to_instruction(const Op& op) {
  isa::Instruction in;
  in.opcode = op.opcode;
  in.flags = op.flags;
  in.operands[0] = op.a;
  in.operands[1] = op.b;
  in.operands[2] = op.c;
  return in;
}

// Two accesses that must stay in order: the same rows, one of them a write.
bool conflicts(const isa::Access& x, const isa::Access& y) {
  return (x.is_write || y.is_write) && x.overlaps(y);
}

class Scheduler {
 public:
  Scheduler(const std::vector<Op>& ops, const ArchConfig& cfg, Emitter& e)
      : ops_(ops), cfg_(cfg), e_(e), emitted_at_(ops.size(), 0), done_(ops.size(), false) {
    std::vector<std::uint64_t> order;
    for (const Op& op : ops)
      if (op.opcode == Opcode::MMC && (op.flags & isa::kFlagMmcSwitch)) order.push_back(op.tile);
    prefetch_.emplace(e, std::move(order), cfg.fifo_depth);
    // Tiles made at run time wait for their HWT (or the RWU's place in the
    // op list, where its UB rows have been written).
    std::size_t use = 0;
    for (const Op& op : ops)
      if (op.opcode == Opcode::MMC && (op.flags & isa::kFlagMmcSwitch)) {
        if (op.feed) {
          const Op& f = ops[*op.feed];
          prefetch_->hold(use, f.opcode == Opcode::RWU ? std::optional<isa::Instruction>(to_instruction(f)) : std::nullopt);
          feeds_[*op.feed].push_back(use);
        }
        ++use;
      }
    for (const Op& op : ops) access_.push_back(isa::accesses(to_instruction(op), op.geometry.value_or(isa::ConvGeometry{})));
  }

  void run() {
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = ops_[i];
      switch (op.opcode) {
        case Opcode::MMC:
          flush_conflicts(i);
          // Its run-time tile's HWT (queued before it) goes first.
          if (op.feed && !done_[*op.feed])
            while (!done_[*op.feed] && !host_q_.empty()) emit_front(host_q_);
          emit(i);
          drain_ready();
          break;
        case Opcode::RWU:
          // The weight prefetcher emits it (as the tile of its MMC.S) once
          // its UB rows have been written: from here on.
          flush_conflicts(i);
          done_[i] = true;
          release(i);
          break;
        case Opcode::ACT:
        case Opcode::POOL:
        case Opcode::VEC:
        case Opcode::SMAX:
        case Opcode::LNRM:
        case Opcode::GELU: act_q_.push_back(i); ready_at_[i] = clock_ + (op.opcode == Opcode::ACT ? 2 * cfg_.array_n + 1 : 0); break;
        default: host_q_.push_back(i); break;
      }
    }
    while (!act_q_.empty() || !host_q_.empty()) {
      if (host_q_.empty() || (!act_q_.empty() && act_q_.front() < host_q_.front()))
        emit_front(act_q_);
      else
        emit_front(host_q_);
    }
    e_.set_layer(ops_.empty() ? 0 : ops_.back().layer);
    e_.emit(Opcode::HLT, 0);
  }

 private:
  // The op's cycles from start to completion (the timing contract).
  std::uint64_t duration_of(const Op& op) const {
    return model::duration(cfg_, to_instruction(op), op.geometry.value_or(isa::ConvGeometry{}));
  }

  bool conflict(std::size_t x, std::size_t y) const {
    for (const isa::Access& a : access_[x])
      for (const isa::Access& b : access_[y])
        if (conflicts(a, b)) return true;
    return false;
  }

  // Emits every pending op before `i` that conflicts with it (and the ops
  // queued ahead of those).
  void flush_conflicts(std::size_t i) {
    for (std::deque<std::size_t>* q : {&act_q_, &host_q_}) {
      std::optional<std::size_t> last;
      for (std::size_t k = 0; k < q->size(); ++k)
        if ((*q)[k] < i && conflict((*q)[k], i)) last = k;
      if (!last) continue;
      const std::size_t through = (*q)[*last];
      while (!q->empty() && q->front() <= through) emit_front(*q);
    }
  }

  void emit_front(std::deque<std::size_t>& q) {
    const std::size_t i = q.front();
    q.pop_front();
    flush_conflicts(i);
    const Op& op = ops_[i];
    if (op.after && !done_[*op.after]) {
      // Its ACT is still queued: it goes first.
      while (!act_q_.empty() && act_q_.front() <= *op.after) emit_front(act_q_);
    }
    emit(i);
  }

  bool ready(std::size_t i) const {
    const Op& op = ops_[i];
    if (op.opcode == Opcode::ACT || op.opcode == Opcode::POOL || op.opcode == Opcode::VEC ||
        op.opcode == Opcode::SMAX || op.opcode == Opcode::LNRM || op.opcode == Opcode::GELU)
      return clock_ >= ready_at_.at(i);
    if (clock_ < host_free_) return false;
    if (op.after) {
      if (!done_[*op.after]) return false;
      // The ACT or POOL completes its duration after it starts.
      const Op& act = ops_[*op.after];
      return clock_ >= emitted_at_[*op.after] + duration_of(act) + 1;
    }
    return true;
  }

  void drain_ready() {
    for (bool progress = true; progress;) {
      progress = false;
      if (!act_q_.empty() && ready(act_q_.front())) {
        emit_front(act_q_);
        progress = true;
      }
      if (!host_q_.empty() && ready(host_q_.front())) {
        emit_front(host_q_);
        progress = true;
      }
    }
  }

  void set_geometry(const isa::ConvGeometry& g, bool window) {
    if (!geo_ || geo_->in_h != g.in_h || geo_->in_w != g.in_w || geo_->out_w != g.out_w)
      e_.emit(Opcode::CMAP, 0, g.in_h, g.in_w, g.out_w);
    if (!geo_ || geo_->stride_y != g.stride_y || geo_->stride_x != g.stride_x || geo_->pad != g.pad)
      e_.emit(Opcode::CSTR, 0, g.stride_y, g.stride_x, g.pad);
    if (!geo_ || geo_->origin_y != g.origin_y || geo_->origin_x != g.origin_x)
      e_.emit(Opcode::CTAP, 0, g.origin_y, g.origin_x);
    isa::ConvGeometry next = g;
    if (window) {
      if (!win_ || win_->first != g.win_h || win_->second != g.win_w) {
        e_.emit(Opcode::CWIN, 0, g.win_h, g.win_w);
        win_ = std::make_pair(g.win_h, g.win_w);
      }
    }
    geo_ = next;
  }

  // VSRC and VSCL where the vector registers differ from what the VEC needs.
  void set_vec(const isa::VecRegs& v) {
    if (!vec_ || vec_->b_row != v.b_row || vec_->broadcast != v.broadcast || vec_->za != v.za || vec_->zb != v.zb)
      e_.emit(Opcode::VSRC, v.broadcast ? isa::kFlagVsrcBroadcast : 0, v.b_row, v.za, v.zb);
    if (!vec_ || vec_->da != v.da || vec_->db != v.db || vec_->op != v.op)
      e_.emit(Opcode::VSCL, 0, v.da, v.db, static_cast<std::int64_t>(v.op));
    vec_ = v;
  }

  // NGEO and NCON where the normalization registers differ from what an
  // LNRM or GELU needs (docs/isa.md; the registers start at their reset values).
  void set_norm(const isa::NormRegs& r) {
    if (norm_.groups != r.groups || norm_.stride != r.stride || norm_.shift != r.shift || norm_.width != r.width)
      e_.emit(Opcode::NGEO, 0, r.groups, r.stride, r.shift, r.width);
    if (norm_.k0 != r.k0 || norm_.k1 != r.k1 || norm_.k2 != r.k2) e_.emit(Opcode::NCON, 0, r.k0, r.k1, r.k2);
    norm_ = r;
  }

  void emit(std::size_t i) {
    const Op& op = ops_[i];
    e_.set_layer(op.layer);
    switch (op.opcode) {
      case Opcode::MMC:
        if (op.flags & isa::kFlagMmcSwitch) prefetch_->before_use(switches_++);
        if (op.flags & isa::kFlagMmcConvolve) set_geometry(*op.geometry, false);
        break;
      case Opcode::POOL:
        set_geometry(*op.geometry, true);
        if (op.flags & isa::kFlagPoolAverage) q_.set(*op.requant);
        break;
      case Opcode::ACT: q_.set(*op.requant); break;
      case Opcode::VEC:
        set_vec(op.geometry->vec);
        q_.set(*op.requant);
        break;
      case Opcode::SMAX:
      case Opcode::LNRM:
      case Opcode::GELU:
        set_norm(op.geometry->norm);
        q_.set(*op.requant);
        break;
      case Opcode::RHM:
      case Opcode::WHM:
      case Opcode::HWT: host_free_ = std::max(host_free_, clock_) + duration_of(op); break;
      default: break;
    }
    if (op.opcode == Opcode::MMC) wait_for_band_loads(i);
    if (op.band_load) band_loads_.push_back({i, host_free_});
    e_.emit(op.opcode, op.flags, op.a, op.b, op.c);
    done_[i] = true;
    if (op.opcode == Opcode::HWT) release(i);
    emitted_at_[i] = clock_;
    if (op.opcode == Opcode::MMC) clock_ += static_cast<std::uint64_t>(op.c);
  }

  void release(std::size_t feed) {
    if (const auto it = feeds_.find(feed); it != feeds_.end())
      for (std::size_t use : it->second) prefetch_->release(use);
  }

  // An MMC that reads a band load still in flight waits for it: the clock
  // moves to the load's estimated completion (loads that are done by the
  // clock are forgotten).
  void wait_for_band_loads(std::size_t i) {
    for (const auto& [k, done] : band_loads_)
      if (done > clock_ && conflict(k, i)) clock_ = done;
    band_loads_.erase(std::remove_if(band_loads_.begin(), band_loads_.end(),
                                     [&](const auto& l) { return l.second <= clock_; }),
                      band_loads_.end());
  }

  const std::vector<Op>& ops_;
  const ArchConfig& cfg_;
  Emitter& e_;
  std::optional<WeightPrefetcher> prefetch_;
  std::vector<std::vector<isa::Access>> access_;
  std::vector<std::uint64_t> emitted_at_;
  std::vector<bool> done_;
  std::map<std::size_t, std::uint64_t> ready_at_;
  std::map<std::size_t, std::vector<std::size_t>> feeds_;  // an HWT's or RWU's op index: the uses of its tile
  std::deque<std::size_t> act_q_, host_q_;
  std::uint64_t clock_ = 0, host_free_ = 0, switches_ = 0;
  std::vector<std::pair<std::size_t, std::uint64_t>> band_loads_;  // emitted band loads, their completion
  std::optional<isa::ConvGeometry> geo_;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> win_;
  RequantRegister q_{e_};
  std::optional<isa::VecRegs> vec_;
  isa::NormRegs norm_;
};

}  // namespace

void schedule(const std::vector<Op>& ops, const ArchConfig& cfg, Emitter& e) {
  Scheduler(ops, cfg, e).run();
}

}  // namespace tpu::compiler::onchip
