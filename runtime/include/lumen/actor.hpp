#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "lumen/detail/actor_impl.hpp"
#include "lumen/detail/arguments.hpp"
#include "lumen/detail/registry.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/detail/small_pool.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_ref.hpp"
#include "lumen/placement_group.hpp"

namespace lumen {

namespace detail {

/// Throws `usage_error` naming the method that LUMEN_ACTOR lacks.
[[noreturn]] void throw_unregistered_method(const actor_class_entry& cls);

/// Throws `usage_error`: the class was not registered with LUMEN_ACTOR.
[[noreturn]] void throw_unregistered_class(const std::type_info& type);

/// Throws `usage_error`: a call through an empty ActorHandle.
[[noreturn]] void throw_empty_handle();

} // namespace detail

/// A reference to a running actor, like Ray's ActorHandle; copies refer to
/// the same actor. An unnamed actor stops once its last handle is gone and
/// its queued calls ran; a named one lives until `kill` or `shutdown`.
template <class C>
class ActorHandle {
public:
  ActorHandle() = default;

  explicit ActorHandle(std::shared_ptr<detail::actor_ref> ref)
    : ref_(std::move(ref)) {}

  /// Calls `method` on the actor with `xs` and returns a ref to its result.
  /// One caller's calls run one at a time, in the order they were made.
  template <class R, class... Ps, class... As>
  ObjectRef<std::decay_t<R>> call(R (C::*method)(Ps...), As&&... xs) const {
    return submit<R, detail::param_list<Ps...>>(method,
                                                std::forward<As>(xs)...);
  }

  template <class R, class... Ps, class... As>
  ObjectRef<std::decay_t<R>> call(R (C::*method)(Ps...) const,
                                  As&&... xs) const {
    return submit<R, detail::param_list<Ps...>>(method,
                                                std::forward<As>(xs)...);
  }

  bool valid() const noexcept {
    return ref_ != nullptr;
  }

  /// The name given with `with_name`, or an empty string.
  const std::string& name() const {
    return detail::name_of(checked());
  }

  /// The actor's id in the cluster, as Ray's actor id: the same in every
  /// process holding a handle to it, and what `lumen::current_actor_id()`
  /// returns in its methods. It stays across restarts in its process; an
  /// actor rebuilt on another node, after its node died, has a new one.
  std::string id() const {
    return detail::id_of(checked());
  }

  /// How often the actor was rebuilt after dying.
  int num_restarts() const {
    return detail::restarts_of(checked());
  }

  /// False once the actor is dead for good (killed, out of restarts).
  bool alive() const {
    return detail::alive(checked());
  }

  const std::shared_ptr<detail::actor_ref>& ref() const noexcept {
    return ref_;
  }

private:
  const detail::actor_ref& checked() const {
    if (!ref_)
      detail::throw_empty_handle();
    return *ref_;
  }

  template <class R, class Params, class M, class... As>
  ObjectRef<std::decay_t<R>> submit(M method, As&&... xs) const {
    using result_t = std::decay_t<R>;
    static_assert(std::is_void<result_t>::value ||
                    detail::is_serializable_v<result_t>,
                  "lumen: the return type of an actor method is not "
                  "serializable. Use arithmetic types, std::string, standard "
                  "containers of them, or give the type a CAF inspect() "
                  "overload");
    using args_t = detail::arguments<Params, As...>;
    auto& ref = checked();
    auto& cls = detail::class_of(ref);
    auto entry = cls.find(detail::key_of(method), typeid(M));
    if (entry == nullptr)
      detail::throw_unregistered_method(cls);
    auto st = detail::make_pooled<detail::value_state<result_t>>();
    auto c =
      detail::make_pooled<detail::actor_call_impl<C, result_t, M, args_t>>(
        st, *entry, args_t{std::forward<As>(xs)...});
    detail::current_runtime().submit_call(ref, std::move(c));
    return ObjectRef<result_t>{std::move(st)};
  }

  std::shared_ptr<detail::actor_ref> ref_;
};

namespace detail {

/// Throws `codec_error`: a handle to an actor of class `sent` arrived for a
/// parameter that wants `wanted`.
[[noreturn]] void throw_wrong_handle_class(const std::string& sent,
                                           const std::type_info& wanted);

} // namespace detail

/// An ActorHandle crosses processes as the place of its actor; the actor
/// stays alive while any process holds a handle (see object_exchange.hpp).
template <class C>
void inspect(detail::writer& f, ActorHandle<C>& x) {
  if (!x.valid())
    detail::throw_empty_handle();
  auto w = detail::export_actor(x.ref());
  f(w.cls, w.name, w.id, w.node, w.host, w.remote_id, w.holder, w.hold);
}

template <class C>
void inspect(detail::reader& f, ActorHandle<C>& x) {
  detail::actor_wire w;
  f(w.cls, w.name, w.id, w.node, w.host, w.remote_id, w.holder, w.hold);
  // Taken in before the check, so that a refused handle's count goes back.
  auto ref = detail::import_actor(w);
  auto cls = detail::find_actor_class(typeid(C));
  if (cls == nullptr || cls->name != w.cls)
    detail::throw_wrong_handle_class(w.cls, typeid(C));
  x = ActorHandle<C>{std::move(ref)};
}

/// How long an actor lives: `owned` (the default) ends it with the process
/// that made it; `detached` keeps it until `lumen::kill`.
enum class lifetime { owned, detached };

/// Builds an actor; made by `lumen::actor<C>(ctor args...)`.
template <class C, class... As>
class actor_creator {
public:
  static_assert(std::is_constructible<C, const As&...>::value,
                "lumen::actor<C>(args...): C has no constructor taking these "
                "arguments");
  static_assert(detail::serializable_params<As...>,
                "lumen::actor<C>(args...): a constructor argument type is not "
                "serializable. Use arithmetic types, std::string, standard "
                "containers of them, or give the type a CAF inspect() "
                "overload");

  explicit actor_creator(std::tuple<As...> args)
    : args_(std::move(args)) {}

  /// Registers the actor under `name` for `lumen::get_actor`.
  actor_creator& with_name(std::string name) {
    opts_.name = std::move(name);
    return *this;
  }

  /// How often the actor is rebuilt, by re-running its constructor, after it
  /// dies through `exit_actor()` or an `actor_fatal_error`.
  actor_creator& with_max_restarts(int n) {
    if (n < 0)
      throw usage_error("with_max_restarts: the count must be >= 0");
    opts_.max_restarts = n;
    return *this;
  }

  /// How many restarts of the actor a call may live through, each counted
  /// as one retry, and still run on the rebuilt instance (as Ray's
  /// max_task_retries): calls queued at a restart or, for an actor on a
  /// node that died, on their way there or running. With the default 0
  /// such calls fail with `actor_died`. The call that took the actor down
  /// is not retried, and a retried call may have run in part.
  actor_creator& with_max_task_retries(int n) {
    if (n < 0)
      throw usage_error("with_max_task_retries: the count must be >= 0");
    opts_.max_task_retries = n;
    return *this;
  }

  /// Lets up to `n` of the actor's methods run at once, each on a thread of
  /// the actor's own (Ray's threaded actors): calls still start in the
  /// order they arrive, but may finish in any order, and the methods must
  /// guard what they share. The default 1 runs one at a time, in order.
  actor_creator& with_max_concurrency(int n) {
    if (n < 1 || n > 1024)
      throw usage_error("with_max_concurrency: the count must be 1 to 1024");
    opts_.max_concurrency = n;
    return *this;
  }

  /// `lifetime::detached` keeps a named actor alive after the process that
  /// made it ends, until `lumen::kill` (Ray's lifetime="detached"); another
  /// script finds it with `lumen::get_actor`. In a cluster it is placed on
  /// a node (spread, unless `on_node` names one), never in a script.
  /// `remote()` throws `usage_error` for a detached actor without a name.
  actor_creator& with_lifetime(lifetime l) {
    opts_.detached = l == lifetime::detached;
    return *this;
  }

  /// Starts the actor on the node with this id (see `lumen::nodes()`).
  actor_creator& on_node(std::string node_id) {
    opts_.where = {placement::node, std::move(node_id)};
    return *this;
  }

  /// Starts the actor on the next live node, round-robin.
  actor_creator& spread() {
    opts_.where = {placement::spread, {}};
    return *this;
  }

  /// Places the actor only where these resources are free, and holds them
  /// from its construction until it dies for good (restarts keep them).
  /// Until they are free on the node chosen, it is not built and its calls
  /// wait; `remote()` throws a `usage_error` (errc::infeasible) naming the
  /// resource if no node (or not the one named) has as much. Amounts add
  /// to earlier calls' for other names.
  actor_creator& with_resources(const std::map<std::string, double>& amounts) {
    detail::check_resources(amounts, "with_resources");
    for (auto& [name, amount] : amounts)
      opts_.resources[name] = amount;
    return *this;
  }

  /// with_resources({{"cpu", n}}), as Ray's `num_cpus=`.
  actor_creator& with_num_cpus(double n) {
    return with_resources({{"cpu", n}});
  }

  /// Runs the actor in bundle `bundle_index` of `pg` (-1: any bundle that
  /// holds its resources), as Ray's PlacementGroupSchedulingStrategy: on
  /// that bundle's node, taking its resources from the bundle's reserve
  /// while it lives. remote() waits until the group is ready.
  /// `remote()` throws `usage_error` if the group was removed, and
  /// (errc::infeasible) if no bundle meant has the resources asked for.
  actor_creator& in_placement_group(const placement_group& pg,
                                    int bundle_index = -1) {
    opts_.where = detail::in_group(pg, bundle_index);
    return *this;
  }

  /// Starts the actor. Its constructor runs on the actor's own thread; if it
  /// throws, calls to the actor fail with `actor_died` naming the cause.
  ActorHandle<C> remote() const {
    // Instantiating the registration lets every process running this
    // binary build C from these argument types when asked to host it.
    static_cast<void>(detail::constructor_registration<C, As...>::done);
    auto cls = detail::find_actor_class(typeid(C));
    if (cls == nullptr)
      detail::throw_unregistered_class(typeid(C));
    if (opts_.detached && opts_.name.empty())
      throw usage_error("with_lifetime(detached): give the actor a name with "
                        "with_name, so that a script can find it later");
    auto f = std::make_unique<detail::actor_factory_impl<C, As...>>(args_);
    return ActorHandle<C>{
      detail::current_runtime().spawn_actor(*cls, std::move(f), opts_)};
  }

private:
  std::tuple<As...> args_;
  detail::actor_options opts_;
};

namespace detail {

/// How a constructor argument is kept: by value, string literals as
/// std::string (they must outlive the call and cross the wire).
template <class T>
using ctor_arg_t =
  std::conditional_t<std::is_same<std::decay_t<T>, const char*>::value ||
                       std::is_same<std::decay_t<T>, char*>::value,
                     std::string, std::decay_t<T>>;

} // namespace detail

/// Describes an actor of class C to start with `.remote()`, like
/// `ray::Actor(factory)`.
template <class C, class... As>
actor_creator<C, detail::ctor_arg_t<As>...> actor(As&&... xs) {
  return actor_creator<C, detail::ctor_arg_t<As>...>{
    std::tuple<detail::ctor_arg_t<As>...>{std::forward<As>(xs)...}};
}

namespace detail {

/// Throws `usage_error`: the actor named `name` is not of `wanted`.
[[noreturn]] void throw_wrong_actor_class(const std::string& name,
                                          const actor_class_entry& actual,
                                          const std::type_info& wanted);

} // namespace detail

/// The live actor named `name`, or nothing; throws `usage_error` if that
/// actor is not a C.
template <class C>
std::optional<ActorHandle<C>> get_actor(const std::string& name) {
  auto ref = detail::current_runtime().find_actor(name);
  if (!ref)
    return std::nullopt;
  auto& cls = detail::class_of(*ref);
  if (*cls.type != typeid(C))
    detail::throw_wrong_actor_class(name, cls, typeid(C));
  return ActorHandle<C>{std::move(ref)};
}

/// Ends the actor at once, without restart, like `ray.kill`: queued and later
/// calls fail with `actor_died`; a method already running finishes first.
template <class C>
void kill(const ActorHandle<C>& handle) {
  if (!handle.valid())
    detail::throw_empty_handle();
  detail::current_runtime().kill_actor(*handle.ref());
}

} // namespace lumen
