#pragma once

// The time a script waits by: real, or in a simulated run (lumen/sim.hpp)
// virtual, so that the same code measures and waits alike in both.
//
//   auto start = lumen::now();
//   lumen::sleep_for(50ms);           // 50 ms, real or virtual
//   auto took = lumen::now() - start;

#include <chrono>

namespace lumen {

namespace detail {

void sleep_ns(std::chrono::nanoseconds d);

} // namespace detail

/// Sleeps `d`: in virtual time in a simulated run (other work runs
/// meanwhile), for real elsewhere.
template <class Rep, class Period>
void sleep_for(std::chrono::duration<Rep, Period> d) {
  detail::sleep_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
}

/// Now: `std::chrono::steady_clock`'s, or in a simulated run the virtual
/// time since the run began.
std::chrono::steady_clock::time_point now();

} // namespace lumen
