#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/system_messages.hpp>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "actor_host.hpp"

namespace lumen::detail {

class embedded_runtime;

/// A driver's view of the cluster: sends tasks and actors to other nodes,
/// tracks what is pending on each, and fails it fast when a node or actor
/// goes down (CAF itself would wait for the request's timeout).
class cluster_client {
public:
  /// Connects to the head and says hello with the token; throws `error`
  /// with what went wrong and what to do.
  cluster_client(embedded_runtime& rt, const std::string& head_host,
                 uint16_t head_port, std::string token,
                 const std::string& role);

  /// The id the head gave this process ("driver-N").
  const std::string& id() const noexcept {
    return id_;
  }

  /// The head's directory, fresh.
  std::vector<node_info> nodes();

  void submit_task(std::shared_ptr<task_spec> t);

  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts);

  /// Queues a call to a remote actor; calls leave in submission order, a
  /// call with pending ObjectRef arguments holding back later ones.
  void submit_call(const std::shared_ptr<actor_core>& core,
                   std::shared_ptr<actor_call> c);

  /// On the requester's thread: a monitored manager or actor went down.
  void on_down(const caf::down_msg& msg);

private:
  struct pending {
    caf::actor_addr peer;
    std::function<void(const std::string& why)> fail;
  };

  /// Resolves a placement to a live node id; throws `usage_error`.
  std::string pick_node(const placement& where);
  /// The manager of `node_id`, connecting and saying hello if needed.
  caf::actor manager_of(const std::string& node_id);
  void refresh_directory();
  void send_task(std::shared_ptr<task_spec> t, int retries_left);
  void pump(const std::shared_ptr<actor_core>& core);
  void send_call(const std::shared_ptr<actor_core>& core,
                 std::shared_ptr<actor_call> c);
  /// On the requester's thread: remembers `p` under a fresh id and monitors
  /// its peer.
  uint64_t track(caf::event_based_actor* self, const caf::actor& peer,
                 std::function<void(const std::string&)> fail);
  /// On the requester's thread: forgets `id`; false if it was failed first.
  bool settle(uint64_t id);

  embedded_runtime& rt_;
  caf::actor_system& sys_;
  std::string token_;
  std::string id_;
  caf::actor head_;
  std::mutex mtx_;
  std::unordered_map<std::string, caf::actor> managers_;
  std::vector<node_info> directory_;
  std::chrono::steady_clock::time_point directory_at_;
  size_t next_spread_ = 0;
  // Touched only on the requester's thread.
  std::unordered_map<uint64_t, pending> pending_;
  uint64_t next_id_ = 0;
  std::set<caf::actor_addr> monitored_;
};

} // namespace lumen::detail
