#include "common/file_io.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include <signal.h>
#include <unistd.h>

namespace tpu {
namespace {

// The paths RemoveOnSignal guards, read by the signal handler: lock-free
// atomics are all a handler may touch (with unlink, sigaction and raise,
// which are async-signal-safe).
constexpr int kMaxGuarded = 16;
static_assert(std::atomic<const char*>::is_always_lock_free);
std::atomic<const char*> g_guarded[kMaxGuarded];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

void remove_guarded_and_reraise(int sig) {
  for (std::atomic<const char*>& slot : g_guarded)
    if (const char* p = slot.load()) ::unlink(p);
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

template <typename Container>
Container read_whole(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw FileError(fmt::format("{}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  Container data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw FileError(fmt::format("{}: read error", path));
  return data;
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

PendingFile::PendingFile(std::string target, std::string tmp)
    : target_(std::move(target)),
      tmp_(tmp.empty() ? temp_path_for(target_) : std::move(tmp)),
      guard_(tmp_) {
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
  std::error_code ec;
  std::filesystem::rename(tmp_, target_, ec);
  if (ec) throw FileError(fmt::format("{}: cannot rename into place: {}", target_, ec.message()));
  committed_ = true;
}

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  PendingFile out(path);
  std::FILE* f = std::fopen(out.path().c_str(), "wb");
  if (f == nullptr) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !ok) throw FileError(fmt::format("{}: write failed", path));
  out.commit();
}

}  // namespace tpu
