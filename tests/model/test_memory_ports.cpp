// The DMAs' TLM-2.0 memory ports with targets other than the default ones
// (docs/microarchitecture.md, "Memory ports").
//
// Every expected cycle here comes from that section's contract and closed
// forms: a transaction requested at t lands at a(t, n) by the target's own
// rule; host DMA rows land in order, l_r = max(a_r, l_{r-1}), d = l_{R-1};
// weight tiles are pushed at d_k = max(a_k, d_{k-1} + 1); a dependent
// instruction issues at d + 1, the next host DMA instruction at d, MMC.S
// after its tile at d + 1 + N, HLT after the last completion at d + 1. The
// serial target below is written here, from the document's definition; the
// model is only run and observed.
#include <catch2/catch.hpp>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/host_memory_target.h"
#include "model/tpu.h"
#include "model/weight_memory_target.h"
#include "model_test_support.h"
#include "random_program/random_program.h"

namespace {

using namespace tpu;
using model::StallCause;
using testing::check_controller;
using testing::check_halt;
using testing::check_stalls;
using testing::check_mmc;
using testing::check_unit;
using testing::Cycle;


// ---- A serial memory ----------------------------------------------------------
//
// Each transaction waits for the previous one to land and then pays the whole
// latency: requested at t, n bytes, it lands at a = max(t, a' + 1) + L + ceil(n / B) - 1
// (a' the previous transaction's landing cycle, 0 for none). With `answers_rows`
// it also answers a host transfer's RowLandings as if each row were a transaction
// of its own, one after the other (the transaction's a is its last row's);
// without, it ignores the extension. Reads and writes act on `store` at the call;
// the ignore command does nothing (so it never answers a timing query). With
// `grants_dmi` it hands out a DMI pointer all the same. Optionally it refuses
// transactions that reach a given byte address.
class SerialTarget : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<SerialTarget> socket;
  std::uint64_t transactions = 0;

  SerialTarget(sc_core::sc_module_name name, model::RowMemory<std::int8_t>& store, Cycle latency,
               Cycle bytes_per_cycle, bool answers_rows = true,
               std::uint64_t refuse_from = ~std::uint64_t{0}, bool grants_dmi = false)
      : sc_module(name), socket("socket"), store_(store), latency_(latency), bpc_(bytes_per_cycle),
        answers_rows_(answers_rows), refuse_from_(refuse_from), grants_dmi_(grants_dmi) {
    socket.register_b_transport(this, &SerialTarget::b_transport);
    socket.register_get_direct_mem_ptr(this, &SerialTarget::get_direct_mem_ptr);
  }

 private:
  bool get_direct_mem_ptr(tlm::tlm_generic_payload&, tlm::tlm_dmi& dmi) {
    dmi.init();
    if (!grants_dmi_) return false;
    dmi.set_dmi_ptr(reinterpret_cast<unsigned char*>(store_.data().data()));
    dmi.set_start_address(0);
    dmi.set_end_address(store_.data().size() - 1);
    dmi.allow_read_write();
    return true;
  }

  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
    if (trans.get_command() == tlm::TLM_IGNORE_COMMAND) {
      trans.set_response_status(tlm::TLM_OK_RESPONSE);
      return;
    }
    const sc_core::sc_time ns(1, sc_core::SC_NS);
    const std::uint64_t unit = ns.value();
    const std::uint64_t now = sc_core::sc_time_stamp().value();
    const Cycle t = (now + delay.value() + unit - 1) / unit;  // the request cycle
    const std::uint64_t addr = trans.get_address();
    const std::uint64_t n = trans.get_data_length();
    if (addr + n > refuse_from_ || addr + n > store_.data().size()) {
      trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    ++transactions;
    auto* rows = trans.get_extension<model::RowLandings>();
    if (answers_rows_ && rows != nullptr) {
      REQUIRE(rows->rows * rows->row_bytes == n);
      for (std::uint64_t r = 0; r < rows->rows; ++r) {
        last_ = std::max(t, last_ + 1) + latency_ + ceil_div(rows->row_bytes, bpc_) - 1;
        rows->lands[r] = last_;
      }
      rows->filled = true;
    } else {
      last_ = std::max(t, last_ + 1) + latency_ + ceil_div(n, bpc_) - 1;
    }
    auto* mem = reinterpret_cast<unsigned char*>(store_.data().data()) + addr;
    if (trans.is_read()) std::memcpy(trans.get_data_ptr(), mem, n);
    else if (trans.is_write()) std::memcpy(mem, trans.get_data_ptr(), n);
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    delay = ns * static_cast<double>(last_) - sc_core::sc_time_stamp();
  }

  model::RowMemory<std::int8_t>& store_;
  Cycle latency_, bpc_, last_ = 0;
  bool answers_rows_;
  std::uint64_t refuse_from_;
  bool grants_dmi_;
};

model::MemoryTargetFactory serial_host(Cycle latency, Cycle bpc, bool answers_rows = true,
                                       std::uint64_t refuse_from = ~std::uint64_t{0},
                                       bool grants_dmi = false) {
  return [=](const ArchConfig&, model::Memories& mem, model::MemoryInitiatorSocket& dma) {
    auto t = std::make_shared<SerialTarget>("serial_host", mem.host, latency, bpc, answers_rows,
                                            refuse_from, grants_dmi);
    dma.bind(t->socket);
    return std::shared_ptr<void>(t);
  };
}

model::MemoryTargetFactory serial_weights(Cycle latency, Cycle bpc, bool grants_dmi = false) {
  return [=](const ArchConfig&, model::Memories& mem, model::MemoryInitiatorSocket& dma) {
    auto t = std::make_shared<SerialTarget>("serial_weights", mem.weights, latency, bpc, true,
                                            ~std::uint64_t{0}, grants_dmi);
    dma.bind(t->socket);
    return std::shared_ptr<void>(t);
  };
}

// The default targets' classes with other parameters; with `dmi` (their
// default) the DMAs move the data through DMI after a timing query, without
// it every transfer is a transaction that carries its data.
model::MemoryTargetFactory streaming_host(Cycle latency, Cycle bpc, bool dmi = true) {
  return [=](const ArchConfig&, model::Memories& mem, model::MemoryInitiatorSocket& dma) {
    auto t = std::make_shared<model::HostMemoryTarget>("host_memory", mem.host, latency, bpc, dmi);
    dma.bind(t->socket);
    return std::shared_ptr<void>(t);
  };
}

model::MemoryTargetFactory pipelined_weights(Cycle latency, Cycle bpc, bool dmi = true) {
  return [=](const ArchConfig&, model::Memories& mem, model::MemoryInitiatorSocket& dma) {
    auto t = std::make_shared<model::WeightMemoryTarget>("weight_memory", mem.weights, latency, bpc, dmi);
    dma.bind(t->socket);
    return std::shared_ptr<void>(t);
  };
}

// A target's timing (L', B') with the machine's own timing far from it, so
// that a result that used the configuration's Lh/Bh/Lw/Bw would show.
struct Timing {
  Cycle latency, bpc;
};
const Timing kTimings[] = {{9, 3}, {0, 1}, {5, 64}, {23, 7}};

ArchConfig config(unsigned n) {
  testing::Knobs k{"", 2, 16, 1, 32, 2, 4};
  return testing::knob_config(n, k);
}

std::vector<model::Detail> both_paths() { return {model::Detail::Detailed, model::Detail::Fast}; }

model::Memories random_memories(const ArchConfig& cfg, std::uint32_t seed) {
  model::Memories mem(cfg);
  std::mt19937 rng(seed);
  testing::fill_memories(mem, rng);
  return mem;
}

bool same_rows(const std::int8_t* a, const std::int8_t* b, std::size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

// ---- Host memory ------------------------------------------------------------------

TEST_CASE("A serial host target answering rows: RHM, WHM and WHM.A take R*(L' + ceil(b/B')) cycles",
          "[memory_ports]") {
  for (unsigned n : {4u, 8u, 16u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const Cycle rows = 5, rows2 = 3;
        // RHM 0 -> UB 0 (5 rows); RHM 1000 -> UB 500 (3 rows), no hazard with the
        // first: waits for the unit, issuing in the first one's completion cycle;
        // WHM.A of 2 ACC rows to host 2000; HLT after the last completion.
        const isa::Program prog = testing::assemble_for(
            cfg, "RHM 0, 0, 5\nRHM 1000, 500, 3\nWHM.A 7, 2000, 2\nHLT\n");
        model::Memories mem = random_memories(cfg, 7);
        const model::Memories before = mem;
        model::RunOptions opts;
        opts.detail = detail;
        opts.host_memory = serial_host(tm.latency, tm.bpc);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);

        const Cycle per_row = tm.latency + ceil_div(n, tm.bpc);
        const Cycle per_acc_row = tm.latency + ceil_div(4 * n, tm.bpc);
        const Cycle d0 = 0 + rows * per_row;
        const Cycle c1 = d0, d1 = c1 + rows2 * per_row;
        const Cycle c2 = d1, d2 = c2 + 2 * per_acc_row;
        check_unit(log, 0, 0, d0);
        check_unit(log, 1, c1, d1);
        check_unit(log, 2, c2, d2);
        check_halt(log, 3, d2 + 1);
        // Unit busy: pc 1 in 1 .. d0 - 1, pc 2 in d0 + 1 .. d1 - 1; drain: d1 + 1 .. d2.
        check_stalls(log, {{StallCause::UnitBusy, (d0 - 1) + (d1 - d0 - 1)},
                           {StallCause::Drain, d2 - d1}});
        CHECK(log.stats.units.at("host_dma").busy_cycles == d2);  // cycles 1 .. d2
        // The data went through the target.
        CHECK(same_rows(mem.ub.row(0), before.host.row(0), rows * n));
        CHECK(same_rows(mem.ub.row(500), before.host.row(1000), rows2 * n));
        for (Cycle r = 0; r < 2; ++r)
          for (Cycle j = 0; j < n; ++j) {
            std::int32_t v;
            std::memcpy(&v, mem.host.row(2000 + 4 * r) + 4 * j, 4);
            CHECK(v == before.acc.row(7 + r)[j]);
          }
      }
}

TEST_CASE("A target that does not answer rows lands a host transfer whole", "[memory_ports]") {
  // One transaction per transfer: a = max(t, a' + 1) + L' + ceil(R*b/B') - 1
  // with t = c + 1, so RHM d = c + L' + ceil(R*N/B'), every row landing in d.
  for (unsigned n : {4u, 8u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const isa::Program prog =
            testing::assemble_for(cfg, "RHM 0, 0, 5\nRHM 1000, 500, 3\nWHM.A 7, 2000, 2\nHLT\n");
        model::Memories mem = random_memories(cfg, 7);
        model::RunOptions opts;
        opts.detail = detail;
        opts.host_memory = serial_host(tm.latency, tm.bpc, false);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
        const Cycle d0 = tm.latency + ceil_div(5 * n, tm.bpc);
        const Cycle d1 = d0 + tm.latency + ceil_div(3 * n, tm.bpc);
        const Cycle d2 = d1 + tm.latency + ceil_div(2 * 4 * n, tm.bpc);
        check_unit(log, 0, 0, d0);
        check_unit(log, 1, d0, d1);
        check_unit(log, 2, d1, d2);
        check_halt(log, 3, d2 + 1);
      }
}

TEST_CASE("Host rows land when the target says: a run cut between rows holds those landed",
          "[memory_ports]") {
  // RHM of 6 rows issued at 0. Answering rows, the serial target lands row r
  // at (r + 1) * (L' + ceil(N/B')); not answering, all in d = L' + ceil(6N/B').
  // A run stopped by the cycle limit in cycle x holds the UB rows landed in or
  // before x.
  for (unsigned n : {4u, 8u})
    for (const Timing& tm : kTimings)
      for (bool answers : {true, false})
        for (model::Detail detail : both_paths()) {
          const ArchConfig cfg = config(n);
          const Cycle per_row = tm.latency + ceil_div(n, tm.bpc);
          const Cycle whole = tm.latency + ceil_div(6 * n, tm.bpc);
          const Cycle last = answers ? 6 * per_row : whole;
          for (Cycle x = 1; x < last; x += std::max<Cycle>(1, last / 9)) {
            CAPTURE(n, tm.latency, tm.bpc, answers, detail == model::Detail::Fast, x);
            const isa::Program prog = testing::assemble_for(cfg, "RHM 3, 2, 6\nHLT\n");
            model::Memories mem = random_memories(cfg, 17);
            const model::Memories before = mem;
            model::RunOptions opts;
            opts.detail = detail;
            opts.max_cycles = x;
            opts.host_memory = serial_host(tm.latency, tm.bpc, answers);
            const model::RunLog log = model::run_program(cfg, prog, mem, opts);
            REQUIRE(log.fault);
            CHECK(log.fault->cycle == x);
            for (Cycle r = 0; r < 6; ++r) {
              const bool landed = answers ? (r + 1) * per_row <= x : whole <= x;
              CAPTURE(r, landed);
              CHECK(same_rows(mem.ub.row(2 + r), landed ? before.host.row(3 + r) : before.ub.row(2 + r), n));
            }
          }
        }
}

TEST_CASE("Hazards wait for a slow host transfer's reported completion", "[memory_ports]") {
  for (unsigned n : {4u, 8u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const Cycle rows = 6;
        // RAW: the MMC reads the UB rows the RHM writes; it issues at d0 + 1.
        // WAR: the ACT writes UB rows 200..201 that the WHM (after the MMC) reads.
        const isa::Program prog = testing::assemble_for(
            cfg, "RHM 40, 0, 6\nMMC.O 0, 0, 6\nWHM 200, 300, 6\nACT 100, 200, 2\nHLT\n");
        model::Memories mem = random_memories(cfg, 11);
        const model::Memories before = mem;
        model::RunOptions opts;
        opts.detail = detail;
        opts.host_memory = serial_host(tm.latency, tm.bpc);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);

        const Cycle per_row = tm.latency + ceil_div(n, tm.bpc);
        const Cycle d0 = rows * per_row;
        const Cycle c_mmc = d0 + 1, d_mmc = c_mmc + rows + 2 * n;
        // The WHM reads UB rows 200..205, which nothing in flight writes; the
        // host DMA accepts from d0, so it issues right after the MMC.
        const Cycle c_whm = c_mmc + 1, d_whm = c_whm + rows * per_row;
        // The ACT reads ACC 100..101 (no hazard with the MMC's ACC 0..5) and
        // writes UB 200..201, which the WHM reads until d_whm: WAR.
        const Cycle c_act = d_whm + 1, d_act = c_act + 2 + cfg.act_latency;
        check_unit(log, 0, 0, d0);
        check_unit(log, 1, c_mmc, d_mmc);
        check_unit(log, 2, c_whm, d_whm);
        check_unit(log, 3, c_act, d_act);
        const Cycle last = std::max(d_mmc, d_act);
        check_halt(log, 4, last + 1);
        check_stalls(log, {{StallCause::Raw, d0},
                           {StallCause::War, d_whm - c_whm},
                           {StallCause::Drain, last - c_act}});
        // The host rows the WHM wrote are the UB rows the RHM read.
        CHECK(same_rows(mem.host.row(300), before.ub.row(200), rows * n));
      }
}

TEST_CASE("The streaming host target with other latency and bandwidth", "[memory_ports]") {
  // HostMemoryTarget(L', B'): RHM of R rows issued at c on an idle unit
  // completes at c + L' + ceil(R*N/B'); WHM.A at c + L' + ceil(4*R*N/B').
  for (unsigned n : {4u, 8u, 16u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const isa::Program prog =
            testing::assemble_for(cfg, "RHM 0, 0, 7\nWHM.A 0, 64, 3\nMMC.O 0, 0, 7\nHLT\n");
        model::Memories mem = random_memories(cfg, 3);
        model::RunOptions opts;
        opts.detail = detail;
        opts.host_memory = streaming_host(tm.latency, tm.bpc);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
        const Cycle d0 = tm.latency + ceil_div(7 * n, tm.bpc);
        // WHM.A: the unit accepts at d0; no hazard (ACC rows, host rows 64..).
        const Cycle d1 = d0 + tm.latency + ceil_div(4 * 3 * n, tm.bpc);
        // MMC.O writes ACC 0..6, which the WHM.A reads: WAR, and it reads UB
        // 0..6 which the RHM wrote (done by d0 < d1).
        const Cycle c2 = d1 + 1, d2 = c2 + 7 + 2 * n;
        check_unit(log, 0, 0, d0);
        check_unit(log, 1, d0, d1);
        check_unit(log, 2, c2, d2);
        check_halt(log, 3, d2 + 1);
      }
}

// ---- Weight memory ----------------------------------------------------------------

TEST_CASE("A serial weight target: back-to-back RWs land L' + T' apart", "[memory_ports]") {
  for (unsigned n : {4u, 8u, 16u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);  // F = 4
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const isa::Program prog = testing::assemble_for(cfg, "RW 3\nRW 1\nRW 2\nHLT\n");
        model::Memories mem = random_memories(cfg, 5);
        model::RunOptions opts;
        opts.detail = detail;
        opts.weight_memory = serial_weights(tm.latency, tm.bpc);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
        const Cycle per_tile = tm.latency + ceil_div(n * n, tm.bpc);
        for (Cycle i = 0; i < 3; ++i) check_unit(log, i, i, (i + 1) * per_tile);
        check_halt(log, 3, 3 * per_tile + 1);
        check_stalls(log, {{StallCause::Drain, 3 * per_tile + 1 - 3}});
      }
}

TEST_CASE("The pipelined weight target with other latency and bandwidth", "[memory_ports]") {
  // WeightMemoryTarget(L', B'): k back-to-back RWs from c_0 complete at
  // c_0 + L' + i*T', i = 1..k; MMC.S after the first tile at d + 1 + N.
  for (unsigned n : {4u, 8u, 16u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const isa::Program prog =
            testing::assemble_for(cfg, "RW 0\nRW 5\nRW 6\nRW 7\nHLT\n");
        model::Memories mem = random_memories(cfg, 9);
        model::RunOptions opts;
        opts.detail = detail;
        opts.weight_memory = pipelined_weights(tm.latency, tm.bpc);
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
        const Cycle t = ceil_div(n * n, tm.bpc);
        for (Cycle i = 0; i < 4; ++i) check_unit(log, i, i, tm.latency + (i + 1) * t);
        check_halt(log, 4, tm.latency + 4 * t + 1);
      }
}

TEST_CASE("MMC.S waits for a tile from a slow weight target", "[memory_ports]") {
  for (unsigned n : {4u, 8u})
    for (const Timing& tm : kTimings)
      for (model::Detail detail : both_paths()) {
        const ArchConfig cfg = config(n);
        CAPTURE(n, tm.latency, tm.bpc, detail == model::Detail::Fast);
        const Cycle rows = 9;
        const isa::Program prog = testing::assemble_for(cfg, "RW 2\nMMC.SO 0, 0, 9\nHLT\n");
        model::Memories mem = random_memories(cfg, 13);
        const model::Memories before = mem;
        // The target serves weights of its own, not the run's weight memory.
        model::RowMemory<std::int8_t> served(before.weights.rows(), before.weights.width());
        std::mt19937 rng(n * 100 + tm.latency);
        for (std::int8_t& b : served.data()) b = static_cast<std::int8_t>(rng());
        model::RunOptions opts;
        opts.detail = detail;
        opts.weight_memory = [&, tm](const ArchConfig&, model::Memories&, model::MemoryInitiatorSocket& dma) {
          auto t = std::make_shared<SerialTarget>("own_weights", served, tm.latency, tm.bpc);
          dma.bind(t->socket);
          return std::shared_ptr<void>(t);
        };
        const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
        const Cycle d = tm.latency + ceil_div(n * n, tm.bpc);  // RW at 0
        // The MMC.S issues at 1 and waits in the matrix unit until the tile
        // has been loaded for a cycle; HLT drains from 2.
        const Cycle s_m = d + 2 + n;
        check_unit(log, 0, 0, d);
        check_mmc(log, 1, 1, s_m, s_m + rows + 2 * n - 1);
        check_halt(log, 2, s_m + rows + 2 * n);
        check_stalls(log, {{StallCause::Drain, s_m + rows + 2 * n - 2}});
        // ACC = UB . W2 as the target served it.
        const std::int8_t* w = served.row(2);
        for (Cycle i = 0; i < rows; ++i)
          for (Cycle j = 0; j < n; ++j) {
            std::int64_t sum = 0;
            for (Cycle k = 0; k < n; ++k) sum += before.ub.row(i)[k] * w[k * n + j];
            CHECK(mem.acc.row(i)[j] == testing::wrap32(sum));
          }
      }
}

// ---- Refusals, and both paths on random programs ----------------------------------------

TEST_CASE("A transaction the target refuses stops the run with a fault", "[memory_ports]") {
  for (model::Detail detail : both_paths()) {
    const ArchConfig cfg = config(8);
    // Host bytes from row 100 on are refused: the second RHM reaches them.
    const isa::Program prog = testing::assemble_for(cfg, "RHM 0, 0, 2\nRHM 97, 8, 5\nHLT\n");
    model::Memories mem(cfg);
    model::RunOptions opts;
    opts.detail = detail;
    opts.host_memory = serial_host(3, 4, true, 100 * 8);
    const model::RunLog log = model::run_program(cfg, prog, mem, opts);
    REQUIRE(log.fault);
    // The first RHM completes at 2 * (3 + 2) = 10, the second issues then.
    CHECK(log.fault->cycle == 10);
    CHECK(log.fault->pc == 1);
    CHECK(log.fault->reason.find("host memory target answered") != std::string::npos);
    CHECK(log.fault->reason.find("5 rows from host byte 776") != std::string::npos);
  }
}

template <typename T>
bool same_memory(const model::RowMemory<T>& a, const model::RowMemory<T>& b) {
  return a.data().size() == b.data().size() &&
         std::memcmp(a.data().data(), b.data().data(), a.data().size() * sizeof(T)) == 0;
}

// Two runs of one program: the same records, stalls, statistics and memories.
void check_same_run(const model::RunLog& f, const model::RunLog& d, const model::Memories& mf,
                    const model::Memories& md) {
  REQUIRE(f.retired.size() == d.retired.size());
  for (std::size_t i = 0; i < d.retired.size(); ++i) {
    CAPTURE(i);
    CHECK(f.retired[i].issue == d.retired[i].issue);
    CHECK(f.retired[i].start == d.retired[i].start);
    CHECK(f.retired[i].completed == d.retired[i].completed);
    CHECK(f.retired[i].completion == d.retired[i].completion);
  }
  CHECK(f.halted == d.halted);
  REQUIRE(f.fault.has_value() == d.fault.has_value());
  if (f.fault) CHECK(f.fault->message() == d.fault->message());
  CHECK(f.stats.cycles == d.stats.cycles);
  CHECK(f.stall_runs == d.stall_runs);
  for (const auto& [name, u] : d.stats.units) {
    CAPTURE(name);
    CHECK(f.stats.units.at(name).busy_cycles == u.busy_cycles);
    CHECK(f.stats.units.at(name).instructions == u.instructions);
  }
  CHECK(same_memory(mf.host, md.host));
  CHECK(same_memory(mf.ub, md.ub));
  CHECK(same_memory(mf.acc, md.acc));
}

TEST_CASE("Fast and detailed paths agree with other memory targets", "[memory_ports][fast_path]") {
  testing::RandomProgramGenerator gen(20261203);
  unsigned halted = 0, cut = 0;
  for (unsigned p = 0; p < 120; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    model::Memories initial(rp.cfg);
    gen.fill(initial);
    const Timing host = kTimings[p % 4], weights = kTimings[(p / 4) % 4];
    CAPTURE(p, host.latency, host.bpc, weights.latency, weights.bpc);
    // Serial targets for even programs, the streaming and pipelined ones for odd.
    model::RunOptions opts;
    // The serial host target answers rows for p = 0..7 mod 16, not for 8..15.
    opts.host_memory = p % 2 ? streaming_host(host.latency, host.bpc)
                             : serial_host(host.latency, host.bpc, (p / 8) % 2 == 0);
    opts.weight_memory =
        p % 2 ? pipelined_weights(weights.latency, weights.bpc) : serial_weights(weights.latency, weights.bpc);
    auto run = [&](model::Detail detail, model::Cycle limit, model::Memories& mem) {
      model::RunOptions o = opts;
      o.detail = detail;
      o.max_cycles = limit;
      return model::run_program(rp.cfg, rp.program, mem, o);
    };
    for (int pass = 0; pass < 2; ++pass) {
      model::Cycle limit = 100'000'000;
      if (pass == 1) {
        model::Memories probe = initial;
        const model::RunLog full = run(model::Detail::Fast, limit, probe);
        if (!full.halted || full.stats.cycles < 2) break;
        limit = gen.pick(0, static_cast<unsigned>(full.stats.cycles - 1));
        ++cut;
      }
      CAPTURE(pass, limit);
      model::Memories md = initial, mf = initial;
      const model::RunLog d = run(model::Detail::Detailed, limit, md);
      const model::RunLog f = run(model::Detail::Fast, limit, mf);
      halted += pass == 0 && d.halted;
      check_same_run(f, d, mf, md);
    }
  }
  // The generator mostly makes programs that run to HLT.
  CHECK(halted >= 60);
  CHECK(cut >= 50);
}

TEST_CASE("DMI and transactions give the same runs", "[memory_ports][fast_path]") {
  // The default targets grant DMI and answer timing queries: the DMAs move
  // the data themselves, row by row as it lands. Without DMI every transfer
  // is a transaction carrying its data (staged reads, held writes). A target
  // that grants DMI but ignores timing queries gets transactions after the
  // first query. All of it must give the same run, on both paths, whole or
  // cut by a cycle limit.
  testing::RandomProgramGenerator gen(20261204);
  unsigned cut = 0;
  for (unsigned p = 0; p < 80; ++p) {
    const testing::RandomProgram rp = gen.next(/*faults=*/true);
    model::Memories initial(rp.cfg);
    gen.fill(initial);
    const Timing host = kTimings[p % 4], weights = kTimings[(p / 4) % 4];
    CAPTURE(p, host.latency, host.bpc, weights.latency, weights.bpc);
    const bool serial = p % 3 == 0;
    auto run = [&](bool dmi, model::Detail detail, model::Cycle limit, model::Memories& mem) {
      model::RunOptions o;
      o.detail = detail;
      o.max_cycles = limit;
      o.host_memory = serial ? serial_host(host.latency, host.bpc, true, ~std::uint64_t{0}, dmi)
                             : streaming_host(host.latency, host.bpc, dmi);
      o.weight_memory = serial ? serial_weights(weights.latency, weights.bpc, dmi)
                               : pipelined_weights(weights.latency, weights.bpc, dmi);
      return model::run_program(rp.cfg, rp.program, mem, o);
    };
    for (int pass = 0; pass < 2; ++pass) {
      model::Cycle limit = 100'000'000;
      if (pass == 1) {
        model::Memories probe = initial;
        const model::RunLog full = run(false, model::Detail::Detailed, limit, probe);
        if (!full.halted || full.stats.cycles < 2) break;
        limit = gen.pick(0, static_cast<unsigned>(full.stats.cycles - 1));
        ++cut;
      }
      model::Memories reference_mem = initial;
      const model::RunLog reference = run(false, model::Detail::Detailed, limit, reference_mem);
      for (model::Detail detail : both_paths())
        for (bool dmi : {false, true}) {
          if (!dmi && detail == model::Detail::Detailed) continue;
          CAPTURE(pass, limit, serial, dmi, detail == model::Detail::Fast);
          model::Memories mem = initial;
          const model::RunLog log = run(dmi, detail, limit, mem);
          check_same_run(log, reference, mem, reference_mem);
          CHECK(same_memory(mem.weights, reference_mem.weights));
        }
    }
  }
  CHECK(cut >= 30);
}

TEST_CASE("The default targets bound explicitly give the configuration's timing",
          "[memory_ports]") {
  // HostMemoryTarget::factory() and WeightMemoryTarget::factory() are what an
  // empty RunOptions binds: RHM d = c + Lh + ceil(R*N/Bh), RW d = c + Lw + T.
  const ArchConfig cfg = config(8);  // Lh 2, Bh 16, Lw 1, Bw 32
  const isa::Program prog = testing::assemble_for(cfg, "RHM 0, 0, 5\nRW 0\nHLT\n");
  model::Memories mem(cfg);
  model::RunOptions opts;
  opts.host_memory = model::HostMemoryTarget::factory();
  opts.weight_memory = model::WeightMemoryTarget::factory();
  const model::RunLog log = testing::run_to_halt(cfg, prog, mem, opts);
  const Cycle d0 = 2 + ceil_div(5 * 8, 16);
  const Cycle d1 = 1 + 1 + ceil_div(64, 32);
  check_unit(log, 0, 0, d0);
  check_unit(log, 1, 1, d1);
  check_halt(log, 2, std::max(d0, d1) + 1);
}

}  // namespace
