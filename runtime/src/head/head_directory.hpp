#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>

#include "lumen/cluster.hpp"

namespace lumen::detail {

/// A named actor in the cluster-wide directory.
struct named_entry {
  std::string cls;
  std::string node;
  caf::actor handle;
};

/// A channel listener (lumen/channel.hpp) in the directory: where it
/// listens, and an actor of its process, whose death frees the name.
struct endpoint_entry {
  std::string address;
  caf::actor_addr owner;
};

/// The head's view of the cluster, kept by its node manager: the nodes that
/// joined (alive or dead), the names of actors, and the epoch that tells
/// this head from an earlier one at the same address. Plain state: the
/// manager does the messaging and the monitoring.
class head_directory {
public:
  /// A fresh directory under a random epoch.
  head_directory();

  uint64_t epoch() const noexcept {
    return epoch_;
  }

  /// A node says hello from `manager`. It keeps an id it had under an
  /// earlier head at this address (drivers' handles name it) unless that
  /// is taken, and a live node saying hello again keeps its entry; any
  /// other node gets a new id. Returns the id and whether this is a new
  /// entry (for the manager to monitor).
  std::pair<std::string, bool>
  admit(const std::string& host, uint16_t port, uint16_t data_port,
        const std::map<std::string, std::string>& resources,
        const std::string& previous_id, uint64_t previous_epoch,
        const caf::actor_addr& manager);

  /// A new driver's id, "driver-N".
  std::string next_driver();

  /// Whether node `id` is counted alive.
  bool alive(const std::string& id) const;

  /// Every node that joined, alive or dead.
  const std::vector<node_info>& nodes() const noexcept {
    return nodes_;
  }

  /// The id of the live node whose manager runs in the CAF node
  /// `process`, or "" if none does.
  std::string node_of_process(const caf::node_id& process) const;

  /// The actor count node `manager` reported.
  void count_actors(const caf::actor_addr& manager, int count);

  /// What node `manager` reported it offers, and what its work holds.
  void set_load(const caf::actor_addr& manager,
                std::map<std::string, double> total,
                std::map<std::string, double> used);

  /// Gives `name` to `entry`; false if a live actor has it. A name whose
  /// actor's node is dead is free again: a rebuilt actor takes it back even
  /// if the old one's down message is still on its way.
  bool bind(const std::string& name, named_entry entry);

  std::optional<named_entry> lookup(const std::string& name) const;

  /// Gives the channel name `name` to `entry`; false if it is taken.
  bool bind_endpoint(const std::string& name, endpoint_entry entry);

  std::optional<std::string> find_endpoint(const std::string& name) const;

  /// Frees `name` if `owner`'s process holds it.
  void drop_endpoint(const std::string& name, const caf::actor_addr& owner);

  /// Something monitored went down: a named actor (its name is freed), a
  /// process holding channel names (they are freed) or a node's manager
  /// (the node is dead; logged with `reason`, or as stopped for none).
  void on_down(const caf::actor_addr& source, const std::string& reason);

private:
  /// The entry of the node whose manager is `manager`, or null.
  node_info* by_manager(const caf::actor_addr& manager);

  bool id_taken(const std::string& id) const;

  uint64_t epoch_;
  std::vector<node_info> nodes_;
  std::vector<caf::actor_addr> managers_; // of nodes_, index for index
  int next_node_ = 1;
  int next_driver_ = 1;
  std::map<std::string, named_entry> names_;
  std::map<std::string, endpoint_entry> endpoints_;
};

} // namespace lumen::detail
