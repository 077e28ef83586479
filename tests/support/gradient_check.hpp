#pragma once

// Central differences, for the suites that check a model's gradient.

#include <cstddef>
#include <utility>
#include <vector>

#include <lumen/ml/models.hpp>

/// The loss of `m` on `batch` with parameter `i` of `w` moved up by `h`,
/// then down by `h`; `w` is as it was after.
inline std::pair<double, double>
losses_around(const lumen::ml::model& m, std::vector<float>& w, size_t i,
              float h, const lumen::ml::dataset& batch) {
  auto keep = w[i];
  w[i] = keep + h;
  double up = m.loss(w.data(), batch);
  w[i] = keep - h;
  double down = m.loss(w.data(), batch);
  w[i] = keep;
  return {up, down};
}
