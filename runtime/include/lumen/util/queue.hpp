#pragma once

// lumen::util::queue<T>: a FIFO queue, bounded or not, that tasks and
// actors share, in one process or across a cluster, as Ray's
// ray.util.queue.Queue. An actor holds the items; a `queue` is a handle to
// it and crosses processes as one (an argument of a task, a member kept by
// an actor).
//
// Waiting is done by the waiter, not by the actor: a `get` on an empty
// queue leaves a ticket, and the actor fulfils it with the next item put;
// a `get` that times out takes its ticket back first, and if an item was
// already on its way, returns it. So a timeout never loses an item, and
// neither does a `put` that times out on a full queue.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>

#include "lumen/actor.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_store.hpp"
#include "lumen/remote.hpp"

namespace lumen::util {

/// `get` found no item within its timeout (Ray's queue.Empty).
class queue_empty : public error {
public:
  explicit queue_empty(const std::string& what)
    : error(what, errc::timeout) {}
};

/// `put` found no room within its timeout (Ray's queue.Full).
class queue_full : public error {
public:
  explicit queue_full(const std::string& what)
    : error(what, errc::timeout) {}
};

namespace detail {

/// The actor behind a queue. Getters and putters that must wait get a
/// ticket and a ref, fulfilled once an item (or room) is there.
template <class T>
class queue_actor {
public:
  explicit queue_actor(uint64_t maxsize)
    : max_(maxsize) {}

  /// {0, the item} or {ticket, a ref the next `give` fulfils}.
  std::pair<uint64_t, ObjectRef<T>> take() {
    if (!items_.empty()) {
      auto item = std::move(items_.front());
      items_.pop_front();
      admit_parked();
      return {0, lumen::put(std::move(item))};
    }
    auto ticket = next_ticket_++;
    getters_.emplace_back(ticket, lumen::promise<T>{});
    return {ticket, getters_.back().second.ref()};
  }

  /// Takes a waiting getter's ticket back: false if an item went to it.
  bool drop_take(uint64_t ticket) {
    return drop(getters_, ticket);
  }

  /// {0, done} or {ticket, a ref fulfilled once the item is in}.
  std::pair<uint64_t, ObjectRef<void>> give(T item) {
    if (!getters_.empty()) {
      auto waiter = std::move(getters_.front().second);
      getters_.pop_front();
      waiter.set_value(std::move(item));
      return {0, done()};
    }
    if (has_room()) {
      items_.push_back(std::move(item));
      return {0, done()};
    }
    auto ticket = next_ticket_++;
    parked_.emplace_back(ticket, parked{std::move(item), {}});
    return {ticket, parked_.back().second.in.ref()};
  }

  /// Takes a waiting putter's item back: false if it is in the queue.
  bool drop_give(uint64_t ticket) {
    return drop(parked_, ticket);
  }

  uint64_t size() const {
    return items_.size();
  }

  uint64_t capacity() const {
    return max_;
  }

  /// {getters waiting for an item, putters waiting for room}.
  std::pair<uint64_t, uint64_t> waiting() const {
    return {getters_.size(), parked_.size()};
  }

private:
  struct parked {
    T item;
    lumen::promise<void> in;
  };

  bool has_room() const {
    return max_ == 0 || items_.size() < max_;
  }

  static ObjectRef<void> done() {
    lumen::promise<void> p;
    p.set_value();
    return p.ref();
  }

  void admit_parked() {
    while (!parked_.empty() && has_room()) {
      items_.push_back(std::move(parked_.front().second.item));
      parked_.front().second.in.set_value();
      parked_.pop_front();
    }
  }

  template <class Waiters>
  static bool drop(Waiters& waiters, uint64_t ticket) {
    for (auto i = waiters.begin(); i != waiters.end(); ++i)
      if (i->first == ticket) {
        waiters.erase(i);
        return true;
      }
    return false;
  }

  uint64_t max_;
  std::deque<T> items_;
  std::deque<std::pair<uint64_t, lumen::promise<T>>> getters_;
  std::deque<std::pair<uint64_t, parked>> parked_;
  uint64_t next_ticket_ = 1;
};

/// Registers queue_actor<T> (and how to build it) in every program that
/// makes or receives a queue<T>.
template <class T>
struct queue_registration {
  static const bool done;
};

template <class T>
const bool queue_registration<T>::done =
  lumen::detail::register_actor<queue_actor<T>>(
    ("lumen::util::queue<" + lumen::detail::demangle(typeid(T).name()) + ">")
      .c_str(),
    "&queue::take, &queue::drop_take, &queue::give, &queue::drop_give, "
    "&queue::size, &queue::capacity, &queue::waiting",
    &queue_actor<T>::take, &queue_actor<T>::drop_take, &queue_actor<T>::give,
    &queue_actor<T>::drop_give, &queue_actor<T>::size,
    &queue_actor<T>::capacity, &queue_actor<T>::waiting) &&
  lumen::detail::constructor_registration<queue_actor<T>, uint64_t>::done;

} // namespace detail

/// A FIFO queue of T shared by tasks and actors (see the top of this file).
/// Copies refer to the same queue, which lives while any handle to it does.
template <class T>
class queue {
public:
  using actor_type = detail::queue_actor<T>;

  /// An empty handle, for a member to be assigned later.
  queue() = default;

  /// A queue of at most `maxsize` items (0: no bound), held by an actor in
  /// this process, or on the node `node_id` if given.
  explicit queue(uint64_t maxsize, const std::string& node_id = {}) {
    static_cast<void>(detail::queue_registration<T>::done);
    auto creator = lumen::actor<actor_type>(maxsize);
    if (!node_id.empty())
      creator.on_node(node_id);
    h_ = creator.remote();
  }

  /// Appends `item`, waiting while the queue is full.
  void put(T item) {
    put(std::move(item), std::chrono::hours(24 * 365 * 100));
  }

  /// Appends `item`, waiting at most `timeout` for room; throws
  /// `queue_full` then, the item not added.
  template <class Rep, class Period>
  void put(T item, std::chrono::duration<Rep, Period> timeout) {
    auto [ticket, in] = lumen::get(h_.call(&actor_type::give, std::move(item)));
    if (ticket == 0)
      return;
    try {
      lumen::get(in, timeout);
    } catch (const get_timeout&) {
      if (lumen::get(h_.call(&actor_type::drop_give, ticket)))
        throw queue_full("lumen::util::queue::put: the queue stayed full "
                         "for the whole timeout; the item was not added");
    }
  }

  /// Appends `item` if there is room now; false otherwise.
  bool try_put(T item) {
    try {
      put(std::move(item), std::chrono::seconds(0));
      return true;
    } catch (const queue_full&) {
      return false;
    }
  }

  /// Removes and returns the first item, waiting while the queue is empty.
  T get() {
    return get(std::chrono::hours(24 * 365 * 100));
  }

  /// Removes and returns the first item, waiting at most `timeout`; throws
  /// `queue_empty` then.
  template <class Rep, class Period>
  T get(std::chrono::duration<Rep, Period> timeout) {
    auto [ticket, item] = lumen::get(h_.call(&actor_type::take));
    if (ticket == 0)
      return lumen::get(item);
    try {
      return lumen::get(item, timeout);
    } catch (const get_timeout&) {
      if (lumen::get(h_.call(&actor_type::drop_take, ticket)))
        throw queue_empty("lumen::util::queue::get: no item came within the "
                          "timeout");
      return lumen::get(item); // one was on its way to us meanwhile
    }
  }

  /// The first item if there is one now.
  std::optional<T> try_get() {
    try {
      return get(std::chrono::seconds(0));
    } catch (const queue_empty&) {
      return std::nullopt;
    }
  }

  /// Items in the queue now.
  uint64_t size() const {
    return lumen::get(h_.call(&actor_type::size));
  }

  bool empty() const {
    return size() == 0;
  }

  /// Gets waiting for an item now: consumers with nothing to do.
  uint64_t waiting_gets() const {
    return lumen::get(h_.call(&actor_type::waiting)).first;
  }

  /// Puts waiting for room now: producers held back by a full queue.
  uint64_t waiting_puts() const {
    return lumen::get(h_.call(&actor_type::waiting)).second;
  }

  /// True if bounded and at its bound.
  bool full() const {
    auto cap = lumen::get(h_.call(&actor_type::capacity));
    return cap != 0 && size() >= cap;
  }

  /// The actor holding the items.
  const ActorHandle<actor_type>& actor() const noexcept {
    return h_;
  }

  bool valid() const noexcept {
    return h_.valid();
  }

private:
  template <class U>
  friend void inspect(lumen::detail::writer& f, queue<U>& x);
  template <class U>
  friend void inspect(lumen::detail::reader& f, queue<U>& x);

  ActorHandle<actor_type> h_;
};

/// A queue crosses processes as the handle of its actor.
template <class T>
void inspect(lumen::detail::writer& f, queue<T>& x) {
  f(x.h_);
}

template <class T>
void inspect(lumen::detail::reader& f, queue<T>& x) {
  static_cast<void>(detail::queue_registration<T>::done);
  f(x.h_);
}

} // namespace lumen::util
