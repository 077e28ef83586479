#include <algorithm>
#include <chrono>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/trace.hpp"

#include "ps/ps_server_state.hpp"

namespace lumen::ml::ps_detail {

tensor weights_of(const ps_core& core) {
  // No copy: the server's next update writes a copy of its own while
  // this answer is still held (by a message waiting for its connection's
  // writer, too).
  auto w = core.shared_weights();
  if (w->empty())
    return tensor{}; // a view needs numbers to point at
  auto at = reinterpret_cast<const char*>(w->data());
  std::vector<int64_t> shape{static_cast<int64_t>(w->size())};
  return tensor::view(std::move(shape), dtype::float32, at, std::move(w));
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
  std::optional<lumen::sends_at_once> at_once;
  if (st.core->config().answers_at_once)
    at_once.emplace();
  for (auto& deliver : st.waiting)
    deliver(answer);
  st.waiting.clear();
}

/// The recent steps' median duration; none before three steps.
std::optional<clock::duration> recent_median(const server_state& st) {
  if (st.recorded < 3)
    return std::nullopt;
  auto kept = st.step_seconds.size();
  std::vector<float> recent;
  for (size_t i = 0; i < std::min<size_t>(kept, 64); ++i)
    recent.push_back(st.step_seconds[(st.recorded - 1 - i) % kept_steps]);
  std::nth_element(recent.begin(), recent.begin() + recent.size() / 2,
                   recent.end());
  return std::chrono::duration_cast<clock::duration>(
    std::chrono::duration<float>(recent[recent.size() / 2]));
}

/// When a sync step closes with what it has: step_timeout_ms after its
/// first gradient, or by default 20 times the recent steps' median (500
/// ms at least; 10 s until there are steps to go by), so that stragglers
/// are waited for but a worker gone silent is not; or sooner,
/// step_deadline times the median after the step began.
clock::time_point step_due(const server_state& st) {
  using std::chrono::milliseconds;
  auto& cfg = st.core->config();
  auto median = recent_median(st);
  clock::duration limit = std::chrono::seconds{10};
  if (cfg.step_timeout_ms > 0)
    limit = milliseconds{cfg.step_timeout_ms};
  else if (median)
    limit = std::max<clock::duration>(milliseconds{500}, 20 * *median);
  auto due = st.opened + limit;
  if (cfg.step_deadline > 0 && median)
    due =
      std::min(due, st.last_step + std::chrono::duration_cast<clock::duration>(
                                     cfg.step_deadline * *median));
  return due;
}

/// Sync: the open step is to be looked at `due`, unless a timer comes
/// sooner. Only the latest timer set counts.
void set_step_timer(server_pointer self, clock::time_point due) {
  auto& st = self->state;
  if (st.timer_set && st.timer_due <= due)
    return;
  st.timer_set = true;
  st.timer_due = due;
  auto after = std::max(clock::duration::zero(), due - self->clock().now());
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
  if (auto due = step_due(st); self->clock().now() < due) {
    set_step_timer(self, due); // a later step, opened since
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

} // namespace lumen::ml::ps_detail
