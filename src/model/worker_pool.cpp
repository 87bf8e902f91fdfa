#include "model/worker_pool.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TPU_PAUSE() _mm_pause()
#else
#define TPU_PAUSE() std::this_thread::yield()
#endif

namespace tpu::model {

// A run is a generation: run() opens it under `m` (the function, the task
// count, the counters) and closes it once every task is done and no worker is
// inside it. A worker enters a generation under `m` too, so a worker that
// enters after the close sees no tasks, and none can take a task of the next
// generation with the function of this one.
struct WorkerPool::State {
  pid_t pid = getpid();
  std::mutex run_mutex;  // one run at a time
  std::mutex m;
  std::condition_variable work_cv, done_cv;
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> generation{0};
  // Of the open generation (written under m).
  const std::function<void(std::size_t)>* fn = nullptr;
  std::size_t tasks = 0;
  std::size_t inside = 0;  // workers in the open generation
  std::atomic<std::size_t> next{0}, done{0};

  // Takes tasks of the open generation until none is left.
  void take(const std::function<void(std::size_t)>& f, std::size_t count) {
    for (std::size_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      f(t);
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void worker() {
    std::uint64_t seen = generation.load(std::memory_order_acquire);
    for (;;) {
      // A short spin first: MMCs of a large GEMM come some tens of
      // microseconds apart; then sleep.
      const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
      for (unsigned i = 1; generation.load(std::memory_order_acquire) == seen; ++i) {
        TPU_PAUSE();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > spin_end) break;
      }
      const std::function<void(std::size_t)>* f = nullptr;
      std::size_t count = 0;
      {
        std::unique_lock<std::mutex> lk(m);
        work_cv.wait(lk, [&] { return generation.load(std::memory_order_relaxed) != seen; });
        seen = generation.load(std::memory_order_relaxed);
        f = fn;
        count = tasks;
        ++inside;
      }
      if (f) take(*f, count);
      std::lock_guard<std::mutex> lk(m);
      if (--inside == 0) done_cv.notify_all();
    }
  }
};

WorkerPool::WorkerPool() : state_(new State) {}

WorkerPool& WorkerPool::shared() {
  // Leaked on purpose (the workers never end); a forked child makes its own.
  static std::atomic<WorkerPool*> pool{nullptr};
  static std::mutex make;
  WorkerPool* p = pool.load(std::memory_order_acquire);
  if (p && p->state_->pid == getpid()) return *p;
  std::lock_guard<std::mutex> lk(make);
  p = pool.load(std::memory_order_relaxed);
  if (!p || p->state_->pid != getpid()) {
    p = new WorkerPool;
    pool.store(p, std::memory_order_release);
  }
  return *p;
}

std::size_t WorkerPool::workers() const {
  std::lock_guard<std::mutex> lk(state_->m);
  return state_->threads.size();
}

void WorkerPool::run(std::size_t tasks, const std::function<void(std::size_t)>& fn) {
  State& s = *state_;
  std::unique_lock<std::mutex> one(s.run_mutex, std::try_to_lock);
  if (tasks <= 1 || !one.owns_lock()) {
    for (std::size_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(s.m);
    while (s.threads.size() < tasks - 1) s.threads.emplace_back([&s] { s.worker(); });
    s.fn = &fn;
    s.tasks = tasks;
    s.next.store(0, std::memory_order_relaxed);
    s.done.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_cv.notify_all();
  s.take(fn, tasks);
  // Wait for the tasks the workers took, spinning briefly first.
  for (unsigned i = 0; i < 4096 && s.done.load(std::memory_order_acquire) < tasks; ++i) TPU_PAUSE();
  std::unique_lock<std::mutex> lk(s.m);
  s.done_cv.wait(lk, [&] { return s.done.load(std::memory_order_acquire) == tasks && s.inside == 0; });
  s.fn = nullptr;
  s.tasks = 0;
}

}  // namespace tpu::model
