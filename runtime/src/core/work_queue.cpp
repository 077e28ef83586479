#include "lumen/util/work_queue.hpp"

#include "lumen/sim.hpp"

namespace lumen::util {

work_queue::work_queue(size_t threads, const std::function<void()>& on_start) {
  if (lumen::sim::active()) {
    lane_ = std::make_shared<lane>();
    return;
  }
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this, on_start] {
      if (on_start)
        on_start();
      run();
    });
}

work_queue::~work_queue() {
  if (lane_) {
    // As joining threads would: what was posted runs first, unless the
    // run is over, when nothing runs any more.
    if (lumen::sim::active()) {
      try {
        drain();
      } catch (...) {
      }
    }
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void work_queue::post(std::function<void()> job) {
  if (lane_) {
    lane_->jobs.push_back(std::move(job));
    if (!lane_->running) {
      lane_->running = true;
      lumen::sim::run_beside([l = lane_] {
        while (!l->jobs.empty()) {
          auto next = std::move(l->jobs.front());
          l->jobs.pop_front();
          next();
        }
        l->running = false;
      });
    }
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    jobs_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

void work_queue::drain() {
  if (lane_) {
    lumen::sim::wait_for([l = lane_] { return l->jobs.empty() && !l->running; },
                         std::chrono::nanoseconds::max());
    return;
  }
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
