// worker_pool: the threads that the fast path's large instructions are split
// over, started once per process instead of once per instruction.
//
// run(tasks, fn) calls fn(0) .. fn(tasks - 1), each once, and returns when
// all have returned: the calling thread takes tasks too, the pool's workers
// the others. Workers are started when a run first needs them (at most
// tasks - 1 of them) and then wait for the next run, spinning for a few
// microseconds (the time between two MMCs of a large GEMM) before they sleep
// on a condition variable, so that a run does not pay a thread start
// (20-30 us) or, mostly, a wake-up.
//
// One run at a time: a run asked for while another is in progress (another
// simulation on another thread, or a task that itself calls run) executes
// its tasks on the calling thread, in order. The results of the fast path do
// not depend on how its tasks are split, so this changes only the time.
//
// A process forked after the pool started (tpu-bench measures in children)
// gets a pool of its own at its first run: the parent's workers do not exist
// in the child.
#pragma once

#include <cstddef>
#include <functional>

namespace tpu::model {

class WorkerPool {
 public:
  // The process's pool.
  static WorkerPool& shared();

  void run(std::size_t tasks, const std::function<void(std::size_t)>& fn);

  // Workers started so far (for the tests).
  std::size_t workers() const;

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  struct State;

 private:
  WorkerPool();
  State* state_;  // never freed: the workers outlive main's static destructors
};

}  // namespace tpu::model
