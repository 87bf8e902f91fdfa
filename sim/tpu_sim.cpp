// tpu-sim, the simulator's command line: main() declares every subcommand's
// options and maps errors to exit statuses (common/exit_codes.h). This file
// holds `run` (a program on the engine of --engine: the SystemC model, the
// Verilated RTL core or both in lock step) and `gemm` (C = A . B compiled and
// run); net, topo and sweep have files of their own (subcommand.h). Running
// and reporting is the run layer's (src/run).
//
//   tpu-sim run PROGRAM --hostmem H.npy --weights W.npy [--out O.npy]
//               [--stats S.json] [--vcd T.vcd | --fst T.fst] [--trace]
//               [--max-cycles C] [--engine systemc|rtl|both]
//               [--preset P] [--config F] [--array N]
//   tpu-sim gemm --a A.npy --b B.npy --out C.npy [--requant M,S,Z] [--act F]
//               [--emit-asm F.s] [--check] [--stats S.json] [--trace] ...
//   tpu-sim net MODEL ..., tpu-sim topo FILE.csv ..., tpu-sim sweep SWEEP.json ...
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <cstring>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>

#include "run/gemm_run.h"
#include "run/outputs.h"
#include "run/simulate.h"
#include "sim_args.h"
#include "subcommand.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "isa/program.h"
#include "model/tpu.h"

namespace {

using namespace tpu;
using cli::SimArgs;

struct RunArgs : SimArgs {
  std::string program;
  std::string hostmem;
  std::string weights;
};

struct GemmArgs : SimArgs {
  std::string a, b;
  std::string requant;
  std::string act = "none";
  std::string emit_asm;
  bool check = false;
};

void load_memories(const RunArgs& args, const ArchConfig& cfg, model::Memories& mem,
                   std::uint64_t& host_input_rows) {
  const std::size_t n = cfg.array_n;
  if (!args.hostmem.empty()) {
    const NpyArray h = read_npy(args.hostmem);
    expect(h, Dtype::int8, 2, "host memory, rows x N");
    if (h.shape[1] != n)
      throw FileError(fmt::format("{}: rows have {} but the array is N={}", args.hostmem,
                                  plural(h.shape[1], "byte"), n));
    if (h.shape[0] > cfg.host_rows)
      throw FileError(fmt::format("{}: {} do not fit in host memory ({})", args.hostmem,
                                  plural(h.shape[0], "row"), plural(cfg.host_rows, "row")));
    std::memcpy(mem.host.data().data(), h.data.data(), h.data.size());
    host_input_rows = h.shape[0];
  }
  if (!args.weights.empty()) {
    const NpyArray w = read_npy(args.weights);
    expect(w, Dtype::int8, 3, "weight memory, tiles x N x N");
    if (w.shape[1] != n || w.shape[2] != n)
      throw FileError(fmt::format("{}: tiles are {}x{} but the array is N={}", args.weights,
                                  w.shape[1], w.shape[2], n));
    if (w.shape[0] > cfg.weight_tiles)
      throw FileError(fmt::format("{}: {} do not fit in weight memory ({})", args.weights,
                                  plural(w.shape[0], "tile"), plural(cfg.weight_tiles, "tile")));
    std::memcpy(mem.weights.data().data(), w.data.data(), w.data.size());
  }
}

int run_command(const RunArgs& args) {
  const isa::Program prog = isa::load_program(args.program);
  cli::ConfigOptions opts = args.cfg;
  if (opts.array_n && *opts.array_n != prog.array_n)
    throw FileError(fmt::format("{}: assembled for N={}, but --array is {}", args.program,
                                prog.array_n, *opts.array_n));
  opts.array_n = prog.array_n;
  const ArchConfig cfg = opts.resolve();
  model::Memories mem(cfg);
  std::uint64_t host_input_rows = 0;
  load_memories(args, cfg, mem, host_input_rows);
  run::Outputs outputs;  // --out only on success (outputs.h); run::simulate() writes --stats
  const std::string out_path = outputs.file(args.out);
  const model::RunLog log = run::simulate(args, cfg, prog, mem);
  if (log.fault) return kExitFault;
  if (!out_path.empty()) {
    // A WHM never executed (after HLT) may name rows past the end of host memory.
    const std::uint64_t rows = std::min(run::output_rows(prog, host_input_rows), cfg.host_rows);
    std::vector<std::int8_t> host(mem.host.data().begin(),
                                  mem.host.data().begin() + static_cast<std::ptrdiff_t>(rows * cfg.array_n));
    write_npy(out_path, NpyArray::of<std::int8_t>({rows, cfg.array_n}, host));
  }
  outputs.commit();
  return kExitOk;
}

// --requant's "M,S,Z" (compiler::parse_requant) as a usage error of the option.
model::Requant parse_requant(const std::string& text) {
  try {
    return compiler::parse_requant(text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--requant", e.what());
  }
}

int gemm_command(const GemmArgs& args) {
  const ArchConfig cfg = args.cfg.resolve();
  const compiler::MatrixI8 a = run::read_matrix(args.a, "A");
  const compiler::MatrixI8 b = run::read_matrix(args.b, "B");
  compiler::GemmSpec spec;
  if (!args.requant.empty()) spec.requant = parse_requant(args.requant);
  spec.act = model::parse_act_function(args.act).value();  // checked by the option
  // --emit-asm and --out only on success (outputs.h); run::simulate() writes --stats.
  run::Outputs outputs;
  std::string out_path;
  std::string description;  // printed once the memories are loaded, before the run
  const auto compiled = [&](const compiler::GemmPlan& plan) {
    if (const std::string p = outputs.file(args.emit_asm); !p.empty()) write_file_atomic(p, plan.assembly);
    out_path = outputs.file(args.out);
    description = fmt::format("GEMM {}x{}x{} on a {}x{} array: {} instructions, {} output\n", plan.m, plan.k,
                              plan.n_out, cfg.array_n, cfg.array_n, plan.program.code.size(),
                              plan.int8_output ? "int8" : "int32");
  };
  const auto sim = [&](const isa::Program& prog, model::Memories& mem) {
    std::cout << description;
    return run::simulate(args, cfg, prog, mem);
  };
  const run::GemmRun g = run::compile_and_run_gemm(cfg, a, b, spec, sim, compiled);
  if (g.log.fault) return kExitFault;
  const compiler::GemmPlan& plan = g.plan;
  if (!out_path.empty()) {
    if (plan.int8_output)
      write_npy(out_path, NpyArray::of<std::int8_t>({plan.m, plan.n_out},
                                                    std::vector<std::int8_t>(g.c.begin(), g.c.end())));
    else
      write_npy(out_path, NpyArray::of<std::int32_t>({plan.m, plan.n_out}, g.c));
  }
  outputs.commit();
  if (args.check) {
    if (const auto mismatch = run::gemm_mismatch(a, b, spec, g.c, plan.n_out)) {
      std::cerr << "tpu-sim: check failed: " << *mismatch << '\n';
      return kExitCheckFailed;
    }
    std::cout << fmt::format("check: {}{} {} the reference GEMM (Eigen)\n", agree(g.c.size(), "", "all "),
                             plural(g.c.size(), "element"), agree(g.c.size(), "equals", "equal"));
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpu-sim: cycle-accurate TPUv1-style accelerator simulator"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 ok, 2 usage error, 3 bad input file, 4 program fault, "
             "5 the engines diverge (--engine both), 6 result differs from the reference "
             "(--check).");

  RunArgs run_args;
  CLI::App* run_cmd = app.add_subcommand("run", "run a program on the SystemC model");
  run_cmd->add_option("program", run_args.program, "program file (.tpu) from tpu-as")->required();
  run_cmd->add_option("--hostmem", run_args.hostmem, "host memory image: int8 .npy, rows x N");
  run_cmd->add_option("--weights", run_args.weights, "weight memory image: int8 .npy, tiles x N x N");
  run_cmd->add_option("--out", run_args.out, "write the final host memory here (.npy)");
  run_args.add_to(*run_cmd);

  GemmArgs gemm_args;
  CLI::App* gemm_cmd = app.add_subcommand("gemm", "compile and run C = A . B on the model");
  gemm_cmd->add_option("--a", gemm_args.a, "A: int8 .npy, M x K")->required();
  gemm_cmd->add_option("--b", gemm_args.b, "B: int8 .npy, K x Nout")->required();
  gemm_cmd->add_option("--out", gemm_args.out, "write C here: int32 .npy, or int8 with --requant");
  gemm_cmd->add_option("--requant", gemm_args.requant,
                       "requantize to int8 with multiplier, shift, zero point: M,S,Z");
  gemm_cmd->add_option("--act", gemm_args.act, "activation after requantization")
      ->check(CLI::IsMember(std::vector<std::string>(model::kActFunctionNames.begin(), model::kActFunctionNames.end())))
      ->capture_default_str();
  gemm_cmd->add_option("--emit-asm", gemm_args.emit_asm, "write the generated program here (.s)");
  gemm_cmd->add_flag("--check", gemm_args.check, "compare C with the reference GEMM (Eigen)");
  gemm_args.add_to(*gemm_cmd);
  const std::unique_ptr<cli::Subcommand> commands[] = {cli::add_net_command(app), cli::add_sweep_command(app),
                                                        cli::add_topo_command(app),
                                                        cli::add_serve_command(app)};

  if (auto rc = cli::parse(app, argc, argv)) return *rc;
  try {
    for (const auto& command : commands)
      if (command->parsed()) return command->run();
    if (gemm_cmd->parsed()) {
      if (gemm_args.act != "none" && gemm_args.requant.empty()) {
        std::cerr << "tpu-sim: error: --act needs --requant\n";
        return kExitUsage;
      }
      return gemm_command(gemm_args);
    }
    return run_command(run_args);
  } catch (const run::DivergenceError& e) {
    std::cerr << "tpu-sim: " << e.what() << '\n';
    return kExitDivergence;
  } catch (const CLI::ValidationError& e) {
    std::cerr << "tpu-sim: error: " << e.what() << '\n';
    return kExitUsage;
  } catch (const run::OptionError& e) {  // an option the run cannot use (run/simulate.h)
    std::cerr << "tpu-sim: error: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    std::cerr << "tpu-sim: error: out of memory: the configured memories (host_rows, weight_tiles, "
                 "ub_rows, acc_rows) or the inputs are too large for this machine\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "tpu-sim: error: " << e.what() << '\n';
    return kExitBadInput;
  }
}
