#include "cluster_client.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "embedded_runtime.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

constexpr auto control_timeout = std::chrono::seconds(10);

// Splits "HOST:PORT".
std::pair<std::string, uint16_t> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  return {address.substr(0, colon),
          static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

caf::actor connect(caf::actor_system& sys, const std::string& host,
                   uint16_t port, const std::string& what) {
  auto h = sys.middleman().remote_actor(host, port);
  if (!h)
    throw error("cannot reach " + what + " at " + host + ":"
                + std::to_string(port) + " (" + sys.render(h.error())
                + "); is it running? (lumen start, lumen status)");
  return *h;
}

std::string hello(caf::actor_system& sys, const caf::actor& peer,
                  const std::string& token, const std::string& role,
                  const std::string& what) {
  caf::scoped_actor self{sys};
  std::string id;
  self
    ->request(peer, control_timeout, hello_atom::value, token,
              role, std::string{}, uint16_t{0})
    .receive([&](std::string& x) { id = std::move(x); },
             [&](caf::error& err) {
               throw error(what + " refused this process: "
                           + sys.render(err));
             });
  return id;
}

} // namespace

cluster_client::cluster_client(embedded_runtime& rt,
                               const std::string& head_host,
                               uint16_t head_port, std::string token,
                               const std::string& role)
  : rt_(rt), sys_(rt.system()), token_(std::move(token)) {
  head_ = connect(sys_, head_host, head_port, "the head");
  id_ = hello(sys_, head_, token_, role, "the head");
  managers_.emplace("head", head_);
}

std::vector<node_info> cluster_client::nodes() {
  caf::scoped_actor self{sys_};
  std::vector<node_info> out;
  self->request(head_, control_timeout, nodes_atom::value)
    .receive(
      [&](bytes& b) { out = std::get<0>(decode<std::vector<node_info>>(b)); },
      [&](caf::error& err) {
        throw actor_died("the head did not answer: " + sys_.render(err));
      });
  std::lock_guard<std::mutex> guard{mtx_};
  directory_ = out;
  directory_at_ = std::chrono::steady_clock::now();
  return out;
}

void cluster_client::refresh_directory() {
  bool stale;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stale = directory_.empty()
            || std::chrono::steady_clock::now() - directory_at_
                 > std::chrono::seconds(1);
  }
  if (stale)
    nodes();
}

std::string cluster_client::pick_node(const placement& where) {
  refresh_directory();
  if (where.kind == placement::node) {
    auto known = [&] {
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto& n : directory_)
        if (n.id == where.node_id)
          return true;
      return false;
    };
    if (!known())
      nodes(); // it may have joined since the last look
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (where.kind == placement::node) {
    for (auto& n : directory_)
      if (n.id == where.node_id) {
        if (!n.alive)
          throw actor_died("node " + n.id + " is dead; pick a live one from "
                           "lumen::nodes()");
        return n.id;
      }
    throw usage_error("there is no node '" + where.node_id
                      + "' in the cluster; lumen::nodes() lists them");
  }
  std::vector<const node_info*> live;
  for (auto& n : directory_)
    if (n.alive)
      live.push_back(&n);
  if (live.empty())
    throw actor_died("no live node in the cluster");
  return live[next_spread_++ % live.size()]->id;
}

caf::actor cluster_client::manager_of(const std::string& node_id) {
  std::string address;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = managers_.find(node_id);
    if (i != managers_.end())
      return i->second;
    for (auto& n : directory_)
      if (n.id == node_id)
        address = n.address;
  }
  auto [host, port] = split_address(address);
  auto mgr = connect(sys_, host, port, "node " + node_id);
  hello(sys_, mgr, token_, "driver", "node " + node_id);
  std::lock_guard<std::mutex> guard{mtx_};
  return managers_.emplace(node_id, mgr).first->second;
}

uint64_t cluster_client::track(caf::event_based_actor* self,
                               const caf::actor& peer,
                               std::function<void(const std::string&)> fail) {
  if (monitored_.insert(peer.address()).second)
    self->monitor(peer);
  auto id = next_id_++;
  pending_.emplace(id, pending{peer.address(), std::move(fail)});
  return id;
}

bool cluster_client::settle(uint64_t id) {
  return pending_.erase(id) > 0;
}

void cluster_client::on_down(const caf::down_msg& msg) {
  monitored_.erase(msg.source);
  std::vector<std::function<void(const std::string&)>> fails;
  for (auto i = pending_.begin(); i != pending_.end();) {
    if (i->second.peer == msg.source) {
      fails.push_back(std::move(i->second.fail));
      i = pending_.erase(i);
    } else {
      ++i;
    }
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto i = managers_.begin(); i != managers_.end(); ++i)
      if (i->second.address() == msg.source) {
        for (auto& n : directory_)
          if (n.id == i->first)
            n.alive = false;
        managers_.erase(i);
        break;
      }
  }
  auto why = sys_.render(msg.reason);
  for (auto& f : fails)
    f(why);
}

void cluster_client::submit_task(std::shared_ptr<task_spec> t) {
  auto deps = t->deps;
  when_all_ready(deps, [this, t] { send_task(t, t->max_retries()); });
}

void cluster_client::send_task(std::shared_ptr<task_spec> t,
                               int retries_left) {
  if (auto err = first_error(t->deps)) {
    t->result()->set_error(err);
    return;
  }
  std::string node;
  caf::actor mgr;
  bytes args;
  try {
    node = pick_node(t->where);
    mgr = manager_of(node);
    args = t->encode_args();
  } catch (...) {
    t->result()->set_error(std::current_exception());
    return;
  }
  rt_.run_as_requester([this, t, node, mgr, args = std::move(args),
                        retries_left](caf::event_based_actor* self) {
    auto id = track(self, mgr, [this, t, node,
                                retries_left](const std::string& why) {
      // A task that was spread may run on another node; one pinned to
      // this node cannot.
      if (retries_left > 0 && t->where.kind == placement::spread) {
        send_task(t, retries_left - 1);
        return;
      }
      t->result()->set_error(std::make_exception_ptr(
        actor_died("task " + t->function().name + " was lost with node "
                   + node + " (" + why + ")")));
    });
    self->request(mgr, caf::infinite, task_atom::value, t->function().name,
                  args)
      .then(
        [this, t, id](bool ok, bytes& out) {
          if (!settle(id))
            return;
          if (!ok) {
            t->result()->set_error(decode_error(out));
            return;
          }
          try {
            t->accept_result(out);
          } catch (...) {
            t->result()->set_error(std::current_exception());
          }
        },
        [this, id](caf::error& err) {
          auto i = pending_.find(id);
          if (i == pending_.end())
            return;
          auto fail = std::move(i->second.fail);
          pending_.erase(i);
          fail(sys_.render(err));
        });
  });
}

std::shared_ptr<actor_ref>
cluster_client::spawn_actor(const actor_class_entry& cls,
                            std::unique_ptr<actor_factory> f,
                            const actor_options& opts) {
  auto node = pick_node(opts.where);
  auto mgr = manager_of(node);
  caf::actor handle;
  {
    caf::scoped_actor self{sys_};
    self
      ->request(mgr, control_timeout, spawn_atom::value, cls.name,
                f->constructor_key(), f->encode_args(), opts.name,
                static_cast<int32_t>(opts.max_restarts))
      .receive([&](caf::actor& h) { handle = std::move(h); },
               [&](caf::error& err) {
                 throw usage_error("cannot start " + cls.name + " on node "
                                   + node + ": " + sys_.render(err));
               });
  }
  auto core = std::make_shared<actor_core>(cls, std::move(f), opts);
  core->handle = handle;
  core->node_id = node;
  return rt_.adopt_remote_actor(core);
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
  {
    // Sending under the lock keeps concurrent pumps from reordering calls.
    std::lock_guard<std::mutex> guard{core->outbox_mtx};
    while (!core->outbox_blocked && !core->outbox.empty()) {
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
  try {
    args = c->encode_args();
  } catch (...) {
    c->result()->set_error(std::current_exception());
    return;
  }
  rt_.run_as_requester([this, core, c, args = std::move(args)](
                         caf::event_based_actor* self) {
    auto fail = [core, c](const std::string& why) {
      core->set_death_reason("it or its node " + core->node_id
                             + " went down (" + why + ")");
      c->result()->set_error(core->dropped_call_error(c->method()));
    };
    auto id = track(self, core->handle, fail);
    self->request(core->handle, caf::infinite, call_atom::value,
                  c->method().name, args)
      .then(
        [this, c, id](bool ok, bytes& out) {
          if (!settle(id))
            return;
          if (!ok) {
            c->result()->set_error(decode_error(out));
            return;
          }
          try {
            c->accept_result(out);
          } catch (...) {
            c->result()->set_error(std::current_exception());
          }
        },
        [this, id](caf::error& err) {
          auto i = pending_.find(id);
          if (i == pending_.end())
            return;
          auto f = std::move(i->second.fail);
          pending_.erase(i);
          f(sys_.render(err));
        });
  });
}

} // namespace lumen::detail
