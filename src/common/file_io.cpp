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

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path tmp = temp_path_for(path);
  const RemoveOnSignal guard(tmp.string());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(data, 1, size, f) == size;
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!ok || !closed) {
    fs::remove(tmp, ec);
    throw FileError(fmt::format("{}: write failed", path));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw FileError(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
  }
}

}  // namespace tpu
