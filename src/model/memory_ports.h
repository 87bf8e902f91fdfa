// The DMAs' memory ports: SystemC TLM-2.0 initiator sockets to host memory
// and weight memory, and how a run binds them (docs/microarchitecture.md,
// "Memory ports").
//
// Each DMA instruction becomes blocking transactions (generic payload,
// b_transport) sent in the cycle c the controller issues it, requested at the
// start of cycle s = c + 1 (an annotated delay of one clock period). The
// target returns, in the delay, the time its data is in place; the unit
// turns that into the instruction's completion cycle, which it reports to the
// controller at once (TransferUnit::accept).
#pragma once

#include <systemc>
#include <tlm>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/arch_config.h"
#include "isa/instruction.h"
#include "model/memories.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

// The sockets a target is bound to (the DMAs' simple_initiator_sockets are
// ones): 32-bit bus width, the base protocol.
using MemoryInitiatorSocket = tlm::tlm_initiator_socket<>;

// Builds one run's target for a memory port: it constructs its SystemC
// objects (it is called during elaboration, in the run's own simulation
// context, with the TPU module as their parent), binds `dma_socket` to its
// target socket (directly or through an interconnect), and returns whatever
// must stay alive until the run ends. `mem` is the run's storage: a target
// that serves data reads and writes mem.host or mem.weights, so that the
// run's final memories are what the caller sees (a target with storage of
// its own may ignore it).
using MemoryTargetFactory = std::function<std::shared_ptr<void>(
    const ArchConfig& cfg, Memories& mem, MemoryInitiatorSocket& dma_socket)>;

// A DMA's answer to the controller when it is given an instruction.
struct Accepted {
  Cycle completion = 0;  // the cycle its last transaction lands (the reported d)
  std::string error;     // non-empty: the target refused a transaction (the run faults)
};

// A unit whose completions depend on a memory target: the controller hands it
// each instruction in the issue cycle `now` and keeps the completion it
// reports on the scoreboard. The command still reaches the unit through its
// command signal at now + 1, when the work starts.
class TransferUnit {
 public:
  virtual ~TransferUnit() = default;
  virtual Accepted accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) = 0;
};

// The cycle a transaction sent in cycle `now` with annotated delay `delay` on
// return lands: now + ceil(delay / clock period), and never before `start`.
inline Cycle arrival_cycle(Cycle now, const sc_core::sc_time& delay, Cycle start) {
  const sc_dt::uint64 period = kClockPeriod.value();
  const Cycle a = now + (delay.value() + period - 1) / period;
  return a < start ? start : a;
}

// For targets. The cycle a transaction is requested in: sc_time_stamp() +
// delay, rounded up to a whole cycle.
inline Cycle request_cycle(const sc_core::sc_time& delay) {
  const sc_dt::uint64 period = kClockPeriod.value();
  return ((sc_core::sc_time_stamp() + delay).value() + period - 1) / period;
}

// For targets: sets the annotated delay so that the transaction lands in
// cycle `arrival` (zero if that cycle has begun).
inline void set_arrival(sc_core::sc_time& delay, Cycle arrival) {
  const sc_dt::uint64 at = arrival * kClockPeriod.value();
  const sc_dt::uint64 now = sc_core::sc_time_stamp().value();
  delay = sc_core::sc_time::from_value(at > now ? at - now : 0);
}

}  // namespace tpu::model
