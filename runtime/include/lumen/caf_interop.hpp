#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/is_typed_actor.hpp>
#include <caf/response_type.hpp>

#include "lumen/object_ref.hpp"

namespace lumen {

/// The CAF actor system of this process's runtime; valid between
/// `lumen::init` and `lumen::shutdown`.
caf::actor_system& system();

namespace detail {

/// Runs `job` on the runtime's requester, an event-based actor, so that CAF
/// requests need no blocking `scoped_actor`.
void run_as_requester(std::function<void(caf::event_based_actor*)> job);

/// Ends `h` when the runtime shuts down.
void adopt(caf::actor h);

/// The Lumen error for a failed CAF request: `actor_died` if the receiver
/// is gone, `task_error` with CAF's rendering otherwise.
std::exception_ptr from_caf_error(const caf::error& err);

/// The error for a request dropped unanswered at shutdown.
std::exception_ptr request_dropped();

template <class Outs>
struct result_of;

template <>
struct result_of<caf::detail::type_list<>> {
  using type = void;
};

// reacts_to<...> handlers answer with an empty response.
template <>
struct result_of<caf::detail::type_list<void>> {
  using type = void;
};

template <class T>
struct result_of<caf::detail::type_list<T>> {
  using type = T;
};

template <class T, class U, class... Ts>
struct result_of<caf::detail::type_list<T, U, Ts...>> {
  using type = std::tuple<T, U, Ts...>;
};

/// Fails the object if nothing answered before the request was dropped
/// (the requester stopped at shutdown), so that no `get` waits forever.
template <class R>
struct open_request {
  std::shared_ptr<value_state<R>> st;
  ~open_request() {
    if (!st->ready())
      st->set_error(request_dropped());
  }
};

/// Publishes a CAF response into an object; CAF matches response handlers
/// by signature, hence a functor with exactly the response types.
template <class R, class Outs>
struct response_sink;

template <>
struct response_sink<void, caf::detail::type_list<void>> {
  std::shared_ptr<open_request<void>> req;
  void operator()() {
    req->st->set_value();
  }
};

template <class R, class... Ts>
struct response_sink<R, caf::detail::type_list<Ts...>> {
  std::shared_ptr<open_request<R>> req;
  void operator()(Ts&... xs) {
    auto& st = req->st;
    if constexpr (sizeof...(Ts) == 0)
      st->set_value();
    else if constexpr (sizeof...(Ts) == 1)
      st->set_value(std::move(xs)...);
    else
      st->set_value(R{std::move(xs)...});
  }
};

} // namespace detail

/// Sends a request to a typed CAF actor and returns a ref to the response,
/// so that `lumen::get` / `lumen::wait` serve CAF actors as they serve Lumen
/// actors. An error response makes `get` throw `task_error`; a receiver that
/// is gone, `actor_died`.
template <class Handle, class... Ts>
auto call(const Handle& h, Ts&&... xs) {
  static_assert(caf::is_typed_actor<Handle>::value,
                "lumen::call takes a typed CAF actor handle");
  using rt = caf::response_type<typename Handle::signatures, std::decay_t<Ts>...>;
  static_assert(rt::valid, "lumen::call: the actor's interface has no "
                           "handler for these argument types");
  using outs = typename rt::type;
  using R = typename detail::result_of<outs>::type;
  auto st = std::make_shared<detail::value_state<R>>();
  // Built in place: a temporary would fail the object as it is destroyed.
  std::shared_ptr<detail::open_request<R>> req{
    new detail::open_request<R>{st}};
  detail::run_as_requester(
    [req, h, args = std::make_tuple(std::decay_t<Ts>(std::forward<Ts>(xs))...)](
      caf::event_based_actor* self) mutable {
      std::apply(
        [&](auto&... ys) {
          self->request(h, caf::infinite, std::move(ys)...)
            .then(detail::response_sink<R, outs>{req}, [req](caf::error& e) {
              req->st->set_error(detail::from_caf_error(e));
            });
        },
        args);
    });
  return ObjectRef<R>{std::move(st)};
}

/// Spawns a CAF actor in the runtime's actor system and ends it at
/// `lumen::shutdown`, like `system().spawn(...)` otherwise.
template <class... Ts>
auto spawn(Ts&&... xs) {
  auto h = system().spawn(std::forward<Ts>(xs)...);
  detail::adopt(caf::actor_cast<caf::actor>(h));
  return h;
}

} // namespace lumen
