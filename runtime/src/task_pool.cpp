#include "task_pool.hpp"

namespace lumen::detail {

namespace {

thread_local task_pool* current_pool = nullptr;

} // namespace

task_pool::task_pool(size_t threads) : target_(threads == 0 ? 1 : threads) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (size_t i = 0; i < target_; ++i)
    spawn_thread();
}

task_pool::~task_pool() {
  stop();
}

void task_pool::spawn_thread() {
  ++threads_;
  workers_.emplace_back([this] { run_worker(); });
}

void task_pool::submit(std::shared_ptr<task_spec> t) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_)
    return; // dropping t fails its ref: the runtime is going away
  queue_.push_back(std::move(t));
  if (sleeping_ > 0)
    cv_.notify_one();
}

void task_pool::run_worker() {
  current_pool = this;
  std::unique_lock<std::mutex> guard{mtx_};
  for (;;) {
    if (stopping_)
      break;
    if (queue_.empty()) {
      if (threads_ - blocked_ > target_)
        break; // a stand-in whose blocked worker is back
      ++sleeping_;
      cv_.wait(guard);
      --sleeping_;
      continue;
    }
    auto t = std::move(queue_.front());
    queue_.pop_front();
    guard.unlock();
    t->run();
    t.reset();
    guard.lock();
  }
  --threads_;
  current_pool = nullptr;
}

void task_pool::begin_blocking() {
  std::lock_guard<std::mutex> guard{mtx_};
  ++blocked_;
  if (!stopping_ && threads_ - blocked_ < target_)
    spawn_thread();
}

void task_pool::end_blocking() {
  std::lock_guard<std::mutex> guard{mtx_};
  --blocked_;
}

void task_pool::stop() {
  std::vector<std::thread> workers;
  std::deque<std::shared_ptr<task_spec>> dropped;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  dropped.clear();
  // Workers can start stand-ins until they see stopping_, so join in rounds.
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      workers.swap(workers_);
    }
    if (workers.empty())
      break;
    for (auto& w : workers)
      if (w.joinable())
        w.join();
    workers.clear();
  }
}

blocking_scope::blocking_scope() : pool_(current_pool) {
  if (pool_ != nullptr)
    pool_->begin_blocking();
}

blocking_scope::~blocking_scope() {
  if (pool_ != nullptr)
    pool_->end_blocking();
}

} // namespace lumen::detail
