#pragma once

// Work that arrives by name with its arguments encoded, as a node runs it
// for another process (data_server, node_manager) and a simulated node for
// its caller: the registry's invokers decode the arguments, build the
// actor, run the function or method and encode the result.

#include <memory>
#include <string>
#include <utility>

#include "lumen/detail/arguments.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

namespace lumen::detail {

/// A task sent by name: runs the registered invoker on the arguments inside
/// the received frame. A node leaves retries to the sender; the simulated
/// cluster retries a task's exceptions where it runs, as the embedded
/// runtime does.
class named_task final : public task_spec {
public:
  named_task(std::shared_ptr<value_state<bytes>> st, const function_entry& e,
             std::shared_ptr<bytes> frame, byte_span args, int max_retries = 0,
             bool retry_exceptions = false)
    : task_spec(st, e, max_retries, retry_exceptions)
    , st_(std::move(st))
    , frame_(std::move(frame))
    , args_(args) {}

  bytes encode_args() override {
    return bytes(args_.data, args_.data + args_.size);
  }

  void accept_result(const bytes& out) override {
    st_->set_value(out);
  }

protected:
  void attempt() override {
    st_->set_value(function().invoke(function().fn, args_));
  }

private:
  std::shared_ptr<value_state<bytes>> st_;
  std::shared_ptr<bytes> frame_; // owns args_
  byte_span args_;
};

/// A call sent by name: runs the registered method invoker on the host.
class named_call final : public actor_call {
public:
  named_call(std::shared_ptr<value_state<bytes>> st, const method_entry& m,
             std::shared_ptr<bytes> frame, byte_span args)
    : actor_call(st, m)
    , st_(std::move(st))
    , frame_(std::move(frame))
    , args_(args) {}

  void invoke(void* instance) override {
    try {
      st_->set_value(method().invoke(instance, method().key, args_));
    } catch (const actor_exit_request&) {
      throw;
    } catch (const actor_fatal_error&) {
      throw;
    } catch (...) {
      st_->set_error(capture_task_error(method().name));
    }
  }

  bytes encode_args() override {
    return bytes(args_.data, args_.data + args_.size);
  }

  void accept_result(const bytes& out) override {
    st_->set_value(out);
  }

private:
  std::shared_ptr<value_state<bytes>> st_;
  std::shared_ptr<bytes> frame_; // owns args_
  byte_span args_;
};

/// Builds an actor sent by name from its encoded constructor arguments.
class named_factory final : public actor_factory {
public:
  named_factory(const constructor_entry& ctor, bytes args)
    : ctor_(&ctor)
    , args_(std::move(args)) {}

  std::shared_ptr<void> construct() override {
    return ctor_->construct(args_);
  }

  std::string constructor_key() const override {
    return ctor_->key;
  }

  bytes encode_args() const override {
    return args_;
  }

private:
  const constructor_entry* ctor_;
  bytes args_;
};

} // namespace lumen::detail
