#pragma once

// Waiting for an event that a test can only poll for (a node's state, a
// counter on another process): ask, nap a little, ask again, up to a
// deadline. The nap lets the awaited work have the core on a busy machine.

#include <chrono>
#include <thread>

namespace lumen::test {

/// Polls `done` every `every` for up to `limit`; true once it holds. The
/// default limit is long enough for any healthy run; a shorter one is a
/// figure under test.
template <class F>
bool eventually(F done,
                std::chrono::milliseconds every = std::chrono::milliseconds(5),
                std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

} // namespace lumen::test
