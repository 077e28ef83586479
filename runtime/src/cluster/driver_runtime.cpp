#include "cluster/driver_runtime.hpp"

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
    // A one-off query sends no refs, so it serves none.
    if (hello_role == "driver")
      serve_data(local_host_towards(head), head, creds);
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

void driver_runtime::serve_data(const std::string& host, const address& head,
                                const credentials& creds) {
  auto objects = std::make_shared<object_exchange>(creds);
  auto data = std::make_shared<data_server>(*this, host, creds, *objects);
  bool wildcard = host.empty() || host == "0.0.0.0" || host == "::";
  objects->serve_at(
    address{wildcard ? local_host_towards(head) : host, data->port()}
      .to_string());
  object_exchange::install(objects);
  std::lock_guard<std::mutex> guard{serving_mtx_};
  objects_ = std::move(objects);
  data_ = std::move(data);
}

driver_runtime::serving driver_runtime::serving_now() {
  std::lock_guard<std::mutex> guard{serving_mtx_};
  return {objects_, data_};
}

void driver_runtime::stop_data() {
  serving doomed;
  {
    std::lock_guard<std::mutex> guard{serving_mtx_};
    doomed = {std::move(objects_), std::move(data_)};
  }
  if (!doomed.objects)
    return;
  object_exchange::install(nullptr);
  doomed.objects->stop();
}

void driver_runtime::stop_client() {
  if (client_)
    client_->stop();
}

void driver_runtime::stop() {
  stop_channels();
  stop_data();
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
  if (t->where.kind == placement::in_group)
    submit_to_bundle(std::move(t));
  else if (here(t->where))
    run_local(std::move(t));
  else
    client_->submit_task(std::move(t));
}

std::shared_ptr<actor_ref>
driver_runtime::spawn_actor(const actor_class_entry& cls,
                            std::unique_ptr<actor_factory> f,
                            const actor_options& opts) {
  if (opts.where.kind == placement::in_group)
    return spawn_actor(cls, std::move(f), in_bundle_options(opts));
  // A detached actor must outlive this script: a node hosts it.
  if (opts.detached && opts.where.kind == placement::local && !is_node) {
    auto on_a_node = opts;
    on_a_node.where = {placement::spread, {}};
    return spawn_actor(cls, std::move(f), on_a_node);
  }
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
  auto mine = local_runtime::find_actor(name);
  // An actor this process made is known here; one it looked up may have
  // died or been rebuilt elsewhere since, so the head is asked each time,
  // as Ray's get_actor asks its control store.
  if (mine && !mine->core->borrowed)
    return mine;
  auto core = client_->lookup(name);
  if (mine && core && core->handle == mine->core->handle)
    return mine;
  if (mine)
    forget_name(*mine->core);
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

std::shared_ptr<data_client>
driver_runtime::connect_to(const std::string& address) {
  auto now = serving_now();
  if (!now.objects)
    return local_runtime::connect_to(address);
  return now.objects->connection(address);
}

actor_wire driver_runtime::export_actor(const std::shared_ptr<actor_ref>& a) {
  auto now = serving_now();
  if (!now.objects)
    return local_runtime::export_actor(a);
  auto& core = a->core;
  actor_wire w;
  w.cls = core->cls.name;
  w.name = core->opts.name;
  w.id = id_of(*a);
  if (core->remote) {
    std::lock_guard<std::mutex> guard{core->remote->mtx};
    w.node = core->remote->node_id;
    w.host = core->remote->address;
    w.remote_id = core->remote->remote_id;
  } else {
    w.node = this_node();
    w.remote_id = core->handle.id();
    // A script is in no directory: its handles say where to call it.
    if (!is_node)
      w.host = now.objects->address();
    now.data->expose(w.remote_id, core);
    std::lock_guard<std::mutex> guard{exported_mtx_};
    exported_[w.remote_id] = a;
  }
  auto hold = now.objects->hold(a);
  w.holder = std::move(hold.holder);
  w.hold = hold.hold;
  return w;
}

std::shared_ptr<actor_ref> driver_runtime::import_actor(const actor_wire& w) {
  auto now = serving_now();
  if (!now.objects)
    return local_runtime::import_actor(w);
  auto self = now.objects->address();
  bool here = w.host.empty() ? w.node == this_node() : w.host == self;
  if (here) {
    std::shared_ptr<actor_ref> mine;
    {
      std::lock_guard<std::mutex> guard{exported_mtx_};
      auto i = exported_.find(w.remote_id);
      if (i != exported_.end())
        mine = i->second.lock();
    }
    if (mine) {
      now.objects->give_back(w.holder, w.hold);
      return mine;
    }
  }
  // The lease first: if the handle cannot be taken in, its count still
  // goes back.
  ref_wire hold;
  hold.holder = w.holder;
  hold.hold = w.hold;
  auto lease = std::make_shared<borrow>(std::move(hold), now.objects);
  auto cls = find_actor_class(w.cls);
  if (cls == nullptr)
    throw usage_error("a handle to an actor of class " + w.cls +
                      " arrived, which this program does not register with "
                      "LUMEN_ACTOR");
  actor_options opts;
  opts.name = w.name;
  auto core = std::make_shared<actor_core>(*cls, nullptr, opts);
  core->borrowed = true;
  core->lease = std::move(lease);
  // An actor hosted here that this process got from elsewhere (a node's
  // actor that a script created) is called through this process's own
  // data port, like any other.
  auto address = here ? self : w.host;
  client_->adopt_imported(core, w.node, address, w.remote_id, w.id);
  return register_actor(std::move(core));
}

void driver_runtime::kill_elsewhere(actor_core& core) {
  if (client_)
    client_->kill_imported(core);
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
