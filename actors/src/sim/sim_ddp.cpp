#include <algorithm>
#include <cmath>
#include <limits>

#include <lumen/errors.hpp>

#include "lumen/ml/random.hpp"
#include "lumen/ml/sim.hpp"

// ml_scratch04's data-parallel step in virtual time (see sim.hpp).

namespace lumen::ml::sim {

namespace {

/// One Gaussian blob a class: centers N(0, 2²) per dimension, points
/// N(center, 1), drawn from `seed`.
dataset blobs(const ddp_sim_config& cfg) {
  std::mt19937_64 gen{cfg.seed};
  auto normal = [&] { return standard_normal(gen); };
  std::vector<float> centers(cfg.classes * cfg.dim);
  for (auto& c : centers)
    c = 2 * normal();
  dataset d;
  d.features =
    tensor({static_cast<int64_t>(cfg.samples), static_cast<int64_t>(cfg.dim)});
  d.labels = tensor({static_cast<int64_t>(cfg.samples)}, dtype::int32);
  auto x = d.features.data<float>();
  auto y = d.labels.data<int32_t>();
  for (size_t i = 0; i < cfg.samples; ++i) {
    auto k = i % cfg.classes;
    y[i] = static_cast<int32_t>(k);
    for (size_t j = 0; j < cfg.dim; ++j)
      x[i * cfg.dim + j] = centers[k * cfg.dim + j] + normal();
  }
  return d;
}

const ddp_sim_config& checked(const ddp_sim_config& cfg) {
  if (cfg.workers < 1 || cfg.workers > 16)
    throw usage_error("a data-parallel run of " + std::to_string(cfg.workers) +
                      " workers; give 1 to 16");
  if (cfg.samples < cfg.workers * cfg.batch || cfg.batch == 0)
    throw usage_error("every worker needs a batch of 1 or more, and the data "
                      "set a batch for every worker");
  if (!(cfg.straggler >= 1) || !(cfg.mflops_per_ms > 0) ||
      !(cfg.mbytes_per_ms > 0) || !(cfg.latency_ms >= 0))
    throw usage_error("times: a straggler factor of 1 or more, positive "
                      "compute and bandwidth, a latency of 0 or more");
  return cfg;
}

} // namespace

ddp_sim::ddp_sim(const ddp_sim_config& cfg)
  : cfg_(checked(cfg))
  , rng_(derive_seed(cfg.seed, 1))
  , data_(blobs(cfg))
  , model_(cfg.dim, cfg.hidden, cfg.classes)
  , layers_(model_.layers()) {
  train::bucket_config buckets;
  buckets.first_bytes = cfg.first_bucket_floats * sizeof(float);
  buckets.cap_bytes = cfg.bucket_cap_floats * sizeof(float);
  buckets.overlap = cfg.overlap;
  plan_ = train::plan_buckets(layers_, buckets);
  auto order = shuffled_rows(cfg.samples, cfg.seed);
  optimizer_config sgd;
  sgd.lr = cfg.lr;
  for (size_t w = 0; w < cfg.workers; ++w) {
    shards_.push_back(shard_rows(order, w, cfg.workers));
    params_.push_back(model_.init(cfg.same_init ? cfg.seed : cfg.seed + w));
    opts_.emplace_back(sgd, model_.num_params());
  }
}

float ddp_sim::drift() const {
  float worst = 0;
  for (size_t k = 0; k < model_.num_params(); ++k) {
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (auto& p : params_) {
      lo = std::min(lo, p[k]);
      hi = std::max(hi, p[k]);
    }
    worst = std::max(worst, hi - lo);
  }
  return worst;
}

const ddp_step_report& ddp_sim::step() {
  size_t n = cfg_.workers, batch = cfg_.batch;
  ddp_step_report r;
  r.step = history_.size() + 1;
  r.start_ms = now_;
  auto flops_ms = [&](size_t params, size_t w) {
    // A layer's forward is 2 flops a parameter a row, its backward twice.
    double slow = w == 0 ? cfg_.straggler : 1.0;
    return 2.0 * static_cast<double>(params * batch) / 1e6 /
           cfg_.mflops_per_ms * slow;
  };
  // Every replica's forward and backward; the time each layer's gradient
  // is done, in the order the backward pass finishes them.
  std::vector<std::vector<float>> grads(
    n, std::vector<float>(model_.num_params()));
  std::vector<std::vector<double>> done(n, std::vector<double>(layers_.size()));
  std::vector<double> backward_end(n);
  double losses = 0;
  for (size_t w = 0; w < n; ++w) {
    auto& shard = shards_[w];
    std::vector<size_t> rows(batch);
    for (auto& row : rows)
      row = shard[static_cast<size_t>(rng_() % shard.size())];
    double t = now_ + flops_ms(model_.num_params(), w);
    r.spans.push_back({w, 0, "forward", -1, now_, t});
    losses += model_.loss_and_gradient(
      params_[w].data(), data_.take(rows), grads[w].data(), [&](size_t l) {
        double end = t + 2 * flops_ms(layers_[l].size(), w);
        long b = 0;
        while (plan_[b].last_layer < l || plan_[b].first_layer > l)
          ++b;
        r.spans.push_back(
          {w, 0, "backward layer " + std::to_string(l), b, t, end});
        done[w][l] = t = end;
      });
    backward_end[w] = t;
  }
  r.loss = static_cast<float>(losses / static_cast<double>(n));
  r.backward_end_ms =
    *std::max_element(backward_end.begin(), backward_end.end());
  // The buckets' all-reduces, one at a time in the plan's order, each once
  // its layers are done on every replica (or the backward pass is, without
  // overlap).
  double comm_free = now_, comm_total = 0;
  for (size_t b = 0; b < plan_.size(); ++b) {
    auto& bucket = plan_[b];
    double ready = 0;
    for (size_t w = 0; w < n; ++w)
      for (size_t l = bucket.first_layer; l <= bucket.last_layer; ++l)
        ready = std::max(ready, cfg_.overlap ? done[w][l] : backward_end[w]);
    auto widest = collective::chunk_of(bucket.params.size(), n, 0).size();
    double took =
      n < 2 ? 0
            : 2.0 * static_cast<double>(n - 1) *
                (cfg_.latency_ms + static_cast<double>(widest * sizeof(float)) /
                                     1e6 / cfg_.mbytes_per_ms);
    double start = std::max(ready, comm_free);
    comm_free = start + took;
    comm_total += took;
    bool skipped = cfg_.skip_a_bucket && b + 1 == plan_.size();
    for (size_t w = 0; w < n; ++w)
      r.spans.push_back({w, 1,
                         (skipped ? "skipped bucket " : "all-reduce bucket ") +
                           std::to_string(b),
                         static_cast<long>(b), start, comm_free});
    if (skipped)
      continue;
    std::vector<std::vector<float>> bufs(n);
    for (size_t w = 0; w < n; ++w)
      bufs[w].assign(grads[w].begin() + bucket.params.begin,
                     grads[w].begin() + bucket.params.end);
    collective::simulate_allreduce(bufs, collective::reduce_op::average,
                                   [](const auto&, const auto&) {});
    for (size_t w = 0; w < n; ++w)
      std::copy(bufs[w].begin(), bufs[w].end(),
                grads[w].begin() + bucket.params.begin);
  }
  for (size_t w = 0; w < n; ++w)
    opts_[w].step(params_[w].data(), grads[w].data(), grads[w].size());
  r.end_ms = std::max(comm_free, r.backward_end_ms);
  r.serial_ms = r.backward_end_ms + comm_total - r.start_ms;
  if (cfg_.rebroadcast_every > 0 && r.step % cfg_.rebroadcast_every == 0) {
    for (size_t w = 1; w < n; ++w)
      params_[w] = params_[0];
    r.rebroadcast = true;
  }
  r.drift = drift();
  now_ = r.end_ms;
  history_.push_back(std::move(r));
  return history_.back();
}

} // namespace lumen::ml::sim
