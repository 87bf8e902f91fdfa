// Whole-file I/O. Writes are atomic: the data goes to a temporary file in the
// target's folder that is renamed over the target only when complete, so a
// failure never leaves a truncated output behind, and Ctrl-C (SIGINT),
// SIGTERM or SIGHUP in the middle removes the temporary file too.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {

// An error in a file the user named; what() is one line that starts with the path.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);
void write_file_atomic(const std::string& path, const void* data, std::size_t size);
inline void write_file_atomic(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}
inline void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

// The temporary name write_file_atomic writes `path` under: ".NAME.PID.tmp"
// in the same folder, so that the rename stays within one file system.
std::string temp_path_for(const std::string& path);

// While it lives, the file at `path` (a temporary output) is removed if the
// process is ended by SIGINT, SIGTERM or SIGHUP, which then still ends the
// process as before (so the shell sees status 128 + signal). Without it an
// interrupted long run, e.g. one writing a waveform, would leave its
// temporary file behind. The handler is installed on first use, only for
// signals whose action is still the default: one that is ignored (nohup, a
// background job) or handled by someone else (libFuzzer) is left alone.
// Normal error paths remove their temporary files themselves. At most 16
// paths are guarded at once; more are silently not guarded.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(std::string path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  std::string path_;  // its c_str() is what the signal handler sees
  int slot_ = -1;
};

}  // namespace tpu
