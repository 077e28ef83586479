#pragma once

// The data-parallel step of ml_scratch04a: N replicas of one MLP, each on
// its own share of a Fashion-MNIST batch, their gradients averaged bucket
// by bucket while the backward pass goes on. The learner's functions
// (starter.cpp) plan the buckets, start a bucket's all-reduce when its
// last layer is done, average a bucket over the replicas, and re-broadcast
// rank 0's weights; this file runs the replicas, keeps a virtual clock
// (each layer's backward and each bucket's all-reduce take time in
// proportion to their sizes, all-reduces one at a time, as a member's
// collective thread runs them), shows each step (--step) and checks the
// result (--check). Plain C++ on lumen/ml and lumen/train's plan, no
// actors: a run is the same every time.

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/ml/data.hpp>
#include <lumen/ml/models.hpp>
#include <lumen/ml/optimizer.hpp>
#include <lumen/train/buckets.hpp>

#include "../exercise.hpp"

namespace scratch04 {

using exercise::step_mode;
using lumen::ml::param_range;
using lumen::train::bucket;

/// Virtual time: a layer's backward takes its parameters / compute_rate,
/// a bucket's all-reduce latency + its parameters / link_rate.
constexpr double compute_rate = 1000; // parameters a time unit
constexpr double link_rate = 2000;
constexpr double latency = 5;

/// One step of every replica, as the learner's on_layer_ready sees it.
class ddp_step {
public:
  ddp_step(const std::vector<bucket>& plan, double now)
    : plan_(plan)
    , started_(plan.size(), -1)
    , now_(now) {
    for (auto& b : plan)
      layers_left.push_back(b.last_layer - b.first_layer + 1);
  }

  const std::vector<bucket>& plan() const {
    return plan_;
  }

  /// The bucket holding `layer`.
  size_t bucket_of(size_t layer) const {
    for (size_t b = 0; b < plan_.size(); ++b)
      if (plan_[b].first_layer <= layer && layer <= plan_[b].last_layer)
        return b;
    return plan_.size();
  }

  /// Starts bucket b's all-reduce now (on the virtual clock).
  void start_allreduce(size_t b) {
    if (b < started_.size() && started_[b] < 0) {
      started_[b] = now_;
      order_.push_back(b);
    }
  }

  /// Layers of each bucket whose gradients are not done yet.
  std::vector<size_t> layers_left;

  // The harness's side.
  void advance(double t) {
    now_ = t;
  }
  double now() const {
    return now_;
  }
  const std::vector<double>& started() const {
    return started_;
  }
  const std::vector<size_t>& order() const {
    return order_;
  }

private:
  std::vector<bucket> plan_;
  std::vector<double> started_;
  std::vector<size_t> order_;
  double now_;
};

// The learner's four functions; starter.cpp and solution.cpp define them.
std::vector<bucket> plan_buckets(const std::vector<param_range>& layers,
                                 size_t first_bytes, size_t cap_bytes);
void on_layer_ready(ddp_step& step, size_t layer);
void average(std::vector<std::vector<float>>& grads, param_range range);
void rebroadcast(std::vector<std::vector<float>>& params);

/// What a step did, for --step and the checker.
struct step_report {
  int step = 0;
  double backward_end = 0;
  std::vector<double> ready;    // each layer's gradient done
  std::vector<double> started;  // each bucket's all-reduce
  std::vector<double> finished; // -1: never started
  std::vector<float> loss;      // each replica's
  std::vector<float> drift;     // each replica's largest |w − rank 0's|
  bool rebroadcast = false;
};

/// N replicas training one MLP data-parallel.
class trainer {
public:
  trainer(size_t replicas, size_t batch, uint64_t seed)
    : net_(784, {32, 16}, 10)
    , plan_(plan_buckets(net_.layers(), 8 << 10, 32 << 10))
    , params_(replicas, net_.init(seed))
    , grads_(replicas, std::vector<float>(net_.num_params()))
    , batch_(batch) {
    data_ = lumen::ml::load_fashion_mnist(lumen::ml::split::train,
                                          replicas * batch * 40);
    lumen::ml::standardize(data_, 0.2860f, 0.3530f);
    for (size_t r = 0; r < replicas; ++r)
      opts_.emplace_back(
        lumen::ml::optimizer_config{lumen::ml::optimizer_kind::momentum, 0.05f},
        net_.num_params());
  }

  const std::vector<bucket>& plan() const {
    return plan_;
  }
  const lumen::ml::mlp& net() const {
    return net_;
  }
  std::vector<std::vector<float>>& params() {
    return params_;
  }
  std::vector<std::vector<float>>& grads() {
    return grads_;
  }

  /// One step: every replica's gradient on its share of batch `k`, the
  /// buckets averaged as the learner started them, the update; every
  /// `every` steps a re-broadcast.
  step_report step(int k, int every) {
    lumen::trace::span span{"training step", "exercise"};
    span.arg("step", k);
    auto n = params_.size();
    step_report rep;
    rep.step = k;
    auto layers = net_.layers();
    rep.ready.assign(layers.size(), 0);
    ddp_step s{plan_, 0};
    for (size_t r = 0; r < n; ++r) {
      auto at = (size_t(k) % 40) * n * batch_ + r * batch_;
      std::vector<size_t> rows(batch_);
      for (size_t i = 0; i < batch_; ++i)
        rows[i] = at + i;
      double t = 0;
      rep.loss.push_back(net_.loss_and_gradient(
        params_[r].data(), data_.take(rows), grads_[r].data(), [&](size_t l) {
          // Every replica is as fast: the clock follows replica 0's.
          t += double(layers[l].size()) / compute_rate;
          if (r > 0)
            return;
          rep.ready[l] = t;
          s.advance(t);
          on_layer_ready(s, l);
        }));
      if (r == 0)
        rep.backward_end = t;
    }
    rep.started = s.started();
    rep.finished.assign(plan_.size(), -1);
    double link_free = 0;
    for (auto b : s.order()) {
      auto begin = std::max(link_free, rep.started[b]);
      link_free = begin + latency + double(plan_[b].params.size()) / link_rate;
      rep.finished[b] = link_free;
      average(grads_, plan_[b].params);
    }
    for (size_t r = 0; r < n; ++r)
      opts_[r].step(params_[r].data(), grads_[r].data(), grads_[r].size());
    if (every > 0 && k % every == every - 1) {
      rebroadcast(params_);
      rep.rebroadcast = true;
    }
    for (size_t r = 0; r < n; ++r)
      rep.drift.push_back(drift_of(r));
    return rep;
  }

  /// Replica r's largest difference from replica 0.
  float drift_of(size_t r) const {
    float d = 0;
    for (size_t i = 0; i < params_[r].size(); ++i)
      d = std::max(d, std::abs(params_[r][i] - params_[0][i]));
    return d;
  }

private:
  lumen::ml::mlp net_;
  std::vector<bucket> plan_;
  std::vector<std::vector<float>> params_, grads_;
  std::vector<lumen::ml::optimizer> opts_;
  lumen::ml::dataset data_;
  size_t batch_;
};

/// --step: a step's buckets against the backward pass, each replica's
/// loss and drift.
inline void show(const step_report& rep, step_mode mode) {
  if (mode == step_mode::json) {
    std::cout << "{\"step\": " << rep.step
              << ", \"backward_end\": " << rep.backward_end
              << ", \"bucket_started\": " << exercise::list(rep.started)
              << ", \"bucket_finished\": " << exercise::list(rep.finished)
              << ", \"loss\": " << exercise::list(rep.loss)
              << ", \"drift\": " << exercise::list(rep.drift)
              << ", \"rebroadcast\": " << (rep.rebroadcast ? "true" : "false")
              << "}\n";
    return;
  }
  std::cout << "step " << rep.step << ": backward ends at " << rep.backward_end
            << "\n";
  for (size_t b = 0; b < rep.started.size(); ++b) {
    std::cout << "  bucket " << b << ": ";
    if (rep.started[b] < 0)
      std::cout << "never started\n";
    else
      std::cout << "all-reduce " << rep.started[b] << " -> " << rep.finished[b]
                << (rep.finished[b] <= rep.backward_end ? " (hidden)\n"
                                                        : " (waited for)\n");
  }
  for (size_t r = 0; r < rep.loss.size(); ++r)
    std::cout << "  replica " << r << ": loss " << rep.loss[r] << ", drift "
              << rep.drift[r] << "\n";
  if (rep.rebroadcast)
    std::cout << "  rank 0's weights re-broadcast\n";
  exercise::wait_for_enter(mode, "step");
}

/// The checker: the plan, when buckets start, the average, and training
/// that keeps replicas identical and lowers the loss.
inline int check() {
  exercise::checker c;
  lumen::ml::mlp big{784, {256, 128}, 10};
  for (auto [first, cap] : {std::pair<size_t, size_t>{64 << 10, 256 << 10},
                            {1, 1},
                            {size_t{1} << 30, size_t{1} << 30},
                            {6 << 10, 200 << 10}}) {
    auto want = lumen::train::plan_buckets(big.layers(), {first, cap});
    auto got = plan_buckets(big.layers(), first, cap);
    std::string what;
    if (got.size() != want.size())
      what = std::to_string(got.size()) + " buckets, expected " +
             std::to_string(want.size()) +
             ": see TODO(ml_scratch04a) in plan_buckets";
    for (size_t b = 0; b < got.size() && what.empty(); ++b)
      if (got[b].first_layer != want[b].first_layer ||
          got[b].last_layer != want[b].last_layer ||
          got[b].params.begin != want[b].params.begin ||
          got[b].params.end != want[b].params.end)
        what = "bucket " + std::to_string(b) + " holds layers " +
               std::to_string(got[b].first_layer) + "-" +
               std::to_string(got[b].last_layer) + ", expected " +
               std::to_string(want[b].first_layer) + "-" +
               std::to_string(want[b].last_layer) +
               " (last layers first, a layer never split): see "
               "TODO(ml_scratch04a) in plan_buckets";
    c.report("plan first=" + std::to_string(first) +
               " cap=" + std::to_string(cap),
             what);
  }
  trainer t{4, 16, 1};
  auto first = t.step(0, 0);
  std::string when;
  for (size_t b = 0; b < t.plan().size() && when.empty(); ++b) {
    auto last_ready = first.ready[t.plan()[b].first_layer];
    if (first.started[b] < 0)
      when = "bucket " + std::to_string(b) +
             "'s all-reduce never started: see TODO(ml_scratch04a) in "
             "on_layer_ready";
    else if (first.started[b] != last_ready)
      when = "bucket " + std::to_string(b) + " started at " +
             std::to_string(first.started[b]) +
             ", its last layer was done at " + std::to_string(last_ready) +
             ": start it then (TODO(ml_scratch04a) in on_layer_ready)";
  }
  c.report("each bucket's all-reduce starts as its last layer is done", when);
  std::string mean;
  for (size_t r = 1; r < 4 && mean.empty(); ++r)
    if (t.params()[r] != t.params()[0])
      mean = "after one step replica " + std::to_string(r) +
             " differs from replica 0 by " + std::to_string(t.drift_of(r)) +
             ": every replica must hold the same mean gradient (TODO("
             "ml_scratch04a) in average)";
  c.report("replicas take the same step", mean);
  // Training: replica 2 knocked off by a rounding's worth at step 12; the
  // re-broadcast every 10 steps must bring it back.
  float start_loss = first.loss[0], end_loss = 0;
  for (int k = 1; k < 30; ++k) {
    if (k == 12)
      t.params()[2][7] += 1e-3f;
    auto rep = t.step(k, 10);
    end_loss = rep.loss[0];
  }
  std::string same;
  for (size_t r = 1; r < 4 && same.empty(); ++r)
    if (t.params()[r] != t.params()[0])
      same = "after 30 steps replica " + std::to_string(r) + " drifted by " +
             std::to_string(t.drift_of(r)) +
             ": re-broadcast rank 0's weights every 10 steps (TODO("
             "ml_scratch04a) in rebroadcast)";
  c.report("replicas identical after 30 steps and a knock", same);
  c.report("the loss falls", end_loss < 0.8f * start_loss
                               ? ""
                               : "loss " + std::to_string(start_loss) + " -> " +
                                   std::to_string(end_loss) +
                                   ", expected 20% lower");
  return c.verdict();
}

/// The program: --check, or 12 steps of 3 replicas, shown step by step
/// with --step (Enter), --step=auto or --step=json.
inline int main_of(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check)
    return check();
  exercise::traced_run traced;
  trainer t{3, 32, 1};
  for (int k = 0; k < 12; ++k) {
    auto rep = t.step(k, 5);
    if (f->step != step_mode::none)
      show(rep, f->step);
    else if (k == 11)
      std::cout << "step " << k << ": loss " << rep.loss[0]
                << ", largest drift "
                << *std::max_element(rep.drift.begin(), rep.drift.end())
                << "\n";
  }
  return 0;
}

} // namespace scratch04
