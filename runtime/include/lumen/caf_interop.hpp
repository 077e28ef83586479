#pragma once

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/is_typed_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/make_message.hpp>
#include <caf/response_type.hpp>
#include <caf/typed_actor.hpp>

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

/// For an `inspect` loading a byte block of a typed actor's message that
/// came from another process: the next `size` bytes `source` reads, in
/// place in the received frame (or where the caller's lumen::reply_landing
/// put them), which `owner` then keeps alive; `source` moves past them. Null,
/// with nothing read, when the message is not being loaded from a frame, the
/// frame holds fewer bytes, or they do not start at a multiple of `alignment`:
/// load the block as usual then. A large tensor read this way costs no copy
/// (lumen::ml's tensor does).
const char* view_received_bytes(caf::deserializer& source, size_t size,
                                size_t alignment,
                                std::shared_ptr<const void>& owner);

/// The CAF actor system of this process's runtime; valid between
/// `lumen::init` and `lumen::shutdown`.
caf::actor_system& system();

/// An error response of a typed CAF actor, as `lumen::get` throws it: a
/// `task_error` that keeps the actor's own `caf::error`, so that callers
/// branch on its code and category, not on its text. `node()` is the node
/// the actor runs on. Its `code()` is `errc::task_failed` whatever the
/// actor's reason: `errc` is the runtime's word for where a call failed,
/// while an actor's reasons are its own, told by its error category and
/// code (`cause()`), which its library reads for you (for a parameter
/// server, `lumen::ml::refusal_of`).
class typed_actor_error : public task_error {
public:
  /// `what` says what the actor on `node` answered, whole.
  typed_actor_error(caf::error cause, std::string what, std::string node);

  /// The error the actor answered with.
  const caf::error& cause() const noexcept {
    return cause_;
  }

private:
  caf::error cause_;
};

/// How the errors of an actor's own category read in a `typed_actor_error`:
/// "<who> on <node> <what>", `who` naming the actor ("parameter server")
/// and `what(code, context)` saying what it answered ("refused a gradient
/// ..."). Without one, the error reads as CAF renders it. Call it at static
/// initialization (`static const bool x = describe_errors(...)`).
bool describe_errors(
  caf::atom_value category, std::string who,
  std::function<std::string(uint8_t code, const caf::message& context)> what);

/// True for a type that is or holds a CAF actor handle. A request or a
/// response with one goes through CAF's middleman, which alone can load a
/// handle to an actor of a third process; the rest goes on the data plane.
/// Specialize it (as std::true_type) for a message type of your own whose
/// `inspect` has a handle inside.
template <class T>
struct carries_actor_handle : std::false_type {};

template <>
struct carries_actor_handle<caf::actor> : std::true_type {};
template <>
struct carries_actor_handle<caf::actor_addr> : std::true_type {};
template <>
struct carries_actor_handle<caf::strong_actor_ptr> : std::true_type {};
template <>
struct carries_actor_handle<caf::message> : std::true_type {};
template <class... Sigs>
struct carries_actor_handle<caf::typed_actor<Sigs...>> : std::true_type {};
template <class T, class A>
struct carries_actor_handle<std::vector<T, A>> : carries_actor_handle<T> {};
template <class T>
struct carries_actor_handle<std::optional<T>> : carries_actor_handle<T> {};
template <class K, class V, class C, class A>
struct carries_actor_handle<std::map<K, V, C, A>>
  : std::bool_constant<carries_actor_handle<K>::value ||
                       carries_actor_handle<V>::value> {};
template <class T, class U>
struct carries_actor_handle<std::pair<T, U>>
  : std::bool_constant<carries_actor_handle<T>::value ||
                       carries_actor_handle<U>::value> {};
template <class... Ts>
struct carries_actor_handle<std::tuple<Ts...>>
  : std::bool_constant<(carries_actor_handle<Ts>::value || ...)> {};

namespace detail {

template <class Outs, class... Args>
struct plane_safe;

template <class... Outs, class... Args>
struct plane_safe<caf::detail::type_list<Outs...>, Args...>
  : std::bool_constant<!((carries_actor_handle<Outs>::value || ...) ||
                         (carries_actor_handle<Args>::value || ...))> {};

/// Sends `msg` to `to` from the runtime's requester, failing the request
/// if `to`'s node goes down first.
template <class R, class Outs>
void request_through_caf(std::shared_ptr<open_request<R>> req, caf::actor to,
                         caf::message msg) {
  run_as_requester([req, to, msg](caf::event_based_actor* self) mutable {
    if (to->node() != self->node()) {
      req->watched = to.address();
      // Weak: the watch must not keep the request open.
      std::weak_ptr<open_request<R>> weak = req;
      req->token = watch(self, to, [weak] {
        if (auto r = weak.lock())
          r->st->set_error(std::make_exception_ptr(
            actor_died("the typed actor's node went down")));
      });
    }
    self->request(to, caf::infinite, std::move(msg))
      .then(response_sink<R, Outs>{req}, [req](caf::error& e) {
        req->settle();
        req->st->set_error(from_caf_error(e, req->where));
      });
  });
}

} // namespace detail

namespace detail {

/// lumen::call once the interface is known to take `Ts`.
template <class Handle, class... Ts>
auto call_handled(const Handle& h, Ts&&... xs) {
  using rt = caf::response_type<typename Handle::signatures,
                                detail::message_arg_t<Ts>...>;
  using outs = typename rt::type;
  using R = typename detail::result_of<outs>::type;
  auto st = std::make_shared<detail::value_state<R>>();
  auto req = std::make_shared<detail::open_request<R>>(st);
  auto msg =
    caf::make_message(detail::message_arg_t<Ts>(std::forward<Ts>(xs))...);
  auto to = caf::actor_cast<caf::actor>(h);
  if (to)
    req->where = to.address();
  constexpr bool handles =
    !detail::plane_safe<outs, detail::message_arg_t<Ts>...>::value;
  if (h &&
      detail::send_typed(caf::actor_cast<caf::strong_actor_ptr>(h), 0, msg,
                         handles, [req, to, msg](bool routed, caf::message& m) {
                           if (routed)
                             detail::publish_response<R, outs>(req, m);
                           else
                             detail::request_through_caf<R, outs>(req, to, msg);
                         }))
    return ObjectRef<R>{std::move(st)};
  detail::request_through_caf<R, outs>(std::move(req), std::move(to),
                                       std::move(msg));
  return ObjectRef<R>{std::move(st)};
}

} // namespace detail

/// Sends a request to a typed CAF actor and returns a ref to the response,
/// so that `lumen::get` / `lumen::wait` serve CAF actors as they serve Lumen
/// actors. String literals go as std::string. An error response makes `get`
/// throw `typed_actor_error`; a receiver that is gone, `actor_died`. A
/// receiver in another cluster process gets the request on the data plane
/// unless it carries actor handles (carries_actor_handle); one on another
/// node of a simulated cluster (lumen/sim.hpp), across the simulated link.
template <class Handle, class... Ts>
auto call(const Handle& h, Ts&&... xs) {
  static_assert(caf::is_typed_actor<Handle>::value,
                "lumen::call takes a typed CAF actor handle");
  using rt = caf::response_type<typename Handle::signatures,
                                detail::message_arg_t<Ts>...>;
  if constexpr (rt::valid) {
    return detail::call_handled(h, std::forward<Ts>(xs)...);
  } else {
    // One error and nothing after it: the rest of the call is not
    // instantiated, and the ref stands in for the result at the call site.
    static_assert(rt::valid,
                  "lumen::call: the actor's interface has no handler for "
                  "these argument types. Its handlers are the replies_to<...> "
                  "lines of its caf::typed_actor<...> declaration; pass "
                  "arguments of exactly those types (a literal as the type "
                  "the handler names, e.g. a std::vector<float> converted "
                  "to the tensor type it takes)");
    return ObjectRef<void>{};
  }
}

/// `self->request(h, timeout, xs...)` for an actor's own requests: the
/// same response handle, whose `.then` handlers get the response as CAF
/// delivers it, but for a receiver in another cluster process the request
/// goes on the data plane unless it carries actor handles
/// (carries_actor_handle). The receiver sees one requester per actor.
template <class Self, class Handle, class... Ts>
auto request(Self* self, const Handle& h, const caf::duration& timeout,
             Ts&&... xs)
  -> decltype(self->request(h, timeout, std::forward<Ts>(xs)...)) {
  using handle = decltype(self->request(h, timeout, std::forward<Ts>(xs)...));
  using rt = caf::response_type<typename Handle::signatures,
                                detail::message_arg_t<Ts>...>;
  if (!h)
    return self->request(h, timeout, std::forward<Ts>(xs)...);
  auto id = self->new_request_id(caf::message_priority::normal);
  auto msg =
    caf::make_message(detail::message_arg_t<Ts>(std::forward<Ts>(xs))...);
  auto to = caf::actor_cast<caf::strong_actor_ptr>(h);
  constexpr bool handles =
    !detail::plane_safe<typename rt::type, detail::message_arg_t<Ts>...>::value;
  auto me = caf::actor_cast<caf::strong_actor_ptr>(self);
  bool sent = detail::send_typed(
    to, self->id(), msg, handles,
    [me, to, id, msg](bool routed, caf::message& m) {
      if (routed)
        me->enqueue(caf::make_mailbox_element(nullptr, id.response_id(), {},
                                              std::move(m)),
                    nullptr);
      else
        to->enqueue(caf::make_mailbox_element(me, id, {}, msg), nullptr);
    });
  if (!sent)
    to->enqueue(caf::make_mailbox_element(self->ctrl(), id, {}, std::move(msg)),
                self->context());
  self->request_response_timeout(timeout, id);
  return handle{id.response_id(), self};
}

/// While one lives on a thread, the large messages (1 MiB and more) the
/// thread sends to processes on other hosts, typed requests (`call`,
/// `request`) and the answers it delivers, are written by their
/// connections' writer threads, all at once, instead of one after another
/// before each send returns. Without it, a message to one peer goes out at
/// the link's full rate before the next starts, which is best when this
/// host's link is the bottleneck (a server answering its workers: the
/// first answered pushes again while the others' answers go out). With
/// it, no receiver whose own link is busy holds up the others (a
/// gradient's parts to the shards of a server on the workers' hosts, and
/// their answers). Either way a sender's messages to an actor arrive in
/// order; a message must not change once sent, as any CAF message.
class sends_at_once {
public:
  sends_at_once() noexcept;
  ~sends_at_once();
  sends_at_once(const sends_at_once&) = delete;
  sends_at_once& operator=(const sends_at_once&) = delete;
};

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
