#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "head/kv_store.hpp"

namespace lumen::detail {

class data_client;

/// What taking part in a cluster adds to a process's runtime
/// (process_runtime): the work, actors and names that live in other
/// processes, the cluster's directory, key-value store and channel names,
/// and handles that cross processes. The runtime keeps what is here and
/// hands a part the rest; the embedded runtime has no part. Drivers and
/// nodes have a cluster_member (cluster/); the simulated cluster brings a
/// part of its own, not a runtime subclass.
class cluster_part {
public:
  virtual ~cluster_part();

  // Work and actors placed elsewhere.

  /// Runs `t` where its placement says, which is not this process.
  virtual void submit_task(std::shared_ptr<task_spec> t) = 0;

  /// Starts an actor where its placement says, which is not this process.
  virtual std::shared_ptr<actor_ref>
  spawn_actor(const actor_class_entry& cls, std::unique_ptr<actor_factory> f,
              const actor_options& opts) = 0;

  /// Queues `c` for the actor of `core`, hosted by another process.
  virtual void submit_call(const std::shared_ptr<actor_core>& core,
                           std::shared_ptr<actor_call> c) = 0;

  /// The actor the cluster knows as `name`, as it is now, or null.
  virtual std::shared_ptr<actor_core> lookup(const std::string& name) = 0;

  /// Ends, where it runs, an actor known from a handle another process
  /// sent (no CAF handle here).
  virtual void kill_elsewhere(actor_core& core) = 0;

  /// On the requester's thread: an actor it monitors went down.
  virtual void on_down(const caf::down_msg& msg) = 0;

  // The cluster's directory.

  virtual std::vector<node_info> nodes() = 0;

  /// The control handle of live node `node_id`.
  virtual caf::actor manager_of(const std::string& node_id) = 0;

  /// See process_runtime::node_connections and typed_route.
  virtual std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
  node_connections() = 0;
  virtual std::shared_ptr<data_client> typed_route(const caf::node_id& nid) = 0;

  /// The id of the node whose CAF node is `nid`, among those this process
  /// is linked to, or "".
  virtual std::string node_name_of(const caf::node_id& nid) = 0;

  /// Channel names: where the listener of `name` is; registering a name
  /// (false if it is taken) and giving it up.
  virtual std::optional<std::string> find_endpoint(const std::string& name) = 0;
  virtual bool bind_endpoint(const std::string& name,
                             const std::string& address) = 0;
  virtual void drop_endpoint(const std::string& name) = 0;

  /// The cluster's key-value store (lumen/kv.hpp).
  virtual kv_store::put_result
  kv_put(const std::string& key, const std::string& value, bool overwrite) = 0;
  virtual std::optional<std::string> kv_get(const std::string& key) = 0;
  virtual bool kv_erase(const std::string& key) = 0;
  virtual std::vector<std::string> kv_keys(const std::string& prefix) = 0;

  // Handles across processes.

  /// The data connection to the process serving at `address`.
  virtual std::shared_ptr<data_client>
  connect_to(const std::string& address) = 0;

  /// See lumen::detail::export_actor and import_actor.
  virtual actor_wire export_actor(const std::shared_ptr<actor_ref>& a) = 0;
  virtual std::shared_ptr<actor_ref> import_actor(const actor_wire& w) = 0;

  /// Ends this process at once, as a crash would, if it is a node (not
  /// the head); the head and drivers go on, and so it returns.
  virtual void force_end(const std::string& why) = 0;

  /// This process is a node of the directory (the head or a node), which
  /// others reach by its id; a script is in no directory.
  virtual bool is_node() const noexcept = 0;

  /// Stops what runs in the background (no more rejoining or retrying)
  /// and closes what serves other processes; the runtime calls it before
  /// it ends its actors.
  virtual void stop() = 0;
};

} // namespace lumen::detail
