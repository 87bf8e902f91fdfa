// The DMAs' memory ports: SystemC TLM-2.0 initiator sockets to host memory
// and weight memory, and how a run binds them (docs/microarchitecture.md,
// "Memory ports").
//
// Each DMA instruction becomes one blocking transaction (generic payload,
// b_transport) sent in the cycle c the controller issues it, requested at the
// start of cycle s = c + 1 (an annotated delay of one clock period). The
// target returns, in the delay, the time its last byte is in place, and may
// say in a RowLandings extension when each row lands before that; the unit
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

// The DMAs' sockets, which a target binds to: 32-bit bus width, the base
// protocol.
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

// What a DMA asks of a target beside the transaction itself. The
// transaction covers `rows` rows of `row_bytes` bytes (a host transfer; a
// weight tile is one row), and a target that knows this extension writes
// the cycle row r is in place in `lands[r]` and sets `filled` (the last
// row's cycle is the transaction's own). A target that ignores it lands every
// row with the transaction.
//
// On a TLM_IGNORE_COMMAND transaction with `query` set to TLM_READ_COMMAND or
// TLM_WRITE_COMMAND it is a *timing query* (the ignore command's meaning is
// the extension's to define): the target times that read or write exactly
// as if it were sent, changes its state the same way, and moves no data.
// A DMA sends a query only to a target that granted it a DMI pointer over the
// whole range; it then moves the data itself, each row in its landing cycle.
// A target that leaves `filled` unset has not answered, and the DMA sends the
// read or write itself.
//
// Not a data-carrying extension: clone and copy_from keep only the request.
struct RowLandings : tlm::tlm_extension<RowLandings> {
  std::uint64_t rows = 0, row_bytes = 0;
  Cycle* lands = nullptr;
  tlm::tlm_command query = tlm::TLM_IGNORE_COMMAND;  // a timing query for this command
  bool filled = false;

  tlm::tlm_extension_base* clone() const override {
    auto* c = new RowLandings;
    c->copy_from(*this);
    return c;
  }
  void copy_from(const tlm::tlm_extension_base& other) override {
    const auto& o = static_cast<const RowLandings&>(other);
    rows = o.rows;
    row_bytes = o.row_bytes;
    query = o.query;
  }

  // For targets: the command a transaction times (its own, or the queried
  // one), and whether it moves data.
  static tlm::tlm_command timed_command(const tlm::tlm_generic_payload& trans, bool* moves_data) {
    const RowLandings* e = trans.get_extension<RowLandings>();
    const bool query = trans.get_command() == tlm::TLM_IGNORE_COMMAND && e != nullptr &&
                       e->query != tlm::TLM_IGNORE_COMMAND;
    *moves_data = !query;
    return query ? e->query : trans.get_command();
  }
  // For targets: the extension when it asks for rows that tile `length` bytes.
  static RowLandings* rows_of(tlm::tlm_generic_payload& trans, std::uint64_t length) {
    RowLandings* e = trans.get_extension<RowLandings>();
    return e != nullptr && e->lands != nullptr && e->rows > 0 && e->rows * e->row_bytes == length ? e
                                                                                                    : nullptr;
  }
};

// A DMA's side of its memory port: sends one transfer as one transaction, or
// as a timing query when the target granted a DMI pointer over its bytes,
// and works out when each row lands (docs/microarchitecture.md, "Memory
// ports").
//
// It is also the socket's backward path (bind the DMA's socket to it): the
// DMAs use blocking transport only, so nb_transport_bw is never called.
class PortClient : public tlm::tlm_bw_transport_if<> {
 public:
  PortClient() { trans_.set_extension(&ext_); }
  ~PortClient() override { trans_.clear_extension(&ext_); }
  PortClient(const PortClient&) = delete;
  PortClient& operator=(const PortClient&) = delete;

  struct Sent {
    Cycle last = 0;             // the cycle the last byte lands (a)
    bool direct = false;        // the DMA moves the data through direct()
    std::string refused;        // non-empty: the target's response, not OK
  };

  // Sends `command` over `rows` rows of `row_bytes` at `address` in the cycle
  // `now` the instruction issues (requested at the start of now + 1). If it
  // is sent as a transaction (not direct), `data()` gives where a read puts
  // the bytes, or what a write sends. Writes lands[r] for every row: in
  // order, from now + 1 to the last byte's cycle, which the last row takes.
  Sent send(tlm::tlm_fw_transport_if<>& target, tlm::tlm_command command, std::uint64_t address,
            const std::function<unsigned char*()>& data, std::uint64_t rows, std::uint64_t row_bytes,
            Cycle* lands, Cycle now);

  // The target's bytes at `address`, after a send that was direct.
  unsigned char* direct(std::uint64_t address) const {
    return dmi_.get_dmi_ptr() + (address - dmi_.get_start_address());
  }

  // The backward path: the target withdraws DMI over [start, end].
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) override {
    if (dmi_valid_ && start <= dmi_.get_end_address() && end >= dmi_.get_start_address()) dmi_valid_ = false;
    dmi_refused_ = false;
  }
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload&, tlm::tlm_phase&, sc_core::sc_time&) override {
    return tlm::TLM_COMPLETED;
  }

 private:
  bool covers(tlm::tlm_command command, std::uint64_t address, std::uint64_t bytes) const;

  tlm::tlm_generic_payload trans_;
  RowLandings ext_;  // set on trans_ for its life (cleared before it goes)
  tlm::tlm_dmi dmi_;
  bool dmi_valid_ = false, dmi_refused_ = false;
  bool queries_unanswered_ = false;  // the target ignored a timing query: no more
};

// What the default targets share: a target socket bound to the target
// itself, the checks every transaction passes, and DMI over all of one
// memory (`bytes`, `size` bytes; writable or read-only).
class MemoryTargetBase : public sc_core::sc_module, public tlm::tlm_fw_transport_if<> {
 public:
  tlm::tlm_target_socket<> socket;

 protected:
  MemoryTargetBase(sc_core::sc_module_name name, unsigned char* bytes, std::uint64_t size, bool writable,
                   bool grants_dmi);

  // Checks a transaction of the base protocol: no byte enables, no
  // streaming, in range, a write only if writable. Returns the command to
  // time (the transaction's own or the queried one; RowLandings), or sets
  // the response (an error, or OK for a plain ignore command) and returns
  // TLM_IGNORE_COMMAND: nothing more to do.
  tlm::tlm_command check(tlm::tlm_generic_payload& trans, bool* moves_data) const;

  bool get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi) override;
  // Non-blocking transport is not offered (an error response); debug
  // transport moves nothing.
  tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload& trans, tlm::tlm_phase&,
                                     sc_core::sc_time&) override {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return tlm::TLM_COMPLETED;
  }
  unsigned int transport_dbg(tlm::tlm_generic_payload&) override { return 0; }

 private:
  unsigned char* bytes_;
  std::uint64_t size_;
  bool writable_, grants_dmi_;
};

// A DMA's answer to the controller when it is given an instruction.
struct Accepted {
  Cycle completion = 0;  // the cycle its last byte lands (the reported d)
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
