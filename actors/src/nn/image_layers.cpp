// The layers of images (channels × height × width): convolution by im2col
// and Eigen's GEMM, and max pooling.

#include "nn/layers.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "lumen/errors.hpp"

// GCC's and clang's (the playground's em++) words for "no iteration
// reads what another writes".
#if defined(__clang__)
#define LUMEN_INDEPENDENT_ITERATIONS                                           \
  _Pragma("clang loop vectorize(assume_safety)")
#else
#define LUMEN_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#endif

namespace lumen::nn {

namespace {

/// A convolution, stride 1: im2col (each output position's K×K×C inputs
/// as a column) and one GEMM an example. W is out-channels × (C·K·K).
class conv : public layer {
public:
  conv(const shape& in, size_t channels, size_t k, size_t pad)
    : layer(in,
            {channels, in.height + 2 * pad - k + 1, in.width + 2 * pad - k + 1})
    , k_(k)
    , pad_(pad) {}

  std::string spec() const override {
    return "conv(" + std::to_string(out().channels) + "," + std::to_string(k_) +
           (pad_ > 0 ? "," + std::to_string(pad_) : "") + ")";
  }
  size_t num_weights() const override {
    return out().channels * patch();
  }
  size_t num_biases() const override {
    return out().channels;
  }
  std::vector<int64_t> weight_shape() const override {
    return {int64_t(out().channels), int64_t(in().channels), int64_t(k_),
            int64_t(k_)};
  }

  void forward(const float* p, const matrix& x, matrix& y) const override {
    y.resize(x.rows(), idx(out().size()));
    auto& cols = scratch().cols;
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      im2col(x.row(i).data(), cols);
      matrix_map yi{y.row(i).data(), idx(out().channels), places()};
      // The biases first, a channel's row at a time, then the product
      // added: adding them after, column by column across rows, cost a
      // tenth of the product.
      for (Eigen::Index c = 0; c < yi.rows(); ++c)
        yi.row(c).setConstant(biases(p)(c));
      yi.noalias() += weights(p) * cols;
    }
  }

  void backward(const float* p, const matrix& x, const matrix&,
                const matrix& dy, matrix* dx, float* grad) const override {
    matrix_map dw{grad, idx(out().channels), idx(patch())};
    vector_map db{grad + num_weights(), idx(out().channels)};
    dw.setZero();
    db.setZero();
    if (dx != nullptr)
      dx->setZero(x.rows(), idx(in().size()));
    auto& [cols, dcols] = scratch();
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      Eigen::Map<const matrix> dyi{dy.row(i).data(), idx(out().channels),
                                   places()};
      im2col(x.row(i).data(), cols);
      dw.noalias() += dyi * cols.transpose();
      for (Eigen::Index c = 0; c < dyi.rows(); ++c)
        db(c) += dyi.row(c).sum();
      if (dx != nullptr) {
        dcols.noalias() = weights(p).transpose() * dyi;
        col2im(dcols, dx->row(i).data());
      }
    }
  }

protected:
  size_t fan_in() const override {
    return patch();
  }

private:
  size_t patch() const {
    return in().channels * k_ * k_;
  }
  Eigen::Index places() const {
    return idx(out().height * out().width);
  }
  const_matrix_map weights(const float* p) const {
    return {p, idx(out().channels), idx(patch())};
  }
  const_vector_map biases(const float* p) const {
    return {p + num_weights(), idx(out().channels)};
  }

  /// The im2col matrices of one example, kept by each thread from call to
  /// call: allocating them anew cost more than the copies into them.
  struct columns {
    matrix cols, dcols;
  };
  static columns& scratch() {
    thread_local columns c;
    return c;
  }

  /// Calls f(row of cols, its first output position, input offset of that
  /// position, count) for each run of a row's positions that reads the
  /// input at consecutive offsets, and z(row, position, count) for each
  /// run that reads the padding.
  template <class F, class Z>
  void each_run(F f, Z z) const {
    auto h = long(in().height), w = long(in().width), pad = long(pad_);
    auto oh = long(out().height), ow = long(out().width), k = long(k_);
    for (long c = 0; c < long(in().channels); ++c)
      for (long ky = 0; ky < k; ++ky)
        for (long kx = 0; kx < k; ++kx) {
          auto row = (c * k + ky) * k + kx;
          // Output columns [lo, hi) read inside the input's width.
          long lo = std::clamp(pad - kx, 0L, ow);
          long hi = std::clamp(w + pad - kx, lo, ow);
          for (long oy = 0; oy < oh; ++oy) {
            long iy = oy + ky - pad, at = oy * ow;
            if (iy < 0 || iy >= h) {
              z(row, at, ow);
              continue;
            }
            z(row, at, lo);
            f(row, at + lo, (c * h + iy) * w + lo + kx - pad, hi - lo);
            z(row, at + hi, ow - hi);
          }
        }
  }

  // The runs are a row of the image at most: plain loops, told that the
  // two sides do not overlap, are vectorized without a check or a call
  // to memmove (measured alternately: 0.6 ms of a 31 ms batch of 64 for
  // im2col, 1.1 ms for col2im).
  void im2col(const float* x, matrix& cols) const {
    cols.resize(idx(patch()), places());
    each_run(
      [&](long row, long at, long from, long n) {
        float* to = &cols(row, at);
        LUMEN_INDEPENDENT_ITERATIONS
        for (long j = 0; j < n; ++j)
          to[j] = x[from + j];
      },
      [&](long row, long at, long n) {
        float* to = &cols(row, at);
        for (long j = 0; j < n; ++j)
          to[j] = 0.0f;
      });
  }

  void col2im(const matrix& cols, float* dx) const {
    each_run(
      [&](long row, long at, long to, long n) {
        const float* from = &cols(row, at);
        LUMEN_INDEPENDENT_ITERATIONS
        for (long j = 0; j < n; ++j)
          dx[to + j] += from[j];
      },
      [](long, long, long) {});
  }

  size_t k_, pad_;
};

/// K×K max pooling, stride K; what does not fill a window at the edge is
/// left out.
class pool : public layer {
public:
  pool(const shape& in, size_t k)
    : layer(in, {in.channels, in.height / k, in.width / k})
    , k_(k) {}

  std::string spec() const override {
    return "pool(" + std::to_string(k_) + ")";
  }

  void forward(const float*, const matrix& x, matrix& y) const override {
    y.resize(x.rows(), idx(out().size()));
    auto h = in().height, w = in().width, oh = out().height, ow = out().width;
    if (halves()) {
      // A row of windows of every channel and example is two whole input
      // rows, the batch's rows one after another: one loop over them
      // replaces the four strided passes below, and notes which input each
      // window took, for backward to place its gradient by.
      auto rows = size_t(x.rows()) * out().channels * oh;
      auto& kept = choices();
      kept.taker.resize(rows * ow);
      kept.y = y.data();
      kept.rows = x.rows();
      constexpr size_t lanes = 16;
      for (size_t r = 0; r < rows; ++r) {
        const float* a = x.data() + 2 * r * w;
        float* o = y.data() + r * ow;
        auto* t = kept.taker.data() + r * ow;
        // Rows of 7 or 14 windows are too short for whole vectors: 16 are
        // computed, the rest spilling into the next rows, which write
        // their own over them; not where that would read or write past
        // the batch.
        if (ow <= lanes && r * ow + lanes <= rows * ow &&
            2 * r * w + w + 2 * lanes <= 2 * rows * w)
          max_and_taker<lanes>(a, a + w, o, t, lanes);
        else
          max_and_taker<0>(a, a + w, o, t, ow);
      }
      return;
    }
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t c = 0; c < out().channels; ++c)
        for (size_t oy = 0; oy < oh; ++oy) {
          // Row by row of the windows, without branches, so that it
          // vectorizes.
          float* o = y.row(i).data() + (c * oh + oy) * ow;
          const float* top = x.row(i).data() + (c * h + oy * k_) * w;
          for (size_t ox = 0; ox < ow; ++ox)
            o[ox] = top[ox * k_];
          for (size_t ky = 0; ky < k_; ++ky)
            for (size_t kx = 0; kx < k_; ++kx) {
              const float* r = top + ky * w + kx;
              for (size_t ox = 0; ox < ow; ++ox)
                o[ox] = std::max(o[ox], r[ox * k_]);
            }
        }
  }

  /// Each window's gradient goes to the first of its inputs, in scan
  /// order, that equals its maximum (the first input if none does: a
  /// NaN). Row by row of the windows, each input written once, without
  /// branches: searching window by window and scattering into a zeroed
  /// gradient took longer than the convolution's forward pass.
  void backward(const float*, const matrix& x, const matrix& y,
                const matrix& dy, matrix* dx, float*) const override {
    if (dx == nullptr)
      return;
    auto h = in().height, w = in().width, oh = out().height, ow = out().width;
    if (const auto* kept = halves() ? &choices() : nullptr;
        kept != nullptr && kept->y == y.data() && kept->rows == x.rows()) {
      // Zeros, and each window's gradient written to its taker: with
      // forward noting the takers, 2.5x faster than the strided passes on
      // Fashion-MNIST's CNN.
      dx->setZero(x.rows(), idx(in().size()));
      auto rows = size_t(x.rows()) * out().channels * oh;
      for (size_t r = 0; r < rows; ++r) {
        float* d = dx->data() + 2 * r * w;
        const uint8_t* t = kept->taker.data() + r * ow;
        const float* g = dy.data() + r * ow;
        for (size_t ox = 0; ox < ow; ++ox)
          d[2 * ox + (t[ox] & 1u) + (t[ox] >> 1) * w] = g[ox];
      }
      return;
    }
    // Inputs past the last whole window get no gradient.
    if (h % k_ == 0 && w % k_ == 0)
      dx->resize(x.rows(), idx(in().size()));
    else
      dx->setZero(x.rows(), idx(in().size()));
    std::vector<float> left(ow); // each window's gradient not yet placed
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (size_t c = 0; c < out().channels; ++c)
        for (size_t oy = 0; oy < oh; ++oy) {
          auto at = (c * oh + oy) * ow, first = (c * h + oy * k_) * w;
          const float* top = y.row(i).data() + at;
          const float* g = dy.row(i).data() + at;
          const float* xr = x.row(i).data() + first;
          float* d = dx->row(i).data() + first;
          std::copy(g, g + ow, left.begin());
          for (size_t ky = 0; ky < k_; ++ky)
            for (size_t kx = 0; kx < k_; ++kx) {
              auto off = ky * w + kx;
              for (size_t ox = 0; ox < ow; ++ox) {
                bool hit = xr[off + ox * k_] == top[ox];
                d[off + ox * k_] = hit ? left[ox] : 0.0f;
                left[ox] = hit ? 0.0f : left[ox];
              }
            }
          for (size_t ox = 0; ox < ow; ++ox)
            d[ox * k_] += left[ox];
        }
  }

private:
  /// 2×2 windows over even sizes, the common case.
  bool halves() const {
    return k_ == 2 && in().height % 2 == 0 && in().width % 2 == 0;
  }

  /// Each window's maximum, of its top row at `a` and bottom at `b`, into
  /// `o`, and into `taker` which of its inputs is the first to equal it in
  /// scan order (0-3; 0 if none does: a NaN); `n` windows, `Fixed` if
  /// that is not 0 (then GCC makes it whole vectors). Arithmetic rather
  /// than selects, so that short rows' tails do not branch.
  template <size_t Fixed>
  static void max_and_taker(const float* __restrict a,
                            const float* __restrict b, float* __restrict o,
                            uint8_t* __restrict taker, size_t n) {
    for (size_t ox = 0; ox < (Fixed > 0 ? Fixed : n); ++ox) {
      auto m = std::max(std::max(a[2 * ox], a[2 * ox + 1]),
                        std::max(b[2 * ox], b[2 * ox + 1]));
      o[ox] = m;
      int past0 = a[2 * ox] != m, past1 = a[2 * ox + 1] != m,
          past2 = b[2 * ox] != m, past3 = b[2 * ox + 1] != m;
      taker[ox] = uint8_t(past0 * (1 + past1 * (1 + past2 * (1 - 3 * past3))));
    }
  }

  /// What the last forward pass chose, kept by each thread for its
  /// backward pass with the output it was for: handed another output,
  /// backward finds the choices again.
  struct kept_choices {
    const float* y = nullptr;
    Eigen::Index rows = 0;
    std::vector<uint8_t> taker;
  };
  kept_choices& choices() const {
    std::lock_guard<std::mutex> guard{choices_mtx_};
    return choices_[std::this_thread::get_id()];
  }

  size_t k_;
  mutable std::mutex choices_mtx_;
  mutable std::map<std::thread::id, kept_choices> choices_;
};

} // namespace

std::unique_ptr<layer> make_image_layer(const std::string& name,
                                        const std::vector<size_t>& args,
                                        const shape& in) {
  auto arity = [&](size_t least, size_t most, const std::string& form) {
    check_arity(name, args, least, most, form);
  };
  if (name == "conv") {
    auto pad = args.size() == 3 ? args[2] : 0;
    arity(2, 3,
          "conv(C,K) or conv(C,K,P): C channels, K×K kernels, P of "
          "padding");
    if (in.height + 2 * pad < args[1] || in.width + 2 * pad < args[1])
      throw usage_error(name + args_of(args) + ": its input " + to_string(in) +
                        " is smaller than a " + std::to_string(args[1]) + "x" +
                        std::to_string(args[1]) +
                        " kernel; pad it, or pool less before it");
    return std::make_unique<conv>(in, args[0], args[1], pad);
  }
  if (name == "pool") {
    arity(1, 1, "pool(K), K×K windows");
    if (in.height < args[0] || in.width < args[0])
      throw usage_error(name + args_of(args) + ": its input " + to_string(in) +
                        " is smaller than one window; pool less");
    return std::make_unique<pool>(in, args[0]);
  }
  return nullptr;
}

} // namespace lumen::nn
