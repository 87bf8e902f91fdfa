// Exit statuses of every tpu-sim command (documented in README.md).
#pragma once

namespace tpu {

enum ExitCode : int {
  kExitOk = 0,
  kExitAsmError = 1,     // the assembler found errors in the source
  kExitUsage = 2,        // bad command line
  kExitBadInput = 3,     // a file is missing, unreadable or malformed
  kExitFault = 4,        // the simulated program faulted
  kExitDivergence = 5,   // the two models disagree
  kExitCheckFailed = 6,  // a result differs from the reference (--check)
};

}  // namespace tpu
