#include "lumen/ml/parameter_server.hpp"

#include <functional>
#include <utility>

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

namespace lumen::ml {

namespace {

/// A server's state: the rules, and the open sync step's callers.
struct server_state {
  std::unique_ptr<ps_core> core;
  // Answer each with the step's new version and weights.
  std::vector<std::function<void(uint64_t, const tensor&)>> waiting;
};

using server_pointer = parameter_server::stateful_pointer<server_state>;

tensor weights_of(const ps_core& core) {
  return tensor::from(core.weights());
}

caf::error refusal_error(const push_outcome& out) {
  return caf::error{
    static_cast<uint8_t>(out.refused), ps_error_category,
    caf::make_message(std::string{to_string(out.refused)} + ": " + out.why)};
}

/// Takes `grads` of `version`; `answer` gets the weights once they are
/// the caller's to have (sync: when the step closes).
template <class Promise, class Deliver>
Promise take(server_pointer self, uint64_t version, const tensor& grads,
             Promise rp, Deliver deliver) {
  auto& st = self->state;
  if (grads.type() != dtype::float32) {
    rp.deliver(caf::error{static_cast<uint8_t>(ps_refusal::wrong_size),
                          ps_error_category,
                          caf::make_message(std::string{
                            "wrong_size: a float32 gradient is needed, not " +
                            std::string{to_string(grads.type())}})});
    return rp;
  }
  auto out = st.core->push(version, grads.data<float>(), grads.numel());
  if (out.refused != ps_refusal::none) {
    rp.deliver(refusal_error(out));
    return rp;
  }
  st.waiting.push_back(
    [rp, deliver](uint64_t v, const tensor& w) mutable { deliver(rp, v, w); });
  if (st.core->config().mode == ps_mode::async || out.closed_step) {
    auto w = weights_of(*st.core);
    for (auto& answer : st.waiting)
      answer(st.core->version(), w);
    st.waiting.clear();
  }
  return rp;
}

parameter_server::behavior_type server(server_pointer self, ps_config cfg,
                                       tensor initial) {
  self->state.core = std::make_unique<ps_core>(cfg, initial.to_vector<float>());
  return {
    [=](get_weights_atom) { return weights_of(*self->state.core); },
    [=](pull_atom) {
      return std::make_tuple(self->state.core->version(),
                             weights_of(*self->state.core));
    },
    [=](apply_gradients_atom, const tensor& grads) {
      return take(self, self->state.core->version(), grads,
                  self->make_response_promise<tensor>(),
                  [](auto& rp, uint64_t, const tensor& w) { rp.deliver(w); });
    },
    [=](push_atom, uint64_t version, const tensor& grads) {
      return take(
        self, version, grads, self->make_response_promise<uint64_t, tensor>(),
        [](auto& rp, uint64_t v, const tensor& w) { rp.deliver(v, w); });
    },
    [=](ps_stats_atom) {
      auto& core = *self->state.core;
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
      return r;
    },
  };
}

} // namespace

LUMEN_TYPED_ACTOR(parameter_server_name, server);
LUMEN_MESSAGE_TYPE(ps_config, "lumen::ml::ps_config");
LUMEN_MESSAGE_TYPE(ps_report, "lumen::ml::ps_report");

parameter_server spawn_parameter_server(const ps_config& cfg,
                                        const std::vector<float>& initial,
                                        const std::string& node_id) {
  ps_core check{cfg, initial}; // a config that cannot work fails here
  return lumen::spawn_on<parameter_server>(node_id, parameter_server_name, cfg,
                                           tensor::from(initial));
}

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
