// tpusim.Program and the assembler's and disassembler's functions: assemble,
// assemble_file, disassemble, write_file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "isa/program.h"
#include "module.h"
#include "run/sweep_workload.h"

namespace tpu::python {
namespace {

std::string disassembly(const isa::Program& prog, bool encoding) {
  std::string text = fmt::format(".array {}\n", prog.array_n);
  for (std::size_t pc = 0; pc < prog.code.size(); ++pc) {
    const std::string line = isa::disassemble(prog.code[pc]);
    if (encoding)
      text += fmt::format("{:<24} ; {:4}: {:02x}\n", line, pc, fmt::join(isa::encode(prog.code[pc]), " "));
    else
      text += line + '\n';
  }
  return text;
}

}  // namespace

void bind_program(py::module_& m) {
  // Programs.
  py::class_<isa::Program>(m, "Program", "An assembled program: its array size N and instructions.")
      .def_readonly("array_n", &isa::Program::array_n, "The array size N it was assembled for.")
      .def("__len__", [](const isa::Program& p) { return p.code.size(); })
      .def("to_bytes",
           [](const isa::Program& p) {
             const std::vector<std::uint8_t> b = isa::serialize(p);
             return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           },
           "The program file image (.tpu, docs/isa.md).")
      .def_static("from_bytes",
                  [](const py::bytes& b) {
                    const std::string s = b;
                    return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
                  },
                  py::arg("data"), "Parses a program file image; InputError if malformed.")
      .def_static("load", [](py::handle path) { return isa::load_program(path_of(path, "path")); },
                  py::arg("path"), "Reads a program file (.tpu).")
      .def("save",
           [](const isa::Program& p, py::handle path) {
             write_file_atomic(path_of(path, "path"), isa::serialize(p));
           },
           py::arg("path"), "Writes the program file, whole or not at all.")
      .def_property_readonly("instructions",
                             [](const isa::Program& p) {
                               std::vector<std::string> v;
                               for (const auto& in : p.code) v.push_back(isa::disassemble(in));
                               return v;
                             },
                             "Each instruction's canonical assembly text.")
      .def("__eq__", [](const isa::Program& a, const isa::Program& b) {
        return a.array_n == b.array_n && a.code == b.code;
      })
      .def("__repr__", [](const isa::Program& p) {
        return fmt::format("<tpusim.Program N={}, {} instructions>", p.array_n, p.code.size());
      })
      .def(py::pickle(
          [](const isa::Program& p) {
            const std::vector<std::uint8_t> b = isa::serialize(p);
            return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
          },
          [](const py::bytes& b) {
            const std::string s = b;
            return isa::parse_program(std::vector<std::uint8_t>(s.begin(), s.end()));
          }));
  m.attr("Program").attr("__hash__") = py::none();

  m.def(
      "write_file",
      [](py::handle path, py::bytes data) { write_file_atomic(path_of(path, "path"), std::string(data)); },
      py::arg("path"), py::arg("data"),
      "Writes bytes as the tools write every output: whole or not at all, through symlinks, "
      "into devices and FIFOs.");
  m.def("assemble",
        [](const std::string& source, py::handle config, std::optional<unsigned> array_n,
           const std::string& filename) {
          std::optional<ArchConfig> cfg;
          if (!config.is_none()) cfg = config_arg(config);
          return sweep::assemble_source(source, filename, cfg ? &*cfg : nullptr, array_n);
        },
        py::arg("source"), py::kw_only(), py::arg("config") = py::none(),
        py::arg("array_n") = py::none(), py::arg("filename") = "<source>",
        R"doc(Assembles source text as tpu-as does. With `config`, every address range is
checked against its memory sizes; `array_n` wins over the source's .array.
Raises AssemblerError with every diagnostic (FILENAME:LINE:COL: error: ...).)doc");
  m.def("assemble_file",
        [](py::handle path, py::handle config, std::optional<unsigned> array_n) {
          const std::string p = path_of(path, "path");
          std::optional<ArchConfig> cfg;
          if (!config.is_none()) cfg = config_arg(config);
          return sweep::assemble_source(read_file_text(p), p, cfg ? &*cfg : nullptr, array_n);
        },
        py::arg("path"), py::kw_only(), py::arg("config") = py::none(), py::arg("array_n") = py::none(),
        "Assembles a source file (.s); diagnostics name the file.");
  m.def("disassemble",
        [](py::handle program, bool encoding) { return disassembly(program_arg(program), encoding); },
        py::arg("program"), py::kw_only(), py::arg("encoding") = false,
        R"doc(Assembly text that assembles back to the same program (as tpu-dis prints it,
without the comment line). `program`: a Program, program file bytes or a path.
With encoding=True each line carries its pc and bytes as a comment.)doc");
}

}  // namespace tpu::python
