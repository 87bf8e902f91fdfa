// The fast path's threads (model/worker_pool.h) and its background MMCs
// (model/gemm_queue.h): every task runs exactly once, runs that overlap
// still run every task, and the queue keeps the submission order.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "model/gemm_queue.h"
#include "model/worker_pool.h"

using namespace tpu;

TEST_CASE("The worker pool runs every task exactly once", "[fast_path]") {
  model::WorkerPool& pool = model::WorkerPool::shared();
  for (std::size_t tasks = 0; tasks <= 17; ++tasks) {
    for (unsigned rep = 0; rep < 20; ++rep) {
      std::vector<std::atomic<int>> ran(tasks);
      pool.run(tasks, [&](std::size_t t) { ran[t].fetch_add(1); });
      for (std::size_t t = 0; t < tasks; ++t) REQUIRE(ran[t].load() == 1);
    }
  }
  CHECK(pool.workers() >= 16);
}

TEST_CASE("Overlapping and nested runs of the worker pool run every task", "[fast_path]") {
  model::WorkerPool& pool = model::WorkerPool::shared();
  // A task that runs the pool again: the inner run happens on the task's
  // thread, in order.
  std::vector<std::atomic<int>> inner(4 * 5);
  pool.run(4, [&](std::size_t t) {
    pool.run(5, [&](std::size_t u) { inner[t * 5 + u].fetch_add(1); });
  });
  for (const auto& v : inner) CHECK(v.load() == 1);
  // Two threads running the pool at once, many times.
  std::atomic<long> sum{0};
  const auto many = [&](long base) {
    for (int rep = 0; rep < 200; ++rep)
      pool.run(3, [&](std::size_t t) { sum.fetch_add(base + static_cast<long>(t)); });
  };
  std::thread other(many, 1000);
  many(0);
  other.join();
  // Each run adds base * 3 + 0 + 1 + 2.
  CHECK(sum.load() == 200 * (3 * 1000 + 3) + 200 * 3);
}

TEST_CASE("The GEMM queue runs its tasks in submission order", "[fast_path]") {
  std::vector<int> order;
  {
    model::GemmQueue q;
    std::uint64_t last = 0;
    for (int i = 0; i < 100; ++i) last = q.submit([&order, i] { order.push_back(i); });
    CHECK(last == 100);
    q.wait_all();
    REQUIRE(order.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    q.submit([&order] { order.push_back(100); });
  }  // the destructor runs what is left, then joins
  CHECK(order.size() == 101);
}
