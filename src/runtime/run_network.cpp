// Running a network plan (run_network.h).
#include "runtime/run_network.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/shapes.h"
#include "runtime/host_image.h"

namespace tpu::compiler {

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
    model::Memories mem(cfg);
    // One system call per memory for the pages about to be written (ResNet-18
    // at batch 8 on tpuv1: 19 MB of weight tiles and a 27 MB host image, a
    // page fault per 4 KiB), and the host image written where it goes.
    mem.host.prefault(0, seg.host_rows_used);
    mem.weights.prefault(0, seg.weight_tiles_used);
    write_program_host_image(plan, step.segment, cur, mem.host.data().data(), mem.host.data().size());
    if (seg.weights.size() > mem.weights.data().size())
      throw CompileError(fmt::format("the program's weights need {} bytes, weight memory has {}", seg.weights.size(),
                                     mem.weights.data().size()));
    std::copy(seg.weights.begin(), seg.weights.end(), mem.weights.data().begin());
    run.logs.push_back(runner(step.segment, seg, mem));
    const model::RunLog& log = run.logs.back();
    if (log.fault || !log.halted) {
      run.fault = true;
      return run;
    }
    charge_program(cfg, seg, log, mem.weights.row(0), run.layers);
    cur = program_output(plan, step.segment, mem.host.data().data());
  }
  run.output = std::move(cur);
  return run;
}

}  // namespace tpu::compiler
