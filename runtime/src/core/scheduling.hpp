#pragma once

// Who makes progress while a thread waits. With real threads (every role
// of a real cluster) a wait blocks and other threads publish; in a
// simulated cluster one thread runs everything and a wait is where its
// scheduler runs the events (sim/sim_world.hpp). Waits ask here which.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace lumen::detail {

class object_state;

class scheduling {
public:
  using clock = std::chrono::steady_clock;

  virtual ~scheduling();

  /// The clock of waits' deadlines (lumen::get's timeout).
  virtual clock::time_point now() = 0;

  /// Returns once `need` of `states` are ready or `deadline` passed.
  virtual void wait(const std::vector<object_state*>& states, size_t need,
                    clock::time_point deadline) = 0;

  /// The node the running code is on, for this_node().
  virtual std::string node() = 0;
};

/// The scheduling in force, or null for real threads.
scheduling* current_scheduling() noexcept;

/// Puts `s` in force (null: real threads again).
void set_scheduling(scheduling* s) noexcept;

} // namespace lumen::detail
