#include "lumen/ml/data_parallel_worker.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <random>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/sim.hpp>
#include <lumen/time.hpp>

#include "workers/worker_state.hpp"

namespace lumen::ml {

namespace detail {

double simulated_step_seconds(const model& net, uint64_t batch) {
  constexpr double flops_per_second = 1e10;
  return 6.0 * static_cast<double>(net.num_params()) *
         static_cast<double>(batch) / flops_per_second;
}

void replica::step(const tensor& weights, size_t shards, step_result& out) {
  auto start = lumen::now();
  if (weights.type() != dtype::float32 || weights.numel() != grad.size())
    throw usage_error("weights " + weights.describe() + " for a " +
                      net->name() + " of " + std::to_string(grad.size()) +
                      " float32 parameters; pull them from the server "
                      "that trains this model");
  auto waited = batches->waited_seconds();
  auto b = batches->next();
  out.wait = batches->waited_seconds() - waited;
  out.epoch = b.epoch;
  out.loss = net->loss_and_gradient(weights.data<float>(), b.data, grad.data());
  auto kind = cfg.compression;
  feedback.resize(shards);
  for (size_t k = 0; k < shards; ++k) {
    auto r = shard_range(grad.size(), shards, k);
    auto at = grad.data() + r.begin;
    out.parts.push_back(kind != codec::none && cfg.error_feedback
                          ? feedback[k].encode(at, r.size(), kind)
                          : compress(at, r.size(), kind));
  }
  // A simulated run's compute costs the virtual time its node takes for it.
  if (lumen::sim::active())
    lumen::sim::charge(seconds{simulated_step_seconds(*net, cfg.batch_size)});
  auto took = seconds{lumen::now() - start}.count();
  out.compute = took - out.wait;
  auto factor = cfg.slow.factor;
  if (cfg.slow.chance > 0 &&
      std::uniform_real_distribution<double>{0, 1}(draws) < cfg.slow.chance)
    factor *= cfg.slow.chance_factor;
  if (factor > 1) {
    out.slow = (factor - 1) * took;
    lumen::sleep_for(seconds{out.slow});
  }
}

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
