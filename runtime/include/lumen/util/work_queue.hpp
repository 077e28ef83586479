#pragma once

// Threads that run what they are given, in the order it was posted.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lumen::util {

/// Runs posted jobs on threads of its own, taken in the order they were
/// posted: with one thread, one after another (a collective member's
/// `_async` operations, a worker's gradients); with more, as many at once
/// (the methods of an actor with max_concurrency > 1). A job reports its
/// own outcome; an exception escaping it ends the process, as in any
/// thread.
///
/// One made in a simulated run (lumen/sim.hpp) has no threads: its jobs
/// run one after another on work beside the poster's (sim::run_beside),
/// as the same actor, where they may wait in virtual time as they would
/// hold a thread; its poster goes on meanwhile, as with a thread.
class work_queue {
public:
  /// Starts `threads` threads, each running `on_start` first (none in a
  /// simulated run).
  explicit work_queue(size_t threads = 1,
                      const std::function<void()>& on_start = {});

  /// Runs what is queued, then joins the threads.
  ~work_queue();

  work_queue(const work_queue&) = delete;
  work_queue& operator=(const work_queue&) = delete;

  /// Queues `job` for the next free thread.
  void post(std::function<void()> job);

  /// Returns once every job posted so far has run.
  void drain();

private:
  void run();

  std::mutex mtx_;
  std::condition_variable work_cv_; // the threads wait: a job, stopping
  std::condition_variable idle_cv_; // drain() waits: nothing queued or running
  std::deque<std::function<void()>> jobs_; // under mtx_
  size_t running_ = 0;                     // jobs under way, under mtx_
  bool stopping_ = false;                  // under mtx_
  std::vector<std::thread> threads_;

  // In a simulated run: the jobs and whether work runs them, kept apart
  // from the queue so that work parked when the run ends outlives it.
  struct lane {
    std::deque<std::function<void()>> jobs;
    bool running = false;
  };
  std::shared_ptr<lane> lane_;
};

} // namespace lumen::util
