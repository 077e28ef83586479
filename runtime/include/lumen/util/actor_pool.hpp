#pragma once

// lumen::util::actor_pool: work spread over a fixed set of actors, as Ray's
// ray.util.ActorPool. It lives in the process that made it (it is no
// actor): submit values, and read results in submission order or as they
// come.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lumen/actor.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_store.hpp"

namespace lumen::util {

/// Runs submitted work on whichever of its actors is free; R is what one
/// piece of work returns. Not thread-safe: one thread uses a pool.
template <class C, class R>
class actor_pool {
  static_assert(!std::is_void<R>::value,
                "lumen::util::actor_pool<C, R>: R is what one piece of work "
                "returns, and cannot be void");

public:
  using handle = ActorHandle<C>;
  using clock = std::chrono::steady_clock;

  /// Throws `usage_error` for an empty list or an empty handle.
  explicit actor_pool(std::vector<handle> actors)
    : idle_(actors.begin(), actors.end()) {
    if (idle_.empty())
      throw usage_error("lumen::util::actor_pool: give it at least one actor");
    for (auto& a : idle_)
      if (!a.valid())
        throw usage_error("lumen::util::actor_pool: an ActorHandle in the "
                          "list is empty");
  }

  /// Queues `fn(actor, value)`, which must call the actor and return the
  /// ObjectRef<R> of that call; it starts as soon as an actor is free.
  template <class F, class V>
  void submit(F fn, V value) {
    pending_.push_back(
      {submitted_++,
       [fn = std::move(fn), value = std::move(value)](
         const handle& a) -> ObjectRef<R> { return fn(a, value); }});
    dispatch();
  }

  /// True while a submitted result has not been returned yet.
  bool has_next() const noexcept {
    return returned_ < submitted_;
  }

  /// The result of the earliest submission not returned yet, waiting for
  /// it; rethrows its error. Throws `get_timeout` after `timeout` (the
  /// result stays for a later call) and `usage_error` if nothing is left.
  template <class Rep = int64_t, class Period = std::ratio<1>>
  R get_next(std::chrono::duration<Rep, Period> timeout =
               std::chrono::duration<Rep, Period>::max()) {
    require_next("get_next");
    auto index = first_unreturned();
    await(
      [&] {
        auto i = started_.find(index);
        return i != started_.end() && i->second.ref.ready();
      },
      timeout);
    return take(index);
  }

  /// The result of whichever submission finishes first; as `get_next`
  /// otherwise.
  template <class Rep = int64_t, class Period = std::ratio<1>>
  R get_next_unordered(std::chrono::duration<Rep, Period> timeout =
                         std::chrono::duration<Rep, Period>::max()) {
    require_next("get_next_unordered");
    std::optional<uint64_t> found;
    auto any_ready = [&] {
      for (auto& [index, job] : started_)
        if (job.ref.ready()) {
          found = index;
          return true;
        }
      return false;
    };
    await(any_ready, timeout);
    return take(*found);
  }

  /// Applies `fn` to every value and returns the results in the order of
  /// `values`, keeping every actor busy meanwhile. Throws `usage_error`
  /// while results of earlier submissions wait to be read.
  template <class F, class V>
  std::vector<R> map(F fn, const std::vector<V>& values) {
    require_drained("map");
    for (auto& v : values)
      submit(fn, v);
    std::vector<R> out;
    out.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      out.push_back(get_next());
    return out;
  }

  /// Like `map`, in the order results arrive.
  template <class F, class V>
  std::vector<R> map_unordered(F fn, const std::vector<V>& values) {
    require_drained("map_unordered");
    for (auto& v : values)
      submit(fn, v);
    std::vector<R> out;
    out.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      out.push_back(get_next_unordered());
    return out;
  }

  /// Whether an actor is free now.
  bool has_free() {
    dispatch();
    return !idle_.empty();
  }

  /// Adds an actor to the pool.
  void push(handle a) {
    idle_.push_back(std::move(a));
    dispatch();
  }

  /// Takes a free actor out of the pool, if one is.
  std::optional<handle> pop_idle() {
    dispatch();
    if (idle_.empty())
      return std::nullopt;
    auto a = std::move(idle_.back());
    idle_.pop_back();
    return a;
  }

private:
  struct queued {
    uint64_t index;
    std::function<ObjectRef<R>(const handle&)> start;
  };
  struct running {
    ObjectRef<R> ref;
    std::optional<handle> actor; // given back to idle_ once ref is ready
  };

  void require_next(const char* api) const {
    if (!has_next())
      throw usage_error(std::string{"lumen::util::actor_pool::"} + api +
                        ": nothing was submitted that is not returned yet");
  }

  void require_drained(const char* api) const {
    if (has_next())
      throw usage_error(std::string{"lumen::util::actor_pool::"} + api +
                        ": results of earlier submissions are still unread; "
                        "read them with get_next first");
  }

  uint64_t first_unreturned() const {
    uint64_t first = submitted_;
    if (!pending_.empty())
      first = pending_.front().index;
    if (!started_.empty())
      first = std::min(first, started_.begin()->first);
    return first;
  }

  /// Frees the actors whose work is done and starts queued work on them.
  void dispatch() {
    for (auto& [index, job] : started_)
      if (job.actor && job.ref.ready()) {
        idle_.push_back(std::move(*job.actor));
        job.actor.reset();
      }
    // The free actor that waited longest goes first, so that work goes
    // round the pool even when each call ends before the next is sent.
    while (!idle_.empty() && !pending_.empty()) {
      auto a = std::move(idle_.front());
      idle_.pop_front();
      auto q = std::move(pending_.front());
      pending_.pop_front();
      ObjectRef<R> ref;
      try {
        ref = q.start(a);
      } catch (...) {
        // The submission failed to start (a usage error, a dead actor's
        // handle): its result is that error, and the actor stays free.
        lumen::promise<R> failed;
        failed.set_error(std::current_exception());
        ref = failed.ref();
      }
      started_.emplace(q.index, running{std::move(ref), std::move(a)});
    }
  }

  /// Keeps the actors busy until `done()`; throws `get_timeout` after
  /// `timeout`.
  template <class Done, class Rep, class Period>
  void await(Done done, std::chrono::duration<Rep, Period> timeout) {
    auto deadline = lumen::detail::deadline_after(timeout);
    for (;;) {
      dispatch();
      // The running work first, then `done()`: work that ends between the
      // two is still in `busy` (the wait returns at once), where the other
      // order saw nothing running and nothing done, and gave up.
      std::vector<ObjectRef<R>> busy;
      for (auto& [index, job] : started_)
        if (!job.ref.ready())
          busy.push_back(job.ref);
      if (done())
        return;
      auto now = clock::now();
      if (busy.empty() || now >= deadline)
        throw get_timeout("lumen::util::actor_pool: no result was ready "
                          "within the timeout; the work goes on, ask again");
      lumen::wait(busy, 1, deadline - now);
    }
  }

  R take(uint64_t index) {
    auto job = std::move(started_.at(index));
    started_.erase(index);
    if (job.actor)
      idle_.push_back(std::move(*job.actor));
    ++returned_;
    dispatch();
    return lumen::get(job.ref);
  }

  std::deque<handle> idle_;
  std::deque<queued> pending_;
  std::map<uint64_t, running> started_;
  uint64_t submitted_ = 0;
  uint64_t returned_ = 0;
};

} // namespace lumen::util
