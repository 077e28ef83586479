#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cluster/cluster_client.hpp"
#include "core/cluster_part.hpp"
#include "core/process_services.hpp"
#include "node/data_server.hpp"
#include "node/node_manager.hpp"
#include "objects/object_exchange.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

class node_serving;

/// The cluster part of a driver, the head and a node: the cluster client
/// (head, directory, node links, remote actors), the serving of this
/// process's objects and actors to other processes, and on the head and a
/// node the serving of its control and data ports (node_serving).
/// process_runtime::join_as_driver and join_as_node assemble it.
class cluster_member final : public cluster_part {
public:
  explicit cluster_member(process_services& rt);
  ~cluster_member() override;

  /// Starts the data server on `host` (a wildcard host: the address that
  /// faces `head`), and with it the serving of this process's objects to
  /// the refs it sends out.
  void serve_data(const std::string& host, const address& head,
                  const credentials& creds);

  /// Serves as a node of the directory (`serve.is_head` for the head):
  /// data first, then the control port behind its gate, then, unless this
  /// is the head, joins the head at `head`. Returns the control port.
  uint16_t serve_node(node_settings serve, const address& head,
                      const credentials& creds);

  /// Connects the cluster client as `hello_role`; a driver takes the id
  /// the head gives it as this node's name.
  void connect(const address& head, const credentials& creds,
               const std::string& hello_role);

  /// Has the client watch the head, running `on_head_back` when a lost
  /// head is back (see cluster_client::watch_head); once the runtime hears
  /// of deaths.
  void watch_head(std::function<void(const caf::actor&)> on_head_back);

  /// A node's way back in: joining a head that is back, under a new id.
  std::function<void(const caf::actor&)> rejoin();

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const std::shared_ptr<actor_core>& core,
                   std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_core> lookup(const std::string& name) override;
  void kill_elsewhere(actor_core& core) override;
  void on_down(const caf::down_msg& msg) override;
  std::vector<node_info> nodes() override;
  caf::actor manager_of(const std::string& node_id) override;
  std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
  node_connections() override;
  std::shared_ptr<data_client> typed_route(const caf::node_id& nid) override;
  std::string node_name_of(const caf::node_id& nid) override;
  std::optional<std::string> find_endpoint(const std::string& name) override;
  bool bind_endpoint(const std::string& name,
                     const std::string& address) override;
  void drop_endpoint(const std::string& name) override;
  kv_store::put_result kv_put(const std::string& key, const std::string& value,
                              bool overwrite) override;
  std::optional<std::string> kv_get(const std::string& key) override;
  bool kv_erase(const std::string& key) override;
  std::vector<std::string> kv_keys(const std::string& prefix) override;
  std::shared_ptr<data_client> connect_to(const std::string& address) override;
  actor_wire export_actor(const std::shared_ptr<actor_ref>& a) override;
  std::shared_ptr<actor_ref> import_actor(const actor_wire& w) override;
  void force_end(const std::string& why) override;
  bool is_node() const noexcept override {
    return node_;
  }

  /// Stops the client's threads (no rejoining, retrying or rebuilding),
  /// then the serving: the node's ports, then the data server, which
  /// fails at once what drivers still wait for here. Safe to call twice.
  void stop() override;

private:
  /// The exchange and the data server, or nulls once stopped; threads
  /// still running (tasks encoding refs at shutdown) keep them alive.
  struct serving {
    std::shared_ptr<object_exchange> objects;
    std::shared_ptr<data_server> data;
  };
  serving serving_now();

  /// Closes the data server and drops what it held for others; safe to
  /// call twice.
  void stop_data();

  process_services& rt_;
  std::unique_ptr<cluster_client> client_;
  bool node_ = false;
  std::unique_ptr<node_serving> serving_; // the head and nodes only
  std::mutex serving_mtx_;
  std::shared_ptr<object_exchange> objects_; // under serving_mtx_
  std::shared_ptr<data_server> data_;        // under serving_mtx_
  // The actors hosted here whose handles went to other processes, by
  // their data-plane id: a handle coming back is the original again.
  std::mutex exported_mtx_;
  std::unordered_map<uint64_t, std::weak_ptr<actor_ref>> exported_;
};

} // namespace lumen::detail
