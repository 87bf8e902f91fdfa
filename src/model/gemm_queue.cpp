#include "model/gemm_queue.h"

namespace tpu::model {

GemmQueue::~GemmQueue() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

std::uint64_t GemmQueue::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lk(m_);
    tasks_.push_back(std::move(task));
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  work_cv_.notify_one();
  return ++submitted_;
}

void GemmQueue::wait(std::uint64_t ticket) {
  std::unique_lock<std::mutex> lk(m_);
  done_cv_.wait(lk, [&] { return done_ >= ticket; });
}

void GemmQueue::loop() {
  std::unique_lock<std::mutex> lk(m_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    task();
    lk.lock();
    ++done_;
    done_cv_.notify_all();
  }
}

}  // namespace tpu::model
