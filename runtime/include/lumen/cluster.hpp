#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lumen {

/// One node of the cluster, as the head's directory sees it.
struct node_info {
  std::string id;      // "head", "node-1", ...; "local" for an embedded run
  std::string address; // HOST:PORT of its control endpoint (CAF)
  bool alive = true;
  std::map<std::string, double> resources; // what it offers in all
  std::string data_address;                // HOST:PORT where tasks and calls go
  int actors = 0; // actors it hosts for other processes
  /// What running tasks and live actors hold of `resources`, as the node
  /// last reported (within a second); names holding nothing are left out.
  std::map<std::string, double> used;

  template <class Inspector>
  friend typename Inspector::result_type inspect(Inspector& f, node_info& x) {
    return f(x.id, x.address, x.alive, x.resources, x.data_address, x.actors,
             x.used);
  }
};

/// The nodes of the cluster this process belongs to, the dead ones too; a
/// single "local" node for an embedded cluster.
std::vector<node_info> nodes();

/// The id of the node this process is, or "local". A node given up for
/// dead by the head rejoins under a new id.
std::string this_node_id();

namespace detail {
struct placement_group_state;
} // namespace detail

/// Where a task or actor runs: here (the default), on a named node,
/// round-robin over the live nodes, or in a bundle of a placement group
/// (lumen/placement_group.hpp; `bundle` -1 for any that holds the work).
struct placement {
  enum kind_t { local, node, spread, in_group };

  placement() = default;
  placement(kind_t k, std::string node = {})
    : kind(k)
    , node_id(std::move(node)) {}
  placement(std::shared_ptr<detail::placement_group_state> g, int b)
    : kind(in_group)
    , bundle(b)
    , group(std::move(g)) {}

  kind_t kind = local;
  int bundle = -1; // beside kind: a placement is in every task
  std::string node_id;
  std::shared_ptr<detail::placement_group_state> group;
};

} // namespace lumen
