#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <caf/actor.hpp>

#include "core/process_services.hpp"
#include "node/data_server.hpp"
#include "node/node_manager.hpp"
#include "security/gate.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// What the head and a node add to a driver's cluster part: the node
/// manager on the control port (CAF), behind a gate, beside the data
/// server on the data port. A node joins the head at its address; the
/// head keeps the cluster's directory.
class node_serving {
public:
  /// Serves as `serve` says (`serve.is_head` for the head) next to `data`,
  /// a node joining the head at `head`; throws `error` saying what failed.
  node_serving(process_services& rt, data_server& data, node_settings serve,
               const address& head, const credentials& creds);

  /// Closes the gate and the links it relays.
  ~node_serving();

  uint16_t port() const;

  bool is_head() const noexcept {
    return is_head_;
  }

  /// Joins a head that is back, under the new id it gives.
  std::function<void(const caf::actor&)> rejoin();

  /// Closes the gate to new peers and ends the node manager (no more
  /// spawns, which use the data plane); the data server closes after.
  void stop();

private:
  process_services& rt_;
  bool is_head_;
  std::unique_ptr<gate> control_gate_;
  caf::actor manager_;
};

} // namespace lumen::detail
