#include "run/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace tpu::run {
namespace {

using Clock = std::chrono::steady_clock;

// The state of the active scope; a thread redraws the line every second.
struct Progress {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  bool shown = false;  // the line is on the terminal
  std::string status;
  Clock::time_point since;
  std::thread ticker;

  // With `mutex` held.
  void draw() {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - since).count();
    std::string line = seconds > 0 ? fmt::format("{} ({} s)", status, seconds) : status;
    winsize ws{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col)
      line.resize(ws.ws_col - 1u);
    // \r to the line's start, the text, then erase to the end of the line.
    std::fputs(fmt::format("\r{}\x1b[K", line).c_str(), stderr);
    std::fflush(stderr);
    shown = true;
  }
  void erase() {
    if (!shown) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    shown = false;
  }
};

Progress* active = nullptr;

}  // namespace

bool ProgressScope::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

ProgressScope::ProgressScope(bool enabled) {
  if (!enabled || active) return;
  owner_ = true;
  active = new Progress;
  Progress* p = active;
  p->ticker = std::thread([p] {
    std::unique_lock<std::mutex> lock(p->mutex);
    while (!p->stop) {
      p->wake.wait_for(lock, std::chrono::seconds(1));
      if (!p->stop && p->shown && Clock::now() - p->since >= std::chrono::seconds(1)) p->draw();
    }
  });
}

ProgressScope::~ProgressScope() {
  Progress* p = active;
  if (!owner_ || !p) return;
  {
    std::lock_guard<std::mutex> lock(p->mutex);
    p->stop = true;
    p->erase();
  }
  p->wake.notify_all();
  p->ticker.join();
  active = nullptr;
  delete p;
}

void progress_show(const std::string& status) {
  if (!active) return;
  std::lock_guard<std::mutex> lock(active->mutex);
  active->status = status;
  active->since = Clock::now();
  active->draw();
}

void progress_clear() {
  if (!active) return;
  std::lock_guard<std::mutex> lock(active->mutex);
  active->erase();
}

}  // namespace tpu::run
