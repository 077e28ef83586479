#include "core/process_runtime.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "node/bundle_keeper.hpp"
#include "trace/trace_log.hpp"

namespace lumen::detail {

namespace {

// Tensors cross a cluster in buffers of many megabytes. glibc maps each
// such buffer anew and unmaps it when freed, so every tensor pays a page
// fault per 4 KiB (about 30 ms for 64 MiB, four times the copy itself), and
// its per-thread arenas cannot hold blocks above 64 MiB at all. One arena
// that keeps freed blocks for reuse avoids both. A user's own MALLOC_*
// settings win.
void keep_large_buffers() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr)
    mallopt(M_ARENA_MAX, 1);
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr)
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr)
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

size_t cpu_count(const init_options& opts) {
  if (opts.num_cpus > 0)
    return static_cast<size_t>(opts.num_cpus);
  return std::max(1u, std::thread::hardware_concurrency());
}

resource_request offered(const init_options& opts) {
  auto out = opts.resources;
  check_resources(out, "init_options::resources");
  out.try_emplace("cpu", static_cast<double>(cpu_count(opts)));
  return out;
}

usage_error not_in_a_cluster(const std::string& node_id) {
  return usage_error("there is no node '" + node_id +
                     "': this process is not in a cluster (pass --address "
                     "to lumen::init to join one)");
}

} // namespace

process_runtime::process_runtime(const init_options& opts, bool networked)
  : resources_(offered(opts))
  , pool_(cpu_count(opts), resources_) {
  // CAF's default of 4 scheduler threads oversubscribes small machines; its
  // threads serve event-based actors only, Lumen actors have their own.
  cfg_.set("scheduler.max-threads", cpu_count(opts));
  // After its busy polls, an idle CAF thread would poll its queue every
  // 50 us (plus the timer's slack) for 25 ms before it sleeps until woken
  // (CAF's default of 500 attempts). On a machine whose cores train a
  // model, a process that receives a message every few ms then wakes
  // thousands of times a second (a 2-worker epoch 25% slower); and a
  // message that arrives during one of those sleeps waits for its end,
  // where a sleeping thread is woken at once (a typed request from another
  // process: 170 -> 90 us). So none: busy polls, then sleep until woken.
  cfg_.set("work-stealing.moderate-poll-attempts", size_t{0});
  lumen::add_registrations(cfg_);
  if (networked) {
    keep_large_buffers();
    cfg_.load<caf::io::middleman>();
    // A silent peer (a cut link, a stopped process) is told by pulses
    // within the 2 s we promise for failure detection (pulse.hpp): CAF's
    // heartbeats, which a saturated link delays for seconds, are the
    // backstop for links whose pulses never arrive.
    cfg_.set("middleman.heartbeat-interval",
             caf::timespan{std::chrono::milliseconds(200)});
    cfg_.set("middleman.connection-timeout",
             caf::timespan{pulse_service::backstop});
  }
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  requester_.start(*sys_);
  bundle_keeper_ = spawn_bundle_keeper(*sys_, resources_);
  hosts_running = true;
  set_this_node("local");
}

process_runtime::~process_runtime() {
  if (cluster_)
    cluster_->stop();
  stop_channels();
  // Hosts and the requester use the cluster part until they are done.
  stop_actors();
  cluster_.reset();
  pulses_.reset();
  sys_.reset();
}

void process_runtime::stop_actors() {
  if (stopped_)
    return;
  stopped_ = true;
  std::vector<std::shared_ptr<actor_core>> cores;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& w : actors_)
      if (auto c = w.lock())
        cores.push_back(std::move(c));
    actors_.clear();
  }
  for (auto& c : cores) {
    c->set_death_reason("the runtime shut down");
    c->dead = true;
    // A detached actor on another process outlives this one.
    if (!c->borrowed && !(c->remote && c->opts.detached))
      caf::anon_send_exit(c->handle, caf::exit_reason::kill);
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    names_.clear();
  }
  pool_.stop();
  for (auto& a : adopted_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  adopted_.clear();
  caf::anon_send_exit(bundle_keeper_, caf::exit_reason::user_shutdown);
  requester_.stop();
  sys_->await_all_actors_done();
  hosts_running = false;
  bundle_keeper_ = nullptr;
  // Handles users still hold must not reach into the destroyed system.
  for (auto& c : cores)
    c->handle = nullptr;
}

void process_runtime::submit_task(std::shared_ptr<task_spec> t) {
  if (t->where.kind == placement::in_group)
    return submit_to_bundle(std::move(t));
  if (!here(t->where))
    return cluster_->submit_task(std::move(t));
  if (t->where.kind == placement::node && t->where.node_id != this_node())
    throw not_in_a_cluster(t->where.node_id);
  run_local(std::move(t));
}

void process_runtime::run_local(std::shared_ptr<task_spec> t) {
  trace::detail::runtime_span span{"submit"};
  if (span.on() && t->trace_flow == 0)
    t->trace_flow = span.submits(t->function().name);
  else
    span.drop(); // sent by another process, whose arrow it carries
  auto deps = t->deps;
  if (t->resources.empty()) {
    when_all_ready(
      deps, [this, t = std::move(t)]() mutable { pool_.submit(std::move(t)); });
    return;
  }
  resources_.require_feasible(t->resources, "node " + this_node());
  // Resources are taken once the arguments are in, as Ray's workers are
  // leased: a task waiting for its inputs holds nothing.
  when_all_ready(deps, [this, t = std::move(t)]() mutable {
    auto request = t->resources;
    std::weak_ptr<task_spec> w = t;
    resources_.acquire(
      request,
      [this, t = std::move(t)](resource_ledger::grant g) mutable {
        t->held = std::move(g);
        pool_.submit(std::move(t));
      },
      [w](const std::string&) {
        if (auto t = w.lock())
          t->cancel(false);
      });
  });
}

std::shared_ptr<actor_ref>
process_runtime::spawn_actor(const actor_class_entry& cls,
                             std::unique_ptr<actor_factory> f,
                             const actor_options& opts) {
  if (opts.where.kind == placement::in_group)
    return spawn_actor(cls, std::move(f), in_bundle_options(opts));
  // A detached actor must outlive this script: a node hosts it.
  if (cluster_ && opts.detached && opts.where.kind == placement::local &&
      !cluster_->is_node()) {
    auto on_a_node = opts;
    on_a_node.where = {placement::spread, {}};
    return spawn_actor(cls, std::move(f), on_a_node);
  }
  if (!here(opts.where)) {
    require_free_name(opts.name);
    return cluster_->spawn_actor(cls, std::move(f), opts);
  }
  if (opts.where.kind == placement::node && opts.where.node_id != this_node())
    throw not_in_a_cluster(opts.where.node_id);
  return spawn_local_actor(cls, std::move(f), opts);
}

void process_runtime::require_free_name(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  require_free_name_locked(name);
}

void process_runtime::require_free_name_locked(const std::string& name) const {
  if (!name.empty() && names_.count(name) > 0)
    throw usage_error("an actor named '" + name +
                        "' already exists; pick another name, or look it up "
                        "with lumen::get_actor<C>(\"" +
                        name + "\")",
                      errc::name_taken);
}

std::shared_ptr<actor_ref>
process_runtime::spawn_local_actor(const actor_class_entry& cls,
                                   std::unique_ptr<actor_factory> f,
                                   const actor_options& opts) {
  resources_.require_feasible(opts.resources, "node " + this_node());
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    require_free_name_locked(opts.name);
    core->handle = spawn_host(
      *sys_, core, resources_,
      [this, w = std::weak_ptr<actor_core>{core}](const std::string& why) {
        if (auto c = w.lock())
          end_core(*c, why);
      });
  }
  return register_actor(std::move(core));
}

std::shared_ptr<actor_ref>
process_runtime::adopt_remote_actor(std::shared_ptr<actor_core> core) {
  return register_actor(std::move(core));
}

std::shared_ptr<actor_ref>
process_runtime::register_actor(std::shared_ptr<actor_core> core) {
  core->on_dead = [this](actor_core& c) { forget_name(c); };
  auto ref = std::make_shared<actor_ref>(core);
  std::lock_guard<std::mutex> guard{mtx_};
  // A handle another process sent keeps its name for ActorHandle::name(),
  // but is no entry here: held by name, it would never be let go.
  if (!core->opts.name.empty() && !core->lease)
    names_.emplace(core->opts.name, ref);
  // Forget actors that are gone, so that the list stays as long as the
  // number of live actors.
  actors_.erase(std::remove_if(actors_.begin(), actors_.end(),
                               [](auto& w) { return w.expired(); }),
                actors_.end());
  actors_.push_back(core);
  return ref;
}

void process_runtime::submit_call(const actor_ref& a,
                                  std::shared_ptr<actor_call> c) {
  if (a.core->remote) {
    // Only a cluster part makes remote actors.
    c->core = a.core;
    if (a.core->dead)
      return; // c fails with actor_died as it goes out of scope
    return cluster_->submit_call(a.core, std::move(c));
  }
  trace::detail::runtime_span span{"submit"};
  if (span.on())
    c->trace_flow = span.submits(c->method().name);
  c->core = a.core;
  if (a.core->dead)
    return; // c fails with actor_died as it goes out of scope
  c->generation = a.core->generation.load();
  send_call(*a.core, std::move(c));
}

std::shared_ptr<actor_ref>
process_runtime::find_actor(const std::string& name) {
  std::shared_ptr<actor_ref> mine;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = names_.find(name);
    if (i != names_.end())
      mine = i->second;
  }
  // An actor this process made is known here; one it looked up may have
  // died or been rebuilt elsewhere since, so the cluster is asked each
  // time, as Ray's get_actor asks its control store.
  if (!cluster_ || (mine && !mine->core->borrowed))
    return mine;
  auto core = cluster_->lookup(name);
  if (mine && core && core->handle == mine->core->handle)
    return mine;
  if (mine)
    forget_name(*mine->core);
  return core ? register_actor(std::move(core)) : nullptr;
}

void process_runtime::kill_actor(const actor_ref& a) {
  kill_core(*a.core);
}

void process_runtime::kill_core(actor_core& core) {
  end_core(core, "it was killed by lumen::kill");
}

void process_runtime::end_core(actor_core& core, const std::string& reason) {
  if (core.dead)
    return;
  // The reason goes first: whoever sees `dead` must find it.
  core.set_death_reason(reason);
  if (core.dead.exchange(true))
    return;
  forget_name(core);
  caf::actor handle = core.handle;
  if (core.remote) {
    // A remote actor's handle changes when it is rebuilt elsewhere.
    std::lock_guard<std::mutex> guard{core.remote->mtx};
    handle = core.handle;
  }
  if (handle)
    caf::anon_send_exit(handle, caf::exit_reason::kill);
  else if (core.remote && cluster_)
    cluster_->kill_elsewhere(core);
}

void process_runtime::force_end(const std::string& why) {
  if (cluster_)
    cluster_->force_end(why); // a node ends here
  log_line("not ended for " + why +
           ": only a node process is; the task was told to stop");
}

void process_runtime::forget_name(const actor_core& core) {
  if (core.opts.name.empty())
    return;
  std::shared_ptr<actor_ref> doomed; // released outside the lock
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = names_.find(core.opts.name);
  if (i != names_.end() && i->second->core.get() == &core) {
    doomed = std::move(i->second);
    names_.erase(i);
  }
}

caf::actor process_runtime::manager_of(const std::string& node_id) {
  if (!cluster_)
    throw not_in_a_cluster(node_id);
  return cluster_->manager_of(node_id);
}

void process_runtime::run_as_requester(
  std::function<void(caf::event_based_actor*)> job) {
  requester_.run(std::move(job));
}

void process_runtime::adopt(caf::actor h) {
  std::lock_guard<std::mutex> guard{mtx_};
  adopted_.push_back(std::move(h));
}

} // namespace lumen::detail
