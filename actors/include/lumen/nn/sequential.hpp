#pragma once

// Models as layers: a stack of layers, each with its forward and backward
// pass, over one flat float32 parameter vector, built in C++ or from a
// short spec string. A sequential model is an ml::model: the parameter
// server, the trainer's buckets, the all-reduce and checkpoints take it as
// they take the MLP, and its backward pass tells each layer's gradient
// ready as it is written.
//
//   lumen::nn::sequential cnn{{1, 28, 28},
//     "conv(32,3)-relu-pool(2)-conv(64,3)-relu-pool(2)-linear(128)-relu-"
//     "linear(10)"};
//   auto w = cnn.init(seed);
//   float loss = cnn.loss_and_gradient(w.data(), batch, g.data());
//
// The spec's layers, joined by '-':
//   linear(N)        N outputs from all the input's values (flattened)
//   conv(C,K[,P])    C channels of K×K kernels, stride 1, P zeros of
//                    padding on each side (default 0)
//   pool(K)          K×K max pooling, stride K
//   relu, gelu       max(x, 0); x·Φ(x) (exact)
//   dropout(P)       in training, P% of the values zeroed, the others
//                    scaled by 1/(1-P%), drawn from the example itself
//   flatten
// and for token sequences (an input of 1xTx1, T token ids an example):
//   embed(V,D)       each token's D values (of V tokens) plus its
//                    position's, both learned: 1xTxD
//   dense(N)         N outputs at each position from its D values
//   norm             layer normalisation of each position's values
//   attn(H)          causal self-attention, H heads
//   res(...)         the layers inside, plus their input (a residual)
// The last layer's outputs are the classes' logits (at each position, for
// a sequence: labels are then a row of T next tokens an example); the
// loss is softmax cross-entropy.
//
//   lumen::nn::sequential gpt{{1, 64, 1},
//     "embed(96,128)-res(norm-attn(4))-res(norm-dense(512)-gelu-"
//     "dense(128))-norm-dense(96)"};
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lumen/ml/models.hpp"

namespace lumen::nn {

/// The shape of one example's values: channels × height × width (a flat
/// vector of n values is {n, 1, 1}).
struct shape {
  size_t channels = 1, height = 1, width = 1;

  size_t size() const noexcept {
    return channels * height * width;
  }
  bool operator==(const shape& o) const noexcept {
    return channels == o.channels && height == o.height && width == o.width;
  }
};

/// "1x28x28", or "128" for a flat vector.
std::string to_string(const shape& s);

/// What the layers of `spec` compute, in words: how they are numbered
/// and a sentence for each kind of layer the spec uses, for a reader of a
/// checkpoint who has the file alone (its "forward"). Throws as
/// sequential's constructor for a spec that does not parse.
std::string describe_layers(const std::string& spec);

class layer;

/// A stack of layers ending in the classes' logits, under softmax
/// cross-entropy.
class sequential : public ml::model {
public:
  /// Throws `usage_error` for a spec that does not parse (naming the
  /// position and what was expected) or a layer that does not fit its
  /// input (naming the layer and both shapes).
  sequential(shape input, const std::string& spec);
  ~sequential() override;
  sequential(sequential&&) noexcept;

  std::string name() const override;
  size_t num_params() const override;
  /// Each layer's weights drawn from `seed` (He's uniform bound for the
  /// ReLU that follows), its biases zeros.
  std::vector<float> init(uint64_t seed) const override;
  /// The ranges of the layers that have parameters, in forward order.
  std::vector<ml::param_range> layers() const override;
  float loss_and_gradient(const float* params, const ml::dataset& batch,
                          float* grad) const override;
  float loss_and_gradient(const float* params, const ml::dataset& batch,
                          float* grad,
                          const ml::gradient_ready& ready) const override;
  float loss(const float* params, const ml::dataset& batch) const override;
  float accuracy(const float* params, const ml::dataset& batch) const override;

  /// The last layer's outputs for `features` (a row an example): the
  /// logits, a row of classes() an example (and position).
  std::vector<float> outputs(const float* params,
                             const ml::tensor& features) const;

  /// A line per layer: its spec, output shape and parameters.
  std::string summary() const;

  /// The input's shape, the last layer's outputs (the classes).
  const shape& input() const noexcept {
    return input_;
  }
  size_t classes() const;
  /// Of a model of token sequences (starting with embed), the positions
  /// of an example, each with its own label (the next token); else 1.
  size_t positions() const;

  /// A parameter tensor: its name, its place in the flat vector and its
  /// shape (row-major).
  struct tensor_range {
    std::string name;
    ml::param_range range;
    std::vector<int64_t> shape;
  };

  /// Each parameter layer's tensors, in order: "layers.0.weight",
  /// "layers.0.bias", ... (the index is the layer's place in the spec).
  /// A linear layer's weight is [inputs, outputs] (y = x @ weight + bias),
  /// a convolution's [channels, input channels, K, K] as PyTorch's.
  std::vector<tensor_range> tensors() const;

private:
  /// The mean loss over `batch`, and its right answers unless `right` is
  /// null, without gradients.
  float evaluate(const float* params, const ml::dataset& batch,
                 size_t* right) const;
  /// Each layer's input, and the logits last, of `rows` examples, into
  /// this thread's activations (sequential.cpp).
  void forward(const float* params, const float* features, size_t rows) const;
  float run(const float* params, const ml::dataset& batch, float* grad,
            size_t* right, const ml::gradient_ready* ready) const;

  shape input_;
  std::string spec_;
  std::vector<std::unique_ptr<layer>> layers_;
  std::vector<size_t> offsets_; // each layer's first parameter
  // Of a residual's ")", the index of its "res(" (-1 for other layers);
  // whether a layer is a "res(".
  std::vector<long> skip_from_;
  std::vector<bool> opens_residual_;
  size_t param_layers_ = 0; // layers with parameters
  size_t params_ = 0;
  size_t positions_ = 1;
};

} // namespace lumen::nn
