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

#include "lumen/trace.hpp"

namespace lumen::ml {

namespace {

using step_timer_atom = caf::atom_constant<caf::atom("lmpstime")>;

// The actor's clock: the wall's, or under CAF's test coordinator the
// simulated one, so that tests decide when a step has waited too long.
using clock = caf::actor_clock::clock_type;

/// Recent steps' durations kept for the report.
constexpr size_t kept_steps = 4096;

/// A server's state: the rules, the open sync step's callers, and who
/// pushes (sync: a pusher that ends, or misses a step that waited too
/// long for it, is not waited for again until it pushes again).
struct server_state;

/// What a closed step's callers get, each form made once and only if one
/// of them asks for it.
class step_answer {
public:
  explicit step_answer(server_state& st)
    : st_(st) {}

  uint64_t version() const noexcept;
  const tensor& weights();
  const weights_update& update();

private:
  server_state& st_;
  std::optional<tensor> weights_;
  std::optional<weights_update> update_;
};

struct server_state {
  std::unique_ptr<ps_core> core;
  std::unique_ptr<broadcaster> caster;
  // Answer each with the step's new version and weights.
  std::vector<std::function<void(step_answer&)>> waiting;
  // Sync: gradients by pusher, of the open step and of the last closed
  // one; each pusher's in the last step it was in; and the pushers a
  // timed-out step gave up on.
  using shares = std::map<caf::actor_addr, size_t>;
  shares open_share, last_step_share, known, absent;
  clock::time_point opened;        // the open step's first gradient
  bool timer_set = false;          // a step_timer message is on its way
  clock::time_point timer_due;     // when it comes
  uint64_t timer_id = 0;           // the one that counts
  clock::time_point last_step;     // when the version last went up
  std::vector<float> step_seconds; // a ring of the recent steps' durations
  uint64_t recorded = 0;
  std::vector<float> decoded; // a compressed gradient's values
};

using server_pointer = parameter_server::stateful_pointer<server_state>;

tensor weights_of(const ps_core& core) {
  return tensor::from(core.weights());
}

uint64_t step_answer::version() const noexcept {
  return st_.core->version();
}

const tensor& step_answer::weights() {
  if (!weights_)
    weights_ = weights_of(*st_.core);
  return *weights_;
}

const weights_update& step_answer::update() {
  if (!update_)
    update_ = st_.caster->next(version(), weights());
  return *update_;
}

caf::error refusal(ps_refusal r, const std::string& why) {
  return caf::error{static_cast<uint8_t>(r), ps_error_category,
                    caf::make_message(std::string{to_string(r)} + ": " + why)};
}

/// The step that just closed: its callers get the new weights.
void answer_step(server_pointer self) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto took = std::chrono::duration<float>(now - st.last_step).count();
  st.last_step = now;
  if (st.step_seconds.size() < kept_steps)
    st.step_seconds.push_back(took);
  else
    st.step_seconds[st.recorded % kept_steps] = took;
  ++st.recorded;
  for (auto& [who, n] : st.open_share)
    st.known[who] = n;
  st.last_step_share = std::move(st.open_share);
  st.open_share.clear();
  trace::span span{"ps broadcast", "ps"};
  span.arg("version", static_cast<int64_t>(st.core->version()))
    .arg("callers", static_cast<int64_t>(st.waiting.size()));
  step_answer answer{st};
  for (auto& deliver : st.waiting)
    deliver(answer);
  st.waiting.clear();
}

/// How long a sync step may stay open: step_timeout_ms, or by default
/// 20 times the recent steps' median (500 ms at least; 10 s until there
/// are steps to go by), so that stragglers are waited for but a worker
/// gone silent is not.
clock::duration step_limit(const server_state& st) {
  using std::chrono::milliseconds;
  if (auto fixed = st.core->config().step_timeout_ms; fixed > 0)
    return milliseconds{fixed};
  if (st.recorded < 3)
    return std::chrono::seconds{10};
  auto kept = st.step_seconds.size();
  std::vector<float> recent;
  for (size_t i = 0; i < std::min<size_t>(kept, 64); ++i)
    recent.push_back(st.step_seconds[(st.recorded - 1 - i) % kept_steps]);
  std::nth_element(recent.begin(), recent.begin() + recent.size() / 2,
                   recent.end());
  auto median = std::chrono::duration<float>(recent[recent.size() / 2]);
  return std::max<clock::duration>(
    milliseconds{500},
    std::chrono::duration_cast<clock::duration>(20 * median));
}

/// Sync: the open step is to be looked at `after` from now, unless a
/// timer comes sooner. Only the latest timer set counts.
void set_step_timer(server_pointer self, clock::duration after) {
  auto& st = self->state;
  auto due = self->clock().now() + after;
  if (st.timer_set && st.timer_due <= due)
    return;
  st.timer_set = true;
  st.timer_due = due;
  caf::delayed_anon_send(caf::actor_cast<caf::actor>(self), after,
                         step_timer_atom::value, ++st.timer_id);
}

/// Sync: a step open too long closes with what it has; the last step's
/// pushers missing from it are waited for no more (until they push).
void on_step_timer(server_pointer self, uint64_t id) {
  auto& st = self->state;
  if (id != st.timer_id)
    return; // a later timer replaced it
  st.timer_set = false;
  if (st.core->pending() == 0)
    return;
  auto limit = step_limit(st);
  auto age = self->clock().now() - st.opened;
  if (age < limit) {
    set_step_timer(self, limit - age); // a later step, opened since
    return;
  }
  size_t missing = 0;
  for (auto& [who, n] : st.last_step_share)
    if (!st.open_share.count(who) && !st.absent.count(who)) {
      st.absent[who] = n;
      missing += n;
    }
  if (st.core->close_step())
    answer_step(self);
  st.core->lose_workers(missing);
}

/// Sync: a pusher ended; the steps after wait for it no more.
void on_pusher_down(server_pointer self, const caf::actor_addr& who) {
  auto& st = self->state;
  auto share = st.known.count(who) ? st.known[who] : 0;
  if (share == 0 && st.open_share.count(who))
    share = st.open_share[who];
  st.known.erase(who);
  if (st.absent.erase(who) > 0)
    return; // given up on already
  if (share > 0 && st.core->lose_workers(share))
    answer_step(self);
}

/// Sync: a pusher given up on pushed again; it is waited for again.
void readmit(server_state& st, const caf::actor_addr& who) {
  if (auto i = st.absent.find(who); i != st.absent.end()) {
    st.core->regain_workers(i->second);
    st.absent.erase(i);
  }
}

/// Sync: counts a push from `sender` towards its share (and watches a new
/// pusher).
void note_pusher(server_pointer self, const caf::strong_actor_ptr& sender) {
  auto& st = self->state;
  auto who = caf::actor_cast<caf::actor_addr>(sender);
  readmit(st, who);
  // By its strong pointer: a pusher that ended already is reported down
  // at once (its address would no longer reach it).
  if (!st.known.count(who) && !st.open_share.count(who))
    self->monitor(sender);
  ++st.open_share[who];
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
    set_step_timer(self, step_limit(st));
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
