#pragma once

// The machinery behind lumen/caf_interop.hpp: running CAF requests on the
// runtime's requester actor, failing them when a remote receiver dies, and
// publishing their responses into ObjectRefs.

#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/type_list.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

#include "lumen/detail/object_state.hpp"

namespace lumen {

namespace detail {

/// Runs `job` on the runtime's requester, an event-based actor, so that CAF
/// requests need no blocking `scoped_actor`.
void run_as_requester(std::function<void(caf::event_based_actor*)> job);

/// Ends `h` when the runtime shuts down.
void adopt(caf::actor h);

/// A change to the actor system's configuration, made before it starts.
using config_step = std::function<void(caf::actor_system_config&)>;

/// Records `step` for every actor system Lumen starts in this process.
bool add_config_step(config_step step);

template <class F>
bool register_typed_actor(const char* name, F fn) {
  return add_config_step(
    [name = std::string{name}, fn](caf::actor_system_config& cfg) {
      cfg.add_actor_type(name, fn);
    });
}

/// What an argument of lumen::call travels as: its value, and a C string
/// as the std::string that handlers take.
template <class T>
using message_arg_t =
  std::conditional_t<std::is_convertible<std::decay_t<T>, const char*>::value,
                     std::string, std::decay_t<T>>;

template <class T>
bool register_message_type(const char* name) {
  return add_config_step(
    [name = std::string{name}](caf::actor_system_config& cfg) {
      cfg.add_message_type<T>(name);
    });
}

/// Spawns the typed actor registered as `name` on cluster node `node_id`
/// through its node manager (which checks the cluster token, unlike CAF's
/// own spawn service), checking it implements `interface`. Throws
/// `usage_error` saying why it could not.
caf::strong_actor_ptr spawn_typed_on(const std::string& node_id,
                                     const std::string& name, caf::message args,
                                     const std::set<std::string>& interface);

/// On the requester's thread: runs `fail` if `whom` goes down first, since
/// CAF would leave a request to a dead remote actor open until its timeout.
/// Returns a token for `unwatch`.
uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
               std::function<void()> fail);

/// On the requester's thread: the request answered; forget its `fail`.
void unwatch(const caf::actor_addr& whom, uint64_t token);

/// Runs once a request sent on the data plane is answered, on a
/// connection's reader thread: `routed` with the response (a `caf::error`
/// alone for a failure), or not `routed`, the peer unable to load the
/// message (it holds actor handles): send it through CAF.
using typed_done = std::function<void(bool routed, caf::message& reply)>;

/// Sends `msg` from `sender` (an actor id, 0 for none) to `target` on the
/// data plane if `target` lives in another cluster process this one can
/// reach there (in a simulated run, across the simulated link to its
/// node); false, running nothing, if not: send it through CAF. A message
/// that `carries_handles` (it or its response holds an actor handle, which
/// only CAF's middleman loads in another process) goes through CAF from a
/// cluster process.
bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, bool carries_handles, typed_done done);

/// The Lumen error for a failed CAF request to the actor `where`:
/// `actor_died` if the receiver is gone, `typed_actor_error` (the error,
/// its description, the receiver's node) otherwise.
std::exception_ptr from_caf_error(const caf::error& err,
                                  const caf::actor_addr& where);

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
  explicit open_request(std::shared_ptr<value_state<R>> x)
    : st(std::move(x)) {}

  std::shared_ptr<value_state<R>> st;
  caf::actor_addr where;   // the receiver
  caf::actor_addr watched; // set for a remote receiver
  uint64_t token = 0;

  ~open_request() {
    if (!st->ready())
      st->set_error(request_dropped());
  }

  /// The response (or error) arrived: stop watching the receiver.
  void settle() {
    if (token != 0)
      unwatch(watched, token);
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
    req->settle();
    req->st->set_value();
  }
};

template <class R, class... Ts>
struct response_sink<R, caf::detail::type_list<Ts...>> {
  std::shared_ptr<open_request<R>> req;
  void operator()(Ts&... xs) {
    req->settle();
    auto& st = req->st;
    if constexpr (sizeof...(Ts) == 0)
      st->set_value();
    else if constexpr (sizeof...(Ts) == 1)
      st->set_value(std::move(xs)...);
    else
      st->set_value(R{std::move(xs)...});
  }
};

template <class Outs>
struct elements_of;

template <class... Ts>
struct elements_of<caf::detail::type_list<Ts...>> {
  using type = caf::detail::type_list<Ts...>;
};

template <>
struct elements_of<caf::detail::type_list<void>> {
  using type = caf::detail::type_list<>;
};

template <class Sink, class... Ts, size_t... Is>
void apply_elements(Sink& sink, caf::message& m, caf::detail::type_list<Ts...>,
                    std::index_sequence<Is...>) {
  if (!m.match_elements<Ts...>()) {
    sink.req->settle();
    sink.req->st->set_error(from_caf_error(
      caf::make_error(
        caf::sec::unexpected_response,
        "the typed actor answered with other types than its interface says"),
      sink.req->where));
    return;
  }
  sink(m.get_mutable_as<Ts>(Is)...);
}

/// Publishes a response that came on the data plane, as `response_sink`
/// does one CAF delivers.
template <class R, class Outs>
void publish_response(const std::shared_ptr<open_request<R>>& req,
                      caf::message& m) {
  if (m.match_elements<caf::error>()) {
    req->settle();
    req->st->set_error(from_caf_error(m.get_as<caf::error>(0), req->where));
    return;
  }
  using elems = typename elements_of<Outs>::type;
  response_sink<R, Outs> sink{req};
  apply_elements(
    sink, m, elems{},
    std::make_index_sequence<caf::detail::tl_size<elems>::value>{});
}

} // namespace detail

} // namespace lumen
