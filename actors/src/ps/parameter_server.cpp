#include "lumen/ml/parameter_server.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_clock.hpp>
#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "lumen/object_store.hpp"
#include "lumen/trace.hpp"

#include "ps/ps_server_state.hpp"

namespace lumen::ml {

namespace {

using namespace ps_detail;

caf::error refusal(ps_refusal r, const std::string& why) {
  return caf::error{static_cast<uint8_t>(r), ps_error_category,
                    caf::make_message(std::string{to_string(r)} + ": " + why)};
}

/// Takes `n` gradient values at `g` of `version`; `deliver` answers the
/// caller once the weights are theirs to have (sync: when the step
/// closes).
template <class Promise, class Deliver>
Promise take(server_pointer self, uint64_t version, const float* g, size_t n,
             Promise rp, Deliver deliver) {
  auto& st = self->state;
  auto& cfg = st.core->config();
  // The promise took the sender from the message.
  caf::response_promise untyped = rp;
  auto& sender = untyped.source();
  auto out = st.core->push(version, g, n);
  if (out.refused != ps_refusal::none) {
    if (sender && out.refused == ps_refusal::late)
      readmit(st, caf::actor_cast<caf::actor_addr>(sender)); // soon on time
    rp.deliver(refusal(out.refused, out.why));
    return rp;
  }
  st.waiting.push_back(
    [rp, deliver](step_answer& a) mutable { deliver(rp, a); });
  if (cfg.mode == ps_mode::sync && sender)
    note_pusher(self, sender);
  if (cfg.mode == ps_mode::async || out.closed_step) {
    answer_step(self);
    return rp;
  }
  if (st.core->pending() == 1) {
    st.opened = self->clock().now();
    set_step_timer(self, step_due(st));
  }
  return rp;
}

/// A refusal before the rules saw the gradient, counted with theirs.
template <class Promise>
Promise refuse(server_pointer self, Promise rp, ps_refusal r,
               const std::string& why) {
  auto out = self->state.core->reject(r, why);
  rp.deliver(refusal(out.refused, out.why));
  return rp;
}

/// A float32 tensor's values; anything else is refused as the wrong size.
template <class Promise, class Deliver>
Promise take(server_pointer self, uint64_t version, const tensor& grads,
             Promise rp, Deliver deliver) {
  if (grads.type() != dtype::float32)
    return refuse(self, rp, ps_refusal::wrong_size,
                  "a float32 gradient is needed, not " +
                    std::string{to_string(grads.type())});
  return take(self, version, grads.data<float>(), grads.numel(), rp, deliver);
}

/// A compressed gradient, decompressed; a damaged one is refused.
template <class Promise, class Deliver>
Promise take(server_pointer self, uint64_t version, const compressed& grads,
             Promise rp, Deliver deliver) {
  auto& st = self->state;
  auto n = st.core->weights().size();
  if (grads.numel != n)
    return refuse(self, rp, ps_refusal::wrong_size,
                  "a gradient of " + std::to_string(grads.numel) +
                    " values for " + std::to_string(n) +
                    " parameters; compute it with the server's model");
  st.decoded.resize(n);
  try {
    decompress(grads, st.decoded.data(), n);
  } catch (const usage_error& e) {
    return refuse(self, rp, ps_refusal::wrong_size, e.what());
  }
  return take(self, version, st.decoded.data(), n, rp, deliver);
}

template <class Grads>
caf::typed_response_promise<tensor> apply(server_pointer self,
                                          const Grads& grads) {
  return take(self, self->state.core->version(), grads,
              self->make_response_promise<tensor>(),
              [](auto& rp, step_answer& a) { rp.deliver(a.weights()); });
}

template <class Grads>
caf::typed_response_promise<uint64_t, tensor>
push(server_pointer self, uint64_t version, const Grads& grads) {
  return take(
    self, version, grads, self->make_response_promise<uint64_t, tensor>(),
    [](auto& rp, step_answer& a) { rp.deliver(a.version(), a.weights()); });
}

caf::typed_response_promise<weights_update>
push_update(server_pointer self, uint64_t version, const compressed& grads) {
  return take(self, version, grads,
              self->make_response_promise<weights_update>(),
              [](auto& rp, step_answer& a) { rp.deliver(a.update()); });
}

ps_report report_of(const server_state& st) {
  auto& core = *st.core;
  ps_report r;
  r.version = core.version();
  r.applied = core.stats().applied;
  r.steps = core.stats().steps;
  r.refused.assign(static_cast<size_t>(ps_refusal::late), 0);
  for (auto& [why, n] : core.stats().refused)
    r.refused[static_cast<size_t>(why) - 1] = n;
  for (auto& [staleness, n] : core.stats().staleness) {
    if (r.staleness.size() <= staleness)
      r.staleness.resize(staleness + 1, 0);
    r.staleness[staleness] = n;
  }
  r.timed_out = core.stats().timed_out;
  r.workers_lost = core.stats().workers_lost;
  r.drift = st.caster->drift();
  r.drift_max = st.caster->max_drift();
  // Oldest first.
  auto kept = st.step_seconds.size();
  for (size_t i = 0; i < kept; ++i)
    r.step_seconds.push_back(
      st.step_seconds[(st.recorded - kept + i) % kept_steps]);
  return r;
}

/// A checkpoint's save or restore, its failure an error reply naming why.
template <class F>
caf::result<uint64_t> on_file(F f) {
  try {
    return f();
  } catch (const error& e) {
    return caf::make_error(caf::sec::runtime_error, std::string{e.what()});
  }
}

parameter_server::behavior_type server(server_pointer self, ps_config cfg,
                                       tensor initial) {
  self->state.core = std::make_unique<ps_core>(cfg, initial.to_vector<float>());
  self->state.caster =
    std::make_unique<broadcaster>(cfg.broadcast, cfg.rebroadcast_every);
  self->state.last_step = self->clock().now();
  self->set_down_handler(
    [self](const caf::down_msg& msg) { on_pusher_down(self, msg.source); });
  // The step timer is no message of the interface: it comes to the
  // handler of everything else.
  self->set_default_handler(
    [self](caf::scheduled_actor*,
           caf::message_view& xs) -> caf::result<caf::message> {
      auto& msg = xs.content();
      if (msg.match_elements<step_timer_atom, uint64_t>()) {
        on_step_timer(self, msg.get_as<uint64_t>(1));
        return caf::message{};
      }
      return caf::sec::unexpected_message;
    });
  return {
    [=](start_from_atom, const tensor& weights) -> caf::result<uint64_t> {
      if (self->state.core->version() > 0 || !self->state.waiting.empty())
        return caf::make_error(caf::sec::runtime_error,
                               "the server has taken gradients already: its "
                               "weights to start from are set at its spawn");
      try {
        self->state.core =
          std::make_unique<ps_core>(cfg, weights.to_vector<float>());
      } catch (const error& e) {
        return caf::make_error(caf::sec::runtime_error, std::string{e.what()});
      }
      return self->state.core->version();
    },
    [=](get_weights_atom) { return weights_of(*self->state.core); },
    [=](pull_atom) {
      return std::make_tuple(self->state.core->version(),
                             weights_of(*self->state.core));
    },
    [=](apply_gradients_atom, const tensor& grads) {
      return apply(self, grads);
    },
    [=](apply_gradients_atom, const compressed& grads) {
      return apply(self, grads);
    },
    [=](push_atom, uint64_t version, const tensor& grads) {
      return push(self, version, grads);
    },
    [=](push_atom, uint64_t version, const compressed& grads) {
      return push(self, version, grads);
    },
    [=](push_update_atom, uint64_t version, const compressed& grads) {
      return push_update(self, version, grads);
    },
    [=](ps_stats_atom) { return report_of(self->state); },
    [=](checkpoint_atom, const std::string& path) -> caf::result<uint64_t> {
      return on_file([&] {
        save_checkpoint(*self->state.core, path);
        return self->state.core->version();
      });
    },
    [=](restore_atom, const std::string& path) -> caf::result<uint64_t> {
      return on_file([&] {
        auto& st = self->state;
        restore_checkpoint(*st.core, path);
        // The workers' replicas are of other weights: the next goes in full.
        auto& cfg = st.core->config();
        st.caster =
          std::make_unique<broadcaster>(cfg.broadcast, cfg.rebroadcast_every);
        return st.core->version();
      });
    },
  };
}

} // namespace

LUMEN_TYPED_ACTOR(parameter_server_name, server);
LUMEN_MESSAGE_TYPE(ps_config, "lumen::ml::ps_config");
LUMEN_MESSAGE_TYPE(ps_report, "lumen::ml::ps_report");
LUMEN_MESSAGE_TYPE(compressed, "lumen::ml::compressed");
LUMEN_MESSAGE_TYPE(weights_update, "lumen::ml::weights_update");

parameter_server spawn_parameter_server(const ps_config& cfg,
                                        const std::vector<float>& initial,
                                        const std::string& node_id) {
  ps_core check{cfg, initial}; // a config that cannot work fails here
  // A spawn travels as a CAF request, which a large model's weights would
  // hold past its time limit (and the head's heartbeat with it): those go
  // after it, on the data plane.
  constexpr size_t in_the_spawn = size_t{1} << 20;
  if (initial.size() <= in_the_spawn)
    return lumen::spawn_on<parameter_server>(node_id, parameter_server_name,
                                             cfg, tensor::from(initial));
  auto ps = lumen::spawn_on<parameter_server>(
    node_id, parameter_server_name, cfg,
    tensor::from(std::vector<float>(initial.begin(), initial.begin() + 1)));
  lumen::get(lumen::call(ps, start_from_atom::value, tensor::from(initial)));
  return ps;
}

// "parameter server on node-1 refused a gradient: wrong_size: ...".
const bool refusals_described =
  describe_errors(ps_error_category, "parameter server",
                  [](uint8_t code, const caf::message& context) {
                    auto why =
                      context.match_elements<std::string>()
                        ? context.get_as<std::string>(0)
                        : std::string{to_string(static_cast<ps_refusal>(code))};
                    return "refused a gradient: " + why;
                  });

std::optional<ps_refusal> refusal_of(const typed_actor_error& e) {
  if (e.cause().category() != ps_error_category)
    return std::nullopt;
  return static_cast<ps_refusal>(e.cause().code());
}

namespace detail {

bool parameter_server_registered() {
  return true;
}

} // namespace detail

} // namespace lumen::ml
