// Causal multi-head self-attention, a layer of lumen::nn::sequential over
// token sequences (1xTxD).

#include <cmath>
#include <mutex>
#include <thread>
#include <unordered_map>

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
    auto& k = kept_here();
    project(p, x, k);
    auto rows = x.rows() * idx(length());
    y.resize(x.rows(), x.cols());
    matrix_map out{y.data(), rows, idx(width())};
    out.noalias() = k.o * out_w(p);
    out.rowwise() += out_b(p);
  }

  void backward(const float* p, const matrix& x, const matrix&,
                const matrix& dy, matrix* dx, float* grad) const override {
    auto d = width(), t = length(), dh = d / heads_;
    auto scale = 1.0f / std::sqrt(float(dh));
    auto rows = x.rows() * idx(t);
    auto& k = kept_here();
    // Forward's queries, keys and values, unless this thread ran forward
    // on another input since.
    if (k.x != x.data() || k.qkv.rows() != rows)
      project(p, x, k);
    matrix_map dqkv_w{grad, idx(d), idx(3 * d)};
    Eigen::Map<Eigen::RowVectorXf> dqkv_b{grad + 3 * d * d, idx(3 * d)};
    matrix_map dout_w{grad + 3 * d * d + 3 * d, idx(d), idx(d)};
    Eigen::Map<Eigen::RowVectorXf> dout_b{grad + 4 * d * d + 3 * d, idx(d)};
    const_matrix_map dys{dy.data(), rows, idx(d)};
    dout_w.noalias() = k.o.transpose() * dys;
    column_sums(dys, dout_b);
    auto& s = scratch();
    s.d_o.noalias() = dys * out_w(p).transpose();
    s.dqkv.resize(rows, idx(3 * d));
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t h = 0; h < heads_; ++h) {
        auto q = head(k.qkv, i, 0, h), keys = head(k.qkv, i, 1, h),
             v = head(k.qkv, i, 2, h);
        probabilities(k.qkv, i, h, s.prob); // again: T² a head, not kept
        auto d_o = s.d_o.block(i * idx(t), idx(h * dh), idx(t), idx(dh));
        s.dprob.noalias() = d_o * v.transpose();
        head(s.dqkv, i, 2, h).noalias() = s.prob.transpose() * d_o;
        // Softmax's backward, row by row: dS = P ∘ (dP - Σ dP∘P).
        s.dot = s.dprob.cwiseProduct(s.prob).rowwise().sum();
        s.dscore = s.prob.cwiseProduct((s.dprob.colwise() - s.dot) * scale);
        head(s.dqkv, i, 0, h).noalias() = s.dscore * keys;
        head(s.dqkv, i, 1, h).noalias() = s.dscore.transpose() * q;
      }
    dqkv_w.noalias() =
      const_matrix_map{x.data(), rows, idx(d)}.transpose() * s.dqkv;
    column_sums(s.dqkv, dqkv_b);
    if (dx != nullptr) {
      dx->resize(x.rows(), x.cols());
      matrix_map{dx->data(), rows, idx(d)}.noalias() =
        s.dqkv * qkv_w(p).transpose();
    }
  }

private:
  /// What forward keeps for backward: the whole batch's queries, keys and
  /// values side by side (a row a position), the heads' joined outputs,
  /// and the input they came from. Linear in the sequence's length, as
  /// the other layers' activations; each head's T² probabilities are
  /// computed again instead.
  struct kept {
    matrix qkv, o;
    const float* x = nullptr;
  };
  /// This thread's: a model may run on several threads at once.
  kept& kept_here() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return kept_[std::this_thread::get_id()];
  }

  /// Backward's own scratch, kept by each thread from call to call.
  struct work {
    matrix prob, d_o, dqkv, dprob, dscore;
    Eigen::VectorXf dot;
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
  /// Example i's queries (part 0), keys (1) or values (2) of head h, in a
  /// matrix of rows of 3D.
  Eigen::Block<matrix> head(matrix& m, Eigen::Index i, size_t part,
                            size_t h) const {
    auto t = idx(length()), dh = idx(width() / heads_);
    return m.block(i * t, idx(part * width()) + idx(h) * dh, t, dh);
  }
  Eigen::Block<const matrix> head(const matrix& m, Eigen::Index i, size_t part,
                                  size_t h) const {
    auto t = idx(length()), dh = idx(width() / heads_);
    return m.block(i * t, idx(part * width()) + idx(h) * dh, t, dh);
  }
  /// The rows of `m` summed into `sum`, row after row: the same order
  /// wherever `sum` lies.
  template <class Matrix, class Row>
  static void column_sums(const Matrix& m, Row& sum) {
    sum.setZero();
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      sum += m.row(r);
  }

  /// Head h's attention probabilities of example i, from `qkv`.
  void probabilities(const matrix& qkv, Eigen::Index i, size_t h,
                     matrix& prob) const {
    auto scale = 1.0f / std::sqrt(float(width() / heads_));
    prob.noalias() = head(qkv, i, 0, h) * head(qkv, i, 1, h).transpose();
    for (Eigen::Index r = 0; r < prob.rows(); ++r) {
      // Position r sees positions 0..r.
      auto seen = prob.row(r).head(r + 1);
      seen *= scale;
      seen.array() -= seen.maxCoeff();
      seen = seen.array().exp().matrix();
      seen /= seen.sum();
      prob.row(r).tail(prob.cols() - r - 1).setZero();
    }
  }

  /// k.qkv and k.o of the batch `x`: the projections in one product over
  /// every position of every example, the attention example by example.
  void project(const float* p, const matrix& x, kept& k) const {
    auto t = idx(length()), dh = idx(width() / heads_);
    auto rows = x.rows() * t;
    k.qkv.noalias() = const_matrix_map{x.data(), rows, idx(width())} * qkv_w(p);
    k.qkv.rowwise() += qkv_b(p);
    k.o.resize(rows, idx(width()));
    auto& prob = scratch().prob;
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t h = 0; h < heads_; ++h) {
        probabilities(k.qkv, i, h, prob);
        k.o.block(i * t, idx(h) * dh, t, dh).noalias() =
          prob * head(k.qkv, i, 2, h);
      }
    k.x = x.data();
  }

  mutable std::mutex mtx_;
  mutable std::unordered_map<std::thread::id, kept> kept_;
  size_t heads_;
};

} // namespace

std::unique_ptr<layer> make_attention(const shape& in, size_t heads) {
  return std::make_unique<attention>(in, heads);
}

} // namespace lumen::nn
