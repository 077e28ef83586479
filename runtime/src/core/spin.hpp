#pragma once

#include <chrono>
#include <thread>

namespace lumen::detail {

/// How long a thread that expects work or an answer within microseconds
/// polls before it sleeps: long enough to cover another core answering a
/// synchronous call or submitting the next task, short enough that a thread
/// waiting for slow work soon gives its core back. A futex sleep and wake
/// costs 5-10 µs on each side here.
constexpr auto spin_budget = std::chrono::microseconds(50);

/// How long a `get` polls before it parks: longer, since a reply from
/// another process of this machine takes 50-100 µs to come back, and the
/// park would add its sleep and wake to every synchronous call across
/// processes (a typed request: 1.0x a raw TCP ping-pong instead of 0.9x).
constexpr auto get_spin_budget = std::chrono::microseconds(150);

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

} // namespace lumen::detail
