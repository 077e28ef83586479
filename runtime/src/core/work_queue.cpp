#include "lumen/util/work_queue.hpp"

#include "lumen/sim.hpp"

namespace lumen::util {

work_queue::work_queue(size_t threads, const std::function<void()>& on_start)
  : inline_(lumen::sim::active()) {
  if (inline_)
    return;
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this, on_start] {
      if (on_start)
        on_start();
      run();
    });
}

work_queue::~work_queue() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void work_queue::post(std::function<void()> job) {
  if (inline_) {
    job();
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    jobs_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

void work_queue::drain() {
  std::unique_lock<std::mutex> lock{mtx_};
  idle_cv_.wait(lock, [this] { return jobs_.empty() && running_ == 0; });
}

void work_queue::run() {
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty())
      return; // stopping, and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    job = nullptr; // its captures go before drain() says it is done
    lock.lock();
    if (--running_ == 0 && jobs_.empty())
      idle_cv_.notify_all();
  }
}

} // namespace lumen::util
