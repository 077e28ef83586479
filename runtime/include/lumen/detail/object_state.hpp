#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
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
class cancellable : public std::enable_shared_from_this<cancellable> {
public:
  enum class kind : uint8_t { task, call };

  /// Unlinks the work from its result, after any `lumen::cancel` that is
  /// finding it through the result has.
  virtual ~cancellable();

  cancellable(const cancellable&) = delete;
  cancellable& operator=(const cancellable&) = delete;

  /// Fails the work's result with `task_cancelled` unless it is ready,
  /// keeps queued work from starting, and lets running work see
  /// `lumen::cancelled()`. `force` is passed on to where the work runs;
  /// there a task's process is ended. Here it is a `usage_error` for an
  /// actor call (force would end its actor) and for a task running in
  /// this process (it would end the caller's own).
  void cancel(bool force);

  /// True once cancel() was called; read by the work itself and by whoever
  /// is about to start or send it.
  bool cancel_requested() const noexcept {
    return request_.load(std::memory_order_acquire) != 0;
  }

  /// For work sent to another process: `f` passes a cancel on to where it
  /// runs (replacing the one of an earlier send). Runs `f` at once if the
  /// cancel came first.
  void forward_cancel(std::function<void(bool force)> f);

  /// True once the work started in this process.
  bool started() const noexcept {
    return started_.load(std::memory_order_acquire);
  }

  const std::shared_ptr<object_state>& result() const noexcept {
    return result_;
  }

  /// The function's or the method's name, for errors.
  virtual const std::string& work_name() const noexcept = 0;

protected:
  /// Links the work to `result`, so that `lumen::cancel` on a ref to it
  /// finds the work.
  cancellable(kind k, std::shared_ptr<object_state> result);

  std::shared_ptr<object_state> result_;

private:
  std::unique_ptr<std::function<void(bool force)>> forward_;

protected:
  // The one-byte members last, so that a derived class's first small
  // member fills the padding after them: a task or call is one make_shared
  // block, and every size class it moves up costs the allocator.
  std::atomic<bool> started_{false};

private:
  kind kind_;
  std::atomic<uint8_t> request_{0}; // 0 none, 1 cancel, 2 with force
  // Guards forward_, which only work sent elsewhere has: a spin lock, so
  // that local work pays a flag for it, not a mutex.
  std::atomic_flag forward_lock_ = ATOMIC_FLAG_INIT;
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

  /// Blocks until ready(). Inline: a get of a ready ref is a load.
  void wait() {
    if (!ready())
      park_until(nullptr);
  }

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
  bool ready_seq_cst() const noexcept;

  friend class cancellable;
  friend void cancel(object_state& st, bool force);

  uint64_t id_;
  std::atomic<status> status_{status::pending};
  std::atomic<bool> claimed_{false};
  bool had_maker_ = false;            // see maker_
  std::atomic<uint64_t> watchers_{0}; // see publish()
  // The task or call computing this object, for lumen::cancel; null for
  // put and promises, and once the work is gone. A raw pointer, not a
  // weak_ptr: a weak_ptr would keep the work's memory (make_shared's one
  // block) until the last ref went, which cost a third of the async task
  // rate. A cancel pins it (maker_pins_) while taking a strong reference;
  // the work's destructor waits the pins out.
  std::atomic<cancellable*> maker_{nullptr};
  std::atomic<int> maker_pins_{0};
  std::exception_ptr error_;
  // Parking and continuations are guarded by a mutex and a condition
  // variable shared with the states whose address hashes alike
  // (object_state.cpp), not by 88 bytes in every state, and are only
  // touched when someone waits: most states are published unwatched.
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
