#include "lumen/ml/optimizer.hpp"

#include <cmath>
#include <string>

#include <Eigen/Core>

#include <lumen/errors.hpp>

namespace lumen::ml {

namespace {

using vector_map = Eigen::Map<Eigen::ArrayXf>;
using const_vector_map = Eigen::Map<const Eigen::ArrayXf>;

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
  auto len = static_cast<Eigen::Index>(n);
  vector_map weights{w, len};
  const_vector_map raw{g, len};
  float lr = cfg_.lr * lr_scale;
  ++steps_;
  // The decayed gradient stays an expression, read element by element.
  auto update = [&](const auto& grad) {
    switch (cfg_.kind) {
      case optimizer_kind::sgd:
        weights -= lr * grad;
        break;
      case optimizer_kind::momentum: {
        vector_map v{m_.data(), len};
        v = cfg_.momentum * v + grad;
        weights -= lr * v;
        break;
      }
      case optimizer_kind::adam: {
        vector_map m{m_.data(), len}, v{v_.data(), len};
        m = cfg_.beta1 * m + (1 - cfg_.beta1) * grad;
        v = cfg_.beta2 * v + (1 - cfg_.beta2) * grad.square();
        auto t = static_cast<float>(steps_);
        float c1 = 1 - std::pow(cfg_.beta1, t),
              c2 = 1 - std::pow(cfg_.beta2, t);
        weights -= lr * (m / c1) / ((v / c2).sqrt() + cfg_.eps);
        break;
      }
    }
  };
  if (cfg_.weight_decay == 0.0f)
    update(raw);
  else
    update(raw + cfg_.weight_decay * weights);
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
  vector_map grad{g, static_cast<Eigen::Index>(n)};
  float norm = std::sqrt(grad.square().sum());
  if (norm > max_norm)
    grad *= max_norm / norm;
  return norm;
}

} // namespace lumen::ml
