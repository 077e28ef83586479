#include "node/node_runtime.hpp"

#include <cstdlib>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "transport/control_link.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

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

node_runtime::node_runtime(const init_options& opts, node_settings serve,
                           const address& head, const credentials& creds)
  : driver_runtime(opts)
  , is_head_(serve.is_head) {
  is_node = true;
  try {
    control_gate_ =
      std::make_unique<gate>(serve.host, serve.port, creds, "control");
    serve_data(serve.host, serve.is_head ? address{serve.host, 0} : head,
               creds);
    serve_channels(serve.host, creds);
    serve.port = control_gate_->port();
    serve.data_port = data().port();
    manager_ = spawn_node_manager(system(), *this, data(), serve);
    serve_control(system(), manager_, *control_gate_);
    // CAF's own spawn service answers any peer it hears from; typed actors
    // are spawned through the node manager instead.
    system().registry().erase(caf::atom("SpawnServ"));
    std::function<void(const caf::actor&)> rejoin;
    if (serve.is_head) {
      set_this_node("head");
    } else {
      set_this_node(
        join_head(system(), manager_,
                  connect_control(system(), head, creds, "the head")));
      rejoin = [this](const caf::actor& back) {
        set_this_node(join_head(system(), manager_, back));
      };
    }
    // Tasks and actors running here may send work to other nodes too.
    connect(serve.is_head ? address{serve.host, serve.port} : head, creds,
            "client", serve.is_head, std::move(rejoin));
  } catch (...) {
    stop_serving();
    throw;
  }
}

node_runtime::~node_runtime() {
  stop_client();
  stop_serving();
}

void node_runtime::force_end(const std::string& why) {
  if (is_head_) {
    driver_runtime::force_end(why);
    return;
  }
  // The task's thread cannot be stopped, nor this runtime shut down around
  // it: the process ends as a crash does, and the cluster's failure
  // detection tells everyone who had work here.
  log_line("node " + this_node() + " ends now: " + why);
  std::_Exit(1);
}

void node_runtime::stop_serving() {
  if (control_gate_)
    control_gate_->close(); // no new peers
  // The manager goes first (no more spawns, which use the data plane);
  // then the data plane closes.
  if (manager_) {
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    caf::scoped_actor waiter{system()};
    waiter->wait_for(manager_);
    manager_ = nullptr;
  }
  stop_data();
  control_gate_.reset(); // and the TLS links it relays
}

} // namespace lumen::detail
