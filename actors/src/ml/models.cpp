#include "lumen/ml/models.hpp"

#include "lumen/nn/sequential.hpp"

#include <cmath>
#include <limits>
#include <random>

#include "ml/dense.hpp"

namespace lumen::ml {

using detail::check_batch;
using detail::const_matrix_map;
using detail::const_vector_map;
using detail::idx;
using detail::matrix;
using detail::matrix_map;
using detail::vector_map;

float model::accuracy(const float*, const dataset&) const {
  throw usage_error(name() + " is a regression: it has a loss, no accuracy");
}

linear_regression::linear_regression(size_t dim)
  : dim_(dim) {}

std::string linear_regression::name() const {
  return "linear_regression";
}

size_t linear_regression::num_params() const {
  return dim_ + 1;
}

std::vector<float> linear_regression::init(uint64_t) const {
  return std::vector<float>(num_params(), 0.0f);
}

float linear_regression::loss_and_gradient(const float* params,
                                           const dataset& batch,
                                           float* grad) const {
  check_batch(name(), batch, dim_, 0);
  auto n = batch.size();
  const_matrix_map x{batch.features.data<float>(), idx(n), idx(dim_)};
  const_vector_map y{batch.labels.data<float>(), idx(n)};
  const_vector_map w{params, idx(dim_)};
  Eigen::VectorXf r = ((x * w).array() + params[dim_]).matrix() - y;
  if (grad != nullptr) {
    vector_map{grad, idx(dim_)} = x.transpose() * r / static_cast<float>(n);
    grad[dim_] = r.mean();
  }
  return 0.5f * r.squaredNorm() / static_cast<float>(n);
}

float linear_regression::loss(const float* params, const dataset& batch) const {
  return loss_and_gradient(params, batch, nullptr);
}

mlp::mlp(size_t dim, std::vector<size_t> hidden, size_t classes) {
  if (dim == 0 || classes < 2)
    throw usage_error("mlp: " + std::to_string(dim) + " features and " +
                      std::to_string(classes) +
                      " classes; it needs one feature and two classes at "
                      "least");
  widths_.push_back(dim);
  for (auto h : hidden) {
    if (h == 0)
      throw usage_error("mlp: a hidden layer of width 0");
    widths_.push_back(h);
  }
  widths_.push_back(classes);
}

std::string mlp::name() const {
  std::string out = "mlp ";
  for (size_t i = 0; i < widths_.size(); ++i)
    out += (i ? "-" : "") + std::to_string(widths_[i]);
  return out;
}

size_t mlp::num_params() const {
  size_t n = 0;
  for (size_t l = 0; l + 1 < widths_.size(); ++l)
    n += (widths_[l] + 1) * widths_[l + 1];
  return n;
}

std::vector<float> mlp::init(uint64_t seed) const {
  std::vector<float> p(num_params(), 0.0f);
  std::mt19937_64 gen{seed};
  size_t at = 0;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    auto in = widths_[l], out = widths_[l + 1];
    // He: uniform in ±sqrt(6 / fan-in), for ReLU layers.
    auto bound = std::sqrt(6.0 / static_cast<double>(in));
    for (size_t i = 0; i < in * out; ++i) {
      auto u = static_cast<double>(gen() >> 11) / 9007199254740992.0;
      p[at + i] = static_cast<float>((2 * u - 1) * bound);
    }
    at += (in + 1) * out; // the biases stay zero
  }
  return p;
}

float mlp::run(const float* params, const dataset& batch, float* grad,
               size_t* right, const gradient_ready* ready) const {
  check_batch(name(), batch, widths_.front(), widths_.back());
  auto n = batch.size();
  auto layers = widths_.size() - 1;
  // acts[l] is layer l's input; acts[0] is the batch.
  std::vector<matrix> acts(layers);
  std::vector<size_t> offsets(layers);
  size_t at = 0;
  for (size_t l = 0; l < layers; ++l) {
    offsets[l] = at;
    at += (widths_[l] + 1) * widths_[l + 1];
  }
  auto weights = [&](size_t l) {
    return const_matrix_map{params + offsets[l], idx(widths_[l]),
                            idx(widths_[l + 1])};
  };
  auto biases = [&](size_t l) {
    return const_vector_map{params + offsets[l] + widths_[l] * widths_[l + 1],
                            idx(widths_[l + 1])};
  };
  const_matrix_map x{batch.features.data<float>(), idx(n), idx(widths_[0])};
  matrix z;
  for (size_t l = 0; l < layers; ++l) {
    if (l == 0)
      z = x * weights(0);
    else
      z = acts[l] * weights(l);
    z.rowwise() += biases(l).transpose();
    if (l + 1 < layers)
      acts[l + 1] = z.cwiseMax(0.0f);
  }
  auto total = detail::softmax_cross_entropy(z, batch.labels.data<int32_t>(),
                                             right, grad != nullptr);
  if (grad != nullptr) {
    // z is dL/dz now: back through the layers.
    for (size_t l = layers; l-- > 0;) {
      matrix_map dw{grad + offsets[l], idx(widths_[l]), idx(widths_[l + 1])};
      vector_map db{grad + offsets[l] + widths_[l] * widths_[l + 1],
                    idx(widths_[l + 1])};
      if (l == 0)
        dw.noalias() = x.transpose() * z;
      else
        dw.noalias() = acts[l].transpose() * z;
      // Row by row: each bias's sum in the same order wherever `db`
      // lies in memory (Eigen's colwise().sum() pairs rows in its
      // vectorised part and not in the rest, so that the bits depended
      // on the gradient buffer's alignment).
      db.setZero();
      for (Eigen::Index i = 0; i < z.rows(); ++i)
        db += z.row(i).transpose();
      if (ready != nullptr)
        (*ready)(l);
      if (l > 0) {
        matrix back = z * weights(l).transpose();
        z = (acts[l].array() > 0.0f).select(back, 0.0f);
      }
    }
  }
  return total;
}

float mlp::loss_and_gradient(const float* params, const dataset& batch,
                             float* grad) const {
  return run(params, batch, grad, nullptr, nullptr);
}

std::vector<param_range> mlp::layers() const {
  std::vector<param_range> out;
  size_t at = 0;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    auto next = at + (widths_[l] + 1) * widths_[l + 1];
    out.push_back({at, next});
    at = next;
  }
  return out;
}

float mlp::loss_and_gradient(const float* params, const dataset& batch,
                             float* grad, const gradient_ready& ready) const {
  return run(params, batch, grad, nullptr, &ready);
}

float mlp::loss(const float* params, const dataset& batch) const {
  return run(params, batch, nullptr, nullptr, nullptr);
}

float mlp::accuracy(const float* params, const dataset& batch) const {
  size_t right = 0;
  run(params, batch, nullptr, &right, nullptr);
  return static_cast<float>(right) / static_cast<float>(batch.size());
}

std::vector<param_range> model::layers() const {
  return {{0, num_params()}};
}

float model::loss_and_gradient(const float* params, const dataset& batch,
                               float* grad, const gradient_ready& ready) const {
  auto loss = loss_and_gradient(params, batch, grad);
  for (auto l = layers().size(); l-- > 0;)
    ready(l);
  return loss;
}

softmax_regression::softmax_regression(size_t dim, size_t classes)
  : mlp(dim, {}, classes) {}

std::string softmax_regression::name() const {
  return "softmax_regression";
}

std::vector<float> softmax_regression::init(uint64_t) const {
  return std::vector<float>(num_params(), 0.0f);
}

std::unique_ptr<model> make_model(const model_spec& spec) {
  if (spec.kind == "linear_regression") {
    if (spec.dim == 0)
      throw usage_error("linear_regression: a model of 0 features; give "
                        "model_spec::dim");
    return std::make_unique<linear_regression>(spec.dim);
  }
  if (spec.kind == "softmax_regression")
    return std::make_unique<softmax_regression>(spec.dim, spec.classes);
  if (spec.kind == "mlp")
    return std::make_unique<mlp>(
      spec.dim, std::vector<size_t>(spec.hidden.begin(), spec.hidden.end()),
      spec.classes);
  if (spec.kind == "sequential") {
    if (spec.input.size() != 3 ||
        spec.input[0] * spec.input[1] * spec.input[2] != spec.dim)
      throw usage_error("sequential: an input shape of " +
                        std::to_string(spec.input.size()) + " sizes for dim " +
                        std::to_string(spec.dim) +
                        "; give channels, height and width whose product is "
                        "dim (sequential_spec does)");
    return std::make_unique<nn::sequential>(nn::shape{size_t(spec.input[0]),
                                                      size_t(spec.input[1]),
                                                      size_t(spec.input[2])},
                                            spec.layers);
  }
  throw usage_error("unknown model '" + spec.kind +
                    "'; the models are linear_regression, softmax_regression, "
                    "mlp and sequential");
}

model_spec sequential_spec(std::string layers, uint64_t channels,
                           uint64_t height, uint64_t width) {
  model_spec s;
  s.kind = "sequential";
  s.dim = channels * height * width;
  s.layers = std::move(layers);
  s.input = {channels, height, width};
  s.classes = static_cast<const nn::sequential&>(*make_model(s)).classes();
  return s;
}

} // namespace lumen::ml
