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

// An output written under a temporary name and renamed over `target` by
// commit(): write_file_atomic's mechanism, for files written by others (a
// waveform library) or piece by piece. Creating it checks that the folder is
// writable (FileError "TARGET: cannot write: REASON"); until commit() the
// temporary file is removed on destruction and on SIGINT/SIGTERM/SIGHUP.
class PendingFile {
 public:
  // The temporary name is temp_path_for(target) unless `tmp` names another
  // (a library that appends its own extension to the name it is given).
  explicit PendingFile(std::string target, std::string tmp = {});
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  const std::string& path() const { return tmp_; }  // where to write
  const std::string& target() const { return target_; }
  void commit();  // throws FileError

 private:
  std::string target_, tmp_;
  RemoveOnSignal guard_;
  bool committed_ = false;
};

}  // namespace tpu
