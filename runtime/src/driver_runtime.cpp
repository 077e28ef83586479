#include "driver_runtime.hpp"

#include <caf/all.hpp>

namespace lumen::detail {

driver_runtime::driver_runtime(const init_options& opts)
  : local_runtime(opts, true) {}

driver_runtime::driver_runtime(const init_options& opts, const address& head,
                               const credentials& creds,
                               const std::string& hello_role)
  : driver_runtime(opts) {
  try {
    serve_channels(local_host_towards(head), creds);
    connect(head, creds, hello_role, false, nullptr);
  } catch (...) {
    stop();
    throw;
  }
}

driver_runtime::~driver_runtime() {
  stop();
}

void driver_runtime::connect(
  const address& head, const credentials& creds, const std::string& hello_role,
  bool is_head, std::function<void(const caf::actor&)> on_head_back) {
  client_ = std::make_unique<cluster_client>(*this, head, creds, hello_role);
  if (hello_role == "driver")
    set_this_node(client_->id()); // a node or a query has its own name

  on_down([client = client_.get()](const caf::down_msg& msg) {
    client->on_down(msg);
  });
  if (!is_head)
    client_->watch_head(std::move(on_head_back));
}

void driver_runtime::stop_client() {
  if (client_)
    client_->stop();
}

void driver_runtime::stop() {
  stop_channels();
  stop_client();
  // Hosts and the requester use the cluster client until they are done.
  stop_actors();
  client_.reset();
}

bool driver_runtime::here(const placement& where) const {
  return where.kind == placement::local ||
         (where.kind == placement::node && where.node_id == this_node());
}

void driver_runtime::submit_task(std::shared_ptr<task_spec> t) {
  if (here(t->where))
    run_local(std::move(t));
  else
    client_->submit_task(std::move(t));
}

std::shared_ptr<actor_ref>
driver_runtime::spawn_actor(const actor_class_entry& cls,
                            std::unique_ptr<actor_factory> f,
                            const actor_options& opts) {
  if (here(opts.where))
    return spawn_local_actor(cls, std::move(f), opts);
  require_free_name(opts.name);
  return client_->spawn_actor(cls, std::move(f), opts);
}

void driver_runtime::submit_call(const actor_ref& a,
                                 std::shared_ptr<actor_call> c) {
  if (!a.core->remote)
    return local_runtime::submit_call(a, std::move(c));
  c->core = a.core;
  if (a.core->dead)
    return; // c fails with actor_died as it goes out of scope
  client_->submit_call(a.core, std::move(c));
}

std::shared_ptr<actor_ref> driver_runtime::find_actor(const std::string& name) {
  if (auto mine = local_runtime::find_actor(name))
    return mine;
  auto core = client_->lookup(name);
  return core ? register_actor(std::move(core)) : nullptr;
}

std::vector<node_info> driver_runtime::nodes() {
  return client_->nodes();
}

std::optional<std::string>
driver_runtime::find_endpoint(const std::string& name) {
  return client_->endpoints().find(name);
}

kv_store::put_result driver_runtime::kv_put(const std::string& key,
                                            const std::string& value,
                                            bool overwrite) {
  return client_->kv_put(key, value, overwrite);
}

std::optional<std::string> driver_runtime::kv_get(const std::string& key) {
  return client_->kv_get(key);
}

bool driver_runtime::kv_erase(const std::string& key) {
  return client_->kv_erase(key);
}

bool driver_runtime::bind_endpoint(const std::string& name,
                                   const std::string& address) {
  return client_->endpoints().bind(name, address);
}

void driver_runtime::drop_endpoint(const std::string& name) {
  if (client_)
    client_->endpoints().drop(name);
}

caf::actor driver_runtime::manager_of(const std::string& node_id) {
  return client_->manager_of(node_id);
}

std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
driver_runtime::node_connections() {
  return client_ ? client_->node_connections()
                 : local_runtime::node_connections();
}

std::shared_ptr<data_client>
driver_runtime::typed_route(const caf::node_id& nid) {
  return client_ ? client_->typed_route(nid) : nullptr;
}

} // namespace lumen::detail
