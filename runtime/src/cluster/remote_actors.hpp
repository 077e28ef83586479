#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>

#include "lumen/detail/runtime.hpp"

#include "cluster/directory_cache.hpp"
#include "cluster/node_links.hpp"
#include "core/actor_host.hpp"
#include "core/process_services.hpp"

namespace lumen::detail {

/// The actors a driver holds on other nodes: starting them there, sending
/// them calls in order, and, when their node dies, rebuilding those with
/// restarts left on a live node.
class remote_actors {
public:
  /// `stopping` says when the runtime shuts down: nothing is rebuilt then.
  remote_actors(process_services& rt, node_links& links,
                directory_cache& directory, const std::atomic<bool>& stopping);

  /// Starts an actor of `cls` on the node `opts` place it on.
  std::shared_ptr<actor_ref> spawn(const actor_class_entry& cls,
                                   std::unique_ptr<actor_factory> f,
                                   const actor_options& opts);

  /// Records that `core` is hosted by `node` as `handle`, before anyone
  /// else can see it.
  void place(const std::shared_ptr<actor_core>& core, const std::string& node,
             caf::actor handle);

  /// Records an actor known from a handle another process sent (see
  /// cluster_client::adopt_imported).
  void adopt(const std::shared_ptr<actor_core>& core, const std::string& node,
             const std::string& address, uint64_t remote_id,
             const std::string& actor_id);

  /// Sends `core`'s host the order to end it (see cluster_client).
  void kill(actor_core& core);

  /// Queues a call; calls leave in submission order, a call with pending
  /// ObjectRef arguments holding back later ones.
  void submit_call(const std::shared_ptr<actor_core>& core,
                   std::shared_ptr<actor_call> c);

  /// After `node_id` died (`why`): rebuilds its actors that have restarts
  /// left on live nodes, and marks the others dead. Blocks on requests to
  /// other nodes.
  void rescue(const std::string& node_id, const std::string& why);

private:
  /// Starts an actor on `node`; returns its handle. Throws on refusal.
  caf::actor spawn_on(const std::string& node, const actor_core& core);
  void pump(const std::shared_ptr<actor_core>& core);
  /// The connection to the process hosting an actor: at `address` (a
  /// script's actor) if set, else through `node`'s link.
  std::shared_ptr<data_client> route(const std::string& node,
                                     const std::string& address);
  /// Where a call goes: a snapshot of the proxy taken under its lock.
  struct destination {
    std::string node;
    std::string address;
    uint64_t remote_id = 0;
  };
  void send_call(const std::shared_ptr<actor_core>& core,
                 std::shared_ptr<actor_call> c, const destination& to);

  process_services& rt_;
  node_links& links_;
  directory_cache& directory_;
  const std::atomic<bool>& stopping_;
  std::mutex mtx_;
  // The remote actors this driver created, by the node hosting them.
  std::unordered_map<std::string, std::vector<std::weak_ptr<actor_core>>>
    hosted_; // under mtx_
};

} // namespace lumen::detail
