#pragma once

// What an elastic run's driver (trainer.cpp) watches while an attempt runs
// short of its most workers: whether the cluster has live nodes beyond
// them.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <lumen/cluster.hpp>

namespace lumen::train::detail {

/// Counts the cluster's live nodes every half second; once there are more
/// than `workers`, calls `on_more` (once) and stops.
class node_watch {
public:
  node_watch(size_t workers, std::function<void()> on_more)
    : thread_([this, workers, on_more = std::move(on_more)] {
      std::unique_lock<std::mutex> lock{mtx_};
      while (!stop_) {
        lock.unlock();
        size_t live = 0;
        try {
          for (auto& n : lumen::nodes())
            live += n.alive ? 1 : 0;
        } catch (const std::exception&) {
          // The head is lost for now: the attempt's own failure says so.
        }
        if (live > workers) {
          on_more();
          return;
        }
        lock.lock();
        cv_.wait_for(lock, std::chrono::milliseconds(500),
                     [this] { return stop_; });
      }
    }) {}

  ~node_watch() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  node_watch(const node_watch&) = delete;
  node_watch& operator=(const node_watch&) = delete;

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_; // last: it uses the others
};

} // namespace lumen::train::detail
