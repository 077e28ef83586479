#pragma once

// How an actor's method call and constructor run from the arguments they
// keep, in this process or encoded for another (lumen/actor.hpp makes them).

#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "lumen/detail/arguments.hpp"
#include "lumen/detail/registry.hpp"
#include "lumen/detail/runtime.hpp"

namespace lumen::detail {

template <class C, class R, class M, class Args>
class actor_call_impl final : public actor_call {
public:
  /// `e` is the entry of a method of type M (its key holds the pointer).
  actor_call_impl(std::shared_ptr<value_state<R>> result, const method_entry& e,
                  Args args)
    : actor_call(std::move(result), e)
    , args_(std::move(args)) {
    deps = args_.dependencies();
  }

  void invoke(void* instance) override {
    if (auto err = first_error(deps)) {
      out_state().set_error(err);
      return;
    }
    auto* self = static_cast<C*>(instance);
    // The method comes from its registry key, not a copy kept here: 16
    // bytes less puts a call in the allocator's next smaller size class.
    M m;
    std::memcpy(&m, method_->key.data(), sizeof(M));
    auto call = [&](auto&... xs) -> decltype(auto) {
      return (self->*m)(xs...);
    };
    try {
      if constexpr (std::is_void<R>::value) {
        args_.apply(call);
        out_state().set_value();
      } else {
        out_state().set_value(args_.apply(call));
      }
    } catch (const actor_exit_request&) {
      throw;
    } catch (const actor_fatal_error&) {
      throw;
    } catch (...) {
      out_state().set_error(capture_task_error(method_->name));
    }
  }

  bytes encode_args() override {
    return args_.encode();
  }

  void accept_result(const bytes& out) override {
    publish_encoded(out_state(), out);
  }

private:
  // The result this call was made with (actor_call keeps it as its base).
  value_state<R>& out_state() const noexcept {
    return static_cast<value_state<R>&>(*result_);
  }

  Args args_;
};

template <class C, class... As>
class actor_factory_impl final : public actor_factory {
public:
  explicit actor_factory_impl(std::tuple<As...> args)
    : args_(std::move(args)) {}

  std::shared_ptr<void> construct() override {
    return std::apply(
      [](const As&... xs) { return std::make_shared<C>(xs...); }, args_);
  }

  std::string constructor_key() const override {
    return detail::constructor_key<C, As...>();
  }

  bytes encode_args() const override {
    return std::apply([](const As&... xs) { return encode(xs...); }, args_);
  }

private:
  std::tuple<As...> args_;
};

} // namespace lumen::detail
