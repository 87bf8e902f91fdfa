// tpu-dis: prints a program file as assembly that tpu-as turns back into the
// same bytes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <iostream>

#include "cli_common.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/plural.h"
#include "isa/program.h"

int main(int argc, char** argv) {
  using namespace tpu;
  CLI::App app{"tpu-dis: disassemble a tpu-sim program"};
  std::string program_path;
  std::string out_path;
  bool show_encoding = false;
  app.add_option("program", program_path, "program file (.tpu)")->required();
  app.add_option("-o,--output", out_path, "write the assembly here instead of stdout");
  app.add_flag("-e,--encoding", show_encoding, "show each instruction's pc and bytes as a comment");
  app.footer("Exit status: 0 ok, 2 usage error, 3 missing or malformed program file.");
  if (auto rc = cli::parse(app, argc, argv)) return *rc;

  try {
    const isa::Program prog = isa::load_program(program_path);
    std::string text =
        fmt::format("; tpu-dis {}: {}\n.array {}\n", program_path,
                    plural(prog.code.size(), "instruction"), prog.array_n);
    for (std::size_t pc = 0; pc < prog.code.size(); ++pc) {
      const std::string line = isa::disassemble(prog.code[pc]);
      if (show_encoding)
        text += fmt::format("{:<24} ; {:4}: {:02x}\n", line, pc,
                            fmt::join(isa::encode(prog.code[pc]), " "));
      else
        text += line + '\n';
    }
    if (out_path.empty())
      std::cout << text;
    else
      write_file_atomic(out_path, text);
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "tpu-dis: error: " << e.what() << '\n';
    return kExitBadInput;
  }
}
