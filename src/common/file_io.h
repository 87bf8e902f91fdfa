// Whole-file I/O. Writes are atomic: the data goes to a temporary file in the
// target's folder that is renamed over the target only when complete, so a
// failure never leaves a truncated output behind, and Ctrl-C (SIGINT),
// SIGTERM or SIGHUP in the middle removes the temporary file too.
//
// What an output path names decides how it is written:
// - a regular file, or nothing yet: the temporary file + rename above;
// - a symbolic link (a chain of them, relative or absolute, dangling or not):
//   the file the chain finally names is written as above, with the
//   temporary file in that file's folder, and the links stay links;
// - a special file: an existing file that is neither a regular file nor a
//   folder, directly or through links (a device such as /dev/null, /dev/full
//   or a terminal, a FIFO, a socket), or one of the process's own
//   descriptors (/dev/stdout, /dev/stderr, /dev/fd/N: written through that
//   descriptor, after what the process has printed there, even when the
//   shell opened a regular file for it). It cannot be replaced, so the bytes
//   are written into it, with no temporary file beside it and no rename. A
//   failed write is a FileError "PATH: write failed: REASON" (ENOSPC from
//   /dev/full). A reader that has gone (EPIPE: `| head`, a FIFO's reader
//   that stopped reading) has taken what it wanted: the write ends there
//   without an error. That needs SIGPIPE ignored, as the tools do
//   (sim/cli_common.h); at its default action it ends the process instead.
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

// The system's temporary folder ($TMPDIR, else /tmp): where the temporary
// files of a special file go, since its own folder (/dev) has no room for them.
std::string temp_folder();

// True when `path` names a special file (above): an output that is written
// into rather than replaced. Writers that derive more names from an
// output's (a waveform's .gtkw) test it first.
bool is_special_file(const std::string& path);

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
//
// For a symbolic link, the temporary file is beside the file the link
// finally names, and commit() replaces that file. For a special file
// (is_special_file: /dev/stdout, a FIFO, a link to /dev/null) path() is
// still a regular temporary file, in temp_folder(), and commit() copies its
// bytes into the target and removes it: the libraries that write by name
// append their own extension (SystemC), seek back to patch a header (the
// VCD's $date, fstapi) or end the process on a write error (Verilator),
// none of which writing straight into a device or FIFO would survive. The
// target receives nothing before commit().
class PendingFile {
 public:
  // `suffix` is appended to the temporary name, for a library that appends
  // its own extension to the name it is given (SystemC's ".vcd").
  explicit PendingFile(std::string target, const std::string& suffix = {});
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  const std::string& path() const { return tmp_; }  // where to write
  const std::string& target() const { return target_; }
  bool special() const { return special_; }  // commit() copies into the target
  void commit();  // throws FileError

 private:
  std::string target_;  // as the user named it (messages)
  bool special_;
  std::string file_;  // what commit() replaces or writes into
  std::string tmp_;
  RemoveOnSignal guard_;
  bool committed_ = false;
};

// A folder of outputs (a model file's model.json and .npy files) written
// under a temporary name and moved into `target` by commit(). The temporary
// folder ".NAME.PID.tmp" is made in the nearest folder above `target` that
// exists, so that nothing is created on the way to a target that is never
// committed; commit() creates `target` (and the folders above it) and moves
// each file in by rename, replacing a file of the same name whole. Until
// commit() the temporary folder and its files are removed on destruction and
// on SIGINT/SIGTERM/SIGHUP (the files, not folders nested in it). A target
// that exists and is no folder is a FileError "TARGET: not a folder".
class PendingFolder {
 public:
  explicit PendingFolder(std::string target);
  ~PendingFolder();
  PendingFolder(const PendingFolder&) = delete;
  PendingFolder& operator=(const PendingFolder&) = delete;

  const std::string& path() const { return tmp_; }  // where to write
  const std::string& target() const { return target_; }
  void commit();  // throws FileError

 private:
  std::string target_;
  std::string tmp_;
  RemoveOnSignal guard_;
  bool committed_ = false;
};

}  // namespace tpu
