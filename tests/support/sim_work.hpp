#pragma once

// Work the simulated-cluster suites run: a result, a virtual nap, charged
// compute; nanoseconds, which Boost.Test prints; and a sweep's verdict.

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include <boost/test/unit_test.hpp>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

namespace {

template <class D>
long long ns(D d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

/// Runs `script` under every seed from `first` to `last` (lumen::sim::sweep)
/// and fails the test case for each seed whose run threw, saying what.
inline void every_seed_passes(uint64_t first, uint64_t last,
                              const std::function<void()>& script,
                              lumen::init_options opts = {}) {
  auto found = lumen::sim::sweep(first, last, script, std::move(opts));
  BOOST_TEST(found.runs == last - first + 1);
  for (auto& [seed, what] : found.failed)
    BOOST_ERROR("seed " << seed << ": " << what);
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
