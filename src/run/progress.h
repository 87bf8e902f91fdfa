// A one-line progress indicator on stderr for long runs (`tpu-sim net`,
// `tpu-sim topo`), shown only when stderr is a terminal: the line is
// rewritten in place with \r, carries the seconds elapsed in the current
// step (redrawn every second), and is erased before anything else is printed
// and at the end. When stderr is not a terminal nothing is written, so
// pipes, files and tests see no difference.
#pragma once

#include <string>

namespace tpu::run {

// While one exists, progress_show and progress_clear act; otherwise they do
// nothing. The destructor erases the line.
class ProgressScope {
 public:
  // `enabled`: usually isatty(stderr); tests may force it.
  explicit ProgressScope(bool enabled);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
  static bool stderr_is_terminal();

 private:
  bool owner_ = false;  // this scope started the indicator
};

// Shows `status` (one line, shortened to the terminal's width) as the
// current step, restarting its elapsed time.
void progress_show(const std::string& status);
// Erases the line until the next progress_show: call before printing.
void progress_clear();

}  // namespace tpu::run
