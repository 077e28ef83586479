#pragma once

// Parts 04b-04d's cluster: three replicas of one MLP (784-256-256-256-256-
// 10, 400,906 parameters), Lumen actors on simulated nodes node-1 to
// node-3, links of 50 us at 1 Gbit/s, the collective group "ddp" between
// them. A replica's `replica` holds what the learner's actor does not
// write: the model, its weights and gradient, the optimizer, its share of
// each batch, the bucket plan, and the backward pass's cost in virtual
// time (4 flops a parameter and row of its 32 at 3 GFLOP/s: 17 ms, about
// what all-reducing the gradient takes on these links, so that hiding one
// behind the other shows).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <lumen/collective/collective.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml/data.hpp>
#include <lumen/ml/models.hpp>
#include <lumen/ml/optimizer.hpp>
#include <lumen/sim.hpp>
#include <lumen/train/buckets.hpp>

#include "../exercise.hpp"

namespace scratch04 {

namespace coll = lumen::collective;
using exercise::step_mode;

constexpr int world = 3;
constexpr size_t rows = 32; // a replica's share of each batch
constexpr double flops_per_second = 3e9;
constexpr double latency = exercise::link_latency,
                 bytes_per_second = exercise::link_bytes_per_second;

inline const lumen::ml::mlp& model() {
  static const lumen::ml::mlp net{784, {256, 256, 256, 256}, 10};
  return net;
}

/// The backward pass's virtual time for layer `l`.
inline double backward_seconds(size_t l) {
  return 4.0 * double(model().layers()[l].size() * rows) / flops_per_second;
}

inline double backward_seconds() {
  double s = 0;
  for (size_t l = 0; l < model().layers().size(); ++l)
    s += backward_seconds(l);
  return s;
}

/// A ring all-reduce of `floats` on these links: 2(N−1) steps, each a
/// chunk of S/N bytes and a latency.
inline double allreduce_seconds(size_t floats) {
  double s = double(floats * sizeof(float));
  return 2.0 * (world - 1) * (latency + s / world / bytes_per_second);
}

/// Replica `rank`'s rows of batch `k`: the batches walk through the first
/// 40 of Fashion-MNIST's training set, loaded once in the process.
inline lumen::ml::dataset shard(int rank, int k) {
  static const auto all = [] {
    auto d =
      lumen::ml::load_fashion_mnist(lumen::ml::split::train, 40 * world * rows);
    lumen::ml::standardize(d, 0.2860f, 0.3530f);
    return d;
  }();
  std::vector<size_t> at(rows);
  auto first = (size_t(k) % 40 * world + size_t(rank)) * rows;
  for (size_t i = 0; i < rows; ++i)
    at[i] = first + i;
  return all.take(at);
}

/// Steps rank 0 began in this process, for the checks.
inline int& steps_begun() {
  static int n = 0;
  return n;
}

/// What rank 0 is doing, for --step: its backward pass and buckets.
inline std::string& progress() {
  static std::string p;
  return p;
}

/// What makes replicas drift apart though their gradients are the same
/// (part 04c): node-3's CPU rounds the update's multiply and add its own
/// way (split where the others fuse them into one FMA, or fused where
/// they split them: machines of two generations do); and at step 12 a bit
/// flips in a weight of replica 1 (a cosmic ray, a failing DIMM).
enum class faults { none, drifting };
constexpr int flip_step = 12;

/// What the learner's replica actor holds: the model's weights, gradient
/// and optimizer, its bucket plan and buffers. The buffers are the
/// replica's, so that an all-reduce still running when a step returns
/// writes into memory that is still there.
class replica {
public:
  /// Rank `rank` of the collective group `group`.
  replica(int world_size, int rank, faults f = faults::none,
          std::string group = "ddp")
    : rank_(rank)
    , faults_(f)
    , group_(std::move(group))
    , weights_(model().init(1))
    , grad_(model().num_params())
    , opt_({lumen::ml::optimizer_kind::momentum, 0.05f}, model().num_params())
    , plan_(
        lumen::train::plan_buckets(model().layers(), {64 << 10, 512 << 10})) {
    coll::init_group(world_size, rank, group_);
    for (auto& b : plan_)
      buffers_.emplace_back(b.params.size());
  }

  int rank() const {
    return rank_;
  }
  const std::string& group() const {
    return group_;
  }

  /// The buckets, in the order backward finishes them.
  const std::vector<lumen::train::bucket>& plan() const {
    return plan_;
  }

  /// Each bucket's count of layers: what must finish before it is done.
  std::vector<size_t> layers_in_buckets() const {
    std::vector<size_t> n;
    for (auto& b : plan_)
      n.push_back(b.last_layer - b.first_layer + 1);
    return n;
  }

  /// The bucket holding `layer`.
  size_t bucket_of(size_t layer) const {
    for (size_t b = 0; b < plan_.size(); ++b)
      if (plan_[b].first_layer <= layer && layer <= plan_[b].last_layer)
        return b;
    throw lumen::usage_error("no bucket holds layer " + std::to_string(layer));
  }

  /// The forward and backward pass on this replica's share of batch `k`,
  /// taking virtual time layer by layer; `done(l)` as layer l's gradient
  /// is written, the last layer first. Returns the loss.
  float backward(int k, const std::function<void(size_t)>& done) {
    lumen::trace::span span{"backward", "exercise"};
    step_ = k;
    if (rank_ == 0)
      ++steps_begun();
    return model().loss_and_gradient(
      weights_.data(), shard(rank_, k), grad_.data(), [&](size_t l) {
        lumen::sim::charge(std::chrono::duration<double>(backward_seconds(l)));
        if (rank_ == 0)
          progress() = "rank 0: layer " + std::to_string(l) + " done";
        done(l);
      });
  }

  /// Bucket b's gradient, copied into its buffer (the replica's), which
  /// is returned to be all-reduced.
  std::vector<float>& bucket_gradient(size_t b) {
    auto& r = plan_.at(b).params;
    std::copy(grad_.begin() + long(r.begin), grad_.begin() + long(r.end),
              buffers_.at(b).begin());
    if (rank_ == 0)
      progress() += ", bucket " + std::to_string(b) + " out";
    return buffers_[b];
  }

  /// Puts bucket b's buffer (the all-reduced mean) back into the gradient.
  void take_mean(size_t b) {
    auto& r = plan_.at(b).params;
    std::copy(buffers_.at(b).begin(), buffers_[b].end(),
              grad_.begin() + long(r.begin));
  }

  /// The whole gradient, for an all-reduce in one piece.
  std::vector<float>& gradient() {
    return grad_;
  }

  /// The optimizer's step with the gradient as it is now.
  void update() {
    if (faults_ == faults::drifting && rank_ == 2) {
      // w − lr·v rounded the other way: the velocity is the others', the
      // weights differ in their last bit now and then.
      auto before = weights_;
      opt_.step(weights_.data(), grad_.data(), grad_.size());
      auto& v = *opt_.state().front();
      auto lr = opt_.config().lr;
      for (size_t i = 0; i < weights_.size(); ++i) {
        float fused = std::fma(-lr, v[i], before[i]);
        volatile float product = lr * v[i]; // kept apart from the minus

        float split = before[i] - product;
        weights_[i] = weights_[i] == fused ? split : fused;
      }
    } else {
      opt_.step(weights_.data(), grad_.data(), grad_.size());
    }
    if (faults_ == faults::drifting && rank_ == 1 && step_ == flip_step) {
      uint32_t bits;
      std::memcpy(&bits, &weights_[7], sizeof bits);
      bits ^= 1u << 16; // a mantissa bit: the weight moves by about 1%
      std::memcpy(&weights_[7], &bits, sizeof bits);
    }
  }

  std::vector<float>& weights() {
    return weights_;
  }
  lumen::ml::optimizer& optimizer() {
    return opt_;
  }

private:
  int rank_;
  faults faults_;
  std::string group_;
  int step_ = -1; // the step backward last ran
  std::vector<float> weights_, grad_;
  lumen::ml::optimizer opt_;
  std::vector<lumen::train::bucket> plan_;
  std::vector<std::vector<float>> buffers_;
};

/// The simulated cluster of the parts: node-0 for the driver, a node for
/// each replica and a spare.
inline lumen::init_options replica_network(uint64_t seed) {
  return exercise::gigabit_cluster(seed, world + 2);
}

/// The learner's replicas, rank r on `nodes[r]` (node-(r+1) by default),
/// built with (world, r, extra...).
template <class Replica, class... Extra>
std::vector<lumen::ActorHandle<Replica>> start_replicas(
  const std::vector<std::string>& nodes = {"node-1", "node-2", "node-3"},
  const Extra&... extra) {
  std::vector<lumen::ActorHandle<Replica>> out;
  for (int r = 0; r < world; ++r)
    out.push_back(lumen::actor<Replica>(world, r, extra...)
                    .on_node(nodes.at(size_t(r)))
                    .remote());
  return out;
}

/// The step every replica must take, computed here in one place: the
/// mean of the three shares' gradients, then momentum's update.
inline std::vector<std::vector<float>> expected_weights(int steps) {
  auto w = model().init(1);
  lumen::ml::optimizer opt{{lumen::ml::optimizer_kind::momentum, 0.05f},
                           w.size()};
  std::vector<float> g(w.size()), mean(w.size());
  std::vector<std::vector<float>> after;
  for (int k = 0; k < steps; ++k) {
    std::fill(mean.begin(), mean.end(), 0.0f);
    for (int r = 0; r < world; ++r) {
      model().loss_and_gradient(w.data(), shard(r, k), g.data());
      for (size_t i = 0; i < g.size(); ++i)
        mean[i] += g[i] / world;
    }
    opt.step(w.data(), mean.data(), mean.size());
    after.push_back(w);
  }
  return after;
}

/// The largest |a − b| over the elements.
inline double largest_difference(const std::vector<float>& a,
                                 const std::vector<float>& b) {
  double gap = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    gap = std::max(gap, double(std::abs(a[i] - b[i])));
  return gap;
}

/// The largest |a − b| over the elements, relative to the largest |b|.
inline double relative_gap(const std::vector<float>& a,
                           const std::vector<float>& b) {
  double scale = 1e-12;
  for (auto v : b)
    scale = std::max(scale, double(std::abs(v)));
  return largest_difference(a, b) / scale;
}

/// Step `k` on every replica at once; their losses.
template <class Replica>
std::vector<float> step_all(std::vector<lumen::ActorHandle<Replica>>& replicas,
                            int k) {
  std::vector<lumen::ObjectRef<float>> steps;
  for (auto& r : replicas)
    steps.push_back(r.call(&Replica::step, k));
  return lumen::get(steps);
}

/// Every replica's weights.
template <class Replica>
std::vector<std::vector<float>>
weights_of(std::vector<lumen::ActorHandle<Replica>>& replicas) {
  std::vector<lumen::ObjectRef<std::vector<float>>> asked;
  for (auto& r : replicas)
    asked.push_back(r.call(&Replica::weights));
  return lumen::get(asked);
}

/// --step: `steps` steps of the learner's replicas under seed 1, every
/// event beside what rank 0 is doing. The exit code.
template <class Replica>
int show_steps(step_mode mode, int steps) {
  auto wrong = exercise::in_simulation(replica_network(1), [&] {
    auto replicas = start_replicas<Replica>();
    weights_of(replicas); // built and in the group before the steps
    exercise::step_events(mode, [](const lumen::sim::event&, bool json) {
      if (json)
        return "\"rank0\": \"" + progress() + "\"";
      return progress();
    });
    for (int k = 0; k < steps; ++k)
      step_all(replicas, k);
    return std::string{};
  });
  if (!wrong.empty())
    std::cout << wrong << "\n";
  return wrong.empty() ? 0 : 1;
}

} // namespace scratch04
