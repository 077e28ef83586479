#include "lumen/detail/runtime.hpp"

#include <typeinfo>

#include "lumen/actor.hpp"
#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"
#include "lumen/task.hpp"

#include "core/actor_host.hpp"
#include "core/running_work.hpp"
#include "trace/trace_log.hpp"

namespace lumen::detail {

task_spec::task_spec(std::shared_ptr<object_state> result,
                     const function_entry& fn, int max_retries,
                     bool retry_exceptions)
  : cancellable(kind::task, std::move(result))
  , fn_(&fn)
  , max_retries_(max_retries)
  , retry_exceptions_(retry_exceptions) {}

task_spec::~task_spec() {
  if (!result_->ready())
    result_->set_error(std::make_exception_ptr(error(
      "task " + fn_->name + " never ran: lumen::shutdown() was called first")));
}

const std::string& task_spec::work_name() const noexcept {
  return fn_->name;
}

void task_spec::run() {
  auto resources_held = std::move(held); // let go however the run ends
  if (cancel_requested() || result_->ready())
    return; // its result failed when it was cancelled
  trace::detail::runtime_span span{"task", trace_flow};
  if (span.on())
    span.name.stable = &fn_->name;
  if (auto err = first_error(deps)) {
    result_->set_error(err);
    return;
  }
  started_.store(true, std::memory_order_release);
  running_scope running{*this};
  for (int attempt_no = 0;; ++attempt_no) {
    try {
      attempt();
      return;
    } catch (...) {
      if (retry_exceptions_ && attempt_no < max_retries_ && !cancel_requested())
        continue;
      result_->set_error(capture_task_error(fn_->name));
      return;
    }
  }
}

actor_call::actor_call(std::shared_ptr<object_state> result,
                       const method_entry& m)
  : cancellable(kind::call, std::move(result))
  , method_(&m) {}

const std::string& actor_call::work_name() const noexcept {
  return method_->name;
}

actor_call::~actor_call() {
  if (!result_->ready())
    result_->set_error(core ? core->dropped_call_error(*method_)
                            : std::make_exception_ptr(
                                actor_died(method_->name + " was never sent")));
}

actor_factory::~actor_factory() = default;

runtime::~runtime() = default;

const actor_class_entry& class_of(const actor_ref& a) {
  return a.core->cls;
}

const std::string& name_of(const actor_ref& a) {
  return a.core->opts.name;
}

std::string id_of(const actor_ref& a) {
  auto& core = *a.core;
  if (!core.remote)
    return actor_id_of(core.handle.address());
  std::lock_guard<std::mutex> guard{core.remote->mtx}; // see remote_proxy
  if (!core.handle)
    return core.remote->actor_id;
  return actor_id_of(core.handle.address());
}

int restarts_of(const actor_ref& a) {
  return a.core->restarts.load();
}

bool alive(const actor_ref& a) {
  return !a.core->dead.load();
}

void throw_unregistered_function() {
  throw usage_error("lumen::task: this function is not registered; add "
                    "LUMEN_REMOTE(function_name) at namespace scope in a .cpp "
                    "file");
}

void throw_unregistered_method(const actor_class_entry& cls) {
  std::string known;
  for (auto& m : cls.methods)
    known += (known.empty() ? "" : ", ") + m.name;
  throw usage_error("this method of " + cls.name +
                    " is not registered; list it in LUMEN_ACTOR(" + cls.name +
                    ", ...) (registered: " + known + ")");
}

void throw_unregistered_class(const std::type_info& type) {
  throw usage_error("lumen::actor: class " + demangle(type.name()) +
                    " is not registered; add LUMEN_ACTOR(Class, "
                    "&Class::method, ...) at namespace scope in a .cpp "
                    "file");
}

void throw_empty_handle() {
  throw usage_error("the ActorHandle is empty (default-constructed); use one "
                    "returned by lumen::actor<C>(...).remote() or "
                    "lumen::get_actor");
}

void throw_wrong_actor_class(const std::string& name,
                             const actor_class_entry& actual,
                             const std::type_info& wanted) {
  throw usage_error("lumen::get_actor: the actor named '" + name + "' is a " +
                    actual.name + ", not a " + demangle(wanted.name()));
}

void throw_wrong_handle_class(const std::string& sent,
                              const std::type_info& wanted) {
  throw codec_error(
    "an ActorHandle to a " + sent +
    " arrived for a parameter of type ActorHandle<" + demangle(wanted.name()) +
    ">; the sender and this program disagree on the type "
    "(or " +
    demangle(wanted.name()) + " is not registered here with LUMEN_ACTOR)");
}

} // namespace lumen::detail
