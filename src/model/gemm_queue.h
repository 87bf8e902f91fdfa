// gemm_queue: the fast path's large MMCs computed on a thread of their own,
// from their start to their completion cycle, while the simulation thread
// goes on with the other units (docs/performance.md, "MMCs in the
// background").
//
// Tasks run one after another in the order they were submitted, on one
// background thread (which splits each GEMM over the WorkerPool as usual):
// MMCs into the same accumulator rows are thus computed in issue order. The
// thread is started at the first submit and joined by the destructor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tpu::model {

class GemmQueue {
 public:
  GemmQueue() = default;
  ~GemmQueue();
  GemmQueue(const GemmQueue&) = delete;
  GemmQueue& operator=(const GemmQueue&) = delete;

  // Queues `task`; returns its ticket (1, 2, ... in submission order).
  std::uint64_t submit(std::function<void()> task);
  // Returns once the task of `ticket`, and so every one before it, is done.
  void wait(std::uint64_t ticket);
  // Returns once every task submitted so far is done.
  void wait_all() { wait(submitted_); }

 private:
  void loop();

  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t submitted_ = 0;  // written by the submitting thread only
  std::uint64_t done_ = 0;       // under m_
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tpu::model
