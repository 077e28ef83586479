#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>

#include <lumen/caf_interop.hpp>

#include "workers/worker_state.hpp"

namespace lumen::ml::detail {

void finish(worker_pointer self, caf::error err) {
  auto& st = self->state;
  st.training = false;
  if (err)
    st.trained.deliver(std::move(err));
  else
    st.trained.deliver(st.report);
}

namespace {

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
  // Every part on its way at once: no shard's busy link holds up the rest.
  lumen::sends_at_once at_once;
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

} // namespace

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

} // namespace lumen::ml::detail
