#include "collective/async_lane.hpp"

namespace lumen::ml::detail {

async_lane::async_lane()
  : thread_([this] {
    std::unique_lock<std::mutex> lock{mtx_};
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, and nothing left
      auto op = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      op();         // reports its own outcome through its ref
      op = nullptr; // its captures go before drain() says it is done
      lock.lock();
      running_ = false;
      cv_.notify_all();
    }
  }) {}

async_lane::~async_lane() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void async_lane::post(std::function<void()> op) {
  std::lock_guard<std::mutex> guard{mtx_};
  queue_.push_back(std::move(op));
  cv_.notify_all();
}

void async_lane::drain() {
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return queue_.empty() && !running_; });
}

} // namespace lumen::ml::detail
