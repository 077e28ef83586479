#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lumen/cluster.hpp"
#include "lumen/detail/object_state.hpp"
#include "lumen/object_ref.hpp"

namespace lumen {

/// How a placement group lays its bundles over the nodes, as Ray's
/// strategies do. Non-strict ones do their best and never fail for the
/// layout alone; strict ones are infeasible when it cannot be had.
enum class placement_strategy {
  pack,          ///< as few nodes as hold the bundles
  spread,        ///< a node per bundle where there are enough
  strict_pack,   ///< all bundles on one node
  strict_spread, ///< each bundle on a node of its own
};

namespace detail {

/// Shared by the copies of one placement_group and by the work placed in
/// it.
struct placement_group_state {
  std::string id;
  std::vector<std::map<std::string, double>> bundles;
  placement_strategy strategy = placement_strategy::pack;
  std::shared_ptr<value_state<void>> ready =
    std::make_shared<value_state<void>>();
  std::mutex mtx;
  std::vector<std::string> nodes;     // under mtx: bundle i's node, once placed
  bool removed = false;               // under mtx
  std::atomic<size_t> next_bundle{0}; // work asking for any bundle
};

} // namespace detail

/// Resources reserved together across the cluster, as Ray's placement
/// groups: each bundle (a map of resources, as with_resources takes) is
/// held on one node from the moment it is reserved until the group is
/// removed, and only work placed into the group with
/// `.in_placement_group(pg, bundle)` uses it. Gang scheduling: `ready()`
/// resolves once every bundle is held, so that N workers start together
/// or not at all.
///
/// Making one places it at once (the strategy chooses the nodes from what
/// they last reported free) and reserves in the background; a bundle
/// waits on its node until its resources are free there. Throws
/// `usage_error` for an empty bundle list or a bad amount, and
/// (errc::infeasible) naming the resource when no layout of live nodes
/// can ever hold the bundles. A copy is the same group. The group lives
/// until `remove_placement_group` or the end of the process that made it.
class placement_group {
public:
  using bundle = std::map<std::string, double>;

  explicit placement_group(
    std::vector<bundle> bundles,
    placement_strategy strategy = placement_strategy::pack);

  /// Resolves when every bundle is reserved; fails if the group is removed
  /// first or a node chosen for a bundle dies before it reserved it.
  ObjectRef<void> ready() const {
    return ObjectRef<void>{st_->ready};
  }

  /// Unique in the cluster; part of the names of the resources its bundles
  /// offer on their nodes (e.g. cpu_group_0_<id>).
  const std::string& id() const noexcept {
    return st_->id;
  }

  const std::vector<bundle>& bundles() const noexcept {
    return st_->bundles;
  }

  placement_strategy strategy() const noexcept {
    return st_->strategy;
  }

  /// The node that holds bundle `index`; throws `usage_error` for an index
  /// out of range.
  std::string bundle_node(size_t index) const;

  const std::shared_ptr<detail::placement_group_state>& state() const noexcept {
    return st_;
  }

private:
  std::shared_ptr<detail::placement_group_state> st_;
};

namespace detail {

/// Where work placed in bundle `bundle_index` of `pg` goes (-1: any);
/// throws `usage_error` for an index out of range.
placement in_group(const placement_group& pg, int bundle_index);

} // namespace detail

/// Gives the group's bundles back and ends what runs in them, as Ray's
/// remove_placement_group: its actors die (calls fail with `actor_died`),
/// its tasks are cancelled (`task_cancelled`; a running one sees
/// `lumen::cancelled()`), and work placed into it later fails. A second
/// call does nothing.
void remove_placement_group(const placement_group& pg);

} // namespace lumen
