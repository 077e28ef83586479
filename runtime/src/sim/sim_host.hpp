#pragma once

// An actor of a simulated run as its node hosts it and its callers reach
// it (sim_runtime.cpp runs it, sim_faults.cpp moves it when its node dies).

#include <deque>
#include <memory>
#include <string>

#include "core/actor_host.hpp"
#include "node/named_work.hpp"
#include "sim/sim_runtime.hpp"

namespace lumen::detail {

struct sim_runtime::host {
  std::shared_ptr<actor_core> core;
  uint64_t id = 0; // its spawn's work number: the order of actors
  int node = 0;
  std::string what; // "Class constructor", as the log names its building
  // On the node: what builds the instance (from the bytes that came), and
  // the instance once built.
  std::unique_ptr<named_factory> factory;
  std::shared_ptr<void> instance;
  bool built = false;
  // At the callers: calls in submission order, sent once their arguments
  // are ready; the head holds back the rest to keep the order.
  struct sent {
    std::shared_ptr<actor_call> call;
    int from;
    uint64_t work;
  };
  std::deque<sent> outbox;
  bool outbox_waiting = false;
  // On the node: calls in arrival order.
  struct arrived {
    std::shared_ptr<actor_call> call; // the caller's, for the answer
    std::shared_ptr<named_call> named;
    std::shared_ptr<value_state<bytes>> st;
    int from;
    uint64_t work;
  };
  std::deque<arrived> mailbox;
  int running = 0;
};

} // namespace lumen::detail
