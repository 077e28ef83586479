#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/is_typed_actor.hpp>
#include <caf/make_message.hpp>
#include <caf/response_type.hpp>

#include "lumen/detail/caf_request.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_ref.hpp"
#include "lumen/remote.hpp"

/// Registers a typed CAF actor's behaviour under a name, so that any node
/// whose code has it can spawn it: LUMEN_TYPED_ACTOR("calculator", calc).
/// Every process needs the same registrations (CAF's add_actor_type).
#define LUMEN_TYPED_ACTOR(name, fn)                                            \
  static const bool LUMEN_PP_CAT(lumen_typed_registered_, __COUNTER__) =       \
    ::lumen::detail::register_typed_actor(name, fn)

/// Announces a type that typed actors' messages carry between processes,
/// under a name every process uses for it (CAF's add_message_type): the
/// type needs CAF's `inspect`; a message holding a type no process
/// announced cannot leave its process. LUMEN_MESSAGE_TYPE(my::point,
/// "my::point").
#define LUMEN_MESSAGE_TYPE(type, name)                                         \
  static const bool LUMEN_PP_CAT(lumen_message_type_, __COUNTER__) =           \
    ::lumen::detail::register_message_type<type>(name)

namespace lumen {

/// Applies every LUMEN_TYPED_ACTOR and LUMEN_MESSAGE_TYPE registration of
/// this program to `cfg`, for an actor system of your own: CAF's
/// deterministic test coordinator (`scheduler.policy` = `testing`), say,
/// where a test delivers messages one by one in the order it chooses.
void add_registrations(caf::actor_system_config& cfg);

/// The CAF actor system of this process's runtime; valid between
/// `lumen::init` and `lumen::shutdown`.
caf::actor_system& system();

/// An error response of a typed CAF actor, as `lumen::get` throws it: a
/// `task_error` that keeps the actor's own `caf::error`, so that callers
/// branch on its code and category, not on its text.
class typed_actor_error : public task_error {
public:
  typed_actor_error(caf::error cause, std::string text, std::string node);

  /// The error the actor answered with.
  const caf::error& cause() const noexcept {
    return cause_;
  }

private:
  caf::error cause_;
};

/// Sends a request to a typed CAF actor and returns a ref to the response,
/// so that `lumen::get` / `lumen::wait` serve CAF actors as they serve Lumen
/// actors. String literals go as std::string. An error response makes `get`
/// throw `task_error`; a receiver that is gone, `actor_died`.
template <class Handle, class... Ts>
auto call(const Handle& h, Ts&&... xs) {
  static_assert(caf::is_typed_actor<Handle>::value,
                "lumen::call takes a typed CAF actor handle");
  using rt = caf::response_type<typename Handle::signatures,
                                detail::message_arg_t<Ts>...>;
  static_assert(rt::valid, "lumen::call: the actor's interface has no "
                           "handler for these argument types");
  using outs = typename rt::type;
  using R = typename detail::result_of<outs>::type;
  auto st = std::make_shared<detail::value_state<R>>();
  auto req = std::make_shared<detail::open_request<R>>(st);
  detail::run_as_requester([req, h,
                            args = std::make_tuple(detail::message_arg_t<Ts>(
                              std::forward<Ts>(xs))...)](
                             caf::event_based_actor* self) mutable {
    if (h->node() != self->node()) {
      req->watched = h.address();
      // Weak: the watch must not keep the request open.
      std::weak_ptr<detail::open_request<R>> weak = req;
      req->token = detail::watch(self, caf::actor_cast<caf::actor>(h), [weak] {
        if (auto r = weak.lock())
          r->st->set_error(
            std::make_exception_ptr(actor_died("the typed actor's node "
                                               "went down")));
      });
    }
    std::apply(
      [&](auto&... ys) {
        self->request(h, caf::infinite, std::move(ys)...)
          .then(detail::response_sink<R, outs>{req}, [req](caf::error& e) {
            req->settle();
            req->st->set_error(detail::from_caf_error(e));
          });
      },
      args);
  });
  return ObjectRef<R>{std::move(st)};
}

/// Spawns the typed actor registered as `name` (LUMEN_TYPED_ACTOR) on the
/// cluster node `node_id` (this process for `lumen::this_node_id()`), with
/// constructor arguments `xs`. It is ended at `lumen::shutdown`. Throws
/// `usage_error` saying why if the node cannot.
template <class Handle, class... Ts>
Handle spawn_on(const std::string& node_id, const std::string& name,
                Ts&&... xs) {
  auto h = caf::actor_cast<Handle>(detail::spawn_typed_on(
    node_id, name, caf::make_message(std::forward<Ts>(xs)...),
    system().message_types<Handle>()));
  detail::adopt(caf::actor_cast<caf::actor>(h));
  return h;
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
