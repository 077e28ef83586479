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
#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/init.hpp"

#include "channels/channel_hub.hpp"
#include "core/actor_host.hpp"
#include "core/cluster_part.hpp"
#include "core/process_services.hpp"
#include "core/task_pool.hpp"
#include "head/kv_store.hpp"
#include "node/node_manager.hpp"
#include "security/credentials.hpp"
#include "transport/address.hpp"
#include "transport/pulse.hpp"
#include "transport/typed_host.hpp"

namespace lumen::detail {

class data_client;

/// A process's runtime, whatever its role: one CAF actor system whose
/// detached actors host Lumen actors, a task pool, the names of this
/// process's actors, the requester actor, channels and a key-value store.
/// A role is an assembly, not a subclass: the embedded runtime is this
/// alone; a driver adds a cluster part (cluster_member), to which work,
/// actors and names that live elsewhere go; a node adds that part and the
/// serving of its ports (node_serving).
class process_runtime final : public runtime,
                              public process_services,
                              public typed_host {
public:
  /// `networked` loads CAF's middleman, with the heartbeats failure
  /// detection needs (the cluster roles).
  process_runtime(const init_options& opts, bool networked);

  /// Ends the parts, kills every actor, stops the task pool and waits for
  /// CAF to finish.
  ~process_runtime() override;

  /// Joins the cluster whose head is at `head` as `hello_role` ("driver",
  /// or "client" for a one-off query); throws `error` saying what failed.
  void join_as_driver(const address& head, const credentials& creds,
                      const std::string& hello_role);

  /// Serves as `serve` says (`serve.is_head` for the head), a node joining
  /// the head at `head`; throws `error` saying what failed.
  void join_as_node(node_settings serve, const address& head,
                    const credentials& creds);

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const actor_ref& a, std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_ref> find_actor(const std::string& name) override;
  void kill_actor(const actor_ref& a) override;
  void kill_core(actor_core& core) override;
  void create_placement_group(
    const std::shared_ptr<placement_group_state>& g) override;
  void remove_placement_group(placement_group_state& g) override;
  void force_end(const std::string& why) override;

  /// The cluster's nodes; outside a cluster, this process alone.
  std::vector<node_info> nodes();

  /// The control handle of cluster node `node_id`; throws `usage_error`
  /// outside a cluster.
  caf::actor manager_of(const std::string& node_id);

  /// The data connections to the cluster's other live nodes, connecting
  /// where needed; a node out of reach is left out. Outside a cluster,
  /// none.
  std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
  node_connections();

  /// The data-plane connection to the cluster process whose CAF node is
  /// `nid`, for typed actors' requests; null if there is none (outside a
  /// cluster, or a process that is no node).
  std::shared_ptr<data_client> typed_route(const caf::node_id& nid);

  /// The id of the cluster node whose CAF node is `nid` ("another process"
  /// if this process has no link to it), for errors; never blocks.
  std::string node_name_of(const caf::node_id& nid);

  caf::actor_system& system() override {
    return *sys_;
  }
  void
  run_as_requester(std::function<void(caf::event_based_actor*)> job) override;
  void run_local(std::shared_ptr<task_spec> t) override;
  resource_ledger& resources() override {
    return resources_;
  }
  caf::actor bundle_keeper() override {
    return bundle_keeper_;
  }
  std::shared_ptr<actor_ref>
  spawn_local_actor(const actor_class_entry& cls,
                    std::unique_ptr<actor_factory> f,
                    const actor_options& opts) override;
  std::shared_ptr<actor_ref>
  adopt_remote_actor(std::shared_ptr<actor_core> core) override;
  void adopt(caf::actor h) override;

  /// Outside a cluster there is no other process: throws `usage_error`.
  std::shared_ptr<data_client> connect_to(const std::string& address) override;

  /// See lumen::detail::export_actor and import_actor; outside a cluster
  /// they throw `usage_error`.
  actor_wire export_actor(const std::shared_ptr<actor_ref>& a) override;
  std::shared_ptr<actor_ref> import_actor(const actor_wire& w) override;

  /// Channels (lumen/channel.hpp): starts queuing what is opened to
  /// `name` in this process's hub (made on first use) and registers the
  /// name where peers look it up; throws `usage_error` (`errc::name_taken`)
  /// if a listener has it.
  std::shared_ptr<channel_listener::queue>
  open_channel_name(const std::string& name);

  /// Gives `name` up.
  void close_channel_name(const std::string& name);

  /// Where the listener of `name` is (HOST:PORT), or nothing.
  std::optional<std::string> find_endpoint(const std::string& name);

  /// The cluster's key-value store (lumen/kv.hpp): the head's; outside a
  /// cluster, this process's own. Bounds are checked by the store.
  bool kv_put(const std::string& key, const std::string& value,
              bool overwrite) override;
  std::optional<std::string> kv_get(const std::string& key) override;
  bool kv_erase(const std::string& key) override;
  std::vector<std::string> kv_keys(const std::string& prefix) override;

  /// What a channel shows at a hub's gate.
  const credentials& link_credentials() const noexcept {
    return link_creds_;
  }

  // typed_host (transport/process_typed.cpp): typed actors' requests to
  // another process go on the data plane, spawns to its node manager.
  std::string node_of(const caf::actor_addr& who) override;
  caf::expected<caf::strong_actor_ptr>
  spawn_typed(const std::string& node_id, const std::string& name,
              caf::message args,
              const std::set<std::string>& interface) override;
  bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                  const caf::message& msg, bool carries_handles,
                  typed_done done) override;

private:
  /// Takes `part` in for what lives elsewhere; it is reached from other
  /// threads from now on.
  void join(std::unique_ptr<cluster_part> part);

  /// True if work placed at `where` runs in this process.
  bool here(const placement& where) const;

  /// Channels listen on `host` and show `creds`; call before the first
  /// channel.
  void serve_channels(std::string host, credentials creds);

  /// Ends the channel hub.
  void stop_channels();

  /// Ends every actor, the task pool and the requester, and waits for CAF's
  /// actors; safe to call twice. Called before the cluster part goes, which
  /// actors still use.
  void stop_actors();

  std::shared_ptr<actor_ref> register_actor(std::shared_ptr<actor_core> core);

  /// Ends the actor of `core` without restart, for `reason`.
  void end_core(actor_core& core, const std::string& reason);

  /// A task placed in a placement group: checked now, then, once the group
  /// is ready, submitted again placed on its bundle's node.
  void submit_to_bundle(std::shared_ptr<task_spec> t);

  /// An actor's options placed in a placement group, as they are once the
  /// group is ready (this waits for it): on its bundle's node, asking for
  /// the bundle's resources.
  actor_options in_bundle_options(const actor_options& opts);

  /// Throws `usage_error` (`errc::name_taken`) if an actor here goes by
  /// `name`.
  void require_free_name(const std::string& name);

  /// Drops `core` from this process's names, if it has its name.
  void forget_name(const actor_core& core);

  void require_free_name_locked(const std::string& name) const;

  /// Whom to ask for a bundle on `node`: this process's keeper, or that
  /// node's manager.
  caf::actor group_target(const std::string& node);

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  // The liveness of control links' peers, once in a cluster.
  std::unique_ptr<pulse_service> pulses_;
  resource_ledger resources_;
  caf::actor bundle_keeper_; // this process's share of placement groups
  task_pool pool_;
  std::mutex mtx_;
  std::unordered_map<std::string, std::shared_ptr<actor_ref>> names_;
  std::vector<std::weak_ptr<actor_core>> actors_;
  std::vector<caf::actor> adopted_;
  bool stopped_ = false;
  // Channels.
  std::mutex channel_mtx_;
  std::string channel_host_ = "127.0.0.1";
  credentials link_creds_;
  std::unique_ptr<channel_hub> hub_;
  kv_store kv_;
  // What lives elsewhere; null for the embedded runtime. Set before other
  // threads reach it, reset once they are done.
  std::unique_ptr<cluster_part> cluster_;
};

/// The process's runtime, whatever its role; throws `usage_error` if Lumen
/// is not running.
process_runtime& this_runtime();

} // namespace lumen::detail
