#include "core/task_pool.hpp"

#include <algorithm>
#include <string>
#include <system_error>

#include "lumen/trace.hpp"

#include "core/spin.hpp"

namespace lumen::detail {

namespace {

thread_local task_pool* current_pool = nullptr;
// The task a pool worker runs, while it has CPUs of its own to lend.
thread_local const task_spec* current_task = nullptr;

} // namespace

task_pool::task_pool(size_t threads, resource_ledger& ledger)
  : target_(threads == 0 ? 1 : threads)
  , ledger_(ledger) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (size_t i = 0; i < target_; ++i)
    spawn_thread();
}

task_pool::~task_pool() {
  stop();
}

void task_pool::spawn_thread() {
  workers_.start([this, n = threads_ + 1] {
    trace::name_thread("task worker " + std::to_string(n));
    run_worker();
  });
  ++threads_;
}

void task_pool::submit(std::shared_ptr<task_spec> t) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_) {
    graveyard_.push_back(std::move(t)); // its ref fails in stop()
    return;
  }
  queue_.push_back(std::move(t));
  submissions_.fetch_add(1, std::memory_order_release);
  if (sleeping_ > 0)
    cv_.notify_one();
}

void task_pool::run_worker() {
  current_pool = this;
  std::unique_lock<std::mutex> guard{mtx_};
  bool idle_spun = false; // since its last task
  for (;;) {
    if (stopping_)
      break;
    if (queue_.empty()) {
      if (threads_ - blocked_ > target_) {
        workers_.done();
        break; // a stand-in whose blocked worker is back
      }
      if (!idle_spun) {
        // A caller that waits for each task submits the next within
        // microseconds: polling for it spares both sides a futex sleep
        // and wake-up (a synchronous task's round trip: ~2 µs instead of
        // ~12). The poller yields, so that a caller submitting a batch
        // keeps its core (pausing instead cost async tasks 15-30%).
        idle_spun = true;
        auto seen = submissions_.load(std::memory_order_acquire);
        guard.unlock();
        util::spin_until(
          [&] {
            return submissions_.load(std::memory_order_acquire) != seen ||
                   stopping_.load(std::memory_order_acquire);
          },
          std::chrono::steady_clock::now() + spin_budget,
          util::poll_pause::yield);
        guard.lock();
        continue;
      }
      ++sleeping_;
      cv_.wait(guard);
      --sleeping_;
      continue;
    }
    auto t = std::move(queue_.front());
    queue_.pop_front();
    idle_spun = false;
    guard.unlock();
    current_task = t.get();
    t->run();
    current_task = nullptr;
    t.reset();
    guard.lock();
  }
  --threads_;
  current_pool = nullptr;
}

void task_pool::begin_blocking() {
  std::lock_guard<std::mutex> guard{mtx_};
  ++blocked_;
  if (!stopping_ && threads_ - blocked_ < target_) {
    try {
      spawn_thread();
    } catch (const std::system_error&) {
      // Out of threads: the pool runs on with the ones it has.
    }
  }
}

void task_pool::end_blocking() {
  std::lock_guard<std::mutex> guard{mtx_};
  --blocked_;
}

void task_pool::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    for (auto& t : queue_)
      graveyard_.push_back(std::move(t));
    queue_.clear();
    cv_.notify_all();
  }
  for (;;) {
    std::vector<std::shared_ptr<task_spec>> doomed;
    std::vector<std::thread> workers;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      doomed.swap(graveyard_);
      workers = workers_.take();
    }
    if (doomed.empty() && workers.empty())
      break;
    doomed.clear();
    // Tasks still running may block and start stand-ins until they see
    // stopping_, hence the rounds.
    join_all(workers);
  }
}

blocking_scope::blocking_scope()
  : pool_(current_pool) {
  if (pool_ == nullptr)
    return;
  pool_->begin_blocking();
  if (current_task == nullptr)
    return; // not a task, or lending already
  auto cpu = current_task->resources.find("cpu");
  if (cpu == current_task->resources.end() || cpu->second <= 0)
    return;
  lent_ = pool_->ledger().lend({{"cpu", cpu->second}});
  lent_by_ = current_task;
  current_task = nullptr;
}

blocking_scope::~blocking_scope() {
  if (lent_by_ != nullptr) {
    lent_.reset(); // taken back at once: the task goes on
    current_task = lent_by_;
  }
  if (pool_ != nullptr)
    pool_->end_blocking();
}

} // namespace lumen::detail
