#pragma once

// Work the simulated-cluster suites run: a result, a virtual nap, charged
// compute; and nanoseconds, which Boost.Test prints.

#include <chrono>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

namespace {

template <class D>
long long ns(D d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

int square(int x) {
  return x * x;
}
LUMEN_REMOTE(square);

int nap(int ms) {
  lumen::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
LUMEN_REMOTE(nap);

int busy(double seconds) {
  lumen::sim::charge(std::chrono::duration<double>(seconds));
  return 0;
}
LUMEN_REMOTE(busy);

} // namespace
