#include "node/node_manager.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "lumen/cluster.hpp"
#include "lumen/errors.hpp"

#include "core/actor_host.hpp"
#include "core/log.hpp"
#include "core/process_services.hpp"
#include "head/head_directory.hpp"
#include "head/kv_store.hpp"
#include "node/data_server.hpp"
#include "node/manager_state.hpp"
#include "node/named_work.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

constexpr auto used_report_every = std::chrono::milliseconds(200);

std::vector<node_info> directory(manager_actor* self) {
  auto& st = self->state;
  std::vector<node_info> out;
  auto& ledger = st.rt->resources();
  out.push_back({st.id,
                 st.settings.host + ":" + std::to_string(st.settings.port),
                 true, ledger.total(),
                 st.settings.host + ":" + std::to_string(st.settings.data_port),
                 static_cast<int>(st.hosted.size()), ledger.used()});
  auto& others = st.directory.nodes();
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

/// Tells the head how many actors this node hosts (nodes only).
void report_actors(manager_actor* self) {
  auto& st = self->state;
  if (st.head)
    self->send(st.head, actors_atom::value,
               static_cast<int32_t>(st.hosted.size()));
}

/// Tells the head what this node offers (placement groups' bundles come
/// and go) and what work holds of it, if that changed (nodes only); runs
/// every `used_report_every`, so that a driver's directory, a second old at
/// most, places work where it fits.
void report_used(manager_actor* self) {
  auto& st = self->state;
  auto& ledger = st.rt->resources();
  auto now = std::make_pair(ledger.total(), ledger.used());
  if (st.head && now != st.reported) {
    self->send(st.head, used_atom::value, encode(now.first, now.second));
    st.reported = std::move(now);
  }
  self->delayed_send(self, used_report_every, used_atom::value);
}

/// After rejoining: a head that restarted learns this node's named actors
/// again; a head that gave this node up for dead told their callers they
/// died, so they end here too.
void after_rejoin(manager_actor* self, bool given_up) {
  auto& st = self->state;
  if (given_up && st.settings.exit_when_given_up) {
    log_line("this node was given up for dead by the head (it was paused "
             "or cut off); it exits, as --when-given-up=exit asks");
    ::kill(::getpid(), SIGTERM); // the command's own orderly stop
    return;
  }
  if (given_up) {
    log_line("this node was given up for dead by the head (it was paused "
             "or cut off); it rejoined as " +
             st.id + " and ends the " + std::to_string(st.hosted.size()) +
             " actors it hosted, whose callers were told they died");
    for (auto& [addr, ref] : st.hosted)
      caf::anon_send_exit(ref->core->handle, caf::exit_reason::kill);
    return;
  }
  for (auto& [addr, ref] : st.hosted) {
    auto& core = *ref->core;
    if (core.opts.name.empty())
      continue;
    auto name = core.opts.name;
    self
      ->request(st.head, std::chrono::seconds(10), name_atom::value, name,
                core.cls.name, st.id, core.handle)
      .then(
        [=](bool bound) {
          if (!bound)
            log_line("the restarted head gave the name '" + name +
                     "' to another actor meanwhile; the one here keeps "
                     "running without it");
        },
        [=](caf::error& err) {
          log_line("could not give the name '" + name +
                   "' back to the head: " + caf::to_string(err));
        });
  }
  report_actors(self);
}

caf::behavior node_manager(manager_actor* self, process_services* rt,
                           data_server* data, node_settings settings) {
  auto& st = self->state;
  st.rt = rt;
  st.data = data;
  st.settings = std::move(settings);
  st.id = st.settings.is_head ? "head" : "";
  if (st.settings.is_head)
    st.epoch = st.directory.epoch();
  else
    self->delayed_send(self, used_report_every, used_atom::value);
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.head && msg.source == st.head.address()) {
      log_line("lost the head (" + caf::to_string(msg.reason) +
               "); serving the " + std::to_string(st.hosted.size()) +
               " actors hosted here for callers already connected, and "
               "rejoining when a head is back at its address");
      st.head = nullptr;
      return;
    }
    if (auto i = st.hosted.find(msg.source); i != st.hosted.end()) {
      auto& core = *i->second->core;
      st.data->bury(msg.source.id(),
                    core.describe() + " died: " + core.death_reason());
      st.hosted.erase(i);
      report_actors(self);
    }
    st.directory.on_down(msg.source,
                         msg.reason == caf::exit_reason::user_shutdown
                           ? std::string{}
                           : caf::to_string(msg.reason));
  });
  caf::message_handler own{
    [=](hello_atom, const std::string& role, const std::string& host,
        uint16_t port, uint16_t data_port,
        const std::map<std::string, std::string>& resources,
        const std::string& previous_id,
        uint64_t previous_epoch) -> caf::result<std::string, uint64_t> {
      // Every peer passed the gate with the token to get here.
      auto& st = self->state;
      auto sender = self->current_sender();
      if (!sender)
        return make_control_error(errc::usage, "hello needs a sender");
      if (!st.settings.is_head || role == "client")
        return {st.id.empty() ? std::string{"node"} : st.id, st.epoch};
      if (role == "driver")
        return {st.directory.next_driver(), st.epoch};
      auto [id, fresh] =
        st.directory.admit(host, port, data_port, resources, previous_id,
                           previous_epoch, sender->address());
      if (fresh)
        self->monitor(caf::actor_cast<caf::actor>(sender));
      return {id, st.epoch};
    },
    [=](join_atom, const caf::actor& head) {
      // Says hello to the head from this actor, so that the head monitors
      // the manager itself and sees this node die with it. Only this
      // process may ask: a peer that could would make this node serve
      // another cluster.
      auto sender = self->current_sender();
      bool local = sender && sender->node() == self->node();
      auto rp = self->make_response_promise();
      auto& st = self->state;
      if (!local) {
        rp.deliver(make_control_error(errc::usage,
                                      "join is for the node's own process"));
        return rp;
      }
      std::map<std::string, std::string> resources;
      for (auto& [k, v] : st.rt->resources().total())
        resources[k] = std::to_string(v);
      self
        ->request(head, std::chrono::seconds(10), hello_atom::value,
                  std::string{"node"}, st.settings.host, st.settings.port,
                  st.settings.data_port, resources, st.id, st.epoch)
        .then(
          [=](std::string& id, uint64_t epoch) mutable {
            auto& st = self->state;
            bool rejoined = st.epoch != 0;
            bool given_up = rejoined && epoch == st.epoch && id != st.id;
            bool same = rejoined && epoch == st.epoch && id == st.id;
            st.id = id;
            st.epoch = epoch;
            st.head = head;
            st.reported.reset(); // this head knows nothing yet
            self->monitor(head);
            if (rejoined && !same)
              after_rejoin(self, given_up);
            rp.deliver(std::move(id));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](alive_atom, const std::string& id) {
      // A node asks whether the head still counts it alive; anyone else
      // (empty id) only whether the head answers.
      return id.empty() || self->state.directory.alive(id);
    },
    [=](nodes_atom) -> caf::result<bytes> { return encode(directory(self)); },
    [=](spawn_atom, const std::string& cls_name, const std::string& key,
        bytes& args, const std::string& name, int32_t max_restarts,
        int32_t max_task_retries, int32_t max_concurrency, bool detached,
        const bytes& resources) {
      auto rp = self->make_response_promise();
      auto& st = self->state;
      auto cls = find_actor_class(cls_name);
      auto ctor = find_constructor(key);
      if (cls == nullptr || ctor == nullptr) {
        rp.deliver(make_control_error(
          errc::not_registered,
          "node " + st.id + " cannot build a " + cls_name +
            " from these arguments: start it with --code-path to a "
            "library that registers the class with LUMEN_ACTOR and "
            "LUMEN_ACTOR_CTOR"));
        return rp;
      }
      actor_options opts;
      opts.name = name;
      opts.max_restarts = max_restarts;
      opts.max_task_retries = max_task_retries;
      opts.max_concurrency = max_concurrency;
      opts.detached = detached;
      std::shared_ptr<actor_ref> ref;
      try {
        if (max_concurrency < 1 || max_concurrency > 1024)
          throw usage_error("max_concurrency must be 1 to 1024");
        opts.resources = std::get<0>(decode<resource_request>(resources));
        check_resources(opts.resources, "a spawn request");
        ref = st.rt->spawn_local_actor(
          *cls, std::make_unique<named_factory>(*ctor, std::move(args)), opts);
      } catch (...) {
        rp.deliver(control_refusal(std::current_exception()));
        return rp;
      }
      auto handle = ref->core->handle;
      auto host = [=](std::shared_ptr<actor_ref> r) mutable {
        auto& st = self->state;
        st.data->expose(handle.id(), r->core);
        self->monitor(handle);
        st.hosted.emplace(handle.address(), std::move(r));
        report_actors(self);
        rp.deliver(handle);
      };
      auto taken = [=]() mutable {
        caf::anon_send_exit(handle, caf::exit_reason::kill);
        rp.deliver(make_control_error(errc::name_taken,
                                      "an actor named '" + name +
                                        "' already exists in the cluster; pick "
                                        "another name, or look it up with "
                                        "lumen::get_actor"));
      };
      if (name.empty()) {
        host(std::move(ref));
      } else if (st.settings.is_head) {
        if (bind_name(self, name, {cls_name, st.id, handle}))
          host(std::move(ref));
        else
          taken();
      } else if (!st.head) {
        caf::anon_send_exit(handle, caf::exit_reason::kill);
        rp.deliver(
          make_control_error(errc::head_unreachable,
                             "node " + st.id +
                               " has lost the head, which keeps the cluster's "
                               "names; start the actor without a name, or once "
                               "a head is back at its address"));
      } else {
        self
          ->request(st.head, std::chrono::seconds(10), name_atom::value, name,
                    cls_name, st.id, handle)
          .then(
            [=](bool bound) mutable {
              if (bound)
                host(ref);
              else
                taken();
            },
            [=](caf::error& err) mutable {
              caf::anon_send_exit(handle, caf::exit_reason::kill);
              rp.deliver(std::move(err));
            });
      }
      return rp;
    },
    [=](spawn_typed_atom, const std::string& name, caf::message& args,
        const std::set<std::string>& interface)
      -> caf::result<caf::strong_actor_ptr> {
      auto h = self->system().spawn<caf::actor>(name, std::move(args), nullptr,
                                                true, &interface);
      if (!h)
        return std::move(h.error());
      self->state.rt->adopt(*h); // ends with this node
      return caf::actor_cast<caf::strong_actor_ptr>(*h);
    },
    [=](reserve_atom r, const std::string& gid, int32_t index,
        const bytes& request) {
      return self->delegate(self->state.rt->bundle_keeper(), r, gid, index,
                            request);
    },
    [=](release_atom r, const std::string& gid) {
      return self->delegate(self->state.rt->bundle_keeper(), r, gid);
    },
    [=](used_atom) { report_used(self); },
  };
  return own.or_else(head_handlers(self));
}

} // namespace

caf::actor spawn_node_manager(caf::actor_system& sys, process_services& rt,
                              data_server& data, node_settings settings) {
  return sys.spawn(node_manager, &rt, &data, std::move(settings));
}

} // namespace lumen::detail
