#include "core/actor_host.hpp"

#include <deque>
#include <optional>

#include <caf/all.hpp>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"
#include "lumen/util/work_queue.hpp"

#include "core/running_work.hpp"
#include "trace/trace_log.hpp"

namespace lumen::detail {

namespace {

struct call_msg {
  std::shared_ptr<actor_call> call;
};

// The resources the actor asked for, now its own.
struct granted_msg {
  resource_ledger::grant held;
};

struct finished_msg;

} // namespace

} // namespace lumen::detail

// Calls never leave the process as messages: they are shared, not serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::call_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::granted_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::finished_msg)

namespace lumen {

namespace {

// The id of the actor an actor host's thread runs (it runs nothing else);
// empty on other threads.
thread_local std::string current_actor;

} // namespace

void exit_actor() {
  if (current_actor.empty())
    throw usage_error("lumen::exit_actor() was called outside an actor; call "
                      "it from an actor's constructor or method");
  throw detail::actor_exit_request{};
}

std::string current_actor_id() {
  return current_actor;
}

namespace detail {

std::string& current_actor_slot() {
  return current_actor;
}

std::atomic<bool> hosts_running{false};

std::string actor_id_of(const caf::actor_addr& host) {
  return std::to_string(host.id()) + "@" + caf::to_string(host.node());
}

namespace {

using resume_atom = caf::atom_constant<caf::atom("lmresume")>;
using stop_atom = caf::atom_constant<caf::atom("lmstop")>;

// A method of a threaded actor returned; `death` says why the actor must
// die, if it must. The call comes back so that, as in the one-thread path,
// a call that failed by ending the actor is published only after the host
// moved on to the next instance: a caller woken by it reaches that one.
struct finished_msg {
  std::shared_ptr<actor_call> call;
  std::optional<std::string> death;
};

struct host_state {
  std::shared_ptr<actor_core> core;
  std::shared_ptr<void> instance;
  // Calls in arrival order; the head waits here while its ObjectRef
  // arguments are pending, holding back the rest to keep the order.
  std::deque<std::shared_ptr<actor_call>> queue;
  bool waiting = false;
  bool stopping = false;
  // Its resources, from construction until the actor is dead for good.
  resource_ledger::grant held;
  // With max_concurrency > 1: where its methods run, and how many do.
  // Declared last, so that its threads are joined before the rest goes.
  int running = 0;
  std::unique_ptr<util::work_queue> threads;
};

using host_actor = caf::stateful_actor<host_state>;

bool start_instance(host_actor* self);

} // namespace

std::optional<construction_failure>
construct_instance(actor_factory& factory, const std::string& cls,
                   std::shared_ptr<void>& instance) {
  try {
    trace::detail::runtime_span span{"actor"};
    if (span.on())
      span.name.owned = cls + " constructor";
    instance = factory.construct();
    return std::nullopt;
  } catch (const actor_exit_request&) {
    return construction_failure{"its constructor called lumen::exit_actor()",
                                true};
  } catch (const actor_fatal_error& e) {
    return construction_failure{
      std::string{"its constructor raised actor_fatal_error: "} + e.what(),
      true};
  } catch (...) {
    // A constructor that throws would throw again: no restart.
    return construction_failure{"its constructor threw " +
                                  current_exception_type() + ": " +
                                  current_exception_message(),
                                false};
  }
}

bool retry_on_new_instance(actor_call& c, uint64_t deaths) {
  auto& core = *c.core;
  if (c.retries + deaths > static_cast<uint64_t>(core.opts.max_task_retries))
    return false;
  c.retries += static_cast<int>(deaths);
  c.generation = core.generation.load();
  return true;
}

bool retry_on_current_instance(actor_call& c) {
  return retry_on_new_instance(c, c.core->generation.load() - c.generation);
}

namespace {

// Takes the instance down after `reason`; restarts it if restarts are left
// and `may_restart`. Returns whether the actor lives on.
bool die(host_actor* self, const std::string& reason, bool may_restart) {
  auto& st = self->state;
  auto& core = *st.core;
  st.instance.reset();
  // The reason is in place before anyone can see the death, and calls
  // queued before it fail only after the generation moved on, so that a
  // caller woken by their failure reaches the new instance.
  bool restart = core.begin_restart(reason, may_restart);
  auto doomed = std::move(st.queue);
  st.queue.clear();
  st.waiting = false;
  if (restart) {
    // Calls with retries left wait for the new instance, in their order;
    // the others fail as `doomed` goes.
    for (auto& c : doomed)
      if (retry_on_current_instance(*c))
        st.queue.push_back(std::move(c));
    doomed.clear();
    return start_instance(self);
  }
  core.dead = true;
  doomed.clear();
  if (core.on_dead)
    core.on_dead(core);
  self->quit(caf::exit_reason::user_shutdown);
  return false;
}

bool start_instance(host_actor* self) {
  auto& core = *self->state.core;
  auto failed =
    construct_instance(*core.factory, core.cls.name, self->state.instance);
  return !failed || die(self, failed->reason, failed->may_restart);
}

// Runs `call` on `instance`; returns why the actor must die, if it must.
std::optional<std::string> run_call(actor_call& call, void* instance) {
  try {
    trace::detail::runtime_span span{"actor", call.trace_flow};
    if (span.on())
      span.name.stable = &call.method().name; // "Class::method"
    running_scope running{call};
    call.invoke(instance);
  } catch (const actor_exit_request&) {
    return "it called lumen::exit_actor()";
  } catch (const actor_fatal_error& e) {
    return std::string{"it raised actor_fatal_error: "} + e.what();
  }
  return std::nullopt;
}

// A threaded actor's call goes to its threads with the instance it started
// on, which a restart meanwhile does not take from it.
void hand_out(host_actor* self, std::shared_ptr<actor_call> call) {
  auto& st = self->state;
  ++st.running;
  st.threads->post([me = caf::actor_cast<caf::actor>(self),
                    instance = st.instance, call = std::move(call)]() mutable {
    auto death = run_call(*call, instance.get());
    caf::anon_send(me, finished_msg{std::move(call), std::move(death)});
  });
}

void drain(host_actor* self) {
  auto& st = self->state;
  auto limit = st.core->opts.max_concurrency;
  while (!st.waiting && !st.queue.empty() && st.running < limit) {
    if (st.core->dead) {
      st.queue.clear();
      self->quit(caf::exit_reason::user_shutdown);
      return;
    }
    auto& head = st.queue.front();
    if (head->cancel_requested() || head->result()->ready()) {
      st.queue.pop_front(); // its result failed when it was cancelled
      continue;
    }
    bool ready = true;
    for (auto& d : head->deps)
      ready = ready && d->ready();
    if (!ready) {
      st.waiting = true;
      auto me = caf::actor_cast<caf::actor>(self);
      when_all_ready(head->deps,
                     [me] { caf::anon_send(me, resume_atom::value); });
      return;
    }
    auto call = std::move(head);
    st.queue.pop_front();
    if (st.threads) {
      hand_out(self, std::move(call));
      continue;
    }
    if (auto death = run_call(*call, st.instance.get()))
      if (!die(self, *death, true))
        return;
  }
  if (st.stopping && st.queue.empty() && st.running == 0)
    self->quit(caf::exit_reason::normal);
}

caf::behavior host(host_actor* self, std::shared_ptr<actor_core> core,
                   resource_ledger* ledger,
                   const resource_ledger::revoke_fn& revoked) {
  current_actor = actor_id_of(self->address());
  trace::name_thread(core->describe());
  auto& st = self->state;
  st.core = std::move(core);
  if (st.core->opts.max_concurrency > 1)
    st.threads = std::make_unique<util::work_queue>(
      static_cast<size_t>(st.core->opts.max_concurrency),
      [id = current_actor] { current_actor = id; });
  if (st.core->opts.resources.empty()) {
    if (!start_instance(self))
      return {};
  } else {
    // Built once its resources are free; calls queue until then. A grant
    // that finds the actor gone (killed, or its handles dropped) is
    // dropped with the message, which frees it.
    st.waiting = true;
    auto me = caf::actor_cast<caf::actor>(self);
    ledger->acquire(
      st.core->opts.resources,
      [me](resource_ledger::grant g) {
        caf::anon_send(me, granted_msg{std::move(g)});
      },
      revoked);
  }
  // CAF tries the handlers in order: calls, by far the most messages,
  // come first.
  return {
    [=](call_msg& m) {
      auto& st = self->state;
      // A call stamped before a restart was queued for the old instance:
      // dropping it fails it with actor_died, unless it may be retried.
      if (m.call->generation != st.core->generation.load() &&
          !retry_on_current_instance(*m.call))
        return;
      st.queue.push_back(std::move(m.call));
      drain(self);
    },
    [=](finished_msg& m) {
      auto& st = self->state;
      --st.running;
      if (m.death && !die(self, *m.death, true))
        return;
      drain(self);
    },
    [=](granted_msg& m) {
      auto& st = self->state;
      st.held = std::move(m.held);
      st.waiting = false;
      if (start_instance(self))
        drain(self);
    },
    [=](resume_atom) {
      self->state.waiting = false;
      drain(self);
    },
    [=](stop_atom) {
      self->state.stopping = true;
      drain(self);
    },
  };
}

} // namespace

actor_core::actor_core(const actor_class_entry& c,
                       std::unique_ptr<actor_factory> f, actor_options o)
  : cls(c)
  , factory(std::move(f))
  , opts(std::move(o)) {}

void actor_core::set_death_reason(std::string reason) {
  std::lock_guard<std::mutex> guard{mtx_};
  death_reason_ = std::move(reason);
}

std::string actor_core::describe() const {
  return opts.name.empty() ? "actor of class " + cls.name
                           : "actor '" + opts.name + "' (" + cls.name + ")";
}

std::exception_ptr
actor_core::dropped_call_error(const method_entry& method) const {
  return std::make_exception_ptr(
    actor_died(describe() + " died before running " + method.name + ": " +
               death_reason()));
}

bool actor_core::begin_restart(const std::string& reason, bool may_restart,
                               const std::string& where) {
  int used = restarts.load();
  bool restart = may_restart && !dead && used < opts.max_restarts;
  set_death_reason(
    reason + (restart ? "; restarted (" + std::to_string(used + 1) + " of " +
                          std::to_string(opts.max_restarts) + ")" + where
                      : std::string{}));
  if (restart) {
    generation.fetch_add(1);
    restarts.fetch_add(1);
  }
  return restart;
}

std::string actor_core::death_reason() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return death_reason_.empty() ? "it stopped" : death_reason_;
}

std::exception_ptr actor_core::lost_call_error(const method_entry& method,
                                               const std::string& node,
                                               const std::string& why) const {
  return std::make_exception_ptr(
    actor_died(method.name + " had reached " + describe() + " on node " + node +
               ", which went down before it answered (" + why +
               "); it may have run, in part"));
}

actor_ref::actor_ref(std::shared_ptr<actor_core> c)
  : core(std::move(c)) {}

actor_ref::~actor_ref() {
  if (!core->borrowed && !core->opts.detached)
    send_stop(*core);
}

caf::actor spawn_host(caf::actor_system& sys, std::shared_ptr<actor_core> core,
                      resource_ledger& ledger,
                      resource_ledger::revoke_fn revoked) {
  return sys.spawn<caf::detached>(host, std::move(core), &ledger,
                                  std::move(revoked));
}

void send_call(const actor_core& core, std::shared_ptr<actor_call> c) {
  if (hosts_running)
    caf::anon_send(core.handle, call_msg{std::move(c)});
}

void send_stop(const actor_core& core) {
  if (hosts_running && core.handle)
    caf::anon_send(core.handle, stop_atom::value);
}

} // namespace detail

} // namespace lumen
