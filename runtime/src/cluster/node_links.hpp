#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>

#include "cluster/directory_cache.hpp"
#include "cluster/head_link.hpp"
#include "core/process_services.hpp"
#include "security/credentials.hpp"
#include "transport/data_client.hpp"

namespace lumen::detail {

/// A driver's connections to the nodes it works with, made on first use:
/// for each node, its manager's handle on the control plane (monitored, so
/// that a node's death is heard even on a cut link) and a data-plane
/// client, or the data-plane client alone where only typed actors' requests
/// need it. A failed connection is retired once: the first to see it fail
/// marks the node dead and hands the connection on to `on_lost`.
class node_links {
public:
  struct link {
    caf::actor manager; // null for a data-plane link alone
    std::shared_ptr<data_client> data;
    caf::node_id process; // the node's CAF node
  };

  /// Receives a lost node's id, why, and its retired connection (to fail
  /// what is pending on it), on the thread that saw it fail.
  using lost_fn = std::function<void(std::string node, std::string why,
                                     std::shared_ptr<data_client> data)>;

  /// `data_alone`: tasks and actor calls go on the data plane alone
  /// (for_work), as a node's do.
  node_links(process_services& rt, credentials creds, head_link& head,
             directory_cache& directory, bool data_alone, lost_fn on_lost);

  /// The link to `node_id`, connecting and saying hello if needed; throws
  /// `error` if the node cannot be reached.
  link get(const std::string& node_id);

  /// The data-plane client of `node_id`, whose CAF node is `process`,
  /// connecting if needed but opening no control link: two processes that
  /// open CAF links to each other at the same moment can both close theirs
  /// as redundant (CAF 0.17's BASP), which drops what is on its way and
  /// takes every handle of the other process for dead. Throws `error` if
  /// the node cannot be reached.
  std::shared_ptr<data_client> data(const std::string& node_id,
                                    const caf::node_id& process);

  /// The connection that tasks and actor calls to `node_id` go on: with a
  /// control link (`get`) in a driver, whose pulses tell of the node's
  /// death soonest; alone (`data`) in a node, since two nodes that send
  /// each other work at the same moment would otherwise open CAF links to
  /// each other at once. Throws `error` if the node cannot be reached.
  std::shared_ptr<data_client> for_work(const std::string& node_id) {
    return data_alone_ ? data(node_id, {}) : get(node_id).data;
  }

  /// The connection of `node_id` that is `failed` (any, if null) is gone
  /// for `why`. Does nothing if the node has a newer connection already.
  void lose(const std::string& node_id, const data_client* failed,
            const std::string& why);

  /// The open data connection of the linked node whose CAF node is `nid`,
  /// or null.
  std::shared_ptr<data_client> linked(const caf::node_id& nid);

  /// The node whose manager is `manager`, or "" if none.
  std::string node_of(const caf::actor_addr& manager);

  /// The linked node whose CAF node is `nid`, or "" if none.
  std::string node_of(const caf::node_id& nid);

  /// The nodes linked on the data plane alone.
  std::set<std::string> data_only();

  /// Closes every connection and waits for their readers, so that no
  /// callback runs afterwards.
  void close_all();

private:
  /// The directory's entry of `node_id`, asking the head again if it is
  /// not there; empty addresses if the head does not know it either.
  node_info entry_of(const std::string& node_id);

  std::shared_ptr<data_client> connect_data(const std::string& node_id,
                                            const std::string& data_address);

  /// Puts `fresh` in `slot` unless another thread put an open connection
  /// there first (then `fresh` is dropped); true if it did. Under mtx_.
  bool keep_or_drop(link& slot, std::shared_ptr<data_client> fresh);

  /// The id of the first linked node whose link matches, or "".
  template <class Match>
  std::string first_node(Match match);

  process_services& rt_;
  credentials creds_;
  head_link& head_;
  directory_cache& directory_;
  bool data_alone_;
  lost_fn on_lost_;
  std::mutex mtx_;
  std::unordered_map<std::string, link> links_;
  // Connections of lost nodes. Kept, not destroyed, since the last
  // reference could otherwise drop on the connection's own reader thread,
  // which joins it.
  std::vector<std::shared_ptr<data_client>> retired_;
};

} // namespace lumen::detail
