// A GEMM as every front end runs it (tpu-sim gemm, sweeps, tpusim.gemm):
// compile C = A . B (compiler::compile_gemm), load its images into fresh
// memories, run the program through the caller's simulation (simulate() for
// the tool, sweep::run_engine() for sweeps and Python) and read C back; and
// the check of C against the reference GEMM.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/gemm.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"

namespace tpu::run {

struct GemmRun {
  compiler::GemmPlan plan;
  model::RunLog log;
  std::vector<std::int32_t> c;  // M x Nout (int8 values when plan.int8_output); empty after a fault
};

// Runs a GEMM's program on memories that hold its images.
using GemmSim = std::function<model::RunLog(const isa::Program& prog, model::Memories& mem)>;

// Compiles and runs C = A . B; `compiled` sees the plan before the program
// runs (the tool's --emit-asm and its one-line description). A fault is not
// thrown: the log has it.
GemmRun compile_and_run_gemm(const ArchConfig& cfg, const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                             const compiler::GemmSpec& spec, const GemmSim& sim,
                             const std::function<void(const compiler::GemmPlan&)>& compiled = nullptr);

// The first element of C (M x n_out) that differs from the reference GEMM,
// as "C[I][J] = V but the reference gives W"; nullopt when all equal.
std::optional<std::string> gemm_mismatch(const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                                         const compiler::GemmSpec& spec, const std::vector<std::int32_t>& c,
                                         std::uint64_t n_out);

}  // namespace tpu::run
