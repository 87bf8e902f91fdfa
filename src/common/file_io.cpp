#include "common/file_io.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tpu {
namespace {

namespace fs = std::filesystem;

// The paths RemoveOnSignal guards, read by the signal handler: lock-free
// atomics are all a handler may touch (with unlink, sigaction and raise,
// which are async-signal-safe).
constexpr int kMaxGuarded = 16;
static_assert(std::atomic<const char*>::is_always_lock_free);
std::atomic<const char*> g_guarded[kMaxGuarded];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

// A guarded folder (PendingFolder): its files, then the folder, with system
// calls only (opendir and readdir may allocate, which a handler must not).
void remove_folder_in_handler(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  // Until a pass over the folder removes nothing ("." and ".." stay).
  for (bool removed = true; removed;) {
    removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (long n; (n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        removed |= ::unlinkat(fd, d->d_name, 0) == 0;
        off += d->d_reclen;
      }
  }
  ::close(fd);
  ::rmdir(path);
}

void remove_guarded_and_reraise(int sig) {
  for (std::atomic<const char*>& slot : g_guarded)
    if (const char* p = slot.load())
      if (::unlink(p) != 0 && errno == EISDIR) remove_folder_in_handler(p);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  // Blocked while this handler runs; delivered, with the default action, on return.
  ::raise(sig);
}

// Checked on every use rather than once, so that a signal whose action is
// reset to the default later (a forked child, a tool that restores it) is
// covered again.
void install_cleanup_handlers() {
  for (const int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) != 0 ||
        old.sa_handler != SIG_DFL)
      continue;
    struct sigaction sa {};
    sa.sa_handler = remove_guarded_and_reraise;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Reads `path` whole. Opened without blocking: a FIFO that no process writes
// would otherwise hold open() (and the tool) forever; such a FIFO reads as
// empty, and the loader reports what it lacks. A FIFO with a writer (a
// shell's process substitution, `<(...)`) is read to its end as a file.
template <typename Container>
Container read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw FileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw FileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw FileError(fmt::format("{}: is a directory", path));
  // Blocking reads from here on (a pipe's writer may be slower than us).
  if (const int flags = ::fcntl(fd, F_GETFL); flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw FileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  Container data;
  if (S_ISREG(st.st_mode) && st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError(fmt::format("{}: read error: {}", path, std::strerror(errno)));
    }
    data.insert(data.end(), buf, buf + n);
  }
  return data;
}

// The descriptor `path` names when it is an entry of this process's
// /proc/PID/fd (reached as /proc/self/fd or /dev/fd), else -1.
int own_descriptor(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  std::error_code ec;
  const fs::path folder = fs::canonical(p.has_parent_path() ? p.parent_path() : ".", ec);
  if (ec || folder != fs::path("/proc") / std::to_string(::getpid()) / "fd") return -1;
  return std::stoi(name);
}

// Where the chain of symbolic links starting at `path` ends: at a name that
// is no link, which may not exist (a dangling link: writing creates it), or
// at one of this process's descriptors. /dev/stdout, /dev/fd/N and
// /proc/self/fd/N lead to links in /proc/PID/fd whose text is no name to
// write to ("pipe:[1234]", or a file that has gone or that the shell opened
// for appending), so the chain stops there. A relative link is taken from
// the link's folder, and the names are joined, not normalized, so that ".."
// after a linked folder means what the kernel makes of it.
struct LinkEnd {
  std::string path;
  int fd = -1;        // >= 0: `path` names this descriptor of the process
  bool loop = false;  // more links than the kernel follows in one lookup
};

LinkEnd follow_links(const std::string& path) {
  constexpr int kMaxLinks = 40;  // Linux's limit
  LinkEnd end{path};
  for (int i = 0; i < kMaxLinks; ++i) {
    if ((end.fd = own_descriptor(end.path)) >= 0) return end;
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(end.path, ec))) return end;
    const fs::path link = fs::read_symlink(end.path, ec);
    if (ec) return end;  // the write that follows reports the reason
    end.path = link.is_absolute() ? link.string()
                                  : (fs::path(end.path).parent_path() / link).string();
  }
  end.loop = true;
  return end;
}

// The file that writing `path` (no special file) replaces.
std::string replaced_file(const std::string& path) {
  const LinkEnd end = follow_links(path);
  if (end.loop) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(ELOOP)));
  return end.path;
}

// The temporary name for `file`: temp_path_for(file), for a special file in
// the system's temporary folder (there is no room for one in /dev), with
// `suffix` kept last: SystemC, given ".w.PID.tmp" for w.vcd, appends ".vcd".
std::string temp_path_with_suffix(const std::string& file, const std::string& suffix,
                                  bool special) {
  std::string stem = file;
  if (!suffix.empty() && stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  if (special) stem = (fs::path(temp_folder()) / fs::path(stem).filename()).string();
  return temp_path_for(stem) + suffix;
}

// A special file opened for writing: no temporary file, no rename.
class SpecialOutput {
 public:
  explicit SpecialOutput(const std::string& path) : path_(path) {
    // The path may be the process's own stdout (/dev/stdout): what it has
    // printed so far comes first.
    std::cout.flush();
    std::fflush(nullptr);
    if (const int own = follow_links(path).fd; own >= 0) {
      // A duplicate shares the offset: the bytes follow what the process has
      // written there, even into a regular file.
      fd_ = ::fcntl(own, F_DUPFD_CLOEXEC, 0);
    } else {
      // A FIFO blocks here until it has a reader. O_NOCTTY: a terminal named
      // as an output does not become the controlling one.
      do fd_ = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      while (fd_ < 0 && errno == EINTR);
    }
    if (fd_ < 0) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  }
  ~SpecialOutput() {
    if (fd_ >= 0) ::close(fd_);
  }
  SpecialOutput(const SpecialOutput&) = delete;
  SpecialOutput& operator=(const SpecialOutput&) = delete;

  // Writes all `size` bytes, or returns false once the reader has gone.
  bool write(const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EPIPE) return false;
      if (n <= 0) fail(n < 0 ? errno : EIO);
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }

  void close() {
    // Linux closes the descriptor even when close() is interrupted.
    if (::close(std::exchange(fd_, -1)) != 0 && errno != EINTR) fail(errno);
  }

 private:
  [[noreturn]] void fail(int err) const {
    throw FileError(fmt::format("{}: write failed: {}", path_, std::strerror(err)));
  }
  std::string path_;
  int fd_ = -1;
};

// PendingFile::commit() for a special file: the temporary file's bytes into it.
void copy_into_special(const std::string& tmp, const std::string& target) {
  std::ifstream in(tmp, std::ios::binary);
  if (!in) throw FileError(fmt::format("{}: write failed: {}", target, std::strerror(errno)));
  SpecialOutput out(target);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n > 0 && !out.write(buf.data(), n)) break;  // the reader has gone
  }
  if (in.bad()) throw FileError(fmt::format("{}: write failed: cannot read {}", target, tmp));
  out.close();
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  return read_whole<std::vector<std::uint8_t>>(path);
}

std::string read_file_text(const std::string& path) { return read_whole<std::string>(path); }

std::string temp_path_for(const std::string& path) {
  const std::filesystem::path target(path);
  return (target.parent_path() /
          ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp"))
      .string();
}

std::string temp_folder() {
  std::error_code ec;
  const fs::path folder = fs::temp_directory_path(ec);
  return ec ? "/tmp" : folder.string();
}

bool is_special_file(const std::string& path) {
  const LinkEnd end = follow_links(path);
  if (end.fd >= 0) return true;
  struct stat st {};
  return !end.loop && ::stat(end.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
         !S_ISDIR(st.st_mode);
}

RemoveOnSignal::RemoveOnSignal(std::string path) : path_(std::move(path)) {
  install_cleanup_handlers();
  for (int i = 0; i < kMaxGuarded && slot_ < 0; ++i) {
    const char* expected = nullptr;
    if (g_guarded[i].compare_exchange_strong(expected, path_.c_str())) slot_ = i;
  }
}

RemoveOnSignal::~RemoveOnSignal() {
  if (slot_ >= 0) g_guarded[slot_].store(nullptr);
}

PendingFile::PendingFile(std::string target, const std::string& suffix)
    : target_(std::move(target)),
      special_(is_special_file(target_)),
      file_(special_ ? target_ : replaced_file(target_)),
      tmp_(temp_path_with_suffix(file_, suffix, special_)),
      guard_(tmp_) {
  if (special_ && ::access(target_.c_str(), W_OK) != 0)
    throw FileError(fmt::format("{}: cannot write: {}", target_, std::strerror(errno)));
  std::FILE* f = std::fopen(tmp_.c_str(), "wb");
  if (f == nullptr) throw FileError(fmt::format("{}: cannot write: {}", target_, std::strerror(errno)));
  std::fclose(f);
}

PendingFile::~PendingFile() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void PendingFile::commit() {
  if (special_) {
    copy_into_special(tmp_, file_);
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  } else {
    std::error_code ec;
    std::filesystem::rename(tmp_, file_, ec);
    if (ec) throw FileError(fmt::format("{}: cannot rename into place: {}", target_, ec.message()));
  }
  committed_ = true;
}

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  if (is_special_file(path)) {
    SpecialOutput out(path);
    out.write(data, size);  // a reader that has gone is not an error (file_io.h)
    out.close();
    return;
  }
  PendingFile out(path);
  std::FILE* f = std::fopen(out.path().c_str(), "wb");
  if (f == nullptr) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const bool written = std::fwrite(data, 1, size, f) == size;
  int err = written ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  if (!closed && written) err = errno;
  if (!written || !closed)
    throw FileError(fmt::format("{}: write failed: {}", path, std::strerror(err != 0 ? err : EIO)));
  out.commit();
}

namespace {

// The nearest folder that exists at or above `p`'s parent ("." for a bare name).
fs::path nearest_existing_folder(const fs::path& p) {
  fs::path folder = p.parent_path();
  std::error_code ec;
  while (!folder.empty() && !fs::exists(folder, ec)) folder = folder.parent_path();
  return folder.empty() ? fs::path(".") : folder;
}

std::string temp_folder_for(const std::string& target) {
  const fs::path t = fs::path(target).lexically_normal();
  const std::string name = t.filename().empty() ? t.parent_path().filename().string() : t.filename().string();
  const fs::path bare = t.filename().empty() ? t.parent_path() : t;
  return (nearest_existing_folder(bare) / ("." + name + "." + std::to_string(::getpid()) + ".tmp")).string();
}

// Moves every entry of `from` into `to` (created if needed) by rename.
void move_entries(const fs::path& from, const fs::path& to, const std::string& target) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) throw FileError(fmt::format("{}: cannot create the folder: {}", target, ec.message()));
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    const fs::path dest = to / e.path().filename();
    if (e.is_directory(ec) && fs::is_directory(dest, ec)) {
      move_entries(e.path(), dest, target);
      continue;
    }
    fs::rename(e.path(), dest, ec);
    if (ec) throw FileError(fmt::format("{}: cannot move {} into place: {}", target,
                                        e.path().filename().string(), ec.message()));
  }
  if (ec) throw FileError(fmt::format("{}: cannot read {}: {}", target, from.string(), ec.message()));
}

}  // namespace

PendingFolder::PendingFolder(std::string target)
    : target_(std::move(target)), tmp_(temp_folder_for(target_)), guard_(tmp_) {
  std::error_code ec;
  if (fs::exists(target_, ec) && !fs::is_directory(target_, ec))
    throw FileError(fmt::format("{}: not a folder", target_));
  fs::remove_all(tmp_, ec);  // left by an earlier process of the same id, killed
  if (!fs::create_directory(tmp_, ec))
    throw FileError(fmt::format("{}: cannot write: {}", target_, ec ? ec.message() : "exists"));
}

PendingFolder::~PendingFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void PendingFolder::commit() {
  move_entries(tmp_, target_, target_);
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  committed_ = true;
}

}  // namespace tpu
