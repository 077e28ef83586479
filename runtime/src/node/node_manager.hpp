#pragma once

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

namespace lumen::detail {

class data_server;
class process_services;

/// How a head or worker node process takes part in the cluster.
struct node_settings {
  bool is_head = false;
  std::string host = "127.0.0.1"; // where this node listens
  uint16_t port = 0;              // 0: the OS picks one
  uint16_t data_port = 0;         // the data server's, once it listens
  /// A node given up for dead by the head exits instead of rejoining.
  bool exit_when_given_up = false;
};

/// Spawns the node manager: the actor a node publishes on its port. It runs
/// tasks and hosts actors that other processes send it; on the head it also
/// keeps the cluster directory and marks nodes dead when their managers go
/// down. Only peers its gate admitted reach it (control_link.hpp).
caf::actor spawn_node_manager(caf::actor_system& sys, process_services& rt,
                              data_server& data, node_settings settings);

} // namespace lumen::detail
