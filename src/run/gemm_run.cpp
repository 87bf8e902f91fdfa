#include "run/gemm_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/reference.h"

namespace tpu::run {

GemmRun compile_and_run_gemm(const ArchConfig& cfg, const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                             const compiler::GemmSpec& spec, const GemmSim& sim,
                             const std::function<void(const compiler::GemmPlan&)>& compiled) {
  GemmRun out;
  out.plan = compiler::compile_gemm(a, b, spec, cfg);
  if (compiled) compiled(out.plan);
  model::Memories mem(cfg);
  // The image up to C: C's rows are zero in it, as the fresh memory is, and
  // copying them cost a 4096 x 1024 GEMM 16 MiB of writes before the run.
  std::copy(out.plan.host.begin(), out.plan.host.begin() + static_cast<std::ptrdiff_t>(out.plan.c_host_row * cfg.array_n),
            mem.host.data().begin());
  std::copy(out.plan.weights.begin(), out.plan.weights.end(), mem.weights.data().begin());
  out.log = sim(out.plan.program, mem);
  if (!out.log.fault) out.c = compiler::extract_result(out.plan, mem.host.data().data(), cfg.array_n);
  return out;
}

std::optional<std::string> gemm_mismatch(const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                                         const compiler::GemmSpec& spec, const std::vector<std::int32_t>& c,
                                         std::uint64_t n_out) {
  const std::vector<std::int32_t> ref = compiler::reference_gemm(a, b, spec);
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c[i] != ref[i])
      return fmt::format("C[{}][{}] = {} but the reference gives {}", i / n_out, i % n_out, c[i], ref[i]);
  return std::nullopt;
}

}  // namespace tpu::run
