#include "node_manager.hpp"

#include <chrono>
#include <set>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "lumen/cluster.hpp"
#include "lumen/errors.hpp"

#include "actor_host.hpp"
#include "embedded_runtime.hpp"
#include "log.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

/// Builds an actor sent by name from its encoded constructor arguments.
class named_factory final : public actor_factory {
public:
  named_factory(const constructor_entry& ctor, bytes args)
    : ctor_(&ctor), args_(std::move(args)) {
  }

  std::shared_ptr<void> construct() override {
    return ctor_->construct(args_);
  }

  std::string constructor_key() const override {
    return ctor_->key;
  }

  bytes encode_args() const override {
    return args_;
  }

private:
  const constructor_entry* ctor_;
  bytes args_;
};

struct node_entry {
  node_info info;
  caf::actor_addr manager;
};

/// A named actor in the cluster-wide directory (head only).
struct named_entry {
  std::string cls;
  std::string node;
  caf::actor handle;
};

struct manager_state {
  embedded_runtime* rt = nullptr;
  node_settings settings;
  std::string id;
  // The directory (head only).
  std::vector<node_entry> nodes;
  int next_node = 1;
  int next_driver = 1;
  // Actors hosted here for other processes, kept alive until they end.
  std::unordered_map<caf::actor_addr, std::shared_ptr<actor_ref>> hosted;
  // Named actors of the whole cluster (head only).
  std::map<std::string, named_entry> names;
  // The head (nodes only), told about names and actor counts.
  caf::actor head;
};

using manager_actor = caf::stateful_actor<manager_state>;

std::vector<node_info> directory(manager_actor* self) {
  auto& st = self->state;
  std::vector<node_info> out;
  out.push_back({st.id,
                 st.settings.host + ":" + std::to_string(st.rt->port()),
                 true, st.settings.resources,
                 st.settings.host + ":" + std::to_string(st.rt->data_port()),
                 static_cast<int>(st.hosted.size())});
  for (auto& n : st.nodes)
    out.push_back(n.info);
  return out;
}

/// Tells the head how many actors this node hosts (nodes only).
void report_actors(manager_actor* self) {
  auto& st = self->state;
  if (st.head)
    self->send(st.head, actors_atom::value,
               static_cast<int32_t>(st.hosted.size()));
}

/// Registers `name` in the head's directory; false if it is taken.
bool bind_name(manager_actor* self, const std::string& name,
               named_entry entry) {
  auto& st = self->state;
  auto& names = st.names;
  if (auto i = names.find(name); i != names.end()) {
    // A name whose actor's node is dead is free again: a rebuilt actor
    // takes it back even if the old one's down message is still on its way.
    bool on_dead_node = false;
    for (auto& n : st.nodes)
      on_dead_node = on_dead_node || (n.info.id == i->second.node && !n.info.alive);
    if (!on_dead_node)
      return false;
    names.erase(i);
  }
  self->monitor(entry.handle);
  names.emplace(name, std::move(entry));
  return true;
}

caf::behavior node_manager(manager_actor* self, embedded_runtime* rt,
                           node_settings settings) {
  auto& st = self->state;
  st.rt = rt;
  st.settings = std::move(settings);
  st.id = st.settings.is_head ? "head" : "";
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.hosted.erase(msg.source) > 0)
      report_actors(self);
    for (auto i = st.names.begin(); i != st.names.end();)
      i = i->second.handle.address() == msg.source ? st.names.erase(i)
                                                    : std::next(i);
    for (auto& n : st.nodes)
      if (n.manager == msg.source && n.info.alive) {
        n.info.alive = false;
        log_line("node " + n.info.id + " at " + n.info.address
                 + " is dead: " + caf::to_string(msg.reason));
      }
  });
  return {
    [=](hello_atom, const std::string& role, const std::string& host,
        uint16_t port, uint16_t data_port,
        const std::map<std::string, std::string>& resources)
      -> caf::result<std::string> {
      // Every peer passed the gate with the token to get here.
      auto& st = self->state;
      auto sender = self->current_sender();
      if (!sender)
        return caf::make_error(caf::sec::invalid_argument,
                               "hello needs a sender");
      if (!st.settings.is_head || role == "client")
        return st.id.empty() ? std::string{"node"} : st.id;
      if (role == "driver")
        return "driver-" + std::to_string(st.next_driver++);
      auto id = "node-" + std::to_string(st.next_node++);
      auto address = host + ":" + std::to_string(port);
      node_info info{id, address, true, {},
                     host + ":" + std::to_string(data_port)};
      for (auto& [k, v] : resources) {
        try {
          info.resources[k] = std::stod(v);
        } catch (const std::exception&) {
          log_line("node " + id + " sent a bad resource amount: " + k + "="
                   + v);
        }
      }
      st.nodes.push_back({std::move(info), sender->address()});
      self->monitor(caf::actor_cast<caf::actor>(sender));
      log_line("node " + id + " joined from " + address);
      return id;
    },
    [=](join_atom, const caf::actor& head) {
      // Says hello to the head from this actor, so that the head monitors
      // the manager itself and sees this node die with it. Only this
      // process may ask, and only once: a peer that could would make this
      // node trust it.
      auto sender = self->current_sender();
      bool local = sender && sender->node() == self->node();
      auto rp = self->make_response_promise();
      auto& st = self->state;
      if (!local || st.head) {
        rp.deliver(caf::make_error(caf::sec::invalid_argument,
                                   "join is for the node's own process"));
        return rp;
      }
      std::map<std::string, std::string> resources;
      for (auto& [k, v] : st.settings.resources)
        resources[k] = std::to_string(v);
      self
        ->request(head, std::chrono::seconds(10), hello_atom::value,
                  std::string{"node"}, st.settings.host, st.rt->port(),
                  st.rt->data_port(), resources)
        .then(
          [=](std::string& id) mutable {
            self->state.id = id;
            self->state.head = head;
            rp.deliver(std::move(id));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](nodes_atom) -> caf::result<bytes> {
      return encode(directory(self));
    },
    [=](spawn_atom, const std::string& cls_name, const std::string& key,
        bytes& args, const std::string& name, int32_t max_restarts) {
      auto rp = self->make_response_promise();
      auto& st = self->state;
      auto cls = find_actor_class(cls_name);
      auto ctor = find_constructor(key);
      if (cls == nullptr || ctor == nullptr) {
        rp.deliver(caf::make_error(
          caf::sec::cannot_spawn_actor_from_arguments,
          "node " + st.id + " cannot build a " + cls_name
            + " from these arguments: start it with --code-path to a "
              "library that registers the class with LUMEN_ACTOR and "
              "LUMEN_ACTOR_CTOR"));
        return rp;
      }
      actor_options opts;
      opts.name = name;
      opts.max_restarts = max_restarts;
      std::shared_ptr<actor_ref> ref;
      try {
        ref = st.rt->spawn_local_actor(
          *cls, std::make_unique<named_factory>(*ctor, std::move(args)),
          opts);
      } catch (const std::exception& e) {
        rp.deliver(caf::make_error(caf::sec::cannot_spawn_actor_from_arguments,
                                   e.what()));
        return rp;
      }
      auto handle = ref->core->handle;
      auto host = [=](std::shared_ptr<actor_ref> r) mutable {
        auto& st = self->state;
        st.rt->data().expose(handle.id(), r->core);
        self->monitor(handle);
        st.hosted.emplace(handle.address(), std::move(r));
        report_actors(self);
        rp.deliver(handle);
      };
      auto taken = [=]() mutable {
        caf::anon_send_exit(handle, caf::exit_reason::kill);
        rp.deliver(caf::make_error(caf::sec::cannot_spawn_actor_from_arguments,
                                   "an actor named '" + name
                                     + "' already exists in the cluster"));
      };
      if (name.empty()) {
        host(std::move(ref));
      } else if (st.settings.is_head) {
        if (bind_name(self, name, {cls_name, st.id, handle}))
          host(std::move(ref));
        else
          taken();
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
    [=](name_atom, const std::string& name, const std::string& cls,
        const std::string& node, const caf::actor& handle) -> caf::result<bool> {
      return bind_name(self, name, {cls, node, handle});
    },
    [=](lookup_atom, const std::string& name)
      -> caf::result<bool, std::string, std::string, caf::actor> {
      auto& names = self->state.names;
      auto i = names.find(name);
      if (i == names.end())
        return {false, std::string{}, std::string{}, caf::actor{}};
      return {true, i->second.cls, i->second.node, i->second.handle};
    },
    [=](actors_atom, int32_t count) {
      auto sender = self->current_sender();
      if (!sender)
        return;
      for (auto& n : self->state.nodes)
        if (n.manager == sender->address())
          n.info.actors = count;
    },
  };
}

} // namespace

caf::actor spawn_node_manager(caf::actor_system& sys, embedded_runtime& rt,
                              node_settings settings) {
  return sys.spawn(node_manager, &rt, std::move(settings));
}

} // namespace lumen::detail
