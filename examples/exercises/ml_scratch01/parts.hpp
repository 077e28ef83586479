#pragma once

// ml_scratch01's parts: what each runs, shows (--step) and checks (--check).
// harness.hpp includes it last.

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../exercise.hpp"

namespace scratch01 {

/// Part 01a's rules, which 01a_starter.cpp defines.
/// A worker's gradient of `model`'s loss at `weights` on `batch`.
std::vector<float> compute_gradient(const ml::model& model,
                                    const std::vector<float>& weights,
                                    const ml::dataset& batch);
/// The server's step: `weights` moved by `lr` against the mean of the
/// workers' `grads`.
void apply_gradients(std::vector<float>& weights,
                     const std::vector<std::vector<float>>& grads, float lr);

namespace part_a {

/// `steps` steps in one process with the learner's rules: every worker's
/// gradient on its shard at the same weights, then the server's step.
inline std::vector<float> train(int p, int steps, float lr, step_mode mode) {
  auto model = model_of(p);
  auto weights = model->init(0);
  std::vector<std::unique_ptr<shard>> shards;
  for (int w = 0; w < workers; ++w)
    shards.push_back(std::make_unique<shard>(p, w));
  const ml::dataset& watch =
    p == regression ? regression_problem().data : fashion_set(ml::split::test);
  for (int step = 1; step <= steps; ++step) {
    std::vector<std::vector<float>> grads;
    for (auto& s : shards)
      grads.push_back(compute_gradient(*model, weights, s->next()));
    apply_gradients(weights, grads, lr);
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

inline int check() {
  exercise::checker cases;
  {
    std::vector<float> w{1, 2};
    apply_gradients(w, {{1, 0}, {3, 2}}, 0.5f);
    cases.report("apply_gradients",
                 differs(w, {0, 1.5f}).empty()
                   ? ""
                   : "weights {1, 2}, gradients {1, 0} and {3, 2}, lr 0.5: " +
                       differs(w, {0, 1.5f}) +
                       " (the mean, times lr): see TODO(ml_scratch01a) in "
                       "apply_gradients");
  }
  {
    ml::linear_regression m{4};
    std::vector<float> w{0.5f, -1, 2, 0, 0.25f}, want(5);
    auto batch = regression_problem().data.take({0, 1, 2, 3, 4, 5, 6, 7});
    m.loss_and_gradient(w.data(), batch, want.data());
    auto d = differs(compute_gradient(m, w, batch), want);
    cases.report(
      "compute_gradient",
      d.empty() ? "" : d + ": see TODO(ml_scratch01a) in compute_gradient");
  }
  if (cases.passing())
    cases.report("3 workers fit the synthetic regression to 1e-3",
                 off_the_truth(train(regression, regression_steps,
                                     regression_lr, step_mode::none)));
  if (cases.passing()) {
    auto w = train(fashion, fashion_steps, fashion_lr, step_mode::none);
    auto acc = ml::softmax_regression{784, 10}.accuracy(
      w.data(), fashion_set(ml::split::test));
    cases.report("3 workers train softmax regression on Fashion-MNIST (test "
                 "accuracy " +
                   std::to_string(acc) + ")",
                 acc >= 0.75f ? "" : "the accuracy stayed below 0.75");
  }
  return cases.verdict();
}

inline int main(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check)
    return check();
  auto mode = f->step;
  auto w = train(regression, mode == step_mode::none ? regression_steps : 20,
                 regression_lr, mode);
  if (mode != step_mode::json)
    std::cout << "regression weights " << exercise::list(w) << ", true ones "
              << exercise::list(regression_problem().weights) << " and "
              << regression_problem().bias << "\n";
  w = train(fashion, mode == step_mode::none ? fashion_steps : 20, fashion_lr,
            mode);
  if (mode != step_mode::json)
    std::cout << "Fashion-MNIST test accuracy "
              << ml::softmax_regression{784, 10}.accuracy(
                   w.data(), fashion_set(ml::split::test))
              << "\n";
  return 0;
}

} // namespace part_a

/// The regression's server on node-0 and a worker on each of node-1 to
/// node-3, as the simulated checks place them.
template <class Server, class Worker>
std::pair<lumen::ActorHandle<Server>, std::vector<lumen::ActorHandle<Worker>>>
on_the_nodes() {
  auto ps = lumen::actor<Server>(int{regression}, regression_lr)
              .on_node("node-0")
              .remote();
  std::vector<lumen::ActorHandle<Worker>> pool;
  for (int w = 0; w < workers; ++w)
    pool.push_back(lumen::actor<Worker>(int{regression}, w)
                     .on_node("node-" + std::to_string(w + 1))
                     .remote());
  return {std::move(ps), std::move(pool)};
}

namespace part_b {

/// The learner's server and workers, asked what the seed's program asks:
/// on a simulated cluster of `seed`, the first weights, every worker's
/// gradient at one point, a step, and the weights after it. "" or what is
/// wrong.
template <class Server, class Worker>
std::string check(uint64_t seed, step_mode mode) {
  return in_simulation(
    seed,
    [&]() -> std::string {
      auto [ps, pool] = on_the_nodes<Server, Worker>();
      auto first = lumen::get(ps.call(&Server::get_weights));
      if (auto d = differs(first, model_of(regression)->init(0)); !d.empty())
        return "a new server's weights: " + d +
               " (it starts from model_of(problem)->init(0)): see "
               "TODO(ml_scratch01b) in ParameterServer";
      std::vector<float> at{0.5f, -1, 2, 0, 0.25f};
      std::vector<lumen::ObjectRef<std::vector<float>>> refs;
      for (auto& w : pool)
        refs.push_back(w.call(&Worker::compute_gradient, at));
      auto grads = lumen::get(refs);
      ml::linear_regression m{4};
      for (int w = 0; w < workers; ++w) {
        std::vector<float> want(5);
        m.loss_and_gradient(at.data(),
                            ml::shard_of(regression_problem().data,
                                         static_cast<size_t>(w), workers, 1),
                            want.data());
        if (auto d = differs(grads[static_cast<size_t>(w)], want); !d.empty())
          return "worker " + std::to_string(w) + "'s gradient at " +
                 exercise::list(at) + ": " + d +
                 " (its model's, on the next batch of its shard): see "
                 "TODO(ml_scratch01b) in DataParallelWorker::compute_gradient";
      }
      auto after = lumen::get(ps.call(&Server::apply_gradients, grads));
      auto want = first;
      for (size_t i = 0; i < want.size(); ++i)
        want[i] -= regression_lr * (grads[0][i] + grads[1][i] + grads[2][i]) /
                   static_cast<float>(workers);
      if (auto d = differs(after, want); !d.empty())
        return "apply_gradients of the three gradients at " +
               exercise::list(at) + " answered weights where " + d +
               " (the first weights less lr times the gradients' mean): see "
               "TODO(ml_scratch01b) in ParameterServer::apply_gradients";
      if (!differs(lumen::get(ps.call(&Server::get_weights)), after).empty())
        return "get_weights after a step did not answer the weights the step "
               "made: the server keeps them (see TODO(ml_scratch01b) in "
               "ParameterServer)";
      return "";
    },
    mode);
}

template <class Server, class Worker>
int main(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (!f->check) {
    auto what = check<Server, Worker>(1, f->step);
    std::cout << (what.empty() ? "the server and the workers answered as "
                                 "the seed's program expects\n"
                               : what + "\n");
    return what.empty() ? 0 : 1;
  }
  exercise::checker cases;
  exercise::under_each_seed(
    cases, "the server and three workers on a simulated cluster",
    [](uint64_t seed) { return check<Server, Worker>(seed, step_mode::none); });
  return cases.verdict();
}

} // namespace part_b

namespace part_c {

/// The learner's driver, `train(ps, workers, steps)`, over the reference's
/// server and workers on a simulated cluster of `seed`: "" if it fits the
/// regression (past a few steps) with every worker computing at once, or
/// what is wrong.
template <class Server, class Worker, class Train>
std::string check(uint64_t seed, Train& train, int steps, step_mode mode) {
  return in_simulation(
    seed,
    [&]() -> std::string {
      auto [ps, pool] = on_the_nodes<Server, Worker>();
      auto start = lumen::sim::now();
      auto w = train(ps, pool, steps);
      auto took = std::chrono::duration<double>(lumen::sim::now() - start);
      if (steps < regression_steps)
        return "";
      if (auto off = off_the_truth(w); !off.empty())
        return off + " after " + std::to_string(steps) +
               " steps: see TODO(ml_scratch01c) in train";
      // A gradient takes 20 ms: a step with every worker at once, a little
      // more; one after another, three times that.
      auto per_step = took.count() / steps;
      if (per_step > 0.030)
        return std::to_string(steps) + " steps took " +
               std::to_string(took.count()) + " s of virtual time, " +
               std::to_string(per_step * 1000) +
               " ms a step: the workers computed one after another (20 ms "
               "each). Ask every worker first, then lumen::get the list of "
               "refs: see TODO(ml_scratch01c) in train";
      return "";
    },
    mode);
}

/// The same driver on the embedded cluster: real threads, real time.
template <class Server, class Worker, class Train>
std::string check_real(Train& train) {
  lumen::init();
  std::string what;
  try {
    auto ps = lumen::actor<Server>(int{regression}, regression_lr).remote();
    std::vector<lumen::ActorHandle<Worker>> pool;
    for (int w = 0; w < workers; ++w)
      pool.push_back(lumen::actor<Worker>(int{regression}, w).remote());
    what = off_the_truth(train(ps, pool, regression_steps));
  } catch (const std::exception& e) {
    what = e.what();
  }
  lumen::shutdown();
  return what;
}

template <class Server, class Worker, class Train>
int main(int argc, char** argv, Train train) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  exercise::checker cases;
  if (f->check || f->step == step_mode::none) {
    exercise::under_each_seed(
      cases, "the driver trains on a simulated cluster", [&](uint64_t seed) {
        return check<Server, Worker>(seed, train, regression_steps,
                                     step_mode::none);
      });
    if (cases.passing())
      cases.report("the same driver on the embedded cluster",
                   check_real<Server, Worker>(train));
    return cases.verdict();
  }
  // Three steps, event by event.
  auto what = check<Server, Worker>(1, train, 3, f->step);
  if (!what.empty())
    std::cout << what << "\n";
  return what.empty() ? 0 : 1;
}

} // namespace part_c

} // namespace scratch01
