// The outputs of one command, put in place only when it succeeds (README,
// "Outputs are whole or absent"). A command asks for a temporary path for
// each output it names (file(), folder()) and writes there as it goes; at
// the end commit() moves them all into place. A command that stops at a
// program fault (status 4) calls commit_fault(), which puts in place only
// the outputs that show the fault (--stats, --timeline: SuccessOrFault);
// any other way out (an error, an exception, Ctrl-C) leaves the targets as
// they were and removes the temporary files (PendingFile, PendingFolder).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/file_io.h"

namespace tpu::run {

class Outputs {
 public:
  enum class When { Success, SuccessOrFault };

  // Where to write `target` ("" for ""): a temporary file beside it.
  // Throws FileError when its folder is not writable, before any work.
  std::string file(const std::string& target, When when = When::Success);
  // Where to write the folder `target` ("" for "").
  std::string folder(const std::string& target);

  void commit();        // the command succeeded: everything, in the order asked for
  void commit_fault();  // it stopped at a fault: the SuccessOrFault files only

 private:
  std::vector<std::pair<std::unique_ptr<PendingFile>, When>> files_;
  std::vector<std::unique_ptr<PendingFolder>> folders_;
};

}  // namespace tpu::run
