// The layers of token sequences: an example is T token ids (an input of
// 1xTx1), and from the embedding on T positions of D values (1xTxD, a
// position's values contiguous). Layer normalisation, causal multi-head
// self-attention, and the markers of a residual connection, whose sum
// sequential::run makes.

#include <cmath>
#include <limits>

#include "lumen/errors.hpp"

#include "nn/layers.hpp"

namespace lumen::nn {

namespace {

using ml::detail::const_matrix_map;
using ml::detail::const_vector_map;
using ml::detail::idx;
using ml::detail::matrix_map;
using ml::detail::vector_map;

/// Rows of `m` (a row an example) as a row per position, `width` values
/// each.
const_matrix_map by_position(const matrix& m, size_t width) {
  return {m.data(), m.size() / idx(width), idx(width)};
}
matrix_map by_position(matrix& m, size_t width) {
  return {m.data(), m.size() / idx(width), idx(width)};
}

/// Token i at position t is its row of the token table plus row t of the
/// position table (both learned).
class embed : public layer {
public:
  embed(const shape& in, size_t vocab, size_t width)
    : layer(in, {1, in.height, width})
    , vocab_(vocab) {}

  std::string spec() const override {
    return "embed(" + std::to_string(vocab_) + "," +
           std::to_string(out().width) + ")";
  }
  size_t num_weights() const override {
    return (vocab_ + out().height) * out().width;
  }
  std::vector<tensor_part> tensors() const override {
    return {{"token", {int64_t(vocab_), int64_t(out().width)}},
            {"position", {int64_t(out().height), int64_t(out().width)}}};
  }
  size_t positions() const override {
    return out().height;
  }
  /// Small (standard deviation 0.02, as GPT-2's), so that the sum with the
  /// position starts near zero.
  void init(float* params, std::mt19937_64& gen) const override {
    for (size_t i = 0; i < num_weights(); ++i)
      params[i] = uniform(gen, 0.02 * std::sqrt(3.0));
  }

  void forward(const float* p, const matrix& x, matrix& y) const override {
    auto t_count = out().height, d = out().width;
    y.resize(x.rows(), idx(out().size()));
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t t = 0; t < t_count; ++t) {
        auto id = token(x(i, idx(t)), i, t);
        y.row(i).segment(idx(t * d), idx(d)) =
          tokens(p).row(idx(id)) + places(p).row(idx(t));
      }
  }

  void backward(const float*, const matrix& x, const matrix&, const matrix& dy,
                matrix* dx, float* grad) const override {
    auto t_count = out().height, d = out().width;
    matrix_map dtok{grad, idx(vocab_), idx(d)};
    matrix_map dpos{grad + vocab_ * d, idx(t_count), idx(d)};
    dtok.setZero();
    dpos.setZero();
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t t = 0; t < t_count; ++t) {
        auto g = dy.row(i).segment(idx(t * d), idx(d));
        dtok.row(idx(token(x(i, idx(t)), i, t))) += g;
        dpos.row(idx(t)) += g;
      }
    if (dx != nullptr) // token ids have no gradient
      dx->setZero(x.rows(), x.cols());
  }

private:
  size_t token(float v, Eigen::Index row, size_t at) const {
    if (!(v >= 0) || v >= float(vocab_) || v != std::floor(v))
      throw usage_error(
        "embed(" + std::to_string(vocab_) + "," + std::to_string(out().width) +
        "): token " + std::to_string(v) + " at row " + std::to_string(row) +
        ", position " + std::to_string(at) + " is not in its vocabulary (0-" +
        std::to_string(vocab_ - 1) + ")");
    return size_t(v);
  }
  const_matrix_map tokens(const float* p) const {
    return {p, idx(vocab_), idx(out().width)};
  }
  const_matrix_map places(const float* p) const {
    return {p + vocab_ * out().width, idx(out().height), idx(out().width)};
  }

  size_t vocab_;
};

/// Layer normalisation over each position's values: (x - mean) / sqrt(var
/// + 1e-5), times a weight and plus a bias of the width's size.
class norm : public layer {
public:
  explicit norm(const shape& in)
    : layer(in, in) {}

  std::string spec() const override {
    return "norm";
  }
  size_t num_weights() const override {
    return in().width;
  }
  size_t num_biases() const override {
    return in().width;
  }
  void init(float* params, std::mt19937_64&) const override {
    std::fill(params, params + num_weights(), 1.0f);
    std::fill(params + num_weights(), params + num_params(), 0.0f);
  }

  void forward(const float* p, const matrix& x, matrix& y) const override {
    y.resize(x.rows(), x.cols());
    auto xs = by_position(x, in().width);
    auto ys = by_position(y, in().width);
    for (Eigen::Index r = 0; r < xs.rows(); ++r) {
      float inv = 0;
      auto hat = normalized(xs.row(r), inv);
      ys.row(r) = hat.cwiseProduct(gain(p)) + bias(p);
    }
  }

  void backward(const float* p, const matrix& x, const matrix&,
                const matrix& dy, matrix* dx, float* grad) const override {
    auto d = in().width;
    auto xs = by_position(x, d);
    auto dys = by_position(dy, d);
    Eigen::Map<Eigen::RowVectorXf> dg{grad, idx(d)}, db{grad + d, idx(d)};
    dg.setZero();
    db.setZero();
    if (dx != nullptr)
      dx->resize(x.rows(), x.cols());
    for (Eigen::Index r = 0; r < xs.rows(); ++r) {
      float inv = 0;
      Eigen::RowVectorXf hat = normalized(xs.row(r), inv);
      dg += dys.row(r).cwiseProduct(hat);
      db += dys.row(r);
      if (dx == nullptr)
        continue;
      Eigen::RowVectorXf dhat = dys.row(r).cwiseProduct(gain(p));
      auto n = float(d);
      by_position(*dx, d).row(r) =
        inv * (dhat.array() - dhat.sum() / n -
               hat.array() * (dhat.cwiseProduct(hat).sum() / n))
                .matrix();
    }
  }

private:
  template <class Row>
  static Eigen::RowVectorXf normalized(const Row& x, float& inv) {
    auto n = float(x.size());
    float mean = x.sum() / n;
    Eigen::RowVectorXf centered = x.array() - mean;
    inv = 1.0f / std::sqrt(centered.squaredNorm() / n + 1e-5f);
    return centered * inv;
  }
  Eigen::Map<const Eigen::RowVectorXf> gain(const float* p) const {
    return {p, idx(in().width)};
  }
  Eigen::Map<const Eigen::RowVectorXf> bias(const float* p) const {
    return {p + in().width, idx(in().width)};
  }
};

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

/// "res(" and its ")": y = x at each; sequential::run adds the input of
/// "res(" to the output of ")", and in backward the gradient at ")" to the
/// one at "res(".
class residual : public layer {
public:
  residual(const shape& in, bool opens)
    : layer(in, in)
    , opens_(opens) {}

  std::string spec() const override {
    return opens_ ? "res(" : ")";
  }
  void forward(const float*, const matrix& x, matrix& y) const override {
    y = x;
  }
  void backward(const float*, const matrix&, const matrix&, const matrix& dy,
                matrix* dx, float*) const override {
    if (dx != nullptr)
      *dx = dy;
  }

private:
  bool opens_;
};

} // namespace

std::unique_ptr<layer> make_sequence_layer(const std::string& name,
                                           const std::vector<size_t>& args,
                                           const shape& in) {
  auto sequence = [&](const std::string& form) {
    if (in.channels != 1 || in.height < 1)
      throw usage_error(name + args_of(args) + ": its input " + to_string(in) +
                        " is not a sequence (1xTxD); " + form);
  };
  if (name == "embed") {
    check_arity(name, args, 2, 2, "embed(V,D): V tokens, D values a position");
    if (in.channels != 1 || in.width != 1)
      throw usage_error(name + args_of(args) + ": its input " + to_string(in) +
                        " is not token ids; it comes first, on an input of "
                        "1xTx1 (T positions)");
    return std::make_unique<embed>(in, args[0], args[1]);
  }
  if (name == "norm") {
    check_arity(name, args, 0, 0, "norm, without arguments");
    return std::make_unique<norm>(in);
  }
  if (name == "attn") {
    check_arity(name, args, 1, 1, "attn(H), H heads");
    sequence("put it after embed(V,D)");
    if (in.width % args[0] != 0)
      throw usage_error(name + args_of(args) + ": " + std::to_string(in.width) +
                        " values a position do not "
                        "split into " +
                        std::to_string(args[0]) +
                        " heads; give a number of heads that divides them");
    return std::make_unique<attention>(in, args[0]);
  }
  if (name == "res" || name == ")")
    return std::make_unique<residual>(in, name == "res");
  return nullptr;
}

} // namespace lumen::nn
