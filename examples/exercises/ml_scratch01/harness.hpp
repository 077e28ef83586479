#pragma once

// The parameter server of ml_scratch01: a server actor holding the
// weights and a learning rate, three worker actors each with its shard,
// and a driver that loops as the seed's program does (get the weights,
// every worker computes a gradient in parallel, the server applies them).
// The learner writes the two rules (starter.cpp): a worker's gradient on
// its batch, and the server's update. This file runs them in Lumen
// actors, shows each step (--step), and checks the result (--check). The
// run is the same every time: the gradients are applied in worker order.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "../exercise.hpp"

namespace scratch01 {

namespace ml = lumen::ml;

/// The learner's rules; starter.cpp and solution.cpp define them.
/// A worker's gradient of `model`'s loss at `weights` on `batch`.
std::vector<float> compute_gradient(const ml::model& model,
                                    const std::vector<float>& weights,
                                    const ml::dataset& batch);
/// The server's step: `weights` moved by `lr` against the mean of the
/// workers' `grads`.
void apply_gradients(std::vector<float>& weights,
                     const std::vector<std::vector<float>>& grads, float lr);

/// The two problems: the synthetic regression (its true weights known),
/// then Fashion-MNIST's ten classes with softmax regression.
enum problem : int { regression = 0, fashion = 1 };

constexpr int workers = 3;

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

/// The seed's ParameterServer: the weights (zeros) and the learning rate.
class ParameterServer {
public:
  ParameterServer(int p, float lr)
    : weights_(model_of(p)->init(0))
    , lr_(lr) {}

  std::vector<float> get_weights() {
    return weights_;
  }

  std::vector<float> apply(std::vector<std::vector<float>> grads) {
    apply_gradients(weights_, grads, lr_);
    return weights_;
  }

private:
  std::vector<float> weights_;
  float lr_;
};

/// The seed's DataParallelWorker(worker_id, shard): its shard (the whole
/// share each step for the regression, batches of 64 for Fashion-MNIST).
class DataParallelWorker {
public:
  DataParallelWorker(int p, int worker_id)
    : model_(model_of(p))
    , batches_(
        p == regression
          ? ml::shard_of(regression_problem().data, worker_id, workers, 1)
          : ml::shard_of(fashion_set(ml::split::train), worker_id, workers, 1),
        p == regression ? 0 : 64, worker_id, false) {}

  std::vector<float> compute_gradient(std::vector<float> weights) {
    return scratch01::compute_gradient(*model_, weights, batches_.next().data);
  }

private:
  std::unique_ptr<ml::model> model_;
  ml::batch_stream batches_;
};

using exercise::step_mode;

inline double norm(const std::vector<float>& v) {
  double s = 0;
  for (auto x : v)
    s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

/// The driver: `steps` rounds of get weights, gradients, apply. Shows
/// each step as `mode` says; returns the final weights.
inline std::vector<float> train(int p, int steps, float lr, step_mode mode) {
  auto ps = lumen::actor<ParameterServer>(p, lr).remote();
  std::vector<lumen::ActorHandle<DataParallelWorker>> pool;
  for (int w = 0; w < workers; ++w)
    pool.push_back(lumen::actor<DataParallelWorker>(p, w).remote());
  auto model = model_of(p);
  const ml::dataset& watch =
    p == regression ? regression_problem().data : fashion_set(ml::split::test);
  auto weights = lumen::get(ps.call(&ParameterServer::get_weights));
  for (int step = 1; step <= steps; ++step) {
    lumen::trace::span span{"step", "exercise"};
    span.arg("step", step);
    std::vector<lumen::ObjectRef<std::vector<float>>> refs;
    for (auto& w : pool)
      refs.push_back(w.call(&DataParallelWorker::compute_gradient, weights));
    auto grads = lumen::get(refs); // in worker order
    weights = lumen::get(ps.call(&ParameterServer::apply, grads));
    if (mode == step_mode::none)
      continue;
    auto loss = model->loss(weights.data(), watch);
    if (mode == step_mode::json) {
      std::cout << "{\"problem\": \""
                << (p == regression ? "regression" : "fashion-mnist")
                << "\", \"step\": " << step << ", \"version\": " << step
                << ", \"workers\": [";
      for (size_t w = 0; w < grads.size(); ++w)
        std::cout << (w ? ", " : "") << "{\"worker\": " << w
                  << ", \"grad_norm\": " << norm(grads[w]) << "}";
      std::cout << "], \"loss\": " << loss << "}\n";
      continue;
    }
    std::cout << "step " << step << ": version " << step << ", gradient norms";
    for (auto& g : grads)
      std::cout << " " << norm(g);
    std::cout << ", loss " << loss << "\n";
    exercise::wait_for_enter(mode, "step");
  }
  return weights;
}

/// Steps of each problem in a check or a plain run.
constexpr int regression_steps = 300, fashion_steps = 300;

/// Runs the learner's rules on fixed cases; prints each verdict and PASS
/// or FAIL. Returns the exit code.
inline int check() {
  exercise::checker cases;
  {
    std::vector<float> w{1, 2};
    apply_gradients(w, {{1, 0}, {3, 2}}, 0.5f);
    std::ostringstream got;
    got << "{" << w[0] << ", " << w[1] << "}";
    cases.report("apply_gradients",
                 std::abs(w[0] - 0.0f) < 1e-6f && std::abs(w[1] - 1.5f) < 1e-6f
                   ? ""
                   : "weights {1, 2}, gradients {1, 0} and {3, "
                     "2}, lr 0.5 gave " +
                       got.str() +
                       ", expected {0, 1.5} (the mean, times "
                       "lr): see TODO(ml_scratch01) in "
                       "apply_gradients");
  }
  {
    auto& p = regression_problem();
    ml::linear_regression m{4};
    std::vector<float> w{0.5f, -1, 2, 0, 0.25f}, want(5);
    auto batch = p.data.take({0, 1, 2, 3, 4, 5, 6, 7});
    m.loss_and_gradient(w.data(), batch, want.data());
    auto got = compute_gradient(m, w, batch);
    std::string what;
    if (got.size() != want.size())
      what = "a gradient of " + std::to_string(got.size()) +
             " values for 5 parameters";
    for (size_t i = 0; i < want.size() && what.empty(); ++i)
      if (std::abs(got[i] - want[i]) > 1e-5f)
        what = "value " + std::to_string(i) + " is " + std::to_string(got[i]) +
               ", the model's gradient " + std::to_string(want[i]);
    cases.report("compute_gradient",
                 what.empty()
                   ? ""
                   : what + ": see TODO(ml_scratch01) in compute_gradient");
  }
  if (cases.passing()) {
    auto w = train(regression, regression_steps, 0.3f, step_mode::none);
    auto& truth = regression_problem().weights;
    std::string what;
    for (size_t i = 0; i < truth.size() && what.empty(); ++i)
      if (std::abs(w[i] - truth[i]) > 1e-3f)
        what = "weight " + std::to_string(i) + " ended at " +
               std::to_string(w[i]) + ", the true one is " +
               std::to_string(truth[i]);
    cases.report("3 workers fit the synthetic regression to 1e-3", what);
  }
  if (cases.passing()) {
    auto w = train(fashion, fashion_steps, 0.05f, step_mode::none);
    ml::softmax_regression m{784, 10};
    auto acc = m.accuracy(w.data(), fashion_set(ml::split::test));
    cases.report("3 workers train softmax regression on Fashion-MNIST (test "
                 "accuracy " +
                   std::to_string(acc) + ")",
                 acc >= 0.75f ? "" : "the accuracy stayed below 0.75");
  }
  return cases.verdict();
}

/// The program: --check, or both problems trained, shown step by step
/// with --step (Enter), --step=auto or --step=json.
inline int main_of(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  bool checking = f->check;
  auto mode = f->step;
  lumen::init();
  int rc = 0;
  try {
    if (checking) {
      rc = check();
    } else {
      auto w =
        train(regression, mode == step_mode::none ? regression_steps : 20, 0.3f,
              mode);
      if (mode != step_mode::json) {
        std::cout << "regression weights:";
        for (auto x : w)
          std::cout << " " << x;
        std::cout << "\ntrue weights:      ";
        for (auto x : regression_problem().weights)
          std::cout << " " << x;
        std::cout << " " << regression_problem().bias << "\n";
      }
      w = train(fashion, mode == step_mode::none ? fashion_steps : 20, 0.05f,
                mode);
      if (mode != step_mode::json)
        std::cout << "Fashion-MNIST test accuracy "
                  << ml::softmax_regression{784, 10}.accuracy(
                       w.data(), fashion_set(ml::split::test))
                  << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "ml_scratch01: " << e.what() << "\n";
    rc = 1;
  }
  lumen::shutdown();
  return rc;
}

} // namespace scratch01

LUMEN_ACTOR(scratch01::ParameterServer,
            &scratch01::ParameterServer::get_weights,
            &scratch01::ParameterServer::apply);
LUMEN_ACTOR(scratch01::DataParallelWorker,
            &scratch01::DataParallelWorker::compute_gradient);
