#include "core/method_threads.hpp"

namespace lumen::detail {

method_threads::method_threads(size_t n,
                               const std::function<void()>& on_start) {
  for (size_t i = 0; i < n; ++i)
    threads_.emplace_back([this, on_start] {
      on_start();
      run();
    });
}

method_threads::~method_threads() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void method_threads::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void method_threads::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty())
        return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

} // namespace lumen::detail
