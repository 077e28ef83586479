#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "cluster/head_link.hpp"

namespace lumen::detail {

/// This process's view of the cluster's nodes: the head's directory, asked
/// for again once it is a second old, kept while the head is lost, with the
/// nodes this process saw die marked dead. It places work: on a named node,
/// or round-robin over the live ones.
class directory_cache {
public:
  directory_cache(caf::actor_system& sys, head_link& head);

  /// The head's directory, fresh; throws `errc::head_unreachable` if the
  /// head is lost.
  std::vector<node_info> fetch();

  /// Resolves a placement to a live node's id for work asking for
  /// `resources`: a spread one goes round-robin over the live nodes where
  /// they are free (as last reported), else over those that have them in
  /// all, where it waits. Throws `usage_error` for a node the cluster never
  /// had, or (errc::infeasible) naming a resource no live node (or not the
  /// one named) has as much of; `actor_died` for a dead one or none live.
  std::string pick(const placement& where,
                   const resource_request& resources = {});

  /// Refreshes the view unless it lists `node_id` already.
  void learn_of(const std::string& node_id);

  /// The entry of `node_id`, if the view has it.
  std::optional<node_info> find(const std::string& node_id);

  /// Takes `node_id` for dead in this process, whatever the head says.
  void mark_dead(const std::string& node_id);

private:
  /// Fetches the directory unless the view is fresh, or the head is lost
  /// and the view still places work on the nodes it knows.
  void refresh();

  caf::actor_system& sys_;
  head_link& head_;
  std::mutex mtx_;
  std::vector<node_info> nodes_; // under mtx_
  // Nodes this process saw die before the head did. A node never comes
  // back under the same id (a head restarted at its address does, and
  // answering proves it alive), so the head's view cannot revive them.
  std::set<std::string> dead_; // under mtx_
  std::chrono::steady_clock::time_point fetched_at_;
  size_t next_spread_ = 0;
};

} // namespace lumen::detail
