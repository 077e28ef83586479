#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lumen::detail {

/// The threads of an actor with max_concurrency > 1: they run its methods
/// while its host's thread takes calls in and hands them out.
class method_threads {
public:
  /// Starts `n` threads, each running `on_start` first.
  method_threads(size_t n, const std::function<void()>& on_start);

  /// Lets the methods running finish, then joins the threads.
  ~method_threads();

  method_threads(const method_threads&) = delete;
  method_threads& operator=(const method_threads&) = delete;

  /// Runs `job` on the next free thread.
  void post(std::function<void()> job);

private:
  void run();

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_; // under mtx_
  bool stopping_ = false;                  // under mtx_
  std::vector<std::thread> threads_;
};

} // namespace lumen::detail
