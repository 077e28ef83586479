#pragma once

// A fiber of the simulated cluster: the work it runs, what that work keeps
// of the thread every fiber shares, and its stack (sim_world.hpp says how
// the run uses them).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include <boost/context/fiber.hpp>

namespace lumen::detail {
class cancellable;
} // namespace lumen::detail

namespace lumen::detail::sim {

/// A fiber and what the work on it keeps of the thread it shares with
/// every other fiber.
class fiber {
public:
  boost::context::fiber ctx;  // the fiber, while it does not run
  boost::context::fiber back; // the scheduler, while it runs
  std::function<void()> job;  // empty once done: the fiber is idle
  std::exception_ptr failure; // what escaped the job, for the driver
  int node = 0;
  bool killed = false; // its node died: it never runs again
  bool parked = false;
  uint64_t park_id = 0; // a wake for an earlier park is stale
  // The thread-locals of its work, swapped in while it runs.
  const cancellable* work = nullptr;
  std::string actor;
  uint64_t typed = 0;                 // the typed CAF actor whose handler runs
  const std::string* doing = nullptr; // what it started last, for a deadlock
  // Its stack, and what ASan keeps of it while it is switched out.
  const void* stack = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;

  /// Switches from the fiber back to the script; `last`: for good.
  void yield(bool last = false);

  /// Where a switch into the fiber lands.
  void arrived();
};

} // namespace lumen::detail::sim
