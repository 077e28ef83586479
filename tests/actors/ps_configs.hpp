#pragma once

// A parameter server's config for the tests: a mode, its workers, plain
// SGD at `lr`.

#include <lumen/ml.hpp>

namespace lumen::test {

inline ml::ps_config sgd_config(ml::ps_mode mode, size_t workers,
                                float lr = 0.1f) {
  ml::ps_config cfg;
  cfg.mode = mode;
  cfg.workers = workers;
  cfg.optimizer.lr = lr;
  return cfg;
}

} // namespace lumen::test
