#pragma once

// A thread that runs what it is given, in order.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace lumen::ml::detail {

/// Runs operations one after another, in the order they were posted, on
/// a thread of its own: a collective member's _async operations, a
/// worker's gradients.
class async_lane {
public:
  async_lane();
  /// Runs what is queued, then joins the thread.
  ~async_lane();

  async_lane(const async_lane&) = delete;
  async_lane& operator=(const async_lane&) = delete;

  void post(std::function<void()> op);

  /// Returns once everything posted so far ran.
  void drain();

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false; // an op is under way
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace lumen::ml::detail
