#pragma once

#include <map>
#include <string>
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

/// Where a task or actor runs: here (the default), on a named node, or
/// round-robin over the live nodes.
struct placement {
  enum kind_t { local, node, spread } kind = local;
  std::string node_id;
};

} // namespace lumen
