#include "nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <unsupported/Eigen/SpecialFunctions>

#include "lumen/errors.hpp"

namespace lumen::nn {

namespace {

/// y = x·W + b, W inputs × outputs: over every input value, flattened
/// (linear(N)), or at each position over its own values, the shape's
/// width (dense(N): the same W at every position of a sequence).
class linear : public layer {
public:
  linear(const shape& in, size_t outputs, bool each_position)
    : layer(in, each_position ? shape{in.channels, in.height, outputs}
                              : shape{outputs, 1, 1})
    , positions_(each_position ? in.channels * in.height : 1)
    , each_position_(each_position) {}

  std::string spec() const override {
    return (each_position_ ? "dense(" : "linear(") + std::to_string(outputs()) +
           ")";
  }
  size_t num_weights() const override {
    return inputs() * outputs();
  }
  size_t num_biases() const override {
    return outputs();
  }
  std::vector<int64_t> weight_shape() const override {
    return {int64_t(inputs()), int64_t(outputs())};
  }

  void forward(const float* p, const matrix& x, matrix& y) const override {
    y.resize(x.rows(), idx(out().size()));
    rows_of(y).noalias() = rows_of(x) * weights(p);
    rows_of(y).rowwise() += biases(p).transpose();
  }

  void backward(const float* p, const matrix& x, const matrix&,
                const matrix& dy, matrix* dx, float* grad) const override {
    auto dys = rows_of(dy);
    matrix_map{grad, idx(inputs()), idx(outputs())}.noalias() =
      rows_of(x).transpose() * dys;
    // Row by row, so that each bias's sum has one order wherever `grad`
    // lies in memory.
    vector_map db{grad + num_weights(), idx(outputs())};
    db.setZero();
    for (Eigen::Index i = 0; i < dys.rows(); ++i)
      db += dys.row(i).transpose();
    if (dx != nullptr) {
      dx->resize(x.rows(), x.cols());
      rows_of(*dx).noalias() = dys * weights(p).transpose();
    }
  }

protected:
  size_t fan_in() const override {
    return inputs();
  }

private:
  size_t inputs() const {
    return in().size() / positions_;
  }
  size_t outputs() const {
    return out().size() / positions_;
  }
  /// A batch's values as a row per example and position.
  const_matrix_map rows_of(const matrix& m) const {
    return {m.data(), m.rows() * idx(positions_), m.cols() / idx(positions_)};
  }
  matrix_map rows_of(matrix& m) const {
    return {m.data(), m.rows() * idx(positions_), m.cols() / idx(positions_)};
  }
  const_matrix_map weights(const float* p) const {
    return {p, idx(inputs()), idx(outputs())};
  }
  const_vector_map biases(const float* p) const {
    return {p + num_weights(), idx(outputs())};
  }

  size_t positions_;
  bool each_position_;
};

class relu : public layer {
public:
  explicit relu(const shape& in)
    : layer(in, in) {}

  std::string spec() const override {
    return "relu";
  }
  void forward(const float*, const matrix& x, matrix& y) const override {
    y = x.cwiseMax(0.0f);
  }
  void backward(const float*, const matrix&, const matrix& y, const matrix& dy,
                matrix* dx, float*) const override {
    if (dx != nullptr)
      *dx = (y.array() > 0.0f).select(dy, 0.0f);
  }
};

/// GELU, exact: x·Φ(x), Φ the standard normal's distribution function,
/// its erf and exp Eigen's, over whole vectors: the C library's, a value at
/// a time, took a fifth of a transformer's step.
class gelu : public layer {
  /// Φ over an array expression, as an expression (it holds `v` by value:
  /// a view of the matrix). Defined before its use: its type is deduced.
  template <class Array>
  static auto cdf(const Array& v) {
    return 0.5f * (1.0f + (v * 0.7071067812f).erf());
  }

public:
  explicit gelu(const shape& in)
    : layer(in, in) {}

  std::string spec() const override {
    return "gelu";
  }
  void forward(const float*, const matrix& x, matrix& y) const override {
    y = (x.array() * cdf(x.array())).matrix();
  }
  void backward(const float*, const matrix& x, const matrix&, const matrix& dy,
                matrix* dx, float*) const override {
    if (dx == nullptr)
      return;
    // Φ(x) + x·φ(x)
    auto v = x.array();
    *dx =
      (dy.array() * (cdf(v) + v * 0.3989422804f * (-0.5f * v.square()).exp()))
        .matrix();
  }
};

/// dropout(P): in training, each value zeroed with probability P% and the
/// others scaled by 1 / (1 - P%); in evaluation, y = x. Each example's
/// mask is drawn from its own values and place in the batch, so that the
/// same batch drops the same values wherever it is computed (a resumed
/// run as the uninterrupted one), and backward finds forward's mask
/// again.
class dropout : public layer {
public:
  dropout(const shape& in, size_t percent)
    : layer(in, in)
    , percent_(percent) {}

  std::string spec() const override {
    return "dropout(" + std::to_string(percent_) + ")";
  }
  void forward(const float*, const matrix& x, matrix& y) const override {
    y = x;
    if (training())
      apply_mask(x, y);
  }
  void backward(const float*, const matrix& x, const matrix&, const matrix& dy,
                matrix* dx, float*) const override {
    if (dx == nullptr)
      return;
    *dx = dy;
    apply_mask(x, *dx);
  }

private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Scales the kept values of `m` and zeroes the others, by `x`'s masks.
  void apply_mask(const matrix& x, matrix& m) const {
    auto keep = 1.0f - float(percent_) / 100.0f;
    auto cut = uint64_t(double(percent_) / 100.0 * 18446744073709551615.0);
    constexpr Eigen::Index lanes = 8;
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      // The row's seed hashes its values in eight independent chains: one
      // chain through them all cost more than the layer's other work.
      uint64_t lane[lanes];
      for (Eigen::Index l = 0; l < lanes; ++l)
        lane[l] = mix(uint64_t(i) + 0x9e3779b97f4a7c15ULL * uint64_t(l + 1));
      const float* row = x.row(i).data();
      Eigen::Index j = 0;
      for (; j + lanes <= x.cols(); j += lanes)
        for (Eigen::Index l = 0; l < lanes; ++l) {
          uint32_t bits;
          std::memcpy(&bits, row + j + l, sizeof bits);
          lane[l] = mix(lane[l] ^ bits);
        }
      for (; j < x.cols(); ++j) {
        uint32_t bits;
        std::memcpy(&bits, row + j, sizeof bits);
        lane[0] = mix(lane[0] ^ bits);
      }
      uint64_t seed = 0;
      for (auto l : lane)
        seed = mix(seed ^ l);
      for (j = 0; j < x.cols(); ++j)
        m(i, j) = mix(seed + uint64_t(j)) < cut ? 0.0f : m(i, j) / keep;
    }
  }

  size_t percent_;
};

class flatten : public layer {
public:
  explicit flatten(const shape& in)
    : layer(in, {in.size(), 1, 1}) {}

  std::string spec() const override {
    return "flatten";
  }
  void forward(const float*, const matrix& x, matrix& y) const override {
    y = x;
  }
  void backward(const float*, const matrix&, const matrix&, const matrix& dy,
                matrix* dx, float*) const override {
    if (dx != nullptr)
      *dx = dy;
  }
};

} // namespace

std::string args_of(const std::vector<size_t>& args) {
  std::string out;
  for (auto a : args)
    out += (out.empty() ? "" : ",") + std::to_string(a);
  return "(" + out + ")";
}

void check_arity(const std::string& name, const std::vector<size_t>& args,
                 size_t least, size_t most, const std::string& form) {
  if (args.size() < least || args.size() > most)
    throw usage_error(name + args_of(args) + ": write it " + form);
  // A convolution's padding (its third) may be 0.
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == 0 && !(name == "conv" && i == 2))
      throw usage_error(name + args_of(args) + ": sizes must be positive");
}

float uniform(std::mt19937_64& gen, double bound) {
  auto u = static_cast<double>(gen() >> 11) / 9007199254740992.0;
  return static_cast<float>((2 * u - 1) * bound);
}

namespace {
thread_local bool in_training = false;
} // namespace

bool training() noexcept {
  return in_training;
}

training_scope::training_scope(bool on) noexcept
  : was_(in_training) {
  in_training = on;
}

training_scope::~training_scope() {
  in_training = was_;
}

std::vector<layer::tensor_part> layer::tensors() const {
  if (num_params() == 0)
    return {};
  return {{"weight", weight_shape()}, {"bias", {int64_t(num_biases())}}};
}

void layer::init(float* params, std::mt19937_64& gen) const {
  auto bound = std::sqrt(6.0 / static_cast<double>(fan_in()));
  for (size_t i = 0; i < num_weights(); ++i)
    params[i] = uniform(gen, bound);
  std::fill(params + num_weights(), params + num_params(), 0.0f);
}

std::unique_ptr<layer> make_layer(const std::string& name,
                                  const std::vector<size_t>& args,
                                  const shape& in) {
  auto arity = [&](size_t least, size_t most, const std::string& form) {
    check_arity(name, args, least, most, form);
  };
  if (name == "linear" || name == "dense") {
    arity(1, 1,
          name == "linear" ? "linear(N), N outputs"
                           : "dense(N), N outputs at each position");
    return std::make_unique<linear>(in, args[0], name == "dense");
  }
  if (name == "relu" || name == "gelu" || name == "flatten") {
    arity(0, 0, name + ", without arguments");
    if (name == "relu")
      return std::make_unique<relu>(in);
    if (name == "gelu")
      return std::make_unique<gelu>(in);
    return std::make_unique<flatten>(in);
  }
  if (name == "dropout") {
    arity(1, 1, "dropout(P), P percent of the values dropped in training");
    if (args[0] >= 100)
      throw usage_error(name + args_of(args) +
                        ": P is a percentage below 100, e.g. dropout(25)");
    return std::make_unique<dropout>(in, args[0]);
  }
  return nullptr;
}

} // namespace lumen::nn
