#include "embedded_runtime.hpp"

#include <algorithm>
#include <thread>

#include <caf/all.hpp>

#include "lumen/errors.hpp"

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

caf::behavior requester(caf::event_based_actor* self) {
  return {[=](requester_job& job) { job.fn(self); }};
}

size_t cpu_count(const init_options& opts) {
  if (opts.num_cpus > 0)
    return static_cast<size_t>(opts.num_cpus);
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

embedded_runtime::embedded_runtime(const init_options& opts)
  : pool_(cpu_count(opts)) {
  // CAF's default of 4 scheduler threads oversubscribes small machines; its
  // threads serve event-based actors only, Lumen actors have their own.
  cfg_.set("scheduler.max-threads", cpu_count(opts));
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  requester_ = sys_->spawn(requester);
  hosts_running = true;
}

embedded_runtime::~embedded_runtime() {
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
  caf::anon_send_exit(requester_, caf::exit_reason::user_shutdown);
  requester_ = nullptr;
  sys_->await_all_actors_done();
  hosts_running = false;
  // Handles users still hold must not reach into the destroyed system.
  for (auto& c : cores)
    c->handle = nullptr;
  sys_.reset();
}

void embedded_runtime::submit_task(std::shared_ptr<task_spec> t) {
  auto deps = t->deps;
  when_all_ready(deps, [this, t = std::move(t)]() mutable {
    pool_.submit(std::move(t));
  });
}

std::shared_ptr<actor_ref>
embedded_runtime::spawn_actor(const actor_class_entry& cls,
                              std::unique_ptr<actor_factory> f,
                              const actor_options& opts) {
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  core->on_dead = [this](actor_core& c) { forget_name(c); };
  std::shared_ptr<actor_ref> ref;
  std::lock_guard<std::mutex> guard{mtx_};
  if (!opts.name.empty() && names_.count(opts.name) > 0)
    throw usage_error("an actor named '" + opts.name
                      + "' already exists; pick another name, or look it up "
                        "with lumen::get_actor<C>(\""
                      + opts.name + "\")");
  core->handle = spawn_host(*sys_, core);
  ref = std::make_shared<actor_ref>(core);
  if (!opts.name.empty())
    names_.emplace(opts.name, ref);
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
  c->generation = a.core->generation.load();
  send_call(*a.core, std::move(c));
}

std::shared_ptr<actor_ref>
embedded_runtime::find_actor(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = names_.find(name);
  return i == names_.end() ? nullptr : i->second;
}

void embedded_runtime::kill_actor(const actor_ref& a) {
  auto& core = *a.core;
  if (core.dead.exchange(true))
    return;
  core.set_death_reason("it was killed by lumen::kill");
  forget_name(core);
  caf::anon_send_exit(core.handle, caf::exit_reason::kill);
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

void embedded_runtime::run_as_requester(
  std::function<void(caf::event_based_actor*)> job) {
  caf::anon_send(requester_, requester_job{std::move(job)});
}

void embedded_runtime::adopt(caf::actor h) {
  std::lock_guard<std::mutex> guard{mtx_};
  adopted_.push_back(std::move(h));
}

} // namespace lumen::detail
