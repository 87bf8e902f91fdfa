// Running a compiled network: the host's steps between programs (max-pool,
// flatten), the host memory images of programs and their outputs (for either
// compiler), input quantization, and per-layer statistics of a run.
#include "compiler/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/network_util.h"
#include "isa/instruction.h"
#include "model/perf_counters.h"

namespace tpu::compiler {

using isa::Instruction;
using isa::Opcode;

void check_tensor(const Tensor& x, const TensorInfo& info, const std::string& what) {
  if (x.int32 || x.shape.size() != info.shape.size() + 1 ||
      !std::equal(info.shape.begin(), info.shape.end(), x.shape.begin() + 1))
    throw CompileError(fmt::format("{}: expected int8 samples of shape {}, got {} of shape {}",
                                   what, shape_text(info.shape), x.int32 ? "int32" : "int8",
                                   shape_text(x.shape)));
}


Tensor host_maxpool(const Layer& pool, const Tensor& x) {
  const std::size_t h = x.shape[1], w = x.shape[2], c = x.shape[3];
  const std::size_t oh = conv_out(h, pool.kernel_h, pool.stride_h, 0, 0);
  const std::size_t ow = conv_out(w, pool.kernel_w, pool.stride_w, 0, 0);
  Tensor y;
  y.shape = {x.batch(), oh, ow, c};
  y.int32 = x.int32;
  y.data.resize(x.batch() * oh * ow * c);
  for (std::size_t s = 0; s < x.batch(); ++s)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t ch = 0; ch < c; ++ch) {
          std::int32_t m = std::numeric_limits<std::int32_t>::min();
          for (unsigned dy = 0; dy < pool.kernel_h; ++dy)
            for (unsigned dx = 0; dx < pool.kernel_w; ++dx)
              m = std::max(m, x.data[((s * h + i * pool.stride_h + dy) * w + j * pool.stride_w + dx) * c + ch]);
          y.data[((s * oh + i) * ow + j) * c + ch] = m;
        }
  return y;
}

Tensor host_flatten(const Tensor& x) {
  Tensor y = x;
  std::size_t count = 1;
  for (std::size_t i = 1; i < x.shape.size(); ++i) count *= x.shape[i];
  y.shape = {x.batch(), count};
  return y;
}

std::vector<std::int8_t> program_host_image(const NetworkPlan& plan, std::size_t k, const Tensor& input) {
  if (!plan.on_chip_plan) return segments_host_image(plan, plan.segment_plans.at(k), input);
  check_tensor(input, plan.infos[0], "the network input");
  if (input.batch() != plan.batch)
    throw CompileError(fmt::format("the batch is {} but the plan is for {}", input.batch(), plan.batch));
  return on_chip_host_image(plan, *plan.on_chip_plan, input);
}

Tensor program_output(const NetworkPlan& plan, std::size_t k, const std::int8_t* host) {
  return plan.on_chip_plan ? on_chip_output(plan, *plan.on_chip_plan, host) : segments_output(plan, plan.segment_plans.at(k), host);
}

Tensor quantize_input(const Network& net, const std::vector<std::size_t>& shape,
                      const std::vector<double>& values) {
  Tensor x;
  x.shape = shape;
  x.data.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i] / net.input.scale;
    if (!std::isfinite(v)) throw CompileError(fmt::format("input element {} is not finite", i));
    const double r = std::nearbyint(v) + net.input.zero_point;  // ties to even
    x.data[i] = static_cast<std::int32_t>(std::clamp(r, -128.0, 127.0));
  }
  return x;
}

std::uint64_t layer_useful_macs(const NetworkPlan& plan, std::size_t i) {
  const Layer& l = plan.net.layers[i];
  if (l.kind == LayerKind::Dense) return plan.batch * l.weight_shape[0] * l.weight_shape[1];
  if (l.kind == LayerKind::Conv2d) {
    const TensorInfo& out = plan.infos[i + 1];
    return plan.batch * out.shape[0] * out.shape[1] * l.weight_shape[0] * l.weight_shape[1] *
           l.weight_shape[2] * l.weight_shape[3];
  }
  return 0;
}

NetworkRun run_network(const NetworkPlan& plan, const Tensor& input, const ArchConfig& cfg,
                       const ProgramRunner& runner) {
  check_tensor(input, plan.infos[0], "the network input");
  if (input.batch() != plan.batch)
    throw CompileError(fmt::format("the batch is {} but the plan is for {}", input.batch(),
                                   plan.batch));
  NetworkRun run;
  run.layers.resize(plan.net.layers.size());
  for (std::size_t i = 0; i < plan.net.layers.size(); ++i) {
    run.layers[i].segment = plan.layer_segment[i];
    run.layers[i].useful_macs = layer_useful_macs(plan, i);
  }
  Tensor cur = input;
  for (const NetworkStep& step : plan.steps) {
    if (step.on_host) {
      const Layer& l = plan.net.layers[step.layer];
      cur = l.kind == LayerKind::MaxPool2d ? host_maxpool(l, cur) : host_flatten(cur);
      continue;
    }
    const ProgramPlan& seg = plan.program(step.segment);
    const std::vector<std::int8_t> host = program_host_image(plan, step.segment, cur);
    model::Memories mem(cfg);
    std::copy(host.begin(), host.end(), mem.host.data().begin());
    std::copy(seg.weights.begin(), seg.weights.end(), mem.weights.data().begin());
    run.logs.push_back(runner(step.segment, seg, mem));
    const model::RunLog& log = run.logs.back();
    if (log.fault || !log.halted) {
      run.fault = true;
      return run;
    }
    // Cycles. The array reads row i of an MMC started at s in cycle s + i;
    // those cycles belong to the MMC's layer. A cycle the TPUv1 counters put
    // in a wait category belongs to the layer of the instruction that waited.
    // Every other cycle belongs to the layer of the oldest instruction not
    // yet completed in it.
    struct Busy {
      std::int64_t first, last;
    };
    std::vector<Busy> array;  // the array's rows, then the classified waits: disjoint
    for (const model::RetireRecord& r : log.retired) {
      const Instruction& in = seg.program.code[r.pc];
      LayerStats& ls = run.layers[seg.instruction_layer[r.pc]];
      ++ls.instructions;
      const auto n_bytes = static_cast<std::uint64_t>(cfg.array_n);
      if (in.opcode == Opcode::RHM) ls.host_read_bytes += static_cast<std::uint64_t>(in.operands[2]) * n_bytes;
      if (in.opcode == Opcode::WHM)
        ls.host_write_bytes += static_cast<std::uint64_t>(in.operands[2]) * n_bytes *
                               (in.has(isa::kFlagWhmAcc) ? isa::kHostRowsPerAccRow : 1);
      if (in.opcode == Opcode::RW) ls.weight_bytes += n_bytes * n_bytes;
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
    model::count_perf(cfg, seg.program, log, mem.weights.row(0), &waits);
    for (const model::PerfInterval& w : waits) {
      LayerStats& ls = run.layers[seg.instruction_layer[w.pc]];
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
      run.layers[seg.instruction_layer[r.pc]].cycles += static_cast<std::uint64_t>(idle);
      done = completion;
    }
    cur = program_output(plan, step.segment, mem.host.data().data());
  }
  run.output = std::move(cur);
  return run;
}

}  // namespace tpu::compiler
