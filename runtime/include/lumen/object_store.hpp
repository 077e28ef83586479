#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "lumen/detail/small_pool.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_ref.hpp"

namespace lumen {

namespace detail {

using clock = object_state::clock;

/// The clock of waits: the steady clock, or in a simulated cluster
/// (lumen/sim.hpp) its virtual time.
clock::time_point wait_clock_now();

/// now() + d, saturating instead of overflowing for huge timeouts.
template <class Rep, class Period>
clock::time_point deadline_after(std::chrono::duration<Rep, Period> d) {
  auto now = wait_clock_now();
  auto room = std::chrono::duration_cast<std::chrono::duration<double>>(
    clock::time_point::max() - now);
  if (std::chrono::duration<double>(d) >= room)
    return clock::time_point::max();
  return now + std::chrono::duration_cast<clock::duration>(d);
}

/// Throws `usage_error` naming `api`: the ref is empty.
[[noreturn]] void throw_empty_ref(const char* api);

inline void require_valid(const object_state* st, const char* api) {
  if (st == nullptr)
    throw_empty_ref(api);
}

/// Throws `get_timeout` for object `id` after waiting `waited`.
[[noreturn]] void throw_get_timeout(uint64_t id, clock::duration waited);

/// Blocks until `st` is ready or the deadline passes; throws on timeout.
void await(object_state& st, clock::time_point deadline,
           clock::time_point started);

/// The value of a ready state: rethrows its error or copies the value out.
template <class T>
T take(const value_state<T>& st) {
  if (st.failed())
    std::rethrow_exception(st.error());
  if constexpr (!std::is_void<T>::value)
    return st.value();
}

/// Flags which of `states` are ready once at least `num_returns` are or the
/// deadline passed; keeps at most the first `num_returns` ready ones.
std::vector<bool> wait_states(const std::vector<object_state*>& states,
                              size_t num_returns, clock::time_point deadline);

/// See lumen::cancel.
void cancel(object_state& st, bool force);

} // namespace detail

/// Blocks until the object is ready and returns a copy of its value, like
/// `ray.get`. Rethrows the error that produced it: `task_error` for a throwing
/// task or method, `actor_died` for a call to a dead actor.
template <class T>
T get(const ObjectRef<T>& ref) {
  detail::require_valid(ref.state().get(), "lumen::get");
  ref.state()->wait();
  return detail::take(*ref.state());
}

/// Like `get(ref)`, but throws `get_timeout` once `timeout` has passed.
template <class T, class Rep, class Period>
T get(const ObjectRef<T>& ref, std::chrono::duration<Rep, Period> timeout) {
  detail::require_valid(ref.state().get(), "lumen::get");
  auto start = detail::wait_clock_now();
  detail::await(*ref.state(), detail::deadline_after(timeout), start);
  return detail::take(*ref.state());
}

/// Waits for all refs within one deadline and returns their values in input
/// order (nothing for ObjectRef<void>). The first failed ref's error is
/// thrown, in input order.
template <class T, class Rep = int64_t, class Period = std::ratio<1>>
std::conditional_t<std::is_void<T>::value, void, std::vector<T>>
get(const std::vector<ObjectRef<T>>& refs,
    std::chrono::duration<Rep, Period> timeout =
      std::chrono::duration<Rep, Period>::max()) {
  for (auto& r : refs)
    detail::require_valid(r.state().get(), "lumen::get");
  auto start = detail::wait_clock_now();
  auto deadline = detail::deadline_after(timeout);
  for (auto& r : refs)
    detail::await(*r.state(), deadline, start);
  if constexpr (std::is_void<T>::value) {
    for (auto& r : refs)
      detail::take(*r.state());
  } else {
    std::vector<T> out;
    out.reserve(refs.size());
    for (auto& r : refs)
      out.push_back(detail::take(*r.state()));
    return out;
  }
}

/// What `wait` returns: both lists keep the input order.
template <class T>
struct wait_result {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> pending;
};

/// Waits until `num_returns` of `refs` are ready or `timeout` passes, like
/// `ray.wait`; a failed object counts as ready. `ready` holds at most
/// `num_returns` refs. Throws `usage_error` if num_returns > refs.size() or a
/// ref is empty.
template <class T, class Rep = int64_t, class Period = std::ratio<1>>
wait_result<T> wait(const std::vector<ObjectRef<T>>& refs,
                    size_t num_returns = 1,
                    std::chrono::duration<Rep, Period> timeout =
                      std::chrono::duration<Rep, Period>::max()) {
  std::vector<detail::object_state*> states;
  states.reserve(refs.size());
  for (auto& r : refs) {
    detail::require_valid(r.state().get(), "lumen::wait");
    states.push_back(r.state().get());
  }
  auto flags =
    detail::wait_states(states, num_returns, detail::deadline_after(timeout));
  wait_result<T> out;
  for (size_t i = 0; i < refs.size(); ++i)
    (flags[i] ? out.ready : out.pending).push_back(refs[i]);
  return out;
}

/// Cancels the task or actor method call behind `ref`, like `ray.cancel`:
/// the ref fails at once with `task_cancelled`, and so do the refs of work
/// that takes it as an argument. Work still queued never starts; work
/// already running sees `lumen::cancelled()` become true, and what it
/// returns is dropped. A ref that is ready is left as it is.
///
/// `force` is for a task that never looks at `cancelled()`: the node
/// process running it is ended (with everything else it runs, as a crash
/// would: actors restart as their options say, spread tasks are retried
/// elsewhere). The head is never ended; there force acts as a plain cancel.
/// Force is refused with `usage_error` for a task running in this process
/// and for actor calls (`lumen::kill` ends an actor).
///
/// Only the process that submitted the work can cancel it: for a ref from
/// another process, or a pending ref of `put`, a promise or a typed
/// actor's request, this throws `usage_error`.
template <class T>
void cancel(const ObjectRef<T>& ref, bool force = false) {
  detail::require_valid(ref.state().get(), "lumen::cancel");
  detail::cancel(*ref.state(), force);
}

/// Inside a task or actor method: true once `lumen::cancel` was called for
/// its ref, the signal to stop early. False anywhere else.
bool cancelled();

/// Stores a value in the object store and returns its ref, like `ray.put`.
/// In one process the value is shared by every reader, not copied.
template <class T>
ObjectRef<std::decay_t<T>> put(T&& value) {
  auto st = detail::make_pooled<detail::value_state<std::decay_t<T>>>();
  st->set_value(std::forward<T>(value));
  return ObjectRef<std::decay_t<T>>{std::move(st)};
}

/// What this process takes part in of refs that crossed processes, as the
/// summary of `ray memory`. Outside a cluster, all zero.
struct ref_stats {
  /// Objects and actors kept alive here because other processes hold refs
  /// or handles this process sent them.
  size_t held = 0;
  /// Refs and actor handles from other processes that are alive here.
  size_t borrowed = 0;
  /// Values other processes fetched from this one, their owner.
  uint64_t served = 0;
  /// Values this process fetched from their owners.
  uint64_t fetched = 0;
};

ref_stats ref_counts();

/// An ObjectRef that your own code fulfils, as std::promise is to
/// std::future: hand out `ref()`, and later call `set_value` or
/// `set_error` once (later calls change nothing). `get`, `wait` and calls
/// taking the ref as an argument treat it like any other. A promise
/// destroyed unfulfilled fails its ref with an `error` saying so, so that
/// nobody waits for it forever. Not copyable; movable.
template <class T>
class promise {
public:
  promise()
    : st_(std::make_shared<detail::value_state<T>>()) {}

  promise(promise&& other) noexcept = default;

  promise& operator=(promise&& other) noexcept {
    if (this != &other) {
      abandon();
      st_ = std::move(other.st_);
    }
    return *this;
  }

  promise(const promise&) = delete;
  promise& operator=(const promise&) = delete;

  ~promise() {
    abandon();
  }

  ObjectRef<T> ref() const {
    return ObjectRef<T>{st_};
  }

  template <class U = T, class = std::enable_if_t<!std::is_void<U>::value>>
  void set_value(U value) {
    st_->set_value(std::move(value));
  }

  template <class U = T, class = std::enable_if_t<std::is_void<U>::value>>
  void set_value() {
    st_->set_value();
  }

  void set_error(std::exception_ptr err) {
    st_->set_error(std::move(err));
  }

private:
  void abandon() noexcept {
    if (st_ && !st_->ready())
      st_->set_error(std::make_exception_ptr(
        error("the lumen::promise behind this ObjectRef was destroyed "
              "before it was fulfilled")));
  }

  std::shared_ptr<detail::value_state<T>> st_;
};

} // namespace lumen
