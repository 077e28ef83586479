#include "lumen/ml/data_parallel_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <lumen/caf_interop.hpp>

#include "lumen/ml/batch_stream.hpp"

#include "async_lane.hpp"
#include "worker_actor.hpp"

namespace lumen::ml {

namespace detail {

using done_atom = caf::atom_constant<caf::atom("lmwdone")>;

using seconds = std::chrono::duration<double>;

/// One gradient, as the compute thread hands it to the actor.
struct step_result {
  std::vector<compressed> parts; // one per shard of the server
  float loss = 0;
  uint64_t epoch = 0;
  double compute = 0, wait = 0, slow = 0;
  std::string error; // set if the step failed
};

/// The compute thread's own things: only it touches them once spawned.
struct replica {
  worker_config cfg;
  std::unique_ptr<model> net;
  std::unique_ptr<batch_stream> batches;
  std::vector<error_feedback> feedback; // one per shard
  std::mt19937_64 draws;
  std::vector<float> grad;

  /// A gradient at `weights` on the next batch, cut into the ranges of
  /// `shards` shards and compressed, slowed down as configured.
  void step(const tensor& weights, size_t shards, step_result& out) {
    auto start = std::chrono::steady_clock::now();
    if (weights.type() != dtype::float32 || weights.numel() != grad.size())
      throw usage_error("weights " + weights.describe() + " for a " +
                        net->name() + " of " + std::to_string(grad.size()) +
                        " float32 parameters; pull them from the server "
                        "that trains this model");
    auto waited = batches->waited_seconds();
    auto b = batches->next();
    out.wait = batches->waited_seconds() - waited;
    out.epoch = b.epoch;
    out.loss =
      net->loss_and_gradient(weights.data<float>(), b.data, grad.data());
    auto kind = cfg.compression;
    feedback.resize(shards);
    for (size_t k = 0; k < shards; ++k) {
      auto r = shard_range(grad.size(), shards, k);
      auto at = grad.data() + r.begin;
      out.parts.push_back(kind != codec::none && cfg.error_feedback
                            ? feedback[k].encode(at, r.size(), kind)
                            : compress(at, r.size(), kind));
    }
    auto took = seconds{std::chrono::steady_clock::now() - start}.count();
    out.compute = took - out.wait;
    auto factor = cfg.slow.factor;
    if (cfg.slow.chance > 0 &&
        std::uniform_real_distribution<double>{0, 1}(draws) < cfg.slow.chance)
      factor *= cfg.slow.chance_factor;
    if (factor > 1) {
      out.slow = (factor - 1) * took;
      std::this_thread::sleep_for(seconds{out.slow});
    }
  }
};

/// A worker's state. Gradients are computed on its own thread, one after
/// another; the thread tells the worker when one is done, and the worker
/// goes on from its own context, as CAF wants.
struct worker_state {
  std::shared_ptr<replica> rep;
  worker_report report;
  // What to do with each gradient under way, in the order they were asked.
  std::deque<
    std::pair<std::shared_ptr<step_result>, std::function<void(step_result&)>>>
    next;
  // train: the server's shards, their versions, the version to reach,
  // the caller to answer.
  std::vector<parameter_server> shards;
  std::vector<uint64_t> versions;
  // train: the replica, the shards' weights joined, updated by their
  // answers; `own` once no message shares its numbers (changes are added
  // in place).
  tensor held;
  bool own = false;
  std::vector<float> scratch;
  uint64_t until = 0;
  caf::typed_response_promise<worker_report> trained;
  bool training = false;
  // Last: its destructor lets what is queued finish, then joins.
  std::unique_ptr<detail::async_lane> lane =
    std::make_unique<detail::async_lane>();
};

} // namespace detail

namespace {

using namespace detail;

/// Computes a gradient at `weights` on the worker's thread, cut for
/// `shards` shards; `then` gets it in the worker's context.
void compute(worker_pointer self, tensor weights, size_t shards,
             std::function<void(step_result&)> then) {
  auto out = std::make_shared<step_result>();
  self->state.next.emplace_back(out, std::move(then));
  caf::weak_actor_ptr me = self->ctrl();
  auto rep = self->state.rep;
  self->state.lane->post([me, rep, out, weights, shards] {
    try {
      rep->step(weights, shards, *out);
    } catch (const std::exception& e) {
      out->error = e.what();
    }
    if (auto alive = me.lock())
      caf::anon_send(caf::actor_cast<caf::actor>(alive), done_atom::value);
  });
}

void count(worker_report& r, const step_result& s) {
  ++r.steps;
  r.epochs = std::max(r.epochs, s.epoch + 1);
  r.compute_seconds += s.compute;
  r.data_wait_seconds += s.wait;
  r.slow_seconds += s.slow;
  r.loss = s.loss;
}

void finish(worker_pointer self, caf::error err) {
  auto& st = self->state;
  st.training = false;
  if (err)
    st.trained.deliver(std::move(err));
  else
    st.trained.deliver(st.report);
}

/// The shards' answers to a pull or a push, gathered: each shard's
/// version and weights, or the first error.
struct gathered {
  size_t waiting;
  std::vector<uint64_t> versions;
  std::vector<tensor> weights;
  caf::error err;

  explicit gathered(size_t n)
    : waiting(n)
    , versions(n)
    , weights(n) {}
};

/// Sends `ask(shard)` to every shard at once; `then` gets all the answers
/// once the last is in (never before: a shard holding a sync push must
/// close its step before the worker moves on).
template <class Ask>
void gather(worker_pointer self, Ask ask, std::function<void(gathered&)> then) {
  auto g = std::make_shared<gathered>(self->state.shards.size());
  for (size_t k = 0; k < g->versions.size(); ++k)
    ask(k).then(
      [g, k, then](uint64_t v, tensor w) {
        g->versions[k] = v;
        g->weights[k] = std::move(w);
        if (--g->waiting == 0)
          then(*g);
      },
      [g, then](caf::error& err) {
        if (!g->err)
          g->err = std::move(err);
        if (--g->waiting == 0)
          then(*g);
      });
}

void train_from(worker_pointer self, tensor weights);

/// On from the shards' pulled weights, joined into the replica.
void go_on(worker_pointer self, gathered& g) {
  auto& st = self->state;
  st.versions = g.versions;
  try {
    st.held = join_shards(g.weights, st.rep->net->num_params());
  } catch (const error& e) {
    finish(self,
           caf::make_error(caf::sec::runtime_error, std::string{e.what()}));
    return;
  }
  st.own = st.shards.size() > 1; // joined into a tensor of its own
  st.report.bytes_received += st.held.nbytes();
  train_from(self, st.held);
}

/// Fresh weights from every shard, then on.
void pull_and_go(worker_pointer self) {
  gather(
    self,
    [self](size_t k) {
      return lumen::request(self, self->state.shards[k], caf::infinite,
                            pull_atom::value);
    },
    [self](gathered& g) {
      if (g.err) {
        finish(self, std::move(g.err));
        return;
      }
      go_on(self, g);
    });
}

/// A refusal the worker goes on from: its gradient came too late.
bool behind(const caf::error& err) {
  auto code = static_cast<ps_refusal>(err.code());
  return err.category() == ps_error_category &&
         (code == ps_refusal::late || code == ps_refusal::too_stale);
}

/// Shard `k`'s answer to a push, into the replica. False for a change made
/// for a replica of another version (a pull puts that right).
bool take_update(worker_state& st, size_t k, const weights_update& u) {
  auto n = st.rep->net->num_params();
  st.report.bytes_received += u.payload_bytes();
  if (u.full && st.shards.size() == 1) {
    st.held = join_shards({u.weights}, n); // checked, and shared as it came
    st.own = false;
  } else {
    if (!st.own) {
      st.held = st.held.clone();
      st.own = true;
    }
    auto r = shard_range(n, st.shards.size(), k);
    if (!apply_update(u, st.held.data<float>() + r.begin, r.size(),
                      st.versions[k], st.scratch))
      return false;
  }
  st.versions[k] = u.version;
  return true;
}

/// Pushes every shard its part at once; once the last answer is in, goes
/// on from the updated replica (or pulls afresh after a refusal the worker
/// goes on from, or a change for another replica).
void push_and_go(worker_pointer self,
                 std::shared_ptr<std::vector<compressed>> parts) {
  struct answers {
    size_t waiting = 0;
    bool stale = false;
    caf::error err;
  };
  auto& st = self->state;
  auto a = std::make_shared<answers>();
  a->waiting = st.shards.size();
  auto one_in = [self, a] {
    if (--a->waiting > 0)
      return;
    auto& st = self->state;
    if (a->err && !behind(a->err)) {
      finish(self, std::move(a->err));
    } else if (a->err || a->stale) {
      st.report.refused += a->err ? 1 : 0;
      pull_and_go(self);
    } else {
      ++st.report.pushed;
      train_from(self, st.held);
    }
  };
  for (size_t k = 0; k < st.shards.size(); ++k)
    lumen::request(self, st.shards[k], caf::infinite, push_update_atom::value,
                   st.versions[k], (*parts)[k])
      .then(
        [self, a, k, one_in](weights_update& u) {
          try {
            a->stale |= !take_update(self->state, k, u);
          } catch (const error& e) {
            if (!a->err)
              a->err =
                caf::make_error(caf::sec::runtime_error, std::string{e.what()});
          }
          one_in();
        },
        [a, one_in](caf::error& err) {
          if (!a->err)
            a->err = std::move(err);
          one_in();
        });
}

/// One train step from the shards' versions: compute, push every part,
/// repeat until the server reaches `until`.
void train_from(worker_pointer self, tensor weights) {
  auto& st = self->state;
  if (!st.training)
    return;
  st.report.version = *std::min_element(st.versions.begin(), st.versions.end());
  if (st.report.version >= st.until) {
    finish(self, caf::none);
    return;
  }
  compute(self, std::move(weights), st.shards.size(), [self](step_result& s) {
    auto& st = self->state;
    if (!s.error.empty()) {
      finish(self, caf::make_error(caf::sec::runtime_error, s.error));
      return;
    }
    count(st.report, s);
    for (auto& part : s.parts)
      st.report.bytes_sent += part.bytes.size();
    push_and_go(self,
                std::make_shared<std::vector<compressed>>(std::move(s.parts)));
  });
}

/// Starts a train against `shards` (one server: one shard).
caf::typed_response_promise<worker_report>
start_training(worker_pointer self, std::vector<parameter_server> shards,
               uint64_t until) {
  auto& st = self->state;
  auto rp = self->make_response_promise<worker_report>();
  if (st.training) {
    rp.deliver(caf::make_error(
      caf::sec::runtime_error,
      std::string{"this worker is training already; wait for its report, "
                  "or spawn another worker"}));
    return rp;
  }
  if (shards.empty() ||
      std::any_of(shards.begin(), shards.end(),
                  [](const parameter_server& ps) { return !ps; })) {
    rp.deliver(caf::make_error(caf::sec::invalid_argument,
                               std::string{"train: no parameter server"}));
    return rp;
  }
  st.shards = std::move(shards);
  st.versions.assign(st.shards.size(), 0);
  st.until = until;
  st.trained = rp;
  st.training = true;
  for (auto& ps : st.shards)
    self->monitor(ps);
  pull_and_go(self);
  return rp;
}

} // namespace

namespace detail {

data_parallel_worker::behavior_type worker(worker_pointer self,
                                           worker_config cfg, dataset shard) {
  auto rep = std::make_shared<replica>();
  rep->net = make_model(cfg.model);
  rep->grad.resize(rep->net->num_params());
  rep->batches = std::make_unique<batch_stream>(
    std::move(shard), cfg.batch_size, cfg.seed, cfg.prefetch);
  rep->draws.seed(cfg.seed ^ 0x9e3779b97f4a7c15ull);
  rep->cfg = std::move(cfg);
  self->state.rep = rep;
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& shards = self->state.shards;
    if (self->state.training && std::any_of(shards.begin(), shards.end(),
                                            [&](const parameter_server& ps) {
                                              return ps.address() == msg.source;
                                            }))
      finish(self, caf::make_error(
                     caf::sec::runtime_error,
                     std::string{"the parameter server ended while this "
                                 "worker trained against it"}));
  });
  // The compute thread's "done" is no message of the interface: it comes
  // to the handler of everything else.
  self->set_default_handler(
    [self](caf::scheduled_actor*,
           caf::message_view& xs) -> caf::result<caf::message> {
      auto& st = self->state;
      if (!xs.content().match_elements<done_atom>() || st.next.empty())
        return caf::sec::unexpected_message;
      auto [out, then] = std::move(st.next.front());
      st.next.pop_front();
      then(*out);
      return caf::message{};
    });
  return {
    [=](compute_gradient_atom, tensor weights) {
      auto rp = self->make_response_promise<compressed>();
      compute(self, std::move(weights), 1, [self, rp](step_result& s) mutable {
        if (!s.error.empty()) {
          rp.deliver(caf::make_error(caf::sec::runtime_error, s.error));
          return;
        }
        count(self->state.report, s);
        rp.deliver(std::move(s.parts[0]));
      });
      return rp;
    },
    [=](train_atom, parameter_server ps, uint64_t until) {
      return start_training(self, {std::move(ps)}, until);
    },
    [=](train_atom, std::vector<parameter_server> shards, uint64_t until) {
      return start_training(self, std::move(shards), until);
    },
    [=](worker_stats_atom) { return self->state.report; },
  };
}

} // namespace detail

// Both here, where the worker's state is complete.
LUMEN_TYPED_ACTOR(data_parallel_worker_name, detail::worker);
LUMEN_TYPED_ACTOR(detail::node_shard_worker_name, detail::node_worker);
LUMEN_MESSAGE_TYPE(worker_config, "lumen::ml::worker_config");
LUMEN_MESSAGE_TYPE(worker_report, "lumen::ml::worker_report");
LUMEN_MESSAGE_TYPE(dataset, "lumen::ml::dataset");

data_parallel_worker spawn_worker(const worker_config& cfg,
                                  const dataset& shard,
                                  const std::string& node_id) {
  // What cannot work fails here, with the problem named, not on the node.
  auto net = make_model(cfg.model);
  if (shard.size() == 0)
    throw usage_error("spawn_worker: an empty shard; give each worker at "
                      "least one row (fewer workers, or more data)");
  net->loss(net->init(0).data(), shard.take({0}));
  return lumen::spawn_on<data_parallel_worker>(
    node_id, data_parallel_worker_name, cfg, shard);
}

namespace detail {

bool data_parallel_worker_registered() {
  return true;
}

} // namespace detail

} // namespace lumen::ml
