#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "actor_host.hpp"
#include "address.hpp"
#include "data_plane.hpp"
#include "directory_cache.hpp"
#include "head_link.hpp"
#include "process_services.hpp"

namespace lumen::detail {

/// A driver's view of the cluster: sends tasks and actor calls to other
/// nodes on the data plane and fails what is pending on a node as soon as
/// the control plane sees it go down (CAF itself would wait for a request's
/// timeout, and a killed process's socket may not close on a cut link).
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
                                         const actor_options& opts);

  /// The control handle of live node `node_id`, connecting if needed.
  caf::actor manager_of(const std::string& node_id);

  /// The actor named `name` in the head's directory, or null.
  std::shared_ptr<actor_core> lookup(const std::string& name);

  /// Queues a call to a remote actor; calls leave in submission order, a
  /// call with pending ObjectRef arguments holding back later ones.
  void submit_call(const std::shared_ptr<actor_core>& core,
                   std::shared_ptr<actor_call> c);

  /// On the requester's thread: a monitored node manager went down.
  void on_down(const caf::down_msg& msg);

  /// Closes every connection; called before the runtime goes away.
  ~cluster_client();

private:
  /// What this driver holds for one node.
  struct node_link {
    caf::actor manager;
    std::shared_ptr<data_client> data;
  };

  /// The link to `node_id`, connecting and saying hello if needed.
  node_link link_to(const std::string& node_id);
  /// Takes `node_id` for dead and retires its link, if its connection is
  /// `failed` (any connection if null): that connection closed, or the
  /// node's manager went down. Returns the retired connection, or null if
  /// there was nothing (more) to retire.
  std::shared_ptr<data_client> drop_link(const std::string& node_id,
                                         const data_client* failed);
  /// Queues the rest of a node's death for the funeral thread: failing
  /// what is pending on `data` and rebuilding actors elsewhere. Those block
  /// (requests to other nodes), which neither CAF's threads nor a
  /// connection's reader may.
  void bury(std::string node_id, std::string why,
            std::shared_ptr<data_client> data);
  void run_funerals();
  /// After `node_id` died: rebuilds its actors that have restarts left on
  /// live nodes, and marks the others dead.
  void rescue_actors(const std::string& node_id, const std::string& why);
  /// Records that `core` is hosted by `node` as `handle`, before anyone
  /// else can see it.
  void place(const std::shared_ptr<actor_core>& core, const std::string& node,
             caf::actor handle);
  /// Starts an actor on `node`; returns its handle. Throws on refusal.
  caf::actor spawn_on(const std::string& node, const actor_core& core);
  void send_task(std::shared_ptr<task_spec> t, int retries_left);
  void pump(const std::shared_ptr<actor_core>& core);
  void send_call(const std::shared_ptr<actor_core>& core,
                 std::shared_ptr<actor_call> c);

  process_services& rt_;
  caf::actor_system& sys_;
  credentials creds_;
  head_link head_;
  directory_cache directory_;
  std::mutex mtx_;
  std::unordered_map<std::string, node_link> links_;
  // Links of dead nodes. Kept, not destroyed, since the last reference
  // could otherwise drop on the link's own reader thread, which joins it.
  std::vector<std::shared_ptr<data_client>> retired_;
  // The remote actors this driver created, by the node hosting them.
  std::unordered_map<std::string, std::vector<std::weak_ptr<actor_core>>>
    hosted_;
  std::atomic<bool> stopping_{false};
  struct funeral {
    std::string node;
    std::string why;
    std::shared_ptr<data_client> data;
  };
  std::mutex funeral_mtx_;
  std::condition_variable funeral_cv_;
  std::deque<funeral> funerals_;
  std::thread undertaker_; // started last: it uses the members above
};

} // namespace lumen::detail
