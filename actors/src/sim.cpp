#include "lumen/ml/sim.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include <lumen/errors.hpp>

namespace lumen::ml::sim {

void scheduler::after(double delay_ms, std::function<void()> f) {
  queue_.push({now_ + std::max(0.0, delay_ms), scheduled_++, std::move(f)});
}

bool scheduler::run_next() {
  if (queue_.empty())
    return false;
  auto e = queue_.top();
  queue_.pop();
  now_ = e.at;
  e.run();
  return true;
}

double scheduler::uniform() noexcept {
  return static_cast<double>(rng_() >> 11) / 9007199254740992.0;
}

// ---- the ring ----------------------------------------------------------

namespace {

using collective::reduce_op;
using collective::ring_phase;

/// The ranks whose input a value holds: the ring's own reductions run on
/// it (`+=` is the union), so the colours come from the schedule itself.
struct holder_set {
  uint64_t ranks = 0;

  holder_set() = default;
  explicit holder_set(size_t) {} // what `finish` divides by; never used
  holder_set& operator+=(const holder_set& other) {
    ranks |= other.ranks;
    return *this;
  }
  holder_set& operator*=(const holder_set& other) {
    return *this += other;
  }
  friend holder_set operator/(holder_set a, holder_set) {
    return a;
  }
  friend bool operator<(const holder_set& a, const holder_set& b) {
    return a.ranks < b.ranks;
  }
};

} // namespace

float ring_input(uint64_t seed, size_t rank, size_t i) {
  if (seed == 0)
    return static_cast<float>((rank + 1) * 10 + i % 7);
  auto z = derive_seed(seed, rank * 1000003 + i);
  return static_cast<float>(z % 100);
}

ring_run run_ring(const ring_config& cfg) {
  if (cfg.ranks < 2 || cfg.ranks > 64)
    throw usage_error("a ring of " + std::to_string(cfg.ranks) +
                      " ranks; give 2 to 64");
  if (cfg.length == 0)
    throw usage_error("a buffer of 0 elements; give 1 or more");
  if (!(cfg.mbytes_per_ms > 0) || !(cfg.latency_ms >= 0))
    throw usage_error("a link needs a positive bandwidth and a latency of 0 "
                      "or more");
  ring_run run;
  run.config = cfg;
  size_t n = cfg.ranks;
  run.inputs.assign(n, std::vector<float>(cfg.length));
  std::vector<std::vector<holder_set>> who(n,
                                           std::vector<holder_set>(cfg.length));
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < cfg.length; ++i) {
      run.inputs[r][i] = ring_input(cfg.seed, r, i);
      who[r][i].ranks = uint64_t{1} << r;
    }
  run.expected = run.inputs[0];
  for (size_t r = 1; r < n; ++r)
    collective::reduce_into(run.expected.data(), run.inputs[r].data(),
                            cfg.length, cfg.op);
  collective::finish(run.expected.data(), cfg.length, cfg.op, n);

  auto bufs = run.inputs;
  std::vector<size_t> sent(n, 0);
  double time = 0;
  collective::simulate_allreduce(
    bufs, cfg.op, [&](const collective::ring_snapshot& snap, const auto& now) {
      ring_frame f;
      f.phase = snap.phase;
      f.step = snap.step;
      f.ranks = snap.ranks;
      f.buffers = now;
      size_t widest = 0;
      for (size_t r = 0; r < n; ++r) {
        auto c = collective::chunk_of(cfg.length, n, snap.ranks[r].send_chunk);
        sent[r] += c.size() * sizeof(float);
        widest = std::max(widest, c.size() * sizeof(float));
      }
      time +=
        cfg.latency_ms + static_cast<double>(widest) / 1e6 / cfg.mbytes_per_ms;
      f.bytes_sent = sent;
      f.time_ms = time;
      run.frames.push_back(std::move(f));
    });
  // The same schedule over who holds what.
  size_t frame = 0;
  collective::simulate_allreduce(
    who, reduce_op::sum,
    [&](const collective::ring_snapshot&, const auto& now) {
      auto& f = run.frames[frame++];
      f.holders.assign(n, std::vector<uint64_t>(n, 0));
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < n; ++c) {
          auto ch = collective::chunk_of(cfg.length, n, c);
          if (ch.size() > 0)
            f.holders[r][c] = now[r][ch.begin].ranks;
        }
    });
  // The averaging of `finish` happens after the last step.
  if (!run.frames.empty())
    run.frames.back().buffers = bufs;

  size_t bytes = cfg.length * sizeof(float);
  run.bound_bytes = 2 * bytes * (n - 1) / n;
  run.naive.root_bytes = (n - 1) * bytes;
  run.naive.other_bytes = bytes;
  run.naive.time_ms =
    2.0 * static_cast<double>(n - 1) *
    (cfg.latency_ms + static_cast<double>(bytes) / 1e6 / cfg.mbytes_per_ms);
  return run;
}

namespace {

std::string join(const std::vector<float>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0)
      out += ", ";
    auto x = v[i];
    out += x == std::floor(x) && std::fabs(x) < 1e9
             ? std::to_string(static_cast<long long>(x))
             : std::to_string(x);
  }
  return out + "]";
}

} // namespace

replay_verdict replay_ring(const std::string& jsonl) {
  replay_verdict v;
  auto fail = [&](size_t step, std::string what) {
    v.matches = false;
    v.first_bad = step;
    v.what = std::move(what);
    return v;
  };
  std::vector<nlohmann::json> lines;
  size_t at = 0;
  while (at < jsonl.size()) {
    auto end = jsonl.find('\n', at);
    if (end == std::string::npos)
      end = jsonl.size();
    auto line = jsonl.substr(at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return fail(lines.size() + 1,
                  "line " + std::to_string(lines.size() + 1) +
                    " is not a JSON object; load the output of `lumen "
                    "exercises run ml_scratch03 --step=json`");
    lines.push_back(std::move(j));
  }
  v.steps = lines.size();
  if (lines.empty())
    return fail(0, "the file holds no steps; load the output of `lumen "
                   "exercises run ml_scratch03 --step=json`");
  auto& first = lines[0];
  if (!first.contains("ranks") || !first["ranks"].is_array() ||
      first["ranks"].empty() || !first["ranks"][0].contains("buffer"))
    return fail(1, "step 1 has no ranks with buffers; is this ml_scratch03's "
                   "--step=json output?");
  ring_config cfg;
  cfg.ranks = first["ranks"].size();
  cfg.length = first["ranks"][0]["buffer"].size();
  try {
    v.reference = run_ring(cfg);
  } catch (const usage_error& e) {
    return fail(1, e.what());
  }
  auto& ref = v.reference.frames;
  for (size_t k = 0; k < lines.size(); ++k) {
    auto& j = lines[k];
    auto step = k + 1;
    auto at_step = "step " + std::to_string(step);
    if (k >= ref.size())
      return fail(step, at_step + ": the reference ends after " +
                          std::to_string(ref.size()) + " steps (2(N-1) for " +
                          std::to_string(cfg.ranks) + " ranks)");
    auto& want = ref[k];
    ring_frame got;
    got.phase = want.phase;
    got.step = want.step;
    auto phase = j.value("phase", std::string{});
    if (phase != collective::to_string(want.phase))
      return fail(step, at_step + " is in phase '" + phase +
                          "', the reference in '" +
                          collective::to_string(want.phase) + "'");
    auto& ranks = j["ranks"];
    if (!ranks.is_array() || ranks.size() != cfg.ranks)
      return fail(step, at_step + " has another number of ranks than step 1");
    for (size_t r = 0; r < cfg.ranks; ++r) {
      auto& x = ranks[r];
      collective::ring_step st;
      st.phase = want.phase;
      st.step = want.step;
      st.send_chunk = x.value("sent_chunk", size_t{0});
      st.recv_chunk = x.value("received_chunk", size_t{0});
      got.ranks.push_back(st);
      std::vector<float> buf;
      if (x.contains("buffer") && x["buffer"].is_array())
        for (auto& e : x["buffer"])
          buf.push_back(e.is_number() ? e.get<float>() : NAN);
      got.buffers.push_back(buf);
    }
    v.recorded.push_back(got);
    for (size_t r = 0; r < cfg.ranks; ++r) {
      auto who = at_step + " (" + phase + "), rank " + std::to_string(r);
      if (got.ranks[r].send_chunk != want.ranks[r].send_chunk)
        return fail(step, who + " sent chunk " +
                            std::to_string(got.ranks[r].send_chunk) +
                            "; the ring sends chunk " +
                            std::to_string(want.ranks[r].send_chunk));
      if (got.ranks[r].recv_chunk != want.ranks[r].recv_chunk)
        return fail(step, who + " received chunk " +
                            std::to_string(got.ranks[r].recv_chunk) +
                            "; the ring delivers chunk " +
                            std::to_string(want.ranks[r].recv_chunk));
      if (got.buffers[r] != want.buffers[r])
        return fail(step, who + " holds " + join(got.buffers[r]) +
                            "; the reference holds " + join(want.buffers[r]));
    }
  }
  if (lines.size() < ref.size())
    return fail(lines.size() + 1,
                "the run stops after " + std::to_string(lines.size()) +
                  " steps; the ring takes " + std::to_string(ref.size()));
  v.matches = true;
  v.what = "every step matches the reference";
  return v;
}

// ---- the parameter server ----------------------------------------------

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
