// The tpusim exceptions: tpusim.Error and one subclass per exit status of the
// tools, and the translation of the run layer's C++ exceptions into them
// (AsmError, FaultError, Interrupted, then any by sweep::exit_status_of).
#include <pybind11/pybind11.h>

#include <string>

#include "common/exit_codes.h"
#include "module.h"
#include "run/sweep_workload.h"

namespace tpu::python {
namespace {

struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* by_code[7] = {};  // index: exit status 1..6
};
ErrorClasses g_errors;


void set_python_error(int code, const std::string& message, const py::dict& attrs) {
  py::handle cls(g_errors.by_code[code >= 1 && code <= 6 ? code : kExitBadInput]);
  py::object exc = cls(message);
  exc.attr("message") = message;
  for (auto item : attrs) exc.attr(item.first) = item.second;
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const PyTpuError& e) {
    set_python_error(e.code, e.message, e.attrs);
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own (TypeError, ValueError, ...)
  } catch (const py::error_already_set&) {
    throw;
  } catch (const sweep::AsmError& e) {
    py::list diags;
    for (const auto& d : e.diagnostics) diags.append(py::make_tuple(d.loc.line, d.loc.col, d.message));
    py::dict attrs;
    attrs["diagnostics"] = diags;
    set_python_error(kExitAsmError, e.what(), attrs);
  } catch (const sweep::Interrupted&) {
    // Stopped by Ctrl-C (EngineOptions::interrupted): the signal handler's
    // exception (KeyboardInterrupt) is set already.
    if (PyErr_Occurred() == nullptr) PyErr_SetNone(PyExc_KeyboardInterrupt);
  } catch (const sweep::FaultError& e) {
    py::dict attrs;
    attrs["fault"] = fault_dict(*e.log.fault);
    set_python_error(kExitFault, e.what(), attrs);
  } catch (const std::exception& e) {
    set_python_error(sweep::exit_status_of(e), sweep::message_of(e), {});
  }
}

}  // namespace

py::dict fault_dict(const model::Fault& f) {
  py::dict d;
  d["pc"] = f.pc;
  d["instruction"] = f.instruction;
  d["cycle"] = f.cycle;
  d["reason"] = f.reason;
  d["message"] = f.message();
  return d;
}

void bind_errors(py::module_& m) {
  // Exceptions: tpusim.Error and one subclass per exit status.
  g_errors.base = PyErr_NewExceptionWithDoc(
      "tpusim.Error",
      "Base of every tpu-sim error. `code` is the exit status the command-line tools give for it "
      "(common/exit_codes.h), `message` the tools' message.",
      PyExc_Exception, nullptr);
  m.attr("Error") = py::handle(g_errors.base);
  py::handle(g_errors.base).attr("code") = py::none();
  struct Sub {
    int code;
    const char* name;
    PyObject* extra_base;
    const char* doc;
  };
  const Sub subs[] = {
      {kExitAsmError, "AssemblerError", nullptr,
       "The assembler found errors: the message is every diagnostic as tpu-as prints it "
       "(FILE:LINE:COL: error: ..., the line and a caret); `diagnostics` lists (line, col, message)."},
      {kExitUsage, "UsageError", PyExc_ValueError,
       "An invalid argument (an unknown engine, an activation without requantization...): the "
       "command line's usage error (status 2)."},
      {kExitBadInput, "InputError", nullptr,
       "A missing or malformed input (file, array, model, configuration), an input that does not "
       "fit the configured machine, or an unknown RTL build (status 3)."},
      {kExitFault, "FaultError", nullptr,
       "The simulated program faulted (status 4): `fault` is a dict (pc, instruction, cycle, reason, "
       "message); from tpusim.run, `result` is the RunResult up to the fault."},
      {kExitDivergence, "DivergenceError", nullptr,
       "engine='both': the RTL and the SystemC model disagree (status 5)."},
      {kExitCheckFailed, "CheckError", nullptr,
       "check=True: a result differs from the independent reference (status 6)."},
  };
  for (const Sub& s : subs) {
    PyObject* bases = s.extra_base ? PyTuple_Pack(2, g_errors.base, s.extra_base)
                                   : PyTuple_Pack(1, g_errors.base);
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string("tpusim.") + s.name).c_str(), s.doc, bases,
                                              nullptr);
    Py_DECREF(bases);
    g_errors.by_code[s.code] = cls;
    py::handle(cls).attr("code") = s.code;
    m.attr(s.name) = py::handle(cls);
  }
  py::register_exception_translator(&translate);
}

}  // namespace tpu::python
