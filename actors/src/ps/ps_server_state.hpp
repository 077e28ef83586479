#pragma once

// A parameter server actor's state, and the rules of its sync steps in
// time (parameter_server.cpp takes the gradients; ps_sync_steps.cpp closes
// the steps: answering their callers, timing out a step that waits too
// long, and giving up on pushers that end or go silent).

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/atom.hpp>

#include "lumen/ml/parameter_server.hpp"

namespace lumen::ml::ps_detail {

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

tensor weights_of(const ps_core& core);

/// The step that just closed: its callers get the new weights.
void answer_step(server_pointer self);

/// When the open sync step closes with what it has.
clock::time_point step_due(const server_state& st);

/// Sync: the open step is to be looked at `due`.
void set_step_timer(server_pointer self, clock::time_point due);

/// Sync: a step open too long closes with what it has.
void on_step_timer(server_pointer self, uint64_t id);

/// Sync: a pusher ended; the steps after wait for it no more.
void on_pusher_down(server_pointer self, const caf::actor_addr& who);

/// Sync: a pusher given up on pushed again; it is waited for again.
void readmit(server_state& st, const caf::actor_addr& who);

/// Sync: counts a push from `sender` towards its share.
void note_pusher(server_pointer self, const caf::strong_actor_ptr& sender);

} // namespace lumen::ml::ps_detail
