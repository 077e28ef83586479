#pragma once

// ml_scratch01's harness: the data, the models, printing and checking. What
// the parts are about is the learner's: the rules of a step (01a), the
// server and the workers as Lumen actors (01b), the driver's loop with
// futures (01c). Part 01a runs in one process; 01b and 01c on a simulated
// cluster of four nodes (the driver and the server on node-0, a worker on
// each of node-1 to node-3), 01c then on a real one.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

#include "../exercise.hpp"

namespace scratch01 {

namespace ml = lumen::ml;
using exercise::step_mode;

/// The two problems: the synthetic regression (its true weights known),
/// then Fashion-MNIST's ten classes with softmax regression.
enum problem : int { regression = 0, fashion = 1 };

constexpr int workers = 3;

/// Steps of each problem in a check or a plain run, and their rates.
constexpr int regression_steps = 300, fashion_steps = 300;
constexpr float regression_lr = 0.3f, fashion_lr = 0.05f;

inline const ml::linear_problem& regression_problem() {
  static const auto p = ml::make_linear_regression(3000, 4, /*seed=*/7, 0.001f);
  return p;
}

inline const ml::dataset& fashion_set(ml::split which) {
  auto load = [](ml::split s) {
    auto d = ml::load_fashion_mnist(s);
    ml::standardize(d, 0.2860f, 0.3530f);
    return d;
  };
  static const auto train = load(ml::split::train);
  static const auto test = load(ml::split::test);
  return which == ml::split::train ? train : test;
}

inline std::unique_ptr<ml::model> model_of(int p) {
  if (p == regression)
    return std::make_unique<ml::linear_regression>(4);
  return std::make_unique<ml::softmax_regression>(784, 10);
}

/// Worker `worker_id`'s shard of problem `p`: a third of the rows, handed
/// out a batch at a time (the whole share each step for the regression,
/// 64 rows for Fashion-MNIST). A gradient on a batch costs 20 ms of
/// compute on a simulated node (next() charges it there).
class shard {
public:
  shard(int p, int worker_id)
    : batches_(std::make_unique<ml::batch_stream>(
        ml::shard_of(p == regression ? regression_problem().data
                                     : fashion_set(ml::split::train),
                     static_cast<size_t>(worker_id), workers, 1),
        p == regression ? 0 : 64, static_cast<uint64_t>(worker_id), false)) {}

  ml::dataset next() {
    if (lumen::sim::active())
      lumen::sim::charge(std::chrono::milliseconds(20));
    return batches_->next().data;
  }

private:
  std::unique_ptr<ml::batch_stream> batches_;
};

inline double norm(const std::vector<float>& v) {
  double s = 0;
  for (auto x : v)
    s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

/// "" if `w` is the regression's true weights to 1e-3, else which is off.
inline std::string off_the_truth(const std::vector<float>& w) {
  auto& truth = regression_problem().weights;
  if (w.size() != truth.size() + 1)
    return "the server ended with " + std::to_string(w.size()) +
           " weights, the model has " + std::to_string(truth.size() + 1);
  for (size_t i = 0; i < truth.size(); ++i)
    if (!(std::abs(w[i] - truth[i]) <= 1e-3f))
      return "weight " + std::to_string(i) + " ended at " +
             std::to_string(w[i]) + ", the true one is " +
             std::to_string(truth[i]);
  return "";
}

/// "" if `got` is `want` to 1e-5, else the first value that is not.
inline std::string differs(const std::vector<float>& got,
                           const std::vector<float>& want) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " values where " +
           std::to_string(want.size()) + " were due";
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-5f))
      return "value " + std::to_string(i) + " is " + std::to_string(got[i]) +
             ", not " + std::to_string(want[i]);
  return "";
}

/// The options of a simulated run of seed `seed`: four nodes on a LAN.
inline lumen::init_options simulated(uint64_t seed) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = seed;
  opts.sim.nodes = 1 + workers;
  return opts;
}

/// Runs `body` in a simulated run of `seed`, showing its events as `mode`
/// says beside the server's version; "" or "seed S: what is wrong".
template <class Body>
std::string in_simulation(uint64_t seed, Body body, step_mode mode) {
  return exercise::in_simulation(simulated(seed), [&] {
    exercise::step_counting(mode, "::apply_gradients");
    return body();
  });
}

} // namespace scratch01

#include "parts.hpp"
