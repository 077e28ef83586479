#include "node_manager.hpp"

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "lumen/cluster.hpp"
#include "lumen/errors.hpp"

#include "actor_host.hpp"
#include "embedded_runtime.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

/// A task sent by name: runs the registered invoker on the encoded
/// arguments. Retries are the sender's business.
class named_task final : public task_spec {
public:
  named_task(std::shared_ptr<value_state<bytes>> st, const function_entry& e,
             bytes args)
    : task_spec(st, e, 0, false), st_(std::move(st)), args_(std::move(args)) {
  }

  bytes encode_args() override {
    return args_;
  }

  void accept_result(const bytes& out) override {
    st_->set_value(out);
  }

protected:
  void attempt() override {
    st_->set_value(function().invoke(function().fn, args_));
  }

private:
  std::shared_ptr<value_state<bytes>> st_;
  bytes args_;
};

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

struct manager_state {
  embedded_runtime* rt = nullptr;
  node_settings settings;
  std::string id;
  std::set<caf::node_id> trusted;
  // The directory (head only).
  std::vector<node_entry> nodes;
  int next_node = 1;
  int next_driver = 1;
  // Tasks running in the pool, by id, until their result is delivered.
  uint64_t next_task = 0;
  std::unordered_map<uint64_t, caf::response_promise> running;
  // Actors hosted here for other processes, kept alive until they end.
  std::unordered_map<caf::actor_addr, std::shared_ptr<actor_ref>> hosted;
};

using manager_actor = caf::stateful_actor<manager_state>;

bool trusted(manager_actor* self) {
  auto sender = self->current_sender();
  return sender
         && (sender->node() == self->node()
             || self->state.trusted.count(sender->node()) > 0);
}

caf::error untrusted() {
  return caf::make_error(caf::sec::request_receiver_down,
                         "refused: say hello with the cluster token first");
}

std::string describe(const caf::strong_actor_ptr& who) {
  return who ? caf::to_string(who->node()) : std::string{"an anonymous peer"};
}

std::vector<node_info> directory(manager_actor* self) {
  auto& st = self->state;
  std::vector<node_info> out;
  out.push_back({st.id,
                 st.settings.host + ":" + std::to_string(st.rt->port()),
                 true, st.settings.resources});
  for (auto& n : st.nodes)
    out.push_back(n.info);
  return out;
}

caf::behavior node_manager(manager_actor* self, embedded_runtime* rt,
                           node_settings settings) {
  auto& st = self->state;
  st.rt = rt;
  st.settings = std::move(settings);
  st.id = st.settings.is_head ? "head" : "";
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    st.hosted.erase(msg.source);
    for (auto& n : st.nodes)
      if (n.manager == msg.source && n.info.alive) {
        n.info.alive = false;
        log_line("node " + n.info.id + " at " + n.info.address
                 + " is dead: " + caf::to_string(msg.reason));
      }
  });
  return {
    [=](hello_atom, const std::string& token, const std::string& role,
        const std::string& host, uint16_t port)
      -> caf::result<std::string> {
      auto& st = self->state;
      auto sender = self->current_sender();
      if (token != st.settings.token) {
        log_line("refused " + role + " from " + describe(sender)
                 + ": wrong cluster token");
        return caf::make_error(caf::sec::invalid_argument,
                               "wrong cluster token: use the token file the "
                               "head wrote (lumen start --head prints it)");
      }
      if (!sender)
        return caf::make_error(caf::sec::invalid_argument,
                               "hello needs a sender");
      st.trusted.insert(sender->node());
      if (!st.settings.is_head || role == "client")
        return st.id.empty() ? std::string{"node"} : st.id;
      if (role == "driver")
        return "driver-" + std::to_string(st.next_driver++);
      auto id = "node-" + std::to_string(st.next_node++);
      auto address = host + ":" + std::to_string(port);
      st.nodes.push_back({{id, address, true, {}}, sender->address()});
      self->monitor(caf::actor_cast<caf::actor>(sender));
      log_line("node " + id + " joined from " + address);
      return id;
    },
    [=](join_atom, const caf::actor& head, const std::string& token) {
      // Says hello to the head from this actor, so that the head monitors
      // the manager itself and sees this node die with it.
      auto rp = self->make_response_promise();
      auto& st = self->state;
      self
        ->request(head, std::chrono::seconds(10), hello_atom::value, token,
                  std::string{"node"}, st.settings.host, st.rt->port())
        .then(
          [=](std::string& id) mutable {
            self->state.id = id;
            self->state.trusted.insert(head.node());
            rp.deliver(std::move(id));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](nodes_atom) -> caf::result<bytes> {
      if (!trusted(self))
        return untrusted();
      return encode(directory(self));
    },
    [=](task_atom, const std::string& fn, bytes& args) {
      // Checked first: making the promise takes the sender out of the
      // current message.
      bool ok = trusted(self);
      auto rp = self->make_response_promise();
      if (!ok) {
        rp.deliver(untrusted());
        return rp;
      }
      auto& st = self->state;
      auto entry = find_function(fn);
      if (entry == nullptr) {
        rp.deliver(false, encode_error(std::make_exception_ptr(usage_error(
                            "node " + st.id + " has no remote function '" + fn
                            + "': start it with --code-path to a library "
                              "that registers it with LUMEN_REMOTE"))));
        return rp;
      }
      auto id = st.next_task++;
      st.running.emplace(id, rp);
      auto result = std::make_shared<value_state<bytes>>();
      auto me = caf::actor_cast<caf::actor>(self);
      result->on_ready([me, id, result] {
        if (result->failed())
          caf::anon_send(me, done_atom::value, id, false,
                         encode_error(result->error()));
        else
          caf::anon_send(me, done_atom::value, id, true, result->value());
      });
      st.rt->run_local(
        std::make_shared<named_task>(result, *entry, std::move(args)));
      return rp;
    },
    [=](done_atom, uint64_t id, bool ok, bytes& out) {
      auto& running = self->state.running;
      auto i = running.find(id);
      if (i == running.end())
        return;
      i->second.deliver(ok, std::move(out));
      running.erase(i);
    },
    [=](spawn_atom, const std::string& cls_name, const std::string& key,
        bytes& args, const std::string& name,
        int32_t max_restarts) -> caf::result<caf::actor> {
      if (!trusted(self))
        return untrusted();
      auto& st = self->state;
      auto cls = find_actor_class(cls_name);
      auto ctor = find_constructor(key);
      if (cls == nullptr || ctor == nullptr)
        return caf::make_error(
          caf::sec::cannot_spawn_actor_from_arguments,
          "node " + st.id + " cannot build a " + cls_name
            + " from these arguments: start it with --code-path to a "
              "library that registers the class with LUMEN_ACTOR and "
              "creates it the same way");
      actor_options opts;
      opts.name = name;
      opts.max_restarts = max_restarts;
      try {
        auto ref = st.rt->spawn_local_actor(
          *cls, std::make_unique<named_factory>(*ctor, std::move(args)),
          opts);
        auto handle = ref->core->handle;
        self->monitor(handle);
        st.hosted.emplace(handle.address(), std::move(ref));
        return handle;
      } catch (const std::exception& e) {
        return caf::make_error(caf::sec::cannot_spawn_actor_from_arguments,
                               e.what());
      }
    },
  };
}

} // namespace

caf::actor spawn_node_manager(caf::actor_system& sys, embedded_runtime& rt,
                              node_settings settings) {
  return sys.spawn(node_manager, &rt, std::move(settings));
}

void log_line(const std::string& text) {
  static std::mutex mtx;
  auto now = std::chrono::system_clock::to_time_t(
    std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S",
                std::localtime(&now));
  std::lock_guard<std::mutex> guard{mtx};
  std::cerr << stamp << " lumen: " << text << std::endl;
}

} // namespace lumen::detail
