#include "ml/dense.hpp"

#include <cmath>
#include <limits>

#include "lumen/errors.hpp"

namespace lumen::ml::detail {

void check_batch(const std::string& model, const dataset& batch, size_t dim,
                 size_t classes, size_t positions) {
  if (batch.features.shape().size() != 2 || batch.dim() != dim)
    throw usage_error(model + " takes " + std::to_string(dim) +
                      " features a row; the batch has " +
                      (batch.features.shape().size() == 2
                         ? std::to_string(batch.dim())
                         : "no rows of features") +
                      "; build the model for the data's width");
  if (batch.size() == 0)
    throw usage_error(model + ": an empty batch; give it one row at least");
  if (batch.labels.numel() != batch.size() * positions)
    throw usage_error(model + ": " + std::to_string(batch.labels.numel()) +
                      " labels for " + std::to_string(batch.size()) + " rows" +
                      (positions > 1 ? " of " + std::to_string(positions) +
                                         " positions, a label each"
                                     : ""));
  auto want = classes == 0 ? dtype::float32 : dtype::int32;
  if (batch.labels.type() != want)
    throw usage_error(model + " takes " + to_string(want) + " labels (" +
                      (classes == 0 ? "regression targets" : "class indices") +
                      "), not " + to_string(batch.labels.type()));
  if (classes == 0)
    return;
  auto y = batch.labels.data<int32_t>();
  for (size_t i = 0; i < batch.labels.numel(); ++i)
    if (y[i] < 0 || static_cast<size_t>(y[i]) >= classes)
      throw usage_error(
        model + ": label " + std::to_string(y[i]) + " at row " +
        std::to_string(i / positions) +
        (positions > 1 ? ", position " + std::to_string(i % positions) : "") +
        " is not a class (0-" + std::to_string(classes - 1) + ")");
}

float softmax_cross_entropy(matrix& z, const int32_t* y, size_t* right,
                            bool gradient) {
  // Stable (log-sum-exp): shifted by each row's largest logit, the sum of
  // exps is at least 1 and the loss at least 0. Logits past float's range
  // give NaN, never a loss that looks good.
  auto n = static_cast<size_t>(z.rows());
  Eigen::VectorXf top = z.rowwise().maxCoeff();
  double total = 0;
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    Eigen::Index best;
    z.row(idx(i)).maxCoeff(&best);
    hits += best == y[i];
    if (!std::isfinite(top(idx(i))))
      total = std::numeric_limits<double>::quiet_NaN();
    z.row(idx(i)).array() -= top(idx(i));
    float label_logit = z(idx(i), y[i]);
    z.row(idx(i)) = z.row(idx(i)).array().exp().matrix();
    float sum = z.row(idx(i)).sum();
    total += std::log(sum) - label_logit;
    z.row(idx(i)) /= sum; // now the probabilities
  }
  if (right != nullptr)
    *right = hits;
  if (gradient) {
    // dL/dz = (p - onehot(y)) / n.
    for (size_t i = 0; i < n; ++i)
      z(idx(i), y[i]) -= 1.0f;
    z /= static_cast<float>(n);
  }
  return static_cast<float>(total / static_cast<double>(n));
}

} // namespace lumen::ml::detail
