#include "cluster_client.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "address.hpp"
#include "control_link.hpp"
#include "log.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

constexpr auto control_timeout = std::chrono::seconds(10);

// The head answers lookups at once; one that takes longer is as good as
// gone for a caller that must fail within 2 s.
constexpr auto head_timeout = std::chrono::seconds(2);

/// Whether an actor this process created may be rebuilt once more.
bool restartable(const actor_core& core) {
  return core.factory && core.restarts.load() < core.opts.max_restarts;
}

/// Publishes a data-plane reply into the result of `x` (a task or a call):
/// the value, the remote error, or the error of decoding it.
template <class T>
data_client::on_reply publish_reply(std::shared_ptr<T> x) {
  return [x](bool ok, const bytes& out) {
    if (!ok) {
      x->result()->set_error(decode_error(out));
      return;
    }
    try {
      x->accept_result(out);
    } catch (...) {
      x->result()->set_error(std::current_exception());
    }
  };
}

} // namespace

cluster_client::cluster_client(process_services& rt, const address& head,
                               credentials creds, const std::string& role)
  : rt_(rt)
  , sys_(rt.system())
  , creds_(creds)
  , head_(rt, head, std::move(creds), role)
  , directory_(sys_, head_) {
  undertaker_ = std::thread{[this] { run_funerals(); }};
}

void cluster_client::watch_head(
  std::function<void(const caf::actor& head)> on_head_back) {
  head_.watch(std::move(on_head_back));
}

std::vector<node_info> cluster_client::nodes() {
  return directory_.fetch();
}

cluster_client::node_link cluster_client::link_to(const std::string& node_id) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(node_id);
    if (i != links_.end() && !i->second.data->closed())
      return i->second;
  }
  std::string address, data_address;
  if (auto entry = directory_.find(node_id)) {
    address = entry->address;
    data_address = entry->data_address;
  }
  node_link link;
  if (node_id == "head") {
    link.manager = head_.get();
  } else {
    auto where = parse_address(address);
    link.manager = connect_control(sys_, where, creds_, "node " + node_id);
    say_hello(sys_, link.manager, "driver", "node " + node_id);
  }
  link.data =
    std::make_shared<data_client>(data_address, creds_, "node " + node_id);
  link.data->start();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& slot = links_[node_id];
    if (slot.data && !slot.data->closed()) {
      // Another thread connected first: use its link, drop ours.
      auto mine = std::move(link.data);
      auto theirs = slot;
      retired_.push_back(mine);
      mine->fail_all("superseded");
      return theirs;
    }
    if (slot.data)
      retired_.push_back(std::move(slot.data)); // closed, see above
    slot = link;
  }
  // The control plane tells us when the node dies, a cut link included.
  rt_.run_as_requester(
    [mgr = link.manager](caf::event_based_actor* self) { self->monitor(mgr); });
  return link;
}

void cluster_client::stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> guard{funeral_mtx_};
    funeral_cv_.notify_all();
  }
  head_.stop();
  if (undertaker_.joinable())
    undertaker_.join();
}

cluster_client::~cluster_client() {
  stop();
  std::vector<std::shared_ptr<data_client>> all;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [id, link] : links_)
      all.push_back(std::move(link.data));
    links_.clear();
    for (auto& d : retired_)
      all.push_back(std::move(d));
    retired_.clear();
  }
  // After this, no reader thread runs a callback into this object.
  for (auto& d : all)
    if (d)
      d->stop("the runtime shut down");
}

void cluster_client::bury(std::string node_id, std::string why,
                          std::shared_ptr<data_client> data) {
  std::lock_guard<std::mutex> guard{funeral_mtx_};
  funerals_.push_back({std::move(node_id), std::move(why), std::move(data)});
  funeral_cv_.notify_one();
}

void cluster_client::run_funerals() {
  for (;;) {
    funeral f;
    {
      std::unique_lock<std::mutex> guard{funeral_mtx_};
      funeral_cv_.wait(guard,
                       [this] { return stopping_ || !funerals_.empty(); });
      if (stopping_)
        return;
      f = std::move(funerals_.front());
      funerals_.pop_front();
    }
    if (f.data)
      f.data->fail_all("node " + f.node + " went down (" + f.why + ")");
    rescue_actors(f.node, f.why);
  }
}

std::shared_ptr<data_client>
cluster_client::drop_link(const std::string& node_id,
                          const data_client* failed) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = links_.find(node_id);
  if (i == links_.end() ||
      (failed != nullptr && i->second.data.get() != failed))
    return nullptr; // an old connection's news: the node has a new one
  directory_.mark_dead(node_id);
  auto data = i->second.data;
  retired_.push_back(data);
  links_.erase(i);
  return data;
}

void cluster_client::rescue_actors(const std::string& node_id,
                                   const std::string& why) {
  std::vector<std::weak_ptr<actor_core>> cores;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = hosted_.find(node_id);
    if (i == hosted_.end())
      return;
    cores.swap(i->second);
    hosted_.erase(i);
  }
  for (auto& weak : cores) {
    auto core = weak.lock();
    if (!core || core->dead)
      continue;
    auto reason = "its node " + node_id + " went down (" + why + ")";
    if (!restartable(*core) || stopping_) {
      core->set_death_reason(reason);
      core->dead = true;
      std::deque<std::shared_ptr<actor_call>> doomed; // fail outside the lock
      std::lock_guard<std::mutex> guard{core->outbox_mtx};
      doomed.swap(core->outbox);
      core->relocating = false;
      continue;
    }
    {
      std::lock_guard<std::mutex> guard{core->outbox_mtx};
      core->relocating = true;
    }
    try {
      // Its own placement cannot be honoured any more: any live node will do.
      auto node = directory_.pick({placement::spread, {}});
      caf::actor handle;
      // The head may not have seen the old instance die yet, and then
      // refuses its name for a moment; no other refusal passes with time.
      for (int attempt = 0;; ++attempt) {
        try {
          handle = spawn_on(node, *core);
          break;
        } catch (const error& e) {
          if (e.code() != errc::name_taken || attempt == 5 || stopping_)
            throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }
      core->set_death_reason(reason + "; restarted on " + node);
      {
        std::lock_guard<std::mutex> guard{core->outbox_mtx};
        core->handle = handle;
        core->node_id = node;
        core->remote_id = handle.id();
        core->restarts.fetch_add(1);
        core->relocating = false;
      }
      std::lock_guard<std::mutex> guard{mtx_};
      hosted_[node].push_back(core);
    } catch (const std::exception& e) {
      core->set_death_reason(reason + "; no restart: " + e.what());
      core->dead = true;
      std::deque<std::shared_ptr<actor_call>> doomed; // fail outside the lock
      std::lock_guard<std::mutex> guard{core->outbox_mtx};
      doomed.swap(core->outbox);
      core->relocating = false;
    }
    pump(core);
  }
}

void cluster_client::on_down(const caf::down_msg& msg) {
  // The head serves work too: its death also fails what is pending there.
  head_.on_down(msg);
  std::string node;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [id, link] : links_)
      if (link.manager.address() == msg.source)
        node = id;
  }
  if (node.empty())
    return;
  if (auto data = drop_link(node, nullptr))
    bury(node, sys_.render(msg.reason), std::move(data));
}

void cluster_client::submit_task(std::shared_ptr<task_spec> t) {
  auto deps = t->deps;
  when_all_ready(deps, [this, t] { send_task(t, t->max_retries()); });
}

void cluster_client::send_task(std::shared_ptr<task_spec> t, int retries_left) {
  if (auto err = first_error(t->deps)) {
    t->result()->set_error(err);
    return;
  }
  std::string node;
  node_link link;
  bytes args;
  try {
    args = t->encode_args();
  } catch (...) {
    t->result()->set_error(std::current_exception());
    return;
  }
  for (;;) {
    try {
      node = directory_.pick(t->where);
      link = link_to(node);
      break;
    } catch (...) {
      // A spread task tries another node when one cannot be reached.
      if (node.empty() || t->where.kind != placement::spread ||
          retries_left == 0 || stopping_) {
        t->result()->set_error(std::current_exception());
        return;
      }
      if (auto data = drop_link(node, nullptr))
        bury(node, "it cannot be reached", std::move(data));
      --retries_left;
      node.clear();
    }
  }
  auto lost = [this, t, node, retries_left,
               client = link.data.get()](const std::string& why) {
    if (auto data = drop_link(node, client))
      bury(node, why, std::move(data));
    // A task that was spread may run on another node; one pinned to this
    // node cannot.
    if (retries_left > 0 && t->where.kind == placement::spread && !stopping_) {
      send_task(t, retries_left - 1);
      return;
    }
    t->result()->set_error(std::make_exception_ptr(
      actor_died("task " + t->function().name + " was lost with node " + node +
                 ": " + why)));
  };
  if (!link.data->task(t->function().name, args, publish_reply(t), lost))
    lost("the connection to node " + node + " is gone");
}

std::shared_ptr<actor_ref>
cluster_client::spawn_actor(const actor_class_entry& cls,
                            std::unique_ptr<actor_factory> f,
                            const actor_options& opts) {
  auto node = directory_.pick(opts.where);
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  place(core, node, spawn_on(node, *core));
  return rt_.adopt_remote_actor(core);
}

void cluster_client::place(const std::shared_ptr<actor_core>& core,
                           const std::string& node, caf::actor handle) {
  core->remote = true;
  core->node_id = node;
  core->remote_id = handle.id();
  core->handle = std::move(handle);
  std::lock_guard<std::mutex> guard{mtx_};
  hosted_[node].push_back(core);
}

caf::actor cluster_client::manager_of(const std::string& node_id) {
  return link_to(directory_.pick({placement::node, node_id})).manager;
}

std::shared_ptr<actor_core> cluster_client::lookup(const std::string& name) {
  bool found = false;
  std::string cls_name, node;
  caf::actor handle;
  {
    auto h = head_.get();
    caf::scoped_actor self{sys_};
    self->request(h, head_timeout, lookup_atom::value, name)
      .receive(
        [&](bool f, std::string& c, std::string& n, caf::actor& h) {
          found = f;
          cls_name = std::move(c);
          node = std::move(n);
          handle = std::move(h);
        },
        [&](caf::error& err) { throw head_.unreachable(sys_.render(err)); });
  }
  if (!found)
    return nullptr;
  auto cls = find_actor_class(cls_name);
  if (cls == nullptr)
    throw usage_error("the actor named '" + name + "' is a " + cls_name +
                      ", which this program does not register with "
                      "LUMEN_ACTOR");
  actor_options opts;
  opts.name = name;
  auto core = std::make_shared<actor_core>(*cls, nullptr, opts);
  core->borrowed = true;
  directory_.learn_of(node);
  place(core, node, std::move(handle));
  return core;
}

caf::actor cluster_client::spawn_on(const std::string& node,
                                    const actor_core& core) {
  auto mgr = link_to(node).manager;
  caf::actor handle;
  caf::scoped_actor self{sys_};
  self
    ->request(mgr, control_timeout, spawn_atom::value, core.cls.name,
              core.factory->constructor_key(), core.factory->encode_args(),
              core.opts.name, static_cast<int32_t>(core.opts.max_restarts))
    .receive([&](caf::actor& h) { handle = std::move(h); },
             [&](caf::error& err) {
               throw_control_error(sys_, err,
                                   "cannot start " + core.cls.name +
                                     " on node " + node,
                                   errc::unreachable);
             });
  return handle;
}

void cluster_client::submit_call(const std::shared_ptr<actor_core>& core,
                                 std::shared_ptr<actor_call> c) {
  {
    std::lock_guard<std::mutex> guard{core->outbox_mtx};
    core->outbox.push_back(std::move(c));
  }
  pump(core);
}

void cluster_client::pump(const std::shared_ptr<actor_core>& core) {
  std::shared_ptr<actor_call> blocker;
  std::deque<std::shared_ptr<actor_call>> doomed; // failed outside the lock
  {
    // Sending under the lock keeps concurrent pumps from reordering calls.
    std::lock_guard<std::mutex> guard{core->outbox_mtx};
    if (core->dead) {
      doomed.swap(core->outbox);
    } else {
      while (!core->outbox_blocked && !core->relocating &&
             !core->outbox.empty()) {
        auto& head = core->outbox.front();
        bool ready = true;
        for (auto& d : head->deps)
          ready = ready && d->ready();
        if (!ready) {
          core->outbox_blocked = true;
          blocker = head;
          break;
        }
        send_call(core, std::move(head));
        core->outbox.pop_front();
      }
    }
  }
  if (blocker)
    when_all_ready(blocker->deps, [this, core] {
      {
        std::lock_guard<std::mutex> guard{core->outbox_mtx};
        core->outbox_blocked = false;
      }
      pump(core);
    });
}

void cluster_client::send_call(const std::shared_ptr<actor_core>& core,
                               std::shared_ptr<actor_call> c) {
  if (auto err = first_error(c->deps)) {
    c->result()->set_error(err);
    return;
  }
  bytes args;
  node_link link;
  try {
    link = link_to(core->node_id);
    args = c->encode_args();
  } catch (...) {
    c->result()->set_error(std::current_exception());
    return;
  }
  auto node = core->node_id; // the actor may move before the reply
  auto lost = [this, node, core, c,
               client = link.data.get()](const std::string& why) {
    {
      // Decided before the caller hears of the failure: its next call must
      // wait for the rebuilt actor, not chase the dead node.
      std::lock_guard<std::mutex> guard{core->outbox_mtx};
      if (core->node_id == node && !core->relocating) {
        if (restartable(*core) && !stopping_) {
          core->relocating = true;
        } else {
          core->set_death_reason(why);
          core->dead = true;
        }
      }
    }
    if (auto data = drop_link(node, client))
      bury(node, why, std::move(data));
    c->result()->set_error(core->lost_call_error(c->method(), node, why));
  };
  if (!link.data->call(core->remote_id, c->method().name, args,
                       publish_reply(c), lost)) {
    // We hold the outbox lock (see pump): fail this call here, and leave the
    // node's funeral to the requester's thread.
    c->result()->set_error(core->dropped_call_error(c->method()));
    if (auto data = drop_link(node, link.data.get()))
      bury(node, "its connection closed", std::move(data));
  }
}

} // namespace lumen::detail
