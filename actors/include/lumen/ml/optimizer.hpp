#pragma once

// The update rules a parameter server applies to its weights: SGD,
// momentum and Adam, as PyTorch's torch.optim defines them, with gradient
// clipping by global norm and the staleness-aware learning rate of
// asynchronous SGD.
//
//   lumen::ml::optimizer opt{{optimizer_kind::adam, 1e-3f}, w.size()};
//   lumen::ml::clip_by_global_norm(g.data(), g.size(), 5.0f);
//   opt.step(w.data(), g.data(), w.size());
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lumen::ml {

enum class optimizer_kind : uint8_t { sgd, momentum, adam };

/// "sgd", "momentum", "adam".
const char* to_string(optimizer_kind k) noexcept;

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::sgd;
  float lr = 0.01f;
  float momentum = 0.9f; // momentum: v = momentum·v + g; w -= lr·v
  float beta1 = 0.9f;    // adam, with bias correction
  float beta2 = 0.999f;
  float eps = 1e-8f;
  // L2 penalty, as torch.optim's weight_decay: the gradient used is
  // g + weight_decay·w.
  float weight_decay = 0.0f;
};

/// An optimizer for `n` parameters, with its state (momentum's velocity,
/// Adam's moments and step count), which a checkpoint keeps.
class optimizer {
public:
  /// Throws `usage_error` for a learning rate that is not positive and
  /// finite, or a momentum or beta outside [0, 1).
  optimizer(optimizer_config cfg, size_t n);

  /// w -= the update for gradient g, the learning rate scaled by
  /// `lr_scale` (asynchronous SGD's staleness). Throws `usage_error` if
  /// `n` is not the optimizer's size.
  void step(float* w, const float* g, size_t n, float lr_scale = 1.0f);

  const optimizer_config& config() const noexcept {
    return cfg_;
  }

  /// Steps taken so far.
  uint64_t steps() const noexcept {
    return steps_;
  }

  /// The state, for checkpoints: momentum's velocity, or Adam's first
  /// and second moments (empty for SGD).
  std::vector<std::vector<float>*> state();

  /// Restores the step count (with state() for the vectors).
  void set_steps(uint64_t steps) noexcept {
    steps_ = steps;
  }

private:
  optimizer_config cfg_;
  size_t n_;
  uint64_t steps_ = 0;
  std::vector<float> m_, v_;
};

/// Scales `g` down so that its L2 norm is at most `max_norm` (no change
/// if it is already), as torch.nn.utils.clip_grad_norm_; returns the norm
/// before. Throws `usage_error` unless max_norm is positive.
float clip_by_global_norm(float* g, size_t n, float max_norm);

/// Asynchronous SGD's learning-rate scale for a gradient `staleness`
/// versions old: 1 for a fresh one, 1/staleness otherwise (Zhang et al.,
/// "Staleness-aware Async-SGD", 2016).
inline float staleness_scale(uint64_t staleness) noexcept {
  return staleness <= 1 ? 1.0f : 1.0f / static_cast<float>(staleness);
}

} // namespace lumen::ml
