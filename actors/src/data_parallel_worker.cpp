#include "lumen/ml/data_parallel_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
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

#include "async_lane.hpp"

namespace lumen::ml {

namespace {

using done_atom = caf::atom_constant<caf::atom("lmwdone")>;

using seconds = std::chrono::duration<double>;

/// One gradient, as the compute thread hands it to the actor.
struct step_result {
  compressed grad;
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
  error_feedback feedback;
  std::mt19937_64 draws;
  std::vector<float> grad;

  /// A gradient at `weights` on the next batch, compressed, slowed down
  /// as configured.
  void step(const tensor& weights, step_result& out) {
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
    out.grad = kind != codec::none && cfg.error_feedback
                 ? feedback.encode(grad.data(), grad.size(), kind)
                 : compress(grad.data(), grad.size(), kind);
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
  // train: the server, the version to reach, the caller to answer.
  parameter_server ps;
  uint64_t until = 0;
  caf::typed_response_promise<worker_report> trained;
  bool training = false;
  // Last: its destructor lets what is queued finish, then joins.
  std::unique_ptr<detail::async_lane> lane =
    std::make_unique<detail::async_lane>();
};

using worker_pointer = data_parallel_worker::stateful_pointer<worker_state>;

/// Computes a gradient at `weights` on the worker's thread; `then` gets it
/// in the worker's context.
void compute(worker_pointer self, tensor weights,
             std::function<void(step_result&)> then) {
  auto out = std::make_shared<step_result>();
  self->state.next.emplace_back(out, std::move(then));
  caf::weak_actor_ptr me = self->ctrl();
  auto rep = self->state.rep;
  self->state.lane->post([me, rep, out, weights] {
    try {
      rep->step(weights, *out);
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

void train_from(worker_pointer self, uint64_t version, tensor weights);

/// Fresh weights after a refusal, then on.
void pull_and_go(worker_pointer self) {
  self->request(self->state.ps, caf::infinite, pull_atom::value)
    .then([self](uint64_t v, tensor w) { train_from(self, v, std::move(w)); },
          [self](caf::error& err) { finish(self, std::move(err)); });
}

/// One train step from the server's `version`: compute, push, repeat
/// until the server reaches `until`.
void train_from(worker_pointer self, uint64_t version, tensor weights) {
  auto& st = self->state;
  st.report.version = version;
  if (!st.training)
    return;
  if (version >= st.until) {
    finish(self, caf::none);
    return;
  }
  compute(self, std::move(weights), [self, version](step_result& s) {
    auto& st = self->state;
    if (!s.error.empty()) {
      finish(self, caf::make_error(caf::sec::runtime_error, s.error));
      return;
    }
    count(st.report, s);
    st.report.bytes_sent += s.grad.bytes.size();
    self
      ->request(st.ps, caf::infinite, push_atom::value, version,
                std::move(s.grad))
      .then(
        [self](uint64_t v, tensor w) {
          ++self->state.report.pushed;
          train_from(self, v, std::move(w));
        },
        [self](caf::error& err) {
          auto code = static_cast<ps_refusal>(err.code());
          if (err.category() == ps_error_category &&
              (code == ps_refusal::late || code == ps_refusal::too_stale)) {
            ++self->state.report.refused;
            pull_and_go(self);
          } else {
            finish(self, std::move(err));
          }
        });
  });
}

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
    if (self->state.training && msg.source == self->state.ps.address())
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
      compute(self, std::move(weights), [self, rp](step_result& s) mutable {
        if (!s.error.empty()) {
          rp.deliver(caf::make_error(caf::sec::runtime_error, s.error));
          return;
        }
        count(self->state.report, s);
        rp.deliver(std::move(s.grad));
      });
      return rp;
    },
    [=](train_atom, parameter_server ps,
        uint64_t until) -> caf::typed_response_promise<worker_report> {
      auto& st = self->state;
      auto rp = self->make_response_promise<worker_report>();
      if (st.training) {
        rp.deliver(caf::make_error(
          caf::sec::runtime_error,
          std::string{"this worker is training already; wait for its "
                      "report, or spawn another worker"}));
        return rp;
      }
      if (!ps) {
        rp.deliver(caf::make_error(caf::sec::invalid_argument,
                                   std::string{"train: no parameter server"}));
        return rp;
      }
      st.ps = ps;
      st.until = until;
      st.trained = rp;
      st.training = true;
      self->monitor(ps);
      pull_and_go(self);
      return rp;
    },
    [=](worker_stats_atom) { return self->state.report; },
  };
}

} // namespace

LUMEN_TYPED_ACTOR(data_parallel_worker_name, worker);
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
