#pragma once

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

namespace lumen::detail {

/// Threads that may end on their own at any time, each joined by whoever
/// starts the next one, or at the end: a thread cannot join itself, and an
/// ended one must not linger. The owner guards the set with its own lock.
class thread_set {
public:
  /// Joins the threads that said they are done, then starts `fn`. Requires
  /// the owner's lock; throws `std::system_error` if no thread can start.
  template <class F>
  void start(F&& fn) {
    for (auto id : done_) {
      auto i = std::find_if(threads_.begin(), threads_.end(),
                            [id](auto& t) { return t.get_id() == id; });
      if (i != threads_.end()) {
        i->join(); // past its last use of the lock, which we hold
        threads_.erase(i);
      }
    }
    done_.clear();
    threads_.emplace_back(std::forward<F>(fn));
  }

  /// Called by a thread of the set as its last use of the owner's lock.
  void done() {
    done_.push_back(std::this_thread::get_id());
  }

  /// Takes every thread out of the set, to join outside the lock.
  std::vector<std::thread> take() {
    done_.clear();
    return std::exchange(threads_, {});
  }

private:
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> done_;
};

/// Joins `threads`.
inline void join_all(std::vector<std::thread>& threads) {
  for (auto& t : threads)
    if (t.joinable())
      t.join();
}

} // namespace lumen::detail
