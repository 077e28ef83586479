#include <algorithm>
#include <cmath>

#include <lumen/errors.hpp>

#include "lumen/ml/sim.hpp"

// ml_scratch01/02's parameter server and workers in virtual time (see
// sim.hpp).

namespace lumen::ml::sim {

const char* to_string(worker_state s) noexcept {
  switch (s) {
    case worker_state::computing:
      return "computing";
    case worker_state::pushing:
      return "pushing";
    case worker_state::waiting:
      return "waiting";
  }
  return "unknown";
}

namespace {

ps_config server_config(const ps_sim_config& cfg) {
  ps_config c;
  c.mode = cfg.mode;
  c.workers = cfg.workers;
  c.backup = cfg.backup;
  c.optimizer.lr = cfg.lr;
  c.clip_norm = cfg.clip_norm;
  c.staleness_lr = cfg.staleness_lr;
  return c;
}

linear_problem checked_problem(const ps_sim_config& cfg) {
  if (cfg.workers == 0 || cfg.workers > 64)
    throw usage_error("a simulation of " + std::to_string(cfg.workers) +
                      " workers; give 1 to 64");
  if (cfg.dim == 0 || cfg.samples < cfg.workers || cfg.batch == 0)
    throw usage_error("a data set needs a dimension, a batch of 1 or more "
                      "and a sample for every worker at least");
  if (!(cfg.straggler >= 1) || !(cfg.compute_ms > 0) || !(cfg.jitter >= 0) ||
      !(cfg.jitter < 1) || !(cfg.network_ms >= 0))
    throw usage_error("times: a straggler factor of 1 or more, a positive "
                      "compute time, a jitter in [0, 1) and a network time "
                      "of 0 or more");
  return make_linear_regression(cfg.samples, cfg.dim, cfg.seed, 0.1f);
}

} // namespace

ps_sim::ps_sim(const ps_sim_config& cfg)
  : cfg_(cfg)
  , clock_(cfg.seed)
  , problem_(checked_problem(cfg))
  , model_(cfg.dim)
  , core_(server_config(cfg), model_.init(cfg.seed))
  , views_(cfg.workers)
  , feedback_(cfg.workers)
  , since_(cfg.workers, 0.0) {
  auto order = shuffled_rows(cfg.samples, cfg.seed);
  for (size_t w = 0; w < cfg.workers; ++w)
    shards_.push_back(shard_rows(order, w, cfg.workers));
  initial_loss_ = model_.loss(core_.weights().data(), problem_.data);
  losses_.push_back({0, 0, initial_loss_});
  for (size_t w = 0; w < cfg.workers; ++w)
    start_compute(w, core_.version(), core_.weights());
  last_event_ = "every worker pulled version 0 and computes a gradient";
}

bool ps_sim::step() {
  return clock_.run_next();
}

void ps_sim::run_to(uint64_t version, size_t max_events) {
  for (size_t i = 0; i < max_events && core_.version() < version; ++i)
    if (!step())
      return;
}

float ps_sim::weight_error() const {
  double sum = 0;
  auto& w = core_.weights();
  for (size_t i = 0; i < cfg_.dim; ++i)
    sum += std::pow(w[i] - problem_.weights[i], 2);
  sum += std::pow(w[cfg_.dim] - problem_.bias, 2);
  return static_cast<float>(std::sqrt(sum));
}

bool ps_sim::diverged() const noexcept {
  auto last = losses_.back().loss;
  return !std::isfinite(last) || last > 100 * initial_loss_;
}

void ps_sim::enter(size_t w, worker_state next, double until_ms) {
  auto& view = views_[w];
  if (clock_.now() > since_[w]) {
    segments_.push_back({w, view.state, since_[w], clock_.now(), view.version});
    if (segments_.size() > kept_segments)
      segments_.pop_front();
  }
  since_[w] = clock_.now();
  view.state = next;
  view.busy_until_ms = until_ms;
}

void ps_sim::start_compute(size_t w, uint64_t version,
                           std::vector<float> weights) {
  double slow = w == 0 ? cfg_.straggler : 1.0;
  double took =
    cfg_.compute_ms * slow * (1 + cfg_.jitter * (2 * clock_.uniform() - 1));
  enter(w, worker_state::computing, clock_.now() + took);
  views_[w].version = version;
  // The batch is drawn now, so that the draws do not depend on the order
  // in which events of one time run.
  auto& shard = shards_[w];
  std::vector<size_t> rows(std::min(cfg_.batch, shard.size()));
  for (auto& r : rows)
    r = shard[static_cast<size_t>(clock_.uniform() *
                                  static_cast<double>(shard.size()))];
  clock_.after(took, [this, w, version, weights = std::move(weights),
                      rows = std::move(rows)] {
    std::vector<float> g(model_.num_params());
    model_.loss_and_gradient(weights.data(), problem_.data.take(rows),
                             g.data());
    double norm = 0;
    for (float x : g)
      norm += double{x} * x;
    auto& view = views_[w];
    view.grad_norm = static_cast<float>(std::sqrt(norm));
    if (cfg_.compression != codec::none && std::isfinite(norm)) {
      auto wire = feedback_[w].encode(g.data(), g.size(), cfg_.compression);
      decompress(wire, g.data(), g.size());
    }
    enter(w, worker_state::pushing, clock_.now() + cfg_.network_ms);
    ++view.pushes;
    last_event_ = "worker " + std::to_string(w) +
                  " pushes a gradient of version " + std::to_string(version);
    clock_.after(cfg_.network_ms, [this, w, version, g = std::move(g)] {
      arrive(w, version, g);
    });
  });
}

void ps_sim::arrive(size_t w, uint64_t version, std::vector<float> grad) {
  auto out = core_.push(version, grad.data(), grad.size());
  auto& view = views_[w];
  view.last_staleness = out.staleness;
  auto who = "worker " + std::to_string(w) + "'s gradient of version " +
             std::to_string(version);
  if (out.refused != ps_refusal::none) {
    ++view.dropped;
    last_event_ = who + " refused (" + to_string(out.refused) + ")";
    answer(w);
    return;
  }
  if (cfg_.mode == ps_mode::async) {
    losses_.push_back({clock_.now(), core_.version(),
                       model_.loss(core_.weights().data(), problem_.data)});
    last_event_ = who + " applied at staleness " +
                  std::to_string(out.staleness) + ": version " +
                  std::to_string(core_.version());
    answer(w);
    return;
  }
  waiting_.push_back(w);
  enter(w, worker_state::waiting, clock_.now());
  if (!out.closed_step) {
    last_event_ = who + " in; the step waits for " +
                  std::to_string(core_.quorum() - core_.pending()) + " more";
    return;
  }
  losses_.push_back({clock_.now(), core_.version(),
                     model_.loss(core_.weights().data(), problem_.data)});
  last_event_ = who + " closes the step: version " +
                std::to_string(core_.version()) + " goes to " +
                std::to_string(waiting_.size()) + " workers";
  for (auto x : waiting_)
    answer(x);
  waiting_.clear();
}

void ps_sim::answer(size_t w) {
  if (views_[w].state != worker_state::waiting)
    enter(w, worker_state::waiting, clock_.now() + cfg_.network_ms);
  views_[w].busy_until_ms = clock_.now() + cfg_.network_ms;
  clock_.after(cfg_.network_ms,
               [this, w, version = core_.version(), weights = core_.weights()] {
                 start_compute(w, version, weights);
               });
}

} // namespace lumen::ml::sim
