// Causal multi-head self-attention, a layer of lumen::nn::sequential over
// token sequences (1xTxD).

#include <cmath>

#include "nn/layers.hpp"

namespace lumen::nn {

namespace {

/// Causal multi-head self-attention: each position attends to itself and
/// the positions before it, in H heads of D/H values, softmax(Q·Kᵀ/√(D/H))
/// · V, the heads' outputs joined and projected. Tensors qkv.weight
/// [D, 3D] (the queries', keys' and values' projections side by side),
/// qkv.bias, out.weight [D, D], out.bias.
class attention : public layer {
public:
  attention(const shape& in, size_t heads)
    : layer(in, in)
    , heads_(heads) {}

  std::string spec() const override {
    return "attn(" + std::to_string(heads_) + ")";
  }
  size_t num_weights() const override {
    return 4 * width() * width();
  }
  size_t num_biases() const override {
    return 4 * width();
  }
  std::vector<tensor_part> tensors() const override {
    auto d = int64_t(width());
    return {{"qkv.weight", {d, 3 * d}},
            {"qkv.bias", {3 * d}},
            {"out.weight", {d, d}},
            {"out.bias", {d}}};
  }
  /// Weights uniform with variance 1/D (the inputs are normalised), biases
  /// zeros.
  void init(float* params, std::mt19937_64& gen) const override {
    auto d = width();
    auto bound = std::sqrt(3.0 / double(d));
    for (size_t i = 0; i < 3 * d * d; ++i)
      params[i] = uniform(gen, bound);
    std::fill(params + 3 * d * d, params + 3 * d * d + 3 * d, 0.0f);
    auto* out = params + 3 * d * d + 3 * d;
    for (size_t i = 0; i < d * d; ++i)
      out[i] = uniform(gen, bound);
    std::fill(out + d * d, out + d * d + d, 0.0f);
  }

  void forward(const float* p, const matrix& x, matrix& y) const override {
    y.resize(x.rows(), x.cols());
    auto& s = scratch();
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      attend(p, example(x, i), s);
      matrix_map{y.row(i).data(), idx(length()), idx(width())}.noalias() =
        s.o * out_w(p);
      matrix_map{y.row(i).data(), idx(length()), idx(width())}.rowwise() +=
        out_b(p);
    }
  }

  void backward(const float* p, const matrix& x, const matrix&,
                const matrix& dy, matrix* dx, float* grad) const override {
    auto d = width(), t = length(), dh = d / heads_;
    auto scale = 1.0f / std::sqrt(float(dh));
    matrix_map dqkv_w{grad, idx(d), idx(3 * d)};
    Eigen::Map<Eigen::RowVectorXf> dqkv_b{grad + 3 * d * d, idx(3 * d)};
    matrix_map dout_w{grad + 3 * d * d + 3 * d, idx(d), idx(d)};
    Eigen::Map<Eigen::RowVectorXf> dout_b{grad + 4 * d * d + 3 * d, idx(d)};
    dqkv_w.setZero();
    dqkv_b.setZero();
    dout_w.setZero();
    dout_b.setZero();
    if (dx != nullptr)
      dx->resize(x.rows(), x.cols());
    auto& s = scratch();
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      auto xi = example(x, i);
      attend(p, xi, s); // again: cheaper to recompute than to keep
      const_matrix_map dyi{dy.row(i).data(), idx(t), idx(d)};
      dout_w.noalias() += s.o.transpose() * dyi;
      for (Eigen::Index r = 0; r < dyi.rows(); ++r)
        dout_b += dyi.row(r);
      matrix d_o = dyi * out_w(p).transpose();
      s.dqkv.resize(idx(t), idx(3 * d));
      for (size_t h = 0; h < heads_; ++h) {
        auto at = idx(h * dh), n = idx(dh);
        auto q = s.qkv.middleCols(at, n);
        auto k = s.qkv.middleCols(idx(d) + at, n);
        auto v = s.qkv.middleCols(idx(2 * d) + at, n);
        auto& prob = s.probs[h];
        matrix dprob = d_o.middleCols(at, n) * v.transpose();
        s.dqkv.middleCols(idx(2 * d) + at, n).noalias() =
          prob.transpose() * d_o.middleCols(at, n);
        // Softmax's backward, row by row: dS = P ∘ (dP - Σ dP∘P).
        Eigen::VectorXf dot = dprob.cwiseProduct(prob).rowwise().sum();
        matrix dscore = prob.cwiseProduct((dprob.colwise() - dot) * scale);
        s.dqkv.middleCols(at, n).noalias() = dscore * k;
        s.dqkv.middleCols(idx(d) + at, n).noalias() = dscore.transpose() * q;
      }
      dqkv_w.noalias() += xi.transpose() * s.dqkv;
      for (Eigen::Index r = 0; r < s.dqkv.rows(); ++r)
        dqkv_b += s.dqkv.row(r);
      if (dx != nullptr)
        matrix_map{dx->row(i).data(), idx(t), idx(d)}.noalias() =
          s.dqkv * qkv_w(p).transpose();
    }
  }

private:
  /// One example's queries, keys and values, each head's attention
  /// probabilities and the heads' joined outputs; kept by each thread
  /// from call to call.
  struct work {
    matrix qkv, o, dqkv;
    std::vector<matrix> probs;
  };
  static work& scratch() {
    thread_local work w;
    return w;
  }

  size_t width() const {
    return in().width;
  }
  size_t length() const {
    return in().height;
  }
  const_matrix_map example(const matrix& x, Eigen::Index i) const {
    return {x.row(i).data(), idx(length()), idx(width())};
  }
  const_matrix_map qkv_w(const float* p) const {
    return {p, idx(width()), idx(3 * width())};
  }
  Eigen::Map<const Eigen::RowVectorXf> qkv_b(const float* p) const {
    return {p + 3 * width() * width(), idx(3 * width())};
  }
  const_matrix_map out_w(const float* p) const {
    return {p + 3 * width() * width() + 3 * width(), idx(width()),
            idx(width())};
  }
  Eigen::Map<const Eigen::RowVectorXf> out_b(const float* p) const {
    return {p + 4 * width() * width() + 3 * width(), idx(width())};
  }

  /// s.qkv, s.probs and s.o of one example.
  void attend(const float* p, const const_matrix_map& x, work& s) const {
    auto d = width(), t = length(), dh = d / heads_;
    auto scale = 1.0f / std::sqrt(float(dh));
    s.qkv.noalias() = x * qkv_w(p);
    s.qkv.rowwise() += qkv_b(p);
    s.o.resize(idx(t), idx(d));
    s.probs.resize(heads_);
    for (size_t h = 0; h < heads_; ++h) {
      auto at = idx(h * dh), n = idx(dh);
      auto& prob = s.probs[h];
      prob.noalias() =
        s.qkv.middleCols(at, n) * s.qkv.middleCols(idx(d) + at, n).transpose();
      for (Eigen::Index r = 0; r < prob.rows(); ++r) {
        // Position r sees positions 0..r.
        auto seen = prob.row(r).head(r + 1);
        seen *= scale;
        seen.array() -= seen.maxCoeff();
        seen = seen.array().exp().matrix();
        seen /= seen.sum();
        prob.row(r).tail(prob.cols() - r - 1).setZero();
      }
      s.o.middleCols(at, n).noalias() =
        prob * s.qkv.middleCols(idx(2 * d) + at, n);
    }
  }

  size_t heads_;
};

} // namespace

std::unique_ptr<layer> make_attention(const shape& in, size_t heads) {
  return std::make_unique<attention>(in, heads);
}

} // namespace lumen::nn
