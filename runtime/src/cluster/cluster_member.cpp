#include "cluster/cluster_member.hpp"

#include <cstdlib>

#include <caf/all.hpp>

#include "core/log.hpp"
#include "node/node_serving.hpp"

namespace lumen::detail {

cluster_member::cluster_member(process_services& rt)
  : rt_(rt) {}

cluster_member::~cluster_member() {
  stop();
}

void cluster_member::connect(const address& head, const credentials& creds,
                             const std::string& hello_role) {
  client_ = std::make_unique<cluster_client>(rt_, head, creds, hello_role);
  if (hello_role == "driver")
    set_this_node(client_->id()); // a node or a query has its own name
}

void cluster_member::watch_head(
  std::function<void(const caf::actor&)> on_head_back) {
  client_->watch_head(std::move(on_head_back));
}

std::function<void(const caf::actor&)> cluster_member::rejoin() {
  return serving_->rejoin();
}

void cluster_member::serve_data(const std::string& host, const address& head,
                                const credentials& creds) {
  auto objects = std::make_shared<object_exchange>(creds);
  auto data = std::make_shared<data_server>(rt_, host, creds, *objects);
  bool wildcard = host.empty() || host == "0.0.0.0" || host == "::";
  objects->serve_at(
    address{wildcard ? local_host_towards(head) : host, data->port()}
      .to_string());
  object_exchange::install(objects);
  std::lock_guard<std::mutex> guard{serving_mtx_};
  objects_ = std::move(objects);
  data_ = std::move(data);
}

uint16_t cluster_member::serve_node(node_settings serve, const address& head,
                                    const credentials& creds) {
  node_ = true;
  serve_data(serve.host, serve.is_head ? address{serve.host, 0} : head, creds);
  serving_ = std::make_unique<node_serving>(rt_, *serving_now().data, serve,
                                            head, creds);
  return serving_->port();
}

cluster_member::serving cluster_member::serving_now() {
  std::lock_guard<std::mutex> guard{serving_mtx_};
  return {objects_, data_};
}

void cluster_member::stop_data() {
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

void cluster_member::stop() {
  if (client_)
    client_->stop();
  if (serving_)
    serving_->stop();
  stop_data();
  serving_.reset(); // and the TLS links its gate relays
}

void cluster_member::force_end(const std::string& why) {
  if (!serving_ || serving_->is_head())
    return;
  // The task's thread cannot be stopped, nor this runtime shut down around
  // it: the process ends as a crash does, and the cluster's failure
  // detection tells everyone who had work here.
  log_line("node " + this_node() + " ends now: " + why);
  std::_Exit(1);
}

void cluster_member::submit_task(std::shared_ptr<task_spec> t) {
  client_->submit_task(std::move(t));
}

std::shared_ptr<actor_ref>
cluster_member::spawn_actor(const actor_class_entry& cls,
                            std::unique_ptr<actor_factory> f,
                            const actor_options& opts) {
  return client_->spawn_actor(cls, std::move(f), opts);
}

void cluster_member::submit_call(const std::shared_ptr<actor_core>& core,
                                 std::shared_ptr<actor_call> c) {
  client_->submit_call(core, std::move(c));
}

std::shared_ptr<actor_core> cluster_member::lookup(const std::string& name) {
  return client_->lookup(name);
}

void cluster_member::on_down(const caf::down_msg& msg) {
  client_->on_down(msg);
}

std::vector<node_info> cluster_member::nodes() {
  return client_->nodes();
}

std::optional<std::string>
cluster_member::find_endpoint(const std::string& name) {
  return client_->endpoints().find(name);
}

kv_store::put_result cluster_member::kv_put(const std::string& key,
                                            const std::string& value,
                                            bool overwrite) {
  return client_->kv_put(key, value, overwrite);
}

std::optional<std::string> cluster_member::kv_get(const std::string& key) {
  return client_->kv_get(key);
}

bool cluster_member::kv_erase(const std::string& key) {
  return client_->kv_erase(key);
}

std::vector<std::string> cluster_member::kv_keys(const std::string& prefix) {
  return client_->kv_keys(prefix);
}

bool cluster_member::bind_endpoint(const std::string& name,
                                   const std::string& address) {
  return client_->endpoints().bind(name, address);
}

void cluster_member::drop_endpoint(const std::string& name) {
  if (client_)
    client_->endpoints().drop(name);
}

std::shared_ptr<data_client>
cluster_member::connect_to(const std::string& address) {
  auto now = serving_now();
  if (!now.objects)
    throw_no_cluster(); // a one-off query serves none
  return now.objects->connection(address);
}

actor_wire cluster_member::export_actor(const std::shared_ptr<actor_ref>& a) {
  auto now = serving_now();
  if (!now.objects)
    throw_no_cluster();
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
    if (!node_)
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

std::shared_ptr<actor_ref> cluster_member::import_actor(const actor_wire& w) {
  auto now = serving_now();
  if (!now.objects)
    throw_no_cluster();
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
  return rt_.adopt_remote_actor(std::move(core));
}

void cluster_member::kill_elsewhere(actor_core& core) {
  if (client_)
    client_->kill_imported(core);
}

caf::actor cluster_member::manager_of(const std::string& node_id) {
  return client_->manager_of(node_id);
}

std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
cluster_member::node_connections() {
  return client_ ? client_->node_connections()
                 : std::vector<
                     std::pair<std::string, std::shared_ptr<data_client>>>{};
}

std::string cluster_member::node_name_of(const caf::node_id& nid) {
  return client_ ? client_->node_name_of(nid) : std::string{};
}

std::shared_ptr<data_client>
cluster_member::typed_route(const caf::node_id& nid) {
  return client_ ? client_->typed_route(nid) : nullptr;
}

} // namespace lumen::detail
