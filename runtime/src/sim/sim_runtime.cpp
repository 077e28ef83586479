#include "sim/sim_runtime.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "core/running_work.hpp"
#include "node/named_work.hpp"
#include "sim/sim_host.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

std::string not_simulated(const std::string& what) {
  return what +
         " is not simulated: a simulated cluster (--simulate) runs remote "
         "functions, actors, get, wait, put, the key-value store, "
         "collectives and typed CAF actors on its nodes; run without "
         "--simulate to use it";
}

} // namespace

sim_runtime::sim_runtime(const sim_options& opts, const std::string& trace_file)
  : world_(opts, trace_file) {
  plan_faults(opts);
}

sim_runtime::~sim_runtime() {
  alive_.reset();
  if (typed_)
    typed_->ending();
  world_.stop();
  if (typed_) {
    typed_->stop();
    typed_.reset();
  }
  for (auto& [core, h] : hosts_)
    h->mailbox.clear(); // their callers' refs fail as the calls go
}

sim_typed& sim_runtime::typed() {
  if (!typed_)
    typed_ = std::make_unique<sim_typed>(world_);
  return *typed_;
}

int sim_runtime::place(const placement& where, const std::string& what) {
  switch (where.kind) {
    case placement::local:
      return world_.here();
    case placement::node: {
      auto i = world_.node_index(where.node_id);
      if (i < 0)
        throw usage_error(what + " is placed on node '" + where.node_id +
                            "', which is not a simulated node; " +
                            world_.node_range(),
                          errc::no_such_node);
      return i;
    }
    case placement::spread: {
      // Round the live nodes.
      auto n =
        static_cast<int>(spread_next_++ % static_cast<size_t>(world_.nodes()));
      return world_.alive(n) ? n : live_node_after(n);
    }
    case placement::in_group:
      break;
  }
  throw usage_error(not_simulated("a placement group"));
}

void sim_runtime::submit_task(std::shared_ptr<task_spec> t) {
  if (!t->resources.empty())
    throw usage_error(not_simulated("a task's resources (with_resources)"));
  auto to = place(t->where, t->function().name);
  auto from = world_.here();
  auto work = world_.new_work();
  auto deps = t->deps;
  when_all_ready(deps, [this, alive = std::weak_ptr<int>{alive_},
                        t = std::move(t), from, to, work] {
    if (!alive.expired())
      send_task(t, from, to, work, t->max_retries());
  });
}

void sim_runtime::send_task(const std::shared_ptr<task_spec>& t, int from,
                            int to, uint64_t work, int retries_left) {
  if (t->cancel_requested())
    return; // its result failed when it was cancelled
  if (auto err = first_error(t->deps)) {
    t->result()->set_error(err);
    return;
  }
  if (!world_.alive(to)) {
    t->result()->set_error(std::make_exception_ptr(
      error("task " + t->function().name + " is placed on node " +
              world_.node_name(to) + ", which is dead",
            errc::node_dead)));
    return;
  }
  tasks_out_[work] = {t, from, to, retries_left};
  auto frame = std::make_shared<bytes>();
  try {
    *frame = t->encode_args();
  } catch (...) {
    t->result()->set_error(std::current_exception());
    return;
  }
  auto& name = t->function().name;
  world_.send(from, to, frame->size(), name, work,
              [this, t, from, to, work, frame] {
                world_.run_on(to, [this, t, from, to, work, frame] {
                  auto& fn = t->function();
                  world_.record("start", to, -1, fn.name, 0, work);
                  auto st = std::make_shared<value_state<bytes>>();
                  named_task{st,
                             fn,
                             frame,
                             {frame->data(), frame->size()},
                             t->max_retries(),
                             t->retry_exceptions()}
                    .run();
                  world_.record("finish", to, -1, fn.name, 0, work);
                  answer(to, from, st, t, work);
                });
              });
}

template <class Work>
void sim_runtime::answer(int from, int to,
                         const std::shared_ptr<value_state<bytes>>& st,
                         std::shared_ptr<Work> x, uint64_t work) {
  bool ok = st->ready() && !st->failed();
  auto out = std::make_shared<bytes>(
    ok ? st->value()
       : encode_error(st->ready() ? st->error()
                                  : std::make_exception_ptr(error(
                                      "the work ended without a result"))));
  auto& name = x->work_name(); // the registry's, as long as the run
  world_.send(from, to, out->size(), name, work,
              [this, ok, out, x = std::move(x), to, work] {
                // An answer the cluster stopped waiting for (its node was
                // lost meanwhile) has nowhere to go.
                if (tasks_out_.erase(work) + calls_out_.erase(work) == 0)
                  return;
                publish_answer(*x, ok, *out);
                world_.record("ready", to, -1, x->work_name(), 0, work);
              });
}

std::shared_ptr<actor_ref>
sim_runtime::spawn_actor(const actor_class_entry& cls,
                         std::unique_ptr<actor_factory> f,
                         const actor_options& opts) {
  if (!opts.resources.empty())
    throw usage_error(not_simulated("an actor's resources (with_resources)"));
  if (!opts.name.empty() && names_.count(opts.name) > 0)
    throw usage_error("an actor named '" + opts.name +
                        "' already exists; pick another name, or look it up "
                        "with lumen::get_actor<C>(\"" +
                        opts.name + "\")",
                      errc::name_taken);
  auto node = place(opts.where, cls.name);
  auto key = f->constructor_key();
  auto* ctor = find_constructor(key);
  if (ctor == nullptr)
    throw usage_error("lumen::actor: no constructor of " + cls.name +
                      " is registered as " + key +
                      "; construct it with the argument types its "
                      "LUMEN_ACTOR registration was built with");
  if (!world_.alive(node))
    throw error("lumen::actor: " + cls.name + " is placed on node " +
                  world_.node_name(node) + ", which is dead",
                errc::node_dead);
  auto args = f->encode_args();
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  auto work = world_.new_work();
  // Hosted by a simulated node: the id says which.
  core->remote = std::make_unique<remote_proxy>();
  core->remote->node_id = world_.node_name(node);
  core->remote->actor_id =
    std::to_string(work) + "@sim:" + world_.node_name(node);
  auto ref = std::make_shared<actor_ref>(core);
  auto h = std::make_shared<host>();
  h->core = core;
  h->id = work;
  h->node = node;
  h->what = cls.name + " constructor";
  h->factory = std::make_unique<named_factory>(*ctor, std::move(args));
  hosts_[core.get()] = h;
  if (!opts.name.empty())
    names_[opts.name] = ref;
  build(h, world_.here(), work);
  return ref;
}

void sim_runtime::build(const std::shared_ptr<host>& h, int from,
                        uint64_t work) {
  h->built = false;
  world_.send(from, h->node, h->factory->encode_args().size(), h->what, work,
              [this, h, work] {
                world_.run_on(h->node, [this, h, work] {
                  world_.record("start", h->node, -1, h->what, 0, work);
                  start_instance(h);
                  h->built = true;
                  world_.record("finish", h->node, -1, h->what, 0, work);
                  drain(h);
                });
              });
}

bool sim_runtime::start_instance(const std::shared_ptr<host>& h) {
  current_actor_slot() = h->core->remote->actor_id;
  auto failed = construct_instance(*h->factory, h->core->cls.name, h->instance);
  return !failed || die(h, failed->reason, failed->may_restart);
}

bool sim_runtime::die(const std::shared_ptr<host>& h, const std::string& reason,
                      bool may_restart) {
  h->instance.reset();
  if (!h->core->begin_restart(reason, may_restart)) {
    end(*h);
    return false;
  }
  return start_instance(h);
}

void sim_runtime::end(host& h) {
  auto& core = *h.core;
  core.dead = true;
  if (!core.opts.name.empty()) {
    auto i = names_.find(core.opts.name);
    if (i != names_.end() && i->second->core.get() == &core)
      names_.erase(i);
  }
}

void sim_runtime::submit_call(const actor_ref& a,
                              std::shared_ptr<actor_call> c) {
  c->core = a.core;
  if (a.core->dead)
    return; // c fails with actor_died as it goes out of scope
  c->generation = a.core->generation.load();
  auto h = hosts_.at(a.core.get());
  h->outbox.push_back({std::move(c), world_.here(), world_.new_work()});
  pump(h);
}

void sim_runtime::pump(const std::shared_ptr<host>& h) {
  while (!h->outbox_waiting && !h->outbox.empty()) {
    auto& head = h->outbox.front();
    bool ready = true;
    for (auto& d : head.call->deps)
      ready = ready && d->ready();
    if (!ready) {
      h->outbox_waiting = true;
      when_all_ready(head.call->deps,
                     [this, alive = std::weak_ptr<int>{alive_}, h] {
                       if (alive.expired())
                         return;
                       h->outbox_waiting = false;
                       pump(h);
                     });
      return;
    }
    auto sent = std::move(head);
    h->outbox.pop_front();
    auto& call = sent.call;
    if (call->cancel_requested() || call->result()->ready())
      continue;
    if (auto err = first_error(call->deps)) {
      call->result()->set_error(err);
      continue;
    }
    auto frame = std::make_shared<bytes>();
    try {
      *frame = call->encode_args();
    } catch (...) {
      call->result()->set_error(std::current_exception());
      continue;
    }
    auto& m = call->method();
    calls_out_[sent.work] = {call, h->node};
    if (!world_.alive(h->node))
      continue; // its node died, unknown yet to the cluster: lost on the way
    world_.send(sent.from, h->node, frame->size(), m.name, sent.work,
                [this, h, sent, frame, &m] {
                  auto st = std::make_shared<value_state<bytes>>();
                  auto named = std::make_shared<named_call>(
                    st, m, frame, byte_span{frame->data(), frame->size()});
                  h->mailbox.push_back(
                    {sent.call, std::move(named), st, sent.from, sent.work});
                  drain(h);
                });
  }
}

void sim_runtime::drain(const std::shared_ptr<host>& h) {
  auto& core = *h->core;
  while (h->built && !h->mailbox.empty() &&
         h->running < std::max(1, core.opts.max_concurrency)) {
    auto in = std::move(h->mailbox.front());
    h->mailbox.pop_front();
    bool stale = in.call->generation != core.generation.load() &&
                 !retry_on_current_instance(*in.call);
    if (core.dead || stale || !h->instance) {
      in.st->set_error(core.dropped_call_error(in.call->method()));
      answer(h->node, in.from, in.st, in.call, in.work);
      continue;
    }
    ++h->running;
    world_.run_on(h->node, [this, h, in = std::move(in)] {
      auto& name = in.call->method().name;
      world_.record("start", h->node, -1, name, 0, in.work);
      current_actor_slot() = h->core->remote->actor_id;
      auto instance = h->instance; // a restart meanwhile does not take it
      std::optional<std::string> death;
      try {
        running_scope running{*in.named};
        in.named->invoke(instance.get());
      } catch (const actor_exit_request&) {
        death = "it called lumen::exit_actor()";
      } catch (const actor_fatal_error& e) {
        death = std::string{"it raised actor_fatal_error: "} + e.what();
      }
      world_.record("finish", h->node, -1, name, 0, in.work);
      --h->running;
      if (death)
        die(h, *death, true);
      if (!in.st->ready())
        in.st->set_error(h->core->dropped_call_error(in.call->method()));
      answer(h->node, in.from, in.st, in.call, in.work);
      drain(h);
    });
  }
}

std::shared_ptr<actor_ref> sim_runtime::find_actor(const std::string& name) {
  auto i = names_.find(name);
  return i == names_.end() ? nullptr : i->second;
}

void sim_runtime::kill_actor(const actor_ref& a) {
  auto i = hosts_.find(a.core.get());
  if (i == hosts_.end())
    return;
  a.core->set_death_reason("it was killed by lumen::kill");
  end(*i->second);
  i->second->instance.reset();
}

void sim_runtime::create_placement_group(
  const std::shared_ptr<placement_group_state>&) {
  throw usage_error(not_simulated("a placement group"));
}

void sim_runtime::remove_placement_group(placement_group_state&) {
  throw usage_error(not_simulated("a placement group"));
}

std::vector<node_info> sim_runtime::nodes() const {
  std::vector<node_info> out;
  for (int i = 0; i < world_.nodes(); ++i) {
    node_info n;
    n.id = world_.node_name(i);
    n.address = "sim:" + n.id;
    n.data_address = n.address;
    n.resources = {{"cpu", 1.0}};
    n.alive = world_.alive(i);
    out.push_back(std::move(n));
  }
  return out;
}

} // namespace lumen::detail
