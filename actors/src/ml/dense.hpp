#pragma once

// What the models share (plain C++ on Eigen, no CAF): row-major matrices
// over flat float buffers, a batch's checks, and softmax cross-entropy.

#include <cstddef>
#include <cstdint>
#include <string>

#include <Eigen/Dense>

#include "lumen/ml/data.hpp"

namespace lumen::ml::detail {

using matrix =
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using const_matrix_map = Eigen::Map<const matrix>;
using matrix_map = Eigen::Map<matrix>;
using const_vector_map = Eigen::Map<const Eigen::VectorXf>;
using vector_map = Eigen::Map<Eigen::VectorXf>;

inline auto idx(size_t n) {
  return static_cast<Eigen::Index>(n);
}

/// The batch fits a model of `dim` features: its labels are float32
/// targets (`classes` 0) or int32 classes below `classes`, `positions` a
/// row (a sequence's next tokens). Throws `usage_error` naming `model`
/// and the mismatch.
void check_batch(const std::string& model, const dataset& batch, size_t dim,
                 size_t classes, size_t positions = 1);

/// The mean softmax cross-entropy of `logits` (a row per example) against
/// `labels`; the rows classified right into `*right` if it is set. Leaves
/// dL/dlogits in `logits` with `gradient`, the probabilities without.
float softmax_cross_entropy(matrix& logits, const int32_t* labels,
                            size_t* right, bool gradient);

} // namespace lumen::ml::detail
