#pragma once

// The layers of lumen::nn::sequential: each knows its input and output
// shapes, its parameters' count and start, and runs forward and backward
// on a batch (a row per example) over the model's flat parameter vector.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lumen/nn/sequential.hpp"

#include "ml/dense.hpp"

namespace lumen::nn {

using ml::detail::const_matrix_map;
using ml::detail::const_vector_map;
using ml::detail::idx;
using ml::detail::matrix;
using ml::detail::matrix_map;
using ml::detail::vector_map;

class layer {
public:
  layer(shape in, shape out)
    : in_(in)
    , out_(out) {}
  virtual ~layer() = default;

  const shape& in() const noexcept {
    return in_;
  }
  const shape& out() const noexcept {
    return out_;
  }

  /// As the spec writes it: "conv(32,3)".
  virtual std::string spec() const = 0;

  /// Its parameters: weights, then biases.
  virtual size_t num_weights() const {
    return 0;
  }
  virtual size_t num_biases() const {
    return 0;
  }
  size_t num_params() const {
    return num_weights() + num_biases();
  }
  /// The weights as a tensor's shape, row-major.
  virtual std::vector<int64_t> weight_shape() const {
    return {int64_t(num_weights())};
  }
  /// Its parameters as named tensors, in their order in the flat vector:
  /// "weight" (weight_shape()) then "bias", unless it says otherwise.
  struct tensor_part {
    std::string name;
    std::vector<int64_t> shape;
  };
  virtual std::vector<tensor_part> tensors() const;

  /// Of a model of token sequences, its first layer: the positions whose
  /// next tokens the logits predict (0 for any other layer).
  virtual size_t positions() const {
    return 0;
  }

  /// Weights drawn from `gen` (uniform in ±sqrt(6 / fan-in), He's bound
  /// for a ReLU after), biases zeros.
  virtual void init(float* params, std::mt19937_64& gen) const;

  /// `y` (a row of out().size() a row of `x`) from `x` (a row of
  /// in().size() an example).
  virtual void forward(const float* params, const matrix& x,
                       matrix& y) const = 0;

  /// From `dy`, dL/dy: the parameters' gradient written to `grad` and,
  /// unless `dx` is null, dL/dx. `x` and `y` are forward's.
  virtual void backward(const float* params, const matrix& x, const matrix& y,
                        const matrix& dy, matrix* dx, float* grad) const = 0;

protected:
  /// The fan-in init() bounds its weights by.
  virtual size_t fan_in() const {
    return in_.size();
  }

private:
  shape in_, out_;
};

/// The layer `name` with `args` (as the spec gave them) on input `in`.
/// Throws `usage_error` for arguments it does not take or an input it does
/// not fit, saying which; null for a name it does not know. Vector layers
/// (layers.cpp), image layers (image_layers.cpp), and those of token
/// sequences (sequence_layers.cpp).
std::unique_ptr<layer> make_layer(const std::string& name,
                                  const std::vector<size_t>& args,
                                  const shape& in);
std::unique_ptr<layer> make_image_layer(const std::string& name,
                                        const std::vector<size_t>& args,
                                        const shape& in);
std::unique_ptr<layer> make_sequence_layer(const std::string& name,
                                           const std::vector<size_t>& args,
                                           const shape& in);

/// Whether this thread's pass is training (a gradient is asked for):
/// dropout drops only then. Set for its lifetime by a training_scope.
bool training() noexcept;
class training_scope {
public:
  explicit training_scope(bool on) noexcept;
  ~training_scope();
  training_scope(const training_scope&) = delete;
  training_scope& operator=(const training_scope&) = delete;

private:
  bool was_;
};

/// Causal self-attention of `heads` heads over `in` (1xTxD, D a multiple
/// of heads), attention.cpp.
std::unique_ptr<layer> make_attention(const shape& in, size_t heads);

/// "(3,4)" of {3, 4}: the arguments as a spec writes them.
std::string args_of(const std::vector<size_t>& args);

/// Throws `usage_error` unless `args` has `least` to `most` positive
/// numbers, saying `form` (how to write the layer).
void check_arity(const std::string& name, const std::vector<size_t>& args,
                 size_t least, size_t most, const std::string& form);

/// Uniform in ±bound.
float uniform(std::mt19937_64& gen, double bound);

} // namespace lumen::nn
