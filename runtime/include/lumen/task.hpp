#pragma once

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "lumen/detail/arguments.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/detail/small_pool.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_ref.hpp"
#include "lumen/placement_group.hpp"

namespace lumen {

namespace detail {

template <class R, class F, class Args>
class task_impl final : public task_spec {
public:
  task_impl(std::shared_ptr<value_state<R>> result, const function_entry& e,
            int max_retries, bool retry_exceptions, F* fn, Args args)
    : task_spec(std::move(result), e, max_retries, retry_exceptions)
    , fn_(fn)
    , args_(std::move(args)) {
    deps = args_.dependencies();
  }

  bytes encode_args() override {
    return args_.encode();
  }

  void accept_result(const bytes& out) override {
    publish_encoded(out_state(), out);
  }

protected:
  void attempt() override {
    if constexpr (std::is_void<R>::value) {
      args_.apply(*fn_);
      out_state().set_value();
    } else {
      out_state().set_value(args_.apply(*fn_));
    }
  }

private:
  // The result this work was made with (task_spec keeps it as its base).
  value_state<R>& out_state() const noexcept {
    return static_cast<value_state<R>&>(*result_);
  }

  F* fn_;
  Args args_;
};

/// Throws `usage_error`: `fn` was not registered with LUMEN_REMOTE.
[[noreturn]] void throw_unregistered_function();

} // namespace detail

/// Builds a call of a remote function; made by `lumen::task(fn)`.
template <class R, class... Ps>
class task_caller {
public:
  using result_type = std::decay_t<R>;

  explicit task_caller(R (*fn)(Ps...))
    : fn_(fn) {
    entry_ = detail::find_function(reinterpret_cast<detail::erased_fn>(fn));
    if (entry_ == nullptr)
      detail::throw_unregistered_function();
  }

  /// How often to re-run the task after a failure (default 3, like Ray);
  /// exceptions count as failures only with `with_retry_exceptions(true)`.
  task_caller& with_max_retries(int n) {
    if (n < 0)
      throw usage_error("with_max_retries: the count must be >= 0");
    max_retries_ = n;
    return *this;
  }

  /// Whether an exception thrown by the function is retried.
  task_caller& with_retry_exceptions(bool retry) {
    retry_exceptions_ = retry;
    return *this;
  }

  /// Runs the task on the node with this id (see `lumen::nodes()`); its ref
  /// fails with `actor_died` if that node is gone.
  task_caller& on_node(std::string node_id) {
    where_ = {placement::node, std::move(node_id)};
    return *this;
  }

  /// Runs the task on the next live node, round-robin.
  task_caller& spread() {
    where_ = {placement::spread, {}};
    return *this;
  }

  /// Runs the task only where these resources are free, holding them while
  /// it runs (as Ray's `resources=`): once its arguments are in, it waits
  /// for them on a node that has them. `remote()` throws a `usage_error`
  /// (errc::infeasible) naming the resource if no live node (or not the
  /// one named) has as much. Amounts add to earlier calls' for other
  /// names; a task asks for none by default.
  task_caller& with_resources(const std::map<std::string, double>& amounts) {
    detail::check_resources(amounts, "with_resources");
    for (auto& [name, amount] : amounts)
      resources_[name] = amount;
    return *this;
  }

  /// with_resources({{"cpu", n}}), as Ray's `num_cpus=`.
  task_caller& with_num_cpus(double n) {
    return with_resources({{"cpu", n}});
  }

  /// Runs the task in bundle `bundle_index` of `pg` (-1: any bundle that
  /// holds its resources), as Ray's PlacementGroupSchedulingStrategy: on
  /// that bundle's node, taking its resources from the bundle's reserve
  /// while it runs. It is sent once the group is ready.
  /// `remote()` throws `usage_error` if the group was removed, and
  /// (errc::infeasible) if no bundle meant has the resources asked for.
  task_caller& in_placement_group(const placement_group& pg,
                                  int bundle_index = -1) {
    where_ = detail::in_group(pg, bundle_index);
    return *this;
  }

  /// Submits the call and returns a ref to its result at once. ObjectRef
  /// arguments for parameters of their value type are resolved first.
  template <class... As>
  ObjectRef<result_type> remote(As&&... xs) const {
    static_assert(std::is_void<result_type>::value ||
                    detail::is_serializable_v<result_type>,
                  "lumen: the return type of a remote function is not "
                  "serializable. Use arithmetic types, std::string, standard "
                  "containers of them, or give the type a CAF inspect() "
                  "overload");
    using args_t = detail::arguments<detail::param_list<Ps...>, As...>;
    auto st = detail::make_pooled<detail::value_state<result_type>>();
    auto t =
      detail::make_pooled<detail::task_impl<result_type, R(Ps...), args_t>>(
        st, *entry_, max_retries_, retry_exceptions_, fn_,
        args_t{std::forward<As>(xs)...});
    t->where = where_;
    t->resources = resources_;
    detail::current_runtime().submit_task(std::move(t));
    return ObjectRef<result_type>{std::move(st)};
  }

private:
  R (*fn_)(Ps...);
  const detail::function_entry* entry_ = nullptr;
  int max_retries_ = 3;
  bool retry_exceptions_ = false;
  placement where_;
  detail::resource_request resources_;
};

/// Wraps a function registered with LUMEN_REMOTE for `.remote(args...)`,
/// like `ray::Task(fn)`.
template <class R, class... Ps>
task_caller<R, Ps...> task(R (*fn)(Ps...)) {
  return task_caller<R, Ps...>{fn};
}

} // namespace lumen
