#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "cluster/directory_cache.hpp"
#include "cluster/head_link.hpp"
#include "cluster/node_links.hpp"
#include "cluster/remote_actors.hpp"
#include "core/actor_host.hpp"
#include "core/process_services.hpp"
#include "head/head_endpoints.hpp"
#include "head/kv_store.hpp"
#include "transport/address.hpp"
#include "transport/data_client.hpp"

namespace lumen::detail {

/// A driver's view of the cluster: sends tasks and actor calls to other
/// nodes on the data plane and fails what is pending on a node as soon as
/// the control plane sees it go down (CAF itself would wait for a request's
/// timeout, and a killed process's socket may not close on a cut link).
/// Its parts: the head (head_link), the directory (directory_cache), the
/// connections to nodes (node_links) and the actors on them
/// (remote_actors); tasks and the funerals of nodes are its own.
class cluster_client {
public:
  /// Connects to the head and says hello with the token; throws `error`
  /// with what went wrong and what to do.
  cluster_client(process_services& rt, const address& head, credentials creds,
                 const std::string& role);

  /// The id the head gave this process ("driver-N").
  const std::string& id() const noexcept {
    return head_.id();
  }

  /// Starts watching the head: once it is lost, what needs it fails with
  /// `errc::head_unreachable` and this process tries every 500 ms to rejoin
  /// a head at the same address, running `on_head_back` first (a node
  /// joins it there). Call once, after the runtime can hear of its death.
  void watch_head(std::function<void(const caf::actor& head)> on_head_back);

  /// Stops the background threads; later failures are not retried.
  void stop();

  /// The head's directory, fresh; throws `errc::head_unreachable` if the
  /// head is lost.
  std::vector<node_info> nodes();

  void submit_task(std::shared_ptr<task_spec> t);

  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) {
    return actors_.spawn(cls, std::move(f), opts);
  }

  /// The control handle of live node `node_id`, connecting if needed.
  caf::actor manager_of(const std::string& node_id);

  /// The data-plane connection of the node whose CAF node is `nid`,
  /// connecting to the directory's nodes until one is; null if none is.
  std::shared_ptr<data_client> typed_route(const caf::node_id& nid);

  /// The id of the linked node whose CAF node is `nid`, or "".
  std::string node_name_of(const caf::node_id& nid) {
    return links_.node_of(nid);
  }

  /// See process_runtime::node_connections.
  std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
  node_connections();

  /// Channel names in the head's directory.
  head_endpoints& endpoints() noexcept {
    return endpoints_;
  }

  /// The head's key-value store (lumen/kv.hpp).
  kv_store::put_result kv_put(const std::string& key, const std::string& value,
                              bool overwrite);
  std::optional<std::string> kv_get(const std::string& key);
  bool kv_erase(const std::string& key);
  std::vector<std::string> kv_keys(const std::string& prefix);

  /// The actor named `name` in the head's directory, or null.
  std::shared_ptr<actor_core> lookup(const std::string& name);

  /// Queues a call to a remote actor; calls leave in submission order, a
  /// call with pending ObjectRef arguments holding back later ones.
  void submit_call(const std::shared_ptr<actor_core>& core,
                   std::shared_ptr<actor_call> c) {
    actors_.submit_call(core, std::move(c));
  }

  /// Takes in an actor known from a handle another process sent: hosted
  /// by `node`, called at `address` if set (a script's actor), else
  /// through the node's connection.
  void adopt_imported(const std::shared_ptr<actor_core>& core,
                      const std::string& node, const std::string& address,
                      uint64_t remote_id, const std::string& actor_id) {
    actors_.adopt(core, node, address, remote_id, actor_id);
  }

  /// Ends, where it runs, an actor known from a handle another process
  /// sent; an unreachable host has ended it already.
  void kill_imported(actor_core& core) {
    actors_.kill(core);
  }

  /// On the requester's thread: a monitored node manager went down.
  void on_down(const caf::down_msg& msg);

  /// Closes every connection; called before the runtime goes away.
  ~cluster_client();

private:
  /// Queues the rest of a node's death for the funeral thread: failing
  /// what is pending on `data` and rebuilding actors elsewhere. Those block
  /// (requests to other nodes), which neither CAF's threads nor a
  /// connection's reader may.
  void bury(std::string node_id, std::string why,
            std::shared_ptr<data_client> data);
  void run_funerals();

  /// A node linked on the data plane alone (node_links::data) has no
  /// control link whose pulses would tell of its death: the head's
  /// directory does, asked every `data_links_checked_every` while there
  /// are such links.
  void lose_dead_data_links();
  static constexpr auto data_links_checked_every =
    std::chrono::milliseconds(300);
  void send_task(std::shared_ptr<task_spec> t, int retries_left);

  caf::actor_system& sys_;
  std::atomic<bool> stopping_{false};
  head_link head_;
  head_endpoints endpoints_;
  directory_cache directory_;
  struct funeral {
    std::string node;
    std::string why;
    std::shared_ptr<data_client> data;
  };
  std::mutex funeral_mtx_;
  std::condition_variable funeral_cv_;
  std::deque<funeral> funerals_;
  node_links links_;
  std::mutex unroutable_mtx_;
  std::set<caf::node_id> unroutable_; // CAF nodes that are no cluster node
  remote_actors actors_;
  std::thread undertaker_; // started last: it uses the members above
};

} // namespace lumen::detail
