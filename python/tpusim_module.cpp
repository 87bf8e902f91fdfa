// _tpusim: the Python binding of tpu-sim (pybind11), re-exported by the
// package tpusim (python/tpusim/__init__.py). docs/python.md describes the
// API; python/tpusim/__init__.pyi gives every signature.
//
// - Arrays: inputs are checked (dtype, rank, shape) like the tools check
//   .npy files and copied once into the simulated memories; results are
//   NumPy arrays over memory the result object owns (no copy).
// - Errors: every error the tools report with an exit status is raised as a
//   subclass of tpusim.Error carrying the tools' message and that status
//   (`code`): AssemblerError 1, UsageError 2, InputError 3, FaultError 4,
//   DivergenceError 5, CheckError 6.
// - The GIL is released while compiling and simulating; SystemC's kernel is
//   process-global, so simulations within one process run one at a time
//   (sweeps use processes: tpusim.sweep).
//
// This file is the module's entry point; each part of the API is added by a
// bind_* function of its own file (module.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "model/run_log.h"
#include "module.h"

PYBIND11_MODULE(_tpusim, m) {
  PYBIND11_NUMPY_DTYPE(tpu::model::RetireRecord, pc, issue, start, completion, completed);
  m.doc() = "tpu-sim's simulator, assembler and compilers (the extension of the package tpusim).";
  tpu::python::bind_errors(m);
  tpu::python::bind_config(m);
  tpu::python::bind_program(m);
  tpu::python::bind_run(m);
  tpu::python::bind_sweep(m);
}
