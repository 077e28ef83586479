#pragma once

#include <memory>
#include <string>

#include <caf/actor.hpp>

#include "cluster/driver_runtime.hpp"
#include "node/data_server.hpp"
#include "node/node_manager.hpp"
#include "security/gate.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// The head and node roles: a driver that also serves, behind a gate on
/// each of its two ports, the node manager on the control port (CAF) and
/// the data server on the data port. A node joins the head at its address;
/// the head keeps the cluster's directory.
class node_runtime final : public driver_runtime {
public:
  /// Serves as `serve` says (`serve.is_head` for the head), a node joining
  /// the head at `head`; throws `error` saying what failed.
  node_runtime(const init_options& opts, node_settings serve,
               const address& head, const credentials& creds);

  ~node_runtime() override;

  /// A node ends at once; the head, which keeps the cluster, goes on.
  void force_end(const std::string& why) override;

private:
  /// Closes the gates, ends the node manager, then the data server, which
  /// fails at once what drivers still wait for here.
  void stop_serving();

  bool is_head_;
  std::unique_ptr<gate> control_gate_;
  caf::actor manager_;
};

} // namespace lumen::detail
