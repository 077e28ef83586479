#pragma once

// Models on Eigen with hand-written gradients, each holding its
// parameters as one flat float32 vector: what a parameter server keeps, a
// worker sends as its gradient and an all-reduce averages.
//
//   lumen::ml::softmax_regression m{784, 10};
//   auto w = m.init(seed);
//   std::vector<float> g(m.num_params());
//   float loss = m.loss_and_gradient(w.data(), batch, g.data());
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lumen/ml/data.hpp"

namespace lumen::ml {

/// Parameters `[begin, end)` of a model's flat vector.
struct param_range {
  size_t begin = 0;
  size_t end = 0;

  size_t size() const noexcept {
    return end - begin;
  }
};

/// Told that layer `layer`'s gradient is written, while the backward
/// pass goes on with the layers before it (a data-parallel step starts
/// that gradient's all-reduce then).
using gradient_ready = std::function<void(size_t layer)>;

class model {
public:
  virtual ~model() = default;

  /// "linear_regression", "softmax_regression", "mlp 784-128-10".
  virtual std::string name() const = 0;

  /// How many floats the parameters (and so a gradient) take.
  virtual size_t num_params() const = 0;

  /// Parameters to start from: zeros for the linear models, as the seed's
  /// parameter server starts; the MLP's weights drawn from `seed` (He
  /// initialization), its biases zeros.
  virtual std::vector<float> init(uint64_t seed) const = 0;

  /// The batch's mean loss at `params`; writes its gradient to `grad`
  /// (num_params() floats). Throws `usage_error` for a batch whose feature
  /// count or labels do not fit the model.
  virtual float loss_and_gradient(const float* params, const dataset& batch,
                                  float* grad) const = 0;

  /// The parameters of each layer, in forward order, covering the flat
  /// vector: the unit the backward pass finishes gradients in. One range
  /// for the linear models.
  virtual std::vector<param_range> layers() const;

  /// As loss_and_gradient, calling `ready(l)` as soon as layer l's
  /// gradient is written: the last layer first. The gradient equals
  /// loss_and_gradient's into the same buffer to the bit (Eigen's kernels
  /// round by the output's alignment).
  virtual float loss_and_gradient(const float* params, const dataset& batch,
                                  float* grad,
                                  const gradient_ready& ready) const;

  /// The batch's mean loss alone.
  virtual float loss(const float* params, const dataset& batch) const = 0;

  /// The fraction of the batch classified right (classifiers; a
  /// regression throws `usage_error`).
  virtual float accuracy(const float* params, const dataset& batch) const;
};

/// y ≈ x·w + b, loss ½·mean((x·w + b − y)²); parameters w (dim), then b.
class linear_regression : public model {
public:
  explicit linear_regression(size_t dim);
  using model::loss_and_gradient; // the form with `ready` too
  std::string name() const override;
  size_t num_params() const override;
  std::vector<float> init(uint64_t seed) const override;
  float loss_and_gradient(const float* params, const dataset& batch,
                          float* grad) const override;
  float loss(const float* params, const dataset& batch) const override;

private:
  size_t dim_;
};

/// A multi-layer perceptron: ReLU hidden layers of the given widths, then
/// softmax cross-entropy; parameters layer by layer, W (in × out,
/// row-major) then b (out). mlp{784, {256, 128}, 10} has 235,146
/// parameters (a 940,584-byte gradient).
class mlp : public model {
public:
  mlp(size_t dim, std::vector<size_t> hidden, size_t classes);
  std::string name() const override;
  size_t num_params() const override;
  std::vector<float> init(uint64_t seed) const override;
  float loss_and_gradient(const float* params, const dataset& batch,
                          float* grad) const override;
  std::vector<param_range> layers() const override;
  float loss_and_gradient(const float* params, const dataset& batch,
                          float* grad,
                          const gradient_ready& ready) const override;
  float loss(const float* params, const dataset& batch) const override;
  float accuracy(const float* params, const dataset& batch) const override;

private:
  /// The forward pass (and the backward one if `grad`, telling `ready` of
  /// each layer done if it is set): the mean loss, and the number of rows
  /// classified right if `right`.
  float run(const float* params, const dataset& batch, float* grad,
            size_t* right, const gradient_ready* ready) const;

  std::vector<size_t> widths_; // dim, hidden..., classes
};

/// Class probabilities softmax(x·W + b), loss the mean cross-entropy;
/// parameters W (dim × classes, row-major), then b (classes): an MLP
/// without hidden layers, starting from zeros.
class softmax_regression : public mlp {
public:
  softmax_regression(size_t dim, size_t classes);
  std::string name() const override;
  std::vector<float> init(uint64_t seed) const override;
};

/// A model by name and sizes, to build on whichever node needs it:
/// "linear_regression" (dim), "softmax_regression" (dim, classes), "mlp"
/// (dim, hidden, classes), "sequential" (layers over input: an
/// nn::sequential, its classes its last layer's outputs).
struct model_spec {
  std::string kind = "softmax_regression";
  uint64_t dim = 784;
  std::vector<uint64_t> hidden;
  uint64_t classes = 10;
  /// A sequential model's layers, as nn::sequential's spec writes them,
  /// and its input's channels, height and width (their product is dim).
  std::string layers = {};
  std::vector<uint64_t> input = {};

  bool operator==(const model_spec& o) const {
    return kind == o.kind && dim == o.dim && hidden == o.hidden &&
           classes == o.classes && layers == o.layers && input == o.input;
  }
  bool operator!=(const model_spec& o) const {
    return !(*this == o);
  }
};

/// The sequential model of `layers` over an input of `channels` ×
/// `height` × `width`.
model_spec sequential_spec(std::string layers, uint64_t channels,
                           uint64_t height, uint64_t width);

/// The model `spec` names. Throws `usage_error` for an unknown kind, a
/// size of zero, or layers that do not parse or fit.
std::unique_ptr<model> make_model(const model_spec& spec);

} // namespace lumen::ml
