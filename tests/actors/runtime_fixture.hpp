#pragma once

// A Lumen runtime of this process alone for the whole test binary:
// BOOST_TEST_GLOBAL_FIXTURE(lumen::test::local_runtime).

#include <lumen/lumen.hpp>

namespace lumen::test {

struct local_runtime {
  local_runtime() {
    lumen::init();
  }
  ~local_runtime() {
    lumen::shutdown();
  }
};

} // namespace lumen::test
