#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace lumen::detail {

class borrow;
class object_state;

/// Work that computes an object and can be told to stop (`lumen::cancel`):
/// a task or an actor call. The request is recorded once; work that was
/// sent to another process passes it on there.
class cancellable {
public:
  virtual ~cancellable();

  /// Fails the work's result with `task_cancelled` unless it is ready,
  /// keeps queued work from starting, and lets running work see
  /// `lumen::cancelled()`. `force` is passed on to where the work runs;
  /// what it may do there is the work's rule (see lumen::cancel).
  virtual void cancel(bool force) = 0;

  /// True once cancel() was called; read by the work itself and by whoever
  /// is about to start or send it.
  bool cancel_requested() const noexcept {
    return request_.load(std::memory_order_acquire) != 0;
  }

  /// For work sent to another process: `f` passes a cancel on to where it
  /// runs. Runs `f` at once if the cancel came first.
  void forward_cancel(std::function<void(bool force)> f);

protected:
  /// Records the request, fails `result` with `task_cancelled` saying
  /// "`what` was cancelled", and passes the request on if the work was
  /// sent elsewhere.
  void cancel_now(object_state& result, const std::string& what, bool force);

private:
  std::atomic<uint8_t> request_{0}; // 0 none, 1 cancel, 2 with force
  std::mutex mtx_;
  std::function<void(bool force)> forward_;
};

/// The slot behind an ObjectRef: pending until a value or an error is
/// published exactly once, by whichever thread computes it. Readers wait by
/// spinning briefly, then parking; the spin keeps a synchronous call's round
/// trip free of futex wake-ups when the producer answers within microseconds.
class object_state {
public:
  using clock = std::chrono::steady_clock;

  object_state();
  virtual ~object_state();

  object_state(const object_state&) = delete;
  object_state& operator=(const object_state&) = delete;

  /// Unique within the process; printed in errors about this object.
  uint64_t id() const noexcept {
    return id_;
  }

  bool ready() const noexcept {
    return status_.load(std::memory_order_acquire) != status::pending;
  }

  bool failed() const noexcept {
    return status_.load(std::memory_order_acquire) == status::failed;
  }

  /// Publishes an error; a second publication is ignored.
  void set_error(std::exception_ptr err);

  /// The published error, or null. Only meaningful once ready().
  const std::exception_ptr& error() const noexcept {
    return error_;
  }

  /// Blocks until ready().
  void wait();

  /// Blocks until ready() or the deadline; returns ready().
  bool wait_until(clock::time_point deadline);

  /// Runs `fn` once the state is ready: at once, on this thread, if it
  /// already is, otherwise on the publishing thread. Returns a token for
  /// `forget`, or 0 if `fn` already ran.
  uint64_t on_ready(std::function<void()> fn);

  /// Drops a continuation that is no longer wanted (a `wait` that returned).
  void forget(uint64_t token);

  /// For a ref that came from another process: what this process holds of
  /// it there (object_exchange.hpp). Null for an object made here.
  virtual const std::shared_ptr<borrow>* lease() const noexcept {
    return nullptr;
  }

  /// The task or call computing this object, for `lumen::cancel`; set by
  /// the submitter before the ref is handed out, null for `put` and
  /// promises.
  std::weak_ptr<cancellable> maker;

protected:
  /// Called, outside any lock, when someone starts waiting for a state
  /// that is not ready: a borrowed ref fetches its value only then, so
  /// that refs passed around and never read cost no transfer.
  virtual void demand() {}

  /// Marks the state ready. Returns false if it already was.
  bool claim();
  void publish(bool failed);

private:
  enum class status : uint8_t { pending, ready, failed };

  bool park_until(const clock::time_point* deadline);

  uint64_t id_;
  std::atomic<status> status_{status::pending};
  std::atomic<bool> claimed_{false};
  std::atomic<int> sleepers_{0};
  std::exception_ptr error_;
  std::mutex mtx_;
  std::condition_variable cv_;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> continuations_;
};

/// Holds a value of type T once published.
template <class T>
class value_state : public object_state {
public:
  template <class U>
  void set_value(U&& x) {
    if (ready())
      return;
    // Built before claiming, so that a throwing copy leaves the state open
    // for the error that follows.
    std::optional<T> v{std::in_place, std::forward<U>(x)};
    if (!claim())
      return;
    value_ = std::move(v);
    publish(false);
  }

  /// Requires ready() && !failed().
  const T& value() const noexcept {
    return *value_;
  }

private:
  std::optional<T> value_;
};

template <>
class value_state<void> : public object_state {
public:
  void set_value() {
    if (claim())
      publish(false);
  }
};

/// Runs `fn` on the thread that readies the last of `deps` (or at once if
/// they all are), after which every one of them is ready.
void when_all_ready(const std::vector<std::shared_ptr<object_state>>& deps,
                    std::function<void()> fn);

} // namespace lumen::detail
