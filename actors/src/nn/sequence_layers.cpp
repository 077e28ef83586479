// The layers of token sequences: an example is T token ids (an input of
// 1xTx1), and from the embedding on T positions of D values (1xTxD, a
// position's values contiguous). The embedding, layer normalisation and
// the markers of a residual connection, whose sum sequential::run makes;
// attention is in attention.cpp.

#include <cmath>
#include <limits>

#include "lumen/errors.hpp"

#include "nn/layers.hpp"

namespace lumen::nn {

namespace {

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
    return make_attention(in, args[0]);
  }
  if (name == "res" || name == ")")
    return std::make_unique<residual>(in, name == "res");
  return nullptr;
}

} // namespace lumen::nn
