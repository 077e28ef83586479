#pragma once

// How an actor's method call and constructor run from the arguments they
// keep, in this process or encoded for another (lumen/actor.hpp makes them).

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
  actor_call_impl(std::shared_ptr<value_state<R>> result, const method_entry& e,
                  M m, Args args)
    : actor_call(result, e)
    , st_(std::move(result))
    , m_(m)
    , args_(std::move(args)) {
    deps = args_.dependencies();
  }

  void invoke(void* instance) override {
    if (auto err = first_error(deps)) {
      st_->set_error(err);
      return;
    }
    auto* self = static_cast<C*>(instance);
    auto call = [&](auto&... xs) -> decltype(auto) {
      return (self->*m_)(xs...);
    };
    try {
      if constexpr (std::is_void<R>::value) {
        args_.apply(call);
        st_->set_value();
      } else {
        st_->set_value(args_.apply(call));
      }
    } catch (const actor_exit_request&) {
      throw;
    } catch (const actor_fatal_error&) {
      throw;
    } catch (...) {
      st_->set_error(capture_task_error(method_->name));
    }
  }

  bytes encode_args() override {
    return args_.encode();
  }

  void accept_result(const bytes& out) override {
    publish_encoded(*st_, out);
  }

private:
  std::shared_ptr<value_state<R>> st_;
  M m_;
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
