#pragma once

// Parts 02b and 02c's cluster: a server and four workers as Lumen actors
// (given: the parts are the drivers' loops), the data, and the checks.
// The server applies a gradient when it comes, the rate divided by its
// staleness (02a's rule), or a sync step's mean; a worker computes a
// gradient on the weights of a version, 20 ms of compute on a simulated
// node. On a simulated cluster the server is on node-0, worker w on
// node-(w+1), and node-4 is three times as slow: the straggler.

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

class Server {
public:
  explicit Server(float lr)
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

  /// A sync step: the mean of `grads`, all computed on the current
  /// weights.
  versioned apply_mean(std::vector<std::vector<float>> grads) {
    for (size_t i = 0; i < weights_.size(); ++i) {
      float sum = 0;
      for (auto& g : grads)
        sum += g[i];
      weights_[i] -= lr_ * sum / static_cast<float>(grads.size());
    }
    steps_.push_back(grads.size());
    return {weights_, ++version_};
  }

  /// How many gradients closed each sync step.
  std::vector<uint64_t> steps() {
    return steps_;
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
  std::vector<uint64_t> steps_;
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

/// A simulated run of `seed` with the straggler, the server and the
/// workers placed: `body(ps, workers)` is "" or what is wrong.
template <class Body>
std::string with_a_straggler(uint64_t seed, step_mode mode, Body body) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = seed;
  opts.sim.nodes = 1 + async_workers;
  opts.sim.slow = {{"node-" + std::to_string(async_workers), 3.0}};
  return exercise::in_simulation(opts, [&]() -> std::string {
    exercise::step_counting(mode, "::apply_");
    auto ps = lumen::actor<Server>(0.2f).on_node("node-0").remote();
    std::vector<lumen::ActorHandle<Worker>> pool;
    for (int w = 0; w < async_workers; ++w)
      pool.push_back(lumen::actor<Worker>(w)
                       .on_node("node-" + std::to_string(w + 1))
                       .remote());
    return body(ps, pool);
  });
}

/// "" if `weights` are the regression's true ones to 1e-2, else what the
/// TODO of `part` got wrong.
inline std::string off_the_truth(const std::vector<float>& weights,
                                 const std::string& part) {
  auto& truth = async_problem().weights;
  for (size_t i = 0; i < truth.size(); ++i)
    if (weights.size() != truth.size() + 1 ||
        !(std::abs(weights[i] - truth[i]) <= 1e-2f))
      return "the weights ended at " + exercise::list(weights) +
             ", the true ones are " + exercise::list(truth) + ": see TODO(" +
             part + ") in train";
  return "";
}

/// The learner's driver, `train(ps, workers, updates)`, on a simulated
/// cluster of `seed` with its straggler: "" if it fits the regression with
/// the fast workers never waiting for the slow one, or what is wrong.
template <class Train>
std::string check_async(uint64_t seed, Train& train, int updates,
                        step_mode mode) {
  return with_a_straggler(seed, mode, [&](auto& ps, auto& pool) -> std::string {
    auto start = lumen::sim::now();
    auto weights = train(ps, pool, updates);
    auto took = std::chrono::duration<double>(lumen::sim::now() - start);
    if (updates < async_updates)
      return "";
    if (auto off = off_the_truth(weights, "ml_scratch02b"); !off.empty())
      return off;
    auto hist = lumen::get(ps.call(&Server::staleness));
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

constexpr int sync_steps = 150;

/// "150 steps of 4 gradients", or of how many each of the first ones.
inline std::string steps_of(const std::vector<uint64_t>& closed) {
  if (closed.empty())
    return "no step";
  auto n = std::to_string(closed.size()) + " steps";
  if (std::all_of(closed.begin(), closed.end(),
                  [&](uint64_t k) { return k == closed[0]; }))
    return n + " of " + std::to_string(closed[0]) + " gradients";
  std::vector<uint64_t> first(
    closed.begin(), closed.begin() + std::min<size_t>(8, closed.size()));
  return n + " of " + exercise::list(first) + "... gradients";
}

/// The learner's sync driver, `train(ps, workers, steps, backup)`, with no
/// backup worker and then one: "" if both fit the regression, the first
/// waiting for the straggler every step and the second never, or what is
/// wrong.
template <class Train>
std::string check_sync(uint64_t seed, Train& train, int steps, step_mode mode) {
  std::string what;
  for (int backup : {0, 1}) {
    what =
      with_a_straggler(seed, mode, [&](auto& ps, auto& pool) -> std::string {
        auto start = lumen::sim::now();
        auto weights = train(ps, pool, steps, backup);
        auto took = std::chrono::duration<double>(lumen::sim::now() - start);
        if (steps < sync_steps)
          return "";
        auto closed = lumen::get(ps.call(&Server::steps));
        auto by = static_cast<uint64_t>(async_workers - backup);
        auto label = "with " + std::to_string(backup) + " backup worker" +
                     (backup == 1 ? "" : "s");
        if (closed.size() != static_cast<size_t>(steps) ||
            std::any_of(closed.begin(), closed.end(),
                        [by](uint64_t n) { return n != by; }))
          return label + ", the server made " + steps_of(closed) +
                 ": each step's mean is of the first " + std::to_string(by) +
                 " gradients of that step, one apply_mean a step (see "
                 "TODO(ml_scratch02c) in train)";
        if (auto off = off_the_truth(weights, "ml_scratch02c"); !off.empty())
          return label + ", " + off;
        // The straggler takes 60 ms: a sync step waits for it, a step with
        // a backup worker takes a fast worker's 20 ms.
        auto per_step = took.count() / steps;
        if (backup == 1 && per_step > 0.025)
          return label + ", " + std::to_string(steps) + " steps took " +
                 std::to_string(took.count()) + " s of virtual time, " +
                 std::to_string(per_step * 1000) +
                 " ms a step: every step still waited for the straggler. "
                 "lumen::wait(step, workers.size() - backup) returns with the "
                 "first gradients ready: see TODO(ml_scratch02c) in train";
        std::cout << "  seed " << seed << ", " << label << ": " << took.count()
                  << " s of virtual time\n";
        return "";
      });
    if (!what.empty())
      return what;
  }
  return what;
}

/// A part's program: --check runs `check(seed, train, full, none)` under
/// seeds 1-3; a run with --step, `check(1, train, few, mode)`.
template <class Check, class Train>
int main_of(int argc, char** argv, const std::string& what, Check check,
            Train train, int full, int few) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check || f->step == step_mode::none) {
    exercise::checker cases;
    exercise::under_each_seed(cases, what, [&](uint64_t seed) {
      return check(seed, train, full, step_mode::none);
    });
    return cases.verdict();
  }
  auto wrong = check(1, train, few, f->step);
  if (!wrong.empty())
    std::cout << wrong << "\n";
  return wrong.empty() ? 0 : 1;
}

template <class Train>
int main_async(int argc, char** argv, Train train) {
  return main_of(argc, argv, "the async loop with a straggler",
                 check_async<Train>, train, async_updates, 12);
}

template <class Train>
int main_sync(int argc, char** argv, Train train) {
  return main_of(argc, argv, "sync steps with a straggler", check_sync<Train>,
                 train, sync_steps, 3);
}

} // namespace scratch02

LUMEN_ACTOR(scratch02::Server, &scratch02::Server::get_weights,
            &scratch02::Server::apply_gradient, &scratch02::Server::apply_mean,
            &scratch02::Server::staleness, &scratch02::Server::steps);
LUMEN_ACTOR_CTOR(scratch02::Server(float));
LUMEN_ACTOR(scratch02::Worker, &scratch02::Worker::compute_gradient);
LUMEN_ACTOR_CTOR(scratch02::Worker(int));
