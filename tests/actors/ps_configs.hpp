#pragma once

// A parameter server's config for the tests (a mode, its workers, plain
// SGD at `lr`), and the shards of its workers' data.

#include <vector>

#include <lumen/ml.hpp>

namespace lumen::test {

/// Every worker's shard of `d`, for `workers` workers, drawn with `seed`.
inline std::vector<ml::dataset> shards_of(const ml::dataset& d, size_t workers,
                                          uint64_t seed) {
  std::vector<ml::dataset> out;
  for (size_t w = 0; w < workers; ++w)
    out.push_back(ml::shard_of(d, w, workers, seed));
  return out;
}

inline ml::ps_config sgd_config(ml::ps_mode mode, size_t workers,
                                float lr = 0.1f) {
  ml::ps_config cfg;
  cfg.mode = mode;
  cfg.workers = workers;
  cfg.optimizer.lr = lr;
  return cfg;
}

} // namespace lumen::test
