#include "embedded_runtime.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/errors.hpp"

#include "control_link.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

struct requester_job {
  std::function<void(caf::event_based_actor*)> fn;
};

} // namespace

} // namespace lumen::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::requester_job)

namespace lumen::detail {

namespace {

// The requester issues every request this process makes (typed CAF calls,
// remote tasks and actor calls) and hears when a monitored peer goes down.
caf::behavior requester(caf::event_based_actor* self,
                        std::function<void(const caf::down_msg&)> on_down) {
  self->set_down_handler([=](caf::down_msg& msg) { on_down(msg); });
  return {[=](requester_job& job) { job.fn(self); }};
}

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

/// Has this node's manager say hello to `head`; returns the node's id.
std::string join_head(caf::actor_system& sys, const caf::actor& manager,
                      const caf::actor& head) {
  caf::scoped_actor self{sys};
  std::string id;
  self->request(manager, std::chrono::seconds(15), join_atom::value, head)
    .receive([&](std::string& x) { id = std::move(x); },
             [&](caf::error& err) {
               throw_control_error(sys, err,
                                   "the head did not let this node join",
                                   errc::unreachable);
             });
  return id;
}

} // namespace

embedded_runtime::embedded_runtime(const init_options& opts, cluster_role role)
  : pool_(cpu_count(opts))
  , role_(std::move(role)) {
  // CAF's default of 4 scheduler threads oversubscribes small machines; its
  // threads serve event-based actors only, Lumen actors have their own.
  cfg_.set("scheduler.max-threads", cpu_count(opts));
  for (auto& step : config_steps())
    step(cfg_);
  if (role_.kind != cluster_role::embedded) {
    keep_large_buffers();
    cfg_.load<caf::io::middleman>();
    // Heartbeats let a silent peer (a cut link, not a closed socket) time
    // out within the 2 s we promise for failure detection.
    cfg_.set("middleman.heartbeat-interval",
             caf::timespan{std::chrono::milliseconds(200)});
    cfg_.set("middleman.connection-timeout",
             caf::timespan{std::chrono::milliseconds(1200)});
  }
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  requester_ = sys_->spawn(requester, [this](const caf::down_msg& msg) {
    monitored_.erase(msg.source);
    auto i = watched_.find(msg.source);
    if (i != watched_.end()) {
      auto fails = std::move(i->second);
      watched_.erase(i);
      for (auto& [token, f] : fails)
        f();
    }
    if (client_)
      client_->on_down(msg);
  });
  hosts_running = true;
  try {
    switch (role_.kind) {
      case cluster_role::embedded:
        set_this_node("local");
        break;
      case cluster_role::driver:
        client_ = std::make_unique<cluster_client>(
          *this, role_.head_address, role_.token, role_.hello_role);
        set_this_node(client_->id());
        client_->watch_head(nullptr);
        break;
      case cluster_role::head:
      case cluster_role::node: {
        role_.serve.is_head = role_.kind == cluster_role::head;
        data_ =
          std::make_unique<data_server>(*this, role_.serve.host, role_.token);
        manager_ = spawn_node_manager(*sys_, *this, role_.serve);
        control_gate_ = std::make_unique<gate>(
          role_.serve.host, role_.serve.port, role_.token, "control");
        port_ = control_gate_->port();
        serve_control(*sys_, manager_, *control_gate_);
        // CAF's own spawn service answers any peer that connects, token or
        // not; typed actors are spawned through the node manager instead.
        sys_->registry().erase(caf::atom("SpawnServ"));
        if (role_.kind == cluster_role::head) {
          set_this_node("head");
          role_.head_address = {role_.serve.host, port_};
        } else {
          set_this_node(join_head(*sys_, manager_,
                                  connect_control(*sys_, role_.head_address,
                                                  role_.token, "the head")));
        }
        // Tasks and actors running here may send work to other nodes too.
        client_ = std::make_unique<cluster_client>(*this, role_.head_address,
                                                   role_.token, "client");
        if (role_.kind == cluster_role::node)
          client_->watch_head([this](const caf::actor& head) {
            set_this_node(join_head(*sys_, manager_, head));
          });
        break;
      }
    }
  } catch (...) {
    shutdown_actors();
    throw;
  }
}

embedded_runtime::~embedded_runtime() {
  shutdown_actors();
}

void embedded_runtime::shutdown_actors() {
  if (!sys_)
    return;
  if (client_)
    client_->stop(); // no rejoining, retrying or rebuilding from here on
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
    if (!c->borrowed)
      caf::anon_send_exit(c->handle, caf::exit_reason::kill);
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    names_.clear();
  }
  control_gate_.reset(); // no new peers
  // The manager goes first (no more spawns, which use the data plane);
  // then the data plane closes, failing at once what drivers still wait
  // for on this node.
  if (manager_) {
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    caf::scoped_actor {
      *sys_
      } -> wait_for(manager_);
    manager_ = nullptr;
  }
  data_.reset();
  pool_.stop();
  for (auto& a : adopted_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  adopted_.clear();
  caf::anon_send_exit(requester_, caf::exit_reason::user_shutdown);
  requester_ = nullptr;
  // Hosts and the requester use the cluster client until they are done.
  sys_->await_all_actors_done();
  client_.reset();
  hosts_running = false;
  // Handles users still hold must not reach into the destroyed system.
  for (auto& c : cores)
    c->handle = nullptr;
  sys_.reset();
}

bool embedded_runtime::runs_here(const placement& where) const {
  if (where.kind == placement::local ||
      (where.kind == placement::node && where.node_id == this_node()))
    return true;
  if (client_)
    return false;
  // Without a cluster this process is the only node: spread is trivial,
  // and a named node must be this one.
  if (where.kind == placement::node && where.node_id != this_node())
    throw usage_error("there is no node '" + where.node_id +
                      "': this process is not in a cluster (pass "
                      "--address to lumen::init to join one)");
  return true;
}

void embedded_runtime::submit_task(std::shared_ptr<task_spec> t) {
  if (runs_here(t->where))
    run_local(std::move(t));
  else
    client_->submit_task(std::move(t));
}

void embedded_runtime::run_local(std::shared_ptr<task_spec> t) {
  auto deps = t->deps;
  when_all_ready(
    deps, [this, t = std::move(t)]() mutable { pool_.submit(std::move(t)); });
}

std::shared_ptr<actor_ref>
embedded_runtime::spawn_actor(const actor_class_entry& cls,
                              std::unique_ptr<actor_factory> f,
                              const actor_options& opts) {
  if (runs_here(opts.where))
    return spawn_local_actor(cls, std::move(f), opts);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    require_free_name(opts.name);
  }
  return client_->spawn_actor(cls, std::move(f), opts);
}

void embedded_runtime::require_free_name(const std::string& name) const {
  if (!name.empty() && names_.count(name) > 0)
    throw usage_error("an actor named '" + name +
                        "' already exists; pick another name, or look it up "
                        "with lumen::get_actor<C>(\"" +
                        name + "\")",
                      errc::name_taken);
}

std::shared_ptr<actor_ref>
embedded_runtime::spawn_local_actor(const actor_class_entry& cls,
                                    std::unique_ptr<actor_factory> f,
                                    const actor_options& opts) {
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    require_free_name(opts.name);
    core->handle = spawn_host(*sys_, core);
  }
  return register_actor(std::move(core));
}

std::shared_ptr<actor_ref>
embedded_runtime::adopt_remote_actor(std::shared_ptr<actor_core> core) {
  return register_actor(std::move(core));
}

std::shared_ptr<actor_ref>
embedded_runtime::register_actor(std::shared_ptr<actor_core> core) {
  core->on_dead = [this](actor_core& c) { forget_name(c); };
  auto ref = std::make_shared<actor_ref>(core);
  std::lock_guard<std::mutex> guard{mtx_};
  if (!core->opts.name.empty())
    names_.emplace(core->opts.name, ref);
  // Forget actors that are gone, so that the list stays as long as the
  // number of live actors.
  actors_.erase(std::remove_if(actors_.begin(), actors_.end(),
                               [](auto& w) { return w.expired(); }),
                actors_.end());
  actors_.push_back(core);
  return ref;
}

void embedded_runtime::submit_call(const actor_ref& a,
                                   std::shared_ptr<actor_call> c) {
  c->core = a.core;
  if (a.core->dead)
    return; // c fails with actor_died as it goes out of scope
  if (a.core->remote) {
    client_->submit_call(a.core, std::move(c));
    return;
  }
  c->generation = a.core->generation.load();
  send_call(*a.core, std::move(c));
}

std::shared_ptr<actor_ref>
embedded_runtime::find_actor(const std::string& name) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = names_.find(name);
    if (i != names_.end())
      return i->second;
  }
  if (!client_)
    return nullptr;
  auto core = client_->lookup(name);
  return core ? register_actor(std::move(core)) : nullptr;
}

void embedded_runtime::kill_actor(const actor_ref& a) {
  auto& core = *a.core;
  if (core.dead)
    return;
  // The reason goes first: whoever sees `dead` must find it.
  core.set_death_reason("it was killed by lumen::kill");
  if (core.dead.exchange(true))
    return;
  forget_name(core);
  caf::actor handle;
  {
    // A remote actor's handle changes when it is rebuilt elsewhere.
    std::lock_guard<std::mutex> guard{a.core->outbox_mtx};
    handle = core.handle;
  }
  caf::anon_send_exit(handle, caf::exit_reason::kill);
}

void embedded_runtime::forget_name(const actor_core& core) {
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

std::vector<node_info> embedded_runtime::nodes() {
  if (client_)
    return client_->nodes();
  std::string address;
  if (port_ != 0)
    address = role_.serve.host + ":" + std::to_string(port_);
  std::string data_address;
  if (data_)
    data_address = role_.serve.host + ":" + std::to_string(data_->port());
  return {
    node_info{this_node(), address, true, role_.serve.resources, data_address}};
}

void embedded_runtime::run_as_requester(
  std::function<void(caf::event_based_actor*)> job) {
  caf::anon_send(requester_, requester_job{std::move(job)});
}

caf::actor embedded_runtime::manager_of(const std::string& node_id) {
  if (!client_)
    throw usage_error("there is no node '" + node_id +
                      "': this process is not in a cluster (pass "
                      "--address to lumen::init to join one)");
  return client_->manager_of(node_id);
}

uint64_t embedded_runtime::watch(caf::event_based_actor* self,
                                 const caf::actor& whom,
                                 std::function<void()> fail) {
  auto& fails = watched_[whom.address()];
  if (monitored_.insert(whom.address()).second)
    self->monitor(whom); // once: each monitor delivers its own down_msg
  auto token = next_watch_++;
  fails.emplace(token, std::move(fail));
  return token;
}

void embedded_runtime::unwatch(const caf::actor_addr& whom, uint64_t token) {
  auto i = watched_.find(whom);
  if (i == watched_.end())
    return;
  i->second.erase(token);
  // The monitor stays: demonitoring here could race a down_msg in flight,
  // and the next watch of this actor reuses it.
}

void embedded_runtime::adopt(caf::actor h) {
  std::lock_guard<std::mutex> guard{mtx_};
  adopted_.push_back(std::move(h));
}

} // namespace lumen::detail
