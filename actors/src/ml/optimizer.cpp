#include "lumen/ml/optimizer.hpp"

#include <cmath>
#include <string>

#include <lumen/errors.hpp>

namespace lumen::ml {

namespace {

void check_unit(const char* what, float x) {
  if (!(x >= 0.0f && x < 1.0f))
    throw usage_error(std::string{"optimizer: "} + what + " of " +
                      std::to_string(x) + "; it must be in [0, 1)");
}

} // namespace

const char* to_string(optimizer_kind k) noexcept {
  switch (k) {
    case optimizer_kind::sgd:
      return "sgd";
    case optimizer_kind::momentum:
      return "momentum";
    case optimizer_kind::adam:
      return "adam";
  }
  return "unknown";
}

optimizer::optimizer(optimizer_config cfg, size_t n)
  : cfg_(cfg)
  , n_(n) {
  if (!(cfg.lr > 0.0f) || !std::isfinite(cfg.lr))
    throw usage_error("optimizer: a learning rate of " +
                      std::to_string(cfg.lr) + "; give a positive one");
  check_unit("momentum", cfg.momentum);
  check_unit("beta1", cfg.beta1);
  check_unit("beta2", cfg.beta2);
  if (!(cfg.weight_decay >= 0.0f) || !std::isfinite(cfg.weight_decay))
    throw usage_error("optimizer: a weight decay of " +
                      std::to_string(cfg.weight_decay) +
                      "; give 0 or a positive one");
  if (cfg.kind != optimizer_kind::sgd)
    m_.assign(n, 0.0f);
  if (cfg.kind == optimizer_kind::adam)
    v_.assign(n, 0.0f);
}

void optimizer::step(float* w, const float* g, size_t n, float lr_scale) {
  if (n != n_)
    throw usage_error("optimizer: a gradient of " + std::to_string(n) +
                      " values for " + std::to_string(n_) + " parameters");
  float lr = cfg_.lr * lr_scale, decay = cfg_.weight_decay;
  ++steps_;
  // Plain loops the compiler vectorizes, not Eigen's arrays: Eigen takes a
  // buffer's unaligned ends a value at a time and its middle in packets,
  // whose square root is an approximation, so which weights rounded which
  // way would follow the buffers' addresses and two runs of one seed would
  // part. Here every value takes the same exact operations.
  switch (cfg_.kind) {
    case optimizer_kind::sgd:
      for (size_t i = 0; i < n; ++i)
        w[i] -= lr * (g[i] + decay * w[i]);
      break;
    case optimizer_kind::momentum: {
      float* v = m_.data();
      for (size_t i = 0; i < n; ++i) {
        v[i] = cfg_.momentum * v[i] + (g[i] + decay * w[i]);
        w[i] -= lr * v[i];
      }
      break;
    }
    case optimizer_kind::adam: {
      float *m = m_.data(), *v = v_.data();
      auto t = static_cast<float>(steps_);
      float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
      // torch.optim's arrangement: one square root and one division.
      float rate = lr / (1 - std::pow(b1, t)),
            unbias = 1 / std::sqrt(1 - std::pow(b2, t));
      for (size_t i = 0; i < n; ++i) {
        float d = g[i] + decay * w[i];
        m[i] = b1 * m[i] + (1 - b1) * d;
        v[i] = b2 * v[i] + (1 - b2) * d * d;
        w[i] -= rate * m[i] / (std::sqrt(v[i]) * unbias + eps);
      }
      break;
    }
  }
}

std::vector<std::vector<float>*> optimizer::state() {
  std::vector<std::vector<float>*> out;
  if (!m_.empty())
    out.push_back(&m_);
  if (!v_.empty())
    out.push_back(&v_);
  return out;
}

float clip_by_global_norm(float* g, size_t n, float max_norm) {
  if (!(max_norm > 0.0f))
    throw usage_error("clip_by_global_norm: a largest norm of " +
                      std::to_string(max_norm) + "; give a positive one");
  // Sixteen running sums in a fixed order, not Eigen's sum, whose order
  // follows the buffer's alignment: the same gradient, the same norm.
  float lanes[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t k = 0; k < 16; ++k)
      lanes[k] += g[i + k] * g[i + k];
  double squares = 0;
  for (; i < n; ++i)
    squares += double(g[i]) * g[i];
  for (auto lane : lanes)
    squares += lane;
  auto norm = float(std::sqrt(squares));
  if (norm > max_norm)
    for (size_t j = 0; j < n; ++j)
      g[j] *= max_norm / norm;
  return norm;
}

} // namespace lumen::ml
