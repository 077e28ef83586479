#pragma once

// Polling for what another core answers within microseconds, before a
// thread sleeps on it.

#include <chrono>
#include <thread>

namespace lumen::util {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// How a poller waits between two polls.
enum class poll_pause {
  relax, // stays on its core: for a thread whose answer comes from another
  yield, // lets a runnable thread have the core: for a thread that must not
         // slow the one it waits for when cores are few
};

/// Polls `done` until it returns true (then true) or until `end` (then
/// false). The clock is read every 64 relaxed polls, but after every
/// yield: one can hand the core away for a whole time slice.
template <class Done>
bool spin_until(Done done, std::chrono::steady_clock::time_point end,
                poll_pause pause = poll_pause::relax) {
  for (unsigned i = 1;; ++i) {
    if (done())
      return true;
    bool yielded = pause == poll_pause::yield;
    if (yielded)
      std::this_thread::yield();
    else
      cpu_relax();
    if ((yielded || i % 64 == 0) && std::chrono::steady_clock::now() >= end)
      return done();
  }
}

} // namespace lumen::util
