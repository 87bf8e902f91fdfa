// Per-layer statistics of a run (layer_stats.h).
#include "runtime/layer_stats.h"

#include <algorithm>

#include "isa/instruction.h"
#include "model/perf_counters.h"

namespace tpu::compiler {

using isa::Instruction;
using isa::Opcode;

std::uint64_t layer_useful_macs(const NetworkPlan& plan, std::size_t i) {
  const Layer& l = plan.net.layers[i];
  if (l.kind == LayerKind::Dense) return plan.batch * l.weight_shape[0] * l.weight_shape[1];
  if (l.kind == LayerKind::Conv2d) {
    const TensorInfo& out = plan.infos[i + 1];
    return plan.batch * out.shape[0] * out.shape[1] * l.weight_shape[0] * l.weight_shape[1] *
           l.weight_shape[2] * l.weight_shape[3];
  }
  if (l.kind == LayerKind::MatMul) {
    // L x K times K x cols per sample (docs/quantization.md, "MatMul of two activations").
    const TensorInfo& a = plan.infos[layer_inputs(plan.net, i)[0]];
    const TensorInfo& out = plan.infos[i + 1];
    return plan.batch * out.shape[0] * out.shape[1] * a.shape[2] * out.shape[2];
  }
  return 0;
}

void charge_program(const ArchConfig& cfg, const ProgramPlan& seg, const model::RunLog& log,
                    const std::int8_t* weights, std::vector<LayerStats>& layers) {
  // Cycles. The array reads row i of an MMC started at s in cycle s + i;
  // those cycles belong to the MMC's layer. A cycle the TPUv1 counters put
  // in a wait category belongs to the layer of the instruction that waited.
  // Every other cycle belongs to the layer of the oldest instruction not
  // yet completed in it.
  struct Busy {
    std::int64_t first, last;
  };
  std::vector<Busy> array;  // the array's rows, then the classified waits: disjoint
  isa::ConvGeometry geometry;  // as each instruction issued with it
  for (const model::RetireRecord& r : log.retired) {
    const Instruction& in = seg.program.code[r.pc];
    LayerStats& ls = layers[seg.instruction_layer[r.pc]];
    ++ls.instructions;
    ls.events += model::instruction_events(
        cfg, in, geometry, in.opcode == Opcode::MMC ? model::mmc_rows_read(r, in, log.stats.cycles) : 0);
    geometry.apply(in);
    const auto n_bytes = static_cast<std::uint64_t>(cfg.array_n);
    if (in.opcode == Opcode::RHM) ls.host_read_bytes += static_cast<std::uint64_t>(in.operands[2]) * n_bytes;
    if (in.opcode == Opcode::WHM)
      ls.host_write_bytes += static_cast<std::uint64_t>(in.operands[2]) * n_bytes *
                             (in.has(isa::kFlagWhmAcc) ? isa::kHostRowsPerAccRow : 1);
    if (in.opcode == Opcode::RW) ls.weight_bytes += n_bytes * n_bytes;
    // An HWT's tile comes from the host over its link (into weight memory).
    if (in.opcode == Opcode::HWT) ls.host_read_bytes += n_bytes * n_bytes;
    if (in.opcode != Opcode::MMC) continue;
    const auto rows = static_cast<std::uint64_t>(in.operands[2]);
    ls.mmc_rows += rows;
    ls.array_macs += rows * cfg.array_n * cfg.array_n;
    ls.cycles += rows;
    array.push_back({static_cast<std::int64_t>(r.start),
                     static_cast<std::int64_t>(r.start + rows) - 1});
  }
  // The idle-array cycles the TPUv1 counters classify belong to the layer
  // of the instruction that waited in them; they join the array's cycles.
  std::vector<model::PerfInterval> waits;
  model::count_perf(cfg, seg.program, log, weights, &waits);
  for (const model::PerfInterval& w : waits) {
    LayerStats& ls = layers[seg.instruction_layer[w.pc]];
    const std::uint64_t n = w.last - w.first + 1;
    ls.cycles += n;
    switch (w.category) {
      case model::PerfCategory::WeightStall: ls.weight_stall_cycles += n; break;
      case model::PerfCategory::WeightShift: ls.weight_shift_cycles += n; break;
      case model::PerfCategory::RawStall: ls.raw_stall_cycles += n; break;
      case model::PerfCategory::InputDataStall: ls.input_data_stall_cycles += n; break;
    }
    array.push_back({static_cast<std::int64_t>(w.first), static_cast<std::int64_t>(w.last)});
  }
  std::sort(array.begin(), array.end(), [](const Busy& a, const Busy& b) { return a.first < b.first; });
  std::vector<std::int64_t> before(array.size() + 1, 0);  // array cycles in array[0..i)
  for (std::size_t i = 0; i < array.size(); ++i)
    before[i + 1] = before[i] + array[i].last - array[i].first + 1;
  const auto array_cycles_upto = [&](std::int64_t t) {  // array cycles in [0, t]
    const auto it = std::upper_bound(array.begin(), array.end(), t,
                                     [](std::int64_t v, const Busy& b) { return v < b.first; });
    const auto i = static_cast<std::size_t>(it - array.begin());
    return i == 0 ? 0 : before[i - 1] + std::min(t, array[i - 1].last) - array[i - 1].first + 1;
  };
  std::int64_t done = -1;
  for (const model::RetireRecord& r : log.retired) {
    const auto completion = static_cast<std::int64_t>(r.completion);
    if (completion <= done) continue;
    // Cycles done + 1 .. completion, less the array's.
    const std::int64_t idle =
        completion - done - (array_cycles_upto(completion) - array_cycles_upto(done));
    layers[seg.instruction_layer[r.pc]].cycles += static_cast<std::uint64_t>(idle);
    done = completion;
  }
}

}  // namespace tpu::compiler
