#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/init.hpp"

#include "actor_host.hpp"
#include "address.hpp"
#include "cluster_client.hpp"
#include "data_plane.hpp"
#include "gate.hpp"
#include "node_manager.hpp"
#include "task_pool.hpp"

namespace lumen::detail {

/// How this process takes part in a cluster.
struct cluster_role {
  enum kind_t { embedded, driver, head, node } kind = embedded;
  address head_address; // driver and node: where the head listens
  std::string token;
  std::string hello_role = "driver"; // "client" for one-off queries
  node_settings serve;               // head and node: where and how to serve
};

/// A process's runtime: one CAF actor system whose detached actors host
/// Lumen actors, a task pool and the name directory; in a cluster also a
/// node manager serving other processes (head, node) or a client sending
/// work to them (driver).
class embedded_runtime final : public runtime {
public:
  embedded_runtime(const init_options& opts, cluster_role role);

  /// Kills every actor, stops the task pool and waits for CAF to finish.
  ~embedded_runtime() override;

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const actor_ref& a, std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_ref> find_actor(const std::string& name) override;
  void kill_actor(const actor_ref& a) override;

  caf::actor_system& system() {
    return *sys_;
  }

  /// Runs `t` on this process's task pool once its dependencies are ready.
  void run_local(std::shared_ptr<task_spec> t);

  /// Hosts an actor in this process, whatever its placement says.
  std::shared_ptr<actor_ref> spawn_local_actor(const actor_class_entry& cls,
                                               std::unique_ptr<actor_factory> f,
                                               const actor_options& opts);

  /// Registers an actor another node hosts for this process.
  std::shared_ptr<actor_ref> adopt_remote_actor(std::shared_ptr<actor_core> c);

  /// The cluster's nodes (this one alone when not in a cluster).
  std::vector<node_info> nodes();

  /// The port this process serves on (head and node), else 0.
  uint16_t port() const noexcept {
    return port_;
  }

  /// The data plane's port (head and node), else 0.
  uint16_t data_port() const noexcept {
    return data_ ? data_->port() : 0;
  }

  /// The data plane server (head and node only).
  data_server& data() {
    return *data_;
  }

  /// Runs `job` on an event-based actor, where it may issue CAF requests.
  void run_as_requester(std::function<void(caf::event_based_actor*)> job);

  /// Ends `h` at shutdown, so that the actor system can finish.
  void adopt(caf::actor h);

  /// The control handle of cluster node `node_id`, connecting if needed;
  /// throws `usage_error` if this process is in no cluster or there is no
  /// such node.
  caf::actor manager_of(const std::string& node_id);

  /// See lumen::detail::watch; requester thread only.
  uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
                 std::function<void()> fail);

  /// See lumen::detail::unwatch; requester thread only.
  void unwatch(const caf::actor_addr& whom, uint64_t token);

private:
  void forget_name(const actor_core& core);
  /// Throws `usage_error` if an actor goes by `name`; requires mtx_.
  void require_free_name(const std::string& name) const;
  /// Ends every actor and the actor system; safe to call twice.
  void shutdown_actors();
  std::shared_ptr<actor_ref> register_actor(std::shared_ptr<actor_core> core);
  /// True if `where` means this process; throws for a node it cannot reach.
  bool runs_here(const placement& where) const;

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::actor requester_;
  task_pool pool_;
  cluster_role role_;
  caf::actor manager_;
  std::unique_ptr<gate> control_gate_;
  uint16_t port_ = 0;
  std::unique_ptr<data_server> data_;
  std::unique_ptr<cluster_client> client_;
  std::mutex mtx_;
  std::unordered_map<std::string, std::shared_ptr<actor_ref>> names_;
  std::vector<std::weak_ptr<actor_core>> actors_;
  std::vector<caf::actor> adopted_;
  // Requester thread only: what to fail when a watched actor goes down.
  std::unordered_map<caf::actor_addr,
                     std::unordered_map<uint64_t, std::function<void()>>>
    watched_;
  uint64_t next_watch_ = 1;
  std::set<caf::actor_addr> monitored_;
};

/// The process's runtime as the embedded one (the only kind so far).
embedded_runtime& embedded();

/// The configuration steps LUMEN_TYPED_ACTOR recorded.
std::vector<config_step>& config_steps();

} // namespace lumen::detail
