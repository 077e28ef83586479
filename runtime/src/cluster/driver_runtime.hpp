#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cluster/cluster_client.hpp"
#include "core/local_runtime.hpp"
#include "node/data_server.hpp"
#include "objects/object_exchange.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// The driver role: a script in a cluster. Work placed here runs on the
/// local runtime; work placed elsewhere, actors hosted elsewhere and names
/// this process does not hold go to the cluster client.
class driver_runtime : public local_runtime {
public:
  /// Joins the cluster whose head is at `head` as `hello_role` ("driver",
  /// or "client" for a one-off query); throws `error` saying what failed.
  driver_runtime(const init_options& opts, const address& head,
                 const credentials& creds, const std::string& hello_role);

  ~driver_runtime() override;

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const actor_ref& a, std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_ref> find_actor(const std::string& name) override;
  std::vector<node_info> nodes() override;
  caf::actor manager_of(const std::string& node_id) override;
  std::shared_ptr<data_client> typed_route(const caf::node_id& nid) override;
  std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
  node_connections() override;
  std::optional<std::string> find_endpoint(const std::string& name) override;
  kv_store::put_result kv_put(const std::string& key, const std::string& value,
                              bool overwrite) override;
  std::optional<std::string> kv_get(const std::string& key) override;
  bool kv_erase(const std::string& key) override;
  std::shared_ptr<data_client> connect_to(const std::string& address) override;
  actor_wire export_actor(const std::shared_ptr<actor_ref>& a) override;
  std::shared_ptr<actor_ref> import_actor(const actor_wire& w) override;

protected:
  void kill_elsewhere(actor_core& core) override;
  bool bind_endpoint(const std::string& name,
                     const std::string& address) override;
  void drop_endpoint(const std::string& name) override;

  /// For the node role, which serves before it connects.
  explicit driver_runtime(const init_options& opts);

  /// Connects the cluster client. Unless this process is the head, the
  /// client then watches the head, running `on_head_back` when a lost head
  /// is back (see cluster_client).
  void connect(const address& head, const credentials& creds,
               const std::string& hello_role, bool is_head,
               std::function<void(const caf::actor&)> on_head_back);

  /// Starts the data server on `host` (a wildcard host: the address that
  /// faces `head`), and with it the serving of this process's objects to
  /// the refs it sends out.
  void serve_data(const std::string& host, const address& head,
                  const credentials& creds);

  /// This process is a node of the directory (the head or a node), which
  /// others reach by its id.
  bool is_node = false;

  data_server& data() noexcept {
    return *data_;
  }

  /// Closes the data server and drops what it held for others; safe to
  /// call twice.
  void stop_data();

  /// Stops the client's threads: no rejoining, retrying or rebuilding.
  void stop_client();

  /// Ends the actors and then the client they use; safe to call twice.
  void stop();

private:
  /// True if `where` is this process.
  bool here(const placement& where) const;

  std::unique_ptr<cluster_client> client_;
  /// The exchange and the data server, or nulls once stopped; threads
  /// still running (tasks encoding refs at shutdown) keep them alive.
  struct serving {
    std::shared_ptr<object_exchange> objects;
    std::shared_ptr<data_server> data;
  };
  serving serving_now();

  std::mutex serving_mtx_;
  std::shared_ptr<object_exchange> objects_; // under serving_mtx_
  std::shared_ptr<data_server> data_;        // under serving_mtx_
  // The actors hosted here whose handles went to other processes, by
  // their data-plane id: a handle coming back is the original again.
  std::mutex exported_mtx_;
  std::unordered_map<uint64_t, std::weak_ptr<actor_ref>> exported_;
};

} // namespace lumen::detail
