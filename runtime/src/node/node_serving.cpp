#include "node/node_serving.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/errors.hpp"

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

node_serving::node_serving(process_services& rt, data_server& data,
                           node_settings serve, const address& head,
                           const credentials& creds)
  : rt_(rt)
  , is_head_(serve.is_head) {
  auto& sys = rt.system();
  control_gate_ =
    std::make_unique<gate>(serve.host, serve.port, creds, "control");
  serve.port = control_gate_->port();
  serve.data_port = data.port();
  manager_ = spawn_node_manager(sys, rt, data, serve);
  try {
    serve_control(sys, manager_, *control_gate_);
    // CAF's own spawn service answers any peer it hears from; typed actors
    // are spawned through the node manager instead.
    sys.registry().erase(caf::atom("SpawnServ"));
    if (is_head_)
      set_this_node("head");
    else
      set_this_node(join_head(sys, manager_,
                              connect_control(sys, head, creds, "the head")));
  } catch (...) {
    stop();
    throw;
  }
}

node_serving::~node_serving() {
  stop();
}

uint16_t node_serving::port() const {
  return control_gate_->port();
}

std::function<void(const caf::actor&)> node_serving::rejoin() {
  return [this](const caf::actor& back) {
    set_this_node(join_head(rt_.system(), manager_, back));
  };
}

void node_serving::stop() {
  control_gate_->close(); // no new peers
  if (!manager_)
    return;
  caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
  caf::scoped_actor waiter{rt_.system()};
  waiter->wait_for(manager_);
  manager_ = nullptr;
}

} // namespace lumen::detail
