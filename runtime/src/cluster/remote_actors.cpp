#include "cluster/remote_actors.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <caf/all.hpp>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

constexpr auto control_timeout = std::chrono::seconds(10);

/// Whether an actor this process created may be rebuilt once more.
bool restartable(const actor_core& core) {
  return core.factory && core.restarts.load() < core.opts.max_restarts;
}

} // namespace

remote_actors::remote_actors(process_services& rt, node_links& links,
                             directory_cache& directory,
                             const std::atomic<bool>& stopping)
  : rt_(rt)
  , links_(links)
  , directory_(directory)
  , stopping_(stopping) {}

void remote_actors::rescue(const std::string& node_id, const std::string& why) {
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
      std::lock_guard<std::mutex> guard{core->remote->mtx};
      doomed.swap(core->remote->outbox);
      core->remote->relocating = false;
      continue;
    }
    {
      std::lock_guard<std::mutex> guard{core->remote->mtx};
      core->remote->relocating = true;
    }
    try {
      // Its own placement cannot be honoured any more: any live node with
      // its resources will do.
      auto node =
        directory_.pick({placement::spread, {}}, core->opts.resources);
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
        std::lock_guard<std::mutex> guard{core->remote->mtx};
        core->handle = handle;
        core->remote->node_id = node;
        core->remote->remote_id = handle.id();
        core->restarts.fetch_add(1);
        core->remote->relocating = false;
      }
      std::lock_guard<std::mutex> guard{mtx_};
      hosted_[node].push_back(core);
    } catch (const std::exception& e) {
      core->set_death_reason(reason + "; no restart: " + e.what());
      core->dead = true;
      std::deque<std::shared_ptr<actor_call>> doomed; // fail outside the lock
      std::lock_guard<std::mutex> guard{core->remote->mtx};
      doomed.swap(core->remote->outbox);
      core->remote->relocating = false;
    }
    pump(core);
  }
}

std::shared_ptr<actor_ref>
remote_actors::spawn(const actor_class_entry& cls,
                     std::unique_ptr<actor_factory> f,
                     const actor_options& opts) {
  auto node = directory_.pick(opts.where, opts.resources);
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  place(core, node, spawn_on(node, *core));
  return rt_.adopt_remote_actor(core);
}

void remote_actors::place(const std::shared_ptr<actor_core>& core,
                          const std::string& node, caf::actor handle) {
  core->remote = std::make_unique<remote_proxy>();
  core->remote->node_id = node;
  core->remote->remote_id = handle.id();
  core->handle = std::move(handle);
  std::lock_guard<std::mutex> guard{mtx_};
  // Looked-up actors come and go with each get_actor: the gone ones are
  // dropped here, so that the list stays as long as the live ones.
  auto& here = hosted_[node];
  here.erase(std::remove_if(here.begin(), here.end(),
                            [](auto& w) { return w.expired(); }),
             here.end());
  here.push_back(core);
}

caf::actor remote_actors::spawn_on(const std::string& node,
                                   const actor_core& core) {
  auto mgr = links_.get(node).manager;
  caf::actor handle;
  caf::scoped_actor self{rt_.system()};
  self
    ->request(mgr, control_timeout, spawn_atom::value, core.cls.name,
              core.factory->constructor_key(), core.factory->encode_args(),
              core.opts.name, static_cast<int32_t>(core.opts.max_restarts),
              static_cast<int32_t>(core.opts.max_task_retries),
              static_cast<int32_t>(core.opts.max_concurrency),
              core.opts.detached, encode(core.opts.resources))
    .receive([&](caf::actor& h) { handle = std::move(h); },
             [&](caf::error& err) {
               throw_control_error(rt_.system(), err,
                                   "cannot start " + core.cls.name +
                                     " on node " + node,
                                   errc::unreachable);
             });
  return handle;
}

void remote_actors::adopt(const std::shared_ptr<actor_core>& core,
                          const std::string& node, const std::string& address,
                          uint64_t remote_id, const std::string& actor_id) {
  core->remote = std::make_unique<remote_proxy>();
  core->remote->node_id = node;
  core->remote->address = address;
  core->remote->remote_id = remote_id;
  core->remote->actor_id = actor_id;
  if (!address.empty())
    return; // no node's death concerns it; its connection's end does
  std::lock_guard<std::mutex> guard{mtx_};
  hosted_[node].push_back(core);
}

std::shared_ptr<data_client> remote_actors::route(const std::string& node,
                                                  const std::string& address) {
  if (!address.empty())
    return rt_.connect_to(address);
  return links_.for_work(node);
}

void remote_actors::kill(actor_core& core) {
  std::string node, address;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> guard{core.remote->mtx};
    node = core.remote->node_id;
    address = core.remote->address;
    id = core.remote->remote_id;
  }
  try {
    route(node, address)
      ->kill(
        id, [](reply_status, const std::shared_ptr<bytes>&) {},
        [](const std::string&) {});
  } catch (const std::exception&) {
    // Its host is gone, and the actor with it.
  }
}

void remote_actors::submit_call(const std::shared_ptr<actor_core>& core,
                                std::shared_ptr<actor_call> c) {
  {
    std::lock_guard<std::mutex> guard{core->remote->mtx};
    c->seq = ++core->remote->submitted;
    core->remote->outbox.push_back(std::move(c));
  }
  pump(core);
}

void remote_actors::pump(const std::shared_ptr<actor_core>& core) {
  // One thread at a time sends (the `sending` flag), in outbox order; it
  // encodes and sends outside the lock, since encoding an argument may
  // read another actor's proxy (a handle passed along) or connect.
  for (;;) {
    std::shared_ptr<actor_call> next, blocker;
    std::deque<std::shared_ptr<actor_call>> doomed; // failed outside the lock
    destination to;
    {
      std::lock_guard<std::mutex> guard{core->remote->mtx};
      auto& proxy = *core->remote;
      if (proxy.sending)
        return; // the thread sending now sends this call too
      if (core->dead) {
        doomed.swap(proxy.outbox);
      } else if (!proxy.outbox_blocked && !proxy.relocating &&
                 !proxy.outbox.empty()) {
        auto& head = proxy.outbox.front();
        bool ready = true;
        for (auto& d : head->deps)
          ready = ready && d->ready();
        if (ready) {
          next = std::move(head);
          proxy.outbox.pop_front();
          proxy.sending = true;
          to = {proxy.node_id, proxy.address, proxy.remote_id};
        } else {
          proxy.outbox_blocked = true;
          blocker = head;
        }
      }
    }
    if (blocker)
      when_all_ready(blocker->deps, [this, core] {
        {
          std::lock_guard<std::mutex> guard{core->remote->mtx};
          core->remote->outbox_blocked = false;
        }
        pump(core);
      });
    if (!next)
      return;
    send_call(core, std::move(next), to);
    std::lock_guard<std::mutex> guard{core->remote->mtx};
    core->remote->sending = false;
  }
}

void remote_actors::send_call(const std::shared_ptr<actor_core>& core,
                              std::shared_ptr<actor_call> c,
                              const destination& to) {
  if (c->cancel_requested())
    return; // its result failed when it was cancelled
  if (auto err = first_error(c->deps)) {
    c->result()->set_error(err);
    return;
  }
  bytes args;
  std::shared_ptr<data_client> data;
  // A script's actor is reached at its address; a node's through the
  // node's link, which follows the node's life.
  bool by_address = !to.address.empty();
  try {
    data = route(to.node, to.address);
    args = c->encode_args();
  } catch (...) {
    c->result()->set_error(std::current_exception());
    return;
  }
  auto node = to.node; // the actor may move before the reply
  auto lost = [this, node, core, c, by_address,
               client = data.get()](const std::string& why) {
    bool retried = false;
    {
      // Decided before the caller hears of the failure: its next call must
      // wait for the rebuilt actor, not chase the dead node.
      std::lock_guard<std::mutex> guard{core->remote->mtx};
      auto& proxy = *core->remote;
      if (proxy.node_id == node && !proxy.relocating) {
        if (restartable(*core) && !stopping_) {
          proxy.relocating = true;
        } else {
          core->set_death_reason(why);
          core->dead = true;
        }
      }
      // A call the rebuilt (or rebuilding) actor may take goes back among
      // the waiting ones, before every call submitted after it.
      bool rebuilt = proxy.relocating || proxy.node_id != node;
      if (rebuilt && !core->dead && !c->cancel_requested() &&
          retry_on_new_instance(*c, 1)) {
        auto at = proxy.outbox.begin();
        while (at != proxy.outbox.end() && (*at)->seq < c->seq)
          ++at;
        proxy.outbox.insert(at, c);
        retried = true;
      }
    }
    if (!by_address)
      links_.lose(node, client, why);
    if (retried)
      pump(core); // waits, if the actor is still being rebuilt
    else
      c->result()->set_error(core->lost_call_error(c->method(), node, why));
  };
  auto id =
    data->call(to.remote_id, c->method().name, args, publish_reply(c), lost);
  if (id != 0) {
    c->forward_cancel(cancel_on(data, id));
  } else {
    // Fail this call here, and leave the node's funeral to the requester's
    // thread.
    c->result()->set_error(core->dropped_call_error(c->method()));
    if (!by_address)
      links_.lose(node, data.get(), "its connection closed");
  }
}

} // namespace lumen::detail
