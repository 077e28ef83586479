#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lumen/detail/runtime.hpp"

#include "core/resource_ledger.hpp"
#include "core/thread_set.hpp"

namespace lumen::detail {

/// The threads that run tasks. Tasks may block in `lumen::get` on other
/// tasks, as in Ray; a worker that blocks lends its slot to a new thread so
/// that the tasks it waits for can still run (a fixed pool would deadlock).
/// Threads above the target count retire once they find no work.
class task_pool {
public:
  /// Tasks blocked in `get` lend the CPUs they hold in `ledger`.
  task_pool(size_t threads, resource_ledger& ledger);
  ~task_pool();

  task_pool(const task_pool&) = delete;
  task_pool& operator=(const task_pool&) = delete;

  /// Queues `t`; it runs on the next free worker.
  void submit(std::shared_ptr<task_spec> t);

  /// Stops accepting work, drops queued tasks (their refs fail) and joins
  /// every thread. Tasks already running finish first.
  void stop();

  /// Where its tasks' resources come from.
  resource_ledger& ledger() noexcept {
    return ledger_;
  }

  /// Called by a worker of this pool around a blocking wait.
  void begin_blocking();
  void end_blocking();

private:
  void spawn_thread(); // requires mtx_; throws if no thread can start
  void run_worker();

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<task_spec>> queue_;
  // Tasks dropped while stopping. Dropping one fails its ref, which may
  // submit (and drop) a dependent task: collecting them here and freeing
  // them in a loop keeps long chains from recursing through the stack.
  std::vector<std::shared_ptr<task_spec>> graveyard_;
  size_t target_;
  size_t threads_ = 0;
  size_t blocked_ = 0;
  size_t sleeping_ = 0;
  // Written under mtx_; atomic, with submissions_, for what an idle worker
  // polls before it sleeps (run_worker), without mtx_.
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> submissions_{0};
  resource_ledger& ledger_;
  thread_set workers_; // stand-ins that retire are joined by the next start
};

/// While alive, tells the calling thread's task pool (if it is a pool
/// worker) that the thread is blocked, and lends the CPUs its task holds:
/// the tasks it waits for may need them (a nested task on a node whose
/// CPUs are all taken would wait forever).
class blocking_scope {
public:
  blocking_scope();
  ~blocking_scope();
  blocking_scope(const blocking_scope&) = delete;
  blocking_scope& operator=(const blocking_scope&) = delete;

private:
  task_pool* pool_;
  resource_ledger::grant lent_;
  const task_spec* lent_by_ = nullptr;
};

} // namespace lumen::detail
