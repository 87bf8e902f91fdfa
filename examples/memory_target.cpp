// Binding your own memory target to the TPU's DMAs (docs/microarchitecture.md,
// "Memory ports").
//
// The host DMA and the weight DMA reach their memories through TLM-2.0
// initiator sockets. This program writes a target of its own, a *serial*
// memory: each transaction waits for the previous one and pays the whole
// latency, so a transaction of n bytes requested in cycle t lands at
//     a = max(t, a' + 1) + L + ceil(n / B) - 1      (a': the previous one's)
// A host transfer is one transaction of R rows; the memory answers its
// model::RowLandings extension as if each row were such a transaction (a
// target that ignores the extension lands all the rows with the last byte).
// It binds the memory to both ports through model::RunOptions. It runs the same
// program with the default targets and with its own, and checks the cycle
// counts the contract predicts:
//   default:  RHM of R rows issued at c completes at c + Lh + ceil(R*N/Bh)
//             RW on an idle channel issued at c completes at c + Lw + ceil(N*N/Bw)
//   serial:   RHM: c + R * (L + ceil(N/B));  RW: c + L + ceil(N*N/B)
// Exit status 0 when every count matches, 1 otherwise.
//
//   build/examples/tpu-example-memory-target
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "asm/assembler.h"
#include "config/arch_config.h"
#include "model/memory_ports.h"
#include "model/tpu.h"

namespace {

using tpu::model::Cycle;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The serial memory. It serves data from the run's memory (`store`: host
// memory or weight memory), reading and writing at the call.
class SerialMemory : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<SerialMemory> socket;

  SerialMemory(sc_core::sc_module_name name, tpu::model::RowMemory<std::int8_t>& store,
               std::uint64_t latency, std::uint64_t bytes_per_cycle)
      : sc_module(name), socket("socket"), store_(store), latency_(latency), bpc_(bytes_per_cycle) {
    socket.register_b_transport(this, &SerialMemory::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
    // The request cycle: now plus the annotated delay (the DMA asks for the
    // start of the next cycle).
    const Cycle t = tpu::model::request_cycle(delay);
    const std::uint64_t address = trans.get_address(), n = trans.get_data_length();
    if (address + n > store_.data().size()) {
      trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    // Row by row when the DMA asks for the rows' cycles; a is the last one's.
    tpu::model::RowLandings* rows = trans.get_extension<tpu::model::RowLandings>();
    if (rows && (rows->rows == 0 || rows->rows * rows->row_bytes != n)) rows = nullptr;
    const std::uint64_t parts = rows ? rows->rows : 1;
    for (std::uint64_t r = 0; r < parts; ++r) {
      last_ = std::max(t, last_ + 1) + latency_ + ceil_div(n / parts, bpc_) - 1;
      if (rows) rows->lands[r] = last_;
    }
    if (rows) rows->filled = true;
    const Cycle a = last_;
    auto* bytes = reinterpret_cast<unsigned char*>(store_.data().data()) + address;
    if (trans.is_read()) std::memcpy(trans.get_data_ptr(), bytes, n);
    if (trans.is_write()) std::memcpy(bytes, trans.get_data_ptr(), n);
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    tpu::model::set_arrival(delay, a);  // the data is in place in cycle a
  }

  tpu::model::RowMemory<std::int8_t>& store_;
  std::uint64_t latency_, bpc_;
  Cycle last_ = 0;
};

// A factory for RunOptions: builds the target in the run's simulation, binds
// the DMA's socket to it and hands back its ownership.
tpu::model::MemoryTargetFactory serial(bool host, std::uint64_t latency, std::uint64_t bpc) {
  return [=](const tpu::ArchConfig&, tpu::model::Memories& mem,
             tpu::model::MemoryInitiatorSocket& dma) -> std::shared_ptr<void> {
    auto target = std::make_shared<SerialMemory>(host ? "serial_host" : "serial_weights",
                                                 host ? mem.host : mem.weights, latency, bpc);
    dma.bind(target->socket);
    return target;
  };
}

bool expect(const char* what, Cycle got, Cycle want) {
  std::printf("  %-34s %8llu  (contract: %llu)%s\n", what, static_cast<unsigned long long>(got),
              static_cast<unsigned long long>(want), got == want ? "" : "  MISMATCH");
  return got == want;
}

}  // namespace

int main() {
  const tpu::ArchConfig cfg = tpu::preset_config("small8");
  const std::uint64_t n = cfg.array_n, rows = 16;
  // RHM at cycle 0; RW at cycle 1 (another unit, no hazard); the MMC reads
  // the rows the RHM wrote with the tile the RW fetched.
  const char* source =
      "RHM 0, 0, 16\n"
      "RW 0\n"
      "MMC.SO 0, 0, 16\n"
      "WHM.A 0, 100, 16\n"
      "HLT\n";
  tpu::assembler::Options aopts;
  aopts.array_n = static_cast<unsigned>(n);
  const tpu::assembler::Result asm_result = tpu::assembler::assemble(source, aopts);
  if (!asm_result.program) return 1;
  const tpu::isa::Program& prog = *asm_result.program;

  const std::uint64_t latency = 30, bpc = 2;
  bool ok = true;
  for (int custom = 0; custom < 2; ++custom) {
    tpu::model::Memories mem(cfg);
    for (std::size_t i = 0; i < mem.host.data().size() && i < 4096; ++i)
      mem.host.data()[i] = static_cast<std::int8_t>(i * 7);
    tpu::model::RunOptions opts;
    if (custom) {
      opts.host_memory = serial(true, latency, bpc);
      opts.weight_memory = serial(false, latency, bpc);
    }
    const tpu::model::RunLog log = tpu::model::run_program(cfg, prog, mem, opts);
    if (!log.halted) return 1;
    std::printf("%s targets:\n", custom ? "serial (L = 30, B = 2)" : "default");
    const Cycle rhm = custom ? rows * (latency + ceil_div(n, bpc))
                             : cfg.host_latency + ceil_div(rows * n, cfg.host_bytes_per_cycle);
    const Cycle rw = 1 + (custom ? latency + ceil_div(n * n, bpc)
                                 : cfg.weight_latency + ceil_div(n * n, cfg.weight_bytes_per_cycle));
    ok &= expect("RHM 0, 0, 16 completes at", log.retired[0].completion, rhm);
    ok &= expect("RW 0 completes at", log.retired[1].completion, rw);
    // MMC.S: after its rows (RAW: d_RHM + 1) and its tile (loaded at d_RW + 1 + N).
    const Cycle mmc = std::max(rhm + 1, rw + 1 + n);
    ok &= expect("MMC.SO issues at", log.retired[2].issue, mmc);
    std::printf("  %-34s %8llu\n", "total cycles", static_cast<unsigned long long>(log.stats.cycles));
  }
  return ok ? 0 : 1;
}
