#pragma once

// Part 02b's cluster: an async server and four workers as Lumen actors
// (given: the part is the driver's loop), the data, and the checks. The
// server applies each gradient when it comes, the rate divided by its
// staleness (02a's rule); a worker computes a gradient on the weights of
// a version, 20 ms of compute on a simulated node. On a simulated cluster
// the server is on node-0, worker w on node-(w+1), and node-4 is three
// times as slow: the straggler.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

#include "../exercise.hpp"

namespace scratch02 {

namespace ml = lumen::ml;

/// Weights (or a gradient) and the version of the weights they are of.
using versioned = std::pair<std::vector<float>, uint64_t>;

constexpr int async_workers = 4;
constexpr int async_updates = 400;

inline const ml::linear_problem& async_problem() {
  static const auto p =
    ml::make_linear_regression(4000, 4, /*seed=*/11, 0.001f);
  return p;
}

class AsyncServer {
public:
  explicit AsyncServer(float lr)
    : weights_(ml::linear_regression{4}.init(0))
    , lr_(lr) {}

  versioned get_weights() {
    return {weights_, version_};
  }

  /// `grad`, computed on the weights of `version`, applied now.
  versioned apply_gradient(std::vector<float> grad, uint64_t version) {
    auto staleness = version_ - version;
    if (staleness_.size() <= staleness)
      staleness_.resize(staleness + 1);
    ++staleness_[staleness];
    float lr = staleness > 1 ? lr_ / static_cast<float>(staleness) : lr_;
    for (size_t i = 0; i < weights_.size(); ++i)
      weights_[i] -= lr * grad[i];
    return {weights_, ++version_};
  }

  /// Gradients applied by their staleness: [0] fresh, [1] a version old...
  std::vector<uint64_t> staleness() {
    return staleness_;
  }

private:
  std::vector<float> weights_;
  float lr_;
  uint64_t version_ = 0;
  std::vector<uint64_t> staleness_;
};

class Worker {
public:
  explicit Worker(int worker_id)
    : batches_(std::make_unique<ml::batch_stream>(
        ml::shard_of(async_problem().data, static_cast<size_t>(worker_id),
                     async_workers, 1),
        64, static_cast<uint64_t>(worker_id), false)) {}

  /// The gradient at `weights` (of `version`) on the next batch.
  versioned compute_gradient(std::vector<float> weights, uint64_t version) {
    if (lumen::sim::active())
      lumen::sim::charge(std::chrono::milliseconds(20));
    std::vector<float> grad(weights.size());
    model_.loss_and_gradient(weights.data(), batches_->next().data,
                             grad.data());
    return {grad, version};
  }

private:
  ml::linear_regression model_{4};
  std::unique_ptr<ml::batch_stream> batches_;
};

using exercise::step_mode;

/// The learner's driver, `train(ps, workers, updates)`, on a simulated
/// cluster of `seed` with its straggler: "" if it fits the regression with
/// the fast workers never waiting for the slow one, or what is wrong.
template <class Train>
std::string check_async(uint64_t seed, Train& train, int updates,
                        step_mode mode) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = seed;
  opts.sim.nodes = 1 + async_workers;
  opts.sim.slow = {{"node-" + std::to_string(async_workers), 3.0}};
  return exercise::in_simulation(opts, [&]() -> std::string {
    exercise::step_counting(mode, "::apply_gradient");
    auto ps = lumen::actor<AsyncServer>(0.2f).on_node("node-0").remote();
    std::vector<lumen::ActorHandle<Worker>> pool;
    for (int w = 0; w < async_workers; ++w)
      pool.push_back(lumen::actor<Worker>(w)
                       .on_node("node-" + std::to_string(w + 1))
                       .remote());
    auto start = lumen::sim::now();
    auto weights = train(ps, pool, updates);
    auto took = std::chrono::duration<double>(lumen::sim::now() - start);
    if (updates < async_updates)
      return "";
    auto& truth = async_problem().weights;
    for (size_t i = 0; i < truth.size(); ++i)
      if (weights.size() != truth.size() + 1 ||
          !(std::abs(weights[i] - truth[i]) <= 1e-2f))
        return "the weights ended at " + exercise::list(weights) +
               ", the true ones are " + exercise::list(truth) +
               ": see TODO(ml_scratch02b) in train";
    auto hist = lumen::get(ps.call(&AsyncServer::staleness));
    uint64_t applied = 0;
    for (auto n : hist)
      applied += n;
    if (applied != static_cast<uint64_t>(updates))
      return "the server applied " + std::to_string(applied) +
             " gradients where " + std::to_string(updates) +
             " updates were asked: one apply_gradient an update (see "
             "TODO(ml_scratch02b) in train)";
    // Three fast workers at 20 ms and one at 60 ms: 6 ms an update when
    // none waits for another; waiting for all four each round, 15 ms.
    auto per_update = took.count() / updates;
    if (per_update > 0.009)
      return std::to_string(updates) + " updates took " +
             std::to_string(took.count()) + " s of virtual time, " +
             std::to_string(per_update * 1000) +
             " ms an update: the fast workers waited for the straggler. "
             "lumen::wait(pending, 1) gives the first gradient ready; apply "
             "it and start that worker again at once, leaving the others "
             "computing: see TODO(ml_scratch02b) in train. Staleness " +
             exercise::list(hist);
    std::cout << "  seed " << seed << ": " << took.count()
              << " s of virtual time, staleness histogram "
              << exercise::list(hist) << "\n";
    return "";
  });
}

template <class Train>
int main_async(int argc, char** argv, Train train) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check || f->step == step_mode::none) {
    exercise::checker cases;
    for (uint64_t seed : {1, 2, 3})
      cases.report("the async loop with a straggler, seed " +
                     std::to_string(seed),
                   check_async(seed, train, async_updates, step_mode::none));
    return cases.verdict();
  }
  // A dozen updates, event by event.
  auto what = check_async(1, train, 12, f->step);
  if (!what.empty())
    std::cout << what << "\n";
  return what.empty() ? 0 : 1;
}

} // namespace scratch02

LUMEN_ACTOR(scratch02::AsyncServer, &scratch02::AsyncServer::get_weights,
            &scratch02::AsyncServer::apply_gradient,
            &scratch02::AsyncServer::staleness);
LUMEN_ACTOR_CTOR(scratch02::AsyncServer(float));
LUMEN_ACTOR(scratch02::Worker, &scratch02::Worker::compute_gradient);
LUMEN_ACTOR_CTOR(scratch02::Worker(int));
