#include "lumen/ml/ps_core.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <lumen/errors.hpp>
#include <lumen/trace.hpp>

#include "lumen/ml/safetensors.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

namespace {

/// A setting as a user would write it: 0.5, not 0.500000.
std::string setting(double x) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", x);
  return out;
}

} // namespace

const char* to_string(ps_mode m) noexcept {
  return m == ps_mode::sync ? "sync" : "async";
}

const char* to_string(ps_refusal r) noexcept {
  switch (r) {
    case ps_refusal::none:
      return "none";
    case ps_refusal::wrong_size:
      return "wrong_size";
    case ps_refusal::not_finite:
      return "not_finite";
    case ps_refusal::future:
      return "future";
    case ps_refusal::too_stale:
      return "too_stale";
    case ps_refusal::late:
      return "late";
  }
  return "unknown";
}

ps_core::ps_core(ps_config cfg, std::vector<float> initial)
  : cfg_(cfg)
  , weights_(std::make_shared<std::vector<float>>(std::move(initial)))
  , opt_(cfg.optimizer, weights_->size()) {
  if (cfg.workers == 0)
    throw usage_error("parameter server: no workers; give it one at least");
  if (cfg.mode == ps_mode::sync && cfg.backup >= cfg.workers)
    throw usage_error("parameter server: " + std::to_string(cfg.backup) +
                      " backup workers of " + std::to_string(cfg.workers) +
                      "; a step needs one gradient at least");
  if (cfg.clip_norm < 0 || !std::isfinite(cfg.clip_norm))
    throw usage_error("parameter server: a clipping norm of " +
                      setting(cfg.clip_norm) +
                      "; give a positive one, or 0 for none");
  if (cfg.step_deadline != 0 && !(cfg.step_deadline > 1))
    throw usage_error("parameter server: a step deadline of " +
                      setting(cfg.step_deadline) +
                      " times the median step; give more than 1, or 0 for "
                      "none");
  if (cfg.broadcast != codec::none && cfg.mode != ps_mode::sync)
    throw usage_error(std::string{"parameter server: a "} +
                      to_string(cfg.broadcast) +
                      " broadcast in async mode; async answers each push at "
                      "a version of its own, so broadcast none there");
  if (compressed_size(cfg.broadcast, 1) == 0)
    throw usage_error("parameter server: broadcast codec " +
                      std::to_string(static_cast<int>(cfg.broadcast)) +
                      " is none of none, fp16 and int8");
  sum_.assign(weights_->size(), 0.0f);
}

float* ps_core::writable_weights() {
  // A holder that lets go on another thread meanwhile costs a copy too
  // many, never a write under a reader: only this object hands out more.
  if (weights_.use_count() > 1)
    weights_ = std::make_shared<std::vector<float>>(*weights_);
  else // the last holder's reads happen before these writes
    std::atomic_thread_fence(std::memory_order_acquire);
  return weights_->data();
}

push_outcome ps_core::reject(ps_refusal r, std::string why) {
  ++stats_.refused[r];
  return {r, std::move(why), false, 0};
}

push_outcome ps_core::push(uint64_t version, const float* g, size_t n) {
  trace::span span{"ps push", "ps"};
  span.arg("version", static_cast<int64_t>(version))
    .arg("values", static_cast<int64_t>(n));
  if (n != weights_->size())
    return reject(ps_refusal::wrong_size,
                  "a gradient of " + std::to_string(n) + " values for " +
                    std::to_string(weights_->size()) +
                    " parameters; compute it with the server's model");
  if (auto i = first_non_finite(g, n); i < n)
    return reject(ps_refusal::not_finite,
                  "value " + std::to_string(i) + " of the gradient is " +
                    std::to_string(g[i]) +
                    "; lower the learning rate or clip the gradients");
  if (version > version_)
    return reject(ps_refusal::future,
                  "a gradient of version " + std::to_string(version) +
                    " while the server is at " + std::to_string(version_) +
                    "; a worker must compute on weights it pulled");
  auto staleness = version_ - version;
  if (cfg_.mode == ps_mode::sync) {
    if (staleness > 0)
      return reject(ps_refusal::late,
                    "step " + std::to_string(version) +
                      " closed without this gradient (a backup step)");
    ++stats_.applied;
    ++pending_;
    // A step of one gradient takes it as its mean, as it came: none of
    // the passes that add, average and clear a sum.
    if (pending_ == 1 && quorum() == 1 && cfg_.clip_norm == 0)
      return {ps_refusal::none, {}, finish_step(g), 0};
    for (size_t i = 0; i < n; ++i)
      sum_[i] += g[i];
    return {ps_refusal::none, {}, pending_ >= quorum() && finish_step(), 0};
  }
  if (staleness > cfg_.max_staleness)
    return reject(ps_refusal::too_stale, "a gradient " +
                                           std::to_string(staleness) +
                                           " versions old, past the limit of " +
                                           std::to_string(cfg_.max_staleness) +
                                           "; pull fresher weights");
  const float* use = g;
  if (cfg_.clip_norm > 0) {
    clipped_.assign(g, g + n);
    clip_by_global_norm(clipped_.data(), n, cfg_.clip_norm);
    use = clipped_.data();
  }
  trace::span apply{"ps apply", "ps"};
  apply.arg("staleness", static_cast<int64_t>(staleness));
  opt_.step(writable_weights(), use, n,
            cfg_.staleness_lr ? staleness_scale(staleness) : 1.0f);
  ++version_;
  ++stats_.applied;
  ++stats_.steps;
  ++stats_.staleness[staleness];
  return {ps_refusal::none, {}, false, staleness};
}

size_t ps_core::quorum() const noexcept {
  auto wanted = cfg_.workers - cfg_.backup;
  return wanted > lost_ ? wanted - lost_ : 1;
}

bool ps_core::close_step() {
  if (cfg_.mode != ps_mode::sync || pending_ == 0)
    return false;
  ++stats_.timed_out;
  return finish_step();
}

bool ps_core::finish_step(const float* mean) {
  trace::span span{"ps apply", "ps"};
  span.arg("gradients", static_cast<int64_t>(pending_));
  if (mean == nullptr) {
    // The step's mean gradient, clipped as one.
    for (auto& x : sum_)
      x /= static_cast<float>(pending_);
    if (cfg_.clip_norm > 0)
      clip_by_global_norm(sum_.data(), sum_.size(), cfg_.clip_norm);
    mean = sum_.data();
  }
  opt_.step(writable_weights(), mean, weights_->size());
  if (mean == sum_.data())
    std::fill(sum_.begin(), sum_.end(), 0.0f);
  pending_ = 0;
  ++version_;
  ++stats_.steps;
  return true;
}

void ps_core::regain_workers(size_t n) noexcept {
  lost_ -= std::min(n, lost_);
}

bool ps_core::lose_workers(size_t n) {
  lost_ += n;
  stats_.workers_lost += n;
  return pending_ > 0 && pending_ >= quorum() && finish_step();
}

} // namespace lumen::ml

namespace lumen::ml {

void ps_core::restore(uint64_t version, std::vector<float> weights) {
  if (weights.size() != weights_->size())
    throw usage_error("restore: " + std::to_string(weights.size()) +
                      " weights for a server of " +
                      std::to_string(weights_->size()) +
                      " parameters; restore a checkpoint of this model");
  if (pending_ > 0)
    throw usage_error("restore: a sync step is open with " +
                      std::to_string(pending_) +
                      " gradients; restore between steps (before workers "
                      "push)");
  weights_ = std::make_shared<std::vector<float>>(std::move(weights));
  version_ = version;
}

namespace {

constexpr const char* checkpoint_format = "lumen.parameter_server/1";

} // namespace

void save_checkpoint(ps_core& core, const std::string& path) {
  safetensors_file f;
  f.tensors.emplace("weights", tensor::from(core.weights()));
  auto& rule = core.update_rule();
  auto state = rule.state();
  for (size_t i = 0; i < state.size(); ++i)
    f.tensors.emplace("optimizer." + std::to_string(i),
                      tensor::from(*state[i]));
  f.metadata = {{"format", checkpoint_format},
                {"version", std::to_string(core.version())},
                {"optimizer", to_string(rule.config().kind)},
                {"optimizer_steps", std::to_string(rule.steps())}};
  save_safetensors(path, f);
}

void restore_checkpoint(ps_core& core, const std::string& path) {
  auto f = load_safetensors(path);
  auto meta = [&](const char* key) {
    auto i = f.metadata.find(key);
    if (i == f.metadata.end())
      throw data_error("checkpoint '" + path + "' has no '" + key +
                         "' in its metadata; it is not a parameter server's "
                         "checkpoint (save_checkpoint writes them)",
                       errc::bad_file);
    return i->second;
  };
  if (meta("format") != checkpoint_format)
    throw data_error("checkpoint '" + path + "' is of format '" +
                       meta("format") + "', not " + checkpoint_format,
                     errc::bad_file);
  auto& rule = core.update_rule();
  if (meta("optimizer") != to_string(rule.config().kind))
    throw usage_error("checkpoint '" + path + "' holds " + meta("optimizer") +
                      " state, this server uses " +
                      to_string(rule.config().kind) +
                      "; give the server the checkpoint's optimizer");
  auto number = [&](const char* key) {
    try {
      return static_cast<uint64_t>(std::stoull(meta(key)));
    } catch (const std::logic_error&) {
      throw data_error("checkpoint '" + path + "': '" + key + "' is '" +
                         meta(key) + "', not a count",
                       errc::bad_file);
    }
  };
  auto floats = [&](const std::string& name) {
    auto i = f.tensors.find(name);
    if (i == f.tensors.end() || i->second.type() != dtype::float32)
      throw data_error("checkpoint '" + path + "' has no float32 tensor '" +
                         name + "'",
                       errc::bad_file);
    return i->second.to_vector<float>();
  };
  auto state = rule.state();
  std::vector<std::vector<float>> restored;
  for (size_t i = 0; i < state.size(); ++i) {
    restored.push_back(floats("optimizer." + std::to_string(i)));
    if (restored.back().size() != state[i]->size())
      throw usage_error("checkpoint '" + path + "' has optimizer state of " +
                        std::to_string(restored.back().size()) +
                        " values for " + std::to_string(state[i]->size()) +
                        " parameters; restore a checkpoint of this model");
  }
  auto version = number("version");
  auto steps = number("optimizer_steps");
  core.restore(version, floats("weights")); // checks the size first
  for (size_t i = 0; i < state.size(); ++i)
    *state[i] = std::move(restored[i]);
  rule.set_steps(steps);
}

} // namespace lumen::ml
